//===- PointwiseKernels.cpp - Activations, comparisons, softmax -----------===//
//
// The elementwise ops and their gradients, the ops of the CUDA backend's
// PointwiseKernels.cpp: the activations on oneDNN's eltwise table (Relu,
// LeakyRelu, Sigmoid, Tanh, Elu, Exp, Sqrt, Log, Abs) and in plain loops
// (HardSigmoid, HardSwish, Mish, Reciprocal, Gelu and Erf; bf16 Gelu on
// oneDNN), Clip; the comparisons and boolean logic that build attention
// masks, and Where, with numpy broadcasting (BroadcastPlan, as the
// arithmetic kernels); and Softmax/LogSoftmax with their gradients.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"

#include "VectorMath.h"
#include "VectorSums.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>

namespace oasr::rt::cpu {

//===----------------------------------------------------------------------===//
// Activations and their gradients
//===----------------------------------------------------------------------===//

/// y[i] = f(i) for i in [0, n), in parallel when large.
template <typename F> static void forEach(int64_t n, float *y, F &&f) {
#pragma omp parallel for schedule(static) if (n > 16384)
  for (int64_t i = 0; i < n; ++i)
    y[i] = f(i);
}

/// The sharedUnary ops without a libm call in their formula, as loops the
/// compiler vectorises (one per op: the op is fixed for the whole loop).
OASR_VECTOR_KERNEL(bool, arithmeticUnary,
                   (UnaryOp op, const float *x, float *y, int64_t n, float a), {
                     switch (op) {
                     case UnaryOp::Floor:
                     case UnaryOp::Ceil:
                     case UnaryOp::Round:
                       vectorMath(op == UnaryOp::Floor  ? VecFn::Floor
                                  : op == UnaryOp::Ceil ? VecFn::Ceil
                                                        : VecFn::Round,
                                  x, y, n);
                       return true;
                     case UnaryOp::Softsign:
                       for (int64_t i = 0; i < n; ++i)
                         y[i] = x[i] / (1.0f + std::fabs(x[i]));
                       return true;
                     case UnaryOp::Sign:
                       for (int64_t i = 0; i < n; ++i)
                         y[i] = sharedUnary(UnaryOp::Sign, x[i], a, 0.0f);
                       return true;
                     case UnaryOp::ThresholdedRelu:
                       for (int64_t i = 0; i < n; ++i)
                         y[i] = x[i] > a ? x[i] : 0.0f;
                       return true;
                     default:
                       return false;
                     }
                   })

namespace {

/// One activation (X -> Y) or its gradient (dY, X -> dX) per element, on
/// KernelMath.h's formulas.
class ActivationKernel final : public CpuKernel {
public:
  ActivationKernel(const OpSpec &spec, UnaryOp op, std::optional<GradOp> grad)
      : CpuKernel(spec), op(op), grad(grad), n(spec.outputs[0].numel()) {
    std::tie(alpha, beta) = activationParams(
        spec, grad == GradOp::HardSigmoid ? UnaryOp::HardSigmoid : op);
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *a = in[0].as<float>(); // X, or dY for a gradient
    const float *x = in.size() > 1 ? in[1].as<float>() : nullptr;
    float *y = out[0].as<float>();
    const float al = alpha, be = beta;
    if (grad) {
      switch (*grad) {
      case GradOp::HardSigmoid:
        return forEach(n, y, [&](int64_t i) {
          return hardSigmoidGrad(a[i], x[i], al, be);
        });
      case GradOp::HardSwish:
        return forEach(n, y,
                       [&](int64_t i) { return hardSwishGrad(a[i], x[i]); });
      case GradOp::Mish:
        return forEach(n, y, [&](int64_t i) { return mishGrad(a[i], x[i]); });
      default:
        return;
      }
    }
    switch (op) {
    case UnaryOp::HardSigmoid:
      return forEach(n, y,
                     [&](int64_t i) { return hardSigmoid(a[i], al, be); });
    case UnaryOp::HardSwish:
      return forEach(n, y, [&](int64_t i) { return hardSwish(a[i]); });
    case UnaryOp::Mish:
      return forEach(n, y, [&](int64_t i) { return mish(a[i]); });
    case UnaryOp::Reciprocal:
      return forEach(n, y, [&](int64_t i) { return reciprocal(a[i]); });
    case UnaryOp::Sin:
    case UnaryOp::Cos:
    case UnaryOp::Softplus:
    case UnaryOp::Selu:
    case UnaryOp::Celu:
      return transcendental(op, a, y, n, al, be);
    default: {
      // Chunks of arithmeticUnary across threads, else the scalar formula.
      constexpr int64_t kChunk = 16384;
      if (arithmeticUnary(op, a, y, 0, al)) {
#pragma omp parallel for schedule(static) if (n > kChunk)
        for (int64_t c = 0; c < n; c += kChunk)
          arithmeticUnary(op, a + c, y + c, std::min(kChunk, n - c), al);
        return;
      }
      return forEach(n, y, [&, o = op](int64_t i) {
        return sharedUnary(o, a[i], al, be);
      });
    }
    }
  }

private:
  /// The activations whose formula calls libm: libmvec over chunks
  /// (VectorMath.h), then the formula's selects; sharedUnary's formulas.
  static void transcendental(UnaryOp op, const float *x, float *y, int64_t n,
                             float al, float be) {
    constexpr int64_t kChunk = 4096;
#pragma omp parallel for schedule(static) if (n > 4 * kChunk)
    for (int64_t c = 0; c < n; c += kChunk) {
      const int64_t m = std::min(kChunk, n - c);
      const float *xc = x + c;
      float *yc = y + c, t[kChunk];
      switch (op) {
      case UnaryOp::Sin:
      case UnaryOp::Cos:
        vectorMath(op == UnaryOp::Sin ? VecFn::Sin : VecFn::Cos, xc, yc, m);
        break;
      case UnaryOp::Softplus:
        vectorMath(VecFn::Exp, xc, t, m);
        vectorMath(VecFn::Log1p, t, t, m);
        for (int64_t i = 0; i < m; ++i)
          yc[i] = xc[i] > 20.0f ? xc[i] : t[i];
        break;
      case UnaryOp::Selu:
        vectorMath(VecFn::Expm1, xc, t, m);
        for (int64_t i = 0; i < m; ++i)
          yc[i] = be * (xc[i] > 0.0f ? xc[i] : al * t[i]);
        break;
      default: // Celu
        for (int64_t i = 0; i < m; ++i)
          t[i] = xc[i] / al;
        vectorMath(VecFn::Expm1, t, t, m);
        for (int64_t i = 0; i < m; ++i)
          yc[i] = xc[i] > 0.0f ? xc[i] : al * t[i];
        break;
      }
    }
  }

