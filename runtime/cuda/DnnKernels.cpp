//===- DnnKernels.cpp - cuBLAS and cuDNN kernels --------------------------===//
//
// The library-backed ops, as the CPU backend's DnnlKernels.cpp is for
// oneDNN: Gemm/GemmGrad/MatMul/FusedMatMul on cuBLAS (f32, TF32 or bf16
// tensor cores), Conv/ConvGrad/ConvTranspose(Grad) on cuDNN's convolution
// API, training BatchNormalization and its gradient on cuDNN.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace oasr::rt::cuda {

namespace {

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

} // namespace

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

} // namespace

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

namespace {

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

} // namespace

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

namespace {

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

} // namespace

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

} // namespace oasr::rt::cuda
