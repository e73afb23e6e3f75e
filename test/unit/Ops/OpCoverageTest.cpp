//===- OpCoverageTest.cpp - Every registered op has its kernels -----------===//
//
// Walks the op registry (lib/Ops) against the kernels the backends register:
//  * every op import can produce or autodiff can emit has a CPU kernel, and a
//    CUDA kernel unless it is on the registry's CPU-only list;
//  * an op marked CPU-only or kernel-less that has gained the kernel fails
//    too, so the visible list never goes stale;
//  * every kernel a backend registers has a registry entry, so no op reaches
//    a backend without its shape, gradient and cost rules.
// Autodiff itself refuses to emit an op that has no entry (GradContext::node).
//
//===----------------------------------------------------------------------===//

#include "oasr/Config.h"
#include "oasr/Ops/OpRegistry.h"
#include "oasr/Runtime/Kernel.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace oasr::ops;

namespace {

std::set<std::string> asSet(const std::vector<std::string> &ops) {
  return {ops.begin(), ops.end()};
}

TEST(OpCoverage, RegistryOpsHaveCpuKernels) {
  std::set<std::string> cpu = asSet(oasr::rt::cpuKernelOps());
  for (const OpDef &d : OpRegistry::get().all()) {
    bool has = cpu.count(d.name) != 0;
    if (d.kernels == Kernels::None)
      EXPECT_FALSE(has) << "'" << d.name << "' is marked as having no kernel ("
                        << d.kernelsWhy
                        << ") but the CPU backend has one: drop the mark";
    else
      EXPECT_TRUE(has) << "'" << d.name << "' (since opset " << d.since
                       << ") has no CPU kernel";
  }
}

#if OASR_ENABLE_CUDA
TEST(OpCoverage, RegistryOpsHaveCudaKernels) {
  std::set<std::string> cuda = asSet(oasr::rt::cudaKernelOps());
  for (const OpDef &d : OpRegistry::get().all()) {
    bool has = cuda.count(d.name) != 0;
    if (d.kernels == Kernels::All)
      EXPECT_TRUE(has) << "'" << d.name
                       << "' has no CUDA kernel and is not on the CPU-only "
                          "list (OpDefBuilder::cpuOnly)";
    else
      EXPECT_FALSE(has) << "'" << d.name << "' is marked '" << d.kernelsWhy
                        << "' but the CUDA backend has it: drop the mark";
  }
}
#endif

TEST(OpCoverage, EveryKernelHasARegistryEntry) {
  std::vector<std::string> ops = oasr::rt::cpuKernelOps();
#if OASR_ENABLE_CUDA
  for (const std::string &op : oasr::rt::cudaKernelOps())
    ops.push_back(op);
#endif
  for (const std::string &op : ops)
    EXPECT_TRUE(OpRegistry::get().lookup("", op) ||
                OpRegistry::get().lookup("com.microsoft", op))
        << "a backend has a kernel for '" << op
        << "', which has no op registry entry";
}

TEST(OpCoverage, LookupHonoursSinceOpset) {
  const OpRegistry &r = OpRegistry::get();
  const OpDef *old = r.lookup("", "Slice", 9);
  const OpDef *fresh = r.lookup("ai.onnx", "Slice", 13);
  ASSERT_TRUE(old && fresh);
  EXPECT_EQ(old->since, 1);
  EXPECT_EQ(fresh->since, 10);
  EXPECT_EQ(r.lookup("", "Slice")->since, 10);
  EXPECT_EQ(r.lookup("", "Trilu", 13), nullptr) << "Trilu exists since 14";
  EXPECT_NE(r.lookup("com.microsoft", "Gelu", 1), nullptr);
  EXPECT_EQ(r.lookup("com.microsoft", "Relu", 1), nullptr);
}

TEST(OpCoverage, TraitsDriveTheExecutor) {
  const OpRegistry &r = OpRegistry::get();
  for (const char *view :
       {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
    EXPECT_TRUE(r.hasTrait(view, View)) << view;
  EXPECT_FALSE(r.hasTrait("Transpose", View));
  EXPECT_TRUE(r.hasTrait("Relu", InPlace));
  EXPECT_FALSE(r.hasTrait("Softmax", InPlace));
}

// The roles the executor and autodiff read: what they would otherwise find
// by the op's name.
TEST(OpCoverage, RolesDriveTheExecutorAndAutodiff) {
  const OpRegistry &r = OpRegistry::get();
  const OpRoles &bn = r.lookup("", "BatchNormalization")->roles;
  EXPECT_EQ(bn.statsOperand, 3); // input_mean, input_var
  EXPECT_EQ(bn.statsResult, 1);  // running_mean, running_var
  EXPECT_EQ(bn.statsCount, 2);
  EXPECT_EQ(bn.onesOperands, (std::vector<unsigned>{1, 4})); // scale, var
  EXPECT_TRUE(r.lookup("", "SoftmaxCrossEntropyLoss")->roles.loss);
  EXPECT_EQ(r.lookup("", "Gather")->roles.lookupIndices, 1);
  EXPECT_TRUE(r.lookup("", "Constant")->roles.constant);
  // Nothing else claims a role it does not have.
  for (const OpDef &d : r.all()) {
    if (d.name != "SoftmaxCrossEntropyLoss")
      EXPECT_FALSE(d.roles.loss) << d.name;
    if (d.name != "BatchNormalization") {
      EXPECT_EQ(d.roles.statsCount, 0) << d.name;
      EXPECT_TRUE(d.roles.onesOperands.empty()) << d.name;
    }
  }
}

TEST(OpCoverage, TableListsEveryEntry) {
  std::string text;
  llvm::raw_string_ostream os(text);
  OpRegistry::get().printMarkdown(os);
  for (const OpDef &d : OpRegistry::get().all()) {
    std::string name = d.domain.empty() ? d.name : d.domain + "::" + d.name;
    EXPECT_NE(text.find("| " + name + " |"), std::string::npos) << name;
  }
}

} // namespace
