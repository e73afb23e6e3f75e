//===- ElementwiseKernels.cpp - Hand-written CPU kernels ------------------===//
//
// The kernels that are plain loops (OpenMP-parallel): numpy-broadcast
// arithmetic and its reduction (ReduceSumTo), copies and views, Concat/Split,
// Dropout, Pad, max pooling with indices, global average pooling, Clip,
// softmax cross-entropy and Constant.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

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

namespace {

[[noreturn]] void fatal(const std::string &node, const std::string &op,
                        const std::string &msg) {
  std::fprintf(stderr, "oasr: fatal: node '%s' (%s): %s\n", node.c_str(),
               op.c_str(), msg.c_str());
  std::abort();
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
// Numpy broadcasting
//===----------------------------------------------------------------------===//

enum class BinOp { Add, Sub, Mul, Div, Pow };

template <typename T, BinOp Op> inline T apply(T a, T b) {
  if constexpr (Op == BinOp::Add)
    return a + b;
  else if constexpr (Op == BinOp::Sub)
    return a - b;
  else if constexpr (Op == BinOp::Mul)
    return a * b;
  else if constexpr (Op == BinOp::Div)
    return a / b;
  else if constexpr (std::is_floating_point_v<T>)
    return b == T(2) ? a * a : T(std::pow(a, b));
  else
    return T(std::pow(double(a), double(b)));
}

template <typename T, BinOp Op>
void binaryLoop(const BroadcastPlan &p, const T *a, const T *b, T *y) {
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
        py[i] = apply<T, Op>(pa[i], pb[i]);
    } else if (sa == 1) {
      const T bv = pb[0];
      for (int64_t i = 0; i < inner; ++i)
        py[i] = apply<T, Op>(pa[i], bv);
    } else if (sb == 1) {
      const T av = pa[0];
      for (int64_t i = 0; i < inner; ++i)
        py[i] = apply<T, Op>(av, pb[i]);
    } else {
      const T v = apply<T, Op>(pa[0], pb[0]);
      for (int64_t i = 0; i < inner; ++i)
        py[i] = v;
    }
  }
}

template <typename T>
void binaryDispatch(BinOp op, const BroadcastPlan &p, const void *a,
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
  }
}

void binary(DType t, BinOp op, const BroadcastPlan &p, const void *a,
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

std::unique_ptr<Kernel> createBinary(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 2, 2, 1, 1, error) ||
      !checkBroadcastOperands(spec, error))
    return nullptr;
  BinOp op = spec.opType == "Add"   ? BinOp::Add
             : spec.opType == "Sub" ? BinOp::Sub
             : spec.opType == "Mul" ? BinOp::Mul
             : spec.opType == "Div" ? BinOp::Div
                                    : BinOp::Pow;
  return std::make_unique<BinaryKernel>(spec, op);
}

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

std::unique_ptr<Kernel> createSum(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 1024, 1, 1, error) ||
      !checkBroadcastOperands(spec, error))
    return nullptr;
  if (spec.inputs.size() == 1 &&
      spec.inputs[0].shape != spec.outputs[0].shape) {
    error = nodeError(spec, "a single operand must have the result's shape");
    return nullptr;
  }
  return std::make_unique<SumKernel>(spec);
}

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

std::unique_ptr<Kernel> createNeg(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !checkDType(spec, true, 0, spec.outputs[0].dtype, error))
    return nullptr;
  if (!isFloatOrInt(spec.outputs[0].dtype) ||
      spec.inputs[0].shape != spec.outputs[0].shape) {
    error = nodeError(spec, "expects X and Y of one shape, f32/i64/i32");
    return nullptr;
  }
  return std::make_unique<NegKernel>(spec);
}

//===----------------------------------------------------------------------===//
// ReduceSumTo
//===----------------------------------------------------------------------===//

/// ReduceSumTo: dY -> dX, summing dY over the axes along which dX's shape
/// broadcasts to dY's, times `scale` (ReduceSum/ReduceMean reuse it with
/// the reduced axes kept as 1).
class ReduceSumToKernel final : public CpuKernel {
public:
  ReduceSumToKernel(const OpSpec &spec, const std::vector<int64_t> &ys,
                    std::vector<int64_t> xs, float scale = 1.0f)
      : CpuKernel(spec), scale(scale) {
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
  static int64_t offsetOf(int64_t idx,
                          const std::vector<std::pair<int64_t, int64_t>> &ds) {
    int64_t off = 0;
    for (size_t d = ds.size(); d-- > 0;) {
      off += (idx % ds[d].first) * ds[d].second;
      idx /= ds[d].first;
    }
    return off;
  }

  // Each result element sums `redCount` contiguous runs of `inner` values.
  void reduceInner(const float *dy, float *dx) {
    const int64_t outs = outerKept;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outs; ++o) {
      int64_t base = offsetOf(o, keptDims);
      double acc = 0;
      for (int64_t r = 0; r < redCount; ++r) {
        const float *p = dy + base + offsetOf(r, redDims);
        float part = 0;
        for (int64_t i = 0; i < inner; ++i)
          part += p[i];
        acc += part;
      }
      dx[o] = float(acc * scale);
    }
  }

  // The result keeps dY's inner dimension: accumulate rows, column blocks
  // spread over threads.
  void reduceOuter(const float *dy, float *dx) {
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    const int64_t units = outerKept * blocks;
#pragma omp parallel for schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      int64_t o = u / blocks, c0 = (u % blocks) * kBlock;
      int64_t c1 = std::min(inner, c0 + kBlock);
      float acc[kBlock] = {0};
      int64_t base = offsetOf(o, keptDims) + c0;
      for (int64_t r = 0; r < redCount; ++r) {
        const float *p = dy + base + offsetOf(r, redDims);
        for (int64_t c = 0; c < c1 - c0; ++c)
          acc[c] += p[c];
      }
      for (int64_t c = c0; c < c1; ++c)
        dx[o * inner + c] = acc[c - c0] * scale;
    }
  }

  float scale;
  bool copyOnly = false, lastReduced = false;
  int64_t total = 0, inner = 1, redCount = 1, outerKept = 1;
  std::vector<std::pair<int64_t, int64_t>> keptDims, redDims; // (size, stride)
};

std::unique_ptr<Kernel> createReduceSumTo(const OpSpec &spec,
                                          std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !checkAllF32(spec, {0}, {0}, error))
    return nullptr;
  if (!broadcastsTo(spec.outputs[0].shape, spec.inputs[0].shape)) {
    error = nodeError(spec, "result shape " + shapeStr(spec.outputs[0].shape) +
                                " does not broadcast to the operand's " +
                                shapeStr(spec.inputs[0].shape));
    return nullptr;
  }
  return std::make_unique<ReduceSumToKernel>(spec, spec.inputs[0].shape,
                                             spec.outputs[0].shape);
}

//===----------------------------------------------------------------------===//
// Copies and views
//===----------------------------------------------------------------------===//

/// Reshape/Flatten/Squeeze/Unsqueeze/Identity: the result has the operand's
/// bytes; copies unless the executor aliased the two buffers.
class CopyKernel final : public CpuKernel {
public:
  explicit CopyKernel(const OpSpec &spec)
      : CpuKernel(spec), bytes(spec.outputs[0].bytes()) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    parallelCopy(out[0].data, in[0].data, bytes);
  }

private:
  size_t bytes;
};

std::unique_ptr<Kernel> createCopy(const OpSpec &spec, std::string &error) {
  size_t maxIn = spec.opType == "Flatten" || spec.opType == "Identity" ? 1 : 2;
  if (!checkArity(spec, 1, maxIn, 1, 1, error) || !checkCopyShapes(spec, error))
    return nullptr;
  return std::make_unique<CopyKernel>(spec);
}

//===----------------------------------------------------------------------===//
// Concat / Split
//===----------------------------------------------------------------------===//

