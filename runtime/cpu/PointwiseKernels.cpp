//===- PointwiseKernels.cpp - Activations, comparisons, masks -------------===//
//
// Plain-loop CPU kernels for what transformers, EfficientNet and MobileNet
// need beyond oneDNN's eltwise table: HardSigmoid, HardSwish, Mish and
// Reciprocal with their gradients; the comparisons and boolean logic that
// build attention masks, Where, and the mask builders ConstantOfShape, Range
// and Trilu; Resize (nearest and linear) and its gradient. Broadcasting follows
// numpy (BroadcastPlan, as the arithmetic kernels do).
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

namespace oasr::rt::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Activations and their gradients
//===----------------------------------------------------------------------===//

enum class Act {
  HardSigmoid,
  HardSwish,
  Mish,
  Reciprocal,
  HardSigmoidGrad,
  HardSwishGrad,
  MishGrad
};

inline float softplus(float x) {
  // log(1 + e^x) without overflow, as PyTorch's threshold of 20.
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

/// One activation (X -> Y) or its gradient (dY, X -> dX) per element.
class ActivationKernel final : public CpuKernel {
public:
  ActivationKernel(const OpSpec &spec, Act act)
      : CpuKernel(spec), act(act), n(spec.outputs[0].numel()),
        alpha(float(spec.attrs.getFloat("alpha", 0.2))),
        beta(float(spec.attrs.getFloat("beta", 0.5))) {}

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *a = in[0].as<float>();
    const float *x = in.size() > 1 ? in[1].as<float>() : nullptr;
    float *y = out[0].as<float>();
    const int64_t count = n;
    const float al = alpha, be = beta;
    switch (act) {
    case Act::HardSigmoid:
#pragma omp parallel for schedule(static) if (count > 16384)
      for (int64_t i = 0; i < count; ++i)
        y[i] = std::fmin(1.0f, std::fmax(0.0f, al * a[i] + be));
      return;
    case Act::HardSwish:
#pragma omp parallel for schedule(static) if (count > 16384)
      for (int64_t i = 0; i < count; ++i)
        y[i] = a[i] * std::fmin(1.0f, std::fmax(0.0f, a[i] / 6.0f + 0.5f));
      return;
    case Act::Mish:
#pragma omp parallel for schedule(static) if (count > 16384)
      for (int64_t i = 0; i < count; ++i)
        y[i] = a[i] * std::tanh(softplus(a[i]));
      return;
    case Act::Reciprocal:
#pragma omp parallel for schedule(static) if (count > 16384)
      for (int64_t i = 0; i < count; ++i)
        y[i] = 1.0f / a[i];
      return;
    case Act::HardSigmoidGrad:
#pragma omp parallel for schedule(static) if (count > 16384)
      for (int64_t i = 0; i < count; ++i) {
        float t = al * x[i] + be;
        y[i] = t > 0.0f && t < 1.0f ? a[i] * al : 0.0f;
      }
      return;
    case Act::HardSwishGrad:
      // PyTorch's convention at the kinks: 0 at x = -3, dY at x = 3.
#pragma omp parallel for schedule(static) if (count > 16384)
      for (int64_t i = 0; i < count; ++i) {
        float v = x[i];
        y[i] = v < -3.0f ? 0.0f : v <= 3.0f ? a[i] * (v / 3.0f + 0.5f) : a[i];
      }
      return;
    case Act::MishGrad:
#pragma omp parallel for schedule(static) if (count > 16384)
      for (int64_t i = 0; i < count; ++i) {
        float v = x[i], t = std::tanh(softplus(v));
        float sig = 1.0f / (1.0f + std::exp(-v));
        y[i] = a[i] * (t + v * sig * (1.0f - t * t));
      }
      return;
    }
  }

private:
  Act act;
  int64_t n;
  float alpha, beta;
};

