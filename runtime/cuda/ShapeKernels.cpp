//===- ShapeKernels.cpp - Copies, views, gathers and fills on the GPU -----===//
//
// Reshape and the other views, Constant, Shape, ConstantOfShape, Range,
// Trilu, Expand, Concat/Split, Pad, Slice, Resize, Transpose, ScatterND and
// Gather/GatherGrad: ops that move or fill elements, the ops of the CPU
// backend's ShapeKernels.cpp; device code in CudaKernels.cu and
// CudaPointwise.cu.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace oasr::rt::cuda {

/// Reshape/Flatten/Squeeze/Unsqueeze/Identity: a device copy, none when the
/// executor aliased result and operand.
static KernelOr createCopy(CudaBackend &be, const OpSpec &spec) {
  size_t maxIn = spec.opType == "Flatten" || spec.opType == "Identity" ? 1 : 2;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, maxIn, 1, 1, {}, {}));
  OASR_RETURN_IF_ERROR(checkCopyShapes(spec));
  size_t bytes = spec.outputs[0].bytes();
  return lambda(be, spec,
                [bytes](cudaStream_t s, const auto &in, const auto &out) {
                  if (bytes && out[0].data != in[0].data)
                    check(cudaMemcpyAsync(out[0].data, in[0].data, bytes,
                                          cudaMemcpyDeviceToDevice, s),
                          "view copy");
                });
}

/// Constant with a flat number list (the executor materializes tensors).
static KernelOr createConstant(CudaBackend &be, const OpSpec &spec) {
  auto bytes = std::make_shared<std::vector<char>>();
  OASR_RETURN_IF_ERROR(checkSpec(spec, 0, 0, 1, 1, {}, {}));
  OASR_RETURN_IF_ERROR(constantBytes(spec, *bytes));
  return lambda(
      be, spec, [bytes](cudaStream_t s, const auto &, const auto &out) {
        check(cudaMemcpyAsync(out[0].data, bytes->data(), bytes->size(),
                              cudaMemcpyHostToDevice, s),
              "Constant");
      });
}

namespace {

/// Pad {mode = constant}: data[, pads[, constant_value[, axes]]] -> Y. Pads,
/// value and axes operands are read back from the device at each run (a
/// synchronizing copy of a few numbers); a `pads` attribute needs none.
class PadKernel final : public CudaKernel {
public:
  PadKernel(CudaBackend &be, const OpSpec &spec)
      : CudaKernel(be, spec), inShape(spec.inputs[0].shape),
        outShape(spec.outputs[0].shape), attrPads(spec.attrs.getInts("pads")),
        value(float(spec.attrs.getFloat("value", 0.0))),
        hasAttrPads(spec.attrs.has("pads")), operands(be, spec) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    size_t r = inShape.size();
    std::vector<int64_t> pads = attrPads, axes(r);
    for (size_t i = 0; i < r; ++i)
      axes[i] = int64_t(i);
    if (!hasAttrPads)
      pads = operands.ints(in, 1);
    float v = value;
    if (in.size() > 2 && in[2].data && in[2].numel() > 0)
      operands.read(in, 2, &v, sizeof(float));
    if (in.size() > 3 && in[3].data) {
      axes = operands.ints(in, 3);
      for (int64_t &a : axes)
        if (a < 0)
          a += int64_t(r);
    }
    PadParams p;
    p.rank = int(r);
    bool ok = pads.size() == 2 * axes.size();
    for (size_t d = 0; d < r; ++d) {
      p.inDims[d] = inShape[d];
      p.outDims[d] = outShape[d];
    }
    for (size_t i = 0; ok && i < axes.size(); ++i) {
      ok = axes[i] >= 0 && axes[i] < int64_t(r);
      if (ok)
        p.begin[axes[i]] = pads[i];
    }
    for (size_t i = 0; ok && i < axes.size(); ++i)
      ok = inShape[size_t(axes[i])] + pads[i] + pads[i + axes.size()] ==
           outShape[size_t(axes[i])];
    if (!ok)
      fatalKernelError(nodeName, op,
                       "pads do not produce the result shape " +
                           shapeStr(outShape));
    launchPad(p, in[0].as<float>(), out[0].as<float>(), v, out[0].numel(),
              stream);
  }

private:
  std::vector<int64_t> inShape, outShape, attrPads;
  float value;
  bool hasAttrPads;
  HostOperands operands;
};

} // namespace

