//===- ONNXImporter.h - ONNX model to oasr IR -------------------*- C++ -*-===//
//
// Imports an ONNX ModelProto into one `func.func @forward` of `oasr.node`s,
// with parameters, state and inputs as tagged function arguments (see
// docs/IR.md, section 1, and docs/importer.md).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_IMPORT_ONNXIMPORTER_H
#define OASR_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <string>

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace oasr {
namespace onnximport {

class ModelFile;

/// How to import a model.
struct ImportOptions {
  /// When positive, dimension 0 of every graph input becomes this value
  /// (symbolic or not).
  int64_t batch = 0;
  /// Values for symbolic dimensions, by `dim_param` name (`--dim name=value`).
  std::map<std::string, int64_t> dims;
  /// Name of the function holding the graph.
  std::string funcName = "forward";
  /// Check that external-data side files exist and are long enough (the
  /// rule that locations stay inside the model's directory holds anyway).
  bool checkExternalData = true;
  /// Use oasr's own shape rules first and libonnx's only for ops without
  /// one (by default libonnx goes first up to the opset it knows). For
  /// cross-checking the two.
  bool preferOwnShapeRules = false;
  /// Which float initializers are trained (docs/pytorch.md, "Parameters
  /// and buffers"): when not empty, only parameters whose name matches
  /// `trainable` (an llvm::Regex, searched) are trained; those matching
  /// `freeze` are held constant. A pattern that matches no parameter, or a
  /// set of options that leaves none trained, is an error.
  std::string trainable, freeze;
};

/// Parses `--dim` values of the form `name=value` into `options.dims`.
/// Returns false (and leaves `error` set) on a malformed entry.
bool parseDimOption(llvm::StringRef spec, ImportOptions &options,
                    std::string &error);

/// Imports the ONNX model at `path` (binary, text or JSON ModelProto).
/// The dialects it needs (oasr, func) are loaded into `context`. On failure
/// reports MLIR diagnostics naming the file and node and returns null.
mlir::OwningOpRef<mlir::ModuleOp> importONNX(mlir::MLIRContext &context,
                                             llvm::StringRef path,
                                             const ImportOptions &options = {});

/// Imports an already loaded model (the module's `oasr.source` is
/// `model.path()`).
mlir::OwningOpRef<mlir::ModuleOp> importONNX(mlir::MLIRContext &context,
                                             const ModelFile &model,
                                             const ImportOptions &options = {});

} // namespace onnximport
} // namespace oasr

#endif // OASR_IMPORT_ONNXIMPORTER_H
