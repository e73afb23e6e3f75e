//===- Fitting.cpp - Communication models from measured times -------------===//
//
// Least-squares fits of the alpha-beta model: to a calibration's sizes
// (fitAlphaBeta) and to a run's own allreduces (fitRunAllreduces, with the
// confidence test that keeps alpha when the data cannot resolve it).
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

Expected<CommModel>
oasr::schedule::fitAlphaBeta(ArrayRef<std::pair<double, double>> points,
                             int ranks, FitError error) {
  bool oneSize =
      all_of(points, [&](auto pt) { return pt.first == points.front().first; });
  if (points.size() < 2 || oneSize)
    return createStringError(inconvertibleErrorCode(),
                             "need at least two distinct sizes to fit");
  // Weight 1/t^2: the relative error counts, so the start-up comes from the
  // small messages and the bandwidth from the large ones. Weight 1: the
  // residuals sum to zero, so the fitted times add up to the measured ones.
  // The sums are centered on the weighted means for accuracy.
  auto weight = [error](double t) {
    return error == FitError::Absolute ? 1.0 : 1.0 / std::max(t * t, 1e-300);
  };
  double sw = 0, mx = 0, my = 0;
  for (auto [x, y] : points) {
    sw += weight(y);
    mx += weight(y) * x;
    my += weight(y) * y;
  }
  mx /= sw;
  my /= sw;
  double sxx = 0, sxy = 0, s0xx = 0, s0xy = 0;
  for (auto [x, y] : points) {
    double w = weight(y);
    sxx += w * (x - mx) * (x - mx);
    sxy += w * (x - mx) * (y - my);
    s0xx += w * x * x;
    s0xy += w * x * y;
  }
  // Rounding can leave the sum of squares positive for large equal sizes
  // (tested above), but not zero for distinct ones.
  if (!(sxx > 0))
    return createStringError(inconvertibleErrorCode(),
                             "need at least two distinct sizes to fit");
  double beta = sxy / sxx, alpha = my - beta * mx;
  if (beta < 0) {
    // Times that fall with size (noise among small messages): no bandwidth
    // term, the start-up is the mean time.
    beta = 0;
    alpha = my;
  } else if (alpha < 0) {
    // Refit the line through the origin: by least squares (relative), or
    // (absolute) so that it still adds up to the measured total.
    alpha = 0;
    beta = error == FitError::Absolute ? my / mx : s0xy / s0xx;
  }
  return CommModel::alphaBeta(alpha, beta, ranks);
}

/// Student's t at 97.5 % for `dof` degrees of freedom (two-sided 95 %).
static double tQuantile975(size_t dof) {
  static const double t[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                             2.306,  2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
                             2.131,  2.120, 2.110, 2.101, 2.093, 2.086};
  if (dof == 0)
    return INFINITY;
  return dof <= std::size(t) ? t[dof - 1] : dof <= 30 ? 2.06 : 1.96;
}

/// The fewest group sizes a run's start-up is judged on.
static constexpr size_t kStartupSizes = 5;

/// Whether `alpha`, fitted with `beta` to `points` by evenly weighted least
/// squares, is within the 95 % interval of its error around `other`: the
/// points do not tell the two apart. The error is that of the line through
/// each size's mean time, one point a size: a run repeats its few group
/// sizes every step, and the repeats narrow the noise of each size's time,
/// not of the line's start-up extrapolated from them (ResNet-18's 4 groups
/// of 2-20 MB on 2 nodes at 1 Gbit/s, 3 steps: their 16 points put a fitted
/// 2.3 ms start-up beyond two errors of the 0.22 ms of a 4 KiB call, and
/// the 41-group plan was predicted 7.6 % slow). The interval is Student's
/// for the sizes less two, and under kStartupSizes sizes the points never
/// tell: a line through three or four sizes extrapolates how each group
/// overlapped compute, not a start-up. ResNet-18's 3 groups at 200 Mbit/s
/// (2, 11 and 34 MB) lay within 0.06-1.6 ms of a line with a 16-31 ms
/// start-up, 16 errors and more from the 0.22 ms of a 4 KiB call: its first
/// 2 MB group overlapped early backward at 0.7-0.8 of its speed, the 34 MB
/// one at 0.9-1.0. The 41-group plan was then predicted 20 % slow; with the
/// measured 0.22 ms, within 2 %. `other` longer than a size's mean time is
/// never within noise.
static bool alphaWithinNoise(ArrayRef<std::pair<double, double>> points,
                             double alpha, double beta, double other) {
  std::map<double, std::pair<double, int>> bySize;
  for (const auto &[x, y] : points) {
    auto &[sum, count] = bySize[x];
    sum += y, ++count;
  }
  // A start-up longer than a whole allreduce took is not within noise.
  for (const auto &[x, sc] : bySize)
    if (other > sc.first / sc.second)
      return false;
  const size_t n = bySize.size();
  if (n < kStartupSizes)
    return true;
  double mx = 0;
  for (const auto &[x, sc] : bySize)
    mx += x / double(n);
  double sxx = 0, ss = 0;
  for (const auto &[x, sc] : bySize) {
    sxx += (x - mx) * (x - mx);
    double r = sc.first / sc.second - alpha - beta * x;
    ss += r * r;
  }
  if (!(sxx > 0))
    return true;
  const double se =
      std::sqrt(ss / double(n - 2) * (1.0 / double(n) + mx * mx / sxx));
  return std::abs(alpha - other) <= tQuantile975(n - 2) * se;
}

