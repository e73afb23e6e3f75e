//===- SourceModel.h - The ONNX model a run trains, for weights and --save ===//
//
// A training module remembers the .onnx it was compiled from (the module
// attribute oasr.source). The run starts from that model's initializers and
// `--save` writes the model back with the trained ones.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_COMPILE_SOURCEMODEL_H
#define OASR_COMPILE_SOURCEMODEL_H

#include "oasr/Runtime/Executor.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>

namespace oasr {
namespace onnximport {
class ModelFile;
}

/// The ONNX source of a training module.
class SourceModel {
public:
  ~SourceModel();
  /// The model `exec.sourcePath()` names, or null when it names none or a
  /// file that no longer exists (the weights then start seeded random), or
  /// when this build has no importer. Errors name the file.
  static llvm::Expected<std::unique_ptr<SourceModel>>
  open(const rt::Executor &exec);

  /// Reads the initial weights: an f32 initializer of the same size for
  /// every persistent tensor that has one; the error names the
  /// initializer's problem (its type or size, or its external data).
  rt::InitializerLoader loader() const;

  /// Writes the model with `exec`'s trained parameters and state (and the
  /// update count T of an ONNX training model) to `path` atomically.
  /// Returns the number of initializers updated.
  llvm::Expected<size_t> save(rt::Executor &exec, llvm::StringRef path) const;

  /// The ONNX Runtime checkpoint the parameters come from (an ORT training
  /// model's `checkpoint`, see onnximport::attachORTCheckpoint), or "".
  const std::string &ortCheckpoint() const { return ortCheckpointPath; }

  /// After initializeWeights: when the ORT checkpoint holds optimizer state
  /// and the run trains with Adam, AdamW's moments ("momentum0",
  /// "momentum1") become Adam's state and the group's step advances the
  /// update count T. Returns the step restored (0 when none). Errors name
  /// the checkpoint and the parameter.
  llvm::Expected<int64_t> restoreOptimizerState(rt::Executor &exec);

  /// Writes an ONNX Runtime checkpoint to `path` atomically: the ORT
  /// checkpoint's tensors with `exec`'s trained values, Adam's moments and
  /// step as its optimizer group (when the run trains with Adam), and its
  /// properties. `learningRate` < 0 keeps the checkpoint's. Returns the
  /// number of parameters written.
  llvm::Expected<size_t> saveORT(rt::Executor &exec, llvm::StringRef path,
                                 double learningRate) const;

private:
  SourceModel() = default;
  std::unique_ptr<onnximport::ModelFile> model;
  std::string ortCheckpointPath;
  /// The update count before the first update of the run, less the
  /// checkpoint's step: T = base + ORT's step.
  int64_t baseUpdateCount = 0;
};

} // namespace oasr

#endif // OASR_COMPILE_SOURCEMODEL_H
