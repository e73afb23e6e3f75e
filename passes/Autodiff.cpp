//===- Autodiff.cpp - Build the training step from @forward ---------------===//
//
// Reverse-mode differentiation of the imported forward graph. The block order
// of @forward is a topological order, so the backward sweep visits nodes in
// reverse block order with a gradient map Value -> [contributions], summed
// when the producing node is reached. Only nodes on a path from a trained
// parameter to the loss are differentiated.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <numeric>

#define DEBUG_TYPE "oasr-autodiff"

namespace mlir::oasr {
#define GEN_PASS_DEF_AUTODIFF
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

static bool isFloatTensor(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && isa<FloatType>(t.getElementType());
}

/// The dense value of `v` when it is produced by a Constant node.
static DenseElementsAttr constantOf(Value v) {
  auto node = v ? v.getDefiningOp<NodeOp>() : NodeOp();
  if (!node || !node.is("Constant"))
    return {};
  return node->getAttrOfType<DenseElementsAttr>("value");
}

/// The integers of a constant i64 tensor or of an i64 list attribute.
static std::optional<SmallVector<int64_t>> intsOf(Attribute attr) {
  SmallVector<int64_t> out;
  if (auto dense = dyn_cast_or_null<DenseIntElementsAttr>(attr)) {
    for (const APInt &v : dense.getValues<APInt>())
      out.push_back(v.getSExtValue());
    return out;
  }
  if (auto array = dyn_cast_or_null<ArrayAttr>(attr)) {
    for (Attribute a : array) {
      auto i = dyn_cast<IntegerAttr>(a);
      if (!i)
        return std::nullopt;
      out.push_back(i.getInt());
    }
    return out;
  }
  if (auto array = dyn_cast_or_null<DenseI64ArrayAttr>(attr))
    return SmallVector<int64_t>(array.asArrayRef());
  return std::nullopt;
}

/// The single float of a constant scalar (or one-element) tensor.
static std::optional<double> scalarOf(Value v) {
  DenseElementsAttr dense = constantOf(v);
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  if (auto f = dyn_cast<DenseFPElementsAttr>(dense))
    return (*f.getValues<APFloat>().begin()).convertToDouble();
  if (auto i = dyn_cast<DenseIntElementsAttr>(dense))
    return double((*i.getValues<APInt>().begin()).getSExtValue());
  return std::nullopt;
}

/// Evaluates a small integer tensor computed from constants and static
/// shapes (Shape, Gather, Add/Sub/Mul/Div, Cast, Unsqueeze, Squeeze, Reshape,
/// Concat), as exporters emit for Slice bounds. std::nullopt when it is not
/// such a value.
static std::optional<SmallVector<int64_t>> evalInts(Value v,
                                                    unsigned depth = 0) {
  if (!v || depth > 32)
    return std::nullopt;
  auto node = v.getDefiningOp<NodeOp>();
  if (!node || !node.getDomain().empty())
    return std::nullopt;
  if (node.is("Constant"))
    return intsOf(node->getAttrOfType<DenseIntElementsAttr>("value"));
  if (node.is("Shape")) {
    auto t = dyn_cast<RankedTensorType>(node->getOperand(0).getType());
    if (!t || !t.hasStaticShape() || node->hasAttr("start") ||
        node->hasAttr("end"))
      return std::nullopt;
    return SmallVector<int64_t>(t.getShape());
  }
  auto arg = [&](unsigned i) {
    return evalInts(node->getOperand(i), depth + 1);
  };
  if (node.is("Cast") || node.is("Unsqueeze") || node.is("Squeeze") ||
      node.is("Reshape"))
    return arg(0);
  if (node.is("Gather")) {
    auto data = arg(0), idx = arg(1);
    if (!data || !idx)
      return std::nullopt;
    SmallVector<int64_t> out;
    for (int64_t i : *idx) {
      if (i < 0)
        i += data->size();
      if (i < 0 || i >= int64_t(data->size()))
        return std::nullopt;
      out.push_back((*data)[i]);
    }
    return out;
  }
  if (node.is("Concat")) {
    SmallVector<int64_t> out;
    for (unsigned i = 0; i < node->getNumOperands(); ++i) {
      auto part = arg(i);
      if (!part)
        return std::nullopt;
      out.append(*part);
    }
    return out;
  }
  StringRef type = node.getOpType();
  if (type == "Add" || type == "Sub" || type == "Mul" || type == "Div") {
    auto a = arg(0), b = arg(1);
    if (!a || !b ||
        (a->size() != b->size() && a->size() != 1 && b->size() != 1))
      return std::nullopt;
    size_t n = std::max(a->size(), b->size());
    SmallVector<int64_t> out;
    for (size_t i = 0; i < n; ++i) {
      int64_t x = (*a)[a->size() == 1 ? 0 : i],
              y = (*b)[b->size() == 1 ? 0 : i];
      if (type == "Div" && y == 0)
        return std::nullopt;
      out.push_back(type == "Add"   ? x + y
                    : type == "Sub" ? x - y
                    : type == "Mul" ? x * y
                                    : x / y);
    }
    return out;
  }
  return std::nullopt;
}

static int64_t intAttr(Operation *op, StringRef name, int64_t dflt) {
  if (auto a = op->getAttrOfType<IntegerAttr>(name))
    return a.getInt();
  return dflt;
}

static std::optional<double> floatAttr(Operation *op, StringRef name) {
  if (auto a = op->getAttrOfType<FloatAttr>(name))
    return a.getValueAsDouble();
  return std::nullopt;
}

/// ONNX attributes of a node: its discardable attributes except oasr.*.
static SmallVector<NamedAttribute> onnxAttrs(Operation *op) {
  SmallVector<NamedAttribute> out;
  for (NamedAttribute a : op->getDiscardableAttrs())
    if (!a.getName().getValue().starts_with("oasr."))
      out.push_back(a);
  return out;
}

static RankedTensorType withElementType(Type type, Type element) {
  return cast<RankedTensorType>(type).clone(element);
}

//===----------------------------------------------------------------------===//
// Training form of forward nodes
//===----------------------------------------------------------------------===//

namespace {
/// Creates nodes at a builder's insertion point.
struct NodeBuilder {
  OpBuilder &b;

