//===- ORTTraining.cpp - ONNX Runtime training models as a step -----------===//
//
// An ONNX Runtime training model (`generate_artifacts`' training_model.onnx)
// holds forward, loss and gradient graph. Its conventions:
//
//  * trainable parameters are graph inputs; their values live in the
//    `checkpoint` (scripts/ort_artifacts.py folds them in as initializers of
//    the same names, through ORT's own CheckpointState API);
//  * each parameter's gradient `<param>_grad` is added into the graph input
//    `<param>_grad.accumulation.buffer` by
//    `com.microsoft::InPlaceAccumulatorV2` (reset by the `lazy_reset_grad`
//    input), whose outputs are the graph's outputs after the loss; a model
//    without accumulation returns the
//    `<param>_grad` values themselves;
//  * gradient nodes are named `<forward node>_Grad/<op>_<k>` and most
//    gradient values `<forward value>_grad`.
//
// The rewrite below maps that onto the graph oasr's importer reads (the
// accumulation dropped, the gradients as outputs, ORT's com.microsoft ops
// onto oasr's registry ops), imports it, and turns the imported function into
// the `@train_step` of docs/IR.md section 2.
//
//===----------------------------------------------------------------------===//

#include "oasr/Import/ORTTraining.h"

#include "oasr/Dialect/AttrNames.h"
#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Import/ONNXImporter.h"
#include "oasr/Import/ONNXModel.h"
#include "oasr/Import/ORTCheckpoint.h"
#include "oasr/Ops/GradContext.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

using namespace mlir;
using namespace mlir::oasr;
using ::oasr::onnximport::ImportOptions;
using ::oasr::onnximport::ModelFile;

namespace {

constexpr llvm::StringLiteral kMs = "com.microsoft";
constexpr llvm::StringLiteral kBufferSuffix = "_grad.accumulation.buffer";
constexpr llvm::StringLiteral kResetInput = "lazy_reset_grad";
constexpr llvm::StringLiteral kCheckpointFile = "checkpoint";

/// com.microsoft gradient ops oasr registers under the same name and
/// operand order in the default domain.
bool isSameNameGradient(StringRef op) {
  return llvm::is_contained(
      {"ReluGrad", "SigmoidGrad", "TanhGrad", "SoftmaxCrossEntropyLossGrad",
       "ConvGrad", "BatchNormalizationGrad", "LayerNormalizationGrad",
       "SoftmaxGrad_13", "LogSoftmaxGrad_13", "GatherGrad"},
      op);
}

/// The forward value a gradient value is named after (`v_grad`, `v_grad_0`),
/// or "".
std::string forwardValueOf(StringRef grad) {
  size_t at = grad.rfind("_grad");
  if (at == StringRef::npos || at == 0)
    return {};
  StringRef tail = grad.drop_front(at + 5);
  if (!tail.empty() &&
      (tail.front() != '_' || !llvm::all_of(tail.drop_front(), [](char c) {
         return c >= '0' && c <= '9';
       })))
    return {};
  return grad.take_front(at).str();
}

class Rewriter {
public:
  Rewriter(MLIRContext &ctx, ModelFile &model)
      : model(model), proto(model.mutableProto()),
        graph(*proto.mutable_graph()),
        fileLoc(FileLineColLoc::get(&ctx, model.path(), 0, 0)) {}

  LogicalResult run();

  /// Trained parameters in ORT's order, and the value holding each gradient.
  SmallVector<std::string> params;
  llvm::StringMap<std::string> gradOf;
  std::string loss;

private:
  InFlightDiagnostic error() {
    return mlir::emitError(fileLoc) << model.path() << ": ";
  }
  InFlightDiagnostic nodeError(const onnx::NodeProto &node) {
    InFlightDiagnostic d = error();
    d << "node '" << node.name() << "' (";
    if (!node.domain().empty())
      d << node.domain() << "::";
    d << node.op_type() << "): ";
    return d;
  }
  /// The value of a float scalar initializer or Constant output.
  std::optional<double> floatScalar(StringRef name) const;
  LogicalResult findParameters(llvm::StringSet<> &dropInputs,
                               llvm::StringSet<> &dropOutputs);
  LogicalResult translate(const onnx::NodeProto &node,
                          SmallVectorImpl<onnx::NodeProto> &out);
  /// DropoutGrad(dY, mask, ratio[, training_mode]) -> oasr's (dY, mask)
  /// {ratio}.
  LogicalResult translateDropoutGrad(onnx::NodeProto node,
                                     SmallVectorImpl<onnx::NodeProto> &out);

  ModelFile &model;
  onnx::ModelProto &proto;
  onnx::GraphProto &graph;
  Location fileLoc;
  llvm::StringSet<> values; ///< every value the graph names
  /// BiasGelu(A, B)'s A + B, by "A|B" (its gradient reuses it).
  llvm::StringMap<std::string> biasSums;
};

} // namespace