bool normAxis(const OpSpec &spec, int64_t rank, int64_t dflt, int64_t &axis,
              std::string &error) {
  axis = spec.attrs.getInt("axis", dflt);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank) {
    error = nodeError(
        spec, "axis " + std::to_string(spec.attrs.getInt("axis", dflt)) +
                  " out of range for rank " + std::to_string(rank));
    return false;
  }
  return true;
}

/// The parts of a Concat (the operands) or a Split (the results): each part
/// contributes `partBytes[i]` per outer index; the whole row is `rowBytes`.
struct Parts {
  int64_t outer = 1;
  std::vector<size_t> partBytes, partOffset;
  size_t rowBytes = 0;
};

bool makeParts(const OpSpec &spec, const TensorDesc &whole,
               const std::vector<TensorDesc> &parts, Parts &p,
               std::string &error) {
  int64_t axis;
  if (!normAxis(spec, int64_t(whole.rank()), 0, axis, error))
    return false;
  int64_t sum = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const TensorDesc &d = parts[i];
    bool ok = d.rank() == whole.rank() && d.dtype == whole.dtype;
    for (size_t k = 0; ok && k < d.rank(); ++k)
      ok = int64_t(k) == axis || d.shape[k] == whole.shape[k];
    if (!ok) {
      error = nodeError(spec, "part " + std::to_string(i) + " " +
                                  shapeStr(d.shape) + " does not fit " +
                                  shapeStr(whole.shape) + " along axis " +
                                  std::to_string(axis));
      return false;
    }
    sum += d.shape[axis];
  }
  if (sum != whole.shape[axis]) {
    error =
        nodeError(spec, "parts sum to " + std::to_string(sum) + " along axis " +
                            std::to_string(axis) + ", expected " +
                            std::to_string(whole.shape[axis]));
    return false;
  }
  for (int64_t k = 0; k < axis; ++k)
    p.outer *= whole.shape[k];
  size_t esz = dtypeSize(whole.dtype);
  for (const TensorDesc &d : parts) {
    size_t b = esz;
    for (size_t k = axis; k < d.rank(); ++k)
      b *= size_t(d.shape[k]);
    p.partOffset.push_back(p.rowBytes);
    p.partBytes.push_back(b);
    p.rowBytes += b;
  }
  return true;
}

class ConcatSplitKernel final : public CpuKernel {
public:
  ConcatSplitKernel(const OpSpec &spec, Parts p, bool split)
      : CpuKernel(spec), p(std::move(p)), split(split) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const int64_t nParts = int64_t(p.partBytes.size());
    const int64_t units = p.outer * nParts;
    char *whole = static_cast<char *>(split ? in[0].data : out[0].data);
#pragma omp parallel for schedule(                                             \
    static) if (units > 1 && p.rowBytes * p.outer > (1 << 16))
    for (int64_t u = 0; u < units; ++u) {
      int64_t o = u / nParts, i = u % nParts;
      char *w = whole + size_t(o) * p.rowBytes + p.partOffset[i];
      char *part = static_cast<char *>(split ? out[i].data : in[i].data) +
                   size_t(o) * p.partBytes[i];
      if (split)
        std::memcpy(part, w, p.partBytes[i]);
      else
        std::memcpy(w, part, p.partBytes[i]);
    }
  }

private:
  Parts p;
  bool split;
};

std::unique_ptr<Kernel> createConcat(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 1 << 16, 1, 1, error))
    return nullptr;
  Parts p;
  if (!makeParts(spec, spec.outputs[0], spec.inputs, p, error))
    return nullptr;
  return std::make_unique<ConcatSplitKernel>(spec, std::move(p), false);
}

std::unique_ptr<Kernel> createSplit(const OpSpec &spec, std::string &error) {
  // The optional `split` operand (opset 13) is not read: the results' shapes
  // already say how the operand is cut.
  if (!checkArity(spec, 1, 2, 1, 1 << 16, error))
    return nullptr;
  Parts p;
  if (!makeParts(spec, spec.inputs[0], spec.outputs, p, error))
    return nullptr;
  return std::make_unique<ConcatSplitKernel>(spec, std::move(p), true);
}

//===----------------------------------------------------------------------===//
// Dropout / DropoutGrad
//===----------------------------------------------------------------------===//

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Dropout: X[, ratio[, training_mode]] -> Y[, mask]. The mask of element i
/// at step s is a pure function of (seed, s, i), so results do not depend on
/// the thread count and runs are reproducible; every run is a new step.
class DropoutKernel final : public CpuKernel {
public:
  explicit DropoutKernel(const OpSpec &spec)
      : CpuKernel(spec), seed(spec.seed), n(spec.inputs[0].numel()),
        defaultRatio(spec.attrs.getFloat("ratio", 0.5)),
        defaultTraining(spec.attrs.getInt("training_mode", 0) != 0) {}

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double ratio = defaultRatio, training = defaultTraining;
    scalarOperand(in, 1, ratio);
    scalarOperand(in, 2, training);
    if (ratio < 0 || ratio > 1)
      fatal(nodeName, op,
            "ratio " + std::to_string(ratio) + " is outside [0, 1]");
    const float *x = in[0].as<float>();
    float *y = out[0].as<float>();
    uint8_t *mask = out.size() > 1 ? out[1].as<uint8_t>() : nullptr;
    const int64_t count = n;
    if (training == 0 || ratio == 0) {
      parallelCopy(y, x, size_t(count) * sizeof(float));
      if (mask)
        std::memset(mask, 1, size_t(count));
      return;
    }
    const uint64_t stepKey = splitmix64(seed ^ splitmix64(step++));
    // keep iff the top 32 random bits >= ratio * 2^32
    const uint64_t threshold = uint64_t(std::ldexp(ratio, 32));
    const float scale = ratio < 1 ? float(1.0 / (1.0 - ratio)) : 0.0f;
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i) {
      bool keep = (splitmix64(stepKey + uint64_t(i)) >> 32) >= threshold;
      y[i] = keep ? x[i] * scale : 0.0f;
      if (mask)
        mask[i] = keep;
    }
  }

  bool randomPosition(uint64_t &position) const override {
    position = step;
    return true;
  }
  void setRandomPosition(uint64_t position) override { step = position; }

private:
  uint64_t seed, step = 0;
  int64_t n;
  double defaultRatio;
  bool defaultTraining;
};

std::unique_ptr<Kernel> createDropout(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 3, 1, 2, error) ||
      !checkAllF32(spec, {0}, {0}, error) ||
      !checkDType(spec, false, 1, DType::Bool, error))
    return nullptr;
  if (spec.outputs[0].shape != spec.inputs[0].shape ||
      (spec.outputs.size() > 1 &&
       spec.outputs[1].shape != spec.inputs[0].shape)) {
    error = nodeError(spec, "Y and mask must have X's shape");
    return nullptr;
  }
  return std::make_unique<DropoutKernel>(spec);
}

/// DropoutGrad: dY, mask[, ratio[, training_mode]] -> dX = dY * mask /
/// (1 - ratio).
class DropoutGradKernel final : public CpuKernel {
public:
  explicit DropoutGradKernel(const OpSpec &spec)
      : CpuKernel(spec), n(spec.inputs[0].numel()),
        defaultRatio(spec.attrs.getFloat("ratio", 0.5)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double ratio = defaultRatio, training = 1;
    scalarOperand(in, 2, ratio);
    scalarOperand(in, 3, training);
    const float *dy = in[0].as<float>();
    const uint8_t *mask = in[1].as<uint8_t>();
    float *dx = out[0].as<float>();
    const int64_t count = n;
    if (training == 0) {
      parallelCopy(dx, dy, size_t(count) * sizeof(float));
      return;
    }
    const float scale = ratio < 1 ? float(1.0 / (1.0 - ratio)) : 0.0f;
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i)
      dx[i] = mask[i] ? dy[i] * scale : 0.0f;
  }

