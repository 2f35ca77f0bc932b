// Status and Result<T>: how every reel API reports failure.
//
// reel never lets an exception cross a component boundary. Every fallible call returns a Status
// (or a Result<T> holding either a value or a non-OK Status). Success costs one null pointer.
// Messages name the object at fault: the file and byte offset, the URI, the option, the rank.
//
// Thread-safety: Status and Result are values; distinct objects may be used from any thread.
#ifndef REEL_STATUS_H_
#define REEL_STATUS_H_

#include <cassert>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace reel {

// What kind of failure a Status reports; callers branch on the code, people read the message.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,     // the caller passed something wrong: a bad option, shape or config
  kNotFound = 2,            // a file, object, component or key does not exist
  kOutOfRange = 3,          // clean end of data (end of an epoch or a stream), not an error
  kDataLoss = 4,            // corruption: CRC mismatch, truncated record, unparsable payload
  kUnavailable = 5,         // a peer or server is gone or unreachable; retrying may help
  kDeadlineExceeded = 6,    // a blocking call ran past its deadline
  kFailedPrecondition = 7,  // the system is not in a state that allows the call
  kPermissionDenied = 8,    // credentials refused
  kUnimplemented = 9,       // an optional capability the component does not provide
  kInternal = 10,           // a bug: an invariant broke
  kAlreadyExists = 11,      // a name is taken (e.g. two plugins registering one component)
  kCancelled = 12,          // the operation was interrupted (e.g. SIGINT)
};

// Upper-case name of a code, e.g. "DATA_LOSS".
std::string_view StatusCodeName(StatusCode code);

// OK, or a code and a message naming what failed (file, offset, option, rank). Cheap to copy:
// OK holds nothing, an error shares one immutable state.
class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) {
    if (code != StatusCode::kOk)
      state_ = std::make_shared<const State>(State{code, std::move(message)});
  }

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // Empty for OK.
  const std::string& message() const;

  // "DATA_LOSS: shard-0001.tfrecord: offset 4711: data CRC mismatch".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const {
    if (ok()) return *this;
    return Status(code(), std::string(context) + ": " + message());
  }

  bool operator==(const Status& other) const {
    return code() == other.code() && message() == other.message();
  }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;  // null means OK; shared because Status is immutable
};

// Prints ToString(): "OK" or "CODE: message".
inline std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

// Constructors named after the codes, e.g. DataLossError("file.tfrecord: offset 12: bad CRC").
inline Status InvalidArgumentError(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceededError(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status PermissionDeniedError(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status UnimplementedError(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status AlreadyExistsError(std::string m) {
  return {StatusCode::kAlreadyExists, std::move(m)};
}
inline Status CancelledError(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "a Result built from a Status must hold an error");
    if (status_.ok()) status_ = InternalError("Result constructed from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

 private:
  Status status_;
  std::optional<T> value_;
};

inline std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kCancelled:
      return "CANCELLED";
  }
  return "UNKNOWN";
}

inline const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

inline std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code()));
  out += ": ";
  out += message();
  return out;
}

}  // namespace reel

// Helpers of the macros below: a unique local name per line.
#define REEL_STATUS_CONCAT_INNER_(a, b) a##b
#define REEL_STATUS_CONCAT_(a, b) REEL_STATUS_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function if it is not OK.
#define REEL_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::reel::Status reel_status_ = (expr);        \
    if (!reel_status_.ok()) return reel_status_; \
  } while (false)

// `REEL_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result or returns its error.
#define REEL_ASSIGN_OR_RETURN(lhs, expr) \
  REEL_ASSIGN_OR_RETURN_IMPL_(REEL_STATUS_CONCAT_(reel_result_, __LINE__), lhs, expr)
#define REEL_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                \
  if (!result.ok()) return result.status();            \
  lhs = std::move(result).value()

#endif  // REEL_STATUS_H_
