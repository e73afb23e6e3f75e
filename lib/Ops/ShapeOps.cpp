//===- ShapeOps.cpp - Constants, shapes, views and data movement ----------===//
//
// Registry entries of the ops that compute or rearrange shapes: Constant,
// Shape, views (Reshape, Flatten, Squeeze, Unsqueeze, Identity), Transpose,
// Concat/Split, Pad, Expand, Gather, Slice, reductions, Range, Tile, Trilu,
// ConstantOfShape, and their gradient ops. Small integer results are folded
// at import so shape arithmetic gives static types.
//
//===----------------------------------------------------------------------===//

#include "RuleSupport.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace ::oasr::ops;

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

static bool shapeConstant(ShapeContext &c) {
  if (std::optional<TensorFacts> t = c.attrs.findTensorType("value"))
    return c.setAll(*t);
  if (c.attrs.findFloat("value_float"))
    return c.setAll(TensorFacts::get(kFloat, {}));
  if (c.attrs.findInt("value_int"))
    return c.setAll(TensorFacts::get(kInt64, {}));
  if (auto v = c.attrs.findFloats("value_floats"))
    return c.setAll(TensorFacts::get(kFloat, {int64_t(v->size())}));
  if (auto v = c.attrs.findInts("value_ints"))
    return c.setAll(TensorFacts::get(kInt64, {int64_t(v->size())}));
  return c.fail("Constant without a supported value attribute");
}

static bool shapeConstantOfShape(ShapeContext &c) {
  const FoldedInts *shape = c.needFolded(0);
  if (!shape)
    return false;
  std::optional<TensorFacts> v = c.attrs.findTensorType("value");
  return c.setAll(TensorFacts::get(v ? v->elemType : kFloat, shape->values));
}

static bool shapeShape(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  int64_t rank = c.input(0)->dims.size();
  int64_t start = std::clamp<int64_t>(
      normalizeAxis(c.attrs.getInt("start", 0), rank), 0, rank);
  int64_t end = std::clamp<int64_t>(
      normalizeAxis(c.attrs.getInt("end", rank), rank), 0, rank);
  return c.setAll(TensorFacts::get(int32_t(DataType::Int64),
                                   {std::max<int64_t>(end - start, 0)}));
}

static bool shapeSize(ShapeContext &c) {
  return c.setAll(TensorFacts::get(kInt64, {}));
}

static bool shapeConcat(ShapeContext &c) {
  if (!c.needInputs(c.numInputs()))
    return false;
  TensorFacts y = *c.in[0];
  int64_t axis = normalizeAxis(c.attrs.getInt("axis", 0), y.dims.size());
  if (axis < 0 || axis >= int64_t(y.dims.size())) {
    c.why = "axis out of range";
    return false;
  }
  for (const TensorFacts *t : c.in.drop_front()) {
    if (t->dims.size() != y.dims.size()) {
      c.why = "inputs differ in rank";
      return false;
    }
    y.dims[axis] = (y.dims[axis] < 0 || t->dims[axis] < 0)
                       ? -1
                       : y.dims[axis] + t->dims[axis];
  }
  return c.setAll(y);
}

static bool shapeFlatten(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  const TensorFacts &x = *c.input(0);
  int64_t axis = normalizeAxis(c.attrs.getInt("axis", 1), x.dims.size());
  int64_t outer = 1, inner = 1;
  for (auto [i, d] : llvm::enumerate(x.dims))
    (int64_t(i) < axis ? outer : inner) *= d;
  return c.setAll(TensorFacts::get(x.elemType, {outer, inner}));
}

static bool shapeReshape(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  const FoldedInts *shape = c.needFolded(1);
  if (!shape)
    return false;
  const TensorFacts &x = *c.input(0);
  bool allowZero = c.attrs.getInt("allowzero", 0) != 0;
  TensorFacts y = TensorFacts::get(x.elemType, shape->values);
  int64_t known = 1, inferAt = -1;
  for (auto [i, d] : llvm::enumerate(y.dims)) {
    if (d == 0 && !allowZero)
      d = i < x.dims.size() ? x.dims[i] : -1;
    if (d == -1) {
      inferAt = i;
      continue;
    }
    known *= d;
  }
  if (inferAt >= 0) {
    int64_t total = x.isStatic() ? x.numElements() : -1;
    y.dims[inferAt] = total >= 0 && known > 0 ? total / known : -1;
  }
  return c.setAll(y);
}

static bool shapeTranspose(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  const TensorFacts &x = *c.input(0);
  SmallVector<int64_t> perm;
  if (auto p = c.attrs.findInts("perm"))
    perm = *p;
  else
    for (int64_t i = x.dims.size() - 1; i >= 0; --i)
      perm.push_back(i);
  if (perm.size() != x.dims.size()) {
    c.why = "perm does not match the input rank";
    return false;
  }
  TensorFacts y = TensorFacts::get(x.elemType, {});
  for (int64_t p : perm)
    y.dims.push_back(x.dims[p]);
  return c.setAll(y);
}

static bool shapeSqueeze(ShapeContext &c) {
  StringRef op = c.op;
  if (!c.needInputs(1))
    return false;
  const TensorFacts &x = *c.input(0);
  std::optional<SmallVector<int64_t>> axes = c.attrs.findInts("axes");
  if (c.opset >= 13 && c.present(1)) {
    const FoldedInts *a = c.needFolded(1);
    if (!a)
      return false;
    axes = SmallVector<int64_t>(a->values.begin(), a->values.end());
  }
  TensorFacts y = TensorFacts::get(x.elemType, {});
  if (op == "Squeeze") {
    int64_t rank = x.dims.size();
    llvm::SmallDenseSet<int64_t> drop;
    if (axes)
      for (int64_t a : *axes) {
        if (!checkAxis(c, a, rank))
          return false;
        drop.insert(a);
      }
    for (auto [i, d] : llvm::enumerate(x.dims))
      if (axes ? !drop.count(i) : d != 1)
        y.dims.push_back(d);
  } else {
    if (!axes) {
      c.why = "Unsqueeze without axes";
      return false;
    }
    int64_t rank = x.dims.size() + axes->size();
    llvm::SmallDenseSet<int64_t> insert;
    for (int64_t a : *axes) {
      if (!checkAxis(c, a, rank))
        return false;
      if (!insert.insert(a).second) {
        c.why = "axis " + std::to_string(a) + " appears twice";
        return false;
      }
    }
    size_t next = 0;
    for (int64_t i = 0; i < rank; ++i)
      y.dims.push_back(insert.count(i) ? 1 : x.dims[next++]);
  }
  return c.setAll(y);
}

