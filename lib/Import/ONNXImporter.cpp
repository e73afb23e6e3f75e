//===- ONNXImporter.cpp - ONNX model to oasr IR ---------------------------===//
//
// One importer class with a name -> Value symbol table (onnx-mlir's shape):
// graph inputs, parameters and state become tagged arguments of
// `func.func @forward`, every node becomes one `oasr.node`, and every value
// gets a static ranked tensor type from libonnx's per-node shape inference,
// completed by oasr's own shape functions for the ops the compiler must
// understand (and for opsets newer than libonnx knows). Small integer tensors
// (shape computations) are folded on the side so Reshape/Expand/Slice/... of
// computed shapes get static types. Weights are never read.
//
//===----------------------------------------------------------------------===//

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

using namespace mlir;
using namespace ::oasr::onnximport;
namespace ops = ::oasr::ops;
using llvm::SmallVector;
using llvm::StringRef;

/// Supported ranges (see docs/importer.md).
static constexpr int64_t kMinIRVersion = 3, kMaxIRVersion = 10;
static constexpr int64_t kMinOpset = 11, kMaxOpset = 21;
/// Non-parameter initializers with at most this many elements become
/// `Constant` nodes; bigger float ones become state, others resource blobs.
static constexpr int64_t kSmallConstant = 16;
/// Integer tensors up to this size are folded for shape computations.
static constexpr int64_t kFoldLimit = 4096;
/// Tensor attributes bigger than this are kept as resource blobs.
static constexpr int64_t kInlineAttrLimit = 1024;

bool ::oasr::onnximport::parseDimOption(StringRef spec, ImportOptions &options,
                                        std::string &error) {
  auto [name, value] = spec.split('=');
  int64_t number;
  if (name.empty() || value.getAsInteger(10, number) || number <= 0) {
    error =
        ("--dim expects name=value with a positive value, got '" + spec + "'")
            .str();
    return false;
  }
  options.dims[name.str()] = number;
  return true;
}