std::optional<double> Rewriter::floatScalar(StringRef name) const {
  const onnx::TensorProto *tensor = model.findInitializer(name);
  if (!tensor)
    for (const onnx::NodeProto &n : graph.node())
      if (n.op_type() == "Constant" && n.output_size() == 1 &&
          n.output(0) == name)
        for (const onnx::AttributeProto &a : n.attribute())
          if (a.name() == "value")
            tensor = &a.t();
  if (!tensor || tensor->data_type() != onnx::TensorProto::FLOAT)
    return std::nullopt;
  auto data = model.readTensor(*tensor);
  if (!data) {
    llvm::consumeError(data.takeError());
    return std::nullopt;
  }
  if (data->numElements() != 1)
    return std::nullopt;
  return double(data->as<float>()[0]);
}

bool ::oasr::onnximport::isORTTrainingModel(const onnx::ModelProto &proto) {
  const onnx::GraphProto &graph = proto.graph();
  for (const onnx::NodeProto &node : graph.node())
    if (node.domain() == kMs && (node.op_type() == "InPlaceAccumulatorV2" ||
                                 node.op_type() == "InPlaceAccumulator"))
      return true;
  llvm::StringSet<> names;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (input.name() == kResetInput)
      return true;
    names.insert(input.name());
  }
  for (const onnx::TensorProto &init : graph.initializer())
    names.insert(init.name());
  for (const onnx::ValueInfoProto &output : graph.output()) {
    StringRef name = output.name();
    if (name.ends_with("_grad") && names.contains(name.drop_back(5)))
      return true;
  }
  return false;
}

LogicalResult Rewriter::findParameters(llvm::StringSet<> &dropInputs,
                                       llvm::StringSet<> &dropOutputs) {
  llvm::StringSet<> inputs, inits;
  for (const onnx::ValueInfoProto &input : graph.input())
    inputs.insert(input.name());
  for (const onnx::TensorProto &init : graph.initializer())
    inits.insert(init.name());
  auto addParam = [&](const std::string &p, const std::string &grad) {
    if (gradOf.try_emplace(p, grad).second)
      params.push_back(p);
  };
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.domain() != kMs || (node.op_type() != "InPlaceAccumulatorV2" &&
                                 node.op_type() != "InPlaceAccumulator"))
      continue;
    if (node.input_size() < 2 || node.output_size() < 1)
      return nodeError(node) << "expected (buffer, gradient[, reset]) -> "
                                "accumulated buffer";
    StringRef buffer = node.input(0), grad = node.input(1);
    std::string param;
    if (buffer.ends_with(kBufferSuffix))
      param = buffer.drop_back(kBufferSuffix.size()).str();
    else
      param = forwardValueOf(grad);
    if (param.empty() || (!inputs.contains(param) && !inits.contains(param)))
      return nodeError(node)
             << "cannot tell which parameter accumulates into '" << buffer
             << "' (ORT names the buffer '<param>" << kBufferSuffix << "')";
    addParam(param, grad.str());
    dropInputs.insert(buffer);
    if (node.input_size() > 2)
      dropInputs.insert(node.input(2));
    dropOutputs.insert(node.output(0));
  }
  if (params.empty())
    for (const onnx::ValueInfoProto &output : graph.output()) {
      StringRef name = output.name();
      if (name.ends_with("_grad") && (inputs.contains(name.drop_back(5)) ||
                                      inits.contains(name.drop_back(5)))) {
        addParam(name.drop_back(5).str(), name.str());
        dropOutputs.insert(name);
      }
    }
  if (params.empty())
    return error() << "an ONNX Runtime training model (it has a '"
                   << kResetInput
                   << "' input) without parameter gradients: no "
                      "InPlaceAccumulatorV2 node and no '<param>_grad' output";
  for (const std::string &p : params)
    if (!inits.contains(p))
      return error() << "parameter '" << p
                     << "' has no value: it is neither an initializer of the "
                        "model nor a tensor of the ONNX Runtime checkpoint "
                        "beside it";
  return success();
}

LogicalResult
Rewriter::translateDropoutGrad(onnx::NodeProto node,
                               SmallVectorImpl<onnx::NodeProto> &out) {
  if (node.input_size() < 2 || node.output_size() != 1)
    return nodeError(node) << "expected (dY, mask[, ratio, training_mode]) "
                              "-> dX";
  double ratio = 0.5;
  if (node.input_size() > 2 && !node.input(2).empty()) {
    std::optional<double> value = floatScalar(node.input(2));
    if (!value)
      return nodeError(node) << "the ratio '" << node.input(2)
                             << "' is not a constant float scalar";
    ratio = *value;
  }
  node.mutable_input()->DeleteSubrange(2, node.input_size() - 2);
  node.set_domain("");
  node.clear_attribute();
  onnx::AttributeProto *r = node.add_attribute();
  r->set_name("ratio");
  r->set_type(onnx::AttributeProto::FLOAT);
  r->set_f(float(ratio));
  out.push_back(std::move(node));
  return success();
}