std::unique_ptr<Kernel> createActivation(const OpSpec &spec,
                                         std::string &error) {
  static const std::map<std::string, Act> acts = {
      {"HardSigmoid", Act::HardSigmoid},
      {"HardSwish", Act::HardSwish},
      {"Mish", Act::Mish},
      {"Reciprocal", Act::Reciprocal},
      {"HardSigmoidGrad", Act::HardSigmoidGrad},
      {"HardSwishGrad", Act::HardSwishGrad},
      {"MishGrad", Act::MishGrad}};
  Act act = acts.at(spec.opType);
  bool grad = spec.opType.size() > 4 &&
              spec.opType.compare(spec.opType.size() - 4, 4, "Grad") == 0;
  size_t arity = grad ? 2 : 1;
  if (!checkSameShapeF32(spec, arity, error))
    return nullptr;
  return std::make_unique<ActivationKernel>(spec, act);
}

//===----------------------------------------------------------------------===//
// Comparisons, logic and Where (numpy broadcasting)
//===----------------------------------------------------------------------===//

enum class Cmp {
  Equal,
  Less,
  Greater,
  LessOrEqual,
  GreaterOrEqual,
  And,
  Or,
  Xor
};

template <typename T> inline bool compare(Cmp c, T a, T b) {
  switch (c) {
  case Cmp::Equal:
    return a == b;
  case Cmp::Less:
    return a < b;
  case Cmp::Greater:
    return a > b;
  case Cmp::LessOrEqual:
    return a <= b;
  case Cmp::GreaterOrEqual:
    return a >= b;
  case Cmp::And:
    return a && b;
  case Cmp::Or:
    return a || b;
  case Cmp::Xor:
    return bool(a) != bool(b);
  }
  return false;
}

/// Calls `body(row, offs)` for every row of `p` (in parallel when large).
template <typename F> void forRows(const BroadcastPlan &p, F body) {
  const int64_t rows = p.rows();
#pragma omp parallel for schedule(static) if (rows * p.inner() > 16384)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t offs[3];
    p.rowOffsets(row, offs);
    body(row, offs);
  }
}

/// Equal/Less/Greater/LessOrEqual/GreaterOrEqual (f32, i64, i32, bool) and
/// And/Or/Xor (bool) -> bool.
class CompareKernel final : public CpuKernel {
public:
  CompareKernel(const OpSpec &spec, Cmp cmp)
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
            compare<T>(cmp, a[offs[0] + i * sa], b[offs[1] + i * sb]);
    });
  }
  Cmp cmp;
  DType type;
  BroadcastPlan plan;
};

std::unique_ptr<Kernel> createCompare(const OpSpec &spec, std::string &error) {
  static const std::map<std::string, Cmp> cmps = {
      {"Equal", Cmp::Equal},
      {"Less", Cmp::Less},
      {"Greater", Cmp::Greater},
      {"LessOrEqual", Cmp::LessOrEqual},
      {"GreaterOrEqual", Cmp::GreaterOrEqual},
      {"And", Cmp::And},
      {"Or", Cmp::Or},
      {"Xor", Cmp::Xor}};
  Cmp cmp = cmps.at(spec.opType);
  if (!checkArity(spec, 2, 2, 1, 1, error) ||
      !checkDType(spec, false, 0, DType::Bool, error) ||
      !checkDType(spec, true, 1, spec.inputs[0].dtype, error))
    return nullptr;
  bool logic = cmp == Cmp::And || cmp == Cmp::Or || cmp == Cmp::Xor;
  if (logic && !checkDType(spec, true, 0, DType::Bool, error))
    return nullptr;
  if (!broadcastsTo(spec.inputs[0].shape, spec.outputs[0].shape) ||
      !broadcastsTo(spec.inputs[1].shape, spec.outputs[0].shape)) {
    error = nodeError(spec, "the operands do not broadcast to the result");
    return nullptr;
  }
  return std::make_unique<CompareKernel>(spec, cmp);
}

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

std::unique_ptr<Kernel> createNot(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !checkDType(spec, true, 0, DType::Bool, error) ||
      !checkDType(spec, false, 0, DType::Bool, error))
    return nullptr;
  return std::make_unique<NotKernel>(spec);
}

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

