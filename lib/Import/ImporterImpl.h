//===- ImporterImpl.h - The ONNX importer class -----------------*- C++ -*-===//
//
// Private to lib/Import: the importer class (one name -> Value symbol table,
// onnx-mlir's shape) whose members live in ONNXImporter.cpp (driver,
// diagnostics, versions), ImportValues.cpp (types, initializers,
// attributes), ImportNodes.cpp (shape rules, folding, nodes) and
// ImportTraining.cpp (training info), and the limits they share.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_LIB_IMPORT_IMPORTERIMPL_H
#define OASR_LIB_IMPORT_IMPORTERIMPL_H

#include "oasr/Import/ONNXImporter.h"

#include "ONNXSchemaInference.h"
#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Import/ONNXModel.h"
#include "oasr/Import/ORTTraining.h"
#include "oasr/Ops/OpRegistry.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <numeric>
#include <optional>

namespace oasr::onnximport::detail {

using namespace mlir;
namespace ops = ::oasr::ops;
using llvm::SmallVector;
using llvm::StringRef;

/// Supported ranges (see docs/importer.md).
inline constexpr int64_t kMinIRVersion = 3, kMaxIRVersion = 11;
inline constexpr int64_t kMinOpset = 11, kMaxOpset = 23;
/// Non-parameter initializers with at most this many elements become
/// `Constant` nodes; bigger float ones become state, others resource blobs.
inline constexpr int64_t kSmallConstant = 16;
/// Initializers up to this many elements are scanned for NaN and infinity
/// before they are trained (a mask or a table; larger tensors are weights).
inline constexpr int64_t kNonFiniteScanLimit = int64_t(1) << 24;
/// The ONNX metadata key oasr.export writes: a JSON array of the names of
/// the initializers that are trained parameters (python/oasr/_export.py).
inline constexpr llvm::StringLiteral kParametersMetadataKey = "oasr.parameters";
/// Integer tensors up to this size are folded for shape computations.
inline constexpr int64_t kFoldLimit = 4096;
/// Tensor attributes bigger than this are kept as resource blobs.
inline constexpr int64_t kInlineAttrLimit = 1024;

//===----------------------------------------------------------------------===//
// Tensor facts: types, shapes and folded values
//===----------------------------------------------------------------------===//

/// What the importer knows about one value, and small integer tensors known
/// at import time: the op registry's facts.
using TensorInfo = ::oasr::ops::TensorFacts;
using FoldedValue = ::oasr::ops::FoldedInts;

inline bool isIntegerType(int32_t t) {
  switch (static_cast<DataType>(t)) {
  case DataType::Int64:
  case DataType::Int32:
  case DataType::Int16:
  case DataType::Int8:
  case DataType::UInt8:
  case DataType::UInt16:
  case DataType::UInt32:
  case DataType::UInt64:
  case DataType::Bool:
    return true;
  default:
    return false;
  }
}

inline bool isFloatType(int32_t t) {
  switch (static_cast<DataType>(t)) {
  case DataType::Float:
  case DataType::Double:
  case DataType::Float16:
  case DataType::BFloat16:
    return true;
  default:
    return false;
  }
}

/// Role of an initializer in the imported function.
enum class InitRole { Unused, Param, State, Constant };

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

class ONNXImporter {
public:
  ONNXImporter(MLIRContext &context, const ModelFile &model,
               const ImportOptions &options)
      : context(context), model(model), options(options),
        graph(model.proto().graph()), builder(&context) {}

  OwningOpRef<ModuleOp> run();
  /// Every initializer: its type, folded value and role.
  LogicalResult readInitializers();

private:
  // Diagnostics.
  InFlightDiagnostic emitModelError();
  InFlightDiagnostic emitNodeError(const onnx::NodeProto &node);
  Location getNodeLoc(const onnx::NodeProto &node, size_t index);

  // Checks before importing.
  LogicalResult checkVersions();
  LogicalResult checkNodeDomains();
  LogicalResult checkSingleAssignment();
  LogicalResult checkWindowOperands(const onnx::NodeProto &node,
                                    ArrayRef<const TensorInfo *> inputs);

