//===- RuntimeTests.cpp - Executor plan, data loaders, comm engine --------===//

#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Runtime/Checkpoint.h"
#include "oasr/Runtime/Communicator.h"
#include "oasr/Runtime/DataLoader.h"
#include "oasr/Runtime/Executor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

using namespace oasr::rt;

namespace {

//===----------------------------------------------------------------------===//
// Executor plan
//===----------------------------------------------------------------------===//

/// A chain of four ReLUs on [1024] floats, then a loss: each activation dies
/// after its consumer, so the arena needs far less than the sum.
const char *kChain = R"mlir(
module attributes {oasr.plan = {strategy = "wfbp", groups = 1 : i64, predicted_iteration_us = 5.0 : f64}} {
  func.func @train_step(%x: tensor<4x256xf32> {oasr.input = "input"},
                        %label: tensor<4xi64> {oasr.label = "label"},
                        %w: tensor<10x256xf32> {oasr.param = "fc.weight"})
      -> (tensor<f32>, tensor<10x256xf32>) {
    %a = oasr.node "Relu"(%x) : (tensor<4x256xf32>) -> tensor<4x256xf32> loc("r1")
    %b = oasr.node "Relu"(%a) : (tensor<4x256xf32>) -> tensor<4x256xf32> loc("r2")
    %c = oasr.node "Relu"(%b) : (tensor<4x256xf32>) -> tensor<4x256xf32> loc("r3")
    %d = oasr.node "Relu"(%c) : (tensor<4x256xf32>) -> tensor<4x256xf32> loc("r4")
    %v = oasr.node "Reshape"(%d) : (tensor<4x256xf32>) -> tensor<4x256xf32> loc("view")
    %y = oasr.node "Gemm"(%v, %w) {transB = 1 : i64} : (tensor<4x256xf32>, tensor<10x256xf32>) -> tensor<4x10xf32> loc("fc")
    %loss, %logp = oasr.node "SoftmaxCrossEntropyLoss"(%y, %label) {reduction = "mean"} : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>) loc("loss")
    %one = oasr.node "Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %dy = oasr.node "SoftmaxCrossEntropyLossGrad"(%one, %logp, %label) {reduction = "mean", oasr.layer = "loss"} : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
    %dv, %dw = oasr.node "GemmGrad"(%dy, %v, %w) {transB = 1 : i64, oasr.layer = "fc"} : (tensor<4x10xf32>, tensor<4x256xf32>, tensor<10x256xf32>) -> (tensor<4x256xf32>, tensor<10x256xf32>)
    %t = oasr.allreduce_start %dw {group = 0 : i64, offsets = array<i64: 0>, buffer_bytes = 10240 : i64} : tensor<10x256xf32>
    %rw = oasr.allreduce_wait %t : tensor<10x256xf32>
    %nw = oasr.optimizer_update "sgd" %w, %rw {lr = 0.5 : f64} : tensor<10x256xf32>
    return %loss, %nw : tensor<f32>, tensor<10x256xf32>
  }
}
)mlir";

struct Parsed {
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  explicit Parsed(const char *text) {
    mlir::DialectRegistry registry;
    registry.insert<mlir::func::FuncDialect, mlir::oasr::OASRDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  }
};

/// Counts hooks; no communication.
struct CountingHooks : StepHooks {
  int ready = 0, needed = 0;
  void gradientsReady(unsigned) override { ++ready; }
  void gradientsNeeded(unsigned) override { ++needed; }
};

TEST(ExecutorPlan, ReusesActivationsAndWritesGradientsIntoTheGroupBuffer) {
  Parsed p(kChain);
  ASSERT_TRUE(p.module);
  auto backend = createCpuBackend();
  auto exec = Executor::create(*p.module, *backend, ExecutorOptions{});
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  Executor &e = **exec;
  // Four 4 KiB activations in a chain, plus a few small tensors: with reuse
  // at most three chain buffers are alive at once.
  EXPECT_LT(e.memory().arenaBytes, e.memory().unsharedBytes);
  EXPECT_LE(e.memory().arenaBytes, size_t(4 * 4096));
  ASSERT_EQ(e.groups().size(), 1u);
  EXPECT_EQ(e.groups()[0].bytes, 10240u);
  TensorRef g = e.gradient("fc.weight");
  ASSERT_NE(g.data, nullptr);
  EXPECT_EQ(g.data, e.groups()[0].buffer.data) << "gradient not in place";
  EXPECT_EQ(e.predictedIterationUs(), 5.0);
  EXPECT_EQ(e.planStrategy(), "wfbp");

  auto loaded = initializeWeights(e, nullptr, 7);
  ASSERT_TRUE(bool(loaded));
  std::vector<float> before(e.persistent()[0].ref.as<float>(),
                            e.persistent()[0].ref.as<float>() + 2560);
  for (int64_t i = 0; i < e.input().numel(); ++i)
    e.input().as<float>()[i] = float(i % 7) * 0.1f;
  for (int64_t i = 0; i < 4; ++i)
    e.label().as<int64_t>()[i] = i;
  CountingHooks hooks;
  e.runStep(hooks, nullptr, 0);
  EXPECT_EQ(hooks.ready, 1);
  EXPECT_EQ(hooks.needed, 1);
  EXPECT_GT(e.loss(), 0.0f);
  // SGD in place: w' = w - 0.5 * g.
  const float *w = e.persistent()[0].ref.as<float>();
  for (int i = 0; i < 2560; i += 97)
    EXPECT_FLOAT_EQ(w[i], before[size_t(i)] - 0.5f * g.as<float>()[i]);
}

/// kChain's module with `steady` in place of the plan's attribute.
std::string withSteady(const std::string &steady) {
  std::string text = kChain;
  std::string from = "predicted_iteration_us = 5.0 : f64}";
  text.replace(text.find(from), from.size(),
               "predicted_iteration_us = 5.0 : f64, steady = {" + steady +
                   "}}");
  return text;
}

TEST(ExecutorPlan, ReduceScatterGroupsArePaddedForTheirRanks) {
  // One group of 10240 bytes reduce-scattered over 3 ranks in 2 pieces:
  // the buffer is padded to 16 x 3 elements (10368 bytes, 2592 floats),
  // each rank's shard is a third of it, and each piece a multiple of 48
  // elements.
  Parsed p(withSteady("forward_waits = true, pieces = array<i64: 2>, "
                      "scatter = array<i64: 1>, order = array<i64: 0, 0, 0, "
                      "0, 1, 0, 0, 0, 1, 0, 1, 1>")
               .c_str());
  ASSERT_TRUE(p.module);
  auto backend = createCpuBackend();
  ExecutorOptions options;
  options.ranks = 3;
  auto exec = Executor::create(*p.module, *backend, options);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  const GradGroup &g = (*exec)->groups()[0];
  EXPECT_EQ(g.buffer.numel(), 2592);
  EXPECT_EQ(g.scatterRanks, 3u);
  ASSERT_NE(g.shard, nullptr);
  EXPECT_EQ((*exec)->memory().gradBytes, 10368u + 3456u);
  EXPECT_EQ(pieceSpan(g, 0, 2), (std::pair<size_t, size_t>{0, 1296}));
  EXPECT_EQ(pieceSpan(g, 1, 2), (std::pair<size_t, size_t>{1296, 1296}));
  // 54 units of 48 in 5 pieces: 10 units each, the last 14.
  EXPECT_EQ(pieceSpan(g, 4, 5), (std::pair<size_t, size_t>{1920, 672}));
  const SteadyExecution &st = (*exec)->steady();
  ASSERT_EQ(st.order.size(), 4u);
  EXPECT_TRUE(st.order[2].gather);
  // A step runs: the updates wait for the next step or completeUpdates.
  CountingHooks hooks;
  ASSERT_TRUE(bool(initializeWeights(**exec, nullptr, 1)));
  (*exec)->runStep(hooks, nullptr, 0);
  EXPECT_EQ(hooks.ready, 1);
  EXPECT_EQ(hooks.needed, 0);
  (*exec)->completeUpdates(hooks);
  EXPECT_EQ(hooks.needed, 1);
}