  UnaryOp op;
  std::optional<GradOp> grad;
  int64_t n;
  float alpha, beta;
};

} // namespace

static KernelOr createActivation(const OpSpec &spec) {
  std::optional<GradOp> grad = opNamed(kGradOps, spec.opType);
  UnaryOp op = opNamed(kUnaryOps, spec.opType).value_or(UnaryOp::Abs);
  OASR_RETURN_IF_ERROR(checkSameShapeF32(spec, grad ? 2 : 1));
  return std::make_unique<ActivationKernel>(spec, op, grad);
}

//===----------------------------------------------------------------------===//
// Comparisons, logic and Where (numpy broadcasting)
//===----------------------------------------------------------------------===//

/// Calls `body(row, offs)` for every row of `p` (in parallel when large).
template <typename F> static void forRows(const BroadcastPlan &p, F body) {
  const int64_t rows = p.rows();
#pragma omp parallel for schedule(static) if (rows * p.inner() > 16384)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t offs[3];
    p.rowOffsets(row, offs);
    body(row, offs);
  }
}

namespace {

/// Equal/Less/Greater/LessOrEqual/GreaterOrEqual (f32, i64, i32, bool) and
/// And/Or/Xor (bool) -> bool.
class CompareKernel final : public CpuKernel {
public:
  CompareKernel(const OpSpec &spec, CmpOp cmp)
      : CpuKernel(spec), cmp(cmp), type(spec.inputs[0].dtype),
        plan(makePlan({spec.inputs[0].shape, spec.inputs[1].shape},
                      spec.outputs[0].shape)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    switch (type) {
    case DType::F32:
      return run<float>(in, out);
    case DType::I64:
      return run<int64_t>(in, out);
    case DType::I32:
      return run<int32_t>(in, out);
    default:
      return run<uint8_t>(in, out);
    }
  }

private:
  template <typename T>
  void run(const std::vector<TensorRef> &in,
           const std::vector<TensorRef> &out) {
    const T *a = in[0].as<T>(), *b = in[1].as<T>();
    uint8_t *y = out[0].as<uint8_t>();
    const int64_t inner = plan.inner();
    const int64_t sa = plan.strides[0].back(), sb = plan.strides[1].back();
    forRows(plan, [&](int64_t row, const int64_t *offs) {
      for (int64_t i = 0; i < inner; ++i)
        y[row * inner + i] =
            compareValues<T>(cmp, a[offs[0] + i * sa], b[offs[1] + i * sb]);
    });
  }
  CmpOp cmp;
  DType type;
  BroadcastPlan plan;
};

} // namespace

