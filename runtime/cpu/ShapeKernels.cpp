//===- ShapeKernels.cpp - Copies, views, gathers and fills ----------------===//
//
// The kernels that move or fill elements without arithmetic, the ops of the
// CUDA backend's ShapeKernels.cpp: copies and views (Reshape, Flatten,
// Squeeze, Unsqueeze, Identity), Concat/Split, Pad and PadGrad, Constant,
// Shape, Expand, Slice/SliceGrad, Transpose (a oneDNN reorder),
// Gather/GatherGrad (embedding lookups and their scatter-add), ScatterND,
// the mask builders ConstantOfShape, Range and Trilu, and Resize (nearest
// and linear) with its gradient.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

namespace oasr::rt::cpu {

//===----------------------------------------------------------------------===//
// Copies and views
//===----------------------------------------------------------------------===//

namespace {

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

} // namespace

static KernelOr createCopy(const OpSpec &spec) {
  size_t maxIn = spec.opType == "Flatten" || spec.opType == "Identity" ? 1 : 2;
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, maxIn, 1, 1));
  OASR_RETURN_IF_ERROR(checkCopyShapes(spec));
  return std::make_unique<CopyKernel>(spec);
}

//===----------------------------------------------------------------------===//
// Concat / Split
//===----------------------------------------------------------------------===//

namespace {

/// The parts of a Concat (the operands) or a Split (the results): each part
/// contributes `partBytes[i]` per outer index; the whole row is `rowBytes`.
struct Parts {
  int64_t outer = 1;
  std::vector<size_t> partBytes, partOffset;
  size_t rowBytes = 0;
};

} // namespace

static Status makeParts(const OpSpec &spec, const TensorDesc &whole,
                        const std::vector<TensorDesc> &parts, Parts &p) {
  int64_t axis;
  OASR_RETURN_IF_ERROR(normAxis(spec, int64_t(whole.rank()), 0, axis));
  int64_t sum = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const TensorDesc &d = parts[i];
    bool ok = d.rank() == whole.rank() && d.dtype == whole.dtype;
    for (size_t k = 0; ok && k < d.rank(); ++k)
      ok = int64_t(k) == axis || d.shape[k] == whole.shape[k];
    if (!ok) {
      return nodeError(spec, "part " + std::to_string(i) + " " +
                                 shapeStr(d.shape) + " does not fit " +
                                 shapeStr(whole.shape) + " along axis " +
                                 std::to_string(axis));
    }
    sum += d.shape[axis];
  }
  if (sum != whole.shape[axis]) {
    return nodeError(spec, "parts sum to " + std::to_string(sum) +
                               " along axis " + std::to_string(axis) +
                               ", expected " +
                               std::to_string(whole.shape[axis]));
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
  return Status::success();
}

namespace {

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

} // namespace

static KernelOr createConcat(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1 << 16, 1, 1));
  Parts p;
  OASR_RETURN_IF_ERROR(makeParts(spec, spec.outputs[0], spec.inputs, p));
  return std::make_unique<ConcatSplitKernel>(spec, std::move(p), false);
}

static KernelOr createSplit(const OpSpec &spec) {
  // The optional `split` operand (opset 13) is not read: the results' shapes
  // already say how the operand is cut.
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 2, 1, 1 << 16));
  Parts p;
  OASR_RETURN_IF_ERROR(makeParts(spec, spec.inputs[0], spec.outputs, p));
  return std::make_unique<ConcatSplitKernel>(spec, std::move(p), true);
}

//===----------------------------------------------------------------------===//
// Pad / PadGrad
//===----------------------------------------------------------------------===//

