//===- KernelMath.h - Op kinds and per-element math of both backends -*- C++
//-*-===//
//
// Private to runtime/: what the CPU and CUDA backends compute per element,
// defined once. The kinds of the unary, gradient, comparison and broadcast
// arithmetic ops with their ONNX names (both backends' factories look an op
// up here, and register the names listed here), and the scalar formulas
// both run: the activations the CPU does not take from oneDNN and their
// gradients, Clip, comparisons, broadcast arithmetic, Dropout's mask and
// scale, softmax cross-entropy's gradient, Trilu, Range and the optimizer
// updates.
//
// Functions marked OASR_HOST_DEVICE compile for the host and, in CUDA
// sources, for the device as well. The math functions they call (`math::`)
// are the C++ library's on the host and CUDA's single-precision ones on the
// device, the ones each backend called before its formulas moved here, so
// the formulas compute the same bits they did. Plain C++ (no CUDA runtime)
// otherwise, like OpGeometry.h.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_KERNELMATH_H
#define OASR_RUNTIME_KERNELMATH_H

#include "oasr/Runtime/Kernel.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

/// A function both the host and a CUDA kernel call.
#ifdef __CUDACC__
#define OASR_HOST_DEVICE __host__ __device__
#else
#define OASR_HOST_DEVICE
#endif

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// Op kinds and their ONNX names
//===----------------------------------------------------------------------===//

/// Elementwise y = f(x), f32 arithmetic; `alpha`/`beta` where an op has
/// them.
enum class UnaryOp : int {
  Abs,
  Sigmoid,
  Tanh,
  Exp,
  Log,
  Sqrt,
  Erf,
  Elu,
  LeakyRelu,
  HardSigmoid,
  HardSwish,
  Mish,
  Reciprocal,
  GeluErf,
  GeluTanh,
  Clip, ///< min(max(x, lo), hi), NaN kept (clipValue)
  Softplus,
  Softsign,
  Sin,
  Cos,
  Selu,            ///< alpha, gamma
  Celu,            ///< alpha
  ThresholdedRelu, ///< alpha
  Floor,
  Ceil,
  Round, ///< half to even
  Sign
};

/// An activation's gradient dX = f'(dY, z), z being the forward's result
/// (Sigmoid, Tanh, Elu, LeakyRelu) or its input (HardSigmoid, HardSwish,
/// Mish, Gelu, Clip).
enum class GradOp : int {
  Sigmoid,
  Tanh,
  Elu,
  LeakyRelu,
  HardSigmoid,
  HardSwish,
  Mish,
  GeluErf,
  GeluTanh,
  Clip
};

/// Comparisons (any element type) and logic (bool) of two operands -> bool.
enum class CmpOp : int {
  Equal,
  Less,
  Greater,
  LessOrEqual,
  GreaterOrEqual,
  And,
  Or,
  Xor
};

/// Broadcast arithmetic of two operands (Sum folds Add over its operands).
/// PRelu is x > 0 ? x : slope x with the slope broadcast; Max and Min keep
/// a NaN operand (torch.maximum's convention). Mod takes the divisor's sign
/// (ONNX Mod with fmod 0, Python's %), Fmod the dividend's (fmod 1, C's
/// fmod); an integer divisor of zero gives zero.
enum class BinOp : int { Add, Sub, Mul, Div, Pow, PRelu, Max, Min, Mod, Fmod };

/// One row of an op-name table.
template <typename Kind> struct NamedOp {
  const char *name;
  Kind kind;
};

