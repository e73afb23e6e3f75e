//===- SyncSGD.cpp - Synchronous SGD, the planned allreduces --------------===//

#include "../TrainImpl.h"

#include "oasr/Runtime/PowerSGD.h"

#include "llvm/Support/FormatVariadic.h"

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// Synchronous SGD
//===----------------------------------------------------------------------===//

namespace {
class SyncSGD final : public TrainingAlgorithm {
public:
  SyncSGD(Executor &exec, CommEngine &engine, int64_t compressStart,
          uint64_t seed)
      : exec(exec), engine(engine), jobs(exec.groups().size(), 0),
        compressStart(compressStart) {
    if (anyCompressed(exec.groups()))
      powerSgd = std::make_unique<PowerSgd>(seed);
  }
  std::vector<float> saveAlgorithmState() override {
    if (!powerSgd)
      return {};
    engine.drain(); // the state is the communication thread's
    return powerSgd->saveShared(params());
  }
  llvm::Error restoreAlgorithmState(const std::vector<float> &state) override {
    resumed = true;
    if (!powerSgd)
      return TrainingAlgorithm::restoreAlgorithmState(state);
    sharedState = state;
    return llvm::Error::success();
  }
  std::vector<float> saveRankState() override {
    if (!powerSgd)
      return {};
    engine.drain();
    return powerSgd->saveLocal(params());
  }
  llvm::Error restoreRankState(const std::vector<float> &state) override {
    if (!powerSgd)
      return TrainingAlgorithm::restoreRankState(state);
    std::vector<uint64_t> elements;
    for (const auto &g : exec.gradients())
      elements.push_back(g.bytes / 4);
    return powerSgd->restore(params(), elements, sharedState, state);
  }
  std::string report() const override {
    if (!powerSgd)
      return "";
    PowerSgd::Stats s = powerSgd->stats();
    if (!s.groups)
      return llvm::formatv("powersgd: no group compressed yet (the first {0} "
                           "step(s) travel plain, --compress-start)",
                           compressStart)
          .str();
    std::string wire =
        exec.gradWire() == GradWire::F32
            ? ""
            : llvm::formatv(" (in {0}: {1:f1}x fewer bytes than their f32)",
                            gradWireName(exec.gradWire()),
                            4.0 * double(s.denseFloats) /
                                double(std::max<uint64_t>(s.wireBytes, 1)))
                  .str();
    return llvm::formatv(
               "powersgd: {0} compressed group allreduce(s), {1:f1}x fewer "
               "floats on the wire than the groups hold{3}, {2:f1} ms of "
               "compression compute per group on the communication thread",
               s.groups,
               double(s.denseFloats) /
                   double(std::max<uint64_t>(s.wireFloats, 1)),
               s.computeUs * 1e-3 / double(s.groups), wire)
        .str();
  }
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
  /// Every gradient's parameter, in the executor's order (any plan's).
  std::vector<std::string> params() const {
    std::vector<std::string> out;
    for (const auto &g : exec.gradients())
      out.push_back(g.param);
    return out;
  }
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
    bool twoLevel = g.twoLevel;
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
    if (g.powerSgdRank && exec.updateCount() >= compressStart) {
      // One allreduce piece per compressed group (the planners' rule);
      // from device memory through a host copy.
      PowerSgd *ps = powerSgd.get();
      const GradGroup *group = &g;
      if (exec.backend().hostAddressable())
        job = [ps, group](Communicator &c) { ps->reduce(c, *group); };
      else
        job = [ps, group](Communicator &c) { ps->reduceStaged(c, *group); };
    } else if (!g.scatterRanks) {
      // After a re-plan, a group sent plain whose matrices were compressed
      // sends their error feedback too.
      PowerSgd *ps = powerSgd.get();
      const GradGroup *group = &g;
      const bool host = exec.backend().hostAddressable();
      job = [=](Communicator &c) {
        if (ps && pieces == 1 && host)
          ps->flushInto(*group);
        else if (ps && pieces == 1 && ps->holds(*group))
          c.abort("oasr-run: rank " + std::to_string(c.rank()) +
                      ": error: PowerSGD's error feedback of a group now "
                      "sent plain is in host memory, the group on the "
                      "device (a resume before --compress-start); resume "
                      "at or after it, or use --device=cpu",
                  1);
        c.allreduceGradients(data, count, dtype, wire, scratch, twoLevel);
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
  int64_t compressStart = 0;
  std::unique_ptr<PowerSgd> powerSgd; ///< when the plan compresses a group
  std::vector<float> sharedState;     ///< restored Q, until the rank state
};
} // namespace

std::unique_ptr<TrainingAlgorithm> createSyncSGD(Executor &exec,
                                                 CommEngine &engine,
                                                 int64_t compressStart,
                                                 uint64_t seed) {
  return std::make_unique<SyncSGD>(exec, engine, compressStart, seed);
}

} // namespace oasr::rt
