//===- ModelFileTest.cpp - ModelFile and importONNX units -----------------===//
//
// Builds ModelProtos in memory, writes them as binary/text files and checks
// that ModelFile reads every kind of initializer storage byte-exactly (big
// raw_data left in the mapped file, typed fields, external data), reports
// broken inputs, and saves models other tools can parse; and that the
// C++ importONNX entry point builds a verified module.
//
//===----------------------------------------------------------------------===//

#include "oasr/Import/ONNXImporter.h"
#include "oasr/Import/ONNXModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <numeric>

using namespace oasr::onnximport;

namespace {

class ModelFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("oasr-import", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(llvm::StringRef name) {
    llvm::SmallString<128> p(dir);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }

  static void writeFile(const std::string &path, const std::string &bytes) {
    std::ofstream os(path, std::ios::binary);
    os << bytes;
  }

  /// x[1,N] -> MatMul(w) -> Add(b) -> y; w is big raw_data, b typed floats,
  /// shape an int64 initializer, e external.
  onnx::ModelProto makeModel(int64_t n = 64) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(15);
    onnx::GraphProto *g = m.mutable_graph();
    g->set_name("mlp");
    auto *x = g->add_input();
    x->set_name("x");
    auto *xt = x->mutable_type()->mutable_tensor_type();
    xt->set_elem_type(onnx::TensorProto::FLOAT);
    xt->mutable_shape()->add_dim()->set_dim_param("batch");
    xt->mutable_shape()->add_dim()->set_dim_value(n);
    g->add_output()->set_name("y");

    onnx::TensorProto *w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(n);
    w->add_dims(4);
    weights.resize(n * 4);
    std::iota(weights.begin(), weights.end(), 0.5f);
    w->set_raw_data(std::string(reinterpret_cast<char *>(weights.data()),
                                weights.size() * sizeof(float)));

    onnx::TensorProto *b = g->add_initializer();
    b->set_name("b");
    b->set_data_type(onnx::TensorProto::FLOAT);
    b->add_dims(4);
    for (float v : {1.f, 2.f, 3.f, 4.f})
      b->add_float_data(v);

    onnx::TensorProto *shape = g->add_initializer();
    shape->set_name("shape");
    shape->set_data_type(onnx::TensorProto::INT64);
    shape->add_dims(2);
    shape->add_int64_data(-1);
    shape->add_int64_data(2);

    auto addNode = [&](const char *op, std::vector<std::string> in,
                       std::string out) {
      onnx::NodeProto *node = g->add_node();
      node->set_op_type(op);
      node->set_name(std::string("/") + op);
      for (auto &i : in)
        node->add_input(i);
      node->add_output(out);
    };
    addNode("MatMul", {"x", "w"}, "h");
    addNode("Add", {"h", "b"}, "a");
    addNode("Reshape", {"a", "shape"}, "y");
    return m;
  }

  llvm::SmallString<128> dir;
  std::vector<float> weights;
};

TEST_F(ModelFileTest, BinaryKeepsBigRawDataInTheFile) {
  writeFile(path("m.onnx"), makeModel().SerializeAsString());
  auto model = ModelFile::load(path("m.onnx"));
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  const onnx::TensorProto *w = (*model)->findInitializer("w");
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(w->has_raw_data()); // left in the mapped file
  EXPECT_EQ(w->dims_size(), 2);
  auto location = (*model)->getInitializerLocation("w");
  ASSERT_TRUE(bool(location));
  EXPECT_EQ(location->kind, InitializerLocation::InFile);
  EXPECT_EQ(location->length, int64_t(weights.size() * 4));

  auto data = (*model)->readInitializer("w");
  ASSERT_TRUE(bool(data)) << llvm::toString(data.takeError());
  EXPECT_EQ(data->dataType, int32_t(DataType::Float));
  EXPECT_EQ(data->dims, (std::vector<int64_t>{64, 4}));
  ASSERT_EQ(data->as<float>().size(), weights.size());
  EXPECT_TRUE(
      std::equal(weights.begin(), weights.end(), data->as<float>().begin()));

  auto b = (*model)->readInitializer("b");
  ASSERT_TRUE(bool(b));
  EXPECT_EQ((std::vector<float>(b->as<float>().begin(), b->as<float>().end())),
            (std::vector<float>{1, 2, 3, 4}));
  auto shape = (*model)->readInitializer("shape");
  ASSERT_TRUE(bool(shape));
  EXPECT_EQ(shape->as<int64_t>()[0], -1);
  EXPECT_EQ(shape->as<int64_t>()[1], 2);

  auto missing = (*model)->readInitializer("nope");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("no initializer named"),
            std::string::npos);
}

