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
#include "oasr/Ops/OpRegistry.h"
#include "oasr/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <numeric>

namespace mlir::oasr {
#define GEN_PASS_DEF_AUTODIFF
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;

//===----------------------------------------------------------------------===//
// Rules from the op registry
//===----------------------------------------------------------------------===//

using ::oasr::ops::GradContext;
using ::oasr::ops::isFloatTensor;
using ::oasr::ops::NodeBuilder;
using ::oasr::ops::OpDef;
using ::oasr::ops::OpRegistry;

/// The registry entry of `node` at `opset`, when it has a gradient rule.
static const OpDef *findRule(NodeOp node, int64_t opset) {
  const OpDef *def = OpRegistry::get().lookup(node, int(opset));
  return def && def->grad ? def : nullptr;
}

/// Puts the nodes whose backward needs extra forward results into their
/// training form (docs/IR.md, "Forward nodes in training form").
static LogicalResult toTrainingForm(Block &body, int64_t opset) {
  for (Operation &op : llvm::make_early_inc_range(body)) {
    auto node = dyn_cast<NodeOp>(op);
    if (!node)
      continue;
    const OpDef *def = OpRegistry::get().lookup(node, int(opset));
    if (def && def->trainingForm && failed(def->trainingForm(node)))
      return failure();
  }
  return success();
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

/// A model with its own loss (a `SoftmaxCrossEntropyLoss` on the path to
/// `loss`) reads its labels from a graph input: retags that i64 argument of
/// `step` from `oasr.input` to `oasr.label`, so the runtime feeds it from the
/// data loader as it does the label argument of an appended loss. Only one
/// argument becomes the label.
static void tagOwnLossLabels(func::FuncOp step, Value loss) {
  llvm::SetVector<Operation *> toVisit;
  if (Operation *def = loss.getDefiningOp())
    toVisit.insert(def);
  for (unsigned i = 0; i < toVisit.size(); ++i) {
    Operation *op = toVisit[i];
    auto node = dyn_cast<NodeOp>(op);
    if (node && ::oasr::ops::rolesOf(node).loss &&
        node->getNumOperands() >= 2) {
      auto labels = dyn_cast<BlockArgument>(node->getOperand(1));
      auto type = labels ? dyn_cast<RankedTensorType>(labels.getType())
                         : RankedTensorType();
      unsigned index = labels ? labels.getArgNumber() : 0;
      auto name = labels ? step.getArgAttrOfType<StringAttr>(index, kInputAttr)
                         : StringAttr();
      if (name && type && type.getElementType().isInteger(64)) {
        step.removeArgAttr(index, kInputAttr);
        step.setArgAttr(index, kLabelAttr, name);
        return;
      }
    }
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        toVisit.insert(def);
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
  // An imported training graph (ONNX Runtime's) is already the step.
  if (!forward && module->hasAttr(kStepSourceAttr) &&
      module.lookupSymbol<func::FuncOp>(kTrainStepFn))
    return;
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
  // A sequence model: logits [N, T, V] from an integer [N, T] input get one
  // label per token.
  bool tokenLoss = false;
  if (!hasLoss && outputType.getRank() == 3)
    for (unsigned i : inputs) {
      auto t = dyn_cast<RankedTensorType>(forward.getArgumentTypes()[i]);
      if (t && t.getRank() == 2 && isa<IntegerType>(t.getElementType()) &&
          t.getDimSize(0) == outputType.getDimSize(0) &&
          t.getDimSize(1) == outputType.getDimSize(1))
        tokenLoss = true;
    }
  int labelIndex = -1;
  if (!hasLoss) {
    labelIndex = argTypes.size();
    SmallVector<int64_t> labelShape = {outputType.getDimSize(0)};
    if (tokenLoss)
      labelShape.push_back(outputType.getDimSize(1));
    argTypes.push_back(RankedTensorType::get(labelShape, b.getI64Type()));
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
  int64_t opset = 17;
  if (auto a = module->getAttrOfType<IntegerAttr>(kOpsetAttr))
    opset = a.getInt();
  // Training-form rewrites replace nodes (a model's own
  // SoftmaxCrossEntropyLoss gains its log_prob result): a placeholder use
  // keeps `output` pointing at the live value.
  auto keepOutput = b.create<UnrealizedConversionCastOp>(
      forward.getLoc(), TypeRange{}, ValueRange{output});
  if (failed(toTrainingForm(*body, opset)))
    return failure();
  output = keepOutput->getOperand(0);
  keepOutput->erase();
  NodeBuilder nb{b};
  b.setInsertionPointToEnd(body);

  // The loss.
  Value loss = output;
  if (!hasLoss) {
    Location lossLoc = NameLoc::get(b.getStringAttr(lossName));
    Value scores = loss;
    Value labels = body->getArgument(labelIndex);
    if (tokenLoss) {
      int64_t rows = outputType.getDimSize(0) * outputType.getDimSize(1);
      auto flat = RankedTensorType::get({rows, outputType.getDimSize(2)},
                                        outputType.getElementType());
      auto flatLabels = RankedTensorType::get({rows}, b.getI64Type());
      Location at = NameLoc::get(b.getStringAttr(lossName + "/Reshape"));
      scores = nb.node(at, "Reshape", flat,
                       {scores, nb.shapeConstant(at, flat.getShape())})
                   ->getResult(0);
      labels = nb.node(at, "Reshape", flatLabels,
                       {labels, nb.shapeConstant(at, flatLabels.getShape())})
                   ->getResult(0);
    } else if (outputType.getRank() > 2) {
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
                {scores, labels},
                {b.getNamedAttr("reduction", b.getStringAttr("mean"))});
    if (ignoreIndex >= 0)
      sce->setAttr("ignore_index", b.getI64IntegerAttr(ignoreIndex));
    loss = sce->getResult(0);
  }

  if (hasLoss)
    tagOwnLossLabels(step, loss);

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
    if (!findRule(node, opset))
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
    // A loss that is a graph input has no node to name its layer.
    StringAttr lossLayer = b.getStringAttr(
        nodeName(loss.getDefiningOp() ? loss.getDefiningOp()->getLoc()
                                      : forward.getLoc())
            .value_or(lossName));
    Value seed = nb.splat(loss.getLoc(), loss.getType(), 1.0);
    seed.getDefiningOp()->setAttr(kLayerAttr, lossLayer);
    // f16 gradients need a loss scale (the runtime writes it here).
    if (auto p = module->getAttrOfType<StringAttr>(kPrecisionAttr);
        p && p.getValue() == "f16")
      seed.getDefiningOp()->setAttr(kLossScaleAttr,
                                    UnitAttr::get(module.getContext()));
    contribs[loss].push_back(seed);
  }
  for (Operation *op : llvm::reverse(active)) {
    auto node = cast<NodeOp>(op);
    StringAttr layer = b.getStringAttr(*nodeName(node.getLoc()));
    SmallVector<Value> dOuts;
    for (Value r : node->getResults())
      dOuts.push_back(gradOf(r, layer, node.getLoc()));
    GradContext c{nb, node, layer, dOuts, wants, opset, {}};
    if (failed(findRule(node, opset)->grad(c)))
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
    if (!node)
      continue;
    // The training form's updated running statistics.
    const ::oasr::ops::OpRoles &roles = ::oasr::ops::rolesOf(node);
    if (roles.statsCount > 0 &&
        node->getNumResults() >= unsigned(roles.statsResult + roles.statsCount))
      for (int j = 0; j < roles.statsCount; ++j)
        if (auto arg = dyn_cast<BlockArgument>(
                node->getOperand(unsigned(roles.statsOperand + j))))
          newState[arg] = node->getResult(unsigned(roles.statsResult + j));
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
