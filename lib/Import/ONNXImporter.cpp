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

#include "ImporterImpl.h"

// The importer's namespace; its detail namespace brings mlir, llvm's
// SmallVector/StringRef and the ops alias.
using namespace ::oasr::onnximport;
using namespace ::oasr::onnximport::detail;

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
// Driver
//===----------------------------------------------------------------------===//

/// Initializers: types, folded values, external data, roles.
LogicalResult ONNXImporter::readInitializers() {
  for (const onnx::TensorProto &init : graph.initializer()) {
    if (!getElementType(init.data_type())) {
      emitModelError() << "initializer '" << init.name()
                       << "' has unsupported data type "
                       << getDataTypeName(init.data_type());
      return failure();
    }
    // The location rule holds even when the side files are not checked.
    if (llvm::Error err =
            model.checkExternalData(init, options.checkExternalData)) {
      emitModelError()
          << llvm::toString(std::move(err)).substr(model.path().size() + 2);
      return failure();
    }
    infos[init.name()] = TensorInfo::get(
        init.data_type(),
        SmallVector<int64_t>(init.dims().begin(), init.dims().end()));
    foldInitializer(init);
  }
  return classifyInitializers();
}

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

  if (failed(readInitializers()))
    return {};

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