LogicalResult Rewriter::translate(const onnx::NodeProto &in,
                                  SmallVectorImpl<onnx::NodeProto> &out) {
  onnx::NodeProto node = in;
  // Empty outputs in the middle (ConvGrad's unused dX) get a name.
  while (node.output_size() && node.output(node.output_size() - 1).empty())
    node.mutable_output()->RemoveLast();
  for (int i = 0; i < node.output_size(); ++i)
    if (node.output(i).empty())
      node.set_output(i, node.name() + "/unused_output_" + std::to_string(i));
  StringRef domain = node.domain(), op = node.op_type();
  auto newNode = [&](StringRef type, StringRef suffix,
                     ArrayRef<std::string> inputs,
                     ArrayRef<std::string> outputs, StringRef dom = "") {
    onnx::NodeProto n;
    n.set_name(node.name() + suffix.str());
    n.set_op_type(type.str());
    n.set_domain(dom.str());
    for (const std::string &i : inputs)
      n.add_input(i);
    for (const std::string &o : outputs)
      n.add_output(o);
    return n;
  };

  if (domain.empty() || domain == "ai.onnx") {
    if (op == "MaxPoolGrad" || op == "AveragePoolGrad") {
      // The forward input, for the result's shape (dropped after import).
      std::string x =
          node.output_size() ? forwardValueOf(node.output(0)) : std::string();
      if (x.empty() || !values.contains(x))
        return nodeError(node)
               << "cannot find the forward input of this pooling gradient "
                  "(ORT names its result '<input>_grad')";
      size_t base = op == "MaxPoolGrad" ? 2 : 1;
      if (size_t(node.input_size()) != base)
        return nodeError(node)
               << "expected " << base << " inputs, got " << node.input_size();
      node.add_input(x);
    }
    out.push_back(std::move(node));
    return success();
  }
  if (domain != kMs) {
    out.push_back(std::move(node));
    return success(); // ai.onnx.ml and the like: the importer decides
  }
  if (isSameNameGradient(op)) {
    if (op == "SoftmaxCrossEntropyLossGrad" && node.input_size() > 3)
      return nodeError(node) << "class weights (input 3) are not supported";
    node.set_domain("");
    out.push_back(std::move(node));
    return success();
  }
  if (op == "Gelu" || op == "GeluGrad") {
    node.set_domain(""); // exact erf GELU, as ONNX-20's Gelu
    out.push_back(std::move(node));
    return success();
  }
  if (op == "FusedMatMul") {
    // Typed by its registry entry, expanded after import (ranks known).
    out.push_back(std::move(node));
    return success();
  }
  if (op == "BatchNormInternal") {
    // ONNX-15 BatchNormalization in training mode plus the saved mean and
    // inverse standard deviation: oasr's training form of BatchNormalization,
    // which it becomes after import (libonnx's schema allows 3 outputs).
    if (node.output_size() != 5)
      return nodeError(node) << "expected 5 outputs (Y, running mean and "
                                "variance, saved mean, saved inverse std), got "
                             << node.output_size();
    out.push_back(std::move(node));
    return success();
  }
  if (op == "Scale") {
    // Y = X * scale, or X / scale with scale_down = 1.
    int64_t down = 0;
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == "scale_down")
        down = a.i();
    if (node.input_size() != 2)
      return nodeError(node) << "expected 2 inputs (X, scale)";
    // ORT casts the scale (an element count in ReduceMean's gradient, i64)
    // to X's type; oasr trains in f32.
    std::string scale = node.name() + "/scale_f32";
    onnx::NodeProto cast = newNode("Cast", "/Cast", {node.input(1)}, {scale});
    onnx::AttributeProto *to = cast.add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(onnx::TensorProto::FLOAT);
    out.push_back(std::move(cast));
    node.set_input(1, scale);
    node.set_domain("");
    node.set_op_type(down ? "Div" : "Mul");
    node.clear_attribute();
    out.push_back(std::move(node));
    return success();
  }
  if (op == "BiasGelu" || op == "BiasGeluGrad_dX") {
    size_t x = op == "BiasGelu" ? 0 : 1;
    if (node.input_size() != int(x) + 2 || node.output_size() != 1)
      return nodeError(node) << "expected " << x + 2 << " inputs, 1 output";
    std::string key = node.input(x) + "|" + node.input(x + 1);
    auto it = biasSums.find(key);
    std::string sum;
    if (it != biasSums.end()) {
      sum = it->second;
    } else {
      sum = node.name() + "/biased_input";
      out.push_back(
          newNode("Add", "/Add", {node.input(x), node.input(x + 1)}, {sum}));
      biasSums[key] = sum;
      values.insert(sum);
    }
    if (op == "BiasGelu")
      out.push_back(newNode("Gelu", "/Gelu", {sum}, {node.output(0)}));
    else
      out.push_back(newNode("GeluGrad", "/GeluGrad", {node.input(0), sum},
                            {node.output(0)}));
    return success();
  }
  if (op == "DropoutGrad")
    return translateDropoutGrad(std::move(node), out);
  if (op == "PassThrough") {
    if (node.input_size() != node.output_size())
      return nodeError(node) << "expected as many inputs as outputs";
    for (int i = 0; i < node.input_size(); ++i)
      out.push_back(newNode("Identity", "/Identity_" + std::to_string(i),
                            {node.input(i)}, {node.output(i)}));
    return success();
  }
  return nodeError(node)
         << "ONNX Runtime op that oasr does not map (mapped: ReluGrad, "
            "SigmoidGrad, TanhGrad, SoftmaxCrossEntropyLossGrad, ConvGrad, "
            "BatchNormInternal, BatchNormalizationGrad, "
            "LayerNormalizationGrad, SoftmaxGrad_13, LogSoftmaxGrad_13, "
            "GatherGrad, Gelu, GeluGrad, BiasGelu, BiasGeluGrad_dX, "
            "DropoutGrad, FusedMatMul, Scale, PassThrough, "
            "InPlaceAccumulatorV2)";
}