static KernelOr createCompare(const OpSpec &spec) {
  CmpOp cmp = *opNamed(kCmpOps, spec.opType);
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, DType::Bool));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 1, spec.inputs[0].dtype));
  if (isLogic(cmp))
    OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, DType::Bool));
  if (!broadcastsTo(spec.inputs[0].shape, spec.outputs[0].shape) ||
      !broadcastsTo(spec.inputs[1].shape, spec.outputs[0].shape)) {
    return nodeError(spec, "the operands do not broadcast to the result");
  }
  return std::make_unique<CompareKernel>(spec, cmp);
}

namespace {

/// Not: bool -> bool.
class NotKernel final : public CpuKernel {
public:
  explicit NotKernel(const OpSpec &spec)
      : CpuKernel(spec), n(spec.outputs[0].numel()) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const uint8_t *x = in[0].as<uint8_t>();
    uint8_t *y = out[0].as<uint8_t>();
    for (int64_t i = 0; i < n; ++i)
      y[i] = !x[i];
  }

private:
  int64_t n;
};

} // namespace

static KernelOr createNot(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, DType::Bool));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, DType::Bool));
  return std::make_unique<NotKernel>(spec);
}

namespace {

/// Where: cond (bool), X, Y -> cond ? X : Y, broadcasting all three; any
/// element type (moved as bytes).
class WhereKernel final : public CpuKernel {
public:
  explicit WhereKernel(const OpSpec &spec)
      : CpuKernel(spec), size(dtypeSize(spec.outputs[0].dtype)),
        plan(makePlan(
            {spec.inputs[0].shape, spec.inputs[1].shape, spec.inputs[2].shape},
            spec.outputs[0].shape)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    switch (size) {
    case 1:
      return run<uint8_t>(in, out);
    case 4:
      return run<uint32_t>(in, out);
    default:
      return run<uint64_t>(in, out);
    }
  }

private:
  template <typename T>
  void run(const std::vector<TensorRef> &in,
           const std::vector<TensorRef> &out) {
    const uint8_t *c = in[0].as<uint8_t>();
    const T *a = in[1].as<T>(), *b = in[2].as<T>();
    T *y = out[0].as<T>();
    const int64_t inner = plan.inner();
    const int64_t sc = plan.strides[0].back(), sa = plan.strides[1].back(),
                  sb = plan.strides[2].back();
    forRows(plan, [&](int64_t row, const int64_t *offs) {
      for (int64_t i = 0; i < inner; ++i)
        y[row * inner + i] =
            c[offs[0] + i * sc] ? a[offs[1] + i * sa] : b[offs[2] + i * sb];
    });
  }
  size_t size;
  BroadcastPlan plan;
};

} // namespace