/// Two linear layers, each gradient in a group of its own.
const char *kTwoLayers = R"mlir(
module attributes {oasr.plan = {strategy = "wfbp", groups = 2 : i64}} {
  func.func @train_step(%x: tensor<4x8xf32> {oasr.input = "input"},
                        %label: tensor<4xi64> {oasr.label = "label"},
                        %w1: tensor<6x8xf32> {oasr.param = "fc1.weight"},
                        %w2: tensor<3x6xf32> {oasr.param = "fc2.weight"})
      -> (tensor<f32>, tensor<6x8xf32>, tensor<3x6xf32>) {
    %h = oasr.node "Gemm"(%x, %w1) {transB = 1 : i64} : (tensor<4x8xf32>, tensor<6x8xf32>) -> tensor<4x6xf32> loc("fc1")
    %y = oasr.node "Gemm"(%h, %w2) {transB = 1 : i64} : (tensor<4x6xf32>, tensor<3x6xf32>) -> tensor<4x3xf32> loc("fc2")
    %loss, %logp = oasr.node "SoftmaxCrossEntropyLoss"(%y, %label) {reduction = "mean"} : (tensor<4x3xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x3xf32>) loc("loss")
    %one = oasr.node "Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %dy = oasr.node "SoftmaxCrossEntropyLossGrad"(%one, %logp, %label) {reduction = "mean", oasr.layer = "loss"} : (tensor<f32>, tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
    %dh, %dw2 = oasr.node "GemmGrad"(%dy, %h, %w2) {transB = 1 : i64, oasr.layer = "fc2"} : (tensor<4x3xf32>, tensor<4x6xf32>, tensor<3x6xf32>) -> (tensor<4x6xf32>, tensor<3x6xf32>)
    %t2 = oasr.allreduce_start %dw2 {group = 0 : i64} : tensor<3x6xf32>
    %dx, %dw1 = oasr.node "GemmGrad"(%dh, %x, %w1) {transB = 1 : i64, oasr.layer = "fc1"} : (tensor<4x6xf32>, tensor<4x8xf32>, tensor<6x8xf32>) -> (tensor<4x8xf32>, tensor<6x8xf32>)
    %t1 = oasr.allreduce_start %dw1 {group = 1 : i64} : tensor<6x8xf32>
    %r2 = oasr.allreduce_wait %t2 : tensor<3x6xf32>
    %r1 = oasr.allreduce_wait %t1 : tensor<6x8xf32>
    %n1 = oasr.optimizer_update "sgd" %w1, %r1 {lr = 0.1 : f64} : tensor<6x8xf32>
    %n2 = oasr.optimizer_update "sgd" %w2, %r2 {lr = 0.1 : f64} : tensor<3x6xf32>
    return %loss, %n1, %n2 : tensor<f32>, tensor<6x8xf32>, tensor<3x6xf32>
  }
}
)mlir";

