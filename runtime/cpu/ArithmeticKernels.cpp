//===- ArithmeticKernels.cpp - Broadcast arithmetic and reductions --------===//
//
// The hand-written numeric kernels (plain OpenMP loops): numpy-broadcast
// Add/Sub/Mul/Div/Pow, Sum and Neg (bf16 results on oneDNN's binary and sum
// primitives), the reduction of a broadcast gradient (ReduceSumTo) and
// ReduceMean/ReduceSum, the ops of the CUDA backend's ArithmeticKernels.cpp;
// and the helpers the other CPU kernel files share (broadcast plans, scalar
// operands, copies).
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "VectorSums.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

namespace oasr::rt::cpu {

BroadcastPlan makePlan(const std::vector<std::vector<int64_t>> &ins,
                       const std::vector<int64_t> &out) {
  size_t r = out.size(), k = ins.size();
  // Aligned shapes and broadcast flags; size-1 output dims are dropped.
  std::vector<int64_t> dims;
  std::vector<std::vector<bool>> bc(k);
  for (size_t d = 0; d < r; ++d) {
    if (out[d] == 1)
      continue;
    dims.push_back(out[d]);
    for (size_t j = 0; j < k; ++j) {
      size_t off = r - ins[j].size();
      bool b = d < off || ins[j][d - off] == 1;
      bc[j].push_back(b);
    }
  }
  BroadcastPlan p;
  if (dims.empty()) {
    p.dims = {1};
    p.strides.assign(k, {0});
    return p;
  }
  // Merge runs of dims whose broadcast pattern is identical for all operands.
  std::vector<int64_t> mdims;
  std::vector<std::vector<bool>> mbc(k);
  for (size_t d = 0; d < dims.size(); ++d) {
    bool merge = d > 0;
    for (size_t j = 0; merge && j < k; ++j)
      merge = bc[j][d] == mbc[j].back();
    if (merge) {
      mdims.back() *= dims[d];
      continue;
    }
    mdims.push_back(dims[d]);
    for (size_t j = 0; j < k; ++j)
      mbc[j].push_back(bc[j][d]);
  }
  p.dims = mdims;
  p.strides.assign(k, std::vector<int64_t>(mdims.size(), 0));
  for (size_t j = 0; j < k; ++j) {
    int64_t acc = 1;
    for (size_t d = mdims.size(); d-- > 0;) {
      if (!mbc[j][d]) {
        p.strides[j][d] = acc;
        acc *= mdims[d];
      }
    }
  }
  return p;
}

bool scalarOperand(const std::vector<TensorRef> &in, size_t i, double &v) {
  if (i >= in.size() || !in[i].data || in[i].numel() == 0)
    return false;
  switch (in[i].desc.dtype) {
  case DType::F32:
    v = *in[i].as<float>();
    return true;
  case DType::I64:
    v = double(*in[i].as<int64_t>());
    return true;
  case DType::I32:
    v = double(*in[i].as<int32_t>());
    return true;
  case DType::Bool:
    v = *in[i].as<uint8_t>() ? 1.0 : 0.0;
    return true;
  default:
    return false;
  }
}

/// memcpy split across threads for large buffers.
void parallelCopy(void *dst, const void *src, size_t bytes) {
  if (dst == src || bytes == 0)
    return;
  constexpr size_t kChunk = size_t(1) << 20;
  if (bytes < 2 * kChunk) {
    std::memcpy(dst, src, bytes);
    return;
  }
  int64_t chunks = int64_t((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    size_t off = size_t(c) * kChunk;
    std::memcpy(static_cast<char *>(dst) + off,
                static_cast<const char *>(src) + off,
                std::min(kChunk, bytes - off));
  }
}

//===----------------------------------------------------------------------===//
// Add/Sub/Mul/Div and Sum with a bf16 result (oneDNN binary and sum)
//===----------------------------------------------------------------------===//

static KernelOr createDnnlSum(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1024, 1, 1));
  const auto &ys = spec.outputs[0].shape;
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].dtype != DType::BF16 || spec.inputs[i].shape != ys ||
        ys.empty() || ys.size() > DNNL_MAX_NDIMS) {
      return nodeError(spec, "no oneDNN sum form; the backend widens it");
    }
  return guardCreate(spec, [&]() -> std::unique_ptr<Kernel> {
    auto md = plainDesc(ys, dt::bf16);
    std::vector<memory::desc> srcs(spec.inputs.size(), md);
    std::vector<float> scales(spec.inputs.size(), 1.0f);
    PlainPrimitive p(
        dnnl::sum(dnnl::sum::primitive_desc(md, scales, srcs, engine())));
    for (size_t i = 0; i < spec.inputs.size(); ++i)
      p.in(DNNL_ARG_MULTIPLE_SRC + int(i), md, i);
    p.out(DNNL_ARG_DST, md, 0);
    return std::make_unique<PrimitiveKernel>(spec, std::move(p));
  });
}

