//===- ONNXSchemaInference.cpp - libonnx per-node shape inference ---------===//
//
// Built with -fexceptions (see CMakeLists.txt): libonnx throws on inference
// errors and this is the only place oasr catches them.
//
//===----------------------------------------------------------------------===//

#include "ONNXSchemaInference.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <exception>
#include <unordered_map>

using namespace oasr::onnximport::detail;

int oasr::onnximport::detail::getMaxKnownOpset(const std::string &domain) {
  const auto &map =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = map.find(domain == "ai.onnx" ? std::string() : domain);
  return it == map.end() ? 0 : it->second.second;
}

static const onnx::OpSchema *getSchema(const std::string &opType,
                                       const std::string &domain, int opset) {
  int known = getMaxKnownOpset(domain);
  if (!known)
    return nullptr;
  return onnx::OpSchemaRegistry::Schema(opType, opset < known ? opset : known,
                                        domain == "ai.onnx" ? std::string()
                                                            : domain);
}

int oasr::onnximport::detail::getSchemaSinceVersion(const std::string &opType,
                                                    const std::string &domain,
                                                    int opset) {
  const onnx::OpSchema *schema = getSchema(opType, domain, opset);
  return schema ? schema->SinceVersion() : 0;
}

SchemaInference oasr::onnximport::detail::inferWithSchema(
    const onnx::NodeProto &node, int opset,
    const std::vector<const onnx::TypeProto *> &inputTypes,
    const std::vector<const onnx::TensorProto *> &inputData,
    std::vector<onnx::TypeProto> &outputTypes, std::string &error) {
  const onnx::OpSchema *schema =
      getSchema(node.op_type(), node.domain(), opset);
  if (!schema)
    return SchemaInference::NoSchema;
  if (!schema->has_type_and_shape_inference_function() &&
      !schema->HasFunction())
    return SchemaInference::NoSchema;

  std::unordered_map<std::string, onnx::TypeProto *> types;
  std::unordered_map<std::string, const onnx::TensorProto *> data;
  std::unordered_map<std::string, const onnx::SparseTensorProto *> sparse;
  for (size_t i = 0, e = node.input_size(); i < e; ++i) {
    const std::string &name = node.input(int(i));
    if (name.empty())
      continue;
    if (i < inputTypes.size() && inputTypes[i])
      types[name] = const_cast<onnx::TypeProto *>(inputTypes[i]);
    if (i < inputData.size() && inputData[i])
      data[name] = inputData[i];
  }
  // The context only takes a mutable node for graph attributes, which oasr
  // rejects before getting here.
  onnx::NodeProto &mutableNode = const_cast<onnx::NodeProto &>(node);
  try {
    onnx::shape_inference::InferenceContextImpl ctx(mutableNode, types, data,
                                                    sparse);
    if (schema->has_type_and_shape_inference_function())
      schema->GetTypeAndShapeInferenceFunction()(ctx);
    else
      onnx::shape_inference::InferShapeForFunctionNode(
          *schema->GetFunction(), onnx::OpSchemaRegistry::Instance(), ctx);
    outputTypes.assign(node.output_size(), onnx::TypeProto());
    for (size_t i = 0, e = node.output_size(); i < e; ++i)
      if (const onnx::TypeProto *type = ctx.getOutputType(i))
        outputTypes[i] = *type;
  } catch (const std::exception &e) {
    error = e.what();
    return SchemaInference::Failed;
  } catch (...) {
    error = "unknown error in libonnx shape inference";
    return SchemaInference::Failed;
  }
  return SchemaInference::Inferred;
}
