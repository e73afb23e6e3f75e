//===- Evaluation.cpp - Test accuracy during and after training -----------===//

#include "TrainImpl.h"

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

std::pair<int64_t, int64_t> evaluate(Executor &exec, DataLoader &data,
                                     CommEngine &engine, bool mine) {
  double counts[2] = {0, 0};
  const Dataset *test = data.testSet();
  const TensorRef &in = exec.input();
  const TensorRef &lab = exec.label();
  if (mine && test && lab.data && in.desc.dtype == DType::F32) {
    const std::vector<int64_t> &shard = data.testShard();
    int64_t n = exec.batch();
    int64_t features = in.numel() / std::max<int64_t>(n, 1);
    // Full batches only: the model's batch is static.
    for (size_t b = 0; b + size_t(n) <= shard.size(); b += size_t(n)) {
      for (int64_t k = 0; k < n; ++k) {
        int64_t i = shard[b + size_t(k)];
        test->sample(i, in.as<float>() + k * features);
        if (lab.desc.dtype == DType::I64)
          lab.as<int64_t>()[k] = test->labels[size_t(i)];
        else
          lab.as<int32_t>()[k] = int32_t(test->labels[size_t(i)]);
      }
      exec.runForward();
      counts[0] += double(exec.correct());
      counts[1] += double(n);
    }
  }
  engine.run([&](Communicator &c) { c.allreduceSum(counts, 2); });
  return {int64_t(counts[0]), int64_t(counts[1])};
}

} // namespace oasr::rt