/// out[o] = in[o - begin] where inside `in`, else `value` (f32). Negative
/// begins crop.
static void padCopy(const float *in, const std::vector<int64_t> &inShape,
                    float *out, const std::vector<int64_t> &outShape,
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

namespace {

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
        fatalKernelError(nodeName, op, "no pads attribute or operand");
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
      fatalKernelError(nodeName, op,
                       "pads has " + std::to_string(pads.size()) +
                           " values for " + std::to_string(axes.size()) +
                           " axes");
    std::vector<int64_t> begin(r, 0), end(r, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] < 0 || axes[i] >= int64_t(r))
        fatalKernelError(nodeName, op, "axis out of range");
      begin[axes[i]] = pads[i];
      end[axes[i]] = pads[i + axes.size()];
    }
    for (size_t d = 0; d < r; ++d)
      if (inShape[d] + begin[d] + end[d] != outShape[d])
        fatalKernelError(nodeName, op,
                         "pads do not produce the result shape " +
                             shapeStr(outShape));
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

} // namespace

static KernelOr createPad(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 4, 1, 1, {0, 2}, {0}));
  std::string mode = spec.attrs.getString("mode", "constant");
  if (mode != "constant") {
    return nodeError(spec, "mode '" + mode +
                               "' is not supported (only "
                               "'constant')");
  }
  if (spec.inputs[0].rank() != spec.outputs[0].rank()) {
    return nodeError(spec, "operand and result ranks differ");
  }
  if (!spec.attrs.has("pads") &&
      (spec.inputs.size() < 2 || spec.inputs[1].dtype != DType::I64)) {
    return nodeError(spec, "needs a pads attribute or an i64 pads operand");
  }
  return std::make_unique<PadKernel>(spec);
}

namespace {

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

} // namespace

static KernelOr createPadGrad(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 1, {0}, {0}));
  std::vector<int64_t> begin;
  OASR_RETURN_IF_ERROR(padGradBegin(spec, SIZE_MAX, begin));
  return std::make_unique<PadGradKernel>(spec, begin);
}

//===----------------------------------------------------------------------===//
// Constant
//===----------------------------------------------------------------------===//

namespace {

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

} // namespace

static KernelOr createConstant(const OpSpec &spec) {
  std::vector<char> bytes;
  OASR_RETURN_IF_ERROR(checkArity(spec, 0, 0, 1, 1));
  OASR_RETURN_IF_ERROR(constantBytes(spec, bytes));
  return std::make_unique<ConstantKernel>(spec, std::move(bytes));
}

//===----------------------------------------------------------------------===//
// Shape / Expand
//===----------------------------------------------------------------------===//

/// Shape {start, end}: the operand's static shape.
static KernelOr createShape(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, DType::I64));
  const auto &xs = spec.inputs[0].shape;
  int64_t r = int64_t(xs.size());
  int64_t b = spec.attrs.getInt("start", 0), e = spec.attrs.getInt("end", r);
  b = std::clamp<int64_t>(b < 0 ? b + r : b, 0, r);
  e = std::clamp<int64_t>(e < 0 ? e + r : e, b, r);
  if (spec.outputs[0].numel() != e - b) {
    return nodeError(spec,
                     "result must have " + std::to_string(e - b) + " elements");
  }
  std::vector<double> dims(xs.begin() + b, xs.begin() + e);
  OpSpec c = spec;
  c.inputs.clear();
  c.attrs = AttrMap();
  c.attrs.set("value", dims);
  return createConstant(c);
}

namespace {

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

} // namespace

static KernelOr createExpand(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 2, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, spec.inputs[0].dtype));
  if (!broadcastsTo(spec.inputs[0].shape, spec.outputs[0].shape)) {
    return nodeError(spec, "operand " + shapeStr(spec.inputs[0].shape) +
                               " does not broadcast to " +
                               shapeStr(spec.outputs[0].shape));
  }
  return std::make_unique<ExpandKernel>(spec);
}

//===----------------------------------------------------------------------===//
// Slice / SliceGrad
//===----------------------------------------------------------------------===//