  NodeOp node(Location loc, StringRef type, TypeRange results,
              ValueRange operands, ArrayRef<NamedAttribute> attrs = {},
              StringRef domain = {}) {
    auto op = b.create<NodeOp>(loc, results, type, operands, attrs);
    if (!domain.empty())
      op.setDomain(domain);
    return op;
  }

  Value constant(Location loc, DenseElementsAttr value) {
    return node(loc, "Constant", value.getType(), {},
                {b.getNamedAttr("value", value)})
        ->getResult(0);
  }

  Value splat(Location loc, Type type, double value) {
    auto t = cast<RankedTensorType>(type);
    Attribute elt;
    if (auto f = dyn_cast<FloatType>(t.getElementType()))
      elt = b.getFloatAttr(f, value);
    else if (t.getElementType().isInteger(1))
      elt = b.getBoolAttr(value != 0);
    else
      elt = b.getIntegerAttr(t.getElementType(), int64_t(value));
    return constant(loc, DenseElementsAttr::get(t, elt));
  }

  Value shapeConstant(Location loc, ArrayRef<int64_t> shape) {
    auto t = RankedTensorType::get({int64_t(shape.size())}, b.getI64Type());
    return constant(loc, DenseElementsAttr::get(t, shape));
  }
};
} // namespace

/// Replaces `op` by a node of the same type with `types` results and
/// `operands`, plus extra attributes. Old results map to the first new ones.
static NodeOp rebuildNode(NodeOp op, TypeRange types, ValueRange operands,
                          ArrayRef<NamedAttribute> extraAttrs = {}) {
  OpBuilder b(op);
  NamedAttrList attrs(op->getDiscardableAttrDictionary());
  for (NamedAttribute a : extraAttrs)
    attrs.set(a.getName(), a.getValue());
  NodeBuilder nb{b};
  NodeOp fresh = nb.node(op.getLoc(), op.getOpType(), types, operands,
                         attrs.getAttrs(), op.getDomain());
  for (auto [oldResult, newResult] :
       llvm::zip(op->getResults(), fresh->getResults()))
    oldResult.replaceAllUsesWith(newResult);
  op->erase();
  return fresh;
}

/// Puts the nodes whose backward needs extra forward results into their
/// training form (docs/IR.md, "Forward nodes in training form").
static LogicalResult toTrainingForm(Block &body) {
  OpBuilder b(body.getParentOp()->getContext());
  NodeBuilder nb{b};
  for (Operation &op : llvm::make_early_inc_range(body)) {
    auto node = dyn_cast<NodeOp>(op);
    if (!node || !node.getDomain().empty())
      continue;
    Location loc = node.getLoc();
    StringRef type = node.getOpType();
    if (type == "BatchNormalization") {
      if (node->getNumOperands() != 5)
        return node.emitError("'BatchNormalization' node \"")
               << *nodeName(loc)
               << "\" needs 5 operands (X, scale, B, input_mean, input_var), "
                  "got "
               << node->getNumOperands();
      Type x = node->getOperand(0).getType();
      Type stat = node->getOperand(3).getType();
      rebuildNode(node, {x, stat, stat, stat, stat},
                  SmallVector<Value>(node->getOperands()),
                  {b.getNamedAttr("training_mode", b.getI64IntegerAttr(1))});
    } else if (type == "MaxPool" && node->getNumResults() == 1) {
      Type y = node->getResult(0).getType();
      rebuildNode(node, {y, withElementType(y, b.getI64Type())},
                  SmallVector<Value>(node->getOperands()));
    } else if (type == "Dropout") {
      b.setInsertionPoint(node);
      Value x = node->getOperand(0);
      Value ratio = node->getNumOperands() > 1 ? node->getOperand(1) : Value();
      if (!ratio) {
        double r = floatAttr(node, "ratio").value_or(0.5);
        ratio = nb.splat(loc, RankedTensorType::get({}, b.getF32Type()), r);
      }
      Value mode = nb.splat(loc, RankedTensorType::get({}, b.getI1Type()), 1.0);
      Type y = node->getResult(0).getType();
      rebuildNode(node, {y, withElementType(y, b.getI1Type())},
                  {x, ratio, mode});
    } else if (type == "LayerNormalization" && node->getNumResults() == 1) {
      auto x = cast<RankedTensorType>(node->getOperand(0).getType());
      int64_t axis = intAttr(node, "axis", -1);
      if (axis < 0)
        axis += x.getRank();
      SmallVector<int64_t> statShape(x.getShape());
      for (int64_t i = axis; i < x.getRank(); ++i)
        statShape[i] = 1;
      auto stat = RankedTensorType::get(statShape, b.getF32Type());
      rebuildNode(node, {x, stat, stat},
                  SmallVector<Value>(node->getOperands()));
    } else if (type == "SoftmaxCrossEntropyLoss" &&
               node->getNumResults() == 1) {
      rebuildNode(node,
                  {node->getResult(0).getType(), node->getOperand(0).getType()},
                  SmallVector<Value>(node->getOperands()));
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

namespace {
/// What a gradient rule sees: the forward node, the gradients of its results
/// and a builder for backward nodes tagged with the node's layer.
struct GradContext {
  NodeBuilder &nb;
  NodeOp fwd;
  StringAttr layer;
  ArrayRef<Value> dOuts;               // per result; null when none flows back
  function_ref<bool(Value)> wantsGrad; // does this operand need a gradient?
  int64_t opset;
  SmallVector<Value> dIns; // per operand; filled by the rule

  OpBuilder &b() { return nb.b; }
  Location loc() { return fwd.getLoc(); }
  Value in(unsigned i) { return fwd->getOperand(i); }
  Value out(unsigned i) { return fwd->getResult(i); }
  bool wants(unsigned i) {
    return i < fwd->getNumOperands() && wantsGrad(fwd->getOperand(i));
  }

  /// The gradient of result `i` (zeros when none flows back).
  Value dOut(unsigned i = 0) {
    if (dOuts[i])
      return dOuts[i];
    return tag(nb.splat(loc(), out(i).getType(), 0.0));
  }

  Value tag(Value v) {
    v.getDefiningOp()->setAttr(kLayerAttr, layer);
    return v;
  }

  /// A backward node tagged with this layer.
  NodeOp node(StringRef type, TypeRange results, ValueRange operands,
              ArrayRef<NamedAttribute> attrs = {}, StringRef domain = {}) {
    NodeOp op = nb.node(loc(), type, results, operands, attrs, domain);
    op->setAttr(kLayerAttr, layer);
    return op;
  }
  Value node1(StringRef type, Type result, ValueRange operands,
              ArrayRef<NamedAttribute> attrs = {}) {
    return node(type, result, operands, attrs)->getResult(0);
  }
  Value splat(Type type, double value) {
    return tag(nb.splat(loc(), type, value));
  }
  Value shape(ArrayRef<int64_t> dims) {
    return tag(nb.shapeConstant(loc(), dims));
  }

  /// Sums a broadcast gradient down to `type` (identity when it matches).
  Value sumTo(Value v, Type type) {
    if (v.getType() == type)
      return v;
    return node1("ReduceSumTo", type, {v});
  }
  Value reshape(Value v, Type type) {
    if (v.getType() == type)
      return v;
    return node1("Reshape", type,
                 {v, shape(cast<RankedTensorType>(type).getShape())});
  }
  /// Transpose swapping the last two axes.
  Value swapLast2(Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    int64_t r = t.getRank();
    SmallVector<int64_t> perm(r), shape(t.getShape());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[r - 1], perm[r - 2]);
    std::swap(shape[r - 1], shape[r - 2]);
    return node1("Transpose", t.clone(shape), {v},
                 {b().getNamedAttr("perm", b().getI64ArrayAttr(perm))});
  }
  LogicalResult fail(const Twine &why) {
    return fwd.emitError() << "cannot differentiate '" << fwd.getOpType()
                           << "' node \"" << layer.getValue() << "\": " << why;
  }
};

using GradRule = LogicalResult (*)(GradContext &);
} // namespace

static Type typeOf(GradContext &c, unsigned operand) {
  return c.in(operand).getType();
}

static LogicalResult gradConv(GradContext &c) {
  SmallVector<Type> types = {typeOf(c, 0), typeOf(c, 1)};
  if (c.fwd->getNumOperands() > 2)
    types.push_back(typeOf(c, 2));
  NodeOp g =
      c.node("ConvGrad", types, {c.dOut(), c.in(0), c.in(1)}, onnxAttrs(c.fwd));
  c.dIns.assign(g->getResults().begin(), g->getResults().end());
  return success();
}

static LogicalResult gradBatchNorm(GradContext &c) {
  if (c.fwd->getNumResults() != 5)
    return c.fail("expected the training form with 5 results");
  double eps = floatAttr(c.fwd, "epsilon").value_or(1e-5);
  NodeOp g = c.node(
      "BatchNormalizationGrad", {typeOf(c, 0), typeOf(c, 1), typeOf(c, 2)},
      {c.dOut(), c.in(0), c.in(1), c.out(3), c.out(4)},
      {c.b().getNamedAttr("epsilon", c.b().getF32FloatAttr(eps))});
  c.dIns = {g->getResult(0), g->getResult(1), g->getResult(2), Value(),
            Value()};
  if (c.wants(3) || c.wants(4))
    return c.fail("gradients of the running statistics are not supported");
  return success();
}

static LogicalResult gradRelu(GradContext &c) {
  c.dIns = {c.node1("ReluGrad", typeOf(c, 0), {c.dOut(), c.out(0)})};
  return success();
}

static LogicalResult gradClip(GradContext &c) {
  double lo = -INFINITY, hi = INFINITY;
  if (auto a = floatAttr(c.fwd, "min"))
    lo = *a;
  if (auto a = floatAttr(c.fwd, "max"))
    hi = *a;
  for (unsigned i = 1; i < c.fwd->getNumOperands() && i < 3; ++i) {
    std::optional<double> v = scalarOf(c.in(i));
    if (!v)
      return c.fail(Twine(i == 1 ? "min" : "max") + " is not a constant");
    (i == 1 ? lo : hi) = *v;
  }
  if (c.wants(1) || c.wants(2))
    return c.fail("gradients of the bounds are not supported");
  auto &b = c.b();
  c.dIns = {c.node1("ClipGrad", typeOf(c, 0), {c.dOut(), c.in(0)},
                    {b.getNamedAttr("min", b.getF32FloatAttr(lo)),
                     b.getNamedAttr("max", b.getF32FloatAttr(hi))})};
  return success();
}

static LogicalResult gradMaxPool(GradContext &c) {
  if (c.fwd->getNumResults() != 2)
    return c.fail("expected the training form with Indices");
  c.dIns = {c.node1("MaxPoolGrad", typeOf(c, 0), {c.dOut(), c.out(1)},
                    onnxAttrs(c.fwd))};
  return success();
}

static LogicalResult gradAveragePool(GradContext &c) {
  c.dIns = {
      c.node1("AveragePoolGrad", typeOf(c, 0), {c.dOut()}, onnxAttrs(c.fwd))};
  return success();
}

static LogicalResult gradGlobalAveragePool(GradContext &c) {
  c.dIns = {c.node1("GlobalAveragePoolGrad", typeOf(c, 0), {c.dOut()})};
  return success();
}

static LogicalResult gradGemm(GradContext &c) {
  SmallVector<Type> types = {typeOf(c, 0), typeOf(c, 1)};
  if (c.fwd->getNumOperands() > 2)
    types.push_back(typeOf(c, 2));
  SmallVector<NamedAttribute> attrs;
  for (StringRef name : {"transA", "transB", "alpha", "beta"})
    if (Attribute a = c.fwd->getAttr(name))
      attrs.push_back(c.b().getNamedAttr(name, a));
  NodeOp g = c.node("GemmGrad", types, {c.dOut(), c.in(0), c.in(1)}, attrs);
  c.dIns.assign(g->getResults().begin(), g->getResults().end());
  return success();
}

static LogicalResult gradMatMul(GradContext &c) {
  auto a = cast<RankedTensorType>(typeOf(c, 0));
  auto bt = cast<RankedTensorType>(typeOf(c, 1));
  auto dy = cast<RankedTensorType>(c.out(0).getType());
  if (a.getRank() < 2 || bt.getRank() < 2)
    return c.fail("rank-1 operands are not supported");
  Value g = c.dOut();
  c.dIns.assign(2, Value());
  if (c.wants(0)) {
    // dA = dY · Bᵀ, summed over broadcast batch axes.
    SmallVector<int64_t> shape(dy.getShape());
    shape.back() = a.getShape().back();
    Value full = c.node1("MatMul", dy.clone(shape), {g, c.swapLast2(c.in(1))});
    c.dIns[0] = c.sumTo(full, a);
  }
  if (c.wants(1)) {
    if (bt.getRank() == 2 && a.getRank() > 2) {
      // The linear-layer case: dB = Aᵀ · dY over all leading axes at once.
      int64_t rows = a.getNumElements() / a.getShape().back();
      auto a2 = RankedTensorType::get({rows, a.getShape().back()},
                                      a.getElementType());
      auto dy2 = RankedTensorType::get({rows, dy.getShape().back()},
                                       dy.getElementType());
      c.dIns[1] =
          c.node1("MatMul", bt,
                  {c.swapLast2(c.reshape(c.in(0), a2)), c.reshape(g, dy2)});
    } else {
      SmallVector<int64_t> shape(dy.getShape());
      shape[shape.size() - 2] = a.getShape().back();
      Value full =
          c.node1("MatMul", dy.clone(shape), {c.swapLast2(c.in(0)), g});
      c.dIns[1] = c.sumTo(full, bt);
    }
  }
  return success();
}

static LogicalResult gradAdd(GradContext &c) {
  Value g = c.dOut();
  c.dIns = {c.wants(0) ? c.sumTo(g, typeOf(c, 0)) : Value(),
            c.wants(1) ? c.sumTo(g, typeOf(c, 1)) : Value()};
  return success();
}

static LogicalResult gradSub(GradContext &c) {
  Value g = c.dOut();
  c.dIns = {c.wants(0) ? c.sumTo(g, typeOf(c, 0)) : Value(), Value()};
  if (c.wants(1))
    c.dIns[1] = c.node1("Neg", typeOf(c, 1), {c.sumTo(g, typeOf(c, 1))});
  return success();
}

static LogicalResult gradMul(GradContext &c) {
  Value g = c.dOut();
  Type y = g.getType();
  c.dIns.assign(2, Value());
  for (unsigned i : {0u, 1u})
    if (c.wants(i))
      c.dIns[i] = c.sumTo(c.node1("Mul", y, {g, c.in(1 - i)}), typeOf(c, i));
  return success();
}

static LogicalResult gradDiv(GradContext &c) {
  // y = a / b: da = g / b, db = -g · y / b.
  Value g = c.dOut();
  Type y = g.getType();
  c.dIns.assign(2, Value());
  if (c.wants(0))
    c.dIns[0] = c.sumTo(c.node1("Div", y, {g, c.in(1)}), typeOf(c, 0));
  if (c.wants(1)) {
    Value q = c.node1("Div", y, {c.out(0), c.in(1)});
    Value gq = c.sumTo(c.node1("Mul", y, {g, q}), typeOf(c, 1));
    c.dIns[1] = c.node1("Neg", typeOf(c, 1), {gq});
  }
  return success();
}

static LogicalResult gradPow(GradContext &c) {
  // y = x^e: dx = g · e · x^(e-1).
  if (c.wants(1))
    return c.fail("gradients of the exponent are not supported");
  Value g = c.dOut();
  Type y = g.getType();
  Type eType = typeOf(c, 1);
  Value e = c.in(1);
  Value em1;
  if (std::optional<double> ev = scalarOf(e))
    em1 = c.splat(eType, *ev - 1.0);
  else
    em1 = c.node1("Sub", eType, {e, c.splat(eType, 1.0)});
  Value p = c.node1("Pow", y, {c.in(0), em1});
  Value pe = c.node1("Mul", y, {p, e});
  c.dIns = {c.sumTo(c.node1("Mul", y, {g, pe}), typeOf(c, 0)), Value()};
  return success();
}

static LogicalResult gradSqrt(GradContext &c) {
  // y = sqrt(x): dx = 0.5 · g / y.
  Type t = typeOf(c, 0);
  auto half = c.splat(
      RankedTensorType::get({}, cast<RankedTensorType>(t).getElementType()),
      0.5);
  Value h = c.node1("Mul", t, {c.dOut(), half});
  c.dIns = {c.node1("Div", t, {h, c.out(0)})};
  return success();
}

static LogicalResult gradErf(GradContext &c) {
  // dx = g · 2/sqrt(pi) · exp(-x²).
  Type t = typeOf(c, 0);
  auto scalar =
      RankedTensorType::get({}, cast<RankedTensorType>(t).getElementType());
  Value x2 = c.node1("Mul", t, {c.in(0), c.in(0)});
  Value e = c.node1("Exp", t, {c.node1("Neg", t, {x2})});
  Value s = c.node1("Mul", t, {e, c.splat(scalar, 2.0 / std::sqrt(M_PI))});
  c.dIns = {c.node1("Mul", t, {c.dOut(), s})};
  return success();
}

static LogicalResult gradGelu(GradContext &c) {
  c.dIns = {c.node("GeluGrad", typeOf(c, 0), {c.dOut(), c.in(0)},
                   onnxAttrs(c.fwd), c.fwd.getDomain())
                ->getResult(0)};
  return success();
}

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

static LogicalResult gradDropout(GradContext &c) {
  if (c.fwd->getNumResults() != 2)
    return c.fail("expected the training form with a mask");
  double ratio = scalarOf(c.in(1)).value_or(0.5);
  auto &b = c.b();
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] = c.node1("DropoutGrad", typeOf(c, 0), {c.dOut(), c.out(1)},
                      {b.getNamedAttr("ratio", b.getF32FloatAttr(ratio))});
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

static LogicalResult gradSoftmaxCrossEntropy(GradContext &c) {
  if (c.fwd->getNumResults() != 2)
    return c.fail("expected the training form with log_prob");
  if (c.fwd->getNumOperands() > 2)
    return c.fail("class weights are not supported");
  c.dIns = {c.node1("SoftmaxCrossEntropyLossGrad", typeOf(c, 0),
                    {c.dOut(), c.out(1), c.in(1)}, onnxAttrs(c.fwd)),
            Value()};
  return success();
}

static LogicalResult gradLayerNorm(GradContext &c) {
  if (c.fwd->getNumResults() != 3)
    return c.fail("expected the training form with Mean and InvStdDev");
  SmallVector<Type> types = {typeOf(c, 0), typeOf(c, 1)};
  if (c.fwd->getNumOperands() > 2)
    types.push_back(typeOf(c, 2));
  NodeOp g = c.node("LayerNormalizationGrad", types,
                    {c.dOut(), c.in(0), c.in(1), c.out(1), c.out(2)},
                    onnxAttrs(c.fwd));
  c.dIns.assign(g->getResults().begin(), g->getResults().end());
  return success();
}

static LogicalResult gradSoftmax(GradContext &c) {
  auto x = cast<RankedTensorType>(typeOf(c, 0));
  int64_t dflt = c.opset >= 13 ? -1 : 1;
  int64_t axis = intAttr(c.fwd, "axis", dflt);
  if (axis < 0)
    axis += x.getRank();
  if (c.opset < 13 && axis != x.getRank() - 1)
    return c.fail("Softmax before opset 13 over several axes");
  auto &b = c.b();
  c.dIns = {c.node1("SoftmaxGrad", x, {c.dOut(), c.out(0)},
                    {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))})};
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

static LogicalResult gradReduceMean(GradContext &c) {
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
  SmallVector<int64_t> kept(x.getShape());
  int64_t count = 1;
  for (int64_t a : *axes) {
    if (a < 0)
      a += x.getRank();
    count *= x.getDimSize(a);
    kept[a] = 1;
  }
  // Broadcast dY (with the reduced axes kept as 1) back to X, scaled by 1/n.
  Value g = c.reshape(c.dOut(), x.clone(kept));
  Value e = c.node1("Expand", x, {g, c.shape(x.getShape())});
  auto scalar = RankedTensorType::get({}, x.getElementType());
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] = c.node1("Mul", x, {e, c.splat(scalar, 1.0 / double(count))});
  return success();
}

static const llvm::StringMap<GradRule> &gradRules() {
  static const llvm::StringMap<GradRule> rules = {
      {"Conv", gradConv},
      {"BatchNormalization", gradBatchNorm},
      {"Relu", gradRelu},
      {"Clip", gradClip},
      {"MaxPool", gradMaxPool},
      {"AveragePool", gradAveragePool},
      {"GlobalAveragePool", gradGlobalAveragePool},
      {"Gemm", gradGemm},
      {"MatMul", gradMatMul},
      {"Add", gradAdd},
      {"Sub", gradSub},
      {"Mul", gradMul},
      {"Div", gradDiv},
      {"Pow", gradPow},
      {"Sqrt", gradSqrt},
      {"Erf", gradErf},
      {"Gelu", gradGelu},
      {"Concat", gradConcat},
      {"Flatten", gradView},
      {"Reshape", gradView},
      {"Squeeze", gradView},
      {"Unsqueeze", gradView},
      {"Identity", gradIdentity},
      {"Dropout", gradDropout},
      {"Pad", gradPad},
      {"SoftmaxCrossEntropyLoss", gradSoftmaxCrossEntropy},
      {"LayerNormalization", gradLayerNorm},
      {"Softmax", gradSoftmax},
      {"Transpose", gradTranspose},
      {"Gather", gradGather},
      {"ReduceMean", gradReduceMean},
      {"Slice", gradSlice},
  };
  return rules;
}

/// The rule for `node`, or null. Gelu is also accepted from com.microsoft.
static GradRule findRule(NodeOp node) {
  StringRef domain = node.getDomain();
  if (!domain.empty() &&
      !(domain == "com.microsoft" && node.getOpType() == "Gelu"))
    return nullptr;
  return gradRules().lookup(node.getOpType());
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {
struct AutodiffPass : mlir::oasr::impl::AutodiffBase<AutodiffPass> {
  using Base::Base;
  void runOnOperation() final;

private:
  LogicalResult run(ModuleOp module, func::FuncOp forward);
};
} // namespace

/// Gives every unnamed forward node a stable name `<OpType>_<index>` so that
/// backward nodes can refer to it, and returns the names in block order.
static void nameNodes(Block &body) {
  llvm::StringSet<> used;
  for (Operation &op : body)
    if (std::optional<std::string> name = nodeName(op.getLoc()))
      used.insert(*name);
  unsigned index = 0;
  for (Operation &op : body) {
    auto node = dyn_cast<NodeOp>(op);
    if (!node)
      continue;
    ++index;
    if (nodeName(op.getLoc()))
      continue;
    std::string name;
    unsigned k = index;
    do
      name = llvm::formatv("{0}_{1}", node.getOpType(), k++).str();
    while (used.contains(name));
    used.insert(name);
    op.setLoc(
        NameLoc::get(StringAttr::get(op.getContext(), name), op.getLoc()));
  }
}

static std::string argTag(func::FuncOp fn, unsigned i, StringRef tag) {
  if (auto s = fn.getArgAttrOfType<StringAttr>(i, tag))
    return s.getValue().str();
  return {};
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto forward = module.lookupSymbol<func::FuncOp>(kForwardFn);
  if (!forward) {
    module.emitError("expected a 'func.func @forward' (the imported model)");
    return signalPassFailure();
  }
  if (module.lookupSymbol(kTrainStepFn)) {
    module.emitError("module already has a '@train_step'");
    return signalPassFailure();
  }
  if (failed(run(module, forward)))
    signalPassFailure();
}

LogicalResult AutodiffPass::run(ModuleOp module, func::FuncOp forward) {
  MLIRContext *ctx = module.getContext();
  if (!llvm::hasSingleElement(forward.getBody()))
    return forward.emitError("@forward must have exactly one block");
  Block &oldBody = forward.getBody().front();
  auto oldReturn = cast<func::ReturnOp>(oldBody.getTerminator());

  // Which parameters are trained (ONNX TrainingInfo), if the module says.
  std::optional<llvm::StringSet<>> trained;
  if (auto list = module->getAttrOfType<ArrayAttr>(kTrainedAttr)) {
    trained.emplace();
    for (Attribute a : list)
      if (auto s = dyn_cast<StringAttr>(a))
        trained->insert(s.getValue());
  }

  // Classify the arguments.
  SmallVector<unsigned> inputs, params, frozen, states;
  for (unsigned i = 0, e = forward.getNumArguments(); i < e; ++i) {
    std::string p = argTag(forward, i, kParamAttr);
    if (!p.empty()) {
      (trained && !trained->contains(p) ? frozen : params).push_back(i);
    } else if (!argTag(forward, i, kStateAttr).empty()) {
      states.push_back(i);
    } else {
      inputs.push_back(i);
    }
  }
  if (trained)
    for (auto &entry : *trained)
      if (llvm::none_of(params, [&](unsigned i) {
            return argTag(forward, i, kParamAttr) == entry.getKey();
          }))
        return module.emitError("oasr.trained names '")
               << entry.getKey() << "', which is not a parameter of @forward";

  // Choose the model output: the loss itself, or logits to put a loss on.
  int outputIndex = -1;
  for (unsigned i = 0, e = forward.getNumResults(); i < e; ++i) {
    auto name = forward.getResultAttrOfType<StringAttr>(i, kOutputAttr);
    if (!outputName.empty()) {
      if (name && name.getValue() == outputName) {
        outputIndex = i;
        break;
      }
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(forward.getResultTypes()[i]);
    if (!isFloatTensor(type))
      continue;
    if (type.getRank() == 0) {
      outputIndex = i;
      break;
    }
    if (outputIndex < 0)
      outputIndex = i;
  }
  if (outputIndex < 0) {
    if (!outputName.empty())
      return forward.emitError("no output named '") << outputName << "'";
    return forward.emitError("the model has no float output to train on");
  }
  Value output = oldReturn.getOperand(outputIndex);
  auto outputType = dyn_cast<RankedTensorType>(output.getType());
  auto describeOutput = [&]() {
    std::string text = llvm::formatv("output #{0}", outputIndex).str();
    if (auto name =
            forward.getResultAttrOfType<StringAttr>(outputIndex, kOutputAttr))
      text += (" '" + name.getValue() + "'").str();
    return text + llvm::formatv(" ({0})", output.getType()).str();
  };
  if (!isFloatTensor(outputType))
    return forward.emitError()
           << describeOutput() << " is not a float tensor to train on";
  bool hasLoss = outputType.getRank() == 0;
  if (!hasLoss && outputType.getRank() < 2)
    return forward.emitError()
           << describeOutput()
           << " must be a scalar loss or logits [N, C, ...]";

  // The new signature: inputs, label, trained params, frozen params + state.
  OpBuilder b(forward);
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<std::pair<unsigned, unsigned>> argMap; // old -> new
  auto addArg = [&](unsigned old, DictionaryAttr attrs) {
    if (!attrs)
      attrs = DictionaryAttr::get(ctx);
    argMap.push_back({old, argTypes.size()});
    argTypes.push_back(forward.getArgumentTypes()[old]);
    argAttrs.push_back(attrs);
  };
  for (unsigned i : inputs)
    addArg(i, forward.getArgAttrDict(i));
  int labelIndex = -1;
  if (!hasLoss) {
    labelIndex = argTypes.size();
    argTypes.push_back(
        RankedTensorType::get({outputType.getDimSize(0)}, b.getI64Type()));
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kLabelAttr, b.getStringAttr(labelName))));
  }
  for (unsigned i : params)
    addArg(i, forward.getArgAttrDict(i));
  for (unsigned i : frozen) {
    NamedAttrList attrs(forward.getArgAttrDict(i));
    Attribute name = attrs.erase(kParamAttr);
    attrs.set(kStateAttr, name);
    addArg(i, attrs.getDictionary(ctx));
  }
  for (unsigned i : states)
    addArg(i, forward.getArgAttrDict(i));