std::unique_ptr<Kernel> createWhere(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 3, 3, 1, 1, error) ||
      !checkDType(spec, true, 0, DType::Bool, error) ||
      !checkDType(spec, true, 1, spec.outputs[0].dtype, error) ||
      !checkDType(spec, true, 2, spec.outputs[0].dtype, error))
    return nullptr;
  for (size_t i = 0; i < 3; ++i)
    if (!broadcastsTo(spec.inputs[i].shape, spec.outputs[0].shape)) {
      error = nodeError(spec, "operand #" + std::to_string(i) +
                                  " does not broadcast to the result");
      return nullptr;
    }
  return std::make_unique<WhereKernel>(spec);
}

//===----------------------------------------------------------------------===//
// Mask builders
//===----------------------------------------------------------------------===//

/// Writes `value` converted to `t` into `n` elements of `dst`.
void fill(DType t, void *dst, int64_t n, double value) {
  switch (t) {
  case DType::F32:
    std::fill_n(static_cast<float *>(dst), n, float(value));
    return;
  case DType::I64:
    std::fill_n(static_cast<int64_t *>(dst), n, int64_t(value));
    return;
  case DType::I32:
    std::fill_n(static_cast<int32_t *>(dst), n, int32_t(value));
    return;
  case DType::Bool:
    std::fill_n(static_cast<uint8_t *>(dst), n, uint8_t(value != 0));
    return;
  default:
    return;
  }
}

/// ConstantOfShape {value}: the result (its static shape) filled with the
/// value (0 when absent); the shape operand is not read.
class ConstantOfShapeKernel final : public CpuKernel {
public:
  explicit ConstantOfShapeKernel(const OpSpec &spec)
      : CpuKernel(spec), type(spec.outputs[0].dtype),
        n(spec.outputs[0].numel()), value(spec.attrs.getFloat("value", 0.0)) {}
  void compute(const std::vector<TensorRef> &,
               const std::vector<TensorRef> &out) override {
    fill(type, out[0].data, n, value);
  }

private:
  DType type;
  int64_t n;
  double value;
};

std::unique_ptr<Kernel> createConstantOfShape(const OpSpec &spec,
                                              std::string &error) {
  if (!checkArity(spec, 0, 1, 1, 1, error))
    return nullptr;
  if (spec.outputs[0].dtype == DType::F16) {
    error = nodeError(spec, "f16 results are not supported");
    return nullptr;
  }
  return std::make_unique<ConstantOfShapeKernel>(spec);
}

/// Range: start, limit, delta (scalars in host memory) -> start + i * delta;
/// the result's static length decides the count.
class RangeKernel final : public CpuKernel {
public:
  explicit RangeKernel(const OpSpec &spec)
      : CpuKernel(spec), type(spec.outputs[0].dtype),
        n(spec.outputs[0].numel()) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double start = 0, delta = 1;
    scalarOperand(in, 0, start);
    scalarOperand(in, 2, delta);
    for (int64_t i = 0; i < n; ++i) {
      double v = start + double(i) * delta;
      if (type == DType::F32)
        out[0].as<float>()[i] = float(v);
      else if (type == DType::I64)
        out[0].as<int64_t>()[i] = int64_t(v);
      else
        out[0].as<int32_t>()[i] = int32_t(v);
    }
  }

private:
  DType type;
  int64_t n;
};

std::unique_ptr<Kernel> createRange(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 3, 3, 1, 1, error))
    return nullptr;
  if (!isFloatOrInt(spec.outputs[0].dtype) || spec.outputs[0].rank() != 1) {
    error = nodeError(spec, "expects a 1-D f32/i64/i32 result");
    return nullptr;
  }
  return std::make_unique<RangeKernel>(spec);
}