static KernelOr createDnnlBinary(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  const auto &ys = spec.outputs[0].shape;
  size_t a = 0, b = 1;
  bool commutes = spec.opType == "Add" || spec.opType == "Mul";
  // oneDNN broadcasts its second source onto the first, which has the
  // result's shape.
  if (spec.inputs[0].shape != ys && commutes)
    std::swap(a, b);
  for (size_t i : {size_t(0), size_t(1)})
    if (!isLowFloat(spec.inputs[i].dtype) && spec.inputs[i].dtype != DType::F32)
      return checkDType(spec, true, i, DType::BF16);
  if (spec.inputs[a].shape != ys || !broadcastsTo(spec.inputs[b].shape, ys) ||
      ys.empty() || ys.size() > DNNL_MAX_NDIMS ||
      spec.inputs[0].dtype == DType::F16 ||
      spec.inputs[1].dtype == DType::F16) {
    return nodeError(spec, "no oneDNN binary form; the backend widens it");
  }
  std::vector<int64_t> bs = spec.inputs[b].shape;
  bs.insert(bs.begin(), ys.size() - bs.size(), 1);
  dnnl::algorithm alg = spec.opType == "Add"   ? dnnl::algorithm::binary_add
                        : spec.opType == "Sub" ? dnnl::algorithm::binary_sub
                        : spec.opType == "Mul" ? dnnl::algorithm::binary_mul
                                               : dnnl::algorithm::binary_div;
  return guardCreate(spec, [&]() -> std::unique_ptr<Kernel> {
    auto amd = plainDesc(ys, dataType(spec.inputs[a])),
         bmd = plainDesc(bs, dataType(spec.inputs[b])),
         ymd = plainDesc(ys, dt::bf16);
    PlainPrimitive p(dnnl::binary(dnnl::binary::primitive_desc(
        dnnl::binary::desc(alg, amd, bmd, ymd), engine())));
    p.in(DNNL_ARG_SRC_0, amd, a)
        .in(DNNL_ARG_SRC_1, bmd, b)
        .out(DNNL_ARG_DST, ymd, 0);
    return std::make_unique<PrimitiveKernel>(spec, std::move(p));
  });
}

//===----------------------------------------------------------------------===//
// Numpy broadcasting
//===----------------------------------------------------------------------===//

template <typename T, BinOp Op>
static void binaryLoop(const BroadcastPlan &p, const T *a, const T *b, T *y) {
  const int64_t rows = p.rows(), inner = p.inner();
  const int64_t sa = p.strides[0].back(), sb = p.strides[1].back();
#pragma omp parallel for schedule(static) if (rows * inner > 16384)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t offs[2];
    p.rowOffsets(row, offs);
    const T *pa = a + offs[0], *pb = b + offs[1];
    T *py = y + row * inner;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < inner; ++i)
        py[i] = applyBinary<Op, T>(pa[i], pb[i]);
    } else if (sa == 1) {
      const T bv = pb[0];
      for (int64_t i = 0; i < inner; ++i)
        py[i] = applyBinary<Op, T>(pa[i], bv);
    } else if (sb == 1) {
      const T av = pa[0];
      for (int64_t i = 0; i < inner; ++i)
        py[i] = applyBinary<Op, T>(av, pb[i]);
    } else {
      const T v = applyBinary<Op, T>(pa[0], pb[0]);
      for (int64_t i = 0; i < inner; ++i)
        py[i] = v;
    }
  }
}