static KernelOr createPad(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 4, 1, 1, {0, 2}, {0}));
  if (spec.attrs.getString("mode", "constant") != "constant") {
    return nodeError(spec, "mode '" + spec.attrs.getString("mode") +
                               "' is not supported (only 'constant')");
  }
  if (spec.inputs[0].rank() != spec.outputs[0].rank() ||
      spec.inputs[0].rank() > size_t(kMaxRank)) {
    return nodeError(spec, "operand and result ranks differ or exceed " +
                               std::to_string(kMaxRank));
  }
  if (!spec.attrs.has("pads") &&
      (spec.inputs.size() < 2 || spec.inputs[1].dtype != DType::I64)) {
    return nodeError(spec, "needs a pads attribute or an i64 pads operand");
  }
  return std::make_unique<PadKernel>(be, spec);
}

/// PadGrad {pads}: dY -> dX, the slice of dY the padded input came from.
static KernelOr createPadGrad(CudaBackend &be, const OpSpec &spec) {
  std::vector<int64_t> begin;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 1, {0}, {0}));
  OASR_RETURN_IF_ERROR(padGradBegin(spec, kMaxRank, begin));
  const auto &dy = spec.inputs[0].shape, &dx = spec.outputs[0].shape;
  PadParams p;
  p.rank = int(dx.size());
  for (size_t d = 0; d < dx.size(); ++d) {
    p.inDims[d] = dy[d];
    p.outDims[d] = dx[d];
    p.begin[d] = begin[d];
  }
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [p, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchPad(p, in[0].template as<float>(),
                            out[0].template as<float>(), 0.0f, n, s);
                });
}

static SliceParams sliceParams(const std::vector<int64_t> &inShape,
                               const std::vector<int64_t> &outShape,
                               const std::vector<int64_t> &start,
                               const std::vector<int64_t> &step) {
  SliceParams p;
  p.rank = int(outShape.size());
  std::vector<int64_t> strides = rowMajorStrides(inShape);
  for (size_t d = 0; d < outShape.size(); ++d) {
    p.outDims[d] = outShape[d];
    p.inStrides[d] = strides[d];
    p.start[d] = start[d];
    p.step[d] = step[d];
  }
  return p;
}

namespace {

/// Slice: data, starts, ends[, axes[, steps]] (read back at each run: they
/// are operands) or opset 1's attributes -> Y; any element type.
class SliceKernel final : public CudaKernel {
public:
  SliceKernel(CudaBackend &be, const OpSpec &spec)
      : CudaKernel(be, spec), inShape(spec.inputs[0].shape),
        outShape(spec.outputs[0].shape),
        esize(int(dtypeSize(spec.inputs[0].dtype))), attrs(spec.attrs),
        operands(be, spec) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    std::vector<int64_t> start, step;
    Status resolved = resolveSliceAtRun(
        inShape, outShape, in.size(), attrs,
        [&](size_t i) { return operands.ints(in, i); }, start, step);
    if (!resolved.ok())
      fatalKernelError(nodeName, op, resolved.message());
    launchSlice(sliceParams(inShape, outShape, start, step), esize, in[0].data,
                out[0].data, out[0].numel(), false, stream);
  }

private:
  std::vector<int64_t> inShape, outShape;
  int esize;
  AttrMap attrs;
  HostOperands operands;
};

} // namespace

