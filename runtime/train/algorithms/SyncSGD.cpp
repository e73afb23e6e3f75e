//===- SyncSGD.cpp - Synchronous SGD, the planned allreduces --------------===//

#include "../TrainImpl.h"

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// Synchronous SGD
//===----------------------------------------------------------------------===//

namespace {
class SyncSGD final : public TrainingAlgorithm {
public:
  SyncSGD(Executor &exec, CommEngine &engine)
      : exec(exec), engine(engine), jobs(exec.groups().size(), 0) {}
  const char *name() const override { return kSyncSGDName; }
  CheckpointKind checkpointKind() const override {
    return CheckpointKind::Shared;
  }

  void setup(Executor &, CommEngine &) override {
    broadcastPersistent(exec, engine);
  }
  bool ordersAfterDevice() const override {
    return engine.communicator().ordersAfterCompute();
  }
  bool holdCommunication(bool on) override {
    hold = on;
    return true;
  }
  void gradientsReady(unsigned group) override {
    if (hold) {
      held.push_back(group);
      return;
    }
    const auto &order = exec.steady().order;
    if (order.empty()) {
      enqueue(group, 0, 1, false);
      return;
    }
    // A steady plan's fixed order (the same on every rank): the units up to
    // the first whose group is not ready yet. A group's all-gather follows
    // its reduce-scatter on the one communication thread.
    if (ready.size() != exec.groups().size())
      ready.assign(exec.groups().size(), 0);
    ready[group] = 1;
    while (next < order.size() && ready[order[next].group]) {
      const SteadyExecution::Unit &u = order[next++];
      enqueue(u.group, u.piece, exec.steady().pieces[u.group], u.gather);
    }
    if (next == order.size()) {
      next = 0;
      std::fill(ready.begin(), ready.end(), 0);
    }
  }
  void gradientsNeeded(unsigned group) override {
    if (!held.empty()) {
      // Held until now (holdCommunication): every group ready so far, in
      // the order they became ready.
      for (unsigned g : held)
        enqueue(g, 0, 1, false);
      held.clear();
    }
    int64_t t0 = steadyNs();
    engine.wait(jobs[group]);
    blockedNs += steadyNs() - t0;
  }

private:
  /// Piece `piece` of `pieces` parts of the group (pieceSpan): its
  /// allreduce; for a reduce-scatter group, its reduce-scatter into the
  /// shard or (`gather`) the all-gather of the averaged shards back into
  /// the buffer. The group's job is its last unit (jobs run in queue
  /// order).
  void enqueue(unsigned group, unsigned piece, unsigned pieces, bool gather) {
    const GradGroup &g = exec.groups()[group];
    DType dtype = g.buffer.desc.dtype;
    auto [first, count] = pieceSpan(g, piece, pieces);
    void *data = static_cast<char *>(g.buffer.data) + first * dtypeSize(dtype);
    GradWire wire = g.wire;
    void *scratch = g.wireScratch;
    // Re-planning may change the groups between steps.
    if (jobs.size() < exec.groups().size())
      jobs.resize(exec.groups().size(), 0);
    // On the compute thread: mark where the gradients end on the device
    // before the job reaches the communication thread (one mark per job
    // that reads them; an all-gather reads the shard its reduce-scatter
    // wrote, on the same stream).
    if (!gather)
      engine.communicator().markComputeReady();
    std::function<void(Communicator &)> job;
    if (!g.scatterRanks) {
      job = [=](Communicator &c) {
        c.allreduceGradients(data, count, dtype, wire, scratch);
      };
    } else {
      float *full = static_cast<float *>(data);
      float *block = static_cast<float *>(g.shard) + first / g.scatterRanks;
      size_t each = count / g.scatterRanks;
      if (gather)
        job = [=](Communicator &c) { c.allGather(block, full, each); };
      else
        job = [=](Communicator &c) {
          c.reduceScatterAverage(full, block, each);
        };
    }
    jobs[group] =
        engine.enqueue(std::move(job), g.id | (gather ? kGatherJobBit : 0),
                       /*record=*/true);
  }
  Executor &exec;
  CommEngine &engine;
  std::vector<CommEngine::JobId> jobs;
  bool hold = false;
  std::vector<unsigned> held;
  std::vector<char> ready; ///< steady order: groups ready this step
  size_t next = 0;         ///< steady order: the next unit to enqueue
};
} // namespace

std::unique_ptr<TrainingAlgorithm> createSyncSGD(Executor &exec,
                                                 CommEngine &engine) {
  return std::make_unique<SyncSGD>(exec, engine);
}

} // namespace oasr::rt
