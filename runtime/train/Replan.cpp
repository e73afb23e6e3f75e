//===- Replan.cpp - Re-planning the allreduces from the run -*- C++ -*-===//
//
// What is measured (docs/runtime.md, "Re-planning from the run"):
//  - compute: every instruction of the step on the compute thread, summed
//    per layer (forward, backward) as `--profile` writes them;
//  - communication: every fused allreduce on the communication thread,
//    from when it could start (queued, the previous one done) to its
//    return, and the step's end of backward.
// Ranks agree on the slowest rank's time per layer, and per allreduce on
// the time from the last rank's start to the last rank's return, on one
// clock (offsets from barriers); alpha, beta and the overlap rate are
// fitted to those by least squares on the time
// (schedule::fitRunAllreduces).
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/Replan.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace oasr::rt {

namespace schedule = oasr::schedule;

llvm::Expected<ReplanOptions> parseReplanOption(llvm::StringRef text) {
  ReplanOptions o;
  int64_t n = 0;
  if (text == "off")
    o.mode = ReplanOptions::Mode::Off;
  else if (text == "once")
    o.mode = ReplanOptions::Mode::Once;
  else if (text.consume_front("every:") && !text.getAsInteger(10, n) && n >= 2)
    o.mode = ReplanOptions::Mode::Every, o.every = n;
  else
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "expected off, once or every:N with N >= 2 (steps between re-plans; "
        "the first after each switch is not measured)");
  return o;
}