static KernelOr createWhere(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 3, 3, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, DType::Bool));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 1, spec.outputs[0].dtype));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 2, spec.outputs[0].dtype));
  for (size_t i = 0; i < 3; ++i)
    if (!broadcastsTo(spec.inputs[i].shape, spec.outputs[0].shape)) {
      return nodeError(spec, "operand #" + std::to_string(i) +
                                 " does not broadcast to the result");
    }
  return std::make_unique<WhereKernel>(spec);
}

//===----------------------------------------------------------------------===//
// Eltwise activations and their gradients
//===----------------------------------------------------------------------===//

namespace {

/// One eltwise activation: its oneDNN algorithm, the use-dst-for-bwd flavour
/// its <Op>Grad runs (undef: the op has no gradient kernel) and the
/// attribute that gives alpha, with its ONNX default (none: alpha 0).
struct EltwiseOp {
  const char *op;
  dnnl::algorithm fwd, bwd;
  const char *alphaAttr;
  double alphaDefault;
};

} // namespace

using EltA = dnnl::algorithm;
static const EltwiseOp kEltwiseOps[] = {
    {"Relu", EltA::eltwise_relu, EltA::eltwise_relu_use_dst_for_bwd, nullptr,
     0},
    {"LeakyRelu", EltA::eltwise_relu, EltA::eltwise_relu_use_dst_for_bwd,
     "alpha", kLeakyReluAlpha},
    {"Sigmoid", EltA::eltwise_logistic, EltA::eltwise_logistic_use_dst_for_bwd,
     nullptr, 0},
    {"Tanh", EltA::eltwise_tanh, EltA::eltwise_tanh_use_dst_for_bwd, nullptr,
     0},
    {"Elu", EltA::eltwise_elu, EltA::eltwise_elu_use_dst_for_bwd, "alpha",
     kEluAlpha},
    {"Exp", EltA::eltwise_exp, EltA::undef, nullptr, 0},
    {"Sqrt", EltA::eltwise_sqrt, EltA::undef, nullptr, 0},
    {"Log", EltA::eltwise_log, EltA::undef, nullptr, 0},
    {"Abs", EltA::eltwise_abs, EltA::undef, nullptr, 0},
};

namespace {

/// The algorithms and alpha/beta of eltwise op `op` on node `spec`.
struct EltwiseInfo {
  dnnl::algorithm fwd, bwd;
  float alpha, beta;
};

} // namespace

static EltwiseInfo eltwiseInfo(const OpSpec &spec, const std::string &op) {
  for (const EltwiseOp &e : kEltwiseOps)
    if (op == e.op)
      return {e.fwd, e.bwd,
              e.alphaAttr
                  ? float(spec.attrs.getFloat(e.alphaAttr, e.alphaDefault))
                  : 0.0f,
              0.0f};
  // Only registered op types reach the factories.
  std::abort();
}

static std::unique_ptr<Kernel> eltwiseKernel(const OpSpec &spec,
                                             const EltwiseInfo &info) {
  auto md = plainDesc({spec.inputs[0].numel()}, dataType(spec.inputs[0]));
  dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_training, info.fwd, md,
                                info.alpha, info.beta);
  return forwardKernel(
      spec,
      dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, engine())),
      md);
}

/// <Op>Grad: dY, Y -> dX, from the forward result.
static std::unique_ptr<Kernel> eltwiseGradKernel(const OpSpec &spec,
                                                 const EltwiseInfo &info) {
  auto md = plainDesc({spec.inputs[0].numel()}, dataType(spec.inputs[0]));
  dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, info.bwd,
                                 md, info.alpha, info.beta);
  dnnl::eltwise_forward::primitive_desc fpd(fd, engine());
  dnnl::eltwise_backward::desc d(info.bwd, md, md, info.alpha, info.beta);
  return backwardKernel(
      spec,
      dnnl::eltwise_backward(
          dnnl::eltwise_backward::primitive_desc(d, engine(), fpd)),
      md);
}

