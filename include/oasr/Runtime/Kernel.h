//===- Kernel.h - The runtime's kernel-backend interface --------*- C++ -*-===//
//
// A kernel backend (oneDNN on CPU, cuDNN/cuBLAS on GPU) turns one node of the
// compiled training step into a Kernel once, when the execution plan is
// built; the executor then calls Kernel::run every step on buffers it owns.
// This header is plain C++ (no MLIR, no LLVM) so CUDA sources can include it.
//
// Conventions between the executor and every backend:
//  * Constant: the executor materializes `value` itself (once, at plan
//    build). The CPU backend also accepts a Constant whose `value` (or
//    value_float(s)/value_int(s)) is a flat number list, 1 element splatted.
//  * Reshape/Flatten/Squeeze/Unsqueeze/Identity: the executor may alias the
//    result to the operand; the kernels copy and are no-ops when the two
//    buffers coincide. Their shape operand is never read.
//  * Aliasing a result to an operand is otherwise allowed only where the two
//    have one shape and the op is elementwise (Add/Sub/Mul/Div/Sum/Neg/Relu,
//    ...) and for BatchNormalization's running_mean'/running_var' onto its
//    mean/var operands.
//  * Optional operands left out in the middle of the list are passed as a
//    TensorRef with data == nullptr. Scalar operands some ops read at run time
//    (Dropout ratio/training_mode, Clip min/max, Pad pads/constant_value)
//    are read from host memory by the CPU backend.
//  * Dropout draws its mask from (OpSpec::seed, the number of times the
//    kernel has run, element index): a new mask every step, the same sequence
//    on every run of the program whatever the thread count.
//  * MaxPool's Indices are flat offsets into each (n, c) plane (PyTorch).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_KERNEL_H
#define OASR_RUNTIME_KERNEL_H

#include "oasr/Config.h"
#include "oasr/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace oasr::rt {

/// Element types the runtime moves around.
enum class DType : uint8_t { F32, F16, I64, I32, Bool, BF16 };

/// True for the 16-bit float types (bf16, f16): mixed precision's low type.
inline bool isLowFloat(DType t) { return t == DType::F16 || t == DType::BF16; }

/// Size in bytes of one element of `t`.
size_t dtypeSize(DType t);
/// "f32", "i64", ...
const char *dtypeName(DType t);

/// Static type of a tensor: element type and shape.
struct TensorDesc {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t bytes() const { return size_t(numel()) * dtypeSize(dtype); }
  size_t rank() const { return shape.size(); }
};

/// A tensor view: a typed buffer owned by the executor (host memory for CPU
/// backends, device memory for GPU backends).
struct TensorRef {
  void *data = nullptr;
  TensorDesc desc;

  template <typename T> T *as() const { return static_cast<T *>(data); }
  int64_t numel() const { return desc.numel(); }
  size_t bytes() const { return desc.bytes(); }
};

/// An ONNX attribute value as the runtime sees it.
using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>,
                 std::vector<double>, std::vector<std::string>>;

/// The attributes of one node, with typed accessors and defaults.
class AttrMap {
public:
  void set(const std::string &name, AttrValue v) {
    values[name] = std::move(v);
  }
  bool has(const std::string &name) const { return values.count(name) != 0; }
  int64_t getInt(const std::string &name, int64_t dflt = 0) const;
  double getFloat(const std::string &name, double dflt = 0.0) const;
  std::string getString(const std::string &name,
                        const std::string &dflt = "") const;
  std::vector<int64_t> getInts(const std::string &name,
                               std::vector<int64_t> dflt = {}) const;
  /// A list of strings (e.g. LSTM's activations); a single string is a list
  /// of one.
  std::vector<std::string> getStrings(const std::string &name,
                                      std::vector<std::string> dflt = {}) const;
  const std::map<std::string, AttrValue> &all() const { return values; }

private:
  std::map<std::string, AttrValue> values;
};

/// Everything a backend needs to build a kernel for one node.
struct OpSpec {
  std::string opType; ///< ONNX / oasr op type, e.g. "Conv", "ConvGrad"
  std::string name;   ///< node name (its location), for errors and traces
  AttrMap attrs;      ///< ONNX attributes
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  /// Outputs no later op reads; a kernel may skip computing them (e.g. dX of
  /// the first convolution).
  std::vector<bool> outputUsed;
  /// Seed for nodes that draw random numbers (Dropout), fixed per node.
  uint64_t seed = 0;
  /// Per input, its bytes when the value is a small constant of the program
  /// (Slice's starts, Dropout's ratio, Pad's pads, Clip's bounds), else
  /// empty. A device backend folds them into the kernel's parameters
  /// instead of copying the operand back to the host every step.
  std::vector<std::vector<char>> inputValues;
};

