//===- ORTTraining.h - ONNX Runtime training models as a step ---*- C++ -*-===//
//
// ONNX Runtime's training artifacts (`training_model.onnx` from
// `onnxruntime.training.artifacts.generate_artifacts`) already hold forward,
// loss and the whole gradient graph. They import straight into the training
// step `--oasr-autodiff` would build (docs/IR.md section 2, docs/importer.md
// "ONNX Runtime training artifacts"), without differentiating again.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_IMPORT_ORTTRAINING_H
#define OASR_IMPORT_ORTTRAINING_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace onnx {
class ModelProto;
} // namespace onnx

namespace oasr {
namespace onnximport {

class ModelFile;
struct ImportOptions;

/// True when `proto` is an ONNX Runtime training graph: it accumulates
/// gradients (`com.microsoft::InPlaceAccumulatorV2`, the `lazy_reset_grad`
/// input) or returns parameter gradients as `<param>_grad` outputs.
bool isORTTrainingModel(const onnx::ModelProto &proto);

/// Imports an ONNX Runtime training model as `func.func @train_step`:
/// rewrites ORT's conventions and `com.microsoft` training ops in `model`'s
/// graph onto oasr's, imports it, and tags loss, label, gradients and
/// backward nodes. Errors are MLIR diagnostics naming the file and node.
mlir::OwningOpRef<mlir::ModuleOp>
importORTTraining(mlir::MLIRContext &context, ModelFile &model,
                  const ImportOptions &options);

} // namespace onnximport
} // namespace oasr

#endif // OASR_IMPORT_ORTTRAINING_H
