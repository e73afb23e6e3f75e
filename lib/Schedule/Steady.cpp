//===- Steady.cpp - The steady-state step: simulator, bound, strategies ---===//
//
// Steady.h states the model. The simulator is a two-lane discrete-event
// simulation (compute lane, communication channel) over several iterations;
// the period is read from the iteration starts once the schedule repeats.
//
//===----------------------------------------------------------------------===//

#include "oasr/Schedule/Steady.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <queue>
#include <tuple>

using namespace llvm;
using namespace oasr::schedule;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Per-layer numbers the model needs.
struct Layers {
  std::vector<double> fwd, bwd, upd;
  std::vector<uint64_t> bytes;
  std::vector<unsigned> tensors;
  double updateUs = 0;

  explicit Layers(const Profile &p) : fwd(layerForwardUs(p)) {
    uint64_t total = p.totalBytes();
    size_t n = p.layers.size();
    for (const Layer &l : p.layers) {
      bwd.push_back(l.backwardUs);
      uint64_t b = 0;
      for (const GradTensor &g : l.grads)
        b += g.bytes;
      bytes.push_back(b);
      tensors.push_back(l.grads.size());
      upd.push_back(total ? p.updateUs * double(b) / double(total)
                          : p.updateUs / double(std::max<size_t>(n, 1)));
    }
    updateUs = p.updateUs;
  }
  size_t size() const { return bwd.size(); }
};

/// A group's totals.
struct GroupInfo {
  uint64_t bytes = 0;
  unsigned tensors = 0;
  double updateUs = 0;
};

GroupInfo groupInfo(const Layers &L, const SteadyGroup &g) {
  GroupInfo info;
  for (unsigned l = g.firstLayer; l <= g.lastLayer; ++l) {
    info.bytes += L.bytes[l];
    info.tensors += L.tensors[l];
    info.updateUs += L.upd[l];
  }
  return info;
}

/// Bytes of piece `k` of `pieces` (the last takes the remainder).
uint64_t pieceBytes(uint64_t bytes, unsigned pieces, unsigned k) {
  uint64_t each = bytes / pieces;
  return k + 1 == pieces ? bytes - each * (pieces - 1) : each;
}
} // namespace

//===----------------------------------------------------------------------===//
// Plans and models
//===----------------------------------------------------------------------===//

unsigned SteadyPlan::numUnits() const {
  unsigned n = 0;
  for (const SteadyGroup &g : groups)
    n += g.pieces * (g.form == Collective::AllReduce ? 1 : 2);
  return n;
}

std::string SteadyPlan::describe() const {
  unsigned rs = 0, cut = 0;
  for (const SteadyGroup &g : groups) {
    rs += g.form == Collective::ReduceScatterAllGather;
    cut += g.pieces > 1;
  }
  std::string s = barrier ? "barrier (next forward waits for all)"
                  : priority == Priority::LayerIndex ? "layer-index priority"
                                                     : "ready-order priority";
  if (rs)
    s += formatv(", {0} reduce-scatter/all-gather", rs).str();
  if (cut)
    s += formatv(", {0} partitioned", cut).str();
  return s;
}

SteadyComm SteadyComm::fromAllreduce(const CommModel &allreduce) {
  SteadyComm c;
  c.allreduce = allreduce;
  CommModel half = allreduce;
  half.kind = CommModel::Kind::AlphaBeta;
  half.alphaS = allreduce.alphaS / 2;
  half.betaSPerByte = allreduce.betaSPerByte / 2;
  c.reduceScatter = c.allGather = half;
  c.ranks = allreduce.ranks > 1 ? allreduce.ranks : 2;
  return c;
}

Expected<SteadyComm> SteadyComm::fromCalibrationFile(const CommModel &allreduce,
                                                     StringRef path,
                                                     bool measured[2]) {
  Expected<CollectiveModels> halves = readCollectiveModels(path);
  if (!halves)
    return halves.takeError();
  return fromCalibration(allreduce, *halves, measured);
}

SteadyComm SteadyComm::fromCalibration(const CommModel &allreduce,
                                       const CollectiveModels &calibration,
                                       bool measured[2]) {
  SteadyComm c = fromAllreduce(allreduce);
  const std::optional<CommModel> *halves[2] = {&calibration.reduceScatter,
                                               &calibration.allGather};
  CommModel *into[2] = {&c.reduceScatter, &c.allGather};
  for (int i = 0; i < 2; ++i) {
    measured[i] = halves[i]->has_value();
    if (measured[i]) {
      into[i]->alphaS = (*halves[i])->alphaS;
      into[i]->betaSPerByte = (*halves[i])->betaSPerByte;
    }
  }
  return c;
}