static KernelOr createEltwise(const OpSpec &spec) {
  EltwiseInfo info = eltwiseInfo(spec, spec.opType);
  dt type;
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  OASR_RETURN_IF_ERROR(uniformFloat(spec, {0}, {0}, type));
  if (spec.inputs[0].numel() != spec.outputs[0].numel()) {
    return nodeError(spec, "X and Y must have the same size");
  }
  return guardCreate(spec, [&] { return eltwiseKernel(spec, info); });
}

static KernelOr createEltwiseGrad(const OpSpec &spec) {
  std::string fwdOp = spec.opType.substr(0, spec.opType.size() - 4);
  EltwiseInfo info = eltwiseInfo(spec, fwdOp);
  dt type;
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  OASR_RETURN_IF_ERROR(uniformFloat(spec, {0, 1}, {0}, type));
  if (info.bwd == dnnl::algorithm::eltwise_relu_use_dst_for_bwd &&
      info.alpha < 0) {
    return nodeError(spec, "negative alpha cannot be inverted from Y");
  }
  int64_t n = spec.inputs[0].numel();
  if (spec.inputs[1].numel() != n || spec.outputs[0].numel() != n) {
    return nodeError(spec, "dY, Y and dX must have the same size");
  }
  return guardCreate(spec, [&] { return eltwiseGradKernel(spec, info); });
}

//===----------------------------------------------------------------------===//
// Gelu / GeluGrad on bf16 (oneDNN's vectorized gelu_erf / gelu_tanh)
//===----------------------------------------------------------------------===//

static KernelOr createDnnlGelu(const OpSpec &spec, bool tanh, bool grad) {
  dt type;
  OASR_RETURN_IF_ERROR(uniformFloat(spec, {0, 1}, {0}, type));
  auto alg = tanh ? dnnl::algorithm::eltwise_gelu_tanh
                  : dnnl::algorithm::eltwise_gelu_erf;
  return guardCreate(spec, [&]() -> std::unique_ptr<Kernel> {
    auto md = plainDesc({spec.inputs[0].numel()}, type);
    dnnl::eltwise_forward::primitive_desc fpd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, md),
        engine());
    if (!grad) {
      PlainPrimitive p(dnnl::eltwise_forward{fpd});
      p.in(DNNL_ARG_SRC, md, 0).out(DNNL_ARG_DST, md, 0);
      return std::make_unique<PrimitiveKernel>(spec, std::move(p));
    }
    // GeluGrad: dY, X -> dX (from the forward's input).
    PlainPrimitive p(
        dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(
            dnnl::eltwise_backward::desc(alg, md, md), engine(), fpd)));
    p.in(DNNL_ARG_DIFF_DST, md, 0)
        .in(DNNL_ARG_SRC, md, 1)
        .out(DNNL_ARG_DIFF_SRC, md, 0);
    return std::make_unique<PrimitiveKernel>(spec, std::move(p));
  });
}

//===----------------------------------------------------------------------===//
// Gelu / GeluGrad / Erf
//===----------------------------------------------------------------------===//

namespace {

/// Gelu {approximate = none | tanh} (GeluErf, GeluTanh), GeluGrad (dY, X ->
/// dX), Erf. The CUDA backend computes the same functions (CudaPointwise.cu)
/// with CUDA's erff and its own order of the products, so the two backends
/// agree to rounding, not bit for bit.
class GeluKernel final : public CpuKernel {
public:
  GeluKernel(const OpSpec &spec, UnaryOp op, bool grad)
      : CpuKernel(spec), op(op), grad(grad), n(spec.outputs[0].numel()) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *x = in[grad ? 1 : 0].as<float>();
    const float *dy = grad ? in[0].as<float>() : nullptr;
    float *y = out[0].as<float>();
    const int64_t count = n;
    const UnaryOp md = op;
    const bool gr = grad;
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i) {
      float v = x[i];
      if (md == UnaryOp::Erf) {
        y[i] = std::erf(v);
        continue;
      }
      if (md == UnaryOp::GeluErf) {
        float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
        y[i] = gr ? dy[i] * (cdf + v * kInvSqrt2Pi * std::exp(-0.5f * v * v))
                  : v * cdf;
      } else {
        float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
        float t = std::tanh(u);
        y[i] = gr ? dy[i] * (0.5f * (1.0f + t) +
                             0.5f * v * (1.0f - t * t) * kSqrt2OverPi *
                                 (1.0f + 3.0f * kGeluCubic * v * v))
                  : 0.5f * v * (1.0f + t);
      }
    }
  }

