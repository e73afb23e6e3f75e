//===- CpuKernels.h - Internals shared by the CPU kernel backend -*- C++
//-*-===//
//
// Private to runtime/cpu: the kernel registry, spec validation helpers, the
// oneDNN engine/stream and the base class every CPU kernel derives from.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CPU_CPUKERNELS_H
#define OASR_RUNTIME_CPU_CPUKERNELS_H

#include "oasr/Runtime/Kernel.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace oasr::rt::cpu {

/// Builds a kernel for a validated op type; returns null and sets `error`
/// (already naming the node) on failure.
using KernelFactory =
    std::function<std::unique_ptr<Kernel>(const OpSpec &, std::string &)>;
using KernelRegistry = std::map<std::string, KernelFactory>;

/// Adds the oneDNN-backed kernels (conv, batchnorm, pools, gemm, matmul,
/// eltwise, softmax, transpose).
void registerDnnlKernels(KernelRegistry &registry);
/// Adds the hand-written kernels (broadcast arithmetic, reductions, copies,
/// dropout, pad, max pooling, losses, concat/split, constants).
void registerElementwiseKernels(KernelRegistry &registry);

/// The process-wide oneDNN CPU engine.
dnnl::engine &engine();
/// A oneDNN stream for the calling thread (CPU streams execute in order on
/// the thread that submits).
dnnl::stream &stream();

/// Threads a kernel may use; 0 until setNumThreads is first called (OpenMP
/// left alone).
int numThreads();
/// Sets the threads of every kernel run from now on, on any thread; `threads`
/// <= 0 restores OpenMP's default (OMP_NUM_THREADS or the core count).
void setNumThreads(int threads);
/// Applies numThreads() to the calling thread's OpenMP settings.
void applyNumThreads();

/// "node 'name' (Op): msg".
std::string nodeError(const OpSpec &spec, const std::string &msg);
/// Checks the operand/result counts; sets `error` and returns false if not in
/// [minIn, maxIn] / [minOut, maxOut].
bool checkArity(const OpSpec &spec, size_t minIn, size_t maxIn, size_t minOut,
                size_t maxOut, std::string &error);
/// Checks that operand (`isInput`) or result `idx` has element type `t`.
bool checkDType(const OpSpec &spec, bool isInput, size_t idx, DType t,
                std::string &error);
/// Checks that every operand and result listed is f32.
bool checkAllF32(const OpSpec &spec, const std::vector<size_t> &inputs,
                 const std::vector<size_t> &outputs, std::string &error);
/// True if result `idx` is read later (or the executor did not say).
inline bool outputUsed(const OpSpec &spec, size_t idx) {
  return idx >= spec.outputUsed.size() || spec.outputUsed[idx];
}
/// "[2, 3, 4]".
std::string shapeStr(const std::vector<int64_t> &shape);

/// Every CPU kernel: sets the thread count, then runs the body, turning a
/// oneDNN failure into a fatal error naming the node.
class CpuKernel : public Kernel {
public:
  explicit CpuKernel(const OpSpec &spec)
      : nodeName(spec.name), op(spec.opType) {}
  void run(const std::vector<TensorRef> &inputs,
           const std::vector<TensorRef> &outputs) final;
  size_t workspaceBytes() const final { return scratchBytes; }
  void setWorkspace(void *ptr) final;

protected:
  virtual void compute(const std::vector<TensorRef> &inputs,
                       const std::vector<TensorRef> &outputs) = 0;
  /// Declares `m` (created without a buffer, DNNL_MEMORY_NONE) as scratch
  /// that lives only during one run -- a blocked-layout copy, a oneDNN
  /// scratchpad. All of a kernel's scratch is one workspace the executor
  /// places in its activation arena; a kernel run without one (unit tests)
  /// allocates its own at the first run. Call from the constructor.
  void addScratch(const dnnl::memory &m);
  /// The scratchpad `pd` asks for in user mode (see userScratchpad()), as
  /// scratch of this kernel; an empty memory when it needs none.
  dnnl::memory scratchpad(const dnnl::primitive_desc_base &pd);
  std::string nodeName, op;

private:
  void placeScratch(char *base);
  std::vector<dnnl::memory> scratch;
  size_t scratchBytes = 0;
  bool scratchPlaced = false;
  std::unique_ptr<char, void (*)(void *)> ownScratch{nullptr, std::free};
};

/// Primitive attributes with the scratchpad in user mode: the kernel passes
/// it (DNNL_ARG_SCRATCHPAD) from its workspace instead of oneDNN keeping one.
dnnl::primitive_attr userScratchpad();

/// Plain (row-major) dims/tag helpers for oneDNN memory descriptors.
dnnl::memory::dims toDims(const std::vector<int64_t> &shape);
dnnl::memory::format_tag plainTag(size_t rank);
dnnl::memory::desc
plainDesc(const std::vector<int64_t> &shape,
          dnnl::memory::data_type dt = dnnl::memory::data_type::f32);

/// The resolved window of a convolution or pooling node (oneDNN conventions).
struct Window {
  dnnl::memory::dims kernel, strides;
  dnnl::memory::dims dilations; ///< oneDNN form: ONNX dilation - 1
  dnnl::memory::dims padL, padR;
  /// The right padding grew beyond the attribute to honour ceil_mode.
  bool paddedForCeil = false;
};

/// Resolves kernel_shape/strides/dilations/pads/auto_pad of a window node
/// against its input (`in`) and result (`out`) spatial sizes; `kernel` is the
/// window size (weights' spatial shape or kernel_shape). With `allowCeil`, a
/// result one larger than floor division is accepted (ceil_mode) and the
/// right padding grows to cover it.
bool resolveWindow(const OpSpec &spec, const std::vector<int64_t> &in,
                   const std::vector<int64_t> &kernel,
                   const std::vector<int64_t> &out, bool allowCeil, Window &w,
                   std::string &error);

/// Wraps a primitive-creation body: converts dnnl::error into `error`.
template <typename F>
std::unique_ptr<Kernel> guardCreate(const OpSpec &spec, std::string &error,
                                    F &&body) {
  try {
    return body();
  } catch (const dnnl::error &e) {
    error =
        nodeError(spec, std::string("oneDNN rejected the node: ") + e.what() +
                            " (status " + std::to_string(int(e.status)) + ")");
    return nullptr;
  }
}

} // namespace oasr::rt::cpu

#endif // OASR_RUNTIME_CPU_CPUKERNELS_H