template <typename T>
static void binaryDispatch(BinOp op, const BroadcastPlan &p, const void *a,
                           const void *b, void *y) {
  auto *ta = static_cast<const T *>(a), *tb = static_cast<const T *>(b);
  auto *ty = static_cast<T *>(y);
  switch (op) {
  case BinOp::Add:
    return binaryLoop<T, BinOp::Add>(p, ta, tb, ty);
  case BinOp::Sub:
    return binaryLoop<T, BinOp::Sub>(p, ta, tb, ty);
  case BinOp::Mul:
    return binaryLoop<T, BinOp::Mul>(p, ta, tb, ty);
  case BinOp::Div:
    return binaryLoop<T, BinOp::Div>(p, ta, tb, ty);
  case BinOp::Pow:
    return binaryLoop<T, BinOp::Pow>(p, ta, tb, ty);
  case BinOp::PRelu:
    return binaryLoop<T, BinOp::PRelu>(p, ta, tb, ty);
  case BinOp::Max:
    return binaryLoop<T, BinOp::Max>(p, ta, tb, ty);
  case BinOp::Min:
    return binaryLoop<T, BinOp::Min>(p, ta, tb, ty);
  case BinOp::Mod:
    return binaryLoop<T, BinOp::Mod>(p, ta, tb, ty);
  case BinOp::Fmod:
    return binaryLoop<T, BinOp::Fmod>(p, ta, tb, ty);
  }
}

static void binary(DType t, BinOp op, const BroadcastPlan &p, const void *a,
                   const void *b, void *y) {
  switch (t) {
  case DType::F32:
    return binaryDispatch<float>(op, p, a, b, y);
  case DType::I64:
    return binaryDispatch<int64_t>(op, p, a, b, y);
  case DType::I32:
    return binaryDispatch<int32_t>(op, p, a, b, y);
  default:
    return;
  }
}

namespace {

/// Add/Sub/Mul/Div with numpy broadcasting.
class BinaryKernel final : public CpuKernel {
public:
  BinaryKernel(const OpSpec &spec, BinOp op)
      : CpuKernel(spec), op(op), type(spec.outputs[0].dtype),
        plan(makePlan({spec.inputs[0].shape, spec.inputs[1].shape},
                      spec.outputs[0].shape)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    binary(type, op, plan, in[0].data, in[1].data, out[0].data);
  }

private:
  BinOp op;
  DType type;
  BroadcastPlan plan;
};

} // namespace

static KernelOr createBinary(const OpSpec &spec) {
  const std::optional<BinOp> named = opNamed(kBinOps, spec.opType);
  const bool dnnlOp = named && *named <= BinOp::Div;
  if (dnnlOp && spec.outputs.size() == 1 &&
      spec.outputs[0].dtype == DType::BF16)
    return createDnnlBinary(spec);
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  OASR_RETURN_IF_ERROR(checkBroadcastOperands(spec));
  if (named && *named == BinOp::PRelu && spec.outputs[0].dtype != DType::F32)
    return nodeError(spec, "PRelu runs on f32 tensors");
  if (named && *named == BinOp::Mod && spec.outputs[0].dtype == DType::BF16)
    return nodeError(spec, "Mod runs on f32 and integer tensors");
  return std::make_unique<BinaryKernel>(spec,
                                        binaryOpOf(spec).value_or(BinOp::Pow));
}