static bool shapePad(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  const TensorFacts &x = *c.input(0);
  int64_t rank = x.dims.size();
  SmallVector<int64_t> pads;
  if (auto p = c.attrs.findInts("pads")) {
    pads = *p;
  } else {
    const FoldedInts *padValues = c.needFolded(1);
    if (!padValues)
      return false;
    pads.assign(padValues->values.begin(), padValues->values.end());
  }
  SmallVector<int64_t> axes;
  if (const FoldedInts *a = c.getFolded(3))
    for (int64_t v : a->values) {
      if (!checkAxis(c, v, rank))
        return false;
      axes.push_back(v);
    }
  else
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  if (pads.size() != 2 * axes.size()) {
    c.why = "pads do not match the padded axes";
    return false;
  }
  TensorFacts y = x;
  for (auto [i, a] : llvm::enumerate(axes))
    if (y.dims[a] >= 0)
      y.dims[a] += pads[i] + pads[i + axes.size()];
  return c.setAll(y);
}

static bool shapeExpand(ShapeContext &c) {
  const FoldedInts *shape = c.needFolded(1);
  if (!shape)
    return false;
  if (!c.needInputs(1))
    return false;
  TensorFacts target = TensorFacts::get(0, shape->values);
  const TensorFacts *both[] = {c.input(0), &target};
  TensorFacts y;
  y.ranked = true;
  y.elemType = c.input(0)->elemType;
  if (!broadcast(both, y.dims)) {
    c.why = "the shape does not broadcast";
    return false;
  }
  return c.setAll(y);
}

static bool shapeReduce(ShapeContext &c) {
  StringRef op = c.op;
  if (!c.needInputs(1))
    return false;
  const TensorFacts &x = *c.input(0);
  int64_t rank = x.dims.size();
  std::optional<SmallVector<int64_t>> axes = c.attrs.findInts("axes");
  if (op == "ArgMax" || op == "ArgMin")
    axes = SmallVector<int64_t>{c.attrs.getInt("axis", 0)};
  if (c.present(1)) {
    const FoldedInts *a = c.needFolded(1);
    if (!a)
      return false;
    axes = SmallVector<int64_t>(a->values.begin(), a->values.end());
  }
  bool keep = c.attrs.getInt("keepdims", 1) != 0;
  bool noop = c.attrs.getInt("noop_with_empty_axes", 0) != 0;
  if ((!axes || axes->empty()) && noop)
    return c.setAll(x);
  llvm::SmallDenseSet<int64_t> reduced;
  if (axes && !axes->empty())
    for (int64_t a : *axes) {
      if (!checkAxis(c, a, rank))
        return false;
      reduced.insert(a);
    }
  else
    for (int64_t i = 0; i < rank; ++i)
      reduced.insert(i);
  TensorFacts y = TensorFacts::get(x.elemType, {});
  if (op == "ArgMax" || op == "ArgMin")
    y.elemType = int32_t(DataType::Int64);
  for (auto [i, d] : llvm::enumerate(x.dims)) {
    if (!reduced.count(i))
      y.dims.push_back(d);
    else if (keep)
      y.dims.push_back(1);
  }
  return c.setAll(y);
}

static bool shapeGather(ShapeContext &c) {
  if (!c.needInputs(2))
    return false;
  const TensorFacts &data = *c.input(0), &indices = *c.input(1);
  int64_t axis = c.attrs.getInt("axis", 0);
  if (!checkAxis(c, axis, data.dims.size()))
    return false;
  TensorFacts y = TensorFacts::get(data.elemType, {});
  for (int64_t i = 0; i < axis; ++i)
    y.dims.push_back(data.dims[i]);
  y.dims.append(indices.dims.begin(), indices.dims.end());
  for (size_t i = axis + 1; i < data.dims.size(); ++i)
    y.dims.push_back(data.dims[i]);
  return c.setAll(y);
}

/// ONNX Slice on one axis of extent `d`: clamps start and end as the spec
/// does for the step's sign; returns the element count and sets `first`.
static int64_t sliceAxis(int64_t d, int64_t start, int64_t end, int64_t step,
                         int64_t &first) {
  int64_t s = start < 0 ? start + d : start;
  int64_t e = end < 0 ? end + d : end;
  if (step > 0) {
    s = std::clamp<int64_t>(s, 0, d);
    e = std::clamp<int64_t>(e, 0, d);
    first = s;
    return e > s ? (e - s + step - 1) / step : 0;
  }
  s = std::clamp<int64_t>(s, 0, d - 1);
  e = std::clamp<int64_t>(e, -1, d - 1);
  first = s;
  return s > e ? (s - e - step - 1) / -step : 0;
}

static bool shapeSlice(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  const TensorFacts &x = *c.input(0);
  int64_t rank = x.dims.size();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.attrs.findInts("starts").value_or(SmallVector<int64_t>());
    ends = c.attrs.findInts("ends").value_or(SmallVector<int64_t>());
    axes = c.attrs.findInts("axes").value_or(SmallVector<int64_t>());
  } else {
    const FoldedInts *s = c.needFolded(1), *e = s ? c.needFolded(2) : nullptr;
    if (!s || !e)
      return false;
    starts.assign(s->values.begin(), s->values.end());
    ends.assign(e->values.begin(), e->values.end());
    if (c.present(3)) {
      const FoldedInts *a = c.needFolded(3);
      if (!a)
        return false;
      axes.assign(a->values.begin(), a->values.end());
    }
    if (c.present(4)) {
      const FoldedInts *st = c.needFolded(4);
      if (!st)
        return false;
      steps.assign(st->values.begin(), st->values.end());
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    c.why = "starts/ends/axes/steps differ in length";
    return false;
  }
  TensorFacts y = x;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = normalizeAxis(axes[i], rank);
    if (a < 0 || a >= rank || steps[i] == 0) {
      c.why = "axis out of range or zero step";
      return false;
    }
    int64_t d = x.dims[a];
    if (d < 0) {
      y.dims[a] = -1;
      continue;
    }
    int64_t first;
    y.dims[a] = sliceAxis(d, starts[i], ends[i], steps[i], first);
  }
  return c.setAll(y);
}