std::vector<double> oasr::schedule::layerForwardUs(const Profile &profile) {
  std::vector<double> out;
  double own = 0, bwd = profile.backwardUs();
  for (const Layer &l : profile.layers)
    own += l.forwardUs;
  size_t n = profile.layers.size();
  for (const Layer &l : profile.layers) {
    if (own > 0)
      out.push_back(l.forwardUs * profile.forwardUs / own);
    else if (bwd > 0)
      out.push_back(profile.forwardUs * l.backwardUs / bwd);
    else
      out.push_back(profile.forwardUs / double(n));
  }
  return out;
}

Error oasr::schedule::verifySteadyPlan(const SteadyPlan &plan,
                                       const Profile &profile) {
  auto fail = [&](const Twine &msg) {
    return createStringError(inconvertibleErrorCode(),
                             "plan '" + plan.strategy + "': " + msg);
  };
  size_t n = profile.layers.size();
  std::vector<int> owner(n, -1);
  for (unsigned k = 0, e = plan.groups.size(); k < e; ++k) {
    const SteadyGroup &g = plan.groups[k];
    if (g.firstLayer > g.lastLayer || g.lastLayer >= n)
      return fail("group " + Twine(k) + " covers layers " +
                  Twine(g.firstLayer) + ".." + Twine(g.lastLayer) +
                  " of a profile with " + Twine(n));
    if (g.pieces == 0)
      return fail("group " + Twine(k) + " has 0 pieces");
    if (plan.barrier && g.form != Collective::AllReduce)
      return fail("group " + Twine(k) +
                  " is a reduce-scatter in a barrier plan");
    for (unsigned l = g.firstLayer; l <= g.lastLayer; ++l) {
      if (owner[l] >= 0)
        return fail("layer '" + profile.layers[l].name + "' is in groups " +
                    Twine(owner[l]) + " and " + Twine(k));
      owner[l] = int(k);
    }
  }
  for (size_t l = 0; l < n; ++l)
    if (owner[l] < 0 && !profile.layers[l].grads.empty())
      return fail("layer '" + profile.layers[l].name +
                  "' has gradients but no group");
  return Error::success();
}

//===----------------------------------------------------------------------===//
// The simulator
//===----------------------------------------------------------------------===//

namespace {
/// One compute task.
struct Task {
  enum Kind { Forward, Backward, UpdateAll } kind;
  unsigned layer;
  double us;
};

/// One communication unit instance (of one iteration).
struct Unit {
  unsigned iter, group, piece;
  bool gather;
  uint64_t bytes;
  double workUs;
  double readyUs = 0, startUs = 0, endUs = 0;
};

class SteadySim {
public:
  SteadySim(const Profile &profile, const SteadyComm &comm,
            const SteadyPlan &plan, unsigned iterations)
      : L(profile), comm(comm), plan(plan), K(std::max(iterations, 2u)),
        rho(std::clamp(comm.allreduce.overlapRate, 0.0, 1.0)),
        kappa(profile.computeBesideComm
                  ? 1.0
                  : std::clamp(comm.allreduce.computeRate, 0.01, 1.0)),
        callUs(std::max(0.0, comm.allreduce.callComputeUs)) {
    size_t n = L.size();
    groupOf.assign(n, -1);
    for (unsigned k = 0; k < plan.groups.size(); ++k) {
      const SteadyGroup &g = plan.groups[k];
      for (unsigned l = g.firstLayer; l <= g.lastLayer; ++l)
        groupOf[l] = int(k);
      info.push_back(groupInfo(L, g));
    }
    // Outstanding final-phase units per (iteration, group), and per
    // iteration for a barrier.
    pending.assign(size_t(K) * plan.groups.size(), 0);
    pendingIter.assign(K, 0);
    for (unsigned i = 0; i < K; ++i)
      for (unsigned k = 0; k < plan.groups.size(); ++k) {
        pending[i * plan.groups.size() + k] = plan.groups[k].pieces;
        pendingIter[i] += plan.groups[k].pieces;
      }
    // Tasks, iteration after iteration.
    for (unsigned i = 0; i < K; ++i) {
      iterFirstTask.push_back(tasks.size());
      for (unsigned l = 0; l < n; ++l) {
        bool updatesHere =
            !plan.barrier && groupOf[l] >= 0 &&
            (plan.groups[unsigned(groupOf[l])].form == Collective::AllReduce ||
             !comm.shardUpdate);
        tasks.push_back({Task::Forward, l,
                         L.fwd[l] + (updatesHere && i > 0 ? L.upd[l] : 0.0)});
        taskIter.push_back(i);
      }
      for (unsigned l = n; l-- > 0;) {
        tasks.push_back({Task::Backward, l, L.bwd[l]});
        taskIter.push_back(i);
      }
      if (plan.barrier) {
        tasks.push_back({Task::UpdateAll, 0, L.updateUs});
        taskIter.push_back(i);
      }
    }
  }