private:
  int64_t n;
  double defaultRatio;
};

std::unique_ptr<Kernel> createDropoutGrad(const OpSpec &spec,
                                          std::string &error) {
  if (!checkArity(spec, 2, 4, 1, 1, error) ||
      !checkAllF32(spec, {0}, {0}, error) ||
      !checkDType(spec, true, 1, DType::Bool, error))
    return nullptr;
  if (spec.inputs[1].shape != spec.inputs[0].shape ||
      spec.outputs[0].shape != spec.inputs[0].shape) {
    error = nodeError(spec, "dY, mask and dX must have one shape");
    return nullptr;
  }
  return std::make_unique<DropoutGradKernel>(spec);
}

//===----------------------------------------------------------------------===//
// Pad / PadGrad
//===----------------------------------------------------------------------===//

/// out[o] = in[o - begin] where inside `in`, else `value` (f32). Negative
/// begins crop.
void padCopy(const float *in, const std::vector<int64_t> &inShape, float *out,
             const std::vector<int64_t> &outShape,
             const std::vector<int64_t> &begin, float value) {
  size_t r = outShape.size();
  if (r == 0) {
    out[0] = in[0];
    return;
  }
  std::vector<int64_t> inStr = rowMajorStrides(inShape);
  int64_t inner = outShape[r - 1], rows = 1;
  for (size_t d = 0; d + 1 < r; ++d)
    rows *= outShape[d];
  const int64_t lastIn = inShape[r - 1], lastBegin = begin[r - 1];
  // Columns [c0, c1) of an output row come from the input row.
  const int64_t c0 = std::clamp<int64_t>(lastBegin, 0, inner);
  const int64_t c1 = std::clamp<int64_t>(lastBegin + lastIn, c0, inner);
#pragma omp parallel for schedule(static) if (rows * inner > 16384)
  for (int64_t row = 0; row < rows; ++row) {
    float *o = out + row * inner;
    int64_t rem = row, inOff = 0;
    bool inside = true;
    for (size_t d = r - 1; d-- > 0;) {
      int64_t idx = rem % outShape[d] - begin[d];
      rem /= outShape[d];
      if (idx < 0 || idx >= inShape[d]) {
        inside = false;
        break;
      }
      inOff += idx * inStr[d];
    }
    if (!inside) {
      std::fill(o, o + inner, value);
      continue;
    }
    std::fill(o, o + c0, value);
    if (c1 > c0)
      std::memcpy(o + c0, in + inOff + (c0 - lastBegin),
                  size_t(c1 - c0) * sizeof(float));
    std::fill(o + c1, o + inner, value);
  }
}

/// Pad {mode = constant}: data[, pads[, constant_value[, axes]]] -> Y.
/// The pads operand is read at run time (host memory).
class PadKernel final : public CpuKernel {
public:
  explicit PadKernel(const OpSpec &spec)
      : CpuKernel(spec), inShape(spec.inputs[0].shape),
        outShape(spec.outputs[0].shape), attrPads(spec.attrs.getInts("pads")),
        attrValue(float(spec.attrs.getFloat("value", 0.0))),
        hasAttrPads(spec.attrs.has("pads")) {}

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    size_t r = inShape.size();
    std::vector<int64_t> pads = attrPads;
    if (!hasAttrPads) {
      if (in.size() < 2 || !in[1].data)
        fatal(nodeName, op, "no pads attribute or operand");
      const int64_t *p = in[1].as<int64_t>();
      pads.assign(p, p + in[1].numel());
    }
    std::vector<int64_t> axes(r);
    for (size_t i = 0; i < r; ++i)
      axes[i] = int64_t(i);
    if (in.size() > 3 && in[3].data) {
      const int64_t *a = in[3].as<int64_t>();
      axes.assign(a, a + in[3].numel());
      for (int64_t &ax : axes)
        if (ax < 0)
          ax += int64_t(r);
    }
    if (pads.size() != 2 * axes.size())
      fatal(nodeName, op,
            "pads has " + std::to_string(pads.size()) + " values for " +
                std::to_string(axes.size()) + " axes");
    std::vector<int64_t> begin(r, 0), end(r, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] < 0 || axes[i] >= int64_t(r))
        fatal(nodeName, op, "axis out of range");
      begin[axes[i]] = pads[i];
      end[axes[i]] = pads[i + axes.size()];
    }
    for (size_t d = 0; d < r; ++d)
      if (inShape[d] + begin[d] + end[d] != outShape[d])
        fatal(nodeName, op,
              "pads do not produce the result shape " + shapeStr(outShape));
    double v = attrValue;
    scalarOperand(in, 2, v);
    padCopy(in[0].as<float>(), inShape, out[0].as<float>(), outShape, begin,
            float(v));
  }

private:
  std::vector<int64_t> inShape, outShape, attrPads;
  float attrValue;
  bool hasAttrPads;
};

std::unique_ptr<Kernel> createPad(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 4, 1, 1, error) ||
      !checkAllF32(spec, {0, 2}, {0}, error))
    return nullptr;
  std::string mode = spec.attrs.getString("mode", "constant");
  if (mode != "constant") {
    error = nodeError(spec, "mode '" + mode +
                                "' is not supported (only "
                                "'constant')");
    return nullptr;
  }
  if (spec.inputs[0].rank() != spec.outputs[0].rank()) {
    error = nodeError(spec, "operand and result ranks differ");
    return nullptr;
  }
  if (!spec.attrs.has("pads") &&
      (spec.inputs.size() < 2 || spec.inputs[1].dtype != DType::I64)) {
    error = nodeError(spec, "needs a pads attribute or an i64 pads operand");
    return nullptr;
  }
  return std::make_unique<PadKernel>(spec);
}

/// PadGrad {pads}: dY -> dX, the slice of dY the padded input came from.
class PadGradKernel final : public CpuKernel {
public:
  PadGradKernel(const OpSpec &spec, std::vector<int64_t> begin)
      : CpuKernel(spec), inShape(spec.inputs[0].shape),
        outShape(spec.outputs[0].shape), begin(std::move(begin)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    padCopy(in[0].as<float>(), inShape, out[0].as<float>(), outShape, begin,
            0.0f);
  }

private:
  std::vector<int64_t> inShape, outShape, begin;
};

std::unique_ptr<Kernel> createPadGrad(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !checkAllF32(spec, {0}, {0}, error))
    return nullptr;
  std::vector<int64_t> begin;
  if (!padGradBegin(spec, SIZE_MAX, begin, error))
    return nullptr;
  return std::make_unique<PadGradKernel>(spec, begin);
}

//===----------------------------------------------------------------------===//
// MaxPool / MaxPoolGrad
//===----------------------------------------------------------------------===//

/// MaxPool: X -> Y[, Indices]; Indices are flat offsets into each (n, c)
/// plane of X (PyTorch's convention).
class MaxPoolKernel final : public CpuKernel {
public:
  MaxPoolKernel(const OpSpec &spec, const Pool2D &g) : CpuKernel(spec), g(g) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>();
    float *y = out[0].as<float>();
    int64_t *ind = out.size() > 1 ? out[1].as<int64_t>() : nullptr;
    const Pool2D p = g;
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < p.planes; ++pl) {
      const float *xp = x + pl * p.ih * p.iw;
      float *yp = y + pl * p.oh * p.ow;
      int64_t *ip = ind ? ind + pl * p.oh * p.ow : nullptr;
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          float best;
          int64_t bestIdx;
          maxPoolAt(p, xp, oy, ox, best, bestIdx);
          yp[oy * p.ow + ox] = best;
          if (ip)
            ip[oy * p.ow + ox] = bestIdx;
        }
      }
    }
  }

private:
  Pool2D g;
};

