//===- ImportTraining.cpp - ONNX training info ----------------------------===//
//
// An ONNX model's training_info (preview-training optimizers): which
// initializers are trained and the update rule, for ONNXImporter.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

// The importer's namespace; its detail namespace brings mlir, llvm's
// SmallVector/StringRef and the ops alias.
using namespace ::oasr::onnximport;
using namespace ::oasr::onnximport::detail;

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
