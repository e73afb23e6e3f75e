//===- TestUtil.h - Helpers shared by the planner unit tests ----*- C++ -*-===//
#ifndef OASR_TEST_UNIT_SCHEDULE_TESTUTIL_H
#define OASR_TEST_UNIT_SCHEDULE_TESTUTIL_H

#include "oasr/Schedule/Schedule.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace oasr::schedule::test {

/// A profile with one gradient per layer; `backward` and `bytes` are in
/// forward order like the profile format.
inline Profile makeProfile(const std::vector<double> &backward,
                           const std::vector<uint64_t> &bytes,
                           double forward = 0, double update = 0) {
  Profile p;
  p.model = "test";
  p.forwardUs = forward;
  p.updateUs = update;
  for (size_t i = 0; i < backward.size(); ++i) {
    Layer l;
    l.name = "l" + std::to_string(i);
    l.backwardUs = backward[i];
    l.grads.push_back({l.name + ".w", bytes[i]});
    p.layers.push_back(l);
  }
  return p;
}

/// The alpha-beta model in "model time units": alpha and beta given in
/// microseconds and microseconds per byte.
inline CommModel unitModel(double alphaUs, double betaUsPerByte) {
  return CommModel::alphaBeta(alphaUs * 1e-6, betaUsPerByte * 1e-6);
}

/// Relative closeness for times that went through different summation
/// orders.
inline bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b));
}

/// A random instance: layers with 0-3 gradients (some of zero bytes), some
/// zero backward times, and alpha/beta in a compute-bound to
/// communication-bound range.
struct RandomInstance {
  Profile profile;
  CommModel comm;
};

inline RandomInstance randomInstance(std::mt19937_64 &rng, unsigned maxLayers,
                                     unsigned maxGradsPerLayer = 3,
                                     bool integral = false) {
  std::uniform_int_distribution<unsigned> nLayers(1, maxLayers);
  std::uniform_int_distribution<unsigned> nGrads(0, maxGradsPerLayer);
  std::uniform_int_distribution<int> coin(0, 9);
  std::uniform_real_distribution<double> time(0.0, 10.0);
  std::uniform_int_distribution<uint64_t> size(1, 1000);
  RandomInstance ri;
  Profile &p = ri.profile;
  p.model = "random";
  p.forwardUs = integral ? std::floor(time(rng)) : time(rng);
  p.updateUs = integral ? std::floor(time(rng)) : time(rng);
  unsigned layers = nLayers(rng);
  unsigned id = 0;
  for (unsigned i = 0; i < layers; ++i) {
    Layer l;
    l.name = "layer" + std::to_string(i);
    double t = coin(rng) == 0 ? 0 : time(rng);
    l.backwardUs = integral ? std::floor(t) : t;
    unsigned g = nGrads(rng);
    for (unsigned k = 0; k < g; ++k)
      l.grads.push_back(
          {"g" + std::to_string(id++), coin(rng) == 0 ? 0 : size(rng)});
    p.layers.push_back(l);
  }
  // beta from 1e-3 to 1e-1 us/byte, alpha from 0.1 to 30 us.
  std::uniform_real_distribution<double> logBeta(-3, -1), logAlpha(-1, 1.5);
  double alpha = std::pow(10, logAlpha(rng)), beta = std::pow(10, logBeta(rng));
  if (integral) {
    alpha = std::floor(alpha) + 1;
    beta = 1.0 / 64 * std::floor(beta * 64 + 1);
  }
  ri.comm = unitModel(alpha, beta);
  return ri;
}

/// The best simulated plan over all 2^(n-1) partitions of the n gradients.
inline Timeline bruteForce(const Profile &profile, const CommModel &comm) {
  unsigned n = profile.numGrads();
  Timeline best;
  best.iterationUs = INFINITY;
  best.commEndUs = INFINITY;
  if (n == 0) {
    Plan empty;
    return simulate(profile, comm, empty);
  }
  for (uint64_t mask = 0; mask < (uint64_t(1) << (n - 1)); ++mask) {
    Plan p;
    p.strategy = "brute";
    for (unsigned i = 1; i < n; ++i)
      if (mask >> (i - 1) & 1)
        p.groupEnds.push_back(i);
    p.groupEnds.push_back(n);
    Timeline t = simulate(profile, comm, p);
    if (t.commEndUs < best.commEndUs)
      best = t;
  }
  return best;
}

} // namespace oasr::schedule::test

#endif // OASR_TEST_UNIT_SCHEDULE_TESTUTIL_H
