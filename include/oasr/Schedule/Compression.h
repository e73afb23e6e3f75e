//===- Compression.h - What each fused group sends ---------------*- C++
//-*-===//
//
// A fused group travels plain (its gradients, in the wire type) or
// compressed by PowerSGD (Vogels, Karimireddy, Jaggi, NeurIPS 2019): each
// gradient matrix M (n x m, a weight's gradient reshaped to its first
// dimension by the rest) is replaced by a rank-r product P Q^T with error
// feedback, so the group sends r(n + m) floats per matrix instead of n m,
// in two collectives (P's, with the group's uncompressed vectors, then
// Q's), and computes about three n x m x r products on the communication
// channel. The planner charges both and chooses per group
// (docs/compression.md); the runtime's side is runtime/comm/PowerSGD.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_SCHEDULE_COMPRESSION_H
#define OASR_SCHEDULE_COMPRESSION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace oasr {
namespace schedule {

struct CommModel;
struct Plan;
struct Profile;
struct ReadyGrad;

/// How one fused group travels.
struct GroupForm {
  enum class Kind : uint8_t { Plain, PowerSGD };
  Kind kind = Kind::Plain;
  unsigned rank = 0; ///< PowerSGD's rank r

  static GroupForm plain() { return {}; }
  static GroupForm powerSGD(unsigned rank) { return {Kind::PowerSGD, rank}; }
  bool compressed() const { return kind == Kind::PowerSGD; }
  /// "plain" or "powersgd:R".
  std::string name() const;
  bool operator==(const GroupForm &o) const {
    return kind == o.kind && rank == o.rank;
  }
};

/// Whether PowerSGD at `rank` compresses a gradient of `elements` f32
/// elements whose first dimension is `rows` (0: a vector): a matrix of at
/// least two rows and two columns whose factors r(n + m) are under half of
/// its n m elements (PyTorch's powerSGD_hook's min_compression_rate 2).
/// Others travel uncompressed inside the group.
bool powerSgdCompresses(uint64_t rows, uint64_t elements, unsigned rank);

/// `--compress`: what the planner may send.
///  - off: every group plain (the default);
///  - powersgd:R: every group that holds a matrix PowerSGD compresses is
///    compressed at rank R (as PyTorch's hook does for every bucket);
///  - auto[:R[-M]]: per group, plain or PowerSGD at rank R (default 8:
///    within a point of uncompressed accuracy where 4 was not;
///    docs/compression.md), whichever the cost model says ends sooner; the
///    grouping is chosen with it (compressionAwarePlan). Then each
///    compressed group gets the most faithful form that does not lengthen
///    the simulated step: plain, else the highest rank R 2^k up to M
///    (default kMaxRank) (makeCompressedPlan).
struct CompressPolicy {
  enum class Mode { Off, PowerSGD, Auto };
  Mode mode = Mode::Off;
  unsigned rank = 0;
  unsigned maxRank = 0; ///< auto's highest rank; powersgd: rank
  static constexpr unsigned kDefaultAutoRank = 8;
  static constexpr unsigned kMaxRank = 1024;
  bool off() const { return mode == Mode::Off; }
  /// The option's text: "off", "powersgd:R", "auto:R" (M the default) or
  /// "auto:R-M".
  std::string name() const;
};

/// Parses `off`, `powersgd:R`, `auto`, `auto:R` or `auto:R-M` (R <= M
/// positive integers at most kMaxRank). The error says what is accepted.
llvm::Expected<CompressPolicy> parseCompressPolicy(llvm::StringRef text);

/// What a group sends in one form, and the channel time the model charges.
struct FormCost {
  uint64_t wireBytes = 0;   ///< bytes over all of its collectives
  unsigned collectives = 0; ///< 1 plain, 2 PowerSGD (P with vectors, Q)
  double computeUs = 0;     ///< compression's own compute (channel)
  double channelUs = 0;     ///< the whole: collectives plus compute
  unsigned compressed = 0;  ///< tensors sent as factors
  bool twoLevel = false;    ///< its collectives travel two-level
};

/// Plan::forms from each group's PowerSGD rank (0: plain), as the IR and
/// the executor's groups record them: empty when none compresses.
std::vector<GroupForm> formsFromRanks(llvm::ArrayRef<unsigned> ranks);

/// The cost of sending the ready-ordered gradients `grads` (one group) in
/// `form` under `comm`. PowerSGD's factors and the group's vectors travel
/// in the model's wire type, as plain groups do, and both collectives take
/// one route: two-level where CommModel::prefersTwoLevel says so of their
/// times together (the factors' sums are linear, so either route averages
/// them; only the order of the sums differs). Its compute is
/// charged at CommModel::compressUsPerMac per multiply-add (P = M Q,
/// Q = M^T P, the product P Q^T, and the orthogonalisation) and
/// CommModel::compressUsPerElement per element of the compressed matrices
/// (adding the error, and the new error). A PowerSGD form of a group with
/// no matrix to compress costs what the plain form does.
FormCost formCost(const CommModel &comm, llvm::ArrayRef<ReadyGrad> grads,
                  GroupForm form);

/// Where a plan's compression costs came from.
enum class CompressionCostSource {
  Option,      ///< compress-gmacs / --compress-gmacs
  Calibration, ///< `oasr-bench comm` measured them (the comm file's)
  Default,     ///< the build machine's rates below
};
/// "compress-gmacs", "calibration" or "default".
const char *compressionCostSourceName(CompressionCostSource s);

/// Sets `comm`'s compression costs: with `gmacs` > 0, a communication
/// thread of `gmacs` * 1e9 multiply-adds per second (oasr-opt's
/// compress-gmacs, oasr-plan's --compress-gmacs); else the ones `comm`
/// already holds when a calibration measured both (`oasr-bench comm`'s
/// compress_us_per_mac and compress_us_per_element); else the build
/// machine's oneDNN rate per core, 185 GFLOP/s on 2 threads
/// (docs/passes.md), and 17 GB/s of memory for the passes over the
/// matrices (about 36 bytes an element: the error added, three products
/// reading or writing M, the new error). Returns which.
CompressionCostSource setCompressionCosts(CommModel &comm, double gmacs);

/// Sets each group's form of `plan` under `policy`: powersgd:R on every
/// group holding a matrix it compresses; auto on those where PowerSGD's
/// channel time is the smaller (for a fixed grouping that is the best
/// choice: a group's end never decreases with an earlier group's). Off, or
/// nothing compressed: `forms` empty.
Plan chooseForms(const Profile &profile, const CommModel &comm,
                 const CompressPolicy &policy, Plan plan);

/// The exact minimum under `comm` of the iteration over grouping and forms
/// together: the optimal program with each group's cost the smaller of its
/// plain and PowerSGD channel times (powersgd:R: the PowerSGD one wherever
/// it compresses). O(n^2) in the gradients. `cutsBetweenLayers` keeps each
/// layer's gradients in one group (the steady-state plans' groups are
/// layer ranges).
Plan compressionAwarePlan(const Profile &profile, const CommModel &comm,
                          const CompressPolicy &policy,
                          bool cutsBetweenLayers = false);
/// Profiles with more gradients plan auto's forms on the strategy's
/// grouping only (compressionAwarePlan is quadratic).
constexpr unsigned kCompressionAwareMaxGrads = 4096;

/// The forms auto may give a group of `grads`, most faithful first: plain,
/// then PowerSGD at the ranks policy.rank 2^k (k >= 1) up to
/// policy.maxRank, highest first, as far as some matrix of the group still
/// compresses at the rank.
std::vector<GroupForm> fidelityLadder(llvm::ArrayRef<ReadyGrad> grads,
                                      const CompressPolicy &policy);

/// The rule of faithfulForms on any plan of `groups` groups: `score()` is
/// the plan's step, `get(k)` and `set(k, f)` group k's form, `ladder(k)`
/// its fidelityLadder. First plain, group by group, where that keeps the
/// step; then, in group order, the highest rank of the ladder that keeps
/// it. Each choice keeps the step of the choices before it.
template <typename Score, typename Get, typename Set, typename Ladder>
void keepFaithfulForms(unsigned groups, Score score, Get get, Set set,
                       Ladder ladder) {
  double t = score();
  // Whether group k sent as `f` keeps the step; if not, k keeps its form.
  auto keeps = [&](unsigned k, GroupForm f) {
    GroupForm was = get(k);
    set(k, f);
    double u = score();
    if (u <= t * (1 + 1e-12)) {
      t = u < t ? u : t;
      return true;
    }
    set(k, was);
    return false;
  };
  // Plain first, for every group: the most faithful form, and without a
  // second pass a group sent early would spend on a higher rank the slack
  // that lets a later group go plain.
  for (unsigned k = 0; k < groups; ++k)
    if (get(k).compressed())
      keeps(k, GroupForm::plain());
  // Then the slack left raises ranks, highest first.
  for (unsigned k = 0; k < groups; ++k) {
    if (!get(k).compressed())
      continue;
    const unsigned rank = get(k).rank;
    for (GroupForm f : ladder(k))
      if (f.compressed() && (f.rank <= rank || keeps(k, f)))
        break;
  }
}

/// Compression changes what a step learns, so auto gives each compressed
/// group of `plan` the most faithful form of its fidelityLadder that does
/// not lengthen the simulated step: first plain, group by group, where
/// compressing it gains nothing (a group hidden behind backward); then, in
/// group order, the highest rank the slack left still hides. Each choice
/// keeps the step of the choices before it, so the result never ends
/// later than `plan`.
Plan faithfulForms(const Profile &profile, const CommModel &comm,
                   const CompressPolicy &policy, Plan plan);

/// makePlan, then the forms (chooseForms). With auto and a strategy that
/// plans on the model (mgwfbp, optimal, oasr), also compressionAwarePlan,
/// keeping whichever the simulator says ends sooner. Then auto gives each
/// compressed group its most faithful form that keeps the step
/// (faithfulForms).
llvm::Expected<Plan> makeCompressedPlan(llvm::StringRef strategy,
                                        const Profile &profile,
                                        const CommModel &comm,
                                        const CompressPolicy &policy);

} // namespace schedule
} // namespace oasr

#endif // OASR_SCHEDULE_COMPRESSION_H
