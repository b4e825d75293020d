// A Server on a loopback port over a scripted FakeEngine (or any engine) and the bundled
// model's tokenizer and chat template, with an HTTP client; and the `data:` payloads of SSE.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "base/wait_test_util.h"
#include "server/fake_engine_test_util.h"
#include "server/server.h"

namespace mx::server {

inline const std::string kModelDir = std::string(MX_SOURCE_DIR) + "/models/glm-moe-dsa-arith-6m";

struct Harness {
  std::unique_ptr<Server> server;
  std::thread thread;
  std::shared_ptr<testing::FakeEngine::Shared> shared;
  std::unique_ptr<httplib::Client> client;

  Harness(const std::string& script_text, ServerOptions o = {},
          std::chrono::milliseconds step = std::chrono::milliseconds(1),
          int64_t max_active = 100000, bool ready = true) {
    auto tok = tok::Tokenizer::FromFile(kModelDir + "/tokenizer.json");
    EXPECT_TRUE(tok.ok());
    std::vector<int32_t> script = tok->Encode(script_text);
    const int32_t eos = *tok->TokenId("<|endoftext|>");
    script.push_back(eos);
    auto engine = std::make_unique<testing::FakeEngine>(
        script, std::vector<int32_t>{eos}, step, max_active, /*context=*/512,
        std::make_shared<const tok::Tokenizer>(std::move(*tok)));
    shared = engine->shared();
    Start(std::move(engine), std::move(o), ready);
  }
  // Over any engine (the real model's).
  explicit Harness(std::unique_ptr<Engine> engine) { Start(std::move(engine), {}, true); }

  void Start(std::unique_ptr<Engine> engine, ServerOptions o, bool ready) {
    o.port = 0;
    o.shutdown_timeout = std::chrono::milliseconds(
        o.shutdown_timeout.count() == 30000 ? 2000 : o.shutdown_timeout.count());
    server = std::make_unique<Server>(o);
    EXPECT_TRUE(server->Bind().ok());
    thread = std::thread([this] { server->Run(); });
    auto m = LoadServedModel("arith", kModelDir, std::move(engine));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    (*m)->info.architecture = "GlmMoeDsaForCausalLM";
    (*m)->info.params_total = 6033056;
    (*m)->info.weight_formats = {{"bf16", 182}, {"f32", 4}};
    (*m)->info.kv_cache_dtype = "bf16";
    server->AddModel(std::move(*m));
    if (ready) {
      EXPECT_TRUE(server->SetReady().ok());
    }
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    client->set_read_timeout(30);
  }
  ~Harness() {
    server->Shutdown();
    if (thread.joinable()) thread.join();
  }
  // Waits until the fake engine runs `n` requests (fails the test if that never happens).
  bool WaitUntilRunning(int64_t n = 1) {
    return WaitFor(
        [&] {
          std::lock_guard<std::mutex> lock(shared->mu);
          return shared->active >= n;
        },
        kWaitTimeout, "the fake engine running a request");
  }
  httplib::Result Post(const std::string& path, const std::string& body, httplib::Headers h = {}) {
    return client->Post(path.c_str(), h, body, "application/json");
  }
};

// The `data:` payloads of an SSE body.
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

}  // namespace mx::server
