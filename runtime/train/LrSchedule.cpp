//===- LrSchedule.cpp - Learning-rate schedules, as PyTorch's -------------===//
//
// Closed forms of torch.optim.lr_scheduler: LinearLR (the warmup, and
// `linear`), CosineAnnealingLR, MultiStepLR, PolynomialLR and OneCycleLR
// (cos annealing, pct_start 0.3, div_factor 25, final_div_factor 1e4), the
// warmup chained in front as SequentialLR does.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/LrSchedule.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace oasr::rt {

static llvm::Error scheduleError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

double LrSchedule::rate(int64_t step, double base) const {
  if (step < warmup) // LinearLR(start_factor, 1.0, total_iters=warmup)
    return base *
           (warmupStart + (1.0 - warmupStart) * double(step) / double(warmup));
  const double t = double(step - warmup);
  const double span = double(std::max<int64_t>(steps - warmup, 1));
  constexpr double pi = 3.14159265358979323846;
  switch (kind) {
  case LrScheduleKind::Constant:
    return base;
  case LrScheduleKind::Step: { // MultiStepLR
    auto passed =
        std::upper_bound(milestones.begin(), milestones.end(), step - warmup) -
        milestones.begin();
    return base * std::pow(gamma, double(passed));
  }
  case LrScheduleKind::Cosine: // CosineAnnealingLR(T_max=span, eta_min)
    return minLr + (base - minLr) * (1 + std::cos(pi * t / span)) / 2;
  case LrScheduleKind::Linear: // LinearLR(1, min_lr / base, total_iters)
    return base * (1 + (minLr / base - 1) * std::min(t, span) / span);
  case LrScheduleKind::Poly: // PolynomialLR(total_iters=span, power)
    return base * std::pow(1 - std::min(t, span) / span, power);
  case LrScheduleKind::OneCycle: {
    const double initial = base / 25, last = initial / 1e4;
    const double rampEnd = 0.3 * double(steps) - 1, end = double(steps) - 1;
    auto anneal = [&](double from, double to, double pct) {
      return to + (from - to) / 2 * (std::cos(pi * pct) + 1);
    };
    if (t <= rampEnd)
      return anneal(initial, base, t / rampEnd);
    return anneal(base, last, (t - rampEnd) / (end - rampEnd));
  }
  }
  return base;
}

/// `x` as %g writes it (0.001, 1e-05).
static std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

std::string LrSchedule::describe(double base) const {
  std::string s;
  switch (kind) {
  case LrScheduleKind::Constant:
    s = "constant " + num(base);
    break;
  case LrScheduleKind::Step: {
    std::string ms;
    for (int64_t m : milestones)
      ms += (ms.empty() ? "" : ",") + std::to_string(m);
    s = num(base) + " times " + num(gamma) + " at steps " + ms;
    break;
  }
  case LrScheduleKind::Cosine:
    s = "cosine from " + num(base) + " to " + num(minLr);
    break;
  case LrScheduleKind::Linear:
    s = "linear from " + num(base) + " to " + num(minLr);
    break;
  case LrScheduleKind::Poly:
    s = "polynomial (power " + num(power) + ") from " + num(base) + " to 0";
    break;
  case LrScheduleKind::OneCycle:
    s = "one cycle up to " + num(base) + " (from " + num(base / 25) +
        ", over 30% of the steps) and down to " + num(base / 25 / 1e4);
    break;
  }
  if (warmup)
    s += ", after " + std::to_string(warmup) + " linear warmup step(s) from " +
         num(base * warmupStart);
  return s;
}

llvm::Expected<LrSchedule> parseLrSchedule(const std::string &spec,
                                           int64_t warmup, double warmupStart,
                                           double minLr, int64_t steps,
                                           double baseLr) {
  LrSchedule s;
  s.warmup = warmup;
  s.warmupStart = warmupStart;
  s.minLr = minLr;
  s.steps = steps;
  llvm::SmallVector<llvm::StringRef, 3> parts;
  llvm::StringRef(spec).split(parts, ':');
  llvm::StringRef name = parts[0];
  auto bad = [&](const llvm::Twine &why) {
    return scheduleError("--lr-schedule=" + spec + ": " + why);
  };
  if (name == "constant" || name == "cosine" || name == "linear" ||
      name == "onecycle") {
    if (parts.size() != 1)
      return bad("takes no parameters");
    s.kind = name == "constant" ? LrScheduleKind::Constant
             : name == "cosine" ? LrScheduleKind::Cosine
             : name == "linear" ? LrScheduleKind::Linear
                                : LrScheduleKind::OneCycle;
  } else if (name == "step") {
    s.kind = LrScheduleKind::Step;
    if (parts.size() != 3)
      return bad("expected step:MILESTONES:GAMMA (step:100,200:0.1)");
    llvm::SmallVector<llvm::StringRef, 4> ms;
    parts[1].split(ms, ',');
    for (llvm::StringRef m : ms) {
      int64_t v;
      if (m.getAsInteger(10, v) || v <= 0 ||
          (!s.milestones.empty() && v <= s.milestones.back()))
        return bad("milestones must be rising step counts above 0, got '" + m +
                   "'");
      s.milestones.push_back(v);
    }
    if (parts[2].getAsDouble(s.gamma) || !std::isfinite(s.gamma) ||
        s.gamma <= 0)
      return bad("GAMMA must be a positive number, got '" + parts[2] + "'");
  } else if (name == "poly") {
    s.kind = LrScheduleKind::Poly;
    if (parts.size() != 2 || parts[1].getAsDouble(s.power) ||
        !std::isfinite(s.power) || s.power <= 0)
      return bad("expected poly:P with a power P > 0");
  } else {
    return bad("unknown schedule; expected constant, step:MILESTONES:GAMMA, "
               "cosine, linear, poly:P or onecycle");
  }
  if (warmup < 0)
    return scheduleError("--warmup=" + std::to_string(warmup) +
                         ": expected a number of steps >= 0");
  if (warmup >= steps && warmup > 0)
    return scheduleError(llvm::formatv("--warmup={0}: the run has only {1} "
                                       "step(s) (--steps); the warmup must "
                                       "end before the last",
                                       warmup, steps)
                             .str());
  if (!std::isfinite(warmupStart) || warmupStart < 0 || warmupStart > 1)
    return scheduleError("--warmup-start=" + num(warmupStart) +
                         ": expected a factor in [0, 1]");
  if (s.kind == LrScheduleKind::OneCycle && warmup)
    return bad("onecycle warms up by itself (30% of the steps); drop --warmup");
  if (!std::isfinite(minLr) || minLr < 0)
    return scheduleError("--min-lr=" + num(minLr) + ": expected a rate >= 0");
  if (minLr > 0 && s.kind != LrScheduleKind::Cosine &&
      s.kind != LrScheduleKind::Linear)
    return bad("--min-lr applies to cosine and linear");
  if (minLr > baseLr)
    return scheduleError("--min-lr=" + num(minLr) +
                         ": above the learning rate " + num(baseLr));
  return s;
}

} // namespace oasr::rt
