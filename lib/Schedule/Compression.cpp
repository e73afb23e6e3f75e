//===- Compression.cpp - What each fused group sends ----------------------===//
//
// The cost of a group's form, and the planning of forms: per group for a
// given grouping, or together with the grouping (compressionAwarePlan).
//
//===----------------------------------------------------------------------===//

#include "oasr/Schedule/Compression.h"
#include "oasr/Schedule/Schedule.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <limits>

using namespace llvm;
using namespace oasr::schedule;

std::string GroupForm::name() const {
  return compressed() ? "powersgd:" + std::to_string(rank) : "plain";
}

bool oasr::schedule::powerSgdCompresses(uint64_t rows, uint64_t elements,
                                        unsigned rank) {
  if (rows < 2 || rank == 0 || elements % rows)
    return false;
  uint64_t cols = elements / rows;
  if (cols < 2)
    return false;
  // r (n + m) * 2 < n m, in doubles: no overflow for any real tensor.
  return 2.0 * double(rank) * double(rows + cols) < double(rows) * double(cols);
}

std::string CompressPolicy::name() const {
  switch (mode) {
  case Mode::Off:
    return "off";
  case Mode::PowerSGD:
    return "powersgd:" + std::to_string(rank);
  case Mode::Auto:
    return "auto:" + std::to_string(rank) +
           (maxRank == kMaxRank ? "" : "-" + std::to_string(maxRank));
  }
  return "off";
}

Expected<CompressPolicy> oasr::schedule::parseCompressPolicy(StringRef text) {
  auto bad = [&](const Twine &why) {
    return createStringError(inconvertibleErrorCode(),
                             "'" + text + "': " + why +
                                 " (expected off, powersgd:R or auto[:R[-M]], "
                                 "R the rank and M auto's highest, 1 to " +
                                 Twine(CompressPolicy::kMaxRank) + ")");
  };
  auto parseRank = [&](StringRef s, const char *what, unsigned &out) -> Error {
    int64_t r = 0;
    if (s.getAsInteger(10, r))
      return bad(Twine(what) + " must be an integer");
    if (r < 1 || r > CompressPolicy::kMaxRank)
      return bad(Twine(what) + " must be at least 1 and at most " +
                 Twine(CompressPolicy::kMaxRank));
    out = unsigned(r);
    return Error::success();
  };
  CompressPolicy p;
  StringRef rest = text;
  if (text == "off")
    return p;
  if (rest.consume_front("powersgd")) {
    p.mode = CompressPolicy::Mode::PowerSGD;
    if (!rest.consume_front(":"))
      return bad("powersgd needs its rank");
    if (Error e = parseRank(rest, "the rank", p.rank))
      return std::move(e);
    p.maxRank = p.rank;
    return p;
  }
  if (!rest.consume_front("auto"))
    return bad("unknown form");
  p.mode = CompressPolicy::Mode::Auto;
  p.rank = CompressPolicy::kDefaultAutoRank;
  p.maxRank = CompressPolicy::kMaxRank;
  if (rest.empty())
    return p;
  if (!rest.consume_front(":"))
    return bad("unknown form");
  auto [low, high] = rest.split('-');
  if (Error e = parseRank(low, "the rank", p.rank))
    return std::move(e);
  if (rest.contains('-')) {
    if (Error e = parseRank(high, "the highest rank", p.maxRank))
      return std::move(e);
    if (p.maxRank < p.rank)
      return bad("the highest rank is under the rank");
  }
  return p;
}

std::vector<GroupForm>
oasr::schedule::formsFromRanks(ArrayRef<unsigned> ranks) {
  if (llvm::all_of(ranks, [](unsigned r) { return r == 0; }))
    return {};
  std::vector<GroupForm> forms;
  for (unsigned r : ranks)
    forms.push_back(r ? GroupForm::powerSGD(r) : GroupForm::plain());
  return forms;
}

