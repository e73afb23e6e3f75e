//===- CudaBackend.h - The CUDA backend's classes and factories -*- C++ -*-===//
//
// Private to runtime/cuda: the backend class, the kernel base classes every
// factory builds on (CudaKernel, LambdaKernel), the host reads of small
// operands (HostOperands), the f32/bf16 tensor views (floatAt), the helpers
// the families share, and each op family's registration, one family per
// file with the CPU backend's file names (ConvKernels, GemmKernels,
// NormKernels, PoolKernels, DropoutKernels, LossKernels, PointwiseKernels,
// ShapeKernels, ArithmeticKernels, LowPrecision).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CUDA_CUDABACKEND_H
#define OASR_RUNTIME_CUDA_CUDABACKEND_H

#include "CudaKernels.h"
#include "oasr/Runtime/Cuda.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace oasr::rt::cuda {

/// Ends the process through fatalKernelError with "<what>: <library
/// error>", naming the running node, when a cuBLAS or cuDNN call failed
/// (kernels run long after planning; see check()).
void checkBlas(cublasStatus_t status, const char *what);
/// cuBLAS's element type of `t` (f32, bf16, f16).
inline cudaDataType_t blasType(DType t) {
  return t == DType::BF16  ? CUDA_R_16BF
         : t == DType::F16 ? CUDA_R_16F
                           : CUDA_R_32F;
}
void checkDnn(cudnnStatus_t status, const char *what);

/// cuDNN convolutions' math: FMA, or TF32 tensor cores under
/// --precision=tf32 (CudaBackend::setPrecision).
extern cudnnMathType_t gConvMath;

class CudaBackend;

/// Builds the kernel of a validated op type, or a failure already naming
/// the node.
using Factory = std::function<KernelOr(CudaBackend &, const OpSpec &)>;
using FactoryRegistry = std::map<std::string, Factory>;

/// The kernel of a node with bf16/f16 tensors (LowPrecision.cpp): the
/// factory's own when it takes them, else the f32 kernel between widening
/// and narrowing casts.
KernelOr createLowPrecision(CudaBackend &be, const OpSpec &spec);

