//===- TraceProfile.cpp - Chrome traces, profiles, replay -----------------===//

#include "TrainImpl.h"
#include "oasr/Support/JSON.h"

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// Trace and profile
llvm::Error writeJson(const std::string &path, llvm::json::Value value) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return llvm::createStringError(ec, "cannot write %s: %s", path.c_str(),
                                   ec.message().c_str());
  os << formatJSON(std::move(value), 2) << "\n";
  return llvm::Error::success();
}

std::string stepKindName(StepKind k) {
  switch (k) {
  case StepKind::Forward:
    return "forward";
  case StepKind::Backward:
    return "backward";
  case StepKind::Update:
    return "update";
  case StepKind::Comm:
    return "comm";
  case StepKind::Copy:
    return "copy";
  }
  return "";
}
//===----------------------------------------------------------------------===//

llvm::Error writeTrace(const std::string &path, CommEngine &engine,
                       const std::vector<Rec> &local,
                       const PlanHistory &history,
                       const std::vector<ReplanEvent> &replans) {
  std::vector<Rec> comm;
  for (const CommEvent &e : engine.events())
    comm.push_back(
        Rec{1, double(e.job), e.startUs, e.endUs, e.cpuWaitUs, e.dispatchUs});
  std::vector<Rec> all = local;
  all.insert(all.end(), comm.begin(), comm.end());
  std::vector<char> bytes;
  std::vector<size_t> counts;
  engine.run([&](Communicator &c) {
    c.gatherBytes(all.data(), all.size() * sizeof(Rec), 0, bytes, counts);
  });
  if (engine.communicator().rank() != 0)
    return llvm::Error::success();
  llvm::json::Array events;
  const auto &steps = history.steps;
  size_t off = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    events.push_back(llvm::json::Object{
        {"name", "process_name"},
        {"ph", "M"},
        {"pid", int64_t(r)},
        {"args", llvm::json::Object{{"name", "rank " + std::to_string(r)}}}});
    events.push_back(
        llvm::json::Object{{"name", "thread_name"},
                           {"ph", "M"},
                           {"pid", int64_t(r)},
                           {"tid", 0},
                           {"args", llvm::json::Object{{"name", "compute"}}}});
    events.push_back(llvm::json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", int64_t(r)},
        {"tid", 1},
        {"args", llvm::json::Object{{"name", "communication"}}}});
    const Rec *recs = reinterpret_cast<const Rec *>(bytes.data() + off);
    size_t n = counts[r] / sizeof(Rec);
    off += counts[r];
    for (size_t k = 0; k < n; ++k) {
      const Rec &e = recs[k];
      std::string name, cat;
      llvm::json::Object args;
      if (e.lane == 0) {
        const PlanStepInfo &s = steps[size_t(e.name)];
        name = s.name;
        cat = stepKindName(s.kind);
        args["op"] = s.opType;
        if (!s.layer.empty())
          args["layer"] = s.layer;
      } else if (uint32_t(e.name) == kExchangeJob) {
        name = "exchange";
        cat = "exchange";
      } else {
        uint32_t tag = uint32_t(e.name);
        auto found = history.groups.find(tag & ~kGatherJobBit);
        if (found == history.groups.end())
          continue;
        const GradGroup &gg = found->second;
        cat = !gg.scatterRanks      ? "allreduce"
              : tag & kGatherJobBit ? "all-gather"
                                    : "reduce-scatter";
        name = cat + " group " + std::to_string(gg.index);
        args["bytes"] = int64_t(gg.bytes);
        // The call's time without a CPU, and the wait for the thread to
        // wake before it (docs/runtime.md).
        args["cpu_wait_us"] = e.cpuWait;
        args["dispatch_us"] = e.dispatch;
        args["layer"] = gg.layer;
        llvm::json::Array params;
        for (const std::string &p : gg.params)
          params.push_back(p);
        args["params"] = std::move(params);
      }
      events.push_back(
          llvm::json::Object{{"name", name},
                             {"cat", cat},
                             {"ph", "X"},
                             {"pid", int64_t(r)},
                             {"tid", int64_t(e.lane)},
                             {"ts", e.start},
                             {"dur", std::max(0.0, e.end - e.start)},
                             {"args", std::move(args)}});
    }
  }
  // The re-plans, on rank 0's compute lane: the span of agreeing,
  // planning and switching, and a mark across every lane at the switch.
  for (const ReplanEvent &ev : replans) {
    auto makeArgs = [&ev] {
      llvm::json::Object args{{"step", int64_t(ev.step)},
                              {"old_groups", int64_t(ev.oldGroups)},
                              {"new_groups", int64_t(ev.newGroups)},
                              {"plan_ms", ev.planUs * 1e-3},
                              {"switch_ms", ev.switchUs * 1e-3}};
      if (ev.newPredictedUs >= 0)
        args["predicted_gain_ms"] =
            (ev.oldPredictedUs - ev.newPredictedUs) * 1e-3;
      if (!ev.note.empty())
        args["note"] = ev.note;
      if (ev.computeRateMeasured)
        args["compute_rate"] = ev.computeRate;
      return args;
    };
    if (ev.aloneStep > 0)
      events.push_back(llvm::json::Object{
          {"name", llvm::formatv("step {0}: allreduces held until backward "
                                 "ended (compute measured alone)",
                                 ev.aloneStep)
                       .str()},
          {"cat", "replan"},
          {"ph", "X"},
          {"pid", 0},
          {"tid", 0},
          {"ts", ev.aloneStartUs},
          {"dur", ev.aloneEndUs - ev.aloneStartUs},
          {"args", llvm::json::Object{{"step", ev.aloneStep},
                                      {"compute_rate", ev.computeRate}}}});
    events.push_back(llvm::json::Object{{"name", "replan"},
                                        {"cat", "replan"},
                                        {"ph", "X"},
                                        {"pid", 0},
                                        {"tid", 0},
                                        {"ts", ev.atUs},
                                        {"dur", ev.endUs - ev.atUs},
                                        {"args", makeArgs()}});
    events.push_back(llvm::json::Object{
        {"name", llvm::formatv("switch to {0} group(s) before step {1}",
                               ev.newGroups, ev.step + 1)
                     .str()},
        {"cat", "replan"},
        {"ph", "i"},
        {"s", "g"},
        {"pid", 0},
        {"tid", 0},
        {"ts", ev.endUs},
        {"args", makeArgs()}});
  }
  return writeJson(path, llvm::json::Object{{"traceEvents", std::move(events)},
                                            {"displayTimeUnit", "ms"}});
}

