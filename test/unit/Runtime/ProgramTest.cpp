//===- ProgramTest.cpp - Programs built by hand, lowered and read back ----===//

#include "oasr/Runtime/Program.h"
#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Lower/Lower.h"
#include "oasr/Runtime/Executor.h"
#include "oasr/Runtime/ProgramIO.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace oasr::rt;

namespace {

/// One linear layer and its loss, one fused group, plain SGD.
const char *kLinear = R"mlir(
module attributes {oasr.plan = {strategy = "wfbp", groups = 1 : i64}} {
  func.func @train_step(%x: tensor<4x8xf32> {oasr.input = "input"},
                        %label: tensor<4xi64> {oasr.label = "label"},
                        %w: tensor<3x8xf32> {oasr.param = "fc.weight"})
      -> (tensor<f32>, tensor<3x8xf32>) {
    %y = oasr.node "Gemm"(%x, %w) {transB = 1 : i64} : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x3xf32> loc("fc")
    %loss, %logp = oasr.node "SoftmaxCrossEntropyLoss"(%y, %label) {reduction = "mean"} : (tensor<4x3xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x3xf32>) loc("loss")
    %one = oasr.node "Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %dy = oasr.node "SoftmaxCrossEntropyLossGrad"(%one, %logp, %label) {reduction = "mean", oasr.layer = "loss"} : (tensor<f32>, tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32> loc("loss_grad")
    %dx, %dw = oasr.node "GemmGrad"(%dy, %x, %w) {transB = 1 : i64, oasr.layer = "fc"} : (tensor<4x3xf32>, tensor<4x8xf32>, tensor<3x8xf32>) -> (tensor<4x8xf32>, tensor<3x8xf32>) loc("fc_grad")
    %t = oasr.allreduce_start %dw {group = 0 : i64} : tensor<3x8xf32>
    %r = oasr.allreduce_wait %t : tensor<3x8xf32>
    %nw = oasr.optimizer_update "sgd" %w, %r {lr = 0.1 : f64} : tensor<3x8xf32>
    return %loss, %nw : tensor<f32>, tensor<3x8xf32>
  }
}
)mlir";