namespace {

/// Sum: variadic, broadcasting. Equal shapes are summed in one pass (safe
/// when the result aliases an operand).
class SumKernel final : public CpuKernel {
public:
  explicit SumKernel(const OpSpec &spec)
      : CpuKernel(spec), type(spec.outputs[0].dtype) {
    const auto &ys = spec.outputs[0].shape;
    for (const auto &d : spec.inputs)
      sameShape = sameShape && d.shape == ys;
    if (!sameShape) {
      pair = makePlan({spec.inputs[0].shape, spec.inputs[1].shape}, ys);
      for (size_t i = 2; i < spec.inputs.size(); ++i)
        rest.push_back(makePlan({ys, spec.inputs[i].shape}, ys));
    }
    numel = spec.outputs[0].numel();
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    if (sameShape && type == DType::F32)
      return sumSame<float>(in, out[0]);
    if (sameShape && type == DType::I64)
      return sumSame<int64_t>(in, out[0]);
    if (sameShape && type == DType::I32)
      return sumSame<int32_t>(in, out[0]);
    // Broadcasting: y = x0 + x1, then y += xi.
    binary(type, BinOp::Add, pair, in[0].data, in[1].data, out[0].data);
    for (size_t i = 2; i < in.size(); ++i)
      binary(type, BinOp::Add, rest[i - 2], out[0].data, in[i].data,
             out[0].data);
  }

private:
  template <typename T>
  void sumSame(const std::vector<TensorRef> &in, const TensorRef &out) {
    T *y = out.as<T>();
    size_t k = in.size();
    std::vector<const T *> xs(k);
    for (size_t j = 0; j < k; ++j)
      xs[j] = in[j].as<T>();
    const int64_t n = numel;
#pragma omp parallel for schedule(static) if (n > 16384)
    for (int64_t i = 0; i < n; ++i) {
      T acc = xs[0][i];
      for (size_t j = 1; j < k; ++j)
        acc += xs[j][i];
      y[i] = acc;
    }
  }
  DType type;
  bool sameShape = true;
  int64_t numel;
  BroadcastPlan pair;
  std::vector<BroadcastPlan> rest;
};

} // namespace

static KernelOr createSum(const OpSpec &spec) {
  if (spec.outputs.size() == 1 && spec.outputs[0].dtype == DType::BF16)
    return createDnnlSum(spec);
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1024, 1, 1));
  OASR_RETURN_IF_ERROR(checkBroadcastOperands(spec));
  if (spec.inputs.size() == 1 &&
      spec.inputs[0].shape != spec.outputs[0].shape) {
    return nodeError(spec, "a single operand must have the result's shape");
  }
  return std::make_unique<SumKernel>(spec);
}

namespace {

/// Neg on f32 / i64 / i32.
class NegKernel final : public CpuKernel {
public:
  explicit NegKernel(const OpSpec &spec)
      : CpuKernel(spec), type(spec.outputs[0].dtype),
        n(spec.outputs[0].numel()) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    switch (type) {
    case DType::F32:
      return neg(in[0].as<float>(), out[0].as<float>());
    case DType::I64:
      return neg(in[0].as<int64_t>(), out[0].as<int64_t>());
    case DType::I32:
      return neg(in[0].as<int32_t>(), out[0].as<int32_t>());
    default:
      return;
    }
  }

private:
  template <typename T> void neg(const T *x, T *y) {
    const int64_t count = n;
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i)
      y[i] = -x[i];
  }
  DType type;
  int64_t n;
};

} // namespace

static KernelOr createNeg(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, spec.outputs[0].dtype));
  if (!isFloatOrInt(spec.outputs[0].dtype) ||
      spec.inputs[0].shape != spec.outputs[0].shape) {
    return nodeError(spec, "expects X and Y of one shape, f32/i64/i32");
  }
  return std::make_unique<NegKernel>(spec);
}

//===----------------------------------------------------------------------===//
// ReduceSumTo
//===----------------------------------------------------------------------===//

namespace {

/// What ReduceSumTo's vector loops read: dY's merged dims, the reduced
/// and the kept ones (size, stride), and the inner dimension apart.
struct SumToGeom {
  float scale = 1.0f;
  int64_t inner = 1, redCount = 1, outerKept = 1;
  std::vector<std::pair<int64_t, int64_t>> keptDims, redDims; // (size, stride)

