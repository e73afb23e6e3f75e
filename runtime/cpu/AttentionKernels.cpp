//===- AttentionKernels.cpp - FusedAttention and its gradient -------------===//
//
// FusedAttention(Q, KT, V[, mask]) and FusedAttentionGrad (the op
// oasr-fuse-attention emits), one batch index (batch x heads) per task on
// the kernel's threads: the scores and probabilities of one index live in a
// per-thread slice of the kernel's workspace, never in the activation
// arena, and the gradient recomputes them from Q, KT, V and the mask.
// Products are oneDNN's sgemm (single-threaded inside the parallel loop);
// bf16 operands are widened into the workspace slice and results rounded
// once, the softmax runs in f32 with f64 row sums.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "oasr/Runtime/LowFloat.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace oasr::rt::cpu {

namespace {

/// Row-major C = alpha * op(A) op(B), C is rows x cols, op(A) rows x inner.
static void gemm(bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner,
                 float alpha, const float *a, const float *b, float *c) {
  dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', rows, cols, inner, alpha, a,
                 ta ? rows : inner, b, tb ? inner : cols, 0.0f, c, cols);
  if (st != dnnl_success)
    fatalKernelError("oneDNN sgemm failed (status " + std::to_string(int(st)) +
                     ")");
}

/// Y or dX, FusedAttention(Grad) on f32 or bf16 tensors (AttentionGeom).
class AttentionKernel final : public CpuKernel {
public:
  AttentionKernel(const OpSpec &spec, AttentionGeom geom, bool grad)
      : CpuKernel(spec), g(std::move(geom)), grad(grad),
        low(g.dtype == DType::BF16) {
    slots = numThreads() > 0 ? numThreads() : omp_get_max_threads();
    slots = std::max(1, slots);
    int64_t mn = g.m * g.n, md = g.m * g.d, dn = g.d * g.n, ne = g.n * g.e,
            me = g.m * g.e;
    // Scores/probabilities, and dP/dS for the gradient.
    perThread = mn * (grad ? 2 : 1);
    // Widened operands (and dY) and f32 results.
    if (low)
      perThread += grad ? 2 * (md + dn + ne) + me : md + dn + ne + me;
    // Keep each slice on its own cache lines.
    perThread = (perThread + 15) / 16 * 16;
    work = dnnl::memory(plainDesc({int64_t(slots) * perThread}), engine(),
                        DNNL_MEMORY_NONE);
    addScratch(work);
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    size_t first = grad ? 1 : 0;
    const char *q = in[first].as<char>(), *kt = in[first + 1].as<char>(),
               *v = in[first + 2].as<char>();
    const uint8_t *mask = g.hasMask ? in[first + 3].as<uint8_t>() : nullptr;
    const char *dy = grad ? in[0].as<char>() : nullptr;
    float *base = static_cast<float *>(work.get_data_handle());
    const size_t es = dtypeSize(g.dtype);
    const int64_t md = g.m * g.d, dn = g.d * g.n, ne = g.n * g.e,
                  me = g.m * g.e, mn = g.m * g.n;
    int threads = std::max(1, std::min(slots, omp_get_max_threads()));
#pragma omp parallel for num_threads(threads) schedule(dynamic)
    for (int64_t b = 0; b < g.batch; ++b) {
      float *ws = base + int64_t(omp_get_thread_num()) * perThread;
      float *scores = ws;
      ws += mn;
      float *dScores = grad ? ws : nullptr;
      ws += grad ? mn : 0;
      // The operands of index b, widened into the slice when bf16.
      auto operand = [&](const char *t, int64_t n) -> const float * {
        const char *p = t + size_t(b * n) * es;
        if (!low)
          return reinterpret_cast<const float *>(p);
        float *dst = ws;
        ws += n;
        widenToF32(g.dtype, p, dst, size_t(n));
        return dst;
      };
      auto result = [&](size_t k, int64_t n) -> float * {
        char *p = out[k].as<char>() + size_t(b * n) * es;
        if (!low)
          return reinterpret_cast<float *>(p);
        float *dst = ws;
        ws += n;
        return dst;
      };
      const float *qb = operand(q, md), *ktb = operand(kt, dn),
                  *vb = operand(v, ne);
      probabilities(b, qb, ktb, mask, scores);
      if (!grad) {
        float *y = result(0, me);
        gemm(false, false, g.m, g.e, g.n, 1.0f, scores, vb, y);
        if (low)
          narrowFromF32(g.dtype, y, out[0].as<char>() + size_t(b * me) * es,
                        size_t(me));
        continue;
      }
      const float *dyb = operand(dy, me);
      float *dq = result(0, md), *dkt = result(1, dn), *dv = result(2, ne);
      // dP = dY Vᵀ, dV = Pᵀ dY.
      gemm(false, true, g.m, g.n, g.e, 1.0f, dyb, vb, dScores);
      gemm(true, false, g.n, g.e, g.m, 1.0f, scores, dyb, dv);
      // dS = scale * P (dP - rowsum(P dP)).
      for (int64_t i = 0; i < g.m; ++i) {
        const float *p = scores + i * g.n;
        float *ds = dScores + i * g.n;
        double dot = 0;
        for (int64_t j = 0; j < g.n; ++j)
          dot += double(p[j]) * double(ds[j]);
        float fdot = float(dot);
        for (int64_t j = 0; j < g.n; ++j)
          ds[j] = g.scale * p[j] * (ds[j] - fdot);
      }
      // dQ = dS KTᵀ, dKT = Qᵀ dS.
      gemm(false, true, g.m, g.d, g.n, 1.0f, dScores, ktb, dq);
      gemm(true, false, g.d, g.n, g.m, 1.0f, qb, dScores, dkt);
      if (low) {
        narrowFromF32(g.dtype, dq, out[0].as<char>() + size_t(b * md) * es,
                      size_t(md));
        narrowFromF32(g.dtype, dkt, out[1].as<char>() + size_t(b * dn) * es,
                      size_t(dn));
        narrowFromF32(g.dtype, dv, out[2].as<char>() + size_t(b * ne) * es,
                      size_t(ne));
      }
    }
  }

private:
  /// P = softmax(scale * Q KT, -inf where masked) of index b, row by row
  /// (a row masked everywhere gives NaN, as Softmax of -inf does).
  void probabilities(int64_t b, const float *q, const float *kt,
                     const uint8_t *mask, float *p) const {
    gemm(false, false, g.m, g.n, g.d, g.scale, q, kt, p);
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < g.m; ++i) {
      float *row = p + i * g.n;
      if (mask) {
        const uint8_t *mrow =
            mask + g.maskOffset[size_t(b)] + i * g.maskRowStride;
        for (int64_t j = 0; j < g.n; ++j)
          if (mrow[j * g.maskColStride])
            row[j] = ninf;
      }
      float mx = ninf;
      for (int64_t j = 0; j < g.n; ++j)
        mx = std::max(mx, row[j]);
      double sum = 0;
      for (int64_t j = 0; j < g.n; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      float inv = float(1.0 / sum);
      for (int64_t j = 0; j < g.n; ++j)
        row[j] *= inv;
    }
  }

  AttentionGeom g;
  bool grad, low;
  int slots = 1;
  int64_t perThread = 0;
  dnnl::memory work;
};

} // namespace

static KernelOr createAttention(const OpSpec &spec) {
  bool grad = spec.opType == "FusedAttentionGrad";
  AttentionGeom g;
  OASR_RETURN_IF_ERROR(attentionGeom(spec, grad, g));
  return std::unique_ptr<Kernel>(
      std::make_unique<AttentionKernel>(spec, std::move(g), grad));
}

void registerAttentionKernels(KernelRegistry &r) {
  r["FusedAttention"] = createAttention;
  r["FusedAttentionGrad"] = createAttention;
}

} // namespace oasr::rt::cpu
