//===- Steady.cpp - The steady-state step: plans and models
//-----------------===//
//
// Steady.h states the model; this file holds its plans and communication
// models. The simulator is SteadySimulator.cpp, the lower bound
// SteadyBound.cpp, the strategies SteadyStrategies.cpp.
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
// Plans and models
//===----------------------------------------------------------------------===//

unsigned SteadyPlan::numUnits() const {
  unsigned n = 0;
  for (const SteadyGroup &g : groups)
    n += g.pieces * (g.form == Collective::AllReduce ? 1 : 2);
  return n;
}

std::string SteadyPlan::describe() const {
  unsigned rs = 0, cut = 0, compressed = 0;
  for (const SteadyGroup &g : groups) {
    rs += g.form == Collective::ReduceScatterAllGather;
    cut += g.pieces > 1;
    compressed += g.send.compressed();
  }
  std::string s = barrier ? "barrier (next forward waits for all)"
                  : priority == Priority::LayerIndex ? "layer-index priority"
                                                     : "ready-order priority";
  if (rs)
    s += formatv(", {0} reduce-scatter/all-gather", rs).str();
  if (cut)
    s += formatv(", {0} partitioned", cut).str();
  if (compressed)
    s += formatv(", {0} as PowerSGD factors", compressed).str();
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
    if (g.send.compressed() &&
        (g.form != Collective::AllReduce || g.pieces != 1))
      return fail("group " + Twine(k) + " is sent as " + g.send.name() +
                  " and is not one allreduce piece (PowerSGD sends a whole "
                  "group)");
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