/// A compressed group's two collectives (P with the vectors, then Q), on
/// the route they take together (`twoLevel` set to it).
static double factorCollectivesUs(const CommModel &comm, uint64_t first,
                                  unsigned firstTensors, uint64_t second,
                                  unsigned matrices, bool &twoLevel) {
  auto on = [&](bool two) {
    return comm.groupTimeUs(first, firstTensors, two) +
           comm.groupTimeUs(second, matrices, two);
  };
  const double flat = on(false);
  if (!comm.twoLevelUsable()) {
    twoLevel = false;
    return flat;
  }
  const double two = on(true);
  twoLevel = comm.prefersTwoLevel(flat, two);
  return twoLevel ? two : flat;
}

FormCost oasr::schedule::formCost(const CommModel &comm,
                                  ArrayRef<ReadyGrad> grads, GroupForm form) {
  FormCost c;
  uint64_t bytes = 0;
  for (const ReadyGrad &g : grads)
    bytes += g.bytes;
  auto plain = [&] {
    c.wireBytes = uint64_t(double(bytes) * wireFactor(comm.wire));
    c.collectives = bytes ? 1 : 0;
    c.channelUs = comm.groupTimeUs(bytes, grads.size());
    c.twoLevel = comm.sendsTwoLevel(bytes);
    return c;
  };
  if (!form.compressed())
    return plain();
  const double r = form.rank;
  uint64_t first = 0, second = 0; // f32 bytes of the two collectives
  unsigned firstTensors = 0;
  double macs = 0, elements = 0;
  for (const ReadyGrad &g : grads) {
    uint64_t n = g.bytes / 4;
    if (!powerSgdCompresses(g.rows, n, form.rank)) {
      first += g.bytes;
      firstTensors += g.bytes ? 1 : 0;
      continue;
    }
    double rows = double(g.rows), cols = double(n / g.rows);
    first += uint64_t(4 * r * rows);
    second += uint64_t(4 * r * cols);
    ++firstTensors;
    ++c.compressed;
    // P = M Q, Q = M^T P, P Q^T; Gram-Schmidt on P (n x r).
    macs += 3 * rows * cols * r + rows * r * r;
    elements += rows * cols;
  }
  if (!c.compressed)
    return plain();
  // Factors and vectors travel in the wire type (f32 or bf16), as plain
  // groups do.
  c.wireBytes = uint64_t(double(first + second) * wireFactor(comm.wire));
  c.collectives = 2;
  c.computeUs =
      macs * comm.compressUsPerMac + elements * comm.compressUsPerElement;
  c.channelUs = factorCollectivesUs(comm, first, firstTensors, second,
                                    c.compressed, c.twoLevel) +
                c.computeUs;
  return c;
}

std::vector<bool> oasr::schedule::twoLevelGroups(const Profile &profile,
                                                 const CommModel &comm,
                                                 const Plan &plan) {
  std::vector<bool> out(plan.numGroups(), false);
  if (!comm.twoLevelUsable())
    return out;
  std::vector<ReadyGrad> ready = readyOrder(profile);
  for (unsigned k = 0; k < plan.numGroups(); ++k) {
    unsigned b = plan.groupBegin(k);
    out[k] = formCost(comm, ArrayRef(ready).slice(b, plan.groupEnds[k] - b),
                      plan.form(k))
                 .twoLevel;
  }
  return out;
}

double oasr::schedule::groupChannelUs(const CommModel &comm,
                                      ArrayRef<ReadyGrad> ready,
                                      const Plan &plan, unsigned k) {
  unsigned b = plan.groupBegin(k);
  return formCost(comm, ready.slice(b, plan.groupEnds[k] - b), plan.form(k))
      .channelUs;
}

CompressionCostSource oasr::schedule::setCompressionCosts(CommModel &comm,
                                                          double gmacs) {
  if (gmacs > 0) {
    comm.compressUsPerMac = 1e-3 / gmacs;
    if (comm.compressUsPerElement <= 0)
      comm.compressUsPerElement = 36.0 / 17.0e3;
    return CompressionCostSource::Option;
  }
  if (comm.compressUsPerMac > 0 && comm.compressUsPerElement > 0)
    return CompressionCostSource::Calibration;
  comm.compressUsPerMac = 1e-3 / (185.0 / 4);
  comm.compressUsPerElement = 36.0 / 17.0e3;
  return CompressionCostSource::Default;
}