std::unique_ptr<Kernel> createMaxPool(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 2, error) ||
      !checkAllF32(spec, {0}, {0}, error) ||
      !checkDType(spec, false, 1, DType::I64, error))
    return nullptr;
  Pool2D g;
  if (!pool2DGeom(spec, spec.inputs[0], spec.outputs[0], g, error))
    return nullptr;
  if (spec.outputs.size() > 1 &&
      spec.outputs[1].shape != spec.outputs[0].shape) {
    error = nodeError(spec, "Indices must have Y's shape");
    return nullptr;
  }
  return std::make_unique<MaxPoolKernel>(spec, g);
}

/// MaxPoolGrad: dY, Indices -> dX (scatter-add into each plane).
class MaxPoolGradKernel final : public CpuKernel {
public:
  MaxPoolGradKernel(const OpSpec &spec, int64_t planes, int64_t inPlane,
                    int64_t outPlane)
      : CpuKernel(spec), planes(planes), inPlane(inPlane), outPlane(outPlane) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *dy = in[0].as<float>();
    const int64_t *ind = in[1].as<int64_t>();
    float *dx = out[0].as<float>();
    const int64_t np = planes, ip = inPlane, opl = outPlane;
    bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad)
    for (int64_t p = 0; p < np; ++p) {
      float *dxp = dx + p * ip;
      std::fill(dxp, dxp + ip, 0.0f);
      const float *dyp = dy + p * opl;
      const int64_t *idx = ind + p * opl;
      for (int64_t i = 0; i < opl; ++i) {
        if (idx[i] < 0 || idx[i] >= ip) {
          bad = true;
          continue;
        }
        dxp[idx[i]] += dyp[i];
      }
    }
    if (bad)
      fatal(nodeName, op, "an index is outside its (n, c) plane");
  }

private:
  int64_t planes, inPlane, outPlane;
};

std::unique_ptr<Kernel> createMaxPoolGrad(const OpSpec &spec,
                                          std::string &error) {
  if (!checkArity(spec, 2, 2, 1, 1, error) ||
      !checkAllF32(spec, {0}, {0}, error))
    return nullptr;
  int64_t planes, inPlane, outPlane;
  if (!maxPoolGradGeom(spec, planes, inPlane, outPlane, error))
    return nullptr;
  return std::make_unique<MaxPoolGradKernel>(spec, planes, inPlane, outPlane);
}

//===----------------------------------------------------------------------===//
// GlobalAveragePool / GlobalAveragePoolGrad
//===----------------------------------------------------------------------===//

class GlobalAvgPoolKernel final : public CpuKernel {
public:
  GlobalAvgPoolKernel(const OpSpec &spec, int64_t planes, int64_t size,
                      bool grad)
      : CpuKernel(spec), planes(planes), size(size), grad(grad) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>();
    float *y = out[0].as<float>();
    const int64_t np = planes, sz = size;
    const float inv = 1.0f / float(sz);
    if (grad) {
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < np; ++p) {
        float v = x[p] * inv;
        std::fill(y + p * sz, y + (p + 1) * sz, v);
      }
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < np; ++p) {
      const float *xp = x + p * sz;
      float acc = 0;
      for (int64_t i = 0; i < sz; ++i)
        acc += xp[i];
      y[p] = acc * inv;
    }
  }

private:
  int64_t planes, size;
  bool grad;
};

std::unique_ptr<Kernel> createGlobalAvgPool(const OpSpec &spec,
                                            std::string &error) {
  bool grad = spec.opType == "GlobalAveragePoolGrad";
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !checkAllF32(spec, {0}, {0}, error))
    return nullptr;
  int64_t planes, size;
  if (!globalPoolGeom(spec, grad, SIZE_MAX, planes, size, error))
    return nullptr;
  return std::make_unique<GlobalAvgPoolKernel>(spec, planes, size, grad);
}

//===----------------------------------------------------------------------===//
// Clip / ClipGrad
//===----------------------------------------------------------------------===//

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
    const int64_t count = n;
    if (grad) {
      const float *dy = in[0].as<float>(), *x = in[1].as<float>();
#pragma omp parallel for schedule(static) if (count > 16384)
      for (int64_t i = 0; i < count; ++i)
        y[i] = (x[i] >= flo && x[i] <= fhi) ? dy[i] : 0.0f;
      return;
    }
    const float *x = in[0].as<float>();
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i)
      y[i] = std::min(std::max(x[i], flo), fhi);
  }

private:
  bool grad;
  int64_t n;
  double attrMin, attrMax;
};

std::unique_ptr<Kernel> createClip(const OpSpec &spec, std::string &error) {
  bool grad = spec.opType == "ClipGrad";
  if (!checkArity(spec, grad ? 2 : 1, grad ? 4 : 3, 1, 1, error) ||
      !checkAllF32(spec, {0, 1, 2, 3}, {0}, error))
    return nullptr;
  for (size_t i = 0; i < (grad ? 2u : 1u); ++i)
    if (spec.inputs[i].shape != spec.outputs[0].shape) {
      error = nodeError(spec, "operands and result must have one shape");
      return nullptr;
    }
  return std::make_unique<ClipKernel>(spec, grad);
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyLoss / SoftmaxCrossEntropyLossGrad
//===----------------------------------------------------------------------===//

inline int64_t labelAt(const TensorRef &t, int64_t i) {
  return t.desc.dtype == DType::I64 ? t.as<int64_t>()[i]
                                    : int64_t(t.as<int32_t>()[i]);
}

/// scores, labels -> loss[, log_prob].
class SceKernel final : public CpuKernel {
public:
  SceKernel(const OpSpec &spec, const SceGeom &g, bool wantLogProb)
      : CpuKernel(spec), g(g) {
    if (!wantLogProb)
      scratch.resize(size_t(g.n * g.c * g.d));
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>();
    float *lp = scratch.empty() ? out[1].as<float>() : scratch.data();
    float *loss = out[0].as<float>();
    const SceGeom p = g;
    const int64_t rows = p.n * p.d;
    std::vector<float> rowLoss(static_cast<size_t>(rows));
    int64_t badLabel = -1;
    int64_t count = 0;
#pragma omp parallel for schedule(static) reduction(+ : count) reduction(max : badLabel)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t ni = r / p.d, di = r % p.d;
      const float *xr = x + ni * p.c * p.d + di;
      float *lr = lp + ni * p.c * p.d + di;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < p.c; ++c)
        mx = std::max(mx, xr[c * p.d]);
      double s = 0;
      for (int64_t c = 0; c < p.c; ++c)
        s += std::exp(double(xr[c * p.d] - mx));
      float lse = mx + float(std::log(s));
      for (int64_t c = 0; c < p.c; ++c)
        lr[c * p.d] = xr[c * p.d] - lse;
      int64_t lab = labelAt(in[1], r);
      if (p.hasIgnore && lab == p.ignoreIndex) {
        rowLoss[r] = 0;
        continue;
      }
      if (lab < 0 || lab >= p.c) {
        badLabel = std::max(badLabel, r);
        rowLoss[r] = 0;
        continue;
      }
      rowLoss[r] = -lr[lab * p.d];
      ++count;
    }
    if (badLabel >= 0)
      fatal(nodeName, op,
            "label " + std::to_string(labelAt(in[1], badLabel)) + " at " +
                std::to_string(badLabel) + " is outside [0, " +
                std::to_string(p.c) + ")");
    if (p.reduction == SceReduction::None) {
      std::copy(rowLoss.begin(), rowLoss.end(), loss);
      return;
    }
    double total = 0;
    for (float l : rowLoss)
      total += l;
    if (p.reduction == SceReduction::Mean)
      total = count ? total / double(count) : 0.0;
    loss[0] = float(total);
  }

private:
  SceGeom g;
  std::vector<float> scratch;
};

