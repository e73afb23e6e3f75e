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

private:
  SourceModel() = default;
  std::unique_ptr<onnximport::ModelFile> model;
};

} // namespace oasr

#endif // OASR_COMPILE_SOURCEMODEL_H
