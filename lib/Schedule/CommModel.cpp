//===- CommModel.cpp - Communication models -------------------------------===//
//
// The allreduce cost models the planner charges (DESIGN.md "Timeline
// model"): alpha-beta, the ring form over P ranks, the overlap rate's
// capacity, and the element types gradients travel in.
//
//===----------------------------------------------------------------------===//

#include "oasr/Schedule/Schedule.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace llvm;
using namespace oasr;
using namespace oasr::schedule;

//===----------------------------------------------------------------------===//
// CommModel
//===----------------------------------------------------------------------===//

StringRef oasr::schedule::wireDTypeName(WireDType dtype) {
  switch (dtype) {
  case WireDType::F32:
    return "f32";
  case WireDType::BF16:
    return "bf16";
  case WireDType::F16:
    return "f16";
  }
  return "f32";
}

Expected<WireDType> oasr::schedule::parseWireDType(StringRef name) {
  for (WireDType d : {WireDType::F32, WireDType::BF16, WireDType::F16})
    if (name == wireDTypeName(d))
      return d;
  return createStringError(inconvertibleErrorCode(),
                           "unknown gradient wire type '%s': expected f32, "
                           "bf16 or f16",
                           name.str().c_str());
}

double oasr::schedule::wireFactor(WireDType dtype) {
  return dtype == WireDType::F32 ? 1.0 : 0.5;
}

double CommModel::flatTimeUs(uint64_t bytes) const {
  if (bytes == 0)
    return 0;
  return alphaUs() + betaUsPerByte() * static_cast<double>(bytes);
}

double CommModel::twoLevelTimeUs(uint64_t bytes) const {
  if (!twoLevel.present())
    return flatTimeUs(bytes);
  if (bytes == 0)
    return 0;
  const TwoLevelTier &t = twoLevel;
  double m = static_cast<double>(bytes);
  return 1e6 * (t.intraAlphaS + t.intraBetaSPerByte * m + t.interAlphaS +
                t.interBetaSPerByte * wireFactor(wire) * m / t.ranksPerNode);
}

bool CommModel::twoLevelUsable() const {
  return route != AllreduceRoute::Flat && twoLevel.present() &&
         ranks > twoLevel.ranksPerNode && ranks % twoLevel.ranksPerNode == 0;
}

bool CommModel::sendsTwoLevel(uint64_t bytes) const {
  return bytes && prefersTwoLevel(flatTimeUs(bytes), twoLevelTimeUs(bytes));
}

bool CommModel::prefersTwoLevel(double flatUs, double twoUs) const {
  return twoLevelUsable() &&
         (route == AllreduceRoute::TwoLevel || twoUs < flatUs);
}

namespace {
/// The two lines' terms, in microseconds: the flat one first.
struct Lines {
  double flatAlpha, flatBeta, twoAlpha, twoBeta;
};
} // namespace

static Lines lines(const CommModel &m) {
  const TwoLevelTier &t = m.twoLevel;
  double twoAlpha = 1e6 * (t.intraAlphaS + t.interAlphaS);
  double twoBeta =
      t.present()
          ? 1e6 * (t.intraBetaSPerByte +
                   t.interBetaSPerByte * wireFactor(m.wire) / t.ranksPerNode)
          : 0;
  return {m.alphaUs(), m.betaUsPerByte(), twoAlpha, twoBeta};
}

bool CommModel::linearCost() const {
  if (!twoLevelUsable() || route == AllreduceRoute::TwoLevel)
    return true;
  Lines l = lines(*this);
  return (l.twoAlpha <= l.flatAlpha && l.twoBeta <= l.flatBeta) ||
         (l.flatAlpha <= l.twoAlpha && l.flatBeta <= l.twoBeta);
}

/// Whether groups of every size take the two-level line (linearCost).
static bool twoLevelLine(const CommModel &m) {
  if (!m.twoLevelUsable())
    return false;
  if (m.route == AllreduceRoute::TwoLevel)
    return true;
  Lines l = lines(m);
  return l.twoAlpha <= l.flatAlpha && l.twoBeta <= l.flatBeta &&
         (l.twoAlpha < l.flatAlpha || l.twoBeta < l.flatBeta);
}

double CommModel::lineAlphaUs() const {
  return twoLevelLine(*this) ? lines(*this).twoAlpha : alphaUs();
}

double CommModel::lineBetaUsPerByte() const {
  return twoLevelLine(*this) ? lines(*this).twoBeta : betaUsPerByte();
}

double CommModel::minAlphaUs() const {
  Lines l = lines(*this);
  return twoLevelUsable() ? std::min(l.flatAlpha, l.twoAlpha) : l.flatAlpha;
}

double CommModel::minBetaUsPerByte() const {
  Lines l = lines(*this);
  return twoLevelUsable() ? std::min(l.flatBeta, l.twoBeta) : l.flatBeta;
}

double CommModel::timeUs(uint64_t bytes) const {
  return sendsTwoLevel(bytes) ? twoLevelTimeUs(bytes) : flatTimeUs(bytes);
}

