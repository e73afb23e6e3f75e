//===- Run.cpp - A training run from its options to its exit code ---------===//

#include "oasr/Driver/Run.h"
#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Runtime/DataLoader.h"
#include "oasr/Runtime/DeviceSetup.h"
#include "oasr/Runtime/GradientDump.h"
#include "oasr/Runtime/Report.h"
#include "oasr/Runtime/Training.h"
#include "oasr/Runtime/WeightsFile.h"
#include "oasr/Schedule/Schedule.h"
#include "oasr/Schedule/Steady.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sched.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace oasr::rt {

RunSourceModel::~RunSourceModel() = default;

//===----------------------------------------------------------------------===//
// The run
//===----------------------------------------------------------------------===//

namespace {

/// The failure of one rank's setup, agreed on collectively.
struct Failure {
  bool failed = false;
  std::string message;
  void set(const llvm::Twine &m) {
    if (!failed) {
      failed = true;
      message = m.str();
    }
  }
  void set(llvm::Error err) { set(llvm::toString(std::move(err))); }
};

/// Prints this process' current and peak RSS (--debug-memory).
void memoryPoint(const RunOptions &o, const char *phase) {
  if (!o.debugMemory)
    return;
  std::ifstream status("/proc/self/status");
  std::string line, rss, hwm;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0)
      rss = line.substr(6);
    if (line.rfind("VmHWM:", 0) == 0)
      hwm = line.substr(6);
  }
  llvm::errs() << "memory after " << phase << ": rss" << rss << ", peak" << hwm
               << "\n";
}

/// Ends the job with this rank's own error message (the failure report of
/// the other ranks says the rest).
[[noreturn]] void abortRun(Communicator &comm, const std::string &message,
                           int code = 1) {
  silenceFailureReport();
  comm.abort(message, code);
  std::_Exit(code); // not reached: abort ends the job
}

/// One rank's training run: the set-up, agreed on by every rank, then the
/// steps and the report.
class Run {
public:
  Run(const RunOptions &options, const RunModelHooks &hooks)
      : o(options), hooks(hooks) {}
  int run(int *argc, char ***argv);

private:
  /// Every rank's set-up; failures go to `failure`.
  /// --keep-global-batch: the per-rank batch that keeps the checkpoint's
  /// global batch on this run's ranks (collective).
  void keepGlobalBatch();
  void loadModel();
  void loadWeights();
  void openData();
  void checkTraining();
  /// Agrees on the set-up: false (after the lowest failing rank printed its
  /// error) when any rank failed.
  bool agree();
  /// The two-level allreduce's tiers, where the plan sends groups so or
  /// --ranks-per-node asks (collective; after agree).
  void setUpTiers();
  /// Rank 0's warnings and notes before training, and the run's line.
  void describe();
  /// Continues from the checkpoint read by rank 0; the start step.
  int64_t resume(std::vector<float> &algorithmState,
                 std::vector<float> &rankState);
  void report(const TrainSummary &summary, const TrainingAlgorithm &algo);
  TrainRecipe recipe();
  void stalled(const CommEngine::Stall &s);
  bool onSeveralHosts();
  bool severalHosts = false; ///< onSeveralHosts(), asked once at start
  /// The world size of the checkpoint a resized resume continued (0: none).
  int resizedFrom = 0;
  /// The watchdog's limit (--timeout, or derived from the plan).
  double watchdogS = 0;
  /// The model's static batch that --batch replaced when compiling (0:
  /// none).
  int64_t rebatchedFrom = 0;

  /// The options; --keep-global-batch sets the batch (keepGlobalBatch).
  RunOptions o;
  const RunModelHooks &hooks;
  // Destroyed in reverse: the module before its context, the engine before
  // the backend and the communicator.
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<KernelBackend> backend;
  KernelBackend::HostWaits waitsBefore; ///< the backend's, before training
  std::unique_ptr<CommEngine> engine;
  std::unique_ptr<mlir::MLIRContext> ctx;
  int rank = 0, size = 1, nthreads = 1;
  std::string calibratedPriority;
  CommPriorityChoice priority;
  Failure failure;
  RunModule module;
  std::unique_ptr<Executor> exec;
  std::unique_ptr<RunSourceModel> source;
  std::unique_ptr<DataLoader> data;
  std::unique_ptr<DataLoader> evalData; ///< --eval-data
  AlgorithmOptions algoOptions;
  ReplanOptions replanOptions;
  CheckpointOptions checkpointOptions;
  CheckpointBytes resumeBytes;
  /// --dump-grads (JSON): |each rank's gradient| of the last step, summed
  /// over the ranks once training ends.
  std::optional<GradientMagnitudes> magnitudes;
};

