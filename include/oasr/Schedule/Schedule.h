//===- Schedule.h - Gradient allreduce planning (no MLIR) -------*- C++ -*-===//
//
// The planner's public interface: profiles, communication models, the one
// timeline simulator, every merge strategy and the lower bound. Plain C++17
// and LLVM Support; the passes (`--oasr-plan-allreduce`), the runtime (timeline
// replay) and `oasr-plan` all call this code so that their numbers agree.
//
// Time origin: every time in a Timeline or a ReadyGrad is in microseconds
// from the start of the iteration (forward starts at 0, backward starts at
// `Profile::forwardUs`). The model is the one of DESIGN.md, "The timeline
// model"; docs/planner.md explains the strategies and the extra costs.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_SCHEDULE_SCHEDULE_H
#define OASR_SCHEDULE_SCHEDULE_H

#include "oasr/Schedule/Compression.h"
#include "oasr/Support/JSON.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace oasr {
namespace schedule {

//===----------------------------------------------------------------------===//
// Profiles
//===----------------------------------------------------------------------===//

/// One parameter gradient tensor, the unit that plans group.
struct GradTensor {
  std::string name;
  uint64_t bytes = 0;
  /// The tensor's first dimension when it has two or more (JSON `rows`):
  /// PowerSGD compresses it as a rows x (elements / rows) matrix. 0 for a
  /// vector or where the profile does not say.
  uint64_t rows = 0;
};

/// One layer of the model. Its gradients become ready together when its
/// backward computation ends.
struct Layer {
  std::string name;
  /// Backward compute time of this layer (microseconds).
  double backwardUs = 0;
  /// Forward compute time (microseconds); informational, the model uses
  /// `Profile::forwardUs` for the whole forward pass.
  double forwardUs = 0;
  /// Gradient tensors in the order the layer lists them (may be empty, e.g.
  /// for an activation; the layer's backward time still counts).
  std::vector<GradTensor> grads;
};

/// The element type gradients travel in. Gradients are f32 in memory; a
/// narrower wire type (`--grad-dtype=bf16|f16`) converts each fused buffer
/// before its allreduce and back after it, so each gradient byte puts
/// `wireFactor` bytes on the wire.
enum class WireDType { F32, BF16, F16 };

/// "f32", "bf16", "f16".
llvm::StringRef wireDTypeName(WireDType dtype);
/// Parses "f32", "bf16" or "f16"; the error lists the accepted names.
llvm::Expected<WireDType> parseWireDType(llvm::StringRef name);
/// Bytes on the wire per f32 gradient byte: 1 for f32, 1/2 for bf16 and f16.
double wireFactor(WireDType dtype);

/// The communication cost model. Times are in seconds as users write them;
/// `timeUs` returns microseconds like every other time in this library.
///
/// Basic model: `T(M) = alpha + beta * M` for `M > 0` and `T(0) = 0`. The ring
/// form `2(P-1)*alpha0 + 2(P-1)/P * M/B` is stored as the equivalent
/// alpha/beta (and remembers P, alpha0, B for printing).
///
/// Extra real-system costs (zero by default, ignored by the basic model and so
/// by the `optimal` strategy, but charged by `simulate` and planned for by the
/// `oasr` strategy):
///  - `groupOverheadUs`: fixed cost per communicated group on the
///    communication channel (collective launch, wait, and the per-group
///    optimizer launch that the runtime issues when a group completes);
///  - `packUsPerByte`: packing copy into/out of a fusion buffer, charged per
///    byte to groups of two or more tensors when gradients are not laid out
///    contiguously (the compiler's layout pass makes this 0 for oasr itself);
///  - `overlapRate`: the rate, relative to its full speed, at which
///    communication progresses while backward computes (1: a channel of its
///    own, as on a GPU or a host with a spare core per rank; 0: none, as when
///    the ranks' compute threads fill every core and the communication thread
///    runs at idle priority). After backward it runs at full speed. Measured
///    by `oasr-bench comm`. See "Time in channel capacity" below.
///
/// Time in channel capacity: with rate rho during backward (which ends at B)
/// and 1 after it, the work the channel can do by time t is
///   C(t) = rho * min(t, B) + max(0, t - B),
/// non-decreasing and continuous. A group of channel time w starting at s
/// ends at C^-1(C(s) + w). Since C(max(a, b)) = max(C(a), C(b)), simulating
/// and planning in capacity coordinates is the basic model with ready times
/// C(r): the optimal dynamic program stays exact and O(n).
///
/// Wire type: bytes `M` are always the gradients' f32 bytes. With a narrower
/// `wire`, `M * wireFactor(wire)` bytes travel, so the per-byte term becomes
/// `beta * wireFactor * M` while alpha, the per-group overhead and the
/// packing copy (which touch the f32 buffer) stay as calibrated:
/// `betaUsPerByte()` is that effective slope, `betaSPerByte` the calibrated
/// one (seconds per byte on the wire).
/// The two-level allreduce (Horovod's hierarchical allreduce, ZeRO++'s
/// intra-node tier): where ranks share a node, a reduce-scatter inside each
/// node, an allreduce of 1/L of the bytes between the nodes (one per local
/// rank, in parallel), then an all-gather inside the node. Its time for `M`
/// gradient bytes is `intra(M) + inter(M / L)`, both alpha-beta lines that
/// `oasr-bench comm` calibrates: `intra` the reduce-scatter and all-gather
/// together over the node's shared memory, `inter` the allreduce across the
/// link. With a 16-bit `wire`, only the share between the nodes travels
/// narrow (ZeRO++'s form: the node's shared memory sums in f32), so its
/// time is `intra(M) + inter(M wireFactor / L)`. Unset (ranksPerNode 0)
/// where the job has one tier.
struct TwoLevelTier {
  int ranksPerNode = 0; ///< L, the ranks of each node
  double intraAlphaS = 0, intraBetaSPerByte = 0;
  double interAlphaS = 0, interBetaSPerByte = 0;
  bool present() const { return ranksPerNode > 1; }
};

/// Which allreduce the planner may send a group as (`two-level=`):
/// auto (the faster under the model, per group; flat without a calibrated
/// second tier), flat (always the one collective over every rank), or
/// two-level (every group, where the model has the tier).
enum class AllreduceRoute { Auto, Flat, TwoLevel };
/// "auto", "flat", "two-level".
llvm::StringRef allreduceRouteName(AllreduceRoute route);
/// Parses a route's name; the error lists the accepted ones.
llvm::Expected<AllreduceRoute> parseAllreduceRoute(llvm::StringRef name);

struct CommModel {
  enum class Kind { AlphaBeta, Ring };
  Kind kind = Kind::AlphaBeta;
  /// Start-up latency alpha (seconds).
  double alphaS = 0;
  /// Per-byte time beta (seconds per byte).
  double betaSPerByte = 0;
  /// Number of ranks, 0 when unknown (informational for alpha-beta).
  int ranks = 0;
  /// Ring form parameters (only meaningful when kind == Ring).
  double alpha0S = 0;
  double bandwidthBytesPerS = 0;
  /// Extra per-group cost on the communication channel (microseconds).
  double groupOverheadUs = 0;
  /// Packing copy cost for multi-tensor groups (microseconds per byte).
  double packUsPerByte = 0;
  /// Communication progress rate while backward computes, in [0, 1].
  double overlapRate = 1;
  /// Compute progress rate while an allreduce is in flight, in (0, 1]
  /// (`oasr-bench comm` measures it beside its overlap rate): backward
  /// layers beside communication take 1/computeRate times as long. Only
  /// the simulator charges it (predictions); the planners plan for 1.
  double computeRate = 1;
  /// Compute time a call takes from the compute stream when it starts the
  /// moment its group is ready, the channel idle, while backward computes
  /// (microseconds): the start waits while a communication thread that
  /// shares the core posts the call (measured by `oasr-run` on its starts
  /// and by `oasr-bench comm`). A group queued behind another starts on the
  /// communication thread beside a layer, which the compute rate covers.
  /// Charged by the simulator and planned for by `oasr` (a refinement).
  double callComputeUs = 0;
  /// The element type gradients travel in (see "Wire type" above).
  WireDType wire = WireDType::F32;
  /// Compression's compute on the communication channel (Compression.h,
  /// formCost): microseconds per multiply-add of PowerSGD's products and
  /// per element of its compressed matrices. Charged only to compressed
  /// groups.
  double compressUsPerMac = 0, compressUsPerElement = 0;
  /// The second tier, where ranks share nodes (TwoLevelTier), and which
  /// allreduce groups may take.
  TwoLevelTier twoLevel;
  AllreduceRoute route = AllreduceRoute::Auto;