namespace {

//===----------------------------------------------------------------------===//
// Tensor facts: types, shapes and folded values
//===----------------------------------------------------------------------===//

/// What the importer knows about one value, and small integer tensors known
/// at import time: the op registry's facts.
using TensorInfo = ::oasr::ops::TensorFacts;
using FoldedValue = ::oasr::ops::FoldedInts;

bool isIntegerType(int32_t t) {
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

bool isFloatType(int32_t t) {
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
  void classifyInitializers();
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

} // namespace

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

InFlightDiagnostic ONNXImporter::emitModelError() {
  return mlir::emitError(fileLoc) << model.path() << ": ";
}

InFlightDiagnostic ONNXImporter::emitNodeError(const onnx::NodeProto &node) {
  InFlightDiagnostic diag = emitModelError();
  diag << "node '" << node.name() << "' (";
  if (!node.domain().empty())
    diag << node.domain() << "::";
  diag << node.op_type() << "): ";
  return diag;
}

Location ONNXImporter::getNodeLoc(const onnx::NodeProto &node, size_t index) {
  std::string name = node.name();
  if (name.empty())
    name = node.output_size() ? node.output(0)
                              : node.op_type() + "_" + std::to_string(index);
  return NameLoc::get(StringAttr::get(&context, name));
}

//===----------------------------------------------------------------------===//
// Versions and domains
//===----------------------------------------------------------------------===//

static const char *const kKnownDomains[] = {
    "", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training", "com.microsoft"};

LogicalResult ONNXImporter::checkVersions() {
  const onnx::ModelProto &proto = model.proto();
  int64_t ir = proto.ir_version();
  if (ir < kMinIRVersion || ir > kMaxIRVersion)
    return emitModelError() << "IR version " << ir
                            << " is not supported (supported: " << kMinIRVersion
                            << " to " << kMaxIRVersion << ")";
  for (const onnx::OperatorSetIdProto &opset : proto.opset_import()) {
    std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    opsets[domain] = int(opset.version());
    if (domain.empty() &&
        (opset.version() < kMinOpset || opset.version() > kMaxOpset))
      return emitModelError()
             << "opset " << opset.version()
             << " of the default domain 'ai.onnx' is not supported "
                "(supported: "
             << kMinOpset << " to " << kMaxOpset << ")";
  }
  if (!opsets.count(""))
    return emitModelError()
           << "the model imports no opset of the default domain 'ai.onnx'";
  defaultOpset = opsets[""];
  return success();
}

LogicalResult ONNXImporter::checkNodeDomains() {
  llvm::StringSet<> localFunctions;
  for (const onnx::FunctionProto &f : model.proto().functions())
    localFunctions.insert(f.domain() + ":" + f.name());
  for (const onnx::NodeProto &node : graph.node()) {
    StringRef domain = node.domain();
    if (domain == "ai.onnx")
      domain = "";
    if (localFunctions.count((node.domain() + ":" + node.op_type())))
      return emitNodeError(node)
             << "model-local functions are not supported yet";
    if (!llvm::is_contained(kKnownDomains, domain))
      return emitNodeError(node)
             << "op in unknown domain '" << node.domain()
             << "' (known: ai.onnx, ai.onnx.ml, ai.onnx.preview.training, "
                "com.microsoft)";
    if (!opsets.count(domain))
      return emitNodeError(node) << "domain '" << node.domain()
                                 << "' is not in the model's opset_import";
  }
  if (graph.sparse_initializer_size())
    return emitModelError() << "sparse initializers are not supported";
  return success();
}

/// What ONNX's checker (check_graph, check_node) requires of names: every
/// value is written once (static single assignment: by one node output, a
/// graph input or an initializer) and a node has each attribute once.
/// Without this check the importer silently kept the last writer.
LogicalResult ONNXImporter::checkSingleAssignment() {
  // Value name -> who writes it (null node: a graph input or initializer).
  llvm::StringMap<std::pair<const onnx::NodeProto *, const char *>> writers;
  for (const onnx::ValueInfoProto &input : graph.input())
    writers.try_emplace(input.name(), nullptr, "a graph input");
  for (const onnx::TensorProto &init : graph.initializer())
    writers.try_emplace(init.name(), nullptr, "an initializer");
  for (const onnx::NodeProto &node : graph.node()) {
    llvm::StringSet<> attributes;
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (!attributes.insert(attr.name()).second)
        return emitNodeError(node)
               << "attribute '" << attr.name()
               << "' appears more than once (ONNX allows one per name)";
      // ONNX attributes become the node op's attributes: they must not
      // overwrite its own op_type/domain or oasr's annotations.
      StringRef name = attr.name();
      if (name == "op_type" || name == "domain" || name.starts_with("oasr."))
        return emitNodeError(node)
               << "attribute name '" << name
               << "' is reserved by oasr's IR (op_type, domain, oasr.*)";
      // Window sizes: shape inference (libonnx's too) divides by them.
      if ((name == "strides" || name == "dilations" ||
           name == "kernel_shape") &&
          llvm::any_of(attr.ints(), [](int64_t v) { return v <= 0; })) {
        InFlightDiagnostic diag = emitNodeError(node);
        diag << "attribute '" << name << "' must be positive, got [";
        llvm::interleaveComma(attr.ints(), diag);
        return diag << "]";
      }
    }
    for (const std::string &output : node.output()) {
      if (output.empty()) // an optional output left out
        continue;
      auto [it, inserted] = writers.try_emplace(output, &node, nullptr);
      if (inserted)
        continue;
      InFlightDiagnostic diag = emitNodeError(node);
      diag << "output '" << output << "' is already ";
      if (const onnx::NodeProto *first = it->second.first) {
        diag << "written by ";
        if (first == &node)
          diag << "this node";
        else
          diag << "node '" << first->name() << "' (" << first->op_type() << ")";
      } else {
        diag << it->second.second;
      }
      return diag << "; an ONNX graph writes each value once";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

std::optional<Type> ONNXImporter::getElementType(int32_t onnxType) {
  MLIRContext *ctx = &context;
  switch (static_cast<DataType>(onnxType)) {
  case DataType::Float:
    return Float32Type::get(ctx);
  case DataType::Double:
    return Float64Type::get(ctx);
  case DataType::Float16:
    return Float16Type::get(ctx);
  case DataType::BFloat16:
    return BFloat16Type::get(ctx);
  case DataType::Int64:
    return IntegerType::get(ctx, 64);
  case DataType::Int32:
    return IntegerType::get(ctx, 32);
  case DataType::Int16:
    return IntegerType::get(ctx, 16);
  case DataType::Int8:
    return IntegerType::get(ctx, 8);
  case DataType::UInt8:
    return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case DataType::UInt16:
    return IntegerType::get(ctx, 16, IntegerType::Unsigned);
  case DataType::UInt32:
    return IntegerType::get(ctx, 32, IntegerType::Unsigned);
  case DataType::UInt64:
    return IntegerType::get(ctx, 64, IntegerType::Unsigned);
  case DataType::Bool:
    return IntegerType::get(ctx, 1);
  default:
    return std::nullopt;
  }
}

FailureOr<RankedTensorType>
ONNXImporter::getTensorType(const TensorInfo &info) {
  std::optional<Type> element = getElementType(info.elemType);
  if (!element || !info.isStatic())
    return failure();
  return RankedTensorType::get(info.dims, *element);
}

TensorInfo ONNXImporter::getInfo(const onnx::TypeProto &type) {
  TensorInfo info;
  if (!type.has_tensor_type())
    return info;
  const onnx::TypeProto::Tensor &tensor = type.tensor_type();
  info.elemType = tensor.elem_type();
  if (!tensor.has_shape())
    return info;
  info.ranked = true;
  for (const onnx::TensorShapeProto::Dimension &dim : tensor.shape().dim()) {
    if (dim.has_dim_value()) {
      info.dims.push_back(dim.dim_value());
      continue;
    }
    auto it = dim.has_dim_param() ? options.dims.find(dim.dim_param())
                                  : options.dims.end();
    info.dims.push_back(it != options.dims.end() ? it->second : -1);
  }
  return info;
}

void ONNXImporter::toTypeProto(const TensorInfo &info, onnx::TypeProto &type) {
  onnx::TypeProto::Tensor *tensor = type.mutable_tensor_type();
  tensor->set_elem_type(info.elemType);
  if (!info.ranked)
    return;
  onnx::TensorShapeProto *shape = tensor->mutable_shape();
  for (int64_t d : info.dims) {
    onnx::TensorShapeProto::Dimension *dim = shape->add_dim();
    if (d >= 0)
      dim->set_dim_value(d);
  }
}

LogicalResult
ONNXImporter::applyInputOverrides(const onnx::ValueInfoProto &input,
                                  TensorInfo &info) {
  if (!input.type().has_tensor_type())
    return emitModelError()
           << "graph input '" << input.name() << "' is not a tensor";
  if (!info.ranked)
    return emitModelError()
           << "graph input '" << input.name() << "' has no shape";
  const auto &dims = input.type().tensor_type().shape().dim();
  // ONNX dimensions are never negative; a dimension of 0 (an empty tensor)
  // is valid ONNX but would make training run on nothing (a batch of 0
  // "trained" with loss 0), so oasr asks for a size.
  for (auto [i, dim] : llvm::enumerate(dims))
    if (dim.has_dim_value() && dim.dim_value() < 0)
      return emitModelError()
             << "graph input '" << input.name() << "' has negative dimension "
             << dim.dim_value() << " (dim " << i
             << "); ONNX dimensions are never negative";
  if (options.batch > 0 && !info.dims.empty()) {
    if (!dims.empty() && dims[0].has_dim_value() &&
        dims[0].dim_value() != options.batch && !rebatchedFrom)
      rebatchedFrom = dims[0].dim_value();
    info.dims[0] = options.batch;
  }
  for (auto [i, d] : llvm::enumerate(info.dims))
    if (d == 0)
      return emitModelError()
             << "graph input '" << input.name() << "' has dimension 0 (dim "
             << i << "): oasr cannot train on empty tensors; "
             << (i == 0 ? "set the batch with --batch=N"
                        : "fix the model's input shape");
  // Element counts are int64 products from here on (MLIR's, the runtime's).
  int64_t elements = 1;
  for (int64_t d : info.dims)
    if (d > 0 && llvm::MulOverflow(elements, d, elements)) {
      InFlightDiagnostic diag = emitModelError();
      diag << "graph input '" << input.name() << "' has dims [";
      llvm::interleaveComma(info.dims, diag);
      return diag << "]: more elements than a 64-bit count holds";
    }
  for (auto [i, d] : llvm::enumerate(info.dims)) {
    if (d >= 0)
      continue;
    const onnx::TensorShapeProto::Dimension &dim = dims[int(i)];
    InFlightDiagnostic diag = emitModelError();
    diag << "graph input '" << input.name() << "' has symbolic dimension ";
    if (dim.has_dim_param())
      diag << "'" << dim.dim_param() << "' ";
    diag << "(dim " << i << "); fix it with --batch=N";
    if (dim.has_dim_param())
      diag << " or --dim " << dim.dim_param() << "=N";
    return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Initializers
//===----------------------------------------------------------------------===//

/// Ops an initializer passes through unchanged in kind (views, casts): a
/// trainable use of the result is a trainable use of the initializer.
static bool isPassThrough(const onnx::NodeProto &node, size_t position) {
  StringRef op = node.op_type();
  if (op == "Identity" || op == "Transpose" || op == "Cast" || op == "Concat" ||
      op == "Flatten")
    return true;
  return position == 0 && (op == "Reshape" || op == "Slice" || op == "Split" ||
                           op == "Squeeze" || op == "Unsqueeze" ||
                           op == "Expand" || op == "Gather");
}

bool ONNXImporter::isTrainableUse(const onnx::NodeProto &node, size_t position,
                                  const onnx::TensorProto &init) {
  StringRef op = node.op_type();
  if (op == "Conv" || op == "ConvTranspose" || op == "PRelu")
    return position == 1 || position == 2;
  if (op == "Gemm" || op == "MatMul" || op == "Einsum")
    return true;
  if (op == "BatchNormalization" || op == "InstanceNormalization" ||
      op == "LayerNormalization" || op == "GroupNormalization" ||
      op == "SimplifiedLayerNormalization" || op == "SkipLayerNormalization")
    return position == 1 || position == 2;
  if (op == "Gather")
    return position == 0;
  if (op == "LSTM" || op == "GRU" || op == "RNN")
    return position >= 1 && position <= 3;
  // A non-scalar tensor added to or multiplied with an activation: a bias
  // (MatMul + Add) or a scale/shift (decomposed LayerNorm); or concatenated
  // with one: a learned token (ViT's class token, expanded over the batch).
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Concat") {
    int64_t numel = 1;
    for (int64_t d : init.dims())
      numel *= d;
    if (numel <= 1)
      return false;
    for (auto [i, name] : llvm::enumerate(node.input()))
      if (i != position && !initializers.count(name))
        return true;
  }
  return false;
}

void ONNXImporter::classifyInitializers() {
  // Consumers of every value.
  llvm::StringMap<SmallVector<std::pair<const onnx::NodeProto *, size_t>, 2>>
      users;
  for (const onnx::NodeProto &node : graph.node())
    for (auto [i, name] : llvm::enumerate(node.input()))
      if (!name.empty())
        users[name].push_back({&node, i});

  for (const onnx::TensorProto &init : graph.initializer()) {
    bool param = false, state = false, used = false;
    // Walk forward through pass-through ops (bounded).
    SmallVector<std::string, 4> worklist{init.name()};
    llvm::StringSet<> seen;
    while (!worklist.empty() && seen.size() < 64) {
      std::string name = worklist.pop_back_val();
      if (!seen.insert(name).second)
        continue;
      for (auto [node, pos] : users.lookup(name)) {
        used = true;
        if (isTrainableUse(*node, pos, init))
          param = true;
        else if (node->op_type() == "BatchNormalization" &&
                 (pos == 3 || pos == 4))
          state = true;
        else if (isPassThrough(*node, pos))
          for (const std::string &out : node->output())
            if (!out.empty())
              worklist.push_back(out);
      }
    }
    int64_t numel = 1;
    for (int64_t d : init.dims())
      numel *= d;
    bool isFloat = isFloatType(init.data_type());
    InitRole role;
    if (!used)
      role = InitRole::Unused;
    else if (!isFloat)
      role = InitRole::Constant;
    else if (hasTrainingInfo)
      role = trained.count(init.name())
                 ? InitRole::Param
                 : (numel <= kSmallConstant && !state && !param
                        ? InitRole::Constant
                        : InitRole::State);
    else if (param)
      role = InitRole::Param;
    else if (state || numel > kSmallConstant)
      role = InitRole::State;
    else
      role = InitRole::Constant;
    roles[init.name()] = role;
  }
}

FailureOr<Attribute>
ONNXImporter::getTensorAttr(const onnx::TensorProto &tensor,
                            const onnx::NodeProto *node) {
  auto fail = [&]() -> InFlightDiagnostic {
    if (node)
      return emitNodeError(*node);
    return emitModelError();
  };
  std::optional<Type> element = getElementType(tensor.data_type());
  if (!element) {
    fail() << "tensor '" << tensor.name() << "' has unsupported data type "
           << getDataTypeName(tensor.data_type());
    return failure();
  }
  auto data = model.readTensor(tensor);
  if (!data) {
    fail() << llvm::toString(data.takeError());
    return failure();
  }
  auto type = RankedTensorType::get(data->dims, *element);
  if (data->numElements() > kInlineAttrLimit) {
    // Big: a resource blob (elided when printing with
    // --mlir-elide-resource-strings-if-larger).
    std::string blobName = tensor.name();
    if (blobName.empty() && node)
      blobName = node->output_size() ? node->output(0) : node->name();
    if (blobName.empty())
      blobName = "onnx_tensor";
    return Attribute(DenseResourceElementsAttr::get(
        type, blobName,
        HeapAsmResourceBlob::allocateAndCopyWithAlign(
            llvm::ArrayRef<char>(
                reinterpret_cast<const char *>(data->bytes.data()),
                data->bytes.size()),
            alignof(uint64_t))));
  }
  if (tensor.data_type() == int32_t(DataType::Bool)) {
    SmallVector<bool> values;
    for (uint8_t b : data->bytes)
      values.push_back(b != 0);
    return Attribute(DenseElementsAttr::get(type, values));
  }
  bool detectedSplat = false;
  llvm::ArrayRef<char> raw(reinterpret_cast<const char *>(data->bytes.data()),
                           data->bytes.size());
  if (!DenseElementsAttr::isValidRawBuffer(type, raw, detectedSplat)) {
    fail() << "tensor '" << tensor.name() << "' has malformed data";
    return failure();
  }
  return Attribute(DenseElementsAttr::getFromRawBuffer(type, raw));
}

/// The integer of type T stored at `p` (unaligned, host byte order).
template <typename T> static int64_t loadInt(const uint8_t *p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return x;
}

/// The values of a small integer (or bool) tensor, or std::nullopt.
static std::optional<FoldedValue>
readIntTensor(const ModelFile &model, const onnx::TensorProto &tensor) {
  if (!isIntegerType(tensor.data_type()))
    return std::nullopt;
  int64_t numel = 1;
  for (int64_t d : tensor.dims())
    numel *= d;
  if (numel > kFoldLimit)
    return std::nullopt;
  auto data = model.readTensor(tensor);
  if (!data) {
    llvm::consumeError(data.takeError());
    return std::nullopt;
  }
  FoldedValue value;
  value.elemType = tensor.data_type();
  value.dims.assign(tensor.dims().begin(), tensor.dims().end());
  size_t size = getElementSize(tensor.data_type());
  if (data->bytes.size() < size_t(numel) * size)
    return std::nullopt;
  for (int64_t i = 0; i < numel; ++i) {
    const uint8_t *p = data->bytes.data() + i * size;
    int64_t v;
    switch (static_cast<DataType>(tensor.data_type())) {
    case DataType::Int64:
    case DataType::UInt64:
      v = loadInt<int64_t>(p);
      break;
    case DataType::Int32:
      v = loadInt<int32_t>(p);
      break;
    case DataType::UInt32:
      v = loadInt<uint32_t>(p);
      break;
    case DataType::Int16:
      v = loadInt<int16_t>(p);
      break;
    case DataType::UInt16:
      v = loadInt<uint16_t>(p);
      break;
    case DataType::Int8:
      v = loadInt<int8_t>(p);
      break;
    default:
      v = loadInt<uint8_t>(p);
      break;
    }
    value.values.push_back(v);
  }
  return value;
}

void ONNXImporter::foldInitializer(const onnx::TensorProto &tensor) {
  if (std::optional<FoldedValue> value = readIntTensor(model, tensor))
    folded[tensor.name()] = std::move(*value);
}

Value ONNXImporter::foldedConstant(StringRef name, Value current) {
  auto producer = current ? current.getDefiningOp<mlir::oasr::NodeOp>()
                          : mlir::oasr::NodeOp();
  if (!producer || producer.is("Constant"))
    return {};
  auto it = folded.find(name);
  // Integer and boolean values only: a float ConstantOfShape folds as its
  // integer fill for shape purposes, not as data.
  if (it == folded.end() ||
      !llvm::is_contained({int32_t(DataType::Int64), int32_t(DataType::Int32),
                           int32_t(DataType::Bool)},
                          it->second.elemType))
    return {};
  Value &slot = foldedConstants[name];
  if (slot)
    return slot;
  const onnx::TensorProto *proto = getFoldedProto(name);
  FailureOr<Attribute> value = getTensorAttr(*proto, nullptr);
  if (failed(value) || cast<TypedAttr>(*value).getType() != current.getType())
    return {};
  // Right after the producer, so the constant dominates every later use.
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointAfter(producer);
  slot =
      builder
          .create<mlir::oasr::NodeOp>(
              producer.getLoc(), TypeRange{current.getType()}, "Constant",
              ValueRange{},
              ArrayRef<NamedAttribute>{builder.getNamedAttr("value", *value)})
          ->getResult(0);
  return slot;
}

void ONNXImporter::eraseDeadFoldedNodes(Block &body) {
  // Users come after their producers: one backward sweep erases whole
  // chains (and the constants that fed only them).
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
    auto node = dyn_cast<mlir::oasr::NodeOp>(op);
    if (!node || !op.use_empty() || op.getNumResults() == 0)
      continue;
    if (foldedProducers.contains(&op) || node.is("Constant"))
      op.erase();
  }
}

Value ONNXImporter::materializeConstant(const onnx::TensorProto &tensor) {
  auto it = symbols.find(tensor.name());
  if (it != symbols.end())
    return it->second;
  FailureOr<Attribute> value = getTensorAttr(tensor, nullptr);
  if (failed(value))
    return {};
  // At the current insertion point: right before the first node using it.
  auto type = cast<TypedAttr>(*value).getType();
  auto op = builder.create<mlir::oasr::NodeOp>(
      NameLoc::get(builder.getStringAttr(tensor.name())), TypeRange{type},
      "Constant", ValueRange{},
      ArrayRef<NamedAttribute>{builder.getNamedAttr("value", *value)});
  Value result = op->getResult(0);
  symbols[tensor.name()] = result;
  return result;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

FailureOr<NamedAttribute>
ONNXImporter::convertAttribute(const onnx::NodeProto &node,
                               const onnx::AttributeProto &attr) {
  Builder &b = builder;
  auto named = [&](Attribute value) {
    return b.getNamedAttr(attr.name(), value);
  };
  switch (attr.type()) {
  case onnx::AttributeProto::INT:
    return named(b.getI64IntegerAttr(attr.i()));
  case onnx::AttributeProto::FLOAT:
    return named(b.getF32FloatAttr(attr.f()));
  case onnx::AttributeProto::STRING:
    return named(b.getStringAttr(attr.s()));
  case onnx::AttributeProto::INTS: {
    SmallVector<Attribute> values;
    for (int64_t v : attr.ints())
      values.push_back(b.getI64IntegerAttr(v));
    return named(b.getArrayAttr(values));
  }
  case onnx::AttributeProto::FLOATS: {
    SmallVector<Attribute> values;
    for (float v : attr.floats())
      values.push_back(b.getF32FloatAttr(v));
    return named(b.getArrayAttr(values));
  }
  case onnx::AttributeProto::STRINGS: {
    SmallVector<Attribute> values;
    for (const std::string &v : attr.strings())
      values.push_back(b.getStringAttr(v));
    return named(b.getArrayAttr(values));
  }
  case onnx::AttributeProto::TENSOR: {
    FailureOr<Attribute> value = getTensorAttr(attr.t(), &node);
    if (failed(value))
      return failure();
    return named(*value);
  }
  default:
    break;
  }
  emitNodeError(node) << "attribute '" << attr.name() << "' of kind "
                      << onnx::AttributeProto::AttributeType_Name(attr.type())
                      << " is not supported (subgraphs, sparse tensors and "
                         "type protos are not imported)";
  return failure();
}

//===----------------------------------------------------------------------===//
// Own shape rules
//===----------------------------------------------------------------------===//

namespace {
/// The registry's attribute access on a NodeProto.
class NodeAttrs final : public ops::AttrReader {
public:
  NodeAttrs(const onnx::NodeProto &node, const ModelFile &model)
      : node(node), model(model) {}
  const onnx::AttributeProto *find(StringRef name) const {
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  bool has(StringRef name) const override { return find(name); }
  std::optional<int64_t> findInt(StringRef name) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a || a->type() != onnx::AttributeProto::INT)
      return std::nullopt;
    return a->i();
  }
  std::optional<double> findFloat(StringRef name) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a || a->type() != onnx::AttributeProto::FLOAT)
      return std::nullopt;
    return a->f();
  }
  std::optional<std::string> findString(StringRef name) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a || a->type() != onnx::AttributeProto::STRING)
      return std::nullopt;
    return a->s();
  }
  std::optional<SmallVector<int64_t>> findInts(StringRef name) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a)
      return std::nullopt;
    return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
  }
  std::optional<SmallVector<double>> findFloats(StringRef name) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a || a->type() != onnx::AttributeProto::FLOATS)
      return std::nullopt;
    return SmallVector<double>(a->floats().begin(), a->floats().end());
  }
  std::optional<TensorInfo> findTensorType(StringRef name) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a || !a->has_t())
      return std::nullopt;
    return TensorInfo::get(
        a->t().data_type(),
        SmallVector<int64_t>(a->t().dims().begin(), a->t().dims().end()));
  }
  std::optional<SmallVector<int64_t>>
  findTensorInts(StringRef name) const override {
    const onnx::AttributeProto *a = find(name);
    if (!a || !a->has_t())
      return std::nullopt;
    std::optional<FoldedValue> v = readIntTensor(model, a->t());
    if (!v)
      return std::nullopt;
    return SmallVector<int64_t>(v->values.begin(), v->values.end());
  }
  // The importer's own uses (defaults as the ONNX schema gives them).
  int64_t getInt(StringRef name, int64_t dflt) const {
    return findInt(name).value_or(dflt);
  }