static bool shapeSplit(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  const TensorFacts &x = *c.input(0);
  int64_t axis = c.attrs.getInt("axis", 0);
  if (!checkAxis(c, axis, x.dims.size()))
    return false;
  SmallVector<int64_t> split;
  if (auto s = c.attrs.findInts("split"))
    split = *s;
  else if (const FoldedInts *s = c.getFolded(1))
    split.assign(s->values.begin(), s->values.end());
  int64_t d = x.dims[axis];
  if (split.empty()) {
    if (d < 0) {
      c.why = "the split axis has an unknown size";
      return false;
    }
    int64_t n = c.numOutputs(), chunk = (d + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      split.push_back(std::min(chunk, d - i * chunk));
  }
  if (split.size() != c.numOutputs()) {
    c.why = "split sizes do not match the outputs";
    return false;
  }
  for (size_t i = 0; i < c.numOutputs(); ++i) {
    c.out[i] = x;
    c.out[i].dims[axis] = split[i];
  }
  return true;
}

static bool shapeRange(ShapeContext &c) {
  const FoldedInts *s = c.needFolded(0), *l = s ? c.needFolded(1) : nullptr,
                   *d = l ? c.needFolded(2) : nullptr;
  if (!d || s->values.size() != 1 || l->values.size() != 1 ||
      d->values.size() != 1 || d->values[0] == 0)
    return false;
  int64_t n = (l->values[0] - s->values[0] + d->values[0] -
               (d->values[0] > 0 ? 1 : -1)) /
              d->values[0];
  return c.setAll(TensorFacts::get(s->elemType, {std::max<int64_t>(n, 0)}));
}

/// GatherElements (the indices' shape, the data's element type) and
/// ScatterElements (the data's type): indices of the data's rank, and
/// constant indices within the axis.
static bool shapeElements(ShapeContext &c) {
  if (!c.needInputs(2))
    return false;
  const TensorFacts &data = *c.input(0);
  if (c.input(1)->dims.size() != data.dims.size())
    return c.fail("indices must have the data's rank");
  int64_t rank = int64_t(data.dims.size());
  int64_t axis = c.attrs.getInt("axis", 0);
  if (axis < -rank || axis >= rank)
    return c.fail(llvm::formatv("axis {0} is outside [-{1}, {1})", axis, rank));
  int64_t dim = data.dims[size_t(axis < 0 ? axis + rank : axis)];
  if (const FoldedInts *idx = c.getFolded(1); idx && dim >= 0)
    for (auto [i, v] : llvm::enumerate(idx->values))
      if (v < -dim || v >= dim)
        return c.fail(
            llvm::formatv("index {0} at {1} is outside [-{2}, {2}) (axis {3})",
                          v, i, dim, axis));
  TensorFacts y = c.op == "GatherElements" ? *c.input(1) : data;
  y.elemType = data.elemType;
  return c.setAll(y);
}

static bool shapeTile(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  const FoldedInts *r = c.needFolded(1);
  if (!r || r->values.size() != c.input(0)->dims.size())
    return false;
  TensorFacts y = *c.input(0);
  for (auto [i, d] : llvm::enumerate(y.dims))
    d = d < 0 ? -1 : d * r->values[i];
  return c.setAll(y);
}

//===----------------------------------------------------------------------===//
// Fold rules (small integer tensors)
//===----------------------------------------------------------------------===//

static int64_t strideProduct(llvm::ArrayRef<int64_t> dims, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < dims.size(); ++i)
    p *= dims[i];
  return p;
}

/// The folded values of every given input, or false when one is not known.
static bool allFolded(FoldContext &c,
                      SmallVectorImpl<const FoldedInts *> &ins) {
  for (size_t i = 0; i < c.folded.size(); ++i) {
    if (!c.in[i] && !c.folded[i])
      continue; // left out
    if (!c.folded[i])
      return false;
    ins.push_back(c.folded[i]);
  }
  return !ins.empty();
}

static bool foldConstant(FoldContext &c) {
  if (auto v = c.attrs.findTensorInts("value")) {
    c.result.values.assign(v->begin(), v->end());
    return true;
  }
  if (auto v = c.attrs.findInt("value_int")) {
    c.result.values.push_back(*v);
    return true;
  }
  if (auto v = c.attrs.findInts("value_ints")) {
    c.result.values.assign(v->begin(), v->end());
    return true;
  }
  return false;
}

static bool foldShape(FoldContext &c) {
  if (c.in.empty() || !c.in[0] || !c.in[0]->isStatic())
    return false;
  const TensorFacts &x = *c.in[0];
  int64_t rank = x.dims.size();
  int64_t start = std::clamp<int64_t>(
      normalizeAxis(c.attrs.getInt("start", 0), rank), 0, rank);
  for (int64_t i = 0; i < c.outType.numElements(); ++i)
    c.result.values.push_back(x.dims[start + i]);
  return true;
}

static bool foldSize(FoldContext &c) {
  if (c.in.empty() || !c.in[0] || !c.in[0]->isStatic())
    return false;
  c.result.values.push_back(c.in[0]->numElements());
  return true;
}

static bool foldConstantOfShape(FoldContext &c) {
  int64_t fill = 0;
  if (c.attrs.has("value")) {
    auto v = c.attrs.findTensorInts("value");
    if (!v || v->empty())
      return false;
    fill = v->front();
  }
  c.result.values.assign(c.outType.numElements(), fill);
  return true;
}

bool ::oasr::ops::foldCopy(FoldContext &c) {
  SmallVector<const FoldedInts *> ins;
  if (!allFolded(c, ins))
    return false;
  c.result.values = ins[0]->values;
  if (c.op == "Cast" && c.outType.elemType == kBool)
    for (int64_t &v : c.result.values)
      v = v != 0;
  return true;
}

static bool foldConcat(FoldContext &c) {
  SmallVector<const FoldedInts *> ins;
  if (!allFolded(c, ins))
    return false;
  const TensorFacts &y = c.outType;
  int64_t axis = normalizeAxis(c.attrs.getInt("axis", 0), y.dims.size());
  if (axis < 0 || axis >= int64_t(y.dims.size()))
    return false;
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= y.dims[i];
  for (int64_t o = 0; o < outer; ++o)
    for (const FoldedInts *v : ins) {
      int64_t chunk = strideProduct(v->dims, axis);
      c.result.values.append(v->values.begin() + o * chunk,
                             v->values.begin() + (o + 1) * chunk);
    }
  return true;
}

static bool foldGather(FoldContext &c) {
  SmallVector<const FoldedInts *> ins;
  if (!allFolded(c, ins) || ins.size() < 2)
    return false;
  const FoldedInts &data = *ins[0], &idx = *ins[1];
  int64_t rank = data.dims.size();
  if (rank == 0)
    return false;
  int64_t axis = normalizeAxis(c.attrs.getInt("axis", 0), rank);
  if (axis < 0 || axis >= rank)
    return false;
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= data.dims[i];
  int64_t inner = strideProduct(data.dims, axis + 1);
  int64_t n = data.dims[axis];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k : idx.values) {
      int64_t j = k < 0 ? k + n : k;
      if (j < 0 || j >= n)
        return false;
      auto begin = data.values.begin() + (o * n + j) * inner;
      c.result.values.append(begin, begin + inner);
    }
  return true;
}