  static int64_t offsetOf(int64_t idx,
                          const std::vector<std::pair<int64_t, int64_t>> &ds) {
    int64_t off = 0;
    for (size_t d = ds.size(); d-- > 0;) {
      off += (idx % ds[d].first) * ds[d].second;
      idx /= ds[d].first;
    }
    return off;
  }
};

} // namespace

/// Result element `o` (the inner dimension reduced): the sum of its
/// `redCount` contiguous runs of `inner` values.
OASR_VECTOR_KERNEL(float, sumRuns,
                   (const SumToGeom &k, const float *dy, int64_t o), {
                     const int64_t base = k.offsetOf(o, k.keptDims);
                     double acc = 0;
                     for (int64_t r = 0; r < k.redCount; ++r) {
                       const float *p = dy + base + k.offsetOf(r, k.redDims);
                       acc +=
                           blockSum(k.inner, [&](int64_t i) { return p[i]; });
                     }
                     return float(acc * k.scale);
                   })
/// Result elements [c0, c0 + kSumBlock) of row `o` (the inner dimension
/// kept).
OASR_VECTOR_KERNEL(void, sumColumns,
                   (const SumToGeom &k, const float *dy, float *dx, int64_t o,
                    int64_t c0),
                   {
                     const int64_t w = std::min(k.inner, c0 + kSumBlock) - c0;
                     const int64_t base = k.offsetOf(o, k.keptDims) + c0;
                     double tot[kSumBlock] = {0};
                     columnSums(k.redCount, w, tot, [&](int64_t r) {
                       const float *p = dy + base + k.offsetOf(r, k.redDims);
                       return [p](int64_t c) { return p[c]; };
                     });
                     for (int64_t c = 0; c < w; ++c)
                       dx[o * k.inner + c0 + c] = float(tot[c] * k.scale);
                   })

namespace {

/// ReduceSumTo: dY -> dX, summing dY over the axes along which dX's shape
/// broadcasts to dY's, times `scale` (ReduceSum/ReduceMean reuse it with
/// the reduced axes kept as 1).
class ReduceSumToKernel final : public CpuKernel, SumToGeom {
public:
  ReduceSumToKernel(const OpSpec &spec, const std::vector<int64_t> &ys,
                    std::vector<int64_t> xs, float scale = 1.0f)
      : CpuKernel(spec) {
    this->scale = scale;
    xs.insert(xs.begin(), ys.size() - xs.size(), 1);
    // Merge runs of (reduced | kept) dims, dropping size-1 dims of dY.
    std::vector<int64_t> dims;
    std::vector<bool> red;
    for (size_t d = 0; d < ys.size(); ++d) {
      if (ys[d] == 1)
        continue;
      bool r = xs[d] == 1;
      if (!dims.empty() && red.back() == r) {
        dims.back() *= ys[d];
        continue;
      }
      dims.push_back(ys[d]);
      red.push_back(r);
    }
    copyOnly = std::find(red.begin(), red.end(), true) == red.end();
    total = spec.inputs[0].numel();
    if (copyOnly)
      return;
    std::vector<int64_t> inStr = rowMajorStrides(dims);
    lastReduced = red.back();
    for (size_t d = 0; d < dims.size(); ++d) {
      if (red[d])
        redDims.push_back({dims[d], inStr[d]});
      else
        keptDims.push_back({dims[d], inStr[d]});
    }
    // The inner dimension is handled separately.
    auto &innerList = lastReduced ? redDims : keptDims;
    inner = innerList.back().first;
    innerList.pop_back();
    redCount = 1;
    for (auto &r : redDims)
      redCount *= r.first;
    outerKept = 1;
    for (auto &k : keptDims)
      outerKept *= k.first;
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *dy = in[0].as<float>();
    float *dx = out[0].as<float>();
    if (copyOnly && scale == 1.0f)
      return parallelCopy(dx, dy, size_t(total) * sizeof(float));
    if (copyOnly) {
      const int64_t n = total;
      const float sc = scale;
#pragma omp parallel for schedule(static) if (n > 16384)
      for (int64_t i = 0; i < n; ++i)
        dx[i] = dy[i] * sc;
      return;
    }
    if (lastReduced)
      reduceInner(dy, dx);
    else
      reduceOuter(dy, dx);
  }

private:
  void reduceInner(const float *dy, float *dx) const {
    const int64_t outs = outerKept;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outs; ++o)
      dx[o] = sumRuns(*this, dy, o);
  }