void Run::keepGlobalBatch() {
  if (!o.keepGlobalBatch)
    return;
  // Rank 0 reads the manifest; every rank learns its world size and batch.
  int64_t shape[2] = {0, 0};
  std::string why = "rank 0 could not read --resume=" + o.resumeDir;
  if (rank == 0 && !o.resumeDir.empty()) {
    if (auto peek = peekCheckpoint(o.resumeDir)) {
      shape[0] = peek->worldSize;
      shape[1] = peek->batch;
      if (!peek->batch)
        why = peek->path + ": the checkpoint does not record its per-rank "
                           "batch (written before oasr recorded it), so "
                           "--keep-global-batch cannot keep it; give --batch";
    } else {
      why = "--keep-global-batch: " + llvm::toString(peek.takeError());
    }
  }
  engine->run([&](Communicator &c) { c.broadcast(shape, sizeof shape, 0); });
  if (o.resumeDir.empty())
    return; // a --max-restarts first attempt: nothing to keep yet
  if (shape[0] < 1 || shape[1] < 1)
    return failure.set(why);
  const int64_t global = shape[0] * shape[1];
  if (global % size != 0)
    return failure.set(llvm::formatv("--keep-global-batch: the checkpoint's "
                                     "global batch of {0} ({1} rank(s) x {2}) "
                                     "does not divide among {3} rank(s)",
                                     global, shape[0], shape[1], size)
                           .str());
  o.batch = global / size;
}

void Run::loadModel() {
  if (!failure.failed) {
    auto loaded = hooks.load(*ctx, o);
    if (!loaded)
      failure.set(loaded.takeError());
    else
      module = std::move(*loaded);
  }
  memoryPoint(o, "module");

  // Rank 0 writes every output file: refuse paths it cannot write before
  // training instead of after it.
  if (rank == 0 && !failure.failed)
    if (llvm::Error err = checkOutputPaths(o))
      failure.set(llvm::toString(std::move(err)));

  if (module.program)
    rebatchedFrom = module.program->rebatchedFrom;
  else if (module.module)
    if (auto from = (*module.module)
                        ->getAttrOfType<mlir::IntegerAttr>(
                            mlir::oasr::kRebatchedFromAttr))
      rebatchedFrom = from.getInt();
  if (module.program && !o.emitMlir.empty() && !failure.failed)
    failure.set("--emit-mlir: " + o.modelPath +
                " is a compiled program, which holds no MLIR");
  if ((module.module || module.program) && backend && !failure.failed) {
    if (module.module && rank == 0 && !o.emitMlir.empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream os(o.emitMlir, ec);
      if (ec)
        failure.set("--emit-mlir=" + o.emitMlir +
                    ": cannot write: " + ec.message());
      else
        module.module->print(os);
    }
    ExecutorOptions eo;
    eo.seed = o.seed;
    eo.ranks = size;
    eo.lrOverride = o.lr.value_or(-1);
    eo.deviceGraphs = o.cudaGraph;
    auto created =
        module.program
            ? Executor::create(std::move(*module.program), *backend, eo)
            : Executor::create(*module.module, *backend, eo);
    module.program.reset();
    if (!created)
      failure.set(llvm::Twine(o.modelPath) + ": " +
                  llvm::toString(created.takeError()));
    else
      exec = std::move(*created);
    // A realtime thread's wake-ups preempt compute: it tests as rarely as
    // the plan's link allows.
    if (exec)
      engine->setPollCapUs(
          CommEngine::pollCapUs(priority.priority, exec->planBetaSPerByte()));
  }
  memoryPoint(o, "plan");
  if (exec && o.batch && *o.batch > 0 && exec->batch() != *o.batch)
    failure.set(llvm::formatv("--batch={0} does not match the model: {1} was "
                              "compiled for a per-rank batch of {2}",
                              *o.batch, o.modelPath, exec->batch())
                    .str());
}

void Run::loadWeights() {
  // The ONNX source: the initial weights, and what --save writes back.
  if (exec && !failure.failed) {
    InitializerLoader loader;
    auto opened =
        hooks.openSource
            ? hooks.openSource(*exec)
            : llvm::Expected<std::unique_ptr<RunSourceModel>>(nullptr);
    if (!opened)
      failure.set(opened.takeError());
    else if ((source = std::move(*opened)))
      loader = source->loader();
    if (!failure.failed) {
      auto loaded = initializeWeights(*exec, loader, o.seed);
      llvm::Expected<int64_t> step = int64_t(0);
      if (loaded && source)
        step = source->restoreOptimizerState(*exec);
      if (!loaded)
        // Only the ONNX source's initializers can fail to load: name it.
        failure.set(exec->sourcePath() + ": " +
                    llvm::toString(loaded.takeError()));
      else if (!step)
        failure.set(step.takeError());
      else if (rank == 0 && !o.quiet) {
        size_t weights = 0;
        for (const PersistentTensor &t : exec->persistent())
          weights += t.kind != PersistentTensor::OptState;
        std::printf("oasr-run: %s: %zu parameter/state tensors, %u loaded "
                    "from %s%s\n",
                    o.modelPath.c_str(), weights, *loaded,
                    source ? exec->sourcePath().c_str() : "(no ONNX source)",
                    *loaded < weights ? ", the rest seeded random" : "");
        if (*step)
          std::printf("oasr-run: Adam's moments and step %lld from %s\n",
                      (long long)*step, source->ortCheckpoint().c_str());
      }
    }
  }
  memoryPoint(o, "weights");
}

