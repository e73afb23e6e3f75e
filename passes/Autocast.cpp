//===- Autocast.cpp - Mixed precision from the registry's policies --------===//
//
// Rewrites @forward so each node computes in the type its op's precision
// policy asks for (OpDef::precision), with Cast nodes at the boundaries.
// Runs before autodiff: the casts are differentiated like any node, so the
// backward graph follows the same types and the parameters' gradients come
// back to f32 (the master weights' type) through the casts' gradients.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::oasr {
#define GEN_PASS_DEF_AUTOCAST
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;
using ::oasr::ops::OpRegistry;
using ::oasr::ops::Precision;

namespace {
struct AutocastPass : mlir::oasr::impl::AutocastBase<AutocastPass> {
  using Base::Base;
  void runOnOperation() final;
};

/// The casting state of one function: which values are parameters or
/// constants (not cast by follow nodes) and the casts made so far.
class Caster {
public:
  Caster(OpBuilder &b, llvm::Statistic &casts, llvm::Statistic &reused)
      : b(b), numCasts(casts), numReused(reused) {}

  llvm::DenseSet<Value> constLike;

  /// `v` as element type `elem`, cast before `before` when it is not.
  Value castTo(Value v, Type elem, Operation *before) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getElementType() == elem)
      return v;
    // A cast back to the type a value was widened from (by the model's
    // Cast or ours) reads the original: bf16/f16 -> f32 is exact.
    if (auto def = v.getDefiningOp<NodeOp>(); def && def.is("Cast")) {
      Value src = def->getOperand(0);
      auto srcType = dyn_cast<RankedTensorType>(src.getType());
      if (srcType && srcType.getElementType() == elem &&
          elem.getIntOrFloatBitWidth() < type.getElementTypeBitWidth()) {
        ++numReused;
        return src;
      }
    }
    // Hoisted through a layout op (a view, a Transpose) read only here: the
    // op moves the narrower elements, and a product can then read the
    // transposed operand through its strides (oasr-fuse-matmul-transpose).
    // A widening cast is hoisted through views only (they copy nothing).
    bool narrowing =
        elem.getIntOrFloatBitWidth() < type.getElementTypeBitWidth();
    if (auto def = v.getDefiningOp<NodeOp>();
        def && v.hasOneUse() && def->getNumResults() == 1 &&
        ((narrowing && def.is("Transpose")) ||
         ::oasr::ops::OpRegistry::get().hasTrait(def.getOpType(),
                                                 ::oasr::ops::View))) {
      Value src = def->getOperand(0);
      auto srcType = dyn_cast<RankedTensorType>(src.getType());
      if (srcType && srcType.getElementType() == type.getElementType()) {
        def->setOperand(0, castTo(src, elem, def));
        v.setType(type.clone(elem));
        return v;
      }
    }
    auto key = std::make_pair(v, elem);
    if (auto it = casts.find(key); it != casts.end()) {
      ++numReused;
      return it->second;
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(before);
    std::string name;
    llvm::raw_string_ostream os(name);
    os << baseName(v) << "/autocast_" << elem;
    ::oasr::ops::NodeBuilder nb{b};
    Value c = nb.castTo(NameLoc::get(b.getStringAttr(name)), v, elem);
    if (constLike.contains(v))
      constLike.insert(c);
    casts[key] = c;
    ++numCasts;
    return c;
  }

private:
  static std::string baseName(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto fn = cast<func::FuncOp>(arg.getOwner()->getParentOp());
      for (StringRef tag : {kParamAttr, kStateAttr, kInputAttr})
        if (auto s = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), tag))
          return s.getValue().str();
      return "arg" + std::to_string(arg.getArgNumber());
    }
    Operation *op = v.getDefiningOp();
    std::string name = nodeName(op->getLoc()).value_or("node");
    if (op->getNumResults() > 1)
      name += ":" + std::to_string(cast<OpResult>(v).getResultNumber());
    return name;
  }

  OpBuilder &b;
  llvm::Statistic &numCasts, &numReused;
  llvm::DenseMap<std::pair<Value, Type>, Value> casts;
};
} // namespace

static Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

/// f32, f16 and bf16 tensors take part; f64 and integers do not.
static bool isCastable(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && (t.getElementType().isF32() || t.getElementType().isF16() ||
               t.getElementType().isBF16());
}

