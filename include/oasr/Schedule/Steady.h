//===- Steady.h - Planning the steady-state step (no MLIR) ------*- C++ -*-===//
//
// The backward-only model of Schedule.h ends an iteration when backward's
// last allreduce ends: the next forward waits for every gradient. This file
// widens it to the steady state of a training run, where the next
// iteration's forward of layer l waits only for layer l's parameters:
//
//  - Compute lane, per iteration: forward of layers 1..L, then backward of
//    layers L..1. Before the forward of layer l the lane waits until the
//    communication holding layer l's gradient (of the previous iteration)
//    has ended, then applies layer l's update (`Profile::updateUs` split by
//    bytes) and runs the forward.
//  - Communication channel: one unit at a time, not preempted. It serves the
//    queued units by priority -- the order gradients became ready (FIFO, as
//    today's runtime) or the layer index (ByteScheduler: the unit the next
//    forward needs first goes first), earlier iterations first.
//  - Units: a group of consecutive layers, optionally cut into `pieces`
//    partitions of equal bytes, each paying the start-up cost.
//  - Collective form: an allreduce per unit, or a reduce-scatter as soon as
//    the unit is ready and an all-gather after it (DeAR); between them the
//    channel's thread updates its 1/P shard of the parameters, so the
//    compute lane applies no update for such a group.
//  - What a group sends (Compression.h): plain, or PowerSGD factors, one
//    unit whose work is formCost's channel time (two collectives and the
//    compression's compute); such a group is one allreduce piece.
//  - The channel progresses at `CommModel::overlapRate` while the compute
//    lane runs a task and at full rate while the lane waits; the lane runs
//    at `CommModel::computeRate` while the channel is busy (unless the
//    profile's times were measured beside communication), as Schedule.h's
//    simulator does for backward.
//
// The figure minimised is the period: the time between consecutive
// iteration starts once the schedule repeats. A `barrier` plan is today's
// runtime (the next forward waits for every unit, then the whole update
// runs); its period equals `simulate(...).iterationUs` of Schedule.h.
// docs/planner.md, "The steady-state step", has worked examples.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_SCHEDULE_STEADY_H
#define OASR_SCHEDULE_STEADY_H

#include "oasr/Schedule/Schedule.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace oasr {
namespace schedule {

/// How a group's gradients are reduced.
enum class Collective {
  AllReduce,              ///< one allreduce per piece
  ReduceScatterAllGather, ///< reduce-scatter, shard update, all-gather
};

/// Which queued unit the channel serves first.
enum class Priority {
  ReadyOrder, ///< the order the units became ready (FIFO)
  LayerIndex, ///< the lowest first layer (the next forward needs it first)
};

/// A group of the consecutive layers [firstLayer, lastLayer] (forward
/// order, inclusive), communicated as `pieces` partitions of equal bytes.
struct SteadyGroup {
  unsigned firstLayer = 0, lastLayer = 0;
  unsigned pieces = 1;
  Collective form = Collective::AllReduce;
  /// Plain, or PowerSGD factors (then one allreduce piece).
  GroupForm send = GroupForm::plain();
};

/// A plan of the steady-state model.
struct SteadyPlan {
  std::string strategy;
  Priority priority = Priority::ReadyOrder;
  /// Today's runtime: the next forward waits for every unit, then the
  /// whole update runs (groups must then all be allreduces).
  bool barrier = false;
  /// Groups covering every layer with gradients, in forward order, not
  /// overlapping. Layers without gradients belong to no group.
  std::vector<SteadyGroup> groups;

  unsigned numUnits() const;
  /// The priority rule and the groups' forms, e.g. "layer-index priority,
  /// 2 reduce-scatter/all-gather, 1 partitioned".
  std::string describe() const;
};

/// Costs of the collectives. Reduce-scatter and all-gather default to half
/// of the allreduce's alpha and beta each (a ring allreduce is one of each).
struct SteadyComm {
  CommModel allreduce;
  CommModel reduceScatter, allGather;
  /// Ranks sharing a shard update (the update of an RS/AG group costs
  /// 1/ranks of the group's update).
  int ranks = 2;
  /// Whether plans may reduce-scatter and all-gather.
  bool allowReduceScatter = true;
  /// Where an RS/AG group's update runs. True: the channel's thread updates
  /// its 1/P shard of the parameters between the reduce-scatter and the
  /// all-gather (ZeRO's form), and the all-gather carries the parameters.
  /// False: the all-gather carries the averaged gradients, and the compute
  /// lane applies the whole update before the group's first forward, as
  /// for an allreduce (DeAR's form, and what the runtime runs:
  /// docs/runtime.md, "Steady-state plans").
  bool shardUpdate = true;