std::unique_ptr<Kernel> createSce(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 2, 2, 1, 2, error) ||
      !checkAllF32(spec, {0}, {0, 1}, error))
    return nullptr;
  SceGeom g;
  if (!sceGeom(spec, /*grad=*/false, g, error))
    return nullptr;
  return std::make_unique<SceKernel>(spec, g, spec.outputs.size() > 1);
}

/// dLoss, log_prob, labels -> dScores = (softmax - onehot) * dLoss / count.
class SceGradKernel final : public CpuKernel {
public:
  SceGradKernel(const OpSpec &spec, const SceGeom &g) : CpuKernel(spec), g(g) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *dl = in[0].as<float>(), *lp = in[1].as<float>();
    float *dx = out[0].as<float>();
    const SceGeom p = g;
    const int64_t rows = p.n * p.d;
    int64_t count = 0;
    for (int64_t r = 0; r < rows; ++r)
      count += !(p.hasIgnore && labelAt(in[2], r) == p.ignoreIndex);
    float scale = p.reduction == SceReduction::Mean
                      ? (count ? dl[0] / float(count) : 0.0f)
                      : dl[0];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t ni = r / p.d, di = r % p.d;
      const float *lr = lp + ni * p.c * p.d + di;
      float *dr = dx + ni * p.c * p.d + di;
      int64_t lab = labelAt(in[2], r);
      if (p.hasIgnore && lab == p.ignoreIndex) {
        for (int64_t c = 0; c < p.c; ++c)
          dr[c * p.d] = 0;
        continue;
      }
      float s = p.reduction == SceReduction::None ? dl[r] : scale;
      for (int64_t c = 0; c < p.c; ++c)
        dr[c * p.d] = (std::exp(lr[c * p.d]) - (c == lab ? 1.0f : 0.0f)) * s;
    }
  }

private:
  SceGeom g;
};

std::unique_ptr<Kernel> createSceGrad(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 3, 3, 1, 1, error) ||
      !checkAllF32(spec, {0, 1}, {0}, error))
    return nullptr;
  SceGeom g;
  if (!sceGeom(spec, /*grad=*/true, g, error))
    return nullptr;
  return std::make_unique<SceGradKernel>(spec, g);
}

//===----------------------------------------------------------------------===//
// Constant
//===----------------------------------------------------------------------===//

/// Constant: fills its result from a flat attribute (see Kernel.h).
class ConstantKernel final : public CpuKernel {
public:
  ConstantKernel(const OpSpec &spec, std::vector<char> bytes)
      : CpuKernel(spec), bytes(std::move(bytes)) {}
  void compute(const std::vector<TensorRef> &,
               const std::vector<TensorRef> &out) override {
    std::memcpy(out[0].data, bytes.data(), bytes.size());
  }

private:
  std::vector<char> bytes;
};

std::unique_ptr<Kernel> createConstant(const OpSpec &spec, std::string &error) {
  std::vector<char> bytes;
  if (!checkArity(spec, 0, 0, 1, 1, error) ||
      !constantBytes(spec, bytes, error))
    return nullptr;
  return std::make_unique<ConstantKernel>(spec, std::move(bytes));
}

//===----------------------------------------------------------------------===//
// ReduceMean / ReduceSum
//===----------------------------------------------------------------------===//

/// ReduceMean / ReduceSum {axes, keepdims}: axes from the attribute, else
/// (keepdims = 1) from where the result has 1s, else all axes.
std::unique_ptr<Kernel> createReduce(const OpSpec &spec, std::string &error) {
  std::vector<int64_t> kept;
  float scale = 1.0f;
  if (!checkArity(spec, 1, 2, 1, 1, error) ||
      !checkAllF32(spec, {0}, {0}, error) ||
      !reduceGeom(spec, kept, scale, error))
    return nullptr;
  return std::make_unique<ReduceSumToKernel>(spec, spec.inputs[0].shape, kept,
                                             scale);
}

//===----------------------------------------------------------------------===//
// Shape / Cast / Expand
//===----------------------------------------------------------------------===//

/// Shape {start, end}: the operand's static shape.
std::unique_ptr<Kernel> createShape(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !checkDType(spec, false, 0, DType::I64, error))
    return nullptr;
  const auto &xs = spec.inputs[0].shape;
  int64_t r = int64_t(xs.size());
  int64_t b = spec.attrs.getInt("start", 0), e = spec.attrs.getInt("end", r);
  b = std::clamp<int64_t>(b < 0 ? b + r : b, 0, r);
  e = std::clamp<int64_t>(e < 0 ? e + r : e, b, r);
  if (spec.outputs[0].numel() != e - b) {
    error = nodeError(spec, "result must have " + std::to_string(e - b) +
                                " elements");
    return nullptr;
  }
  std::vector<double> dims(xs.begin() + b, xs.begin() + e);
  OpSpec c = spec;
  c.inputs.clear();
  c.attrs = AttrMap();
  c.attrs.set("value", dims);
  return createConstant(c, error);
}

template <typename From, typename To>
void castLoop(const void *src, void *dst, int64_t n) {
  const From *s = static_cast<const From *>(src);
  To *d = static_cast<To *>(dst);
#pragma omp parallel for schedule(static) if (n > 16384)
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, uint8_t>)
      d[i] = s[i] != From(0);
    else
      d[i] = To(s[i]);
  }
}

template <typename From>
void castFrom(DType to, const void *src, void *dst, int64_t n) {
  switch (to) {
  case DType::F32:
    return castLoop<From, float>(src, dst, n);
  case DType::I64:
    return castLoop<From, int64_t>(src, dst, n);
  case DType::I32:
    return castLoop<From, int32_t>(src, dst, n);
  case DType::Bool:
    return castLoop<From, uint8_t>(src, dst, n);
  default:
    return;
  }
}

/// Cast {to}: between f32, i64, i32 and bool (the result's type says which).
class CastKernel final : public CpuKernel {
public:
  explicit CastKernel(const OpSpec &spec)
      : CpuKernel(spec), from(spec.inputs[0].dtype), to(spec.outputs[0].dtype),
        n(spec.outputs[0].numel()) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    if (from == to)
      return parallelCopy(out[0].data, in[0].data, out[0].bytes());
    switch (from) {
    case DType::F32:
      return castFrom<float>(to, in[0].data, out[0].data, n);
    case DType::I64:
      return castFrom<int64_t>(to, in[0].data, out[0].data, n);
    case DType::I32:
      return castFrom<int32_t>(to, in[0].data, out[0].data, n);
    case DType::Bool:
      return castFrom<uint8_t>(to, in[0].data, out[0].data, n);
    default:
      return;
    }
  }

private:
  DType from, to;
  int64_t n;
};

std::unique_ptr<Kernel> createCast(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error))
    return nullptr;
  for (DType t : {spec.inputs[0].dtype, spec.outputs[0].dtype})
    if (t == DType::F16) {
      error = nodeError(spec, "f16 casts are not supported");
      return nullptr;
    }
  if (spec.inputs[0].shape != spec.outputs[0].shape) {
    error = nodeError(spec, "operand and result must have one shape");
    return nullptr;
  }
  return std::make_unique<CastKernel>(spec);
}

/// Expand: the operand broadcast to the result's shape (the shape operand is
/// not read).
class ExpandKernel final : public CpuKernel {
public:
  explicit ExpandKernel(const OpSpec &spec)
      : CpuKernel(spec), esize(dtypeSize(spec.outputs[0].dtype)),
        plan(makePlan({spec.inputs[0].shape}, spec.outputs[0].shape)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const char *x = static_cast<const char *>(in[0].data);
    char *y = static_cast<char *>(out[0].data);
    const int64_t rows = plan.rows(), inner = plan.inner();
    const bool contiguous = plan.strides[0].back() == 1;
    const size_t es = esize;
#pragma omp parallel for schedule(static) if (rows * inner > 16384)
    for (int64_t row = 0; row < rows; ++row) {
      int64_t off;
      plan.rowOffsets(row, &off);
      char *dst = y + size_t(row * inner) * es;
      const char *src = x + size_t(off) * es;
      if (contiguous) {
        std::memcpy(dst, src, size_t(inner) * es);
        continue;
      }
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(dst + size_t(i) * es, src, es);
    }
  }

private:
  size_t esize;
  BroadcastPlan plan;
};

