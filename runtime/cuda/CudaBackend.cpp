//===- CudaBackend.cpp - The cuDNN/cuBLAS kernel backend ------------------===//
//
// createCudaBackend(): device memory, one compute stream that every kernel,
// copy and optimizer update of the backend is issued on (so they run in plan
// order without host synchronization), cuBLAS for Gemm/GemmGrad/MatMul,
// cuDNN for convolutions, and the hand-written kernels of CudaKernels.cu for
// the rest. Op names, operand conventions and checks follow the CPU backend
// (runtime/cpu); an op it does not implement is an error naming the node.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "oasr/Runtime/Cuda.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace oasr::rt::cuda {
namespace {

//===----------------------------------------------------------------------===//
// Errors and checks
//===----------------------------------------------------------------------===//

void checkBlas(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  std::fprintf(stderr, "oasr: fatal: %s: cuBLAS error %s\n", what,
               cublasGetStatusName(status));
  std::abort();
}

void checkDnn(cudnnStatus_t status, const char *what) {
  if (status == CUDNN_STATUS_SUCCESS)
    return;
  std::fprintf(stderr, "oasr: fatal: %s: %s\n", what,
               cudnnGetErrorString(status));
  std::abort();
}

//===----------------------------------------------------------------------===//
// The backend and the kernel base class
//===----------------------------------------------------------------------===//

/// The convolutions' math: FP32 FMA (f32, matching the CPU backend and
/// PyTorch's FP32 reference) unless the step is compiled for tf32, where
/// cuDNN may use TF32 tensor cores. Set by CudaBackend::setPrecision before
/// any kernel is created (one backend per process).
static cudnnMathType_t gConvMath = CUDNN_FMA_MATH;

class CudaBackend;
using Factory = std::function<std::unique_ptr<Kernel>(
    CudaBackend &, const OpSpec &, std::string &)>;
std::unique_ptr<Kernel> createLowPrecision(CudaBackend &be, const OpSpec &spec,
                                           std::string &error);

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
  bool setPrecision(const std::string &precision, std::string &error,
                    std::string &warning) override {
    (void)warning;
    // tf32: f32 products on TF32 tensor cores. f32 and bf16: f32 products
    // on FP32 units (autocast's f32 ops stay f32); bf16 products run on
    // tensor cores by their element type.
    bool tf32 = precision == "tf32";
    if (precision == "f16") {
      error = "f16 steps scale the loss, and the cuda backend does not yet "
              "check and unscale gradients on the device; use "
              "--precision=bf16 (the same tensor cores, no loss scaling)";
      return false;
    }
    if (!tf32 && precision != "f32" && precision != "bf16") {
      error = "the cuda backend has no '" + precision + "' kernels";
      return false;
    }
    gConvMath = tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    checkBlas(cublasSetMathMode(blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                           : CUBLAS_DEFAULT_MATH),
              "cublasSetMathMode");
    return true;
  }
  std::unique_ptr<Kernel> create(const OpSpec &spec,
                                 std::string &error) override {
    if (hasLowFloat(spec))
      return createLowPrecision(*this, spec, error);
    return createNative(spec, error);
  }
  /// The registered factory's kernel for `spec` as it is.
  std::unique_ptr<Kernel> createNative(const OpSpec &spec, std::string &error) {
    return createRegistered(
        registry, spec, "cuda", error,
        [&](const Factory &factory) { return factory(*this, spec, error); });
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
    return algo == "sgd" || algo == "momentum" || algo == "adagrad" ||
           algo == "adam";
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
  std::map<std::string, Factory> registry;
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
    if (scratchBytes && !scratch) {
      check(cudaMalloc(&ownScratch, scratchBytes), nodeName.c_str());
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

std::unique_ptr<Kernel> lambda(CudaBackend &b, const OpSpec &spec,
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

//===----------------------------------------------------------------------===//
// Mixed precision: nodes with bf16/f16 tensors
//===----------------------------------------------------------------------===//
//
// As on the CPU (runtime/cpu/LowPrecision.cpp): the kernels that take 16-bit
// tensors themselves get the node as it is (cuDNN convolutions and cuBLAS
// products on tensor cores with f32 accumulation, the byte-moving views,
// Cast); every other node runs its f32 kernel between widening and
// narrowing conversions in its scratch (the executor's arena), so the saved
// activations stay 16-bit and every op runs.

/// A node with 16-bit tensors run by the f32 kernel of the same node.
class WidenedKernel final : public CudaKernel {
public:
  WidenedKernel(CudaBackend &be, const OpSpec &spec,
                std::unique_ptr<Kernel> inner)
      : CudaKernel(be, spec), inner(std::move(inner)) {
    op = "widened " + op; // its kernel times include the inner kernel's
    for (const TensorDesc &d : spec.inputs)
      ins.push_back(slot(d));
    for (const TensorDesc &d : spec.outputs)
      outs.push_back(slot(d));
    innerBytes = this->inner->workspaceBytes();
    if (innerBytes)
      innerAt = reserve(innerBytes);
  }
  bool randomPosition(uint64_t &position) const override {
    return inner->randomPosition(position);
  }
  void setRandomPosition(uint64_t position) override {
    inner->setRandomPosition(position);
  }

protected:
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    if (innerBytes && !innerPlaced) {
      inner->setWorkspace(scratchAt<char>(innerAt));
      innerPlaced = true;
    }
    std::vector<TensorRef> wideIn = in, wideOut = out;
    auto widen = [&](const Slot &sl, TensorRef &ref) {
      ref.data = scratchAt<float>(sl.at);
      ref.desc.dtype = DType::F32;
    };
    for (size_t i = 0; i < in.size(); ++i)
      if (ins[i].at != kNone && in[i].data) {
        widen(ins[i], wideIn[i]);
        launchCast(ins[i].type, DType::F32, in[i].data, wideIn[i].data,
                   ins[i].numel, stream);
      }
    for (size_t i = 0; i < out.size(); ++i)
      if (outs[i].at != kNone && out[i].data)
        widen(outs[i], wideOut[i]);
    inner->run(wideIn, wideOut);
    for (size_t i = 0; i < out.size(); ++i)
      if (outs[i].at != kNone && out[i].data)
        launchCast(DType::F32, outs[i].type, wideOut[i].data, out[i].data,
                   outs[i].numel, stream);
  }

private:
  static constexpr size_t kNone = ~size_t(0);
  struct Slot {
    DType type = DType::F32;
    int64_t numel = 0;
    size_t at = kNone; ///< f32 scratch; kNone for tensors passed as they are
  };
  Slot slot(const TensorDesc &d) {
    Slot sl{d.dtype, d.numel(), kNone};
    if (isLowFloat(d.dtype) && sl.numel)
      sl.at = reserve(size_t(sl.numel) * sizeof(float));
    return sl;
  }
  std::unique_ptr<Kernel> inner;
  std::vector<Slot> ins, outs;
  size_t innerBytes = 0, innerAt = 0;
  bool innerPlaced = false;
};

/// Kernels that read and write 16-bit tensors themselves (their factories
/// refuse a mix they cannot run, which then runs widened).
bool takesLowFloat(const std::string &op) {
  static const std::set<std::string> ops = {
      // Tensor cores, f32 accumulation.
      "Conv", "ConvGrad", "MatMul", "FusedMatMul", "Gemm", "GemmGrad",
      // bf16 elements (any mix with f32), f32 arithmetic and statistics.
      "Add", "Sub", "Mul", "Div", "Sum", "Relu", "ReluGrad",
      "BatchNormalization", "BatchNormalizationGrad", "LayerNormalization",
      "LayerNormalizationGrad", "Softmax", "LogSoftmax", "SoftmaxGrad",
      "LogSoftmaxGrad", "SoftmaxGrad_13", "LogSoftmaxGrad_13", "ReduceSumTo",
      "Abs", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Elu", "LeakyRelu",
      "HardSigmoid", "HardSwish", "Mish", "Reciprocal", "Gelu", "SigmoidGrad",
      "TanhGrad", "EluGrad", "LeakyReluGrad", "HardSigmoidGrad",
      "HardSwishGrad", "MishGrad", "GeluGrad", "ClipGrad",
      // Byte moves of any element type.
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose",
      "Gather", "Concat", "Split", "Where",
      // Distinct indices: stores of bf16 elements.
      "GatherGrad",
      // Converts between any two types.
      "Cast"};
  return ops.count(op) != 0;
}

std::unique_ptr<Kernel> createLowPrecision(CudaBackend &be, const OpSpec &spec,
                                           std::string &error) {
  return createLowPrecisionKernel(
      spec, takesLowFloat(spec.opType),
      [&](const OpSpec &s, std::string &e) { return be.createNative(s, e); },
      [&](std::unique_ptr<Kernel> inner) -> std::unique_ptr<Kernel> {
        return std::make_unique<WidenedKernel>(be, spec, std::move(inner));
      },
      error);
}

/// Tensor `i` of `t` for the kernels that take f32 or bf16; absent (null)
/// past the end or when the executor left it unbound.
FloatPtr floatAt(const std::vector<TensorRef> &t, size_t i) {
  if (i >= t.size() || !t[i].data)
    return {};
  return {t[i].data, t[i].desc.dtype == DType::BF16};
}

/// `spec` with its bf16 tensors described as f32: what the checks of a
/// kernel that takes either (FloatPtr) see.
OpSpec bf16AsF32(const OpSpec &spec) {
  OpSpec checked = spec;
  for (auto *descs : {&checked.inputs, &checked.outputs})
    for (TensorDesc &d : *descs)
      if (d.dtype == DType::BF16)
        d.dtype = DType::F32;
  return checked;
}

/// True when every tensor of `spec` is of the 16-bit type `t`.
bool sameLowFloat(const OpSpec &spec, DType t) {
  for (const auto *descs : {&spec.inputs, &spec.outputs})
    for (const TensorDesc &d : *descs)
      if (d.dtype != t)
        return false;
  return !spec.outputs.empty();
}

//===----------------------------------------------------------------------===//
// Broadcast arithmetic, reductions, copies, Constant
//===----------------------------------------------------------------------===//

/// `in` broadcast onto `out` (numpy, aligned right) as strides of `out`'s
/// dimensions.
bool broadcastStrides(const std::vector<int64_t> &in,
                      const std::vector<int64_t> &out, int64_t *strides) {
  if (in.size() > out.size())
    return false;
  std::vector<int64_t> s = rowMajorStrides(in);
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < out.size(); ++d) {
    strides[d] = 0;
    if (d < off || in[d - off] == 1)
      continue;
    if (in[d - off] != out[d])
      return false;
    strides[d] = s[d - off];
  }
  return true;
}

bool makeBroadcast(const OpSpec &spec, const std::vector<int64_t> &out,
                   Broadcast &b, std::string &error) {
  if (out.size() > size_t(kMaxRank) ||
      spec.inputs.size() > size_t(kMaxOperands)) {
    error =
        nodeError(spec, "the cuda backend broadcasts up to " +
                            std::to_string(kMaxOperands) +
                            " operands of rank <= " + std::to_string(kMaxRank));
    return false;
  }
  b.rank = std::max<int>(1, int(out.size()));
  b.operands = int(spec.inputs.size());
  b.dims[0] = 1;
  for (size_t d = 0; d < out.size(); ++d)
    b.dims[d] = out[d];
  for (size_t j = 0; j < spec.inputs.size(); ++j)
    if (!broadcastStrides(spec.inputs[j].shape, out, b.strides[j])) {
      error = nodeError(spec, "operand " + std::to_string(j) + " of shape " +
                                  shapeStr(spec.inputs[j].shape) +
                                  " does not broadcast to " + shapeStr(out));
      return false;
    }
  return true;
}

std::unique_ptr<Kernel> createNary(CudaBackend &be, const OpSpec &spec,
                                   std::string &error) {
  bool sum = spec.opType == "Sum";
  if (!checkSpec(spec, sum ? 1 : 2, sum ? kMaxOperands : 2, 1, 1, {}, {},
                 error))
    return nullptr;
  // bf16 operands and result, alone or mixed with f32 (arithmetic in f32):
  // checked as f32.
  OpSpec checked = spec.opType == "Pow" ? spec : bf16AsF32(spec);
  if (!checkBroadcastOperands(checked, error))
    return nullptr;
  DType t = spec.outputs[0].dtype;
  Broadcast b;
  if (!makeBroadcast(spec, spec.outputs[0].shape, b, error))
    return nullptr;
  for (size_t j = 0; j < spec.inputs.size(); ++j)
    b.bf16[j] = spec.inputs[j].dtype == DType::BF16;
  BinOp op = spec.opType == "Sub"   ? BinOp::Sub
             : spec.opType == "Mul" ? BinOp::Mul
             : spec.opType == "Div" ? BinOp::Div
             : spec.opType == "Pow" ? BinOp::Pow
                                    : BinOp::Add;
  int64_t n = spec.outputs[0].numel();
  return lambda(
      be, spec,
      [b, op, t, n](cudaStream_t s, const auto &in, const auto &out) mutable {
        for (size_t j = 0; j < in.size(); ++j)
          b.x[j] = in[j].data;
        launchNary(b, op, t, out[0].data, n, s);
      });
}

std::unique_ptr<Kernel> createNeg(CudaBackend &be, const OpSpec &spec,
                                  std::string &error) {
  DType t = spec.outputs[0].dtype;
  if (!checkSpec(spec, 1, 1, 1, 1, {}, {}, error) ||
      !checkDType(spec, true, 0, t, error))
    return nullptr;
  if (!isFloatOrInt(t) || spec.inputs[0].shape != spec.outputs[0].shape) {
    error = nodeError(spec, "expects X and Y of one shape, f32/i64/i32");
    return nullptr;
  }
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [t, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchNeg(t, in[0].data, out[0].data, n, s);
                });
}

/// x of shape `xs` summed onto `kept` (same rank after aligning right, each
/// dimension kept whole or reduced to 1).
bool makeReduction(const std::vector<int64_t> &xs, std::vector<int64_t> kept,
                   Reduction &r) {
  if (kept.size() > xs.size() || xs.size() > size_t(kMaxRank))
    return false;
  kept.insert(kept.begin(), xs.size() - kept.size(), 1);
  std::vector<int64_t> st = rowMajorStrides(xs);
  for (size_t d = 0; d < xs.size(); ++d) {
    if (kept[d] == xs[d] && xs[d] != 1) {
      r.outDims[r.outRank] = xs[d];
      r.outStrides[r.outRank++] = st[d];
    } else if (kept[d] == 1) {
      if (xs[d] == 1)
        continue;
      r.redDims[r.redRank] = xs[d];
      r.redStrides[r.redRank++] = st[d];
      r.inner *= xs[d];
    } else {
      return false;
    }
  }
  return true;
}

/// ReduceMean / ReduceSum {axes, keepdims} (axes as an attribute, or
/// keepdims = 1 with the result's 1s, or all axes).
std::unique_ptr<Kernel> createReduce(CudaBackend &be, const OpSpec &spec,
                                     std::string &error) {
  std::vector<int64_t> kept;
  float scale = 1.0f;
  if (!checkSpec(spec, 1, 2, 1, 1, {0}, {0}, error) ||
      !reduceGeom(spec, kept, scale, error))
    return nullptr;
  const auto &xs = spec.inputs[0].shape;
  Reduction r;
  if (!makeReduction(xs, kept, r)) {
    error =
        nodeError(spec, "result " + shapeStr(spec.outputs[0].shape) +
                            " does not match the reduction of " + shapeStr(xs));
    return nullptr;
  }
  int64_t keptNumel = spec.outputs[0].numel();
  return lambda(
      be, spec,
      [r, scale, keptNumel](cudaStream_t s, const auto &in, const auto &out) {
        launchReduce(r, in[0].template as<float>(), scale,
                     out[0].template as<float>(), keptNumel, s);
      });
}

/// Reshape/Flatten/Squeeze/Unsqueeze/Identity: a device copy, none when the
/// executor aliased result and operand.
std::unique_ptr<Kernel> createCopy(CudaBackend &be, const OpSpec &spec,
                                   std::string &error) {
  size_t maxIn = spec.opType == "Flatten" || spec.opType == "Identity" ? 1 : 2;
  if (!checkSpec(spec, 1, maxIn, 1, 1, {}, {}, error) ||
      !checkCopyShapes(spec, error))
    return nullptr;
  size_t bytes = spec.outputs[0].bytes();
  return lambda(be, spec,
                [bytes](cudaStream_t s, const auto &in, const auto &out) {
                  if (bytes && out[0].data != in[0].data)
                    check(cudaMemcpyAsync(out[0].data, in[0].data, bytes,
                                          cudaMemcpyDeviceToDevice, s),
                          "view copy");
                });
}

/// Constant with a flat number list (the executor materializes tensors).
std::unique_ptr<Kernel> createConstant(CudaBackend &be, const OpSpec &spec,
                                       std::string &error) {
  auto bytes = std::make_shared<std::vector<char>>();
  if (!checkSpec(spec, 0, 0, 1, 1, {}, {}, error) ||
      !constantBytes(spec, *bytes, error))
    return nullptr;
  return lambda(
      be, spec, [bytes](cudaStream_t s, const auto &, const auto &out) {
        check(cudaMemcpyAsync(out[0].data, bytes->data(), bytes->size(),
                              cudaMemcpyHostToDevice, s),
              "Constant");
      });
}

//===----------------------------------------------------------------------===//
// Relu, softmax cross-entropy
//===----------------------------------------------------------------------===//

std::unique_ptr<Kernel> createRelu(CudaBackend &be, const OpSpec &spec,
                                   std::string &error) {
  bool grad = spec.opType == "ReluGrad";
  DType t = sameLowFloat(spec, DType::BF16) ? DType::BF16 : DType::F32;
  if (!checkArity(spec, grad ? 2 : 1, grad ? 2 : 1, 1, 1, error) ||
      (t == DType::F32 && !checkAllF32(spec, {0, 1}, {0}, error)))
    return nullptr;
  int64_t n = spec.outputs[0].numel();
  for (const TensorDesc &d : spec.inputs)
    if (d.numel() != n) {
      error = nodeError(spec, "operands and result must have the same size");
      return nullptr;
    }
  if (grad)
    return lambda(
        be, spec, [n, t](cudaStream_t s, const auto &in, const auto &out) {
          launchReluGrad(t, in[0].data, in[1].data, out[0].data, n, s);
        });
  return lambda(be, spec,
                [n, t](cudaStream_t s, const auto &in, const auto &out) {
                  launchRelu(t, in[0].data, out[0].data, n, s);
                });
}

class SceKernel final : public CudaKernel {
public:
  SceKernel(CudaBackend &be, const OpSpec &spec, const SceGeom &p)
      : CudaKernel(be, spec), p(p) {
    size_t rows = size_t(p.n * p.d);
    lossAt = reserve(rows * sizeof(float));
    countAt = reserve(rows * sizeof(int));
    if (spec.outputs.size() < 2)
      logProbAt = reserve(size_t(p.n * p.c * p.d) * sizeof(float));
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    float *lp =
        out.size() > 1 ? out[1].as<float>() : scratchAt<float>(logProbAt);
    launchSce(p, in[0].as<float>(), in[1].data, out[0].as<float>(), lp,
              scratchAt<float>(lossAt), scratchAt<int>(countAt), stream);
  }

private:
  SceGeom p;
  size_t lossAt = 0, countAt = 0, logProbAt = 0;
};

std::unique_ptr<Kernel> createSce(CudaBackend &be, const OpSpec &spec,
                                  std::string &error) {
  SceGeom p;
  if (!checkSpec(spec, 2, 2, 1, 2, {0}, {0, 1}, error) ||
      !sceGeom(spec, /*grad=*/false, p, error))
    return nullptr;
  return std::make_unique<SceKernel>(be, spec, p);
}

class SceGradKernel final : public CudaKernel {
public:
  SceGradKernel(CudaBackend &be, const OpSpec &spec, const SceGeom &p)
      : CudaKernel(be, spec), p(p) {
    countAt = reserve(sizeof(int));
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    launchSceGrad(p, in[0].as<float>(), in[1].as<float>(), in[2].data,
                  out[0].as<float>(), scratchAt<int>(countAt), stream);
  }

private:
  SceGeom p;
  size_t countAt = 0;
};

std::unique_ptr<Kernel> createSceGrad(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  SceGeom p;
  if (!checkSpec(spec, 3, 3, 1, 1, {0, 1}, {0}, error) ||
      !sceGeom(spec, /*grad=*/true, p, error))
    return nullptr;
  return std::make_unique<SceGradKernel>(be, spec, p);
}

//===----------------------------------------------------------------------===//
// Gemm / GemmGrad / MatMul (cuBLAS)
//===----------------------------------------------------------------------===//

/// cuBLAS's element type of `t` (f32, bf16, f16).
cudaDataType_t blasType(DType t) {
  return t == DType::BF16  ? CUDA_R_16BF
         : t == DType::F16 ? CUDA_R_16F
                           : CUDA_R_32F;
}

/// Row-major C[m,n] = alpha op(A) op(B) + beta C, A stored [m,k] (or, ta,
/// [k,m]), B stored [k,n] (or, tb, [n,k]). cuBLAS is column-major: the
/// row-major C is the column-major C^T = op(B)^T op(A)^T, so B goes first.
/// A and B are of type `ab`, C of `ct`; products of 16-bit operands run on
/// tensor cores with f32 accumulation, f32 ones as the math mode says.
void rowMajorGemm(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n,
                  int64_t k, float alpha, const void *a, const void *b,
                  float beta, void *c, DType ab = DType::F32,
                  DType ct = DType::F32) {
  cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  int lda = int(ta ? m : k), ldb = int(tb ? k : n);
  if (ab == DType::F32 && ct == DType::F32) {
    checkBlas(cublasSgemm(h, opB, opA, int(n), int(m), int(k), &alpha,
                          static_cast<const float *>(b), ldb,
                          static_cast<const float *>(a), lda, &beta,
                          static_cast<float *>(c), int(n)),
              "cublasSgemm");
    return;
  }
  checkBlas(cublasGemmEx(h, opB, opA, int(n), int(m), int(k), &alpha, b,
                         blasType(ab), ldb, a, blasType(ab), lda, &beta, c,
                         blasType(ct), int(n), CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
}

/// A kernel that is one function of the buffers and its scratch.
class ScratchKernel final : public CudaKernel {
public:
  using Body =
      std::function<void(cudaStream_t, char *, const std::vector<TensorRef> &,
                         const std::vector<TensorRef> &)>;
  ScratchKernel(CudaBackend &backend, const OpSpec &spec, size_t bytes,
                Body body)
      : CudaKernel(backend, spec), body(std::move(body)) {
    if (bytes)
      reserve(bytes);
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    body(stream, scratchAt<char>(0), in, out);
  }

private:
  Body body;
};

/// The element type of a product's operands `ops` of `spec` when they share
/// one float type and each result in `results` is f32 or that type; false
/// (with `error`) otherwise.
bool productTypes(const OpSpec &spec, std::initializer_list<size_t> ops,
                  std::initializer_list<size_t> results, DType &type,
                  std::string &error) {
  type = spec.inputs[*ops.begin()].dtype;
  bool ok = type == DType::F32 || isLowFloat(type);
  for (size_t i : ops)
    ok = ok && spec.inputs[i].dtype == type;
  for (size_t i : results)
    ok = ok && i < spec.outputs.size() &&
         (spec.outputs[i].dtype == DType::F32 || spec.outputs[i].dtype == type);
  if (!ok)
    error = nodeError(spec, "operands must share one float type (f32, bf16 "
                            "or f16), results f32 or that type");
  return ok;
}

/// Gemm: Y = alpha op(A) op(B) + beta C, C broadcast onto [M, N] first.
/// bf16/f16 A and B: a tensor-core product into Y (f32 or 16-bit); C is
/// added in f32 (in scratch when C or Y is 16-bit).
std::unique_ptr<Kernel> createGemm(CudaBackend &be, const OpSpec &spec,
                                   std::string &error) {
  GemmShape g;
  DType ab;
  if (!checkArity(spec, 2, 3, 1, 1, error) ||
      !productTypes(spec, {0, 1}, {0}, ab, error) ||
      !gemmShape(spec, spec.inputs[0], spec.inputs[1], spec.outputs[0], g,
                 error))
    return nullptr;
  bool bias = spec.inputs.size() == 3 && g.beta != 0.0f;
  DType yt = spec.outputs[0].dtype,
        ct = bias ? spec.inputs[2].dtype : DType::F32;
  if (bias && ct != DType::F32 && !isLowFloat(ct)) {
    error = nodeError(spec, "C must be a float tensor");
    return nullptr;
  }
  Broadcast b;
  if (bias) {
    OpSpec c = spec;
    c.inputs = {spec.inputs[2]};
    if (!makeBroadcast(c, spec.outputs[0].shape, b, error))
      return nullptr;
  }
  // Scratch: C widened to f32, then the f32 result when Y is 16-bit.
  int64_t cNumel = bias ? spec.inputs[2].numel() : 0, yNumel = g.m * g.n;
  size_t cBytes = bias && ct != DType::F32 ? size_t(cNumel) * 4 : 0;
  size_t cSlot = (cBytes + 255) / 256 * 256;
  size_t yBytes = bias && yt != DType::F32 ? size_t(yNumel) * 4 : 0;
  cublasHandle_t h = be.blas;
  return std::make_unique<ScratchKernel>(
      be, spec, cSlot + yBytes,
      [=](cudaStream_t s, char *scratch, const auto &in,
          const auto &out) mutable {
        void *y = out[0].data;
        if (!bias) {
          rowMajorGemm(h, g.ta, g.tb, g.m, g.n, g.k, g.alpha, in[0].data,
                       in[1].data, 0.0f, y, ab, yt);
          return;
        }
        b.x[0] = in[2].data;
        if (cBytes) {
          launchCast(ct, DType::F32, in[2].data, scratch, cNumel, s);
          b.x[0] = scratch;
        }
        float *yF = yBytes ? reinterpret_cast<float *>(scratch + cSlot)
                           : static_cast<float *>(y);
        launchExpand(b, 1.0f, yF, yNumel, s);
        rowMajorGemm(h, g.ta, g.tb, g.m, g.n, g.k, g.alpha, in[0].data,
                     in[1].data, g.beta, yF, ab, DType::F32);
        if (yBytes)
          launchCast(DType::F32, yt, yF, y, yNumel, s);
      });
}

/// GemmGrad: dY, A, B -> dA, dB[, dC] (the CPU backend's products). bf16/f16
/// operands: tensor-core products into dA and dB of their own types; dC
/// sums dY in f32.
std::unique_ptr<Kernel> createGemmGrad(CudaBackend &be, const OpSpec &spec,
                                       std::string &error) {
  GemmShape g;
  DType ab;
  if (!checkArity(spec, 3, 3, 2, 3, error) ||
      !productTypes(spec, {0, 1, 2}, {0, 1}, ab, error) ||
      !gemmGradShape(spec, g, error))
    return nullptr;
  bool wantC = spec.outputs.size() == 3;
  Reduction r;
  if (wantC && !makeReduction({g.m, g.n}, spec.outputs[2].shape, r)) {
    error = gemmBiasError(spec, spec.outputs[2], g.m, g.n);
    return nullptr;
  }
  DType at = spec.outputs[0].dtype, bt = spec.outputs[1].dtype,
        ct = wantC ? spec.outputs[2].dtype : DType::F32;
  if (ct != DType::F32 && !isLowFloat(ct)) {
    error = nodeError(spec, "dC must be a float tensor");
    return nullptr;
  }
  bool wantA = outputUsed(spec, 0), wantB = outputUsed(spec, 1);
  int64_t cNumel = wantC ? spec.outputs[2].numel() : 0, dyNumel = g.m * g.n;
  // Scratch: dY widened to f32 for dC's sums, and dC in f32 when 16-bit.
  size_t dyBytes = wantC && ab != DType::F32 ? size_t(dyNumel) * 4 : 0;
  size_t dySlot = (dyBytes + 255) / 256 * 256;
  size_t cBytes = wantC && ct != DType::F32 ? size_t(cNumel) * 4 : 0;
  cublasHandle_t h = be.blas;
  return std::make_unique<ScratchKernel>(
      be, spec, dySlot + cBytes,
      [=](cudaStream_t s, char *scratch, const auto &in, const auto &out) {
        const void *dy = in[0].data, *a = in[1].data, *b = in[2].data;
        if (wantA) {
          void *da = out[0].data;
          if (!g.ta) // dA[M,K] = dY[M,N] op(B)^T
            rowMajorGemm(h, false, !g.tb, g.m, g.k, g.n, g.alpha, dy, b, 0.0f,
                         da, ab, at);
          else // dA[K,M] = op(B)[K,N] dY^T
            rowMajorGemm(h, g.tb, true, g.k, g.m, g.n, g.alpha, b, dy, 0.0f, da,
                         ab, at);
        }
        if (wantB) {
          void *db = out[1].data;
          if (!g.tb) // dB[K,N] = op(A)^T[K,M] dY
            rowMajorGemm(h, !g.ta, false, g.k, g.n, g.m, g.alpha, a, dy, 0.0f,
                         db, ab, bt);
          else // dB[N,K] = dY^T[N,M] op(A)
            rowMajorGemm(h, true, g.ta, g.n, g.k, g.m, g.alpha, dy, a, 0.0f, db,
                         ab, bt);
        }
        if (!wantC)
          return;
        const float *dyF = static_cast<const float *>(dy);
        if (dyBytes) {
          launchCast(ab, DType::F32, dy, scratch, dyNumel, s);
          dyF = reinterpret_cast<const float *>(scratch);
        }
        float *c = cBytes ? reinterpret_cast<float *>(scratch + dySlot)
                          : out[2].template as<float>();
        launchReduce(r, dyF, g.beta, c, cNumel, s);
        if (cBytes)
          launchCast(DType::F32, ct, c, out[2].data, cNumel, s);
      });
}

/// MatMul (numpy): 1-D operands promoted. Batch dimensions equal, or all 1
/// on one side: one strided batched product (a zero stride broadcasts).
/// Otherwise ([2, 1, M, K] x [1, 3, K, N]) one product per result matrix,
/// at the operands' matrices numpy's broadcasting pairs it with.
/// FusedMatMul {transA, transB, alpha} (com.microsoft, which
/// oasr-fuse-matmul-transpose emits): the same with transposed operands
/// read by cuBLAS as they are stored.
std::unique_ptr<Kernel> createMatMul(CudaBackend &be, const OpSpec &spec,
                                     std::string &error) {
  DType ab;
  if (!checkArity(spec, 2, 2, 1, 1, error) ||
      !productTypes(spec, {0, 1}, {0}, ab, error))
    return nullptr;
  bool fused = spec.opType == "FusedMatMul";
  bool ta = fused && spec.attrs.getInt("transA", 0) != 0,
       tb = fused && spec.attrs.getInt("transB", 0) != 0;
  float alpha = fused ? float(spec.attrs.getFloat("alpha", 1.0)) : 1.0f;
  if (fused && (spec.attrs.getInt("transBatchA", 0) ||
                spec.attrs.getInt("transBatchB", 0))) {
    error = nodeError(spec, "transBatchA/transBatchB are not supported");
    return nullptr;
  }
  // The logical (untransposed) operands, for MatMul's shape rule.
  OpSpec logical = spec;
  for (auto [i, t] : {std::pair<size_t, bool>{0, ta}, {1, tb}}) {
    auto &sh = logical.inputs[i].shape;
    if (!t)
      continue;
    if (sh.size() < 2) {
      error = nodeError(spec, "transposed operands must have rank >= 2");
      return nullptr;
    }
    std::swap(sh[sh.size() - 1], sh[sh.size() - 2]);
  }
  std::vector<int64_t> ad, bd, yd;
  if (!matMulShapes(logical, ad, bd, yd, error))
    return nullptr;
  size_t r = yd.size();
  int64_t batchA = 1, batchB = 1, batch = 1;
  bool same = true;
  for (size_t i = 0; i + 2 < r; ++i) {
    batchA *= ad[i];
    batchB *= bd[i];
    batch *= yd[i];
    same = same && ad[i] == bd[i];
  }
  int64_t m = ad[r - 2], k = ad[r - 1], n = bd[r - 1];
  // (A's matrix, B's matrix) of each result matrix, when both broadcast.
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (!same && batchA != 1 && batchB != 1) {
    for (int64_t o = 0; o < batch; ++o) {
      int64_t rest = o, ia = 0, ib = 0, sa = 1, sb = 1;
      for (size_t i = r - 2; i-- > 0;) {
        int64_t c = rest % yd[i];
        rest /= yd[i];
        ia += (ad[i] == 1 ? 0 : c) * sa;
        ib += (bd[i] == 1 ? 0 : c) * sb;
        sa *= ad[i];
        sb *= bd[i];
      }
      pairs.push_back({ia, ib});
    }
  }
  // A batch of untransposed A's against one B is one product of
  // [batch * m, k] by [k, n]: one large GEMM in place of many small ones.
  if (pairs.empty() && batchB == 1 && batchA == batch && batch > 1 && !ta) {
    m *= batch;
    batchA = batch = 1;
  }
  long long strideA = batchA == 1 ? 0 : m * k,
            strideB = batchB == 1 ? 0 : k * n;
  DType yt = spec.outputs[0].dtype;
  size_t ea = dtypeSize(ab), ey = dtypeSize(yt);
  cublasHandle_t h = be.blas;
  return lambda(be, spec, [=](cudaStream_t, const auto &in, const auto &out) {
    const char *a = static_cast<const char *>(in[0].data),
               *b = static_cast<const char *>(in[1].data);
    char *y = static_cast<char *>(out[0].data);
    for (size_t o = 0; o < pairs.size(); ++o)
      rowMajorGemm(h, ta, tb, m, n, k, alpha, a + pairs[o].first * m * k * ea,
                   b + pairs[o].second * k * n * ea, 0.0f,
                   y + int64_t(o) * m * n * ey, ab, yt);
    if (!pairs.empty())
      return;
    const float zero = 0.0f;
    cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                      opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lda = int(ta ? m : k), ldb = int(tb ? k : n);
    if (ab == DType::F32 && yt == DType::F32) {
      checkBlas(cublasSgemmStridedBatched(
                    h, opB, opA, int(n), int(m), int(k), &alpha,
                    reinterpret_cast<const float *>(b), ldb, strideB,
                    reinterpret_cast<const float *>(a), lda, strideA, &zero,
                    reinterpret_cast<float *>(y), int(n), m * n, int(batch)),
                "cublasSgemmStridedBatched");
      return;
    }
    checkBlas(cublasGemmStridedBatchedEx(
                  h, opB, opA, int(n), int(m), int(k), &alpha, b, blasType(ab),
                  ldb, strideB, a, blasType(ab), lda, strideA, &zero, y,
                  blasType(yt), int(n), m * n, int(batch), CUBLAS_COMPUTE_32F,
                  CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
  });
}

//===----------------------------------------------------------------------===//
// Windows: convolutions and pooling
//===----------------------------------------------------------------------===//

/// cuDNN descriptors of one convolution (1-D convolutions get a trailing
/// spatial dimension of 1: cuDNN wants at least 4-D tensors).
class ConvDescs {
public:
  ConvDescs() {
    checkDnn(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    checkDnn(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    checkDnn(cudnnCreateTensorDescriptor(&b), "cudnnCreateTensorDescriptor");
    checkDnn(cudnnCreateTensorDescriptor(&xPlain),
             "cudnnCreateTensorDescriptor");
    checkDnn(cudnnCreateTensorDescriptor(&xBias),
             "cudnnCreateTensorDescriptor");
    checkDnn(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    checkDnn(cudnnCreateConvolutionDescriptor(&conv),
             "cudnnCreateConvolutionDescriptor");
  }
  ~ConvDescs() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(b);
    cudnnDestroyTensorDescriptor(xPlain);
    cudnnDestroyTensorDescriptor(xBias);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  ConvDescs(const ConvDescs &) = delete;
  ConvDescs &operator=(const ConvDescs &) = delete;

  /// Sets every descriptor; false (with `error`) where cuDNN cannot express
  /// the node.
  bool init(const OpSpec &spec, const TensorDesc &xd, const TensorDesc &wd,
            const TensorDesc &yd, std::string &error) {
    type = xd.dtype == DType::BF16  ? CUDNN_DATA_BFLOAT16
           : xd.dtype == DType::F16 ? CUDNN_DATA_HALF
                                    : CUDNN_DATA_FLOAT;
    int64_t group = 1;
    Window win;
    if (!convWindow(spec, xd, wd, yd, group, win, error))
      return false;
    auto dims4 = [](std::vector<int64_t> s) {
      if (s.size() == 3)
        s.push_back(1);
      return std::vector<int>(s.begin(), s.end());
    };
    // cuDNN pads both sides alike. Asymmetric pads (auto_pad SAME_* with an
    // even window, or explicit) pad by the smaller side there; the rest is
    // copied in: X goes into a buffer `padX` makes, and dX is cropped from
    // the gradient of that buffer by `cropX`.
    std::vector<int> pad;
    std::vector<int64_t> xp = xd.shape;
    padX = PadParams{};
    for (size_t i = 0; i < win.padL.size(); ++i) {
      int64_t lo = std::min(win.padL[i], win.padR[i]);
      pad.push_back(int(lo));
      padX.begin[2 + i] = win.padL[i] - lo;
      xp[2 + i] += win.padL[i] + win.padR[i] - 2 * lo;
    }
    padded = xp != xd.shape;
    paddedNumel = 1;
    cropX = PadParams{};
    padX.rank = cropX.rank = int(xd.rank());
    for (size_t i = 0; i < xd.rank(); ++i) {
      padX.inDims[i] = cropX.outDims[i] = xd.shape[i];
      padX.outDims[i] = cropX.inDims[i] = xp[i];
      cropX.begin[i] = -padX.begin[i];
      paddedNumel *= xp[i];
    }
    std::vector<int> stride(win.strides.begin(), win.strides.end()), dil;
    for (int64_t d : win.dilations) // Window's are ONNX dilations - 1
      dil.push_back(int(d + 1));
    if (xd.rank() == 3) {
      pad.push_back(0);
      stride.push_back(1);
      dil.push_back(1);
    }
    setTensor(x, dims4(xp));
    setTensor(xPlain, dims4(xd.shape));
    setTensor(y, dims4(yd.shape));
    std::vector<int> bd(dims4(yd.shape).size(), 1);
    bd[1] = int(yd.shape[1]);
    setTensor(b, bd);
    bd[1] = int(xd.shape[1]);
    setTensor(xBias, bd);
    std::vector<int> wdims = dims4(wd.shape);
    checkDnn(cudnnSetFilterNdDescriptor(w, type, CUDNN_TENSOR_NCHW,
                                        int(wdims.size()), wdims.data()),
             "cudnnSetFilterNdDescriptor");
    checkDnn(cudnnSetConvolutionNdDescriptor(
                 conv, int(pad.size()), pad.data(), stride.data(), dil.data(),
                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
             "cudnnSetConvolutionNdDescriptor");
    checkDnn(cudnnSetConvolutionGroupCount(conv, int(group)),
             "cudnnSetConvolutionGroupCount");
    // f32: FP32 FMA kernels unless the step is tf32 (gConvMath); 16-bit
    // data: tensor cores, f32 accumulation (the descriptor's compute type).
    checkDnn(cudnnSetConvolutionMathType(conv, type == CUDNN_DATA_FLOAT
                                                   ? gConvMath
                                                   : CUDNN_TENSOR_OP_MATH),
             "cudnnSetConvolutionMathType");
    return true;
  }

  /// The convolution's input `x` (padded, see below), output `y`, bias
  /// over y's channels `b`, weights `w`; the input unpadded (`xPlain`) and a
  /// bias over its channels (`xBias`), for the transposed convolution,
  /// whose result is this convolution's input.
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr,
                          xPlain = nullptr, xBias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  /// The tensors' element type (f32, bf16 or f16; one for all).
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  /// Asymmetric pads: `x` describes X padded by the rest (paddedNumel
  /// elements), made by padX; cropX takes dX back out of its gradient.
  bool padded = false;
  int64_t paddedNumel = 0;
  PadParams padX, cropX;

private:
  void setTensor(cudnnTensorDescriptor_t d, const std::vector<int> &dims) {
    std::vector<int> strides(dims.size());
    int acc = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      strides[i] = acc;
      acc *= dims[i];
    }
    checkDnn(cudnnSetTensorNdDescriptor(d, type, int(dims.size()), dims.data(),
                                        strides.data()),
             "cudnnSetTensorNdDescriptor");
  }
};

/// The first deterministic algorithm of cuDNN's heuristic list (runs then
/// repeat bitwise, which the strategy-invariance tests rely on).
template <typename Perf, typename Algo>
bool pickAlgo(const Perf *perf, int count, Algo &algo) {
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS &&
        perf[i].determinism == CUDNN_DETERMINISTIC) {
      algo = perf[i].algo;
      return true;
    }
  return false;
}

/// The first deterministic algorithm of cuDNN's heuristic `get` (up to
/// Count candidates) into `algo`, `ws` grown to its workspace (`size`); both
/// queries take the handle and `descs`. False when there is none.
template <typename Perf, int Count, typename Algo, typename Get, typename Size,
          typename... Desc>
bool chooseAlgo(Algo &algo, size_t &ws, Get &get, const char *getName,
                Size &size, const char *sizeName, cudnnHandle_t h,
                Desc... descs) {
  Perf perf[Count];
  int n = 0;
  checkDnn(get(h, descs..., Count, &n, perf), getName);
  if (!pickAlgo(perf, n, algo))
    return false;
  size_t bytes = 0;
  checkDnn(size(h, descs..., algo, &bytes), sizeName);
  ws = std::max(ws, bytes);
  return true;
}

/// The four convolution nodes on one cuDNN convolution, whose input side
/// (`x`: padded by the asymmetric rest when there is one) and output side
/// (`y`) are:
///   Conv            X, W[, B] -> Y          x = X,  y = Y: forward
///   ConvGrad        dY, X, W -> dX, dW[, dB] x = X,  y = dY: backward data
///                                            and filter, bias from dY
///   ConvTranspose   X, W[, B] -> Y          x = Y,  y = X: backward data
///                                            (the transposed convolution is
///                                            the data gradient of the one
///                                            mapping Y back to X), + bias
///   ConvTransposeGrad dY, X, W -> dX, dW[, dB] x = dY, y = X: forward for
///                                            dX, backward filter for dW,
///                                            dB = dY summed per channel
enum class ConvRole { Conv, ConvGrad, ConvTranspose, ConvTransposeGrad };

class ConvKernel final : public CudaKernel {
public:
  ConvKernel(CudaBackend &be, const OpSpec &spec, ConvRole role)
      : CudaKernel(be, spec), role(role) {}

  bool init(const OpSpec &spec, std::string &error) {
    const auto &in = spec.inputs;
    const auto &out = spec.outputs;
    bool gradNode =
        role == ConvRole::ConvGrad || role == ConvRole::ConvTransposeGrad;
    const TensorDesc &w = in[gradNode ? 2 : 1];
    const TensorDesc *x = nullptr, *y = nullptr;
    switch (role) {
    case ConvRole::Conv:
      x = &in[0], y = &out[0];
      break;
    case ConvRole::ConvGrad:
      x = &in[1], y = &in[0];
      break;
    case ConvRole::ConvTranspose:
      x = &out[0], y = &in[0];
      break;
    case ConvRole::ConvTransposeGrad:
      x = &in[0], y = &in[1];
      break;
    }
    if (!d.init(spec, *x, w, *y, error))
      return false;
    // 16-bit data: every tensor of one type, no bias and symmetric pads
    // (the bias and pad kernels are f32; such nodes run widened).
    DType t = x->dtype;
    if (isLowFloat(t)) {
      bool same = role == ConvRole::Conv || role == ConvRole::ConvGrad;
      for (const auto *descs : {&in, &out})
        for (const TensorDesc &dd : *descs)
          same = same && dd.dtype == t;
      bool hasBias =
          gradNode ? out.size() == 3 && outputUsed(spec, 2) : in.size() == 3;
      if (!same || hasBias || d.padded) {
        error = nodeError(spec, "16-bit convolutions take one element type, "
                                "symmetric pads and no bias");
        return false;
      }
    } else if (!checkAllF32(spec, {0, 1, 2}, {0, 1, 2}, error)) {
      return false;
    }
    // The bias: B for the forward nodes, dB for the gradients, over the
    // channels of the node's result (Conv: y; ConvTranspose: x) or dY.
    bool transposed =
        role == ConvRole::ConvTranspose || role == ConvRole::ConvTransposeGrad;
    bias = gradNode ? out.size() == 3 && outputUsed(spec, 2) : in.size() == 3;
    int64_t channels = (transposed ? *x : *y).shape[1];
    if (bias && (gradNode ? out[2] : in[2]).numel() != channels) {
      error = nodeError(spec, "B must have " + std::to_string(channels) +
                                  " elements");
      return false;
    }
    bool wantData = !gradNode || outputUsed(spec, 0);
    wantFilter = gradNode && outputUsed(spec, 1);
    // What runs: forward (Conv, ConvTransposeGrad's dX), backward data
    // (ConvGrad's dX, ConvTranspose), backward filter (both gradients).
    fwd = wantData &&
          (role == ConvRole::Conv || role == ConvRole::ConvTransposeGrad);
    bwdData = wantData &&
              (role == ConvRole::ConvGrad || role == ConvRole::ConvTranspose);
    cudnnHandle_t h = backend.dnn;
    size_t ws = 0;
    auto noAlgo = [&](const char *what) {
      error = nodeError(spec, std::string("cuDNN has no deterministic ") +
                                  what + " algorithm for this convolution");
      return false;
    };
    if (fwd && !chooseAlgo<cudnnConvolutionFwdAlgoPerf_t,
                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
                   fwdAlgo, ws, cudnnGetConvolutionForwardAlgorithm_v7,
                   "cudnnGetConvolutionForwardAlgorithm_v7",
                   cudnnGetConvolutionForwardWorkspaceSize,
                   "cudnnGetConvolutionForwardWorkspaceSize", h, d.x, d.w,
                   d.conv, d.y))
      return noAlgo("forward");
    if (bwdData &&
        !chooseAlgo<cudnnConvolutionBwdDataAlgoPerf_t,
                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
            dataAlgo, ws, cudnnGetConvolutionBackwardDataAlgorithm_v7,
            "cudnnGetConvolutionBackwardDataAlgorithm_v7",
            cudnnGetConvolutionBackwardDataWorkspaceSize,
            "cudnnGetConvolutionBackwardDataWorkspaceSize", h, d.w, d.y, d.conv,
            d.x))
      return noAlgo("backward-data");
    if (wantFilter &&
        !chooseAlgo<cudnnConvolutionBwdFilterAlgoPerf_t,
                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
            filterAlgo, ws, cudnnGetConvolutionBackwardFilterAlgorithm_v7,
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
            cudnnGetConvolutionBackwardFilterWorkspaceSize,
            "cudnnGetConvolutionBackwardFilterWorkspaceSize", h, d.x, d.y,
            d.conv, d.w))
      return noAlgo("backward-filter");
    wsBytes = ws;
    wsAt = reserve(ws);
    if (d.padded) {
      size_t bytes = size_t(d.paddedNumel) * sizeof(float);
      if (fwd || wantFilter) // x is read: padded into scratch first
        xpAt = reserve(bytes);
      if (bwdData) // x is written: into scratch, then cropped
        dxpAt = reserve(bytes);
    }
    return true;
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    cudnnHandle_t h = backend.dnn;
    const float one = 1.0f, zero = 0.0f;
    void *ws = wsBytes ? scratchAt<char>(wsAt) : nullptr;
    bool gradNode =
        role == ConvRole::ConvGrad || role == ConvRole::ConvTransposeGrad;
    const void *w = in[gradNode ? 2 : 1].data;
    // The convolution's input as cuDNN reads it (padded by the asymmetric
    // rest, or as it is), and its output side.
    const void *x = nullptr, *y = nullptr;
    switch (role) {
    case ConvRole::Conv:
      x = in[0].data;
      break;
    case ConvRole::ConvGrad:
      x = in[1].data, y = in[0].data;
      break;
    case ConvRole::ConvTranspose:
      y = in[0].data;
      break;
    case ConvRole::ConvTransposeGrad:
      x = in[0].data, y = in[1].data;
      break;
    }
    if (x && d.padded && xpAt != kNone) {
      launchPad(d.padX, static_cast<const float *>(x), scratchAt<float>(xpAt),
                0.0f, d.paddedNumel, stream);
      x = scratchAt<float>(xpAt);
    }
    if (fwd)
      checkDnn(cudnnConvolutionForward(h, &one, d.x, x, d.w, w, d.conv, fwdAlgo,
                                       ws, wsBytes, &zero, d.y, out[0].data),
               nodeName.c_str());
    if (bwdData) {
      void *dx = d.padded ? scratchAt<float>(dxpAt) : out[0].data;
      checkDnn(cudnnConvolutionBackwardData(h, &one, d.w, w, d.y, y, d.conv,
                                            dataAlgo, ws, wsBytes, &zero, d.x,
                                            dx),
               nodeName.c_str());
      if (d.padded)
        launchPad(d.cropX, static_cast<const float *>(dx), out[0].as<float>(),
                  0.0f, out[0].numel(), stream);
    }
    if (wantFilter)
      checkDnn(cudnnConvolutionBackwardFilter(h, &one, d.x, x, d.y, y, d.conv,
                                              filterAlgo, ws, wsBytes, &zero,
                                              d.w, out[1].data),
               nodeName.c_str());
    if (!bias)
      return;
    switch (role) {
    case ConvRole::Conv:
      checkDnn(cudnnAddTensor(h, &one, d.b, in[2].data, &one, d.y, out[0].data),
               nodeName.c_str());
      break;
    case ConvRole::ConvGrad:
      checkDnn(cudnnConvolutionBackwardBias(h, &one, d.y, in[0].data, &zero,
                                            d.b, out[2].data),
               nodeName.c_str());
      break;
    case ConvRole::ConvTranspose:
      checkDnn(cudnnAddTensor(h, &one, d.xBias, in[2].data, &one, d.xPlain,
                              out[0].data),
               nodeName.c_str());
      break;
    case ConvRole::ConvTransposeGrad:
      checkDnn(cudnnConvolutionBackwardBias(h, &one, d.xPlain, in[0].data,
                                            &zero, d.xBias, out[2].data),
               nodeName.c_str());
      break;
    }
  }

private:
  static constexpr size_t kNone = ~size_t(0);
  ConvRole role;
  bool bias = false, wantFilter = false, fwd = false, bwdData = false;
  ConvDescs d;
  cudnnConvolutionFwdAlgo_t fwdAlgo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t dataAlgo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnConvolutionBwdFilterAlgo_t filterAlgo =
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  size_t wsBytes = 0, wsAt = 0, xpAt = kNone, dxpAt = 0;
};

std::unique_ptr<Kernel> createConv(CudaBackend &be, const OpSpec &spec,
                                   std::string &error) {
  ConvRole role = spec.opType == "ConvGrad"        ? ConvRole::ConvGrad
                  : spec.opType == "ConvTranspose" ? ConvRole::ConvTranspose
                  : spec.opType == "ConvTransposeGrad"
                      ? ConvRole::ConvTransposeGrad
                      : ConvRole::Conv;
  bool grad = role == ConvRole::ConvGrad || role == ConvRole::ConvTransposeGrad;
  if (!(grad ? checkArity(spec, 3, 3, 2, 3, error)
             : checkArity(spec, 2, 3, 1, 1, error)))
    return nullptr;
  if (grad && (spec.outputs[0].shape != spec.inputs[1].shape ||
               spec.outputs[1].shape != spec.inputs[2].shape)) {
    error = nodeError(spec, "result shapes must be X's, W's and [C]");
    return nullptr;
  }
  if ((role == ConvRole::ConvTranspose ||
       role == ConvRole::ConvTransposeGrad) &&
      !checkConvTransposeAttrs(spec, error))
    return nullptr;
  auto k = std::make_unique<ConvKernel>(be, spec, role);
  if (!k->init(spec, error))
    return nullptr;
  return k;
}

/// MaxPool / AveragePool geometry (1-D and 2-D).
bool poolGeom(const OpSpec &spec, const TensorDesc &x, const TensorDesc &y,
              bool avg, Pool2D &g, std::string &error) {
  return (!avg || checkAvgPoolDilations(spec, error)) &&
         pool2DGeom(spec, x, y, g, error) &&
         (!avg || checkAvgPoolCeil(spec, g.paddedForCeil, error));
}

std::unique_ptr<Kernel> createMaxPool(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  Pool2D g;
  if (!checkSpec(spec, 1, 1, 1, 2, {0}, {0}, error) ||
      !checkDType(spec, false, 1, DType::I64, error) ||
      !poolGeom(spec, spec.inputs[0], spec.outputs[0], false, g, error))
    return nullptr;
  if (spec.outputs.size() > 1 &&
      spec.outputs[1].shape != spec.outputs[0].shape) {
    error = nodeError(spec, "Indices must have Y's shape");
    return nullptr;
  }
  return lambda(be, spec, [g](cudaStream_t s, const auto &in, const auto &out) {
    launchMaxPool(g, in[0].template as<float>(), out[0].template as<float>(),
                  out.size() > 1 ? out[1].template as<int64_t>() : nullptr, s);
  });
}

std::unique_ptr<Kernel> createMaxPoolGrad(CudaBackend &be, const OpSpec &spec,
                                          std::string &error) {
  int64_t planes, inPlane, outPlane;
  if (!checkSpec(spec, 2, 2, 1, 1, {0}, {0}, error) ||
      !maxPoolGradGeom(spec, planes, inPlane, outPlane, error))
    return nullptr;
  // The forward's attributes give each dX element its windows: a thread
  // per element. Without them (or with a geometry they do not fit), a
  // thread per plane scatters.
  Pool2D g;
  std::string noGeometry;
  if (pool2DGeom(spec, spec.outputs[0], spec.inputs[0], g, noGeometry) &&
      g.planes == planes && g.ih * g.iw == inPlane && g.oh * g.ow == outPlane)
    return lambda(be, spec,
                  [g](cudaStream_t s, const auto &in, const auto &out) {
                    launchMaxPoolGrad(g, in[0].template as<float>(),
                                      in[1].template as<int64_t>(),
                                      out[0].template as<float>(), s);
                  });
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchMaxPoolGrad(planes, inPlane, outPlane, in[0].template as<float>(),
                      in[1].template as<int64_t>(), out[0].template as<float>(),
                      s);
  });
}

std::unique_ptr<Kernel> createAvgPool(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  bool grad = spec.opType == "AveragePoolGrad";
  Pool2D g;
  if (!checkSpec(spec, 1, 1, 1, 1, {0}, {0}, error) ||
      !poolGeom(spec, grad ? spec.outputs[0] : spec.inputs[0],
                grad ? spec.inputs[0] : spec.outputs[0], true, g, error))
    return nullptr;
  return lambda(be, spec,
                [g, grad](cudaStream_t s, const auto &in, const auto &out) {
                  if (grad)
                    launchAvgPoolGrad(g, in[0].template as<float>(),
                                      out[0].template as<float>(), s);
                  else
                    launchAvgPool(g, in[0].template as<float>(),
                                  out[0].template as<float>(), s);
                });
}

/// GlobalAveragePool (a per-plane mean) and its gradient (the mean spread
/// back over the plane).
std::unique_ptr<Kernel> createGlobalAvgPool(CudaBackend &be, const OpSpec &spec,
                                            std::string &error) {
  bool grad = spec.opType == "GlobalAveragePoolGrad";
  int64_t planes, size;
  if (!checkSpec(spec, 1, 1, 1, 1, {0}, {0}, error) ||
      !globalPoolGeom(spec, grad, kMaxRank, planes, size, error))
    return nullptr;
  const TensorDesc &x = grad ? spec.outputs[0] : spec.inputs[0];
  std::vector<int64_t> kept(x.rank(), 1);
  kept[0] = x.shape[0];
  kept[1] = x.shape[1];
  float inv = 1.0f / float(size);
  if (!grad) {
    Reduction r;
    makeReduction(x.shape, kept, r);
    return lambda(be, spec,
                  [=](cudaStream_t s, const auto &in, const auto &out) {
                    launchReduce(r, in[0].template as<float>(), inv,
                                 out[0].template as<float>(), planes, s);
                  });
  }
  Broadcast b;
  b.rank = int(x.rank());
  b.operands = 1;
  for (size_t d = 0; d < x.rank(); ++d)
    b.dims[d] = x.shape[d];
  broadcastStrides(kept, x.shape, b.strides[0]);
  int64_t n = x.numel();
  return lambda(be, spec,
                [=](cudaStream_t s, const auto &in, const auto &out) mutable {
                  b.x[0] = in[0].data;
                  launchExpand(b, inv, out[0].template as<float>(), n, s);
                });
}

//===----------------------------------------------------------------------===//
// Pad / PadGrad
//===----------------------------------------------------------------------===//

/// Pad {mode = constant}: data[, pads[, constant_value[, axes]]] -> Y. Pads,
/// value and axes operands are read back from the device at each run (a
/// synchronizing copy of a few numbers); a `pads` attribute needs none.
class PadKernel final : public CudaKernel {
public:
  PadKernel(CudaBackend &be, const OpSpec &spec)
      : CudaKernel(be, spec), inShape(spec.inputs[0].shape),
        outShape(spec.outputs[0].shape), attrPads(spec.attrs.getInts("pads")),
        value(float(spec.attrs.getFloat("value", 0.0))),
        hasAttrPads(spec.attrs.has("pads")), operands(be, spec) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    size_t r = inShape.size();
    std::vector<int64_t> pads = attrPads, axes(r);
    for (size_t i = 0; i < r; ++i)
      axes[i] = int64_t(i);
    if (!hasAttrPads)
      pads = operands.ints(in, 1);
    float v = value;
    if (in.size() > 2 && in[2].data && in[2].numel() > 0)
      operands.read(in, 2, &v, sizeof(float));
    if (in.size() > 3 && in[3].data) {
      axes = operands.ints(in, 3);
      for (int64_t &a : axes)
        if (a < 0)
          a += int64_t(r);
    }
    PadParams p;
    p.rank = int(r);
    bool ok = pads.size() == 2 * axes.size();
    for (size_t d = 0; d < r; ++d) {
      p.inDims[d] = inShape[d];
      p.outDims[d] = outShape[d];
    }
    for (size_t i = 0; ok && i < axes.size(); ++i) {
      ok = axes[i] >= 0 && axes[i] < int64_t(r);
      if (ok)
        p.begin[axes[i]] = pads[i];
    }
    for (size_t i = 0; ok && i < axes.size(); ++i)
      ok = inShape[size_t(axes[i])] + pads[i] + pads[i + axes.size()] ==
           outShape[size_t(axes[i])];
    if (!ok) {
      std::fprintf(stderr,
                   "oasr: fatal: node '%s' (%s): pads do not produce the "
                   "result shape %s\n",
                   nodeName.c_str(), op.c_str(), shapeStr(outShape).c_str());
      std::abort();
    }
    launchPad(p, in[0].as<float>(), out[0].as<float>(), v, out[0].numel(),
              stream);
  }

private:
  std::vector<int64_t> inShape, outShape, attrPads;
  float value;
  bool hasAttrPads;
  HostOperands operands;
};

std::unique_ptr<Kernel> createPad(CudaBackend &be, const OpSpec &spec,
                                  std::string &error) {
  if (!checkSpec(spec, 1, 4, 1, 1, {0, 2}, {0}, error))
    return nullptr;
  if (spec.attrs.getString("mode", "constant") != "constant") {
    error = nodeError(spec, "mode '" + spec.attrs.getString("mode") +
                                "' is not supported (only 'constant')");
    return nullptr;
  }
  if (spec.inputs[0].rank() != spec.outputs[0].rank() ||
      spec.inputs[0].rank() > size_t(kMaxRank)) {
    error = nodeError(spec, "operand and result ranks differ or exceed " +
                                std::to_string(kMaxRank));
    return nullptr;
  }
  if (!spec.attrs.has("pads") &&
      (spec.inputs.size() < 2 || spec.inputs[1].dtype != DType::I64)) {
    error = nodeError(spec, "needs a pads attribute or an i64 pads operand");
    return nullptr;
  }
  return std::make_unique<PadKernel>(be, spec);
}

/// PadGrad {pads}: dY -> dX, the slice of dY the padded input came from.
std::unique_ptr<Kernel> createPadGrad(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  std::vector<int64_t> begin;
  if (!checkSpec(spec, 1, 1, 1, 1, {0}, {0}, error) ||
      !padGradBegin(spec, kMaxRank, begin, error))
    return nullptr;
  const auto &dy = spec.inputs[0].shape, &dx = spec.outputs[0].shape;
  PadParams p;
  p.rank = int(dx.size());
  for (size_t d = 0; d < dx.size(); ++d) {
    p.inDims[d] = dy[d];
    p.outDims[d] = dx[d];
    p.begin[d] = begin[d];
  }
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [p, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchPad(p, in[0].template as<float>(),
                            out[0].template as<float>(), 0.0f, n, s);
                });
}