/// kLinear written out by hand, without MLIR: what lowerToProgram makes
/// of it.
Program handWritten() {
  Program p;
  p.strategy = "wfbp";
  auto value = [&](DType t, std::vector<int64_t> shape, Where where,
                   int def = -1) {
    ValueInfo v;
    v.desc = TensorDesc{t, std::move(shape)};
    v.where = where;
    v.def = def;
    v.kernelOutput = def >= 0;
    if (where == Where::Persistent) {
      v.persistent = int(p.persist.size());
      p.persist.push_back(PersistBuf{v.desc, nullptr, {}});
    }
    p.values.push_back(v);
    return int(p.values.size()) - 1;
  };
  auto step = [&](const std::string &name, const std::string &op,
                  const std::string &layer, StepKind kind) {
    p.steps.push_back(PlanStepInfo{name, op, layer, kind});
  };
  auto kernel = [&](const std::string &op, const std::string &name,
                    std::vector<int> ins, std::vector<int> outs) {
    ProgramInstr in;
    in.opType = op;
    in.name = in.location = name;
    in.ins = std::move(ins);
    in.outs = std::move(outs);
    p.instrs.push_back(std::move(in));
    return &p.instrs.back();
  };
  const int x = value(DType::F32, {4, 8}, Where::Persistent);
  const int label = value(DType::I64, {4}, Where::Persistent);
  const int w = value(DType::F32, {3, 8}, Where::Persistent);
  p.inputValue = x;
  p.labelValue = label;
  p.tensors.push_back(
      {PersistentTensor::Param, "fc.weight", w, PersistentTensor::HeNormal, 8});
  const int y = value(DType::F32, {4, 3}, Where::Arena, 0);
  kernel("Gemm", "fc", {x, w}, {y})->attrs.set("transB", int64_t(1));
  step("fc", "Gemm", "fc", StepKind::Forward);
  const int loss = value(DType::F32, {}, Where::Arena, 1);
  const int logp = value(DType::F32, {4, 3}, Where::Arena, 1);
  kernel("SoftmaxCrossEntropyLoss", "loss", {y, label}, {loss, logp})
      ->attrs.set("reduction", std::string("mean"));
  step("loss", "SoftmaxCrossEntropyLoss", "loss", StepKind::Forward);
  p.lossValue = loss;
  p.scoresValue = y;
  p.forwardEnd = 2;
  p.values[size_t(loss)].used = true;
  const int one = value(DType::F32, {}, Where::Persistent);
  const float oneF = 1.0f;
  p.persist.back().init.assign(reinterpret_cast<const char *>(&oneF),
                               reinterpret_cast<const char *>(&oneF) + 4);
  const int dy = value(DType::F32, {4, 3}, Where::Arena, 2);
  kernel("SoftmaxCrossEntropyLossGrad", "loss_grad", {one, logp, label}, {dy})
      ->attrs.set("reduction", std::string("mean"));
  step("loss_grad", "SoftmaxCrossEntropyLossGrad", "loss", StepKind::Backward);
  const int dx = value(DType::F32, {4, 8}, Where::Arena, 3);
  const int dw = value(DType::F32, {3, 8}, Where::Group, 3);
  p.values[size_t(dw)].group = 0;
  kernel("GemmGrad", "fc_grad", {dy, x, w}, {dx, dw})
      ->attrs.set("transB", int64_t(1));
  step("fc_grad", "GemmGrad", "fc", StepKind::Backward);
  ProgramInstr start;
  start.op = InstrOp::Start;
  start.ins = {dw};
  p.instrs.push_back(start);
  step("allreduce_start 0", "allreduce_start", "fc", StepKind::Comm);
  const int avg = value(DType::F32, {3, 8}, Where::Group, 5);
  p.values[size_t(avg)].group = 0;
  p.values[size_t(avg)].kernelOutput = false;
  ProgramInstr wait;
  wait.op = InstrOp::Wait;
  wait.outs = {avg};
  p.instrs.push_back(wait);
  step("allreduce_wait 0", "allreduce_wait", "fc", StepKind::Comm);
  ProgramGroup g;
  g.grads = {dw};
  g.offsets = {0};
  g.gradLayers = {"fc"};
  g.bytes = 96;
  g.layer = "fc";
  g.slots = {GradSlot{dw, avg, 3}};
  p.groups.push_back(g);
  const int nw = value(DType::F32, {3, 8}, Where::Alias);
  p.values[size_t(nw)].aliasOf = w;
  p.values[size_t(nw)].used = true;
  ProgramInstr update;
  update.op = InstrOp::Update;
  update.ins = {w, avg};
  update.outs = {nw};
  update.rule.algo = "sgd";
  update.rule.lr = 0.1;
  p.instrs.push_back(update);
  step("update", "optimizer_update", "", StepKind::Update);
  p.gradOfParam["fc.weight"] = avg;
  p.gradients.push_back({{0, 0}, "fc.weight", "fc", 96, 3});
  return p;
}

struct NoComm : StepHooks {
  void gradientsReady(unsigned) override {}
  void gradientsNeeded(unsigned) override {}
};

/// Three steps of `program` from seeded weights: the weights after them.
std::vector<float> train(Program program) {
  auto backend = createCpuBackend();
  auto exec = Executor::create(std::move(program), *backend, {});
  EXPECT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  if (!exec)
    return {};
  Executor &e = **exec;
  EXPECT_TRUE(bool(initializeWeights(e, nullptr, 7)));
  NoComm hooks;
  for (int s = 0; s < 3; ++s) {
    for (int64_t i = 0; i < e.input().numel(); ++i)
      e.input().as<float>()[i] = float((i * 3 + s) % 7) * 0.2f - 0.6f;
    for (int64_t i = 0; i < 4; ++i)
      e.label().as<int64_t>()[i] = (i + s) % 3;
    e.runStep(hooks, nullptr, 0);
  }
  e.completeUpdates(hooks);
  const TensorRef &w = std::as_const(e).persistent()[0].ref;
  return std::vector<float>(w.as<float>(), w.as<float>() + w.numel());
}

