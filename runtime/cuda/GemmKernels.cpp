//===- GemmKernels.cpp - Gemm and MatMul on cuBLAS ------------------------===//
//
// Gemm/GemmGrad, MatMul and FusedMatMul on cuBLAS (f32, TF32 or bf16/f16
// tensor cores with f32 accumulation), the ops of the CPU backend's
// GemmKernels.cpp (oneDNN).
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace oasr::rt::cuda {

/// Row-major C[m,n] = alpha op(A) op(B) + beta C, A stored [m,k] (or, ta,
/// [k,m]), B stored [k,n] (or, tb, [n,k]). cuBLAS is column-major: the
/// row-major C is the column-major C^T = op(B)^T op(A)^T, so B goes first.
/// A and B are of type `ab`, C of `ct`; products of 16-bit operands run on
/// tensor cores with f32 accumulation, f32 ones as the math mode says.
static void rowMajorGemm(cublasHandle_t h, bool ta, bool tb, int64_t m,
                         int64_t n, int64_t k, float alpha, const void *a,
                         const void *b, float beta, void *c,
                         DType ab = DType::F32, DType ct = DType::F32) {
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

namespace {

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

} // namespace

/// The element type of a product's operands `ops` of `spec` when they share
/// one float type and each result in `results` is f32 or that type; a
/// failure otherwise.
static Status productTypes(const OpSpec &spec,
                           std::initializer_list<size_t> ops,
                           std::initializer_list<size_t> results, DType &type) {
  type = spec.inputs[*ops.begin()].dtype;
  bool ok = type == DType::F32 || isLowFloat(type);
  for (size_t i : ops)
    ok = ok && spec.inputs[i].dtype == type;
  for (size_t i : results)
    ok = ok && i < spec.outputs.size() &&
         (spec.outputs[i].dtype == DType::F32 || spec.outputs[i].dtype == type);
  if (!ok)
    return nodeError(spec, "operands must share one float type (f32, bf16 "
                           "or f16), results f32 or that type");
  return Status::success();
}

/// Gemm: Y = alpha op(A) op(B) + beta C, C broadcast onto [M, N] first.
/// bf16/f16 A and B: a tensor-core product into Y (f32 or 16-bit); C is
/// added in f32 (in scratch when C or Y is 16-bit).
static KernelOr createGemm(CudaBackend &be, const OpSpec &spec) {
  GemmShape g;
  DType ab;
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 3, 1, 1));
  OASR_RETURN_IF_ERROR(productTypes(spec, {0, 1}, {0}, ab));
  OASR_RETURN_IF_ERROR(
      gemmShape(spec, spec.inputs[0], spec.inputs[1], spec.outputs[0], g));
  bool bias = spec.inputs.size() == 3 && g.beta != 0.0f;
  DType yt = spec.outputs[0].dtype,
        ct = bias ? spec.inputs[2].dtype : DType::F32;
  if (bias && ct != DType::F32 && !isLowFloat(ct)) {
    return nodeError(spec, "C must be a float tensor");
  }
  Broadcast b;
  if (bias) {
    OpSpec c = spec;
    c.inputs = {spec.inputs[2]};
    OASR_RETURN_IF_ERROR(makeBroadcast(c, spec.outputs[0].shape, b));
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
static KernelOr createGemmGrad(CudaBackend &be, const OpSpec &spec) {
  GemmShape g;
  DType ab;
  OASR_RETURN_IF_ERROR(checkArity(spec, 3, 3, 2, 3));
  OASR_RETURN_IF_ERROR(productTypes(spec, {0, 1, 2}, {0, 1}, ab));
  OASR_RETURN_IF_ERROR(gemmGradShape(spec, g));
  bool wantC = spec.outputs.size() == 3;
  Reduction r;
  if (wantC && !makeReduction({g.m, g.n}, spec.outputs[2].shape, r))
    return gemmBiasError(spec, spec.outputs[2], g.m, g.n);
  DType at = spec.outputs[0].dtype, bt = spec.outputs[1].dtype,
        ct = wantC ? spec.outputs[2].dtype : DType::F32;
  if (ct != DType::F32 && !isLowFloat(ct)) {
    return nodeError(spec, "dC must be a float tensor");
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
static KernelOr createMatMul(CudaBackend &be, const OpSpec &spec) {
  DType ab;
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  OASR_RETURN_IF_ERROR(productTypes(spec, {0, 1}, {0}, ab));
  bool fused = spec.opType == "FusedMatMul";
  bool ta = fused && spec.attrs.getInt("transA", 0) != 0,
       tb = fused && spec.attrs.getInt("transB", 0) != 0;
  float alpha = fused ? float(spec.attrs.getFloat("alpha", 1.0)) : 1.0f;
  if (fused && (spec.attrs.getInt("transBatchA", 0) ||
                spec.attrs.getInt("transBatchB", 0))) {
    return nodeError(spec, "transBatchA/transBatchB are not supported");
  }
  // The logical (untransposed) operands, for MatMul's shape rule.
  OpSpec logical = spec;
  for (auto [i, t] : {std::pair<size_t, bool>{0, ta}, {1, tb}}) {
    auto &sh = logical.inputs[i].shape;
    if (!t)
      continue;
    if (sh.size() < 2) {
      return nodeError(spec, "transposed operands must have rank >= 2");
    }
    std::swap(sh[sh.size() - 1], sh[sh.size() - 2]);
  }
  std::vector<int64_t> ad, bd, yd;
  OASR_RETURN_IF_ERROR(matMulShapes(logical, ad, bd, yd));
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

void registerGemmKernels(FactoryRegistry &r) {
  r["Gemm"] = createGemm;
  r["GemmGrad"] = createGemmGrad;
  r["MatMul"] = createMatMul;
  r["FusedMatMul"] = createMatMul;
}

} // namespace oasr::rt::cuda