const char *oasr::schedule::compressionCostSourceName(CompressionCostSource s) {
  switch (s) {
  case CompressionCostSource::Option:
    return "compress-gmacs";
  case CompressionCostSource::Calibration:
    return "calibration";
  case CompressionCostSource::Default:
    return "default";
  }
  return "default";
}

Plan oasr::schedule::chooseForms(const Profile &profile, const CommModel &comm,
                                 const CompressPolicy &policy, Plan plan) {
  plan.forms.clear();
  if (policy.off())
    return plan;
  std::vector<ReadyGrad> ready = readyOrder(profile);
  const GroupForm psgd = GroupForm::powerSGD(policy.rank);
  for (unsigned k = 0; k < plan.numGroups(); ++k) {
    ArrayRef<ReadyGrad> g(ready.data() + plan.groupBegin(k),
                          plan.groupEnds[k] - plan.groupBegin(k));
    FormCost pc = formCost(comm, g, psgd);
    bool use = pc.compressed > 0;
    // A group's end never decreases with an earlier group's, so for a
    // fixed grouping the cheaper form of each group is the best plan.
    if (use && policy.mode == CompressPolicy::Mode::Auto)
      use = pc.channelUs < formCost(comm, g, GroupForm::plain()).channelUs;
    plan.forms.push_back(use ? psgd : GroupForm::plain());
  }
  if (!plan.compresses())
    plan.forms.clear();
  return plan;
}

// The grouping and the forms together: the optimal program of
// Strategies.cpp with c(i, j) = min over forms of the group's channel time.
// Exact for the same reason (a group's end never decreases with the
// previous group's). The PowerSGD cost of (i, j] comes from prefix sums of
// its terms, so each pair is O(1); the scan is O(n^2).
Plan oasr::schedule::compressionAwarePlan(const Profile &profile,
                                          const CommModel &comm,
                                          const CompressPolicy &policy,
                                          bool cutsBetweenLayers) {
  std::vector<ReadyGrad> ready = readyOrder(profile);
  const unsigned n = ready.size();
  const double backwardEnd = profile.forwardUs + profile.backwardUs();
  const GroupForm psgd = GroupForm::powerSGD(policy.rank);
  // Prefix sums: bytes; uncompressed bytes and tensors (the first
  // collective's vectors); P bytes, Q bytes and compressed tensors; the
  // compute.
  std::vector<double> bytes(n + 1), vecBytes(n + 1), vecTensors(n + 1),
      pBytes(n + 1), qBytes(n + 1), mats(n + 1), compute(n + 1);
  for (unsigned i = 0; i < n; ++i) {
    const ReadyGrad &g = ready[i];
    FormCost one = formCost(comm, ArrayRef<ReadyGrad>(g), psgd);
    bool c = one.compressed > 0;
    double rows = double(g.rows), cols = c ? double(g.bytes / 4 / g.rows) : 0;
    bytes[i + 1] = bytes[i] + double(g.bytes);
    vecBytes[i + 1] = vecBytes[i] + (c ? 0 : double(g.bytes));
    vecTensors[i + 1] = vecTensors[i] + (c || !g.bytes ? 0 : 1);
    pBytes[i + 1] = pBytes[i] + (c ? 4.0 * policy.rank * rows : 0);
    qBytes[i + 1] = qBytes[i] + (c ? 4.0 * policy.rank * cols : 0);
    mats[i + 1] = mats[i] + (c ? 1 : 0);
    compute[i + 1] = compute[i] + one.computeUs;
  }
  auto cost = [&](unsigned i, unsigned j, bool &compressed) {
    double plain = comm.groupTimeUs(uint64_t(bytes[j] - bytes[i]), j - i);
    compressed = false;
    double m = mats[j] - mats[i];
    if (m == 0)
      return plain;
    double first = vecBytes[j] - vecBytes[i] + pBytes[j] - pBytes[i];
    unsigned firstTensors = unsigned(vecTensors[j] - vecTensors[i] + m);
    bool twoLevel;
    double c = factorCollectivesUs(comm, uint64_t(first), firstTensors,
                                   uint64_t(qBytes[j] - qBytes[i]), unsigned(m),
                                   twoLevel) +
               compute[j] - compute[i];
    if (policy.mode == CompressPolicy::Mode::PowerSGD || c < plain) {
      compressed = true;
      return c;
    }
    return plain;
  };
  std::vector<double> f(n + 1, 0);
  std::vector<unsigned> arg(n + 1, 0);
  std::vector<char> form(n + 1, 0);
  for (unsigned j = 1; j <= n; ++j) {
    double r = comm.capacityAt(ready[j - 1].readyUs, backwardEnd);
    double best = std::numeric_limits<double>::infinity();
    for (unsigned i = 0; i < j; ++i) {
      if (cutsBetweenLayers && i > 0 && ready[i - 1].layer == ready[i].layer)
        continue;
      bool compressed;
      double v = std::max(f[i], r) + cost(i, j, compressed);
      if (v <= best) { // ties go to the largest i (fewer groups)
        best = v;
        arg[j] = i;
        form[j] = compressed;
      }
    }
    f[j] = best;
  }
  Plan p;
  for (unsigned j = n; j > 0; j = arg[j]) {
    p.groupEnds.push_back(j);
    p.forms.push_back(form[j] ? psgd : GroupForm::plain());
  }
  std::reverse(p.groupEnds.begin(), p.groupEnds.end());
  std::reverse(p.forms.begin(), p.forms.end());
  if (!p.compresses())
    p.forms.clear();
  return p;
}