static KernelOr createSlice(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSlice(spec));
  int es = int(dtypeSize(spec.inputs[0].dtype));
  if (spec.inputs[0].rank() > size_t(kMaxRank) ||
      (es != 1 && es != 4 && es != 8)) {
    return nodeError(spec, "the cuda backend slices tensors of rank <= " +
                               std::to_string(kMaxRank) +
                               " with 1-, 4- or 8-byte elements");
  }
  return std::make_unique<SliceKernel>(be, spec);
}

/// SliceGrad {starts, ends, axes, steps}: dY -> dX, zero outside the slice.
static KernelOr createSliceGrad(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 1, {0}, {0}));
  const auto &dx = spec.outputs[0].shape, &dy = spec.inputs[0].shape;
  std::vector<int64_t> start, step;
  if (dx.size() > size_t(kMaxRank))
    return nodeError(spec, "rank above " + std::to_string(kMaxRank));
  Status resolved = resolveSlice(
      dx, dy, spec.attrs.getInts("starts"), spec.attrs.getInts("ends"),
      spec.attrs.getInts("axes"), spec.attrs.getInts("steps"), start, step);
  if (!resolved.ok())
    return nodeError(spec, resolved.message());
  SliceParams p = sliceParams(dx, dy, start, step);
  int64_t n = spec.inputs[0].numel();
  size_t bytes = spec.outputs[0].bytes();
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    check(cudaMemsetAsync(out[0].data, 0, bytes, s), "SliceGrad");
    // Scatter: dY's elements into dX at the slice's positions.
    launchSlice(p, 4, out[0].data, in[0].data, n, true, s);
  });
}

namespace {

/// Resize and ResizeGrad: ResizeGeom's sampling tables, and for the
/// gradient their inverse (per source index, the result indices that read
/// it and their weights), copied to the device once.
class ResizeKernel final : public CudaKernel {
public:
  ResizeKernel(CudaBackend &be, const OpSpec &spec, const ResizeGeom &g)
      : CudaKernel(be, spec), grad(g.grad), planes(g.planes) {
    p.tapsH = g.h.taps;
    p.tapsW = g.w.taps;
    p.inH = g.inH;
    p.inW = g.inW;
    p.outH = int64_t(g.h.index.size()) / g.h.taps;
    p.outW = int64_t(g.w.index.size()) / g.w.taps;
    p.hIndex = upload(g.h.index);
    p.wIndex = upload(g.w.index);
    p.hWeight = upload(g.h.weight);
    p.wWeight = upload(g.w.weight);
    invert(g.h, g.inH, p.hStart, p.hOut, p.hInvWeight);
    invert(g.w, g.inW, p.wStart, p.wOut, p.wInvWeight);
  }
  ~ResizeKernel() override {
    for (void *ptr : owned)
      backend.deallocate(ptr);
  }
  bool ok() const { return !failed; }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    launchResize(p, grad, in[0].as<float>(), out[0].as<float>(), planes,
                 stream);
  }

private:
  template <typename T> const T *upload(const std::vector<T> &v) {
    size_t bytes = std::max<size_t>(v.size(), 1) * sizeof(T);
    void *ptr = backend.allocate(bytes);
    if (!ptr) {
      failed = true;
      return nullptr;
    }
    owned.push_back(ptr);
    backend.copyToDevice(ptr, v.data(), v.size() * sizeof(T));
    return static_cast<const T *>(ptr);
  }
  /// CSR of `a` by source index, in result order.
  void invert(const ResizeAxis &a, int64_t in, const int64_t *&start,
              const int64_t *&outIdx, const float *&weight) {
    std::vector<int64_t> st(size_t(in) + 1, 0), o;
    std::vector<float> wt;
    for (int64_t src : a.index)
      ++st[size_t(src) + 1];
    for (size_t i = 1; i < st.size(); ++i)
      st[i] += st[i - 1];
    o.resize(a.index.size());
    wt.resize(a.index.size());
    std::vector<int64_t> fill(st.begin(), st.end() - 1);
    for (size_t k = 0; k < a.index.size(); ++k) {
      size_t at = size_t(fill[size_t(a.index[k])]++);
      o[at] = int64_t(k) / a.taps;
      wt[at] = a.weight[k];
    }
    start = upload(st);
    outIdx = upload(o);
    weight = upload(wt);
  }

