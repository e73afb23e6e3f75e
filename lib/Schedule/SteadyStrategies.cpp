//===- SteadyStrategies.cpp - The steady-state strategies
//-------------------===//
//
// oasr-step, oasr-barrier, bytescheduler and DeAR's forms: each makes a
// SteadyPlan from a profile and the communication models.
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
// Strategies
//===----------------------------------------------------------------------===//

/// The layer groups of a backward-only plan: each group's layers and form,
/// ranges merged where a layer's tensors were split between groups (the
/// merged group takes the highest rank among them, else plain).
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
    out.push_back({lo, hi, 1, Collective::AllReduce, plan.form(k)});
  }
  std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
    return a.firstLayer < b.firstLayer;
  });
  std::vector<SteadyGroup> merged;
  for (const SteadyGroup &g : out) {
    if (!merged.empty() && g.firstLayer <= merged.back().lastLayer) {
      SteadyGroup &m = merged.back();
      m.lastLayer = std::max(m.lastLayer, g.lastLayer);
      if (g.send.compressed() && g.send.rank > m.send.rank)
        m.send = g.send;
    } else {
      merged.push_back(g);
    }
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
/// The forms a compression policy gives steady groups.
class SteadyForms {
public:
  SteadyForms(const Profile &profile, const SteadyComm &comm,
              const CompressPolicy &policy)
      : L(profile), comm(comm), policy(policy) {}
  bool off() const { return policy.off(); }
  bool chooses() const { return policy.mode == CompressPolicy::Mode::Auto; }
  unsigned rank() const { return policy.rank; }

  /// The policy's form for `g`: powersgd:R wherever a matrix of it
  /// compresses at R; auto: that or plain, whichever channel time is the
  /// smaller.
  GroupForm choose(const SteadyGroup &g) const {
    if (policy.off())
      return GroupForm::plain();
    GroupForm r = GroupForm::powerSGD(policy.rank);
    FormCost c = sendCost(L, g, comm.allreduce, r);
    if (!c.compressed ||
        (chooses() &&
         !(c.channelUs <
           sendCost(L, g, comm.allreduce, GroupForm::plain()).channelUs)))
      return GroupForm::plain();
    return r;
  }
  /// Whether `g` may travel compressed at the policy's rank.
  bool compressible(const SteadyGroup &g) const {
    return !policy.off() &&
           sendCost(L, g, comm.allreduce, GroupForm::powerSGD(policy.rank))
                   .compressed > 0;
  }
  /// A compressed group is one allreduce piece.
  static void send(SteadyGroup &g, GroupForm f) {
    g.send = f;
    if (f.compressed()) {
      g.pieces = 1;
      g.form = Collective::AllReduce;
    }
  }
  void apply(SteadyGroup &g) const { send(g, choose(g)); }
  void applyAll(SteadyPlan &p) const {
    if (!off())
      for (SteadyGroup &g : p.groups)
        apply(g);
  }
  std::vector<GroupForm> ladder(const SteadyGroup &g) const {
    return fidelityLadder(groupGrads(L, g), policy);
  }

private:
  Layers L;
  const SteadyComm &comm;
  const CompressPolicy &policy;
};

/// Hill climbing over plans of the model, scored by the simulator.
class StepSearch {
public:
  StepSearch(const Profile &profile, const SteadyComm &comm,
             const SteadyForms &forms)
      : profile(profile), comm(comm), forms(forms) {}

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
          if (!forms.off())
            forms.apply(c.groups[k]);
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
          if (!forms.off()) {
            forms.apply(c.groups[k]);
            forms.apply(second);
          }
          c.groups.insert(c.groups.begin() + long(k) + 1, second);
          trimEmpty(c);
          tryPlan(std::move(c));
        }
        if (k >= best.groups.size())
          break;
        // auto: the other form.
        if (forms.chooses() && forms.compressible(best.groups[k])) {
          SteadyPlan c = best;
          SteadyForms::send(c.groups[k],
                            c.groups[k].send.compressed()
                                ? GroupForm::plain()
                                : GroupForm::powerSGD(forms.rank()));
          tryPlan(std::move(c));
        }
        // A compressed group is one allreduce piece.
        if (best.groups[k].send.compressed())
          continue;
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
  const SteadyForms &forms;
};