schedule::Profile measuredProfile(const Executor &exec,
                                  llvm::ArrayRef<double> meanUs,
                                  double forwardUs, double updateUs,
                                  llvm::StringRef source) {
  const auto &steps = exec.steps();
  std::vector<std::string> order;
  std::map<std::string, double> fwd, bwd;
  for (size_t k = 0; k < steps.size() && k < meanUs.size(); ++k) {
    const PlanStepInfo &s = steps[k];
    if (s.kind == StepKind::Forward) {
      if (!fwd.count(s.layer))
        order.push_back(s.layer);
      fwd[s.layer] += meanUs[k];
    } else if (s.kind == StepKind::Backward) {
      if (!fwd.count(s.layer) && !bwd.count(s.layer))
        order.insert(order.begin(), s.layer); // no forward node: runs last
      bwd[s.layer] += meanUs[k];
    }
  }
  std::map<std::string, std::vector<schedule::GradTensor>> grads;
  for (const auto &g : exec.gradients())
    grads[g.layer].push_back(schedule::GradTensor{g.param, g.bytes, g.rows});
  schedule::Profile p;
  p.model = exec.modelName().empty() ? "model" : exec.modelName();
  p.source = source.str();
  p.batch = exec.batch();
  p.forwardUs = forwardUs;
  p.updateUs = updateUs;
  for (const std::string &l : order) {
    schedule::Layer layer;
    layer.name = l;
    layer.forwardUs = fwd.count(l) ? fwd[l] : 0.0;
    layer.backwardUs = bwd.count(l) ? bwd[l] : 0.0;
    layer.grads = grads[l];
    p.layers.push_back(std::move(layer));
  }
  return p;
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

std::vector<StepKind> stepKinds(const Executor &exec) {
  std::vector<StepKind> kinds;
  for (const PlanStepInfo &s : exec.steps())
    kinds.push_back(s.kind);
  return kinds;
}

KindSums kindSums(llvm::ArrayRef<StepKind> kinds, llvm::ArrayRef<double> us) {
  KindSums s{};
  for (size_t k = 0; k < kinds.size() && k < us.size(); ++k)
    s[size_t(kinds[k])] += us[k];
  return s;
}

KindSums medianKindSums(llvm::ArrayRef<KindSums> steps) {
  KindSums out{};
  std::vector<double> column;
  for (size_t kind = 0; kind < out.size(); ++kind) {
    column.clear();
    for (const KindSums &s : steps)
      column.push_back(s[kind]);
    out[kind] = median(column);
  }
  return out;
}

void scaleKindsTo(llvm::ArrayRef<StepKind> kinds,
                  llvm::MutableArrayRef<double> us, const KindSums &totals) {
  KindSums now = kindSums(kinds, us);
  for (size_t k = 0; k < kinds.size() && k < us.size(); ++k) {
    size_t kind = size_t(kinds[k]);
    if (kinds[k] != StepKind::Comm && now[kind] > 0)
      us[k] *= totals[kind] / now[kind];
  }
}

std::vector<double> typicalStepUs(llvm::ArrayRef<StepKind> kinds,
                                  llvm::ArrayRef<std::vector<double>> stepUs) {
  std::vector<double> out(kinds.size(), 0.0), column;
  std::vector<KindSums> sums;
  for (const std::vector<double> &t : stepUs)
    sums.push_back(kindSums(kinds, t));
  for (size_t k = 0; k < kinds.size(); ++k) {
    column.clear();
    for (const std::vector<double> &t : stepUs)
      column.push_back(t[k]);
    out[k] = median(column);
  }
  scaleKindsTo(kinds, out, medianKindSums(sums));
  return out;
}

double stragglerFactor(llvm::ArrayRef<double> perStepMaxUs,
                       double referenceUs) {
  if (perStepMaxUs.empty() || !(referenceUs > 0))
    return 1;
  return std::max(1.0, median(perStepMaxUs.vec()) / referenceUs);
}

std::vector<double> perStepMaxUs(CommEngine &engine,
                                 llvm::ArrayRef<double> stepUs,
                                 double *maxMedianUs) {
  if (maxMedianUs)
    *maxMedianUs = 0;
  double counts[2] = {double(stepUs.size()), -double(stepUs.size())};
  engine.run([&](Communicator &c) { c.allreduceMax(counts, 2); });
  if (counts[0] != -counts[1] || stepUs.empty())
    return {};
  std::vector<double> perStep(stepUs.begin(), stepUs.end());
  perStep.push_back(median(stepUs.vec()));
  engine.run(
      [&](Communicator &c) { c.allreduceMax(perStep.data(), perStep.size()); });
  if (maxMedianUs)
    *maxMedianUs = perStep.back();
  perStep.pop_back();
  return perStep;
}

void scaleCompute(llvm::ArrayRef<StepKind> kinds,
                  llvm::MutableArrayRef<double> us, double factor) {
  for (size_t k = 0; k < us.size() && k < kinds.size(); ++k)
    if (kinds[k] != StepKind::Comm)
      us[k] *= factor;
}

void appendStartSpans(const Executor &exec, const OpTiming *times,
                      std::vector<std::pair<double, double>> &spans) {
  const auto &steps = exec.steps();
  for (size_t k = 0; k < steps.size(); ++k)
    if (steps[k].opType == "allreduce_start")
      spans.push_back({times[k].startUs, times[k].endUs});
}

void idleStartUs(llvm::ArrayRef<std::pair<double, double>> spans,
                 llvm::ArrayRef<CommEvent> events, std::vector<double> &out) {
  for (auto [begin, end] : spans) {
    // The first job queued at or after the start began.
    auto it = std::partition_point(
        events.begin(), events.end(),
        [begin = begin](const CommEvent &e) { return e.enqueuedUs < begin; });
    if (it != events.end() && it->enqueuedUs <= end && it->queuedIdle)
      out.push_back(end - begin);
  }
}

bool besideCommunication(const Executor &exec, int ranks) {
  return ranks > 1 && exec.groups().size() > 1;
}

ComputeRateSums computeRateSums(llvm::ArrayRef<StepKind> kinds,
                                llvm::ArrayRef<double> meanUs,
                                llvm::ArrayRef<double> besideUs,
                                llvm::ArrayRef<double> aloneUs) {
  ComputeRateSums s;
  for (size_t k = 0; k < kinds.size() && k < meanUs.size(); ++k) {
    if (kinds[k] == StepKind::Backward)
      s.backwardUs += meanUs[k];
    if (besideUs[k] <= 0)
      continue;
    s.workBesideUs += aloneUs[k] - (meanUs[k] - besideUs[k]);
    s.timeBesideUs += besideUs[k];
  }
  return s;
}

llvm::Expected<double> computeRateFrom(const ComputeRateSums &sums) {
  if (!(sums.timeBesideUs >= 0.02 * sums.backwardUs) || sums.timeBesideUs <= 0)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "too little compute beside communication: %.0f us of %.0f us of "
        "backward",
        sums.timeBesideUs, sums.backwardUs);
  return std::clamp(sums.workBesideUs / sums.timeBesideUs, 0.05, 1.0);
}

