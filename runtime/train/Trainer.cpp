//===- Trainer.cpp - Sync SGD, the training loop, traces and profiles ----===//

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

TrainingAlgorithm::~TrainingAlgorithm() = default;

std::string rankName(const Communicator &comm) {
  return "rank " + std::to_string(comm.rank()) + " (" + comm.host() + ")";
}

static int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// All ranks start from rank 0's weights and state, whatever each loaded.
static void broadcastPersistent(Executor &exec, CommEngine &engine) {
  if (engine.communicator().size() == 1)
    return;
  for (PersistentTensor &t : exec.persistent()) {
    void *p = t.ref.data;
    size_t n = t.ref.bytes();
    engine.run([=](Communicator &c) { c.broadcast(p, n, 0); });
  }
}

/// Runs `fn` on the communication thread as a recorded exchange and waits.
static void runExchange(CommEngine &engine,
                        std::function<void(Communicator &)> fn) {
  engine.wait(engine.enqueue(std::move(fn), kExchangeJob, /*record=*/true));
}

//===----------------------------------------------------------------------===//
// Synchronous SGD
//===----------------------------------------------------------------------===//

static constexpr const char *kSyncSGDName = "sync-sgd";

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

//===----------------------------------------------------------------------===//
// Choosing an algorithm by name
//===----------------------------------------------------------------------===//

static const char *const kServerAlgorithms[] = {
    "async-sgd",    "async-msgd",    "hogwild-sgd",     "async-easgd",
    "async-measgd", "hogwild-easgd", "roundrobin-easgd"};

std::vector<std::string> trainingAlgorithmNames() {
  std::vector<std::string> names = {"sync-sgd", "sync-easgd"};
  names.insert(names.end(), std::begin(kServerAlgorithms),
               std::end(kServerAlgorithms));
  return names;
}

bool usesParameterServer(llvm::StringRef name) {
  return llvm::is_contained(kServerAlgorithms, name);
}

llvm::Error checkTrainingAlgorithm(llvm::StringRef name,
                                   const AlgorithmOptions &o,
                                   Communicator &comm, Executor *exec) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  const bool server = usesParameterServer(name);
  std::vector<std::string> names = trainingAlgorithmNames();
  if (!llvm::is_contained(names, name)) {
    std::string list;
    for (size_t k = 0; k < names.size(); ++k)
      list += (k == 0 ? "" : k + 1 == names.size() ? " or " : ", ") + names[k];
    return fail("--algo=" + name + ": expected " + list);
  }
  if (server)
    if (std::string why = comm.pointToPointUnavailable(); !why.empty())
      return fail("--algo=" + name + " exchanges with a parameter server: " +
                  why + " (run under mpirun, or with --np)");
  if (o.server != "shared" && o.server != "dedicated")
    return fail("--ps-server=" + o.server + ": expected shared or dedicated");
  if (o.server == "dedicated" && !server)
    return fail("--ps-server=dedicated: --algo=" + name +
                " has no parameter server (the async-* and hogwild-* "
                "algorithms do)");
  if (o.server == "dedicated" && comm.size() < 2)
    return fail("--ps-server=dedicated needs at least 2 ranks: the last one "
                "only serves");
  if ((name == "async-msgd" || name == "async-measgd") && exec &&
      llvm::none_of(exec->persistent(), [](const PersistentTensor &t) {
        return t.kind == PersistentTensor::OptState;
      }))
    return fail("--algo=" + name +
                ": the module's optimizer keeps no momentum (compile it with "
                "the momentum optimizer, or use --algo=" +
                (name == "async-msgd" ? "async-sgd" : "async-easgd") + ")");
  if (o.easgdTau < 1)
    return fail("--easgd-tau=" + llvm::Twine(o.easgdTau) + ": must be >= 1");
  return llvm::Error::success();
}

