//===- GemmKernels.cpp - Gemm and MatMul on oneDNN ------------------------===//
//
// Gemm/GemmGrad, MatMul and FusedMatMul on oneDNN's matmul primitive (f32,
// or bf16 operands with f32 accumulation), the ops of the CUDA backend's
// GemmKernels.cpp (cuBLAS). Primitives are built once in create(); run()
// binds the executor's row-major buffers and executes.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "oasr/Runtime/LowFloat.h"

#include <optional>

namespace oasr::rt::cpu {

//===----------------------------------------------------------------------===//
// Gemm / GemmGrad / MatMul
//===----------------------------------------------------------------------===//

/// rows x cols view of a row-major buffer; `transposed` means the buffer
/// holds the cols x rows matrix.
static memory::desc matDesc(int64_t rows, int64_t cols, bool transposed,
                            dt type) {
  return memory::desc({rows, cols}, type,
                      transposed ? dims{1, rows} : dims{cols, 1});
}

/// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] on row-major buffers; A and B
/// are operands `a` and `b` of the node, C is its result `c`.
static PlainPrimitive matMul2D(int64_t m, int64_t k, int64_t n, bool ta,
                               bool tb, float alpha, size_t a, size_t b,
                               size_t c, dt type = dt::f32,
                               std::optional<size_t> rowBias = {},
                               dt outType = dt::undef) {
  if (outType == dt::undef)
    outType = type;
  auto amd = matDesc(m, k, ta, type), bmd = matDesc(k, n, tb, type),
       cmd = matDesc(m, n, false, outType), biasMd = matDesc(1, n, false, type);
  dnnl::primitive_attr attr;
  if (alpha != 1.0f)
    attr.set_output_scales(0, {alpha});
  dnnl::matmul::primitive_desc pd(
      rowBias ? dnnl::matmul::desc(amd, bmd, biasMd, cmd)
              : dnnl::matmul::desc(amd, bmd, cmd),
      attr, engine());
  PlainPrimitive p{dnnl::matmul(pd)};
  p.in(DNNL_ARG_SRC, amd, a)
      .in(DNNL_ARG_WEIGHTS, bmd, b)
      .out(DNNL_ARG_DST, cmd, c);
  if (rowBias)
    p.in(DNNL_ARG_BIAS, biasMd, *rowBias);
  return p;
}

namespace {

/// How a Gemm's C operand broadcasts onto [M, N].
enum class BiasKind { None, Scalar, Row /*[N]*/, Col /*[M,1]*/, Full };

} // namespace

static Status biasKind(const OpSpec &spec, const TensorDesc &c, int64_t m,
                       int64_t n, BiasKind &kind) {
  std::vector<int64_t> s = c.shape;
  while (s.size() < 2)
    s.insert(s.begin(), 1);
  if (s.size() == 2 && s[0] == 1 && s[1] == 1)
    kind = BiasKind::Scalar;
  else if (s.size() == 2 && s[0] == 1 && s[1] == n)
    kind = BiasKind::Row;
  else if (s.size() == 2 && s[0] == m && s[1] == 1)
    kind = BiasKind::Col;
  else if (s.size() == 2 && s[0] == m && s[1] == n)
    kind = BiasKind::Full;
  else
    return gemmBiasError(spec, c, m, n);
  return Status::success();
}

namespace {

class GemmKernel final : public CpuKernel {
public:
  /// `fusedBias`: oneDNN adds a row bias C (beta 1) itself (bf16).
  GemmKernel(const OpSpec &spec, const GemmShape &g, BiasKind kind, dt type,
             bool fusedBias)
      : CpuKernel(spec), g(g), kind(fusedBias ? BiasKind::None : kind),
        mm(matMul2D(g.m, g.k, g.n, g.ta, g.tb, g.alpha, 0, 1, 0, type,
                    fusedBias ? std::optional<size_t>(2) : std::nullopt,
                    dataType(spec.outputs[0]))) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    mm.run(in, out);
    if (kind == BiasKind::None || g.beta == 0.0f)
      return;
    float *y = out[0].as<float>();
    const float *c = in[2].as<float>();
    const float beta = g.beta;
    const int64_t m = g.m, n = g.n;
    BiasKind kd = kind;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      float *row = y + i * n;
      switch (kd) {
      case BiasKind::Scalar:
        for (int64_t j = 0; j < n; ++j)
          row[j] += beta * c[0];
        break;
      case BiasKind::Row:
        for (int64_t j = 0; j < n; ++j)
          row[j] += beta * c[j];
        break;
      case BiasKind::Col:
        for (int64_t j = 0; j < n; ++j)
          row[j] += beta * c[i];
        break;
      case BiasKind::Full:
        for (int64_t j = 0; j < n; ++j)
          row[j] += beta * c[i * n + j];
        break;
      case BiasKind::None:
        break;
      }
    }
  }

private:
  GemmShape g;
  BiasKind kind;
  PlainPrimitive mm;
};

} // namespace

