// Status and Result<T>: the channel for expected failures (bad file, bad request, out of KV).
// A Status carries a code and a message that names the file, field or tensor and what was
// expected. Programmer errors use CHECK (check.h) instead. No exception crosses a module
// boundary.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace mx {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad user input (CLI flag, request field, config value)
  kNotFound,         // file, tensor or model missing
  kDataLoss,         // malformed or truncated file
  kUnimplemented,    // a known format feature mxserve does not support
  kResourceExhausted,
  kFailedPrecondition,
  kAlreadyExists,
  kInternal,
  kUnavailable,
  kAborted,
  kIoError,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: message"
  std::string ToString() const;

  // Returns a copy with "context: " prepended to the message (e.g. the file name).
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status InvalidArgument(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status NotFound(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kNotFound, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status DataLoss(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kDataLoss, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status Unimplemented(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kUnimplemented, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status IoError(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kIoError, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status FailedPrecondition(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kFailedPrecondition, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status AlreadyExists(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kAlreadyExists, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status ResourceExhausted(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kResourceExhausted, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status Internal(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInternal, fmt::format(f, std::forward<Args>(args)...));
}

// Result<T>: either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "Result constructed from an ok Status");
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "Result built from an ok Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace mx

#define MX_CONCAT_INNER(a, b) a##b
#define MX_CONCAT(a, b) MX_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not ok.
#define MX_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::mx::Status mx_status_ = (expr);        \
    if (!mx_status_.ok()) return mx_status_; \
  } while (0)

// MX_ASSIGN_OR_RETURN(auto x, MakeX()); returns the Status if the Result is not ok.
#define MX_ASSIGN_OR_RETURN(lhs, rexpr) \
  MX_ASSIGN_OR_RETURN_IMPL(MX_CONCAT(mx_result_, __LINE__), lhs, rexpr)
#define MX_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                             \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
