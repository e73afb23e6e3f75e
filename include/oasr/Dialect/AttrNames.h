//===- AttrNames.h - Names of oasr's discardable attributes -----*- C++ -*-===//
//
// The one list of the `oasr.*` attribute names the importer, the passes and
// the runtime read and write (docs/IR.md describes each).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_DIALECT_ATTRNAMES_H
#define OASR_DIALECT_ATTRNAMES_H

#include "llvm/ADT/StringRef.h"

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
/// Operand positions of optional ONNX inputs left out (oasr.node).
constexpr llvm::StringLiteral kAbsentInputsAttr = "oasr.absent_inputs";
constexpr llvm::StringLiteral kCostAttr = "oasr.cost";
// Module attributes.
constexpr llvm::StringLiteral kTrainedAttr = "oasr.trained";
constexpr llvm::StringLiteral kOptimizerAttr = "oasr.optimizer";
constexpr llvm::StringLiteral kOpsetAttr = "oasr.opset";
constexpr llvm::StringLiteral kPlanAttr = "oasr.plan";
constexpr llvm::StringLiteral kCommAttr = "oasr.comm";
/// The step's precision (`oasr-autocast`): "tf32", "bf16" or "f16"; absent
/// for f32.
constexpr llvm::StringLiteral kPrecisionAttr = "oasr.precision";
/// On the Constant that seeds backward (d loss = 1) of an f16 step: the
/// runtime writes the loss scale there every step (dynamic loss scaling).
constexpr llvm::StringLiteral kLossScaleAttr = "oasr.loss_scale";
constexpr llvm::StringLiteral kCostModelAttr = "oasr.cost_model";
constexpr llvm::StringLiteral kLossAttr = "oasr.loss";
constexpr llvm::StringLiteral kSourceAttr = "oasr.source";
constexpr llvm::StringLiteral kModelAttr = "oasr.model";
constexpr llvm::StringLiteral kProducerAttr = "oasr.producer";
/// The static batch an imported model's first input had, when `--batch`
/// replaced it with another (oasr-run says so on its start line).
constexpr llvm::StringLiteral kRebatchedFromAttr = "oasr.rebatched_from";
/// Where @train_step came from when no autodiff built it
/// ("onnxruntime-training": an imported ORT training model).
constexpr llvm::StringLiteral kStepSourceAttr = "oasr.step_source";

// Function names.
constexpr llvm::StringLiteral kForwardFn = "forward";
constexpr llvm::StringLiteral kTrainStepFn = "train_step";

} // namespace mlir::oasr

#endif // OASR_DIALECT_ATTRNAMES_H