std::unique_ptr<TrainingAlgorithm>
createTrainingAlgorithm(llvm::StringRef name, Executor &exec,
                        CommEngine &engine, const AlgorithmOptions &o) {
  const int size = engine.communicator().size();
  if (usesParameterServer(name)) {
    ParameterServerOptions po;
    po.elastic = name.ends_with("easgd");
    po.hogwild = name.starts_with("hogwild");
    po.roundRobin = name == "roundrobin-easgd";
    po.dedicated = o.server == "dedicated";
    po.tau = o.easgdTau;
    // The elastic moving rate: beta = p * alpha = 0.9 over the p ranks that
    // train, as for sync-easgd.
    po.alpha = o.easgdAlpha > 0 ? o.easgdAlpha
                                : 0.9 / double(po.dedicated ? size - 1 : size);
    return createParameterServer(exec, engine, po, name.str());
  }
  if (name == "sync-easgd")
    // Default moving rate: beta = p * alpha = 0.9 (the paper's choice).
    return createSyncEASGD(exec, engine, o.easgdTau,
                           o.easgdAlpha > 0 ? o.easgdAlpha
                                            : 0.9 / double(size));
  return createSyncSGD(exec, engine);
}

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

//===----------------------------------------------------------------------===//
// Trace and profile
//===----------------------------------------------------------------------===//

namespace {
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

llvm::Error writeJson(const std::string &path, llvm::json::Value value) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return llvm::createStringError(ec, "cannot write %s: %s", path.c_str(),
                                   ec.message().c_str());
  os << llvm::formatv("{0:2}", value) << "\n";
  return llvm::Error::success();
}

std::string stepKindName(StepKind k) {
  switch (k) {
  case StepKind::Forward:
    return "forward";
  case StepKind::Backward:
    return "backward";
  case StepKind::Update:
    return "update";
  case StepKind::Comm:
    return "comm";
  case StepKind::Copy:
    return "copy";
  }
  return "";
}
} // namespace