static double nowUs() {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count()) *
         1e-3;
}

/// Every rank's clock offset from rank 0's, in microseconds (a rank's time
/// minus the offset is rank 0's): the ranks leave `rounds` barriers at
/// nearly the same moment and read their clocks; per rank the median
/// difference from rank 0. `spreadUs`: half the widest range of those
/// differences, the offsets' uncertainty (a barrier's exit skew). Works
/// across hosts; on one host the offsets are the ranks' engine epochs.
static std::vector<double> clockOffsets(CommEngine &engine, double &spreadUs) {
  const int rounds = 7;
  std::vector<double> stamps;
  int size = 1, rank = 0;
  engine.run([&](Communicator &c) {
    size = c.size(), rank = c.rank();
    stamps.assign(size_t(rounds) * size, -1e300);
    for (int k = 0; k < rounds; ++k) {
      c.barrier();
      stamps[size_t(k) * size + rank] = engine.nowUs();
    }
    c.allreduceMax(stamps.data(), stamps.size());
  });
  std::vector<double> offsets(size, 0.0);
  spreadUs = 0;
  for (int r = 1; r < size; ++r) {
    std::vector<double> d;
    for (int k = 0; k < rounds; ++k)
      d.push_back(stamps[size_t(k) * size + r] - stamps[size_t(k) * size]);
    std::sort(d.begin(), d.end());
    offsets[r] = d[d.size() / 2];
    spreadUs = std::max(spreadUs, 0.5 * (d.back() - d.front()));
  }
  return offsets;
}

/// Per allreduce, the time from the last rank's start (the group ready and
/// the previous allreduce done) to the last rank's return, on rank 0's
/// clock, split at the end of backward (the last rank's): the model's
/// allreduce starts when every rank has the group ready and ends when every
/// rank has the sum. A rank's own time in the call is not that: the first to
/// arrive waits for the others, and over TCP the last often returns once the
/// others' bytes, sent while it computed, are in, so it missed the wire.
///
/// The time the thread sat runnable without a CPU is not subtracted: a
/// thread that polls between sleeps is runnable most of the time the
/// compute thread holds the core, while the socket keeps the wire busy
/// (measured on a 200 Mbit/s link: 366 ms of a 404 ms, 9.4 MB allreduce
/// "without a CPU", and the whole at the link's rate). What compute beside
/// it costs is the overlap rate, fitted from the time before backward ended
/// against the time after.
std::vector<schedule::MeasuredAllreduce>
Replanner::onOneClock(CommEngine &engine, llvm::ArrayRef<Job> jobs,
                      double &clockSpreadUs) {
  std::vector<double> offsets = clockOffsets(engine, clockSpreadUs);
  const int rank = engine.communicator().rank();
  const double mine = offsets[size_t(rank)];
  const size_t n = jobs.size();
  std::vector<double> last(3 * n);
  for (size_t k = 0; k < n; ++k) {
    last[k] = jobs[k].readyUs - mine;
    last[n + k] = jobs[k].endUs - mine;
    last[2 * n + k] = jobs[k].backwardEndUs - mine;
  }
  engine.run(
      [&](Communicator &c) { c.allreduceMax(last.data(), last.size()); });
  std::vector<schedule::MeasuredAllreduce> out(n);
  for (size_t k = 0; k < n; ++k) {
    double start = last[k], end = std::max(start, last[n + k]),
           backwardEnd = last[2 * n + k];
    out[k].bytes = jobs[k].bytes;
    out[k].besideS = std::max(0.0, std::min(end, backwardEnd) - start) * 1e-6;
    out[k].aloneS = std::max(0.0, end - std::max(start, backwardEnd)) * 1e-6;
  }
  return out;
}

