//===- Simulator.cpp - Ready order, plans, timeline simulator, lower bound ===//
//
// The one simulator that scores every plan (DESIGN.md, "The timeline
// model"): backward runs the layers last to first on one compute stream; a
// layer's gradients are ready when it ends; groups are communicated one at a
// time in plan order, each starting at max(ready of its last gradient, end
// of the previous group).
//
//===----------------------------------------------------------------------===//

#include "oasr/Schedule/Schedule.h"

#include <algorithm>
#include <cassert>
#include <cmath>

using namespace llvm;
using namespace oasr::schedule;

std::vector<ReadyGrad> oasr::schedule::readyOrder(const Profile &profile) {
  std::vector<ReadyGrad> out;
  out.reserve(profile.numGrads());
  double t = profile.forwardUs;
  for (unsigned l = profile.layers.size(); l-- > 0;) {
    const Layer &layer = profile.layers[l];
    t += layer.backwardUs;
    for (unsigned g = 0, e = layer.grads.size(); g < e; ++g)
      out.push_back({l, g, layer.grads[g].name, layer.grads[g].bytes, t,
                     layer.grads[g].rows});
  }
  return out;
}

std::vector<std::vector<unsigned>> Plan::groups() const {
  std::vector<std::vector<unsigned>> out;
  out.reserve(groupEnds.size());
  for (unsigned k = 0, e = groupEnds.size(); k < e; ++k) {
    std::vector<unsigned> g;
    for (unsigned i = groupBegin(k); i < groupEnds[k]; ++i)
      g.push_back(i);
    out.push_back(std::move(g));
  }
  return out;
}

Error oasr::schedule::verifyPlan(const Plan &plan, unsigned numGrads) {
  unsigned prev = 0;
  for (unsigned k = 0, e = plan.groupEnds.size(); k < e; ++k) {
    if (plan.groupEnds[k] <= prev)
      return createStringError(inconvertibleErrorCode(),
                               "plan '" + plan.strategy + "': group " +
                                   Twine(k) + " is empty or out of order");
    prev = plan.groupEnds[k];
  }
  if (prev != numGrads)
    return createStringError(inconvertibleErrorCode(),
                             "plan '" + plan.strategy + "' covers " +
                                 Twine(prev) + " gradients, the profile has " +
                                 Twine(numGrads));
  return Error::success();
}

Plan oasr::schedule::planFromSizes(StringRef strategy,
                                   ArrayRef<unsigned> sizes) {
  Plan p;
  p.strategy = strategy.str();
  unsigned end = 0;
  for (unsigned s : sizes) {
    end += s;
    p.groupEnds.push_back(end);
  }
  return p;
}

static void simulateCapacity(const Profile &profile, const CommModel &comm,
                             const Plan &plan,
                             const std::vector<ReadyGrad> &ready, Timeline &tl);