class CudaBackend final : public KernelBackend {
public:
  CudaBackend(cudaStream_t stream, cublasHandle_t blas, cudnnHandle_t dnn);
  ~CudaBackend() override {
    cudaStreamSynchronize(stream);
    for (cudaGraphExec_t g : graphs)
      cudaGraphExecDestroy(g);
    writeKernelTimes();
    cudnnDestroy(dnn);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
  }
  const char *name() const override { return "cuda"; }
  Status setPrecision(const std::string &precision,
                      std::string &warning) override {
    (void)warning;
    // tf32: f32 products on TF32 tensor cores. f32 and bf16: f32 products
    // on FP32 units (autocast's f32 ops stay f32); bf16 products run on
    // tensor cores by their element type.
    bool tf32 = precision == "tf32";
    if (precision == "f16")
      return Status::error(
          "f16 steps scale the loss, and the cuda backend does not yet "
          "check and unscale gradients on the device; use "
          "--precision=bf16 (the same tensor cores, no loss scaling)");
    if (!tf32 && precision != "f32" && precision != "bf16")
      return Status::error("the cuda backend has no '" + precision +
                           "' kernels");
    gConvMath = tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    checkBlas(cublasSetMathMode(blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                           : CUBLAS_DEFAULT_MATH),
              "cublasSetMathMode");
    return Status::success();
  }
  KernelOr createKernel(const OpSpec &spec) override {
    if (hasLowFloat(spec))
      return createLowPrecision(*this, spec);
    return createNative(spec);
  }
  /// The registered factory's kernel for `spec` as it is.
  KernelOr createNative(const OpSpec &spec) {
    return createRegistered(
        registry, spec, "cuda",
        [&](const Factory &factory) { return factory(*this, spec); });
  }
  void *allocate(size_t bytes) override {
    void *p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 256)) != cudaSuccess) {
      cudaGetLastError(); // clear the sticky-free allocation error
      return nullptr;
    }
    return p;
  }
  void deallocate(void *ptr) override { cudaFree(ptr); }
  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream),
            "copy to the device");
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return;
    if (capturing) { // nothing runs while recording: no value to read
      captureFailure = "a kernel reads a device value on the host";
      std::memset(dst, 0, bytes);
      return;
    }
    ++waits.copiesToHost;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream),
          "copy to the host");
    waitForStream();
  }
  void copyWithin(void *dst, const void *src, size_t bytes) override {
    if (bytes && dst != src)
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
            "copy on the device");
  }
  void synchronize() override {
    if (capturing) {
      captureFailure = "a kernel waits for the device on the host";
      return;
    }
    ++waits.synchronizations;
    waitForStream();
  }
  bool beginCapture(std::string &why) override {
    if (times) {
      why = "OASR_CUDA_KERNEL_TIMES times each kernel as it runs";
      return false;
    }
    // Relaxed: a library may still allocate while its calls are recorded.
    cudaError_t e =
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
      cudaGetLastError();
      why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(e);
      return false;
    }
    capturing = true;
    captureFailure.clear();
    return true;
  }
  int endCapture(std::string &why) override {
    capturing = false;
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    if (e == cudaSuccess && captureFailure.empty())
      e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph)
      cudaGraphDestroy(graph);
    if (e != cudaSuccess || !captureFailure.empty()) {
      cudaGetLastError(); // a failed capture leaves its error behind
      why = !captureFailure.empty()
                ? captureFailure
                : std::string("CUDA graph capture: ") + cudaGetErrorString(e);
      return -1;
    }
    graphs.push_back(exec);
    return int(graphs.size()) - 1;
  }
  void replay(int id) override {
    check(cudaGraphLaunch(graphs[size_t(id)], stream), "cudaGraphLaunch");
  }
  /// cudaStreamSynchronize, its time added to waits.blockedSeconds.
  void waitForStream() {
    auto t0 = std::chrono::steady_clock::now();
    check(cudaStreamSynchronize(stream), "synchronize the compute stream");
    waits.blockedSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
  }
  HostWaits hostWaits() const override { return waits; }
  bool supportsUpdate(const std::string &algo) const override {
    return isStandardUpdate(algo);
  }
  void update(const UpdateRule &rule, int64_t t,
              const std::vector<TensorRef> &in,
              const std::vector<TensorRef> &out) override {
    auto at = [](const std::vector<TensorRef> &v, size_t i) -> float * {
      return i < v.size() ? v[i].as<float>() : nullptr;
    };
    launchUpdate(rule, t, in[0].numel(), at(in, 0), at(in, 1), at(in, 2),
                 at(in, 3), at(out, 0), at(out, 1), at(out, 2), stream);
  }

  cudaStream_t stream;
  cublasHandle_t blas;
  cudnnHandle_t dnn;

  /// OASR_CUDA_KERNEL_TIMES=FILE: every kernel's device time (CUDA events
  /// around its run; not the first run, nor the last, whose end the
  /// executor may outlive), summed per op type and written to FILE at the
  /// end.
  /// Off (null) without the variable: the events cost a little per run.
  struct OpTime {
    double ms = 0;
    int64_t runs = 0;
  };
  std::map<std::string, OpTime> *kernelTimes() { return times.get(); }

private:
  void writeKernelTimes() {
    if (!times)
      return;
    std::FILE *f = std::fopen(timesPath.c_str(), "w");
    if (!f)
      return;
    std::vector<std::pair<std::string, OpTime>> rows(times->begin(),
                                                     times->end());
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
      return a.second.ms > b.second.ms;
    });
    double total = 0; // a widened kernel's time holds its inner kernel's
    for (const auto &r : rows)
      if (r.first.rfind("widened ", 0) != 0)
        total += r.second.ms;
    std::fprintf(f, "op\tms\truns\tshare (of %.3f ms)\n", total);
    for (const auto &[op, t] : rows)
      std::fprintf(f, "%s\t%.3f\t%lld\t%.3f\n", op.c_str(), t.ms,
                   (long long)t.runs, total > 0 ? t.ms / total : 0.0);
    std::fclose(f);
  }
  FactoryRegistry registry;
  HostWaits waits;
  /// Between beginCapture and endCapture; what made the capture unusable.
  bool capturing = false;
  std::string captureFailure;
  std::vector<cudaGraphExec_t> graphs;
  std::string timesPath;
  std::unique_ptr<std::map<std::string, OpTime>> times;
};