Replanner::Replanner(Executor &exec, CommEngine &engine, ReplanOptions options)
    : exec(exec), engine(engine), options(options) {}

void Replanner::beginStep() { eventsAt = engine.events().size(); }

bool Replanner::measuresAlone() const {
  return besideCommunication(exec, engine.communicator().size()) &&
         (options.mode != ReplanOptions::Mode::Every || options.every >= 3);
}

int64_t Replanner::planSteps() const {
  return options.measured() -
         (options.mode == ReplanOptions::Mode::Every && measuresAlone() ? 1
                                                                        : 0);
}

bool Replanner::wantsAloneStep() const {
  return options.mode != ReplanOptions::Mode::Off && !done && measuresAlone() &&
         !aloneMeasured && measuredSteps >= planSteps();
}

void Replanner::recordStep(const OpTiming *times, bool warmup, bool alone) {
  const auto &steps = exec.steps();
  if (besideUs.size() != steps.size()) {
    stepUs.clear();
    besideUs.assign(steps.size(), 0.0);
    aloneUs.assign(steps.size(), 0.0);
  }
  std::vector<CommEvent> events = engine.eventsSince(eventsAt);
  eventsAt += events.size();
  if (warmup)
    return;
  double backwardEnd = 0;
  for (size_t k = 0; k < steps.size(); ++k)
    if (steps[k].kind == StepKind::Backward)
      backwardEnd = std::max(backwardEnd, times[k].endUs);
  if (alone) {
    for (size_t k = 0; k < steps.size(); ++k)
      aloneUs[k] = times[k].endUs - times[k].startUs;
    aloneMeasured = true;
    aloneStartUs = steps.empty() ? 0 : times[0].startUs;
    aloneEndUs = steps.empty() ? 0 : times[steps.size() - 1].endUs;
  } else {
    // Per instruction, the time one of this rank's allreduces was in
    // flight beside it (the calls run one at a time).
    std::vector<std::pair<double, double>> starts;
    appendStartSpans(exec, times, starts);
    idleStartUs(starts, events, idleStarts);
    stepUs.emplace_back(steps.size());
    for (size_t k = 0; k < steps.size(); ++k) {
      stepUs.back()[k] = times[k].endUs - times[k].startUs;
      if (steps[k].kind == StepKind::Comm)
        continue;
      for (const CommEvent &e : events)
        besideUs[k] += std::max(0.0, std::min(times[k].endUs, e.endUs) -
                                         std::max(times[k].startUs, e.startUs));
    }
  }
  // This grouping's allreduces (group ids are unique over regroupings). A
  // group sent as PowerSGD factors is two collectives and compression's
  // compute, not an allreduce of its bytes: the fit leaves it out.
  std::map<unsigned, const GradGroup *> byId;
  for (const GradGroup &g : exec.groups())
    if (!g.powerSgdRank)
      byId[g.id] = &g;
  // The model's start: the group ready (queued) and the previous
  // allreduce done; a thread slow to wake beside compute is the overlap
  // rate's to charge.
  double previousEnd = 0;
  for (const CommEvent &e : events) {
    auto it = byId.find(e.job);
    if (it == byId.end())
      continue;
    jobs.push_back(Job{double(it->second->buffer.bytes()),
                       std::max(e.enqueuedUs, previousEnd), e.endUs,
                       backwardEnd});
    previousEnd = e.endUs;
  }
  if (!alone)
    ++measuredSteps;
}