static KernelOr createGemm(const OpSpec &spec) {
  dt type;
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 3, 1, 1));
  OASR_RETURN_IF_ERROR(
      uniformFloat(spec, {0, 1, 2}, {0}, type, /*wideOutputs=*/true));
  GemmShape g;
  BiasKind kind = BiasKind::None;
  OASR_RETURN_IF_ERROR(
      gemmShape(spec, spec.inputs[0], spec.inputs[1], spec.outputs[0], g));
  if (spec.inputs.size() == 3)
    OASR_RETURN_IF_ERROR(biasKind(spec, spec.inputs[2], g.m, g.n, kind));
  bool fusedBias = type != dt::f32 && kind == BiasKind::Row && g.beta == 1.0f;
  if (type != dt::f32 && kind != BiasKind::None && g.beta != 0.0f &&
      !fusedBias) {
    // Other biases are added on f32 buffers: the backend widens this node.
    return nodeError(spec, "a bf16 Gemm with this C runs widened");
  }
  return guardCreate(spec, [&] {
    return std::make_unique<GemmKernel>(spec, g, kind, type, fusedBias);
  });
}

namespace {

/// GemmGrad: dY, A, B -> dA, dB[, dC].
class GemmGradKernel final : public CpuKernel {
public:
  GemmGradKernel(const OpSpec &spec, const GemmShape &g, BiasKind kind, dt type)
      : CpuKernel(spec), g(g), kind(kind), bf16(type == dt::bf16) {
    // Y = alpha op(A) op(B): dop(A) = alpha dY op(B)^T, dop(B) = alpha
    // op(A)^T dY; a transposed operand's gradient is the transposed product.
    // Operands dY [M,N] (0); A (1) is [M,K] or (transA) [K,M]; B (2) is [K,N]
    // or [N,K].
    if (outputUsed(spec, 0)) {
      if (!g.ta) // dA[M,K] = dY[M,N] * op(B)^T[N,K]
        mmA.emplace(matMul2D(g.m, g.n, g.k, false, !g.tb, g.alpha, 0, 2, 0,
                             type, {}, dataType(spec.outputs[0])));
      else // dA[K,M] = op(B)[K,N] * dY^T[N,M]
        mmA.emplace(matMul2D(g.k, g.n, g.m, g.tb, true, g.alpha, 2, 0, 0, type,
                             {}, dataType(spec.outputs[0])));
    }
    if (outputUsed(spec, 1)) {
      if (!g.tb) // dB[K,N] = op(A)^T[K,M] * dY[M,N]
        mmB.emplace(matMul2D(g.k, g.m, g.n, !g.ta, false, g.alpha, 1, 0, 1,
                             type, {}, dataType(spec.outputs[1])));
      else // dB[N,K] = dY^T[N,M] * op(A)[M,K]
        mmB.emplace(matMul2D(g.n, g.m, g.k, true, g.ta, g.alpha, 0, 1, 1, type,
                             {}, dataType(spec.outputs[1])));
    }
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    if (mmA)
      mmA->run(in, out);
    if (mmB)
      mmB->run(in, out);
    if (kind == BiasKind::None || out.size() <= 2)
      return;
    if (!bf16)
      return reduceBias(in[0].as<float>(), out[2].as<float>());
    // bf16 dY: a row bias is summed from widened copies of 64-column
    // strips, then rounded once (or written f32).
    const uint16_t *dyh = in[0].as<uint16_t>();
    const bool wide = out[2].desc.dtype == DType::F32;
    const int64_t m = g.m, n = g.n;
    const float beta = g.beta;
#pragma omp parallel for schedule(static)
    for (int64_t j0 = 0; j0 < n; j0 += 64) {
      int64_t j1 = std::min(n, j0 + 64);
      float acc[64] = {0};
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = j0; j < j1; ++j)
          acc[j - j0] += bf16ToFloat(dyh[i * n + j]);
      for (int64_t j = j0; j < j1; ++j) {
        if (wide)
          out[2].as<float>()[j] = beta * acc[j - j0];
        else
          out[2].as<uint16_t>()[j] = floatToBF16(beta * acc[j - j0]);
      }
    }
  }

private:
  void reduceBias(const float *dy, float *dc) {
    const int64_t m = g.m, n = g.n;
    const float beta = g.beta;
    switch (kind) {
    case BiasKind::Scalar: {
      double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
      for (int64_t i = 0; i < m * n; ++i)
        sum += dy[i];
      dc[0] = float(beta * sum);
      break;
    }
    case BiasKind::Row:
#pragma omp parallel for schedule(static)
      for (int64_t j0 = 0; j0 < n; j0 += 64) {
        int64_t j1 = std::min(n, j0 + 64);
        float acc[64] = {0};
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = j0; j < j1; ++j)
            acc[j - j0] += dy[i * n + j];
        for (int64_t j = j0; j < j1; ++j)
          dc[j] = beta * acc[j - j0];
      }
      break;
    case BiasKind::Col:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < m; ++i) {
        float acc = 0;
        for (int64_t j = 0; j < n; ++j)
          acc += dy[i * n + j];
        dc[i] = beta * acc;
      }
      break;
    case BiasKind::Full:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < m * n; ++i)
        dc[i] = beta * dy[i];
      break;
    case BiasKind::None:
      break;
    }
  }

  GemmShape g;
  BiasKind kind;
  bool bf16;
  std::optional<PlainPrimitive> mmA, mmB; // when dA / dB is read
};

} // namespace