//===----------------------------------------------------------------------===//
// Slice / SliceGrad
//===----------------------------------------------------------------------===//

/// Ends the process with "oasr: fatal: node 'N' (Op): MSG": a kernel met
/// operand values it cannot run on.
[[noreturn]] void fatalAt(const std::string &node, const std::string &op,
                          const std::string &msg) {
  std::fprintf(stderr, "oasr: fatal: node '%s' (%s): %s\n", node.c_str(),
               op.c_str(), msg.c_str());
  std::abort();
}

SliceParams sliceParams(const std::vector<int64_t> &inShape,
                        const std::vector<int64_t> &outShape,
                        const std::vector<int64_t> &start,
                        const std::vector<int64_t> &step) {
  SliceParams p;
  p.rank = int(outShape.size());
  std::vector<int64_t> strides = rowMajorStrides(inShape);
  for (size_t d = 0; d < outShape.size(); ++d) {
    p.outDims[d] = outShape[d];
    p.inStrides[d] = strides[d];
    p.start[d] = start[d];
    p.step[d] = step[d];
  }
  return p;
}

/// Slice: data, starts, ends[, axes[, steps]] (read back at each run: they
/// are operands) or opset 1's attributes -> Y; any element type.
class SliceKernel final : public CudaKernel {
public:
  SliceKernel(CudaBackend &be, const OpSpec &spec)
      : CudaKernel(be, spec), inShape(spec.inputs[0].shape),
        outShape(spec.outputs[0].shape),
        esize(int(dtypeSize(spec.inputs[0].dtype))), attrs(spec.attrs),
        operands(be, spec) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    std::vector<int64_t> start, step;
    std::string why;
    if (!resolveSliceAtRun(
            inShape, outShape, in.size(), attrs,
            [&](size_t i) { return operands.ints(in, i); }, start, step, why))
      fatalAt(nodeName, op, why);
    launchSlice(sliceParams(inShape, outShape, start, step), esize, in[0].data,
                out[0].data, out[0].numel(), false, stream);
  }