/// The unary ops by ONNX name. Gelu is GeluErf here; its `approximate`
/// attribute selects GeluTanh (geluIsTanh, OpGeometry.h). Clip takes its
/// bounds from operands and is not listed.
inline constexpr NamedOp<UnaryOp> kUnaryOps[] = {
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
    {"Gelu", UnaryOp::GeluErf},
    {"Softplus", UnaryOp::Softplus},
    {"Softsign", UnaryOp::Softsign},
    {"Sin", UnaryOp::Sin},
    {"Cos", UnaryOp::Cos},
    {"Selu", UnaryOp::Selu},
    {"Celu", UnaryOp::Celu},
    {"ThresholdedRelu", UnaryOp::ThresholdedRelu},
    {"Floor", UnaryOp::Floor},
    {"Ceil", UnaryOp::Ceil},
    {"Round", UnaryOp::Round},
    {"Sign", UnaryOp::Sign}};

/// The gradient ops by name (GeluGrad as Gelu).
inline constexpr NamedOp<GradOp> kGradOps[] = {
    {"SigmoidGrad", GradOp::Sigmoid},
    {"TanhGrad", GradOp::Tanh},
    {"EluGrad", GradOp::Elu},
    {"LeakyReluGrad", GradOp::LeakyRelu},
    {"HardSigmoidGrad", GradOp::HardSigmoid},
    {"HardSwishGrad", GradOp::HardSwish},
    {"MishGrad", GradOp::Mish},
    {"GeluGrad", GradOp::GeluErf},
    {"ClipGrad", GradOp::Clip}};

inline constexpr NamedOp<CmpOp> kCmpOps[] = {
    {"Equal", CmpOp::Equal},
    {"Less", CmpOp::Less},
    {"Greater", CmpOp::Greater},
    {"LessOrEqual", CmpOp::LessOrEqual},
    {"GreaterOrEqual", CmpOp::GreaterOrEqual},
    {"And", CmpOp::And},
    {"Or", CmpOp::Or},
    {"Xor", CmpOp::Xor}};

inline constexpr NamedOp<BinOp> kBinOps[] = {
    {"Add", BinOp::Add}, {"Sub", BinOp::Sub}, {"Mul", BinOp::Mul},
    {"Div", BinOp::Div}, {"Pow", BinOp::Pow}, {"PRelu", BinOp::PRelu},
    {"Max", BinOp::Max}, {"Min", BinOp::Min}, {"Mod", BinOp::Mod}};

/// The kind of op `name` in `table`; none when it is not there.
template <typename Kind, size_t N>
std::optional<Kind> opNamed(const NamedOp<Kind> (&table)[N],
                            std::string_view name) {
  for (const NamedOp<Kind> &row : table)
    if (name == row.name)
      return row.kind;
  return std::nullopt;
}

/// And, Or and Xor: their operands are bool.
constexpr bool isLogic(CmpOp op) {
  return op == CmpOp::And || op == CmpOp::Or || op == CmpOp::Xor;
}

/// ONNX's defaults of the activations' attributes: alpha (LeakyRelu's
/// slope, Elu's scale, HardSigmoid's slope) and HardSigmoid's beta; Selu's
/// alpha and gamma, Celu's and ThresholdedRelu's alpha.
constexpr double kLeakyReluAlpha = 0.01, kEluAlpha = 1.0,
                 kHardSigmoidAlpha = 0.2, kHardSigmoidBeta = 0.5;
constexpr double kSeluAlpha = 1.67326319217681884765625,
                 kSeluGamma = 1.05070102214813232421875, kCeluAlpha = 1.0,
                 kThresholdedReluAlpha = 1.0;

/// Gelu's constants: 1/sqrt(2), 1/sqrt(2 pi), sqrt(2/pi) and the tanh
/// form's cubic coefficient.
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

//===----------------------------------------------------------------------===//
// The math library on either side
//===----------------------------------------------------------------------===//