TEST_F(ModelFileTest, TextAndTruncatedBinary) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(makeModel(), &text);
  writeFile(path("m.txtpb"), text);
  auto model = ModelFile::load(path("m.txtpb"));
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  auto w = (*model)->readInitializer("w");
  ASSERT_TRUE(bool(w));
  EXPECT_EQ(w->as<float>()[3], weights[3]);

  std::string binary = makeModel().SerializeAsString();
  writeFile(path("cut.onnx"), binary.substr(0, binary.size() / 2));
  auto cut = ModelFile::load(path("cut.onnx"));
  ASSERT_FALSE(bool(cut));
  std::string message = llvm::toString(cut.takeError());
  EXPECT_NE(message.find("cut.onnx: not an ONNX protobuf (truncated"),
            std::string::npos)
      << message;
}

TEST_F(ModelFileTest, ExternalData) {
  onnx::ModelProto m = makeModel();
  onnx::TensorProto *w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto addKey = [&](const char *k, std::string v) {
    auto *e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  addKey("location", "weights.bin");
  addKey("offset", "16");
  addKey("length", std::to_string(weights.size() * 4));
  writeFile(path("m.onnx"), m.SerializeAsString());
  auto model = ModelFile::load(path("m.onnx"));
  ASSERT_TRUE(bool(model));

  auto missing = (*model)->readInitializer("w");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("cannot be opened"),
            std::string::npos);

  std::string bytes(16, '\0');
  bytes.append(reinterpret_cast<char *>(weights.data()), weights.size() * 4);
  writeFile(path("weights.bin"), bytes.substr(0, bytes.size() - 4));
  auto shortFile = (*model)->readInitializer("w");
  ASSERT_FALSE(bool(shortFile));
  EXPECT_NE(llvm::toString(shortFile.takeError()).find("is too short"),
            std::string::npos);

  // A fresh ModelFile (side files are mapped once per model).
  writeFile(path("weights.bin"), bytes);
  model = ModelFile::load(path("m.onnx"));
  ASSERT_TRUE(bool(model));
  auto data = (*model)->readInitializer("w");
  ASSERT_TRUE(bool(data)) << llvm::toString(data.takeError());
  EXPECT_TRUE(
      std::equal(weights.begin(), weights.end(), data->as<float>().begin()));
  auto location = (*model)->getInitializerLocation("w");
  ASSERT_TRUE(bool(location));
  EXPECT_EQ(location->kind, InitializerLocation::External);
  EXPECT_EQ(location->offset, 16u);
}

TEST_F(ModelFileTest, SaveWithInitializers) {
  writeFile(path("m.onnx"), makeModel().SerializeAsString());
  auto model = ModelFile::load(path("m.onnx"));
  ASSERT_TRUE(bool(model));
  std::vector<float> newB = {9, 8, 7, 6};
  llvm::Error err =
      (*model)->saveWithInitializers(path("saved.onnx"), {{"b", newB}});
  ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));

  // Plain protobuf parses it and every initializer holds its data inline.
  std::ifstream is(path("saved.onnx"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(is)), {});
  onnx::ModelProto saved;
  ASSERT_TRUE(saved.ParseFromString(bytes));
  const onnx::TensorProto &w = saved.graph().initializer(0);
  ASSERT_EQ(w.raw_data().size(), weights.size() * 4);
  EXPECT_EQ(
      std::memcmp(w.raw_data().data(), weights.data(), w.raw_data().size()), 0);

  auto reloaded = ModelFile::load(path("saved.onnx"));
  ASSERT_TRUE(bool(reloaded));
  auto b = (*reloaded)->readInitializer("b");
  ASSERT_TRUE(bool(b));
  EXPECT_EQ((std::vector<float>(b->as<float>().begin(), b->as<float>().end())),
            newB);

  llvm::Error wrong = (*model)->saveWithInitializers(
      path("bad.onnx"), {{"b", std::vector<float>(3)}});
  ASSERT_TRUE(bool(wrong));
  EXPECT_NE(llvm::toString(std::move(wrong)).find("has 4 elements, got 3"),
            std::string::npos);
}

TEST_F(ModelFileTest, ImportONNXThroughTheCppAPI) {
  writeFile(path("m.onnx"), makeModel().SerializeAsString());
  mlir::MLIRContext context;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  ImportOptions options;
  auto none = importONNX(context, path("m.onnx"), options);
  EXPECT_FALSE(bool(none));
  EXPECT_NE(diagnostics.find("symbolic dimension 'batch'"), std::string::npos)
      << diagnostics;

  options.batch = 3;
  auto module = importONNX(context, path("m.onnx"), options);
  ASSERT_TRUE(bool(module)) << diagnostics;
  auto func = module->lookupSymbol<mlir::func::FuncOp>("forward");
  ASSERT_TRUE(bool(func));
  // x, then w and b (params), no state; shape is a Constant node.
  ASSERT_EQ(func.getNumArguments(), 3u);
  EXPECT_TRUE(func.getArgAttr(1, "oasr.param"));
  EXPECT_TRUE(func.getArgAttr(2, "oasr.param"));
  EXPECT_EQ(
      mlir::cast<mlir::RankedTensorType>(func.getResultTypes()[0]).getShape(),
      (llvm::ArrayRef<int64_t>{6, 2}));
}

} // namespace
