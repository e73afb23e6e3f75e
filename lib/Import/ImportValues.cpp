//===- ImportValues.cpp - Types, initializers, attributes -----------------===//
//
// ONNX element and tensor types, initializers (parameters, state, folded
// constants, resource blobs) and node attributes, for ONNXImporter.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Regex.h"

#include <cstring>
#include <tuple>

// The importer's namespace; its detail namespace brings mlir, llvm's
// SmallVector/StringRef and the ops alias.
using namespace ::oasr::onnximport;
using namespace ::oasr::onnximport::detail;

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
      op == "SimplifiedLayerNormalization" || op == "SkipLayerNormalization" ||
      op == "RMSNormalization")
    return position == 1 || position == 2;
  if (op == "Gather" || op == "GatherElements" || op == "GatherND")
    return position == 0;
  // Learned updates written into a tensor.
  if (op == "ScatterElements" || op == "ScatterND")
    return position == 2;
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

LogicalResult ONNXImporter::classifyInitializers() {
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
  return decideTrained();
}

/// Whether the float tensor `data` of ONNX type `type` holds a NaN or an
/// infinity (the exponent bits all set).
static bool hasNonFinite(int32_t type, llvm::ArrayRef<uint8_t> data) {
  auto any = [&](auto bits, auto mask) {
    using T = decltype(bits);
    for (size_t i = 0; i + sizeof(T) <= data.size(); i += sizeof(T)) {
      std::memcpy(&bits, data.data() + i, sizeof(T));
      if ((bits & mask) == mask)
        return true;
    }
    return false;
  };
  switch (DataType(type)) {
  case DataType::Float:
    return any(uint32_t(0), uint32_t(0x7f800000u));
  case DataType::Double:
    return any(uint64_t(0), uint64_t(0x7ff0000000000000ull));
  case DataType::Float16:
    return any(uint16_t(0), uint16_t(0x7c00u));
  case DataType::BFloat16:
    return any(uint16_t(0), uint16_t(0x7f80u));
  default:
    return false;
  }
}

/// Whether a trained float initializer looks like a buffer by its name:
/// the names PyTorch models give masks and rotary or position tables.
static bool bufferLikeName(StringRef name) {
  StringRef last =
      name.rsplit('.').second.empty() ? name : name.rsplit('.').second;
  std::string lower = last.lower();
  for (StringRef word : {"mask", "causal", "rope", "rotary", "inv_freq",
                         "freqs", "cos_cached", "sin_cached", "position_ids"})
    if (StringRef(lower).contains(word))
      return true;
  return false;
}