  static SteadyComm fromAllreduce(const CommModel &allreduce);
  /// `allreduce` (as the command line or calibration made it), with the
  /// calibration's measured reduce-scatter and all-gather where it has
  /// them (their alpha and beta; the rest of `allreduce`'s terms), else
  /// halves as fromAllreduce. `measured` says which were measured.
  static SteadyComm fromCalibration(const CommModel &allreduce,
                                    const CollectiveModels &calibration,
                                    bool measured[2]);
  /// fromCalibration with the halves read from the calibration file
  /// `path` (errors name it).
  static llvm::Expected<SteadyComm>
  fromCalibrationFile(const CommModel &allreduce, llvm::StringRef path,
                      bool measured[2]);
};

/// One unit's timing in the measured iteration.
struct UnitTiming {
  unsigned group = 0, piece = 0;
  bool gather = false; ///< the all-gather half of an RS/AG group
  uint64_t bytes = 0;
  double readyUs = 0, startUs = 0, endUs = 0;
};

/// The steady-state timeline of one plan.
struct SteadyTimeline {
  std::string strategy;
  /// Time between consecutive iteration starts in the steady state.
  double periodUs = 0;
  /// Compute lane work per iteration (forward + backward + updates it runs).
  double computeUs = 0;
  /// Compute lane time spent waiting for parameters per iteration.
  double waitUs = 0;
  /// Channel busy time per iteration.
  double commBusyUs = 0;
  /// Start of every simulated iteration (the first forward task).
  std::vector<double> iterationStartUs;
  /// Units of one steady iteration (times relative to its start).
  std::vector<UnitTiming> units;
};

/// Forward time per layer: the profile's own, else `forwardUs` split in
/// proportion to the layers' backward times (a layer's backward is about
/// twice its forward), else evenly.
std::vector<double> layerForwardUs(const Profile &profile);

/// Checks that `plan` fits `profile` (errors name the group at fault).
llvm::Error verifySteadyPlan(const SteadyPlan &plan, const Profile &profile);

/// Simulates `iterations` iterations and measures the period over the last
/// quarter of them. The plan must be valid (verifySteadyPlan).
SteadyTimeline simulateSteady(const Profile &profile, const SteadyComm &comm,
                              const SteadyPlan &plan, unsigned iterations = 16);

/// Lower bound on the period of any plan of the model over `forms`: the
/// compute lane's work; the channel's work per iteration (at least one
/// start-up and every byte) done at rate overlapRate while the lane
/// computes; and, per layer, its own communication after its backward,
/// less what the channel can do while the lane still has the earlier
/// layers' backward and forward to run.
double steadyLowerBoundUs(const Profile &profile, const SteadyComm &comm,
                          bool withReduceScatter = true);

/// The strategies of the wider model, each under a compression policy
/// (`compress`, off by default; oasr-step and oasr-barrier only):
///  - "oasr-step": the best plan found (see docs/planner.md): candidates
///    from today's `oasr` (barrier and per-layer waits, both priorities,
///    both collective forms) improved by local search (merge, split,
///    re-partition) scored by simulateSteady; never worse than the barrier
///    `oasr` plan, which is a candidate.
///    Under a policy the forms are chosen with the groups: powersgd:R
///    compresses every group holding a matrix it compresses; auto starts
///    from the backward-only compressed plan (makeCompressedPlan), lets the
///    search also switch a group's form, and then gives each compressed
///    group the most faithful form that keeps the period (as faithfulForms
///    does for the backward-only step).
///  - "oasr-barrier": today's `oasr` plan as today's runtime runs it (under
///    a policy, makeCompressedPlan's groups and forms).
///  - "bytescheduler[:<bytes>]": one group per layer, cut into partitions of
///    at most <bytes> (default 4 MiB), layer-index priority.
///  - "dear[:<bytes>]": reduce-scatter during backward and all-gather during
///    forward, layers fused in ready order into buckets closed once they
///    reach <bytes> (default 25 MiB), layer-index priority.
/// Errors name the strategy string.
llvm::Expected<SteadyPlan> makeSteadyPlan(llvm::StringRef strategy,
                                          const Profile &profile,
                                          const SteadyComm &comm,
                                          const CompressPolicy &compress = {});
/// The strategies above, in display order.
std::vector<std::string> steadyStrategyNames();
/// Whether `strategy` names one of them (with or without a size).
bool isSteadyStrategy(llvm::StringRef strategy);
/// Whether steady strategy `strategy` plans under a compression policy
/// (oasr-step, oasr-barrier: the others partition or reduce-scatter their
/// groups, and PowerSGD sends a group whole).
bool steadyStrategyCompresses(llvm::StringRef strategy);

/// One unit of a lowered plan: piece `piece` of group `group` (ready
/// order), its allreduce or reduce-scatter, or (`gather`) its all-gather.
struct LoweredUnit {
  unsigned group = 0, piece = 0;
  bool gather = false;
  bool operator==(const LoweredUnit &o) const {
    return group == o.group && piece == o.piece && gather == o.gather;
  }
};

/// A steady plan as the runtime runs it: the groups of Schedule.h's Plan
/// (ready order: the steady groups reversed), and per group in that order
/// its pieces and whether it reduce-scatters and all-gathers; the order
/// the channel serves the units in, fixed per step -- the simulated start
/// order (every rank must issue its collectives in the same order, so the
/// runtime follows the plan's order instead of choosing among queued units
/// at run time); whether the next forward waits per layer (not a barrier
/// plan).
struct LoweredSteadyPlan {
  Plan plan;
  bool forwardWaits = false;
  std::vector<unsigned> pieces;
  std::vector<uint8_t> scatter; ///< per group: 1 = reduce-scatter/all-gather
  std::vector<LoweredUnit> order;
  double periodUs = 0; ///< simulateSteady's period
};
/// Lowers a plan. Reduce-scatter groups need `comm.shardUpdate` off (the
/// runtime all-gathers gradients); errors name the group otherwise.
llvm::Expected<LoweredSteadyPlan> lowerSteadyPlan(const SteadyPlan &plan,
                                                  const Profile &profile,
                                                  const SteadyComm &comm);

} // namespace schedule
} // namespace oasr

#endif // OASR_SCHEDULE_STEADY_H