/// auto: each compressed group of `plan` gets the most faithful form that
/// does not lengthen the period, plain first for every group, then the
/// highest rank of its ladder (faithfulForms' rule on the steady model).
SteadyPlan faithfulSteady(const Profile &profile, const SteadyComm &comm,
                          const SteadyForms &forms, SteadyPlan plan) {
  keepFaithfulForms(
      plan.groups.size(),
      [&] { return simulateSteady(profile, comm, plan).periodUs; },
      [&](unsigned k) { return plan.groups[k].send; },
      [&](unsigned k, GroupForm f) { SteadyForms::send(plan.groups[k], f); },
      [&](unsigned k) { return forms.ladder(plan.groups[k]); });
  return plan;
}
} // namespace

std::vector<std::string> oasr::schedule::steadyStrategyNames() {
  return {"oasr-barrier", "bytescheduler", "dear", "oasr-step"};
}

bool oasr::schedule::isSteadyStrategy(StringRef strategy) {
  StringRef name = strategy.split(':').first;
  return is_contained(steadyStrategyNames(), name) &&
         (name == strategy || name == "bytescheduler" || name == "dear");
}

bool oasr::schedule::steadyStrategyCompresses(StringRef strategy) {
  return strategy == "oasr-step" || strategy == "oasr-barrier";
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
    out.plan.forms.push_back(g.send);
    out.pieces.push_back(g.pieces);
    out.scatter.push_back(g.form == Collective::ReduceScatterAllGather);
  }
  if (at != ready.size())
    return createStringError(inconvertibleErrorCode(),
                             plan.strategy +
                                 ": the groups do not cover the gradients in "
                                 "ready order");
  if (!out.plan.compresses())
    out.plan.forms.clear();
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

Expected<SteadyPlan>
oasr::schedule::makeSteadyPlan(StringRef strategy, const Profile &profile,
                               const SteadyComm &comm,
                               const CompressPolicy &compress) {
  if (!compress.off() && !steadyStrategyCompresses(strategy) &&
      isSteadyStrategy(strategy))
    return createStringError(
        inconvertibleErrorCode(),
        "strategy '" + strategy + "' " +
            (strategy.starts_with("dear") ? "reduce-scatters" : "partitions") +
            " its groups, and PowerSGD (compress=" + compress.name() +
            ") sends a group whole; steady-state plans compress with "
            "oasr-step or oasr-barrier");
  const SteadyForms forms(profile, comm, compress);
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
  // Under compression: the backward-only optimum over groups and forms
  // together, cut between layers only (a steady group is a range of
  // layers; merging a layer split between two groups would change both),
  // with auto's faithful forms. Past the quadratic program's size, the
  // oasr plan's forms, its split layers merged.
  std::vector<SteadyGroup> startGroups;
  if (compress.off()) {
    startGroups = oasrGroups();
  } else if (profile.numGrads() <= kCompressionAwareMaxGrads) {
    Plan p = compressionAwarePlan(profile, comm.allreduce, compress,
                                  /*cutsBetweenLayers=*/true);
    if (compress.mode == CompressPolicy::Mode::Auto && p.compresses())
      p = faithfulForms(profile, comm.allreduce, compress, std::move(p));
    startGroups = layerGroups(profile, p);
  } else {
    Expected<Plan> p =
        makeCompressedPlan("oasr", profile, comm.allreduce, compress);
    if (!p)
      return p.takeError();
    startGroups = layerGroups(profile, *p);
  }
  if (strategy == "oasr-barrier") {
    SteadyPlan p;
    p.strategy = "oasr-barrier";
    p.barrier = true;
    p.groups = startGroups;
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
  StepSearch search(profile, comm, forms);
  std::vector<SteadyPlan> cands;
  SteadyPlan barrier;
  barrier.strategy = "oasr-step";
  barrier.barrier = true;
  barrier.groups = startGroups;
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
        if (!g.send.compressed())
          g.form = form;
      cands.push_back(c);
    }
  // The baselines, each group in the policy's form.
  for (SteadyPlan c : {byteschedulerPlan(profile, ~0ull),
                       byteschedulerPlan(profile, 4ull << 20),
                       comm.allowReduceScatter ? dearPlan(profile, 25ull << 20)
                                               : SteadyPlan()}) {
    if (c.groups.empty())
      continue;
    forms.applyAll(c);
    cands.push_back(std::move(c));
  }
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
  if (forms.chooses())
    best = faithfulSteady(profile, comm, forms, std::move(best));
  // Scored again as reports score it (more iterations than the search):
  // today's plan stays the fallback.
  if (simulateSteady(profile, comm, best).periodUs >
      simulateSteady(profile, comm, barrier).periodUs)
    best = barrier;
  best.strategy = "oasr-step";
  return best;
}