  /// Time of one allreduce of `bytes` bytes in the basic model
  /// (microseconds); `timeUs(0) == 0`. The flat or the two-level time, as
  /// `sendsTwoLevel` chooses.
  double timeUs(uint64_t bytes) const;
  /// The one collective over every rank: `alpha + beta M`.
  double flatTimeUs(uint64_t bytes) const;
  /// The two-level allreduce's time (TwoLevelTier); the flat time where
  /// the model has no second tier.
  double twoLevelTimeUs(uint64_t bytes) const;
  /// The model has a second tier the route lets groups take: a tier of
  /// L > 1 ranks a node dividing `ranks`, and more than one node.
  bool twoLevelUsable() const;
  /// A group of `bytes` travels two-level: the tier is usable and either
  /// the route says two-level or (auto) its time is the smaller.
  bool sendsTwoLevel(uint64_t bytes) const;
  /// Of collectives that take `flatUs` over every rank and `twoUs` in
  /// two tiers, whether they travel two-level: the tier is usable and the
  /// route says two-level or (auto) `twoUs` is the smaller.
  bool prefersTwoLevel(double flatUs, double twoUs) const;
  /// The per-call and per-byte terms of the cost line groups take: the
  /// flat one, the two-level one, or (auto, where neither line is below
  /// the other everywhere) none: `timeUs` is then the lower of two lines,
  /// concave, and `linearCost()` false.
  bool linearCost() const;
  double lineAlphaUs() const;
  double lineBetaUsPerByte() const;
  /// The lower of the two lines' terms each (a lower bound of `timeUs`
  /// per call and per byte, for the bounds).
  double minAlphaUs() const;
  double minBetaUsPerByte() const;
  /// Time the communication channel is busy for one group of `numTensors`
  /// tensors totalling `bytes`: `timeUs` plus the extra costs. 0 for an
  /// empty group.
  double groupTimeUs(uint64_t bytes, unsigned numTensors) const;
  /// groupTimeUs on a given route: the flat time, or with `twoLevel` the
  /// two-level time (flat where the model has no second tier).
  double groupTimeUs(uint64_t bytes, unsigned numTensors, bool twoLevel) const;
  /// alpha in microseconds.
  double alphaUs() const { return alphaS * 1e6; }
  /// beta in microseconds per gradient (f32) byte: the calibrated beta
  /// times the wire type's bytes per f32 byte.
  double betaUsPerByte() const { return betaSPerByte * 1e6 * wireFactor(wire); }
  /// True if any extra real-system cost is non-zero.
  bool hasExtras() const {
    return groupOverheadUs != 0 || packUsPerByte != 0 || overlapRate != 1 ||
           computeRate != 1 || callComputeUs != 0;
  }
  /// True when the compute stream depends on the plan (a compute rate
  /// below 1 the profile's layer times do not already carry, or a start
  /// cost): the simulator then steps both lanes together and `oasr` refines
  /// its dynamic program's plan on the simulator.
  bool couplesCompute(bool computeBesideComm) const {
    return (computeRate < 1 && !computeBesideComm) || callComputeUs > 0;
  }
  /// Channel capacity C(t) by time `t` when backward ends at `backwardEndUs`.
  double capacityAt(double t, double backwardEndUs) const;
  /// The earliest time by which the channel has capacity `u` (C^-1).
  double timeAtCapacity(double u, double backwardEndUs) const;
  /// This model without the extra costs (the basic model).
  CommModel basic() const;
  /// A one-line human description, e.g. "alpha=9.75e-05 s beta=3.06e-10 s/B".
  std::string describe() const;