  // Types.
  std::optional<Type> getElementType(int32_t onnxType);
  FailureOr<RankedTensorType> getTensorType(const TensorInfo &info);
  TensorInfo getInfo(const onnx::TypeProto &type);
  void toTypeProto(const TensorInfo &info, onnx::TypeProto &type);
  LogicalResult applyInputOverrides(const onnx::ValueInfoProto &input,
                                    TensorInfo &info);

  // Initializers.
  LogicalResult classifyInitializers();
  /// The roles' second pass: the exporter's record, the trainable and
  /// freeze patterns, non-finite values; remarks say what was decided.
  LogicalResult decideTrained();
  bool isTrainableUse(const onnx::NodeProto &node, size_t position,
                      const onnx::TensorProto &init);
  FailureOr<Attribute> getTensorAttr(const onnx::TensorProto &tensor,
                                     const onnx::NodeProto *node);
  void foldInitializer(const onnx::TensorProto &tensor);
  Value materializeConstant(const onnx::TensorProto &tensor);
  /// The folded value of `name` as a Constant node (built once), or null
  /// when it was not folded or already is a Constant.
  Value foldedConstant(StringRef name, Value current);
  /// Erases the shape computations that folding left without a user.
  void eraseDeadFoldedNodes(Block &body);

  // Nodes.
  LogicalResult importNode(const onnx::NodeProto &node, size_t index);
  LogicalResult inferNode(const onnx::NodeProto &node,
                          SmallVectorImpl<TensorInfo> &outputs);
  bool inferWithOwnRules(const onnx::NodeProto &node,
                         llvm::ArrayRef<const TensorInfo *> in,
                         SmallVectorImpl<TensorInfo> &out, std::string &why);
  void foldNode(const onnx::NodeProto &node,
                llvm::ArrayRef<TensorInfo> outputs);
  FailureOr<NamedAttribute> convertAttribute(const onnx::NodeProto &node,
                                             const onnx::AttributeProto &attr);
  const onnx::TensorProto *getFoldedProto(StringRef name);
  const FoldedValue *getFolded(const onnx::NodeProto &node, size_t i);
  /// The values of a small float constant (a Constant node's output or an
  /// initializer), or null.
  const SmallVector<double, 4> *getSmallFloats(StringRef name);

  // Training info.
  void collectTrained();
  void importTrainingInfo(ModuleOp module);

  int getOpset(StringRef domain) const {
    auto it = opsets.find(domain == "ai.onnx" ? "" : domain);
    return it == opsets.end() ? 0 : it->second;
  }

  MLIRContext &context;
  const ModelFile &model;
  const ImportOptions &options;
  /// The static batch --batch replaced (0: none did).
  int64_t rebatchedFrom = 0;
  const onnx::GraphProto &graph;
  OpBuilder builder;
  Location fileLoc = UnknownLoc::get(&context);

  /// The symbol table: ONNX value name -> IR value.
  llvm::StringMap<Value> symbols;
  /// ONNX value name -> known type and shape.
  llvm::StringMap<TensorInfo> infos;
  /// ONNX value name -> folded small integer value.
  llvm::StringMap<FoldedValue> folded;
  llvm::StringMap<onnx::TensorProto> foldedProtos;
  /// Folded values materialized as Constant nodes for their consumers, and
  /// the nodes whose every result was folded (dead once bypassed).
  llvm::StringMap<Value> foldedConstants;
  llvm::SmallPtrSet<Operation *, 16> foldedProducers;
  /// Small float constants read so far (null: not one).
  llvm::StringMap<std::optional<SmallVector<double, 4>>> smallFloats;
  /// Tensors of Constant nodes, by output name.
  llvm::StringMap<const onnx::TensorProto *> constantTensors;
  /// Declared types from the model's value_info / outputs (fallback).
  llvm::StringMap<const onnx::TypeProto *> declared;
  llvm::StringMap<int> opsets;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<InitRole> roles;
  /// Tensors the model's TrainingInfo trains, in its order.
  SmallVector<std::string> trainedOrder;
  llvm::StringSet<> trained;
  bool hasTrainingInfo = false;
  int64_t defaultOpset = 0;
  Block *body = nullptr;
};

/// The values of a small integer (or bool) tensor, or std::nullopt
/// (ImportValues.cpp).
std::optional<FoldedValue> readIntTensor(const ModelFile &model,
                                         const onnx::TensorProto &tensor);

} // namespace oasr::onnximport::detail

#endif // OASR_LIB_IMPORT_IMPORTERIMPL_H