private:
  const onnx::NodeProto &node;
  const ModelFile &model;
};
} // namespace

const SmallVector<double, 4> *ONNXImporter::getSmallFloats(StringRef name) {
  auto [it, fresh] = smallFloats.try_emplace(name);
  if (!fresh)
    return it->second ? &*it->second : nullptr;
  const onnx::TensorProto *t = constantTensors.lookup(name);
  if (!t)
    t = initializers.lookup(name);
  if (!t || t->data_type() != int32_t(DataType::Float) || t->dims_size() > 1)
    return nullptr;
  auto data = model.readTensor(*t);
  if (!data) {
    llvm::consumeError(data.takeError());
    return nullptr;
  }
  llvm::ArrayRef<float> values = data->as<float>();
  if (values.size() > kSmallConstant)
    return nullptr;
  it = smallFloats.find(name); // readTensor does not touch the map
  it->second.emplace(values.begin(), values.end());
  return &*it->second;
}

const FoldedValue *ONNXImporter::getFolded(const onnx::NodeProto &node,
                                           size_t i) {
  if (int(i) >= node.input_size() || node.input(int(i)).empty())
    return nullptr;
  auto it = folded.find(node.input(int(i)));
  return it == folded.end() ? nullptr : &it->second;
}

bool ONNXImporter::inferWithOwnRules(const onnx::NodeProto &node,
                                     llvm::ArrayRef<const TensorInfo *> in,
                                     SmallVectorImpl<TensorInfo> &out,
                                     std::string &why) {
  int opset = getOpset(node.domain());
  const ops::OpDef *def =
      ops::OpRegistry::get().lookup(node.domain(), node.op_type(), opset);
  if (!def || !def->shape) {
    why = "oasr has no shape rule for this op";
    return false;
  }
  NodeAttrs attrs(node, model);
  SmallVector<std::string> names(node.input().begin(), node.input().end());
  SmallVector<const FoldedValue *> foldedIns;
  for (size_t i = 0; i < names.size(); ++i)
    foldedIns.push_back(getFolded(node, i));
  SmallVector<const SmallVector<double, 4> *> floatIns;
  for (const std::string &name : names)
    floatIns.push_back(getSmallFloats(name));
  ops::ShapeContext c{node.op_type(), opset,    attrs, names, in,
                      foldedIns,      floatIns, out,   {}};
  bool ok = def->shape(c);
  why = c.why;
  return ok;
}

