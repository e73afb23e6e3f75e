//===- Registration.cpp - Register oasr passes and pipelines --------------===//

#include "oasr/Passes/Passes.h"

void mlir::oasr::registerAllPasses() {
  registerOASRPasses();
  registerTrainPipeline();
}