Expected<CommModel>
oasr::schedule::fitRunAllreduces(ArrayRef<MeasuredAllreduce> samples, int ranks,
                                 double fallbackRate, bool &rateFitted,
                                 double planAlpha, bool *alphaFromPlan) {
  rateFitted = false;
  if (alphaFromPlan)
    *alphaFromPlan = false;
  double rate = std::clamp(fallbackRate, 0.05, 1.0);
  bool beside = any_of(samples, [](auto &m) { return m.besideS > 0; });
  bool alone = any_of(samples, [](auto &m) { return m.aloneS > 0; });
  if (beside && alone) {
    // aloneS = alpha + beta * bytes - r * besideS: least squares in three
    // unknowns, on columns centered and scaled for conditioning.
    const size_t n = samples.size();
    double mean[3] = {0, 0, 0}, scale[3] = {0, 0, 0};
    for (const MeasuredAllreduce &m : samples) {
      mean[0] += m.bytes / n, mean[1] += m.besideS / n, mean[2] += m.aloneS / n;
    }
    for (const MeasuredAllreduce &m : samples) {
      scale[0] += (m.bytes - mean[0]) * (m.bytes - mean[0]);
      scale[1] += (m.besideS - mean[1]) * (m.besideS - mean[1]);
    }
    scale[0] = std::sqrt(scale[0]), scale[1] = std::sqrt(scale[1]);
    if (scale[0] > 0 && scale[1] > 0) {
      double a = 0, b = 0, c = 0, u = 0, v = 0;
      for (const MeasuredAllreduce &m : samples) {
        double x = (m.bytes - mean[0]) / scale[0];
        double z = (m.besideS - mean[1]) / scale[1];
        double y = m.aloneS - mean[2];
        a += x * x, b += x * z, c += z * z, u += x * y, v += z * y;
      }
      double det = a * c - b * b;
      if (det > 1e-9 * a * c) {
        // The coefficient of besideS is -r.
        double r = -(a * v - b * u) / det / scale[1];
        if (std::isfinite(r)) {
          rate = std::clamp(r, 0.05, 1.0);
          rateFitted = true;
        }
      }
    }
  }
  if (beside && !rateFitted) {
    // Not determined jointly (the sizes that overlap backward are always
    // the same ones, say): alpha and beta from the allreduces that ran
    // wholly after backward, if they have two sizes, and the rate from
    // how much of the others' work got done beside it.
    std::vector<std::pair<double, double>> after;
    for (const MeasuredAllreduce &m : samples)
      if (m.besideS == 0)
        after.push_back({m.bytes, m.aloneS});
    if (Expected<CommModel> m =
            fitAlphaBeta(after, ranks, FitError::Absolute)) {
      double done = 0, time = 0;
      for (const MeasuredAllreduce &s : samples)
        if (s.besideS > 0) {
          double work = m->alphaS + m->betaSPerByte * s.bytes;
          done += std::clamp(work - s.aloneS, 0.0, s.besideS);
          time += s.besideS;
        }
      rate = std::clamp(done / time, 0.05, 1.0);
      rateFitted = true;
    } else {
      consumeError(m.takeError());
    }
  }
  std::vector<std::pair<double, double>> work;
  for (const MeasuredAllreduce &m : samples)
    work.push_back({m.bytes, rate * m.besideS + m.aloneS});
  Expected<CommModel> model = fitAlphaBeta(work, ranks, FitError::Absolute);
  if (model && planAlpha > 0 &&
      (model->alphaS <= 0 ||
       alphaWithinNoise(work, model->alphaS, model->betaSPerByte, planAlpha))) {
    double bytes = 0, rest = 0;
    for (const auto &[x, y] : work)
      bytes += x, rest += y - planAlpha;
    model->alphaS = planAlpha;
    model->betaSPerByte = bytes > 0 ? std::max(0.0, rest / bytes) : 0.0;
    if (alphaFromPlan)
      *alphaFromPlan = true;
  }
  if (model)
    model->overlapRate = rate;
  return model;
}