//===----------------------------------------------------------------------===//
// Folding small integer tensors (shape computations)
//===----------------------------------------------------------------------===//

void ONNXImporter::foldNode(const onnx::NodeProto &node,
                            llvm::ArrayRef<TensorInfo> outputs) {
  if (outputs.empty() || !outputs[0].isStatic() ||
      !isIntegerType(outputs[0].elemType) ||
      outputs[0].numElements() > kFoldLimit || node.output(0).empty())
    return;
  const ops::OpDef *def = ops::OpRegistry::get().lookup(
      node.domain(), node.op_type(), getOpset(node.domain()));
  if (!def || !def->fold)
    return;
  NodeAttrs attrs(node, model);
  SmallVector<const TensorInfo *> ins;
  SmallVector<const FoldedValue *> foldedIns;
  for (int i = 0; i < node.input_size(); ++i) {
    auto it = node.input(i).empty() ? infos.end() : infos.find(node.input(i));
    ins.push_back(it == infos.end() ? nullptr : &it->second);
    foldedIns.push_back(getFolded(node, i));
  }
  ops::FoldContext c{node.op_type(), attrs, ins, foldedIns, outputs[0], {}};
  c.result.elemType = outputs[0].elemType;
  c.result.dims = outputs[0].dims;
  if (!def->fold(c) ||
      int64_t(c.result.values.size()) != outputs[0].numElements())
    return;
  folded[node.output(0)] = std::move(c.result);
}