void Run::openData() {
  if (!exec || failure.failed)
    return;
  SampleShape shape;
  shape.features = exec->input().numel() / std::max<int64_t>(exec->batch(), 1);
  shape.classes = exec->numClasses();
  DType inType = exec->input().desc.dtype;
  shape.tokens = inType == DType::I64 || inType == DType::I32;
  shape.vocab = o.vocab && *o.vocab > 0 ? *o.vocab : exec->inputVocab();
  if (exec->label().data)
    shape.labelsPerSample =
        exec->label().numel() / std::max<int64_t>(exec->batch(), 1);
  const std::vector<int64_t> &inShape = exec->input().desc.shape;
  shape.dims.assign(inShape.begin() + (inShape.empty() ? 0 : 1), inShape.end());
  DataShard shard = dataShardFor(o, rank, size);
  auto loader = createDataLoader(o.dataSpec, shape, shard.index, shard.count,
                                 o.seed, o.images);
  if (!loader)
    failure.set(loader.takeError());
  else
    data = std::move(*loader);
  if (failure.failed)
    return;
  // The held-out split: --eval-data, else the source's own (DIR/val).
  std::string evalSpec = o.evalDataSpec;
  if (evalSpec.empty() && exec->label().data)
    evalSpec = data->heldOutSpec();
  if (evalSpec.empty())
    return;
  std::string option =
      o.evalDataSpec.empty()
          ? "--data=" + o.dataSpec + "'s held-out split " + evalSpec
          : "--eval-data=" + evalSpec;
  ImageOptions evalImages = o.images;
  evalImages.eval = true;
  auto held = createDataLoader(evalSpec, shape, shard.index, shard.count,
                               o.seed, evalImages);
  if (!held) {
    std::string why = llvm::toString(held.takeError());
    llvm::StringRef rest(why);
    rest.consume_front("--data=" + evalSpec + ": ");
    failure.set(option + ": " + rest);
    return;
  }
  evalData = std::move(*held);
  if (!evalData->testSet() && evalData->trainSize() == 0)
    failure.set(option + ": holds no fixed samples to evaluate on");
  else if (!exec->label().data)
    failure.set(option + ": the model has no label to evaluate against");
}

void Run::checkTraining() {
  algoOptions.server = o.psServer;
  algoOptions.easgdTau = o.easgdTau;
  algoOptions.easgdAlpha = o.easgdAlpha.value_or(-1);
  algoOptions.compressStart = o.compressStart;
  algoOptions.seed = o.seed;
  if (llvm::Error err =
          checkTrainingAlgorithm(o.algorithm, algoOptions, *comm, exec.get()))
    failure.set(std::move(err));
  if (o.ranksPerNode && (size % o.ranksPerNode || size == o.ranksPerNode))
    failure.set("--ranks-per-node=" + std::to_string(o.ranksPerNode) +
                ": the job's " + std::to_string(size) +
                " rank(s) do not make two or more nodes of that many ranks");
  if (o.easgdAlpha && !(*o.easgdAlpha > 0 && *o.easgdAlpha <= 1))
    failure.set("--easgd-alpha=" + std::to_string(*o.easgdAlpha) +
                ": must be in (0, 1]");
  if (!o.savePath.empty() && !failure.failed &&
      llvm::sys::fs::is_directory(o.savePath))
    failure.set("--save=" + o.savePath + ": is a directory");
  if (!o.savePath.empty() && !failure.failed && !source &&
      !isSafetensorsPath(o.savePath))
    failure.set("--save needs the model's ONNX source (module attribute "
                "oasr.source naming an existing .onnx file), or a "
                ".safetensors path");
  if (!o.saveOrtPath.empty() && !failure.failed &&
      (!source || source->ortCheckpoint().empty()))
    failure.set("--save-ort needs an ONNX Runtime training model whose "
                "parameters come from the checkpoint beside it (" +
                o.modelPath + " is none)");

  // Re-planning: by default once for sync SGD on several ranks when the
  // strategy plans with a model (the others group by layer or size).
  if (exec && !failure.failed) {
    const bool twoLevel = llvm::any_of(
        exec->groups(), [](const GradGroup &g) { return g.twoLevel; });
    if (auto r = replanFor(
            o, size, exec->planStrategy(),
            twoLevel ? "sends groups as two-level allreduces (--two-level)"
                     : "",
            anyCompressed(exec->groups())))
      replanOptions = *r;
    else
      failure.set(r.takeError());
  }

  // Checkpoints: what must match on resume; rank 0 reads and checks the
  // newest one now, every rank restores it after the agreement.
  checkpointOptions = checkpointOptionsFor(o);
  if (!o.resumeDir.empty() && exec && data && !failure.failed && rank == 0) {
    auto chosen =
        readNewestIntactCheckpoint(o.resumeDir, *exec, size, checkpointOptions);
    if (!chosen) {
      failure.set(chosen.takeError());
    } else {
      resumeBytes = std::move(chosen->bytes);
      for (const std::string &s : chosen->skipped)
        llvm::errs() << "oasr-run: warning: --resume=" << o.resumeDir
                     << ": skipped the damaged " << s << "\n";
    }
  }
  if (data && !failure.failed && rank == 0 && data->trainSize() > 0 && exec &&
      data->trainSize() < exec->batch())
    llvm::errs() << llvm::formatv(
        "oasr-run: warning: --data={0}: rank 0's shard holds {1} training "
        "sample(s), fewer than one batch of {2}: every batch repeats "
        "samples\n",
        o.dataSpec, data->trainSize(), exec->batch());
}

bool Run::agree() {
  // The lowest failing rank reports, everyone exits non-zero.
  double lowestFailing = failure.failed ? -double(rank) : -1e9;
  engine->run([&](Communicator &c) { c.allreduceMax(&lowestFailing, 1); });
  if (lowestFailing <= -1e9)
    return true;
  int who = int(-lowestFailing);
  if (rank == who) {
    std::string prefix = size > 1 && rank != 0
                             ? "oasr-run: " + rankName(*comm) + ": error: "
                             : "oasr-run: error: ";
    std::fprintf(stderr, "%s%s\n", prefix.c_str(), failure.message.c_str());
    std::fflush(stderr);
  }
  return false;
}

