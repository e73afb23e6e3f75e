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
  // The phases of `run`, in order.
  LogicalResult classifyArguments(ModuleOp module, struct StepBuild &sb);
  LogicalResult chooseOutput(struct StepBuild &sb);
  LogicalResult buildStep(ModuleOp module, struct StepBuild &sb);
  Value appendLoss(struct StepBuild &sb, NodeBuilder &nb);
  LogicalResult activeNodes(struct StepBuild &sb, Value loss,
                            SmallVector<BlockArgument> &paramArgs,
                            llvm::DenseSet<Value> &needsGrad,
                            SmallVector<Operation *> &active);
  LogicalResult backwardSweep(ModuleOp module, struct StepBuild &sb,
                              NodeBuilder &nb, Value loss,
                              const llvm::DenseSet<Value> &needsGrad,
                              ArrayRef<Operation *> active,
                              DenseMap<Value, SmallVector<Value, 2>> &contribs);
  void returnResults(struct StepBuild &sb, NodeBuilder &nb, Value loss,
                     ArrayRef<BlockArgument> paramArgs,
                     DenseMap<Value, SmallVector<Value, 2>> &contribs,
                     Location returnLoc);
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

namespace {
/// The training step being built from @forward: what the phases of
/// AutodiffPass::run share.
struct StepBuild {
  func::FuncOp forward, step;
  Block *body = nullptr; ///< the step's
  /// @forward's arguments by role.
  SmallVector<unsigned> inputs, params, frozen, states;
  SmallVector<std::pair<unsigned, unsigned>> argMap; ///< old -> new
  SmallVector<Type> argTypes;
  /// The model output trained on: a scalar loss, or logits to put one on.
  int outputIndex = -1;
  Value output; ///< in @forward, then in the step
  RankedTensorType outputType;
  bool hasLoss = false, tokenLoss = false;
  int labelIndex = -1; ///< the label argument (-1: the model's own loss)
  int64_t opset = 17;
};
} // namespace

/// Sums the backward contributions to `v` (tagged with `layer`); null when
/// there is none.
static Value gradOf(DenseMap<Value, SmallVector<Value, 2>> &contribs,
                    NodeBuilder &nb, Value v, StringAttr layer, Location loc) {
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
}

LogicalResult AutodiffPass::classifyArguments(ModuleOp module, StepBuild &sb) {
  func::FuncOp forward = sb.forward;
  // Which parameters are trained (ONNX TrainingInfo), if the module says.
  std::optional<llvm::StringSet<>> trained;
  if (auto list = module->getAttrOfType<ArrayAttr>(kTrainedAttr)) {
    trained.emplace();
    for (Attribute a : list)
      if (auto s = dyn_cast<StringAttr>(a))
        trained->insert(s.getValue());
  }

  // Classify the arguments.
  for (unsigned i = 0, e = forward.getNumArguments(); i < e; ++i) {
    std::string p = argTag(forward, i, kParamAttr);
    if (!p.empty()) {
      (trained && !trained->contains(p) ? sb.frozen : sb.params).push_back(i);
    } else if (!argTag(forward, i, kStateAttr).empty()) {
      sb.states.push_back(i);
    } else {
      sb.inputs.push_back(i);
    }
  }
  if (trained)
    for (auto &entry : *trained)
      if (llvm::none_of(sb.params, [&](unsigned i) {
            return argTag(forward, i, kParamAttr) == entry.getKey();
          }))
        return module.emitError("oasr.trained names '")
               << entry.getKey() << "', which is not a parameter of @forward";

  return success();
}