static void setResultType(Value r, Type elem) {
  r.setType(cast<RankedTensorType>(r.getType()).clone(elem));
}

void AutocastPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = module.getContext();
  Builder types(ctx);
  Type low;
  if (precision == "bf16")
    low = types.getBF16Type();
  else if (precision == "f16")
    low = types.getF16Type();
  else if (precision != "f32" && precision != "tf32") {
    module.emitError("unknown precision '")
        << precision << "': expected f32, tf32, bf16 or f16";
    return signalPassFailure();
  }
  if (auto had = module->getAttrOfType<StringAttr>(kPrecisionAttr)) {
    if (had.getValue() != precision) {
      module.emitError("module is already in precision '")
          << had.getValue() << "', cannot change it to '" << precision << "'";
      return signalPassFailure();
    }
    return;
  }
  if (precision == "f32")
    return;
  auto forward = module.lookupSymbol<func::FuncOp>(kForwardFn);
  if (!forward) {
    module.emitError("precision '")
        << precision
        << "' needs the imported '@forward' graph: run oasr-autocast before "
           "oasr-autodiff (an imported ONNX Runtime training step cannot be "
           "recast)";
    return signalPassFailure();
  }
  module->setAttr(kPrecisionAttr, types.getStringAttr(precision));
  if (!low)
    return;
  if (!llvm::hasSingleElement(forward.getBody())) {
    forward.emitError("@forward must have exactly one block");
    return signalPassFailure();
  }

  Type f32 = types.getF32Type();
  OpBuilder b(ctx);
  Caster caster(b, numCasts, numReused);
  Block &body = forward.getBody().front();
  for (BlockArgument arg : body.getArguments())
    if (forward.getArgAttr(arg.getArgNumber(), kParamAttr) ||
        forward.getArgAttr(arg.getArgNumber(), kStateAttr))
      caster.constLike.insert(arg);

  const OpRegistry &registry = OpRegistry::get();
  SmallVector<NodeOp> nodes(body.getOps<NodeOp>());
  for (NodeOp node : nodes) {
    if (llvm::all_of(node->getOperands(),
                     [&](Value v) { return caster.constLike.contains(v); }))
      for (Value r : node->getResults())
        caster.constLike.insert(r);
    const ::oasr::ops::OpDef *def = registry.lookup(node);
    Precision policy = def ? def->precision : Precision::F32;
    if (policy == Precision::Keep)
      continue;

    // The type the node computes in, and which operands it applies to.
    Type target;
    bool onlyComputed = false;
    switch (policy) {
    case Precision::Lower:
      target = low;
      break;
    case Precision::F32:
      target = f32;
      break;
    case Precision::Follow:
    case Precision::Normalize:
    case Precision::Keep:
      onlyComputed = true;
      for (Value v : node->getOperands()) {
        if (!isCastable(v) || caster.constLike.contains(v))
          continue;
        Type e = elementOf(v);
        target = !target || target == e ? e : f32;
      }
      break;
    }
    if (!target)
      continue; // only parameters and constants: as imported

    for (OpOperand &use : node->getOpOperands()) {
      Value v = use.get();
      if (!isCastable(v) || (onlyComputed && caster.constLike.contains(v)))
        continue;
      use.set(caster.castTo(v, target, node));
    }
    for (Value r : node->getResults()) {
      if (!isCastable(r))
        continue;
      if (policy == Precision::Normalize && r != node->getResult(0))
        continue;
      setResultType(r, target);
    }
    if (target == low)
      ++numLowered;
  }

  // The function's results keep their declared types.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  ArrayRef<Type> declared = forward.getFunctionType().getResults();
  for (OpOperand &use : ret->getOpOperands()) {
    Type want = declared[use.getOperandNumber()];
    if (use.get().getType() != want && isCastable(use.get()))
      use.set(caster.castTo(
          use.get(), cast<RankedTensorType>(want).getElementType(), ret));
  }

  // Casts left without readers (a model's own Cast whose reader now reads
  // the original) and casts between one type go.
  SmallVector<NodeOp> after(body.getOps<NodeOp>());
  for (NodeOp node : llvm::reverse(after)) {
    if (!node.is("Cast"))
      continue;
    Value src = node->getOperand(0), res = node->getResult(0);
    if (src.getType() == res.getType())
      res.replaceAllUsesWith(src);
    if (res.use_empty()) {
      node->erase();
      ++numRemoved;
    }
  }
}