static llvm::Error writeTrace(const std::string &path, CommEngine &engine,
                              const std::vector<Rec> &local,
                              const PlanHistory &history,
                              const std::vector<ReplanEvent> &replans) {
  std::vector<Rec> comm;
  for (const CommEvent &e : engine.events())
    comm.push_back(
        Rec{1, double(e.job), e.startUs, e.endUs, e.cpuWaitUs, e.dispatchUs});
  std::vector<Rec> all = local;
  all.insert(all.end(), comm.begin(), comm.end());
  std::vector<char> bytes;
  std::vector<size_t> counts;
  engine.run([&](Communicator &c) {
    c.gatherBytes(all.data(), all.size() * sizeof(Rec), 0, bytes, counts);
  });
  if (engine.communicator().rank() != 0)
    return llvm::Error::success();
  llvm::json::Array events;
  const auto &steps = history.steps;
  size_t off = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    events.push_back(llvm::json::Object{
        {"name", "process_name"},
        {"ph", "M"},
        {"pid", int64_t(r)},
        {"args", llvm::json::Object{{"name", "rank " + std::to_string(r)}}}});
    events.push_back(
        llvm::json::Object{{"name", "thread_name"},
                           {"ph", "M"},
                           {"pid", int64_t(r)},
                           {"tid", 0},
                           {"args", llvm::json::Object{{"name", "compute"}}}});
    events.push_back(llvm::json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", int64_t(r)},
        {"tid", 1},
        {"args", llvm::json::Object{{"name", "communication"}}}});
    const Rec *recs = reinterpret_cast<const Rec *>(bytes.data() + off);
    size_t n = counts[r] / sizeof(Rec);
    off += counts[r];
    for (size_t k = 0; k < n; ++k) {
      const Rec &e = recs[k];
      std::string name, cat;
      llvm::json::Object args;
      if (e.lane == 0) {
        const PlanStepInfo &s = steps[size_t(e.name)];
        name = s.name;
        cat = stepKindName(s.kind);
        args["op"] = s.opType;
        if (!s.layer.empty())
          args["layer"] = s.layer;
      } else if (uint32_t(e.name) == kExchangeJob) {
        name = "exchange";
        cat = "exchange";
      } else {
        uint32_t tag = uint32_t(e.name);
        auto found = history.groups.find(tag & ~kGatherJobBit);
        if (found == history.groups.end())
          continue;
        const GradGroup &gg = found->second;
        cat = !gg.scatterRanks      ? "allreduce"
              : tag & kGatherJobBit ? "all-gather"
                                    : "reduce-scatter";
        name = cat + " group " + std::to_string(gg.index);
        args["bytes"] = int64_t(gg.bytes);
        // The call's time without a CPU, and the wait for the thread to
        // wake before it (docs/runtime.md).
        args["cpu_wait_us"] = e.cpuWait;
        args["dispatch_us"] = e.dispatch;
        args["layer"] = gg.layer;
        llvm::json::Array params;
        for (const std::string &p : gg.params)
          params.push_back(p);
        args["params"] = std::move(params);
      }
      events.push_back(
          llvm::json::Object{{"name", name},
                             {"cat", cat},
                             {"ph", "X"},
                             {"pid", int64_t(r)},
                             {"tid", int64_t(e.lane)},
                             {"ts", e.start},
                             {"dur", std::max(0.0, e.end - e.start)},
                             {"args", std::move(args)}});
    }
  }
  // The re-plans, on rank 0's compute lane: the span of agreeing,
  // planning and switching, and a mark across every lane at the switch.
  for (const ReplanEvent &ev : replans) {
    auto makeArgs = [&ev] {
      llvm::json::Object args{{"step", int64_t(ev.step)},
                              {"old_groups", int64_t(ev.oldGroups)},
                              {"new_groups", int64_t(ev.newGroups)},
                              {"plan_ms", ev.planUs * 1e-3},
                              {"switch_ms", ev.switchUs * 1e-3}};
      if (ev.newPredictedUs >= 0)
        args["predicted_gain_ms"] =
            (ev.oldPredictedUs - ev.newPredictedUs) * 1e-3;
      if (!ev.note.empty())
        args["note"] = ev.note;
      if (ev.computeRateMeasured)
        args["compute_rate"] = ev.computeRate;
      return args;
    };
    if (ev.aloneStep > 0)
      events.push_back(llvm::json::Object{
          {"name", llvm::formatv("step {0}: allreduces held until backward "
                                 "ended (compute measured alone)",
                                 ev.aloneStep)
                       .str()},
          {"cat", "replan"},
          {"ph", "X"},
          {"pid", 0},
          {"tid", 0},
          {"ts", ev.aloneStartUs},
          {"dur", ev.aloneEndUs - ev.aloneStartUs},
          {"args", llvm::json::Object{{"step", ev.aloneStep},
                                      {"compute_rate", ev.computeRate}}}});
    events.push_back(llvm::json::Object{{"name", "replan"},
                                        {"cat", "replan"},
                                        {"ph", "X"},
                                        {"pid", 0},
                                        {"tid", 0},
                                        {"ts", ev.atUs},
                                        {"dur", ev.endUs - ev.atUs},
                                        {"args", makeArgs()}});
    events.push_back(llvm::json::Object{
        {"name", llvm::formatv("switch to {0} group(s) before step {1}",
                               ev.newGroups, ev.step + 1)
                     .str()},
        {"cat", "replan"},
        {"ph", "i"},
        {"s", "g"},
        {"pid", 0},
        {"tid", 0},
        {"ts", ev.endUs},
        {"args", makeArgs()}});
  }
  return writeJson(path, llvm::json::Object{{"traceEvents", std::move(events)},
                                            {"displayTimeUnit", "ms"}});
}