schedule::CommModel
fitReplanModel(llvm::ArrayRef<schedule::MeasuredAllreduce> measured, int ranks,
               double planAlphaS, double planOverlapRate, bool &rateFitted,
               bool &alphaFromPlan) {
  const double planAlpha = std::max(0.0, planAlphaS);
  if (auto fit =
          schedule::fitRunAllreduces(measured, ranks, planOverlapRate,
                                     rateFitted, planAlpha, &alphaFromPlan))
    // The plan's alpha (a calibration's small-message time) where the
    // run does not resolve the start-up: ResNet-50's allreduces at 1 Gbit/s
    // fitted 0 at sleep priority, and the plans made from it cut the model
    // into 59-145 groups that each paid the real start-up; at realtime
    // priority its 5 groups fitted 3.3 ms, within their noise of the
    // calibration's 0.2 ms, and wfbp's 107 groups were predicted 10 % slow.
    return *fit;
  else
    llvm::consumeError(fit.takeError());
  // One size: alpha from the plan's model, beta from the times (the work
  // at the plan's overlap rate).
  const double rate = std::clamp(planOverlapRate, 0.05, 1.0);
  std::vector<double> betas;
  for (const schedule::MeasuredAllreduce &m : measured)
    if (m.bytes > 0)
      betas.push_back(std::max(0.0, rate * m.besideS + m.aloneS - planAlpha) /
                      m.bytes);
  std::sort(betas.begin(), betas.end());
  schedule::CommModel model = schedule::CommModel::alphaBeta(
      planAlpha, betas.empty() ? 0.0 : betas[betas.size() / 2], ranks);
  model.overlapRate = rate;
  rateFitted = false;
  alphaFromPlan = true;
  return model;
}

llvm::Expected<GroupChoice> chooseGroups(const schedule::Profile &profile,
                                         const schedule::CommModel &model,
                                         llvm::ArrayRef<unsigned> oldSizes,
                                         llvm::ArrayRef<unsigned> newEnds,
                                         llvm::StringRef strategy,
                                         llvm::ArrayRef<unsigned> oldRanks,
                                         llvm::ArrayRef<unsigned> newRanks) {
  schedule::Plan oldPlan = schedule::planFromSizes("current", oldSizes);
  schedule::Plan newPlan;
  newPlan.strategy = strategy.str();
  newPlan.groupEnds.assign(newEnds.begin(), newEnds.end());
  oldPlan.forms = schedule::formsFromRanks(oldRanks);
  newPlan.forms = schedule::formsFromRanks(newRanks);
  if (auto err = schedule::verifyPlan(newPlan, profile.numGrads()))
    return std::move(err);
  GroupChoice c;
  c.oldGroups = c.newGroups = oldPlan.numGroups();
  c.oldPredictedUs = schedule::simulate(profile, model, oldPlan).iterationUs;
  c.newPredictedUs = schedule::simulate(profile, model, newPlan).iterationUs;
  c.newGroups = newPlan.numGroups();
  c.changed = newPlan.groupEnds != oldPlan.groupEnds ||
              !(newPlan.forms == oldPlan.forms);
  // A switch must be predicted to gain: under a compute rate below 1 the
  // strategy's plan is a local optimum and may lose to the groups in place
  // (the same decision on every rank: agreed profile, model and plan).
  if (c.changed && c.newPredictedUs >= c.oldPredictedUs) {
    c.notFasterGroups = c.newGroups;
    c.notFasterUs = c.newPredictedUs;
    c.changed = false;
    c.newGroups = c.oldGroups;
    c.newPredictedUs = c.oldPredictedUs;
  }
  return c;
}

bool Replanner::due() const {
  if (options.mode == ReplanOptions::Mode::Off || done)
    return false;
  return measuredSteps >= planSteps() && (aloneMeasured || !measuresAlone());
}

void Replanner::forgetMeasurements() {
  stepUs.clear();
  besideUs.assign(exec.steps().size(), 0.0);
  aloneUs.assign(exec.steps().size(), 0.0);
  jobs.clear();
  idleStarts.clear();
  measuredSteps = 0;
  aloneMeasured = false;
}