/// Slice of a folded tensor of any rank, with axes and (negative) steps:
/// Swin's window padding reverses a [-1, 2] reshape of the pads along axis 0.
/// Slice-1 reads starts/ends/axes from attributes, Slice-10 from operands.
static bool foldSlice(FoldContext &c) {
  if (c.folded.empty() || !c.folded[0])
    return false;
  const FoldedInts &x = *c.folded[0];
  int64_t rank = x.dims.size();
  if (rank == 0)
    return false;
  auto operand = [&](size_t i) -> const FoldedInts * {
    return i < c.folded.size() ? c.folded[i] : nullptr;
  };
  SmallVector<int64_t> starts, ends, axes, steps;
  if (c.in.size() > 1) { // Slice-10 and later
    for (size_t i = 1; i < c.in.size(); ++i)
      if (c.in[i] && !operand(i))
        return false; // an operand not known at import time
    starts.assign(operand(1)->values.begin(), operand(1)->values.end());
    if (!operand(2))
      return false;
    ends.assign(operand(2)->values.begin(), operand(2)->values.end());
    if (const FoldedInts *a = operand(3))
      axes.assign(a->values.begin(), a->values.end());
    if (const FoldedInts *st = operand(4))
      steps.assign(st->values.begin(), st->values.end());
  } else {
    auto s = c.attrs.findInts("starts"), e = c.attrs.findInts("ends");
    if (!s || !e)
      return false;
    starts.assign(s->begin(), s->end());
    ends.assign(e->begin(), e->end());
    if (auto a = c.attrs.findInts("axes"))
      axes.assign(a->begin(), a->end());
  }
  if (axes.empty())
    for (int64_t i = 0; i < int64_t(starts.size()); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return false;
  // Per dimension: first index, step and count (the whole axis by default).
  SmallVector<int64_t> first(rank, 0), step(rank, 1),
      count(x.dims.begin(), x.dims.end());
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t axis = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (axis < 0 || axis >= rank || steps[k] == 0)
      return false;
    count[axis] =
        sliceAxis(x.dims[axis], starts[k], ends[k], steps[k], first[axis]);
    step[axis] = steps[k];
  }
  int64_t n = 1;
  for (int64_t k : count)
    n *= k;
  if (n != c.outType.numElements())
    return false;
  SmallVector<int64_t> index(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t offset = 0;
    for (int64_t i = 0; i < rank; ++i)
      offset += (first[i] + index[i] * step[i]) * strideProduct(x.dims, i + 1);
    c.result.values.push_back(x.values[offset]);
    for (int64_t i = rank - 1; i >= 0; --i) {
      if (++index[i] < count[i])
        break;
      index[i] = 0;
    }
  }
  return true;
}

static bool foldRange(FoldContext &c) {
  SmallVector<const FoldedInts *> ins;
  if (!allFolded(c, ins) || ins.size() != 3)
    return false;
  int64_t s = ins[0]->values[0], d = ins[2]->values[0];
  for (int64_t i = 0; i < c.outType.numElements(); ++i)
    c.result.values.push_back(s + i * d);
  return true;
}

/// Transpose of a folded tensor (shape chains such as Swin's window
/// padding go through one).
static bool foldTranspose(FoldContext &c) {
  SmallVector<const FoldedInts *> ins;
  if (!allFolded(c, ins))
    return false;
  const FoldedInts &x = *ins[0];
  int64_t rank = x.dims.size();
  SmallVector<int64_t> perm;
  if (auto p = c.attrs.findInts("perm"))
    perm = *p;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  if (int64_t(perm.size()) != rank)
    return false;
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t i = rank - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * x.dims[i + 1];
  const TensorFacts &y = c.outType;
  SmallVector<int64_t> index(rank, 0);
  for (int64_t k = 0, n = y.numElements(); k < n; ++k) {
    int64_t offset = 0;
    for (int64_t i = 0; i < rank; ++i)
      offset += index[i] * strides[perm[i]];
    c.result.values.push_back(x.values[offset]);
    for (int64_t i = rank - 1; i >= 0; --i) {
      if (++index[i] < y.dims[i])
        break;
      index[i] = 0;
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

static LogicalResult gradConcat(GradContext &c) {
  int64_t axis = intAttr(c.fwd, "axis", 0);
  auto y = cast<RankedTensorType>(c.out(0).getType());
  if (axis < 0)
    axis += y.getRank();
  SmallVector<Type> types;
  SmallVector<int64_t> split;
  for (Value v : c.fwd->getOperands()) {
    types.push_back(v.getType());
    split.push_back(cast<RankedTensorType>(v.getType()).getDimSize(axis));
  }
  auto &b = c.b();
  NodeOp g = c.node("Split", types, {c.dOut()},
                    {b.getNamedAttr("axis", b.getI64IntegerAttr(axis)),
                     b.getNamedAttr("split", b.getI64ArrayAttr(split))});
  c.dIns.assign(g->getResults().begin(), g->getResults().end());
  return success();
}

static LogicalResult gradView(GradContext &c) {
  // Flatten, Reshape, Squeeze, Unsqueeze: a view back to the input type.
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  for (unsigned i = 1; i < c.fwd->getNumOperands(); ++i)
    if (c.wants(i))
      return c.fail("the shape operand cannot carry a gradient");
  c.dIns[0] = c.reshape(c.dOut(), typeOf(c, 0));
  return success();
}

static LogicalResult gradIdentity(GradContext &c) {
  c.dIns = {c.dOut()};
  return success();
}

static LogicalResult gradPad(GradContext &c) {
  if (auto mode = c.fwd->getAttrOfType<StringAttr>("mode"))
    if (mode.getValue() != "constant")
      return c.fail("only mode \"constant\" has a gradient rule");
  std::optional<SmallVector<int64_t>> pads = intsOf(c.fwd->getAttr("pads"));
  if (c.fwd->getNumOperands() > 1)
    pads = intsOf(constantOf(c.in(1)));
  if (!pads)
    return c.fail("pads are not a constant");
  if (c.fwd->getNumOperands() > 3)
    return c.fail("the 'axes' operand is not supported");
  auto &b = c.b();
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] = c.node1("PadGrad", typeOf(c, 0), {c.dOut()},
                      {b.getNamedAttr("pads", b.getI64ArrayAttr(*pads))});
  return success();
}

static LogicalResult gradSlice(GradContext &c) {
  // Opset >= 10: data, starts, ends[, axes[, steps]] as (computable) inputs.
  auto x = cast<RankedTensorType>(typeOf(c, 0));
  SmallVector<SmallVector<int64_t>> lists;
  for (unsigned i = 1; i < c.fwd->getNumOperands(); ++i) {
    if (c.wants(i))
      return c.fail("starts/ends cannot carry a gradient");
    auto v = evalInts(c.in(i));
    if (!v)
      return c.fail(
          "starts/ends/axes/steps are not computable at compile time");
    lists.push_back(*v);
  }
  if (lists.size() < 2) {
    // Opset 1: attributes.
    auto starts = intsOf(c.fwd->getAttr("starts"));
    auto ends = intsOf(c.fwd->getAttr("ends"));
    if (!starts || !ends)
      return c.fail("missing starts/ends");
    lists = {*starts, *ends};
    if (auto axes = intsOf(c.fwd->getAttr("axes")))
      lists.push_back(*axes);
  }
  SmallVector<int64_t> starts = lists[0], ends = lists[1], axes, steps;
  if (lists.size() > 2)
    axes = lists[2];
  else
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (lists.size() > 3)
    steps = lists[3];
  else
    steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || ends.size() != starts.size() ||
      steps.size() != starts.size())
    return c.fail("starts, ends, axes and steps differ in length");
  // Normalise to non-negative, clamped bounds as the runtime will use them.
  for (size_t i = 0; i < starts.size(); ++i) {
    if (axes[i] < 0)
      axes[i] += x.getRank();
    int64_t dim = x.getDimSize(axes[i]);
    if (steps[i] <= 0)
      return c.fail("negative steps are not supported");
    auto clamp = [&](int64_t v) {
      if (v < 0)
        v += dim;
      return std::min(std::max<int64_t>(v, 0), dim);
    };
    starts[i] = clamp(starts[i]);
    ends[i] = clamp(ends[i]);
  }
  auto &b = c.b();
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] = c.node1("SliceGrad", x, {c.dOut()},
                      {b.getNamedAttr("starts", b.getI64ArrayAttr(starts)),
                       b.getNamedAttr("ends", b.getI64ArrayAttr(ends)),
                       b.getNamedAttr("axes", b.getI64ArrayAttr(axes)),
                       b.getNamedAttr("steps", b.getI64ArrayAttr(steps))});
  return success();
}