LogicalResult AutodiffPass::chooseOutput(StepBuild &sb) {
  func::FuncOp forward = sb.forward;
  auto oldReturn =
      cast<func::ReturnOp>(forward.getBody().front().getTerminator());
  // Choose the model output: the loss itself, or logits to put a loss on.
  for (unsigned i = 0, e = forward.getNumResults(); i < e; ++i) {
    auto name = forward.getResultAttrOfType<StringAttr>(i, kOutputAttr);
    if (!outputName.empty()) {
      if (name && name.getValue() == outputName) {
        sb.outputIndex = i;
        break;
      }
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(forward.getResultTypes()[i]);
    if (!isFloatTensor(type))
      continue;
    if (type.getRank() == 0) {
      sb.outputIndex = i;
      break;
    }
    if (sb.outputIndex < 0)
      sb.outputIndex = i;
  }
  if (sb.outputIndex < 0) {
    if (!outputName.empty())
      return forward.emitError("no output named '") << outputName << "'";
    return forward.emitError("the model has no float output to train on");
  }
  sb.output = oldReturn.getOperand(sb.outputIndex);
  sb.outputType = dyn_cast<RankedTensorType>(sb.output.getType());
  auto describeOutput = [&]() {
    std::string text = llvm::formatv("output #{0}", sb.outputIndex).str();
    if (auto name = forward.getResultAttrOfType<StringAttr>(sb.outputIndex,
                                                            kOutputAttr))
      text += (" '" + name.getValue() + "'").str();
    return text + llvm::formatv(" ({0})", sb.output.getType()).str();
  };
  if (!isFloatTensor(sb.outputType))
    return forward.emitError()
           << describeOutput() << " is not a float tensor to train on";
  sb.hasLoss = sb.outputType.getRank() == 0;
  if (!sb.hasLoss && sb.outputType.getRank() < 2)
    return forward.emitError()
           << describeOutput()
           << " must be a scalar loss or logits [N, C, ...]";

  return success();
}

LogicalResult AutodiffPass::buildStep(ModuleOp module, StepBuild &sb) {
  MLIRContext *ctx = module.getContext();
  func::FuncOp forward = sb.forward;
  Block &oldBody = forward.getBody().front();
  // The new signature: inputs, label, trained params, frozen params + state.
  OpBuilder b(forward);
  SmallVector<DictionaryAttr> argAttrs;
  auto addArg = [&](unsigned old, DictionaryAttr attrs) {
    if (!attrs)
      attrs = DictionaryAttr::get(ctx);
    sb.argMap.push_back({old, sb.argTypes.size()});
    sb.argTypes.push_back(forward.getArgumentTypes()[old]);
    argAttrs.push_back(attrs);
  };
  for (unsigned i : sb.inputs)
    addArg(i, forward.getArgAttrDict(i));
  // A sequence model: logits [N, T, V] from an integer [N, T] input get one
  // label per token.
  if (!sb.hasLoss && sb.outputType.getRank() == 3)
    for (unsigned i : sb.inputs) {
      auto t = dyn_cast<RankedTensorType>(forward.getArgumentTypes()[i]);
      if (t && t.getRank() == 2 && isa<IntegerType>(t.getElementType()) &&
          t.getDimSize(0) == sb.outputType.getDimSize(0) &&
          t.getDimSize(1) == sb.outputType.getDimSize(1))
        sb.tokenLoss = true;
    }
  if (!sb.hasLoss) {
    sb.labelIndex = sb.argTypes.size();
    SmallVector<int64_t> labelShape = {sb.outputType.getDimSize(0)};
    if (sb.tokenLoss)
      labelShape.push_back(sb.outputType.getDimSize(1));
    sb.argTypes.push_back(RankedTensorType::get(labelShape, b.getI64Type()));
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kLabelAttr, b.getStringAttr(labelName))));
  }
  for (unsigned i : sb.params)
    addArg(i, forward.getArgAttrDict(i));
  for (unsigned i : sb.frozen) {
    NamedAttrList attrs(forward.getArgAttrDict(i));
    Attribute name = attrs.erase(kParamAttr);
    attrs.set(kStateAttr, name);
    addArg(i, attrs.getDictionary(ctx));
  }
  for (unsigned i : sb.states)
    addArg(i, forward.getArgAttrDict(i));

  sb.step = b.create<func::FuncOp>(forward.getLoc(), kTrainStepFn,
                                   b.getFunctionType(sb.argTypes, {}));
  sb.step.setAllArgAttrs(argAttrs);
  Block *body = sb.body = sb.step.addEntryBlock();
  IRMapping mapping;
  for (auto [old, fresh] : sb.argMap)
    mapping.map(forward.getArgument(old), body->getArgument(fresh));
  b.setInsertionPointToEnd(body);
  for (Operation &op : oldBody.without_terminator())
    b.clone(op, mapping);
  sb.output = mapping.lookup(sb.output);

  nameNodes(*body);
  if (auto a = module->getAttrOfType<IntegerAttr>(kOpsetAttr))
    sb.opset = a.getInt();
  // Training-form rewrites replace nodes (a model's own
  // SoftmaxCrossEntropyLoss gains its log_prob result): a placeholder use
  // keeps `output` pointing at the live value.
  auto keepOutput = b.create<UnrealizedConversionCastOp>(
      forward.getLoc(), TypeRange{}, ValueRange{sb.output});
  if (failed(toTrainingForm(*body, sb.opset)))
    return failure();
  sb.output = keepOutput->getOperand(0);
  keepOutput->erase();

  return success();
}