  bool grad, failed = false;
  int64_t planes;
  ResizeParams p;
  std::vector<void *> owned;
};

} // namespace

static KernelOr createResize(CudaBackend &be, const OpSpec &spec) {
  ResizeGeom g;
  OASR_RETURN_IF_ERROR(resizeGeom(spec, g));
  auto k = std::make_unique<ResizeKernel>(be, spec, g);
  if (!k->ok()) {
    return nodeError(spec, "out of device memory for the sampling tables");
  }
  return k;
}

/// Shape: the operand's static shape, uploaded at every run.
static KernelOr createShape(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, DType::I64));
  const auto &shape = spec.inputs[0].shape;
  int64_t rank = int64_t(shape.size());
  int64_t start = spec.attrs.getInt("start", 0),
          end = spec.attrs.getInt("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  auto dims = std::make_shared<std::vector<int64_t>>(
      shape.begin() + start, shape.begin() + std::max(start, end));
  if (int64_t(dims->size()) != spec.outputs[0].numel()) {
    return nodeError(spec, "the result does not match the operand's rank");
  }
  return lambda(be, spec,
                [dims](cudaStream_t s, const auto &, const auto &out) {
                  if (!dims->empty())
                    check(cudaMemcpyAsync(out[0].data, dims->data(),
                                          dims->size() * sizeof(int64_t),
                                          cudaMemcpyHostToDevice, s),
                          "Shape");
                });
}

static KernelOr createConstantOfShape(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 0, 1, 1, 1));
  DType t = spec.outputs[0].dtype;
  double value = spec.attrs.getFloat("value", 0.0);
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [t, value, n](cudaStream_t s, const auto &, const auto &out) {
                  launchFill(t, out[0].data, n, value, s);
                });
}

static KernelOr createRange(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 3, 3, 1, 1));
  DType t = spec.outputs[0].dtype;
  for (size_t i = 0; i < 3; ++i)
    OASR_RETURN_IF_ERROR(checkDType(spec, true, i, t));
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [t, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchRange(t, in[0].data, in[2].data, out[0].data, n, s);
                });
}

static KernelOr createTrilu(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 2, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, spec.outputs[0].dtype));
  if (spec.inputs.size() == 2)
    OASR_RETURN_IF_ERROR(checkDType(spec, true, 1, DType::I64));
  const auto &shape = spec.outputs[0].shape;
  if (shape.size() < 2 || spec.inputs[0].shape != shape) {
    return nodeError(spec, "expects X of rank >= 2 and Y of its shape");
  }
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  int64_t n = spec.outputs[0].numel();
  size_t elem = dtypeSize(spec.outputs[0].dtype);
  bool upper = spec.attrs.getInt("upper", 1) != 0;
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    const int64_t *k = in.size() > 1 ? in[1].template as<int64_t>() : nullptr;
    launchTrilu(in[0].data, out[0].data, elem, rows, cols, n, k, upper, s);
  });
}

/// Sets p's tile fields when `perm` keeps a prefix of dimensions and swaps
/// the two runs of dimensions after it ([.., A.., B..] -> [.., B.., A..]):
/// a batch of matrix transposes, R = |A| rows of C = |B| elements.
static void tileTranspose(const std::vector<int64_t> &x,
                          const std::vector<int64_t> &perm,
                          TransposeParams &p) {
  size_t rank = perm.size(), k = 0;
  while (k < rank && perm[k] == int64_t(k))
    ++k;
  if (k + 1 >= rank)
    return;
  // perm[k..] = j, j+1, .., rank-1, k, k+1, .., j-1 for j = perm[k].
  size_t j = size_t(perm[k]);
  for (size_t d = k; d < rank; ++d) {
    size_t want = d - k + j < rank ? d - k + j : d - k + j - rank + k;
    if (size_t(perm[d]) != want)
      return;
  }
  int64_t batch = 1, rows = 1, cols = 1;
  for (size_t d = 0; d < rank; ++d)
    (d < k ? batch : d < j ? rows : cols) *= x[d];
  if ((rows + 31) / 32 > 65535 || (cols + 31) / 32 > INT32_MAX)
    return;
  p.tileBatch = batch;
  p.tileRows = rows;
  p.tileCols = cols;
}