void Run::setUpTiers() {
  if (!exec || size < 2)
    return;
  unsigned twoLevel = llvm::count_if(
      exec->groups(), [](const GradGroup &g) { return g.twoLevel; });
  if (!twoLevel && !o.ranksPerNode)
    return;
  // Every rank has the same groups: all of them call this collective.
  std::string why = comm->setUpTiers(o.ranksPerNode);
  if (!why.empty() && o.ranksPerNode)
    abortRun(*comm, "oasr-run: " + rankName(*comm) + ": error: " + why);
  if (rank != 0 || o.quiet || !twoLevel)
    return;
  GradWire wire = exec->groups().front().wire;
  std::string narrow =
      wire == GradWire::F32
          ? ""
          : std::string(", ") + gradWireName(wire) + " between the nodes";
  unsigned factors = llvm::count_if(exec->groups(), [](const GradGroup &g) {
    return g.twoLevel && g.powerSgdRank;
  });
  std::string asFactors =
      factors ? " (" + std::to_string(factors) + " as PowerSGD factors)" : "";
  if (why.empty())
    std::printf("oasr-run: two-level allreduce: %u of %zu groups%s, in %d "
                "nodes of %d ranks (%s)%s\n",
                twoLevel, exec->groups().size(), asFactors.c_str(),
                size / comm->ranksPerNode(), comm->ranksPerNode(),
                o.ranksPerNode ? "--ranks-per-node" : "ranks sharing memory",
                narrow.c_str());
  else
    llvm::errs() << "oasr-run: note: the plan's " << twoLevel
                 << " two-level group(s) are sent as one allreduce over "
                    "every rank: "
                 << why << "\n";
}

/// The recipe's per-step scalars, checked against the compiled step.
TrainRecipe Run::recipe() {
  TrainRecipe r;
  const RunOptions::Recipe &g = o.recipe;
  const double base = exec->baseLearningRate();
  if (g.lrSchedule != "constant" || g.warmup != 0 || g.warmupStart != 0 ||
      g.minLr != 0) {
    auto s = parseLrSchedule(g.lrSchedule, g.warmup, g.warmupStart, g.minLr,
                             o.steps, base);
    if (!s)
      abortRun(*comm, "oasr-run: error: " + llvm::toString(s.takeError()));
    r.schedule = *s;
  }
  if (!(std::isfinite(g.clipGradNorm) && g.clipGradNorm >= 0)) {
    char given[32];
    std::snprintf(given, sizeof given, "%g", g.clipGradNorm);
    abortRun(*comm, std::string("oasr-run: error: --clip-grad-norm=") + given +
                        ": expected a finite norm >= 0 (0: off)");
  }
  if (g.clipGradNorm > 0 && exec->steady().forwardWaits)
    abortRun(*comm,
             "oasr-run: error: --clip-grad-norm needs every group averaged "
             "before the first update, and the plan '" +
                 exec->planStrategy() +
                 "' applies each group's update in the next forward; plan "
                 "with a strategy whose updates follow backward (oasr, "
                 "optimal, wfbp, ...)");
  r.clipGradNorm = g.clipGradNorm;
  r.metricsPath = g.metricsPath;
  r.accumulate = g.accumulate;
  if (g.accumulate < 1)
    abortRun(*comm,
             "oasr-run: error: --accumulate=" + std::to_string(g.accumulate) +
                 ": expected a positive number of micro-batches");
  if (g.accumulate > 1 && exec->steady().forwardWaits)
    abortRun(*comm, "oasr-run: error: --accumulate needs each step's updates "
                    "inside the step, and the plan '" +
                        exec->planStrategy() +
                        "' applies each group's update in the next forward; "
                        "plan with a strategy whose updates follow backward");
  for (const GradGroup &grp : exec->groups())
    if (g.accumulate > 1 && grp.buffer.desc.dtype != DType::F32)
      abortRun(*comm, std::string("oasr-run: error: --accumulate sums f32 "
                                  "gradient groups; group ") +
                          std::to_string(grp.id) + " holds " +
                          dtypeName(grp.buffer.desc.dtype));
  if (rank == 0 && !exec->evalFallbacks().empty())
    llvm::errs() << "oasr-run: note: evaluation runs "
                 << exec->evalFallbacks().size()
                 << " node(s) in their training form (no inference kernel "
                    "on this backend), the first "
                 << exec->evalFallbacks().front() << "\n";
  if (rank == 0 && !o.quiet && g.accumulate > 1)
    std::printf(
        "oasr-run: accumulate %lld micro-batches of %lld per step (%lld "
        "samples per rank): one exchange per step, during the last "
        "micro-batch's backward; sending the earlier micro-batches' sum "
        "ahead would add an exchange and cannot shorten the last one\n",
        (long long)g.accumulate, (long long)exec->batch(),
        (long long)(g.accumulate * exec->batch()));
  if (rank == 0 && !o.quiet && r.schedule)
    std::printf("oasr-run: learning rate %s\n",
                r.schedule->describe(base).c_str());
  return r;
}

