//===- ParameterServer.cpp - Async/Hogwild SGD and EASGD ------------------===//

#include "../TrainImpl.h"

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// Parameter server: Async / Hogwild SGD and EASGD
//===----------------------------------------------------------------------===//

static std::string formatG(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

namespace {
class ParameterServer final : public TrainingAlgorithm {
  // Worker -> server requests; server -> worker replies. A request of 0
  // bytes ends a rank's exchanges.
  static constexpr int kRequestTag = 7101, kReplyTag = 7102;

public:
  ParameterServer(Executor &exec, CommEngine &engine,
                  const ParameterServerOptions &o, std::string name)
      : exec(exec), engine(engine), opts(o), algoName(std::move(name)) {
    opts.tau = opts.elastic ? std::max<int64_t>(opts.tau, 1) : 1;
    // The exchanged vector: parameters and BN statistics (f32), not the
    // optimizer's state, which stays local.
    for (PersistentTensor &t : exec.persistent())
      if (t.kind != PersistentTensor::OptState &&
          t.ref.desc.dtype == DType::F32) {
        tensors.push_back(&t);
        count += size_t(t.ref.numel());
      }
    out.resize(count);
    in.resize(count);
    server = opts.dedicated ? engine.communicator().size() - 1 : 0;
  }
  ~ParameterServer() override { joinServers(); }
  const char *name() const override { return algoName.c_str(); }

  // Every rank's own weights and optimizer state, and the center variable.
  CheckpointKind checkpointKind() const override {
    return CheckpointKind::PerRank;
  }
  std::vector<float> saveAlgorithmState() override {
    // Once every rank has arrived, each has its last reply: no request is
    // in flight and the server threads wait for the next one, so the center
    // variable is still while the server copies it.
    std::vector<float> state(count);
    Communicator &comm = engine.communicator();
    engine.run([](Communicator &c) { c.barrier(); });
    if (comm.rank() == server) {
      std::atomic_thread_fence(std::memory_order_acquire);
      for (size_t i = 0; i < count; ++i)
        state[i] = center[i].load(std::memory_order_relaxed);
    }
    float *p = state.data();
    size_t bytes = count * sizeof(float);
    int root = server;
    engine.run([=](Communicator &c) { c.broadcast(p, bytes, root); });
    return state;
  }
  llvm::Error restoreAlgorithmState(const std::vector<float> &state) override {
    resumed = true;
    if (state.size() != count)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "the center variable holds %zu value(s); this model's parameters "
          "and BN statistics need %zu",
          state.size(), count);
    restoredCenter = state;
    return llvm::Error::success();
  }

  void setup(Executor &, CommEngine &) override {
    Communicator &comm = engine.communicator();
    // A resumed run keeps every rank's restored weights.
    if (!resumed)
      broadcastPersistent(exec, engine);
    pack(out.data());
    // SGD: weights at the last exchange. A checkpoint is written after a
    // step's exchange (tau is 1), when the weights are the center returned.
    base = out;
    if (comm.rank() != server)
      return;
    // The center starts at the common weights, or where the checkpoint
    // left it.
    const std::vector<float> &start = resumed ? restoredCenter : out;
    center.reset(new std::atomic<float>[count]);
    for (size_t i = 0; i < count; ++i)
      center[i].store(start[i], std::memory_order_relaxed);
    restoredCenter = {};
    std::vector<int> workers;
    for (int r = 0; r < comm.size(); ++r)
      if (trainsOn(r))
        workers.push_back(r);
    if (opts.roundRobin)
      servers.emplace_back([this, workers] { serve(workers); });
    else
      for (int r : workers)
        servers.emplace_back([this, r] { serve({r}); });
  }
  bool trainsOn(int rank) const override {
    return !(opts.dedicated && rank == server);
  }
  // Local steps on local gradients: no averaging.
  void gradientsReady(unsigned) override {}
  void gradientsNeeded(unsigned) override {}

  void afterStep(Executor &, CommEngine &, int64_t step) override {
    if ((step + 1) % opts.tau != 0)
      return;
    int64_t t0 = steadyNs();
    pack(out.data());
    if (!opts.elastic)
      for (size_t i = 0; i < count; ++i)
        out[i] -= base[i]; // this rank's change since the last exchange
    exchange(out.data(), count);
    if (opts.elastic) {
      for (size_t i = 0; i < count; ++i)
        out[i] -= in[i]; // x_i - e
      unpack(out.data());
    } else {
      unpack(in.data()); // continue from x~
      base = in;
    }
    ++exchanges;
    blockedNs += steadyNs() - t0;
  }

  void finish(Executor &, CommEngine &) override {
    Communicator &comm = engine.communicator();
    if (trainsOn(comm.rank()))
      exchange(nullptr, 0); // done
    if (comm.rank() == server) {
      joinServers();
      for (size_t i = 0; i < count; ++i)
        in[i] = center[i].load(std::memory_order_relaxed);
    }
    // Every rank ends on the center variable.
    float *p = in.data();
    size_t bytes = count * sizeof(float);
    double counts[2] = {double(exchanges), double(served.load())};
    engine.run([&](Communicator &c) {
      c.broadcast(p, bytes, server);
      c.allreduceSum(counts, 2);
    });
    unpack(in.data());
    totalExchanges = int64_t(counts[0]);
    totalServed = int64_t(counts[1]);
  }
  bool lockstep() const override { return false; }
  // Every rank meets the others and evaluates the center variable, as
  // after the last step (saveAlgorithmState: a barrier, then the server's
  // center to every rank).
  void beginEvaluation(Executor &, CommEngine &) override {
    ownWeights.resize(count);
    pack(ownWeights.data());
    std::vector<float> c = saveAlgorithmState();
    unpack(c.data());
  }
  void endEvaluation(Executor &, CommEngine &) override {
    unpack(ownWeights.data());
  }
  std::string report() const override {
    return llvm::formatv("{0} exchanges with the center variable on rank {5}"
                         "{6} ({1} served, {2}), every {3} step(s){4}; final "
                         "weights are the center variable",
                         totalExchanges, totalServed,
                         opts.hogwild      ? "lock-free"
                         : opts.roundRobin ? "round-robin"
                                           : "one at a time",
                         opts.tau,
                         opts.elastic ? ", alpha " + formatG(opts.alpha)
                                      : std::string(),
                         server, opts.dedicated ? ", which only serves" : "")
        .str();
  }

private:
  /// One request and its reply on the communication thread; `n` = 0 ends.
  void exchange(const float *data, size_t n) {
    float *reply = in.data();
    auto roundTrip = [&](Communicator &c) {
      c.send(data, n * sizeof(float), server, kRequestTag);
      if (n)
        c.receive(reply, n * sizeof(float), server, kReplyTag);
    };
    if (n)
      runExchange(engine, roundTrip);
    else
      engine.run(roundTrip);
  }

  /// A server thread on the server rank: it takes the requests of `ranks`
  /// in turn (one rank: first come, first served; several: round-robin), a
  /// rank leaving the cycle with its empty request.
  void serve(std::vector<int> ranks) {
    Communicator &comm = engine.communicator();
    std::vector<float> req(count), rep(count);
    const float alpha = float(opts.alpha);
    for (size_t turn = 0; !ranks.empty();) {
      turn %= ranks.size();
      int r = ranks[turn];
      size_t got =
          comm.receive(req.data(), count * sizeof(float), r, kRequestTag);
      if (got == 0) {
        ranks.erase(ranks.begin() + long(turn));
        continue;
      }
      {
        std::unique_lock<std::mutex> lock(mu, std::defer_lock);
        if (!opts.hogwild)
          lock.lock();
        for (size_t i = 0; i < count; ++i) {
          float c = center[i].load(std::memory_order_relaxed);
          if (opts.elastic) {
            float e = alpha * (req[i] - c);
            center[i].store(c + e, std::memory_order_relaxed);
            rep[i] = e;
          } else {
            center[i].store(c + req[i], std::memory_order_relaxed);
            rep[i] = c + req[i];
          }
        }
      }
      comm.send(rep.data(), count * sizeof(float), r, kReplyTag);
      ++served;
      ++turn;
    }
  }
  void joinServers() {
    for (std::thread &t : servers)
      if (t.joinable())
        t.join();
    servers.clear();
  }
  void pack(float *dst) const {
    for (PersistentTensor *t : tensors) {
      const float *x = t->ref.as<float>();
      dst = std::copy(x, x + t->ref.numel(), dst);
    }
  }
  void unpack(const float *src) {
    for (PersistentTensor *t : tensors) {
      int64_t n = t->ref.numel();
      std::copy(src, src + n, t->ref.as<float>());
      src += n;
    }
  }

  Executor &exec;
  CommEngine &engine;
  ParameterServerOptions opts;
  std::string algoName;
  std::vector<PersistentTensor *> tensors;
  size_t count = 0;
  int server = 0; ///< the rank whose threads hold the center variable
  std::vector<float> out, in, base;
  std::vector<float> ownWeights; ///< a rank's own during an evaluation
  std::unique_ptr<std::atomic<float>[]> center; ///< on the server rank
  std::vector<float> restoredCenter;            ///< from --resume, until setup
  std::mutex mu;
  std::vector<std::thread> servers;
  std::atomic<int64_t> served{0};
  int64_t exchanges = 0, totalExchanges = 0, totalServed = 0;
};
} // namespace

std::unique_ptr<TrainingAlgorithm>
createParameterServer(Executor &exec, CommEngine &engine,
                      const ParameterServerOptions &options, std::string name) {
  return std::make_unique<ParameterServer>(exec, engine, options,
                                           std::move(name));
}

} // namespace oasr::rt