namespace math {

#ifdef __CUDA_ARCH__
#define OASR_MATH_F(hostExpr, deviceExpr) return deviceExpr
#else
#define OASR_MATH_F(hostExpr, deviceExpr) return hostExpr
#endif

OASR_HOST_DEVICE inline float exp(float x) {
  OASR_MATH_F(std::exp(x), expf(x));
}
OASR_HOST_DEVICE inline float log1p(float x) {
  OASR_MATH_F(std::log1p(x), log1pf(x));
}
OASR_HOST_DEVICE inline float tanh(float x) {
  OASR_MATH_F(std::tanh(x), tanhf(x));
}
OASR_HOST_DEVICE inline float sin(float x) {
  OASR_MATH_F(std::sin(x), sinf(x));
}
OASR_HOST_DEVICE inline float cos(float x) {
  OASR_MATH_F(std::cos(x), cosf(x));
}
OASR_HOST_DEVICE inline float fabs(float x) {
  OASR_MATH_F(std::fabs(x), fabsf(x));
}
OASR_HOST_DEVICE inline float expm1(float x) {
  OASR_MATH_F(std::expm1(x), expm1f(x));
}
OASR_HOST_DEVICE inline float sqrt(float x) {
  OASR_MATH_F(std::sqrt(x), sqrtf(x));
}
OASR_HOST_DEVICE inline float fmin(float a, float b) {
  OASR_MATH_F(std::fmin(a, b), fminf(a, b));
}
OASR_HOST_DEVICE inline float fmax(float a, float b) {
  OASR_MATH_F(std::fmax(a, b), fmaxf(a, b));
}
OASR_HOST_DEVICE inline float floor(float x) {
  OASR_MATH_F(std::floor(x), floorf(x));
}
OASR_HOST_DEVICE inline float ceil(float x) {
  OASR_MATH_F(std::ceil(x), ceilf(x));
}
OASR_HOST_DEVICE inline float rint(float x) {
  OASR_MATH_F(std::nearbyint(x), rintf(x));
}
OASR_HOST_DEVICE inline float fmod(float a, float b) {
  OASR_MATH_F(std::fmod(a, b), fmodf(a, b));
}
OASR_HOST_DEVICE inline float pow(float a, float b) {
  OASR_MATH_F(std::pow(a, b), powf(a, b));
}
OASR_HOST_DEVICE inline double pow(double a, double b) {
  OASR_MATH_F(std::pow(a, b), ::pow(a, b));
}

#undef OASR_MATH_F

} // namespace math

//===----------------------------------------------------------------------===//
// Activations and their gradients
//===----------------------------------------------------------------------===//

/// log(1 + e^x) without overflow, as PyTorch's threshold of 20.
OASR_HOST_DEVICE inline float softplus(float x) {
  return x > 20.0f ? x : math::log1p(math::exp(x));
}

OASR_HOST_DEVICE inline float hardSigmoid(float x, float alpha, float beta) {
  return math::fmin(1.0f, math::fmax(0.0f, alpha * x + beta));
}

OASR_HOST_DEVICE inline float hardSwish(float x) {
  return x * math::fmin(1.0f, math::fmax(0.0f, x / 6.0f + 0.5f));
}

OASR_HOST_DEVICE inline float mish(float x) {
  return x * math::tanh(softplus(x));
}

OASR_HOST_DEVICE inline float reciprocal(float x) { return 1.0f / x; }

OASR_HOST_DEVICE inline float softsign(float x) {
  return x / (1.0f + math::fabs(x));
}

/// Selu: gamma (x > 0 ? x : alpha (e^x - 1)).
OASR_HOST_DEVICE inline float selu(float x, float alpha, float gamma) {
  return gamma * (x > 0.0f ? x : alpha * math::expm1(x));
}

/// Celu: max(0, x) + min(0, alpha (e^(x / alpha) - 1)).
OASR_HOST_DEVICE inline float celu(float x, float alpha) {
  return x > 0.0f ? x : alpha * math::expm1(x / alpha);
}

OASR_HOST_DEVICE inline float thresholdedRelu(float x, float alpha) {
  return x > alpha ? x : 0.0f;
}

