//===- PassDetail.h - Helpers shared by the oasr passes ---------*- C++ -*-===//
//
// Small helpers on oasr.node used by more than one pass (the attribute
// names of the training step are in oasr/Dialect/AttrNames.h). Private to
// passes/.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_PASSES_PASSDETAIL_H
#define OASR_PASSES_PASSDETAIL_H

#include "oasr/Dialect/AttrNames.h"
#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Ops/GradContext.h"
#include "oasr/Schedule/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir::oasr {

/// The backward-node tag of `op` (`oasr.layer`), or an empty string for
/// forward nodes.
inline llvm::StringRef layerOf(Operation *op) {
  if (auto s = op->getAttrOfType<StringAttr>(kLayerAttr))
    return s.getValue();
  return {};
}

/// The training step (`@train_step`), else the imported `@forward`, else
/// null: what the passes that run on either form rewrite.
inline func::FuncOp stepOrForward(ModuleOp module) {
  if (auto step = module.lookupSymbol<func::FuncOp>(kTrainStepFn))
    return step;
  return module.lookupSymbol<func::FuncOp>(kForwardFn);
}

/// True for nodes created by autodiff (they carry `oasr.layer`).
inline bool isBackwardNode(Operation *op) {
  return isa<NodeOp>(op) && op->hasAttr(kLayerAttr);
}

/// Bytes of a statically shaped tensor type (0 for anything else).
int64_t tensorBytes(Type type);

/// Number of elements of a statically shaped tensor type (0 otherwise).
int64_t tensorElements(Type type);

/// The `@train_step` function of `module`, with an error on `module` when it
/// is missing (`passName` goes into the message).
func::FuncOp getTrainStep(ModuleOp module, llvm::StringRef passName);

//===----------------------------------------------------------------------===//
// The training step seen as the planner's profile
//===----------------------------------------------------------------------===//

/// One parameter gradient of the step.
struct StepGrad {
  std::string param;
  /// The gradient as backward produces it (before any allreduce).
  Value value;
  /// The backward node that makes it ready, and its index in backward order.
  Operation *readyOp = nullptr;
  int64_t readyPos = 0;
  uint64_t bytes = 0;
  uint64_t rows = 0; ///< first dimension of an f32 matrix (rank >= 2), else 0
};

/// One planner layer: the backward nodes up to (and including) a node that
/// makes parameter gradients ready. Non-parameter backward nodes fold into
/// the next such node in backward order.
struct StepLayer {
  std::string name;
  Operation *readyOp = nullptr;
  int64_t readyPos = 0;
  /// Indices into StepAnalysis::grads, in parameter order.
  llvm::SmallVector<unsigned> grads;
  llvm::SmallVector<Operation *> backwardOps;
  double backwardUs = 0;
};

/// The training step's structure: forward and backward nodes, gradients in
/// parameter order, and layers in forward order (backward visits them last to
/// first). Works before and after plan-allreduce and the optimizer pass.
struct StepAnalysis {
  func::FuncOp func;
  llvm::SmallVector<Operation *> forwardOps, backwardOps;
  llvm::SmallVector<StepGrad> grads;
  llvm::SmallVector<StepLayer> layers;
  double forwardUs = 0;
  /// True when every node carries an `oasr.cost`.
  bool hasCosts = true;

  /// Builds the analysis; errors are emitted on the function.
  static FailureOr<StepAnalysis> build(func::FuncOp func);

  /// The planner's profile of this step: one layer per StepLayer (forward
  /// order), backward_us = the summed costs of its backward nodes, forward_us
  /// = the summed forward costs, and `updateUs`.
  ::oasr::schedule::Profile toProfile(double updateUs = 0) const;

  /// Gradient indices (into `grads`) in the planner's ready order.
  llvm::SmallVector<unsigned> readyOrder() const;
};

} // namespace mlir::oasr

#endif // OASR_PASSES_PASSDETAIL_H
