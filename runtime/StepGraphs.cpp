//===- StepGraphs.cpp - A step's device work replayed as graphs -----------===//

#include "StepGraphs.h"

namespace oasr::rt {

StepGraphs::StepGraphs(const std::vector<char> &replayable,
                       const std::vector<char> &cutBefore) {
  const size_t n = replayable.size();
  runAt.assign(n, -1);
  for (size_t k = 0; k < n;) {
    if (!replayable[k]) {
      ++k;
      continue;
    }
    size_t end = k + 1;
    while (end < n && replayable[end] && !cutBefore[end])
      ++end;
    if (end - k >= 2) { // a graph of one kernel saves nothing
      runAt[k] = int(runs.size());
      runs.push_back({k, end});
    }
    k = end;
  }
  stat.runs = runs.size();
  stat.instrs = n;
}

size_t StepGraphs::run(size_t k, KernelBackend &backend,
                       const std::function<void(size_t)> &runOne) {
  if (k >= runAt.size() || runAt[k] < 0)
    return k;
  Run &r = runs[size_t(runAt[k])];
  if (r.graph == -1 || (r.graph == -2 && steps < 2))
    return k; // kernel by kernel; the first step always
  if (r.graph == -2) {
    std::string why;
    if (backend.beginCapture(why)) {
      for (size_t j = r.begin; j < r.end; ++j)
        runOne(j);
      r.graph = backend.endCapture(why);
    } else {
      r.graph = -1;
    }
    if (r.graph < 0) {
      r.graph = -1;
      bool known = false;
      for (const std::string &f : stat.failures)
        known = known || f == why;
      if (!known)
        stat.failures.push_back(why);
      return k; // nothing ran: the caller runs the run's instructions
    }
    ++stat.graphs;
    stat.graphInstrs += r.end - r.begin;
  }
  backend.replay(r.graph);
  return r.end;
}

} // namespace oasr::rt
