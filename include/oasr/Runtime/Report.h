//===- Report.h - What a training run prints about itself -------*- C++ -*-===//
//
// The end-of-run summary of oasr-run and the line a re-plan prints: what
// was measured, what the plan predicted and from what (docs/runtime.md,
// "The summary").
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_REPORT_H
#define OASR_RUNTIME_REPORT_H

#include "oasr/Runtime/Replan.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdio>
#include <string>

namespace oasr::rt {

struct TrainSummary;

/// What the summary needs to know beyond the measurements.
struct SummaryContext {
  int ranks = 1;
  std::string strategy; ///< the plan's strategy, empty when the module has none
  size_t groups = 0;    ///< fused groups of the final plan
  std::string algorithm, algorithmReport;
  /// The algorithm runs the planned allreduces (sync SGD): the plan's
  /// prediction and the allreduce split describe it.
  bool planned = true;
  /// What the compiled plan's prediction came from: the compiler's costs and
  /// the allreduce model ("roofline costs, default allreduce model").
  std::string predictedFrom;
  /// The data source's line (DataLoader::report; empty: none).
  std::string dataReport;
};

/// The one line a re-plan prints: the old and new group counts, the
/// predicted gain, the fitted model and what planning and switching cost
/// (against the median of `stepsUs`, the steps measured before it).
std::string formatReplan(const ReplanEvent &event,
                         llvm::ArrayRef<double> stepsUs);

/// Prints the end-of-run summary (rank 0).
void printSummary(std::FILE *out, const TrainSummary &summary,
                  const SummaryContext &context);

} // namespace oasr::rt

#endif // OASR_RUNTIME_REPORT_H