/// The activations of KernelMath's table that both backends compute here:
/// y = f(x) with the op's two parameters (activationParams, OpGeometry.h).
OASR_HOST_DEVICE inline float sharedUnary(UnaryOp op, float x, float a,
                                          float b) {
  switch (op) {
  case UnaryOp::Softplus:
    return softplus(x);
  case UnaryOp::Softsign:
    return softsign(x);
  case UnaryOp::Sin:
    return math::sin(x);
  case UnaryOp::Cos:
    return math::cos(x);
  case UnaryOp::Selu:
    return selu(x, a, b);
  case UnaryOp::Celu:
    return celu(x, a);
  case UnaryOp::ThresholdedRelu:
    return thresholdedRelu(x, a);
  case UnaryOp::Floor:
    return math::floor(x);
  case UnaryOp::Ceil:
    return math::ceil(x);
  case UnaryOp::Round:
    return math::rint(x);
  case UnaryOp::Sign:
    return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; // NaN and 0 kept
  default:
    return x;
  }
}

/// dX of HardSigmoid at input x.
OASR_HOST_DEVICE inline float hardSigmoidGrad(float dy, float x, float alpha,
                                              float beta) {
  float t = alpha * x + beta;
  return t > 0.0f && t < 1.0f ? dy * alpha : 0.0f;
}

/// dX of HardSwish at input x; PyTorch's convention at the kinks: 0 at
/// x = -3, dY at x = 3.
OASR_HOST_DEVICE inline float hardSwishGrad(float dy, float x) {
  return x < -3.0f ? 0.0f : x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy;
}

/// dX of Mish at input x.
OASR_HOST_DEVICE inline float mishGrad(float dy, float x) {
  float t = math::tanh(softplus(x)), s = 1.0f / (1.0f + math::exp(-x));
  return dy * (t + x * s * (1.0f - t * t));
}

/// Clip: x bounded below by `lo`, then above by `hi` (std::max, then
/// std::min: a NaN x stays NaN).
OASR_HOST_DEVICE inline float clipValue(float x, float lo, float hi) {
  float t = x < lo ? lo : x;
  return hi < t ? hi : t;
}

/// ClipGrad: dY where lo <= x <= hi (PyTorch's convention at the bounds).
OASR_HOST_DEVICE inline float clipGrad(float dy, float x, float lo, float hi) {
  return x >= lo && x <= hi ? dy : 0.0f;
}

//===----------------------------------------------------------------------===//
// Comparisons and broadcast arithmetic
//===----------------------------------------------------------------------===//

template <typename T>
OASR_HOST_DEVICE inline bool compareValues(CmpOp op, T a, T b) {
  switch (op) {
  case CmpOp::Equal:
    return a == b;
  case CmpOp::Less:
    return a < b;
  case CmpOp::Greater:
    return a > b;
  case CmpOp::LessOrEqual:
    return a <= b;
  case CmpOp::GreaterOrEqual:
    return a >= b;
  case CmpOp::And:
    return a && b;
  case CmpOp::Or:
    return a || b;
  case CmpOp::Xor:
    return bool(a) != bool(b);
  }
  return false;
}

/// a op b for an op known at compile time (the CPU's loops), on f32, i64 or
/// i32. Pow squares exactly when b is 2; integer powers go through double.
template <BinOp Op, typename T>
OASR_HOST_DEVICE inline T applyBinary(T a, T b) {
  if constexpr (Op == BinOp::Add)
    return a + b;
  else if constexpr (Op == BinOp::Sub)
    return a - b;
  else if constexpr (Op == BinOp::Mul)
    return a * b;
  else if constexpr (Op == BinOp::Div)
    return a / b;
  else if constexpr (Op == BinOp::PRelu)
    return a > T(0) ? a : a * b;
  else if constexpr (Op == BinOp::Max)
    return a != a ? a : (b != b || b > a) ? b : a;
  else if constexpr (Op == BinOp::Min)
    return a != a ? a : (b != b || b < a) ? b : a;
  else if constexpr (Op == BinOp::Mod || Op == BinOp::Fmod) {
    if constexpr (std::is_floating_point_v<T>) {
      T r = T(math::fmod(float(a), float(b)));
      return Op == BinOp::Mod && r != T(0) && ((r < T(0)) != (b < T(0))) ? r + b
                                                                         : r;
    } else {
      if (b == T(0))
        return T(0);
      T r = a % b;
      return Op == BinOp::Mod && r != T(0) && ((r < T(0)) != (b < T(0))) ? r + b
                                                                         : r;
    }
  } else if constexpr (std::is_floating_point_v<T>)
    return b == T(2) ? a * a : T(math::pow(a, b));
  else
    return T(math::pow(double(a), double(b)));
}