/// The timeline when compute depends on the plan
/// (CommModel::couplesCompute): the two lanes slow each other, so it is
/// stepped from event to event (a layer, a group or a start ends, a group
/// becomes ready). Backward layers progress at `kappa` while a group is in
/// flight, else at 1; a group progresses at the overlap rate while backward
/// computes, else at 1. A group that starts the moment it is ready, during
/// backward, first holds compute for `comm.callComputeUs` (the start waits
/// while the communication thread posts the call; the group progresses at
/// full speed meanwhile). With kappa 1 and no start cost this is the
/// capacity form in `simulate`.
static void simulateCoupled(const Profile &profile, const CommModel &comm,
                            const Plan &plan,
                            const std::vector<ReadyGrad> &ready, double kappa,
                            Timeline &tl) {
  const unsigned numLayers = profile.layers.size();
  const unsigned numGroups = plan.numGroups();
  // Group k is ready when the backward step of its last gradient's layer
  // ends (steps count layers in backward order).
  std::vector<unsigned> readyStep(numGroups);
  std::vector<double> work(numGroups);
  tl.groups.assign(numGroups, GroupTiming());
  for (unsigned k = 0; k < numGroups; ++k) {
    GroupTiming &g = tl.groups[k];
    g.begin = plan.groupBegin(k);
    g.end = plan.groupEnds[k];
    for (unsigned i = g.begin; i < g.end; ++i)
      g.bytes += ready[i].bytes;
    readyStep[k] = numLayers - 1 - ready[g.end - 1].layer;
    g.form = plan.form(k);
    work[k] = groupChannelUs(comm, ready, plan, k);
    tl.commBusyUs += work[k];
  }
  double t = profile.forwardUs;
  unsigned step = 0; // backward steps done
  double stepLeft = numLayers ? profile.layers[numLayers - 1].backwardUs : 0;
  double stepStart = t;
  unsigned k = 0; // the group in flight or next
  bool inFlight = false;
  double groupLeft = 0;
  const double rho = std::clamp(comm.overlapRate, 0.0, 1.0);
  const double callUs = std::max(0.0, comm.callComputeUs);
  double pauseLeft = 0; // compute held by a call's start
  tl.backward.reserve(numLayers);
  auto startReadyGroups = [&] {
    // Zero-time groups end where they start; the next one may start.
    while (!inFlight && k < numGroups && readyStep[k] < step) {
      tl.groups[k].startUs = t;
      if (work[k] > 0) {
        inFlight = true;
        groupLeft = work[k];
        if (step < numLayers && tl.groups[k].readyUs == t)
          pauseLeft += callUs;
      } else {
        tl.groups[k].endUs = t;
        ++k;
      }
    }
  };
  while (step < numLayers || k < numGroups) {
    // Backward steps of zero time end at once (after a start's hold).
    while (step < numLayers && stepLeft <= 0 && pauseLeft <= 0) {
      tl.backward.push_back({numLayers - 1 - step, stepStart, t});
      for (unsigned j = k; j < numGroups; ++j)
        if (readyStep[j] == step)
          tl.groups[j].readyUs = t;
      ++step;
      stepStart = t;
      if (step < numLayers)
        stepLeft = profile.layers[numLayers - 1 - step].backwardUs;
    }
    startReadyGroups();
    const bool computing = step < numLayers;
    if (!computing && !inFlight)
      break; // every remaining group waits on nothing: none is left
    const bool pausing = computing && pauseLeft > 0;
    double computeSpeed = inFlight ? kappa : 1.0;
    double commSpeed = computing && !pausing ? rho : 1.0;
    double dtCompute = pausing     ? pauseLeft
                       : computing ? stepLeft / computeSpeed
                                   : INFINITY;
    double dtComm = inFlight
                        ? (commSpeed > 0 ? groupLeft / commSpeed : INFINITY)
                        : INFINITY;
    double dt = std::min(dtCompute, dtComm);
    t += dt;
    if (pausing) {
      pauseLeft = dt == dtCompute ? 0 : pauseLeft - dt;
      if (pauseLeft <= 0)
        stepStart = t; // the layer begins after the start
    } else if (computing)
      stepLeft = dt == dtCompute ? 0 : stepLeft - dt * computeSpeed;
    if (inFlight) {
      groupLeft = dt == dtComm ? 0 : groupLeft - dt * commSpeed;
      if (groupLeft <= 0) {
        tl.groups[k].endUs = t;
        inFlight = false;
        ++k;
      }
    }
  }
  tl.backwardEndUs = t;
  if (!tl.backward.empty())
    tl.backwardEndUs = tl.backward.back().endUs;
  tl.commEndUs = numGroups ? tl.groups.back().endUs : 0;
}

Timeline oasr::schedule::simulate(const Profile &profile, const CommModel &comm,
                                  const Plan &plan) {
  std::vector<ReadyGrad> ready = readyOrder(profile);
  assert(!verifyPlan(plan, ready.size()) && "invalid plan for this profile");
  Timeline tl;
  tl.strategy = plan.strategy;
  tl.forwardUs = profile.forwardUs;
  tl.updateUs = profile.updateUs;
  if (comm.couplesCompute(profile.computeBesideComm))
    simulateCoupled(profile, comm, plan, ready,
                    profile.computeBesideComm ? 1.0 : comm.computeRate, tl);
  else
    simulateCapacity(profile, comm, plan, ready, tl);
  tl.iterationUs = std::max(tl.backwardEndUs, tl.commEndUs) + tl.updateUs;
  tl.nonOverlappedCommUs = std::max(0.0, tl.commEndUs - tl.backwardEndUs);
  if (tl.commBusyUs > 0)
    tl.overlapRatio =
        std::clamp(1.0 - tl.nonOverlappedCommUs / tl.commBusyUs, 0.0, 1.0);
  return tl;
}