/// Every CUDA kernel: the node's name, the backend's stream and handles, and
/// its run-time scratch (placed by the executor in its activation arena, or
/// allocated at the first run when the kernel runs without an executor).
class CudaKernel : public Kernel {
public:
  CudaKernel(CudaBackend &backend, const OpSpec &spec)
      : backend(backend), stream(backend.stream), nodeName(spec.name),
        op(spec.opType) {}
  ~CudaKernel() override {
    if (ownScratch)
      cudaFree(ownScratch);
    // The last run's time is not added: the backend may be gone.
    if (events[0]) {
      cudaEventDestroy(events[0]);
      cudaEventDestroy(events[1]);
    }
  }
  void run(const std::vector<TensorRef> &in,
           const std::vector<TensorRef> &out) final {
    KernelScope scope(nodeName, op);
    if (scratchBytes && !scratch) {
      check(cudaMalloc(&ownScratch, scratchBytes), "cudaMalloc (workspace)");
      scratch = static_cast<char *>(ownScratch);
    }
    auto *times = backend.kernelTimes();
    if (!times) {
      compute(in, out);
      return;
    }
    // The previous run's time (that step has finished: steps end with a
    // synchronization), then this run between two events. The first run is
    // not counted: cuDNN and cuBLAS load their kernels in it.
    if (!events[0]) {
      check(cudaEventCreate(&events[0]), "cudaEventCreate");
      check(cudaEventCreate(&events[1]), "cudaEventCreate");
    } else if (counted++) {
      addTime(*times);
    } else {
      recorded = false;
    }
    check(cudaEventRecord(events[0], stream), "cudaEventRecord");
    compute(in, out);
    check(cudaEventRecord(events[1], stream), "cudaEventRecord");
    recorded = true;
  }
  size_t workspaceBytes() const final { return scratchBytes; }
  void setWorkspace(void *ptr) final { scratch = static_cast<char *>(ptr); }

protected:
  virtual void compute(const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out) = 0;
  /// Reserves `bytes` of scratch; returns its offset. Call from the
  /// constructor.
  size_t reserve(size_t bytes) {
    size_t off = scratchBytes;
    scratchBytes += (bytes + 255) / 256 * 256;
    return off;
  }
  template <typename T> T *scratchAt(size_t offset) const {
    return reinterpret_cast<T *>(scratch + offset);
  }

  CudaBackend &backend;
  cudaStream_t stream;
  std::string nodeName, op;

private:
  void addTime(std::map<std::string, CudaBackend::OpTime> &times) {
    float ms = 0;
    if (!recorded || cudaEventSynchronize(events[1]) != cudaSuccess ||
        cudaEventElapsedTime(&ms, events[0], events[1]) != cudaSuccess)
      return;
    recorded = false;
    CudaBackend::OpTime &t = times[op];
    t.ms += ms;
    ++t.runs;
  }
  size_t scratchBytes = 0;
  char *scratch = nullptr;
  void *ownScratch = nullptr;
  cudaEvent_t events[2] = {nullptr, nullptr};
  bool recorded = false;
  int64_t counted = 0; ///< runs after the first whose time was asked for
};

/// A kernel that is one function of the buffers.
class LambdaKernel final : public CudaKernel {
public:
  using Body = std::function<void(cudaStream_t, const std::vector<TensorRef> &,
                                  const std::vector<TensorRef> &)>;
  LambdaKernel(CudaBackend &backend, const OpSpec &spec, Body body)
      : CudaKernel(backend, spec), body(std::move(body)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    body(stream, in, out);
  }

private:
  Body body;
};

inline std::unique_ptr<Kernel> lambda(CudaBackend &b, const OpSpec &spec,
                                      LambdaKernel::Body body) {
  return std::make_unique<LambdaKernel>(b, spec, std::move(body));
}

/// A kernel's small operands read on the host (Slice's starts, Dropout's
/// ratio, Pad's pads, Clip's bounds): from the values the executor folded
/// into the OpSpec when the operand is a constant of the program, else
/// copied back from the device, which waits for the stream (counted in
/// hostWaits).
class HostOperands {
public:
  HostOperands(CudaBackend &be, const OpSpec &spec)
      : be(&be), values(spec.inputValues) {}
  /// `bytes` bytes of operand `i` into `dst`.
  void read(const std::vector<TensorRef> &in, size_t i, void *dst,
            size_t bytes) const {
    if (i < values.size() && values[i].size() >= bytes)
      std::memcpy(dst, values[i].data(), bytes);
    else
      be->copyToHost(dst, in[i].data, bytes);
  }
  /// The elements of an i64/i32 operand; empty when absent.
  std::vector<int64_t> ints(const std::vector<TensorRef> &in, size_t i) const {
    std::vector<int64_t> v;
    if (i >= in.size() || !in[i].data)
      return v;
    size_t n = size_t(in[i].numel());
    if (in[i].desc.dtype == DType::I64) {
      v.resize(n);
      read(in, i, v.data(), n * sizeof(int64_t));
      return v;
    }
    std::vector<int32_t> w(n);
    read(in, i, w.data(), n * sizeof(int32_t));
    return std::vector<int64_t>(w.begin(), w.end());
  }
  /// Operand `i` as a number (f32, i64, i32 or bool); false when it is
  /// absent, as the CPU backend's scalarOperand.
  bool scalar(const std::vector<TensorRef> &in, size_t i, double &v) const {
    if (i >= in.size() || !in[i].data || in[i].numel() == 0)
      return false;
    char raw[8] = {};
    read(in, i, raw, dtypeSize(in[i].desc.dtype));
    switch (in[i].desc.dtype) {
    case DType::F32:
      v = *reinterpret_cast<float *>(raw);
      return true;
    case DType::I64:
      v = double(*reinterpret_cast<int64_t *>(raw));
      return true;
    case DType::I32:
      v = double(*reinterpret_cast<int32_t *>(raw));
      return true;
    case DType::Bool:
      v = raw[0] ? 1.0 : 0.0;
      return true;
    default:
      return false;
    }
  }

private:
  CudaBackend *be;
  std::vector<std::vector<char>> values;
};