static LogicalResult gradTranspose(GradContext &c) {
  auto x = cast<RankedTensorType>(typeOf(c, 0));
  SmallVector<int64_t> perm(x.getRank());
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (auto p = intsOf(c.fwd->getAttr("perm")))
    perm = *p;
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  auto &b = c.b();
  c.dIns = {c.node1("Transpose", x, {c.dOut()},
                    {b.getNamedAttr("perm", b.getI64ArrayAttr(inverse))})};
  return success();
}

static LogicalResult gradGather(GradContext &c) {
  if (c.wants(1))
    return c.fail("indices cannot carry a gradient");
  auto x = cast<RankedTensorType>(typeOf(c, 0));
  auto &b = c.b();
  c.dIns = {c.node1("GatherGrad", x, {c.shape(x.getShape()), c.in(1), c.dOut()},
                    {b.getNamedAttr("axis", b.getI64IntegerAttr(
                                                intAttr(c.fwd, "axis", 0)))}),
            Value()};
  return success();
}

/// GatherElements and ScatterElements keep their form; constant indices
/// outside the axis are an error naming the node before anything runs
/// (the kernels check the others as they run).
static LogicalResult checkElements(NodeOp node) {
  auto data = cast<RankedTensorType>(node->getOperand(0).getType());
  int64_t axis = intAttr(node, "axis", 0);
  if (axis < 0)
    axis += data.getRank();
  DenseElementsAttr idx = constantOf(node->getOperand(1));
  if (!idx || axis < 0 || axis >= data.getRank() ||
      !isa<IntegerType>(idx.getElementType()))
    return success();
  int64_t dim = data.getDimSize(axis), i = 0;
  for (APInt v : idx.getValues<APInt>()) {
    int64_t k = v.getSExtValue();
    if (k < -dim || k >= dim)
      return node.emitError("'")
             << node.getOpType() << "' node \""
             << mlir::oasr::nodeName(node.getLoc()).value_or("") << "\": index "
             << k << " at " << i << " is outside [" << -dim << ", " << dim
             << ") (axis " << axis << ")";
    ++i;
  }
  return success();
}

/// CumSum: dX is the running sum of dY the other way along the axis.
static LogicalResult gradCumSum(GradContext &c) {
  if (!scalarOf(c.in(1)))
    return c.fail("the axis is not a constant");
  auto &b = c.b();
  c.dIns = {c.node1("CumSum", typeOf(c, 0), {c.dOut(), c.in(1)},
                    {b.getNamedAttr("exclusive", b.getI64IntegerAttr(intAttr(
                                                     c.fwd, "exclusive", 0))),
                     b.getNamedAttr("reverse", b.getI64IntegerAttr(!intAttr(
                                                   c.fwd, "reverse", 0)))}),
            Value()};
  return success();
}

/// GatherElements: dData is dY added into zeros where the indices point.
static LogicalResult gradGatherElements(GradContext &c) {
  if (c.wants(1))
    return c.fail("indices cannot carry a gradient");
  auto &b = c.b();
  Type x = typeOf(c, 0);
  SmallVector<NamedAttribute> attrs = onnxAttrs(c.fwd);
  attrs.push_back(b.getNamedAttr("reduction", b.getStringAttr("add")));
  c.dIns = {c.node1("ScatterElements", x, {c.splat(x, 0.0), c.in(1), c.dOut()},
                    attrs),
            Value()};
  return success();
}

/// ScatterElements (none or add): dUpdates gathers dY where the indices
/// point; dData is dY, with those elements zeroed when they were replaced.
static LogicalResult gradScatterElements(GradContext &c) {
  if (c.wants(1))
    return c.fail("indices cannot carry a gradient");
  auto red = c.fwd->getAttrOfType<StringAttr>("reduction");
  bool add = red && red.getValue() == "add";
  if (red && !add && red.getValue() != "none")
    return c.fail("gradients of reduction '" + red.getValue() +
                  "' are not supported");
  auto &b = c.b();
  SmallVector<NamedAttribute> axis;
  if (Attribute a = c.fwd->getAttr("axis"))
    axis.push_back(b.getNamedAttr("axis", a));
  c.dIns.assign(3, Value());
  if (c.wants(0)) {
    SmallVector<NamedAttribute> none(axis);
    none.push_back(b.getNamedAttr("reduction", b.getStringAttr("none")));
    c.dIns[0] =
        add ? c.dOut()
            : c.node1("ScatterElements", typeOf(c, 0),
                      {c.dOut(), c.in(1), c.splat(typeOf(c, 2), 0.0)}, none);
  }
  if (c.wants(2))
    c.dIns[2] =
        c.node1("GatherElements", typeOf(c, 2), {c.dOut(), c.in(1)}, axis);
  return success();
}

/// ReduceMean (`mean`) or ReduceSum: dY broadcast back to X, over n values.
/// A reduction's input shape with its reduced axes as 1 (and how many
/// elements each result reduces), from the axes attribute or constant
/// operand.
static LogicalResult reducedShape(GradContext &c, SmallVector<int64_t> &kept,
                                  int64_t &count) {
  auto x = cast<RankedTensorType>(typeOf(c, 0));
  std::optional<SmallVector<int64_t>> axes = intsOf(c.fwd->getAttr("axes"));
  if (c.fwd->getNumOperands() > 1) {
    axes = intsOf(constantOf(c.in(1)));
    if (!axes)
      return c.fail("axes are not a constant");
  }
  SmallVector<int64_t> all(x.getRank());
  std::iota(all.begin(), all.end(), 0);
  if (!axes || axes->empty()) {
    if (intAttr(c.fwd, "noop_with_empty_axes", 0))
      return c.fail("noop_with_empty_axes is not supported");
    axes = all;
  }
  kept.assign(x.getShape().begin(), x.getShape().end());
  count = 1;
  for (int64_t a : *axes) {
    if (a < 0)
      a += x.getRank();
    count *= x.getDimSize(a);
    kept[a] = 1;
  }
  return success();
}

