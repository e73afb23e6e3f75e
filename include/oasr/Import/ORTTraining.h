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
#include "llvm/Support/Error.h"

#include <string>

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

/// Gives the parameters of an ONNX Runtime training model their values from
/// the `checkpoint` beside it (generate_artifacts keeps them there; the
/// model has them as graph inputs): every graph input the checkpoint holds
/// gets an initializer of the same name whose data is the tensor's bytes in
/// the checkpoint, as ONNX external data (location "checkpoint", offset,
/// length), so import and the run read the values from there. Returns the
/// checkpoint's path, or "" when the model needs none (not ORT's, or every
/// parameter has a value: a model folded by scripts/ort_artifacts.py).
/// Errors name the files: no checkpoint, a truncated or corrupt one, a
/// tensor that is no graph input of the model, one whose dims or data type
/// differ from the input's, a parameter the checkpoint lacks.
llvm::Expected<std::string> attachORTCheckpoint(ModelFile &model);

/// Imports an ONNX Runtime training model as `func.func @train_step`:
/// rewrites ORT's conventions and `com.microsoft` training ops in `model`'s
/// graph onto oasr's, imports it, and tags loss, label, gradients and
/// backward nodes. Parameters without values take them from the checkpoint
/// beside the model (attachORTCheckpoint). Errors are MLIR diagnostics
/// naming the file and node.
mlir::OwningOpRef<mlir::ModuleOp>
importORTTraining(mlir::MLIRContext &context, ModelFile &model,
                  const ImportOptions &options);

} // namespace onnximport
} // namespace oasr

#endif // OASR_IMPORT_ORTTRAINING_H