Value AutodiffPass::appendLoss(StepBuild &sb, NodeBuilder &nb) {
  OpBuilder &b = nb.b;
  // The loss.
  Value loss = sb.output;
  if (!sb.hasLoss) {
    Location lossLoc = NameLoc::get(b.getStringAttr(lossName));
    Value scores = loss;
    Value labels = sb.body->getArgument(sb.labelIndex);
    if (sb.tokenLoss) {
      int64_t rows = sb.outputType.getDimSize(0) * sb.outputType.getDimSize(1);
      auto flat = RankedTensorType::get({rows, sb.outputType.getDimSize(2)},
                                        sb.outputType.getElementType());
      auto flatLabels = RankedTensorType::get({rows}, b.getI64Type());
      Location at = NameLoc::get(b.getStringAttr(lossName + "/Reshape"));
      scores = nb.node(at, "Reshape", flat,
                       {scores, nb.shapeConstant(at, flat.getShape())})
                   ->getResult(0);
      labels = nb.node(at, "Reshape", flatLabels,
                       {labels, nb.shapeConstant(at, flatLabels.getShape())})
                   ->getResult(0);
    } else if (sb.outputType.getRank() > 2) {
      auto flat = RankedTensorType::get(
          {sb.outputType.getDimSize(0),
           sb.outputType.getNumElements() / sb.outputType.getDimSize(0)},
          sb.outputType.getElementType());
      scores = nb.node(NameLoc::get(b.getStringAttr(lossName + "/Flatten")),
                       "Flatten", flat, {scores},
                       {b.getNamedAttr("axis", b.getI64IntegerAttr(1))})
                   ->getResult(0);
    }
    NodeOp sce =
        nb.node(lossLoc, "SoftmaxCrossEntropyLoss",
                {RankedTensorType::get({}, sb.outputType.getElementType()),
                 scores.getType()},
                {scores, labels},
                {b.getNamedAttr("reduction", b.getStringAttr("mean"))});
    if (ignoreIndex >= 0)
      sce->setAttr("ignore_index", b.getI64IntegerAttr(ignoreIndex));
    if (labelSmoothing != 0)
      sce->setAttr("label_smoothing", b.getF32FloatAttr(labelSmoothing));
    loss = sce->getResult(0);
  }

  if (sb.hasLoss)
    tagOwnLossLabels(sb.step, loss);

  return loss;
}

LogicalResult AutodiffPass::activeNodes(StepBuild &sb, Value loss,
                                        SmallVector<BlockArgument> &paramArgs,
                                        llvm::DenseSet<Value> &needsGrad,
                                        SmallVector<Operation *> &active) {
  // needsGrad: values that depend on a trained parameter.
  for (auto [old, fresh] : sb.argMap)
    if (llvm::is_contained(sb.params, old))
      paramArgs.push_back(sb.body->getArgument(fresh));
  for (BlockArgument a : paramArgs)
    needsGrad.insert(a);
  for (Operation &op : *sb.body)
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return needsGrad.contains(v); }))
      for (Value r : op.getResults())
        if (isFloatTensor(r.getType()))
          needsGrad.insert(r);

  // reachesLoss: values the loss depends on.
  llvm::DenseSet<Value> reaches;
  reaches.insert(loss);
  for (Operation &op : llvm::reverse(*sb.body))
    if (llvm::any_of(op.getResults(),
                     [&](Value v) { return reaches.contains(v); }))
      for (Value v : op.getOperands())
        if (isFloatTensor(v.getType()))
          reaches.insert(v);

  // Forward nodes on a path from a parameter to the loss, in block order.
  for (Operation &op : *sb.body)
    if (llvm::any_of(op.getResults(), [&](Value v) {
          return needsGrad.contains(v) && reaches.contains(v);
        }))
      active.push_back(&op);
  numForwardNodes =
      llvm::count_if(*sb.body, [](Operation &op) { return isa<NodeOp>(op); });

  // Check every active node has a rule before building anything.
  for (Operation *op : active) {
    auto node = dyn_cast<NodeOp>(op);
    if (!node)
      return op->emitError("cannot differentiate '")
             << op->getName() << "' on the path from a parameter to the loss";
    if (!findRule(node, sb.opset))
      return node.emitError("no gradient rule for '")
             << node.getOpType() << "' node \"" << *nodeName(node.getLoc())
             << "\" on the path from a parameter to the loss";
  }

  return success();
}

