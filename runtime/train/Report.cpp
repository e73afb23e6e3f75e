//===- Report.cpp - What a training run prints about itself --------------===//

#include "oasr/Runtime/Report.h"
#include "oasr/Runtime/Training.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <vector>

namespace oasr::rt {

static std::string formatMs(double us) {
  return llvm::formatv("{0:f3} ms", us * 1e-3).str();
}

std::string formatReplan(const ReplanEvent &ev,
                         llvm::ArrayRef<double> stepsUs) {
  std::string head = llvm::formatv("replan after step {0}: ", ev.step).str();
  if (!ev.note.empty())
    return head + "plan kept (" + ev.note + ")";
  std::vector<double> sorted(stepsUs.begin(), stepsUs.end());
  std::sort(sorted.begin(), sorted.end());
  double stepUs = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  double costUs = ev.planUs + ev.switchUs;
  std::string fitted =
      ev.compresses
          ? llvm::formatv("the plan's alpha {0:e2} s, beta {1:e2} s/B and "
                          "overlap rate {2:f2}: groups sent as PowerSGD "
                          "factors are not allreduces of their bytes to fit",
                          ev.comm.alphaS, ev.comm.betaSPerByte,
                          ev.comm.overlapRate)
                .str()
          : llvm::formatv(
                "alpha {0:e2} s{1}, beta {2:e2} s/B, overlap rate {3:f2}{4}, "
                "fitted to {5} allreduce(s) of {6} size(s), each from the "
                "last rank's start to the last rank's return, clocks aligned "
                "within {7:f0} us",
                ev.comm.alphaS, ev.alphaFromPlan ? " (the plan's)" : "",
                ev.comm.betaSPerByte, ev.comm.overlapRate,
                ev.overlapFromPlan ? " (the plan's)" : "", ev.jobs, ev.sizes,
                ev.clockSkewUs)
                .str();
  if (ev.computeRateMeasured)
    fitted += llvm::formatv("; compute beside an allreduce at {0:f2} of its "
                            "speed in step {1}, whose allreduces waited for "
                            "the end of backward",
                            ev.computeRate, ev.aloneStep)
                  .str();
  else if (!ev.computeRateNote.empty())
    fitted += "; compute rate not measured (" + ev.computeRateNote + ")";
  if (ev.callStarts)
    fitted += llvm::formatv("; a call's start on compute {0:f0} us (the "
                            "ranks' medians, {1} start(s) here found the "
                            "communication thread idle)",
                            ev.comm.callComputeUs, ev.callStarts)
                  .str();
  if (ev.stragglerFactor > 1)
    fitted += llvm::formatv("; compute x{0:f3}, the slowest rank of each "
                            "step against the slowest rank's median",
                            ev.stragglerFactor)
                  .str();
  std::string cost =
      llvm::formatv("planning {0:f2} ms + switch {1:f2} ms = {2:f2}% of a step",
                    ev.planUs * 1e-3, ev.switchUs * 1e-3,
                    stepUs > 0 ? 100 * costUs / stepUs : 0.0);
  const std::string factors =
      ev.compresses
          ? (ev.changed
                 ? llvm::formatv(" ({0} -> {1} as PowerSGD factors)",
                                 ev.oldCompressed, ev.newCompressed)
                       .str()
                 : llvm::formatv(" ({0} as PowerSGD factors)", ev.oldCompressed)
                       .str())
          : "";
  if (!ev.changed) {
    std::string why =
        ev.notFasterGroups
            ? llvm::formatv(" (the strategy's {0} group(s): {1}, not faster)",
                            ev.notFasterGroups, formatMs(ev.notFasterUs))
                  .str()
            : "";
    return head +
           llvm::formatv("kept {0} group(s){5}{1}, predicted {2} per step from "
                         "this run's measurements ({3}); {4}",
                         ev.newGroups, why, formatMs(ev.newPredictedUs), fitted,
                         cost, factors)
               .str();
  }
  return head +
         llvm::formatv("{0} -> {1} group(s){7}, predicted {2} -> {3} per step "
                       "(gain {4}) from this run's measurements ({5}); {6}",
                       ev.oldGroups, ev.newGroups, formatMs(ev.oldPredictedUs),
                       formatMs(ev.newPredictedUs),
                       formatMs(ev.oldPredictedUs - ev.newPredictedUs), fitted,
                       cost, factors)
             .str();
}

void printSummary(std::FILE *out, const TrainSummary &s,
                  const SummaryContext &c) {
  const double ms = 1e-3;
  const bool replanned =
      llvm::any_of(s.replans, [](const ReplanEvent &e) { return e.changed; });
  std::fprintf(out,
               "summary: %lld steps on %d rank(s), strategy %s, %zu "
               "group(s)\n",
               (long long)s.steps, c.ranks,
               c.strategy.empty() ? "?" : c.strategy.c_str(), c.groups);
  std::fprintf(out,
               "  mean iteration   %9.3f ms (median %.3f ms, range "
               "%.3f-%.3f ms%s)\n",
               s.meanIterationUs * ms, s.medianIterationUs * ms,
               s.minIterationUs * ms, s.maxIterationUs * ms,
               s.replans.empty() ? ""
               : replanned       ? ", steps after the re-plan"
                                 : ", steps after the last re-plan");
  std::fprintf(out, "  compute          %9.3f ms (forward %.3f ms)\n",
               s.computeUs * ms, s.forwardUs * ms);
  // The plan and its prediction describe the planned allreduces, which
  // only sync-sgd runs; the other algorithms block in their exchanges.
  if (!c.planned) {
    std::fprintf(out,
                 "  exposed comm     %9.3f ms (blocked in %s's "
                 "exchanges)\n",
                 s.exposedCommUs * ms, c.algorithm.c_str());
    std::fprintf(out,
                 "  predicted        n/a (the plan predicts sync-sgd's "
                 "allreduces, which --algo=%s does not run)\n",
                 c.algorithm.c_str());
  } else {
    // Hidden: the share of the time spent communicating that compute did
    // not wait for. After a re-plan "communicating" is the run's fitted
    // time of each allreduce: the thread's run-queue delay is not all lost
    // where the socket keeps the wire busy meanwhile (docs/runtime.md).
    const bool fitted = s.commFittedUs >= 0;
    double communicating = fitted ? s.commFittedUs : s.commRunningUs;
    double hidden =
        communicating > 0
            ? 100.0 *
                  std::clamp(1.0 - s.exposedCommUs / communicating, 0.0, 1.0)
            : 100.0;
    if (fitted)
      std::fprintf(out,
                   "  exposed comm     %9.3f ms (allreduce busy %.3f ms: "
                   "communicating %.3f ms by this run's fit, the rest waiting "
                   "for the other ranks or a CPU, of it %.3f ms runnable "
                   "without one; queued %.3f ms more before the calls; %.0f%% "
                   "of communicating hidden)\n",
                   s.exposedCommUs * ms, s.commBusyUs * ms, communicating * ms,
                   s.commCpuWaitUs * ms, s.commDispatchUs * ms, hidden);
    else if (s.cpuWaitMeasured)
      std::fprintf(out,
                   "  exposed comm     %9.3f ms (allreduce busy %.3f ms: "
                   "communicating %.3f ms, without a CPU %.3f ms; queued "
                   "%.3f ms more before the calls; %.0f%% of communicating "
                   "hidden)\n",
                   s.exposedCommUs * ms, s.commBusyUs * ms, communicating * ms,
                   s.commCpuWaitUs * ms, s.commDispatchUs * ms, hidden);
    else
      std::fprintf(out,
                   "  exposed comm     %9.3f ms (allreduce busy %.3f ms, its "
                   "time without a CPU not measurable here; queued %.3f ms "
                   "more before the calls; %.0f%% hidden)\n",
                   s.exposedCommUs * ms, s.commBusyUs * ms,
                   s.commDispatchUs * ms, hidden);
    double measured = s.medianIterationUs;
    // A re-plan that could not plan left the compiled plan's model.
    const bool refitted = llvm::any_of(
        s.replans, [](const ReplanEvent &e) { return e.note.empty(); });
    std::string from = refitted ? "this run's measurements" : c.predictedFrom;
    if (s.predictedUs >= 0)
      std::fprintf(out,
                   "  predicted        %9.3f ms (measured/predicted "
                   "%.2f, median; from %s)\n",
                   s.predictedUs * ms,
                   s.predictedUs > 0 ? measured / s.predictedUs : 0.0,
                   from.c_str());
    else if (!c.strategy.empty())
      std::fprintf(out,
                   "  predicted        n/a (%s was planned without a "
                   "communication model; `oasr-bench comm` measures "
                   "one)\n",
                   c.strategy.c_str());
    else
      std::fprintf(out, "  predicted        n/a (module has no oasr.plan)\n");
    if (!s.replans.empty()) {
      const ReplanEvent &first = s.replans.front();
      std::string before =
          s.initialPredictedUs >= 0
              ? llvm::formatv("{0:f3} ms (from {1})", s.initialPredictedUs * ms,
                              c.predictedFrom)
                    .str()
              : "n/a";
      std::fprintf(out,
                   "  before re-plan   predicted %s, measured median %.3f ms "
                   "over %lld step(s); %u -> %u group(s)\n",
                   before.c_str(), s.beforeMedianIterationUs * ms,
                   (long long)s.beforeSteps, first.oldGroups,
                   s.replans.back().newGroups);
    }
  }
  if (c.planned && s.replayedUs > 0) {
    std::string starts =
        s.callStarts ? llvm::formatv("; a call's start held compute {0:f0} us, "
                                     "the median of {1} that found the "
                                     "communication thread idle",
                                     s.callComputeUs, s.callStarts)
                           .str()
                     : "";
    if (s.stragglerFactor > 1)
      starts += llvm::formatv("; compute x{0:f3}, the slowest rank of each "
                              "step against this rank's median",
                              s.stragglerFactor)
                    .str();
    std::fprintf(out,
                 "  replayed         %9.3f ms (the plan's timeline model "
                 "on this run's measured profile; measured/replayed "
                 "%.2f%s)\n",
                 s.replayedUs * ms, s.meanIterationUs / s.replayedUs,
                 starts.c_str());
  }
  std::fprintf(out, "  algorithm        %s\n", c.algorithm.c_str());
  if (!c.algorithmReport.empty())
    std::fprintf(out, "                   %s\n", c.algorithmReport.c_str());
  if (!c.dataReport.empty())
    std::fprintf(out, "  data             %s\n", c.dataReport.c_str());
  std::fprintf(out, "  final loss       %9.4f\n", s.lastLoss);
  if (s.lossScale > 0)
    std::fprintf(out,
                 "  loss scale       %9.0f (f16, dynamic: %lld step(s) "
                 "skipped for non-finite gradients)\n",
                 s.lossScale, (long long)s.skippedSteps);
  if (s.medianGradNorm >= 0)
    std::fprintf(out,
                 "  gradient norm    %9.4f (median before clipping; %lld of "
                 "%lld step(s) clipped to %g)\n",
                 s.medianGradNorm, (long long)s.clippedSteps,
                 (long long)s.normSteps, s.clipGradNorm);
  if (s.accumulate > 1)
    std::fprintf(out,
                 "  accumulation     %9lld micro-batches per step: the first "
                 "%lld took %.3f ms (median), the last is the step above\n",
                 (long long)s.accumulate, (long long)(s.accumulate - 1),
                 s.microBatchesUs * 1e-3);
  if (s.trainAccuracy >= 0)
    std::fprintf(out, "  train accuracy   %8.1f%%\n", 100 * s.trainAccuracy);
  if (s.testAccuracy >= 0)
    std::fprintf(out, "  test accuracy    %8.1f%% (%lld samples)\n",
                 100 * s.testAccuracy, (long long)s.testSamples);
  if (s.testLoss >= 0)
    std::fprintf(out, "  test loss        %9.4f (eval mode)\n", s.testLoss);
  if (s.perplexity >= 0)
    std::fprintf(out, "  perplexity       %9.3f\n", s.perplexity);
  std::fflush(out);
}

} // namespace oasr::rt