static KernelOr createTranspose(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  const auto &x = spec.inputs[0].shape;
  std::vector<int64_t> perm = spec.attrs.getInts("perm");
  if (perm.empty())
    for (int64_t i = int64_t(x.size()) - 1; i >= 0; --i)
      perm.push_back(i);
  if (perm.size() != x.size() || x.size() > size_t(kMaxRank)) {
    return nodeError(spec, "perm does not match the operand's rank (<= " +
                               std::to_string(kMaxRank) + ")");
  }
  TransposeParams p;
  p.rank = int(x.size());
  std::vector<int64_t> st = rowMajorStrides(x);
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= int64_t(x.size()) ||
        spec.outputs[0].shape[d] != x[size_t(perm[d])]) {
      return nodeError(spec, "the result's shape is not the permuted operand");
    }
    p.outDims[d] = x[size_t(perm[d])];
    p.inStrides[d] = st[size_t(perm[d])];
  }
  tileTranspose(x, perm, p);
  size_t elem = dtypeSize(spec.outputs[0].dtype);
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [p, elem, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchTranspose(p, in[0].data, out[0].data, elem, n, s);
                });
}

/// ScatterND {reduction}: data, indices, updates -> a copy of data with the
/// indexed slices replaced or reduced into.
static KernelOr createScatterND(CudaBackend &be, const OpSpec &spec) {
  ScatterNDGeom g;
  OASR_RETURN_IF_ERROR(scatterNDGeom(spec, g));
  size_t elem = dtypeSize(spec.inputs[0].dtype), bytes = spec.inputs[0].bytes();
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    if (out[0].data != in[0].data)
      check(cudaMemcpyAsync(out[0].data, in[0].data, bytes,
                            cudaMemcpyDeviceToDevice, s),
            "ScatterND copy");
    launchScatterND(g, in[1].template as<int64_t>(), in[2].data, out[0].data,
                    elem, s);
  });
}

/// CumSum {exclusive, reverse}: X, axis (a constant) -> running sums.
static KernelOr createCumSum(CudaBackend &be, const OpSpec &spec) {
  CumSumGeom g;
  OASR_RETURN_IF_ERROR(cumSumGeom(spec, g));
  bool i64 = spec.inputs[0].dtype == DType::I64;
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchCumSum(g, in[0].data, out[0].data, i64, s);
  });
}

/// GatherElements {axis}: data, indices -> Y; ScatterElements {axis,
/// reduction}: data, indices, updates -> a copy of data with the updates
/// written or added.
static KernelOr createElements(CudaBackend &be, const OpSpec &spec) {
  ElementsGeom g;
  OASR_RETURN_IF_ERROR(elementsGeom(spec, g));
  const bool scatter = spec.opType == "ScatterElements";
  size_t elem = dtypeSize(spec.inputs[0].dtype), bytes = spec.inputs[0].bytes();
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    if (scatter && out[0].data != in[0].data)
      check(cudaMemcpyAsync(out[0].data, in[0].data, bytes,
                            cudaMemcpyDeviceToDevice, s),
            "ScatterElements copy");
    launchElements(g, in[0].data, in[1].data, scatter ? in[2].data : nullptr,
                   out[0].data, elem, s);
  });
}

