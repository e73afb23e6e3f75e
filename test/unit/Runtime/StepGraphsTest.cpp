//===- StepGraphsTest.cpp - --cuda-graph's runs, captures and replays -----===//
//
// StepGraphs against a backend that records what it is asked: which
// instructions form runs, that the first step runs everything itself, that
// the second captures and replays, that later steps only replay, and that
// a run the backend cannot capture runs instruction by instruction with
// its reason kept.
//
//===----------------------------------------------------------------------===//

#include "StepGraphs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

using namespace oasr::rt;

namespace {

/// Captures succeed unless the run's first instruction is in `refuse`.
class RecordingBackend : public KernelBackend {
public:
  const char *name() const override { return "recording"; }
  std::unique_ptr<Kernel> create(const OpSpec &, std::string &) override {
    return nullptr;
  }
  void *allocate(size_t bytes) override { return std::malloc(bytes); }
  void deallocate(void *p) override { std::free(p); }
  void copyToDevice(void *, const void *, size_t) override {}
  void copyToHost(void *, const void *, size_t) override {}
  bool beginCapture(std::string &) override {
    capturing = true;
    return true;
  }
  int endCapture(std::string &why) override {
    capturing = false;
    if (refuse.count(firstRecorded)) {
      why = "instruction " + std::to_string(firstRecorded) + " refused";
      return -1;
    }
    return nextId++;
  }
  void replay(int id) override { replayed.push_back(id); }

  bool capturing = false;
  int nextId = 0;
  size_t firstRecorded = 0;
  std::set<size_t> refuse;
  std::vector<int> replayed;
};

/// One step: every instruction through `g`; returns those run directly
/// (not recorded, not replayed).
std::vector<size_t> step(StepGraphs &g, RecordingBackend &be, size_t n,
                         std::vector<size_t> *recorded = nullptr) {
  g.beginStep();
  std::vector<size_t> direct;
  bool first = true;
  auto runOne = [&](size_t j) {
    if (first)
      be.firstRecorded = j;
    first = false;
    if (recorded)
      recorded->push_back(j);
  };
  for (size_t k = 0; k < n; ++k) {
    first = true;
    size_t end = g.run(k, be, runOne);
    if (end != k) {
      k = end - 1;
      continue;
    }
    direct.push_back(k);
  }
  return direct;
}

} // namespace

TEST(StepGraphs, RunsSplitAtHostWorkAndNeedTwoInstructions) {
  // 0 1 2 | 3 host | 4 | 5 host | 6 7, with a cut before 7.
  std::vector<char> replayable = {1, 1, 1, 0, 1, 0, 1, 1};
  std::vector<char> cut = {0, 0, 0, 0, 0, 0, 0, 1};
  StepGraphs g(replayable, cut);
  EXPECT_EQ(g.stats().runs, 1u); // [0, 3); 4, 6 and 7 stand alone
  RecordingBackend be;
  EXPECT_EQ(step(g, be, 8).size(), 8u) << "the first step runs everything";
  std::vector<size_t> recorded;
  std::vector<size_t> direct = step(g, be, 8, &recorded);
  EXPECT_EQ(recorded, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(direct, (std::vector<size_t>{3, 4, 5, 6, 7}));
  EXPECT_EQ(be.replayed, (std::vector<int>{0}));
  recorded.clear();
  step(g, be, 8, &recorded);
  EXPECT_TRUE(recorded.empty()) << "captured once";
  EXPECT_EQ(be.replayed, (std::vector<int>{0, 0}));
  EXPECT_EQ(g.stats().graphs, 1u);
  EXPECT_EQ(g.stats().graphInstrs, 3u);
}

TEST(StepGraphs, AnUncapturableRunRunsInstructionByInstruction) {
  std::vector<char> replayable = {1, 1, 0, 1, 1, 1};
  StepGraphs g(replayable, std::vector<char>(6, 0));
  EXPECT_EQ(g.stats().runs, 2u);
  RecordingBackend be;
  be.refuse = {3};
  step(g, be, 6);
  std::vector<size_t> direct = step(g, be, 6);
  // The refused run's capture ran nothing: its instructions run directly.
  EXPECT_EQ(direct, (std::vector<size_t>{2, 3, 4, 5}));
  EXPECT_EQ(be.replayed, (std::vector<int>{0}));
  std::vector<size_t> recorded;
  direct = step(g, be, 6, &recorded);
  EXPECT_TRUE(recorded.empty()) << "not tried again";
  EXPECT_EQ(direct, (std::vector<size_t>{2, 3, 4, 5}));
  ASSERT_EQ(g.stats().failures.size(), 1u);
  EXPECT_EQ(g.stats().failures[0], "instruction 3 refused");
  EXPECT_EQ(g.stats().graphs, 1u);
}

TEST(StepGraphs, ABackendWithoutCaptureSaysWhy) {
  class Plain : public RecordingBackend {
    bool beginCapture(std::string &why) override {
      return KernelBackend::beginCapture(why);
    }
  } be;
  StepGraphs g({1, 1}, {0, 0});
  step(g, be, 2);
  EXPECT_EQ(step(g, be, 2).size(), 2u);
  ASSERT_EQ(g.stats().failures.size(), 1u);
  EXPECT_NE(g.stats().failures[0].find("the recording backend runs each "
                                       "kernel as it is called"),
            std::string::npos)
      << g.stats().failures[0];
}
