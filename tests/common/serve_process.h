// Helpers for end-to-end tests that drive a real `mxserve` binary: reading files, an HTTP GET,
// running an mxserve command, and ServeProcess, one `mxserve serve` on a free loopback port
// (--port 0; the port is read from its "listening on" line) that is healthy before tests run
// and is stopped with SIGTERM; ServedSuite, a gtest fixture with one such server per suite.
// Header-only; link CURL::libcurl and GTest.
#pragma once

#include <curl/curl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mx::e2e {

inline std::string Slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline size_t AppendToString(char* ptr, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(ptr, size * n);
  return size * n;
}

// GET url: the HTTP status (0 when there was no answer) and the body.
inline std::pair<long, std::string> HttpGet(const std::string& url) {
  std::string body;
  CURL* c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, AppendToString);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  long code = 0;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(c);
  return {code, body};
}

struct Cmd {
  int code;
  std::string out;
};

// Runs `bin args`; stdout, then stderr (kept apart in `stderr_file`, appended after stdout).
inline Cmd RunCommand(const std::string& bin, const std::string& args,
                      const std::filesystem::path& stderr_file) {
  const std::string cmd = bin + " " + args + " 2>" + stderr_file.string();
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out + Slurp(stderr_file)};
}

class ServeProcess {
 public:
  // Starts `bin` with `args` (which must include `serve ... --host 127.0.0.1 --port 0`), its
  // output in `log`; waits up to 120 s for /health. On failure error() holds the log.
  void Start(const std::string& bin, const std::vector<std::string>& args,
             const std::filesystem::path& log) {
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      if (f == nullptr || dup2(fileno(stderr), STDOUT_FILENO) < 0) _exit(127);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>("mxserve"));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    const std::string key = "listening on http://127.0.0.1:";
    for (int i = 0; i < 1200; ++i) {  // 120 s
      if (url_.empty()) {
        const std::string text = Slurp(log);
        const size_t at = text.find(key);
        const int port = at == std::string::npos ? 0 : std::atoi(text.c_str() + at + key.size());
        if (port > 0) url_ = "http://127.0.0.1:" + std::to_string(port);
      }
      if (!url_.empty() && HttpGet(url_ + "/health").first == 200) return;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    error_ = "mxserve serve did not become healthy:\n" + Slurp(log);
  }

  // SIGTERM and wait; returns the exit status (-1 when it was not running).
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  const std::string& url() const { return url_; }
  const std::string& error() const { return error_; }

 private:
  pid_t pid_ = -1;
  std::string url_;
  std::string error_;
};

// A test suite sharing one server. Derived provides
//   static std::filesystem::path WorkDir();          // created before, removed after the suite
//   static std::vector<std::string> ServeArgs();     // mxserve's arguments (serve ... --port 0)
// and reads the server's base URL from url_.
template <typename Derived>
class ServedSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    std::filesystem::create_directories(Derived::WorkDir());
    server_.Start(MXSERVE_BIN, Derived::ServeArgs(), Derived::WorkDir() / "serve.log");
    url_ = server_.url();
  }
  static void TearDownTestSuite() {
    server_.Stop();
    std::filesystem::remove_all(Derived::WorkDir());
  }
  void SetUp() override { ASSERT_TRUE(server_.error().empty()) << server_.error(); }

  static inline ServeProcess server_;
  static inline std::string url_;
};

}  // namespace mx::e2e
