//===- IndexOps.cpp - Selection by index
//------------------------------------===//
//
// Registry entries of the ops that select elements by index or make
// indices: TopK (its values differentiable), OneHot, GatherND and ScatterND
// with their gradients. ArgMax/ArgMin share the reductions' shape rule
// (ShapeOps.cpp); GatherElements/ScatterElements sit there beside Gather.
//
//===----------------------------------------------------------------------===//

#include "RuleSupport.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ::oasr::ops;

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

/// TopK: values (X's type) and i64 indices, X's shape with k along the
/// axis; k from the attribute (opset 1) or the constant operand K.
static bool shapeTopK(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  const TensorFacts &x = *c.input(0);
  int64_t rank = int64_t(x.dims.size()), axis = c.attrs.getInt("axis", -1);
  if (!checkAxis(c, axis, rank))
    return false;
  int64_t k = c.attrs.getInt("k", -1);
  if (c.present(1)) {
    const FoldedInts *kk = c.needFolded(1);
    if (!kk)
      return false;
    if (kk->values.size() != 1)
      return c.fail("K must hold one value");
    k = kk->values[0];
  }
  int64_t n = x.dims[size_t(axis)];
  if (k < 0)
    return c.fail(llvm::formatv("k {0} is negative", k));
  if (n >= 0 && k > n)
    return c.fail(llvm::formatv(
        "k {0} is larger than axis {1}, which has {2} elements", k, axis, n));
  TensorFacts y = x;
  y.dims[size_t(axis)] = k;
  c.out[0] = y;
  y.elemType = kInt64;
  if (c.numOutputs() > 1)
    c.out[1] = y;
  return true;
}

/// OneHot: the indices' shape with `depth` inserted at the axis, in the
/// values' element type.
static bool shapeOneHot(ShapeContext &c) {
  if (!c.needInputs(3))
    return false;
  const FoldedInts *depth = c.needFolded(1);
  if (!depth)
    return false;
  if (depth->values.size() != 1 || depth->values[0] < 1)
    return c.fail("depth must be one positive value");
  const TensorFacts &idx = *c.input(0);
  int64_t rank = int64_t(idx.dims.size()) + 1,
          axis = c.attrs.getInt("axis", -1);
  if (!checkAxis(c, axis, rank))
    return false;
  TensorFacts y = TensorFacts::get(c.input(2)->elemType, idx.dims);
  y.dims.insert(y.dims.begin() + axis, depth->values[0]);
  return c.setAll(y);
}

/// GatherND {batch_dims b}: indices.shape[:-1] + data.shape[b + k:].
static bool shapeGatherND(ShapeContext &c) {
  if (!c.needInputs(2))
    return false;
  const TensorFacts &data = *c.input(0), &idx = *c.input(1);
  int64_t b = c.attrs.getInt("batch_dims", 0), r = int64_t(data.dims.size()),
          q = int64_t(idx.dims.size());
  if (q < 1 || b < 0 || b >= std::min(r, q))
    return c.fail(llvm::formatv(
        "batch_dims {0} must be below the ranks of data ({1}) and indices "
        "({2})",
        b, r, q));
  int64_t k = idx.dims.back();
  if (k < 0)
    return c.fail("the indices' last dimension is not known");
  if (k < 1 || k > r - b)
    return c.fail(llvm::formatv(
        "the indices' last dimension ({0}) must be in [1, {1}]", k, r - b));
  TensorFacts y = TensorFacts::get(data.elemType, {});
  y.dims.append(idx.dims.begin(), idx.dims.end() - 1);
  y.dims.append(data.dims.begin() + b + k, data.dims.end());
  return c.setAll(y);
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

/// TopK: dX is dValues written where the indices point, zeros elsewhere
/// (the indices along the axis are distinct).
static LogicalResult gradTopK(GradContext &c) {
  auto &b = c.b();
  Type x = typeOf(c, 0);
  int64_t axis = intAttr(c.fwd, "axis", -1);
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] =
      c.node1("ScatterElements", x, {c.splat(x, 0.0), c.out(1), c.dOut(0)},
              {b.getNamedAttr("axis", b.getI64IntegerAttr(axis)),
               b.getNamedAttr("reduction", b.getStringAttr("none"))});
  return success();
}