private:
  std::vector<int64_t> inShape, outShape;
  int esize;
  AttrMap attrs;
  HostOperands operands;
};

std::unique_ptr<Kernel> createSlice(CudaBackend &be, const OpSpec &spec,
                                    std::string &error) {
  if (!checkSlice(spec, error))
    return nullptr;
  int es = int(dtypeSize(spec.inputs[0].dtype));
  if (spec.inputs[0].rank() > size_t(kMaxRank) ||
      (es != 1 && es != 4 && es != 8)) {
    error = nodeError(spec, "the cuda backend slices tensors of rank <= " +
                                std::to_string(kMaxRank) +
                                " with 1-, 4- or 8-byte elements");
    return nullptr;
  }
  return std::make_unique<SliceKernel>(be, spec);
}

/// SliceGrad {starts, ends, axes, steps}: dY -> dX, zero outside the slice.
std::unique_ptr<Kernel> createSliceGrad(CudaBackend &be, const OpSpec &spec,
                                        std::string &error) {
  if (!checkSpec(spec, 1, 1, 1, 1, {0}, {0}, error))
    return nullptr;
  const auto &dx = spec.outputs[0].shape, &dy = spec.inputs[0].shape;
  std::vector<int64_t> start, step;
  std::string why;
  if (dx.size() > size_t(kMaxRank) ||
      !resolveSlice(dx, dy, spec.attrs.getInts("starts"),
                    spec.attrs.getInts("ends"), spec.attrs.getInts("axes"),
                    spec.attrs.getInts("steps"), start, step, why)) {
    error = nodeError(
        spec, why.empty() ? "rank above " + std::to_string(kMaxRank) : why);
    return nullptr;
  }
  SliceParams p = sliceParams(dx, dy, start, step);
  int64_t n = spec.inputs[0].numel();
  size_t bytes = spec.outputs[0].bytes();
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    check(cudaMemsetAsync(out[0].data, 0, bytes, s), "SliceGrad");
    // Scatter: dY's elements into dX at the slice's positions.
    launchSlice(p, 4, out[0].data, in[0].data, n, true, s);
  });
}