/// How a node runs in evaluation (eval mode, PyTorch's `model.eval()`):
/// BatchNormalization's training form normalises with its running
/// statistics and writes none (Y only); Dropout passes its input through.
/// The form reads the first `inputs` operands and writes the first
/// `outputs` results of the training node.
struct InferenceForm {
  OpSpec spec;
  size_t inputs = 0, outputs = 0;
};
/// The inference form of a training-form node, or none where the node runs
/// alike in training and evaluation.
std::optional<InferenceForm> inferenceForm(const OpSpec &spec);

/// True when a tensor of the node is bf16 or f16.
inline bool hasLowFloat(const OpSpec &spec) {
  for (const auto *descs : {&spec.inputs, &spec.outputs})
    for (const TensorDesc &d : *descs)
      if (isLowFloat(d.dtype))
        return true;
  return false;
}

/// One node, ready to run. Created once; run every step.
class Kernel {
public:
  virtual ~Kernel();
  /// Computes `outputs` from `inputs`. Buffers match the OpSpec's descs.
  virtual void run(const std::vector<TensorRef> &inputs,
                   const std::vector<TensorRef> &outputs) = 0;
  /// Scratch memory the kernel needs *during* `run` only (e.g. a oneDNN
  /// scratchpad in user mode). The executor places it in its activation
  /// arena, shared with tensors not alive at this op, instead of the kernel
  /// keeping a private allocation. Asked once, after creation.
  virtual size_t workspaceBytes() const { return 0; }
  /// Where that scratch lives (64-byte aligned, `workspaceBytes()` long,
  /// valid for every later `run`; its contents do not survive between runs).
  /// Called once, before the first `run`, when `workspaceBytes()` > 0.
  virtual void setWorkspace(void *ptr) { (void)ptr; }
  /// Kernels that draw random numbers (Dropout): their position in their
  /// random sequence (the draws so far), which checkpoints save and a resumed
  /// run restores. False for kernels without one.
  virtual bool randomPosition(uint64_t &position) const {
    (void)position;
    return false;
  }
  virtual void setRandomPosition(uint64_t position) { (void)position; }
};

/// A kernel, or why none could be built for a node.
using KernelOr = StatusOr<std::unique_ptr<Kernel>>;

/// One oasr.optimizer_update: the algorithm and its hyper-parameters (the
/// ONNX preview-training rules; docs/runtime.md "Optimizers").
struct UpdateRule {
  std::string algo; ///< sgd | momentum | adagrad | adam | adamw
  double lr = 0, momentum = 0, weightDecay = 0, dampening = 0, lrDecay = 0,
         beta1 = 0, beta2 = 0, epsilon = 0, weightDecayPost = 0;
  bool nesterov = false;
};

/// A family of kernels on one kind of device.
/// The optimizer rules (UpdateRule::algo) both backends implement: sgd,
/// momentum, adagrad, adam.
inline bool isStandardUpdate(const std::string &algo) {
  return algo == "sgd" || algo == "momentum" || algo == "adagrad" ||
         algo == "adam" || algo == "adamw";
}