void Run::describe() {
  if (rank == 0)
    for (const std::string &w : cpuWarnings(
             o, nthreads, boundCpus(), int(std::thread::hardware_concurrency()),
             localRankCount()))
      llvm::errs() << w << "\n";
  if (rank != 0 || o.quiet)
    return;
  if (priority.calibrated)
    std::printf("oasr-run: communication thread at %s priority (%s's "
                "comm_priority, measured by oasr-bench comm)\n",
                priority.name.c_str(), o.commFile.c_str());
  if (priority.acrossHosts)
    std::printf("oasr-run: communication thread at sleep priority (ranks on "
                "several hosts: the network does the allreduce's work, and "
                "the thread sleeps between tests instead of yielding to "
                "compute; --comm-priority or --comm to change)\n");
  if (exec && priority.priority == CommEngine::Priority::Realtime)
    std::printf(
        "oasr-run: communication thread at realtime priority "
        "(SCHED_FIFO): a waiting allreduce is tested at least every "
        "%d us (the plan's link moves 128 KiB in that time)\n",
        CommEngine::pollCapUs(priority.priority, exec->planBetaSPerByte()));
  if (priority.realtimeFellBack)
    llvm::errs() << "oasr-run: note: the calibration measured the "
                    "communication thread at realtime priority, but this "
                    "process may not run a thread at SCHED_FIFO (needs "
                    "CAP_SYS_NICE or `ulimit -r 1`); it sleeps between tests "
                    "at normal priority (sleep) instead\n";
  if (priority.idleFellBack)
    llvm::errs() << "oasr-run: note: the communication thread runs at normal "
                    "priority: this process may not raise an idle-priority "
                    "one while compute waits (needs CAP_SYS_NICE or `ulimit "
                    "-e 20`), and other load on the host would starve it; "
                    "--comm-priority=idle forces idle priority\n";
  if (priority.name == "idle" && !engine->raisesWhileWaited())
    llvm::errs() << "oasr-run: note: the communication thread runs at idle "
                    "priority and this process may not raise it while compute "
                    "waits (needs CAP_SYS_NICE or `ulimit -e 20`): other load "
                    "on the host will starve communication; there, pass "
                    "--comm-priority=normal\n";
  for (const std::string &remark : module.remarks)
    std::printf("oasr-run: %s\n", remark.c_str());
  if (module.usedDefaultComm)
    std::printf("oasr-run: planned with the default allreduce model alpha=%g s "
                "beta=%g s/B (give --comm=FILE from `oasr-bench comm`, or "
                "--alpha/--beta)\n",
                module.defaultAlphaS, module.defaultBetaSPerByte);
  const MemoryStats &m = exec->memory();
  int bound = boundCpus(), online = int(std::thread::hardware_concurrency());
  std::string binding =
      bound > 0 && bound < online
          ? llvm::formatv(" (rank 0 bound to {0} of {1} CPUs)", bound, online)
                .str()
          : "";
  // What the run changed about the model or the data, said here.
  std::string rebatched;
  if (rebatchedFrom)
    rebatched = llvm::formatv(" (--batch replaced the model's static {0})",
                              rebatchedFrom)
                    .str();
  std::printf(
      "oasr-run: %d rank(s) [%s], %d thread(s)/rank%s, batch %lld/rank%s, "
      "data %s, plan %s with %zu fused group(s); memory: "
      "activations %.1f MiB (%.1f MiB without reuse), weights+state "
      "%.1f MiB, gradients %.1f MiB\n",
      size, comm->name(), nthreads, binding.c_str(), (long long)exec->batch(),
      rebatched.c_str(), data->describe().c_str(),
      exec->planStrategy().empty() ? "?" : exec->planStrategy().c_str(),
      exec->groups().size(), m.arenaBytes / 1048576.0,
      m.unsharedBytes / 1048576.0, m.persistentBytes / 1048576.0,
      m.gradBytes / 1048576.0);
  const SteadyExecution &st = exec->steady();
  if (!st.order.empty()) {
    unsigned allreduces = 0, scatters = 0;
    for (const SteadyExecution::Unit &u : st.order)
      if (!u.gather)
        (st.scatter[u.group] ? scatters : allreduces) += 1;
    std::string units = llvm::formatv("{0} allreduce(s)", allreduces).str();
    if (scatters)
      units += llvm::formatv(" and {0} reduce-scatter(s) with their "
                             "all-gather(s)",
                             scatters)
                   .str();
    std::printf("oasr-run: steady-state step: %s, %s per step in the plan's "
                "order\n",
                st.forwardWaits ? "the next forward waits per layer, each "
                                  "group's update right before it"
                                : "the next forward waits for every group",
                units.c_str());
  }
  if (!collectiveTuningNote().empty())
    std::printf("%s\n", collectiveTuningNote().c_str());
  // A lost node's daemon keeps mpirun waiting after the ranks stop unless
  // its connections have short TCP keepalives (Open MPI's default: 300 s
  // idle, then 9 probes 20 s apart).
  const char *keepalive = std::getenv("OMPI_MCA_oob_tcp_keepalive_time");
  if (severalHosts &&
      (!keepalive || std::atof(keepalive) <= 0 || std::atof(keepalive) > 60))
    llvm::errs() << "oasr-run: note: ranks on several hosts: when a node "
                    "cannot be reached, mpirun waits up to 8 minutes for its "
                    "daemon; launch with --mca oob_tcp_keepalive_time 5 "
                    "--mca oob_tcp_keepalive_intvl 5 --mca "
                    "oob_tcp_keepalive_probes 3 to end the job within 15-20 s "
                    "(a link down for less than 10 s goes unnoticed) "
                    "(scripts/cluster.sh does)\n";
  if (size > 1)
    std::printf("oasr-run: watchdog: a collective without progress for %.0f "
                "s stops every rank (%s)\n",
                watchdogS,
                o.timeoutS ? "--timeout"
                           : "10x the predicted step, at least 60 s; "
                             "--timeout=SECONDS to change");
  const std::string &precision = exec->precision();
  std::printf("oasr-run: precision %s (%s); saved for backward %.1f MiB, "
              "%.1f MiB of it in 16 bits\n",
              precision.c_str(),
              precision == "f32"    ? "the default"
              : precision == "tf32" ? "f32 tensors, products on TF32 tensor "
                                      "cores"
                                    : "mixed: products in 16 bits, f32 "
                                      "master weights, optimizer state and "
                                      "gradients",
              m.savedBytes / 1048576.0, m.savedLowBytes / 1048576.0);
  if (!exec->precisionWarning().empty())
    llvm::errs() << "oasr-run: warning: --precision=" << exec->precision()
                 << ": " << exec->precisionWarning() << "\n";
  std::fflush(stdout);
}