/// The same for an op known at run time (the GPU's kernels).
template <typename T>
OASR_HOST_DEVICE inline T applyBinary(BinOp op, T a, T b) {
  switch (op) {
  case BinOp::Add:
    return applyBinary<BinOp::Add, T>(a, b);
  case BinOp::Sub:
    return applyBinary<BinOp::Sub, T>(a, b);
  case BinOp::Mul:
    return applyBinary<BinOp::Mul, T>(a, b);
  case BinOp::Div:
    return applyBinary<BinOp::Div, T>(a, b);
  case BinOp::PRelu:
    return applyBinary<BinOp::PRelu, T>(a, b);
  case BinOp::Max:
    return applyBinary<BinOp::Max, T>(a, b);
  case BinOp::Min:
    return applyBinary<BinOp::Min, T>(a, b);
  case BinOp::Mod:
    return applyBinary<BinOp::Mod, T>(a, b);
  case BinOp::Fmod:
    return applyBinary<BinOp::Fmod, T>(a, b);
  case BinOp::Pow:
    break;
  }
  return applyBinary<BinOp::Pow, T>(a, b);
}

//===----------------------------------------------------------------------===//
// Dropout, softmax cross-entropy, Trilu, Range, index operands
//===----------------------------------------------------------------------===//

/// Dropout's mask, one definition for every backend so that a model drops
/// the same elements on the CPU and the GPU: element i at the step with key
/// k is kept iff the top 32 bits of splitmix64(k + i) are >= ratio * 2^32.
/// The key of step s is splitmix64(seed ^ splitmix64(s)); every run of a
/// Dropout kernel is a new step.
OASR_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline uint64_t dropoutStepKey(uint64_t seed, uint64_t step) {
  return splitmix64(seed ^ splitmix64(step));
}
inline uint64_t dropoutThreshold(double ratio) {
  return uint64_t(std::ldexp(ratio, 32));
}
OASR_HOST_DEVICE inline bool dropoutKeeps(uint64_t stepKey, uint64_t i,
                                          uint64_t threshold) {
  return (splitmix64(stepKey + i) >> 32) >= threshold;
}
/// The factor of a kept element, 1 / (1 - ratio); 0 when all are dropped.
inline float dropoutScale(double ratio) {
  return ratio < 1 ? float(1.0 / (1.0 - ratio)) : 0.0f;
}
/// Y[i] of a kept or dropped X[i] (x is read only when kept);
/// DropoutGrad's dX the same of dY.
OASR_HOST_DEVICE inline float dropoutValue(bool keep, const float *x, int64_t i,
                                           float scale) {
  return keep ? x[i] * scale : 0.0f;
}

/// dScores of one class from its log-probability: (softmax - onehot) times
/// the loss gradient's share `scale`.
OASR_HOST_DEVICE inline float sceGradAt(float logProb, bool isLabel,
                                        float scale, float smoothing = 0,
                                        int64_t classes = 1) {
  float target = smoothing == 0 ? (isLabel ? 1.0f : 0.0f)
                                : (isLabel ? 1.0f - smoothing : 0.0f) +
                                      smoothing / float(classes);
  return (math::exp(logProb) - target) * scale;
}