/// Two layers in bf16 (oasr-opt --oasr-train-pipeline='precision=bf16
/// strategy=wfbp algo=momentum momentum=0.9 lr=0.1' on a two-MatMul
/// forward): each weight's Cast is its bf16 copy.
const char *kTwoLayersBF16 = R"mlir(
module attributes {oasr.cost_model = {bytes_per_s = 1.700000e+10 : f64, device = "cpu", peak_flops = 1.850000e+11 : f64, source = "roofline", update_us = 0.000000e+00 : f64}, oasr.plan = {groups = 2 : i64, strategy = "wfbp", update_us = 0.000000e+00 : f64}, oasr.precision = "bf16"} {
  func.func @train_step(%arg0: tensor<4x8xf32> {oasr.input = "x"}, %arg1: tensor<4xi64> {oasr.label = "label"}, %arg2: tensor<8x6xf32> {oasr.param = "w1"}, %arg3: tensor<6x3xf32> {oasr.param = "w2"}, %arg4: tensor<8x6xf32> {oasr.opt_state = "w1"}, %arg5: tensor<6x3xf32> {oasr.opt_state = "w2"}) -> (tensor<f32> {oasr.output = "loss"}, tensor<8x6xf32> {oasr.new_param = "w1"}, tensor<6x3xf32> {oasr.new_param = "w2"}, tensor<8x6xf32> {oasr.new_opt_state = "w1"}, tensor<6x3xf32> {oasr.new_opt_state = "w2"}) {
    %0 = oasr.node "Cast"(%arg0) {to = 16 : i64} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
    %1 = oasr.node "Cast"(%arg2) {to = 16 : i64} : (tensor<8x6xf32>) -> tensor<8x6xbf16>
    %2 = oasr.node "MatMul"(%0, %1) : (tensor<4x8xbf16>, tensor<8x6xbf16>) -> tensor<4x6xbf16>
    %3 = oasr.node "Relu"(%2) : (tensor<4x6xbf16>) -> tensor<4x6xbf16>
    %4 = oasr.node "Cast"(%arg3) {to = 16 : i64} : (tensor<6x3xf32>) -> tensor<6x3xbf16>
    %5 = oasr.node "MatMul"(%3, %4) : (tensor<4x6xbf16>, tensor<6x3xbf16>) -> tensor<4x3xf32>
    %6:2 = oasr.node "SoftmaxCrossEntropyLoss"(%5, %arg1) {reduction = "mean"} : (tensor<4x3xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x3xf32>)
    %7 = oasr.node "Constant"() {oasr.layer = "loss", value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
    %8 = oasr.node "SoftmaxCrossEntropyLossGrad"(%7, %6#1, %arg1) {oasr.layer = "loss", reduction = "mean"} : (tensor<f32>, tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
    %9 = oasr.node "Cast"(%8) {oasr.layer = "/fc2/autocast_f32", to = 16 : i64} : (tensor<4x3xf32>) -> tensor<4x3xbf16>
    %10 = oasr.node "com.microsoft"::"FusedMatMul"(%9, %4) {oasr.layer = "/fc2", transA = 0 : i64, transB = 1 : i64} : (tensor<4x3xbf16>, tensor<6x3xbf16>) -> tensor<4x6xbf16>
    %11 = oasr.node "com.microsoft"::"FusedMatMul"(%3, %9) {oasr.layer = "/fc2", transA = 1 : i64, transB = 0 : i64} : (tensor<4x6xbf16>, tensor<4x3xbf16>) -> tensor<6x3xf32>
    %12 = oasr.allreduce_start %11 {buffer_bytes = 256 : i64, group = 0 : i64, offsets = array<i64: 0>} : tensor<6x3xf32>
    %13 = oasr.node "ReluGrad"(%10, %3) {oasr.layer = "/relu"} : (tensor<4x6xbf16>, tensor<4x6xbf16>) -> tensor<4x6xbf16>
    %14 = oasr.node "com.microsoft"::"FusedMatMul"(%0, %13) {oasr.layer = "/fc1", transA = 1 : i64, transB = 0 : i64} : (tensor<4x8xbf16>, tensor<4x6xbf16>) -> tensor<8x6xf32>
    %15 = oasr.allreduce_start %14 {buffer_bytes = 256 : i64, group = 1 : i64, offsets = array<i64: 0>} : tensor<8x6xf32>
    %16 = oasr.allreduce_wait %12 : tensor<6x3xf32>
    %new_param, %new_state = oasr.optimizer_update "momentum" %arg3, %16, %arg5 {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64} : tensor<6x3xf32>, tensor<6x3xf32>
    %17 = oasr.allreduce_wait %15 : tensor<8x6xf32>
    %new_param_0, %new_state_1 = oasr.optimizer_update "momentum" %arg2, %17, %arg4 {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64} : tensor<8x6xf32>, tensor<8x6xf32>
    return %6#0, %new_param_0, %new_param, %new_state_1, %new_state : tensor<f32>, tensor<8x6xf32>, tensor<6x3xf32>, tensor<8x6xf32>, tensor<6x3xf32>
  }
}

)mlir";

/// The same with alpha=1e-6 beta=1e-7 strategy=oasr-step: per-layer
/// forward waits, so each step's updates run in the next step, before the
/// first reader of the weight's copy.
const char *kTwoLayersBF16Steady = R"mlir(
module attributes {oasr.cost_model = {bytes_per_s = 1.700000e+10 : f64, device = "cpu", peak_flops = 1.850000e+11 : f64, source = "roofline", update_us = 0.000000e+00 : f64}, oasr.plan = {alpha_s = 9.9999999999999995E-7 : f64, beta_s_per_byte = 9.9999999999999995E-8 : f64, group_overhead_us = 0.000000e+00 : f64, groups = 1 : i64, lower_bound_us = 27.494823529411764 : f64, overlap_rate = 1.000000e+00 : f64, predicted_iteration_us = 27.521176470588273 : f64, steady = {forward_waits = true, order = array<i64: 0, 0, 0, 0, 0, 1>, pieces = array<i64: 1>, scatter = array<i64: 1>}, strategy = "oasr-step", update_us = 0.000000e+00 : f64}, oasr.precision = "bf16"} {
  func.func @train_step(%arg0: tensor<4x8xf32> {oasr.input = "x"}, %arg1: tensor<4xi64> {oasr.label = "label"}, %arg2: tensor<8x6xf32> {oasr.param = "w1"}, %arg3: tensor<6x3xf32> {oasr.param = "w2"}, %arg4: tensor<8x6xf32> {oasr.opt_state = "w1"}, %arg5: tensor<6x3xf32> {oasr.opt_state = "w2"}) -> (tensor<f32> {oasr.output = "loss"}, tensor<8x6xf32> {oasr.new_param = "w1"}, tensor<6x3xf32> {oasr.new_param = "w2"}, tensor<8x6xf32> {oasr.new_opt_state = "w1"}, tensor<6x3xf32> {oasr.new_opt_state = "w2"}) {
    %0 = oasr.node "Cast"(%arg0) {to = 16 : i64} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
    %1 = oasr.node "Cast"(%arg2) {to = 16 : i64} : (tensor<8x6xf32>) -> tensor<8x6xbf16>
    %2 = oasr.node "MatMul"(%0, %1) : (tensor<4x8xbf16>, tensor<8x6xbf16>) -> tensor<4x6xbf16>
    %3 = oasr.node "Relu"(%2) : (tensor<4x6xbf16>) -> tensor<4x6xbf16>
    %4 = oasr.node "Cast"(%arg3) {to = 16 : i64} : (tensor<6x3xf32>) -> tensor<6x3xbf16>
    %5 = oasr.node "MatMul"(%3, %4) : (tensor<4x6xbf16>, tensor<6x3xbf16>) -> tensor<4x3xf32>
    %6:2 = oasr.node "SoftmaxCrossEntropyLoss"(%5, %arg1) {reduction = "mean"} : (tensor<4x3xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x3xf32>)
    %7 = oasr.node "Constant"() {oasr.layer = "loss", value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
    %8 = oasr.node "SoftmaxCrossEntropyLossGrad"(%7, %6#1, %arg1) {oasr.layer = "loss", reduction = "mean"} : (tensor<f32>, tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
    %9 = oasr.node "Cast"(%8) {oasr.layer = "/fc2/autocast_f32", to = 16 : i64} : (tensor<4x3xf32>) -> tensor<4x3xbf16>
    %10 = oasr.node "com.microsoft"::"FusedMatMul"(%9, %4) {oasr.layer = "/fc2", transA = 0 : i64, transB = 1 : i64} : (tensor<4x3xbf16>, tensor<6x3xbf16>) -> tensor<4x6xbf16>
    %11 = oasr.node "com.microsoft"::"FusedMatMul"(%3, %9) {oasr.layer = "/fc2", transA = 1 : i64, transB = 0 : i64} : (tensor<4x6xbf16>, tensor<4x3xbf16>) -> tensor<6x3xf32>
    %12 = oasr.node "ReluGrad"(%10, %3) {oasr.layer = "/relu"} : (tensor<4x6xbf16>, tensor<4x6xbf16>) -> tensor<4x6xbf16>
    %13 = oasr.node "com.microsoft"::"FusedMatMul"(%0, %12) {oasr.layer = "/fc1", transA = 1 : i64, transB = 0 : i64} : (tensor<4x8xbf16>, tensor<4x6xbf16>) -> tensor<8x6xf32>
    %14 = oasr.allreduce_start %11, %13 {buffer_bytes = 512 : i64, group = 0 : i64, offsets = array<i64: 0, 256>} : tensor<6x3xf32>, tensor<8x6xf32>
    %15:2 = oasr.allreduce_wait %14 : tensor<6x3xf32>, tensor<8x6xf32>
    %new_param, %new_state = oasr.optimizer_update "momentum" %arg2, %15#1, %arg4 {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64} : tensor<8x6xf32>, tensor<8x6xf32>
    %new_param_0, %new_state_1 = oasr.optimizer_update "momentum" %arg3, %15#0, %arg5 {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64} : tensor<6x3xf32>, tensor<6x3xf32>
    return %6#0, %new_param, %new_param_0, %new_state, %new_state_1 : tensor<f32>, tensor<8x6xf32>, tensor<6x3xf32>, tensor<8x6xf32>, tensor<6x3xf32>
  }
}

)mlir";

class ExecutorWeightCopies : public ::testing::TestWithParam<const char *> {};

TEST_P(ExecutorWeightCopies, UpdatesKeepTheCopiesTheCastsMade) {
  // Three momentum steps with the updates keeping the bf16 copies, and with
  // the forward casting the weights each step: bit for bit the same
  // weights, also when the weights are written from outside between steps
  // (as an algorithm averaging them does), which makes the copies again.
  auto train = [](bool copies, size_t &instructions) {
    Parsed p(GetParam());
    EXPECT_TRUE(p.module);
    auto backend = createCpuBackend();
    ExecutorOptions options;
    options.weightCopies = copies;
    auto exec = Executor::create(*p.module, *backend, options);
    EXPECT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
    Executor &e = **exec;
    EXPECT_TRUE(bool(initializeWeights(e, nullptr, 5)));
    instructions = e.steps().size();
    EXPECT_EQ(e.steady().forwardWaits, GetParam() == kTwoLayersBF16Steady);
    CountingHooks hooks;
    for (int step = 0; step < 3; ++step) {
      for (int64_t i = 0; i < e.input().numel(); ++i)
        e.input().as<float>()[i] = float((i * 5 + step) % 13) * 0.1f - 0.6f;
      for (int64_t i = 0; i < 4; ++i)
        e.label().as<int64_t>()[i] = (i + step) % 3;
      e.runStep(hooks, nullptr, 0);
      if (step == 1)
        for (PersistentTensor &t : e.persistent())
          if (t.kind == PersistentTensor::Param)
            for (int64_t i = 0; i < t.ref.numel(); ++i)
              t.ref.as<float>()[i] *= 0.75f;
    }
    e.completeUpdates(hooks);
    std::vector<float> w;
    for (const PersistentTensor &t : std::as_const(e).persistent())
      w.insert(w.end(), t.ref.as<float>(), t.ref.as<float>() + t.ref.numel());
    return std::make_pair(w, e.loss());
  };
  size_t fused = 0, cast = 0;
  auto [kept, keptLoss] = train(true, fused);
  auto [made, madeLoss] = train(false, cast);
  EXPECT_EQ(cast - fused, 2u) << "the two weight casts leave the step";
  ASSERT_EQ(kept.size(), 2u * (8 * 6 + 6 * 3));
  EXPECT_EQ(kept, made);
  EXPECT_EQ(keptLoss, madeLoss);
}

INSTANTIATE_TEST_SUITE_P(Plans, ExecutorWeightCopies,
                         ::testing::Values(kTwoLayersBF16,
                                           kTwoLayersBF16Steady));

TEST(ExecutorRegroup, NewGroupsTrainAsTheOldOnes) {
  // Three steps; one run merges the two groups into one after the first.
  // Grouping changes where the gradients live, not what they are: the
  // weights end bit for bit alike, and every gradient sits in the new
  // group's buffer.
  auto train = [](bool merge) {
    Parsed p(kTwoLayers);
    EXPECT_TRUE(p.module);
    auto backend = createCpuBackend();
    auto exec = Executor::create(*p.module, *backend, ExecutorOptions{});
    EXPECT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
    Executor &e = **exec;
    EXPECT_TRUE(bool(initializeWeights(e, nullptr, 3)));
    EXPECT_EQ(e.groups().size(), 2u);
    auto all = [&] {
      std::vector<float> w;
      for (const PersistentTensor &t : e.persistent())
        w.insert(w.end(), t.ref.as<float>(), t.ref.as<float>() + t.ref.numel());
      return w;
    };
    const std::vector<float> initial = all();
    CountingHooks hooks;
    for (int step = 0; step < 3; ++step) {
      for (int64_t i = 0; i < e.input().numel(); ++i)
        e.input().as<float>()[i] = float((i * 7 + step) % 11) * 0.1f - 0.5f;
      for (int64_t i = 0; i < 4; ++i)
        e.label().as<int64_t>()[i] = (i + step) % 3;
      e.runStep(hooks, nullptr, 0);
      if (merge && step == 0) {
        EXPECT_FALSE(llvm::errorToBool(e.regroup({2})));
        EXPECT_EQ(e.groups().size(), 1u);
        const GradGroup &g = e.groups()[0];
        EXPECT_EQ(g.params.size(), 2u);
        for (const char *name : {"fc1.weight", "fc2.weight"}) {
          auto *at = static_cast<const char *>(e.gradient(name).data);
          auto *begin = static_cast<const char *>(g.buffer.data);
          EXPECT_TRUE(at >= begin && at < begin + g.buffer.bytes()) << name;
        }
      }
    }
    e.completeUpdates(hooks);
    std::vector<float> weights = all();
    EXPECT_NE(weights, initial) << "the steps trained nothing";
    // Ends that are not a grouping are refused, naming why.
    for (std::vector<unsigned> bad :
         {std::vector<unsigned>{1}, {2, 2}, {3}, {}}) {
      llvm::Error err = e.regroup(bad);
      EXPECT_TRUE(bool(err));
      EXPECT_NE(llvm::toString(std::move(err)).find("cannot regroup"),
                std::string::npos);
    }
    return weights;
  };
  std::vector<float> kept = train(false), merged = train(true);
  ASSERT_EQ(kept.size(), 6u * 8 + 3 * 6);
  EXPECT_EQ(kept, merged);
}

TEST(ExecutorPlan, ReduceScatterOrderErrorsNameTheUnit) {
  auto error = [](const std::string &steady) {
    Parsed p(withSteady(steady).c_str());
    auto backend = createCpuBackend();
    auto exec = Executor::create(*p.module, *backend, ExecutorOptions{});
    return exec ? std::string() : llvm::toString(exec.takeError());
  };
  EXPECT_EQ(error("forward_waits = true, pieces = array<i64: 1>, scatter = "
                  "array<i64: 1>, order = array<i64: 0, 0, 1, 0, 0, 0>"),
            "oasr.plan's steady execution: the order names group 0 piece 0 "
            "(all-gather) twice, out of range or before its reduce-scatter");
  EXPECT_EQ(error("forward_waits = true, pieces = array<i64: 1>, scatter = "
                  "array<i64: 1>, order = array<i64: 0, 0, 0>"),
            "oasr.plan's steady execution: the order has 0 of the 1 "
            "all-gathers");
  EXPECT_EQ(error("forward_waits = true, pieces = array<i64: 1>, scatter = "
                  "array<i64: 0>, order = array<i64: 0, 0, 0, 0, 0, 1>"),
            "oasr.plan's steady execution: the order names group 0 piece 0 "
            "(all-gather) twice, out of range or before its reduce-scatter");
  EXPECT_EQ(error("forward_waits = true, pieces = array<i64: 1>, scatter = "
                  "array<i64: 1, 0>, order = array<i64: 0, 0, 0, 0, 0, 1>"),
            "oasr.plan's steady execution: 2 collective form(s) for 1 "
            "group(s)");
  EXPECT_EQ(error("forward_waits = true, pieces = array<i64: 1>, order = "
                  "array<i64: 0, 0>"),
            "oasr.plan's steady 'order' must hold (group, piece, all-gather) "
            "triples");
}

/// Wraps the CPU backend; every kernel asks for a workspace and scribbles
/// over it before running, so a workspace overlapping a live tensor would
/// change the results.
/// The CPU backend behind a subclass that changes one thing.
struct ForwardingBackend : KernelBackend {
  std::unique_ptr<KernelBackend> cpu = createCpuBackend();
  const char *name() const override { return "cpu"; }
  bool hostAddressable() const override { return true; }
  std::unique_ptr<Kernel> create(const OpSpec &spec,
                                 std::string &error) override {
    return cpu->create(spec, error);
  }
  void *allocate(size_t n) override { return cpu->allocate(n); }
  void deallocate(void *p) override { cpu->deallocate(p); }
  void copyToDevice(void *d, const void *s, size_t n) override {
    cpu->copyToDevice(d, s, n);
  }
  void copyToHost(void *d, const void *s, size_t n) override {
    cpu->copyToHost(d, s, n);
  }
  bool supportsUpdate(const std::string &algo) const override {
    return cpu->supportsUpdate(algo);
  }
  void update(const UpdateRule &rule, int64_t t,
              const std::vector<TensorRef> &in,
              const std::vector<TensorRef> &out) override {
    cpu->update(rule, t, in, out);
  }
};

struct ScribblingBackend : ForwardingBackend {
  std::vector<std::pair<char *, size_t>> workspaces;
  struct K : Kernel {
    std::unique_ptr<Kernel> inner;
    ScribblingBackend *owner;
    char *ws = nullptr;
    size_t workspaceBytes() const override { return 3000; }
    void setWorkspace(void *p) override {
      ws = static_cast<char *>(p);
      owner->workspaces.push_back({ws, 3000});
    }
    void run(const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
      std::memset(ws, 0x7f, 3000);
      inner->run(in, out);
    }
  };
  std::unique_ptr<Kernel> create(const OpSpec &spec,
                                 std::string &error) override {
    auto k = std::make_unique<K>();
    k->inner = cpu->create(spec, error);
    k->owner = this;
    if (!k->inner)
      return nullptr;
    return k;
  }
};

TEST(ExecutorPlan, KernelWorkspacesShareTheArenaWithoutClobbering) {
  auto runOnce = [](KernelBackend &backend, std::vector<float> &weights) {
    Parsed p(kChain);
    auto exec = Executor::create(*p.module, backend, ExecutorOptions{});
    EXPECT_TRUE(bool(exec));
    Executor &e = **exec;
    EXPECT_TRUE(bool(initializeWeights(e, nullptr, 7)));
    for (int64_t i = 0; i < e.input().numel(); ++i)
      e.input().as<float>()[i] = float(i % 5) * 0.2f;
    for (int64_t i = 0; i < 4; ++i)
      e.label().as<int64_t>()[i] = 3 - i;
    CountingHooks hooks;
    e.runStep(hooks, nullptr, 0);
    const TensorRef &w = e.persistent()[0].ref;
    weights.assign(w.as<float>(), w.as<float>() + w.numel());
    return e.memory().arenaBytes;
  };
  auto cpu = createCpuBackend();
  ScribblingBackend scribbling;
  std::vector<float> plain, scribbled;
  size_t plainArena = runOnce(*cpu, plain);
  size_t arena = runOnce(scribbling, scribbled);
  EXPECT_EQ(plain, scribbled);
  EXPECT_FALSE(scribbling.workspaces.empty());
  // Workspaces are transient: the arena grows by about one, not one per op.
  EXPECT_LE(arena, plainArena + 2 * 3072);
}

/// The CPU backend, keeping every node's OpSpec.
struct SpecRecordingBackend : ForwardingBackend {
  std::map<std::string, OpSpec> specs;
  std::unique_ptr<Kernel> create(const OpSpec &spec,
                                 std::string &error) override {
    specs[spec.name] = spec;
    return cpu->create(spec, error);
  }
};

TEST(ExecutorPlan, SmallConstantOperandsReachTheKernelsAsValues) {
  Parsed p(kChain);
  ASSERT_TRUE(p.module);
  SpecRecordingBackend backend;
  auto exec = Executor::create(*p.module, backend, ExecutorOptions{});
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  // The loss gradient's seed is a Constant: its bytes come with the spec.
  const OpSpec *seeded = nullptr;
  for (const auto &[name, spec] : backend.specs)
    if (spec.opType == "SoftmaxCrossEntropyLossGrad")
      seeded = &spec;
  ASSERT_NE(seeded, nullptr);
  ASSERT_EQ(seeded->inputValues.size(), seeded->inputs.size());
  float one = 1.0f;
  std::vector<char> bytes(reinterpret_cast<char *>(&one),
                          reinterpret_cast<char *>(&one) + sizeof(float));
  EXPECT_EQ(seeded->inputValues[0], bytes);
  EXPECT_TRUE(seeded->inputValues[1].empty()); // an activation
  EXPECT_TRUE(seeded->inputValues[2].empty()); // the label, an input
  // Parameters change every step: never folded.
  const OpSpec &fc = backend.specs.at("fc");
  ASSERT_EQ(fc.inputValues.size(), 2u);
  EXPECT_TRUE(fc.inputValues[1].empty());
}

/// The CPU backend, counting device synchronizations.
struct SyncCountingBackend : ForwardingBackend {
  int syncs = 0;
  void synchronize() override { ++syncs; }
};

/// Hooks whose collectives order themselves after the device (NCCL's way).
struct DeviceOrderedHooks : CountingHooks {
  bool ordersAfterDevice() const override { return true; }
};

TEST(ExecutorPlan, AllreduceStartSynchronizesOnlyForHostCommunication) {
  Parsed p(kChain);
  ASSERT_TRUE(p.module);
  SyncCountingBackend backend;
  auto exec = Executor::create(*p.module, backend, ExecutorOptions{});
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  Executor &e = **exec;
  ASSERT_TRUE(bool(initializeWeights(e, nullptr, 7)));
  // Host communication (MPI): the device is synchronized at the group's
  // allreduce_start and once at the end of the step.
  CountingHooks host;
  backend.syncs = 0;
  e.runStep(host, nullptr, 0);
  EXPECT_EQ(host.ready, 1);
  EXPECT_EQ(backend.syncs, 2);
  // Device-ordered communication (NCCL on an event): only the end of step.
  DeviceOrderedHooks device;
  backend.syncs = 0;
  e.runStep(device, nullptr, 0);
  EXPECT_EQ(device.ready, 1);
  EXPECT_EQ(backend.syncs, 1);
}

TEST(ExecutorPlan, WithoutReuseEveryActivationHasItsOwnBuffer) {
  Parsed p(kChain);
  auto backend = createCpuBackend();
  ExecutorOptions o;
  o.reuseBuffers = false;
  auto exec = Executor::create(*p.module, *backend, o);
  ASSERT_TRUE(bool(exec)) << llvm::toString(exec.takeError());
  EXPECT_EQ((*exec)->memory().arenaBytes, (*exec)->memory().unsharedBytes);
}

TEST(ExecutorPlan, RejectsAForwardOnlyModule) {
  Parsed p(R"mlir(
    func.func @forward(%x: tensor<2xf32> {oasr.input = "x"}) -> tensor<2xf32> {
      %y = oasr.node "Relu"(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %y : tensor<2xf32>
    })mlir");
  ASSERT_TRUE(p.module);
  auto backend = createCpuBackend();
  auto exec = Executor::create(*p.module, *backend, ExecutorOptions{});
  ASSERT_FALSE(bool(exec));
  EXPECT_NE(llvm::toString(exec.takeError()).find("not compiled for training"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Data loaders
//===----------------------------------------------------------------------===//

struct TempDir {
  llvm::SmallString<128> path;
  TempDir() { llvm::sys::fs::createUniqueDirectory("oasr-runtime", path); }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(const char *name) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
};

void writeBe32(std::ofstream &os, uint32_t v) {
  unsigned char b[4] = {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8),
                        uint8_t(v)};
  os.write(reinterpret_cast<char *>(b), 4);
}

/// n samples of `features` bytes: sample i is all i; label i % 10.
void writeMnist(const TempDir &d, uint32_t n, uint32_t features) {
  std::ofstream img(d.file("train-images-idx3-ubyte"), std::ios::binary);
  img.put(0).put(0).put(8).put(2);
  writeBe32(img, n);
  writeBe32(img, features);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t f = 0; f < features; ++f)
      img.put(char(i));
  std::ofstream lab(d.file("train-labels-idx1-ubyte"), std::ios::binary);
  lab.put(0).put(0).put(8).put(1);
  writeBe32(lab, n);
  for (uint32_t i = 0; i < n; ++i)
    lab.put(char(i % 10));
}

TEST(DataLoader, ShardsAreDisjointCoverTheDataAndAreSeeded) {
  TempDir d;
  writeMnist(d, 40, 4);
  std::set<int> seen;
  for (int rank = 0; rank < 2; ++rank) {
    auto loader = createDataLoader("mnist:" + std::string(d.path),
                                   SampleShape{4, 10}, rank, 2, 3);
    ASSERT_TRUE(bool(loader)) << llvm::toString(loader.takeError());
    EXPECT_EQ((*loader)->trainSize(), 20);
    std::vector<float> x(20 * 4);
    std::vector<int64_t> y(20);
    (*loader)->nextBatch(x.data(), y.data(), 20);
    for (int k = 0; k < 20; ++k) {
      int i = int(std::lround(x[size_t(k) * 4] * 255.0f));
      EXPECT_EQ(y[size_t(k)], i % 10);
      EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " twice";
    }
  }
  EXPECT_EQ(seen.size(), 40u);
  // Same seed, same order; another seed, another order.
  auto first = [&](uint64_t seed) {
    auto l = createDataLoader("mnist:" + std::string(d.path),
                              SampleShape{4, 10}, 0, 2, seed);
    std::vector<float> x(8 * 4);
    std::vector<int64_t> y(8);
    (*l)->nextBatch(x.data(), y.data(), 8);
    return x;
  };
  EXPECT_EQ(first(5), first(5));
  EXPECT_NE(first(5), first(6));
}

/// A token file's windows come in an order computed as it is read (no
/// stored shuffle): over 2 ranks every window of an epoch exactly once, the
/// next epoch another order, the same seed the same order, and a saved
/// position continues where it was.
TEST(DataLoader, TokenFileWindowsOncePerEpochWithoutAStoredOrder) {
  TempDir d;
  const int64_t t = 4, windows = 1000; // windows * t + 1 tokens
  {
    std::ofstream f(d.file("c.bin"), std::ios::binary);
    for (int64_t i = 0; i <= windows * t; ++i) {
      uint16_t v = uint16_t(i / t % 997); // a window's first id names it
      f.write(reinterpret_cast<const char *>(&v), 2);
    }
  }
  SampleShape shape{t, 0, true, 1000, t};
  auto spec = "tokens:" + d.file("c.bin");
  auto draw = [&](DataLoader &l, int64_t n) {
    std::vector<int64_t> ids(size_t(n * t)), labels(size_t(n * t));
    l.nextTokens(ids.data(), labels.data(), n);
    std::vector<int64_t> first;
    for (int64_t k = 0; k < n; ++k) {
      EXPECT_EQ(labels[size_t(k * t)], ids[size_t(k * t + 1)]);
      first.push_back(ids[size_t(k * t)]);
    }
    return first;
  };
  std::multiset<int64_t> epoch0, epoch1;
  std::vector<int64_t> rank0epoch0;
  for (int rank = 0; rank < 2; ++rank) {
    auto l = createDataLoader(spec, shape, rank, 2, 7);
    ASSERT_TRUE(bool(l)) << llvm::toString(l.takeError());
    EXPECT_EQ((*l)->trainSize(), windows / 2);
    auto e0 = draw(**l, windows / 2), e1 = draw(**l, windows / 2);
    epoch0.insert(e0.begin(), e0.end());
    epoch1.insert(e1.begin(), e1.end());
    if (rank == 0)
      rank0epoch0 = e0;
    EXPECT_NE(e0, e1);
  }
  std::multiset<int64_t> all;
  for (int64_t w = 0; w < windows; ++w)
    all.insert(w % 997);
  EXPECT_EQ(epoch0, all);
  EXPECT_EQ(epoch1, all);
  auto again = createDataLoader(spec, shape, 0, 2, 7);
  EXPECT_EQ(draw(**again, windows / 2), rank0epoch0);
  auto other = createDataLoader(spec, shape, 0, 2, 8);
  EXPECT_NE(draw(**other, windows / 2), rank0epoch0);
  // Save after 123 windows; a new loader restored there reads the rest.
  auto a = createDataLoader(spec, shape, 0, 2, 7);
  draw(**a, 123);
  std::string state = (*a)->saveState();
  auto b = createDataLoader(spec, shape, 0, 2, 7);
  ASSERT_FALSE(bool((*b)->restoreState(state)));
  EXPECT_EQ(draw(**b, 200), draw(**a, 200));
}

TEST(DataLoader, ErrorsNameTheFileAndTheProblem) {
  TempDir d;
  writeMnist(d, 4, 5);
  auto wrongShape = createDataLoader("mnist:" + std::string(d.path),
                                     SampleShape{4, 10}, 0, 1, 1);
  ASSERT_FALSE(bool(wrongShape));
  EXPECT_NE(llvm::toString(wrongShape.takeError())
                .find("samples have 5 values but the model's input takes 4"),
            std::string::npos);
  {
    std::ofstream bad(d.file("train-images-idx3-ubyte"), std::ios::binary);
    bad << "garbage";
  }
  auto badMagic = createDataLoader("mnist:" + std::string(d.path),
                                   SampleShape{5, 10}, 0, 1, 1);
  ASSERT_FALSE(bool(badMagic));
  EXPECT_NE(llvm::toString(badMagic.takeError()).find("not an IDX file"),
            std::string::npos);
  auto missing = createDataLoader("cifar10:/nonexistent/dir",
                                  SampleShape{3072, 10}, 0, 1, 1);
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("no such directory"),
            std::string::npos);
  auto unknown = createDataLoader("imagenet:/x", SampleShape{1, 1}, 0, 1, 1);
  ASSERT_FALSE(bool(unknown));
  llvm::consumeError(unknown.takeError());
}

TEST(DataLoader, CifarBinaryRecords) {
  TempDir d;
  for (int b = 1; b <= 5; ++b) {
    std::ofstream os(
        d.file(("data_batch_" + std::to_string(b) + ".bin").c_str()),
        std::ios::binary);
    for (int r = 0; r < 2; ++r) {
      os.put(char(b));
      for (int k = 0; k < 3072; ++k)
        os.put(char(255));
    }
  }
  auto loader = createDataLoader("cifar10:" + std::string(d.path),
                                 SampleShape{3072, 10}, 0, 1, 1);
  ASSERT_TRUE(bool(loader)) << llvm::toString(loader.takeError());
  EXPECT_EQ((*loader)->trainSize(), 10);
  std::vector<float> x(3072);
  int64_t y;
  (*loader)->nextBatch(x.data(), &y, 1);
  EXPECT_GE(y, 1);
  EXPECT_LE(y, 5);
  EXPECT_FLOAT_EQ(x[100], 1.0f);
}

TEST(DataLoader, SyntheticIsSeededPerRank) {
  auto make = [](int rank, uint64_t seed) {
    auto l = createDataLoader("synthetic", SampleShape{16, 4}, rank, 2, seed);
    std::vector<float> x(4 * 16);
    std::vector<int64_t> y(4);
    (*l)->nextBatch(x.data(), y.data(), 4);
    for (int64_t v : y)
      EXPECT_LT(v, 4);
    return x;
  };
  EXPECT_EQ(make(0, 1), make(0, 1));
  EXPECT_NE(make(0, 1), make(1, 1));
}

TEST(DataLoader, SyntheticSamplesShareTheirClassPrototype) {
  // Sample = class prototype (unit variance) + unit noise: two samples of one
  // class correlate ~0.5, samples of different classes ~0.
  const int64_t f = 4096, n = 64;
  auto l = createDataLoader("synthetic", SampleShape{f, 3}, 0, 1, 7);
  ASSERT_TRUE(bool(l));
  std::vector<float> x(size_t(n * f));
  std::vector<int64_t> y(n);
  (*l)->nextBatch(x.data(), y.data(), n);
  auto corr = [&](int64_t a, int64_t b) {
    double sab = 0, saa = 0, sbb = 0;
    for (int64_t k = 0; k < f; ++k) {
      double u = x[a * f + k], v = x[b * f + k];
      sab += u * v, saa += u * u, sbb += v * v;
    }
    return sab / std::sqrt(saa * sbb);
  };
  int same = 0, diff = 0;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = a + 1; b < n; ++b) {
      double c = corr(a, b);
      if (y[a] == y[b]) {
        EXPECT_NEAR(c, 0.5, 0.08);
        ++same;
      } else {
        EXPECT_NEAR(c, 0.0, 0.08);
        ++diff;
      }
    }
  EXPECT_GT(same, 0);
  EXPECT_GT(diff, 0);
}

TEST(DataLoader, SavedStateContinuesTheStream) {
  // A loader restored from saveState() yields exactly the batches the saving
  // loader yields next: mid-epoch, across a reshuffled epoch, and for the
  // synthetic generator.
  TempDir d;
  writeMnist(d, 10, 3);
  for (std::string spec :
       {"mnist:" + std::string(d.path), std::string("synthetic")}) {
    auto make = [&] {
      return std::move(*createDataLoader(spec, SampleShape{3, 10}, 1, 2, 9));
    };
    std::unique_ptr<DataLoader> a = make(), b = make();
    std::vector<float> x(4 * 3), x2(4 * 3);
    std::vector<int64_t> y(4), y2(4);
    a->nextBatch(x.data(), y.data(), 3); // 3 of the shard's 5
    std::string state = a->saveState();
    ASSERT_FALSE(llvm::errorToBool(b->restoreState(state))) << spec;
    for (int k = 0; k < 3; ++k) { // wraps into epochs 1 and 2
      a->nextBatch(x.data(), y.data(), 4);
      b->nextBatch(x2.data(), y2.data(), 4);
      EXPECT_EQ(x, x2) << spec << " batch " << k;
      EXPECT_EQ(y, y2) << spec << " batch " << k;
    }
    EXPECT_EQ(a->saveState(), b->saveState()) << spec;
    // Another source's state is an error naming the state.
    llvm::Error wrong = b->restoreState(spec == "synthetic" ? "epoch 1 pos 2"
                                                            : "mt19937_64 1 2");
    ASSERT_TRUE(bool(wrong)) << spec;
    EXPECT_NE(llvm::toString(std::move(wrong)).find("does not fit"),
              std::string::npos);
  }
  // A position beyond the shard is refused.
  auto l = createDataLoader("mnist:" + std::string(d.path), SampleShape{3, 10},
                            0, 2, 9);
  llvm::Error beyond = (*l)->restoreState("epoch 0 pos 6");
  ASSERT_TRUE(bool(beyond));
  llvm::consumeError(std::move(beyond));
}

TEST(DataLoader, ResizedResumeRecutsTheRestOfTheEpoch) {
  // 4 ranks read 3 samples each of a 40-sample epoch, then 2 or 8 ranks
  // continue from their states: together the old and the new ranks read
  // every sample of the epoch once. The next epoch is the one a run of the
  // new size reads, and a resized position saves and restores.
  TempDir d;
  writeMnist(d, 40, 2);
  const std::string spec = "mnist:" + std::string(d.path);
  auto make = [&](int rank, int size) {
    return std::move(
        *createDataLoader(spec, SampleShape{2, 10}, rank, size, 7));
  };
  auto read = [](DataLoader &l, int64_t n) {
    std::vector<float> x(static_cast<size_t>(n) * 2);
    std::vector<int64_t> y(static_cast<size_t>(n));
    l.nextBatch(x.data(), y.data(), n);
    std::vector<int> ids;
    for (int64_t k = 0; k < n; ++k)
      ids.push_back(int(std::lround(x[size_t(k) * 2] * 255.0f)));
    return ids;
  };
  for (int newSize : {2, 8}) {
    std::multiset<int> seen;
    std::vector<std::string> states;
    for (int r = 0; r < 4; ++r) {
      auto l = make(r, 4);
      for (int i : read(*l, 3))
        seen.insert(i);
      states.push_back(l->saveState());
    }
    for (int r = 0; r < newSize; ++r) {
      auto l = make(r, newSize);
      ASSERT_FALSE(llvm::errorToBool(l->restoreResized(states, r)));
      EXPECT_NE(l->saveState().find(" from 12 "), std::string::npos)
          << l->saveState();
      // Its turns among the 28 samples left.
      for (int i : read(*l, (28 - r + newSize - 1) / newSize))
        seen.insert(i);
      // The state saved mid-way restores on a loader of the new size.
      auto again = make(r, newSize);
      ASSERT_FALSE(llvm::errorToBool(again->restoreState(l->saveState())));
      auto fresh = make(r, newSize);
      // The next epoch, as a run of the new size reads it.
      ASSERT_FALSE(llvm::errorToBool(fresh->restoreState("epoch 1 pos 0")));
      EXPECT_EQ(read(*l, 5), read(*fresh, 5)) << "rank " << r;
      EXPECT_EQ(read(*again, 0), std::vector<int>{});
    }
    EXPECT_EQ(seen.size(), 40u);
    for (int i = 0; i < 40; ++i)
      EXPECT_EQ(seen.count(i), 1u) << "sample " << i << " of " << newSize;
  }
  // A rank ahead of the slowest re-reads its lead, and skips nothing.
  auto slow = make(0, 2), fast = make(1, 2);
  read(*slow, 2);
  read(*fast, 3);
  auto l = make(0, 1);
  ASSERT_FALSE(llvm::errorToBool(
      l->restoreResized({slow->saveState(), fast->saveState()}, 0)));
  EXPECT_EQ(l->saveState(), "epoch 0 from 4 pos 0");
  // Synthetic streams: an old rank's continues, a new rank's starts fresh.
  auto s0 =
      std::move(*createDataLoader("synthetic", SampleShape{2, 10}, 0, 1, 7));
  std::vector<float> x(2 * 2);
  std::vector<int64_t> y(2);
  s0->nextBatch(x.data(), y.data(), 2);
  auto n0 =
      std::move(*createDataLoader("synthetic", SampleShape{2, 10}, 0, 2, 7));
  auto n1 =
      std::move(*createDataLoader("synthetic", SampleShape{2, 10}, 1, 2, 7));
  ASSERT_FALSE(llvm::errorToBool(n0->restoreResized({s0->saveState()}, 0)));
  ASSERT_FALSE(llvm::errorToBool(n1->restoreResized({s0->saveState()}, 1)));
  EXPECT_EQ(n0->saveState(), s0->saveState());
  EXPECT_EQ(
      n1->saveState(),
      std::move(*createDataLoader("synthetic", SampleShape{2, 10}, 1, 2, 7))
          ->saveState());
}

TEST(AtomicFile, ReplacesTheTargetOrLeavesIt) {
  TempDir d;
  std::string target = d.file("model.bin");
  auto contents = [&] {
    std::ifstream in(target, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  auto write = [&](const std::string &text) {
    return writeFileAtomically(target, [&](llvm::StringRef tmp) {
      EXPECT_NE(tmp, target);
      EXPECT_EQ(llvm::sys::path::parent_path(tmp),
                llvm::sys::path::parent_path(target));
      std::ofstream(tmp.str(), std::ios::binary) << text;
      return llvm::Error::success();
    });
  };
  ASSERT_FALSE(llvm::errorToBool(write("old")));
  EXPECT_EQ(contents(), "old");
  // A writer that fails leaves the old file and no temporary.
  llvm::Error failed = writeFileAtomically(target, [&](llvm::StringRef tmp) {
    std::ofstream(tmp.str(), std::ios::binary) << "half";
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "disk full");
  });
  ASSERT_TRUE(bool(failed));
  EXPECT_EQ(llvm::toString(std::move(failed)), "disk full");
  EXPECT_EQ(contents(), "old");
  ASSERT_FALSE(llvm::errorToBool(write("new")));
  EXPECT_EQ(contents(), "new");
  std::error_code ec;
  int entries = 0;
  for (llvm::sys::fs::directory_iterator it(d.path, ec), end; !ec && it != end;
       it.increment(ec))
    ++entries;
  EXPECT_EQ(entries, 1);
}

//===----------------------------------------------------------------------===//
// Communication engine
//===----------------------------------------------------------------------===//

TEST(CommEngine, CalibrationChoosesThePriorityThatKeepsMoreWorkGoing) {
  using P = CommEngine::Priority;
  // What the calibration measures: the given one, else idle (if it can be
  // raised), sleep, normal, realtime (if permitted).
  EXPECT_EQ(calibrationCandidates(P::Normal, true, true),
            std::vector<P>{P::Normal});
  EXPECT_EQ(calibrationCandidates(std::nullopt, true, true),
            (std::vector<P>{P::Idle, P::Sleep, P::Normal, P::Realtime}));
  EXPECT_EQ(calibrationCandidates(std::nullopt, false, false),
            (std::vector<P>{P::Sleep, P::Normal}));
  std::vector<P> all = {P::Idle, P::Sleep, P::Normal, P::Realtime};
  // A later candidate must beat the best before it by more than 0.05.
  EXPECT_EQ(chooseCalibratedPriority(all, {1.0, 1.5, 1.54, 1.549},
                                     {0.01, 0.01, 0.01, 0.01}),
            1u);
  EXPECT_EQ(chooseCalibratedPriority(all, {1.0, 1.5, 1.54, 1.56 + 0.05},
                                     {0.01, 0.01, 0.01, 0.01}),
            3u);
  // Under 1 ms alone, or nothing measured: oasr-run's default, idle where
  // it is a candidate, else normal.
  EXPECT_EQ(chooseCalibratedPriority(all, {1.0, 1.9, 1.9, 1.9},
                                     {0.01, 0.0005, 0.01, 0.01}),
            0u);
  std::vector<P> noIdle = {P::Sleep, P::Normal, P::Realtime};
  EXPECT_EQ(chooseCalibratedPriority(noIdle, {}, {}), 1u);
  EXPECT_EQ(chooseCalibratedPriority({P::Sleep}, {}, {}), 0u);
}

TEST(CommEngine, RunsJobsInOrderOnItsThreadAndWaitBlocksUntilDone) {
  auto comm = createSelfCommunicator();
  CommEngine engine(*comm);
  std::vector<int> order;
  std::atomic<bool> offMain{true};
  std::thread::id mainId = std::this_thread::get_id();
  std::atomic<int> done{0};
  std::vector<CommEngine::JobId> ids;
  for (int i = 0; i < 50; ++i)
    ids.push_back(engine.enqueue(
        [&, i](Communicator &) {
          if (std::this_thread::get_id() == mainId)
            offMain = false;
          order.push_back(i);
          ++done;
        },
        uint32_t(i), /*record=*/i % 2 == 0));
  engine.wait(ids[10]);
  EXPECT_GE(done.load(), 11);
  engine.drain();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(order[size_t(i)], i);
  EXPECT_TRUE(offMain);
  ASSERT_EQ(engine.events().size(), 25u);
  EXPECT_EQ(engine.events()[3].job, 6u);
  EXPECT_LE(engine.events()[3].startUs, engine.events()[3].endUs);
}

static int schedPolicy() {
  sched_param param{};
  int policy = -1;
  pthread_getschedparam(pthread_self(), &policy, &param);
  return policy;
}

/// The communication thread's policy while the caller does not wait on it:
/// polls a flag instead of calling `wait`.
static int policyUnwaited(CommEngine &engine) {
  std::atomic<int> seen{-1};
  engine.enqueue([&](Communicator &) { seen = schedPolicy(); });
  while (seen.load() < 0) // sleep: an idle thread needs a free CPU
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  return seen;
}

TEST(CommEngine, WatchdogReportsAJobThatDoesNotFinishWhileAThreadWaits) {
  auto comm = createSelfCommunicator();
  CommEngine engine(*comm);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> stalls{0};
  CommEngine::Stall seen;
  engine.setWatchdog(0.2, [&](const CommEngine::Stall &s) {
    seen = s;
    ++stalls;
    std::lock_guard<std::mutex> lock(mu);
    release = true; // what MPI_Abort would end; here the job may finish
    cv.notify_all();
  });
  // Many short jobs, 0.5 s in all: each finished job restarts the clock.
  for (int i = 0; i < 25; ++i)
    engine.wait(engine.enqueue([](Communicator &) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }));
  EXPECT_EQ(stalls.load(), 0);
  // Compute that does not wait is not a stall either.
  auto slow = engine.enqueue(
      [&](Communicator &) {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return release; });
      },
      7);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(stalls.load(), 0);
  // A thread waits on the job that never finishes: reported once.
  engine.wait(slow);
  EXPECT_EQ(stalls.load(), 1);
  EXPECT_EQ(seen.tag, 7u);
  EXPECT_TRUE(seen.running);
  EXPECT_GE(seen.seconds, 0.2);
}

