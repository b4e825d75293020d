// LoadProgress: a redrawn line on a terminal, log lines otherwise (load_progress.h).
#include "model/load_progress.h"

#include <unistd.h>

#include <cstdio>

#include "base/log.h"
#include "base/meminfo.h"

namespace mx {

namespace {

constexpr int64_t kLogQuartersFrom = int64_t{1} << 30;  // plain log lines for loads >= 1 GiB

double Gb(int64_t b) { return static_cast<double>(b) / 1e9; }

}  // namespace

bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

LoadProgress::LoadProgress(std::string label, int64_t total_bytes, int64_t total_tensors,
                           bool terminal)
    : label_(std::move(label)),
      total_bytes_(total_bytes),
      total_tensors_(total_tensors),
      terminal_(terminal),
      start_(std::chrono::steady_clock::now()) {}

void LoadProgress::Add(int64_t bytes) {
  bytes_ += bytes;
  ++tensors_;
  Draw();
}

void LoadProgress::Draw() {
  const int pct = total_bytes_ > 0 ? static_cast<int>(100 * bytes_ / total_bytes_) : 100;
  if (terminal_) {
    if (pct == shown_) return;
    shown_ = pct;
    std::fprintf(stderr, "\rloading %s: %.2f / %.2f GB, %lld / %lld tensors (%d%%)", label_.c_str(),
                 Gb(bytes_), Gb(total_bytes_), static_cast<long long>(tensors_),
                 static_cast<long long>(total_tensors_), pct);
    std::fflush(stderr);
    return;
  }
  const int quarter = pct / 25;
  if (total_bytes_ < kLogQuartersFrom || quarter == shown_ || quarter == 0 || quarter >= 4) return;
  shown_ = quarter;
  MX_LOG_INFO("loading {}: {:.2f} / {:.2f} GB, {} / {} tensors ({}%)", label_, Gb(bytes_),
              Gb(total_bytes_), tensors_, total_tensors_, pct);
}

void LoadProgress::Finish() {
  if (terminal_) std::fprintf(stderr, "\n");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const ResidentMemory m = ProcessResidentMemory();
  MX_LOG_INFO(
      "loaded {}: {} tensors, {:.2f} GB read in {:.1f} s ({:.2f} GB/s); process RSS {:.2f} "
      "GB ({:.2f} GB anonymous)",
      label_, tensors_, Gb(bytes_), s, s > 0 ? Gb(bytes_) / s : 0.0, Gb(m.rss), Gb(m.anon));
}

}  // namespace mx
