//===- Replan.cpp - Re-planning the allreduces from the run's measurements
//-===//
//
// What is measured (docs/runtime.md, "Re-planning from the run"):
//  - compute: every instruction of the step on the compute thread, summed
//    per layer (forward, backward) as `--profile` writes them;
//  - communication: every fused allreduce on the communication thread, the
//    call proper (not the time it sat queued), minus the time the thread was
//    runnable but had no CPU (the kernel's run-queue delay of the thread).
// Ranks agree on the slowest rank's time per layer, and per allreduce on the
// rank that spent the least time in it (the last to arrive, which did not
// wait for the others); alpha and beta are fitted to those, the overlap
// rate to how far each allreduce got while backward still ran.
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
    grads[g.layer].push_back(schedule::GradTensor{g.param, g.bytes});
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

static double nowUs() {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count()) *
         1e-3;
}

Replanner::Replanner(Executor &exec, CommEngine &engine, ReplanOptions options)
    : exec(exec), engine(engine), options(options) {}

void Replanner::beginStep() { eventsAt = engine.events().size(); }

void Replanner::recordStep(const OpTiming *times, bool warmup) {
  const auto &steps = exec.steps();
  if (sumUs.size() != steps.size())
    sumUs.assign(steps.size(), 0.0);
  std::vector<CommEvent> events = engine.eventsSince(eventsAt);
  eventsAt += events.size();
  if (warmup)
    return;
  double backwardEnd = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    sumUs[k] += times[k].endUs - times[k].startUs;
    if (steps[k].kind == StepKind::Backward)
      backwardEnd = std::max(backwardEnd, times[k].endUs);
  }
  // This grouping's allreduces (group ids are unique over regroupings).
  std::map<unsigned, const GradGroup *> byId;
  for (const GradGroup &g : exec.groups())
    byId[g.id] = &g;
  double previousEnd = 0;
  for (const CommEvent &e : events) {
    auto it = byId.find(e.job);
    if (it == byId.end())
      continue;
    Job j;
    j.bytes = double(it->second->buffer.bytes());
    j.wallUs = e.endUs - e.startUs;
    j.netUs = std::max(0.0, j.wallUs - e.cpuWaitUs);
    j.callStartUs = e.startUs;
    // The model's start: ready (queued) or after the previous allreduce.
    j.readyUs = std::max(e.enqueuedUs, previousEnd);
    j.endUs = e.endUs;
    j.backwardEndUs = backwardEnd;
    previousEnd = e.endUs;
    jobs.push_back(j);
  }
  ++measuredSteps;
}

bool Replanner::due() const {
  if (options.mode == ReplanOptions::Mode::Off || done)
    return false;
  return measuredSteps >= options.measured();
}