/// Replays the plan on the measured profile: the model's iteration time for
/// exactly what this run measured. -1 when the module carries no model or
/// its groups do not map onto the profile.
static double replay(Executor &exec, const schedule::Profile &profile,
                     double callComputeUs) {
  if (exec.planAlphaS() < 0 || exec.groups().empty())
    return -1;
  std::vector<unsigned> sizes;
  for (const GradGroup &g : exec.groups())
    sizes.push_back(unsigned(g.params.size()));
  schedule::Plan plan = schedule::planFromSizes("replay", sizes);
  if (auto err = schedule::verifyPlan(plan, profile.numGrads())) {
    llvm::consumeError(std::move(err));
    return -1;
  }
  schedule::CommModel comm = schedule::CommModel::alphaBeta(
      exec.planAlphaS(), exec.planBetaSPerByte());
  comm.groupOverheadUs = exec.planGroupOverheadUs();
  comm.overlapRate = exec.planOverlapRate();
  // The compute rate stays 1: the layer times measured in this run already
  // ran beside whatever communication the plan put beside them. The starts
  // are not among them: this run's measured start is charged.
  comm.callComputeUs = callComputeUs;
  const SteadyExecution &st = exec.steady();
  if (st.order.empty())
    return schedule::simulate(profile, comm, plan).iterationUs;
  // A steady-state plan: its own model (the groups back in forward order,
  // as layer ranges; the order is layer-index priority unless it is the
  // ready order).
  std::vector<schedule::ReadyGrad> ready = schedule::readyOrder(profile);
  schedule::SteadyPlan sp;
  sp.strategy = "replay";
  sp.barrier = !st.forwardWaits;
  std::vector<SteadyExecution::Unit> readyOrder;
  for (unsigned g = 0; g < plan.numGroups(); ++g) {
    schedule::SteadyGroup sg;
    sg.firstLayer = ~0u;
    for (unsigned i = plan.groupBegin(g); i < plan.groupEnds[g]; ++i) {
      sg.firstLayer = std::min(sg.firstLayer, ready[i].layer);
      sg.lastLayer = std::max(sg.lastLayer, ready[i].layer);
    }
    sg.pieces = g < st.pieces.size() ? st.pieces[g] : 1;
    bool rs = g < st.scatter.size() && st.scatter[g];
    if (rs)
      sg.form = schedule::Collective::ReduceScatterAllGather;
    sp.groups.insert(sp.groups.begin(), sg);
    for (unsigned p = 0; p < sg.pieces; ++p) {
      readyOrder.push_back({g, p, false});
      if (rs)
        readyOrder.push_back({g, p, true});
    }
  }
  sp.priority = st.order == readyOrder ? schedule::Priority::ReadyOrder
                                       : schedule::Priority::LayerIndex;
  if (auto err = schedule::verifySteadyPlan(sp, profile)) {
    llvm::consumeError(std::move(err));
    return -1;
  }
  // DeAR's form: the runtime all-gathers gradients and updates on the
  // compute thread.
  schedule::SteadyComm sc = schedule::SteadyComm::fromAllreduce(comm);
  sc.shardUpdate = false;
  return schedule::simulateSteady(profile, sc, sp).periodUs;
}

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

static std::string formatDuration(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s / 60), int(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
  return buf;
}