  auto step = b.create<func::FuncOp>(forward.getLoc(), kTrainStepFn,
                                     b.getFunctionType(argTypes, {}));
  step.setAllArgAttrs(argAttrs);
  Block *body = step.addEntryBlock();
  IRMapping mapping;
  for (auto [old, fresh] : argMap)
    mapping.map(forward.getArgument(old), body->getArgument(fresh));
  b.setInsertionPointToEnd(body);
  for (Operation &op : oldBody.without_terminator())
    b.clone(op, mapping);
  output = mapping.lookup(output);

  nameNodes(*body);
  if (failed(toTrainingForm(*body)))
    return failure();
  // Training-form rewrites replaced nodes; the output may have moved.
  NodeBuilder nb{b};
  b.setInsertionPointToEnd(body);

  // The loss.
  Value loss = output;
  if (!hasLoss) {
    Location lossLoc = NameLoc::get(b.getStringAttr(lossName));
    Value scores = loss;
    if (outputType.getRank() > 2) {
      auto flat = RankedTensorType::get(
          {outputType.getDimSize(0),
           outputType.getNumElements() / outputType.getDimSize(0)},
          outputType.getElementType());
      scores = nb.node(NameLoc::get(b.getStringAttr(lossName + "/Flatten")),
                       "Flatten", flat, {scores},
                       {b.getNamedAttr("axis", b.getI64IntegerAttr(1))})
                   ->getResult(0);
    }
    NodeOp sce =
        nb.node(lossLoc, "SoftmaxCrossEntropyLoss",
                {RankedTensorType::get({}, outputType.getElementType()),
                 scores.getType()},
                {scores, body->getArgument(labelIndex)},
                {b.getNamedAttr("reduction", b.getStringAttr("mean"))});
    loss = sce->getResult(0);
  }