std::vector<double>
Replanner::agreeLayerTimes(ReplanEvent &ev, int64_t stepsDone, bool &sameJobs) {
  const int size = engine.communicator().size();
  // The compute rate beside communication: per instruction that ran beside
  // an allreduce, its time alone is its time there less the time beside,
  // plus the work done beside at rate kappa; kappa is the ratio of the
  // sums over every such instruction of every rank (few instructions are
  // long enough to give it alone, and one alone step is noisy).
  // Per instruction its typical time over the measured steps (a median,
  // scaled to the median step; typicalStepUs): a step slowed by another
  // process (this host is shared) moves a mean by a third.
  const size_t nInstr = exec.steps().size();
  const double steps1 = double(std::max<int64_t>(measuredSteps, 1));
  const std::vector<StepKind> kinds = stepKinds(exec);
  std::vector<double> mean = typicalStepUs(kinds, stepUs);
  std::vector<double> beside(nInstr, 0.0);
  for (size_t k = 0; k < nInstr; ++k)
    beside[k] = besideUs[k] / steps1;
  ev.aloneStep = aloneMeasured ? stepsDone : 0;
  ev.aloneStartUs = aloneStartUs;
  ev.aloneEndUs = aloneEndUs;
  if (!aloneMeasured) {
    ev.computeRateNote = measuresAlone() ? "no step measured alone"
                                         : "nothing overlapped backward";
  } else {
    ComputeRateSums sums = computeRateSums(kinds, mean, beside, aloneUs);
    double rate[3] = {sums.workBesideUs, sums.timeBesideUs, sums.backwardUs};
    engine.run([&](Communicator &c) { c.allreduceSum(rate, 3); });
    sums = {rate[0], rate[1], rate[2]};
    if (auto kappa = computeRateFrom(sums)) {
      ev.computeRate = *kappa;
      ev.computeRateMeasured = true;
    } else {
      ev.computeRateNote = llvm::toString(kappa.takeError());
    }
  }
  if (ev.computeRateMeasured) {
    // Each instruction's time alone: its work beside at the rate. `mean`
    // is a median over steps and `beside` a mean, so a short instruction
    // whose one slow step ran beside communication can come out below 0
    // (-0.09 us for a ReLU under load, which the profile reader refuses).
    for (size_t k = 0; k < mean.size(); ++k)
      mean[k] = std::max(0.0, mean[k] - (1 - ev.computeRate) * beside[k]);
  }

  // One profile: the slowest rank's (the largest compute per step), whose
  // compute paces a synchronous step. Its layers, not each layer's
  // slowest: a sum of per-layer maxima over noisy ranks exceeds every
  // rank's step (+3 to +7 % measured).
  const auto &steps = exec.steps();
  const int rank = engine.communicator().rank();
  std::vector<double> totals(size_t(size) + 1, 0.0);
  for (size_t k = 0; k < nInstr; ++k)
    if (steps[k].kind != StepKind::Comm)
      totals[size_t(rank)] += mean[k];
  size_t nJobs = jobs.size();
  totals[size_t(size)] = double(nJobs);
  engine.run(
      [&](Communicator &c) { c.allreduceMax(totals.data(), totals.size()); });
  const int slowest = int(
      std::max_element(totals.begin(), totals.begin() + size) - totals.begin());
  engine.run([&](Communicator &c) {
    c.broadcast(mean.data(), mean.size() * sizeof(double), slowest);
  });
  // A synchronous step waits for the slowest rank of that step, which on a
  // shared host is not always the same one: the profile's compute is paced
  // by the per-step slowest (stragglerFactor).
  std::vector<double> stepCompute;
  for (const std::vector<double> &s : stepUs)
    stepCompute.push_back(computeUs(kindSums(kinds, s)));
  // The profile is the slowest rank's: against the largest rank median.
  double maxMedian = 0;
  std::vector<double> paced = perStepMaxUs(engine, stepCompute, &maxMedian);
  ev.stragglerFactor = stragglerFactor(paced, maxMedian);
  scaleCompute(kinds, mean, ev.stragglerFactor);
  sameJobs = size_t(totals[size_t(size)]) == nJobs;
  return mean;
}