LogicalResult Rewriter::run() {
  llvm::StringSet<> dropInputs, dropOutputs;
  if (failed(findParameters(dropInputs, dropOutputs)))
    return failure();
  for (const onnx::ValueInfoProto &v : graph.input())
    values.insert(v.name());
  for (const onnx::TensorProto &t : graph.initializer())
    values.insert(t.name());
  for (const onnx::NodeProto &n : graph.node())
    for (const std::string &o : n.output())
      values.insert(o);

  // The loss: the first output that is not an accumulated gradient.
  for (const onnx::ValueInfoProto &o : graph.output())
    if (!dropOutputs.contains(o.name())) {
      loss = o.name();
      break;
    }
  if (loss.empty())
    return error() << "an ONNX Runtime training model without a loss output "
                      "(every output is an accumulated gradient)";

  SmallVector<onnx::NodeProto> nodes;
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.domain() == kMs && (node.op_type() == "InPlaceAccumulatorV2" ||
                                 node.op_type() == "InPlaceAccumulator"))
      continue;
    if (failed(translate(node, nodes)))
      return failure();
  }
  graph.clear_node();
  for (onnx::NodeProto &n : nodes)
    *graph.add_node() = std::move(n);

  // Inputs: without accumulation buffers, the reset flag and the
  // parameters (initializers now).
  llvm::StringSet<> paramSet;
  for (const std::string &p : params)
    paramSet.insert(p);
  auto *inputs = graph.mutable_input();
  for (int i = inputs->size() - 1; i >= 0; --i)
    if (dropInputs.contains(inputs->Get(i).name()) ||
        paramSet.contains(inputs->Get(i).name()))
      inputs->DeleteSubrange(i, 1);

  // Outputs: the loss, then one gradient per parameter.
  graph.clear_output();
  graph.add_output()->set_name(loss);
  for (const std::string &p : params)
    graph.add_output()->set_name(gradOf[p]);

  // The trained tensors, as ONNX TrainingInfo's update_binding names them.
  proto.clear_training_info();
  onnx::TrainingInfoProto *info = proto.add_training_info();
  for (const std::string &p : params) {
    onnx::StringStringEntryProto *e = info->add_update_binding();
    e->set_key(p);
    e->set_value(p);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The imported function as a training step
//===----------------------------------------------------------------------===//

/// FusedMatMul(A, B) {transA, transB, alpha} as Transpose + MatMul (+ Mul).
static void expandFusedMatMul(NodeOp node) {
  Operation *before = node->getPrevNode();
  OpBuilder b(node);
  ::oasr::ops::NodeBuilder nb{b};
  Location loc = node.getLoc();
  auto transposed = [&](Value v, StringRef attr) -> Value {
    auto flag = node->getAttrOfType<IntegerAttr>(attr);
    if (!flag || flag.getInt() == 0)
      return v;
    auto t = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> perm, shape(t.getShape());
    for (int64_t i = 0; i < t.getRank(); ++i)
      perm.push_back(i);
    std::swap(perm[t.getRank() - 1], perm[t.getRank() - 2]);
    std::swap(shape[t.getRank() - 1], shape[t.getRank() - 2]);
    return nb
        .node(loc, "Transpose",
              RankedTensorType::get(shape, t.getElementType()), {v},
              {b.getNamedAttr("perm", b.getI64ArrayAttr(perm))})
        ->getResult(0);
  };
  Value a = transposed(node->getOperand(0), "transA");
  Value bb = transposed(node->getOperand(1), "transB");
  Type type = node->getResult(0).getType();
  Value y = nb.node(loc, "MatMul", type, {a, bb})->getResult(0);
  double alpha = 1.0;
  if (auto f = node->getAttrOfType<FloatAttr>("alpha"))
    alpha = f.getValueAsDouble();
  if (alpha != 1.0) {
    auto scalar = RankedTensorType::get(
        {}, cast<RankedTensorType>(type).getElementType());
    y = nb.node(loc, "Mul", type, {y, nb.splat(loc, scalar, alpha)})
            ->getResult(0);
  }
  if (Attribute layer = node->getAttr(kLayerAttr))
    for (Operation *op = before ? before->getNextNode()
                                : &node->getBlock()->front();
         op && op != node; op = op->getNextNode())
      op->setAttr(kLayerAttr, layer);
  node->getResult(0).replaceAllUsesWith(y);
  node->erase();
}

/// ReduceSum(X, axes) {keepdims = 0} (ORT's bias gradients): the runtime
/// reduces operand axes with the dimensions kept. Over leading axes it is
/// oasr's ReduceSumTo (the sum down to a broadcast operand's type, as
/// autodiff's bias gradients); otherwise ReduceSum {keepdims = 1} and a
/// Reshape (a view) to the result type.
static void keepReducedAxes(NodeOp node) {
  OpBuilder b(node);
  ::oasr::ops::NodeBuilder nb{b};
  Location loc = node.getLoc();
  auto x = cast<RankedTensorType>(node->getOperand(0).getType());
  auto y = cast<RankedTensorType>(node->getResult(0).getType());
  SmallVector<int64_t> kept;
  SmallVector<bool> reduced(x.getRank(), false);
  if (auto c = node->getOperand(1).getDefiningOp<NodeOp>();
      c && c.is("Constant"))
    if (auto v = c->getAttrOfType<DenseIntElementsAttr>("value")) {
      kept.assign(x.getShape().begin(), x.getShape().end());
      for (const APInt &a : v.getValues<APInt>()) {
        int64_t axis = a.getSExtValue();
        if (axis < 0)
          axis += x.getRank();
        if (axis >= 0 && axis < x.getRank()) {
          kept[axis] = 1;
          reduced[axis] = true;
        }
      }
    }
  if (kept.empty())
    return; // not a constant: the runtime reports it
  int64_t leading = 0;
  while (leading < x.getRank() && reduced[leading])
    ++leading;
  bool onlyLeading = llvm::count(reduced, true) == leading;
  if (onlyLeading && y.getShape() == x.getShape().drop_front(leading)) {
    NodeOp sum = nb.node(loc, "ReduceSumTo", y, {node->getOperand(0)});
    if (auto layer = node->getAttr(kLayerAttr))
      sum->setAttr(kLayerAttr, layer);
    node->getResult(0).replaceAllUsesWith(sum->getResult(0));
    node->erase();
    return;
  }
  node->setAttr("keepdims", b.getI64IntegerAttr(1));
  Value r = node->getResult(0);
  auto keptType = RankedTensorType::get(kept, y.getElementType());
  b.setInsertionPointAfter(node);
  NodeOp reshape =
      nb.node(loc, "Reshape", y, {r, nb.shapeConstant(loc, y.getShape())});
  if (auto layer = node->getAttr(kLayerAttr)) {
    reshape->setAttr(kLayerAttr, layer);
    reshape->getOperand(1).getDefiningOp()->setAttr(kLayerAttr, layer);
  }
  r.replaceAllUsesExcept(reshape->getResult(0), reshape);
  r.setType(keptType);
}

/// The layer a backward node of ORT's belongs to: the forward node named
/// before `_Grad/` in its name.
static std::string layerFromName(StringRef name) {
  size_t at = name.find("_Grad/");
  return at == StringRef::npos ? std::string() : name.take_front(at).str();
}

static LogicalResult toTrainStep(ModuleOp module, const Rewriter &r,
                                 StringRef path) {
  MLIRContext *ctx = module.getContext();
  Builder b(ctx);
  auto fn = module.lookupSymbol<func::FuncOp>(kForwardFn);
  if (!fn)
    return module.emitError("the ORT import made no @forward");
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // Backward: every node after the loss's, tagged with its forward layer.
  Value loss = ret.getOperand(0);
  Operation *lossOp = loss.getDefiningOp();
  if (!lossOp || !isa<NodeOp>(lossOp))
    return mlir::emitError(fn.getLoc())
           << path << ": the loss '" << r.loss << "' is not computed by a node";
  std::string lossLayer = nodeName(lossOp->getLoc()).value_or(r.loss);
  std::string current = lossLayer;
  bool after = false;
  for (Operation &op : body.without_terminator()) {
    if (&op == lossOp) {
      after = true;
      continue;
    }
    if (!after || !isa<NodeOp>(op))
      continue;
    std::string layer = layerFromName(nodeName(op.getLoc()).value_or(""));
    if (!layer.empty())
      current = layer;
    op.setAttr(kLayerAttr, b.getStringAttr(current));
  }

  // Pooling gradients lose the shape operand; FusedMatMul is expanded;
  // backward Identity nodes (ORT names its gradient outputs with them) are
  // bypassed, so each gradient is the result of the node that computes it.
  for (Operation &op : llvm::make_early_inc_range(body)) {
    auto node = dyn_cast<NodeOp>(op);
    if (!node)
      continue;
    if ((node.is("MaxPoolGrad") && node->getNumOperands() == 3) ||
        (node.is("AveragePoolGrad") && node->getNumOperands() == 2))
      node->eraseOperand(node->getNumOperands() - 1);
    else if (node.is("Identity") && node->hasAttr(kLayerAttr)) {
      node->getResult(0).replaceAllUsesWith(node->getOperand(0));
      node->erase();
    } else if (node.getOpType() == "FusedMatMul" && node.getDomain() == kMs)
      expandFusedMatMul(node);
    else if (node.is("ReduceSum") && node->getNumOperands() == 2 &&
             node->getAttrOfType<IntegerAttr>("keepdims") &&
             node->getAttrOfType<IntegerAttr>("keepdims").getInt() == 0)
      keepReducedAxes(node);
    else if (node.getOpType() == "BatchNormInternal" &&
             node.getDomain() == kMs) {
      node.setDomain("");
      node.setOpType("BatchNormalization");
      node->setAttr("training_mode", b.getI64IntegerAttr(1));
    }
  }

  // Constants the rewrites left without a user (ReduceSum's axes).
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (auto node = dyn_cast<NodeOp>(op);
        node && node.is("Constant") && node->use_empty())
      node->erase();

  // The label: the loss's integer labels argument.
  for (Operation &op : body)
    if (auto node = dyn_cast<NodeOp>(op); node &&
                                          node.is("SoftmaxCrossEntropyLoss") &&
                                          node->getNumOperands() >= 2)
      if (auto arg = dyn_cast<BlockArgument>(node->getOperand(1)))
        if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        kInputAttr)) {
          fn.removeArgAttr(arg.getArgNumber(), kInputAttr);
          fn.setArgAttr(arg.getArgNumber(), kLabelAttr, name);
        }

  // Results: the loss, then the gradients in parameter-argument order.
  llvm::StringMap<Value> gradValue;
  for (auto [i, p] : llvm::enumerate(r.params))
    gradValue[p] = ret.getOperand(i + 1);
  SmallVector<Value> results = {loss};
  SmallVector<DictionaryAttr> resultAttrs = {b.getDictionaryAttr(
      b.getNamedAttr(kOutputAttr, b.getStringAttr("loss")))};
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    auto name = fn.getArgAttrOfType<StringAttr>(i, kParamAttr);
    if (!name)
      continue;
    auto it = gradValue.find(name.getValue());
    if (it == gradValue.end())
      continue;
    results.push_back(it->second);
    resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(kGradAttr, name)));
  }
  if (results.size() != r.params.size() + 1)
    return mlir::emitError(fn.getLoc())
           << path << ": " << r.params.size() << " trained parameters but "
           << results.size() - 1 << " became parameters of the step";
  OpBuilder ob(ret);
  ob.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  fn.setFunctionType(
      b.getFunctionType(fn.getArgumentTypes(), ValueRange(results).getTypes()));
  fn.setAllResultAttrs(resultAttrs);
  fn.setSymName(kTrainStepFn);
  module->setAttr(kStepSourceAttr, b.getStringAttr("onnxruntime-training"));
  module->setAttr(kLossAttr, b.getStringAttr(r.loss));
  return mlir::verify(module);
}