/// The timeline when communication does not slow compute: backward is
/// fixed, and groups run in channel-capacity coordinates.
static void simulateCapacity(const Profile &profile, const CommModel &comm,
                             const Plan &plan,
                             const std::vector<ReadyGrad> &ready,
                             Timeline &tl) {
  double t = profile.forwardUs;
  tl.backward.reserve(profile.layers.size());
  for (unsigned l = profile.layers.size(); l-- > 0;) {
    double start = t;
    t += profile.layers[l].backwardUs;
    tl.backward.push_back({l, start, t});
  }
  tl.backwardEndUs = t;

  // Groups run in channel-capacity coordinates (Schedule.h): a group starts
  // at max(C(ready), capacity used so far) and needs its channel time.
  const double backwardEnd = t;
  double prevEnd = 0, prevCap = 0;
  tl.groups.reserve(plan.numGroups());
  for (unsigned k = 0, e = plan.numGroups(); k < e; ++k) {
    GroupTiming g;
    g.begin = plan.groupBegin(k);
    g.end = plan.groupEnds[k];
    for (unsigned i = g.begin; i < g.end; ++i)
      g.bytes += ready[i].bytes;
    g.readyUs = ready[g.end - 1].readyUs;
    g.startUs = std::max(g.readyUs, prevEnd);
    g.form = plan.form(k);
    double dur = groupChannelUs(comm, ready, plan, k);
    if (dur > 0) {
      prevCap =
          std::max(comm.capacityAt(g.readyUs, backwardEnd), prevCap) + dur;
      g.endUs = std::max(g.startUs, comm.timeAtCapacity(prevCap, backwardEnd));
    } else {
      g.endUs = g.startUs;
    }
    tl.commBusyUs += dur;
    prevEnd = g.endUs;
    tl.groups.push_back(g);
  }
  tl.commEndUs = prevEnd;
}

double oasr::schedule::lowerBoundUs(const Profile &profile,
                                    const CommModel &comm) {
  std::vector<ReadyGrad> ready = readyOrder(profile);
  double backwardEnd = profile.forwardUs + profile.backwardUs();
  double bound = backwardEnd;
  // Only gradients with bytes are communicated (T(0) = 0).
  auto firstIt = std::find_if(ready.begin(), ready.end(),
                              [](const ReadyGrad &g) { return g.bytes; });
  if (firstIt != ready.end()) {
    // Every group pays at least alpha plus the per-group overhead; packing
    // is not charged because a plan may avoid it with one-tensor groups.
    auto cost = [&](uint64_t bytes) {
      return comm.timeUs(bytes) + comm.groupOverheadUs;
    };
    // In channel-capacity coordinates (Schedule.h) the basic argument holds.
    auto cap = [&](double t) { return comm.capacityAt(t, backwardEnd); };
    auto time = [&](double u) { return comm.timeAtCapacity(u, backwardEnd); };
    double firstReady = firstIt->readyUs;
    // The last-ready bytes: the gradients ready at the latest ready time.
    double lastReady = 0;
    for (const ReadyGrad &g : ready)
      if (g.bytes)
        lastReady = g.readyUs;
    uint64_t lastBytes = 0;
    for (const ReadyGrad &g : ready)
      if (g.bytes && g.readyUs == lastReady)
        lastBytes += g.bytes;
    bound = std::max(bound, time(cap(lastReady) + cost(lastBytes)));
    bound = std::max(bound, time(cap(firstReady) + cost(profile.totalBytes())));
  }
  return bound + profile.updateUs;
}