//===----------------------------------------------------------------------===//
// Resize / ResizeGrad
//===----------------------------------------------------------------------===//

/// Resize and ResizeGrad: ResizeGeom's sampling tables, and for the
/// gradient their inverse (per source index, the result indices that read
/// it and their weights), copied to the device once.
class ResizeKernel final : public CudaKernel {
public:
  ResizeKernel(CudaBackend &be, const OpSpec &spec, const ResizeGeom &g)
      : CudaKernel(be, spec), grad(g.grad), planes(g.planes) {
    p.tapsH = g.h.taps;
    p.tapsW = g.w.taps;
    p.inH = g.inH;
    p.inW = g.inW;
    p.outH = int64_t(g.h.index.size()) / g.h.taps;
    p.outW = int64_t(g.w.index.size()) / g.w.taps;
    p.hIndex = upload(g.h.index);
    p.wIndex = upload(g.w.index);
    p.hWeight = upload(g.h.weight);
    p.wWeight = upload(g.w.weight);
    invert(g.h, g.inH, p.hStart, p.hOut, p.hInvWeight);
    invert(g.w, g.inW, p.wStart, p.wOut, p.wInvWeight);
  }
  ~ResizeKernel() override {
    for (void *ptr : owned)
      backend.deallocate(ptr);
  }
  bool ok() const { return !failed; }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    launchResize(p, grad, in[0].as<float>(), out[0].as<float>(), planes,
                 stream);
  }