llvm::Error train(Executor &exec, DataLoader &data, TrainingAlgorithm &algo,
                  CommEngine &engine, const TrainOptions &options,
                  TrainSummary &summary) {
  Communicator &comm = engine.communicator();
  const int rank = comm.rank();
  // The plan's instructions (re-planning changes them between steps).
  size_t planSteps = exec.steps().size();
  const TensorRef &in = exec.input();
  const TensorRef &lab = exec.label();
  const int64_t n = exec.batch();
  const bool tokens =
      in.desc.dtype == DType::I64 || in.desc.dtype == DType::I32;
  if (!tokens && in.desc.dtype != DType::F32)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the model's input is %s; the data "
                                   "loaders feed f32 images or integer "
                                   "token ids",
                                   dtypeName(in.desc.dtype));
  if (tokens != data.givesTokens())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        tokens ? "the model's input is token ids (%s); --data=%s gives images"
               : "the model's input is f32 images; --data=%s gives token ids",
        tokens ? dtypeName(in.desc.dtype) : data.describe().c_str(),
        data.describe().c_str());
  // A checkpoint is written where every rank has taken the same steps.
  if (options.checkpoint.every > 0 &&
      algo.checkpointKind() == TrainingAlgorithm::CheckpointKind::None)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%s cannot be checkpointed (its ranks do not step together)",
        algo.name());
  // One label per sample, or one per token (next-token labels).
  const int64_t labelCount = lab.data ? lab.numel() : n;
  std::vector<int64_t> labels(static_cast<size_t>(labelCount));
  std::vector<int64_t> ids(tokens ? size_t(in.numel()) : 0);

  std::vector<OpTiming> times(planSteps);
  std::vector<double> sumUs(planSteps, 0.0), durations(planSteps, 0.0);
  // Each measured step's time per instruction kind: the written profile
  // is scaled to their medians (a typical step, as Replan.h's
  // typicalStepUs).
  std::vector<KindSums> stepKindSums;
  std::vector<StepKind> kinds = stepKinds(exec);
  // The measured steps' allreduce starts (at most kMaxStarts), for the
  // time a call's start takes from compute (the replay charges it).
  std::vector<std::pair<double, double>> startSpans;
  constexpr size_t kMaxStarts = 1 << 16;
  // Re-planning from this run's measurements (sync SGD only: the plan
  // describes its allreduces).
  const bool replanning = options.replan.mode != ReplanOptions::Mode::Off &&
                          llvm::StringRef(algo.name()) == kSyncSGDName;
  Replanner replanner(exec, engine, options.replan);
  PlanHistory history;
  history.add(exec);
  summary.initialPredictedUs = exec.predictedIterationUs();
  std::vector<double> iterationsUs, beforeUs;
  int64_t warmupStep = -1; // the first step after a switch
  std::vector<Rec> trace;
  if (!options.tracePath.empty())
    trace.reserve(size_t(std::min(options.steps, options.traceSteps)) *
                  planSteps);

  algo.setup(exec, engine);
  engine.run([](Communicator &c) { c.barrier(); });
  // The compute thread's timings on the events' clock: a start is matched
  // with the job it queued (idleStartUs).
  const int64_t epochNs = engine.resetEpoch();
  engine.clearEvents();

  double measuredIterUs = 0, measuredComputeUs = 0, measuredBlockedUs = 0;
  int64_t measured = 0;
  double intervalLoss = 0, intervalCorrect = 0, intervalSamples = 0,
         intervalLabels = 0;
  int64_t intervalSteps = 0;
  int64_t runStartNs = steadyNs(), intervalStartNs = runStartNs;
  size_t commEventsBefore = 0;
  double commBusyUs = 0;

  // Checkpoints after every `checkpoint.every`-th step (collective).
  auto checkpointDue = [&](int64_t completed) {
    return options.checkpoint.every > 0 &&
           completed % options.checkpoint.every == 0;
  };
  auto writeCheckpoint = [&](int64_t completed) -> llvm::Error {
    exec.completeUpdates(algo); // a steady plan's last updates
    int64_t c0 = steadyNs();
    CheckpointContent content;
    content.perRank =
        algo.checkpointKind() == TrainingAlgorithm::CheckpointKind::PerRank;
    content.algorithmState = algo.saveAlgorithmState();
    auto written = saveCheckpoint(exec, data, engine, options.checkpoint,
                                  completed, content);
    if (!written)
      return written.takeError();
    noteCheckpoint(*written);
    if (rank == 0 && !options.quiet) {
      size_t bytes = 0;
      for (const PersistentTensor &t : exec.persistent())
        bytes += t.ref.bytes();
      std::printf("checkpoint %s (%.1f MiB of tensors, %.0f ms)\n",
                  written->c_str(), double(bytes) / 1048576.0,
                  double(steadyNs() - c0) * 1e-6);
      std::fflush(stdout);
    }
    return llvm::Error::success();
  };

  // --eval-every: the test accuracy after every N-th step, evaluated as
  // after the last step (all ranks' shards summed; the weights
  // beginEvaluation puts in place). Collective. BN statistics that the
  // evaluation's forward passes update are put back, so training goes on
  // as without it. The time printed is the run's wall time since the first
  // step began, less the evaluations' own.
  int64_t evalNs = 0;
  auto evalDue = [&](int64_t completed) {
    return options.evalEvery > 0 && completed % options.evalEvery == 0 &&
           options.evaluate && data.testSet() && lab.data;
  };
  auto evaluateNow = [&](int64_t completed) {
    exec.completeUpdates(algo);
    int64_t e0 = steadyNs();
    std::vector<std::vector<char>> bnState;
    for (const PersistentTensor &t : exec.persistent())
      if (t.kind == PersistentTensor::State)
        bnState.emplace_back(t.ref.as<char>(),
                             t.ref.as<char>() + t.ref.bytes());
    algo.beginEvaluation(exec, engine);
    auto [ok, total] = evaluate(exec, data, engine, algo.trainsOn(rank));
    algo.endEvaluation(exec, engine);
    size_t k = 0;
    for (const PersistentTensor &t : exec.persistent())
      if (t.kind == PersistentTensor::State) {
        std::copy(bnState[k].begin(), bnState[k].end(), t.ref.as<char>());
        ++k;
      }
    if (rank == 0 && total) {
      std::printf("eval step %lld  time %.3f s  test accuracy %.2f%% "
                  "(%lld/%lld)\n",
                  (long long)completed, double(e0 - runStartNs - evalNs) * 1e-9,
                  100.0 * double(ok) / double(total), (long long)ok,
                  (long long)total);
      std::fflush(stdout);
    }
    evalNs += steadyNs() - e0;
  };

  // A rank that does not train (a dedicated server) skips the steps; the
  // loop has no other collectives for such algorithms (they are not
  // lockstep), but every checkpoint and evaluation is one: that rank joins
  // each in turn.
  const int64_t mySteps = algo.trainsOn(rank) ? options.steps : 0;
  const int64_t first = std::max<int64_t>(options.startStep, 0);
  if (!algo.trainsOn(rank))
    for (int64_t done = first + 1; done <= options.steps; ++done) {
      if (checkpointDue(done))
        if (llvm::Error err = writeCheckpoint(done))
          return err;
      if (evalDue(done))
        evaluateNow(done);
    }
  for (int64_t step = first; step < mySteps; ++step) {
    if (step == options.failAtStep && rank == options.failRank &&
        options.failSignal > 0)
      std::raise(options.failSignal); // a crash: no message, no MPI_Abort
    if (step == options.failAtStep && rank == options.failRank) {
      silenceFailureReport();
      comm.abort("oasr-run: " + rankName(comm) +
                     ": error: injected failure at step " +
                     std::to_string(step) + " (--fail-at-step)",
                 3);
    }
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
    // The step re-planning measures compute alone in (its allreduces held
    // until backward ended); not one of the plan's steps in the summary.
    const bool aloneStep = replanning && step + 1 < options.steps &&
                           replanner.wantsAloneStep() &&
                           algo.holdCommunication(true);
    replanner.beginStep();
    int64_t t0 = steadyNs();
    exec.runStep(algo, times.data(), epochNs);
    algo.afterStep(exec, engine, step);
    int64_t t1 = steadyNs();
    double blocked = algo.takeBlockedUs();

    // Bookkeeping (not part of the measured step).
    double compute = 0;
    for (size_t k = 0; k < planSteps; ++k)
      if (exec.steps()[k].kind != StepKind::Comm)
        compute += times[k].endUs - times[k].startUs;
    bool warmup = (step == first && options.steps > first + 1) ||
                  (step == warmupStep && options.steps > step + 1);
    if (aloneStep)
      algo.holdCommunication(false);
    if (replanning)
      replanner.recordStep(times.data(), warmup, aloneStep);
    if (warmup)
      commEventsBefore = engine.events().size();
    if (!warmup && !aloneStep) {
      measuredIterUs += double(t1 - t0) * 1e-3;
      measuredComputeUs += compute;
      measuredBlockedUs += blocked;
      ++measured;
      iterationsUs.push_back(double(t1 - t0) * 1e-3);
      for (size_t k = 0; k < planSteps; ++k) {
        durations[k] = times[k].endUs - times[k].startUs;
        sumUs[k] += durations[k];
      }
      stepKindSums.push_back(kindSums(kinds, durations));
      if (startSpans.size() < kMaxStarts)
        appendStartSpans(exec, times.data(), startSpans);
    }
    if (!options.tracePath.empty() && step - first < options.traceSteps)
      for (size_t k = 0; k < planSteps; ++k)
        trace.push_back(
            Rec{0, double(history.base + k), times[k].startUs, times[k].endUs});

    double loss = exec.loss();
    if (exec.scalesLoss()) {
      summary.lossScale = exec.lossScaler().scale;
      summary.skippedSteps = exec.lossScaler().skipped;
    }
    // A step the loss scaler skipped changed nothing: not a NaN stop.
    if (!std::isfinite(loss) && !options.allowNonFinite &&
        !exec.lastStepSkipped()) {
      exec.completeUpdates(algo); // "after the step's update"
      std::string what = exec.firstNonFinite();
      what = what.empty() ? "every parameter and forward result is finite"
                          : "the first non-finite tensor is " + what;
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "step %lld: the loss is %s; after the step's update, %s "
          "(--allow-nonfinite keeps going)",
          (long long)(step + 1), std::isnan(loss) ? (const char *)"NaN" : "Inf",
          what.c_str());
    }
    noteProgress(step + 1);
    if (checkpointDue(step + 1))
      if (llvm::Error err = writeCheckpoint(step + 1))
        return err;
    if (evalDue(step + 1))
      evaluateNow(step + 1);
    intervalLoss += loss;
    intervalCorrect += double(exec.correct());
    intervalSamples += double(n);
    intervalLabels += double(labelCount);
    ++intervalSteps;
    summary.lastLoss = loss;

    bool last = step + 1 == options.steps;
    if (!options.quiet &&
        ((step + 1) % std::max<int64_t>(options.logEvery, 1) == 0 || last)) {
      double agg[5] = {intervalLoss, intervalCorrect, intervalSamples,
                       double(intervalSteps), intervalLabels};
      if (algo.lockstep())
        engine.run([&](Communicator &c) { c.allreduceSum(agg, 5); });
      int64_t now = steadyNs();
      double secs = double(now - intervalStartNs) * 1e-9;
      double totalSecs = double(now - runStartNs) * 1e-9;
      double meanLoss = agg[0] / std::max(agg[3], 1.0);
      double acc = agg[4] > 0 ? agg[1] / agg[4] : 0;
      summary.trainAccuracy = lab.data ? acc : -1;
      summary.lastLoss = meanLoss;
      if (rank == 0) {
        double ips = secs > 0 ? agg[2] / secs : 0;
        double eta = totalSecs / double(step + 1 - first) *
                     double(options.steps - step - 1);
        const char *who = algo.lockstep() ? "" : "  [rank 0]";
        const char *unit = tokens ? "seq" : "img";
        if (lab.data)
          std::printf("step %lld/%lld  loss %.4f  acc %5.1f%%  %.1f %s/s  "
                      "ETA %s%s\n",
                      (long long)(step + 1), (long long)options.steps, meanLoss,
                      100.0 * acc, ips, unit, formatDuration(eta).c_str(), who);
        else
          std::printf("step %lld/%lld  loss %.4f  %.1f %s/s  ETA %s%s\n",
                      (long long)(step + 1), (long long)options.steps, meanLoss,
                      ips, unit, formatDuration(eta).c_str(), who);
        std::fflush(stdout);
      }
      intervalLoss = intervalCorrect = intervalSamples = intervalLabels = 0;
      intervalSteps = 0;
      intervalStartNs = steadyNs();
    }

    // At a step boundary on every rank alike: measure, agree, re-plan,
    // switch. The summary then measures the new groups from the step after
    // the next (the next warms the new buffers up).
    if (replanning && step + 1 < options.steps && replanner.due()) {
      auto ev = replanner.replan(step + 1);
      if (!ev)
        return ev.takeError();
      if (rank == 0 && !options.quiet) {
        std::printf("%s\n", formatReplan(*ev, iterationsUs).c_str());
        std::fflush(stdout);
      }
      summary.replans.push_back(*ev);
      if (!options.replanProfilePath.empty() && rank == 0 && ev->note.empty())
        if (auto err = writeJson(options.replanProfilePath,
                                 schedule::toJSON(replanner.lastProfile())))
          return err;
      if (ev->changed) {
        history.add(exec);
        planSteps = exec.steps().size();
        times.assign(exec.steps().size(), OpTiming{});
        sumUs.assign(exec.steps().size(), 0.0);
        durations.assign(exec.steps().size(), 0.0);
        kinds = stepKinds(exec);
      }
      stepKindSums.clear();
      startSpans.clear();
      // The summary describes the last plan's steps.
      beforeUs.insert(beforeUs.end(), iterationsUs.begin(), iterationsUs.end());
      iterationsUs.clear();
      measuredIterUs = measuredComputeUs = measuredBlockedUs = 0;
      measured = 0;
      std::fill(sumUs.begin(), sumUs.end(), 0.0);
      warmupStep = step + 1;
    }
  }
  exec.completeUpdates(algo);
  algo.finish(exec, engine);
  engine.drain();
  // The fitted model's time for the allreduces since the last re-plan
  // (their groups are the current ones).
  const ReplanEvent *fit = nullptr;
  for (const ReplanEvent &ev : summary.replans)
    if (ev.note.empty())
      fit = &ev;
  std::map<unsigned, uint64_t> groupBytes;
  for (const GradGroup &g : exec.groups())
    groupBytes[g.id] = g.buffer.bytes();
  double fittedUs = 0;
  for (size_t k = commEventsBefore; k < engine.events().size(); ++k) {
    const CommEvent &e = engine.events()[k];
    commBusyUs += e.endUs - e.startUs;
    summary.commCpuWaitUs += e.cpuWaitUs;
    summary.commDispatchUs += e.dispatchUs;
    auto g = groupBytes.find(e.job);
    if (fit && g != groupBytes.end())
      fittedUs += std::min(e.endUs - e.startUs,
                           1e6 * (fit->comm.alphaS +
                                  fit->comm.betaSPerByte * double(g->second)));
  }
  summary.cpuWaitMeasured = engine.measuresCpuWait();

  summary.steps = options.steps;
  if (measured) {
    double m = double(measured);
    summary.meanIterationUs = measuredIterUs / m;
    summary.computeUs = measuredComputeUs / m;
    summary.exposedCommUs = measuredBlockedUs / m;
    summary.commBusyUs = commBusyUs / m;
    summary.commCpuWaitUs /= m;
    summary.commDispatchUs /= m;
    summary.commRunningUs = summary.commBusyUs - summary.commCpuWaitUs;
    if (fit)
      summary.commFittedUs = fittedUs / m;
    summary.medianIterationUs = median(iterationsUs);
    summary.minIterationUs =
        *std::min_element(iterationsUs.begin(), iterationsUs.end());
    summary.maxIterationUs =
        *std::max_element(iterationsUs.begin(), iterationsUs.end());
    for (size_t k = 0; k < planSteps; ++k)
      sumUs[k] /= m;
    summary.forwardUs = kindSums(kinds, sumUs)[size_t(StepKind::Forward)];
    // The profile: the mean per instruction, scaled to the median step per
    // kind (a step another tenant slowed by half does not move it).
    scaleKindsTo(kinds, sumUs, medianKindSums(stepKindSums));
    // Sync SGD's step waits for the slowest rank of that step: the
    // profile's compute is paced by it (every rank measured the same steps).
    if (llvm::StringRef(algo.name()) == kSyncSGDName && comm.size() > 1) {
      std::vector<double> stepCompute;
      for (const KindSums &s : stepKindSums)
        stepCompute.push_back(computeUs(s));
      // This rank's profile: against its own median.
      summary.stragglerFactor = stragglerFactor(
          perStepMaxUs(engine, stepCompute), median(stepCompute));
      scaleCompute(kinds, sumUs, summary.stragglerFactor);
    }
    const KindSums profiled = kindSums(kinds, sumUs);
    const double fwd = profiled[size_t(StepKind::Forward)],
                 upd = updateUs(profiled);
    schedule::Profile profile =
        measuredProfile(exec, sumUs, fwd, upd,
                        "oasr-run measured, " + std::to_string(comm.size()) +
                            " rank(s), rank 0");
    profile.computeBesideComm = besideCommunication(exec, comm.size());
    std::vector<double> idle;
    idleStartUs(startSpans, engine.events(), idle);
    summary.callStarts = unsigned(idle.size());
    summary.callComputeUs = median(idle);
    summary.replayedUs = replay(exec, profile, summary.callComputeUs);
    if (!options.profilePath.empty() && rank == 0)
      if (auto err = writeJson(options.profilePath, schedule::toJSON(profile)))
        return err;
  }
  summary.predictedUs = exec.predictedIterationUs();
  summary.beforeSteps = int64_t(beforeUs.size());
  summary.beforeMedianIterationUs = median(beforeUs);
  if (!options.tracePath.empty())
    if (auto err = writeTrace(options.tracePath, engine, trace, history,
                              summary.replans))
      return err;
  if (options.evaluate && data.testSet() && lab.data) {
    auto [ok, total] = evaluate(exec, data, engine, algo.trainsOn(rank));
    if (total) {
      summary.testAccuracy = double(ok) / double(total);
      summary.testSamples = total;
    }
  }
  return llvm::Error::success();
}

} // namespace oasr::rt
