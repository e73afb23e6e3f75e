//===- TrainStep.cpp - Helpers shared by the oasr passes ------------------===//

#include "PassDetail.h"

using namespace mlir;
using namespace mlir::oasr;

int64_t mlir::oasr::tensorElements(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return 0;
  return t.getNumElements();
}

int64_t mlir::oasr::tensorBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return 0;
  return t.getNumElements() *
         std::max<int64_t>(1, t.getElementTypeBitWidth() / 8);
}

func::FuncOp mlir::oasr::getTrainStep(ModuleOp module, StringRef passName) {
  auto fn = module.lookupSymbol<func::FuncOp>(kTrainStepFn);
  if (!fn)
    module.emitError() << passName
                       << " needs a 'func.func @train_step' (run "
                          "--oasr-autodiff first)";
  return fn;
}

//===----------------------------------------------------------------------===//
// StepAnalysis
//===----------------------------------------------------------------------===//

/// The gradient as backward made it: looks through allreduce waits.
static Value throughAllreduce(Value v) {
  if (auto wait = v.getDefiningOp<AllreduceWaitOp>())
    if (AllreduceStartOp start = wait.getStart())
      return start.getGrads()[cast<OpResult>(v).getResultNumber()];
  return v;
}

FailureOr<StepAnalysis> StepAnalysis::build(func::FuncOp func) {
  StepAnalysis a;
  a.func = func;
  if (!llvm::hasSingleElement(func.getBody()))
    return func.emitError("@train_step must have exactly one block");
  Block &body = func.getBody().front();
  llvm::DenseMap<Operation *, int64_t> position;
  for (Operation &op : body) {
    if (!isa<NodeOp>(op))
      continue;
    if (isBackwardNode(&op)) {
      position[&op] = a.backwardOps.size();
      a.backwardOps.push_back(&op);
    } else {
      a.forwardOps.push_back(&op);
    }
    auto cost = op.getAttrOfType<CostAttr>(kCostAttr);
    if (!cost)
      a.hasCosts = false;
    else if (!isBackwardNode(&op))
      a.forwardUs += cost.getForwardTime();
  }

  // Gradients by parameter name: returned ones, or those fed to updates.
  llvm::StringMap<Value> gradOf;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (auto name = func.getResultAttrOfType<StringAttr>(i, kGradAttr))
      gradOf[name.getValue()] = ret.getOperand(i);
  for (auto update : body.getOps<OptimizerUpdateOp>())
    if (auto arg = dyn_cast<BlockArgument>(update.getParam()))
      if (auto name =
              func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttr))
        gradOf[name.getValue()] = update.getGrad();
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, kParamAttr);
    if (!name)
      continue;
    auto it = gradOf.find(name.getValue());
    if (it == gradOf.end())
      return func.emitError("parameter '")
             << name.getValue() << "' has no gradient in @train_step";
    StepGrad g;
    g.param = name.getValue().str();
    g.value = throughAllreduce(it->second);
    g.readyOp = g.value.getDefiningOp();
    if (!g.readyOp || !position.count(g.readyOp))
      return func.emitError("the gradient of '")
             << g.param << "' is not made by a backward node";
    g.readyPos = position[g.readyOp];
    g.bytes = tensorBytes(g.value.getType());
    // PowerSGD compresses f32 matrices only.
    if (auto t = dyn_cast<RankedTensorType>(g.value.getType());
        t && t.getRank() >= 2 && t.hasStaticShape() &&
        t.getElementType().isF32())
      g.rows = uint64_t(t.getDimSize(0));
    a.grads.push_back(std::move(g));
  }

  // Layers in backward order, closed at each node that makes gradients ready.
  llvm::DenseMap<Operation *, SmallVector<unsigned>> readyAt;
  for (auto [i, g] : llvm::enumerate(a.grads))
    readyAt[g.readyOp].push_back(i);
  SmallVector<StepLayer> backwardLayers;
  StepLayer current;
  for (Operation *op : a.backwardOps) {
    current.backwardOps.push_back(op);
    if (auto cost = op->getAttrOfType<CostAttr>(kCostAttr))
      current.backwardUs += cost.getBackwardTime();
    auto it = readyAt.find(op);
    if (it == readyAt.end())
      continue;
    current.name = layerOf(op).str();
    current.readyOp = op;
    current.readyPos = position[op];
    current.grads = it->second;
    backwardLayers.push_back(std::move(current));
    current = StepLayer();
  }
  // Backward nodes after the last gradient is ready (dead input gradients)
  // still take compute time: they extend the last layer in backward order.
  if (!current.backwardOps.empty() && !backwardLayers.empty()) {
    StepLayer &last = backwardLayers.back();
    last.backwardUs += current.backwardUs;
    last.backwardOps.append(current.backwardOps);
  }
  a.layers.assign(backwardLayers.rbegin(), backwardLayers.rend());
  return a;
}

::oasr::schedule::Profile StepAnalysis::toProfile(double updateUs) const {
  ::oasr::schedule::Profile p;
  if (auto model = func->getParentOfType<ModuleOp>()->getAttrOfType<StringAttr>(
          kModelAttr))
    p.model = model.getValue().str();
  p.source = "oasr.cost of @train_step";
  p.forwardUs = forwardUs;
  p.updateUs = updateUs;
  for (const StepLayer &l : layers) {
    ::oasr::schedule::Layer layer;
    layer.name = l.name;
    layer.backwardUs = l.backwardUs;
    for (unsigned g : l.grads)
      layer.grads.push_back({grads[g].param, grads[g].bytes, grads[g].rows});
    p.layers.push_back(std::move(layer));
  }
  return p;
}

SmallVector<unsigned> StepAnalysis::readyOrder() const {
  SmallVector<unsigned> order;
  for (const StepLayer &l : llvm::reverse(layers))
    order.append(l.grads.begin(), l.grads.end());
  return order;
}