TEST(CommEngine, IdlePriorityMakesTheCommunicationThreadSchedIdle) {
  auto comm = createSelfCommunicator();
  CommEngine normal(*comm, CommEngine::Priority::Normal);
  EXPECT_EQ(policyUnwaited(normal), SCHED_OTHER);
  EXPECT_FALSE(normal.raisesWhileWaited());

  CommEngine idle(*comm, CommEngine::Priority::Idle);
  EXPECT_EQ(policyUnwaited(idle), SCHED_IDLE);
  // The static probe agrees with what the engine found.
  EXPECT_EQ(CommEngine::idleIsRaisable(), idle.raisesWhileWaited());
  // While a thread waits on it, the thread runs at normal priority where the
  // process may leave SCHED_IDLE; afterwards it is idle again.
  int waited = -1;
  idle.run([&](Communicator &) { waited = schedPolicy(); });
  EXPECT_EQ(waited, idle.raisesWhileWaited() ? SCHED_OTHER : SCHED_IDLE);
  EXPECT_EQ(policyUnwaited(idle), SCHED_IDLE);
  // The caller's own thread is left alone.
  EXPECT_EQ(schedPolicy(), SCHED_OTHER);
}

TEST(CommEngine, SeveralWaitersRaiseOnceAndRestoreAfterTheLast) {
  auto comm = createSelfCommunicator();
  CommEngine idle(*comm, CommEngine::Priority::Idle);
  std::atomic<bool> release{false};
  std::atomic<int> during{-1};
  CommEngine::JobId blocker = idle.enqueue([&](Communicator &) {
    while (!release)
      std::this_thread::yield();
    during = schedPolicy();
  });
  std::thread other([&] { idle.wait(blocker); });
  std::thread second([&] { idle.wait(blocker); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  release = true;
  other.join();
  second.join();
  EXPECT_EQ(during.load(), idle.raisesWhileWaited() ? SCHED_OTHER : SCHED_IDLE);
  EXPECT_EQ(policyUnwaited(idle), SCHED_IDLE);
}

TEST(CommEngine, RealtimePriorityIsSchedFifoWherePermitted) {
  auto comm = createSelfCommunicator();
  CommEngine rt(*comm, CommEngine::Priority::Realtime);
  // Refused, the thread stays an ordinary one (Sleep's wait).
  EXPECT_EQ(policyUnwaited(rt),
            CommEngine::realtimeIsPermitted() ? SCHED_FIFO : SCHED_OTHER);
  EXPECT_EQ(schedPolicy(), SCHED_OTHER);
}

TEST(CommEngine, ARealtimeThreadTestsAsRarelyAsTheLinkAllows) {
  using P = CommEngine::Priority;
  // 128 KiB at the link's beta: 1 Gbit/s (7.7 ns/B) is about 1 ms.
  EXPECT_EQ(CommEngine::pollCapUs(P::Realtime, 7.7e-9), 1009);
  // Clamped to [50 us, 5 ms]: shared memory, 10 Mbit/s.
  EXPECT_EQ(CommEngine::pollCapUs(P::Realtime, 1e-10), 50);
  EXPECT_EQ(CommEngine::pollCapUs(P::Realtime, 8e-7), 5000);
  // Unknown link: 1 ms, measured best at 1 Gbit/s.
  EXPECT_EQ(CommEngine::pollCapUs(P::Realtime, 0), 1000);
  EXPECT_EQ(CommEngine::pollCapUs(P::Realtime, std::nan("")), 1000);
  // The other priorities keep the sleeping wait's 50 us.
  EXPECT_EQ(CommEngine::pollCapUs(P::Sleep, 7.7e-9),
            Communicator::kSleepingWaitUs);
  EXPECT_EQ(CommEngine::pollCapUs(P::Normal, 7.7e-9),
            Communicator::kSleepingWaitUs);
}

TEST(CommEngine, ASmallCallTestsInProportionToItsSize) {
  // A 1 ms cap from 1 MiB up; in proportion below, down to 50 us.
  EXPECT_EQ(Communicator::callSleepCapUs(1000, 64 << 20), 1000);
  EXPECT_EQ(Communicator::callSleepCapUs(1000, 1 << 20), 1000);
  EXPECT_EQ(Communicator::callSleepCapUs(1000, 1 << 18), 250);
  EXPECT_EQ(Communicator::callSleepCapUs(1000, 4096), 50);
  EXPECT_EQ(Communicator::callSleepCapUs(1000, 0), 50);
  // The 50 us cap (sleep, or a waiter on a realtime engine) stays.
  EXPECT_EQ(Communicator::callSleepCapUs(50, 64 << 20), 50);
}

/// CPU time of the calling thread (microseconds).
static double threadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) * 1e-3;
}

