//===- Trainer.cpp - The training loop ------------------------------------===//
//
// train(): a StepLoop feeds batches, runs the algorithm's steps, records,
// logs, checkpoints, evaluates and re-plans, then summarizes; the
// algorithms live in algorithms/, evaluation in Evaluation.cpp, traces and
// profiles in TraceProfile.cpp.
//
//===----------------------------------------------------------------------===//

#include "TrainImpl.h"
#include "oasr/Runtime/MetricsPlot.h"
#include "oasr/Support/JSON.h"

#include "llvm/Support/MemoryBuffer.h"

#include <optional>

namespace oasr::rt {

std::string rankName(const Communicator &comm) {
  return "rank " + std::to_string(comm.rank()) + " (" + comm.host() + ")";
}

/// All ranks start from rank 0's weights and state, whatever each loaded.
void broadcastPersistent(Executor &exec, CommEngine &engine) {
  if (engine.communicator().size() == 1)
    return;
  for (PersistentTensor &t : exec.persistent()) {
    void *p = t.ref.data;
    size_t n = t.ref.bytes();
    engine.run([=](Communicator &c) { c.broadcast(p, n, 0); });
  }
}

/// Runs `fn` on the communication thread as a recorded exchange and waits.
void runExchange(CommEngine &engine, std::function<void(Communicator &)> fn) {
  engine.wait(engine.enqueue(std::move(fn), kExchangeJob, /*record=*/true));
}

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

static std::string formatDuration(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s / 60), int(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
  return buf;
}

/// --fail-at-step/--fail-rank (testing): a crash by --fail-signal, else an
/// MPI_Abort naming the step.
static void injectFailure(const TrainOptions &options, Communicator &comm,
                          int64_t step) {
  if (step != options.failAtStep || comm.rank() != options.failRank)
    return;
  if (options.failSignal > 0)
    std::raise(options.failSignal); // a crash: no message, no MPI_Abort
  silenceFailureReport();
  comm.abort("oasr-run: " + rankName(comm) +
                 ": error: injected failure at step " + std::to_string(step) +
                 " (--fail-at-step)",
             3);
}

namespace {
/// The algorithm's hooks, recording |this rank's gradient| of each of a
/// group's parameters before the algorithm starts averaging it
/// (TrainOptions::magnitudes).
class MagnitudeRecorder final : public StepHooks {
public:
  MagnitudeRecorder(Executor &exec, StepHooks &inner, GradientMagnitudes &out)
      : exec(exec), inner(inner), out(out) {}
  void gradientsReady(unsigned group) override {
    if (inner.ordersAfterDevice())
      exec.backend().synchronize();
    for (const std::string &name : exec.groups()[group].params) {
      TensorRef g = exec.gradient(name);
      std::vector<float> &abs = out.abs[name];
      abs.resize(size_t(g.numel()));
      exec.backend().copyToHost(abs.data(), g.data, abs.size() * sizeof(float));
      for (float &x : abs)
        x = std::fabs(x);
    }
    inner.gradientsReady(group);
  }
  void gradientsNeeded(unsigned group) override {
    inner.gradientsNeeded(group);
  }
  bool ordersAfterDevice() const override { return inner.ordersAfterDevice(); }

private:
  Executor &exec;
  StepHooks &inner;
  GradientMagnitudes &out;
};
} // namespace

/// The progress lines (every --log-every steps and after the last): the
/// interval's mean loss, accuracy and throughput, summed over the ranks of
/// a lockstep algorithm.
class ProgressLog {
public:
  ProgressLog(const TrainOptions &options, TrainingAlgorithm &algo,
              CommEngine &engine, bool tokens, bool labelled, int64_t first,
              int64_t runStartNs)
      : options(options), algo(algo), engine(engine), tokens(tokens),
        labelled(labelled), first(first), runStartNs(runStartNs),
        intervalStartNs(runStartNs) {}
  /// The metrics file (rank 0), when one is written.
  std::unique_ptr<llvm::raw_fd_ostream> metrics;
  /// The step's host scalars and exposed communication, for the line and
  /// the metrics file.
  void facts(double lr, double gradNorm, double blockedUs) {
    lastLr = lr;
    lastNorm = gradNorm;
    intervalBlockedUs += blockedUs;
  }
  void add(double loss, double correct, double samples, double labels) {
    intervalLoss += loss;
    intervalCorrect += correct;
    intervalSamples += samples;
    intervalLabels += labels;
    ++intervalSteps;
  }
  /// After step `step` (0-based): prints when one is due, and sets the
  /// summary's loss and accuracy to the interval's.
  void stepDone(int64_t step, TrainSummary &summary) {
    bool last = step + 1 == options.steps;
    // Every rank decides alike: the sums below are collective.
    const bool records = !options.recipe.metricsPath.empty();
    if ((options.quiet && !records) ||
        ((step + 1) % std::max<int64_t>(options.logEvery, 1) != 0 && !last))
      return;
    double agg[5] = {intervalLoss, intervalCorrect, intervalSamples,
                     double(intervalSteps), intervalLabels};
    if (algo.lockstep())
      engine.run([&](Communicator &c) { c.allreduceSum(agg, 5); });
    int64_t now = steadyNs();
    double secs = double(now - intervalStartNs) * 1e-9;
    double totalSecs = double(now - runStartNs) * 1e-9;
    double meanLoss = agg[0] / std::max(agg[3], 1.0);
    double acc = agg[4] > 0 ? agg[1] / agg[4] : 0;
    summary.trainAccuracy = labelled ? acc : -1;
    summary.lastLoss = meanLoss;
    if (engine.communicator().rank() == 0) {
      double ips = secs > 0 ? agg[2] / secs : 0;
      double eta = totalSecs / double(step + 1 - first) *
                   double(options.steps - step - 1);
      const char *who = algo.lockstep() ? "" : "  [rank 0]";
      const char *unit = tokens ? "seq" : "img";
      std::string extra;
      if (options.recipe.schedule)
        extra += llvm::formatv("  lr {0:e3}", lastLr).str();
      if (lastNorm >= 0)
        extra += llvm::formatv("  |g| {0:f4}", lastNorm).str();
      if (!options.quiet) {
        std::string acc100 =
            labelled ? llvm::formatv("  acc {0,5:f1}%", 100.0 * acc).str() : "";
        std::printf("step %lld/%lld  loss %.4f%s%s  %.1f %s/s  ETA %s%s\n",
                    (long long)(step + 1), (long long)options.steps, meanLoss,
                    acc100.c_str(), extra.c_str(), ips, unit,
                    formatDuration(eta).c_str(), who);
        std::fflush(stdout);
      }
      if (metrics) {
        llvm::json::Object line{
            {"step", step + 1},
            {"loss", meanLoss},
            {"lr", lastLr},
            {"samples_per_s", ips},
            {"step_ms",
             secs * 1e3 / double(std::max<int64_t>(intervalSteps, 1))},
            {"exposed_comm_ms",
             intervalBlockedUs * 1e-3 /
                 double(std::max<int64_t>(intervalSteps, 1))}};
        if (labelled)
          line["accuracy"] = acc;
        if (lastNorm >= 0)
          line["grad_norm"] = lastNorm;
        *metrics << formatJSON(std::move(line)) << "\n";
        metrics->flush();
      }
    }
    intervalLoss = intervalCorrect = intervalSamples = intervalLabels = 0;
    intervalBlockedUs = 0;
    intervalSteps = 0;
    intervalStartNs = steadyNs();
  }

private:
  const TrainOptions &options;
  TrainingAlgorithm &algo;
  CommEngine &engine;
  bool tokens, labelled;
  int64_t first, runStartNs, intervalStartNs;
  double intervalLoss = 0, intervalCorrect = 0, intervalSamples = 0,
         intervalLabels = 0, intervalBlockedUs = 0;
  int64_t intervalSteps = 0;
  double lastLr = 0, lastNorm = -1;
};

/// Opens --metrics for appending after `startStep` completed steps: a line
/// of a later step (a run that went on past the checkpoint it resumes
/// from) is dropped, so a resumed run has no step twice.
static llvm::Expected<std::unique_ptr<llvm::raw_fd_ostream>>
openMetrics(const std::string &path, int64_t startStep) {
  std::string kept;
  if (auto old = llvm::MemoryBuffer::getFile(path)) {
    llvm::SmallVector<llvm::StringRef> lines;
    (*old)->getBuffer().split(lines, '\n', -1, false);
    for (llvm::StringRef l : lines) {
      llvm::Expected<llvm::json::Value> v = llvm::json::parse(l);
      if (!v) {
        llvm::consumeError(v.takeError());
        continue; // a line cut short by a crash
      }
      const llvm::json::Object *o = v->getAsObject();
      std::optional<int64_t> at = o ? o->getInteger("step") : std::nullopt;
      if (at && *at <= startStep)
        kept += l.str() + "\n";
    }
  }
  std::error_code ec;
  auto os =
      std::make_unique<llvm::raw_fd_ostream>(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return llvm::createStringError(ec, "--metrics=%s: cannot write: %s",
                                   path.c_str(), ec.message().c_str());
  *os << kept;
  return std::move(os);
}

/// A non-finite loss stops the run (unless --allow-nonfinite, or the f16
/// loss scaler skipped the step, which changed nothing): the error names
/// the first non-finite tensor after the step's update.
static llvm::Error checkFinite(Executor &exec, TrainingAlgorithm &algo,
                               const TrainOptions &options, int64_t step,
                               double loss) {
  if (std::isfinite(loss) || options.allowNonFinite || exec.lastStepSkipped())
    return llvm::Error::success();
  exec.completeUpdates(algo); // "after the step's update"
  std::string what = exec.firstNonFinite();
  what = what.empty() ? "every parameter and forward result is finite"
                      : "the first non-finite tensor is " + what;
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "step %lld: the loss is %s; after the step's update, %s "
      "(--allow-nonfinite keeps going)",
      (long long)(step + 1), std::isnan(loss) ? (const char *)"NaN" : "Inf",
      what.c_str());
}

/// The step loop: feed, run, record, log, checkpoint, evaluate and
/// re-plan, then the summary. train() is one StepLoop's run().
class StepLoop {
public:
  StepLoop(Executor &exec, DataLoader &data, TrainingAlgorithm &algo,
           CommEngine &engine, const TrainOptions &options,
           TrainSummary &summary)
      : exec(exec), data(data), algo(algo), engine(engine), options(options),
        summary(summary), comm(engine.communicator()), rank(comm.rank()),
        in(exec.input()), lab(exec.label()), n(exec.batch()),
        tokens(in.desc.dtype == DType::I64 || in.desc.dtype == DType::I32),
        replanner(exec, engine, options.replan) {}