/// Trilu {upper}: X[, k] -> X with the elements below (upper = 1) or above
/// (upper = 0) the k-th diagonal of the last two axes zeroed.
class TriluKernel final : public CpuKernel {
public:
  explicit TriluKernel(const OpSpec &spec)
      : CpuKernel(spec), size(dtypeSize(spec.outputs[0].dtype)),
        upper(spec.attrs.getInt("upper", 1) != 0) {
    const auto &s = spec.outputs[0].shape;
    rows = s[s.size() - 2];
    cols = s.back();
    batches = spec.outputs[0].numel() / std::max<int64_t>(rows * cols, 1);
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double kv = 0;
    scalarOperand(in, 1, kv);
    const int64_t k = int64_t(kv);
    const char *x = static_cast<const char *>(in[0].data);
    char *y = static_cast<char *>(out[0].data);
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          size_t off = size_t((b * rows + i) * cols + j) * size;
          bool keep = upper ? j - i >= k : j - i <= k;
          if (keep)
            std::memcpy(y + off, x + off, size);
          else
            std::memset(y + off, 0, size);
        }
  }

private:
  size_t size;
  bool upper;
  int64_t rows = 0, cols = 0, batches = 0;
};

std::unique_ptr<Kernel> createTrilu(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 2, 1, 1, error) ||
      !checkDType(spec, true, 0, spec.outputs[0].dtype, error))
    return nullptr;
  if (spec.outputs[0].rank() < 2 ||
      spec.inputs[0].shape != spec.outputs[0].shape) {
    error = nodeError(spec, "expects X of rank >= 2 and Y of its shape");
    return nullptr;
  }
  return std::make_unique<TriluKernel>(spec);
}

//===----------------------------------------------------------------------===//
// ScatterND
//===----------------------------------------------------------------------===//

/// ScatterND(data, indices, updates): a copy of data with the indexed slices
/// replaced by (or reduced with) updates, tuples applied in order (Swin
/// builds its shifted-window attention mask so).
class ScatterNDKernel final : public CpuKernel {
public:
  ScatterNDKernel(const OpSpec &spec, const ScatterNDGeom &g)
      : CpuKernel(spec), g(g), elem(dtypeSize(spec.inputs[0].dtype)),
        bytes(spec.inputs[0].bytes()) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    char *y = static_cast<char *>(out[0].data);
    if (out[0].data != in[0].data)
      std::memcpy(y, in[0].data, bytes);
    const int64_t *idx = static_cast<const int64_t *>(in[1].data);
    const char *upd = static_cast<const char *>(in[2].data);
    for (int64_t t = 0; t < g.count; ++t) {
      int64_t offset = 0;
      for (int64_t d = 0; d < g.k; ++d) {
        int64_t i = idx[t * g.k + d];
        i = i < 0 ? i + g.dims[d] : i;
        if (i < 0 || i >= g.dims[d]) {
          std::fprintf(stderr,
                       "oasr: fatal: node '%s' (ScatterND): index %lld is "
                       "outside a dimension of %lld\n",
                       nodeName.c_str(), (long long)idx[t * g.k + d],
                       (long long)g.dims[d]);
          std::abort();
        }
        offset += i * g.strides[d];
      }
      const char *src = upd + size_t(t * g.slice) * elem;
      char *dst = y + size_t(offset) * elem;
      if (g.reduction == ScatterReduction::None) {
        std::memcpy(dst, src, size_t(g.slice) * elem);
        continue;
      }
      const float *u = reinterpret_cast<const float *>(src);
      float *v = reinterpret_cast<float *>(dst);
      for (int64_t e = 0; e < g.slice; ++e)
        v[e] = reduce(v[e], u[e]);
    }
  }

private:
  float reduce(float a, float b) const {
    switch (g.reduction) {
    case ScatterReduction::Add:
      return a + b;
    case ScatterReduction::Mul:
      return a * b;
    case ScatterReduction::Max:
      return std::max(a, b);
    case ScatterReduction::Min:
      return std::min(a, b);
    case ScatterReduction::None:
      break;
    }
    return b;
  }
  ScatterNDGeom g;
  size_t elem, bytes;
};

std::unique_ptr<Kernel> createScatterND(const OpSpec &spec,
                                        std::string &error) {
  ScatterNDGeom g;
  if (!scatterNDGeom(spec, g, error))
    return nullptr;
  return std::make_unique<ScatterNDKernel>(spec, g);
}

//===----------------------------------------------------------------------===//
// Resize / ResizeGrad
//===----------------------------------------------------------------------===//