/// out[i] = in[start + i * step] per dimension (row-major, any element size);
/// `scatter` runs the other way (dX[start + i * step] = dY[i], dX zeroed).
static void stridedCopy(const char *in, const std::vector<int64_t> &inShape,
                        char *out, const std::vector<int64_t> &outShape,
                        const std::vector<int64_t> &start,
                        const std::vector<int64_t> &step, size_t es,
                        bool scatter) {
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

static std::vector<int64_t> intsOperand(const std::vector<TensorRef> &in,
                                        size_t i) {
  std::vector<int64_t> v;
  if (i >= in.size() || !in[i].data)
    return v;
  for (int64_t k = 0; k < in[i].numel(); ++k)
    v.push_back(labelAt(in[i], k));
  return v;
}

namespace {

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
    std::vector<int64_t> start, step;
    Status resolved = resolveSliceAtRun(
        inShape, outShape, in.size(), attrs,
        [&](size_t i) { return intsOperand(in, i); }, start, step);
    if (!resolved.ok())
      fatalKernelError(nodeName, op, resolved.message());
    stridedCopy(static_cast<const char *>(in[0].data), inShape,
                static_cast<char *>(out[0].data), outShape, start, step, esize,
                false);
  }

private:
  std::vector<int64_t> inShape, outShape;
  size_t esize;
  AttrMap attrs;
};

} // namespace

static KernelOr createSlice(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSlice(spec));
  return std::make_unique<SliceKernel>(spec);
}

namespace {

/// SliceGrad {starts, ends, axes, steps}: dY -> dX (zero outside the slice).
class SliceGradKernel final : public CpuKernel {
public:
  SliceGradKernel(const OpSpec &spec, std::vector<int64_t> start,
                  std::vector<int64_t> step)
      : CpuKernel(spec), dxShape(spec.outputs[0].shape),
        dyShape(spec.inputs[0].shape), start(std::move(start)),
        step(std::move(step)), esize(dtypeSize(spec.outputs[0].dtype)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    // Zero bits are 0.0 in f32, bf16 and f16 alike.
    std::memset(out[0].data, 0, out[0].bytes());
    stridedCopy(static_cast<const char *>(out[0].data), dxShape,
                static_cast<char *>(in[0].data), dyShape, start, step, esize,
                true);
  }

private:
  std::vector<int64_t> dxShape, dyShape, start, step;
  size_t esize;
};

} // namespace

static KernelOr createSliceGrad(const OpSpec &spec) {
  // f32, or a 16-bit float (moved as bytes) in and out alike.
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  OASR_RETURN_IF_ERROR(isLowFloat(spec.inputs[0].dtype)
                           ? checkDType(spec, false, 0, spec.inputs[0].dtype)
                           : checkAllF32(spec, {0}, {0}));
  std::vector<int64_t> start, step;
  Status resolved = resolveSlice(
      spec.outputs[0].shape, spec.inputs[0].shape, spec.attrs.getInts("starts"),
      spec.attrs.getInts("ends"), spec.attrs.getInts("axes"),
      spec.attrs.getInts("steps"), start, step);
  if (!resolved.ok())
    return nodeError(spec, resolved.message());
  return std::make_unique<SliceGradKernel>(spec, start, step);
}

//===----------------------------------------------------------------------===//
// Transpose (a oneDNN reorder from a permuted-strides view)
//===----------------------------------------------------------------------===//

static PlainPrimitive transpose(const OpSpec &spec,
                                const std::vector<int64_t> &perm, dt type) {
  const auto &xs = spec.inputs[0].shape;
  size_t r = xs.size();
  dims inStrides(r), outDims(r), viewStrides(r);
  int64_t s = 1;
  for (size_t i = r; i-- > 0;) {
    inStrides[i] = s;
    s *= xs[i];
  }
  for (size_t i = 0; i < r; ++i) {
    outDims[i] = xs[perm[i]];
    viewStrides[i] = inStrides[perm[i]];
  }
  memory::desc src(outDims, type, viewStrides);
  memory::desc dst = plainDesc({outDims.begin(), outDims.end()}, type);
  PlainPrimitive p(dnnl::reorder(
      dnnl::reorder::primitive_desc(engine(), src, engine(), dst)));
  p.in(DNNL_ARG_FROM, src, 0).out(DNNL_ARG_TO, dst, 0);
  return p;
}

