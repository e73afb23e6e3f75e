//===- CpuKernels.h - Internals shared by the CPU backend -------*- C++ -*-===//
//
// Private to runtime/cpu: the kernel registry, the oneDNN engine/stream and
// the base class every CPU kernel derives from. The spec validation helpers
// and op geometry are shared with the CUDA backend (../OpGeometry.h).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CPU_CPUKERNELS_H
#define OASR_RUNTIME_CPU_CPUKERNELS_H

#include "../OpGeometry.h"
#include "oasr/Runtime/Kernel.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace oasr::rt::cpu {

/// Builds the kernel of a validated op type, or a failure already naming the
/// node.
using KernelFactory = std::function<KernelOr(const OpSpec &)>;
using KernelRegistry = std::map<std::string, KernelFactory>;

/// Each op family's kernels, one file each, named as the CUDA backend's
/// (docs/adding-an-op.md): Conv/ConvGrad/ConvTranspose(Grad)
/// (ConvKernels.cpp); Gemm/GemmGrad/MatMul/FusedMatMul (GemmKernels.cpp);
/// BatchNormalization and LayerNormalization with their gradients
/// (NormKernels.cpp); MaxPool, AveragePool and GlobalAveragePool with their
/// gradients (PoolKernels.cpp); Dropout/DropoutGrad (DropoutKernels.cpp);
/// SoftmaxCrossEntropyLoss(Grad) (LossKernels.cpp); the activations, Clip,
/// comparisons, logic, Where and softmax (PointwiseKernels.cpp); copies,
/// views, gathers and fills (ShapeKernels.cpp); broadcast arithmetic and
/// reductions (ArithmeticKernels.cpp); Cast (LowPrecision.cpp); LSTM and
/// GRU with their gradients on oneDNN's RNN primitives
/// (RecurrentKernels.cpp); FusedAttention(Grad) (AttentionKernels.cpp).
void registerConvKernels(KernelRegistry &registry);
void registerGemmKernels(KernelRegistry &registry);
void registerNormKernels(KernelRegistry &registry);
void registerPoolKernels(KernelRegistry &registry);
void registerDropoutKernels(KernelRegistry &registry);
void registerLossKernels(KernelRegistry &registry);
void registerPointwiseKernels(KernelRegistry &registry);
void registerShapeKernels(KernelRegistry &registry);
void registerArithmeticKernels(KernelRegistry &registry);
void registerLowPrecisionKernels(KernelRegistry &registry);
void registerRecurrentKernels(KernelRegistry &registry);
void registerAttentionKernels(KernelRegistry &registry);
void registerIndexKernels(KernelRegistry &registry);

/// The kernel of a node with bf16/f16 tensors (LowPrecision.cpp): the
/// factory's own when it takes them, else the f32 kernel between widening
/// and narrowing copies.
KernelOr createLowPrecision(const OpSpec &spec, const KernelFactory &factory);

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

/// Iteration of k operands broadcast onto an output shape, with adjacent
/// dimensions of the same broadcast pattern merged. The last merged dimension
/// is the inner loop; each operand's inner stride is 0 or 1.
struct BroadcastPlan {
  std::vector<int64_t> dims;                 // merged output dims
  std::vector<std::vector<int64_t>> strides; // per operand, per merged dim
  int64_t inner() const { return dims.back(); }
  int64_t rows() const {
    int64_t r = 1;
    for (size_t i = 0; i + 1 < dims.size(); ++i)
      r *= dims[i];
    return r;
  }
  /// Element offsets of each operand at the start of row `row`.
  void rowOffsets(int64_t row, int64_t *offs) const {
    size_t k = strides.size();
    for (size_t j = 0; j < k; ++j)
      offs[j] = 0;
    for (size_t d = dims.size() - 1; d-- > 0;) {
      int64_t idx = row % dims[d];
      row /= dims[d];
      for (size_t j = 0; j < k; ++j)
        offs[j] += idx * strides[j][d];
    }
  }
};

/// The plan of `ins` broadcast onto `out` (numpy rules, already checked).
BroadcastPlan makePlan(const std::vector<std::vector<int64_t>> &ins,
                       const std::vector<int64_t> &out);

/// Reads an optional scalar operand from host memory (null data or no
/// elements: absent, returns false).
bool scalarOperand(const std::vector<TensorRef> &in, size_t i, double &v);

/// Element `i` of an i64 or i32 tensor (labels, indices) in host memory.
inline int64_t labelAt(const TensorRef &t, int64_t i) {
  return indexAt(t.data, t.desc.dtype == DType::I64, i);
}

/// One optimizer update on host memory (OptimizerKernels.cpp): p, g[, v[,
/// h]] -> np[, nv[, nh]] by `rule` after `t` earlier updates.
void update(const UpdateRule &rule, int64_t t, const std::vector<TensorRef> &in,
            const std::vector<TensorRef> &out);

/// memcpy split across threads for large buffers.
void parallelCopy(void *dst, const void *src, size_t bytes);

/// Wraps a primitive-creation body: a dnnl::error becomes a failure naming
/// the node.
template <typename F> KernelOr guardCreate(const OpSpec &spec, F &&body) {
  try {
    return body();
  } catch (const dnnl::error &e) {
    return nodeError(spec, std::string("oneDNN rejected the node: ") +
                               e.what() + " (status " +
                               std::to_string(int(e.status)) + ")");
  }
}

} // namespace oasr::rt::cpu

#endif // OASR_RUNTIME_CPU_CPUKERNELS_H