  /// The alpha-beta model `T(M) = a + b*M` (seconds, seconds per byte).
  static CommModel alphaBeta(double alphaS, double betaSPerByte, int ranks = 0);
  /// The ring allreduce model over `ranks` ranks with per-step latency
  /// `alpha0S` and link bandwidth `bandwidthBytesPerS`.
  static CommModel ring(int ranks, double alpha0S, double bandwidthBytesPerS);
};

/// A measured (or estimated) profile: the planner's input. `layers` are in
/// forward order; backward visits them last to first.
struct Profile {
  std::string model;
  /// Where the numbers come from (machine, tool); optional, informational.
  std::string source;
  int64_t batch = 0;
  /// Whole forward pass (microseconds).
  double forwardUs = 0;
  /// Optimizer update after the last allreduce (microseconds).
  double updateUs = 0;
  std::vector<Layer> layers;
  /// The layer times were measured in a run whose allreduces overlapped
  /// backward (JSON `compute_beside_comm`, written by oasr-run --profile),
  /// so they already carry compute's slowdown beside communication: the
  /// simulator then does not charge CommModel::computeRate again.
  bool computeBesideComm = false;
  /// Communication model stored with the profile; command-line values
  /// override it.
  std::optional<CommModel> comm;

  /// Sum of the layers' backward times.
  double backwardUs() const;
  /// Number of gradient tensors over all layers.
  unsigned numGrads() const;
  /// Sum of all gradient bytes.
  uint64_t totalBytes() const;
};

/// Parses an `oasr-profile-v1` JSON document. Errors name the file, the
/// field and, where relevant, the layer, then the line and column of the
/// value at fault (e.g. "f.json: layers[3] ('conv2'): 'backward_us' must be
/// >= 0, got -1 (line 9 column 20)").
llvm::Expected<Profile> parseProfile(llvm::StringRef jsonText,
                                     llvm::StringRef fileNameForErrors);
/// Reads and parses a profile file.
llvm::Expected<Profile> readProfile(llvm::StringRef path);
/// A TwoLevelTier as the 'two_level' object calibrations and profiles
/// carry.
llvm::json::Object twoLevelJSON(const TwoLevelTier &tier);
/// Serializes a profile; `parseProfile(toJSON(p))` gives back `p`.
llvm::json::Value toJSON(const Profile &profile);
/// Multiplies every compute time (forward, backward, update) by `factor`.
/// (Pass an rvalue to scale without copying the names.)
Profile scaleCompute(Profile profile, double factor);

/// Parses a calibration document written by `oasr-bench comm`:
/// `{"format":"oasr-comm-v1","alpha_s":..,"beta_s_per_byte":..,"ranks":..,
///   "points":[{"bytes":..,"seconds":..}]}`. If alpha/beta are absent they
/// are fitted from `points` by least squares.
llvm::Expected<CommModel> parseCalibration(llvm::StringRef jsonText,
                                           llvm::StringRef fileNameForErrors);
/// Reads and parses a calibration file.
llvm::Expected<CommModel> readCalibration(llvm::StringRef path);

/// A calibration's allreduce and, where `oasr-bench comm` measured them,
/// the halves of an allreduce: optional 'reduce_scatter' and 'all_gather'
/// objects, each with 'alpha_s'/'beta_s_per_byte' or 'points' to fit (bytes:
/// the whole buffer, as for the allreduce).
struct CollectiveModels {
  CommModel allreduce;
  std::optional<CommModel> reduceScatter, allGather;
};
llvm::Expected<CollectiveModels> parseCollectiveModels(llvm::StringRef jsonText,
                                                       llvm::StringRef file);
llvm::Expected<CollectiveModels> readCollectiveModels(llvm::StringRef path);
/// The communication thread's priority a calibration file recommends: its
/// optional 'comm_priority' ("idle", "normal" or "sleep"), which
/// `oasr-bench comm` records from the overlap measured at each; empty when
/// the file has none.
llvm::Expected<std::string> readCalibrationPriority(llvm::StringRef path);
/// What a fit of alpha and beta makes small: the relative error of each
/// point (a calibration's sweep from bytes to megabytes, one point per size,
/// fits both terms), or the error in seconds (the allreduces of a run, one
/// point each: the fitted times then add up to the measured total).
enum class FitError { Relative, Absolute };

/// Least-squares fit of `seconds = alpha + beta * bytes` to (bytes, seconds)
/// points, weighted by 1/seconds^2 (FitError::Relative) or evenly
/// (FitError::Absolute). Neither coefficient is negative: a falling slope
/// gives beta = 0 and alpha = the weighted mean time, a negative intercept
/// refits through the origin (FitError::Absolute: beta = total time / total
/// bytes, so the total still matches). Fails (message "need at least two
/// distinct sizes to fit") when the sizes do not determine beta.
llvm::Expected<CommModel>
fitAlphaBeta(llvm::ArrayRef<std::pair<double, double>> points, int ranks = 0,
             FitError error = FitError::Relative);

/// One allreduce as a training run measured it, from the moment every rank
/// had called it to the moment every rank had the sum: the part of that
/// time backward still computed beside it, and the part after.
struct MeasuredAllreduce {
  double bytes = 0;
  double besideS = 0; ///< seconds while backward still ran
  double aloneS = 0;  ///< seconds after backward ended
};

/// The allreduce model of a run's own allreduces: alpha, beta and the
/// overlap rate r such that each did `r * besideS + aloneS = alpha + beta *
/// bytes` of work, by least squares on `aloneS` in the three unknowns; then
/// alpha and beta again on the work with r fixed (evenly weighted, so the
/// fitted work adds up to the measured). Where the three are not determined
/// jointly, alpha and beta come from the allreduces wholly after backward
/// (two sizes or more) and r from the work the others got done beside it.
/// r is clamped to [0.05, 1]; where neither determines it (say, nothing ran
/// beside backward) it is `fallbackRate` and `rateFitted` is false. Fails
/// like fitAlphaBeta when the sizes do not determine beta. Where the run
/// does not resolve the start-up, alpha is `planAlpha` (the plan's, say a
/// calibration's small-message time, measured directly; 0: none) and beta
/// is refitted on the work so that it still adds up; `alphaFromPlan` (if
/// given) says so. Unresolved: the fit finds none (alpha clamped to 0: a
/// run's large allreduces extrapolate it away), the run has under five
/// group sizes, or `planAlpha` lies within the 95 % interval of the fitted
/// alpha (Student's t; a plan of a few large groups puts the intercept of a
/// line through 8-40 MB at 3.3 ms, where a 4 KiB allreduce beside compute
/// takes 0.2 ms).
llvm::Expected<CommModel>
fitRunAllreduces(llvm::ArrayRef<MeasuredAllreduce> samples, int ranks,
                 double fallbackRate, bool &rateFitted, double planAlpha = 0,
                 bool *alphaFromPlan = nullptr);

//===----------------------------------------------------------------------===//
// Ready order, plans and the simulator
//===----------------------------------------------------------------------===//

/// One gradient in ready (backward) order.
struct ReadyGrad {
  /// Index of the producing layer in `Profile::layers`.
  unsigned layer = 0;
  /// Index of the tensor in that layer's `grads`.
  unsigned index = 0;
  /// The tensor's name, pointing into the Profile (which must outlive it).
  llvm::StringRef name;
  uint64_t bytes = 0;
  /// When the gradient is ready (end of its layer's backward), microseconds
  /// from the start of the iteration.
  double readyUs = 0;
  uint64_t rows = 0; ///< GradTensor::rows
};

/// Gradients in ready order: layers last to first; within a layer, tensors
/// in the order the layer lists them (they are ready at the same time).
std::vector<ReadyGrad> readyOrder(const Profile &profile);

/// A plan: a partition of the ready-ordered gradients into contiguous
/// groups, communicated in that order. `groupEnds[k]` is the exclusive end
/// index (into `readyOrder`) of group k: group k holds gradients
/// `[k == 0 ? 0 : groupEnds[k-1], groupEnds[k])`. Ends are strictly
/// increasing and the last equals the number of gradients (a profile without
/// gradients has an empty plan).
struct Plan {
  std::string strategy;
  std::vector<unsigned> groupEnds;
  /// How each group travels (Compression.h); empty: every group plain.
  std::vector<GroupForm> forms;