  SteadyTimeline run() {
    SteadyTimeline tl;
    tl.strategy = plan.strategy;
    double t = 0;
    size_t next = 0;
    bool computing = false;
    double computeLeft = 0; // work left of the running task
    bool channelBusy = false;
    size_t active = 0;
    double remaining = 0;
    std::vector<double> starts(K, -1);

    for (;;) {
      // Start what can start; zero-length tasks and units complete at once
      // and may release each other, so repeat until nothing changes.
      bool progressed = true;
      while (progressed) {
        progressed = false;
        // Compute tasks whose dependencies are met.
        while (!computing && next < tasks.size() && ready(next)) {
          progressed = true;
          unsigned it = taskIter[next];
          if (next == iterFirstTask[it])
            starts[it] = t;
          if (tasks[next].us > 0) {
            computing = true;
            computeLeft = tasks[next].us;
          } else {
            finishTask(next, t);
            ++next;
          }
        }
        // Start the channel on the most urgent queued unit.
        while (!channelBusy && !queue.empty()) {
          progressed = true;
          active = std::get<3>(queue.top());
          queue.pop();
          units[active].startUs = t;
          if (units[active].workUs > 0) {
            channelBusy = true;
            remaining = units[active].workUs;
            // A unit that starts the moment it is ready holds the compute
            // lane for the call's start (CommModel::callComputeUs; at
            // kappa it takes that long).
            if (computing && units[active].readyUs == t)
              computeLeft += callUs * kappa;
          } else {
            finishUnit(active, t);
          }
        }
      }
      if (next == tasks.size() && !computing)
        break;
      // Each lane slows the other: the channel at rho while the lane
      // computes, the lane at kappa while the channel is busy.
      double rate = computing ? rho : 1.0;
      double speed = channelBusy ? kappa : 1.0;
      double tc = computing ? t + computeLeft / speed : kInf;
      double tch = channelBusy && rate > 0 ? t + remaining / rate : kInf;
      double tn = std::min(tc, tch);
      if (tn == kInf)
        break; // nothing can progress (an invalid plan)
      if (channelBusy)
        remaining -= (tn - t) * rate;
      if (computing)
        computeLeft -= (tn - t) * speed;
      t = tn;
      if (channelBusy && tch <= tc) {
        channelBusy = false;
        finishUnit(active, t);
      }
      if (computing && tc <= t) {
        computing = false;
        finishTask(next, t);
        ++next;
      }
    }

    tl.iterationStartUs = starts;
    unsigned q = std::max(1u, K / 4);
    unsigned last = K - 1;
    tl.periodUs = (starts[last] - starts[last - q]) / double(q);
    // Per iteration in the steady state: the lane's own work is fixed
    // (the first iteration applies no update).
    double work = 0;
    for (size_t k = iterFirstTask[last - 1]; k < iterFirstTask[last]; ++k)
      work += tasks[k].us;
    tl.computeUs = work;
    tl.waitUs = std::max(0.0, tl.periodUs - work);
    tl.commBusyUs = 0;
    unsigned shown = last - 1;
    for (const Unit &u : units)
      if (u.iter == shown) {
        tl.commBusyUs += u.workUs;
        tl.units.push_back(
            {u.group, u.piece, u.gather, u.bytes, u.readyUs - starts[shown],
             u.startUs - starts[shown], u.endUs - starts[shown]});
      }
    return tl;
  }

private:
  bool ready(size_t k) const {
    const Task &task = tasks[k];
    unsigned it = taskIter[k];
    if (task.kind == Task::UpdateAll)
      return pendingIter[it] == 0;
    if (task.kind != Task::Forward || it == 0 || plan.barrier)
      return true;
    int g = groupOf[task.layer];
    return g < 0 || pending[(it - 1) * plan.groups.size() + unsigned(g)] == 0;
  }