/// A row's cross-entropy with label smoothing `smoothing` over `classes`
/// (torch.nn.CrossEntropyLoss's label_smoothing): the target is
/// (1 - smoothing) on the label plus smoothing / classes everywhere, so the
/// loss is -(1 - smoothing) logp[label] - smoothing / classes * sum logp.
OASR_HOST_DEVICE inline float sceLossAt(float labelLogProb, double logProbSum,
                                        float smoothing, int64_t classes) {
  if (smoothing == 0)
    return -labelLogProb;
  return -(1.0f - smoothing) * labelLogProb -
         float(double(smoothing) * logProbSum / double(classes));
}

/// CumSum of line `line` of a [outer, n, inner] tensor (CumSumGeom,
/// OpGeometry.h): running sums in T along the axis, from its end when
/// `reverse`, each without its own element when `exclusive`.
template <typename Geom, typename T>
OASR_HOST_DEVICE inline void cumSumLine(const Geom &g, const T *x, T *y,
                                        int64_t line) {
  const int64_t o = line / g.inner, i = line % g.inner;
  const T *xl = x + o * g.n * g.inner + i;
  T *yl = y + o * g.n * g.inner + i;
  T acc = T(0);
  for (int64_t k = 0; k < g.n; ++k) {
    int64_t at = (g.reverse ? g.n - 1 - k : k) * g.inner;
    T v = xl[at];
    if (!g.exclusive)
      acc += v;
    yl[at] = acc;
    if (g.exclusive)
      acc += v;
  }
}

/// ReduceMax, ReduceMin and ReduceProd: a fold over the reduced elements.
enum class FoldKind : int { Max, Min, Prod };

inline std::optional<FoldKind> foldKindOf(std::string_view op) {
  if (op == "ReduceMax")
    return FoldKind::Max;
  if (op == "ReduceMin")
    return FoldKind::Min;
  if (op == "ReduceProd")
    return FoldKind::Prod;
  return std::nullopt;
}

OASR_HOST_DEVICE inline float foldStart(FoldKind k) {
  return k == FoldKind::Max ? -INFINITY : k == FoldKind::Min ? INFINITY : 1.0f;
}

/// One step of the fold (NaN handling is the caller's).
OASR_HOST_DEVICE inline float foldStep(FoldKind k, float acc, float v) {
  return k == FoldKind::Max   ? (v > acc ? v : acc)
         : k == FoldKind::Min ? (v < acc ? v : acc)
                              : acc * v;
}

/// ArgMax/ArgMin of line `line` (ArgGeom, OpGeometry.h): the index of its
/// largest (smallest) element, the first or (`last`) the last of equals; the
/// first NaN wins.
template <typename Geom>
OASR_HOST_DEVICE inline int64_t argExtremeLine(const Geom &g, const float *x,
                                               int64_t line) {
  const int64_t o = line / g.inner, i = line % g.inner;
  const float *xl = x + o * g.n * g.inner + i;
  int64_t best = 0;
  float bv = xl[0];
  for (int64_t k = 1; k < g.n && bv == bv; ++k) {
    float v = xl[k * g.inner];
    bool better = v != v || (g.max ? v > bv : v < bv) || (g.last && v == bv);
    if (better) {
      best = k;
      bv = v;
    }
  }
  return best;
}

/// TopK's order (TopKGeom, OpGeometry.h): element (a, ia) comes before (b,
/// ib) when it is larger (smaller), a NaN being larger than any number, or
/// equal with a lower index.
OASR_HOST_DEVICE inline bool topKBefore(bool largest, float a, int64_t ia,
                                        float b, int64_t ib) {
  bool an = a != a, bn = b != b;
  if (an || bn) {
    if (an && bn)
      return ia < ib;
    return largest ? an : bn;
  }
  if (a == b)
    return ia < ib;
  return largest ? a > b : a < b;
}