/// Expand (f32): the operand broadcast onto the result; the shape operand
/// is not read.
static KernelOr createExpand(CudaBackend &be, const OpSpec &spec) {
  DType dt = spec.inputs.empty() ? DType::F32 : spec.inputs[0].dtype;
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 2, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, dt));
  if (dt != DType::F32 && dt != DType::I64 && dt != DType::I32) {
    return nodeError(spec, "the cuda backend expands f32, i64 and i32 "
                           "tensors, not " +
                               std::string(dtypeName(dt)));
  }
  Broadcast b;
  b.rank = std::max<int>(1, int(spec.outputs[0].rank()));
  b.operands = 1;
  b.dims[0] = 1;
  for (size_t d = 0; d < spec.outputs[0].rank(); ++d)
    b.dims[d] = spec.outputs[0].shape[d];
  if (spec.outputs[0].rank() > size_t(kMaxRank) ||
      !broadcastStrides(spec.inputs[0].shape, spec.outputs[0].shape,
                        b.strides[0])) {
    return nodeError(spec, "the operand does not broadcast to the result");
  }
  int64_t n = spec.outputs[0].numel();
  return lambda(
      be, spec,
      [b, n, dt](cudaStream_t s, const auto &in, const auto &out) mutable {
        b.x[0] = in[0].data;
        if (dt == DType::F32)
          launchExpand(b, 1.0f, out[0].template as<float>(), n, s);
        else // integer ids and shapes: the broadcast copy of one operand
          launchNary(b, BinOp::Add, dt, out[0].data, n, s);
      });
}

/// Concat {axis} (operands) and Split {axis} (results): one 2-D device copy
/// per part, rows = the product of the dimensions before the axis.
static KernelOr createConcatSplit(CudaBackend &be, const OpSpec &spec) {
  bool split = spec.opType == "Split";
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, split ? 2 : size_t(1) << 20, 1,
                                  split ? size_t(1) << 20 : 1));
  const TensorDesc &whole = split ? spec.inputs[0] : spec.outputs[0];
  const std::vector<TensorDesc> &parts = split ? spec.outputs : spec.inputs;
  int64_t rank = int64_t(whole.rank());
  int64_t axis;
  OASR_RETURN_IF_ERROR(normAxis(spec, rank, 0, axis));
  int64_t rows = 1;
  for (int64_t d = 0; d < axis; ++d)
    rows *= whole.shape[size_t(d)];
  size_t rowBytes = whole.bytes() / size_t(std::max<int64_t>(rows, 1));
  auto partBytes = std::make_shared<std::vector<size_t>>();
  size_t total = 0;
  for (const TensorDesc &p : parts) {
    if (p.dtype != whole.dtype || p.rank() != whole.rank()) {
      return nodeError(spec, "parts must match the whole's type and rank");
    }
    partBytes->push_back(p.bytes() / size_t(std::max<int64_t>(rows, 1)));
    total += partBytes->back();
  }
  if (total != rowBytes) {
    return nodeError(spec, "the parts do not add up to the whole");
  }
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    size_t off = 0;
    for (size_t i = 0; i < partBytes->size(); ++i) {
      size_t w = (*partBytes)[i];
      if (w && rows)
        check(split
                  ? cudaMemcpy2DAsync(
                        out[i].data, w,
                        static_cast<const char *>(in[0].data) + off, rowBytes,
                        w, size_t(rows), cudaMemcpyDeviceToDevice, s)
                  : cudaMemcpy2DAsync(static_cast<char *>(out[0].data) + off,
                                      rowBytes, in[i].data, w, w, size_t(rows),
                                      cudaMemcpyDeviceToDevice, s),
              split ? "Split" : "Concat");
      off += w;
    }
  });
}

