//===- ConvKernels.cpp - Convolutions on cuDNN ----------------------------===//
//
// Conv/ConvGrad and ConvTranspose/ConvTransposeGrad on cuDNN's convolution
// API (FMA, or TF32 tensor cores under --precision=tf32; bf16 on tensor
// cores), the ops of the CPU backend's ConvKernels.cpp (oneDNN).
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace oasr::rt::cuda {

namespace {

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

  /// Sets every descriptor; a failure where cuDNN cannot express
  /// the node.
  Status init(const OpSpec &spec, const TensorDesc &xd, const TensorDesc &wd,
              const TensorDesc &yd) {
    type = xd.dtype == DType::BF16  ? CUDNN_DATA_BFLOAT16
           : xd.dtype == DType::F16 ? CUDNN_DATA_HALF
                                    : CUDNN_DATA_FLOAT;
    int64_t group = 1;
    Window win;
    OASR_RETURN_IF_ERROR(convWindow(spec, xd, wd, yd, group, win));
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
    return Status::success();
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

} // namespace

/// The first deterministic algorithm of cuDNN's heuristic list (runs then
/// repeat bitwise, which the strategy-invariance tests rely on).
template <typename Perf, typename Algo>
static bool pickAlgo(const Perf *perf, int count, Algo &algo) {
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
static bool chooseAlgo(Algo &algo, size_t &ws, Get &get, const char *getName,
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

namespace {

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

  Status init(const OpSpec &spec) {
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
    OASR_RETURN_IF_ERROR(d.init(spec, *x, w, *y));
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
        return nodeError(spec, "16-bit convolutions take one element type, "
                               "symmetric pads and no bias");
      }
    } else {
      OASR_RETURN_IF_ERROR(checkAllF32(spec, {0, 1, 2}, {0, 1, 2}));
    }
    // The bias: B for the forward nodes, dB for the gradients, over the
    // channels of the node's result (Conv: y; ConvTranspose: x) or dY.
    bool transposed =
        role == ConvRole::ConvTranspose || role == ConvRole::ConvTransposeGrad;
    bias = gradNode ? out.size() == 3 && outputUsed(spec, 2) : in.size() == 3;
    int64_t channels = (transposed ? *x : *y).shape[1];
    if (bias && (gradNode ? out[2] : in[2]).numel() != channels) {
      return nodeError(spec,
                       "B must have " + std::to_string(channels) + " elements");
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
      return nodeError(spec, std::string("cuDNN has no deterministic ") + what +
                                 " algorithm for this convolution");
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
    return Status::success();
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
               "cudnnConvolutionForward");
    if (bwdData) {
      void *dx = d.padded ? scratchAt<float>(dxpAt) : out[0].data;
      checkDnn(cudnnConvolutionBackwardData(h, &one, d.w, w, d.y, y, d.conv,
                                            dataAlgo, ws, wsBytes, &zero, d.x,
                                            dx),
               "cudnnConvolutionBackwardData");
      if (d.padded)
        launchPad(d.cropX, static_cast<const float *>(dx), out[0].as<float>(),
                  0.0f, out[0].numel(), stream);
    }
    if (wantFilter)
      checkDnn(cudnnConvolutionBackwardFilter(h, &one, d.x, x, d.y, y, d.conv,
                                              filterAlgo, ws, wsBytes, &zero,
                                              d.w, out[1].data),
               "cudnnConvolutionBackwardFilter");
    if (!bias)
      return;
    switch (role) {
    case ConvRole::Conv:
      checkDnn(cudnnAddTensor(h, &one, d.b, in[2].data, &one, d.y, out[0].data),
               "cudnnAddTensor");
      break;
    case ConvRole::ConvGrad:
      checkDnn(cudnnConvolutionBackwardBias(h, &one, d.y, in[0].data, &zero,
                                            d.b, out[2].data),
               "cudnnConvolutionBackwardBias");
      break;
    case ConvRole::ConvTranspose:
      checkDnn(cudnnAddTensor(h, &one, d.xBias, in[2].data, &one, d.xPlain,
                              out[0].data),
               "cudnnAddTensor");
      break;
    case ConvRole::ConvTransposeGrad:
      checkDnn(cudnnConvolutionBackwardBias(h, &one, d.xPlain, in[0].data,
                                            &zero, d.xBias, out[2].data),
               "cudnnConvolutionBackwardBias");
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

} // namespace

static KernelOr createConv(CudaBackend &be, const OpSpec &spec) {
  ConvRole role = spec.opType == "ConvGrad"        ? ConvRole::ConvGrad
                  : spec.opType == "ConvTranspose" ? ConvRole::ConvTranspose
                  : spec.opType == "ConvTransposeGrad"
                      ? ConvRole::ConvTransposeGrad
                      : ConvRole::Conv;
  bool grad = role == ConvRole::ConvGrad || role == ConvRole::ConvTransposeGrad;
  OASR_RETURN_IF_ERROR(grad ? checkArity(spec, 3, 3, 2, 3)
                            : checkArity(spec, 2, 3, 1, 1));
  if (grad && (spec.outputs[0].shape != spec.inputs[1].shape ||
               spec.outputs[1].shape != spec.inputs[2].shape)) {
    return nodeError(spec, "result shapes must be X's, W's and [C]");
  }
  if (role == ConvRole::ConvTranspose || role == ConvRole::ConvTransposeGrad)
    OASR_RETURN_IF_ERROR(checkConvTransposeAttrs(spec));
  auto k = std::make_unique<ConvKernel>(be, spec, role);
  OASR_RETURN_IF_ERROR(k->init(spec));
  return k;
}

void registerConvKernels(FactoryRegistry &r) {
  for (const char *op :
       {"Conv", "ConvGrad", "ConvTranspose", "ConvTransposeGrad"})
    r[op] = createConv;
}

} // namespace oasr::rt::cuda
