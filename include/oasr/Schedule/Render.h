//===- Render.h - Chrome trace and SVG Gantt views of timelines -*- C++ -*-===//
//
// Views of simulated (or replayed) timelines for people: a Chrome trace
// (open in Perfetto or chrome://tracing) and a self-contained SVG Gantt chart.
// Both draw, per timeline, a compute lane (forward, backward layers, update)
// and a communication lane (one box per group).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_SCHEDULE_RENDER_H
#define OASR_SCHEDULE_RENDER_H

#include "oasr/Schedule/Schedule.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace oasr {
namespace schedule {

/// A Chrome trace event document (`{"traceEvents": [...]}`): one process
/// per timeline, named after its strategy, with a "compute" and a
/// "communication" thread. Times are in microseconds. Group events carry
/// their gradient names and bytes in `args`.
llvm::json::Value chromeTrace(const Profile &profile,
                              llvm::ArrayRef<Timeline> timelines);

/// An SVG Gantt chart of the timelines on a common time axis: two lanes per
/// timeline, labelled with the strategy and its iteration time.
std::string ganttSVG(const Profile &profile,
                     llvm::ArrayRef<Timeline> timelines);

/// `s` as SVG/XML text or attribute content: markup characters as entities,
/// characters XML 1.0 does not allow and bytes that are not UTF-8 as
/// U+FFFD, so any text gives a well-formed document.
std::string xmlText(llvm::StringRef s);

} // namespace schedule
} // namespace oasr

#endif // OASR_SCHEDULE_RENDER_H