// A recorded job's time splits into the time the thread ran and the time it
// waited for a CPU: for a job that spins (never blocks) the running part is
// its thread's CPU time, and a thread competing for the same CPU shows up as
// waiting, not running.
TEST(CommEngine, RecordsTheTimeAJobWaitedForACpu) {
  auto comm = createSelfCommunicator();
  CommEngine engine(*comm, CommEngine::Priority::Normal);
  ASSERT_EQ(engine.pinToCpu(0), "");
  std::atomic<bool> stop{false};
  auto spinJob = [](double &cpuUs) {
    return [&cpuUs](Communicator &) {
      double c0 = threadCpuUs();
      auto until =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
      while (std::chrono::steady_clock::now() < until) {
      }
      cpuUs = threadCpuUs() - c0;
    };
  };
  double aloneCpu = 0, sharedCpu = 0;
  engine.wait(engine.enqueue(spinJob(aloneCpu), 1, /*record=*/true));
  // A busy thread on the same CPU takes about half of it.
  std::thread rival([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    while (!stop) {
    }
  });
  engine.wait(engine.enqueue(spinJob(sharedCpu), 2, /*record=*/true));
  stop = true;
  rival.join();
  ASSERT_TRUE(engine.measuresCpuWait());
  ASSERT_EQ(engine.events().size(), 2u);
  for (auto [e, cpu] : {std::pair{engine.events()[0], aloneCpu},
                        std::pair{engine.events()[1], sharedCpu}}) {
    double wall = e.endUs - e.startUs;
    EXPECT_GE(wall, 60000.0);
    EXPECT_LE(e.cpuWaitUs, wall);
    // Running = wall - waiting = the CPU time the job had (2 ms of slack
    // for the reads around the call and the scheduler's accounting).
    EXPECT_NEAR(wall - e.cpuWaitUs, cpu, 2000.0 + 0.05 * wall);
  }
  EXPECT_GE(engine.events()[1].cpuWaitUs, 15000.0);
}

TEST(CommEngine, SelfCommunicatorAveragingIsTheIdentity) {
  auto comm = createSelfCommunicator();
  EXPECT_EQ(comm->size(), 1);
  std::vector<float> v = {1, 2, 3};
  CommEngine engine(*comm);
  engine.run([&](Communicator &c) {
    c.allreduceAverage(v.data(), v.size(), DType::F32);
  });
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
}

} // namespace