std::unique_ptr<Kernel> createExpand(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 2, 1, 1, error) ||
      !checkDType(spec, false, 0, spec.inputs[0].dtype, error))
    return nullptr;
  if (!broadcastsTo(spec.inputs[0].shape, spec.outputs[0].shape)) {
    error = nodeError(spec, "operand " + shapeStr(spec.inputs[0].shape) +
                                " does not broadcast to " +
                                shapeStr(spec.outputs[0].shape));
    return nullptr;
  }
  return std::make_unique<ExpandKernel>(spec);
}

//===----------------------------------------------------------------------===//
// Gather / GatherGrad
//===----------------------------------------------------------------------===//

/// data [outer, axisDim, inner] gathered along the middle dimension.
struct GatherGeom {
  int64_t outer = 1, axisDim = 1, inner = 1, numIdx = 1;
};

bool gatherGeom(const OpSpec &spec, const TensorDesc &data,
                const TensorDesc &idx, const TensorDesc &y, GatherGeom &g,
                std::string &error) {
  int64_t axis;
  if (!normAxis(spec, int64_t(data.rank()), 0, axis, error))
    return false;
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32) {
    error = nodeError(spec, "indices must be i64 or i32");
    return false;
  }
  std::vector<int64_t> want(data.shape.begin(), data.shape.begin() + axis);
  want.insert(want.end(), idx.shape.begin(), idx.shape.end());
  want.insert(want.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (y.shape != want || y.dtype != data.dtype) {
    error = nodeError(spec, "gathered shape " + shapeStr(y.shape) +
                                " should be " + shapeStr(want));
    return false;
  }
  for (int64_t k = 0; k < axis; ++k)
    g.outer *= data.shape[k];
  g.axisDim = data.shape[axis];
  for (size_t k = axis + 1; k < data.rank(); ++k)
    g.inner *= data.shape[k];
  g.numIdx = idx.numel();
  return true;
}

/// Gather {axis}: data, indices -> Y (negative indices count from the end).
class GatherKernel final : public CpuKernel {
public:
  GatherKernel(const OpSpec &spec, const GatherGeom &g, bool grad)
      : CpuKernel(spec), g(g), grad(grad),
        esize(dtypeSize(grad ? spec.outputs[0].dtype : spec.inputs[0].dtype)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const TensorRef &idx = in[1];
    const GatherGeom p = g;
    // Resolve indices once.
    std::vector<int64_t> ix(size_t(p.numIdx));
    for (int64_t i = 0; i < p.numIdx; ++i) {
      int64_t v = labelAt(idx, i);
      if (v < 0)
        v += p.axisDim;
      if (v < 0 || v >= p.axisDim)
        fatal(nodeName, op,
              "index " + std::to_string(labelAt(idx, i)) + " is outside [0, " +
                  std::to_string(p.axisDim) + ")");
      ix[size_t(i)] = v;
    }
    if (!grad) {
      const char *x = static_cast<const char *>(in[0].data);
      char *y = static_cast<char *>(out[0].data);
      const size_t rowBytes = size_t(p.inner) * esize;
      const int64_t units = p.outer * p.numIdx;
#pragma omp parallel for schedule(static) if (units * p.inner > 16384)
      for (int64_t u = 0; u < units; ++u) {
        int64_t o = u / p.numIdx, i = u % p.numIdx;
        std::memcpy(y + size_t(u) * rowBytes,
                    x + size_t(o * p.axisDim + ix[size_t(i)]) * rowBytes,
                    rowBytes);
      }
      return;
    }
    // GatherGrad: shape, indices, dY -> dX (zero, then scatter-add); each
    // thread owns whole (outer, column block) slices so no two write alike.
    const float *dy = in[2].as<float>();
    float *dx = out[0].as<float>();
    std::memset(dx, 0, out[0].bytes());
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (p.inner + kBlock - 1) / kBlock;
    const int64_t units = p.outer * blocks;
#pragma omp parallel for schedule(static) if (units > 1)
    for (int64_t u = 0; u < units; ++u) {
      int64_t o = u / blocks, c0 = (u % blocks) * kBlock;
      int64_t c1 = std::min(p.inner, c0 + kBlock);
      for (int64_t i = 0; i < p.numIdx; ++i) {
        const float *src = dy + (o * p.numIdx + i) * p.inner;
        float *dst = dx + (o * p.axisDim + ix[size_t(i)]) * p.inner;
        for (int64_t c = c0; c < c1; ++c)
          dst[c] += src[c];
      }
    }
  }

private:
  GatherGeom g;
  bool grad;
  size_t esize;
};

std::unique_ptr<Kernel> createGather(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 2, 2, 1, 1, error))
    return nullptr;
  GatherGeom g;
  if (!gatherGeom(spec, spec.inputs[0], spec.inputs[1], spec.outputs[0], g,
                  error))
    return nullptr;
  return std::make_unique<GatherKernel>(spec, g, false);
}

std::unique_ptr<Kernel> createGatherGrad(const OpSpec &spec,
                                         std::string &error) {
  if (!checkArity(spec, 3, 3, 1, 1, error) ||
      !checkAllF32(spec, {2}, {0}, error))
    return nullptr;
  GatherGeom g;
  if (!gatherGeom(spec, spec.outputs[0], spec.inputs[1], spec.inputs[2], g,
                  error))
    return nullptr;
  return std::make_unique<GatherKernel>(spec, g, true);
}

//===----------------------------------------------------------------------===//
// Slice / SliceGrad
//===----------------------------------------------------------------------===//

/// out[i] = in[start + i * step] per dimension (row-major, any element size);
/// `scatter` runs the other way (dX[start + i * step] = dY[i], dX zeroed).
void stridedCopy(const char *in, const std::vector<int64_t> &inShape, char *out,
                 const std::vector<int64_t> &outShape,
                 const std::vector<int64_t> &start,
                 const std::vector<int64_t> &step, size_t es, bool scatter) {
  size_t r = outShape.size();
  std::vector<int64_t> inStr = rowMajorStrides(inShape);
  int64_t inner = r ? outShape[r - 1] : 1, rows = 1;
  for (size_t d = 0; d + 1 < r; ++d)
    rows *= outShape[d];
  const int64_t lastStart = r ? start[r - 1] : 0,
                lastStep = r ? step[r - 1] : 1;
#pragma omp parallel for schedule(static) if (rows * inner > 16384)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rem = row, off = lastStart;
    for (size_t d = r - 1; d-- > 0;) {
      off += (start[d] + (rem % outShape[d]) * step[d]) * inStr[d];
      rem /= outShape[d];
    }
    char *o = out + size_t(row * inner) * es;
    if (lastStep == 1) {
      if (scatter)
        std::memcpy(const_cast<char *>(in) + size_t(off) * es, o,
                    size_t(inner) * es);
      else
        std::memcpy(o, in + size_t(off) * es, size_t(inner) * es);
      continue;
    }
    for (int64_t i = 0; i < inner; ++i) {
      char *p = const_cast<char *>(in) + size_t(off + i * lastStep) * es;
      if (scatter)
        std::memcpy(p, o + size_t(i) * es, es);
      else
        std::memcpy(o + size_t(i) * es, p, es);
    }
  }
}

