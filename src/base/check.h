// CHECK: always-on assertions for programmer errors (never for user input, which gets a
// Status). On failure prints the condition, expected vs actual values and file:line, then
// aborts.
#pragma once

#include <sstream>
#include <string>

namespace mx::detail {

[[noreturn]] void CheckFailed(const char* file, int line, const std::string& message);

template <typename A, typename B>
[[noreturn]] void CheckOpFailed(const char* file, int line, const char* expr, const A& a,
                                const B& b) {
  std::ostringstream os;
  os << "CHECK failed: " << expr << " (expected " << b << ", actual " << a << ")";
  CheckFailed(file, line, os.str());
}

}  // namespace mx::detail

#define MX_CHECK(cond)                                                       \
  do {                                                                       \
    if (!(cond)) [[unlikely]]                                                \
      ::mx::detail::CheckFailed(__FILE__, __LINE__, "CHECK failed: " #cond); \
  } while (0)

#define MX_CHECK_MSG(cond, msg)                                                    \
  do {                                                                             \
    if (!(cond)) [[unlikely]]                                                      \
      ::mx::detail::CheckFailed(__FILE__, __LINE__,                                \
                                std::string("CHECK failed: " #cond ": ") + (msg)); \
  } while (0)

#define MX_CHECK_OP_(a, b, op)                                                          \
  do {                                                                                  \
    const auto& mx_a_ = (a);                                                            \
    const auto& mx_b_ = (b);                                                            \
    if (!(mx_a_ op mx_b_)) [[unlikely]]                                                 \
      ::mx::detail::CheckOpFailed(__FILE__, __LINE__, #a " " #op " " #b, mx_a_, mx_b_); \
  } while (0)

#define MX_CHECK_EQ(a, b) MX_CHECK_OP_(a, b, ==)
#define MX_CHECK_NE(a, b) MX_CHECK_OP_(a, b, !=)
#define MX_CHECK_LT(a, b) MX_CHECK_OP_(a, b, <)
#define MX_CHECK_LE(a, b) MX_CHECK_OP_(a, b, <=)
#define MX_CHECK_GT(a, b) MX_CHECK_OP_(a, b, >)
#define MX_CHECK_GE(a, b) MX_CHECK_OP_(a, b, >=)