/// Resize (X[, roi[, scales[, sizes]]] -> Y) and ResizeGrad (dY[, roi[,
/// scales[, sizes]]] -> dX) over the last two axes of an [N, C, H, W] (or
/// [N, C, W]) tensor. The sampling tables are built once from the static
/// shapes (and the scales, when the node has them as a constant attribute
/// list; else the shapes' ratio).
class ResizeKernel final : public CpuKernel {
public:
  ResizeKernel(const OpSpec &spec, bool grad, ResizeAxis h, ResizeAxis w,
               int64_t planes, int64_t inH, int64_t inW)
      : CpuKernel(spec), grad(grad), h(std::move(h)), w(std::move(w)),
        planes(planes), inH(inH), inW(inW) {}

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const int64_t outH = int64_t(h.index.size()) / h.taps,
                  outW = int64_t(w.index.size()) / w.taps;
    const float *src = in[0].as<float>();
    float *dst = out[0].as<float>();
    const int64_t np = planes, ih = inH, iw = inW;
#pragma omp parallel for schedule(static) if (np * outH * outW > 16384)
    for (int64_t p = 0; p < np; ++p) {
      if (!grad) {
        const float *x = src + p * ih * iw;
        float *y = dst + p * outH * outW;
        for (int64_t oy = 0; oy < outH; ++oy)
          for (int64_t ox = 0; ox < outW; ++ox) {
            float acc = 0;
            for (int ty = 0; ty < h.taps; ++ty)
              for (int tx = 0; tx < w.taps; ++tx)
                acc += h.weight[oy * h.taps + ty] * w.weight[ox * w.taps + tx] *
                       x[h.index[oy * h.taps + ty] * iw +
                         w.index[ox * w.taps + tx]];
            y[oy * outW + ox] = acc;
          }
      } else {
        const float *dy = src + p * outH * outW;
        float *dx = dst + p * ih * iw;
        std::fill_n(dx, ih * iw, 0.0f);
        for (int64_t oy = 0; oy < outH; ++oy)
          for (int64_t ox = 0; ox < outW; ++ox) {
            float g = dy[oy * outW + ox];
            for (int ty = 0; ty < h.taps; ++ty)
              for (int tx = 0; tx < w.taps; ++tx)
                dx[h.index[oy * h.taps + ty] * iw +
                   w.index[ox * w.taps + tx]] +=
                    h.weight[oy * h.taps + ty] * w.weight[ox * w.taps + tx] * g;
          }
      }
    }
  }

private:
  bool grad;
  ResizeAxis h, w;
  int64_t planes, inH, inW;
};

std::unique_ptr<Kernel> createResize(const OpSpec &spec, std::string &error) {
  ResizeGeom g;
  if (!resizeGeom(spec, g, error))
    return nullptr;
  return std::make_unique<ResizeKernel>(spec, g.grad, std::move(g.h),
                                        std::move(g.w), g.planes, g.inH, g.inW);
}

//===----------------------------------------------------------------------===//
// Eltwise activations and their gradients
//===----------------------------------------------------------------------===//

/// One eltwise activation: its oneDNN algorithm, the use-dst-for-bwd flavour
/// its <Op>Grad runs (undef: the op has no gradient kernel) and the
/// attribute that gives alpha, with its ONNX default (none: alpha 0).
struct EltwiseOp {
  const char *op;
  dnnl::algorithm fwd, bwd;
  const char *alphaAttr;
  double alphaDefault;
};

using EltA = dnnl::algorithm;
static const EltwiseOp kEltwiseOps[] = {
    {"Relu", EltA::eltwise_relu, EltA::eltwise_relu_use_dst_for_bwd, nullptr,
     0},
    {"LeakyRelu", EltA::eltwise_relu, EltA::eltwise_relu_use_dst_for_bwd,
     "alpha", 0.01},
    {"Sigmoid", EltA::eltwise_logistic, EltA::eltwise_logistic_use_dst_for_bwd,
     nullptr, 0},
    {"Tanh", EltA::eltwise_tanh, EltA::eltwise_tanh_use_dst_for_bwd, nullptr,
     0},
    {"Elu", EltA::eltwise_elu, EltA::eltwise_elu_use_dst_for_bwd, "alpha", 1.0},
    {"Exp", EltA::eltwise_exp, EltA::undef, nullptr, 0},
    {"Sqrt", EltA::eltwise_sqrt, EltA::undef, nullptr, 0},
    {"Log", EltA::eltwise_log, EltA::undef, nullptr, 0},
    {"Abs", EltA::eltwise_abs, EltA::undef, nullptr, 0},
};