//===----------------------------------------------------------------------===//
// The optimizer model beside it
//===----------------------------------------------------------------------===//

/// Reads `optimizer_model.onnx` from the training model's directory, when
/// there is one, into the module's `oasr.optimizer` (docs/IR.md): ORT's
/// AdamWOptimizer in its default Hugging Face mode (adam_mode = 1,
/// correct_bias = 1) is ONNX's Adam rule with ORT's bias-correction step
/// counting from 1 (`update_count = 1`) and its weight decay applied after
/// the update (`decoupled_weight_decay`); SGDOptimizerV2 is plain SGD. The
/// learning rate is an input ORT sets at run time, so it is not in the model.
static LogicalResult readOptimizer(ModuleOp module, StringRef modelPath) {
  SmallString<256> path(llvm::sys::path::parent_path(modelPath));
  llvm::sys::path::append(path, "optimizer_model.onnx");
  if (!llvm::sys::fs::exists(path))
    return success();
  MLIRContext *ctx = module.getContext();
  Location loc = FileLineColLoc::get(ctx, path, 0, 0);
  auto model = ModelFile::load(path);
  if (!model)
    return mlir::emitError(loc) << llvm::toString(model.takeError());
  Builder b(ctx);
  for (const onnx::NodeProto &node : (*model)->proto().graph().node()) {
    auto nodeError = [&]() {
      return mlir::emitError(loc)
             << path << ": node '" << node.name() << "' (" << node.domain()
             << "::" << node.op_type() << "): ";
    };
    llvm::StringMap<const onnx::AttributeProto *> attrs;
    for (const onnx::AttributeProto &a : node.attribute())
      attrs[a.name()] = &a;
    auto getF = [&](StringRef name, double dflt) {
      auto it = attrs.find(name);
      return it == attrs.end() ? dflt : double(it->second->f());
    };
    auto getI = [&](StringRef name, int64_t dflt) {
      auto it = attrs.find(name);
      return it == attrs.end() ? dflt : it->second->i();
    };
    SmallVector<NamedAttribute> fields;
    if (node.domain() == kMs && node.op_type() == "AdamWOptimizer") {
      if (getI("adam_mode", 0) != 1 || getI("correct_bias", 1) != 1)
        return nodeError()
               << "only AdamW's Hugging Face form (adam_mode = 1, "
                  "correct_bias = 1, what generate_artifacts writes) maps "
                  "onto oasr's Adam; this node has adam_mode = "
               << getI("adam_mode", 0)
               << ", correct_bias = " << getI("correct_bias", 1);
      fields = {
          b.getNamedAttr("algo", b.getStringAttr("adam")),
          b.getNamedAttr("alpha", b.getF32FloatAttr(getF("alpha", 0.9))),
          b.getNamedAttr("beta", b.getF32FloatAttr(getF("beta", 0.999))),
          b.getNamedAttr("epsilon", b.getF32FloatAttr(getF("epsilon", 1e-8))),
          b.getNamedAttr("update_count", b.getI64IntegerAttr(1))};
      // Applied after the update, scaled by the run-time learning rate
      // (--oasr-insert-optimizer makes it weight_decay_post = lr * this).
      if (double wd = getF("weight_decay", 0); wd != 0)
        fields.push_back(
            b.getNamedAttr("decoupled_weight_decay", b.getF32FloatAttr(wd)));
    } else if (node.domain() == kMs && node.op_type() == "SGDOptimizerV2") {
      fields = {b.getNamedAttr("algo", b.getStringAttr("sgd"))};
    } else {
      continue;
    }
    fields.push_back(b.getNamedAttr(
        "source", b.getStringAttr((node.domain() + "::" + node.op_type()))));
    module->setAttr(kOptimizerAttr, b.getDictionaryAttr(fields));
    return success();
  }
  return mlir::emitError(loc)
         << path
         << ": no AdamWOptimizer or SGDOptimizerV2 node (the optimizers "
            "oasr maps from ONNX Runtime's optimizer model)";
}