/// Per-dimension start/step of a slice, from ONNX starts/ends/axes/steps
/// (clamped as ONNX says); checks they give `outShape`.
bool resolveSlice(const std::vector<int64_t> &inShape,
                  const std::vector<int64_t> &outShape,
                  const std::vector<int64_t> &starts,
                  const std::vector<int64_t> &ends, std::vector<int64_t> axes,
                  std::vector<int64_t> steps, std::vector<int64_t> &start,
                  std::vector<int64_t> &step, std::string &why) {
  size_t r = inShape.size();
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    why = "starts, ends, axes and steps differ in length";
    return false;
  }
  start.assign(r, 0);
  step.assign(r, 1);
  std::vector<int64_t> size = inShape;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + int64_t(r) : axes[i];
    if (a < 0 || a >= int64_t(r) || steps[i] == 0) {
      why = "bad axis or zero step";
      return false;
    }
    int64_t dim = inShape[a], s = starts[i], e = ends[i], st = steps[i];
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      size[a] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      size[a] = s > e ? (s - e - st - 1) / -st : 0;
    }
    start[a] = s;
    step[a] = st;
  }
  if (size != outShape) {
    why = "the slice " + shapeStr(size) + " is not the result " +
          shapeStr(outShape);
    return false;
  }
  return true;
}

std::vector<int64_t> intsOperand(const std::vector<TensorRef> &in, size_t i) {
  std::vector<int64_t> v;
  if (i >= in.size() || !in[i].data)
    return v;
  for (int64_t k = 0; k < in[i].numel(); ++k)
    v.push_back(labelAt(in[i], k));
  return v;
}

/// Slice: data, starts, ends[, axes[, steps]] (read at run time) or the
/// opset-1 attributes -> Y.
class SliceKernel final : public CpuKernel {
public:
  explicit SliceKernel(const OpSpec &spec)
      : CpuKernel(spec), inShape(spec.inputs[0].shape),
        outShape(spec.outputs[0].shape), esize(dtypeSize(spec.inputs[0].dtype)),
        attrs(spec.attrs) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    std::vector<int64_t> starts, ends, axes, steps;
    if (in.size() >= 3) {
      starts = intsOperand(in, 1);
      ends = intsOperand(in, 2);
      axes = intsOperand(in, 3);
      steps = intsOperand(in, 4);
    } else {
      starts = attrs.getInts("starts");
      ends = attrs.getInts("ends");
      axes = attrs.getInts("axes");
    }
    std::vector<int64_t> start, step;
    std::string why;
    if (!resolveSlice(inShape, outShape, starts, ends, axes, steps, start, step,
                      why))
      fatal(nodeName, op, why);
    stridedCopy(static_cast<const char *>(in[0].data), inShape,
                static_cast<char *>(out[0].data), outShape, start, step, esize,
                false);
  }

private:
  std::vector<int64_t> inShape, outShape;
  size_t esize;
  AttrMap attrs;
};

std::unique_ptr<Kernel> createSlice(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 1, 5, 1, 1, error) ||
      !checkDType(spec, false, 0, spec.inputs[0].dtype, error))
    return nullptr;
  if (spec.inputs.size() == 2 ||
      spec.inputs[0].rank() != spec.outputs[0].rank()) {
    error = nodeError(spec, "expects data, starts, ends[, axes[, steps]] "
                            "and a result of the data's rank");
    return nullptr;
  }
  return std::make_unique<SliceKernel>(spec);
}

/// SliceGrad {starts, ends, axes, steps}: dY -> dX (zero outside the slice).
class SliceGradKernel final : public CpuKernel {
public:
  SliceGradKernel(const OpSpec &spec, std::vector<int64_t> start,
                  std::vector<int64_t> step)
      : CpuKernel(spec), dxShape(spec.outputs[0].shape),
        dyShape(spec.inputs[0].shape), start(std::move(start)),
        step(std::move(step)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    std::memset(out[0].data, 0, out[0].bytes());
    stridedCopy(static_cast<const char *>(out[0].data), dxShape,
                static_cast<char *>(in[0].data), dyShape, start, step,
                sizeof(float), true);
  }

private:
  std::vector<int64_t> dxShape, dyShape, start, step;
};

std::unique_ptr<Kernel> createSliceGrad(const OpSpec &spec,
                                        std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !checkAllF32(spec, {0}, {0}, error))
    return nullptr;
  std::vector<int64_t> start, step;
  std::string why;
  if (!resolveSlice(spec.outputs[0].shape, spec.inputs[0].shape,
                    spec.attrs.getInts("starts"), spec.attrs.getInts("ends"),
                    spec.attrs.getInts("axes"), spec.attrs.getInts("steps"),
                    start, step, why)) {
    error = nodeError(spec, why);
    return nullptr;
  }
  return std::make_unique<SliceGradKernel>(spec, start, step);
}

//===----------------------------------------------------------------------===//
// LayerNormalization / LayerNormalizationGrad
//===----------------------------------------------------------------------===//

/// X viewed as [rows, cols]: normalized over the dims from `axis` on.
struct LnGeom {
  int64_t rows = 1, cols = 1;
  float eps;
};

bool lnGeom(const OpSpec &spec, const TensorDesc &x, const TensorDesc &scale,
            LnGeom &g, std::string &error) {
  int64_t axis;
  if (!normAxis(spec, int64_t(x.rank()), -1, axis, error))
    return false;
  for (int64_t k = 0; k < axis; ++k)
    g.rows *= x.shape[k];
  for (size_t k = axis; k < x.rank(); ++k)
    g.cols *= x.shape[k];
  g.eps = float(spec.attrs.getFloat("epsilon", 1e-5));
  if (scale.numel() != g.cols) {
    error =
        nodeError(spec, "Scale has " + std::to_string(scale.numel()) +
                            " elements, expected " + std::to_string(g.cols));
    return false;
  }
  return true;
}

/// LayerNormalization: X, Scale[, B] -> Y[, Mean[, InvStdDev]].
class LayerNormKernel final : public CpuKernel {
public:
  LayerNormKernel(const OpSpec &spec, const LnGeom &g)
      : CpuKernel(spec), g(g) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>(), *sc = in[1].as<float>();
    const float *b = in.size() > 2 && in[2].data ? in[2].as<float>() : nullptr;
    float *y = out[0].as<float>();
    float *meanOut = out.size() > 1 ? out[1].as<float>() : nullptr;
    float *invOut = out.size() > 2 ? out[2].as<float>() : nullptr;
    const LnGeom p = g;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < p.rows; ++r) {
      const float *xr = x + r * p.cols;
      float *yr = y + r * p.cols;
      double s = 0;
      for (int64_t c = 0; c < p.cols; ++c)
        s += xr[c];
      const float mean = float(s / double(p.cols));
      double v = 0;
      for (int64_t c = 0; c < p.cols; ++c) {
        double d = double(xr[c]) - mean;
        v += d * d;
      }
      const float inv = float(1.0 / std::sqrt(v / double(p.cols) + p.eps));
      for (int64_t c = 0; c < p.cols; ++c)
        yr[c] = (xr[c] - mean) * inv * sc[c] + (b ? b[c] : 0.0f);
      if (meanOut)
        meanOut[r] = mean;
      if (invOut)
        invOut[r] = inv;
    }
  }

private:
  LnGeom g;
};

std::unique_ptr<Kernel> createLayerNorm(const OpSpec &spec,
                                        std::string &error) {
  if (!checkArity(spec, 2, 3, 1, 3, error) ||
      !checkAllF32(spec, {0, 1, 2}, {0, 1, 2}, error))
    return nullptr;
  LnGeom g;
  if (!lnGeom(spec, spec.inputs[0], spec.inputs[1], g, error))
    return nullptr;
  if ((spec.inputs.size() > 2 && spec.inputs[2].numel() != g.cols) ||
      spec.outputs[0].shape != spec.inputs[0].shape ||
      (spec.outputs.size() > 1 && spec.outputs[1].numel() != g.rows) ||
      (spec.outputs.size() > 2 && spec.outputs[2].numel() != g.rows)) {
    error = nodeError(spec, "B, Y, Mean or InvStdDev has the wrong size");
    return nullptr;
  }
  return std::make_unique<LayerNormKernel>(spec, g);
}