  void enqueue(Unit u, double t) {
    u.readyUs = t;
    units.push_back(u);
    size_t idx = units.size() - 1;
    const SteadyGroup &g = plan.groups[u.group];
    double key = plan.priority == Priority::LayerIndex
                     ? double(g.firstLayer) * 2 + (u.gather ? 0 : 1)
                     : double(seq);
    queue.push({u.iter, key, seq, idx});
    ++seq;
  }

  void finishTask(size_t k, double t) {
    const Task &task = tasks[k];
    if (task.kind != Task::Backward)
      return;
    int gi = groupOf[task.layer];
    if (gi < 0)
      return;
    const SteadyGroup &g = plan.groups[unsigned(gi)];
    if (task.layer != g.firstLayer)
      return; // the group is ready when its first layer's backward ends
    const GroupInfo &gi2 = info[unsigned(gi)];
    unsigned it = taskIter[k];
    for (unsigned p = 0; p < g.pieces; ++p) {
      uint64_t b = pieceBytes(gi2.bytes, g.pieces, p);
      const CommModel &m =
          g.form == Collective::AllReduce ? comm.allreduce : comm.reduceScatter;
      enqueue({it, unsigned(gi), p, false, b, m.groupTimeUs(b, gi2.tensors)},
              t);
    }
  }

  void finishUnit(size_t idx, double t) {
    Unit &u = units[idx];
    u.endUs = t;
    const SteadyGroup &g = plan.groups[u.group];
    if (g.form == Collective::ReduceScatterAllGather && !u.gather) {
      // The shard update on the channel's thread (unless the compute lane
      // updates after the all-gather), then the all-gather.
      const GroupInfo &gi = info[u.group];
      double shard = !comm.shardUpdate
                         ? 0.0
                         : gi.updateUs / double(std::max(comm.ranks, 1)) *
                               (gi.bytes ? double(u.bytes) / double(gi.bytes)
                                         : 1.0 / g.pieces);
      Unit gather = u;
      gather.gather = true;
      gather.workUs =
          comm.allGather.groupTimeUs(u.bytes, info[u.group].tensors) + shard;
      enqueue(gather, t);
      return;
    }
    pending[u.iter * plan.groups.size() + u.group] -= 1;
    pendingIter[u.iter] -= 1;
  }

  Layers L;
  const SteadyComm &comm;
  const SteadyPlan &plan;
  unsigned K;
  double rho;
  /// The compute rate beside communication (docs/planner.md), unless the
  /// profile's layer times were measured beside it already.
  double kappa;
  double callUs; ///< compute held by a call's start
  std::vector<int> groupOf;
  std::vector<GroupInfo> info;
  std::vector<unsigned> pending, pendingIter;
  std::vector<Task> tasks;
  std::vector<unsigned> taskIter;
  std::vector<size_t> iterFirstTask;
  std::vector<Unit> units;
  using Key = std::tuple<unsigned, double, uint64_t, size_t>;
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> queue;
  uint64_t seq = 0;
};
} // namespace

SteadyTimeline oasr::schedule::simulateSteady(const Profile &profile,
                                              const SteadyComm &comm,
                                              const SteadyPlan &plan,
                                              unsigned iterations) {
  assert(!verifySteadyPlan(plan, profile) && "invalid steady plan");
  return SteadySim(profile, comm, plan, iterations).run();
}

//===----------------------------------------------------------------------===//
// Lower bound
//===----------------------------------------------------------------------===//