  // The result keeps dY's inner dimension: column blocks spread over
  // threads.
  void reduceOuter(const float *dy, float *dx) const {
    const int64_t blocks = (inner + kSumBlock - 1) / kSumBlock;
    const int64_t units = outerKept * blocks;
#pragma omp parallel for schedule(static)
    for (int64_t u = 0; u < units; ++u)
      sumColumns(*this, dy, dx, u / blocks, (u % blocks) * kSumBlock);
  }

  bool copyOnly = false, lastReduced = false;
  int64_t total = 0;
};

} // namespace

static KernelOr createReduceSumTo(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 1, {0}, {0}));
  if (!broadcastsTo(spec.outputs[0].shape, spec.inputs[0].shape)) {
    return nodeError(spec, "result shape " + shapeStr(spec.outputs[0].shape) +
                               " does not broadcast to the operand's " +
                               shapeStr(spec.inputs[0].shape));
  }
  return std::make_unique<ReduceSumToKernel>(spec, spec.inputs[0].shape,
                                             spec.outputs[0].shape);
}

//===----------------------------------------------------------------------===//
// ReduceMean / ReduceSum
//===----------------------------------------------------------------------===//

/// ReduceMean / ReduceSum {axes, keepdims}: axes from the attribute, else
/// (keepdims = 1) from where the result has 1s, else all axes.
namespace {

/// A contiguous run of `n` values folded into `acc` (8 lanes, combined at
/// the end; a NaN sets `nan` for Max and Min, which then return it).
/// Eight float lanes (GCC's vector extension: one AVX register, or two SSE
/// ones in the baseline variant).
typedef float F8 __attribute__((vector_size(32)));

[[gnu::always_inline]] inline float
foldRunBody(FoldKind k, const float *p, int64_t n, float acc, bool &nan) {
  const bool prod = k == FoldKind::Prod;
  float lane[8], bad[8] = {};
  for (float &l : lane)
    l = prod ? 1.0f : acc;
  int nanSeen = 0;
  int64_t i = 0;
  if (prod) {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j)
        lane[j] *= p[i + j];
  } else {
    // Max flips the sign of min's comparison: -v < -l is v > l.
    const float sign = k == FoldKind::Max ? -1.0f : 1.0f;
    F8 l, b = {};
    std::memcpy(&l, lane, sizeof l);
    for (; i + 8 <= n; i += 8) {
      F8 v;
      std::memcpy(&v, p + i, sizeof v);
      b += v * 0.0f; // NaN after a NaN or an infinity
      l = v * sign < l * sign ? v : l;
    }
    std::memcpy(lane, &l, sizeof l);
    std::memcpy(bad, &b, sizeof b);
  }
  for (float b : bad)
    if (b != b) // a NaN or an infinity: look for a NaN
      for (int64_t e = 0; e < i && !nanSeen; ++e)
        nanSeen |= p[e] != p[e];
  float r = acc;
  for (int j = 0; j < 8; ++j)
    r = foldStep(k, r, lane[j]);
  for (; i < n; ++i) {
    nanSeen |= p[i] != p[i];
    r = foldStep(k, r, p[i]);
  }
  nan = nan || nanSeen;
  return r;
}

OASR_VECTOR_KERNEL(float, foldRun,
                   (FoldKind k, const float *p, int64_t n, float acc,
                    bool &nan),
                   { return foldRunBody(k, p, n, acc, nan); })