/// LayerNormalizationGrad: dY, X, Scale, Mean, InvStdDev -> dX, dScale[, dB].
class LayerNormGradKernel final : public CpuKernel {
public:
  LayerNormGradKernel(const OpSpec &spec, const LnGeom &g)
      : CpuKernel(spec), g(g) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *dy = in[0].as<float>(), *x = in[1].as<float>();
    const float *sc = in[2].as<float>(), *mean = in[3].as<float>();
    const float *inv = in[4].as<float>();
    float *dx = out[0].as<float>();
    float *ds = out.size() > 1 ? out[1].as<float>() : nullptr;
    float *db = out.size() > 2 ? out[2].as<float>() : nullptr;
    const LnGeom p = g;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < p.rows; ++r) {
      const float *xr = x + r * p.cols, *gr = dy + r * p.cols;
      float *dr = dx + r * p.cols;
      const float m = mean[r], iv = inv[r];
      double sg = 0, sgx = 0;
      for (int64_t c = 0; c < p.cols; ++c) {
        float gs = gr[c] * sc[c];
        sg += gs;
        sgx += double(gs) * (xr[c] - m) * iv;
      }
      const float mg = float(sg / double(p.cols));
      const float mgx = float(sgx / double(p.cols));
      for (int64_t c = 0; c < p.cols; ++c)
        dr[c] = iv * (gr[c] * sc[c] - mg - (xr[c] - m) * iv * mgx);
    }
    if (!ds && !db)
      return;
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (p.cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int64_t bk = 0; bk < blocks; ++bk) {
      int64_t c0 = bk * kBlock, c1 = std::min(p.cols, c0 + kBlock);
      double accS[kBlock] = {0}, accB[kBlock] = {0};
      for (int64_t r = 0; r < p.rows; ++r) {
        const float *xr = x + r * p.cols, *gr = dy + r * p.cols;
        const float m = mean[r], iv = inv[r];
        for (int64_t c = c0; c < c1; ++c) {
          accS[c - c0] += double(gr[c]) * ((xr[c] - m) * iv);
          accB[c - c0] += gr[c];
        }
      }
      for (int64_t c = c0; c < c1; ++c) {
        if (ds)
          ds[c] = float(accS[c - c0]);
        if (db)
          db[c] = float(accB[c - c0]);
      }
    }
  }

private:
  LnGeom g;
};

std::unique_ptr<Kernel> createLayerNormGrad(const OpSpec &spec,
                                            std::string &error) {
  if (!checkArity(spec, 5, 5, 1, 3, error) ||
      !checkAllF32(spec, {0, 1, 2, 3, 4}, {0, 1, 2}, error))
    return nullptr;
  LnGeom g;
  if (!lnGeom(spec, spec.inputs[1], spec.inputs[2], g, error))
    return nullptr;
  if (spec.inputs[0].shape != spec.inputs[1].shape ||
      spec.outputs[0].shape != spec.inputs[1].shape ||
      spec.inputs[3].numel() != g.rows || spec.inputs[4].numel() != g.rows) {
    error = nodeError(spec, "dY, X, dX, Mean or InvStdDev has the wrong size");
    return nullptr;
  }
  return std::make_unique<LayerNormGradKernel>(spec, g);
}

//===----------------------------------------------------------------------===//
// Gelu / GeluGrad / Erf
//===----------------------------------------------------------------------===//

/// Gelu {approximate = none | tanh}, GeluGrad (dY, X -> dX), Erf.
class GeluKernel final : public CpuKernel {
public:
  GeluKernel(const OpSpec &spec, int mode, bool grad)
      : CpuKernel(spec), mode(mode), grad(grad), n(spec.outputs[0].numel()) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *x = in[grad ? 1 : 0].as<float>();
    const float *dy = grad ? in[0].as<float>() : nullptr;
    float *y = out[0].as<float>();
    const int64_t count = n;
    const int md = mode;
    const bool gr = grad;
    constexpr float kInvSqrt2 = 0.70710678118654752f;
    constexpr float kInvSqrt2Pi = 0.39894228040143268f;
    constexpr float kSqrt2OverPi = 0.79788456080286536f;
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i) {
      float v = x[i];
      if (md == 2) { // Erf
        y[i] = std::erf(v);
        continue;
      }
      if (md == 0) {
        float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
        y[i] = gr ? dy[i] * (cdf + v * kInvSqrt2Pi * std::exp(-0.5f * v * v))
                  : v * cdf;
      } else {
        float u = kSqrt2OverPi * (v + 0.044715f * v * v * v);
        float t = std::tanh(u);
        y[i] = gr ? dy[i] * (0.5f * (1.0f + t) +
                             0.5f * v * (1.0f - t * t) * kSqrt2OverPi *
                                 (1.0f + 3.0f * 0.044715f * v * v))
                  : 0.5f * v * (1.0f + t);
      }
    }
  }

private:
  int mode; // 0: erf Gelu, 1: tanh Gelu, 2: Erf
  bool grad;
  int64_t n;
};

std::unique_ptr<Kernel> createGelu(const OpSpec &spec, std::string &error) {
  bool grad = spec.opType == "GeluGrad";
  size_t nIn = grad ? 2 : 1;
  if (!checkArity(spec, nIn, nIn, 1, 1, error) ||
      !checkAllF32(spec, {0, 1}, {0}, error))
    return nullptr;
  for (const auto &d : spec.inputs)
    if (d.shape != spec.outputs[0].shape) {
      error = nodeError(spec, "operands and result must have one shape");
      return nullptr;
    }
  int mode = 2;
  if (spec.opType != "Erf") {
    std::string approx = spec.attrs.getString("approximate", "none");
    if (approx != "none" && approx != "tanh") {
      error = nodeError(spec, "approximate '" + approx + "' is not supported");
      return nullptr;
    }
    mode = approx == "tanh" ? 1 : 0;
  }
  return std::make_unique<GeluKernel>(spec, mode, grad);
}

} // namespace

void registerElementwiseKernels(KernelRegistry &r) {
  for (const char *op : {"Add", "Sub", "Mul", "Div", "Pow"})
    r[op] = createBinary;
  r["Sum"] = createSum;
  r["Neg"] = createNeg;
  r["ReduceSumTo"] = createReduceSumTo;
  for (const char *op :
       {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    r[op] = createCopy;
  r["Concat"] = createConcat;
  r["Split"] = createSplit;
  r["Dropout"] = createDropout;
  r["DropoutGrad"] = createDropoutGrad;
  r["Pad"] = createPad;
  r["PadGrad"] = createPadGrad;
  r["MaxPool"] = createMaxPool;
  r["MaxPoolGrad"] = createMaxPoolGrad;
  r["GlobalAveragePool"] = createGlobalAvgPool;
  r["GlobalAveragePoolGrad"] = createGlobalAvgPool;
  r["Clip"] = createClip;
  r["ClipGrad"] = createClip;
  r["SoftmaxCrossEntropyLoss"] = createSce;
  r["SoftmaxCrossEntropyLossGrad"] = createSceGrad;
  r["Constant"] = createConstant;
  r["ReduceMean"] = createReduce;
  r["ReduceSum"] = createReduce;
  r["Shape"] = createShape;
  r["Cast"] = createCast;
  r["Expand"] = createExpand;
  r["Gather"] = createGather;
  r["GatherGrad"] = createGatherGrad;
  r["Slice"] = createSlice;
  r["SliceGrad"] = createSliceGrad;
  r["LayerNormalization"] = createLayerNorm;
  r["LayerNormalizationGrad"] = createLayerNormGrad;
  for (const char *op : {"Gelu", "GeluGrad", "Erf"})
    r[op] = createGelu;
}

} // namespace oasr::rt::cpu