static KernelOr createGemmGrad(const OpSpec &spec) {
  dt type;
  OASR_RETURN_IF_ERROR(checkArity(spec, 3, 3, 2, 3));
  OASR_RETURN_IF_ERROR(
      uniformFloat(spec, {0, 1, 2}, {0, 1, 2}, type, /*wideOutputs=*/true));
  GemmShape g;
  OASR_RETURN_IF_ERROR(gemmGradShape(spec, g));
  BiasKind kind = BiasKind::None;
  if (spec.outputs.size() == 3)
    OASR_RETURN_IF_ERROR(biasKind(spec, spec.outputs[2], g.m, g.n, kind));
  if (type != dt::f32 && kind != BiasKind::None && kind != BiasKind::Row) {
    // Other dC are summed on f32 buffers: the backend widens this node.
    return nodeError(spec, "a bf16 GemmGrad with this dC runs widened");
  }
  return guardCreate(spec, [&] {
    return std::make_unique<GemmGradKernel>(spec, g, kind, type);
  });
}

/// MatMul with numpy semantics (1-D operands promoted, batch dims
/// broadcast), on oneDNN's batched matmul.
static PlainPrimitive matMul(const dims &ad, const dims &bd, const dims &yd,
                             dt type, dt outType) {
  auto amd = plainDesc({ad.begin(), ad.end()}, type),
       bmd = plainDesc({bd.begin(), bd.end()}, type),
       ymd = plainDesc({yd.begin(), yd.end()}, outType);
  PlainPrimitive p(dnnl::matmul(dnnl::matmul::primitive_desc(
      dnnl::matmul::desc(amd, bmd, ymd), engine())));
  p.in(DNNL_ARG_SRC, amd, 0)
      .in(DNNL_ARG_WEIGHTS, bmd, 1)
      .out(DNNL_ARG_DST, ymd, 0);
  return p;
}

