//===- PassDetail.h - Helpers shared by the oasr passes ---------*- C++ -*-===//
//
// Attribute names of the training step (docs/IR.md) and small helpers on
// oasr.node used by more than one pass. Private to passes/.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_PASSES_PASSDETAIL_H
#define OASR_PASSES_PASSDETAIL_H

#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Schedule/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir::oasr {

// Function argument tags.
constexpr llvm::StringLiteral kInputAttr = "oasr.input";
constexpr llvm::StringLiteral kLabelAttr = "oasr.label";
constexpr llvm::StringLiteral kParamAttr = "oasr.param";
constexpr llvm::StringLiteral kStateAttr = "oasr.state";
constexpr llvm::StringLiteral kOptStateAttr = "oasr.opt_state";
// Function result tags.
constexpr llvm::StringLiteral kOutputAttr = "oasr.output";
constexpr llvm::StringLiteral kGradAttr = "oasr.grad";
constexpr llvm::StringLiteral kGradBytesAttr = "oasr.grad_bytes";
constexpr llvm::StringLiteral kReadyAttr = "oasr.ready";
constexpr llvm::StringLiteral kNewStateAttr = "oasr.new_state";
constexpr llvm::StringLiteral kNewParamAttr = "oasr.new_param";
constexpr llvm::StringLiteral kNewOptStateAttr = "oasr.new_opt_state";
// Operation attributes.
constexpr llvm::StringLiteral kLayerAttr = "oasr.layer";
constexpr llvm::StringLiteral kCostAttr = "oasr.cost";
// Module attributes.
constexpr llvm::StringLiteral kTrainedAttr = "oasr.trained";
constexpr llvm::StringLiteral kOptimizerAttr = "oasr.optimizer";
constexpr llvm::StringLiteral kOpsetAttr = "oasr.opset";
constexpr llvm::StringLiteral kPlanAttr = "oasr.plan";
constexpr llvm::StringLiteral kCommAttr = "oasr.comm";
constexpr llvm::StringLiteral kCostModelAttr = "oasr.cost_model";

constexpr llvm::StringLiteral kForwardFn = "forward";
constexpr llvm::StringLiteral kTrainStepFn = "train_step";

/// The node name carried by `loc` (a NameLoc, possibly inside a FusedLoc or
/// CallSiteLoc), or std::nullopt.
std::optional<std::string> nodeName(Location loc);

/// The backward-node tag of `op` (`oasr.layer`), or an empty string for
/// forward nodes.
inline llvm::StringRef layerOf(Operation *op) {
  if (auto s = op->getAttrOfType<StringAttr>(kLayerAttr))
    return s.getValue();
  return {};
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