//===----------------------------------------------------------------------===//
// The checkpoint beside it
//===----------------------------------------------------------------------===//

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str().c_str());
}

/// Graph inputs an ORT training model trains (it accumulates or returns
/// their gradients) without giving them a value.
static SmallVector<std::string> parametersWithoutValue(const ModelFile &model) {
  const onnx::GraphProto &graph = model.proto().graph();
  llvm::StringSet<> inputs, outputs;
  for (const onnx::ValueInfoProto &i : graph.input())
    inputs.insert(i.name());
  for (const onnx::ValueInfoProto &o : graph.output())
    outputs.insert(o.name());
  SmallVector<std::string> out;
  for (const onnx::ValueInfoProto &i : graph.input())
    if (!model.findInitializer(i.name()) &&
        (inputs.contains(i.name() + kBufferSuffix.str()) ||
         outputs.contains(i.name() + "_grad")))
      out.push_back(i.name());
  return out;
}

static std::string dimsText(llvm::ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(dims))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

/// Checks a checkpoint tensor against the graph input it gives a value.
static llvm::Error checkAgainstInput(const ::oasr::ort::CheckpointTensor &t,
                                     const onnx::ValueInfoProto &input,
                                     StringRef ckpt, StringRef modelPath) {
  const onnx::TypeProto_Tensor &type = input.type().tensor_type();
  if (type.elem_type() != t.dataType)
    return makeError(llvm::formatv(
        "{0}: tensor '{1}' has data type {2}; graph input '{1}' of {3} is {4}",
        ckpt, t.name, ::oasr::onnximport::getDataTypeName(t.dataType),
        modelPath, ::oasr::onnximport::getDataTypeName(type.elem_type())));
  if (!type.has_shape())
    return llvm::Error::success();
  SmallVector<int64_t> want;
  bool mismatch = type.shape().dim_size() != int(t.dims.size());
  for (auto [i, d] : llvm::enumerate(type.shape().dim())) {
    want.push_back(d.has_dim_value() ? d.dim_value() : -1);
    if (d.has_dim_value() && i < t.dims.size() && t.dims[i] != d.dim_value())
      mismatch = true;
  }
  if (mismatch)
    return makeError(llvm::formatv(
        "{0}: tensor '{1}' has dims {2}; graph input '{1}' of {3} has {4}",
        ckpt, t.name, dimsText(t.dims), modelPath, dimsText(want)));
  return llvm::Error::success();
}

