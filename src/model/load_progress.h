// What loading the weights shows while it runs. On a terminal (stderr is a tty): one line
// redrawn in place, "loading DIR: 3.21 / 10.04 GB, 120 / 900 tensors (32%)", at most once per
// percent; otherwise plain log lines at each quarter of the bytes for loads of 1 GiB or more.
// Either way one log line at the end says what was read, what the process now holds (VmRSS,
// RssAnon) and how long it took.
// Thread-safety: none (the loading thread owns it).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace mx {

class LoadProgress {
 public:
  // `total_bytes`, `total_tensors`: what the load will read (WeightPlan::file_bytes, the
  // tensors of the checkpoint it reads). `terminal`: redraw one line (StderrIsTerminal()).
  LoadProgress(std::string label, int64_t total_bytes, int64_t total_tensors, bool terminal);
  // One tensor of `bytes` (its scales included) read.
  void Add(int64_t bytes);
  // The closing log line (and the end of the terminal line).
  void Finish();

 private:
  void Draw();

  std::string label_;
  int64_t total_bytes_, total_tensors_;
  bool terminal_;
  int64_t bytes_ = 0, tensors_ = 0;
  int shown_ = -1;  // the last percent drawn (terminal) or quarter logged
  std::chrono::steady_clock::time_point start_;
};

// Whether stderr is a terminal (isatty).
bool StderrIsTerminal();

}  // namespace mx
