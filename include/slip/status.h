// Status and Result<T>: the error vocabulary of Slipstream — of its public
// client API and of every module inside.
//
// No exceptions cross a module boundary. Anything that can fail returns a
// Status (free when OK: no allocation) or a Result<T>. The codes are stable:
// they travel in wire messages, so never renumber an existing one.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace slip {

enum class Code : uint8_t {
  kOk = 0,
  kNotFound = 1,
  kCorruption = 2,       // bytes fail a checksum or a structural check
  kInvalidArgument = 3,  // caller's input is malformed or out of range
  kIoError = 4,          // the OS refused (open, mmap, msync ...)
  kBusy = 5,             // transient: retry later (e.g. receiver not ready)
  kTimeout = 6,
  kUnavailable = 7,      // peer dead, connection gone
  kStaleTerm = 8,        // request carries an old configuration term
  kNoSpace = 9,          // out of segments / buffers
  kTooLarge = 10,        // key or value over the configured limit
  kAborted = 11,         // operation cancelled (shutdown, sticky error)
  kNotSupported = 12,    // provider or platform lacks the feature
  kUnauthenticated = 13, // the peer did not prove the cluster secret (or we lack it)
};

std::string_view CodeName(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status NotFound(std::string m = {}) { return {Code::kNotFound, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status IoError(std::string m) { return {Code::kIoError, std::move(m)}; }
  static Status Busy(std::string m = {}) { return {Code::kBusy, std::move(m)}; }
  static Status Timeout(std::string m = {}) { return {Code::kTimeout, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status StaleTerm(std::string m = {}) { return {Code::kStaleTerm, std::move(m)}; }
  static Status NoSpace(std::string m) { return {Code::kNoSpace, std::move(m)}; }
  static Status TooLarge(std::string m) { return {Code::kTooLarge, std::move(m)}; }
  static Status Aborted(std::string m) { return {Code::kAborted, std::move(m)}; }
  static Status NotSupported(std::string m) { return {Code::kNotSupported, std::move(m)}; }
  static Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  bool Is(Code c) const { return code_ == c; }

  // "Corruption: bad checksum at 0x40" — for logs and CLI error lines.
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or an error. Modelled on std::expected (C++23), kept minimal.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {          // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result from an OK status has no value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<T>(v_); }
  const T& value() const& { assert(ok()); return std::get<T>(v_); }
  T&& value() && { assert(ok()); return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace slip
