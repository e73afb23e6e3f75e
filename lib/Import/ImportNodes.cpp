//===- ImportNodes.cpp - ONNX nodes to oasr.node ops ----------------------===//
//
// Each ONNX node as an oasr.node: its result types by the op registry's
// shape rules (onnx's inference where none), small integer tensors folded
// for shape computations, and the checks on every node.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

// The importer's namespace; its detail namespace brings mlir, llvm's
// SmallVector/StringRef and the ops alias.
using namespace ::oasr::onnximport;
using namespace ::oasr::onnximport::detail;

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
