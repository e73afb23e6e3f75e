//===- Evaluation.cpp - Validation loss, accuracy and perplexity ----------===//
//
// Evaluation runs the forward in eval mode (Executor::ForwardMode::Eval:
// BatchNormalization on its running statistics, Dropout off) over full
// batches of this rank's shard of the evaluation samples, and sums the
// ranks' losses and counts.
//
//===----------------------------------------------------------------------===//

#include "TrainImpl.h"

namespace oasr::rt {

double EvalResult::accuracy() const {
  return labels ? double(correct) / double(labels) : -1;
}

double EvalResult::perplexity() const {
  return tokens && batches ? std::exp(loss) : -1;
}

/// Runs `fill` then the eval forward for each of this rank's full batches,
/// adding the loss and the top-1 counts into `sums` (loss, correct, labels,
/// samples, batches).
static void evaluateBatches(Executor &exec, int64_t batches, int64_t labels,
                            const std::function<void(int64_t)> &fill,
                            double sums[5]) {
  for (int64_t b = 0; b < batches; ++b) {
    fill(b);
    exec.runForward(Executor::ForwardMode::Eval);
    sums[0] += double(exec.loss());
    sums[1] += double(exec.correct());
    sums[2] += double(labels);
    sums[3] += double(exec.batch());
    sums[4] += 1;
  }
}

EvalResult evaluate(Executor &exec, DataLoader &data, CommEngine &engine,
                    const EvalOptions &options, bool mine) {
  double sums[5] = {0, 0, 0, 0, 0};
  const TensorRef &in = exec.input();
  const TensorRef &lab = exec.label();
  const int64_t n = exec.batch();
  const bool tokens = in.desc.dtype != DType::F32;
  const int64_t labels = lab.data ? lab.numel() : n;
  DataLoader *from = options.data ? options.data : &data;
  const Dataset *held = from->testSet();
  if (mine && lab.data && held && !tokens) {
    // A held-out split in memory: the samples of this rank's shard.
    const std::vector<int64_t> &shard = from->testShard();
    int64_t features = in.numel() / std::max<int64_t>(n, 1);
    evaluateBatches(
        exec, int64_t(shard.size()) / n, labels,
        [&](int64_t b) {
          for (int64_t k = 0; k < n; ++k) {
            int64_t i = shard[size_t(b * n + k)];
            held->sample(i, in.as<float>() + k * features);
            if (lab.desc.dtype == DType::I64)
              lab.as<int64_t>()[k] = held->labels[size_t(i)];
            else
              lab.as<int32_t>()[k] = int32_t(held->labels[size_t(i)]);
          }
        },
        sums);
  } else if (mine && lab.data && options.data) {
    // Every sample of this rank's shard of --eval-data, from its start.
    if (llvm::Error err = from->restoreState(options.startState))
      llvm::report_fatal_error(std::move(err)); // the loader's own state
    BatchFeeder feeder(*from, in, lab, n, tokens);
    evaluateBatches(
        exec, from->trainSize() / n, labels, [&](int64_t) { feeder.next(); },
        sums);
  }
  engine.run([&](Communicator &c) { c.allreduceSum(sums, 5); });
  EvalResult r;
  r.tokens = tokens;
  r.batches = int64_t(sums[4]);
  r.loss = r.batches ? sums[0] / sums[4] : std::nan("");
  r.correct = int64_t(sums[1]);
  r.labels = int64_t(sums[2]);
  r.samples = int64_t(sums[3]);
  return r;
}

} // namespace oasr::rt