namespace {
/// What the elementwise reduction rules build on: X's type, the result's
/// type with the reduced axes kept as 1, the reduced axes, and values of
/// the kept shape broadcast back to X.
struct KeptReduction {
  GradContext &c;
  RankedTensorType x, kept;
  SmallVector<int64_t> axes;

  Value full(Value v) {
    return c.node1("Expand", x, {c.reshape(v, kept), c.shape(x.getShape())});
  }
  /// `op` over the reduced axes, keepdims 1.
  Value reduce(StringRef op, Value v) {
    return c.node1(
        op, kept, {v, c.shape(axes)},
        {c.b().getNamedAttr("keepdims", c.b().getI64IntegerAttr(1))});
  }
  /// 1 where `mask` holds, else 0, in X's type.
  Value ones(Value mask) {
    return c.node1(
        "Cast", x, {mask},
        {c.b().getNamedAttr(
            "to", c.b().getI64IntegerAttr(onnxFloatType(x.getElementType())))});
  }
  Value scalar(double v) {
    return c.splat(RankedTensorType::get({}, x.getElementType()), v);
  }
};
} // namespace

static FailureOr<KeptReduction> keptReduction(GradContext &c) {
  auto x = cast<RankedTensorType>(typeOf(c, 0));
  SmallVector<int64_t> kept;
  int64_t count;
  if (failed(reducedShape(c, kept, count)))
    return failure();
  KeptReduction r{c, x, x.clone(kept), {}};
  for (auto [i, k] : llvm::enumerate(kept))
    if (k == 1 && x.getDimSize(int64_t(i)) != 1)
      r.axes.push_back(int64_t(i));
  return r;
}

/// ReduceMax and ReduceMin: dY to the elements equal to the result, shared
/// evenly among ties (torch.amax's rule).
static LogicalResult gradReduceExtreme(GradContext &c) {
  FailureOr<KeptReduction> r = keptReduction(c);
  if (failed(r))
    return failure();
  Value hit = c.node1("Equal", r->x.clone(c.b().getI1Type()),
                      {c.in(0), r->full(c.out(0))});
  Value ties = r->reduce("ReduceSum", r->ones(hit));
  Value share = c.node1("Div", r->kept, {c.reshape(c.dOut(), r->kept), ties});
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] = c.node1("Where", r->x, {hit, r->full(share), r->scalar(0.0)});
  return success();
}

/// ReduceProd: dX = dY * prod / x where x is not zero; at a zero, dY times
/// the product of the others, which is not zero only when it is the one
/// zero (torch.prod's rule, without dividing by zero).
static LogicalResult gradReduceProd(GradContext &c) {
  FailureOr<KeptReduction> r = keptReduction(c);
  if (failed(r))
    return failure();
  RankedTensorType x = r->x, keptT = r->kept;
  auto i1 = c.b().getI1Type();
  Value zero = r->scalar(0.0), one = r->scalar(1.0);
  Value isZero = c.node1("Equal", x.clone(i1), {c.in(0), zero});
  Value zeros = r->reduce("ReduceSum", r->ones(isZero));
  Value others =
      r->reduce("ReduceProd", c.node1("Where", x, {isZero, one, c.in(0)}));
  Value g = c.reshape(c.dOut(), keptT);
  Value onlyZero = c.node1("Equal", keptT.clone(i1), {zeros, one});
  Value atZero = c.node1(
      "Mul", keptT, {g, c.node1("Where", keptT, {onlyZero, others, zero})});
  Value elsewhere =
      c.node1("Div", x,
              {r->full(c.node1("Mul", keptT, {g, c.reshape(c.out(0), keptT)})),
               c.in(0)});
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] = c.node1("Where", x, {isZero, r->full(atZero), elsewhere});
  return success();
}

static LogicalResult gradReduce(GradContext &c, bool mean) {
  auto x = cast<RankedTensorType>(typeOf(c, 0));
  SmallVector<int64_t> kept;
  int64_t count;
  if (failed(reducedShape(c, kept, count)))
    return failure();
  // Broadcast dY (with the reduced axes kept as 1) back to X, scaled by 1/n.
  Value g = c.reshape(c.dOut(), x.clone(kept));
  Value e = c.node1("Expand", x, {g, c.shape(x.getShape())});
  auto scalar = RankedTensorType::get({}, x.getElementType());
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] =
      mean ? c.node1("Mul", x, {e, c.splat(scalar, 1.0 / double(count))}) : e;
  return success();
}

static LogicalResult gradReduceMean(GradContext &c) {
  return gradReduce(c, /*mean=*/true);
}

static LogicalResult gradReduceSum(GradContext &c) {
  return gradReduce(c, /*mean=*/false);
}

static LogicalResult gradSplit(GradContext &c) {
  // The parts' gradients (zeros where none flows back) joined again.
  if (c.wants(1))
    return c.fail("the split sizes cannot carry a gradient");
  auto x = cast<RankedTensorType>(typeOf(c, 0));
  int64_t axis = intAttr(c.fwd, "axis", 0);
  if (axis < 0)
    axis += x.getRank();
  SmallVector<Value> parts;
  for (unsigned i = 0; i < c.fwd->getNumResults(); ++i)
    parts.push_back(c.dOut(i));
  auto &b = c.b();
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] = c.node1("Concat", x, parts,
                      {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))});
  return success();
}

static LogicalResult gradExpand(GradContext &c) {
  // The broadcast gradient summed back to the operand's shape.
  if (c.wants(1))
    return c.fail("the shape operand cannot carry a gradient");
  c.dIns = {c.sumTo(c.dOut(), typeOf(c, 0)), Value()};
  return success();
}

//===----------------------------------------------------------------------===//
// Costs
//===----------------------------------------------------------------------===//

static Work costReduce(Operation *op) {
  return {double(numel(op->getOperand(0))), trafficBytes(op)};
}

//===----------------------------------------------------------------------===//
// Entries
//===----------------------------------------------------------------------===//

/// GatherGrad(shape, indices, dY) -> dX of the folded `shape`, dY's type
/// (ONNX Runtime training graphs carry it; autodiff types its own).
static bool shapeGatherGrad(ShapeContext &c) {
  if (!c.needInputs(3))
    return false;
  const FoldedInts *shape = c.needFolded(0);
  if (!shape)
    return false;
  return c.setAll(TensorFacts::get(c.input(2)->elemType, shape->values));
}

//===----------------------------------------------------------------------===//
// Ops that train as other ops (training forms)
//===----------------------------------------------------------------------===//

static InFlightDiagnostic nodeFailure(NodeOp node) {
  return node.emitError("'")
         << node.getOpType() << "' node \""
         << mlir::oasr::nodeName(node.getLoc()).value_or("") << "\": ";
}

