//===- Strategies.cpp - Gradient merge strategies and the optimal DP ------===//
//
// Every strategy returns a Plan (a partition of the ready-ordered gradients
// into contiguous groups) that `simulate` scores; docs/planner.md describes
// each one and the extra costs that `oasr` plans for.
//
//===----------------------------------------------------------------------===//

#include "oasr/Schedule/Schedule.h"
#include "oasr/Schedule/Steady.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cassert>
#include <deque>
#include <limits>

using namespace llvm;
using namespace oasr::schedule;

//===----------------------------------------------------------------------===//
// Simple strategies
//===----------------------------------------------------------------------===//

/// One group per layer that has gradients (WFBP).
static Plan wfbpPlan(const Profile &profile) {
  Plan p;
  p.strategy = "wfbp";
  unsigned end = 0;
  for (unsigned l = profile.layers.size(); l-- > 0;) {
    if (profile.layers[l].grads.empty())
      continue;
    end += profile.layers[l].grads.size();
    p.groupEnds.push_back(end);
  }
  return p;
}

/// One group after backward (Sync SGD).
static Plan singlePlan(const Profile &profile) {
  Plan p;
  p.strategy = "single";
  if (unsigned n = profile.numGrads())
    p.groupEnds.push_back(n);
  return p;
}

Plan oasr::schedule::bucketPlan(const Profile &profile, uint64_t capBytes) {
  Plan p;
  p.strategy = "bucket:" + std::to_string(capBytes);
  std::vector<ReadyGrad> ready = readyOrder(profile);
  uint64_t fill = 0;
  for (unsigned i = 0, e = ready.size(); i < e; ++i) {
    // Close the open bucket before a tensor that would overflow it.
    if (i > 0 && fill > 0 && fill + ready[i].bytes > capBytes) {
      p.groupEnds.push_back(i);
      fill = 0;
    }
    fill += ready[i].bytes;
  }
  if (!ready.empty())
    p.groupEnds.push_back(ready.size());
  return p;
}

/// PyTorch DDP's bucket assignment after its rebuild (buckets follow the
/// order gradients became ready in the first iteration):
/// `compute_bucket_assignment_by_size` appends a tensor and closes the bucket
/// once its size reaches the current limit; the limits are
/// [1 MiB (the first bucket), 25 MiB (bucket_cap_mb) ...].
static Plan ddpPlan(const Profile &profile) {
  constexpr uint64_t firstLimit = 1ull << 20, limit = 25ull << 20;
  Plan p;
  p.strategy = "ddp";
  std::vector<ReadyGrad> ready = readyOrder(profile);
  uint64_t fill = 0, cur = firstLimit;
  for (unsigned i = 0, e = ready.size(); i < e; ++i) {
    fill += ready[i].bytes;
    if (fill >= cur) {
      p.groupEnds.push_back(i + 1);
      fill = 0;
      cur = limit;
    }
  }
  if (!ready.empty() &&
      (p.groupEnds.empty() || p.groupEnds.back() != ready.size()))
    p.groupEnds.push_back(ready.size());
  return p;
}

//===----------------------------------------------------------------------===//
// MG-WFBP
//===----------------------------------------------------------------------===//

