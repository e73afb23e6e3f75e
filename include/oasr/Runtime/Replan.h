//===- Replan.h - Re-planning the allreduces from the run's measurements -===//
//
// Sync SGD measures its first steps (per-layer compute times on the compute
// thread, every fused allreduce on the communication thread), and every rank
// agrees on one profile and one allreduce model fitted from them. The
// configured strategy then plans again (lib/Schedule, in-process) and every
// rank switches to the new groups at the same step boundary
// (Executor::regroup lays the gradients out again). docs/runtime.md,
// "Re-planning from the run", says what is measured and how.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_REPLAN_H
#define OASR_RUNTIME_REPLAN_H

#include "oasr/Runtime/Communicator.h"
#include "oasr/Runtime/Executor.h"
#include "oasr/Schedule/Schedule.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace oasr::rt {

/// `--replan=off|once|every:N`.
struct ReplanOptions {
  enum class Mode { Off, Once, Every };
  Mode mode = Mode::Off;
  /// Every: steps between re-plans (the first after each switch warms up).
  int64_t every = 0;
  /// Steps measured before a re-plan (after one warm-up step): `once`
  /// measures 3, and then one step with compute alone where allreduces
  /// overlap backward (Replanner::wantsAloneStep); `every:N` measures the
  /// N - 1 steps after the warm-up, the last of them alone if N >= 3.
  int64_t measured() const { return mode == Mode::Every ? every - 1 : 3; }
};

/// Parses the option's value; errors name it and say what is accepted.
llvm::Expected<ReplanOptions> parseReplanOption(llvm::StringRef text);

/// One re-planning, the same on every rank.
struct ReplanEvent {
  int64_t step = 0; ///< steps completed when it ran (the next step uses it)
  double atUs = 0;  ///< when it began (trace time, this rank)
  double endUs = 0; ///< when the new groups were in place
  unsigned oldGroups = 0, newGroups = 0;
  /// Under compression: the groups sent as PowerSGD factors before and
  /// after (both 0 without).
  unsigned oldCompressed = 0, newCompressed = 0;
  bool compresses = false; ///< the plan has a compression policy
  bool changed = false;    ///< the plan's groups changed (else none switched)
  /// The strategy planned other groups, not predicted faster than those in
  /// place, so they were kept: their count and predicted time (else 0, -1).
  unsigned notFasterGroups = 0;
  double notFasterUs = -1;
  /// The old and the new groups under the agreed profile and the fitted
  /// model (microseconds per iteration); their difference is the predicted
  /// gain.
  double oldPredictedUs = -1, newPredictedUs = -1;
  /// Measuring ranks agreeing on the profile and model, fitting, planning
  /// (planUs), and switching to the new layout (switchUs).
  double planUs = 0, switchUs = 0;
  /// The allreduce model fitted to the run's allreduces (alpha, beta and
  /// the overlap rate, schedule::fitRunAllreduces), which the plan uses.
  schedule::CommModel comm;
  unsigned jobs = 0, sizes = 0; ///< allreduces and distinct sizes fitted
  /// This rank's measured starts that found the communication thread idle
  /// (the fitted model's callComputeUs is the ranks' mean of their medians).
  unsigned callStarts = 0;
  /// The agreed profile's compute scaled by this (stragglerFactor: the
  /// slowest rank of each measured step against the slowest rank's median).
  double stragglerFactor = 1;
  /// The uncertainty of the ranks' clock offsets the allreduce times were
  /// taken with (microseconds; 0 on one rank).
  double clockSkewUs = 0;
  /// The compute rate (schedule::CommModel::computeRate) measured in the
  /// run: the speed of compute beside an allreduce in flight, relative to
  /// the same instructions in the step whose allreduces were held until
  /// backward ended (`aloneStep`, 1-based; 0 when none ran). The plan's
  /// profile is then compute alone, and the prediction charges the rate.
  double computeRate = 1;
  bool computeRateMeasured = false;
  int64_t aloneStep = 0;
  double aloneStartUs = 0, aloneEndUs = 0; ///< that step (trace time)
  /// Why the rate was not measured (e.g. nothing overlapped), or empty.
  std::string computeRateNote;
  /// alpha kept from the plan: one size only, or the run's sizes do not
  /// resolve the start-up (schedule::fitRunAllreduces)
  bool alphaFromPlan = false;
  bool overlapFromPlan = false; ///< nothing overlapped backward: rate kept
  std::string note;             ///< why nothing was re-planned, if so
};

