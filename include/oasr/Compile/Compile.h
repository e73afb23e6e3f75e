//===- Compile.h - A model file to a training module, in process -*- C++
//-*-===//
//
// What `oasr-run model.onnx` does before it trains: import the ONNX model
// and run the training pipeline (autodiff, cost annotation, allreduce
// planning, gradient layout, optimizer) with the allreduce model chosen the
// way the run's options say. A .mlir file is parsed as it is: it carries its
// plan already.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_COMPILE_COMPILE_H
#define OASR_COMPILE_COMPILE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::oasr {

/// The allreduce model planned with when a run gives none and
/// $OASR_COMM_CALIBRATION names no file: roughly Open MPI over shared memory
/// on one host (measure yours with `oasr-bench comm`).
constexpr double kDefaultAllreduceAlpha = 2e-5, kDefaultAllreduceBeta = 5e-10;

/// How to compile an .onnx model for training. Every field left at its
/// default keeps the pipeline's own default.
struct TrainingCompileOptions {
  // Import.
  int64_t batch = 0;             ///< > 0: dimension 0 of every input
  std::vector<std::string> dims; ///< `name=value` for symbolic dimensions
  int64_t ignoreIndex = -1;      ///< label the loss ignores (negative: none)
  double labelSmoothing = 0;     ///< of the appended loss, in [0, 1)
  // Planning.
  std::string strategy;
  double alpha = -1, beta = -1;      ///< seconds, seconds/byte
  std::string commFile;              ///< oasr-bench comm calibration
  std::optional<double> overlapRate; ///< in [0, 1]
  std::string profile;               ///< oasr-profile-v1 to plan from
  /// Element type gradients travel in: "f32", "bf16" or "f16" (empty: f32).
  std::string gradDtype;
  /// What groups may send: "off", "powersgd:R" or "auto[:R[-M]]" (empty: off).
  std::string compress;
  /// Allreduce route per group: "auto", "flat" or "two-level" (empty:
  /// auto).
  std::string twoLevel;
  /// The step's precision: "f32", "tf32", "bf16" or "f16" (empty: f32).
  std::string precision;
  /// Import a model that looks exported for inference (BatchNormalization
  /// folded away: onnximport::inferenceGraphReason) instead of refusing it.
  bool allowInferenceGraph = false;
  /// Fold attention into FusedAttention (--fuse-attention).
  bool fuseAttention = true;
  /// Which parameters are trained (onnximport::ImportOptions).
  std::string trainable, freeze;
  // The optimizer.
  std::string optimizer;
  double momentum = -1, lr = -1;
  /// Weight decay (none: the optimizer's default), which parameters go
  /// without it ("1d", "none" or a regex), adam's "B1,B2" (empty: default)
  /// and epsilon (none: default).
  std::optional<double> weightDecay, epsilon;
  std::string decayExclude = "1d", betas;

  /// Whether any planning or import option was given (a .mlir module
  /// carries its plan, so these are refused for one).
  bool anyCompileOption() const;
};

/// A compiled training module and where its allreduce model came from.
struct CompiledTraining {
  OwningOpRef<ModuleOp> module;
  /// "--alpha/--beta", "calibration FILE", "the profile's allreduce model",
  /// "the default allreduce model", or empty for a .mlir module.
  std::string commSource;
  /// The default model was used (the user should calibrate).
  bool usedDefaultComm = false;
  /// The passes' remarks (what was fused and what was not, and why).
  std::vector<std::string> remarks;
};

/// Imports and compiles `path` (.onnx, recognised by content) or parses it
/// (.mlir). Without --alpha/--beta, --comm or a profile carrying a model,
/// the allreduce model comes from the file $OASR_COMM_CALIBRATION names,
/// else the default. Errors carry the diagnostics, with the file and node
/// or option at fault.
llvm::Expected<CompiledTraining>
compileForTraining(MLIRContext &ctx, llvm::StringRef path,
                   const TrainingCompileOptions &options);

} // namespace mlir::oasr

#endif // OASR_COMPILE_COMPILE_H
