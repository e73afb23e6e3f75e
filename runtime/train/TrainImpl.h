//===- TrainImpl.h - Shared by the training loop's files --------*- C++ -*-===//
//
// Private to runtime/train: what the loop (Trainer.cpp), the algorithms
// (algorithms/), evaluation and traces (TraceProfile.cpp) share: the
// clock, rank 0's weights to every rank, recorded exchanges, and the trace
// records.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_TRAIN_TRAINIMPL_H
#define OASR_RUNTIME_TRAIN_TRAINIMPL_H

#include "oasr/Runtime/Report.h"
#include "oasr/Runtime/Training.h"
#include "oasr/Schedule/Schedule.h"
#include "oasr/Schedule/Steady.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace oasr::rt {

namespace schedule = oasr::schedule;

inline int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The planned algorithm's name (re-planning and the plan report apply to
/// it only).
inline constexpr const char *kSyncSGDName = "sync-sgd";

/// All ranks start from rank 0's weights and state, whatever each loaded.
void broadcastPersistent(Executor &exec, CommEngine &engine);
/// Runs `fn` on the communication thread as a recorded exchange and waits.
void runExchange(CommEngine &engine, std::function<void(Communicator &)> fn);

/// The next batch of a data loader into the model's input and label
/// tensors, converted to their element types.
class BatchFeeder {
public:
  BatchFeeder(DataLoader &data, const TensorRef &in, const TensorRef &lab,
              int64_t n, bool tokens)
      : data(data), in(in), lab(lab), n(n), tokens(tokens),
        labelCount(lab.data ? lab.numel() : n),
        labels(static_cast<size_t>(labelCount)),
        ids(tokens ? size_t(in.numel()) : 0) {}
  /// Labels per batch: one per sample, or one per token.
  int64_t labelsPerBatch() const { return labelCount; }
  void next() {
    if (tokens) {
      data.nextTokens(ids.data(), labels.data(), n);
      if (in.desc.dtype == DType::I64)
        std::copy(ids.begin(), ids.end(), in.as<int64_t>());
      else
        for (size_t k = 0; k < ids.size(); ++k)
          in.as<int32_t>()[k] = int32_t(ids[k]);
    } else {
      data.nextBatch(in.as<float>(), labels.data(), n);
    }
    if (lab.data) {
      if (lab.desc.dtype == DType::I64)
        std::copy(labels.begin(), labels.end(), lab.as<int64_t>());
      else
        for (int64_t k = 0; k < labelCount; ++k)
          lab.as<int32_t>()[k] = int32_t(labels[size_t(k)]);
    }
  }

private:
  DataLoader &data;
  const TensorRef &in, &lab;
  int64_t n;
  bool tokens;
  int64_t labelCount;
  std::vector<int64_t> labels, ids;
};

/// One trace record, sent as plain doubles between ranks.
struct Rec {
  double lane, name, start, end;
  double cpuWait = 0, dispatch = 0; ///< communication lane only
};

/// Every plan step and fused group the run used, over its re-plans: trace
/// records name steps by their index here and groups by their id.
struct PlanHistory {
  std::vector<PlanStepInfo> steps;
  size_t base = 0; ///< index of the current plan's first step
  std::map<unsigned, GradGroup> groups;
  void add(const Executor &exec) {
    base = steps.size();
    steps.insert(steps.end(), exec.steps().begin(), exec.steps().end());
    for (const GradGroup &g : exec.groups())
      groups[g.id] = g;
  }
};

llvm::Error writeJson(const std::string &path, llvm::json::Value value);
std::string stepKindName(StepKind k);

llvm::Error writeTrace(const std::string &path, CommEngine &engine,
                       const std::vector<Rec> &local,
                       const PlanHistory &history,
                       const std::vector<ReplanEvent> &replans);
/// Replays the plan on the measured profile: the model's iteration time for
/// exactly what this run measured. -1 when the module carries no model or
/// its groups do not map onto the profile. `tiersUp`: the communicator sent
/// the plan's two-level groups so (else they went flat).
double replay(Executor &exec, const schedule::Profile &profile,
              double callComputeUs, bool tiersUp);

} // namespace oasr::rt

#endif // OASR_RUNTIME_TRAIN_TRAINIMPL_H