Expected<Plan>
oasr::schedule::makeCompressedPlan(StringRef strategy, const Profile &profile,
                                   const CommModel &comm,
                                   const CompressPolicy &policy) {
  Expected<Plan> plan = makePlan(strategy, profile, comm);
  if (!plan || policy.off())
    return plan;
  Plan best = chooseForms(profile, comm, policy, std::move(*plan));
  // auto with a strategy that plans on the model: the grouping chosen with
  // the forms, where the quadratic scan stays quick; kept when the
  // simulator says it ends sooner.
  if (policy.mode == CompressPolicy::Mode::Auto &&
      strategyNeedsCommModel(strategy) &&
      profile.numGrads() <= kCompressionAwareMaxGrads) {
    Plan joint = compressionAwarePlan(profile, comm, policy);
    if (simulate(profile, comm, joint).iterationUs <
        simulate(profile, comm, best).iterationUs)
      best = std::move(joint);
  }
  if (policy.mode == CompressPolicy::Mode::Auto && best.compresses())
    best = faithfulForms(profile, comm, policy, std::move(best));
  best.strategy = strategy.str();
  return best;
}

std::vector<GroupForm>
oasr::schedule::fidelityLadder(ArrayRef<ReadyGrad> grads,
                               const CompressPolicy &policy) {
  std::vector<GroupForm> ladder{GroupForm::plain()};
  // The ranks R 2^k up to M at which some matrix of the group still
  // compresses, highest first (past them the group would travel plain).
  std::vector<GroupForm> ranks;
  for (uint64_t r = uint64_t(policy.rank) * 2; r <= policy.maxRank; r *= 2) {
    bool any = llvm::any_of(grads, [&](const ReadyGrad &g) {
      return powerSgdCompresses(g.rows, g.bytes / 4, unsigned(r));
    });
    if (!any)
      break;
    ranks.push_back(GroupForm::powerSGD(unsigned(r)));
  }
  ladder.insert(ladder.end(), ranks.rbegin(), ranks.rend());
  return ladder;
}

Plan oasr::schedule::faithfulForms(const Profile &profile,
                                   const CommModel &comm,
                                   const CompressPolicy &policy, Plan plan) {
  std::vector<ReadyGrad> ready = readyOrder(profile);
  keepFaithfulForms(
      plan.numGroups(),
      [&] { return simulate(profile, comm, plan).iterationUs; },
      [&](unsigned k) { return plan.forms[k]; },
      [&](unsigned k, GroupForm f) { plan.forms[k] = f; },
      [&](unsigned k) {
        return fidelityLadder(
            ArrayRef<ReadyGrad>(ready.data() + plan.groupBegin(k),
                                plan.groupEnds[k] - plan.groupBegin(k)),
            policy);
      });
  if (!plan.compresses())
    plan.forms.clear();
  return plan;
}