private:
  template <typename T> const T *upload(const std::vector<T> &v) {
    size_t bytes = std::max<size_t>(v.size(), 1) * sizeof(T);
    void *ptr = backend.allocate(bytes);
    if (!ptr) {
      failed = true;
      return nullptr;
    }
    owned.push_back(ptr);
    backend.copyToDevice(ptr, v.data(), v.size() * sizeof(T));
    return static_cast<const T *>(ptr);
  }
  /// CSR of `a` by source index, in result order.
  void invert(const ResizeAxis &a, int64_t in, const int64_t *&start,
              const int64_t *&outIdx, const float *&weight) {
    std::vector<int64_t> st(size_t(in) + 1, 0), o;
    std::vector<float> wt;
    for (int64_t src : a.index)
      ++st[size_t(src) + 1];
    for (size_t i = 1; i < st.size(); ++i)
      st[i] += st[i - 1];
    o.resize(a.index.size());
    wt.resize(a.index.size());
    std::vector<int64_t> fill(st.begin(), st.end() - 1);
    for (size_t k = 0; k < a.index.size(); ++k) {
      size_t at = size_t(fill[size_t(a.index[k])]++);
      o[at] = int64_t(k) / a.taps;
      wt[at] = a.weight[k];
    }
    start = upload(st);
    outIdx = upload(o);
    weight = upload(wt);
  }

  bool grad, failed = false;
  int64_t planes;
  ResizeParams p;
  std::vector<void *> owned;
};

std::unique_ptr<Kernel> createResize(CudaBackend &be, const OpSpec &spec,
                                     std::string &error) {
  ResizeGeom g;
  if (!resizeGeom(spec, g, error))
    return nullptr;
  auto k = std::make_unique<ResizeKernel>(be, spec, g);
  if (!k->ok()) {
    error = nodeError(spec, "out of device memory for the sampling tables");
    return nullptr;
  }
  return k;
}

//===----------------------------------------------------------------------===//
// Dropout / DropoutGrad
//===----------------------------------------------------------------------===//

/// Dropout: X[, ratio[, training_mode]] -> Y[, mask], the CPU backend's
/// mask bit for bit (dropoutKeeps); every run is a new step.
class DropoutKernel final : public CudaKernel {
public:
  DropoutKernel(CudaBackend &be, const OpSpec &spec)
      : CudaKernel(be, spec), seed(spec.seed), n(spec.inputs[0].numel()),
        defaultRatio(spec.attrs.getFloat("ratio", 0.5)),
        defaultTraining(spec.attrs.getInt("training_mode", 0) != 0),
        operands(be, spec) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double ratio = defaultRatio, training = defaultTraining;
    operands.scalar(in, 1, ratio);
    operands.scalar(in, 2, training);
    if (ratio < 0 || ratio > 1)
      fatalAt(nodeName, op,
              "ratio " + std::to_string(ratio) + " is outside [0, 1]");
    uint8_t *mask = out.size() > 1 ? out[1].as<uint8_t>() : nullptr;
    if (training == 0 || ratio == 0) {
      backend.copyWithin(out[0].data, in[0].data, out[0].bytes());
      if (mask)
        check(cudaMemsetAsync(mask, 1, size_t(n), stream), nodeName.c_str());
      return;
    }
    float scale = ratio < 1 ? float(1.0 / (1.0 - ratio)) : 0.0f;
    launchDropout(dropoutStepKey(seed, step++), dropoutThreshold(ratio), scale,
                  in[0].as<float>(), out[0].as<float>(), mask, n, stream);
  }
  bool randomPosition(uint64_t &position) const override {
    position = step;
    return true;
  }
  void setRandomPosition(uint64_t position) override { step = position; }

private:
  uint64_t seed, step = 0;
  int64_t n;
  double defaultRatio;
  bool defaultTraining;
  HostOperands operands;
};

std::unique_ptr<Kernel> createDropout(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  if (!checkDropout(spec, error))
    return nullptr;
  return std::make_unique<DropoutKernel>(be, spec);
}

/// DropoutGrad: dY, mask[, ratio[, training_mode]] -> dX = dY * mask /
/// (1 - ratio).
class DropoutGradKernel final : public CudaKernel {
public:
  DropoutGradKernel(CudaBackend &be, const OpSpec &spec)
      : CudaKernel(be, spec), n(spec.inputs[0].numel()),
        defaultRatio(spec.attrs.getFloat("ratio", 0.5)), operands(be, spec) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double ratio = defaultRatio, training = 1;
    operands.scalar(in, 2, ratio);
    operands.scalar(in, 3, training);
    if (training == 0) {
      backend.copyWithin(out[0].data, in[0].data, out[0].bytes());
      return;
    }
    float scale = ratio < 1 ? float(1.0 / (1.0 - ratio)) : 0.0f;
    launchDropoutGrad(scale, in[0].as<float>(), in[1].as<uint8_t>(),
                      out[0].as<float>(), n, stream);
  }

private:
  int64_t n;
  double defaultRatio;
  HostOperands operands;
};

std::unique_ptr<Kernel> createDropoutGrad(CudaBackend &be, const OpSpec &spec,
                                          std::string &error) {
  if (!checkDropoutGrad(spec, error))
    return nullptr;
  return std::make_unique<DropoutGradKernel>(be, spec);
}

//===----------------------------------------------------------------------===//
// BatchNormalization / BatchNormalizationGrad
//===----------------------------------------------------------------------===//

bool bnParams(const OpSpec &spec, const TensorDesc &x,
              std::initializer_list<size_t> perChannelIn,
              std::initializer_list<size_t> perChannelOut, BnParams &p,
              std::string &error) {
  if (x.rank() < 2) {
    error = nodeError(spec, "expects X of rank >= 2, got " + shapeStr(x.shape));
    return false;
  }
  p.n = x.shape[0];
  p.c = x.shape[1];
  p.s = x.numel() / std::max<int64_t>(1, p.n * p.c);
  p.eps = float(spec.attrs.getFloat("epsilon", 1e-5));
  p.momentum = float(spec.attrs.getFloat("momentum", 0.9));
  for (size_t i : perChannelIn)
    if (i < spec.inputs.size() && spec.inputs[i].numel() != p.c) {
      error = nodeError(spec, "operand " + std::to_string(i) + " must have " +
                                  std::to_string(p.c) + " elements");
      return false;
    }
  for (size_t i : perChannelOut)
    if (i < spec.outputs.size() && spec.outputs[i].numel() != p.c) {
      error = nodeError(spec, "result " + std::to_string(i) + " must have " +
                                  std::to_string(p.c) + " elements");
      return false;
    }
  return true;
}