static KernelOr createTranspose(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  const TensorDesc &x = spec.inputs[0];
  dt type;
  switch (x.dtype) {
  case DType::F32:
    type = dt::f32;
    break;
  case DType::I32:
    type = dt::s32;
    break;
  case DType::BF16:
    type = dt::bf16;
    break;
  default:
    return nodeError(spec, std::string("element type ") + dtypeName(x.dtype) +
                               " is not supported");
  }
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, x.dtype));
  size_t r = x.rank();
  std::vector<int64_t> perm(r);
  for (size_t i = 0; i < r; ++i)
    perm[i] = int64_t(r - 1 - i);
  perm = spec.attrs.getInts("perm", perm);
  std::vector<bool> seen(r, false);
  bool ok = perm.size() == r;
  for (size_t i = 0; ok && i < r; ++i) {
    if (perm[i] < 0)
      perm[i] += int64_t(r);
    ok = perm[i] >= 0 && perm[i] < int64_t(r) && !seen[perm[i]];
    if (ok)
      seen[perm[i]] = true;
  }
  if (!ok) {
    return nodeError(spec, "perm " + shapeStr(spec.attrs.getInts("perm")) +
                               " is not a permutation of rank " +
                               std::to_string(r));
  }
  std::vector<int64_t> ys(r);
  for (size_t i = 0; i < r; ++i)
    ys[i] = x.shape[perm[i]];
  if (spec.outputs[0].shape != ys) {
    return nodeError(spec, "result shape " + shapeStr(spec.outputs[0].shape) +
                               " is not the permuted " + shapeStr(ys));
  }
  if (r == 0 || r > DNNL_MAX_NDIMS) {
    return nodeError(spec, "rank " + std::to_string(r) + " is not supported");
  }
  return guardCreate(spec, [&] {
    return std::make_unique<PrimitiveKernel>(spec, transpose(spec, perm, type));
  });
}

//===----------------------------------------------------------------------===//
// Gather / GatherGrad
//===----------------------------------------------------------------------===//

namespace {

/// data [outer, axisDim, inner] gathered along the middle dimension.
struct GatherGeom {
  int64_t outer = 1, axisDim = 1, inner = 1, numIdx = 1;
};

} // namespace

static Status gatherGeom(const OpSpec &spec, const TensorDesc &data,
                         const TensorDesc &idx, const TensorDesc &y,
                         GatherGeom &g) {
  int64_t axis;
  OASR_RETURN_IF_ERROR(normAxis(spec, int64_t(data.rank()), 0, axis));
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32) {
    return nodeError(spec, "indices must be i64 or i32");
  }
  std::vector<int64_t> want(data.shape.begin(), data.shape.begin() + axis);
  want.insert(want.end(), idx.shape.begin(), idx.shape.end());
  want.insert(want.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (y.shape != want || y.dtype != data.dtype) {
    return nodeError(spec, "gathered shape " + shapeStr(y.shape) +
                               " should be " + shapeStr(want));
  }
  for (int64_t k = 0; k < axis; ++k)
    g.outer *= data.shape[k];
  g.axisDim = data.shape[axis];
  for (size_t k = axis + 1; k < data.rank(); ++k)
    g.inner *= data.shape[k];
  g.numIdx = idx.numel();
  return Status::success();
}

namespace {

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
        fatalDataError(nodeName, op,
                       "index " + std::to_string(labelAt(idx, i)) +
                           " is outside [0, " + std::to_string(p.axisDim) +
                           ")");
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

} // namespace

static KernelOr createGather(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  GatherGeom g;
  OASR_RETURN_IF_ERROR(
      gatherGeom(spec, spec.inputs[0], spec.inputs[1], spec.outputs[0], g));
  return std::make_unique<GatherKernel>(spec, g, false);
}

