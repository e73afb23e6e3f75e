//===- LrSchedule.h - Learning-rate schedules, as PyTorch's ----*- C++ -*-===//
//
// The learning rate of each step as a host scalar handed to the update
// kernels (Executor::setStepScalars): changing it never recompiles. Each
// schedule follows its torch.optim.lr_scheduler class step by step, with an
// optional linear warmup in front (LinearLR then the schedule, as
// SequentialLR chains them). The schedule is a function of the step index
// alone, so a resumed run continues it bitwise.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_LRSCHEDULE_H
#define OASR_RUNTIME_LRSCHEDULE_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace oasr::rt {

/// The schedules (--lr-schedule).
enum class LrScheduleKind { Constant, Step, Cosine, Linear, Poly, OneCycle };

/// A schedule over `steps` optimizer steps from the base learning rate.
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::Constant;
  std::vector<int64_t> milestones; ///< step: MultiStepLR's, after warmup
  double gamma = 0.1;              ///< step: the factor at each milestone
  double power = 1;                ///< poly: PolynomialLR's power
  int64_t warmup = 0;              ///< steps of linear warmup
  double warmupStart = 0;          ///< warmup's first factor (LinearLR)
  double minLr = 0;                ///< cosine, linear: the last rate
  int64_t steps = 0;               ///< the run's total steps

  /// The learning rate of step `step` (0-based: the rate the step's update
  /// uses) for base rate `base`.
  double rate(int64_t step, double base) const;
  /// "cosine to 1e-05 after 30 warmup steps from 0" for the start line.
  std::string describe(double base) const;
};

/// Parses `spec` (constant | step:M1,M2,...:GAMMA | cosine | linear |
/// poly:P | onecycle) with the warmup and floor; errors name the option at
/// fault: an unknown schedule, milestones that do not rise, a warmup beyond
/// the steps, a negative or non-finite value.
llvm::Expected<LrSchedule> parseLrSchedule(const std::string &spec,
                                           int64_t warmup, double warmupStart,
                                           double minLr, int64_t steps,
                                           double baseLr);

} // namespace oasr::rt

#endif // OASR_RUNTIME_LRSCHEDULE_H