/// Tensor `i` of `t` for the kernels that take f32 or bf16; absent (null)
/// past the end or when the executor left it unbound.
inline FloatPtr floatAt(const std::vector<TensorRef> &t, size_t i) {
  if (i >= t.size() || !t[i].data)
    return {};
  return {t[i].data, t[i].desc.dtype == DType::BF16};
}

/// `spec` with its bf16 tensors described as f32: what the checks of a
/// kernel that takes either (FloatPtr) see.
inline OpSpec bf16AsF32(const OpSpec &spec) {
  OpSpec checked = spec;
  for (auto *descs : {&checked.inputs, &checked.outputs})
    for (TensorDesc &d : *descs)
      if (d.dtype == DType::BF16)
        d.dtype = DType::F32;
  return checked;
}

/// True when every tensor of `spec` is of the 16-bit type `t`.
inline bool sameLowFloat(const OpSpec &spec, DType t) {
  for (const auto *descs : {&spec.inputs, &spec.outputs})
    for (const TensorDesc &d : *descs)
      if (d.dtype != t)
        return false;
  return !spec.outputs.empty();
}

//===----------------------------------------------------------------------===//
// Helpers the families share, and the families
//===----------------------------------------------------------------------===//

/// `in` broadcast onto `out` (numpy, aligned right) as strides of `out`'s
/// dimensions (ArithmeticKernels.cpp).
bool broadcastStrides(const std::vector<int64_t> &in,
                      const std::vector<int64_t> &out, int64_t *strides);

/// The operands of `spec` broadcast onto `out`; a failure when one
/// does not broadcast or there are more than the kernels take.
Status makeBroadcast(const OpSpec &spec, const std::vector<int64_t> &out,
                     Broadcast &b);

/// x of shape `xs` summed onto `kept` (same rank after aligning right, each
/// dimension kept whole or reduced to 1).
bool makeReduction(const std::vector<int64_t> &xs, std::vector<int64_t> kept,
                   Reduction &r);

/// Each op family's factories, one file each, named as the CPU backend's
/// (docs/adding-an-op.md): Conv/ConvGrad/ConvTranspose(Grad) on cuDNN
/// (ConvKernels.cpp); Gemm/GemmGrad/MatMul/FusedMatMul on cuBLAS
/// (GemmKernels.cpp); BatchNormalization and LayerNormalization with their
/// gradients (NormKernels.cpp); MaxPool, AveragePool and GlobalAveragePool
/// with their gradients (PoolKernels.cpp); Dropout/DropoutGrad
/// (DropoutKernels.cpp); SoftmaxCrossEntropyLoss(Grad) (LossKernels.cpp);
/// the activations, Clip, comparisons, logic, Where and softmax
/// (PointwiseKernels.cpp); copies, views, gathers and fills
/// (ShapeKernels.cpp); broadcast arithmetic and reductions
/// (ArithmeticKernels.cpp); Cast (LowPrecision.cpp). There are no
/// recurrent kernels (LSTM and GRU are CPU-only).
void registerConvKernels(FactoryRegistry &registry);
void registerGemmKernels(FactoryRegistry &registry);
void registerNormKernels(FactoryRegistry &registry);
void registerPoolKernels(FactoryRegistry &registry);
void registerDropoutKernels(FactoryRegistry &registry);
void registerLossKernels(FactoryRegistry &registry);
void registerPointwiseKernels(FactoryRegistry &registry);
void registerShapeKernels(FactoryRegistry &registry);
void registerArithmeticKernels(FactoryRegistry &registry);
void registerLowPrecisionKernels(FactoryRegistry &registry);
void registerAttentionKernels(FactoryRegistry &registry);
void registerIndexKernels(FactoryRegistry &registry);

} // namespace oasr::rt::cuda

#endif // OASR_RUNTIME_CUDA_CUDABACKEND_H
