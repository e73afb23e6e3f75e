//===- SteadyTest.cpp - The steady-state step model, by hand and at random ===//

#include "TestUtil.h"

#include "oasr/Schedule/Steady.h"

#include "gtest/gtest.h"

using namespace oasr::schedule;
using namespace oasr::schedule::test;

namespace {

/// Three layers, forward 1 each, backward 2 each, 4 bytes each; alpha 1 and
/// beta 1 per byte: every layer's allreduce takes 5.
Profile threeLayers() {
  Profile p = makeProfile({2, 2, 2}, {4, 4, 4}, /*forward=*/3);
  for (Layer &l : p.layers)
    l.forwardUs = 1;
  return p;
}

SteadyPlan perLayer(Priority priority, bool barrier = false) {
  SteadyPlan p;
  p.strategy = "per-layer";
  p.priority = priority;
  p.barrier = barrier;
  for (unsigned l = 0; l < 3; ++l)
    p.groups.push_back({l, l, 1, Collective::AllReduce});
  return p;
}

TEST(Steady, LayerIndexPriorityByHand) {
  // Iteration 0: backward ends layers 2, 1, 0 at 5, 7, 9. Layer 2's
  // allreduce runs [5, 10]; at 10 the channel takes layer 0 (the next
  // forward needs it first) [10, 15], then layer 1 [15, 20]. Iteration 1
  // starts at 15, layer 1's forward waits until 20, layer 2's runs [21,
  // 22]; from then on every iteration takes 19: forward 3 + backward 6 + a
  // wait of 5 for layer 0 + 5 for layer 1, less the 1 of layer 0's forward.
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  SteadyTimeline t =
      simulateSteady(threeLayers(), comm, perLayer(Priority::LayerIndex));
  ASSERT_GE(t.iterationStartUs.size(), 4u);
  EXPECT_NEAR(t.iterationStartUs[0], 0, 1e-9);
  EXPECT_NEAR(t.iterationStartUs[1], 15, 1e-9);
  EXPECT_NEAR(t.iterationStartUs[2], 34, 1e-9);
  EXPECT_NEAR(t.iterationStartUs[3], 53, 1e-9);
  EXPECT_NEAR(t.periodUs, 19, 1e-9);
  EXPECT_NEAR(t.computeUs, 9, 1e-9);
  EXPECT_NEAR(t.waitUs, 10, 1e-9);
  EXPECT_NEAR(t.commBusyUs, 15, 1e-9);
  // The steady iteration's units, relative to its start: layer 2 ready at
  // 9 (forward 0..7 with the wait, backward of layer 2 to 9).
  ASSERT_EQ(t.units.size(), 3u);
  EXPECT_EQ(t.units[0].group, 2u);
  EXPECT_NEAR(t.units[0].startUs, 9, 1e-9);
  EXPECT_NEAR(t.units[0].endUs, 14, 1e-9);
}

TEST(Steady, ReadyOrderAndBarrierByHand) {
  // FIFO serves layer 0 last: each iteration waits for all three
  // allreduces after backward: 20. The barrier plan (today's runtime) is
  // the same here, and equals the backward-only simulator's iteration.
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  Profile p = threeLayers();
  EXPECT_NEAR(simulateSteady(p, comm, perLayer(Priority::ReadyOrder)).periodUs,
              20, 1e-9);
  SteadyTimeline b =
      simulateSteady(p, comm, perLayer(Priority::ReadyOrder, true));
  EXPECT_NEAR(b.periodUs, 20, 1e-9);
  EXPECT_NEAR(
      b.periodUs,
      simulate(p, comm.allreduce, planFromSizes("wfbp", {1, 1, 1})).iterationUs,
      1e-9);
}

TEST(Steady, LowerBoundByHand) {
  // Compute 9; the channel's 13 per iteration; layer 0's allreduce (5)
  // after the last backward with nothing left to overlap: 9 + 5 = 14.
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  EXPECT_NEAR(steadyLowerBoundUs(threeLayers(), comm), 14, 1e-9);
  // With overlap rate 0 the channel's work cannot hide at all: 9 + 13.
  comm.allreduce.overlapRate = 0;
  EXPECT_NEAR(steadyLowerBoundUs(threeLayers(), comm, false), 22, 1e-9);
}

TEST(Steady, ReduceScatterAllGatherByHand) {
  // One RS/AG group of layer 0 only needs 2.5 + 2.5 after its backward;
  // layers 1 and 2 allreduce. The gather is a unit of its own.
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  SteadyPlan p = perLayer(Priority::LayerIndex);
  p.groups[0].form = Collective::ReduceScatterAllGather;
  SteadyTimeline t = simulateSteady(threeLayers(), comm, p);
  unsigned gathers = 0;
  for (const UnitTiming &u : t.units)
    gathers += u.gather;
  EXPECT_EQ(gathers, 1u);
  EXPECT_EQ(t.units.size(), 4u);
  EXPECT_GE(t.periodUs, steadyLowerBoundUs(threeLayers(), comm) - 1e-9);
}

TEST(Steady, WhereTheReduceScatterGroupUpdates) {
  // Updates of 1 per layer (3 in all). With the shard update the channel
  // updates layer 0's half shard (0.5 on P = 2 ranks) before its
  // all-gather and the compute lane runs the other layers' updates: 2 a
  // step. DeAR's form (the runtime's) all-gathers the gradients and the
  // lane runs all three.
  Profile p = threeLayers();
  p.updateUs = 3;
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  SteadyPlan plan = perLayer(Priority::LayerIndex);
  plan.groups[0].form = Collective::ReduceScatterAllGather;
  SteadyTimeline shard = simulateSteady(p, comm, plan);
  EXPECT_NEAR(shard.computeUs, 9 + 2, 1e-9);
  EXPECT_NEAR(shard.commBusyUs, 5 + 5 + 2.5 + 2.5 + 0.5, 1e-9);
  comm.shardUpdate = false;
  SteadyTimeline lane = simulateSteady(p, comm, plan);
  EXPECT_NEAR(lane.computeUs, 9 + 3, 1e-9);
  EXPECT_NEAR(lane.commBusyUs, 5 + 5 + 2.5 + 2.5, 1e-9);
  EXPECT_GE(lane.periodUs, steadyLowerBoundUs(p, comm) - 1e-9);
}

TEST(Steady, PartitionsPayTheirStartUp) {
  // Two pieces of layer 0 cost 2 x (1 + 2) = 6 instead of 5.
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  SteadyPlan p = perLayer(Priority::LayerIndex);
  p.groups[0].pieces = 2;
  SteadyTimeline t = simulateSteady(threeLayers(), comm, p);
  EXPECT_NEAR(t.commBusyUs, 16, 1e-9);
}

TEST(Steady, VerifyNamesTheGroup) {
  Profile p = threeLayers();
  SteadyPlan bad = perLayer(Priority::LayerIndex);
  bad.groups[1].lastLayer = 2;
  EXPECT_EQ(llvm::toString(verifySteadyPlan(bad, p)),
            "plan 'per-layer': layer 'l2' is in groups 1 and 2");
  bad = perLayer(Priority::LayerIndex);
  bad.groups.pop_back();
  EXPECT_EQ(llvm::toString(verifySteadyPlan(bad, p)),
            "plan 'per-layer': layer 'l2' has gradients but no group");
  bad = perLayer(Priority::LayerIndex, true);
  bad.groups[0].form = Collective::ReduceScatterAllGather;
  EXPECT_EQ(llvm::toString(verifySteadyPlan(bad, p)),
            "plan 'per-layer': group 0 is a reduce-scatter in a barrier plan");
}

TEST(Steady, StrategyErrorsNameTheString) {
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  auto bad = makeSteadyPlan("dear:0", threeLayers(), comm);
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "strategy 'dear:0': expected dear or dear:<bytes> with bytes > 0, "
            "optionally with a "
            "KB/MB/GB or KiB/MiB/GiB suffix");
  auto unknown = makeSteadyPlan("fastest", threeLayers(), comm);
  ASSERT_FALSE(bool(unknown));
  EXPECT_NE(llvm::toString(unknown.takeError()).find("'fastest'"),
            std::string::npos);
}

