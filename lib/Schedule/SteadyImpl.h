//===- SteadyImpl.h - What the steady-state files share ---------*- C++ -*-===//
//
// Private to lib/Schedule: the per-layer numbers and group totals that the
// steady-state plans (Steady.cpp), the simulator (SteadySimulator.cpp), the
// lower bound (SteadyBound.cpp) and the strategies (SteadyStrategies.cpp)
// read.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_LIB_SCHEDULE_STEADYIMPL_H
#define OASR_LIB_SCHEDULE_STEADYIMPL_H

#include "oasr/Schedule/Steady.h"

#include <limits>

namespace oasr::schedule::steady {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Per-layer numbers the model needs.
struct Layers {
  std::vector<double> fwd, bwd, upd;
  std::vector<uint64_t> bytes;
  std::vector<unsigned> tensors;
  /// Each layer's gradients (bytes and rows: what formCost reads).
  std::vector<std::vector<ReadyGrad>> grads;
  double updateUs = 0;

  explicit Layers(const Profile &p) : fwd(layerForwardUs(p)) {
    uint64_t total = p.totalBytes();
    size_t n = p.layers.size();
    for (const Layer &l : p.layers) {
      bwd.push_back(l.backwardUs);
      uint64_t b = 0;
      grads.emplace_back();
      for (const GradTensor &g : l.grads) {
        b += g.bytes;
        ReadyGrad r;
        r.layer = unsigned(bwd.size() - 1);
        r.index = unsigned(grads.back().size());
        r.name = g.name;
        r.bytes = g.bytes;
        r.rows = g.rows;
        grads.back().push_back(r);
      }
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

inline GroupInfo groupInfo(const Layers &L, const SteadyGroup &g) {
  GroupInfo info;
  for (unsigned l = g.firstLayer; l <= g.lastLayer; ++l) {
    info.bytes += L.bytes[l];
    info.tensors += L.tensors[l];
    info.updateUs += L.upd[l];
  }
  return info;
}

/// Group `g`'s gradients, its layers in ready order.
inline std::vector<ReadyGrad> groupGrads(const Layers &L,
                                         const SteadyGroup &g) {
  std::vector<ReadyGrad> grads;
  for (unsigned l = g.lastLayer + 1; l-- > g.firstLayer;)
    grads.insert(grads.end(), L.grads[l].begin(), L.grads[l].end());
  return grads;
}

/// What group `g` costs sent as `form` (Compression.h's formCost over its
/// layers' gradients).
inline FormCost sendCost(const Layers &L, const SteadyGroup &g,
                         const CommModel &comm, GroupForm form) {
  return formCost(comm, groupGrads(L, g), form);
}

/// Bytes of piece `k` of `pieces` (the last takes the remainder).
inline uint64_t pieceBytes(uint64_t bytes, unsigned pieces, unsigned k) {
  uint64_t each = bytes / pieces;
  return k + 1 == pieces ? bytes - each * (pieces - 1) : each;
}
} // namespace oasr::schedule::steady

#endif // OASR_LIB_SCHEDULE_STEADYIMPL_H
