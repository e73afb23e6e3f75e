//===- AttentionKernels.cpp - FusedAttention and its gradient -------------===//
//
// FusedAttention(Q, KT, V[, mask]) and FusedAttentionGrad on cuBLAS
// strided-batched products and the backend's softmax kernels, the ops of
// the CPU backend's AttentionKernels.cpp. The batch indices run in chunks
// whose scores, probabilities and their gradients fit the kernel's
// workspace (at most kChunkBytes, placed in the arena for the node's run
// only); the gradient recomputes the probabilities. f32 scores, bf16
// probabilities and score gradients where the operands are bf16 (tensor
// cores read one type), f32 accumulation.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>

namespace oasr::rt::cuda {

/// The workspace a chunk of batch indices may use.
static constexpr int64_t kChunkBytes = int64_t(64) << 20;

/// Row-major C[i] = alpha op(A[i]) op(B[i]) for `count` matrices at the
/// given element strides (GemmKernels.cpp's rowMajorGemm, batched).
static void batchedGemm(cublasHandle_t h, bool ta, bool tb, int64_t m,
                        int64_t n, int64_t k, float alpha, const void *a,
                        long long strideA, const void *b, long long strideB,
                        void *c, long long strideC, int64_t count, DType ab,
                        DType ct) {
  const float zero = 0.0f;
  cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  int lda = int(ta ? m : k), ldb = int(tb ? k : n);
  checkBlas(cublasGemmStridedBatchedEx(
                h, opB, opA, int(n), int(m), int(k), &alpha, b, blasType(ab),
                ldb, strideB, a, blasType(ab), lda, strideA, &zero, c,
                blasType(ct), int(n), strideC, int(count), CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx");
}

namespace {

/// Y or dQ, dKT, dV of FusedAttention(Grad) (AttentionGeom), f32 or bf16.
class AttentionKernel final : public CudaKernel {
public:
  AttentionKernel(CudaBackend &be, const OpSpec &spec, AttentionGeom geom,
                  bool grad, int64_t *maskOffset)
      : CudaKernel(be, spec), g(std::move(geom)), grad(grad),
        maskOffset(maskOffset) {
    es = int64_t(dtypeSize(g.dtype));
    // Per batch index: f32 scores and probabilities in the operands' type;
    // the gradient adds f32 dP and dS in the operands' type.
    int64_t perIndex = g.m * g.n * (4 + es) * (grad ? 2 : 1);
    chunk = std::clamp<int64_t>(kChunkBytes / std::max<int64_t>(perIndex, 1), 1,
                                g.batch);
    scores = reserve(size_t(chunk * g.m * g.n * 4));
    probs = reserve(size_t(chunk * g.m * g.n * es));
    if (grad) {
      dProbs = reserve(size_t(chunk * g.m * g.n * 4));
      dScores = reserve(size_t(chunk * g.m * g.n * es));
    }
  }
  ~AttentionKernel() override {
    if (maskOffset)
      cudaFree(maskOffset);
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    cublasHandle_t h = backend.blas;
    size_t first = grad ? 1 : 0;
    const char *q = in[first].as<char>(), *kt = in[first + 1].as<char>(),
               *v = in[first + 2].as<char>();
    const uint8_t *mask = g.hasMask ? in[first + 3].as<uint8_t>() : nullptr;
    const int64_t md = g.m * g.d, dn = g.d * g.n, ne = g.n * g.e,
                  me = g.m * g.e, mn = g.m * g.n;
    const bool low = g.dtype == DType::BF16;
    float *s = scratchAt<float>(scores), *dp = nullptr;
    void *p = scratchAt<char>(probs), *ds = nullptr;
    if (grad) {
      dp = scratchAt<float>(dProbs);
      ds = scratchAt<char>(dScores);
    }
    for (int64_t b0 = 0; b0 < g.batch; b0 += chunk) {
      int64_t c = std::min(chunk, g.batch - b0);
      const char *qc = q + b0 * md * es, *ktc = kt + b0 * dn * es,
                 *vc = v + b0 * ne * es;
      // P = softmax(scale * Q KT, -inf where masked).
      batchedGemm(h, false, false, g.m, g.n, g.d, g.scale, qc, md, ktc, dn, s,
                  mn, c, g.dtype, DType::F32);
      if (mask)
        launchAttentionMask(s, c, b0, g.m, g.n, mask, maskOffset,
                            g.maskRowStride, g.maskColStride, stream);
      RowParams rows;
      rows.outer = c * g.m;
      rows.axis = g.n;
      launchSoftmax(rows, FloatPtr{s, false}, FloatPtr{p, low}, false, stream);
      if (!grad) {
        batchedGemm(h, false, false, g.m, g.e, g.n, 1.0f, p, mn, vc, ne,
                    out[0].as<char>() + b0 * me * es, me, c, g.dtype, g.dtype);
        continue;
      }
      const char *dyc = in[0].as<char>() + b0 * me * es;
      // dP = dY Vᵀ; dS = P (dP - rowsum(P dP)); dV = Pᵀ dY;
      // dQ = scale dS KTᵀ; dKT = scale Qᵀ dS.
      batchedGemm(h, false, true, g.m, g.n, g.e, 1.0f, dyc, me, vc, ne, dp, mn,
                  c, g.dtype, DType::F32);
      launchSoftmaxGrad(rows, FloatPtr{dp, false}, FloatPtr{p, low},
                        FloatPtr{ds, low}, false, stream);
      batchedGemm(h, true, false, g.n, g.e, g.m, 1.0f, p, mn, dyc, me,
                  out[2].as<char>() + b0 * ne * es, ne, c, g.dtype, g.dtype);
      batchedGemm(h, false, true, g.m, g.d, g.n, g.scale, ds, mn, ktc, dn,
                  out[0].as<char>() + b0 * md * es, md, c, g.dtype, g.dtype);
      batchedGemm(h, true, false, g.d, g.n, g.m, g.scale, qc, md, ds, mn,
                  out[1].as<char>() + b0 * dn * es, dn, c, g.dtype, g.dtype);
    }
  }

private:
  AttentionGeom g;
  bool grad;
  int64_t *maskOffset;
  int64_t es = 4, chunk = 1;
  size_t scores = 0, probs = 0, dProbs = 0, dScores = 0;
};

} // namespace

static KernelOr createAttention(CudaBackend &be, const OpSpec &spec) {
  bool grad = spec.opType == "FusedAttentionGrad";
  AttentionGeom g;
  OASR_RETURN_IF_ERROR(attentionGeom(spec, grad, g));
  int64_t *offsets = nullptr;
  if (g.hasMask) {
    size_t bytes = g.maskOffset.size() * sizeof(int64_t);
    if (cudaMalloc(reinterpret_cast<void **>(&offsets), bytes) != cudaSuccess ||
        cudaMemcpy(offsets, g.maskOffset.data(), bytes,
                   cudaMemcpyHostToDevice) != cudaSuccess) {
      cudaFree(offsets);
      return nodeError(spec, "cannot place the mask's " +
                                 std::to_string(bytes) +
                                 " bytes of offsets on the device");
    }
  }
  return std::unique_ptr<Kernel>(
      std::make_unique<AttentionKernel>(be, spec, std::move(g), grad, offsets));
}

void registerAttentionKernels(FactoryRegistry &r) {
  r["FusedAttention"] = createAttention;
  r["FusedAttentionGrad"] = createAttention;
}

} // namespace oasr::rt::cuda