TEST(Steady, ByteSchedulerCutsLayersIntoPartitions) {
  Profile p = makeProfile({1, 1}, {10, 3});
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  auto plan = makeSteadyPlan("bytescheduler:4", p, comm);
  ASSERT_TRUE(bool(plan));
  ASSERT_EQ(plan->groups.size(), 2u);
  EXPECT_EQ(plan->groups[0].pieces, 3u);
  EXPECT_EQ(plan->groups[1].pieces, 1u);
  EXPECT_EQ(plan->priority, Priority::LayerIndex);
}

TEST(Steady, DearBucketsInReadyOrder) {
  // Ready order l3, l2, l1, l0 with 5, 5, 5, 5 bytes; buckets close at 10.
  Profile p = makeProfile({1, 1, 1, 1}, {5, 5, 5, 5});
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  auto plan = makeSteadyPlan("dear:10", p, comm);
  ASSERT_TRUE(bool(plan));
  ASSERT_EQ(plan->groups.size(), 2u);
  EXPECT_EQ(plan->groups[0].firstLayer, 0u);
  EXPECT_EQ(plan->groups[0].lastLayer, 1u);
  EXPECT_EQ(plan->groups[1].firstLayer, 2u);
  EXPECT_EQ(plan->groups[1].form, Collective::ReduceScatterAllGather);
}