/// Tile by constant repeats: X [d...] as [1, d0, 1, d1, ...], expanded to
/// [r0, d0, r1, d1, ...] and reshaped to [r0 d0, r1 d1, ...].
static LogicalResult formTile(NodeOp node) {
  auto xt = cast<RankedTensorType>(node->getOperand(0).getType());
  std::optional<SmallVector<int64_t>> repeats =
      intsOf(constantOf(node->getOperand(1)));
  if (!repeats || int64_t(repeats->size()) != xt.getRank())
    return nodeFailure(node) << "repeats must be a constant with one value "
                                "per axis of the input";
  SmallVector<int64_t> spread, expanded;
  for (auto [d, r] : llvm::zip(xt.getShape(), *repeats)) {
    spread.append({1, d});
    expanded.append({r, d});
  }
  OpBuilder b(node);
  NodeBuilder nb{b};
  Value x = reshapeAt(node, node->getOperand(0), spread);
  Value e = nb.node(node.getLoc(), "Expand", {xt.clone(expanded)},
                    {x, nb.shapeConstant(node.getLoc(), expanded)})
                ->getResult(0);
  return replaceBy(
      node,
      reshapeAt(
          node, e,
          cast<RankedTensorType>(node->getResult(0).getType()).getShape()));
}

/// DepthToSpace (DCR, the default, or CRD) and SpaceToDepth of X
/// [N, C, H, W] as Reshape, Transpose, Reshape (PyTorch's pixel_shuffle
/// and pixel_unshuffle).
static LogicalResult formDepthSpace(NodeOp node, bool toSpace) {
  auto xt = cast<RankedTensorType>(node->getOperand(0).getType());
  int64_t bs = intAttr(node, "blocksize", 0);
  if (xt.getRank() != 4 || bs < 1)
    return nodeFailure(node) << "needs X [N, C, H, W] and a blocksize >= 1";
  int64_t n = xt.getDimSize(0), c = xt.getDimSize(1), h = xt.getDimSize(2),
          w = xt.getDimSize(3);
  auto out = cast<RankedTensorType>(node->getResult(0).getType()).getShape();
  Value x = node->getOperand(0), y;
  if (toSpace) {
    if (c % (bs * bs))
      return nodeFailure(node) << c << " channels are not a multiple of "
                               << "blocksize^2 = " << bs * bs;
    bool crd = false;
    if (auto m = node->getAttrOfType<StringAttr>("mode"))
      crd = m.getValue() == "CRD";
    int64_t cc = c / (bs * bs);
    y = crd ? transposeAt(node, reshapeAt(node, x, {n, cc, bs, bs, h, w}),
                          {0, 1, 4, 2, 5, 3})
            : transposeAt(node, reshapeAt(node, x, {n, bs, bs, cc, h, w}),
                          {0, 3, 4, 1, 5, 2});
  } else {
    if (h % bs || w % bs)
      return nodeFailure(node) << "H " << h << " and W " << w
                               << " must be multiples of the blocksize " << bs;
    y = transposeAt(node, reshapeAt(node, x, {n, c, h / bs, bs, w / bs, bs}),
                    {0, 3, 5, 1, 2, 4});
  }
  return replaceBy(node, reshapeAt(node, y, out));
}

static bool shapeDepthToSpace(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  TensorFacts y = *c.input(0);
  int64_t bs = c.attrs.getInt("blocksize", 0);
  if (y.dims.size() != 4 || bs < 1)
    return c.fail("needs X [N, C, H, W] and a blocksize >= 1");
  bool toSpace = c.op == "DepthToSpace";
  if (y.dims[1] >= 0)
    y.dims[1] = toSpace ? y.dims[1] / (bs * bs) : y.dims[1] * bs * bs;
  for (int i : {2, 3})
    if (y.dims[i] >= 0)
      y.dims[i] = toSpace ? y.dims[i] * bs : y.dims[i] / bs;
  return c.setAll(y);
}

/// The reductions built on ReduceSum: L1 (of |x|), L2 (the square root of
/// the sum of squares), SumSquare and LogSum, with the node's axes and
/// keepdims.
static LogicalResult formReduceViaSum(NodeOp node) {
  StringRef op = node.getOpType();
  OpBuilder b(node);
  NodeBuilder nb{b};
  Location loc = node.getLoc();
  Value x = node->getOperand(0);
  Type xt = x.getType(), yt = node->getResult(0).getType();
  if (op == "ReduceL1")
    x = nb.node(loc, "Abs", {xt}, {x})->getResult(0);
  else if (op == "ReduceL2" || op == "ReduceSumSquare")
    x = nb.node(loc, "Mul", {xt}, {x, x})->getResult(0);
  SmallVector<Value> operands{x};
  SmallVector<NamedAttribute> attrs;
  for (StringRef a : {"keepdims", "noop_with_empty_axes"})
    if (Attribute v = node->getAttr(a))
      attrs.push_back(b.getNamedAttr(a, v));
  if (node->getNumOperands() > 1) {
    operands.push_back(node->getOperand(1));
  } else if (std::optional<SmallVector<int64_t>> axes =
                 intsOf(node->getAttr("axes"))) {
    auto t = RankedTensorType::get({int64_t(axes->size())}, b.getI64Type());
    operands.push_back(
        nb.constant(loc, DenseElementsAttr::get(t, ArrayRef(*axes))));
  }
  Value s = nb.node(loc, "ReduceSum", {yt}, operands, attrs)->getResult(0);
  if (op == "ReduceL2")
    s = nb.node(loc, "Sqrt", {yt}, {s})->getResult(0);
  else if (op == "ReduceLogSum")
    s = nb.node(loc, "Log", {yt}, {s})->getResult(0);
  return replaceBy(node, s);
}

/// ReduceLogSumExp as max + log(sum(exp(x - max))), the max per result
/// (ReduceMax, kept dims) so no exp overflows.
static LogicalResult formReduceLogSumExp(NodeOp node) {
  OpBuilder b(node);
  NodeBuilder nb{b};
  Location loc = node.getLoc();
  Value x = node->getOperand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  Type yt = node->getResult(0).getType();
  SmallVector<Value> axesOperand;
  SmallVector<NamedAttribute> keep{
      b.getNamedAttr("keepdims", b.getI64IntegerAttr(1))};
  std::optional<SmallVector<int64_t>> axes = intsOf(node->getAttr("axes"));
  if (node->getNumOperands() > 1)
    axes = intsOf(constantOf(node->getOperand(1)));
  SmallVector<int64_t> kept(xt.getShape());
  if (!axes || axes->empty())
    kept.assign(kept.size(), 1);
  for (int64_t a : axes.value_or(SmallVector<int64_t>{}))
    kept[size_t(a < 0 ? a + xt.getRank() : a)] = 1;
  if (axes && !axes->empty()) {
    auto t = RankedTensorType::get({int64_t(axes->size())}, b.getI64Type());
    axesOperand.push_back(
        nb.constant(loc, DenseElementsAttr::get(t, ArrayRef(*axes))));
  }
  auto keptT = xt.clone(kept);
  auto reduce = [&](StringRef op, Value v) {
    SmallVector<Value> ops{v};
    ops.append(axesOperand);
    return nb.node(loc, op, {keptT}, ops, keep)->getResult(0);
  };
  Value m = reduce("ReduceMax", x);
  Value shifted = nb.node(loc, "Sub", {xt}, {x, m})->getResult(0);
  Value e = nb.node(loc, "Exp", {xt}, {shifted})->getResult(0);
  Value l =
      nb.node(loc, "Log", {keptT}, {reduce("ReduceSum", e)})->getResult(0);
  Value y = nb.node(loc, "Add", {keptT}, {l, m})->getResult(0);
  if (keptT != yt)
    y = reshapeAt(node, y, cast<RankedTensorType>(yt).getShape());
  return replaceBy(node, y);
}