/// Replays the plan on the measured profile: the model's iteration time for
/// exactly what this run measured. -1 when the module carries no model or
/// its groups do not map onto the profile.
double replay(Executor &exec, const schedule::Profile &profile,
              double callComputeUs, bool tiersUp) {
  if (exec.planAlphaS() < 0 || exec.groups().empty())
    return -1;
  std::vector<unsigned> sizes;
  for (const GradGroup &g : exec.groups())
    sizes.push_back(unsigned(g.params.size()));
  schedule::Plan plan = schedule::planFromSizes("replay", sizes);
  // Compressed groups are charged their factors and compute, as planned.
  std::vector<unsigned> ranks;
  for (const GradGroup &g : exec.groups())
    ranks.push_back(g.powerSgdRank);
  plan.forms = schedule::formsFromRanks(ranks);
  if (auto err = schedule::verifyPlan(plan, profile.numGrads())) {
    llvm::consumeError(std::move(err));
    return -1;
  }
  schedule::CommModel comm = schedule::CommModel::alphaBeta(
      exec.planAlphaS(), exec.planBetaSPerByte());
  comm.groupOverheadUs = exec.planGroupOverheadUs();
  comm.overlapRate = exec.planOverlapRate();
  comm.compressUsPerMac = exec.planCompressUsPerMac();
  comm.compressUsPerElement = exec.planCompressUsPerElement();
  // Groups the plan sent two-level, where the tiers were set up: the same
  // rule picks them again on the plan's tier.
  if (const Executor::PlanTier &t = exec.planTier();
      tiersUp && t.ranksPerNode) {
    comm.ranks = t.ranks;
    comm.twoLevel = {t.ranksPerNode, t.intraAlphaS, t.intraBetaS, t.interAlphaS,
                     t.interBetaS};
  }
  // The compute rate stays 1: the layer times measured in this run already
  // ran beside whatever communication the plan put beside them. The starts
  // are not among them: this run's measured start is charged.
  comm.callComputeUs = callComputeUs;
  const SteadyExecution &st = exec.steady();
  if (st.order.empty())
    return schedule::simulate(profile, comm, plan).iterationUs;
  // A steady-state plan: its own model (the groups back in forward order,
  // as layer ranges; the order is layer-index priority unless it is the
  // ready order).
  std::vector<schedule::ReadyGrad> ready = schedule::readyOrder(profile);
  schedule::SteadyPlan sp;
  sp.strategy = "replay";
  sp.barrier = !st.forwardWaits;
  std::vector<SteadyExecution::Unit> readyOrder;
  for (unsigned g = 0; g < plan.numGroups(); ++g) {
    schedule::SteadyGroup sg;
    sg.firstLayer = ~0u;
    for (unsigned i = plan.groupBegin(g); i < plan.groupEnds[g]; ++i) {
      sg.firstLayer = std::min(sg.firstLayer, ready[i].layer);
      sg.lastLayer = std::max(sg.lastLayer, ready[i].layer);
    }
    sg.pieces = g < st.pieces.size() ? st.pieces[g] : 1;
    bool rs = g < st.scatter.size() && st.scatter[g];
    if (rs)
      sg.form = schedule::Collective::ReduceScatterAllGather;
    sg.send = plan.form(g);
    sp.groups.insert(sp.groups.begin(), sg);
    for (unsigned p = 0; p < sg.pieces; ++p) {
      readyOrder.push_back({g, p, false});
      if (rs)
        readyOrder.push_back({g, p, true});
    }
  }
  sp.priority = st.order == readyOrder ? schedule::Priority::ReadyOrder
                                       : schedule::Priority::LayerIndex;
  if (auto err = schedule::verifySteadyPlan(sp, profile)) {
    llvm::consumeError(std::move(err));
    return -1;
  }
  // DeAR's form: the runtime all-gathers gradients and updates on the
  // compute thread.
  schedule::SteadyComm sc = schedule::SteadyComm::fromAllreduce(comm);
  sc.shardUpdate = false;
  return schedule::simulateSteady(profile, sc, sp).periodUs;
}

} // namespace oasr::rt