static KernelOr createGatherGrad(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 3, 3, 1, 1, {2}, {0}));
  GatherGeom g;
  OASR_RETURN_IF_ERROR(
      gatherGeom(spec, spec.outputs[0], spec.inputs[1], spec.inputs[2], g));
  return std::make_unique<GatherKernel>(spec, g, true);
}

//===----------------------------------------------------------------------===//
// GatherElements / ScatterElements
//===----------------------------------------------------------------------===//

namespace {

/// GatherElements {axis}: data, indices -> Y; ScatterElements {axis,
/// reduction none|add}: data, indices, updates -> a copy of data with the
/// updates written (or added) where the indices point. Scatters run in
/// index order on one thread, so repeated indices add deterministically
/// (and the last write wins without a reduction).
class ElementsKernel final : public CpuKernel {
public:
  ElementsKernel(const OpSpec &spec, const ElementsGeom &g)
      : CpuKernel(spec), g(g), scatter(spec.opType == "ScatterElements"),
        esize(dtypeSize(spec.inputs[0].dtype)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const ElementsGeom p = g;
    std::vector<int64_t> offs(size_t(p.count));
#pragma omp parallel for schedule(static) if (p.count > 16384)
    for (int64_t i = 0; i < p.count; ++i) {
      int64_t v = labelAt(in[1], i);
      int64_t j = v < 0 ? v + p.axisDim : v;
      if (j < 0 || j >= p.axisDim)
        fatalDataError(nodeName, op,
                       "index " + std::to_string(v) + " at " +
                           std::to_string(i) + " is outside [" +
                           std::to_string(-p.axisDim) + ", " +
                           std::to_string(p.axisDim) + ")");
      offs[size_t(i)] = elementsOffset(p, i, j);
    }
    const char *x = static_cast<const char *>(in[0].data);
    char *y = static_cast<char *>(out[0].data);
    const size_t e = esize;
    if (!scatter && e == 4) {
      const uint32_t *x4 = reinterpret_cast<const uint32_t *>(x);
      uint32_t *y4 = reinterpret_cast<uint32_t *>(y);
#pragma omp parallel for schedule(static) if (p.count > 16384)
      for (int64_t i = 0; i < p.count; ++i)
        y4[i] = x4[offs[size_t(i)]];
      return;
    }
    if (!scatter) {
#pragma omp parallel for schedule(static) if (p.count > 16384)
      for (int64_t i = 0; i < p.count; ++i)
        std::memcpy(y + size_t(i) * e, x + size_t(offs[size_t(i)]) * e, e);
      return;
    }
    if (y != x)
      std::memcpy(y, x, out[0].bytes());
    const char *u = static_cast<const char *>(in[2].data);
    if (p.add) {
      float *yf = reinterpret_cast<float *>(y);
      const float *uf = reinterpret_cast<const float *>(u);
      for (int64_t i = 0; i < p.count; ++i)
        yf[offs[size_t(i)]] += uf[i];
      return;
    }
    for (int64_t i = 0; i < p.count; ++i)
      std::memcpy(y + size_t(offs[size_t(i)]) * e, u + size_t(i) * e, e);
  }

private:
  ElementsGeom g;
  bool scatter;
  size_t esize;
};

} // namespace

namespace {

/// CumSum {exclusive, reverse}: X, axis -> running sums along the axis
/// (cumSumLine), one line per thread.
class CumSumKernel final : public CpuKernel {
public:
  CumSumKernel(const OpSpec &spec, const CumSumGeom &g)
      : CpuKernel(spec), g(g), i64(spec.inputs[0].dtype == DType::I64) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const CumSumGeom p = g;
    const int64_t lines = p.outer * p.inner;
#pragma omp parallel for schedule(static) if (lines * p.n > 16384)
    for (int64_t l = 0; l < lines; ++l) {
      if (i64)
        cumSumLine(p, in[0].as<int64_t>(), out[0].as<int64_t>(), l);
      else
        cumSumLine(p, in[0].as<float>(), out[0].as<float>(), l);
    }
  }

private:
  CumSumGeom g;
  bool i64;
};

} // namespace