/// The measured profile of a run: layers in forward order with the mean
/// time of their forward and backward instructions (`meanUs`, one entry per
/// `exec.steps()` entry), gradients in the plan's order.
schedule::Profile measuredProfile(const Executor &exec,
                                  llvm::ArrayRef<double> meanUs,
                                  double forwardUs, double updateUs,
                                  llvm::StringRef source);

/// The median of `v` (the mean of the middle two for an even count; 0 when
/// empty).
double median(std::vector<double> v);

/// Each instruction's typical time over the measured steps `stepUs` (one
/// vector per step, one time per instruction of kind `kinds`): its median,
/// scaled per kind so that the kind's sum is the median over steps of each
/// step's sum. A median per instruction keeps one slow step (the host is
/// shared) out; but layer times are skewed to the right, and the sum of
/// medians is below every step: 5 % for the transformer's backward on the
/// emulated cluster (185 instructions), which the plans' predictions then
/// missed by. Comm instructions (waits) keep their median.
std::vector<double> typicalStepUs(llvm::ArrayRef<StepKind> kinds,
                                  llvm::ArrayRef<std::vector<double>> stepUs);

/// The kind of each of `exec`'s instructions, in plan order.
std::vector<StepKind> stepKinds(const Executor &exec);

/// Per StepKind (indexed by its value), the sum of `us` over the
/// instructions of that kind.
using KindSums = std::array<double, 5>;
KindSums kindSums(llvm::ArrayRef<StepKind> kinds, llvm::ArrayRef<double> us);
/// The update time of a profile: its Update and Copy instructions.
inline double updateUs(const KindSums &s) {
  return s[size_t(StepKind::Update)] + s[size_t(StepKind::Copy)];
}
/// The compute time of a step: every kind but Comm (the waits).
inline double computeUs(const KindSums &s) {
  double sum = 0;
  for (size_t k = 0; k < s.size(); ++k)
    if (k != size_t(StepKind::Comm))
      sum += s[k];
  return sum;
}
/// Each kind's median over `steps` (one KindSums a step).
KindSums medianKindSums(llvm::ArrayRef<KindSums> steps);
/// Scales `us` per compute kind (forward, backward, update, copy) so the
/// kind's sum is `totals[kind]`; a kind whose sum is 0 stays, and so do
/// Comm instructions (waits, not compute).
void scaleKindsTo(llvm::ArrayRef<StepKind> kinds,
                  llvm::MutableArrayRef<double> us, const KindSums &totals);

/// How much longer a synchronous step computes than a rank's typical step,
/// because the slowest rank changes from step to step (a shared host slows
/// one rank, then the other): the median over the steps of the largest
/// compute of any rank in that step (`perStepMaxUs`), over `referenceUs`
/// (a rank's median), at least 1; 1 when there is no step or reference.
double stragglerFactor(llvm::ArrayRef<double> perStepMaxUs, double referenceUs);
/// Each measured step's compute at its largest over the ranks, from each
/// rank's own `stepUs` (collective), and, if asked, the largest of the
/// ranks' medians (`maxMedianUs`). Empty where the ranks measured different
/// numbers of steps.
std::vector<double> perStepMaxUs(CommEngine &engine,
                                 llvm::ArrayRef<double> stepUs,
                                 double *maxMedianUs = nullptr);
/// Multiplies every compute instruction (not Comm) of `us` by `factor`.
void scaleCompute(llvm::ArrayRef<StepKind> kinds,
                  llvm::MutableArrayRef<double> us, double factor);