LogicalResult
AutodiffPass::backwardSweep(ModuleOp module, StepBuild &sb, NodeBuilder &nb,
                            Value loss, const llvm::DenseSet<Value> &needsGrad,
                            ArrayRef<Operation *> active,
                            DenseMap<Value, SmallVector<Value, 2>> &contribs) {
  OpBuilder &b = nb.b;
  // The backward sweep.
  auto wants = [&](Value v) {
    return needsGrad.contains(v) && isFloatTensor(v.getType());
  };
  {
    // A loss that is a graph input has no node to name its layer.
    StringAttr lossLayer = b.getStringAttr(
        nodeName(loss.getDefiningOp() ? loss.getDefiningOp()->getLoc()
                                      : sb.forward.getLoc())
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
      dOuts.push_back(gradOf(contribs, nb, r, layer, node.getLoc()));
    GradContext c{nb, node, layer, dOuts, wants, sb.opset, {}};
    if (failed(findRule(node, sb.opset)->grad(c)))
      return failure();
    for (auto [v, d] : llvm::zip(node->getOperands(), c.dIns))
      if (d && wants(v))
        contribs[v].push_back(d);
  }

  return success();
}

void AutodiffPass::returnResults(
    StepBuild &sb, NodeBuilder &nb, Value loss,
    ArrayRef<BlockArgument> paramArgs,
    DenseMap<Value, SmallVector<Value, 2>> &contribs, Location returnLoc) {
  OpBuilder &b = nb.b;
  // One gradient per trained parameter, ready where its last part is made.
  SmallVector<Value> results = {loss};
  SmallVector<DictionaryAttr> resultAttrs = {b.getDictionaryAttr(
      b.getNamedAttr(kOutputAttr, b.getStringAttr(lossName)))};
  for (BlockArgument p : paramArgs) {
    StringAttr name =
        sb.step.getArgAttrOfType<StringAttr>(p.getArgNumber(), kParamAttr);
    Value g;
    auto it = contribs.find(p);
    if (it != contribs.end() && !it->second.empty()) {
      Operation *last = it->second.back().getDefiningOp();
      g = gradOf(contribs, nb, p, last->getAttrOfType<StringAttr>(kLayerAttr),
                 last->getLoc());
    } else {
      mlir::emitWarning(sb.forward.getLoc())
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
  for (Operation &op : *sb.body) {
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
  for (BlockArgument arg : sb.body->getArguments()) {
    auto name =
        sb.step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kStateAttr);
    if (!name || !newState.count(arg))
      continue;
    results.push_back(newState[arg]);
    resultAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(kNewStateAttr, name)));
  }

  b.setInsertionPointToEnd(sb.body);
  b.create<func::ReturnOp>(returnLoc, results);
  sb.step.setFunctionType(
      b.getFunctionType(sb.argTypes, ValueRange(results).getTypes()));
  sb.step.setAllResultAttrs(resultAttrs);

  // Drop forward nodes that no longer feed anything (other model outputs).
  SmallVector<Operation *> forwardOps;
  for (Operation &op : sb.body->without_terminator())
    if (isa<NodeOp>(op) && !isBackwardNode(&op))
      forwardOps.push_back(&op);
  for (Operation *op : llvm::reverse(forwardOps))
    if (op->use_empty())
      op->erase();

  numBackwardNodes = llvm::count_if(
      *sb.body, [](Operation &op) { return isBackwardNode(&op); });
}

LogicalResult AutodiffPass::run(ModuleOp module, func::FuncOp forward) {
  if (!llvm::hasSingleElement(forward.getBody()))
    return forward.emitError("@forward must have exactly one block");
  Location returnLoc = forward.getBody().front().getTerminator()->getLoc();
  StepBuild sb;
  sb.forward = forward;
  if (failed(classifyArguments(module, sb)) || failed(chooseOutput(sb)) ||
      failed(buildStep(module, sb)))
    return failure();
  OpBuilder b(sb.step);
  NodeBuilder nb{b};
  b.setInsertionPointToEnd(sb.body);
  Value loss = appendLoss(sb, nb);

  // The forward nodes on a path from a trained parameter to the loss, each
  // with a gradient rule; then backward through them in reverse.
  SmallVector<BlockArgument> paramArgs;
  llvm::DenseSet<Value> needsGrad;
  SmallVector<Operation *> active;
  if (failed(activeNodes(sb, loss, paramArgs, needsGrad, active)))
    return failure();
  DenseMap<Value, SmallVector<Value, 2>> contribs;
  if (failed(backwardSweep(module, sb, nb, loss, needsGrad, active, contribs)))
    return failure();
  returnResults(sb, nb, loss, paramArgs, contribs, returnLoc);
  numParams = sb.params.size();
  numFrozen = sb.frozen.size();
  forward.erase();
  return success();
}