LogicalResult ONNXImporter::decideTrained() {
  // oasr.export's record: the module's named_parameters() that require
  // gradients, as a JSON array (docs/pytorch.md).
  std::optional<llvm::StringSet<>> recorded;
  for (const onnx::StringStringEntryProto &kv : model.proto().metadata_props())
    if (kv.key() == kParametersMetadataKey) {
      llvm::Expected<llvm::json::Value> v = llvm::json::parse(kv.value());
      const llvm::json::Array *a = v ? v->getAsArray() : nullptr;
      if (!a) {
        if (!v)
          llvm::consumeError(v.takeError());
        emitModelError() << "metadata '" << kParametersMetadataKey
                         << "' is not a JSON array of initializer names";
        return failure();
      }
      recorded.emplace();
      for (const llvm::json::Value &e : *a)
        if (std::optional<StringRef> name = e.getAsString())
          recorded->insert(*name);
    }
  std::optional<llvm::Regex> trainable, freeze;
  for (auto [text, re, flag] :
       {std::tuple(&options.trainable, &trainable, "--trainable"),
        std::tuple(&options.freeze, &freeze, "--freeze")}) {
    if (text->empty())
      continue;
    re->emplace(*text);
    std::string why;
    if (!(*re)->isValid(why)) {
      emitModelError() << flag << "='" << *text
                       << "': not a regular expression: " << why;
      return failure();
    }
  }
  // What was decided, for the remarks below.
  struct {
    unsigned trained = 0, constant = 0;
    std::vector<std::string> nonFinite;  ///< never trained: NaN or Inf inside
    std::vector<std::string> bufferLike; ///< trained, named like a buffer
  } r;
  unsigned matchedTrainable = 0, matchedFreeze = 0, candidates = 0;
  for (const onnx::TensorProto &init : graph.initializer()) {
    InitRole &role = roles[init.name()];
    bool isFloat = isFloatType(init.data_type());
    if (!isFloat || role == InitRole::Unused)
      continue;
    const bool wasParam = role == InitRole::Param;
    auto hold = [&] {
      role = InitRole::State;
      // Nor is it in the training info's list of trained tensors.
      if (trained.erase(init.name()))
        llvm::erase(trainedOrder, init.name());
    };
    if (recorded && !hasTrainingInfo)
      role = recorded->count(init.name()) ? InitRole::Param
             : role == InitRole::Param    ? InitRole::State
                                          : role;
    if (role == InitRole::Param) {
      ++candidates;
      // A NaN or an infinity (a causal mask's -inf) is never trained: an
      // update would turn it into NaN, and the next forward every weight.
      int64_t numel = 1;
      for (int64_t d : init.dims())
        numel *= d;
      if (numel <= kNonFiniteScanLimit) {
        auto data = model.readTensor(init);
        if (!data)
          llvm::consumeError(data.takeError()); // reported where it is read
        else if (hasNonFinite(init.data_type(), data->bytes)) {
          r.nonFinite.push_back(init.name());
          hold();
        }
      }
    }
    if (role == InitRole::Param && trainable) {
      if (trainable->match(init.name()))
        ++matchedTrainable;
      else
        hold();
    }
    if (role == InitRole::Param && freeze && freeze->match(init.name())) {
      ++matchedFreeze;
      hold();
    }
    if (role == InitRole::Param) {
      ++r.trained;
      if (!recorded && !hasTrainingInfo && bufferLikeName(init.name()))
        r.bufferLike.push_back(init.name());
    } else if (role == InitRole::State && (wasParam || recorded)) {
      ++r.constant;
    }
  }
  if (trainable && !matchedTrainable) {
    emitModelError() << "--trainable='" << options.trainable
                     << "' matches none of the model's " << candidates
                     << " parameters";
    return failure();
  }
  if (freeze && !matchedFreeze) {
    emitModelError() << "--freeze='" << options.freeze
                     << "' matches none of the model's " << candidates
                     << " parameters";
    return failure();
  }
  if ((trainable || freeze) && r.trained == 0) {
    emitModelError() << (freeze ? "--freeze='" + options.freeze + "'"
                                : "--trainable='" + options.trainable + "'")
                     << " leaves none of the model's " << candidates
                     << " parameters trained";
    return failure();
  }
  // What was decided, as remarks (oasr-run prints them before training).
  auto list = [](const std::vector<std::string> &names) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < 8; ++i)
      out += (i ? ", '" : "'") + names[i] + "'";
    if (names.size() > 8)
      out += llvm::formatv(" and {0} more", names.size() - 8).str();
    return out;
  };
  if (recorded || trainable || freeze || !r.nonFinite.empty())
    emitRemark(fileLoc) << "trains " << r.trained << " of the model's float "
                        << "initializers and holds " << r.constant
                        << " constant ("
                        << (recorded ? "oasr.export's record of the "
                                       "parameters"
                                     : "parameters by use")
                        << (freeze ? ", --freeze" : "")
                        << (trainable ? ", --trainable" : "") << ")";
  if (!r.nonFinite.empty())
    emitRemark(fileLoc) << list(r.nonFinite)
                        << (r.nonFinite.size() == 1 ? " holds" : " hold")
                        << " NaN or infinity: held constant, as a buffer (an "
                           "update would make it NaN)";
  for (const std::string &name : r.bufferLike)
    emitRemark(fileLoc) << "warning: '" << name
                        << "' looks like a buffer by its name but is trained "
                           "as a parameter; export with oasr.export (which "
                           "records the parameters) or hold it with "
                           "--freeze='^"
                        << llvm::Regex::escape(name) << "$'";
  return success();
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

auto ::oasr::onnximport::detail::readIntTensor(const ModelFile &model,
                                               const onnx::TensorProto &tensor)
    -> std::optional<FoldedValue> {
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