// MG-WFBP's merge rule as published by Shi, Chu and Li (INFOCOM'19, TPDS'21)
// and implemented in HKBU-HPML/MG-WFBP, distributed_optimizer.py,
// `_generate_groups_mgwfbp` (our own code, same rule). Walking the tensors in
// ready order with the current group g (start tau_c, communication time t_c)
// and the next tensor's ready time tau_b:
//   - if tau_b >= tau_c + t_c, g's communication has finished: close g;
//   - else if tau_c > tau_b, g has not started yet: merge the next tensor;
//   - else merge iff the wait it causes, tau_b - tau_c, is below alpha (the
//     start-up time saved).
// A merge moves g's start to max(tau_c, tau_b) and its time to T(bytes of g).
// The reference recomputes all start times after each merge; only the
// current group's start can change (earlier groups are fixed and later ones
// are not yet formed), so one pass computes the same groups in O(n).
// The rule uses the basic alpha-beta model, like the reference.
Plan oasr::schedule::mgwfbpPlan(const Profile &profile, const CommModel &comm) {
  Plan p;
  p.strategy = "mgwfbp";
  std::vector<ReadyGrad> ready = readyOrder(profile);
  if (ready.empty())
    return p;
  CommModel basic = comm.basic();
  double alpha = basic.alphaUs();
  uint64_t bytes = ready[0].bytes;
  double start = ready[0].readyUs;
  double tc = basic.timeUs(bytes);
  for (unsigned k = 0, e = ready.size(); k + 1 < e; ++k) {
    double next = ready[k + 1].readyUs;
    bool merge = false;
    if (next < start + tc)
      merge = start > next || next - start < alpha;
    if (merge) {
      bytes += ready[k + 1].bytes;
      tc = basic.timeUs(bytes);
      start = std::max(start, next);
      continue;
    }
    p.groupEnds.push_back(k + 1);
    double prevEnd = start + tc;
    bytes = ready[k + 1].bytes;
    tc = basic.timeUs(bytes);
    start = std::max(prevEnd, next);
  }
  p.groupEnds.push_back(ready.size());
  return p;
}

//===----------------------------------------------------------------------===//
// The optimal dynamic program
//===----------------------------------------------------------------------===//
//
// Gradients 1..n in ready order, ready times r_1 <= ... <= r_n, prefix bytes
// S_0 = 0 <= S_1 <= ... <= S_n. F(j) is the earliest time the communication
// of the first j gradients can end:
//   F(0) = 0,  F(j) = min_{0 <= i < j} max(F(i), r_j) + c(i, j),
// where c(i, j) = CommModel::groupTimeUs(S_j - S_i, j - i) is the channel
// time of group (i, j]. This is exact (DESIGN.md): a group's end is
// non-decreasing in the previous group's end, so an optimal plan's prefix
// is an optimal plan of that prefix. The iteration time is
// max(end of backward, F(n)) + t_update, minimized with F(n).
//
// Pruning the O(n^2) scan to O(n) amortized. Facts:
//  (1) F is non-decreasing: dropping gradient j+1 from the last group of an
//      optimal (j+1)-plan gives a j-plan ending no later (c is monotone in
//      bytes and in the tensor count, r_j <= r_{j+1}); if that group was
//      {j+1} alone, F(j+1) >= F(j) directly.
//  (2) For i with S_i == S_j (zero-byte group) c = 0: these i form a range
//      [z_j, j-1]; by (1) the best is i = z_j.
//  (3) For i <= j-2 with S_i < S_j, c(i, j) = a + b (S_j - S_i) with the
//      same a (= alpha + overhead) and b (= beta + pack) for every i (the
//      group holds >= 2 tensors). Let p_j = max{i < j : F(i) <= r_j}; by (1)
//      exactly the i <= p_j have max(F(i), r_j) = r_j. Among those the cost
//      r_j + a + b (S_j - S_i) is smallest at the largest i (S is
//      non-decreasing). For p_j < i the cost is F(i) - b S_i + a + b S_j, so
//      the best is the minimum of G(i) = F(i) - b S_i over the window
//      (p_j, hi_j], hi_j = min(z_j - 1, j - 2).
//  (4) i = j - 1 (one tensor, no packing) is evaluated directly.
// p_j, z_j and hi_j are non-decreasing in j, so the window slides right and
// a monotone deque (increasing G from front to back) yields its minimum in
// O(1) amortized. Each candidate is evaluated with the exact formula, so the
// result is the exact minimum over all i (up to floating-point ties). The
// unit tests compare it with the O(n^2) scan and with exhaustive
// enumeration of all 2^(n-1) partitions.

namespace {
struct DPInput {
  std::vector<double> ready;    // r_1..r_n at [0, n)
  std::vector<uint64_t> prefix; // S_0..S_n
};
} // namespace