llvm::Expected<ReplanEvent> Replanner::replan(int64_t stepsDone) {
  ReplanEvent ev;
  ev.step = stepsDone;
  ev.atUs = engine.nowUs();
  const double t0 = nowUs();
  Communicator &comm = engine.communicator();
  const int size = comm.size();
  if (options.mode == ReplanOptions::Mode::Once)
    done = true;
  // The next re-plan measures the groups then in place from scratch.
  auto restart = [&] {
    sumUs.assign(exec.steps().size(), 0.0);
    jobs.clear();
    measuredSteps = 0;
  };

  // One profile: every rank's mean per instruction, the slowest rank's.
  std::vector<double> mean(sumUs.size());
  for (size_t k = 0; k < sumUs.size(); ++k)
    mean[k] = sumUs[k] / double(std::max<int64_t>(measuredSteps, 1));
  // Per allreduce, the least time any rank spent in it: max of negatives.
  std::vector<double> agreed(mean);
  size_t nJobs = jobs.size();
  agreed.push_back(double(nJobs));
  for (const Job &j : jobs)
    agreed.push_back(-j.netUs);
  engine.run(
      [&](Communicator &c) { c.allreduceMax(agreed.data(), agreed.size()); });
  double fwd = 0, upd = 0;
  const auto &steps = exec.steps();
  for (size_t k = 0; k < steps.size(); ++k) {
    mean[k] = agreed[k];
    if (steps[k].kind == StepKind::Forward)
      fwd += mean[k];
    if (steps[k].kind == StepKind::Update || steps[k].kind == StepKind::Copy)
      upd += mean[k];
  }
  const bool sameJobs = size_t(agreed[steps.size()]) == nJobs;
  std::vector<double> net;
  for (size_t k = 0; k < nJobs; ++k)
    net.push_back(-agreed[steps.size() + 1 + k]);

  schedule::Profile profile =
      measuredProfile(exec, mean, fwd, upd,
                      "oasr-run measured, " + std::to_string(size) +
                          " rank(s), slowest rank per layer");

  // alpha, beta: the median time per size, fitted (relative error).
  std::map<double, std::vector<double>> bySize;
  for (size_t k = 0; k < nJobs; ++k)
    bySize[jobs[k].bytes].push_back(net[k]);
  std::vector<std::pair<double, double>> points;
  for (auto &[bytes, ts] : bySize) {
    std::sort(ts.begin(), ts.end());
    points.push_back({bytes, ts[ts.size() / 2] * 1e-6});
  }
  ev.jobs = unsigned(nJobs);
  ev.sizes = unsigned(points.size());
  schedule::CommModel model;
  if (!sameJobs || points.empty()) {
    ev.note = sameJobs ? "no allreduce was measured"
                       : "the ranks measured different allreduces";
  } else if (auto fit = schedule::fitAlphaBeta(points, size)) {
    model = *fit;
  } else {
    // One size: alpha from the plan's model, beta from the times.
    llvm::consumeError(fit.takeError());
    double alpha = std::max(0.0, exec.planAlphaS());
    std::vector<double> betas;
    for (auto [bytes, s] : points)
      if (bytes > 0)
        betas.push_back(std::max(0.0, s - alpha) / bytes);
    std::sort(betas.begin(), betas.end());
    model = schedule::CommModel::alphaBeta(
        alpha, betas.empty() ? 0.0 : betas[betas.size() / 2], size);
    ev.alphaFromPlan = true;
  }
  model.groupOverheadUs = exec.planGroupOverheadUs();
  ev.communicating = model;

  // After backward the model gives communication the CPU; what share of
  // their time the calls that ran then actually had one, over all ranks.
  double post[2] = {0, 0};
  for (const Job &j : jobs)
    if (j.callStartUs >= j.backwardEndUs)
      post[0] += j.netUs, post[1] += j.wallUs;
  engine.run([&](Communicator &c) { c.allreduceSum(post, 2); });
  if (post[0] > 0 && post[1] > 0) {
    ev.cpuShare = std::clamp(post[0] / post[1], 0.05, 1.0);
    model.alphaS /= ev.cpuShare;
    model.betaSPerByte /= ev.cpuShare;
  }

  // The overlap rate: how much of each allreduce's work (its fitted time)
  // was done before backward ended, per unit of time it had there.
  double rate[2] = {0, 0};
  for (const Job &j : jobs) {
    double work = model.groupTimeUs(uint64_t(j.bytes), 1);
    double before =
        std::max(0.0, std::min(j.endUs, j.backwardEndUs) - j.readyUs);
    double after =
        std::max(0.0, j.endUs - std::max(j.readyUs, j.backwardEndUs));
    if (before <= 0)
      continue;
    rate[0] += std::clamp(work - after, 0.0, before);
    rate[1] += before;
  }
  engine.run([&](Communicator &c) { c.allreduceSum(rate, 2); });
  if (rate[1] > 0)
    model.overlapRate = std::clamp(rate[0] / rate[1], 0.0, 1.0);
  else {
    model.overlapRate = exec.planOverlapRate();
    ev.overlapFromPlan = true;
  }
  ev.comm = model;
  agreedProfile = profile;
  agreedProfile.comm = model;

  // Plan with the configured strategy; rank 0's plan is every rank's.
  std::vector<unsigned> oldSizes;
  for (const GradGroup &g : exec.groups())
    oldSizes.push_back(unsigned(g.params.size()));
  schedule::Plan oldPlan = schedule::planFromSizes("current", oldSizes);
  ev.oldGroups = oldPlan.numGroups();
  ev.newGroups = ev.oldGroups;
  std::vector<schedule::ReadyGrad> order = schedule::readyOrder(profile);
  bool sameOrder = order.size() == exec.gradients().size();
  for (size_t i = 0; sameOrder && i < order.size(); ++i)
    sameOrder = order[i].name == exec.gradients()[i].param;
  if (ev.note.empty() && !sameOrder)
    ev.note = "the measured layers do not give the plan's gradient order";
  std::vector<double> ends;
  if (ev.note.empty()) {
    auto plan = schedule::makePlan(exec.planStrategy(), profile, model);
    if (!plan) {
      ev.note = llvm::toString(plan.takeError());
    } else {
      for (unsigned e : plan->groupEnds)
        ends.push_back(double(e));
    }
  }
  // Rank 0 decides: its plan (or its reason not to) is every rank's.
  double count[2] = {double(ends.size()), ev.note.empty() ? 0.0 : 1.0};
  engine.run([&](Communicator &c) { c.broadcast(count, sizeof count, 0); });
  if (count[1] != 0 || count[0] == 0) {
    if (ev.note.empty())
      ev.note = "rank 0 could not re-plan";
    ev.endUs = engine.nowUs();
    ev.planUs = nowUs() - t0;
    restart();
    return ev;
  }
  ends.resize(size_t(count[0]));
  engine.run([&](Communicator &c) {
    c.broadcast(ends.data(), ends.size() * sizeof(double), 0);
  });
  std::vector<unsigned> groupEnds;
  for (double e : ends)
    groupEnds.push_back(unsigned(e));
  schedule::Plan newPlan;
  newPlan.strategy = exec.planStrategy();
  newPlan.groupEnds = groupEnds;
  if (auto err = schedule::verifyPlan(newPlan, profile.numGrads()))
    return std::move(err);
  ev.oldPredictedUs = schedule::simulate(profile, model, oldPlan).iterationUs;
  schedule::Timeline timeline = schedule::simulate(profile, model, newPlan);
  ev.newPredictedUs = timeline.iterationUs;
  ev.newGroups = newPlan.numGroups();
  ev.changed = groupEnds != oldPlan.groupEnds;
  const double t1 = nowUs();
  ev.planUs = t1 - t0;
  if (ev.changed)
    if (auto err = exec.regroup(groupEnds))
      return std::move(err);
  exec.setPlanModel(ev.newPredictedUs, model.alphaS, model.betaSPerByte,
                    model.groupOverheadUs, model.overlapRate);
  ev.switchUs = nowUs() - t1;
  ev.endUs = engine.nowUs();
  restart();
  return ev;
}

} // namespace oasr::rt