int64_t Run::resume(std::vector<float> &algorithmState,
                    std::vector<float> &rankState) {
  broadcastCheckpoint(resumeBytes, *engine);
  auto resumed = restoreCheckpoint(resumeBytes, *exec, *data, rank, size);
  if (!resumed)
    abortRun(*comm, "oasr-run: " + rankName(*comm) + ": error: --resume: " +
                        llvm::toString(resumed.takeError()));
  int64_t startStep = resumed->step;
  algorithmState = std::move(resumed->algorithmState);
  rankState = std::move(resumed->rankState);
  noteProgress(startStep);
  noteCheckpoint(resumed->path);
  if (rank == 0 && !o.quiet)
    std::printf("oasr-run: resumed from %s: step %lld of %lld\n",
                resumed->path.c_str(), (long long)startStep,
                (long long)o.steps);
  resizedFrom = resumed->worldSize != size ? resumed->worldSize : 0;
  if (rank == 0 && resizedFrom) {
    const int64_t before = resumed->batch * resizedFrom,
                  after = exec->batch() * size;
    std::string batch =
        !resumed->batch ? llvm::formatv("global batch {0} ({1}/rank; the "
                                        "checkpoint does not record its own)",
                                        after, exec->batch())
                              .str()
        : before == after
            ? llvm::formatv("global batch {0} kept ({1}/rank, was {2}/rank)",
                            after, exec->batch(), resumed->batch)
                  .str()
            : llvm::formatv("global batch {0} -> {1} ({2}/rank; "
                            "--keep-global-batch keeps {0})",
                            before, after, exec->batch())
                  .str();
    std::printf("oasr-run: resized: the checkpoint was written by %d "
                "rank(s), this run has %d: %s; the data shards are recut "
                "after the samples every old rank had read%s%s\n",
                resizedFrom, size, batch.c_str(),
                size > resizedFrom
                    ? (o.algorithm == "sync-easgd"
                           ? "; the new ranks start from the center variable"
                           : "; the new ranks start from rank 0's weights")
                    : "",
                anyCompressed(exec->groups())
                    ? "; PowerSGD's error feedback restarts at zero"
                    : "");
  }
  // Nothing left to train: the run still evaluates and writes --save and
  // --dump-grads from the checkpoint's weights (a checkpoint to ONNX).
  if (rank == 0 && startStep >= o.steps)
    llvm::errs() << llvm::formatv(
        "oasr-run: note: {0} holds step {1}, --steps={2}: no step left to "
        "train (--steps is the total, not the steps to add)\n",
        resumed->path, startStep, o.steps);
  return startStep;
}

/// The watchdog found no progress for watchdogS seconds: every reachable
/// rank says what it waited for and ends the job.
void Run::stalled(const CommEngine::Stall &s) {
  std::string what = "a collective";
  const auto &groups = exec->groups();
  uint32_t group = s.tag & ~kGatherJobBit;
  if (s.tag == kExchangeJob)
    what = "a parameter exchange of --algo=" + o.algorithm;
  else if (group < groups.size())
    what =
        llvm::formatv("fused group {0}'s {1} ({2} bytes){3}", group,
                      s.tag & kGatherJobBit ? "all-gather" : "allreduce",
                      groups[group].buffer.bytes(),
                      group == 0 ? " or a setup or checkpoint collective" : "")
            .str();
  std::string msg = llvm::formatv(
      "oasr-run: {0}: error: no progress for {1:f0} s (--timeout={2}) in "
      "{3}{4}: a rank stopped, died or cannot be reached (a cut link, a hung "
      "process); {5}",
      rankName(*comm), s.seconds, numberText(watchdogS), what,
      s.running ? "" : ", queued behind the call in flight", progressReport());
  silenceFailureReport();
  comm->abort(msg, 1);
}

