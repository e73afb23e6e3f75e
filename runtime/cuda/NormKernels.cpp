//===- NormKernels.cpp - Batch and layer normalization on the GPU ---------===//
//
// BatchNormalization and LayerNormalization with their gradients, the ops
// of the CPU backend's NormKernels.cpp: training batch normalization on
// cuDNN where it runs the element type, else (and for inference) the
// hand-written kernels of CudaKernels.cu; layer normalization in
// CudaPointwise.cu, f32 or bf16 data with f32 statistics.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace oasr::rt::cuda {

static Status bnParams(const OpSpec &spec, const TensorDesc &x,
                       std::initializer_list<size_t> perChannelIn,
                       std::initializer_list<size_t> perChannelOut,
                       BnParams &p) {
  if (x.rank() < 2) {
    return nodeError(spec, "expects X of rank >= 2, got " + shapeStr(x.shape));
  }
  p.n = x.shape[0];
  p.c = x.shape[1];
  p.s = x.numel() / std::max<int64_t>(1, p.n * p.c);
  p.eps = float(spec.attrs.getFloat("epsilon", 1e-5));
  p.momentum = float(spec.attrs.getFloat("momentum", 0.9));
  for (size_t i : perChannelIn)
    if (i < spec.inputs.size() && spec.inputs[i].numel() != p.c) {
      return nodeError(spec, "operand " + std::to_string(i) + " must have " +
                                 std::to_string(p.c) + " elements");
    }
  for (size_t i : perChannelOut)
    if (i < spec.outputs.size() && spec.outputs[i].numel() != p.c) {
      return nodeError(spec, "result " + std::to_string(i) + " must have " +
                                 std::to_string(p.c) + " elements");
    }
  return Status::success();
}

namespace {

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
               "cudnnBatchNormalizationBackward");
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
             "cudnnBatchNormalizationForwardTraining");
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

} // namespace

/// The cuDNN kernel of a training BatchNormalization (grad: its gradient)
/// when cuDNN runs its element type (f32, bf16) and X is at most 2^31
/// elements per dimension; null otherwise (the hand-written kernels run).
static std::unique_ptr<Kernel> createCudnnBn(CudaBackend &be,
                                             const OpSpec &spec,
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
static OpSpec bnAsF32(const OpSpec &spec, std::initializer_list<size_t> ins,
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
static KernelOr createBatchNorm(CudaBackend &be, const OpSpec &spec) {
  BnParams p;
  bool bf16 = false;
  OpSpec f = bnAsF32(spec, {0}, {0}, bf16);
  OASR_RETURN_IF_ERROR(
      checkSpec(f, 5, 5, 1, 5, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}));
  OASR_RETURN_IF_ERROR(
      bnParams(spec, spec.inputs[0], {1, 2, 3, 4}, {1, 2, 3, 4}, p));
  bool training = spec.attrs.has("training_mode")
                      ? spec.attrs.getInt("training_mode") != 0
                      : spec.outputs.size() > 1;
  if ((!training && spec.outputs.size() > 1) ||
      spec.outputs[0].shape != spec.inputs[0].shape) {
    return nodeError(spec, "Y must have X's shape, and the inference form "
                           "(training_mode = 0) has one result");
  }
  if (training)
    if (auto k = createCudnnBn(be, spec, p, /*grad=*/false))
      return k;
  if (bf16) {
    return nodeError(spec, "bf16 runs on cuDNN's training kernel only");
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
static KernelOr createBatchNormGrad(CudaBackend &be, const OpSpec &spec) {
  BnParams p;
  bool bf16 = false;
  OpSpec f = bnAsF32(spec, {0, 1}, {0}, bf16);
  OASR_RETURN_IF_ERROR(checkSpec(f, 5, 5, 1, 3, {0, 1, 2, 3, 4}, {0, 1, 2}));
  OASR_RETURN_IF_ERROR(bnParams(spec, spec.inputs[1], {2, 3, 4}, {1, 2}, p));
  if (spec.inputs[0].shape != spec.inputs[1].shape ||
      spec.outputs[0].shape != spec.inputs[1].shape) {
    return nodeError(spec, "dY, X and dX must have the same shape");
  }
  if (auto k = createCudnnBn(be, spec, p, /*grad=*/true))
    return k;
  if (bf16) {
    return nodeError(spec, "bf16 runs on cuDNN's training kernel only");
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
// LayerNormalization / LayerNormalizationGrad
//===----------------------------------------------------------------------===//

/// Rows and columns of a LayerNormalization {axis} of `shape`.
static void layerNormRows(const std::vector<int64_t> &shape, int64_t axis,
                          int64_t &rows, int64_t &cols) {
  int64_t rank = int64_t(shape.size());
  if (axis < 0)
    axis += rank;
  rows = cols = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? rows : cols) *= shape[size_t(d)];
}

static KernelOr createLayerNorm(CudaBackend &be, const OpSpec &spec) {
  // X, Scale, B and Y f32 or bf16; Mean and InvStdDev f32.
  OASR_RETURN_IF_ERROR(checkSpec(bf16AsF32(spec), 2, 3, 1, 3, {0, 1, 2}, {0}));
  OASR_RETURN_IF_ERROR(checkAllF32(spec, {}, {1, 2}));
  int64_t rows, cols;
  layerNormRows(spec.inputs[0].shape, spec.attrs.getInt("axis", -1), rows,
                cols);
  if (spec.inputs[1].numel() != cols) {
    return nodeError(spec, "Scale must have the normalized dimensions' size");
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
static KernelOr createLayerNormGrad(CudaBackend &be, const OpSpec &spec) {
  // dY, X, Scale, dX, dScale, dB f32 or bf16; Mean and InvStdDev f32.
  OASR_RETURN_IF_ERROR(
      checkSpec(bf16AsF32(spec), 5, 5, 2, 3, {0, 1, 2}, {0, 1, 2}));
  OASR_RETURN_IF_ERROR(checkAllF32(spec, {3, 4}, {}));
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

void registerNormKernels(FactoryRegistry &r) {
  r["BatchNormalization"] = createBatchNorm;
  r["BatchNormalizationGrad"] = createBatchNormGrad;
  r["LayerNormalization"] = createLayerNorm;
  r["LayerNormalizationGrad"] = createLayerNormGrad;
}

} // namespace oasr::rt::cuda
