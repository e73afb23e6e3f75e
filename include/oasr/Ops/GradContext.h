//===- GradContext.h - What a gradient rule sees ----------------*- C++ -*-===//
//
// The context autodiff hands to an op's gradient rule (OpDef::grad) and the
// small helpers the rules and training forms of lib/Ops share: reading
// constant operands and attributes of oasr.node, and building backward
// nodes tagged with the forward node's layer.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_OPS_GRADCONTEXT_H
#define OASR_OPS_GRADCONTEXT_H

#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Ops/OpRegistry.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <numeric>
#include <optional>

namespace mlir::oasr {
/// The node name carried by `loc` (a NameLoc, possibly inside a FusedLoc or
/// CallSiteLoc), or std::nullopt.
std::optional<std::string> nodeName(Location loc);
} // namespace mlir::oasr

namespace oasr::ops {

using mlir::ArrayRef;
using mlir::Attribute;
using mlir::cast;
using mlir::DenseElementsAttr;
using mlir::dyn_cast;
using mlir::dyn_cast_or_null;
using mlir::FloatType;
using mlir::isa;
using mlir::Location;
using mlir::LogicalResult;
using mlir::NamedAttribute;
using mlir::OpBuilder;
using mlir::Operation;
using mlir::RankedTensorType;
using mlir::SmallVector;
using mlir::StringAttr;
using mlir::StringRef;
using mlir::Twine;
using mlir::Type;
using mlir::TypeRange;
using mlir::Value;
using mlir::ValueRange;
using mlir::oasr::NodeOp;

//===----------------------------------------------------------------------===//
// Reading nodes
//===----------------------------------------------------------------------===//

/// The dense value of `v` when it is produced by a Constant node.
DenseElementsAttr constantOf(Value v);
/// The integers of a constant integer tensor or of an integer list attribute.
std::optional<SmallVector<int64_t>> intsOf(Attribute attr);
/// The single number of a constant scalar (or one-element) tensor.
std::optional<double> scalarOf(Value v);
/// Evaluates a small integer tensor computed from constants and static
/// shapes (Shape, Gather, Add/Sub/Mul/Div, Cast, Unsqueeze, Squeeze,
/// Reshape, Concat), as exporters emit for Slice bounds.
std::optional<SmallVector<int64_t>> evalInts(Value v, unsigned depth = 0);
int64_t intAttr(Operation *op, StringRef name, int64_t dflt);
std::optional<double> floatAttr(Operation *op, StringRef name);
/// ONNX attributes of a node: its discardable attributes except oasr.*.
SmallVector<NamedAttribute> onnxAttrs(Operation *op);
/// `type` with element type `element`.
RankedTensorType withElementType(Type type, Type element);
/// True for a ranked tensor of floats.
bool isFloatTensor(Type type);
/// The ONNX TensorProto.DataType of a float element type (f32, f16, bf16,
/// f64), as Cast's `to` names it; 0 for any other type.
int64_t onnxFloatType(Type element);

//===----------------------------------------------------------------------===//
// Building nodes
//===----------------------------------------------------------------------===//

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

  /// `Cast {to}` of float tensor `v` to element type `element`.
  Value castTo(Location loc, Value v, Type element) {
    return node(loc, "Cast", withElementType(v.getType(), element), {v},
                {b.getNamedAttr("to",
                                b.getI64IntegerAttr(onnxFloatType(element)))})
        ->getResult(0);
  }

  Value shapeConstant(Location loc, ArrayRef<int64_t> shape) {
    auto t = RankedTensorType::get({int64_t(shape.size())}, b.getI64Type());
    return constant(loc, DenseElementsAttr::get(t, shape));
  }
};

/// Replaces `op` by a node of the same type with `types` results and
/// `operands`, plus extra attributes. Old results map to the first new ones.
NodeOp rebuildNode(NodeOp op, TypeRange types, ValueRange operands,
                   ArrayRef<NamedAttribute> extraAttrs = {});

/// Training forms that replace a node by other ops build them before it,
/// at its location: `v` reshaped to `shape` (itself when it has that
/// shape), `v` transposed by `perm`, and `node`'s one result replaced by
/// `v`, the node erased.
Value reshapeAt(NodeOp node, Value v, ArrayRef<int64_t> shape);
Value transposeAt(NodeOp node, Value v, ArrayRef<int64_t> perm);
LogicalResult replaceBy(NodeOp node, Value v);

/// The ONNX position of each operand of `node` (absent optional inputs
/// left out in the middle are recorded in oasr.absent_inputs), and the
/// operand at ONNX position `position` (null when absent).
SmallVector<int64_t> onnxPositions(NodeOp node);
Value onnxOperand(NodeOp node, int64_t position);

//===----------------------------------------------------------------------===//
// The gradient rule's context
//===----------------------------------------------------------------------===//

/// What a gradient rule sees: the forward node, the gradients of its results
/// and a builder for backward nodes tagged with the node's layer.
struct GradContext {
  NodeBuilder &nb;
  NodeOp fwd;
  StringAttr layer;
  ArrayRef<Value> dOuts; // per result; null when none flows back
  llvm::function_ref<bool(Value)>
      wantsGrad; // does this operand need a gradient?
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
    v.getDefiningOp()->setAttr(mlir::oasr::kLayerAttr, layer);
    return v;
  }

  /// A backward node tagged with this layer. Every op a rule emits must
  /// have a registry entry (so the coverage test sees it); emitting one that
  /// has none is an internal error.
  NodeOp node(StringRef type, TypeRange results, ValueRange operands,
              ArrayRef<NamedAttribute> attrs = {}, StringRef domain = {});
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

} // namespace oasr::ops

#endif // OASR_OPS_GRADCONTEXT_H