/// Training-mode BatchNormalization and its gradient on cuDNN (what
/// PyTorch runs on the GPU): X viewed as [N, C, S, 1], per-channel
/// statistics in f32, X and Y f32 or bf16. The running statistics are
/// updated in place by cuDNN, so they are copied to the results first;
/// results the node does not have go to scratch.
class CudnnBnKernel final : public CudaKernel {
public:
  CudnnBnKernel(CudaBackend &be, const OpSpec &spec, const BnParams &p,
                cudnnDataType_t type, bool grad)
      : CudaKernel(be, spec), p(p), grad(grad) {
    checkDnn(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    checkDnn(cudnnCreateTensorDescriptor(&bn), "cudnnCreateTensorDescriptor");
    checkDnn(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, type, int(p.n),
                                        int(p.c), int(p.s), 1),
             "cudnnSetTensor4dDescriptor");
    checkDnn(cudnnDeriveBNTensorDescriptor(bn, x, CUDNN_BATCHNORM_SPATIAL),
             "cudnnDeriveBNTensorDescriptor");
    // Four per-channel f32 results the node may lack.
    for (size_t &at : spare)
      at = reserve(size_t(p.c) * sizeof(float));
  }
  ~CudnnBnKernel() override {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(bn);
  }

  /// Whether cuDNN runs this configuration (probed once per element type
  /// on a small tensor: the legacy API names no supported-types query).
  static bool supported(CudaBackend &be, cudnnDataType_t type);

protected:
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    cudnnHandle_t h = backend.dnn;
    const float one = 1.0f, zero = 0.0f;
    auto res = [&](size_t i, int k) -> float * {
      return i < out.size() && out[i].data ? out[i].as<float>()
                                           : scratchAt<float>(spare[k]);
    };
    if (grad) {
      checkDnn(cudnnBatchNormalizationBackward(
                   h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, x,
                   in[1].data, x, in[0].data, x, out[0].data, bn, in[2].data,
                   res(1, 0), res(2, 1), double(p.eps), in[3].data, in[4].data),
               nodeName.c_str());
      return;
    }
    float *rm = res(1, 0), *rv = res(2, 1);
    size_t bytes = size_t(p.c) * sizeof(float);
    backend.copyWithin(rm, in[3].data, bytes);
    backend.copyWithin(rv, in[4].data, bytes);
    checkDnn(cudnnBatchNormalizationForwardTraining(
                 h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x, in[0].data, x,
                 out[0].data, bn, in[1].data, in[2].data,
                 1.0 - double(p.momentum), rm, rv, double(p.eps), res(3, 2),
                 res(4, 3)),
             nodeName.c_str());
  }

private:
  BnParams p;
  bool grad;
  cudnnTensorDescriptor_t x = nullptr, bn = nullptr;
  size_t spare[4] = {};
};

bool CudnnBnKernel::supported(CudaBackend &be, cudnnDataType_t type) {
  static std::map<std::pair<cudnnHandle_t, int>, bool> known;
  auto key = std::make_pair(be.dnn, int(type));
  if (auto it = known.find(key); it != known.end())
    return it->second;
  // [2, 2, 3, 1]: 12 elements of X, Y, dY, dX; 2 per channel.
  void *mem = nullptr;
  bool ok = cudaMalloc(&mem, 4096) == cudaSuccess &&
            cudaMemsetAsync(mem, 0, 4096, be.stream) == cudaSuccess;
  if (ok) {
    char *b = static_cast<char *>(mem);
    float *stats = reinterpret_cast<float *>(b + 2048);
    cudnnTensorDescriptor_t x = nullptr, bn = nullptr;
    const float one = 1.0f, zero = 0.0f;
    ok = cudnnCreateTensorDescriptor(&x) == CUDNN_STATUS_SUCCESS &&
         cudnnCreateTensorDescriptor(&bn) == CUDNN_STATUS_SUCCESS &&
         cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, type, 2, 2, 3, 1) ==
             CUDNN_STATUS_SUCCESS &&
         cudnnDeriveBNTensorDescriptor(bn, x, CUDNN_BATCHNORM_SPATIAL) ==
             CUDNN_STATUS_SUCCESS &&
         cudnnBatchNormalizationForwardTraining(
             be.dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x, b, x, b + 512, bn,
             stats, stats + 2, 0.1, stats + 4, stats + 6, 1e-5, stats + 8,
             stats + 10) == CUDNN_STATUS_SUCCESS &&
         cudnnBatchNormalizationBackward(
             be.dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, x, b, x,
             b + 512, x, b + 1024, bn, stats, stats + 12, stats + 14, 1e-5,
             stats + 8, stats + 10) == CUDNN_STATUS_SUCCESS &&
         cudaStreamSynchronize(be.stream) == cudaSuccess;
    if (x)
      cudnnDestroyTensorDescriptor(x);
    if (bn)
      cudnnDestroyTensorDescriptor(bn);
  }
  if (mem)
    cudaFree(mem);
  cudaGetLastError(); // a failed probe leaves no sticky error
  return known[key] = ok;
}

/// The cuDNN kernel of a training BatchNormalization (grad: its gradient)
/// when cuDNN runs its element type (f32, bf16) and X is at most 2^31
/// elements per dimension; null otherwise (the hand-written kernels run).
std::unique_ptr<Kernel> createCudnnBn(CudaBackend &be, const OpSpec &spec,
                                      const BnParams &p, bool grad) {
  DType t = spec.inputs[0].dtype;
  cudnnDataType_t type =
      t == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  const int64_t kMax = int64_t(1) << 31;
  if ((t != DType::F32 && t != DType::BF16) || p.n >= kMax || p.c >= kMax ||
      p.s >= kMax || !CudnnBnKernel::supported(be, type))
    return nullptr;
  return std::make_unique<CudnnBnKernel>(be, spec, p, type, grad);
}

/// bf16 X and Y (dY, X, dX for the gradient), f32 statistics: the node
/// checked as its f32 form, for the cuDNN kernel.
OpSpec bnAsF32(const OpSpec &spec, std::initializer_list<size_t> ins,
               std::initializer_list<size_t> outs, bool &bf16) {
  bf16 = true;
  for (size_t i : ins)
    bf16 =
        bf16 && i < spec.inputs.size() && spec.inputs[i].dtype == DType::BF16;
  for (size_t i : outs)
    bf16 =
        bf16 && i < spec.outputs.size() && spec.outputs[i].dtype == DType::BF16;
  OpSpec f = spec;
  if (bf16) {
    for (size_t i : ins)
      f.inputs[i].dtype = DType::F32;
    for (size_t i : outs)
      f.outputs[i].dtype = DType::F32;
  }
  return f;
}

/// X, scale, B, mean, var -> Y[, running_mean', running_var'[, saved_mean,
/// saved_inv_std]] (training) or -> Y (inference).
std::unique_ptr<Kernel> createBatchNorm(CudaBackend &be, const OpSpec &spec,
                                        std::string &error) {
  BnParams p;
  bool bf16 = false;
  OpSpec f = bnAsF32(spec, {0}, {0}, bf16);
  if (!checkSpec(f, 5, 5, 1, 5, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, error) ||
      !bnParams(spec, spec.inputs[0], {1, 2, 3, 4}, {1, 2, 3, 4}, p, error))
    return nullptr;
  bool training = spec.attrs.has("training_mode")
                      ? spec.attrs.getInt("training_mode") != 0
                      : spec.outputs.size() > 1;
  if ((!training && spec.outputs.size() > 1) ||
      spec.outputs[0].shape != spec.inputs[0].shape) {
    error = nodeError(spec, "Y must have X's shape, and the inference form "
                            "(training_mode = 0) has one result");
    return nullptr;
  }
  if (training)
    if (auto k = createCudnnBn(be, spec, p, /*grad=*/false))
      return k;
  if (bf16) {
    error = nodeError(spec, "bf16 runs on cuDNN's training kernel only");
    return nullptr;
  }
  if (!training)
    return lambda(
        be, spec, [p](cudaStream_t s, const auto &in, const auto &out) {
          launchBnInfer(p, in[0].template as<float>(),
                        in[1].template as<float>(), in[2].template as<float>(),
                        in[3].template as<float>(), in[4].template as<float>(),
                        out[0].template as<float>(), s);
        });
  return lambda(be, spec, [p](cudaStream_t s, const auto &in, const auto &out) {
    auto res = [&](size_t i) {
      return i < out.size() ? out[i].template as<float>() : nullptr;
    };
    launchBnTrain(p, in[0].template as<float>(), in[1].template as<float>(),
                  in[2].template as<float>(), in[3].template as<float>(),
                  in[4].template as<float>(), res(0), res(1), res(2), res(3),
                  res(4), s);
  });
}

/// dY, X, scale, saved_mean, saved_inv_std -> dX[, dScale[, dBias]].
std::unique_ptr<Kernel> createBatchNormGrad(CudaBackend &be, const OpSpec &spec,
                                            std::string &error) {
  BnParams p;
  bool bf16 = false;
  OpSpec f = bnAsF32(spec, {0, 1}, {0}, bf16);
  if (!checkSpec(f, 5, 5, 1, 3, {0, 1, 2, 3, 4}, {0, 1, 2}, error) ||
      !bnParams(spec, spec.inputs[1], {2, 3, 4}, {1, 2}, p, error))
    return nullptr;
  if (spec.inputs[0].shape != spec.inputs[1].shape ||
      spec.outputs[0].shape != spec.inputs[1].shape) {
    error = nodeError(spec, "dY, X and dX must have the same shape");
    return nullptr;
  }
  if (auto k = createCudnnBn(be, spec, p, /*grad=*/true))
    return k;
  if (bf16) {
    error = nodeError(spec, "bf16 runs on cuDNN's training kernel only");
    return nullptr;
  }
  return lambda(be, spec, [p](cudaStream_t s, const auto &in, const auto &out) {
    launchBnGrad(p, in[0].template as<float>(), in[1].template as<float>(),
                 in[2].template as<float>(), in[3].template as<float>(),
                 in[4].template as<float>(), out[0].template as<float>(),
                 out.size() > 1 ? out[1].template as<float>() : nullptr,
                 out.size() > 2 ? out[2].template as<float>() : nullptr, s);
  });
}

//===----------------------------------------------------------------------===//
// The pointwise family (device code in CudaPointwise.cu)
//===----------------------------------------------------------------------===//

/// Gelu's 'approximate' ("none" or "tanh"), for the op and its gradient;
/// false with `error` set for anything else.
static bool geluIsTanh(const OpSpec &spec, bool &tanh, std::string &error) {
  std::string approx = spec.attrs.getString("approximate", "none");
  if (approx != "none" && approx != "tanh") {
    error = nodeError(spec, "approximate '" + approx + "' is not supported");
    return false;
  }
  tanh = approx == "tanh";
  return true;
}

/// The activations' two parameters as the kernels take them: 'alpha'
/// (LeakyRelu's slope, 0.01 by default; HardSigmoid's, 0.2; Elu's, 1) and
/// 'beta' (HardSigmoid's offset, 0.5); the other ops ignore them.
static std::pair<float, float>
activationParams(const OpSpec &spec, bool leakyRelu, bool hardSigmoid) {
  float dfltA = leakyRelu ? 0.01f : hardSigmoid ? 0.2f : 1.0f;
  return {float(spec.attrs.getFloat("alpha", dfltA)),
          float(spec.attrs.getFloat("beta", 0.5))};
}

std::unique_ptr<Kernel> createUnary(CudaBackend &be, const OpSpec &spec,
                                    std::string &error) {
  static const std::map<std::string, UnaryOp> ops = {
      {"Abs", UnaryOp::Abs},
      {"Sigmoid", UnaryOp::Sigmoid},
      {"Tanh", UnaryOp::Tanh},
      {"Exp", UnaryOp::Exp},
      {"Log", UnaryOp::Log},
      {"Sqrt", UnaryOp::Sqrt},
      {"Erf", UnaryOp::Erf},
      {"Elu", UnaryOp::Elu},
      {"LeakyRelu", UnaryOp::LeakyRelu},
      {"HardSigmoid", UnaryOp::HardSigmoid},
      {"HardSwish", UnaryOp::HardSwish},
      {"Mish", UnaryOp::Mish},
      {"Reciprocal", UnaryOp::Reciprocal},
      {"Gelu", UnaryOp::GeluErf}};
  UnaryOp op = ops.at(spec.opType);
  bool tanh = false;
  if (op == UnaryOp::GeluErf && !geluIsTanh(spec, tanh, error))
    return nullptr;
  if (tanh)
    op = UnaryOp::GeluTanh;
  if (!checkSameShapeF32(bf16AsF32(spec), 1, error))
    return nullptr;
  std::pair<float, float> ab = activationParams(spec, op == UnaryOp::LeakyRelu,
                                                op == UnaryOp::HardSigmoid);
  float a = ab.first, b = ab.second;
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [op, a, b, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchUnary(op, floatAt(in, 0), floatAt(out, 0), n, a, b, s);
                });
}

/// Clip: X[, min[, max]] -> Y; bounds from the operands when given (read
/// back at each run), else from the f32 attributes min/max.
std::unique_ptr<Kernel> createClip(CudaBackend &be, const OpSpec &spec,
                                   std::string &error) {
  if (!checkSpec(spec, 1, 3, 1, 1, {0, 1, 2}, {0}, error) ||
      !checkSameShapes(spec, 1, error))
    return nullptr;
  double attrMin = spec.attrs.getFloat("min", -INFINITY),
         attrMax = spec.attrs.getFloat("max", INFINITY);
  int64_t n = spec.outputs[0].numel();
  HostOperands operands(be, spec);
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    double lo = attrMin, hi = attrMax;
    operands.scalar(in, 1, lo);
    operands.scalar(in, 2, hi);
    launchUnary(UnaryOp::Clip, floatAt(in, 0), floatAt(out, 0), n, float(lo),
                float(hi), s);
  });
}

/// <Op>Grad(dY, z) -> dX; ClipGrad takes its bounds from min/max.
std::unique_ptr<Kernel> createGradOp(CudaBackend &be, const OpSpec &spec,
                                     std::string &error) {
  static const std::map<std::string, GradOp> ops = {
      {"SigmoidGrad", GradOp::Sigmoid},
      {"TanhGrad", GradOp::Tanh},
      {"EluGrad", GradOp::Elu},
      {"LeakyReluGrad", GradOp::LeakyRelu},
      {"HardSigmoidGrad", GradOp::HardSigmoid},
      {"HardSwishGrad", GradOp::HardSwish},
      {"MishGrad", GradOp::Mish},
      {"GeluGrad", GradOp::GeluErf},
      {"ClipGrad", GradOp::Clip}};
  GradOp op = ops.at(spec.opType);
  bool tanh = false;
  if (op == GradOp::GeluErf && !geluIsTanh(spec, tanh, error))
    return nullptr;
  if (tanh)
    op = GradOp::GeluTanh;
  if (!checkSameShapeF32(bf16AsF32(spec), 2, error))
    return nullptr;
  std::pair<float, float> ab =
      op == GradOp::Clip
          ? std::pair{float(spec.attrs.getFloat("min", -INFINITY)),
                      float(spec.attrs.getFloat("max", INFINITY))}
          : activationParams(spec, op == GradOp::LeakyRelu,
                             op == GradOp::HardSigmoid);
  float a = ab.first, b = ab.second;
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [op, a, b, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchGrad(op, floatAt(in, 0), floatAt(in, 1),
                             floatAt(out, 0), n, a, b, s);
                });
}

