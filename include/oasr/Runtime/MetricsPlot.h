//===- MetricsPlot.h - An SVG plot of oasr-run's --metrics file -*- C++ -*-===//
//
// `oasr-run --metrics=FILE.jsonl` writes one JSON object a line: training
// lines ("step", "loss", optional "lr" and "accuracy") and evaluation lines
// ("step", "eval_loss", optional "eval_accuracy"). This draws them as up to
// three panels over one step axis (loss, learning rate, accuracy), in the
// hand-written SVG of the planner's Gantt view; nothing else is needed to
// read it.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_METRICSPLOT_H
#define OASR_RUNTIME_METRICSPLOT_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace oasr::rt {

/// The SVG document plotting the metrics lines of `jsonl`. Lines that do not
/// parse are skipped; a non-finite value ("NaN", "Infinity") breaks its
/// series' line there; a panel with no finite value is left out, and a file
/// with none at all gives a small "no metrics" document.
std::string metricsSVG(llvm::StringRef jsonl);

/// Reads `jsonlPath` and writes metricsSVG of it beside it: FILE.jsonl
/// becomes FILE.svg, any other name gets ".svg" appended. The path written
/// goes to `svgPathOut` when given.
llvm::Error writeMetricsPlot(const std::string &jsonlPath,
                             std::string *svgPathOut = nullptr);

} // namespace oasr::rt

#endif // OASR_RUNTIME_METRICSPLOT_H