/// TopK of line `line`: the k first elements in topKBefore's order, each
/// found by a pass over the line (k passes, no scratch memory).
template <typename Geom>
OASR_HOST_DEVICE inline void topKLine(const Geom &g, const float *x,
                                      float *values, int64_t *indices,
                                      int64_t line) {
  const int64_t o = line / g.inner, i = line % g.inner;
  const float *xl = x + o * g.n * g.inner + i;
  float *vl = values + o * g.k * g.inner + i;
  int64_t *il = indices + o * g.k * g.inner + i;
  float pv = 0.0f;
  int64_t pi = -1;
  for (int64_t j = 0; j < g.k; ++j) {
    int64_t best = -1;
    float bv = 0.0f;
    for (int64_t m = 0; m < g.n; ++m) {
      float v = xl[m * g.inner];
      if (pi >= 0 && !topKBefore(g.largest, pv, pi, v, m))
        continue;
      if (best < 0 || topKBefore(g.largest, v, m, bv, best)) {
        best = m;
        bv = v;
      }
    }
    vl[j * g.inner] = bv;
    il[j * g.inner] = best;
    pv = bv;
    pi = best;
  }
}

/// GatherElements/ScatterElements (ElementsGeom, OpGeometry.h): the data
/// offset that element `i` of the indices names with index value `index`
/// (already within [0, axisDim)).
template <typename Geom>
OASR_HOST_DEVICE inline int64_t elementsOffset(const Geom &g, int64_t i,
                                               int64_t index) {
  int64_t off = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    int64_t coord = i % g.idxDims[d];
    i /= g.idxDims[d];
    off += (d == g.axis ? index : coord) * g.dataStrides[d];
  }
  return off;
}

/// Trilu keeps element (row, col) of a matrix when it is on or above the
/// k-th diagonal (upper) or on or below it (lower).
OASR_HOST_DEVICE inline bool triluKeeps(bool upper, int64_t row, int64_t col,
                                        int64_t k) {
  return upper ? col - row >= k : col - row <= k;
}

/// Range's element i, before its conversion to the result's type.
OASR_HOST_DEVICE inline double rangeValue(double start, double delta,
                                          int64_t i) {
  return start + double(i) * delta;
}