/// The time span of each allreduce start (opType "allreduce_start") among
/// `exec`'s instructions in one step's `times`, appended to `spans`.
void appendStartSpans(const Executor &exec, const OpTiming *times,
                      std::vector<std::pair<double, double>> &spans);
/// The compute thread's time in each start of `spans` whose job found the
/// communication thread idle (the event queued inside the span with
/// CommEvent::queuedIdle; `events` in queueing order, as recorded), appended
/// to `out`. A start whose job is not among `events` is left out.
void idleStartUs(llvm::ArrayRef<std::pair<double, double>> spans,
                 llvm::ArrayRef<CommEvent> events, std::vector<double> &out);

/// Whether a run's measured layer times ran beside its communication: with
/// more than one rank and more than one group, the allreduces of all but
/// the last group overlap backward by design (Profile::computeBesideComm).
bool besideCommunication(const Executor &exec, int ranks);

/// The compute rate beside communication from one rank's measurements, per
/// instruction (of kind `kinds`): `meanUs` its mean time in the measured steps,
/// `besideUs` the mean time an allreduce was in flight beside it there,
/// `aloneUs` its time in the step whose allreduces were held until backward
/// ended. Instruction k did `meanUs - besideUs` of its work alone and the rest
/// at rate kappa, so `aloneUs = meanUs - besideUs + kappa * besideUs`; the sums
/// over instructions that ran beside an allreduce are what ranks add up.
struct ComputeRateSums {
  double workBesideUs = 0; ///< sum of aloneUs - (meanUs - besideUs)
  double timeBesideUs = 0; ///< sum of besideUs
  double backwardUs = 0;   ///< sum of meanUs over backward instructions
};
ComputeRateSums computeRateSums(llvm::ArrayRef<StepKind> kinds,
                                llvm::ArrayRef<double> meanUs,
                                llvm::ArrayRef<double> besideUs,
                                llvm::ArrayRef<double> aloneUs);
/// kappa = workBeside / timeBeside, clamped to [0.05, 1]; an error saying
/// why not where compute beside communication was under 2 % of backward
/// (the rate would be noise).
llvm::Expected<double> computeRateFrom(const ComputeRateSums &sums);

/// The allreduce model of a re-plan: fitted to the run's allreduces by
/// least squares (schedule::fitRunAllreduces, with the plan's alpha where
/// the run does not resolve the start-up), or where that fails (one size),
/// alpha from the plan and beta the median over the allreduces of their
/// work at the plan's overlap rate. `rateFitted`: the overlap rate is the
/// run's; `alphaFromPlan`: alpha is the plan's.
schedule::CommModel
fitReplanModel(llvm::ArrayRef<schedule::MeasuredAllreduce> measured, int ranks,
               double planAlphaS, double planOverlapRate, bool &rateFitted,
               bool &alphaFromPlan);

/// A re-plan's decision between the groups in place (`oldSizes`: the
/// gradients of each) and the strategy's new `newEnds`, both predicted on
/// the agreed profile and model: a switch must be predicted faster, else
/// the groups stay and `notFaster*` says what was declined.
struct GroupChoice {
  bool changed = false;
  unsigned oldGroups = 0, newGroups = 0, notFasterGroups = 0;
  double oldPredictedUs = 0, newPredictedUs = 0, notFasterUs = 0;
};
/// `oldRanks` and `newRanks` give each group's PowerSGD rank (0: plain;
/// empty: none compressed): a change of form is a change too.
llvm::Expected<GroupChoice>
chooseGroups(const schedule::Profile &profile, const schedule::CommModel &model,
             llvm::ArrayRef<unsigned> oldSizes,
             llvm::ArrayRef<unsigned> newEnds, llvm::StringRef strategy,
             llvm::ArrayRef<unsigned> oldRanks = {},
             llvm::ArrayRef<unsigned> newRanks = {});

/// Measures sync SGD's steps and re-plans (collective: every rank calls
/// `recordStep` after the same steps and `replan` at the same step).
class Replanner {
public:
  Replanner(Executor &exec, CommEngine &engine, ReplanOptions options);