double oasr::schedule::steadyLowerBoundUs(const Profile &profile,
                                          const SteadyComm &comm,
                                          bool withReduceScatter) {
  Layers L(profile);
  const double rho = std::clamp(comm.allreduce.overlapRate, 0.0, 1.0);
  double F = 0, B = 0;
  uint64_t M = 0;
  for (size_t l = 0; l < L.size(); ++l) {
    F += L.fwd[l];
    B += L.bwd[l];
    M += L.bytes[l];
  }
  // Every unit pays at least its start-up and overhead; packing is avoidable.
  auto cost = [](const CommModel &m, uint64_t bytes) {
    return bytes ? m.timeUs(bytes) + m.groupOverheadUs : 0.0;
  };
  const int P = std::max(comm.ranks, 1);
  const CommModel &ar = comm.allreduce, &rs = comm.reduceScatter,
                  &ag = comm.allGather;
  if (!withReduceScatter) {
    // Allreduce plans: the compute lane runs every update.
    double C = F + B + L.updateUs;
    double lb = std::max(C, M ? cost(ar, M) + (1 - rho) * C : 0.0);
    double slack = 0;
    for (size_t l = 0; l < L.size(); ++l) {
      if (L.bytes[l])
        lb =
            std::max(lb, C + std::max(0.0, cost(ar, L.bytes[l]) - rho * slack));
      slack += L.bwd[l] + L.fwd[l] + L.upd[l];
    }
    return lb;
  }
  // Plans that choose the form per group: a layer's update runs on the
  // compute lane (allreduce) or as a 1/P shard on the channel (RS/AG; with
  // `shardUpdate` off on the lane after the all-gather, as an allreduce's).
  // Each term below takes the cheaper choice per layer, so it holds for
  // every mix:
  //  - the lane runs forward and backward at least: F + B;
  //  - the channel's work W plus (1 - rho) of the lane's work C fit in a
  //    period; per layer the cheaper of beta*m + (1-rho)*u (allreduce) and
  //    (beta_rs + beta_ag)*m + u/P, plus one start-up;
  //  - layer l's communication (and, for an allreduce, its update) follows
  //    its backward; what the lane still has to run before it needs layer
  //    l (backward and forward of the layers before it) hides at most
  //    rho times itself: F + B + min(u + T_ar(m), T_rs(m) + u/P + T_ag(m))
  //    - rho * S_l.
  double lb = F + B;
  if (M) {
    double startUp = std::min(ar.alphaUs() + ar.groupOverheadUs,
                              rs.alphaUs() + rs.groupOverheadUs + ag.alphaUs() +
                                  ag.groupOverheadUs);
    double work = startUp + (1 - rho) * (F + B);
    for (size_t l = 0; l < L.size(); ++l)
      work += std::min(
          ar.betaUsPerByte() * double(L.bytes[l]) + (1 - rho) * L.upd[l],
          (rs.betaUsPerByte() + ag.betaUsPerByte()) * double(L.bytes[l]) +
              (comm.shardUpdate ? L.upd[l] / P : (1 - rho) * L.upd[l]));
    lb = std::max(lb, work);
  }
  double slack = 0;
  for (size_t l = 0; l < L.size(); ++l) {
    if (L.bytes[l]) {
      double viaAllreduce = L.upd[l] + cost(ar, L.bytes[l]);
      double viaShards = cost(rs, L.bytes[l]) +
                         (comm.shardUpdate ? L.upd[l] / P : L.upd[l]) +
                         cost(ag, L.bytes[l]);
      lb = std::max(lb, F + B +
                            std::max(0.0, std::min(viaAllreduce, viaShards) -
                                              rho * slack));
    }
    slack += L.bwd[l] + L.fwd[l];
  }
  return lb;
}

//===----------------------------------------------------------------------===//
// Strategies
//===----------------------------------------------------------------------===//

/// The layer groups of a backward-only plan: each group's layers, ranges
/// merged where a layer's tensors were split between groups.
static std::vector<SteadyGroup> layerGroups(const Profile &profile,
                                            const Plan &plan) {
  std::vector<ReadyGrad> ready = readyOrder(profile);
  std::vector<SteadyGroup> out;
  for (unsigned k = 0; k < plan.numGroups(); ++k) {
    unsigned lo = ~0u, hi = 0;
    for (unsigned i = plan.groupBegin(k); i < plan.groupEnds[k]; ++i) {
      lo = std::min(lo, ready[i].layer);
      hi = std::max(hi, ready[i].layer);
    }
    if (lo > hi)
      continue;
    out.push_back({lo, hi, 1, Collective::AllReduce});
  }
  std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
    return a.firstLayer < b.firstLayer;
  });
  std::vector<SteadyGroup> merged;
  for (const SteadyGroup &g : out) {
    if (!merged.empty() && g.firstLayer <= merged.back().lastLayer)
      merged.back().lastLayer = std::max(merged.back().lastLayer, g.lastLayer);
    else
      merged.push_back(g);
  }
  return merged;
}

/// One group per layer with gradients, cut into pieces of at most `part`.
static SteadyPlan byteschedulerPlan(const Profile &profile, uint64_t part) {
  SteadyPlan p;
  p.strategy = "bytescheduler:" + std::to_string(part);
  p.priority = Priority::LayerIndex;
  for (unsigned l = 0; l < profile.layers.size(); ++l) {
    uint64_t bytes = 0;
    for (const GradTensor &g : profile.layers[l].grads)
      bytes += g.bytes;
    if (profile.layers[l].grads.empty())
      continue;
    unsigned pieces =
        unsigned(std::max<uint64_t>(1, (bytes + part - 1) / part));
    p.groups.push_back({l, l, pieces, Collective::AllReduce});
  }
  return p;
}