schedule::CommModel
Replanner::agreeModel(ReplanEvent &ev,
                      llvm::ArrayRef<schedule::MeasuredAllreduce> measured,
                      bool sameJobs) {
  const int size = engine.communicator().size();
  // alpha, beta and the overlap rate, by least squares on the time of
  // every allreduce (schedule::fitRunAllreduces).
  std::map<double, unsigned> sizes;
  for (const schedule::MeasuredAllreduce &m : measured)
    ++sizes[m.bytes];
  ev.jobs = unsigned(jobs.size());
  ev.sizes = unsigned(sizes.size());
  schedule::CommModel model;
  bool rateFitted = false;
  if (ev.compresses) {
    // The plan's model (a calibration's, where the plan had one): the
    // groups sent as factors are two collectives and compression's compute,
    // and the few plain ones left (vectors, mostly) do not fit a line (one
    // small group fitted 2.5e-6 s/B on ResNet-18). Compression's compute
    // at the rates the plan charged.
    model = schedule::CommModel::alphaBeta(std::max(0.0, exec.planAlphaS()),
                                           exec.planBetaSPerByte(), size);
    model.overlapRate = exec.planOverlapRate();
    model.compressUsPerMac = exec.planCompressUsPerMac();
    model.compressUsPerElement = exec.planCompressUsPerElement();
  } else if (!sameJobs || measured.empty()) {
    ev.note = sameJobs ? "no allreduce was measured"
                       : "the ranks measured different allreduces";
  } else {
    model =
        fitReplanModel(measured, size, exec.planAlphaS(),
                       exec.planOverlapRate(), rateFitted, ev.alphaFromPlan);
  }
  model.groupOverheadUs = exec.planGroupOverheadUs();
  model.computeRate = ev.computeRate;
  // A call's start on compute: the mean over the ranks that measured one
  // of each rank's median.
  double call[2] = {idleStarts.empty() ? 0.0 : median(idleStarts),
                    idleStarts.empty() ? 0.0 : 1.0};
  engine.run([&](Communicator &c) { c.allreduceSum(call, 2); });
  ev.callStarts = unsigned(idleStarts.size());
  model.callComputeUs = call[1] > 0 ? call[0] / call[1] : 0.0;
  ev.overlapFromPlan = !rateFitted;
  ev.comm = model;

  return model;
}

std::vector<unsigned>
Replanner::agreeGroupEnds(ReplanEvent &ev, const schedule::Profile &profile,
                          const schedule::CommModel &model,
                          std::vector<unsigned> &ranks) {
  // Plan with the configured strategy; rank 0's plan is every rank's.
  ev.oldGroups = ev.newGroups = unsigned(exec.groups().size());
  std::vector<schedule::ReadyGrad> order = schedule::readyOrder(profile);
  bool sameOrder = order.size() == exec.gradients().size();
  for (size_t i = 0; sameOrder && i < order.size(); ++i)
    sameOrder = order[i].name == exec.gradients()[i].param;
  if (ev.note.empty() && !sameOrder)
    ev.note = "the measured layers do not give the plan's gradient order";
  // Each group's end, then (under a policy) its PowerSGD rank.
  std::vector<double> ends;
  if (ev.note.empty()) {
    llvm::Expected<schedule::Plan> plan =
        [&]() -> llvm::Expected<schedule::Plan> {
      schedule::CompressPolicy policy;
      if (ev.compresses) {
        auto p = schedule::parseCompressPolicy(exec.planCompress());
        if (!p)
          return p.takeError();
        policy = *p;
      }
      return schedule::makeCompressedPlan(exec.planStrategy(), profile, model,
                                          policy);
    }();
    if (!plan) {
      ev.note = llvm::toString(plan.takeError());
    } else {
      for (unsigned e : plan->groupEnds)
        ends.push_back(double(e));
      if (ev.compresses)
        for (unsigned k = 0; k < plan->numGroups(); ++k)
          ends.push_back(double(plan->form(k).rank));
    }
  }
  // Rank 0 decides: its plan (or its reason not to) is every rank's.
  double count[2] = {double(ends.size()), ev.note.empty() ? 0.0 : 1.0};
  engine.run([&](Communicator &c) { c.broadcast(count, sizeof count, 0); });
  if (count[1] != 0 || count[0] == 0) {
    if (ev.note.empty())
      ev.note = "rank 0 could not re-plan";
    return {};
  }
  ends.resize(size_t(count[0]));
  engine.run([&](Communicator &c) {
    c.broadcast(ends.data(), ends.size() * sizeof(double), 0);
  });
  std::vector<unsigned> groupEnds;
  const size_t groups = ev.compresses ? ends.size() / 2 : ends.size();
  for (size_t k = 0; k < ends.size(); ++k)
    (k < groups ? groupEnds : ranks).push_back(unsigned(ends[k]));
  return groupEnds;
}