private:
  UnaryOp op; ///< Erf, GeluErf or GeluTanh
  bool grad;
  int64_t n;
};

} // namespace

static KernelOr createGelu(const OpSpec &spec) {
  bool grad = spec.opType == "GeluGrad";
  size_t nIn = grad ? 2 : 1;
  UnaryOp op = UnaryOp::Erf;
  if (spec.opType != "Erf") {
    bool tanh;
    OASR_RETURN_IF_ERROR(geluIsTanh(spec, tanh));
    op = tanh ? UnaryOp::GeluTanh : UnaryOp::GeluErf;
    if (!spec.inputs.empty() && spec.inputs[0].dtype == DType::BF16 &&
        checkArity(spec, nIn, nIn, 1, 1).ok() &&
        checkSameShapes(spec, nIn).ok())
      return createDnnlGelu(spec, tanh, grad);
  }
  OASR_RETURN_IF_ERROR(checkSameShapeF32(spec, nIn));
  return std::make_unique<GeluKernel>(spec, op, grad);
}

//===----------------------------------------------------------------------===//
// Softmax / LogSoftmax and their gradients
//===----------------------------------------------------------------------===//

static Status softmaxAxis(const OpSpec &spec, const TensorDesc &x, int &axis) {
  int64_t r = int64_t(x.rank());
  int64_t a = spec.attrs.getInt("axis", -1);
  if (a < 0)
    a += r;
  if (r == 0 || a < 0 || a >= r) {
    return nodeError(spec, "axis " +
                               std::to_string(spec.attrs.getInt("axis", -1)) +
                               " out of range for " + shapeStr(x.shape));
  }
  axis = int(a);
  return Status::success();
}

/// Softmax / LogSoftmax: X -> Y.
static std::unique_ptr<Kernel> softmaxKernel(const OpSpec &spec, int axis,
                                             bool log) {
  auto md = plainDesc(spec.inputs[0].shape);
  if (log)
    return forwardKernel(
        spec,
        dnnl::logsoftmax_forward(dnnl::logsoftmax_forward::primitive_desc(
            dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_training,
                                           md, axis),
            engine())),
        md);
  return forwardKernel(
      spec,
      dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
          dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, md,
                                      axis),
          engine())),
      md);
}

/// SoftmaxGrad / LogSoftmaxGrad: dY, Y -> dX.
static std::unique_ptr<Kernel> softmaxGradKernel(const OpSpec &spec, int axis,
                                                 bool log) {
  auto md = plainDesc(spec.inputs[0].shape);
  if (log) {
    dnnl::logsoftmax_forward::primitive_desc fpd(
        dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_training, md,
                                       axis),
        engine());
    return backwardKernel(
        spec,
        dnnl::logsoftmax_backward(dnnl::logsoftmax_backward::primitive_desc(
            dnnl::logsoftmax_backward::desc(md, md, axis), engine(), fpd)),
        md);
  }
  dnnl::softmax_forward::primitive_desc fpd(
      dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, md, axis),
      engine());
  return backwardKernel(
      spec,
      dnnl::softmax_backward(dnnl::softmax_backward::primitive_desc(
          dnnl::softmax_backward::desc(md, md, axis), engine(), fpd)),
      md);
}