/// Element i of an i64 (`is64`) or i32 tensor of indices or labels.
OASR_HOST_DEVICE inline int64_t indexAt(const void *p, bool is64, int64_t i) {
  return is64 ? static_cast<const int64_t *>(p)[i]
              : int64_t(static_cast<const int32_t *>(p)[i]);
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

enum class UpdateAlgo : int { Sgd, Momentum, Adagrad, Adam, AdamW };

/// One update's scalars as the ONNX preview-training rules derive them
/// (docs/runtime.md, "Optimizers"), in float: the learning rate, weight
/// decay, momentum and its dampened gradient factor `c`, the step size `r`
/// of adagrad and adam, epsilon, adam's betas and its post-update decay
/// factor `keep`.
struct UpdateScalars {
  UpdateAlgo algo = UpdateAlgo::Sgd;
  float lr = 0, wd = 0, m = 0, c = 1, r = 0, eps = 0, b1 = 0, b2 = 0, keep = 1;
  bool nesterov = false;
};

/// The scalars of `rule` after `t` earlier updates.
inline UpdateScalars updateScalars(const UpdateRule &rule, int64_t t) {
  UpdateScalars u;
  u.lr = float(rule.lr);
  u.wd = float(rule.weightDecay);
  u.m = float(rule.momentum);
  u.c = t > 0 ? float(1.0 - rule.dampening) : 1.0f;
  u.eps = float(rule.epsilon);
  u.b1 = float(rule.beta1);
  u.b2 = float(rule.beta2);
  u.keep = float(1.0 - rule.weightDecayPost);
  u.nesterov = rule.nesterov;
  if (rule.algo == "sgd") {
    u.algo = UpdateAlgo::Sgd;
  } else if (rule.algo == "momentum") {
    u.algo = UpdateAlgo::Momentum;
  } else if (rule.algo == "adagrad") {
    u.algo = UpdateAlgo::Adagrad;
    u.r = float(rule.lr / (1.0 + double(t) * rule.lrDecay));
  } else if (rule.algo == "adamw") {
    // torch.optim.AdamW: the decay scales the weight by 1 - lr wd first;
    // the step is lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps), t counted
    // from 1.
    u.algo = UpdateAlgo::AdamW;
    const double step = double(t + 1);
    u.keep = float(1.0 - rule.lr * rule.weightDecay);
    u.r = float(rule.lr / (1.0 - std::pow(rule.beta1, step)));
    u.c = float(std::sqrt(1.0 - std::pow(rule.beta2, step)));
  } else {
    u.algo = UpdateAlgo::Adam;
    u.r = t > 0 ? float(rule.lr *
                        std::sqrt(1.0 - std::pow(rule.beta2, double(t))) /
                        (1.0 - std::pow(rule.beta1, double(t))))
                : u.lr;
  }
  return u;
}

/// sgd: p' = p - lr (g + wd p).
OASR_HOST_DEVICE inline float sgdStep(const UpdateScalars &u, float p,
                                      float g) {
  return u.wd == 0.0f ? p - u.lr * g : p - u.lr * (g + u.wd * p);
}

/// momentum: v' = m v + c g_r (c = 1 - dampening after the first update);
/// p' = p - lr v' or, Nesterov, p - lr (g_r + m v'); g_r = g + wd p.
OASR_HOST_DEVICE inline void momentumStep(const UpdateScalars &u, float p,
                                          float g, float v, float &np,
                                          float &nv) {
  float gr = g + u.wd * p;
  float vi = u.m * v + u.c * gr;
  nv = vi;
  np = p - u.lr * (u.nesterov ? gr + u.m * vi : vi);
}

/// adagrad: h' = h + g_r^2; p' = p - r g_r / (sqrt(h') + eps).
OASR_HOST_DEVICE inline void adagradStep(const UpdateScalars &u, float p,
                                         float g, float h, float &np,
                                         float &nh) {
  float gr = g + u.wd * p;
  float hi = h + gr * gr;
  nh = hi;
  np = p - u.r * gr / (math::sqrt(hi) + u.eps);
}

/// adam: v' = b1 v + (1 - b1) g_r; h' = b2 h + (1 - b2) g_r^2;
/// p' = keep (p - r v' / (sqrt(h') + eps)).
OASR_HOST_DEVICE inline void adamStep(const UpdateScalars &u, float p, float g,
                                      float v, float h, float &np, float &nv,
                                      float &nh) {
  float gr = g + u.wd * p;
  float vi = u.b1 * v + (1.0f - u.b1) * gr;
  float hi = u.b2 * h + (1.0f - u.b2) * gr * gr;
  nv = vi;
  nh = hi;
  np = u.keep * (p - u.r * vi / (math::sqrt(hi) + u.eps));
}

/// adamw (torch.optim.AdamW's single-tensor form): p' = (1 - lr wd) p; m' =
/// lerp(m, g, 1 - b1); v' = b2 v + (1 - b2) g^2; p'' = p' - r m' / (sqrt(v')
/// / c + eps) with r = lr / (1 - b1^t) and c = sqrt(1 - b2^t).
OASR_HOST_DEVICE inline void adamwStep(const UpdateScalars &u, float p, float g,
                                       float v, float h, float &np, float &nv,
                                       float &nh) {
  const float w = 1.0f - u.b1; // lerp's weight (< 0.5: from the start)
  const float m = w < 0.5f ? v + w * (g - v) : g - (g - v) * (1.0f - w);
  const float s = u.b2 * h + (1.0f - u.b2) * g * g;
  nv = m;
  nh = s;
  np = u.keep * p - u.r * (m / (math::sqrt(s) / u.c + u.eps));
}

} // namespace oasr::rt

#endif // OASR_RUNTIME_KERNELMATH_H