  llvm::Error run() {
    if (llvm::Error err = check())
      return err;
    setUp();
    // A rank that does not train (a dedicated server) skips the steps; the
    // loop has no other collectives for such algorithms (they are not
    // lockstep), but every checkpoint and evaluation is one: that rank
    // joins each in turn.
    const int64_t mySteps = algo.trainsOn(rank) ? options.steps : 0;
    if (!algo.trainsOn(rank))
      for (int64_t done = first + 1; done <= options.steps; ++done)
        if (llvm::Error err = afterStep(done))
          return err;
    progress.emplace(options, algo, engine, tokens, lab.data != nullptr, first,
                     runStartNs);
    if (rank == 0 && !options.recipe.metricsPath.empty()) {
      auto m = openMetrics(options.recipe.metricsPath, first);
      if (!m)
        return m.takeError();
      progress->metrics = std::move(*m);
    }
    for (int64_t step = first; step < mySteps; ++step)
      if (llvm::Error err = runOne(step))
        return err;
    exec.completeUpdates(algo);
    algo.finish(exec, engine);
    engine.drain();
    llvm::Error err = summarize();
    if (!err && progress && progress->metrics)
      plotMetrics();
    return err;
  }

private:
  /// The data against the model's input; checkpoints against the algorithm.
  llvm::Error check() const {
    if (!tokens && in.desc.dtype != DType::F32)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "the model's input is %s; the data "
                                     "loaders feed f32 images or integer "
                                     "token ids",
                                     dtypeName(in.desc.dtype));
    if (tokens != data.givesTokens())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          tokens ? "the model's input is token ids (%s); --data=%s gives images"
                 : "the model's input is f32 images; --data=%s gives token ids",
          tokens ? dtypeName(in.desc.dtype) : data.describe().c_str(),
          data.describe().c_str());
    // A checkpoint is written where every rank has taken the same steps.
    if (options.checkpoint.every > 0 &&
        algo.checkpointKind() == TrainingAlgorithm::CheckpointKind::None)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "%s cannot be checkpointed (its ranks do not step together)",
          algo.name());
    return llvm::Error::success();
  }

  void setUp() {
    // One label per sample, or one per token (next-token labels).
    feeder.emplace(data, in, lab, n, tokens);
    labelCount = feeder->labelsPerBatch();
    planSteps = exec.steps().size();
    times.assign(planSteps, OpTiming{});
    sumUs.assign(planSteps, 0.0);
    durations.assign(planSteps, 0.0);
    kinds = stepKinds(exec);
    // Re-planning from this run's measurements (sync SGD only: the plan
    // describes its allreduces).
    replanning = options.replan.mode != ReplanOptions::Mode::Off &&
                 llvm::StringRef(algo.name()) == kSyncSGDName;
    history.add(exec);
    summary.initialPredictedUs = exec.predictedIterationUs();
    if (!options.tracePath.empty())
      trace.reserve(size_t(std::min(options.steps, options.traceSteps)) *
                    planSteps);
    algo.setup(exec, engine);
    engine.run([](Communicator &c) { c.barrier(); });
    // The compute thread's timings on the events' clock: a start is
    // matched with the job it queued (idleStartUs).
    epochNs = engine.resetEpoch();
    engine.clearEvents();
    runStartNs = steadyNs();
    first = std::max<int64_t>(options.startStep, 0);
  }

  /// One training step and what follows it.
  llvm::Error runOne(int64_t step) {
    injectFailure(options, comm, step);
    // Gradient accumulation: the step's earlier micro-batches, then the
    // last one as the step.
    double microLoss = 0, microCorrect = 0;
    const int64_t micro = std::max<int64_t>(options.recipe.accumulate, 1);
    int64_t m0 = steadyNs();
    for (int64_t k = 0; k + 1 < micro; ++k) {
      feeder->next();
      if (llvm::Error err = exec.runMicroBatch())
        return err;
      microLoss += exec.loss();
      microCorrect += double(exec.correct());
    }
    if (micro > 1)
      microUs.push_back(double(steadyNs() - m0) * 1e-3);
    feeder->next();
    // The step re-planning measures compute alone in (its allreduces held
    // until backward ended); not one of the plan's steps in the summary.
    const bool aloneStep = replanning && step + 1 < options.steps &&
                           replanner.wantsAloneStep() &&
                           algo.holdCommunication(true);
    replanner.beginStep();
    // The step's host scalars: the schedule's rate, the clipping bound.
    Executor::StepScalars scalars;
    const double base = exec.baseLearningRate();
    const double lr = options.recipe.schedule && base > 0
                          ? options.recipe.schedule->rate(step, base)
                          : base;
    if (base > 0)
      scalars.lrScale = lr / base;
    scalars.clipNorm = options.recipe.clipGradNorm;
    exec.setStepScalars(scalars);
    int64_t t0 = steadyNs();
    if (options.magnitudes) {
      MagnitudeRecorder recorder(exec, algo, *options.magnitudes);
      exec.runStep(recorder, times.data(), epochNs);
    } else {
      exec.runStep(algo, times.data(), epochNs);
    }
    algo.afterStep(exec, engine, step);
    int64_t t1 = steadyNs();
    double blocked = algo.takeBlockedUs();
    record(step, double(t1 - t0) * 1e-3, blocked, aloneStep);
    const double norm = exec.lastGradNorm();
    if (norm >= 0) {
      gradNorms.push_back(norm);
      clipped += norm > options.recipe.clipGradNorm;
    }
    progress->facts(lr, norm, blocked);

    double loss = (microLoss + exec.loss()) / double(micro);
    if (exec.scalesLoss()) {
      summary.lossScale = exec.lossScaler().scale;
      summary.skippedSteps = exec.lossScaler().skipped;
    }
    if (llvm::Error err = checkFinite(exec, algo, options, step, loss))
      return err;
    noteProgress(step + 1);
    progress->add(loss, microCorrect + double(exec.correct()),
                  double(n * micro), double(labelCount * micro));
    summary.lastLoss = loss;
    progress->stepDone(step, summary);
    if (llvm::Error err = afterStep(step + 1))
      return err;
    return replanAfter(step);
  }

  /// A measured step's times (bookkeeping, not part of the measured step).
  void record(int64_t step, double stepUs, double blocked, bool aloneStep) {
    double compute = 0;
    for (size_t k = 0; k < planSteps; ++k)
      if (exec.steps()[k].kind != StepKind::Comm)
        compute += times[k].endUs - times[k].startUs;
    bool warmup = (step == first && options.steps > first + 1) ||
                  (step == warmupStep && options.steps > step + 1);
    if (aloneStep)
      algo.holdCommunication(false);
    if (replanning)
      replanner.recordStep(times.data(), warmup, aloneStep);
    if (warmup)
      commEventsBefore = engine.events().size();
    if (!warmup && !aloneStep) {
      measuredIterUs += stepUs;
      measuredComputeUs += compute;
      measuredBlockedUs += blocked;
      ++measured;
      iterationsUs.push_back(stepUs);
      for (size_t k = 0; k < planSteps; ++k) {
        durations[k] = times[k].endUs - times[k].startUs;
        sumUs[k] += durations[k];
      }
      stepKindSums.push_back(kindSums(kinds, durations));
      if (startSpans.size() < kMaxStarts)
        appendStartSpans(exec, times.data(), startSpans);
    }
    if (!options.tracePath.empty() && step - first < options.traceSteps)
      for (size_t k = 0; k < planSteps; ++k)
        trace.push_back(
            Rec{0, double(history.base + k), times[k].startUs, times[k].endUs});
  }

  /// The checkpoint and evaluation due after `completed` steps (collective).
  llvm::Error afterStep(int64_t completed) {
    if (options.checkpoint.every > 0 &&
        completed % options.checkpoint.every == 0)
      if (llvm::Error err = writeCheckpoint(completed))
        return err;
    if (options.evalEvery > 0 && completed % options.evalEvery == 0 &&
        evaluates())
      evaluateNow(completed);
    return llvm::Error::success();
  }

  llvm::Error writeCheckpoint(int64_t completed) {
    exec.completeUpdates(algo); // a steady plan's last updates
    int64_t c0 = steadyNs();
    CheckpointContent content;
    content.perRank =
        algo.checkpointKind() == TrainingAlgorithm::CheckpointKind::PerRank;
    content.algorithmState = algo.saveAlgorithmState();
    content.rankState = algo.saveRankState();
    auto written = saveCheckpoint(exec, data, engine, options.checkpoint,
                                  completed, content);
    if (!written)
      return written.takeError();
    noteCheckpoint(*written);
    if (rank == 0 && !options.quiet) {
      size_t bytes = 0;
      for (const PersistentTensor &t : std::as_const(exec).persistent())
        bytes += t.ref.bytes();
      std::printf("checkpoint %s (%.1f MiB of tensors, %.0f ms)\n",
                  written->c_str(), double(bytes) / 1048576.0,
                  double(steadyNs() - c0) * 1e-6);
      std::fflush(stdout);
    }
    return llvm::Error::success();
  }

  /// --eval-every: the test accuracy after every N-th step, evaluated as
  /// after the last step (all ranks' shards summed; the weights
  /// beginEvaluation puts in place). Collective. BN statistics that the
  /// evaluation's forward passes update are put back, so training goes on
  /// as without it. The time printed is the run's wall time since the first
  /// step began, less the evaluations' own.
  void evaluateNow(int64_t completed) {
    exec.completeUpdates(algo);
    int64_t e0 = steadyNs();
    std::vector<std::vector<char>> bnState;
    for (const PersistentTensor &t : std::as_const(exec).persistent())
      if (t.kind == PersistentTensor::State)
        bnState.emplace_back(t.ref.as<char>(),
                             t.ref.as<char>() + t.ref.bytes());
    algo.beginEvaluation(exec, engine);
    EvalResult r =
        evaluate(exec, data, engine, options.eval, algo.trainsOn(rank));
    algo.endEvaluation(exec, engine);
    size_t k = 0;
    for (const PersistentTensor &t : exec.persistent())
      if (t.kind == PersistentTensor::State) {
        std::copy(bnState[k].begin(), bnState[k].end(), t.ref.as<char>());
        ++k;
      }
    if (rank == 0 && r.batches) {
      std::string ppl =
          r.tokens ? llvm::formatv("  perplexity {0:f2}", r.perplexity()).str()
                   : "";
      std::printf("eval step %lld  time %.3f s  test accuracy %.2f%% "
                  "(%lld/%lld)  loss %.4f%s\n",
                  (long long)completed, double(e0 - runStartNs - evalNs) * 1e-9,
                  100.0 * r.accuracy(), (long long)r.correct,
                  (long long)r.labels, r.loss, ppl.c_str());
      std::fflush(stdout);
      recordEvaluation(completed, r);
    }
    evalNs += steadyNs() - e0;
  }

  /// The metrics file's plot beside it (rank 0); a failure only warns.
  void plotMetrics() {
    progress->metrics->close();
    std::string svg;
    if (llvm::Error err = writeMetricsPlot(options.recipe.metricsPath, &svg))
      llvm::errs() << "oasr-run: warning: --metrics: "
                   << llvm::toString(std::move(err)) << "\n";
    else if (!options.quiet)
      std::printf("metrics %s, plotted in %s\n",
                  options.recipe.metricsPath.c_str(), svg.c_str());
  }

  /// An evaluation's line in the metrics file (rank 0).
  void recordEvaluation(int64_t completed, const EvalResult &r) {
    if (!progress || !progress->metrics || !r.batches)
      return;
    llvm::json::Object line{{"step", completed},
                            {"eval_loss", r.loss},
                            {"eval_accuracy", r.accuracy()},
                            {"eval_samples", r.samples}};
    if (r.tokens)
      line["perplexity"] = r.perplexity();
    *progress->metrics << formatJSON(std::move(line)) << "\n";
    progress->metrics->flush();
  }

  /// Whether the run evaluates: a model with labels, and --eval-data or
  /// the training data's held-out split.
  bool evaluates() const {
    return options.evaluate && lab.data &&
           (options.eval.data || data.testSet());
  }

  /// At a step boundary on every rank alike: measure, agree, re-plan,
  /// switch. The summary then measures the new groups from the step after
  /// the next (the next warms the new buffers up).
  llvm::Error replanAfter(int64_t step) {
    if (!replanning || step + 1 >= options.steps || !replanner.due())
      return llvm::Error::success();
    auto ev = replanner.replan(step + 1);
    if (!ev)
      return ev.takeError();
    if (rank == 0 && !options.quiet) {
      std::printf("%s\n", formatReplan(*ev, iterationsUs).c_str());
      std::fflush(stdout);
    }
    summary.replans.push_back(*ev);
    if (!options.replanProfilePath.empty() && rank == 0 && ev->note.empty())
      if (auto err = writeJson(options.replanProfilePath,
                               schedule::toJSON(replanner.lastProfile())))
        return err;
    if (ev->changed) {
      history.add(exec);
      planSteps = exec.steps().size();
      times.assign(exec.steps().size(), OpTiming{});
      sumUs.assign(exec.steps().size(), 0.0);
      durations.assign(exec.steps().size(), 0.0);
      kinds = stepKinds(exec);
    }
    stepKindSums.clear();
    startSpans.clear();
    // The summary describes the last plan's steps.
    beforeUs.insert(beforeUs.end(), iterationsUs.begin(), iterationsUs.end());
    iterationsUs.clear();
    measuredIterUs = measuredComputeUs = measuredBlockedUs = 0;
    measured = 0;
    std::fill(sumUs.begin(), sumUs.end(), 0.0);
    warmupStep = step + 1;
    return llvm::Error::success();
  }

  /// The communication thread's time since the last re-plan, and the
  /// fitted model's time for the same allreduces (their groups are the
  /// current ones).
  double communicationSummary() {
    const ReplanEvent *fit = nullptr;
    for (const ReplanEvent &ev : summary.replans)
      if (ev.note.empty())
        fit = &ev;
    std::map<unsigned, uint64_t> groupBytes;
    for (const GradGroup &g : exec.groups())
      groupBytes[g.id] = g.buffer.bytes();
    double fittedUs = 0;
    for (size_t k = commEventsBefore; k < engine.events().size(); ++k) {
      const CommEvent &e = engine.events()[k];
      commBusyUs += e.endUs - e.startUs;
      summary.commCpuWaitUs += e.cpuWaitUs;
      summary.commDispatchUs += e.dispatchUs;
      auto g = groupBytes.find(e.job);
      if (fit && g != groupBytes.end())
        fittedUs += std::min(e.endUs - e.startUs,
                             1e6 * (fit->comm.alphaS + fit->comm.betaSPerByte *
                                                           double(g->second)));
    }
    summary.cpuWaitMeasured = engine.measuresCpuWait();
    return fit ? fittedUs : -1;
  }

  /// The measured steps' means, and the profile they make.
  llvm::Error measuredSummary(double fittedUs) {
    double m = double(measured);
    summary.meanIterationUs = measuredIterUs / m;
    summary.computeUs = measuredComputeUs / m;
    summary.exposedCommUs = measuredBlockedUs / m;
    summary.commBusyUs = commBusyUs / m;
    summary.commCpuWaitUs /= m;
    summary.commDispatchUs /= m;
    summary.commRunningUs = summary.commBusyUs - summary.commCpuWaitUs;
    if (fittedUs >= 0)
      summary.commFittedUs = fittedUs / m;
    summary.medianIterationUs = median(iterationsUs);
    summary.minIterationUs =
        *std::min_element(iterationsUs.begin(), iterationsUs.end());
    summary.maxIterationUs =
        *std::max_element(iterationsUs.begin(), iterationsUs.end());
    for (size_t k = 0; k < planSteps; ++k)
      sumUs[k] /= m;
    summary.forwardUs = kindSums(kinds, sumUs)[size_t(StepKind::Forward)];
    // The profile: the mean per instruction, scaled to the median step per
    // kind (a step another tenant slowed by half does not move it).
    scaleKindsTo(kinds, sumUs, medianKindSums(stepKindSums));
    // Sync SGD's step waits for the slowest rank of that step: the
    // profile's compute is paced by it (every rank measured the same steps).
    if (llvm::StringRef(algo.name()) == kSyncSGDName && comm.size() > 1) {
      std::vector<double> stepCompute;
      for (const KindSums &s : stepKindSums)
        stepCompute.push_back(computeUs(s));
      // This rank's profile: against its own median.
      summary.stragglerFactor = stragglerFactor(
          perStepMaxUs(engine, stepCompute), median(stepCompute));
      scaleCompute(kinds, sumUs, summary.stragglerFactor);
    }
    const KindSums profiled = kindSums(kinds, sumUs);
    const double fwd = profiled[size_t(StepKind::Forward)],
                 upd = updateUs(profiled);
    schedule::Profile profile =
        measuredProfile(exec, sumUs, fwd, upd,
                        "oasr-run measured, " + std::to_string(comm.size()) +
                            " rank(s), rank 0");
    profile.computeBesideComm = besideCommunication(exec, comm.size());
    std::vector<double> idle;
    idleStartUs(startSpans, engine.events(), idle);
    summary.callStarts = unsigned(idle.size());
    summary.callComputeUs = median(idle);
    summary.replayedUs =
        replay(exec, profile, summary.callComputeUs, comm.ranksPerNode() > 0);
    if (!options.profilePath.empty() && rank == 0)
      if (auto err = writeJson(options.profilePath, schedule::toJSON(profile)))
        return err;
    return llvm::Error::success();
  }

  /// The run's summary, trace and final test accuracy.
  llvm::Error summarize() {
    const double fittedUs = communicationSummary();
    summary.steps = options.steps;
    if (measured)
      if (llvm::Error err = measuredSummary(fittedUs))
        return err;
    summary.predictedUs = exec.predictedIterationUs();
    summary.beforeSteps = int64_t(beforeUs.size());
    summary.beforeMedianIterationUs = median(beforeUs);
    summary.accumulate = std::max<int64_t>(options.recipe.accumulate, 1);
    if (!microUs.empty())
      summary.microBatchesUs = median(microUs);
    if (!gradNorms.empty()) {
      summary.medianGradNorm = median(gradNorms);
      summary.normSteps = int64_t(gradNorms.size());
      summary.clippedSteps = clipped;
      summary.clipGradNorm = options.recipe.clipGradNorm;
    }
    if (!options.tracePath.empty())
      if (auto err = writeTrace(options.tracePath, engine, trace, history,
                                summary.replans))
        return err;
    if (evaluates()) {
      EvalResult r =
          evaluate(exec, data, engine, options.eval, algo.trainsOn(rank));
      if (r.batches) {
        summary.testAccuracy = r.accuracy();
        summary.testSamples = r.samples;
        summary.testLoss = r.loss;
        summary.perplexity = r.perplexity();
      }
      const bool logged =
          options.evalEvery > 0 && options.steps % options.evalEvery == 0;
      if (rank == 0 && !logged)
        recordEvaluation(options.steps, r);
    }
    return llvm::Error::success();
  }

  Executor &exec;
  DataLoader &data;
  TrainingAlgorithm &algo;
  CommEngine &engine;
  const TrainOptions &options;
  TrainSummary &summary;
  Communicator &comm;
  const int rank;
  const TensorRef &in, &lab;
  const int64_t n;
  const bool tokens;
  std::optional<BatchFeeder> feeder;
  int64_t labelCount = 0;
  std::optional<ProgressLog> progress;
  // The plan's instructions (re-planning changes them between steps).
  size_t planSteps = 0;
  std::vector<OpTiming> times;
  std::vector<double> sumUs, durations;
  // Each measured step's time per instruction kind: the written profile
  // is scaled to their medians (a typical step, as Replan.h's
  // typicalStepUs).
  std::vector<KindSums> stepKindSums;
  std::vector<StepKind> kinds;
  // The measured steps' allreduce starts (at most kMaxStarts), for the
  // time a call's start takes from compute (the replay charges it).
  std::vector<std::pair<double, double>> startSpans;
  static constexpr size_t kMaxStarts = 1 << 16;
  bool replanning = false;
  Replanner replanner;
  PlanHistory history;
  std::vector<double> iterationsUs, beforeUs;
  std::vector<double> gradNorms; ///< each step's, before clipping
  std::vector<double> microUs;   ///< each step's earlier micro-batches
  int64_t clipped = 0;
  int64_t warmupStep = -1; ///< the first step after a switch
  std::vector<Rec> trace;
  int64_t epochNs = 0, runStartNs = 0, evalNs = 0, first = 0;
  double measuredIterUs = 0, measuredComputeUs = 0, measuredBlockedUs = 0;
  int64_t measured = 0;
  size_t commEventsBefore = 0;
  double commBusyUs = 0;
};

llvm::Error train(Executor &exec, DataLoader &data, TrainingAlgorithm &algo,
                  CommEngine &engine, const TrainOptions &options,
                  TrainSummary &summary) {
  return StepLoop(exec, data, algo, engine, options, summary).run();
}

} // namespace oasr::rt