/// Ready times are in channel-capacity coordinates (Schedule.h), so a
/// communication model with an overlap rate below 1 is planned exactly by
/// the same program.
static DPInput makeDPInput(const Profile &profile, const CommModel &comm) {
  DPInput in;
  std::vector<ReadyGrad> ready = readyOrder(profile);
  const double backwardEnd = profile.forwardUs + profile.backwardUs();
  in.ready.reserve(ready.size());
  in.prefix.reserve(ready.size() + 1);
  in.prefix.push_back(0);
  for (const ReadyGrad &g : ready) {
    in.ready.push_back(comm.capacityAt(g.readyUs, backwardEnd));
    in.prefix.push_back(in.prefix.back() + g.bytes);
  }
  return in;
}

/// Rebuilds group ends from the argmin table.
static Plan planFromArgs(StringRef name, const std::vector<unsigned> &arg) {
  Plan p;
  p.strategy = name.str();
  unsigned n = arg.size() - 1;
  for (unsigned j = n; j > 0; j = arg[j])
    p.groupEnds.push_back(j);
  std::reverse(p.groupEnds.begin(), p.groupEnds.end());
  return p;
}

static Plan solveQuadratic(StringRef name, const DPInput &in,
                           const CommModel &comm) {
  unsigned n = in.ready.size();
  std::vector<double> f(n + 1, 0);
  std::vector<unsigned> arg(n + 1, 0);
  for (unsigned j = 1; j <= n; ++j) {
    double best = std::numeric_limits<double>::infinity();
    double r = in.ready[j - 1];
    for (unsigned i = 0; i < j; ++i) {
      double c = std::max(f[i], r) +
                 comm.groupTimeUs(in.prefix[j] - in.prefix[i], j - i);
      if (c <= best) { // ties go to the largest i (fewer groups)
        best = c;
        arg[j] = i;
      }
    }
    f[j] = best;
  }
  return planFromArgs(name, arg);
}

static Plan solvePruned(StringRef name, const DPInput &in,
                        const CommModel &comm) {
  unsigned n = in.ready.size();
  const std::vector<uint64_t> &s = in.prefix;
  std::vector<double> f(n + 1, 0);
  std::vector<unsigned> arg(n + 1, 0);
  double b = comm.lineBetaUsPerByte() + comm.packUsPerByte;
  auto g = [&](unsigned i) { return f[i] - b * static_cast<double>(s[i]); };

  std::deque<unsigned> window; // indices in (p, hi], G increasing
  unsigned p = 0;              // max{i < j : F(i) <= r_j}
  unsigned z = 0;              // min{i : S_i == S_j}
  unsigned nextPush = 0;       // next index to enter the window
  for (unsigned j = 1; j <= n; ++j) {
    double r = in.ready[j - 1];
    while (p + 1 < j && f[p + 1] <= r)
      ++p;
    while (s[z] < s[j])
      ++z;
    // Affine region [0, hi], hi = min(z - 1, j - 2); empty when < 0.
    long hi = std::min<long>(long(z) - 1, long(j) - 2);
    for (; long(nextPush) <= hi; ++nextPush) {
      double gv = g(nextPush);
      while (!window.empty() && g(window.back()) >= gv)
        window.pop_back();
      window.push_back(nextPush);
    }
    while (!window.empty() && window.front() <= p)
      window.pop_front();

    double best = std::numeric_limits<double>::infinity();
    unsigned bestI = 0;
    auto consider = [&](unsigned i) {
      double c = std::max(f[i], r) + comm.groupTimeUs(s[j] - s[i], j - i);
      if (c < best || (c == best && i > bestI)) {
        best = c;
        bestI = i;
      }
    };
    consider(j - 1);
    if (z <= j - 1)
      consider(z);
    if (hi >= 0) {
      consider(std::min<long>(p, hi));
      if (!window.empty())
        consider(window.front());
    }
    f[j] = best;
    arg[j] = bestI;
  }
  return planFromArgs(name, arg);
}