/// DeAR: reduce-scatter in backward, all-gather in forward; layers fused in
/// ready order into buckets closed once they reach `cap` bytes.
static SteadyPlan dearPlan(const Profile &profile, uint64_t cap) {
  SteadyPlan p;
  p.strategy = "dear:" + std::to_string(cap);
  p.priority = Priority::LayerIndex;
  uint64_t fill = 0;
  int hi = -1;
  for (unsigned l = profile.layers.size(); l-- > 0;) {
    if (profile.layers[l].grads.empty())
      continue;
    if (hi < 0)
      hi = int(l);
    for (const GradTensor &g : profile.layers[l].grads)
      fill += g.bytes;
    if (fill >= cap) {
      p.groups.push_back(
          {l, unsigned(hi), 1, Collective::ReduceScatterAllGather});
      fill = 0;
      hi = -1;
    }
  }
  if (hi >= 0) {
    unsigned lo = 0;
    while (profile.layers[lo].grads.empty())
      ++lo;
    p.groups.push_back(
        {lo, unsigned(hi), 1, Collective::ReduceScatterAllGather});
  }
  std::reverse(p.groups.begin(), p.groups.end());
  return p;
}

/// Parses "name" or "name:<bytes>" with a default size.
static Expected<uint64_t> sizeArg(StringRef strategy, StringRef name,
                                  uint64_t byDefault) {
  StringRef rest = strategy.drop_front(name.size());
  if (rest.empty())
    return byDefault;
  std::optional<uint64_t> v;
  if (!rest.consume_front(":") || !(v = parseBytes(rest)))
    return createStringError(
        inconvertibleErrorCode(),
        "strategy '" + strategy + "': expected " + name + " or " + name +
            ":<bytes> with bytes > 0, optionally with a KB/MB/GB or "
            "KiB/MiB/GiB suffix");
  return *v;
}

namespace {
/// Hill climbing over plans of the model, scored by the simulator.
class StepSearch {
public:
  StepSearch(const Profile &profile, const SteadyComm &comm)
      : profile(profile), comm(comm) {}

  double score(const SteadyPlan &p) {
    work += uint64_t(kSearchIterations) *
            (2 * profile.layers.size() + p.numUnits() + 1);
    return simulateSteady(profile, comm, p, kSearchIterations).periodUs;
  }

  SteadyPlan improve(SteadyPlan best) {
    double bestUs = score(best);
    bool improved = true;
    while (improved && work < kWorkBudget) {
      improved = false;
      auto tryPlan = [&](SteadyPlan cand) {
        if (work >= kWorkBudget)
          return;
        double us = score(cand);
        if (us < bestUs * (1 - 1e-9)) {
          best = std::move(cand);
          bestUs = us;
          improved = true;
        }
      };
      // The priority rule.
      {
        SteadyPlan c = best;
        c.priority = c.priority == Priority::LayerIndex ? Priority::ReadyOrder
                                                        : Priority::LayerIndex;
        tryPlan(std::move(c));
      }
      for (size_t k = 0; k < best.groups.size(); ++k) {
        // Merge with the next group.
        if (k + 1 < best.groups.size()) {
          SteadyPlan c = best;
          c.groups[k].lastLayer = c.groups[k + 1].lastLayer;
          c.groups[k].pieces =
              std::max(c.groups[k].pieces, c.groups[k + 1].pieces);
          c.groups.erase(c.groups.begin() + long(k) + 1);
          tryPlan(std::move(c));
        }
        if (k >= best.groups.size())
          break;
        // Split at the layer boundary that halves the bytes.
        const SteadyGroup g = best.groups[k];
        if (g.firstLayer < g.lastLayer) {
          uint64_t total = 0, acc = 0;
          for (unsigned l = g.firstLayer; l <= g.lastLayer; ++l)
            total += layerBytes(l);
          unsigned cut = g.firstLayer;
          for (unsigned l = g.firstLayer; l < g.lastLayer; ++l) {
            acc += layerBytes(l);
            cut = l;
            if (2 * acc >= total)
              break;
          }
          SteadyPlan c = best;
          c.groups[k].lastLayer = cut;
          SteadyGroup second = g;
          second.firstLayer = cut + 1;
          c.groups.insert(c.groups.begin() + long(k) + 1, second);
          trimEmpty(c);
          tryPlan(std::move(c));
        }
        if (k >= best.groups.size())
          break;
        // Re-partition and change the collective form.
        for (unsigned pieces :
             {best.groups[k].pieces * 2, best.groups[k].pieces / 2,
              best.groups[k].pieces + 1, best.groups[k].pieces - 1}) {
          if (pieces == 0 || pieces == best.groups[k].pieces || pieces > 64)
            continue;
          SteadyPlan c = best;
          c.groups[k].pieces = pieces;
          tryPlan(std::move(c));
        }
        if (!best.barrier && comm.allowReduceScatter &&
            k < best.groups.size()) {
          SteadyPlan c = best;
          c.groups[k].form = c.groups[k].form == Collective::AllReduce
                                 ? Collective::ReduceScatterAllGather
                                 : Collective::AllReduce;
          tryPlan(std::move(c));
        }
      }
    }
    return best;
  }