std::unique_ptr<Kernel> createCompare(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  static const std::map<std::string, CmpOp> ops = {
      {"Equal", CmpOp::Equal},
      {"Less", CmpOp::Less},
      {"Greater", CmpOp::Greater},
      {"LessOrEqual", CmpOp::LessOrEqual},
      {"GreaterOrEqual", CmpOp::GreaterOrEqual},
      {"And", CmpOp::And},
      {"Or", CmpOp::Or},
      {"Xor", CmpOp::Xor}};
  CmpOp op = ops.at(spec.opType);
  Broadcast b;
  if (!checkArity(spec, 2, 2, 1, 1, error) ||
      !checkDType(spec, false, 0, DType::Bool, error) ||
      !checkDType(spec, true, 1, spec.inputs[0].dtype, error) ||
      !makeBroadcast(spec, spec.outputs[0].shape, b, error))
    return nullptr;
  DType t = spec.inputs[0].dtype;
  int64_t n = spec.outputs[0].numel();
  return lambda(
      be, spec,
      [op, t, b, n](cudaStream_t s, const auto &in, const auto &out) mutable {
        b.x[0] = in[0].data;
        b.x[1] = in[1].data;
        launchCompare(op, t, b, out[0].template as<uint8_t>(), n, s);
      });
}

std::unique_ptr<Kernel> createNot(CudaBackend &be, const OpSpec &spec,
                                  std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !checkDType(spec, true, 0, DType::Bool, error) ||
      !checkDType(spec, false, 0, DType::Bool, error))
    return nullptr;
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec, [n](cudaStream_t s, const auto &in, const auto &out) {
    launchNot(in[0].template as<uint8_t>(), out[0].template as<uint8_t>(), n,
              s);
  });
}

std::unique_ptr<Kernel> createWhere(CudaBackend &be, const OpSpec &spec,
                                    std::string &error) {
  Broadcast b;
  if (!checkArity(spec, 3, 3, 1, 1, error) ||
      !checkDType(spec, true, 0, DType::Bool, error) ||
      !checkDType(spec, true, 1, spec.outputs[0].dtype, error) ||
      !checkDType(spec, true, 2, spec.outputs[0].dtype, error) ||
      !makeBroadcast(spec, spec.outputs[0].shape, b, error))
    return nullptr;
  size_t elem = dtypeSize(spec.outputs[0].dtype);
  int64_t n = spec.outputs[0].numel();
  return lambda(
      be, spec,
      [b, elem, n](cudaStream_t s, const auto &in, const auto &out) mutable {
        for (int j = 0; j < 3; ++j)
          b.x[j] = in[size_t(j)].data;
        launchWhere(b, elem, out[0].data, n, s);
      });
}

std::unique_ptr<Kernel> createCast(CudaBackend &be, const OpSpec &spec,
                                   std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error))
    return nullptr;
  DType from = spec.inputs[0].dtype, to = spec.outputs[0].dtype;
  if (spec.inputs[0].numel() != spec.outputs[0].numel()) {
    error = nodeError(spec, "casts between tensors of one shape only");
    return nullptr;
  }
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [from, to, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchCast(from, to, in[0].data, out[0].data, n, s);
                });
}

/// Shape: the operand's static shape, uploaded at every run.
std::unique_ptr<Kernel> createShape(CudaBackend &be, const OpSpec &spec,
                                    std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !checkDType(spec, false, 0, DType::I64, error))
    return nullptr;
  const auto &shape = spec.inputs[0].shape;
  int64_t rank = int64_t(shape.size());
  int64_t start = spec.attrs.getInt("start", 0),
          end = spec.attrs.getInt("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  auto dims = std::make_shared<std::vector<int64_t>>(
      shape.begin() + start, shape.begin() + std::max(start, end));
  if (int64_t(dims->size()) != spec.outputs[0].numel()) {
    error = nodeError(spec, "the result does not match the operand's rank");
    return nullptr;
  }
  return lambda(be, spec,
                [dims](cudaStream_t s, const auto &, const auto &out) {
                  if (!dims->empty())
                    check(cudaMemcpyAsync(out[0].data, dims->data(),
                                          dims->size() * sizeof(int64_t),
                                          cudaMemcpyHostToDevice, s),
                          "Shape");
                });
}

std::unique_ptr<Kernel>
createConstantOfShape(CudaBackend &be, const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 0, 1, 1, 1, error))
    return nullptr;
  DType t = spec.outputs[0].dtype;
  double value = spec.attrs.getFloat("value", 0.0);
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [t, value, n](cudaStream_t s, const auto &, const auto &out) {
                  launchFill(t, out[0].data, n, value, s);
                });
}

std::unique_ptr<Kernel> createRange(CudaBackend &be, const OpSpec &spec,
                                    std::string &error) {
  if (!checkArity(spec, 3, 3, 1, 1, error))
    return nullptr;
  DType t = spec.outputs[0].dtype;
  for (size_t i = 0; i < 3; ++i)
    if (!checkDType(spec, true, i, t, error))
      return nullptr;
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [t, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchRange(t, in[0].data, in[2].data, out[0].data, n, s);
                });
}

std::unique_ptr<Kernel> createTrilu(CudaBackend &be, const OpSpec &spec,
                                    std::string &error) {
  if (!checkArity(spec, 1, 2, 1, 1, error) ||
      !checkDType(spec, true, 0, spec.outputs[0].dtype, error) ||
      (spec.inputs.size() == 2 &&
       !checkDType(spec, true, 1, DType::I64, error)))
    return nullptr;
  const auto &shape = spec.outputs[0].shape;
  if (shape.size() < 2 || spec.inputs[0].shape != shape) {
    error = nodeError(spec, "expects X of rank >= 2 and Y of its shape");
    return nullptr;
  }
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  int64_t n = spec.outputs[0].numel();
  size_t elem = dtypeSize(spec.outputs[0].dtype);
  bool upper = spec.attrs.getInt("upper", 1) != 0;
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    const int64_t *k = in.size() > 1 ? in[1].template as<int64_t>() : nullptr;
    launchTrilu(in[0].data, out[0].data, elem, rows, cols, n, k, upper, s);
  });
}

/// Sets p's tile fields when `perm` keeps a prefix of dimensions and swaps
/// the two runs of dimensions after it ([.., A.., B..] -> [.., B.., A..]):
/// a batch of matrix transposes, R = |A| rows of C = |B| elements.
void tileTranspose(const std::vector<int64_t> &x,
                   const std::vector<int64_t> &perm, TransposeParams &p) {
  size_t rank = perm.size(), k = 0;
  while (k < rank && perm[k] == int64_t(k))
    ++k;
  if (k + 1 >= rank)
    return;
  // perm[k..] = j, j+1, .., rank-1, k, k+1, .., j-1 for j = perm[k].
  size_t j = size_t(perm[k]);
  for (size_t d = k; d < rank; ++d) {
    size_t want = d - k + j < rank ? d - k + j : d - k + j - rank + k;
    if (size_t(perm[d]) != want)
      return;
  }
  int64_t batch = 1, rows = 1, cols = 1;
  for (size_t d = 0; d < rank; ++d)
    (d < k ? batch : d < j ? rows : cols) *= x[d];
  if ((rows + 31) / 32 > 65535 || (cols + 31) / 32 > INT32_MAX)
    return;
  p.tileBatch = batch;
  p.tileRows = rows;
  p.tileCols = cols;
}

std::unique_ptr<Kernel> createTranspose(CudaBackend &be, const OpSpec &spec,
                                        std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error))
    return nullptr;
  const auto &x = spec.inputs[0].shape;
  std::vector<int64_t> perm = spec.attrs.getInts("perm");
  if (perm.empty())
    for (int64_t i = int64_t(x.size()) - 1; i >= 0; --i)
      perm.push_back(i);
  if (perm.size() != x.size() || x.size() > size_t(kMaxRank)) {
    error = nodeError(spec, "perm does not match the operand's rank (<= " +
                                std::to_string(kMaxRank) + ")");
    return nullptr;
  }
  TransposeParams p;
  p.rank = int(x.size());
  std::vector<int64_t> st = rowMajorStrides(x);
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= int64_t(x.size()) ||
        spec.outputs[0].shape[d] != x[size_t(perm[d])]) {
      error = nodeError(spec, "the result's shape is not the permuted operand");
      return nullptr;
    }
    p.outDims[d] = x[size_t(perm[d])];
    p.inStrides[d] = st[size_t(perm[d])];
  }
  tileTranspose(x, perm, p);
  size_t elem = dtypeSize(spec.outputs[0].dtype);
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [p, elem, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchTranspose(p, in[0].data, out[0].data, elem, n, s);
                });
}

/// ScatterND {reduction}: data, indices, updates -> a copy of data with the
/// indexed slices replaced or reduced into.
std::unique_ptr<Kernel> createScatterND(CudaBackend &be, const OpSpec &spec,
                                        std::string &error) {
  ScatterNDGeom g;
  if (!scatterNDGeom(spec, g, error))
    return nullptr;
  size_t elem = dtypeSize(spec.inputs[0].dtype), bytes = spec.inputs[0].bytes();
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    if (out[0].data != in[0].data)
      check(cudaMemcpyAsync(out[0].data, in[0].data, bytes,
                            cudaMemcpyDeviceToDevice, s),
            "ScatterND copy");
    launchScatterND(g, in[1].template as<int64_t>(), in[2].data, out[0].data,
                    elem, s);
  });
}

/// True when operand `i` (Gather's indices) holds no index twice: one
/// index, or a constant of the program (OpSpec::inputValues) without
/// repeats. Negative indices count from the end of `axisDim`.
bool distinctIndices(const OpSpec &spec, size_t i) {
  const TensorDesc &idx = spec.inputs[i];
  if (idx.numel() == 1)
    return true;
  if (i >= spec.inputValues.size() || spec.inputValues[i].size() != idx.bytes())
    return false;
  std::set<int64_t> seen;
  const char *raw = spec.inputValues[i].data();
  for (int64_t k = 0; k < idx.numel(); ++k) {
    int64_t v;
    if (idx.dtype == DType::I64) {
      std::memcpy(&v, raw + k * 8, 8);
    } else {
      int32_t w;
      std::memcpy(&w, raw + k * 4, 4);
      v = w;
    }
    if (v < 0) // may name the same row as a non-negative one
      return false;
    if (!seen.insert(v).second)
      return false;
  }
  return true;
}

/// Gather {axis}: data, indices -> Y; GatherGrad {axis}: shape, indices, dY
/// -> dX.
std::unique_ptr<Kernel> createGather(CudaBackend &be, const OpSpec &spec,
                                     std::string &error) {
  bool grad = spec.opType == "GatherGrad";
  if (!checkArity(spec, grad ? 3 : 2, grad ? 3 : 2, 1, 1, error))
    return nullptr;
  const TensorDesc &data = grad ? spec.outputs[0] : spec.inputs[0];
  const TensorDesc &idx = spec.inputs[grad ? 1 : 1];
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32) {
    error = nodeError(spec, "indices must be i64 or i32");
    return nullptr;
  }
  // Distinct indices (one, or a constant list without repeats) scatter
  // with plain stores, f32 or bf16; repeats accumulate f32 atomically.
  bool distinct = grad && distinctIndices(spec, 1);
  if (grad && !checkAllF32(distinct ? bf16AsF32(spec) : spec, {2}, {0}, error))
    return nullptr;
  int64_t rank = int64_t(data.rank());
  int64_t axis = spec.attrs.getInt("axis", 0);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank) {
    error = nodeError(spec, "axis out of range");
    return nullptr;
  }
  GatherParams p;
  for (int64_t d = 0; d < axis; ++d)
    p.outer *= data.shape[size_t(d)];
  p.axisDim = data.shape[size_t(axis)];
  for (int64_t d = axis + 1; d < rank; ++d)
    p.inner *= data.shape[size_t(d)];
  p.count = idx.numel();
  bool i64 = idx.dtype == DType::I64;
  int64_t n = p.outer * p.count * p.inner;
  if (grad && distinct) {
    int64_t dxBytes = int64_t(data.bytes());
    return lambda(be, spec,
                  [=](cudaStream_t s, const auto &in, const auto &out) {
                    launchGatherGradUnique(p, floatAt(in, 2), in[1].data, i64,
                                           floatAt(out, 0), dxBytes, n, s);
                  });
  }
  if (grad) {
    int64_t dxNumel = data.numel();
    return lambda(
        be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
          launchGatherGrad(p, in[2].template as<float>(), in[1].data, i64,
                           out[0].template as<float>(), dxNumel, n, s);
        });
  }
  size_t elem = dtypeSize(data.dtype);
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchGather(p, in[0].data, in[1].data, i64, out[0].data, elem, n, s);
  });
}

/// The [outer, axis, inner] rows of a softmax over `axis` of `shape`.
RowParams softmaxRows(const std::vector<int64_t> &shape, int64_t axis) {
  RowParams p;
  int64_t rank = int64_t(shape.size());
  if (axis < 0)
    axis += rank;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? p.outer : d == axis ? p.axis : p.inner) *= shape[size_t(d)];
  return p;
}

/// Softmax/LogSoftmax {axis} and their gradients (dY, Y -> dX).
std::unique_ptr<Kernel> createSoftmax(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  bool grad = spec.opType.find("Grad") != std::string::npos;
  bool logForm = spec.opType.rfind("Log", 0) == 0;
  if (!checkSameShapeF32(bf16AsF32(spec), grad ? 2 : 1, error))
    return nullptr;
  int64_t axis = spec.attrs.getInt("axis", -1);
  int64_t rank = int64_t(spec.outputs[0].rank());
  if (axis < -rank || axis >= rank) {
    error = nodeError(spec, "axis out of range");
    return nullptr;
  }
  RowParams p = softmaxRows(spec.outputs[0].shape, axis);
  if (grad)
    return lambda(
        be, spec,
        [p, logForm](cudaStream_t s, const auto &in, const auto &out) {
          launchSoftmaxGrad(p, floatAt(in, 0), floatAt(in, 1), floatAt(out, 0),
                            logForm, s);
        });
  return lambda(be, spec,
                [p, logForm](cudaStream_t s, const auto &in, const auto &out) {
                  launchSoftmax(p, floatAt(in, 0), floatAt(out, 0), logForm, s);
                });
}