/// The exact program for `comm`: the pruned one where a group's cost is one
/// line in its bytes. Where it is the lower of the flat and the two-level
/// line (CommModel::linearCost false), the quadratic scan up to
/// kExactTwoLineMaxGrads gradients; past that, the better of the two
/// single-line optima under the true cost (not exact, and said so in
/// docs/planner.md).
static Plan solveExact(StringRef name, const DPInput &in,
                       const CommModel &comm) {
  if (comm.linearCost())
    return solvePruned(name, in, comm);
  if (in.ready.size() <= kExactTwoLineMaxGrads)
    return solveQuadratic(name, in, comm);
  Plan best;
  double bestUs = std::numeric_limits<double>::infinity();
  for (AllreduceRoute route :
       {AllreduceRoute::Flat, AllreduceRoute::TwoLevel}) {
    CommModel one = comm;
    one.route = route;
    Plan p = solvePruned(name, in, one);
    // The program's own objective (the last group's end) under `comm`.
    double end = 0;
    for (unsigned k = 0; k < p.numGroups(); ++k) {
      unsigned b = p.groupBegin(k), e = p.groupEnds[k];
      end = std::max(end, in.ready[e - 1]) +
            comm.groupTimeUs(in.prefix[e] - in.prefix[b], e - b);
    }
    if (end < bestUs) {
      bestUs = end;
      best = std::move(p);
    }
  }
  return best;
}

Plan oasr::schedule::optimalPlan(const Profile &profile,
                                 const CommModel &comm) {
  CommModel basic = comm.basic();
  return solveExact("optimal", makeDPInput(profile, basic), basic);
}

Plan oasr::schedule::optimalPlanQuadratic(const Profile &profile,
                                          const CommModel &comm) {
  CommModel basic = comm.basic();
  return solveQuadratic("optimal", makeDPInput(profile, basic), basic);
}

Plan oasr::schedule::oasrPlan(const Profile &profile, const CommModel &comm) {
  Plan exact = solveExact("oasr", makeDPInput(profile, comm), comm);
  if (!comm.couplesCompute(profile.computeBesideComm))
    return exact;
  // Where compute depends on the plan neither DP is exact: refine both the
  // optimum with the extra costs and the one without (its groups can be
  // the better start, e.g. one more boundary where compute beside
  // communication is cheap) and keep the faster, so `oasr` is never
  // predicted slower than `optimal`.
  Plan a = refineOnTimeline(profile, comm, std::move(exact));
  Plan b = refineOnTimeline(profile, comm, optimalPlan(profile, comm));
  b.strategy = "oasr";
  return simulate(profile, comm, b).iterationUs <
                 simulate(profile, comm, a).iterationUs
             ? b
             : a;
}

Plan oasr::schedule::refineOnTimeline(const Profile &profile,
                                      const CommModel &comm, Plan plan) {
  // Only where the simulator couples compute to the plan (Simulator.cpp).
  if (!comm.couplesCompute(profile.computeBesideComm) || plan.numGroups() < 2)
    return plan;
  // Each round simulates every one-boundary-fewer plan: O(G) timelines of
  // O(L + G) events. Bounded so a 10^5-gradient profile stays interactive;
  // past the budget the plan found so far is kept (still no worse).
  const double eventsPerTimeline =
      double(profile.layers.size()) + double(plan.numGroups()) + 1;
  double budget = 2e7;
  double best = simulate(profile, comm, plan).iterationUs;
  while (plan.numGroups() > 1) {
    double bestHere = std::numeric_limits<double>::infinity();
    size_t bestDrop = 0;
    Plan trial = plan;
    for (size_t b = 0; b + 1 < plan.groupEnds.size(); ++b) {
      if ((budget -= eventsPerTimeline) < 0)
        return plan;
      trial.groupEnds = plan.groupEnds;
      trial.groupEnds.erase(trial.groupEnds.begin() + long(b));
      double t = simulate(profile, comm, trial).iterationUs;
      if (t < bestHere) {
        bestHere = t;
        bestDrop = b;
      }
    }
    // A tie goes to fewer groups (fewer start-ups than the model sees).
    if (bestHere > best)
      break;
    plan.groupEnds.erase(plan.groupEnds.begin() + long(bestDrop));
    best = bestHere;
  }
  return plan;
}