  static constexpr unsigned kSearchIterations = 10;
  /// Simulated events (tasks and units) the search may spend: about a
  /// tenth of a second on the development host, the same on every run.
  static constexpr uint64_t kWorkBudget = 5'000'000;
  uint64_t work = 0;

private:
  uint64_t layerBytes(unsigned l) const {
    uint64_t b = 0;
    for (const GradTensor &g : profile.layers[l].grads)
      b += g.bytes;
    return b;
  }
  /// Drops groups a split left without gradients (layers without
  /// gradients need no group).
  void trimEmpty(SteadyPlan &p) const {
    for (size_t k = 0; k < p.groups.size();) {
      bool any = false;
      for (unsigned l = p.groups[k].firstLayer; l <= p.groups[k].lastLayer; ++l)
        any |= !profile.layers[l].grads.empty();
      if (!any)
        p.groups.erase(p.groups.begin() + long(k));
      else
        ++k;
    }
  }

  const Profile &profile;
  const SteadyComm &comm;
};
} // namespace

std::vector<std::string> oasr::schedule::steadyStrategyNames() {
  return {"oasr-barrier", "bytescheduler", "dear", "oasr-step"};
}

bool oasr::schedule::isSteadyStrategy(StringRef strategy) {
  StringRef name = strategy.split(':').first;
  return is_contained(steadyStrategyNames(), name) &&
         (name == strategy || name == "bytescheduler" || name == "dear");
}

Expected<LoweredSteadyPlan>
oasr::schedule::lowerSteadyPlan(const SteadyPlan &plan, const Profile &profile,
                                const SteadyComm &comm) {
  if (Error e = verifySteadyPlan(plan, profile))
    return std::move(e);
  const unsigned G = plan.groups.size();
  for (unsigned k = 0; k < G; ++k)
    if (plan.groups[k].form != Collective::AllReduce && comm.shardUpdate)
      return createStringError(
          inconvertibleErrorCode(),
          formatv("{0}: group {1} (layers {2}-{3}) updates its shard between "
                  "the reduce-scatter and the all-gather; the runtime "
                  "all-gathers gradients and updates on the compute lane "
                  "(plan with SteadyComm::shardUpdate off)",
                  plan.strategy, k, plan.groups[k].firstLayer,
                  plan.groups[k].lastLayer)
              .str());
  LoweredSteadyPlan out;
  out.forwardWaits = !plan.barrier;
  out.plan.strategy = plan.strategy;
  // Ready order runs the layers backwards, so the steady groups reversed.
  std::vector<ReadyGrad> ready = readyOrder(profile);
  unsigned at = 0;
  for (unsigned r = 0; r < G; ++r) {
    const SteadyGroup &g = plan.groups[G - 1 - r];
    while (at < ready.size() && ready[at].layer >= g.firstLayer &&
           ready[at].layer <= g.lastLayer)
      ++at;
    out.plan.groupEnds.push_back(at);
    out.pieces.push_back(g.pieces);
    out.scatter.push_back(g.form == Collective::ReduceScatterAllGather);
  }
  if (at != ready.size())
    return createStringError(inconvertibleErrorCode(),
                             plan.strategy +
                                 ": the groups do not cover the gradients in "
                                 "ready order");
  SteadyTimeline tl = simulateSteady(profile, comm, plan);
  out.periodUs = tl.periodUs;
  // Start order; a unit's reduce-scatter starts before its all-gather.
  std::vector<std::tuple<double, bool, unsigned, unsigned>> starts;
  for (const UnitTiming &u : tl.units)
    starts.push_back({u.startUs, u.gather, G - 1 - u.group, u.piece});
  std::sort(starts.begin(), starts.end());
  for (auto [t, gather, g, p] : starts)
    out.order.push_back({g, p, gather});
  return out;
}

