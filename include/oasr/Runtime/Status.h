//===- Status.h - The kernel layer's error type ----------------*- C++ -*-===//
//
// Below the executor, in the kernel backends and the op validation they
// share, a fallible call returns a Status (ok, or a message that names the
// node and the reason) or a StatusOr<T> (a value, or that Status), in the
// manner of absl::Status and IREE's iree_status_t. The kernel libraries link
// no LLVM, so they cannot use llvm::Error; the executor, above them, turns a
// Status into an llvm::Error where it calls them (toError, in the runtime).
// Plain C++, like Kernel.h; CUDA sources include it too.
//
// Failures while a step runs (a vendor library's error, an operand value a
// kernel cannot run on) are not Statuses: the step cannot be unwound, so
// they end the process through fatalKernelError, which names the node.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_STATUS_H
#define OASR_RUNTIME_STATUS_H

#include <cassert>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace oasr::rt {

/// Success, or a failure with its message. Cheap to copy (a shared,
/// immutable message); must be looked at ([[nodiscard]]).
class [[nodiscard]] Status {
public:
  /// Success.
  Status() = default;
  static Status success() { return Status(); }
  /// A failure saying `message` (the caller names the node, e.g. with
  /// nodeError).
  static Status error(std::string message) {
    Status s;
    s.msg = std::make_shared<const std::string>(std::move(message));
    return s;
  }

  bool ok() const { return msg == nullptr; }
  /// The failure's message; empty for success.
  const std::string &message() const {
    static const std::string none;
    return msg ? *msg : none;
  }

private:
  std::shared_ptr<const std::string> msg;
};

/// A T, or the Status of the failure that produced none.
template <typename T> class [[nodiscard]] StatusOr {
public:
  /// A value (anything T is made from, e.g. a unique_ptr to a derived
  /// class; not a null pointer constant, which would pass for a value).
  template <typename U, typename = std::enable_if_t<
                            std::is_constructible_v<T, U &&> &&
                            !std::is_same_v<std::decay_t<U>, Status> &&
                            !std::is_same_v<std::decay_t<U>, std::nullptr_t>>>
  StatusOr(U &&v) : value(std::forward<U>(v)) {}
  StatusOr(std::nullptr_t) = delete;
  /// A failure; `status` must not be ok.
  StatusOr(Status status) : st(std::move(status)) {
    assert(!st.ok() && "StatusOr from an ok Status has no value");
  }

  bool ok() const { return st.ok(); }
  const Status &status() const { return st; }

  T &operator*() & { return *value; }
  T &&operator*() && { return std::move(*value); }
  T *operator->() { return &*value; }
  const T *operator->() const { return &*value; }

private:
  Status st;
  std::optional<T> value;
};

/// Returns the Status of `expr` from the enclosing function when it failed.
#define OASR_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::oasr::rt::Status oasrStatus_ = (expr);                                   \
    if (!oasrStatus_.ok())                                                     \
      return oasrStatus_;                                                      \
  } while (false)

/// Ends the process with "oasr: fatal: node 'NODE' (OP): MESSAGE" (or
/// "oasr: fatal: MESSAGE" outside any kernel): the one report of a failure
/// that cannot be returned, because a step is running (a vendor library's
/// error, an operand value a kernel cannot run on). `node`/`op` default to
/// the kernel running on this thread (KernelScope).
[[noreturn]] void fatalKernelError(const std::string &message);
[[noreturn]] void fatalKernelError(const std::string &node,
                                   const std::string &op,
                                   const std::string &message);
/// The same report, then exit status 1 instead of an abort: an operand's
/// value the step's input put there (a label or index outside its range),
/// a fault of the data, not of oasr.
[[noreturn]] void fatalDataError(const std::string &node, const std::string &op,
                                 const std::string &message);
/// "oasr: error: MESSAGE", exit status 1: a sample the data source cannot
/// read (the message names the file).
[[noreturn]] void fatalDataError(const std::string &message);

/// Names the kernel that runs on this thread while it lives, for
/// fatalKernelError (a vendor check deep in a launch knows no node).
class KernelScope {
public:
  KernelScope(const std::string &node, const std::string &op);
  ~KernelScope();
  KernelScope(const KernelScope &) = delete;
  KernelScope &operator=(const KernelScope &) = delete;

private:
  const std::string *prevNode, *prevOp;
};

} // namespace oasr::rt

#endif // OASR_RUNTIME_STATUS_H
