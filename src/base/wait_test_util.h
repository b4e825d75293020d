// WaitFor: the tests' one way to wait for an event that another thread brings about (an engine
// that frees its pages, a fake engine that starts a request). It polls the predicate and, when
// the timeout passes first, records a test failure naming what was awaited and where, so a test
// never goes on silently as if the event had happened. The timeout is a deadline for a hang,
// not a speed requirement: pass a generous one (seconds), never a measured bound.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

namespace mx {

// A deadline for an event that should take milliseconds: long enough for a sanitizer build on a
// loaded 2-core host.
inline constexpr std::chrono::milliseconds kWaitTimeout{60'000};

// Returns whether `done` became true within `timeout`; on false the test has failed already, at
// the caller's file and line (the defaults).
// Use ASSERT_TRUE(WaitFor(...)) where the rest of the test needs the event.
inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                    std::string_view what = "the awaited condition",
                    const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ADD_FAILURE_AT(file, line) << "WaitFor: " << what << " did not happen within "
                                 << timeout.count() << " ms";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace mx