llvm::Expected<ReplanEvent> Replanner::replan(int64_t stepsDone) {
  ReplanEvent ev;
  ev.step = stepsDone;
  ev.atUs = engine.nowUs();
  const double t0 = nowUs();
  const int size = engine.communicator().size();
  if (options.mode == ReplanOptions::Mode::Once)
    done = true;
  // The next re-plan measures the groups then in place from scratch.
  auto finish = [&] {
    ev.endUs = engine.nowUs();
    forgetMeasurements();
    return ev;
  };

  // Per instruction, the agreed time; per allreduce, its time on one clock.
  bool sameJobs = false;
  std::vector<double> mean = agreeLayerTimes(ev, stepsDone, sameJobs);
  const KindSums agreed = kindSums(stepKinds(exec), mean);
  std::vector<schedule::MeasuredAllreduce> measured =
      sameJobs ? onOneClock(engine, jobs, ev.clockSkewUs)
               : std::vector<schedule::MeasuredAllreduce>();
  schedule::Profile profile = measuredProfile(
      exec, mean, agreed[size_t(StepKind::Forward)], updateUs(agreed),
      "oasr-run measured, " + std::to_string(size) +
          " rank(s), the slowest rank's median step per layer");
  // Compute alone when the rate was measured; else as it ran.
  profile.computeBesideComm =
      !ev.computeRateMeasured && besideCommunication(exec, size);

  // The allreduce model, then rank 0's plan with the configured strategy
  // (under the plan's compression policy, its forms chosen again on the
  // measured compute).
  ev.compresses = !exec.planCompress().empty() && exec.planCompress() != "off";
  schedule::CommModel model = agreeModel(ev, measured, sameJobs);
  agreedProfile = profile;
  agreedProfile.comm = model;
  std::vector<unsigned> ranks;
  std::vector<unsigned> groupEnds = agreeGroupEnds(ev, profile, model, ranks);
  if (groupEnds.empty()) {
    ev.planUs = nowUs() - t0;
    return finish();
  }
  std::vector<unsigned> oldSizes, oldRanks;
  for (const GradGroup &g : exec.groups()) {
    oldSizes.push_back(unsigned(g.params.size()));
    oldRanks.push_back(g.powerSgdRank);
    ev.oldCompressed += g.powerSgdRank ? 1 : 0;
  }
  for (unsigned r : ranks)
    ev.newCompressed += r ? 1 : 0;
  auto choice = chooseGroups(profile, model, oldSizes, groupEnds,
                             exec.planStrategy(), oldRanks, ranks);
  if (!choice)
    return choice.takeError();
  ev.oldPredictedUs = choice->oldPredictedUs;
  ev.newPredictedUs = choice->newPredictedUs;
  ev.newGroups = choice->newGroups;
  ev.changed = choice->changed;
  ev.notFasterGroups = choice->notFasterGroups;
  ev.notFasterUs = choice->notFasterUs;
  const double t1 = nowUs();
  ev.planUs = t1 - t0;
  if (!ev.changed)
    ev.newCompressed = ev.oldCompressed;
  if (ev.changed)
    if (auto err = exec.regroup(groupEnds, ranks))
      return std::move(err);
  exec.setPlanModel(ev.newPredictedUs, model.alphaS, model.betaSPerByte,
                    model.groupOverheadUs, model.overlapRate);
  ev.switchUs = nowUs() - t1;
  return finish();
}

} // namespace oasr::rt