  unsigned numGroups() const { return groupEnds.size(); }
  GroupForm form(unsigned k) const {
    return k < forms.size() ? forms[k] : GroupForm::plain();
  }
  /// Groups sent as PowerSGD factors.
  unsigned numCompressed() const {
    unsigned n = 0;
    for (const GroupForm &f : forms)
      n += f.compressed();
    return n;
  }
  bool compresses() const { return numCompressed() > 0; }
  /// First gradient index of group `k`.
  unsigned groupBegin(unsigned k) const { return k ? groupEnds[k - 1] : 0; }
  /// The gradient indices of every group, in communication order.
  std::vector<std::vector<unsigned>> groups() const;
};

/// Checks that `plan` is a valid partition of `numGrads` gradients.
llvm::Error verifyPlan(const Plan &plan, unsigned numGrads);
/// Builds a plan from group sizes (number of gradients per group).
Plan planFromSizes(llvm::StringRef strategy, llvm::ArrayRef<unsigned> sizes);

/// Timing of one communicated group.
struct GroupTiming {
  unsigned begin = 0, end = 0; ///< gradient range [begin, end) in ready order
  uint64_t bytes = 0;
  double readyUs = 0; ///< when its last gradient is ready
  double startUs = 0; ///< max(ready, end of previous group)
  double endUs = 0;   ///< start + communication time
  GroupForm form;     ///< how it travels (Plan::forms)
};

/// Backward span of one layer on the compute lane.
struct LayerSpan {
  unsigned layer = 0;
  double startUs = 0, endUs = 0;
};

/// The simulated timeline of one iteration under one plan.
struct Timeline {
  std::string strategy;
  /// Iteration time: max(backwardEnd, commEnd) + t_update (backward starts
  /// at t_f, so this is t_f + max(bwd, comm after t_f) + t_update).
  double iterationUs = 0;
  double forwardUs = 0;     ///< forward pass = start of backward
  double backwardEndUs = 0; ///< end of the last layer's backward
  double commEndUs = 0;     ///< end of the last allreduce (0 if none)
  double updateUs = 0;      ///< optimizer update after both
  /// Communication busy time (sum of group durations).
  double commBusyUs = 0;
  /// Communication not hidden behind backward: max(0, commEnd - backwardEnd).
  double nonOverlappedCommUs = 0;
  /// Fraction of the communication busy time hidden behind backward
  /// (1 when there is no communication).
  double overlapRatio = 1;
  std::vector<GroupTiming> groups;
  std::vector<LayerSpan> backward; ///< in execution (backward) order
};

/// Per group of `plan` over `profile`: whether `comm` sends it as a
/// two-level allreduce (formCost's route: a plain group whose bytes take
/// the two-level line, CommModel::sendsTwoLevel; a compressed group whose
/// two collectives together end sooner so).
std::vector<bool> twoLevelGroups(const Profile &profile, const CommModel &comm,
                                 const Plan &plan);

/// The channel time of group `k` of `plan` (its form's, Compression.h
/// formCost) over the ready-ordered gradients `ready`.
double groupChannelUs(const CommModel &comm, llvm::ArrayRef<ReadyGrad> ready,
                      const Plan &plan, unsigned k);

/// Scores `plan` on `profile` under `comm` (including its extra costs and
/// each group's form). The plan must be valid for the profile (see
/// verifyPlan); asserts otherwise.
Timeline simulate(const Profile &profile, const CommModel &comm,
                  const Plan &plan);

//===----------------------------------------------------------------------===//
// Strategies
//===----------------------------------------------------------------------===//

/// Builds the plan of a strategy: "wfbp", "single", "bucket:<bytes>" (bytes
/// may carry a K/M/G or KiB/MiB/GiB suffix), "ddp", "horovod", "mgwfbp",
/// "optimal", "oasr". Errors name the strategy string.
llvm::Expected<Plan> makePlan(llvm::StringRef strategy, const Profile &profile,
                              const CommModel &comm);
/// "<digits>[suffix]" with a KB/MB/GB (powers of 1000) or KiB/MiB/GiB
/// (powers of 1024) suffix, > 0; nullopt otherwise.
std::optional<uint64_t> parseBytes(llvm::StringRef text);
/// The fixed strategy names, in display order ("bucket:<bytes>" excluded).
std::vector<std::string> strategyNames();
/// Every strategy a plan accepts, as help text: strategyNames(),
/// bucket:<bytes> and the steady-state strategies (Steady.h), sizes shown
/// where they take one.
std::string strategyHelp();
/// Checks a strategy string without planning (for option validation).
llvm::Error checkStrategy(llvm::StringRef strategy);
/// Whether the strategy's grouping depends on the allreduce model (mgwfbp,
/// optimal, oasr). wfbp, single, bucket:<bytes>, ddp and horovod group by
/// layer or by size alone and plan with any model (makePlan ignores it).
bool strategyNeedsCommModel(llvm::StringRef strategy);

/// Fixed-size buckets in ready order: a bucket is closed before a tensor
/// that would push it over `capBytes` (a tensor is never split; a tensor
/// larger than the cap gets its own bucket).
Plan bucketPlan(const Profile &profile, uint64_t capBytes);

/// Exact minimum under the basic model (extras ignored), by the pruned
/// prefix dynamic program; O(n log n) in the number of gradients. Where a
/// group may take the flat or the two-level allreduce, whichever is faster
/// for its size (CommModel::linearCost false), the O(n^2) program up to
/// kExactTwoLineMaxGrads gradients, and past that the better of the flat
/// and the two-level optimum.
Plan optimalPlan(const Profile &profile, const CommModel &comm);
constexpr unsigned kExactTwoLineMaxGrads = 4096;
/// The same optimum by the plain O(n^2) recurrence (reference for tests).
Plan optimalPlanQuadratic(const Profile &profile, const CommModel &comm);
/// The `oasr` strategy: the exact minimum under `comm` including its extra
/// costs (equals `optimalPlan` when `comm` has no extras). Where compute
/// depends on the plan (CommModel::couplesCompute: a compute rate below 1
/// on a profile measured alone, or a call's start cost), that optimum and
/// `optimalPlan`'s are each refined by refineOnTimeline and the faster kept
/// (never slower than either).
Plan oasrPlan(const Profile &profile, const CommModel &comm);
/// Where compute depends on the plan (docs/planner.md, "The compute rate"
/// and "A call's start on compute") the DP's optimum, which assumes compute
/// independent of it, may put too many calls or too much communication
/// beside backward. Removes group boundaries one at a time, each round the
/// one whose removal shortens the simulated (coupled) iteration most, until
/// none does. The result is never slower than `plan` under `simulate`; it
/// is a local optimum, not a proven one. Returns `plan` unchanged where the
/// simulator's compute does not depend on the plan.
Plan refineOnTimeline(const Profile &profile, const CommModel &comm, Plan plan);
/// MG-WFBP's greedy merge rule (Shi, Chu, Li), see docs/planner.md.
Plan mgwfbpPlan(const Profile &profile, const CommModel &comm);

/// Lower bound on the iteration time under `comm`: t_f + max(end of
/// backward, r_last + T(M_last), r_1 + T(M_total)) + t_update (see
/// DESIGN.md; extras raise alpha by the per-group overhead).
double lowerBoundUs(const Profile &profile, const CommModel &comm);

} // namespace schedule
} // namespace oasr

#endif // OASR_SCHEDULE_SCHEDULE_H