static KernelOr createSoftmax(const OpSpec &spec) {
  bool grad = spec.opType.find("Grad") != std::string::npos;
  bool log = spec.opType.rfind("Log", 0) == 0;
  size_t nIn = grad ? 2 : 1;
  OASR_RETURN_IF_ERROR(checkSameShapeF32(spec, nIn));
  int axis = -1;
  OASR_RETURN_IF_ERROR(softmaxAxis(spec, spec.outputs[0], axis));
  return guardCreate(spec, [&] {
    return grad ? softmaxGradKernel(spec, axis, log)
                : softmaxKernel(spec, axis, log);
  });
}

//===----------------------------------------------------------------------===//
// Clip / ClipGrad
//===----------------------------------------------------------------------===//

namespace {

/// Clip: X[, min[, max]] -> Y; ClipGrad: dY, X -> dX (dY where min <= X <=
/// max, PyTorch's convention at the bounds). Bounds come from the operands
/// when given, else from the f32 attributes min/max.
class ClipKernel final : public CpuKernel {
public:
  ClipKernel(const OpSpec &spec, bool grad)
      : CpuKernel(spec), grad(grad), n(spec.outputs[0].numel()),
        attrMin(spec.attrs.getFloat("min",
                                    -std::numeric_limits<double>::infinity())),
        attrMax(spec.attrs.getFloat("max",
                                    std::numeric_limits<double>::infinity())) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double lo = attrMin, hi = attrMax;
    size_t first = grad ? 2 : 1;
    scalarOperand(in, first, lo);
    scalarOperand(in, first + 1, hi);
    const float flo = float(lo), fhi = float(hi);
    float *y = out[0].as<float>();
    if (grad) {
      const float *dy = in[0].as<float>(), *x = in[1].as<float>();
      return forEach(
          n, y, [&](int64_t i) { return clipGrad(dy[i], x[i], flo, fhi); });
    }
    const float *x = in[0].as<float>();
    forEach(n, y, [&](int64_t i) { return clipValue(x[i], flo, fhi); });
  }

private:
  bool grad;
  int64_t n;
  double attrMin, attrMax;
};

} // namespace

static KernelOr createClip(const OpSpec &spec) {
  bool grad = spec.opType == "ClipGrad";
  OASR_RETURN_IF_ERROR(
      checkSpec(spec, grad ? 2 : 1, grad ? 4 : 3, 1, 1, {0, 1, 2, 3}, {0}));
  OASR_RETURN_IF_ERROR(checkSameShapes(spec, grad ? 2 : 1));
  return std::make_unique<ClipKernel>(spec, grad);
}

void registerPointwiseKernels(KernelRegistry &r) {
  for (const EltwiseOp &e : kEltwiseOps) {
    r[e.op] = createEltwise;
    if (e.bwd != dnnl::algorithm::undef)
      r[std::string(e.op) + "Grad"] = createEltwiseGrad;
  }
  for (const char *op : {"Softplus", "Softsign", "Sin", "Cos", "Selu", "Celu",
                         "ThresholdedRelu", "Floor", "Ceil", "Round", "Sign"})
    r[op] = createActivation;
  for (const char *op : {"HardSigmoid", "HardSwish", "Mish", "Reciprocal",
                         "HardSigmoidGrad", "HardSwishGrad", "MishGrad"})
    r[op] = createActivation;
  for (const char *op : {"Gelu", "GeluGrad", "Erf"})
    r[op] = createGelu;
  r["Clip"] = createClip;
  r["ClipGrad"] = createClip;
  for (const NamedOp<CmpOp> &cmp : kCmpOps)
    r[cmp.name] = createCompare;
  r["Not"] = createNot;
  r["Where"] = createWhere;
  for (const char *op :
       {"Softmax", "LogSoftmax", "SoftmaxGrad", "LogSoftmaxGrad",
        "SoftmaxGrad_13", "LogSoftmaxGrad_13"})
    r[op] = createSoftmax;
}

} // namespace oasr::rt::cpu