/// True when operand `i` (Gather's indices) holds no index twice: one
/// index, or a constant of the program (OpSpec::inputValues) without
/// repeats. Negative indices count from the end of `axisDim`.
static bool distinctIndices(const OpSpec &spec, size_t i) {
  const TensorDesc &idx = spec.inputs[i];
  if (idx.numel() == 1)
    return true;
  if (i >= spec.inputValues.size() || spec.inputValues[i].size() != idx.bytes())
    return false;
  std::set<int64_t> seen;
  const char *raw = spec.inputValues[i].data();
  for (int64_t k = 0; k < idx.numel(); ++k) {
    int64_t v;
    if (idx.dtype == DType::I64) {
      std::memcpy(&v, raw + k * 8, 8);
    } else {
      int32_t w;
      std::memcpy(&w, raw + k * 4, 4);
      v = w;
    }
    if (v < 0) // may name the same row as a non-negative one
      return false;
    if (!seen.insert(v).second)
      return false;
  }
  return true;
}

/// Gather {axis}: data, indices -> Y; GatherGrad {axis}: shape, indices, dY
/// -> dX.
static KernelOr createGather(CudaBackend &be, const OpSpec &spec) {
  bool grad = spec.opType == "GatherGrad";
  OASR_RETURN_IF_ERROR(checkArity(spec, grad ? 3 : 2, grad ? 3 : 2, 1, 1));
  const TensorDesc &data = grad ? spec.outputs[0] : spec.inputs[0];
  const TensorDesc &idx = spec.inputs[grad ? 1 : 1];
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32) {
    return nodeError(spec, "indices must be i64 or i32");
  }
  // Distinct indices (one, or a constant list without repeats) scatter
  // with plain stores, f32 or bf16; repeats accumulate f32 atomically.
  bool distinct = grad && distinctIndices(spec, 1);
  if (grad)
    OASR_RETURN_IF_ERROR(
        checkAllF32(distinct ? bf16AsF32(spec) : spec, {2}, {0}));
  int64_t rank = int64_t(data.rank());
  int64_t axis;
  OASR_RETURN_IF_ERROR(normAxis(spec, rank, 0, axis));
  GatherParams p;
  for (int64_t d = 0; d < axis; ++d)
    p.outer *= data.shape[size_t(d)];
  p.axisDim = data.shape[size_t(axis)];
  for (int64_t d = axis + 1; d < rank; ++d)
    p.inner *= data.shape[size_t(d)];
  p.count = idx.numel();
  bool i64 = idx.dtype == DType::I64;
  int64_t n = p.outer * p.count * p.inner;
  if (grad && distinct) {
    int64_t dxBytes = int64_t(data.bytes());
    return lambda(be, spec,
                  [=](cudaStream_t s, const auto &in, const auto &out) {
                    launchGatherGradUnique(p, floatAt(in, 2), in[1].data, i64,
                                           floatAt(out, 0), dxBytes, n, s);
                  });
  }
  if (grad) {
    int64_t dxNumel = data.numel();
    return lambda(
        be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
          launchGatherGrad(p, in[2].template as<float>(), in[1].data, i64,
                           out[0].template as<float>(), dxNumel, n, s);
        });
  }
  size_t elem = dtypeSize(data.dtype);
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchGather(p, in[0].data, in[1].data, i64, out[0].data, elem, n, s);
  });
}

void registerShapeKernels(FactoryRegistry &r) {
  for (const char *op :
       {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    r[op] = createCopy;
  r["Constant"] = createConstant;
  r["Shape"] = createShape;
  r["ConstantOfShape"] = createConstantOfShape;
  r["Range"] = createRange;
  r["Trilu"] = createTrilu;
  r["Transpose"] = createTranspose;
  r["Gather"] = createGather;
  r["GatherGrad"] = createGather;
  r["ScatterND"] = createScatterND;
  r["GatherElements"] = createElements;
  r["CumSum"] = createCumSum;
  r["ScatterElements"] = createElements;
  r["Expand"] = createExpand;
  r["Concat"] = createConcatSplit;
  r["Split"] = createConcatSplit;
  r["Pad"] = createPad;
  r["PadGrad"] = createPadGrad;
  r["Slice"] = createSlice;
  r["SliceGrad"] = createSliceGrad;
  r["Resize"] = createResize;
  r["ResizeGrad"] = createResize;
}

} // namespace oasr::rt::cuda