static KernelOr createCumSum(const OpSpec &spec) {
  CumSumGeom g;
  OASR_RETURN_IF_ERROR(cumSumGeom(spec, g));
  return std::make_unique<CumSumKernel>(spec, g);
}

static KernelOr createElements(const OpSpec &spec) {
  ElementsGeom g;
  OASR_RETURN_IF_ERROR(elementsGeom(spec, g));
  return std::make_unique<ElementsKernel>(spec, g);
}

//===----------------------------------------------------------------------===//
// Mask builders
//===----------------------------------------------------------------------===//

/// Writes `value` converted to `t` into `n` elements of `dst`.
static void fill(DType t, void *dst, int64_t n, double value) {
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

namespace {

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

} // namespace

static KernelOr createConstantOfShape(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 0, 1, 1, 1));
  if (spec.outputs[0].dtype == DType::F16) {
    return nodeError(spec, "f16 results are not supported");
  }
  return std::make_unique<ConstantOfShapeKernel>(spec);
}

namespace {

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
      double v = rangeValue(start, delta, i);
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

} // namespace

static KernelOr createRange(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 3, 3, 1, 1));
  if (!isFloatOrInt(spec.outputs[0].dtype) || spec.outputs[0].rank() != 1) {
    return nodeError(spec, "expects a 1-D f32/i64/i32 result");
  }
  return std::make_unique<RangeKernel>(spec);
}

namespace {

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
          if (triluKeeps(upper, i, j, k))
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

} // namespace

static KernelOr createTrilu(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 2, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, spec.outputs[0].dtype));
  if (spec.outputs[0].rank() < 2 ||
      spec.inputs[0].shape != spec.outputs[0].shape) {
    return nodeError(spec, "expects X of rank >= 2 and Y of its shape");
  }
  return std::make_unique<TriluKernel>(spec);
}

//===----------------------------------------------------------------------===//
// ScatterND
//===----------------------------------------------------------------------===//

namespace {

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
      int64_t bad = 0, offset = ndTupleOffset(g, idx, t, &bad);
      if (offset < 0)
        fatalDataError(nodeName, op,
                       "index " + std::to_string(bad) + " of tuple " +
                           std::to_string(t) + " is outside its dimension");
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

} // namespace

static KernelOr createScatterND(const OpSpec &spec) {
  ScatterNDGeom g;
  OASR_RETURN_IF_ERROR(scatterNDGeom(spec, g));
  return std::make_unique<ScatterNDKernel>(spec, g);
}

//===----------------------------------------------------------------------===//
// Resize / ResizeGrad
//===----------------------------------------------------------------------===//

namespace {

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

} // namespace

static KernelOr createResize(const OpSpec &spec) {
  ResizeGeom g;
  OASR_RETURN_IF_ERROR(resizeGeom(spec, g));
  return std::make_unique<ResizeKernel>(spec, g.grad, std::move(g.h),
                                        std::move(g.w), g.planes, g.inH, g.inW);
}

void registerShapeKernels(KernelRegistry &r) {
  for (const char *op :
       {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    r[op] = createCopy;
  r["Concat"] = createConcat;
  r["Split"] = createSplit;
  r["Pad"] = createPad;
  r["PadGrad"] = createPadGrad;
  r["Constant"] = createConstant;
  r["Shape"] = createShape;
  r["Expand"] = createExpand;
  r["Slice"] = createSlice;
  r["SliceGrad"] = createSliceGrad;
  r["Transpose"] = createTranspose;
  r["Gather"] = createGather;
  r["GatherGrad"] = createGatherGrad;
  r["ScatterND"] = createScatterND;
  r["GatherElements"] = createElements;
  r["CumSum"] = createCumSum;
  r["ScatterElements"] = createElements;
  r["ConstantOfShape"] = createConstantOfShape;
  r["Range"] = createRange;
  r["Trilu"] = createTrilu;
  r["Resize"] = createResize;
  r["ResizeGrad"] = createResize;
}

} // namespace oasr::rt::cpu
