//===- SteadyBound.cpp - The steady-state lower bound
//-----------------------===//
//
// No steady-state plan of a profile can run a step faster than this bound.
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
    double startUp = std::min(ar.minAlphaUs() + ar.groupOverheadUs,
                              rs.alphaUs() + rs.groupOverheadUs + ag.alphaUs() +
                                  ag.groupOverheadUs);
    double work = startUp + (1 - rho) * (F + B);
    for (size_t l = 0; l < L.size(); ++l)
      work += std::min(
          ar.minBetaUsPerByte() * double(L.bytes[l]) + (1 - rho) * L.upd[l],
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
