//===- SteadySimulator.cpp - The steady-state simulator
//---------------------===//
//
// A two-lane discrete-event simulation (compute lane, communication
// channel) over several iterations; the period is read from the iteration
// starts once the schedule repeats.
//
//===----------------------------------------------------------------------===//

#include "SteadyImpl.h"

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
using namespace oasr::schedule::steady;

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
      sent.push_back(g.send.compressed()
                         ? sendCost(L, g, comm.allreduce, g.send)
                         : FormCost{});
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
    if (g.send.compressed()) {
      const FormCost &c = sent[unsigned(gi)];
      enqueue({it, unsigned(gi), 0, false, c.wireBytes, c.channelUs}, t);
      return;
    }
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
  std::vector<FormCost> sent; ///< a compressed group's cost
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