/// Rows and columns of a LayerNormalization {axis} of `shape`.
void layerNormRows(const std::vector<int64_t> &shape, int64_t axis,
                   int64_t &rows, int64_t &cols) {
  int64_t rank = int64_t(shape.size());
  if (axis < 0)
    axis += rank;
  rows = cols = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? rows : cols) *= shape[size_t(d)];
}

std::unique_ptr<Kernel> createLayerNorm(CudaBackend &be, const OpSpec &spec,
                                        std::string &error) {
  // X, Scale, B and Y f32 or bf16; Mean and InvStdDev f32.
  if (!checkSpec(bf16AsF32(spec), 2, 3, 1, 3, {0, 1, 2}, {0}, error) ||
      !checkAllF32(spec, {}, {1, 2}, error))
    return nullptr;
  int64_t rows, cols;
  layerNormRows(spec.inputs[0].shape, spec.attrs.getInt("axis", -1), rows,
                cols);
  if (spec.inputs[1].numel() != cols) {
    error = nodeError(spec, "Scale must have the normalized dimensions' size");
    return nullptr;
  }
  float eps = float(spec.attrs.getFloat("epsilon", 1e-5));
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchLayerNorm(rows, cols, eps, floatAt(in, 0), floatAt(in, 1),
                    floatAt(in, 2), floatAt(out, 0),
                    static_cast<float *>(floatAt(out, 1).p),
                    static_cast<float *>(floatAt(out, 2).p), s);
  });
}

/// dY, X, Scale, Mean, InvStdDev -> dX, dScale[, dB].
std::unique_ptr<Kernel> createLayerNormGrad(CudaBackend &be, const OpSpec &spec,
                                            std::string &error) {
  // dY, X, Scale, dX, dScale, dB f32 or bf16; Mean and InvStdDev f32.
  if (!checkSpec(bf16AsF32(spec), 5, 5, 2, 3, {0, 1, 2}, {0, 1, 2}, error) ||
      !checkAllF32(spec, {3, 4}, {}, error))
    return nullptr;
  int64_t rows, cols;
  layerNormRows(spec.inputs[1].shape, spec.attrs.getInt("axis", -1), rows,
                cols);
  bool wantDx = outputUsed(spec, 0), wantDs = outputUsed(spec, 1),
       wantDb = spec.outputs.size() > 2 && outputUsed(spec, 2);
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchLayerNormGrad(rows, cols, floatAt(in, 0), floatAt(in, 1),
                        floatAt(in, 2), in[3].template as<float>(),
                        in[4].template as<float>(),
                        wantDx ? floatAt(out, 0) : FloatPtr{},
                        wantDs ? floatAt(out, 1) : FloatPtr{},
                        wantDb ? floatAt(out, 2) : FloatPtr{}, s);
  });
}

/// ReduceSumTo: dY summed over the axes along which the result broadcasts
/// (the reduction machinery of ReduceSum, one block per result element).
std::unique_ptr<Kernel> createReduceSumTo(CudaBackend &be, const OpSpec &spec,
                                          std::string &error) {
  if (!checkSpec(bf16AsF32(spec), 1, 1, 1, 1, {0}, {0}, error))
    return nullptr;
  Reduction r;
  if (!makeReduction(spec.inputs[0].shape, spec.outputs[0].shape, r)) {
    error = nodeError(spec, shapeStr(spec.outputs[0].shape) +
                                " does not broadcast to " +
                                shapeStr(spec.inputs[0].shape));
    return nullptr;
  }
  int64_t n = spec.outputs[0].numel();
  // Summed over leading dimensions only (a bias's gradient): columns of a
  // [rows, cols] matrix, read row by row.
  const auto &xs = spec.inputs[0].shape;
  std::vector<int64_t> kept = spec.outputs[0].shape;
  kept.insert(kept.begin(), xs.size() - kept.size(), 1);
  size_t lead = 0;
  while (lead < xs.size() && kept[lead] == 1 && xs[lead] != 1)
    ++lead;
  bool columns = lead > 0 &&
                 std::equal(kept.begin() + lead, kept.end(), xs.begin() + lead);
  if (columns) {
    int64_t rows = spec.inputs[0].numel() / std::max<int64_t>(n, 1);
    return lambda(be, spec,
                  [rows, n](cudaStream_t s, const auto &in, const auto &out) {
                    launchSumRows(rows, n, floatAt(in, 0), floatAt(out, 0), s);
                  });
  }
  return lambda(be, spec,
                [r, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchReduce(r, floatAt(in, 0), 1.0f, floatAt(out, 0), n, s);
                });
}

/// Expand (f32): the operand broadcast onto the result; the shape operand
/// is not read.
std::unique_ptr<Kernel> createExpand(CudaBackend &be, const OpSpec &spec,
                                     std::string &error) {
  DType dt = spec.inputs.empty() ? DType::F32 : spec.inputs[0].dtype;
  if (!checkArity(spec, 1, 2, 1, 1, error) ||
      !checkDType(spec, false, 0, dt, error))
    return nullptr;
  if (dt != DType::F32 && dt != DType::I64 && dt != DType::I32) {
    error = nodeError(spec, "the cuda backend expands f32, i64 and i32 "
                            "tensors, not " +
                                std::string(dtypeName(dt)));
    return nullptr;
  }
  Broadcast b;
  b.rank = std::max<int>(1, int(spec.outputs[0].rank()));
  b.operands = 1;
  b.dims[0] = 1;
  for (size_t d = 0; d < spec.outputs[0].rank(); ++d)
    b.dims[d] = spec.outputs[0].shape[d];
  if (spec.outputs[0].rank() > size_t(kMaxRank) ||
      !broadcastStrides(spec.inputs[0].shape, spec.outputs[0].shape,
                        b.strides[0])) {
    error = nodeError(spec, "the operand does not broadcast to the result");
    return nullptr;
  }
  int64_t n = spec.outputs[0].numel();
  return lambda(
      be, spec,
      [b, n, dt](cudaStream_t s, const auto &in, const auto &out) mutable {
        b.x[0] = in[0].data;
        if (dt == DType::F32)
          launchExpand(b, 1.0f, out[0].template as<float>(), n, s);
        else // integer ids and shapes: the broadcast copy of one operand
          launchNary(b, BinOp::Add, dt, out[0].data, n, s);
      });
}

/// Concat {axis} (operands) and Split {axis} (results): one 2-D device copy
/// per part, rows = the product of the dimensions before the axis.
std::unique_ptr<Kernel> createConcatSplit(CudaBackend &be, const OpSpec &spec,
                                          std::string &error) {
  bool split = spec.opType == "Split";
  if (!checkArity(spec, 1, split ? 2 : size_t(1) << 20, 1,
                  split ? size_t(1) << 20 : 1, error))
    return nullptr;
  const TensorDesc &whole = split ? spec.inputs[0] : spec.outputs[0];
  const std::vector<TensorDesc> &parts = split ? spec.outputs : spec.inputs;
  int64_t rank = int64_t(whole.rank());
  int64_t axis = spec.attrs.getInt("axis", 0);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank) {
    error = nodeError(spec, "axis out of range");
    return nullptr;
  }
  int64_t rows = 1;
  for (int64_t d = 0; d < axis; ++d)
    rows *= whole.shape[size_t(d)];
  size_t rowBytes = whole.bytes() / size_t(std::max<int64_t>(rows, 1));
  auto partBytes = std::make_shared<std::vector<size_t>>();
  size_t total = 0;
  for (const TensorDesc &p : parts) {
    if (p.dtype != whole.dtype || p.rank() != whole.rank()) {
      error = nodeError(spec, "parts must match the whole's type and rank");
      return nullptr;
    }
    partBytes->push_back(p.bytes() / size_t(std::max<int64_t>(rows, 1)));
    total += partBytes->back();
  }
  if (total != rowBytes) {
    error = nodeError(spec, "the parts do not add up to the whole");
    return nullptr;
  }
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    size_t off = 0;
    for (size_t i = 0; i < partBytes->size(); ++i) {
      size_t w = (*partBytes)[i];
      if (w && rows)
        check(split
                  ? cudaMemcpy2DAsync(
                        out[i].data, w,
                        static_cast<const char *>(in[0].data) + off, rowBytes,
                        w, size_t(rows), cudaMemcpyDeviceToDevice, s)
                  : cudaMemcpy2DAsync(static_cast<char *>(out[0].data) + off,
                                      rowBytes, in[i].data, w, w, size_t(rows),
                                      cudaMemcpyDeviceToDevice, s),
              split ? "Split" : "Concat");
      off += w;
    }
  });
}

/// Every kernel of the backend: the one list the backend and
/// cudaKernelOps() use (no device needed).
static void registerCudaKernels(std::map<std::string, Factory> &r) {
  for (const char *op :
       {"Abs", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Elu",
        "LeakyRelu", "HardSigmoid", "HardSwish", "Mish", "Reciprocal", "Gelu"})
    r[op] = createUnary;
  for (const char *op :
       {"SigmoidGrad", "TanhGrad", "EluGrad", "LeakyReluGrad",
        "HardSigmoidGrad", "HardSwishGrad", "MishGrad", "GeluGrad", "ClipGrad"})
    r[op] = createGradOp;
  for (const char *op : {"Equal", "Less", "Greater", "LessOrEqual",
                         "GreaterOrEqual", "And", "Or", "Xor"})
    r[op] = createCompare;
  r["Not"] = createNot;
  r["Where"] = createWhere;
  r["Cast"] = createCast;
  r["Shape"] = createShape;
  r["ConstantOfShape"] = createConstantOfShape;
  r["Range"] = createRange;
  r["Trilu"] = createTrilu;
  r["Transpose"] = createTranspose;
  r["Gather"] = createGather;
  r["ScatterND"] = createScatterND;
  r["GatherGrad"] = createGather;
  for (const char *op :
       {"Softmax", "LogSoftmax", "SoftmaxGrad", "LogSoftmaxGrad",
        "SoftmaxGrad_13", "LogSoftmaxGrad_13"})
    r[op] = createSoftmax;
  r["LayerNormalization"] = createLayerNorm;
  r["LayerNormalizationGrad"] = createLayerNormGrad;
  r["ReduceSumTo"] = createReduceSumTo;
  r["Expand"] = createExpand;
  r["Concat"] = createConcatSplit;
  r["Split"] = createConcatSplit;
  for (const char *op : {"Add", "Sub", "Mul", "Div", "Pow", "Sum"})
    r[op] = createNary;
  r["Neg"] = createNeg;
  r["ReduceMean"] = createReduce;
  r["ReduceSum"] = createReduce;
  for (const char *op :
       {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    r[op] = createCopy;
  r["Constant"] = createConstant;
  r["Relu"] = createRelu;
  r["ReluGrad"] = createRelu;
  r["SoftmaxCrossEntropyLoss"] = createSce;
  r["SoftmaxCrossEntropyLossGrad"] = createSceGrad;
  r["Gemm"] = createGemm;
  r["GemmGrad"] = createGemmGrad;
  r["MatMul"] = createMatMul;
  r["FusedMatMul"] = createMatMul;
  for (const char *op :
       {"Conv", "ConvGrad", "ConvTranspose", "ConvTransposeGrad"})
    r[op] = createConv;
  r["MaxPool"] = createMaxPool;
  r["MaxPoolGrad"] = createMaxPoolGrad;
  r["AveragePool"] = createAvgPool;
  r["AveragePoolGrad"] = createAvgPool;
  r["GlobalAveragePool"] = createGlobalAvgPool;
  r["GlobalAveragePoolGrad"] = createGlobalAvgPool;
  r["Pad"] = createPad;
  r["PadGrad"] = createPadGrad;
  r["Slice"] = createSlice;
  r["SliceGrad"] = createSliceGrad;
  r["Clip"] = createClip;
  r["Resize"] = createResize;
  r["ResizeGrad"] = createResize;
  r["Dropout"] = createDropout;
  r["DropoutGrad"] = createDropoutGrad;
  r["BatchNormalization"] = createBatchNorm;
  r["BatchNormalizationGrad"] = createBatchNormGrad;
}

CudaBackend::CudaBackend(cudaStream_t stream, cublasHandle_t blas,
                         cudnnHandle_t dnn)
    : stream(stream), blas(blas), dnn(dnn) {
  registerCudaKernels(registry);
  if (const char *path = std::getenv("OASR_CUDA_KERNEL_TIMES")) {
    timesPath = path;
    times = std::make_unique<std::map<std::string, OpTime>>();
  }
}

} // namespace

cudaStream_t computeStream(KernelBackend &backend) {
  return static_cast<CudaBackend &>(backend).stream;
}

} // namespace oasr::rt::cuda

namespace oasr::rt {

int cudaDeviceCount(std::string &error) {
  int n = 0;
  cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    error = std::string(cudaGetErrorString(status)) + " (" +
            cudaGetErrorName(status) + ")";
    cudaGetLastError();
    return 0;
  }
  if (n == 0)
    error = "cudaGetDeviceCount found 0 devices";
  return n;
}

std::string cudaDeviceDescription(int device) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return "?";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.1f GiB)", prop.name,
                prop.major, prop.minor,
                double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

bool selectCudaDevice(int device, std::string &error) {
  cudaError_t status = cudaSetDevice(device);
  if (status == cudaSuccess)
    return true;
  error = "cudaSetDevice(" + std::to_string(device) +
          "): " + cudaGetErrorString(status);
  cudaGetLastError();
  return false;
}

std::vector<std::string> cudaKernelOps() {
  std::map<std::string, cuda::Factory> registry;
  cuda::registerCudaKernels(registry);
  std::vector<std::string> ops;
  for (const auto &entry : registry)
    ops.push_back(entry.first);
  return ops;
}

std::unique_ptr<KernelBackend> createCudaBackend(std::string &error) {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;
  cudaError_t cs = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (cs != cudaSuccess) {
    error =
        std::string("cannot create a CUDA stream: ") + cudaGetErrorString(cs);
    cudaGetLastError();
    return nullptr;
  }
  cublasStatus_t bs = cublasCreate(&blas);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    error = std::string("cublasCreate failed: ") + cublasGetStatusName(bs);
    cudaStreamDestroy(stream);
    return nullptr;
  }
  cudnnStatus_t ds = cudnnCreate(&dnn);
  if (ds != CUDNN_STATUS_SUCCESS) {
    error = std::string("cudnnCreate failed: ") + cudnnGetErrorString(ds);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
    return nullptr;
  }
  cuda::checkBlas(cublasSetStream(blas, stream), "cublasSetStream");
  // FP32 products stay FP32 (no TF32), as on the CPU backend.
  cuda::checkBlas(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH),
                  "cublasSetMathMode");
  cuda::checkDnn(cudnnSetStream(dnn, stream), "cudnnSetStream");
  return std::make_unique<cuda::CudaBackend>(stream, blas, dnn);
}

} // namespace oasr::rt