struct Lowered {
  mlir::MLIRContext ctx;
  llvm::Expected<Program> program = Program();
  explicit Lowered(const char *text) {
    mlir::DialectRegistry registry;
    registry.insert<mlir::func::FuncDialect, mlir::oasr::OASRDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    EXPECT_TRUE(module);
    program = lowerToProgram(*module);
    EXPECT_TRUE(bool(program)) << llvm::toString(program.takeError());
  }
};

TEST(Program, BuiltByHandTrainsAsTheLoweredModule) {
  Lowered lowered(kLinear);
  ASSERT_TRUE(bool(lowered.program));
  EXPECT_EQ(lowered.program->instrs.size(), handWritten().instrs.size());
  std::vector<float> byHand = train(handWritten());
  ASSERT_EQ(byHand.size(), 24u);
  EXPECT_EQ(byHand, train(std::move(*lowered.program)));
}

TEST(Program, FileRoundTripTrainsAlike) {
  Lowered lowered(kLinear);
  ASSERT_TRUE(bool(lowered.program));
  std::string bytes = serializeProgram(*lowered.program);
  auto back = deserializeProgram(bytes, "m.oasrprog");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(serializeProgram(*back), bytes);
  EXPECT_EQ(back->instrs[0].attrs.getInt("transB"), 1);
  EXPECT_EQ(train(std::move(*back)), train(std::move(*lowered.program)));
}

TEST(Program, DamagedFilesAreRefused) {
  std::string bytes = serializeProgram(handWritten());
  auto message = [](llvm::Expected<Program> p) {
    EXPECT_FALSE(bool(p));
    return p ? std::string() : llvm::toString(p.takeError());
  };
  EXPECT_NE(message(deserializeProgram("not a program at all", "m.oasrprog"))
                .find("m.oasrprog: not an oasr program"),
            std::string::npos);
  EXPECT_NE(message(deserializeProgram(
                        llvm::StringRef(bytes).take_front(bytes.size() / 2),
                        "m.oasrprog"))
                .find("m.oasrprog: the program is damaged"),
            std::string::npos);
  // Any one byte flipped (two ways): refused by the verifier, an enum
  // check or the executor's checks, or run as a program that still holds
  // together; never a crash.
  size_t refused = 0;
  for (size_t at = 8; at < 2 * bytes.size(); ++at) {
    std::string bad = bytes;
    const size_t i = at % bytes.size();
    bad[i] = char(bad[i] ^ (at < bytes.size() ? 0x5a : 0x81));
    auto p = deserializeProgram(bad, "m.oasrprog");
    if (!p) {
      llvm::consumeError(p.takeError());
      ++refused;
      continue;
    }
    auto backend = createCpuBackend();
    auto exec = Executor::create(std::move(*p), *backend, {});
    if (!exec) {
      llvm::consumeError(exec.takeError());
      ++refused;
      continue;
    }
    NoComm hooks;
    auto init = initializeWeights(**exec, nullptr, 1);
    if (!init) {
      llvm::consumeError(init.takeError());
      continue;
    }
    (*exec)->runStep(hooks, nullptr, 0);
  }
  EXPECT_GT(refused, 0u);
}

TEST(Program, InconsistentIndicesAreRefused) {
  Program p = handWritten();
  p.instrs[3].ins[1] = 99;
  auto backend = createCpuBackend();
  auto exec = Executor::create(std::move(p), *backend, {});
  ASSERT_FALSE(bool(exec));
  EXPECT_NE(llvm::toString(exec.takeError())
                .find("invalid program: instruction 3 ('fc_grad') reads or "
                      "writes a value or group that does not exist"),
            std::string::npos);
}

} // namespace