/// The tensor as an initializer whose data is its bytes in the checkpoint.
static onnx::TensorProto
externalInitializer(const ::oasr::ort::CheckpointTensor &t) {
  onnx::TensorProto tensor;
  tensor.set_name(t.name);
  for (int64_t d : t.dims)
    tensor.add_dims(d);
  tensor.set_data_type(t.dataType);
  tensor.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](StringRef key, std::string value) {
    onnx::StringStringEntryProto *e = tensor.add_external_data();
    e->set_key(key.str());
    e->set_value(std::move(value));
  };
  add("location", kCheckpointFile.str());
  add("offset", std::to_string(t.offset));
  add("length", std::to_string(t.bytes.size()));
  return tensor;
}

namespace oasr::onnximport {
llvm::Expected<std::string> attachORTCheckpoint(ModelFile &model) {
  if (!isORTTrainingModel(model.proto()))
    return std::string();
  SmallVector<std::string> missing = parametersWithoutValue(model);
  if (missing.empty())
    return std::string();
  SmallString<256> path(model.directory());
  llvm::sys::path::append(path, kCheckpointFile);
  if (!llvm::sys::fs::exists(path))
    return makeError(model.path() + ": parameter '" + missing.front() +
                     "' has no value and there is no checkpoint '" + path +
                     "' beside the model (ONNX Runtime's generate_artifacts "
                     "writes the parameters' values there)");
  auto ckpt = ::oasr::ort::readCheckpoint(path);
  if (!ckpt)
    return ckpt.takeError();
  llvm::StringMap<const onnx::ValueInfoProto *> inputs;
  for (const onnx::ValueInfoProto &i : model.proto().graph().input())
    inputs[i.name()] = &i;
  for (const auto *list : {&ckpt->trainable, &ckpt->frozen})
    for (const ::oasr::ort::CheckpointTensor &t : *list) {
      if (model.findInitializer(t.name))
        continue; // the model gives it a value itself
      const onnx::ValueInfoProto *input = inputs.lookup(t.name);
      if (!input)
        return makeError(path + ": tensor '" + t.name +
                         "' is not a graph input of " + model.path() +
                         " (is the checkpoint another model's?)");
      if (llvm::Error err = checkAgainstInput(t, *input, path, model.path()))
        return std::move(err);
      model.addInitializer(externalInitializer(t));
    }
  for (const std::string &p : missing)
    if (!ckpt->find(p))
      return makeError(path + ": no tensor '" + p + "', a parameter of " +
                       model.path() + " (the checkpoint holds " +
                       std::to_string(ckpt->trainable.size()) +
                       " trainable and " + std::to_string(ckpt->frozen.size()) +
                       " frozen tensors)");
  return std::string(path);
}
} // namespace oasr::onnximport

namespace oasr::onnximport {
OwningOpRef<ModuleOp> importORTTraining(MLIRContext &context, ModelFile &model,
                                        const ImportOptions &options) {
  context.loadDialect<OASRDialect, func::FuncDialect>();
  if (auto ckpt = attachORTCheckpoint(model); !ckpt) {
    mlir::emitError(FileLineColLoc::get(&context, model.path(), 0, 0))
        << llvm::toString(ckpt.takeError());
    return {};
  }
  Rewriter rewriter(context, model);
  if (failed(rewriter.run()))
    return {};
  ImportOptions opts = options;
  opts.funcName = kForwardFn.str();
  OwningOpRef<ModuleOp> module =
      ::oasr::onnximport::importONNX(context, model, opts);
  if (!module || failed(toTrainStep(*module, rewriter, model.path())) ||
      failed(readOptimizer(*module, model.path())))
    return {};
  return module;
}
} // namespace oasr::onnximport