static KernelOr createMatMul(const OpSpec &spec) {
  dt type;
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  OASR_RETURN_IF_ERROR(
      uniformFloat(spec, {0, 1}, {0}, type, /*wideOutputs=*/true));
  dims ad, bd, yd;
  OASR_RETURN_IF_ERROR(matMulShapes(spec, ad, bd, yd));
  size_t r = yd.size();
  if (r > DNNL_MAX_NDIMS) {
    return nodeError(spec, "rank above oneDNN's limit");
  }
  return guardCreate(spec, [&] {
    return std::make_unique<PrimitiveKernel>(
        spec, matMul(ad, bd, yd, type, dataType(spec.outputs[0])));
  });
}

/// FusedMatMul {transA, transB, alpha} (com.microsoft): MatMul reading a
/// transposed operand through its strides (no copy). Rank >= 2 operands,
/// batch dimensions broadcast as MatMul's.
static KernelOr createFusedMatMul(const OpSpec &spec) {
  dt type;
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  OASR_RETURN_IF_ERROR(
      uniformFloat(spec, {0, 1}, {0}, type, /*wideOutputs=*/true));
  if (spec.attrs.getInt("transBatchA", 0) ||
      spec.attrs.getInt("transBatchB", 0)) {
    return nodeError(spec, "transBatchA/transBatchB are not supported");
  }
  bool trans[2] = {spec.attrs.getInt("transA", 0) != 0,
                   spec.attrs.getInt("transB", 0) != 0};
  // The logical (untransposed) operands, for MatMul's shape rule.
  OpSpec logical = spec;
  for (size_t i = 0; i < 2; ++i) {
    auto &s = logical.inputs[i].shape;
    if (s.size() < 2) {
      return nodeError(spec, "operands must have rank >= 2");
    }
    if (trans[i])
      std::swap(s[s.size() - 1], s[s.size() - 2]);
  }
  dims ad, bd, yd;
  OASR_RETURN_IF_ERROR(matMulShapes(logical, ad, bd, yd));
  if (yd.size() > DNNL_MAX_NDIMS) {
    return nodeError(spec, "rank above oneDNN's limit");
  }
  // A transposed operand's logical view: its stored row-major strides with
  // the last two swapped.
  auto view = [&](const dims &d, bool t) {
    dims stored = d, strides(d.size());
    if (t)
      std::swap(stored[d.size() - 1], stored[d.size() - 2]);
    int64_t acc = 1;
    for (size_t i = d.size(); i-- > 0;) {
      strides[i] = acc;
      acc *= stored[i];
    }
    if (t)
      std::swap(strides[d.size() - 1], strides[d.size() - 2]);
    return memory::desc(d, type, strides);
  };
  float alpha = float(spec.attrs.getFloat("alpha", 1.0));
  return guardCreate(spec, [&]() -> std::unique_ptr<Kernel> {
    auto amd = view(ad, trans[0]), bmd = view(bd, trans[1]),
         ymd = plainDesc({yd.begin(), yd.end()}, dataType(spec.outputs[0]));
    dnnl::primitive_attr attr;
    if (alpha != 1.0f)
      attr.set_output_scales(0, {alpha});
    PlainPrimitive p(dnnl::matmul(dnnl::matmul::primitive_desc(
        dnnl::matmul::desc(amd, bmd, ymd), attr, engine())));
    p.in(DNNL_ARG_SRC, amd, 0)
        .in(DNNL_ARG_WEIGHTS, bmd, 1)
        .out(DNNL_ARG_DST, ymd, 0);
    return std::make_unique<PrimitiveKernel>(spec, std::move(p));
  });
}

void registerGemmKernels(KernelRegistry &r) {
  r["Gemm"] = createGemm;
  r["GemmGrad"] = createGemmGrad;
  r["MatMul"] = createMatMul;
  r["FusedMatMul"] = createFusedMatMul;
}

} // namespace oasr::rt::cpu