const onnx::TensorProto *ONNXImporter::getFoldedProto(StringRef name) {
  auto it = folded.find(name);
  if (it == folded.end())
    return nullptr;
  auto [slot, inserted] = foldedProtos.try_emplace(name);
  onnx::TensorProto &t = slot->second;
  if (inserted) {
    const FoldedValue &v = it->second;
    t.set_name(name.str());
    t.set_data_type(v.elemType);
    for (int64_t d : v.dims)
      t.add_dims(d);
    switch (static_cast<DataType>(v.elemType)) {
    case DataType::Int64:
      for (int64_t x : v.values)
        t.add_int64_data(x);
      break;
    case DataType::UInt32:
    case DataType::UInt64:
      for (int64_t x : v.values)
        t.add_uint64_data(uint64_t(x));
      break;
    default:
      for (int64_t x : v.values)
        t.add_int32_data(int32_t(x));
      break;
    }
  }
  return &t;
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

/// Ops whose signature or semantics changed after opset 17, the newest
/// libonnx 1.12 knows; at opset >= 18 oasr's own rules decide their shapes.
static bool changedAfterOpset17(StringRef op) {
  return op.starts_with("Reduce") || op == "Pad" || op == "Split" ||
         op == "AveragePool" || op == "MaxPool" || op == "Resize" ||
         op == "Gelu" || op == "GroupNormalization" || op == "Col2Im" ||
         op == "CenterCropPad";
}

/// Pooling with ceil_mode: libonnx 1.12 keeps a last window that starts in
/// the end padding, which the ONNX spec (and PyTorch) drop, so oasr's own
/// rule decides at every opset.
static bool hasStaleLibonnxRule(const onnx::NodeProto &node) {
  StringRef op = node.op_type();
  return (op == "AveragePool" || op == "MaxPool" || op == "LpPool") &&
         llvm::any_of(node.attribute(), [](const onnx::AttributeProto &a) {
           return a.name() == "ceil_mode" && a.i() != 0;
         });
}

/// Convolutions and pools: libonnx's shape inference reads W's dims and the
/// window attributes by X's rank without checking them (a model whose W
/// had rank 1 crashed it; found by fuzzing). X has rank >= 3, W (for the
/// convolutions) X's rank, and each window attribute one value per spatial
/// axis (pads two). LayerNormalization: its axis is in range.
LogicalResult
ONNXImporter::checkWindowOperands(const onnx::NodeProto &node,
                                  ArrayRef<const TensorInfo *> inputs) {
  StringRef op = node.op_type();
  // libonnx's LayerNormalization inference indexes X's dims by `axis`
  // unchecked too (an axis of -8193 crashed it; found by fuzzing).
  if (op == "LayerNormalization" && node.domain().empty() && !inputs.empty() &&
      inputs[0] && inputs[0]->ranked) {
    int64_t rank = inputs[0]->dims.size();
    for (const onnx::AttributeProto &attr : node.attribute())
      if (attr.name() == "axis" && (attr.i() < -rank || attr.i() >= rank))
        return emitNodeError(node) << "attribute 'axis' is " << attr.i()
                                   << ", out of range for X of rank " << rank;
    return success();
  }
  bool conv = op == "Conv" || op == "ConvTranspose" || op == "ConvInteger";
  bool pool = op == "MaxPool" || op == "AveragePool" || op == "LpPool";
  if ((!conv && !pool) || !node.domain().empty() || inputs.empty() ||
      !inputs[0] || !inputs[0]->ranked)
    return success();
  int64_t rank = inputs[0]->dims.size();
  if (rank < 3)
    return emitNodeError(node) << "input X has rank " << rank << "; " << op
                               << " needs [N, C, spatial...] (rank >= 3)";
  if (conv && inputs.size() > 1 && inputs[1] && inputs[1]->ranked &&
      int64_t(inputs[1]->dims.size()) != rank)
    return emitNodeError(node)
           << "input W has rank " << inputs[1]->dims.size() << ", X has rank "
           << rank << "; they must be equal";
  size_t spatial = size_t(rank - 2);
  for (const onnx::AttributeProto &attr : node.attribute()) {
    StringRef name = attr.name();
    size_t want = name == "pads" ? 2 * spatial : spatial;
    bool windowAttr = name == "kernel_shape" || name == "strides" ||
                      name == "dilations" || name == "pads" ||
                      name == "output_padding";
    if (windowAttr && size_t(attr.ints_size()) != want)
      return emitNodeError(node)
             << "attribute '" << name << "' has " << attr.ints_size()
             << " value(s); X has " << spatial << " spatial axes, so " << want
             << " are needed";
  }
  return success();
}

LogicalResult ONNXImporter::inferNode(const onnx::NodeProto &node,
                                      SmallVectorImpl<TensorInfo> &outputs) {
  size_t numOut = node.output_size();
  outputs.assign(numOut, TensorInfo());
  SmallVector<const TensorInfo *> inputs;
  std::vector<onnx::TypeProto> inputTypes(node.input_size());
  std::vector<const onnx::TypeProto *> typePtrs(node.input_size(), nullptr);
  std::vector<const onnx::TensorProto *> data(node.input_size(), nullptr);
  for (auto [i, name] : llvm::enumerate(node.input())) {
    if (name.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    auto it = infos.find(name);
    const TensorInfo *info = it == infos.end() ? nullptr : &it->second;
    inputs.push_back(info);
    if (info) {
      toTypeProto(*info, inputTypes[i]);
      typePtrs[i] = &inputTypes[i];
    }
    data[i] = getFoldedProto(name);
  }
  if (failed(checkWindowOperands(node, inputs)))
    return failure();
  int opset = getOpset(node.domain());
  int known = ::oasr::onnximport::detail::getMaxKnownOpset(node.domain());
  bool preferOwn = (opset > known && changedAfterOpset17(node.op_type())) ||
                   hasStaleLibonnxRule(node);
  std::string onnxError, ownWhy;
  SmallVector<TensorInfo> own(numOut);
  if (options.preferOwnShapeRules &&
      inferWithOwnRules(node, inputs, own, ownWhy) &&
      llvm::all_of(own, [](const TensorInfo &t) { return t.isStatic(); })) {
    outputs.assign(own.begin(), own.end());
    preferOwn = true;
  }

  bool onnxFailed = false;
  if (!preferOwn && node.op_type() != "Constant") {
    std::vector<onnx::TypeProto> inferred;
    switch (::oasr::onnximport::detail::inferWithSchema(
        node, opset, typePtrs, data, inferred, onnxError)) {
    case ::oasr::onnximport::detail::SchemaInference::Inferred:
      for (size_t i = 0; i < numOut; ++i)
        outputs[i] = getInfo(inferred[i]);
      break;
    case ::oasr::onnximport::detail::SchemaInference::Failed:
      onnxFailed = true;
      break;
    case ::oasr::onnximport::detail::SchemaInference::NoSchema:
      break;
    }
  }
  bool complete = llvm::all_of(llvm::enumerate(outputs), [&](auto it) {
    return node.output(int(it.index())).empty() || it.value().isStatic();
  });
  if (!complete && !onnxFailed) {
    own.assign(numOut, TensorInfo());
    ownWhy.clear();
    if (inferWithOwnRules(node, inputs, own, ownWhy))
      for (size_t i = 0; i < numOut; ++i)
        if (!outputs[i].isStatic() && own[i].ranked) {
          if (!outputs[i].elemType || own[i].isStatic())
            outputs[i] = own[i];
          if (!outputs[i].elemType)
            outputs[i].elemType = own[i].elemType;
        }
  }
  // The model's own value_info, when oasr changed no dimension.
  if (options.batch <= 0 && options.dims.empty())
    for (size_t i = 0; i < numOut; ++i)
      if (!outputs[i].isStatic() && declared.count(node.output(int(i)))) {
        TensorInfo d = getInfo(*declared[node.output(int(i))]);
        if (d.isStatic())
          outputs[i] = d;
      }
  if (onnxFailed) {
    // Keep onnx's message: the model is inconsistent.
    StringRef message = onnxError;
    message = message.trim();
    emitNodeError(node) << "shape inference failed: " << message;
    return failure();
  }
  for (size_t i = 0; i < numOut; ++i) {
    if (node.output(int(i)).empty() || outputs[i].isStatic())
      continue;
    InFlightDiagnostic diag = emitNodeError(node);
    diag << "cannot infer a static shape for output '" << node.output(int(i))
         << "'";
    if (outputs[i].ranked) {
      diag << " (got [";
      llvm::interleaveComma(outputs[i].dims, diag, [&](int64_t d) {
        if (d < 0)
          diag << "?";
        else
          diag << d;
      });
      diag << "])";
    }
    if (!ownWhy.empty())
      diag << ": " << ownWhy;
    if (opset > known)
      diag << " (libonnx knows opset " << known << ", the model uses " << opset
           << ")";
    return failure();
  }
  return success();
}

LogicalResult ONNXImporter::importNode(const onnx::NodeProto &node,
                                       size_t index) {
  // Operands, recording absent optional inputs.
  SmallVector<Value> operands;
  SmallVector<int64_t> absent;
  int lastInput = node.input_size() - 1;
  while (lastInput >= 0 && node.input(lastInput).empty())
    --lastInput;
  for (int i = 0; i <= lastInput; ++i) {
    const std::string &name = node.input(i);
    if (name.empty()) {
      absent.push_back(i);
      continue;
    }
    auto it = symbols.find(name);
    Value value = it == symbols.end() ? Value() : it->second;
    // A shape computation folded at import reaches its consumers as a
    // constant (Pad's pads, Reshape's shape, ...), as rules need it so.
    if (Value constant = foldedConstant(name, value))
      value = constant;
    if (!value) {
      auto init = initializers.find(name);
      if (init != initializers.end())
        value = materializeConstant(*init->second);
      else
        return emitNodeError(node)
               << "input '" << name
               << "' is not defined by a graph input, an initializer or an "
                  "earlier node";
      if (!value)
        return failure();
    }
    operands.push_back(value);
  }

  SmallVector<TensorInfo> outputs;
  if (failed(inferNode(node, outputs)))
    return failure();
  int numResults = node.output_size();
  while (numResults > 0 && node.output(numResults - 1).empty())
    --numResults;
  SmallVector<Type> resultTypes;
  for (int i = 0; i < numResults; ++i) {
    FailureOr<RankedTensorType> type = getTensorType(outputs[i]);
    if (failed(type))
      return emitNodeError(node)
             << "output #" << i << " ('" << node.output(i)
             << "') has unsupported type "
             << getDataTypeName(outputs[i].elemType) << " or shape";
    resultTypes.push_back(*type);
  }

  SmallVector<NamedAttribute> attributes;
  for (const onnx::AttributeProto &attr : node.attribute()) {
    FailureOr<NamedAttribute> converted = convertAttribute(node, attr);
    if (failed(converted))
      return failure();
    attributes.push_back(*converted);
  }
  if (!absent.empty())
    attributes.push_back(builder.getNamedAttr(
        mlir::oasr::kAbsentInputsAttr, builder.getDenseI64ArrayAttr(absent)));

  auto op =
      builder.create<mlir::oasr::NodeOp>(getNodeLoc(node, index), resultTypes,
                                         node.op_type(), operands, attributes);
  StringRef domain = node.domain();
  if (!domain.empty() && domain != "ai.onnx")
    op.setDomain(domain);
  if (node.op_type() == "Constant" && numResults == 1)
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == "value" && a.has_t())
        constantTensors[node.output(0)] = &a.t();
  // Small float vectors concatenated from constants (PyTorch's Upsample
  // builds Resize's scales so).
  if ((node.op_type() == "Concat" || node.op_type() == "Identity") &&
      numResults == 1 && outputs[0].dims.size() == 1) {
    SmallVector<double, 4> values;
    bool all = true;
    for (const std::string &in : node.input()) {
      const SmallVector<double, 4> *part = getSmallFloats(in);
      if (!part) {
        all = false;
        break;
      }
      values.append(part->begin(), part->end());
    }
    if (all && values.size() <= size_t(kSmallConstant))
      smallFloats[node.output(0)].emplace(values);
  }
  for (int i = 0; i < numResults; ++i) {
    if (node.output(i).empty())
      continue;
    symbols[node.output(i)] = op->getResult(i);
    infos[node.output(i)] = outputs[i];
  }
  foldNode(node, outputs);
  if (numResults == 1 && folded.count(node.output(0)) &&
      node.op_type() != "Constant")
    foldedProducers.insert(op);
  return success();
}

//===----------------------------------------------------------------------===//
// Training info
//===----------------------------------------------------------------------===//

/// Inputs X_1..X_n of an ONNX optimizer node (R, T, X..., G..., state...).
static SmallVector<StringRef> optimizerParams(const onnx::NodeProto &node) {
  StringRef op = node.op_type();
  int perTensor = 0; // X, G and the state tensors per parameter
  if (op == "Adam")
    perTensor = 4;
  else if (op == "Momentum" || op == "Adagrad")
    perTensor = 3;
  SmallVector<StringRef> params;
  if (perTensor == 0)
    return params;
  int n = (node.input_size() - 2) / perTensor;
  for (int i = 0; i < n; ++i)
    params.push_back(node.input(2 + i));
  return params;
}

/// The trained tensors: the X inputs of the algorithm's optimizer nodes
/// (update_binding also binds their state V/H and counters, which are not
/// trained); without an optimizer node, the Gradient nodes' `xs`; without
/// either, every update_binding key.
void ONNXImporter::collectTrained() {
  auto add = [&](StringRef name) {
    if (trained.insert(name).second)
      trainedOrder.push_back(name.str());
  };
  const auto &training = model.proto().training_info();
  hasTrainingInfo = !training.empty();
  for (const onnx::TrainingInfoProto &info : training)
    for (const onnx::NodeProto &node : info.algorithm().node())
      for (StringRef x : optimizerParams(node))
        add(x);
  if (!trainedOrder.empty())
    return;
  for (const onnx::TrainingInfoProto &info : training)
    for (const onnx::NodeProto &node : info.algorithm().node())
      if (node.op_type() == "Gradient")
        for (const onnx::AttributeProto &attr : node.attribute())
          if (attr.name() == "xs")
            for (const std::string &x : attr.strings())
              if (initializers.count(x))
                add(x);
  if (!trainedOrder.empty())
    return;
  for (const onnx::TrainingInfoProto &info : training)
    for (const onnx::StringStringEntryProto &binding : info.update_binding())
      add(binding.key());
}

void ONNXImporter::importTrainingInfo(ModuleOp module) {
  if (!hasTrainingInfo)
    return;
  Builder &b = builder;
  SmallVector<Attribute> names;
  for (const std::string &name : trainedOrder)
    names.push_back(b.getStringAttr(name));
  module->setAttr(mlir::oasr::kTrainedAttr, b.getArrayAttr(names));

  for (const onnx::TrainingInfoProto &info : model.proto().training_info()) {
    const onnx::GraphProto &algorithm = info.algorithm();
    llvm::StringMap<const onnx::TensorProto *> constants;
    for (const onnx::TensorProto &t : algorithm.initializer())
      constants[t.name()] = &t;
    for (const onnx::TensorProto &t : graph.initializer())
      constants.try_emplace(t.name(), &t);
    for (const onnx::NodeProto &node : algorithm.node())
      if (node.op_type() == "Constant" && node.output_size() == 1)
        for (const onnx::AttributeProto &a : node.attribute())
          if (a.name() == "value")
            constants[node.output(0)] = &a.t();
    for (const onnx::NodeProto &node : algorithm.node()) {
      StringRef op = node.op_type();
      if (op != "Momentum" && op != "Adagrad" && op != "Adam")
        continue;
      SmallVector<NamedAttribute> fields;
      fields.push_back(b.getNamedAttr("algo", b.getStringAttr(op.lower())));
      if (!node.domain().empty())
        fields.push_back(
            b.getNamedAttr("domain", b.getStringAttr(node.domain())));
      for (const onnx::AttributeProto &attr : node.attribute()) {
        if (attr.type() == onnx::AttributeProto::FLOAT)
          fields.push_back(
              b.getNamedAttr(attr.name(), b.getF32FloatAttr(attr.f())));
        else if (attr.type() == onnx::AttributeProto::INT)
          fields.push_back(
              b.getNamedAttr(attr.name(), b.getI64IntegerAttr(attr.i())));
        else if (attr.type() == onnx::AttributeProto::STRING)
          fields.push_back(
              b.getNamedAttr(attr.name(), b.getStringAttr(attr.s())));
      }
      // Input 0 is the learning rate R, input 1 the update count T.
      if (node.input_size() > 0) {
        fields.push_back(
            b.getNamedAttr("lr_name", b.getStringAttr(node.input(0))));
        auto it = constants.find(node.input(0));
        if (it != constants.end()) {
          auto data = model.readTensor(*it->second);
          if (data && data->dataType == int32_t(DataType::Float) &&
              data->numElements() == 1)
            fields.push_back(
                b.getNamedAttr("lr", b.getF32FloatAttr(data->as<float>()[0])));
          else if (data && data->dataType == int32_t(DataType::Double) &&
                   data->numElements() == 1)
            fields.push_back(
                b.getNamedAttr("lr", b.getF64FloatAttr(data->as<double>()[0])));
          if (!data)
            llvm::consumeError(data.takeError());
        }
      }
      // The update count T the model carries (an int64 scalar): training
      // continues from it, as ONNX's reference apply_momentum/apply_adam do.
      if (node.input_size() > 1) {
        fields.push_back(b.getNamedAttr("update_count_name",
                                        b.getStringAttr(node.input(1))));
        auto it = constants.find(node.input(1));
        if (it != constants.end()) {
          auto data = model.readTensor(*it->second);
          if (data && data->dataType == int32_t(DataType::Int64) &&
              data->numElements() == 1)
            fields.push_back(b.getNamedAttr(
                "update_count", b.getI64IntegerAttr(data->as<int64_t>()[0])));
          if (!data)
            llvm::consumeError(data.takeError());
        }
      }
      // The parameters the optimizer updates (inputs X after R and T).
      SmallVector<Attribute> params;
      for (StringRef x : optimizerParams(node))
        params.push_back(b.getStringAttr(x));
      fields.push_back(b.getNamedAttr("params", b.getArrayAttr(params)));
      module->setAttr(mlir::oasr::kOptimizerAttr, b.getDictionaryAttr(fields));
    }
    for (const onnx::NodeProto &node : algorithm.node())
      if (node.op_type() == "Gradient")
        for (const onnx::AttributeProto &attr : node.attribute())
          if (attr.name() == "y")
            module->setAttr(mlir::oasr::kLossAttr, b.getStringAttr(attr.s()));
  }
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> ONNXImporter::run() {
  context.loadDialect<mlir::oasr::OASRDialect, func::FuncDialect>();
  fileLoc = FileLineColLoc::get(&context, model.path(), 0, 0);
  if (failed(checkVersions()) || failed(checkNodeDomains()) ||
      failed(checkSingleAssignment()))
    return {};

  for (const onnx::TensorProto &init : graph.initializer())
    initializers[init.name()] = &init;
  for (const onnx::ValueInfoProto &vi : graph.value_info())
    declared[vi.name()] = &vi.type();
  for (const onnx::ValueInfoProto &vi : graph.output())
    declared[vi.name()] = &vi.type();
  collectTrained();

  // Initializers: types, folded values, external data, roles.
  for (const onnx::TensorProto &init : graph.initializer()) {
    if (!getElementType(init.data_type())) {
      emitModelError() << "initializer '" << init.name()
                       << "' has unsupported data type "
                       << getDataTypeName(init.data_type());
      return {};
    }
    // The location rule holds even when the side files are not checked.
    if (llvm::Error err =
            model.checkExternalData(init, options.checkExternalData)) {
      emitModelError()
          << llvm::toString(std::move(err)).substr(model.path().size() + 2);
      return {};
    }
    infos[init.name()] = TensorInfo::get(
        init.data_type(),
        SmallVector<int64_t>(init.dims().begin(), init.dims().end()));
    foldInitializer(init);
  }
  classifyInitializers();

  // Graph inputs (those that are not initializers).
  SmallVector<const onnx::ValueInfoProto *> inputs;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue;
    TensorInfo info = getInfo(input.type());
    if (failed(applyInputOverrides(input, info)))
      return {};
    if (!getElementType(info.elemType)) {
      emitModelError() << "graph input '" << input.name()
                       << "' has unsupported data type "
                       << getDataTypeName(info.elemType);
      return {};
    }
    infos[input.name()] = info;
    inputs.push_back(&input);
  }

  // Parameters and state in the order of first use.
  SmallVector<const onnx::TensorProto *> params, state;
  llvm::StringSet<> placed;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &name : node.input()) {
      auto it = roles.find(name);
      if (it == roles.end() || !placed.insert(name).second)
        continue;
      if (it->second == InitRole::Param)
        params.push_back(initializers[name]);
      else if (it->second == InitRole::State)
        state.push_back(initializers[name]);
    }

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  Builder &b = builder;
  int64_t defaultOpsetValue = defaultOpset;
  (*module)->setAttr(mlir::oasr::kSourceAttr, b.getStringAttr(model.path()));
  (*module)->setAttr(mlir::oasr::kOpsetAttr,
                     b.getI64IntegerAttr(defaultOpsetValue));
  (*module)->setAttr(mlir::oasr::kModelAttr,
                     b.getStringAttr(llvm::sys::path::stem(model.path())));
  if (!model.proto().producer_name().empty())
    (*module)->setAttr(mlir::oasr::kProducerAttr,
                       b.getStringAttr(model.proto().producer_name()));
  if (rebatchedFrom)
    (*module)->setAttr(mlir::oasr::kRebatchedFromAttr,
                       b.getI64IntegerAttr(rebatchedFrom));

  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  auto addArg = [&](StringRef tag, StringRef name, const TensorInfo &info) {
    argTypes.push_back(*getTensorType(info));
    argAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(tag, b.getStringAttr(name))));
  };
  for (const onnx::ValueInfoProto *input : inputs)
    addArg(mlir::oasr::kInputAttr, input->name(), infos[input->name()]);
  for (const onnx::TensorProto *p : params) {
    if (failed(getTensorType(infos[p->name()]))) {
      emitModelError() << "initializer '" << p->name() << "' has invalid dims";
      return {};
    }
    addArg(mlir::oasr::kParamAttr, p->name(), infos[p->name()]);
  }
  for (const onnx::TensorProto *s : state) {
    if (failed(getTensorType(infos[s->name()]))) {
      emitModelError() << "initializer '" << s->name() << "' has invalid dims";
      return {};
    }
    addArg(mlir::oasr::kStateAttr, s->name(), infos[s->name()]);
  }

  builder.setInsertionPointToEnd(module->getBody());
  auto func = builder.create<func::FuncOp>(
      fileLoc, options.funcName, builder.getFunctionType(argTypes, {}));
  body = func.addEntryBlock();
  for (auto [i, attrs] : llvm::enumerate(argAttrs)) {
    func.setArgAttrs(i, attrs);
    // The argument's location is the ONNX name it stands for.
    body->getArgument(i).setLoc(
        NameLoc::get(cast<StringAttr>(attrs.begin()->getValue())));
  }
  size_t argIndex = 0;
  for (const onnx::ValueInfoProto *input : inputs)
    symbols[input->name()] = body->getArgument(argIndex++);
  for (const onnx::TensorProto *p : params)
    symbols[p->name()] = body->getArgument(argIndex++);
  for (const onnx::TensorProto *s : state)
    symbols[s->name()] = body->getArgument(argIndex++);

  builder.setInsertionPointToEnd(body);
  for (auto [i, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, i)))
      return {};

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const onnx::ValueInfoProto &output : graph.output()) {
    Value value = symbols.lookup(output.name());
    if (!value) {
      auto init = initializers.find(output.name());
      if (init != initializers.end())
        value = materializeConstant(*init->second);
    }
    if (!value) {
      emitModelError() << "graph output '" << output.name()
                       << "' is not produced by any node";
      return {};
    }
    results.push_back(value);
    resultTypes.push_back(value.getType());
  }
  builder.create<func::ReturnOp>(fileLoc, results);
  func.setFunctionType(builder.getFunctionType(argTypes, resultTypes));
  for (auto [i, output] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, mlir::oasr::kOutputAttr,
                       b.getStringAttr(output.name()));

  importTrainingInfo(*module);
  eraseDeadFoldedNodes(*body);
  symbols.clear(); // may name erased nodes from here on
  if (failed(mlir::verify(*module)))
    return {};
  return module;
}

namespace oasr {
namespace onnximport {

OwningOpRef<ModuleOp> importONNX(MLIRContext &context, const ModelFile &model,
                                 const ImportOptions &options) {
  return ONNXImporter(context, model, options).run();
}

OwningOpRef<ModuleOp> importONNX(MLIRContext &context, StringRef path,
                                 const ImportOptions &options) {
  auto model = ModelFile::load(path);
  if (!model) {
    mlir::emitError(FileLineColLoc::get(&context, path, 0, 0))
        << llvm::toString(model.takeError());
    return {};
  }
  // ONNX Runtime's training graphs import as a training step.
  if (isORTTrainingModel((*model)->proto()))
    return importORTTraining(context, **model, options);
  return importONNX(context, **model, options);
}

} // namespace onnximport
} // namespace oasr
