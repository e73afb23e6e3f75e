//===- StepGraphs.h - A step's device work replayed as graphs ---*- C++ -*-===//
//
// Private to the runtime. --cuda-graph: the executor's step is a fixed
// program, the same kernels on the same buffers every step, which is what
// CUDA graphs are for. StepGraphs finds the step's runs of instructions
// that launch the same device work every step (kernels without a random
// sequence, device copies), split where host work runs between them
// (allreduce starts and waits, optimizer updates, deferred updates). The
// first step runs as usual (libraries load, scratch is placed); the second
// captures each run through KernelBackend::beginCapture/endCapture and
// replays it; later steps only replay. A run the backend cannot capture
// (a kernel that reads an operand back on the host) runs kernel by kernel
// from then on, and the reason is kept for the summary.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_STEPGRAPHS_H
#define OASR_RUNTIME_STEPGRAPHS_H

#include "oasr/Runtime/Executor.h"
#include "oasr/Runtime/Kernel.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace oasr::rt {

class StepGraphs {
public:
  /// `replayable[k]`: instruction k launches the same device work every
  /// step; `cutBefore[k]`: host work runs right before k, so no run
  /// continues into it (it may start one).
  StepGraphs(const std::vector<char> &replayable,
             const std::vector<char> &cutBefore);

  void beginStep() { ++steps; }
  /// At instruction k: when a run starts there and is (or now becomes) a
  /// graph, replays it and returns the instruction after the run; else k,
  /// and the caller runs k itself. `runOne(j)` runs instruction j (while
  /// capturing, its launches are recorded).
  size_t run(size_t k, KernelBackend &backend,
             const std::function<void(size_t)> &runOne);

  /// What it did so far (Executor::graphStats).
  const GraphStats &stats() const { return stat; }

private:
  struct Run {
    size_t begin = 0, end = 0;
    int graph = -2; ///< -2: not yet captured; -1: runs kernel by kernel
  };
  std::vector<Run> runs;
  std::vector<int> runAt; ///< the run starting at instruction k, or -1
  int64_t steps = 0;
  GraphStats stat;
};

} // namespace oasr::rt

#endif // OASR_RUNTIME_STEPGRAPHS_H