/// Rows [r0, r1) of `n` contiguous values, each folded into y[r].
OASR_VECTOR_KERNEL(
    void, foldRows,
    (FoldKind k, const float *x, float *y, int64_t n, int64_t r0, int64_t r1), {
      for (int64_t r = r0; r < r1; ++r) {
        bool nan = false;
        float acc = foldRunBody(k, x + r * n, n, foldStart(k), nan);
        y[r] = nan ? std::numeric_limits<float>::quiet_NaN() : acc;
      }
    })

/// ReduceMax / ReduceMin (f32): each result element the largest (smallest)
/// of its reduced elements; a NaN among them is the result (torch.amax).
/// ReduceProd: their product. The reduced elements are walked as runs of
/// the contiguous innermost reduced dimension (foldRun).
class ReduceFoldKernel final : public CpuKernel {
public:
  ReduceFoldKernel(const OpSpec &spec, const std::vector<int64_t> &kept,
                   FoldKind kind)
      : CpuKernel(spec), kind(kind) {
    const std::vector<int64_t> &xs = spec.inputs[0].shape;
    std::vector<int64_t> st = rowMajorStrides(xs);
    for (size_t d = 0; d < xs.size(); ++d)
      (kept[d] == 1 && xs[d] != 1 ? red : out).push_back({xs[d], st[d]});
    outputs = spec.outputs[0].numel();
    if (!red.empty() && red.back().second == 1) {
      run = red.back().first;
      red.pop_back();
      lastAxis = true;
    }
    for (auto [n, s] : red)
      runs *= n;
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &outRefs) override {
    const float *x = in[0].as<float>();
    float *y = outRefs[0].as<float>();
    const FoldKind k = kind;
    if (red.empty() && lastAxis) {
      // The last axis alone: row o is x[o * run, (o + 1) * run).
      constexpr int64_t kRows = 256;
#pragma omp parallel for schedule(static) if (outputs * run > 16384)
      for (int64_t r = 0; r < outputs; r += kRows)
        foldRows(k, x, y, run, r, std::min(outputs, r + kRows));
      return;
    }
#pragma omp parallel for schedule(static) if (outputs * runs * run > 16384)
    for (int64_t o = 0; o < outputs; ++o) {
      const int64_t base = SumToGeom::offsetOf(o, out);
      float acc = foldStart(k);
      bool nan = false;
      for (int64_t r = 0; r < runs && !nan; ++r)
        acc = foldRun(k, x + base + SumToGeom::offsetOf(r, red), run, acc, nan);
      y[o] = nan ? std::numeric_limits<float>::quiet_NaN() : acc;
    }
  }

private:
  FoldKind kind;
  std::vector<std::pair<int64_t, int64_t>> out, red; // (size, stride)
  int64_t outputs = 1, runs = 1, run = 1;
  bool lastAxis = false;
};

} // namespace

static KernelOr createReduce(const OpSpec &spec) {
  std::vector<int64_t> kept;
  float scale = 1.0f;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 2, 1, 1, {0}, {0}));
  OASR_RETURN_IF_ERROR(reduceGeom(spec, kept, scale));
  if (std::optional<FoldKind> k = foldKindOf(spec.opType))
    return std::make_unique<ReduceFoldKernel>(spec, kept, *k);
  return std::make_unique<ReduceSumToKernel>(spec, spec.inputs[0].shape, kept,
                                             scale);
}

void registerArithmeticKernels(KernelRegistry &r) {
  for (const NamedOp<BinOp> &op : kBinOps)
    r[op.name] = createBinary;
  r["Sum"] = createSum;
  r["Neg"] = createNeg;
  r["ReduceSumTo"] = createReduceSumTo;
  r["ReduceMean"] = createReduce;
  r["ReduceSum"] = createReduce;
  r["ReduceMax"] = createReduce;
  r["ReduceMin"] = createReduce;
  r["ReduceProd"] = createReduce;
}

} // namespace oasr::rt::cpu
