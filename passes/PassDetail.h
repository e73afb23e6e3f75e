//===- PassDetail.h - Helpers shared by the oasr passes ---------*- C++ -*-===//
//
// Attribute names of the training step (docs/IR.md) and small helpers on
// oasr.node used by more than one pass. Private to passes/.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_PASSES_PASSDETAIL_H
#define OASR_PASSES_PASSDETAIL_H

#include "oasr/Dialect/OASRDialect.h"

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

} // namespace mlir::oasr

#endif // OASR_PASSES_PASSDETAIL_H