void ::oasr::ops::registerShapeOps(OpRegistry &r) {
  OpRoles constant;
  constant.constant = true;
  r.add("Constant")
      .precision(Precision::Keep)
      .shape(shapeConstant)
      .fold(foldConstant)
      .cost(costFree)
      .summary("materialised once by the executor")
      .roles(constant);
  r.add("Shape")
      .precision(Precision::Keep)
      .shape(shapeShape)
      .fold(foldShape)
      .cost(costFree);
  r.add("Size")
      .precision(Precision::Keep)
      .shape(shapeSize)
      .fold(foldSize)
      .cost(costFree)
      .noKernels("folded at import; exporters emit it only in shape "
                 "arithmetic");
  for (const char *view : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
    r.add(view)
        .traits(View)
        .shape(view == StringRef("Flatten")   ? shapeFlatten
               : view == StringRef("Reshape") ? shapeReshape
                                              : shapeSqueeze)
        .fold(foldCopy)
        .grad(gradView)
        .cost(costFree);
  r.add("Identity")
      .traits(View)
      .shape(shapeSameAsInput)
      .fold(foldCopy)
      .grad(gradIdentity)
      .cost(costFree);
  r.add("Transpose")
      .shape(shapeTranspose)
      .fold(foldTranspose)
      .grad(gradTranspose);
  r.add("Concat").shape(shapeConcat).fold(foldConcat).grad(gradConcat);
  r.add("Split").shape(shapeSplit).grad(gradSplit);
  r.add("Pad").shape(shapePad).grad(gradPad);
  r.add("PadGrad").traits(Gradient);
  r.add("ConstantOfShape", 9)
      .precision(Precision::Keep)
      .shape(shapeConstantOfShape)
      .fold(foldConstantOfShape);
  r.add("Expand", 8).shape(shapeExpand).grad(gradExpand);
  OpRoles lookup; // data, indices: an embedding when indices are tokens
  lookup.lookupIndices = 1;
  r.add("Gather")
      .shape(shapeGather)
      .fold(foldGather)
      .grad(gradGather)
      .roles(lookup);
  r.add("GatherGrad")
      .traits(Gradient)
      .shape(shapeGatherGrad)
      .summary("scatter-add of dY into "
               "zeros of the data's shape");
  // Slice's starts/ends/axes moved from attributes to inputs at opset 10.
  r.add("Slice", 1).shape(shapeSlice).fold(foldSlice).grad(gradSlice);
  r.add("Slice", 10).shape(shapeSlice).fold(foldSlice).grad(gradSlice);
  r.add("SliceGrad").traits(Gradient);
  r.add("Range", 11)
      .precision(Precision::Keep)
      .shape(shapeRange)
      .fold(foldRange);
  constexpr const char *kViaShape =
      "training form: Reshape, Transpose and Expand, which run and "
      "differentiate it";
  r.add("Tile").shape(shapeTile).trainingForm(formTile).noKernels(kViaShape);
  r.add("DepthToSpace")
      .shape(shapeDepthToSpace)
      .trainingForm([](NodeOp n) { return formDepthSpace(n, true); })
      .noKernels(kViaShape);
  r.add("SpaceToDepth")
      .shape(shapeDepthToSpace)
      .trainingForm([](NodeOp n) { return formDepthSpace(n, false); })
      .noKernels(kViaShape);
  r.add("Trilu", 14).shape(shapeSameAsInput);
  r.add("CumSum", 11).shape(shapeSameAsInput).grad(gradCumSum);
  r.add("GatherElements", 11)
      .shape(shapeElements)
      .trainingForm(checkElements)
      .grad(gradGatherElements);
  r.add("ScatterElements", 11)
      .shape(shapeElements)
      .trainingForm(checkElements)
      .grad(gradScatterElements);
  // Reductions: axes moved from an attribute to an input at opset 13 for
  // ReduceSum and at opset 18 for the others.
  r.add("ReduceMean", 1)
      .precision(Precision::F32)
      .shape(shapeReduce)
      .grad(gradReduceMean)
      .cost(costReduce);
  r.add("ReduceMean", 18)
      .precision(Precision::F32)
      .shape(shapeReduce)
      .grad(gradReduceMean)
      .cost(costReduce);
  r.add("ReduceSum", 1)
      .precision(Precision::F32)
      .shape(shapeReduce)
      .grad(gradReduceSum)
      .cost(costReduce);
  r.add("ReduceSum", 13)
      .precision(Precision::F32)
      .shape(shapeReduce)
      .grad(gradReduceSum)
      .cost(costReduce);
  r.add("ReduceSumTo")
      .precision(Precision::F32)
      .traits(Gradient)
      .cost(costReduce)
      .summary("sums a broadcast gradient back to an operand's shape");
  constexpr const char *kViaSum =
      "training form: ReduceSum of Abs(x) or x * x, then Sqrt or Log, "
      "which run and differentiate it";
  for (const char *op :
       {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceSumSquare"}) {
    r.add(op, 1)
        .precision(Precision::F32)
        .shape(shapeReduce)
        .trainingForm(formReduceViaSum)
        .noKernels(kViaSum);
    r.add(op, 18)
        .precision(Precision::F32)
        .shape(shapeReduce)
        .trainingForm(formReduceViaSum)
        .noKernels(kViaSum);
  }
  for (const char *op : {"ReduceMax", "ReduceMin"}) {
    r.add(op, 1)
        .precision(Precision::F32)
        .shape(shapeReduce)
        .grad(gradReduceExtreme);
    r.add(op, 18)
        .precision(Precision::F32)
        .shape(shapeReduce)
        .grad(gradReduceExtreme);
  }
  for (int opset : {1, 18})
    r.add("ReduceLogSumExp", opset)
        .precision(Precision::F32)
        .shape(shapeReduce)
        .trainingForm(formReduceLogSumExp)
        .noKernels("training form: ReduceMax, Sub, Exp, ReduceSum, Log and "
                   "Add, which run and differentiate it");
  for (int opset : {1, 18})
    r.add("ReduceProd", opset)
        .precision(Precision::F32)
        .shape(shapeReduce)
        .grad(gradReduceProd);
  for (const char *op : {"ArgMax", "ArgMin"})
    r.add(op).shape(shapeReduce);
}