/// Whether the ranks run on more than one host (collective: every rank
/// calls it before the engine starts): the host names' hashes agree
/// everywhere on one host.
bool Run::onSeveralHosts() {
  if (!comm || comm->size() < 2)
    return false;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  uint32_t hash = 2166136261u; // FNV-1a
  for (const char *c = host; *c; ++c)
    hash = (hash ^ uint8_t(*c)) * 16777619u;
  double span[2] = {double(hash), -double(hash)};
  comm->allreduceMax(span, 2);
  return span[0] != -span[1];
}

void Run::report(const TrainSummary &summary, const TrainingAlgorithm &algo) {
  SummaryContext sc;
  sc.ranks = size;
  sc.strategy = exec->planStrategy();
  sc.groups = exec->groups().size();
  sc.algorithm = algo.name();
  sc.algorithmReport = algo.report();
  sc.planned = o.algorithm == "sync-sgd";
  std::string costs = exec->costSource().empty()
                          ? std::string("the module's plan")
                          : exec->costSource() + " costs";
  sc.predictedFrom =
      module.commSource.empty() ? costs : costs + ", " + module.commSource;
  if (data)
    sc.dataReport = data->report();
  printSummary(stdout, summary, sc);
  // A device backend's stalls of the host: the loss on --log-every steps,
  // the NaN check and host communication's synchronizations are expected;
  // a kernel's operand read back every step is not (docs/runtime.md).
  KernelBackend::HostWaits after = backend->hostWaits();
  if (!backend->hostAddressable() && summary.steps > 0)
    std::printf("  host waits       %.2f copies to the host and %.2f "
                "synchronizations per step (%s), the host blocked in them "
                "%.2f ms per step\n",
                double(after.copiesToHost - waitsBefore.copiesToHost) /
                    double(summary.steps),
                double(after.synchronizations - waitsBefore.synchronizations) /
                    double(summary.steps),
                backend->name(),
                (after.blockedSeconds - waitsBefore.blockedSeconds) * 1e3 /
                    double(summary.steps));
  if (o.cudaGraph) {
    GraphStats g = exec->graphStats();
    std::printf("  cuda graphs      %zu of the step's %zu instructions "
                "replayed as %zu graphs (of %zu runs of kernels)\n",
                g.graphInstrs, g.instrs, g.graphs, g.runs);
    for (const std::string &why : g.failures)
      std::printf("                   a run left kernel by kernel: %s\n",
                  why.c_str());
  }

  if (!o.dumpGrads.empty())
    if (auto err = writeGradientDump(o.dumpGrads, *exec,
                                     magnitudes ? &*magnitudes : nullptr))
      abortRun(*comm, "oasr-run: error: " + llvm::toString(std::move(err)));
  if (!o.savePath.empty() && isSafetensorsPath(o.savePath)) {
    auto saved = writeSafetensors(o.savePath, *exec,
                                  exec->updateCount() * o.recipe.accumulate);
    if (!saved)
      abortRun(*comm,
               "oasr-run: error: --save: " + llvm::toString(saved.takeError()));
    std::printf("saved %s (%zu parameters and buffers, safetensors)\n",
                o.savePath.c_str(), *saved);
  } else if (!o.savePath.empty()) {
    auto saved = source->save(*exec, o.savePath);
    if (!saved)
      abortRun(*comm,
               "oasr-run: error: --save: " + llvm::toString(saved.takeError()));
    std::printf("saved %s (%zu initializers updated)\n", o.savePath.c_str(),
                *saved);
  }
  if (!o.saveOrtPath.empty()) {
    auto saved = source->saveORT(*exec, o.saveOrtPath, o.lr.value_or(-1));
    if (!saved)
      abortRun(*comm, "oasr-run: error: --save-ort: " +
                          llvm::toString(saved.takeError()));
    std::printf("saved %s (ONNX Runtime checkpoint, %zu parameters)\n",
                o.saveOrtPath.c_str(), *saved);
  }
}

