//===- TrainStep.cpp - Helpers shared by the oasr passes ------------------===//

#include "PassDetail.h"

using namespace mlir;
using namespace mlir::oasr;

std::optional<std::string> mlir::oasr::nodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::optional<std::string> name = nodeName(inner))
        return name;
  if (auto call = dyn_cast<CallSiteLoc>(loc))
    return nodeName(call.getCallee());
  return std::nullopt;
}

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
