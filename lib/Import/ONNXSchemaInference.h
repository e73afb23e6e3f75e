//===- ONNXSchemaInference.h - libonnx per-node shape inference -*- C++ -*-===//
//
// Internal to lib/Import: runs libonnx's shape-inference function of one
// node's schema. libonnx reports failures with C++ exceptions, which the rest
// of oasr (like LLVM) is built without, so the call lives in its own
// translation unit built with exceptions and returns errors as strings.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_LIB_IMPORT_ONNXSCHEMAINFERENCE_H
#define OASR_LIB_IMPORT_ONNXSCHEMAINFERENCE_H

#include <string>
#include <vector>

namespace onnx {
class NodeProto;
class TensorProto;
class TypeProto;
} // namespace onnx

namespace oasr {
namespace onnximport {
namespace detail {

/// The highest opset of `domain` libonnx knows (0 for unknown domains).
int getMaxKnownOpset(const std::string &domain);

/// The opset at which libonnx's newest schema of `opType` at or below
/// `opset` was introduced, or 0 when libonnx has no such schema.
int getSchemaSinceVersion(const std::string &opType, const std::string &domain,
                          int opset);

enum class SchemaInference {
  /// libonnx has no schema (or no inference function) for the node.
  NoSchema,
  /// `outputTypes` holds what libonnx inferred (possibly partial).
  Inferred,
  /// libonnx reported an error, in `error`.
  Failed,
};

/// Runs the inference function of the schema of `node` at `opset` (clamped
/// to what libonnx knows). `inputTypes[i]`/`inputData[i]` describe input `i`
/// (null when absent or unknown); `outputTypes` gets one entry per output.
SchemaInference
inferWithSchema(const onnx::NodeProto &node, int opset,
                const std::vector<const onnx::TypeProto *> &inputTypes,
                const std::vector<const onnx::TensorProto *> &inputData,
                std::vector<onnx::TypeProto> &outputTypes, std::string &error);

} // namespace detail
} // namespace onnximport
} // namespace oasr

#endif // OASR_LIB_IMPORT_ONNXSCHEMAINFERENCE_H