class KernelBackend {
public:
  virtual ~KernelBackend();
  /// "cpu" (oneDNN), "cuda" (cuDNN/cuBLAS).
  virtual const char *name() const = 0;
  /// Whether the host reads and writes this backend's buffers directly
  /// (CPU memory): the executor then updates weights and reads values in
  /// place, and no copy or wait for a device is needed.
  virtual bool hostAddressable() const { return false; }
  /// Builds the kernel for `spec`, or a failure whose message names the node
  /// and the reason (unsupported op, attribute, operand).
  virtual KernelOr createKernel(const OpSpec &spec);
  /// The same as null with `error` set, the form some tests and tools call
  /// and override. A backend overrides one of the two; the default of each
  /// calls the other.
  virtual std::unique_ptr<Kernel> create(const OpSpec &spec,
                                         std::string &error);
  /// Device memory management; the CPU backend uses aligned host memory.
  virtual void *allocate(size_t bytes) = 0;
  virtual void deallocate(void *ptr) = 0;
  virtual void copyToDevice(void *dst, const void *src, size_t bytes) = 0;
  virtual void copyToHost(void *dst, const void *src, size_t bytes) = 0;
  /// Copies `bytes` between two buffers of this backend, after every kernel
  /// issued so far. The default stages through host memory.
  virtual void copyWithin(void *dst, const void *src, size_t bytes) {
    std::vector<char> staging(bytes);
    copyToHost(staging.data(), src, bytes);
    copyToDevice(dst, staging.data(), bytes);
  }
  /// Waits until every kernel issued so far has finished.
  virtual void synchronize() {}
  /// Device-to-host copies and waits for the device so far: each stalls the
  /// host until the device has caught up. Device backends count them; the
  /// CPU backend has none.
  struct HostWaits {
    uint64_t copiesToHost = 0, synchronizations = 0;
    /// Seconds the host spent blocked in them: near the step time when the
    /// device is the bottleneck, near zero when launching is.
    double blockedSeconds = 0;
  };
  virtual HostWaits hostWaits() const { return {}; }
  /// Graph capture (CUDA graphs, --cuda-graph): between beginCapture and
  /// endCapture the work that kernels and copies launch is recorded, not
  /// run; replay(id) then runs it as one launch, on the same buffers. The
  /// default has none and says why.
  virtual bool beginCapture(std::string &why);
  /// The recording's id (>= 0), or -1 with `why` when it failed: nothing
  /// was recorded or run.
  virtual int endCapture(std::string &why);
  virtual void replay(int id);
  /// Backends apply the optimizer updates (the CPU in host memory, a GPU
  /// with its kernels). True when `update` implements `algo`.
  virtual bool supportsUpdate(const std::string &algo) const {
    (void)algo;
    return false;
  }
  /// Whether `update` also writes a parameter's 16-bit copy, a bf16 or
  /// f16 result after param'[, state'...], rounded from param' in the same
  /// pass. The executor then keeps the copy that a mixed-precision step's
  /// forward reads instead of casting the parameter every step.
  virtual bool updatesWeightCopies() const { return false; }
  /// One update of `rule` after `t` earlier updates, issued after every
  /// kernel so far: operands (param, grad[, state...]) and results
  /// (param'[, state'...][, copy]) as in oasr.optimizer_update; a result
  /// may alias its operand. Called only when supportsUpdate(rule.algo).
  virtual void update(const UpdateRule &rule, int64_t t,
                      const std::vector<TensorRef> &inputs,
                      const std::vector<TensorRef> &outputs) {
    (void)rule, (void)t, (void)inputs, (void)outputs;
  }
  /// Prepares the backend for a step compiled in `precision` ("f32",
  /// "tf32", "bf16", "f16"; docs/precision.md), before any kernel is
  /// created: a GPU picks its math modes. A failure says why the backend
  /// cannot run it; `warning` is set when it runs it without the speed the
  /// precision is for (emulated). The default runs f32 only.
  virtual Status setPrecision(const std::string &precision,
                              std::string &warning) {
    (void)warning;
    if (precision == "f32")
      return Status();
    return Status::error(std::string("the ") + name() + " backend has no '" +
                         precision + "' kernels");
  }
  /// Threads the backend may use for one kernel (CPU: OpenMP threads of
  /// oneDNN and the hand-written loops; applies to kernels created and run
  /// on any thread after the call; 0 restores OpenMP's default).
  virtual void setNumThreads(int threads) { (void)threads; }
};

/// The oneDNN CPU backend.
std::unique_ptr<KernelBackend> createCpuBackend();
/// The op types the CPU backend has kernels for (no backend is created).
std::vector<std::string> cpuKernelOps();
/// "oneDNN 2.6.3, ISA avx512_core_bf16; vector loops avx512": the oneDNN
/// build, the ISA it dispatches to (ONEDNN_MAX_CPU_ISA caps it) and the
/// variant of oasr's own vector loops that follows it.
std::string describeCpu();
#if OASR_ENABLE_CUDA
/// The cuDNN/cuBLAS backend on the current CUDA device (see
/// oasr/Runtime/Cuda.h to pick one). On failure (no device, driver or
/// library error) returns null and sets `error`.
std::unique_ptr<KernelBackend> createCudaBackend(std::string &error);
/// The op types the CUDA backend has kernels for (no device needed).
std::vector<std::string> cudaKernelOps();
#endif

} // namespace oasr::rt

#endif // OASR_RUNTIME_KERNEL_H
