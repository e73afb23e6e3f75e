//===- SyncEASGD.cpp - Synchronous elastic averaging ----------------------===//

#include "../TrainImpl.h"

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// Synchronous EASGD
//===----------------------------------------------------------------------===//

namespace {
class SyncEASGD final : public TrainingAlgorithm {
public:
  SyncEASGD(Executor &exec, CommEngine &engine, int64_t tau, double alpha)
      : exec(exec), engine(engine), tau(std::max<int64_t>(tau, 1)),
        alpha(float(alpha)) {}
  const char *name() const override { return "sync-easgd"; }
  // Every rank keeps its own weights; the center is the same everywhere.
  CheckpointKind checkpointKind() const override {
    return CheckpointKind::PerRank;
  }
  std::vector<float> saveAlgorithmState() override {
    std::vector<float> flat;
    for (const std::vector<float> &c : center)
      flat.insert(flat.end(), c.begin(), c.end());
    return flat;
  }
  llvm::Error restoreAlgorithmState(const std::vector<float> &state) override {
    resumed = true;
    center.clear();
    size_t at = 0;
    for (PersistentTensor &t : exec.persistent()) {
      if (t.kind != PersistentTensor::Param || t.ref.desc.dtype != DType::F32)
        continue;
      size_t n = size_t(t.ref.numel());
      if (at + n > state.size())
        break;
      center.emplace_back(state.begin() + at, state.begin() + at + n);
      at += n;
    }
    if (at != state.size() || center.size() != centerTensors())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "the center variable holds %zu value(s); this model's parameters "
          "need %zu",
          state.size(), centerValues());
    return llvm::Error::success();
  }

  void joinResized() override {
    size_t k = 0;
    for (PersistentTensor &t : exec.persistent())
      if (t.kind == PersistentTensor::Param && t.ref.desc.dtype == DType::F32 &&
          k < center.size())
        exec.backend().copyToDevice(t.ref.data, center[k++].data(),
                                    size_t(t.ref.bytes()));
  }

  void setup(Executor &, CommEngine &) override {
    // A resumed run keeps every rank's restored weights and the center.
    if (resumed)
      return;
    // Same start everywhere; the center starts at the common weights.
    broadcastPersistent(exec, engine);
    for (PersistentTensor &t : exec.persistent()) {
      if (t.kind == PersistentTensor::Param && t.ref.desc.dtype == DType::F32)
        center.emplace_back(t.ref.as<float>(),
                            t.ref.as<float>() + t.ref.numel());
    }
  }
  // Local steps: no gradient averaging.
  void gradientsReady(unsigned) override {}
  void gradientsNeeded(unsigned) override {}

  void afterStep(Executor &, CommEngine &, int64_t step) override {
    if ((step + 1) % tau != 0)
      return;
    int64_t t0 = steadyNs();
    const float p = float(engine.communicator().size());
    size_t k = 0;
    for (PersistentTensor &t : exec.persistent()) {
      if (t.ref.desc.dtype != DType::F32)
        continue;
      float *x = t.ref.as<float>();
      int64_t n = t.ref.numel();
      if (t.kind == PersistentTensor::State) {
        runExchange(engine, [=](Communicator &c) {
          c.allreduceAverage(x, size_t(n), DType::F32);
        });
        continue;
      }
      if (t.kind != PersistentTensor::Param)
        continue;
      std::vector<float> &c = center[k++];
      std::vector<float> diff(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        diff[size_t(i)] = x[i] - c[size_t(i)];
      float *d = diff.data();
      // Average of the differences; their sum is P times it.
      runExchange(engine, [=](Communicator &cm) {
        cm.allreduceAverage(d, size_t(n), DType::F32);
      });
      for (int64_t i = 0; i < n; ++i) {
        x[i] -= alpha * (x[i] - c[size_t(i)]);
        c[size_t(i)] += alpha * p * diff[size_t(i)];
      }
    }
    blockedNs += steadyNs() - t0;
  }

private:
  size_t centerTensors() const {
    size_t n = 0;
    for (const PersistentTensor &t : exec.persistent())
      n += t.kind == PersistentTensor::Param && t.ref.desc.dtype == DType::F32;
    return n;
  }
  size_t centerValues() const {
    size_t n = 0;
    for (const PersistentTensor &t : exec.persistent())
      if (t.kind == PersistentTensor::Param && t.ref.desc.dtype == DType::F32)
        n += size_t(t.ref.numel());
    return n;
  }

  Executor &exec;
  CommEngine &engine;
  int64_t tau;
  float alpha;
  std::vector<std::vector<float>> center;
};
} // namespace

std::unique_ptr<TrainingAlgorithm>
createSyncEASGD(Executor &exec, CommEngine &engine, int64_t tau, double alpha) {
  return std::make_unique<SyncEASGD>(exec, engine, tau, alpha);
}

} // namespace oasr::rt