  // needsGrad: values that depend on a trained parameter.
  llvm::DenseSet<Value> needsGrad;
  SmallVector<BlockArgument> paramArgs;
  for (auto [old, fresh] : argMap)
    if (llvm::is_contained(params, old))
      paramArgs.push_back(body->getArgument(fresh));
  for (BlockArgument a : paramArgs)
    needsGrad.insert(a);
  for (Operation &op : *body)
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return needsGrad.contains(v); }))
      for (Value r : op.getResults())
        if (isFloatTensor(r.getType()))
          needsGrad.insert(r);

  // reachesLoss: values the loss depends on.
  llvm::DenseSet<Value> reaches;
  reaches.insert(loss);
  for (Operation &op : llvm::reverse(*body))
    if (llvm::any_of(op.getResults(),
                     [&](Value v) { return reaches.contains(v); }))
      for (Value v : op.getOperands())
        if (isFloatTensor(v.getType()))
          reaches.insert(v);

  // Forward nodes on a path from a parameter to the loss, in block order.
  SmallVector<Operation *> active;
  for (Operation &op : *body)
    if (llvm::any_of(op.getResults(), [&](Value v) {
          return needsGrad.contains(v) && reaches.contains(v);
        }))
      active.push_back(&op);
  numForwardNodes =
      llvm::count_if(*body, [](Operation &op) { return isa<NodeOp>(op); });

  // Check every active node has a rule before building anything.
  for (Operation *op : active) {
    auto node = dyn_cast<NodeOp>(op);
    if (!node)
      return op->emitError("cannot differentiate '")
             << op->getName() << "' on the path from a parameter to the loss";
    if (!findRule(node))
      return node.emitError("no gradient rule for '")
             << node.getOpType() << "' node \"" << *nodeName(node.getLoc())
             << "\" on the path from a parameter to the loss";
  }

  // The backward sweep.
  DenseMap<Value, SmallVector<Value, 2>> contribs;
  auto wants = [&](Value v) {
    return needsGrad.contains(v) && isFloatTensor(v.getType());
  };
  /// Sums the contributions of `v` (tagged with `layer`).
  auto gradOf = [&](Value v, StringAttr layer, Location loc) -> Value {
    auto it = contribs.find(v);
    if (it == contribs.end() || it->second.empty())
      return Value();
    SmallVector<Value, 2> &parts = it->second;
    if (parts.size() == 1)
      return parts.front();
    NodeOp sum =
        nb.node(loc, parts.size() == 2 ? "Add" : "Sum", v.getType(), parts);
    sum->setAttr(kLayerAttr, layer);
    return sum->getResult(0);
  };
  {
    StringAttr lossLayer = b.getStringAttr(
        *nodeName(loss.getDefiningOp() ? loss.getDefiningOp()->getLoc()
                                       : forward.getLoc()));
    Value seed = nb.splat(loss.getLoc(), loss.getType(), 1.0);
    seed.getDefiningOp()->setAttr(kLayerAttr, lossLayer);
    contribs[loss].push_back(seed);
  }
  int64_t opset = 17;
  if (auto a = module->getAttrOfType<IntegerAttr>(kOpsetAttr))
    opset = a.getInt();
  for (Operation *op : llvm::reverse(active)) {
    auto node = cast<NodeOp>(op);
    StringAttr layer = b.getStringAttr(*nodeName(node.getLoc()));
    SmallVector<Value> dOuts;
    for (Value r : node->getResults())
      dOuts.push_back(gradOf(r, layer, node.getLoc()));
    GradContext c{nb, node, layer, dOuts, wants, opset, {}};
    if (failed(findRule(node)(c)))
      return failure();
    for (auto [v, d] : llvm::zip(node->getOperands(), c.dIns))
      if (d && wants(v))
        contribs[v].push_back(d);
  }

  // One gradient per trained parameter, ready where its last part is made.
  SmallVector<Value> results = {loss};
  SmallVector<DictionaryAttr> resultAttrs = {b.getDictionaryAttr(
      b.getNamedAttr(kOutputAttr, b.getStringAttr(lossName)))};
  for (BlockArgument p : paramArgs) {
    StringAttr name =
        step.getArgAttrOfType<StringAttr>(p.getArgNumber(), kParamAttr);
    Value g;
    auto it = contribs.find(p);
    if (it != contribs.end() && !it->second.empty()) {
      Operation *last = it->second.back().getDefiningOp();
      g = gradOf(p, last->getAttrOfType<StringAttr>(kLayerAttr),
                 last->getLoc());
    } else {
      mlir::emitWarning(forward.getLoc())
          << "parameter '" << name.getValue()
          << "' does not reach the loss; its gradient is zero";
      g = nb.splat(NameLoc::get(name), p.getType(), 0.0);
      g.getDefiningOp()->setAttr(kLayerAttr, name);
    }
    results.push_back(g);
    resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(kGradAttr, name)));
  }

  // Updated batch-norm statistics, in state order.
  DenseMap<Value, Value> newState;
  for (Operation &op : *body) {
    auto node = dyn_cast<NodeOp>(op);
    if (node && node.is("BatchNormalization") && node->getNumResults() == 5)
      for (unsigned k : {3u, 4u})
        if (auto arg = dyn_cast<BlockArgument>(node->getOperand(k)))
          newState[arg] = node->getResult(k - 2);
  }
  for (BlockArgument arg : body->getArguments()) {
    auto name =
        step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kStateAttr);
    if (!name || !newState.count(arg))
      continue;
    results.push_back(newState[arg]);
    resultAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(kNewStateAttr, name)));
  }

  b.setInsertionPointToEnd(body);
  b.create<func::ReturnOp>(oldReturn.getLoc(), results);
  step.setFunctionType(
      b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  step.setAllResultAttrs(resultAttrs);

  // Drop forward nodes that no longer feed anything (other model outputs).
  SmallVector<Operation *> forwardOps;
  for (Operation &op : body->without_terminator())
    if (isa<NodeOp>(op) && !isBackwardNode(&op))
      forwardOps.push_back(&op);
  for (Operation *op : llvm::reverse(forwardOps))
    if (op->use_empty())
      op->erase();

  numBackwardNodes =
      llvm::count_if(*body, [](Operation &op) { return isBackwardNode(&op); });
  numParams = params.size();
  numFrozen = frozen.size();
  forward.erase();
  return success();
}