Expected<SteadyPlan> oasr::schedule::makeSteadyPlan(StringRef strategy,
                                                    const Profile &profile,
                                                    const SteadyComm &comm) {
  // Today's oasr plan at layer granularity: planned on the profile with
  // each layer's gradients as one tensor (a layer's tensors are ready
  // together, so a cut inside a layer only adds a start-up; the pack cost
  // of a layer's own tensors is then not planned for).
  auto oasrGroups = [&] {
    Profile merged = profile;
    for (Layer &l : merged.layers) {
      if (l.grads.size() < 2)
        continue;
      uint64_t bytes = 0;
      for (const GradTensor &g : l.grads)
        bytes += g.bytes;
      l.grads = {{l.name, bytes}};
    }
    return layerGroups(merged, oasrPlan(merged, comm.allreduce));
  };
  if (strategy == "oasr-barrier") {
    SteadyPlan p;
    p.strategy = "oasr-barrier";
    p.barrier = true;
    p.groups = oasrGroups();
    return p;
  }
  if (strategy.starts_with("bytescheduler")) {
    auto part = sizeArg(strategy, "bytescheduler", 4ull << 20);
    if (!part)
      return part.takeError();
    return byteschedulerPlan(profile, *part);
  }
  if (strategy.starts_with("dear")) {
    if (!comm.allowReduceScatter)
      return createStringError(
          inconvertibleErrorCode(),
          "strategy '" + strategy +
              "' reduce-scatters and all-gathers, which this plan may not "
              "(gradients sent as bf16/f16 are allreduced only)");
    auto cap = sizeArg(strategy, "dear", 25ull << 20);
    if (!cap)
      return cap.takeError();
    return dearPlan(profile, *cap);
  }
  if (strategy != "oasr-step")
    return createStringError(
        inconvertibleErrorCode(),
        "unknown steady-state strategy '" + strategy +
            "' (expected oasr-step, oasr-barrier, bytescheduler[:<bytes>] or "
            "dear[:<bytes>])");

  // Candidates: today's plan as today's runtime runs it (the fallback), the
  // same groups with per-layer waits under either priority and either
  // collective form, WFBP's groups, and the two baselines.
  StepSearch search(profile, comm);
  std::vector<SteadyPlan> cands;
  SteadyPlan barrier;
  barrier.strategy = "oasr-step";
  barrier.barrier = true;
  barrier.groups = oasrGroups();
  cands.push_back(barrier);
  for (Priority pr : {Priority::LayerIndex, Priority::ReadyOrder})
    for (Collective form :
         {Collective::AllReduce, Collective::ReduceScatterAllGather}) {
      if (form != Collective::AllReduce && !comm.allowReduceScatter)
        continue;
      SteadyPlan c = barrier;
      c.barrier = false;
      c.priority = pr;
      for (SteadyGroup &g : c.groups)
        g.form = form;
      cands.push_back(c);
    }
  SteadyPlan wfbp = byteschedulerPlan(profile, ~0ull);
  cands.push_back(wfbp);
  cands.push_back(byteschedulerPlan(profile, 4ull << 20));
  if (comm.allowReduceScatter)
    cands.push_back(dearPlan(profile, 25ull << 20));
  std::vector<std::pair<double, size_t>> ranked;
  for (size_t k = 0; k < cands.size(); ++k)
    ranked.push_back({search.score(cands[k]), k});
  std::sort(ranked.begin(), ranked.end());
  // Improve the two best starts; keep the best of all (the barrier plan
  // included, so the result is never worse than it).
  SteadyPlan best = cands[ranked.front().second];
  double bestUs = ranked.front().first;
  for (size_t r = 0; r < std::min<size_t>(2, ranked.size()); ++r) {
    SteadyPlan improved = search.improve(cands[ranked[r].second]);
    double us = search.score(improved);
    if (us < bestUs) {
      best = std::move(improved);
      bestUs = us;
    }
  }
  // Scored again as reports score it (more iterations than the search):
  // today's plan stays the fallback.
  if (simulateSteady(profile, comm, best).periodUs >
      simulateSteady(profile, comm, barrier).periodUs)
    best = barrier;
  best.strategy = "oasr-step";
  return best;
}