//===----------------------------------------------------------------------===//
// Strategy names
//===----------------------------------------------------------------------===//

std::vector<std::string> oasr::schedule::strategyNames() {
  return {"wfbp", "single", "ddp", "horovod", "mgwfbp", "optimal", "oasr"};
}

/// Parses "<digits>[suffix]" with KB/MB/GB (powers of 1000) or KiB/MiB/GiB
/// (powers of 1024) suffixes.
std::optional<uint64_t> oasr::schedule::parseBytes(StringRef text) {
  StringRef digits = text.take_while([](char c) { return isDigit(c); });
  StringRef suffix = text.drop_front(digits.size());
  uint64_t value;
  if (digits.empty() || digits.getAsInteger(10, value))
    return std::nullopt;
  uint64_t mult = StringSwitch<uint64_t>(suffix)
                      .Case("", 1)
                      .Cases("K", "KB", 1000)
                      .Cases("M", "MB", 1000 * 1000)
                      .Cases("G", "GB", 1000 * 1000 * 1000)
                      .Case("KiB", 1ull << 10)
                      .Case("MiB", 1ull << 20)
                      .Case("GiB", 1ull << 30)
                      .Default(0);
  if (mult == 0 || value == 0 ||
      value > std::numeric_limits<uint64_t>::max() / mult)
    return std::nullopt;
  return value * mult;
}

std::string oasr::schedule::strategyHelp() {
  std::vector<std::string> names = strategyNames();
  names.push_back("bucket:<bytes>");
  for (const std::string &n : steadyStrategyNames())
    names.push_back(n == "bytescheduler" || n == "dear" ? n + "[:<bytes>]" : n);
  return join(names, ", ");
}

static Error unknownStrategy(StringRef strategy) {
  return createStringError(inconvertibleErrorCode(),
                           "unknown strategy '" + strategy +
                               "' (expected one of " + strategyHelp() + ")");
}

Error oasr::schedule::checkStrategy(StringRef strategy) {
  if (strategy.consume_front("bucket:")) {
    if (!parseBytes(strategy))
      return createStringError(
          inconvertibleErrorCode(),
          "strategy 'bucket:" + strategy +
              "': the bucket size must be a positive number of bytes, "
              "optionally with a KB/MB/GB or KiB/MiB/GiB suffix");
    return Error::success();
  }
  if (!is_contained(strategyNames(), strategy))
    return unknownStrategy(strategy);
  return Error::success();
}

bool oasr::schedule::strategyNeedsCommModel(StringRef strategy) {
  return is_contained({"mgwfbp", "optimal", "oasr"}, strategy);
}

Expected<Plan> oasr::schedule::makePlan(StringRef strategy,
                                        const Profile &profile,
                                        const CommModel &comm) {
  if (Error e = checkStrategy(strategy))
    return std::move(e);
  Plan p;
  if (strategy.starts_with("bucket:"))
    p = bucketPlan(profile, *parseBytes(strategy.drop_front(7)));
  else if (strategy == "wfbp")
    p = wfbpPlan(profile);
  else if (strategy == "single")
    p = singlePlan(profile);
  else if (strategy == "ddp")
    p = ddpPlan(profile);
  else if (strategy == "horovod")
    p = bucketPlan(profile, 128ull << 20);
  else if (strategy == "mgwfbp")
    p = mgwfbpPlan(profile, comm);
  else if (strategy == "optimal")
    p = optimalPlan(profile, comm);
  else if (strategy == "oasr")
    p = oasrPlan(profile, comm);
  else
    return unknownStrategy(strategy);
  p.strategy = strategy.str();
  assert(!verifyPlan(p, profile.numGrads()) && "strategy built a bad plan");
  return p;
}