/// Random instances: the barrier plan equals the backward-only simulator
/// (with every extra cost and overlap rate), every strategy respects the
/// lower bound, and oasr-step is never worse than today's oasr.
TEST(Steady, LoweredForTheRuntime) {
  // LayerIndexPriorityByHand's plan, layer 2 cut in 2 pieces of 2 bytes
  // (3 each): the runtime's groups run in ready order (layer 2, 1, 0), and
  // the channel's order is the simulated start order. Layer 2's first
  // piece runs [5, 8]; then layer 1 (ready at 7, a lower layer than layer
  // 2's second piece) [8, 13]; then layer 0 (ready at 9) before that piece.
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  SteadyPlan plan = perLayer(Priority::LayerIndex);
  plan.groups[2].pieces = 2;
  auto low = lowerSteadyPlan(plan, threeLayers(), comm);
  ASSERT_TRUE(bool(low)) << llvm::toString(low.takeError());
  EXPECT_TRUE(low->forwardWaits);
  EXPECT_EQ(low->plan.groupEnds, (std::vector<unsigned>{1, 2, 3}));
  EXPECT_EQ(low->pieces, (std::vector<unsigned>{2, 1, 1}));
  using U = LoweredUnit;
  EXPECT_EQ(low->order, (std::vector<U>{{0, 0}, {1, 0}, {2, 0}, {0, 1}}));
  EXPECT_EQ(low->scatter, (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_NEAR(low->periodUs, simulateSteady(threeLayers(), comm, plan).periodUs,
              1e-9);
  // Ready order keeps the groups' order; a barrier plan waits for all.
  auto fifo = lowerSteadyPlan(perLayer(Priority::ReadyOrder, true),
                              threeLayers(), comm);
  ASSERT_TRUE(bool(fifo));
  EXPECT_FALSE(fifo->forwardWaits);
  EXPECT_EQ(fifo->order, (std::vector<U>{{0, 0}, {1, 0}, {2, 0}}));
  // A reduce-scatter group whose shard the channel would update is
  // refused, naming the group: the runtime all-gathers gradients.
  plan.groups[2].pieces = 1;
  plan.groups[1].form = Collective::ReduceScatterAllGather;
  plan.strategy = "mixed";
  auto rs = lowerSteadyPlan(plan, threeLayers(), comm);
  ASSERT_FALSE(bool(rs));
  EXPECT_EQ(llvm::toString(rs.takeError()),
            "mixed: group 1 (layers 1-1) updates its shard between the "
            "reduce-scatter and the all-gather; the runtime all-gathers "
            "gradients and updates on the compute lane (plan with "
            "SteadyComm::shardUpdate off)");
  // DeAR's form lowers. In the steady iteration layer 2's allreduce runs
  // first (ready first, 5); when it ends, layer 0's allreduce (the lower
  // layer) goes before layer 1's reduce-scatter (ready earlier), then that
  // reduce-scatter (2.5) and its all-gather (2.5). Runtime groups are in
  // ready order: layer 2, 1, 0.
  comm.shardUpdate = false;
  auto dear = lowerSteadyPlan(plan, threeLayers(), comm);
  ASSERT_TRUE(bool(dear)) << llvm::toString(dear.takeError());
  EXPECT_EQ(dear->scatter, (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(dear->order,
            (std::vector<U>{{0, 0}, {2, 0}, {1, 0}, {1, 0, true}}));
  EXPECT_NEAR(dear->periodUs,
              simulateSteady(threeLayers(), comm, plan).periodUs, 1e-9);
  // Planning bf16/f16 gradients keeps to allreduces.
  comm.allowReduceScatter = false;
  for (const char *s : {"oasr-step", "bytescheduler:2", "oasr-barrier"}) {
    auto p = makeSteadyPlan(s, threeLayers(), comm);
    ASSERT_TRUE(bool(p)) << s;
    for (const SteadyGroup &g : p->groups)
      EXPECT_EQ(g.form, Collective::AllReduce) << s;
    EXPECT_TRUE(bool(lowerSteadyPlan(*p, threeLayers(), comm))) << s;
  }
  EXPECT_FALSE(bool(makeSteadyPlan("dear", threeLayers(), comm)));
  EXPECT_TRUE(isSteadyStrategy("bytescheduler:4MiB"));
  EXPECT_TRUE(isSteadyStrategy("oasr-step"));
  EXPECT_FALSE(isSteadyStrategy("oasr-step:4"));
  EXPECT_FALSE(isSteadyStrategy("oasr"));
}

TEST(Steady, ComputeRateSlowsForwardBesideCommunication) {
  // LayerIndexPriorityByHand at compute rate 0.5: in the steady state the
  // next forward runs beside the previous iteration's allreduces, so the
  // period grows; one group per layer, barrier or not, never beats the
  // same plan at full speed.
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  double fast =
      simulateSteady(threeLayers(), comm, perLayer(Priority::LayerIndex))
          .periodUs;
  comm.allreduce.computeRate = 0.5;
  double slow =
      simulateSteady(threeLayers(), comm, perLayer(Priority::LayerIndex))
          .periodUs;
  EXPECT_NEAR(fast, 19, 1e-9);
  EXPECT_GT(slow, fast + 0.5);
  // Not charged on layer times measured beside communication.
  Profile beside = threeLayers();
  beside.computeBesideComm = true;
  EXPECT_NEAR(
      simulateSteady(beside, comm, perLayer(Priority::LayerIndex)).periodUs,
      fast, 1e-9);
}

TEST(Steady, RandomInstancesAgreeAndRespectTheBound) {
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int trial = 0; trial < 150; ++trial) {
    RandomInstance ri = randomInstance(rng, 12);
    if (!ri.profile.numGrads())
      continue;
    if (trial % 3 == 1)
      ri.comm.overlapRate = unit(rng);
    if (trial % 3 == 2) {
      ri.comm.groupOverheadUs = 2 * unit(rng);
      ri.comm.packUsPerByte = 1e-3 * unit(rng);
    }
    // Compute slowed beside communication, in both simulators alike.
    if (trial % 4 == 3)
      ri.comm.computeRate = 0.2 + 0.8 * unit(rng);
    // A call's start on compute, where the channel runs at full speed (the
    // coupled simulator runs a group at 1 while its start holds compute;
    // the steady one at the overlap rate beside the lane).
    if (trial % 3 == 0 && trial % 2 == 0)
      ri.comm.callComputeUs = 3 * unit(rng);
    SteadyComm comm = SteadyComm::fromAllreduce(ri.comm);
    // Half the trials in DeAR's form (the runtime's): updates on the lane.
    comm.shardUpdate = trial % 2 == 0;
    // One group per layer with gradients, as a plan of both models.
    SteadyPlan steady;
    steady.strategy = "wfbp";
    steady.barrier = true;
    std::vector<unsigned> sizes;
    for (unsigned l = ri.profile.layers.size(); l-- > 0;)
      if (!ri.profile.layers[l].grads.empty()) {
        steady.groups.insert(steady.groups.begin(),
                             {l, l, 1, Collective::AllReduce});
        sizes.push_back(ri.profile.layers[l].grads.size());
      }
    double old =
        simulate(ri.profile, ri.comm, planFromSizes("wfbp", sizes)).iterationUs;
    EXPECT_TRUE(close(simulateSteady(ri.profile, comm, steady).periodUs, old))
        << "trial " << trial;

    double lb = steadyLowerBoundUs(ri.profile, comm);
    double barrier = 0, step = 0;
    for (const std::string &name : steadyStrategyNames()) {
      auto plan = makeSteadyPlan(name, ri.profile, comm);
      ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
      ASSERT_FALSE(bool(verifySteadyPlan(*plan, ri.profile)));
      double us = simulateSteady(ri.profile, comm, *plan).periodUs;
      EXPECT_GE(us, lb * (1 - 1e-9)) << name << " trial " << trial;
      if (name == "oasr-barrier")
        barrier = us;
      if (name == "oasr-step")
        step = us;
    }
    EXPECT_LE(step, barrier * (1 + 1e-9)) << "trial " << trial;
  }
}

TEST(Strategies, EveryNameTheHelpListsPlans) {
  // strategyHelp() is oasr-run's --help and the unknown-strategy error:
  // each entry plans (with a size where it takes one), and nothing else is
  // listed.
  std::vector<std::string> entries;
  llvm::SmallVector<llvm::StringRef> parts;
  std::string help = strategyHelp();
  llvm::StringRef(help).split(parts, ", ");
  SteadyComm comm = SteadyComm::fromAllreduce(unitModel(1, 1));
  for (llvm::StringRef part : parts) {
    std::vector<std::string> names;
    if (part.consume_back("[:<bytes>]"))
      names = {part.str(), part.str() + ":1MB"};
    else if (part.consume_back(":<bytes>"))
      names = {part.str() + ":1MB"};
    else
      names = {part.str()};
    for (const std::string &name : names) {
      bool plans;
      if (isSteadyStrategy(name)) {
        auto plan = makeSteadyPlan(name, threeLayers(), comm);
        plans = bool(plan);
        if (!plan)
          llvm::consumeError(plan.takeError());
      } else {
        llvm::Error err = checkStrategy(name);
        plans = !err;
        llvm::consumeError(std::move(err));
      }
      EXPECT_TRUE(plans) << name;
    }
  }
  EXPECT_EQ(parts.size(),
            strategyNames().size() + 1 + steadyStrategyNames().size());
  EXPECT_FALSE(isSteadyStrategy("nope"));
  llvm::Error err = checkStrategy("nope");
  EXPECT_EQ(llvm::toString(std::move(err)),
            "unknown strategy 'nope' (expected one of " + help + ")");
}

} // namespace

namespace {
/// Three layers of 64 x 64 matrices (16 KiB each), forward 1, backward 2;
/// alpha 10, beta 1 per byte: plain, a layer's allreduce takes 16394, its
/// rank-4 factors (two collectives of 1 KiB) 2 * (10 + 1024) and the
/// compute below.
Profile threeMatrices() {
  Profile p = makeProfile({2, 2, 2}, {16384, 16384, 16384}, /*forward=*/3);
  for (Layer &l : p.layers) {
    l.forwardUs = 1;
    l.grads[0].rows = 64;
  }
  return p;
}
CommModel matrixModel() {
  CommModel m = unitModel(10, 1);
  m.compressUsPerMac = 1e-3;
  m.compressUsPerElement = 1e-3;
  return m;
}
} // namespace

TEST(SteadyCompression, AGroupsFactorsAreOneUnitOfItsFormCost) {
  // Per-layer groups, all compressed at rank 4, layer-index priority: each
  // unit's work is formCost's channel time, its bytes the factors'.
  Profile p = threeMatrices();
  SteadyComm comm = SteadyComm::fromAllreduce(matrixModel());
  SteadyPlan plan = perLayer(Priority::LayerIndex);
  for (SteadyGroup &g : plan.groups)
    g.send = GroupForm::powerSGD(4);
  ASSERT_FALSE(bool(verifySteadyPlan(plan, p)));
  FormCost c =
      formCost(comm.allreduce, readyOrder(p).front(), GroupForm::powerSGD(4));
  // 3 * 64 * 64 * 4 + 64 * 16 multiply-adds, 4096 elements, at 1e-3 us.
  EXPECT_NEAR(c.computeUs, 1e-3 * (3 * 64 * 64 * 4 + 64 * 16 + 4096), 1e-9);
  EXPECT_NEAR(c.channelUs, 2 * (10 + 1024) + c.computeUs, 1e-9);
  SteadyTimeline t = simulateSteady(p, comm, plan);
  ASSERT_EQ(t.units.size(), 3u);
  for (const UnitTiming &u : t.units) {
    EXPECT_EQ(u.bytes, 2048u);
    EXPECT_NEAR(u.endUs - u.startUs, c.channelUs, 1e-6);
  }
  EXPECT_NEAR(t.commBusyUs, 3 * c.channelUs, 1e-6);
  // Plain, the same plan's period is bound by 3 allreduces of 16394.
  SteadyPlan plain = perLayer(Priority::LayerIndex);
  EXPECT_GT(simulateSteady(p, comm, plain).periodUs, 3 * 16394 - 1e-6);
  EXPECT_LT(t.periodUs, 3 * c.channelUs + 9 + 1e-6);
}

TEST(SteadyCompression, FactorsTravelAsOneAllreducePiece) {
  Profile p = threeMatrices();
  SteadyPlan plan = perLayer(Priority::LayerIndex);
  plan.groups[1].send = GroupForm::powerSGD(4);
  plan.groups[1].pieces = 2;
  llvm::Error err = verifySteadyPlan(plan, p);
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "plan 'per-layer': group 1 is sent as powersgd:4 and is not one "
            "allreduce piece (PowerSGD sends a whole group)");
  plan.groups[1].pieces = 1;
  plan.groups[1].form = Collective::ReduceScatterAllGather;
  EXPECT_TRUE(bool(verifySteadyPlan(plan, p)));
  llvm::consumeError(verifySteadyPlan(plan, p));
}

TEST(SteadyCompression, StrategiesUnderAPolicy) {
  Profile p = threeMatrices();
  SteadyComm comm = SteadyComm::fromAllreduce(matrixModel());
  comm.shardUpdate = false;
  // powersgd:R: every group holds a matrix, so every group is compressed,
  // and the lowered plan carries the forms.
  CompressPolicy forced{CompressPolicy::Mode::PowerSGD, 4, 4};
  for (const char *name : {"oasr-step", "oasr-barrier"}) {
    auto plan = makeSteadyPlan(name, p, comm, forced);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    ASSERT_FALSE(bool(verifySteadyPlan(*plan, p)));
    for (const SteadyGroup &g : plan->groups)
      EXPECT_EQ(g.send, GroupForm::powerSGD(4)) << name;
    auto low = lowerSteadyPlan(*plan, p, comm);
    ASSERT_TRUE(bool(low));
    ASSERT_EQ(low->plan.forms.size(), low->plan.numGroups());
    EXPECT_TRUE(low->plan.form(0).compressed());
  }
  // Partitioning and reduce-scattering strategies are refused.
  for (const char *name : {"dear", "bytescheduler:1MB"}) {
    auto plan = makeSteadyPlan(name, p, comm, forced);
    ASSERT_FALSE(bool(plan));
    EXPECT_NE(llvm::toString(plan.takeError())
                  .find("PowerSGD (compress=powersgd:4) sends a group whole"),
              std::string::npos)
        << name;
  }
  // auto on a link where bytes cost nothing: nothing compressed.
  SteadyComm fast = SteadyComm::fromAllreduce(unitModel(10, 1e-6));
  fast.allreduce.compressUsPerMac = 1e-3;
  fast.allreduce.compressUsPerElement = 1e-3;
  auto none = makeSteadyPlan("oasr-step", p, fast,
                             {CompressPolicy::Mode::Auto, 4, 1024});
  ASSERT_TRUE(bool(none));
  for (const SteadyGroup &g : none->groups)
    EXPECT_FALSE(g.send.compressed());
}

TEST(SteadyCompression, StepNeverLaterThanTheCompressedBarrierAtRandom) {
  // Random profiles of matrices and vectors: under auto, oasr-step's period
  // is never above oasr-barrier's (today's runtime running the compressed
  // backward-only plan), and every plan verifies.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> time(0, 50), beta(0.001, 0.2);
  std::uniform_int_distribution<uint64_t> rows(1, 64), cols(1, 64);
  int compressing = 0, faster = 0;
  for (int trial = 0; trial < 40; ++trial) {
    Profile p;
    p.model = "random";
    p.forwardUs = 0;
    unsigned layers = 1 + trial % 6;
    for (unsigned l = 0; l < layers; ++l) {
      Layer layer;
      layer.name = "l" + std::to_string(l);
      layer.backwardUs = time(rng);
      layer.forwardUs = time(rng) / 2;
      p.forwardUs += layer.forwardUs;
      uint64_t r = rows(rng), c = cols(rng);
      layer.grads.push_back({layer.name + ".w", r * c * 4, trial % 3 ? r : 0});
      if (trial % 2)
        layer.grads.push_back({layer.name + ".b", r * 4, 0});
      p.layers.push_back(layer);
    }
    CommModel m = unitModel(time(rng), beta(rng));
    m.compressUsPerMac = 1e-4;
    m.compressUsPerElement = 1e-3;
    SteadyComm comm = SteadyComm::fromAllreduce(m);
    comm.shardUpdate = false;
    CompressPolicy policy{CompressPolicy::Mode::Auto, 2, trial % 2 ? 2u : 64u};
    auto step = makeSteadyPlan("oasr-step", p, comm, policy);
    auto barrier = makeSteadyPlan("oasr-barrier", p, comm, policy);
    ASSERT_TRUE(step && barrier);
    ASSERT_FALSE(bool(verifySteadyPlan(*step, p)));
    ASSERT_FALSE(bool(verifySteadyPlan(*barrier, p)));
    double stepUs = simulateSteady(p, comm, *step).periodUs,
           barrierUs = simulateSteady(p, comm, *barrier).periodUs;
    EXPECT_LE(stepUs, barrierUs * (1 + 1e-9)) << "trial " << trial;
    faster += stepUs < barrierUs * (1 - 1e-6);
    bool any = false;
    for (const SteadyGroup &g : step->groups)
      if (g.send.compressed()) {
        any = true;
        EXPECT_TRUE(g.pieces == 1 && g.form == Collective::AllReduce);
      }
    compressing += any;
  }
  // The trials exercise both: compressed groups, and periods shortened.
  EXPECT_GE(compressing, 10);
  EXPECT_GE(faster, 5);
}