/// The algorithms and alpha/beta of eltwise op `op` on node `spec`.
struct EltwiseInfo {
  dnnl::algorithm fwd, bwd;
  float alpha, beta;
};

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

static std::unique_ptr<Kernel> createEltwise(const OpSpec &spec,
                                             std::string &error) {
  EltwiseInfo info = eltwiseInfo(spec, spec.opType);
  dt type;
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !uniformFloat(spec, {0}, {0}, type, error))
    return nullptr;
  if (spec.inputs[0].numel() != spec.outputs[0].numel()) {
    error = nodeError(spec, "X and Y must have the same size");
    return nullptr;
  }
  return guardCreate(spec, error, [&] { return eltwiseKernel(spec, info); });
}

static std::unique_ptr<Kernel> createEltwiseGrad(const OpSpec &spec,
                                                 std::string &error) {
  std::string fwdOp = spec.opType.substr(0, spec.opType.size() - 4);
  EltwiseInfo info = eltwiseInfo(spec, fwdOp);
  dt type;
  if (!checkArity(spec, 2, 2, 1, 1, error) ||
      !uniformFloat(spec, {0, 1}, {0}, type, error))
    return nullptr;
  if (info.bwd == dnnl::algorithm::eltwise_relu_use_dst_for_bwd &&
      info.alpha < 0) {
    error = nodeError(spec, "negative alpha cannot be inverted from Y");
    return nullptr;
  }
  int64_t n = spec.inputs[0].numel();
  if (spec.inputs[1].numel() != n || spec.outputs[0].numel() != n) {
    error = nodeError(spec, "dY, Y and dX must have the same size");
    return nullptr;
  }
  return guardCreate(spec, error,
                     [&] { return eltwiseGradKernel(spec, info); });
}
//===----------------------------------------------------------------------===//
// Gelu / GeluGrad on bf16 (oneDNN's vectorized gelu_erf / gelu_tanh)
//===----------------------------------------------------------------------===//

} // namespace

std::unique_ptr<Kernel> createDnnlGelu(const OpSpec &spec, bool tanh, bool grad,
                                       std::string &error) {
  dt type;
  if (!uniformFloat(spec, {0, 1}, {0}, type, error))
    return nullptr;
  auto alg = tanh ? dnnl::algorithm::eltwise_gelu_tanh
                  : dnnl::algorithm::eltwise_gelu_erf;
  return guardCreate(spec, error, [&]() -> std::unique_ptr<Kernel> {
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

namespace {} // namespace

void registerPointwiseKernels(KernelRegistry &r) {
  for (const EltwiseOp &e : kEltwiseOps) {
    r[e.op] = createEltwise;
    if (e.bwd != dnnl::algorithm::undef)
      r[std::string(e.op) + "Grad"] = createEltwiseGrad;
  }
  r["Resize"] = createResize;
  r["ResizeGrad"] = createResize;
  for (const char *op : {"HardSigmoid", "HardSwish", "Mish", "Reciprocal",
                         "HardSigmoidGrad", "HardSwishGrad", "MishGrad"})
    r[op] = createActivation;
  for (const char *op : {"Equal", "Less", "Greater", "LessOrEqual",
                         "GreaterOrEqual", "And", "Or", "Xor"})
    r[op] = createCompare;
  r["Not"] = createNot;
  r["Where"] = createWhere;
  r["ConstantOfShape"] = createConstantOfShape;
  r["Range"] = createRange;
  r["Trilu"] = createTrilu;
  r["ScatterND"] = createScatterND;
}

} // namespace oasr::rt::cpu