StringRef oasr::schedule::allreduceRouteName(AllreduceRoute route) {
  switch (route) {
  case AllreduceRoute::Auto:
    return "auto";
  case AllreduceRoute::Flat:
    return "flat";
  case AllreduceRoute::TwoLevel:
    return "two-level";
  }
  return "auto";
}

Expected<AllreduceRoute> oasr::schedule::parseAllreduceRoute(StringRef name) {
  for (AllreduceRoute r :
       {AllreduceRoute::Auto, AllreduceRoute::Flat, AllreduceRoute::TwoLevel})
    if (name == allreduceRouteName(r))
      return r;
  return createStringError(inconvertibleErrorCode(),
                           "'" + name + "': expected auto, flat or two-level");
}

/// The channel's time for a group whose allreduce takes `allreduceUs`.
static double withGroupCosts(const CommModel &m, double allreduceUs,
                             uint64_t bytes, unsigned numTensors) {
  if (bytes == 0 || numTensors == 0)
    return 0;
  double t = allreduceUs + m.groupOverheadUs;
  if (numTensors > 1)
    t += m.packUsPerByte * static_cast<double>(bytes);
  return t;
}

double CommModel::groupTimeUs(uint64_t bytes, unsigned numTensors) const {
  return withGroupCosts(*this, timeUs(bytes), bytes, numTensors);
}

double CommModel::groupTimeUs(uint64_t bytes, unsigned numTensors,
                              bool twoLevel) const {
  return withGroupCosts(*this,
                        twoLevel ? twoLevelTimeUs(bytes) : flatTimeUs(bytes),
                        bytes, numTensors);
}

CommModel CommModel::basic() const {
  CommModel m = *this;
  m.groupOverheadUs = 0;
  m.packUsPerByte = 0;
  m.overlapRate = 1;
  m.computeRate = 1;
  m.callComputeUs = 0;
  return m;
}

double CommModel::capacityAt(double t, double backwardEndUs) const {
  if (overlapRate >= 1)
    return t;
  if (t <= backwardEndUs)
    return overlapRate * t;
  return overlapRate * backwardEndUs + (t - backwardEndUs);
}

double CommModel::timeAtCapacity(double u, double backwardEndUs) const {
  if (overlapRate >= 1)
    return u;
  double atEnd = overlapRate * backwardEndUs;
  if (overlapRate > 0 && u <= atEnd)
    return u / overlapRate;
  return backwardEndUs + std::max(0.0, u - atEnd);
}

std::string CommModel::describe() const {
  std::string s;
  if (kind == Kind::Ring)
    s = formatv("ring P={0} alpha0={1:e3} s B={2:e3} B/s (alpha={3:e3} s "
                "beta={4:e3} s/B)",
                ranks, alpha0S, bandwidthBytesPerS, alphaS, betaSPerByte)
            .str();
  else
    s = formatv("alpha={0:e3} s beta={1:e3} s/B", alphaS, betaSPerByte).str();
  if (groupOverheadUs != 0)
    s += formatv(" group_overhead={0} us", groupOverheadUs).str();
  if (packUsPerByte != 0)
    s += formatv(" pack={0:e3} us/B", packUsPerByte).str();
  if (overlapRate != 1)
    s += formatv(" overlap_rate={0:f3}", overlapRate).str();
  if (computeRate != 1)
    s += formatv(" compute_rate={0:f3}", computeRate).str();
  if (callComputeUs != 0)
    s += formatv(" call_compute={0:f1} us", callComputeUs).str();
  if (twoLevelUsable())
    s += formatv(" two_level=L{0} (intra alpha={1:e3} s beta={2:e3} s/B, "
                 "inter alpha={3:e3} s beta={4:e3} s/B)",
                 twoLevel.ranksPerNode, twoLevel.intraAlphaS,
                 twoLevel.intraBetaSPerByte, twoLevel.interAlphaS,
                 twoLevel.interBetaSPerByte)
             .str();
  if (wire != WireDType::F32)
    s += formatv(" grad_dtype={0} (beta x {1} per gradient byte)",
                 wireDTypeName(wire), wireFactor(wire))
             .str();
  return s;
}

CommModel CommModel::alphaBeta(double alphaS, double betaSPerByte, int ranks) {
  CommModel m;
  m.kind = Kind::AlphaBeta;
  m.alphaS = alphaS;
  m.betaSPerByte = betaSPerByte;
  m.ranks = ranks;
  return m;
}

CommModel CommModel::ring(int ranks, double alpha0S,
                          double bandwidthBytesPerS) {
  CommModel m;
  m.kind = Kind::Ring;
  m.ranks = ranks;
  m.alpha0S = alpha0S;
  m.bandwidthBytesPerS = bandwidthBytesPerS;
  double p = ranks;
  // 2(P-1) steps of latency alpha0; each rank sends 2(P-1)/P of the buffer.
  m.alphaS = 2.0 * (p - 1) * alpha0S;
  m.betaSPerByte =
      bandwidthBytesPerS > 0 ? 2.0 * (p - 1) / p / bandwidthBytesPerS : 0;
  return m;
}