/// The batch_dims attribute of `op`, for the ND rules' own nodes.
static SmallVector<NamedAttribute> batchDims(GradContext &c,
                                             StringRef reduction = {}) {
  auto &b = c.b();
  SmallVector<NamedAttribute> attrs;
  if (int64_t n = intAttr(c.fwd, "batch_dims", 0))
    attrs.push_back(b.getNamedAttr("batch_dims", b.getI64IntegerAttr(n)));
  if (!reduction.empty())
    attrs.push_back(b.getNamedAttr("reduction", b.getStringAttr(reduction)));
  return attrs;
}

/// GatherND: dData is dY added into zeros where the tuples point (a
/// ScatterND with GatherND's batch_dims, which oasr's ScatterND takes).
static LogicalResult gradGatherND(GradContext &c) {
  if (c.wants(1))
    return c.fail("indices cannot carry a gradient");
  Type x = typeOf(c, 0);
  c.dIns = {c.node1("ScatterND", x, {c.splat(x, 0.0), c.in(1), c.dOut()},
                    batchDims(c, "add")),
            Value()};
  return success();
}

/// ScatterND (none or add): dUpdates gathers dY where the tuples point;
/// dData is dY, with the replaced slices zeroed when they were replaced.
static LogicalResult gradScatterND(GradContext &c) {
  if (c.wants(1))
    return c.fail("indices cannot carry a gradient");
  auto red = c.fwd->getAttrOfType<StringAttr>("reduction");
  bool add = red && red.getValue() == "add";
  if (red && !add && red.getValue() != "none")
    return c.fail("gradients of reduction '" + red.getValue() +
                  "' are not supported");
  c.dIns.assign(3, Value());
  if (c.wants(0))
    c.dIns[0] = add ? c.dOut()
                    : c.node1("ScatterND", typeOf(c, 0),
                              {c.dOut(), c.in(1), c.splat(typeOf(c, 2), 0.0)},
                              batchDims(c, "none"));
  if (c.wants(2))
    c.dIns[2] =
        c.node1("GatherND", typeOf(c, 2), {c.dOut(), c.in(1)}, batchDims(c));
  return success();
}

//===----------------------------------------------------------------------===//
// Training forms
//===----------------------------------------------------------------------===//

/// GatherND and ScatterND keep their form; constant index tuples outside
/// the data's dimensions are an error naming the node before anything runs
/// (the kernels check the others as they run).
static LogicalResult checkNDIndices(NodeOp node) {
  auto data = cast<RankedTensorType>(node->getOperand(0).getType());
  DenseElementsAttr idx = constantOf(node->getOperand(1));
  if (!idx || !isa<IntegerType>(idx.getElementType()))
    return success();
  auto it = cast<RankedTensorType>(idx.getType());
  int64_t b = intAttr(node, "batch_dims", 0), k = it.getShape().back();
  if (k < 1 || b + k > data.getRank())
    return success(); // the kernels' geometry reports it
  int64_t i = 0;
  for (APInt v : idx.getValues<APInt>()) {
    int64_t d = b + i % k, dim = data.getDimSize(d), x = v.getSExtValue();
    if (x < -dim || x >= dim)
      return node.emitError("'")
             << node.getOpType() << "' node \""
             << mlir::oasr::nodeName(node.getLoc()).value_or("") << "\": index "
             << x << " of tuple " << i / k << " is outside dimension " << d
             << " of the data (size " << dim << ")";
    ++i;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

void ::oasr::ops::registerIndexOps(OpRegistry &r) {
  for (int opset : {1, 10, 11})
    r.add("TopK", opset).shape(shapeTopK).grad(gradTopK);
  for (int opset : {9, 11})
    r.add("OneHot", opset).precision(Precision::Keep).shape(shapeOneHot);
  for (int opset : {11, 12, 13})
    r.add("GatherND", opset)
        .shape(shapeGatherND)
        .trainingForm(checkNDIndices)
        .grad(gradGatherND);
  // Swin builds its shifted-window mask with ScatterND.
  for (int opset : {11, 16, 18})
    r.add("ScatterND", opset)
        .shape(shapeSameAsInput)
        .trainingForm(checkNDIndices)
        .grad(gradScatterND);
}
