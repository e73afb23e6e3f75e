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

#include <cstdint>
#include <string>
#include <vector>

namespace oasr::rt {

/// `--replan=off|once|every:N`.
struct ReplanOptions {
  enum class Mode { Off, Once, Every };
  Mode mode = Mode::Off;
  /// Every: steps between re-plans (the first after each switch warms up).
  int64_t every = 0;
  /// Steps measured before a re-plan (after one warm-up step): `once`
  /// measures 3; `every:N` measures the N - 1 steps after the warm-up.
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
  bool changed = false; ///< the plan's groups changed (else none switched)
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
  /// The uncertainty of the ranks' clock offsets the allreduce times were
  /// taken with (microseconds; 0 on one rank).
  double clockSkewUs = 0;
  bool alphaFromPlan = false;   ///< one size only: alpha kept from the plan
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

/// Whether a run's measured layer times ran beside its communication: with
/// more than one rank and more than one group, the allreduces of all but
/// the last group overlap backward by design (Profile::computeBesideComm).
bool besideCommunication(const Executor &exec, int ranks);

/// Measures sync SGD's steps and re-plans (collective: every rank calls
/// `recordStep` after the same steps and `replan` at the same step).
class Replanner {
public:
  Replanner(Executor &exec, CommEngine &engine, ReplanOptions options);

  /// Call before each step, then after it with the step's instruction
  /// timings (`exec.steps()` order, engine epoch). `warmup` steps are not
  /// measured (the first step, and the first after a switch).
  void beginStep();
  void recordStep(const OpTiming *times, bool warmup);
  /// Whether `replan` is due now (after a step), on every rank alike.
  bool due() const;
  /// Agrees on a profile and a model (slowest rank per layer; per
  /// allreduce, the rank that spent the least time in it), plans with the
  /// executor's strategy, and switches every rank to the new groups.
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
  Executor &exec;
  CommEngine &engine;
  ReplanOptions options;
  std::vector<double> sumUs; ///< per instruction, over measured steps
  int64_t measuredSteps = 0;
  bool done = false; ///< `once` ran
  size_t eventsAt = 0;
  std::vector<Job> jobs;
  schedule::Profile agreedProfile;
};

} // namespace oasr::rt

#endif // OASR_RUNTIME_REPLAN_H