int Run::run(int *argc, char ***argv) {
  // The communication thread's priority on the CPU: --comm-priority, else
  // the one the calibration measured to overlap better, else the default.
  if (auto p = calibratedCommPriority(o)) {
    calibratedPriority = *p;
  } else {
    llvm::errs() << "oasr-run: error: " << llvm::toString(p.takeError())
                 << "\n";
    noteSetupError(o.progressFile);
    return 1;
  }
  // While MPI waits on the wire the communication thread yields its CPU
  // (Open MPI otherwise spins, and at normal priority that takes half a
  // shared core from compute), as in oasr-bench comm's calibration. A value
  // the user set stays.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);

  auto kind = communicatorKind(o, launchedByMpi());
  nthreads = o.threads > 0 ? o.threads : defaultThreads();
  if (!kind) {
    llvm::errs() << "oasr-run: error: " << llvm::toString(kind.takeError())
                 << "\n";
    noteSetupError(o.progressFile);
    return 1;
  }
  if (*kind == "mpi") {
    std::string error;
    comm = createMpiCommunicator(argc, argv, error);
    if (!comm) {
      llvm::errs() << "oasr-run: error: " << error << "\n";
      noteSetupError(o.progressFile);
      return 1;
    }
  } else {
    comm = createSelfCommunicator();
  }
  // Kernel backend (and NCCL) before the communication engine takes `comm`.
  std::string backendError;
  DeviceOptions deviceOptions;
  deviceOptions.device = o.device;
  deviceOptions.commBackend = o.commBackend;
  deviceOptions.algorithm = o.algorithm;
  deviceOptions.threads = nthreads;
  deviceOptions.quiet = o.quiet;
  backend = setUpDevice(comm, deviceOptions, backendError);

  rank = comm->rank();
  size = comm->size();
  priority = chooseCommPriority(
      o, calibratedPriority, CommEngine::idleIsRaisable(),
      CommEngine::realtimeIsPermitted(), severalHosts = onSeveralHosts());
  engine = std::make_unique<CommEngine>(*comm, priority.priority);

  // Setup on every rank; failures are agreed on before training.
  if (!backend)
    failure.set(backendError);
  if (std::string bad = priority.error(); !bad.empty())
    failure.set(bad);
  if (o.commCpu)
    if (std::string why = engine->pinToCpu(*o.commCpu); !why.empty())
      failure.set("--comm-cpu=" + std::to_string(*o.commCpu) + ": " + why);
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::oasr::OASRDialect>();
  ctx = std::make_unique<mlir::MLIRContext>(registry);
  ctx->loadAllAvailableDialects();
  if (llvm::Error err = checkRunOptions(o))
    failure.set(llvm::toString(std::move(err)));
  if (!o.checkpointDir.empty() && rank == 0 && !failure.failed)
    if (std::error_code ec = llvm::sys::fs::create_directories(o.checkpointDir))
      failure.set("--checkpoint=" + o.checkpointDir +
                  ": cannot create: " + ec.message());
  keepGlobalBatch();
  loadModel();
  loadWeights();
  openData();
  checkTraining();
  // The watchdog's limit: --timeout, else 10x the plan's predicted step
  // (which holds its communication), at least 60 s.
  double predictedS =
      exec ? std::max(0.0, exec->predictedIterationUs()) * 1e-6 : 0;
  watchdogS = o.timeoutS ? *o.timeoutS : std::max(60.0, 10 * predictedS);

  if (!agree()) {
    if (rank == 0)
      noteSetupError(o.progressFile);
    engine->drain();
    comm->finalize();
    return 1;
  }
  describe();
  setUpTiers();

  int64_t startStep = 0;
  std::vector<float> resumedAlgorithmState, resumedRankState;
  if (!o.resumeDir.empty())
    startStep = resume(resumedAlgorithmState, resumedRankState);
  installFailureReport(*engine, o.reportFile);
  if (size > 1)
    engine->setWatchdog(watchdogS,
                        [this](const CommEngine::Stall &s) { stalled(s); });

  std::unique_ptr<TrainingAlgorithm> algo =
      createTrainingAlgorithm(o.algorithm, *exec, *engine, algoOptions);
  if (!o.resumeDir.empty())
    if (llvm::Error err = [&]() -> llvm::Error {
          // In this order: the rank state completes the shared one.
          if (llvm::Error e =
                  algo->restoreAlgorithmState(resumedAlgorithmState))
            return e;
          if (resizedFrom && rank >= resizedFrom)
            algo->joinResized();
          return algo->restoreRankState(resumedRankState);
        }())
      abortRun(*comm, "oasr-run: " + rankName(*comm) + ": error: --resume: " +
                          llvm::toString(std::move(err)));
  TrainOptions to;
  to.steps = o.steps;
  to.logEvery = o.logEvery;
  to.evalEvery = o.evalEvery.value_or(0);
  if (evalData) {
    to.eval.data = evalData.get();
    to.eval.startState = evalData->saveState();
  }
  to.quiet = o.quiet;
  to.tracePath = o.tracePath;
  to.profilePath = o.profilePath;
  to.failAtStep = o.failAtStep;
  to.failRank = o.failRank;
  to.failSignal = o.failSignal;
  to.startStep = startStep;
  to.checkpoint = checkpointOptions;
  to.allowNonFinite = o.allowNonFinite;
  to.replan = replanOptions;
  to.replanProfilePath = o.replanProfile;
  to.recipe = recipe();
  if (!o.dumpGrads.empty() &&
      llvm::sys::path::extension(o.dumpGrads) != ".npz") {
    // Every rank sums every parameter's entry, trained here or not.
    magnitudes.emplace();
    for (const auto &g : exec->gradients())
      magnitudes->abs[g.param].assign(size_t(exec->gradient(g.param).numel()),
                                      0.0f);
    to.magnitudes = &*magnitudes;
  }
  TrainSummary summary;
  waitsBefore = backend->hostWaits();
  if (rank == 0)
    startProgressLog(o.progressFile, startStep);
  if (auto err = train(*exec, *data, *algo, *engine, to, summary))
    abortRun(*comm, "oasr-run: " + rankName(*comm) +
                        ": error: " + llvm::toString(std::move(err)));

  memoryPoint(o, "training");
  if (magnitudes) {
    magnitudes->ranks = size;
    for (auto &[name, abs] : magnitudes->abs) {
      std::vector<double> sum(abs.begin(), abs.end());
      engine->run(
          [&](Communicator &c) { c.allreduceSum(sum.data(), sum.size()); });
      abs.assign(sum.begin(), sum.end());
    }
  }
  if (rank == 0)
    report(summary, *algo);
  engine->run([](Communicator &c) { c.barrier(); });
  engine->drain();
  comm->finalize();
  return 0;
}

} // namespace

int runTraining(const RunOptions &options, const RunModelHooks &hooks,
                int *argc, char ***argv) {
  return Run(options, hooks).run(argc, argv);
}

} // namespace oasr::rt