  /// Call before each step, then after it with the step's instruction
  /// timings (`exec.steps()` order, engine epoch). `warmup` steps are not
  /// measured (the first step, and the first after a switch). `alone`: the
  /// step ran with its allreduces held until backward ended (asked for by
  /// `wantsAloneStep`).
  void beginStep();
  void recordStep(const OpTiming *times, bool warmup, bool alone = false);
  /// Whether the next step should hold its allreduces until backward has
  /// ended (TrainingAlgorithm::holdCommunication), so its compute runs
  /// alone: once the measured steps are in, where allreduces overlap
  /// backward (more than one rank and group). Compared with the measured
  /// steps, it gives the compute rate beside communication.
  bool wantsAloneStep() const;
  /// Whether `replan` is due now (after a step), on every rank alike.
  bool due() const;
  /// Agrees on a profile and a model (the per-instruction medians of the
  /// rank with the most compute per step, its layers alone where the
  /// compute rate was measured; per allreduce, the last rank's start to
  /// the last rank's return), plans with the executor's strategy, and
  /// switches every rank to the new groups.
  /// Errors (a re-layout that cannot be allocated) end the run.
  llvm::Expected<ReplanEvent> replan(int64_t stepsDone);
  /// The agreed profile of the last re-plan, with the fitted model as its
  /// `comm` (a `--plan-profile` that plans the same groups from the start).
  const schedule::Profile &lastProfile() const { return agreedProfile; }

private:
  /// One allreduce on this rank's clock: the model's start (the group
  /// queued and the previous allreduce done), the call's return, and the
  /// step's end of backward.
  struct Job {
    double bytes, readyUs, endUs, backwardEndUs;
  };
  static std::vector<schedule::MeasuredAllreduce>
  onOneClock(CommEngine &engine, llvm::ArrayRef<Job> jobs,
             double &clockSpreadUs);
  // The phases of `replan`, each collective.
  /// Per instruction its time, agreed: the compute rate beside
  /// communication (from the alone step), then the slowest rank's medians
  /// paced by the per-step slowest. `sameJobs`: every rank measured as many
  /// allreduces.
  std::vector<double> agreeLayerTimes(ReplanEvent &ev, int64_t stepsDone,
                                      bool &sameJobs);
  /// The allreduce model (fitReplanModel) with the call's start on compute
  /// agreed across the ranks.
  schedule::CommModel
  agreeModel(ReplanEvent &ev,
             llvm::ArrayRef<schedule::MeasuredAllreduce> measured,
             bool sameJobs);
  /// Rank 0's new group ends, every rank's; empty (and `ev.note` saying
  /// why) when there is none. Under the plan's compression policy, each
  /// group's PowerSGD rank in `ranks` (0: plain; empty: none compressed).
  std::vector<unsigned> agreeGroupEnds(ReplanEvent &ev,
                                       const schedule::Profile &profile,
                                       const schedule::CommModel &model,
                                       std::vector<unsigned> &ranks);
  /// Clears the measurements: the next re-plan measures the groups then
  /// in place from scratch.
  void forgetMeasurements();
  Executor &exec;
  CommEngine &engine;
  ReplanOptions options;
  /// Whether this grouping measures a step alone before re-planning.
  bool measuresAlone() const;
  /// Measured steps with the allreduces where the plan puts them.
  int64_t planSteps() const;
  /// Per measured step, each instruction's time.
  std::vector<std::vector<double>> stepUs;
  /// Per instruction, over measured steps: the time an allreduce of this
  /// rank was in flight beside it; and its time in the alone step.
  std::vector<double> besideUs, aloneUs;
  bool aloneMeasured = false;
  double aloneStartUs = 0, aloneEndUs = 0;
  int64_t measuredSteps = 0;
  bool done = false; ///< `once` ran
  size_t eventsAt = 0;
  std::vector<Job> jobs;
  /// The measured starts that found the communication thread idle: their
  /// time on the compute thread (schedule::CommModel::callComputeUs).
  std::vector<double> idleStarts;
  schedule::Profile agreedProfile;
};

} // namespace oasr::rt

#endif // OASR_RUNTIME_REPLAN_H
