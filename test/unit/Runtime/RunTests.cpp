//===- RunTests.cpp - A training run's decisions, outside oasr-run --------===//
//
// What runTraining decides before it trains, each without MPI: which
// options are out of range, the compute threads, the communicator, the
// communication thread's priority, re-planning, the checkpoint schedule,
// the data shards and the output files; and the --max-restarts launcher.
//
//===----------------------------------------------------------------------===//

#include "oasr/Driver/Run.h"
#include "oasr/Runtime/Report.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace oasr::rt;
namespace schedule = oasr::schedule;

namespace {

std::string errorOf(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : "";
}

TEST(RunOptions, DefaultsAreValid) {
  EXPECT_EQ(errorOf(checkRunOptions({})), "");
}

TEST(RunOptions, RangeErrorsNameTheOptionAndValue) {
  auto check = [](auto set) {
    RunOptions o;
    set(o);
    return errorOf(checkRunOptions(o));
  };
  EXPECT_EQ(check([](RunOptions &o) { o.batch = 0; }),
            "--batch=0: expected a positive per-rank batch");
  EXPECT_EQ(check([](RunOptions &o) { o.steps = -1; }),
            "--steps=-1: expected a positive number of steps");
  // Given, the sentinel of "not given" is an error too.
  EXPECT_EQ(check([](RunOptions &o) { o.lr = -1; }),
            "--lr=-1: expected a finite learning rate >= 0");
  EXPECT_EQ(check([](RunOptions &o) { o.lr = INFINITY; }),
            "--lr=inf: expected a finite learning rate >= 0");
  EXPECT_EQ(check([](RunOptions &o) { o.momentum = NAN; }),
            "--momentum=nan: expected a finite momentum in [0, 1]");
  EXPECT_EQ(check([](RunOptions &o) { o.momentum = 2; }),
            "--momentum=2: expected a finite momentum in [0, 1]");
  EXPECT_EQ(check([](RunOptions &o) { o.alpha = -1e-6; }),
            "--alpha=-1e-06: expected a finite start-up latency >= 0 "
            "(seconds)");
  EXPECT_EQ(check([](RunOptions &o) { o.beta = NAN; }),
            "--beta=nan: expected a finite per-byte time >= 0 (seconds/byte)");
  EXPECT_EQ(check([](RunOptions &o) { o.overlapRate = 3; }),
            "--overlap-rate=3: must be in [0, 1] (the rate communication "
            "progresses while backward computes)");
  EXPECT_EQ(check([](RunOptions &o) { o.vocab = -3; }),
            "--vocab=-3: expected a positive vocabulary size");
  EXPECT_EQ(check([](RunOptions &o) { o.logEvery = 0; }),
            "--log-every=0: expected a positive number of steps");
  EXPECT_EQ(check([](RunOptions &o) { o.commCpu = -2; }),
            "--comm-cpu=-2: expected a CPU number >= 0");
  EXPECT_EQ(check([](RunOptions &o) {
              o.checkpointDir = "ckpt";
              o.checkpointEvery = 0;
            }),
            "--checkpoint-every=0: expected a positive number of steps");
  EXPECT_EQ(check([](RunOptions &o) {
              o.checkpointDir = "ckpt";
              o.keepCheckpoints = -1;
            }),
            "--keep-checkpoints=-1: expected a number of checkpoints >= 0 "
            "(0 keeps all)");
  // In range at the edges.
  EXPECT_EQ(check([](RunOptions &o) {
              o.lr = 0;
              o.momentum = 1;
              o.overlapRate = 0;
              o.commCpu = 0;
            }),
            "");
}

TEST(RunOptions, OptionsThatNeedAnother) {
  RunOptions o;
  o.replan = "off";
  o.replanProfile = "r.json";
  EXPECT_EQ(errorOf(checkRunOptions(o)),
            "--replan-profile needs re-planning (not --replan=off)");
  o = RunOptions();
  o.keepCheckpoints = 3;
  EXPECT_EQ(errorOf(checkRunOptions(o)),
            "--checkpoint-every/--keep-checkpoints need --checkpoint=DIR");
  o.checkpointDir = "ckpt";
  EXPECT_EQ(errorOf(checkRunOptions(o)), "");
}

TEST(RunOptions, MaxRestartsNeedsACheckpointAndTheLauncher) {
  EXPECT_EQ(errorOf(checkRestartOptions(std::nullopt, "")), "");
  EXPECT_EQ(errorOf(checkRestartOptions(2, "")),
            "--max-restarts=2: needs --checkpoint=DIR (a failed job restarts "
            "from the newest complete checkpoint in DIR)");
  EXPECT_EQ(errorOf(checkRestartOptions(-1, "ckpt")),
            "--max-restarts=-1: expected a number of restarts >= 0");
  EXPECT_EQ(errorOf(checkRestartOptions(0, "ckpt")), "");
  // A rank sees the option only when mpirun started it directly.
  RunOptions o;
  o.maxRestarts = 1;
  EXPECT_NE(
      errorOf(checkRunOptions(o)).find("--max-restarts=1: needs --checkpoint"),
      std::string::npos);
  o.checkpointDir = "ckpt";
  EXPECT_NE(errorOf(checkRunOptions(o))
                .find("--max-restarts=1: restarts are made by "
                      "the launcher"),
            std::string::npos);
}

TEST(RunOptions, TheFirstBadOptionIsReported) {
  RunOptions o;
  o.steps = 0;
  o.vocab = 0;
  EXPECT_EQ(errorOf(checkRunOptions(o)),
            "--steps=0: expected a positive number of steps");
}

TEST(RunThreads, BoundRanksUseTheirCpusElseShareTheHost) {
  // A launcher bound the rank to 2 of 16 CPUs.
  EXPECT_EQ(defaultThreads(16, 2, 4), 2);
  // Unbound (the mask holds every CPU): the host's CPUs over its ranks.
  EXPECT_EQ(defaultThreads(16, 16, 4), 4);
  EXPECT_EQ(defaultThreads(16, 0, 3), 5);
  // More ranks than CPUs: still one thread.
  EXPECT_EQ(defaultThreads(2, 2, 8), 1);
  EXPECT_EQ(defaultThreads(0, 0, 1), 1);
  EXPECT_GE(defaultThreads(), 1);
  EXPECT_GE(boundCpus(), 1);
}

TEST(RunThreads, WarnsWhenThreadsShareCpus) {
  RunOptions o;
  EXPECT_TRUE(cpuWarnings(o, 2, 16, 16, 4).empty());
  EXPECT_TRUE(cpuWarnings(o, 2, 0, 0, 4).empty()); // nothing known
  std::vector<std::string> w = cpuWarnings(o, 2, 1, 16, 1);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "oasr-run: warning: 2 compute threads per rank, but rank 0 may "
            "run on 1 CPU(s) only (its affinity mask, e.g. mpirun's default "
            "--bind-to core); the threads will share them. Launch with "
            "`mpirun --bind-to none` or `--map-by slot:PE=2`, or use "
            "--threads=1");
  w = cpuWarnings(o, 2, 2, 2, 2);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "oasr-run: warning: 2 rank(s) x 2 compute thread(s) on "
                  "this host's 2 CPU(s): the ranks oversubscribe the host, "
                  "take turns on its CPUs and cannot overlap communication "
                  "with backward; expect the measured iteration to exceed "
                  "the prediction (docs/runtime.md)");
  EXPECT_EQ(cpuWarnings(o, 4, 2, 2, 2).size(), 2u);
  // A GPU rank's compute does not run on the host's CPUs.
  o.device = "cuda";
  EXPECT_TRUE(cpuWarnings(o, 2, 2, 2, 2).empty());
}

TEST(RunCommunicator, MpiUnderMpirunElseSelf) {
  RunOptions o;
  EXPECT_EQ(*communicatorKind(o, true), "mpi");
  EXPECT_EQ(*communicatorKind(o, false), "self");
  o.communicator = "self";
  EXPECT_EQ(*communicatorKind(o, true), "self");
  o.communicator = "mpi";
  EXPECT_EQ(*communicatorKind(o, false), "mpi");
  o.communicator = "gloo";
  auto kind = communicatorKind(o, true);
  ASSERT_FALSE(kind);
  EXPECT_EQ(errorOf(kind.takeError()),
            "--communicator=gloo: expected mpi or self");
}

TEST(RunPriority, TheOptionThenTheCalibrationThenTheDevice) {
  RunOptions o;
  CommPriorityChoice c = chooseCommPriority(o, "", true);
  EXPECT_EQ(c.name, "idle");
  EXPECT_EQ(c.priority, CommEngine::Priority::Idle);
  EXPECT_FALSE(c.calibrated);
  EXPECT_FALSE(c.idleFellBack);
  // A process that could not raise an idle thread falls back to normal.
  c = chooseCommPriority(o, "", false);
  EXPECT_EQ(c.name, "normal");
  EXPECT_TRUE(c.idleFellBack);
  // The calibration's measured priority.
  c = chooseCommPriority(o, "sleep", false);
  EXPECT_EQ(c.name, "sleep");
  EXPECT_EQ(c.priority, CommEngine::Priority::Sleep);
  EXPECT_TRUE(c.calibrated);
  EXPECT_FALSE(c.idleFellBack);
  // The option wins.
  o.commPriority = "normal";
  c = chooseCommPriority(o, "sleep", true);
  EXPECT_EQ(c.name, "normal");
  EXPECT_EQ(c.priority, CommEngine::Priority::Normal);
  EXPECT_FALSE(c.calibrated);
  EXPECT_EQ(c.error(), "");
  // Ranks on several hosts: the wire does the work, the thread sleeps;
  // the option and the calibration still win.
  o = RunOptions();
  c = chooseCommPriority(o, "", true, true, /*acrossHosts=*/true);
  EXPECT_EQ(c.name, "sleep");
  EXPECT_EQ(c.priority, CommEngine::Priority::Sleep);
  EXPECT_TRUE(c.acrossHosts);
  EXPECT_FALSE(c.idleFellBack);
  c = chooseCommPriority(o, "idle", true, true, /*acrossHosts=*/true);
  EXPECT_EQ(c.name, "idle");
  EXPECT_FALSE(c.acrossHosts);
  o.commPriority = "normal";
  c = chooseCommPriority(o, "", true, true, /*acrossHosts=*/true);
  EXPECT_EQ(c.name, "normal");
  EXPECT_FALSE(c.acrossHosts);
  // A GPU's allreduces are not CPU work.
  o = RunOptions();
  o.device = "cuda";
  c = chooseCommPriority(o, "", true);
  EXPECT_EQ(c.name, "normal");
  EXPECT_FALSE(c.idleFellBack);
  o.commPriority = "fast";
  c = chooseCommPriority(o, "", true);
  EXPECT_EQ(c.error(),
            "--comm-priority=fast: expected idle, normal, sleep or realtime");
  EXPECT_EQ(c.priority, CommEngine::Priority::Normal);
}

TEST(RunPriority, RealtimeWhereThisProcessMayUseSchedFifo) {
  RunOptions o;
  CommPriorityChoice c = chooseCommPriority(o, "realtime", true, true);
  EXPECT_EQ(c.name, "realtime");
  EXPECT_EQ(c.priority, CommEngine::Priority::Realtime);
  EXPECT_TRUE(c.calibrated);
  EXPECT_EQ(c.error(), "");
  // A calibration made where it was permitted falls back to sleep's wait.
  c = chooseCommPriority(o, "realtime", true, false);
  EXPECT_EQ(c.name, "sleep");
  EXPECT_EQ(c.priority, CommEngine::Priority::Sleep);
  EXPECT_TRUE(c.realtimeFellBack);
  EXPECT_EQ(c.error(), "");
  // Asked for by name, it is an error.
  o.commPriority = "realtime";
  c = chooseCommPriority(o, "", true, false);
  EXPECT_TRUE(c.realtimeRefused);
  EXPECT_FALSE(c.realtimeFellBack);
  EXPECT_EQ(c.error(),
            "--comm-priority=realtime: this process may not run a thread at "
            "SCHED_FIFO (needs CAP_SYS_NICE or `ulimit -r 1`); "
            "--comm-priority=sleep waits the same way at normal priority");
  // A GPU's communicator waits inside NCCL and CUDA.
  o.device = "cuda";
  c = chooseCommPriority(o, "", true, true);
  EXPECT_TRUE(c.realtimeOnDevice);
  EXPECT_EQ(c.error(),
            "--comm-priority=realtime: applies to the CPU's MPI communicator, "
            "whose waits sleep between tests; with a GPU the thread waits "
            "inside NCCL and CUDA, which may spin at real-time priority (use "
            "normal)");
}

/// A file in a fresh temporary directory, removed with it.
class TempDir {
public:
  TempDir() {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("oasr-run-test", dir));
  }
  ~TempDir() { llvm::sys::fs::remove_directories(dir); }
  std::string path(llvm::StringRef name) const {
    llvm::SmallString<128> p(dir);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  std::string write(llvm::StringRef name, llvm::StringRef text) const {
    std::string p = path(name);
    std::error_code ec;
    llvm::raw_fd_ostream os(p, ec);
    EXPECT_FALSE(ec);
    os << text;
    return p;
  }

private:
  llvm::SmallString<128> dir;
};

TEST(RunPriority, ReadFromTheCalibrationOnTheCpuOnly) {
  TempDir tmp;
  RunOptions o;
  o.commFile = tmp.write("sleep.json", R"({"comm_priority": "sleep"})");
  EXPECT_EQ(*calibratedCommPriority(o), "sleep");
  // Not read when the option decides, or on a GPU.
  o.commPriority = "idle";
  EXPECT_EQ(*calibratedCommPriority(o), "");
  o.commPriority = "";
  o.device = "cuda";
  EXPECT_EQ(*calibratedCommPriority(o), "");
  // A calibration that measured none.
  o = RunOptions();
  o.commFile = tmp.write("none.json", "{}");
  EXPECT_EQ(*calibratedCommPriority(o), "");
  o.commFile = tmp.write("bad.json", R"({"comm_priority": "high"})");
  auto p = calibratedCommPriority(o);
  ASSERT_FALSE(p);
  std::string error = errorOf(p.takeError());
  EXPECT_EQ(
      error.rfind("--comm: " + o.commFile + ": 'comm_priority' must be", 0), 0u)
      << error;
  o.commFile = tmp.path("missing.json");
  p = calibratedCommPriority(o);
  ASSERT_FALSE(p);
  EXPECT_EQ(errorOf(p.takeError()).rfind("--comm: ", 0), 0u);
}

TEST(RunReplan, OnceByDefaultForSyncSgdOnSeveralCpuRanksWithAModel) {
  RunOptions o;
  auto mode = [&](int ranks, llvm::StringRef strategy) {
    auto r = replanFor(o, ranks, strategy);
    EXPECT_TRUE(bool(r));
    return r ? r->mode : ReplanOptions::Mode::Off;
  };
  EXPECT_EQ(mode(2, "oasr"), ReplanOptions::Mode::Once);
  EXPECT_EQ(mode(2, "mgwfbp"), ReplanOptions::Mode::Once);
  EXPECT_EQ(mode(2, "optimal"), ReplanOptions::Mode::Once);
  // One rank, a strategy that groups by layer or size, or no strategy.
  EXPECT_EQ(mode(1, "oasr"), ReplanOptions::Mode::Off);
  EXPECT_EQ(mode(2, "wfbp"), ReplanOptions::Mode::Off);
  EXPECT_EQ(mode(2, ""), ReplanOptions::Mode::Off);
  // Not on a GPU, not for another algorithm.
  o.device = "cuda";
  EXPECT_EQ(mode(2, "oasr"), ReplanOptions::Mode::Off);
  o = RunOptions();
  o.algorithm = "sync-easgd";
  EXPECT_EQ(mode(2, "oasr"), ReplanOptions::Mode::Off);
  // Asked for.
  o = RunOptions();
  o.replan = "every:5";
  auto r = replanFor(o, 1, "optimal");
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(r->mode, ReplanOptions::Mode::Every);
  EXPECT_EQ(r->every, 5);
  o.replan = "off";
  EXPECT_EQ(mode(2, "oasr"), ReplanOptions::Mode::Off);
  // A compressed plan re-plans its groups and forms on request only; a
  // two-level one not at all.
  o = RunOptions();
  auto compressed = replanFor(o, 2, "oasr", "", /*compresses=*/true);
  ASSERT_TRUE(bool(compressed));
  EXPECT_EQ(compressed->mode, ReplanOptions::Mode::Off);
  o.replan = "once";
  compressed = replanFor(o, 2, "oasr", "", /*compresses=*/true);
  ASSERT_TRUE(bool(compressed));
  EXPECT_EQ(compressed->mode, ReplanOptions::Mode::Once);
  // On a device PowerSGD's error feedback stays in host memory, which a
  // re-plan that sends a matrix plain would have to add on the device.
  o.device = "cuda";
  auto onDevice = replanFor(o, 2, "oasr", "", /*compresses=*/true);
  ASSERT_FALSE(bool(onDevice));
  EXPECT_EQ(errorOf(onDevice.takeError()),
            "--replan=once: a re-plan may send a compressed matrix plain "
            "with its error feedback, which PowerSGD keeps in host memory; "
            "with --device=cuda give --replan=off");
  o.device = "cpu";
  auto tiers = replanFor(o, 2, "oasr", "sends groups two-level");
  ASSERT_FALSE(bool(tiers));
  EXPECT_EQ(errorOf(tiers.takeError()),
            "--replan=once: the plan sends groups two-level, and re-planning "
            "does not choose routes yet; give --replan=off");
}

TEST(RunReplan, ErrorsNameTheOption) {
  RunOptions o;
  auto error = [&](int ranks, llvm::StringRef strategy) {
    auto r = replanFor(o, ranks, strategy);
    return r ? std::string() : errorOf(r.takeError());
  };
  o.replan = "twice";
  EXPECT_EQ(error(2, "oasr").rfind("--replan=twice: ", 0), 0u);
  o.replan = "once";
  o.algorithm = "sync-easgd";
  EXPECT_EQ(error(2, "oasr"), "--replan=once: --algo=sync-easgd does not run "
                              "the planned allreduces (sync-sgd does)");
  o = RunOptions();
  o.replan = "every:4";
  EXPECT_EQ(error(2, "wfbp"),
            "--replan=every:4: the plan's strategy 'wfbp' groups without an "
            "allreduce model; re-planning applies to mgwfbp, optimal and "
            "oasr");
  EXPECT_EQ(error(2, ""), "--replan=every:4: the plan's strategy '?' groups "
                          "without an allreduce model; re-planning applies to "
                          "mgwfbp, optimal and oasr");
  o = RunOptions();
  o.replanProfile = "r.json";
  EXPECT_EQ(error(1, "oasr"),
            "--replan-profile=r.json: nothing is re-planned in this run "
            "(sync-sgd on several ranks with mgwfbp, optimal or oasr "
            "re-plans)");
  EXPECT_EQ(error(2, "oasr"), "");
}

TEST(RunCheckpoints, AfterTheLastStepUnlessEveryIsGiven) {
  RunOptions o;
  o.steps = 12;
  CheckpointOptions c = checkpointOptionsFor(o);
  EXPECT_EQ(c.every, 0); // no --checkpoint
  o.checkpointDir = "ckpt";
  c = checkpointOptionsFor(o);
  EXPECT_EQ(c.dir, "ckpt");
  EXPECT_EQ(c.every, 12);
  EXPECT_EQ(c.keep, 2);
  EXPECT_EQ(c.algorithm, "sync-sgd");
  EXPECT_EQ(c.dataSource, "synthetic");
  EXPECT_EQ(c.seed, 1u);
  o.checkpointEvery = 5;
  o.keepCheckpoints = 0;
  o.algorithm = "async-easgd";
  o.psServer = "dedicated";
  o.seed = 7;
  c = checkpointOptionsFor(o);
  EXPECT_EQ(c.every, 5);
  EXPECT_EQ(c.keep, 0);
  // Where the center variable lives must match on resume.
  EXPECT_EQ(c.algorithm, "async-easgd --ps-server=dedicated");
  EXPECT_EQ(c.seed, 7u);
}

TEST(RunData, ADedicatedServerLeavesTheDataToTheOthers) {
  RunOptions o;
  DataShard s = dataShardFor(o, 2, 4);
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 4);
  o.psServer = "dedicated";
  s = dataShardFor(o, 2, 4);
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 3);
  s = dataShardFor(o, 3, 4); // the server: a valid, unused shard
  EXPECT_EQ(s.index, 0);
  EXPECT_EQ(s.count, 3);
  s = dataShardFor(o, 0, 1); // one rank cannot be dedicated
  EXPECT_EQ(s.index, 0);
  EXPECT_EQ(s.count, 1);
}

TEST(RunOutputs, RefusedBeforeTrainingWithoutTouchingThem) {
  TempDir tmp;
  EXPECT_EQ(unwritable(tmp.path("")), "is a directory");
  std::string fresh = tmp.path("fresh.json");
  EXPECT_EQ(unwritable(fresh), "");
  EXPECT_FALSE(llvm::sys::fs::exists(fresh)); // probed, then removed
  std::string existing = tmp.write("old.json", "keep");
  EXPECT_EQ(unwritable(existing), "");
  uint64_t size = 0;
  EXPECT_FALSE(llvm::sys::fs::file_size(existing, size));
  EXPECT_EQ(size, 4u); // not truncated
  EXPECT_NE(unwritable(tmp.path("nowhere/t.json")), "");

  RunOptions o;
  EXPECT_EQ(errorOf(checkOutputPaths(o)), "");
  o.tracePath = fresh;
  o.savePath = tmp.path("nowhere/model.onnx");
  std::string error = errorOf(checkOutputPaths(o));
  EXPECT_EQ(error.rfind("--save=" + o.savePath + ": cannot write: ", 0), 0u)
      << error;
  o.profilePath = tmp.path("");
  EXPECT_EQ(errorOf(checkOutputPaths(o)),
            "--profile=" + o.profilePath + ": cannot write: is a directory");
}

TEST(Replan, ComputeRateFromTheAloneStep) {
  using K = StepKind;
  // Forward 10, backward instructions 20, 30, 40, a comm instruction, an
  // update. Allreduces ran beside 12 us of the 30-us instruction and all
  // of the 40-us one; in the alone step those took 24 and 20.
  std::vector<K> kinds = {K::Forward,  K::Backward, K::Backward,
                          K::Backward, K::Comm,     K::Update};
  std::vector<double> mean = {10, 20, 30, 40, 5, 3};
  std::vector<double> beside = {0, 0, 12, 40, 5, 0};
  std::vector<double> alone = {11, 21, 24, 20, 1, 3};
  ComputeRateSums s = computeRateSums(kinds, mean, beside, alone);
  // Work beside: (24 - 18) + (20 - 0) + the comm instruction's (1 - 0).
  EXPECT_DOUBLE_EQ(s.backwardUs, 90);
  EXPECT_DOUBLE_EQ(s.timeBesideUs, 57);
  EXPECT_DOUBLE_EQ(s.workBesideUs, 27);
  auto kappa = computeRateFrom(s);
  ASSERT_TRUE(bool(kappa)) << llvm::toString(kappa.takeError());
  EXPECT_DOUBLE_EQ(*kappa, 27.0 / 57);
  // Clamped: noise can make "alone" slower than beside, or work negative.
  EXPECT_DOUBLE_EQ(*computeRateFrom({80, 57, 90}), 1.0);
  EXPECT_DOUBLE_EQ(*computeRateFrom({-3, 57, 90}), 0.05);
  // Under 2 % of backward beside communication: not measured, and why.
  auto none = computeRateFrom({1, 1.5, 100});
  ASSERT_FALSE(bool(none));
  EXPECT_EQ(llvm::toString(none.takeError()),
            "too little compute beside communication: 2 us of 100 us of "
            "backward");
  EXPECT_FALSE(bool(computeRateFrom({0, 0, 0})));
}

TEST(Replan, StragglerFactorIsTheSlowestRankOfEachStep) {
  using K = StepKind;
  // Two ranks, each slow in a different step: rank 0 computes 10, 14, 10,
  // 10, 10 and rank 1 10, 10, 14, 10, 14; their medians are 10 each, but
  // the step waits for the slower: 10, 14, 14, 10, 14, median 14.
  std::vector<double> perStepMax = {10, 14, 14, 10, 14};
  EXPECT_DOUBLE_EQ(stragglerFactor(perStepMax, 10), 1.4);
  // Never below 1 (a reference above every step), and 1 with nothing.
  EXPECT_DOUBLE_EQ(stragglerFactor(perStepMax, 20), 1.0);
  EXPECT_DOUBLE_EQ(stragglerFactor({}, 10), 1.0);
  EXPECT_DOUBLE_EQ(stragglerFactor(perStepMax, 0), 1.0);
  // It scales compute, not the waits.
  std::vector<K> kinds = {K::Forward, K::Backward, K::Comm, K::Update};
  std::vector<double> us = {2, 4, 8, 1};
  scaleCompute(kinds, us, 1.5);
  EXPECT_EQ(us, (std::vector<double>{3, 6, 8, 1.5}));
}

TEST(Replan, ModelFromOneSizeTakesAlphaFromThePlan) {
  // Every allreduce the same size: the least squares cannot separate alpha
  // from beta, so alpha is the plan's and beta the median work per byte at
  // the plan's overlap rate (0.5): (0.5 * beside + after - alpha) / bytes.
  std::vector<schedule::MeasuredAllreduce> one = {
      {1e6, 0.02, 0.0}, {1e6, 0.0, 0.011}, {1e6, 0.004, 0.009}};
  bool rateFitted = true, alphaFromPlan = false;
  schedule::CommModel m =
      fitReplanModel(one, 2, 1e-3, 0.5, rateFitted, alphaFromPlan);
  EXPECT_FALSE(rateFitted);
  EXPECT_TRUE(alphaFromPlan);
  EXPECT_DOUBLE_EQ(m.alphaS, 1e-3);
  EXPECT_DOUBLE_EQ(m.overlapRate, 0.5);
  // Works 0.009, 0.010 and 0.010 s after alpha: the median 0.010.
  EXPECT_NEAR(m.betaSPerByte, 0.010 / 1e6, 1e-15);
  // Several sizes: the fit's own alpha and beta.
  const double alpha = 2e-3, beta = 40e-9;
  std::vector<schedule::MeasuredAllreduce> many;
  for (double bytes : {1e5, 5e5, 2e6, 9e6})
    many.push_back({bytes, 0, alpha + beta * bytes});
  m = fitReplanModel(many, 2, 0, 1.0, rateFitted, alphaFromPlan);
  EXPECT_FALSE(alphaFromPlan);
  EXPECT_NEAR(m.alphaS, alpha, 1e-9);
  EXPECT_NEAR(m.betaSPerByte, beta, 1e-15);
}

TEST(Replan, SwitchesOnlyToFasterGroups) {
  // Four layers of 1 ms backward, each with a 1 MB gradient.
  schedule::Profile p;
  p.model = "four";
  p.forwardUs = 1000;
  for (int l = 0; l < 4; ++l) {
    schedule::Layer layer;
    layer.name = "l" + std::to_string(l);
    layer.backwardUs = 1000;
    layer.grads.push_back({layer.name + ".w", 1000000, 0});
    p.layers.push_back(layer);
  }
  // A large start-up: one group of four beats four groups of one.
  schedule::CommModel slowStart = schedule::CommModel::alphaBeta(5e-3, 1e-10);
  auto merge = chooseGroups(p, slowStart, {1, 1, 1, 1}, {4}, "oasr");
  ASSERT_TRUE(bool(merge)) << llvm::toString(merge.takeError());
  EXPECT_TRUE(merge->changed);
  EXPECT_EQ(merge->oldGroups, 4u);
  EXPECT_EQ(merge->newGroups, 1u);
  EXPECT_LT(merge->newPredictedUs, merge->oldPredictedUs);
  // The other way round is predicted slower: the groups stay, and the
  // choice says what it declined.
  auto split = chooseGroups(p, slowStart, {4}, {1, 2, 3, 4}, "oasr");
  ASSERT_TRUE(bool(split)) << llvm::toString(split.takeError());
  EXPECT_FALSE(split->changed);
  EXPECT_EQ(split->newGroups, 1u);
  EXPECT_EQ(split->notFasterGroups, 4u);
  EXPECT_GT(split->notFasterUs, split->oldPredictedUs);
  EXPECT_DOUBLE_EQ(split->newPredictedUs, split->oldPredictedUs);
  // The same groups: nothing to switch.
  auto same = chooseGroups(p, slowStart, {2, 2}, {2, 4}, "oasr");
  ASSERT_TRUE(bool(same));
  EXPECT_FALSE(same->changed);
  EXPECT_EQ(same->notFasterGroups, 0u);
  // Ends that do not cover the gradients are an error.
  auto bad = chooseGroups(p, slowStart, {4}, {2}, "oasr");
  EXPECT_FALSE(bool(bad));
  llvm::consumeError(bad.takeError());
}

TEST(Replan, IdleStartsAreTheStartsWhoseJobFoundTheThreadIdle) {
  // Four starts; their jobs queued inside them, in queueing order. The
  // second's job queued behind the first's (not idle), the fourth's job is
  // not recorded yet (still running): only the first and third count.
  std::vector<std::pair<double, double>> spans = {
      {10, 60}, {100, 101}, {200, 240}, {300, 302}};
  auto event = [](double queued, bool idle) {
    CommEvent e;
    e.enqueuedUs = queued;
    e.queuedIdle = idle;
    return e;
  };
  std::vector<CommEvent> events = {event(11, true), event(100.5, false),
                                   event(201, true)};
  std::vector<double> out = {7};
  idleStartUs(spans, events, out);
  EXPECT_EQ(out, (std::vector<double>{7, 50, 40}));
  // A job queued after its start had ended belongs to another start.
  out.clear();
  idleStartUs({{0, 5}}, events, out);
  EXPECT_TRUE(out.empty());
}

TEST(Replan, TypicalStepIsTheMedianStepNotTheSumOfMedians) {
  using K = StepKind;
  // Two backward instructions, each slow in a different step (right-skewed
  // times): their medians add to 20, while every step's backward took 25
  // or more. A comm wait and a forward instruction besides.
  std::vector<K> kinds = {K::Forward, K::Backward, K::Backward, K::Comm};
  std::vector<std::vector<double>> steps = {
      {4, 10, 15, 7}, {5, 15, 10, 1}, {6, 10, 10, 2}};
  std::vector<double> t = typicalStepUs(kinds, steps);
  ASSERT_EQ(t.size(), 4u);
  // Backward: the median step's 25 (steps' sums 25, 25, 20), in the
  // medians' proportion (10 : 10).
  EXPECT_DOUBLE_EQ(t[1], 12.5);
  EXPECT_DOUBLE_EQ(t[2], 12.5);
  // Forward: one instruction, its median is the median step's.
  EXPECT_DOUBLE_EQ(t[0], 5);
  // A wait is not compute: its median, unscaled.
  EXPECT_DOUBLE_EQ(t[3], 2);
  // One step slowed throughout (a busy neighbour) moves nothing.
  steps.push_back({50, 100, 100, 50});
  steps.push_back({5, 12, 12, 2});
  t = typicalStepUs(kinds, steps);
  EXPECT_DOUBLE_EQ(t[1] + t[2], 25);
  EXPECT_DOUBLE_EQ(t[0], 5);
}

TEST(Replan, LineSaysWhyTheGroupsWereKept) {
  // The emulated cluster's third round: the strategy's plan under the
  // measured compute rate was predicted slower than the groups in place.
  ReplanEvent ev;
  ev.step = 5;
  ev.oldGroups = ev.newGroups = 39;
  ev.notFasterGroups = 3;
  ev.notFasterUs = 2259431;
  ev.oldPredictedUs = ev.newPredictedUs = 2254947;
  ev.comm = oasr::schedule::CommModel::alphaBeta(2.98e-4, 4.35e-8);
  ev.jobs = 156;
  ev.sizes = 39;
  ev.computeRateMeasured = true;
  ev.computeRate = 0.67;
  ev.aloneStep = 5;
  ev.planUs = 1590;
  std::string line = formatReplan(ev, {2250000.0});
  EXPECT_NE(line.find("replan after step 5: kept 39 group(s) (the "
                      "strategy's 3 group(s): 2259.431 ms, not faster), "
                      "predicted 2254.947 ms per step"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("; compute beside an allreduce at 0.67 of its speed in "
                      "step 5, whose allreduces waited for the end of "
                      "backward); planning 1.59 ms + switch 0.00 ms = 0.07% "
                      "of a step"),
            std::string::npos)
      << line;
}

TEST(RunRestarts, DropOptionTakesEverySpelling) {
  std::vector<std::string> args = {"m.mlir",  "--np",    "2",     "-np=3",
                                   "--npx=1", "--steps", "8",     "-np",
                                   "4",       "--",      "--np=5"};
  dropOption(args, "np");
  EXPECT_EQ(args, (std::vector<std::string>{"m.mlir", "--npx=1", "--steps", "8",
                                            "--", "--np=5"}));
  args = {"--quiet", "m.mlir", "-quiet"};
  dropOption(args, "quiet", /*takesValue=*/false);
  EXPECT_EQ(args, std::vector<std::string>{"m.mlir"});
}

TEST(RunRestarts, ARestartResumesWithoutTheInjectedFailure) {
  std::vector<std::string> args = {
      "m.mlir",           "--steps=8",    "--checkpoint=c",
      "--fail-at-step=5", "--fail-rank",  "1",
      "--fail-signal=9",  "--resume=old", "--progress-file=x"};
  // The first attempt runs as given (its failure injected), and reports.
  EXPECT_EQ(attemptArguments(args, 0, "", "p0"),
            (std::vector<std::string>{"m.mlir", "--steps=8", "--checkpoint=c",
                                      "--fail-at-step=5", "--fail-rank", "1",
                                      "--fail-signal=9", "--resume=old",
                                      "--progress-file=p0"}));
  // A restart resumes from DIR, once.
  EXPECT_EQ(
      attemptArguments(args, 1, "/abs/c", "p1"),
      (std::vector<std::string>{"m.mlir", "--steps=8", "--checkpoint=c",
                                "--resume=/abs/c", "--progress-file=p1"}));
  // No checkpoint yet: it starts again as given (its own --resume).
  EXPECT_EQ(attemptArguments(args, 2, "", "p2"),
            (std::vector<std::string>{"m.mlir", "--steps=8", "--checkpoint=c",
                                      "--resume=old", "--progress-file=p2"}));
  // What follows "--" stays positional.
  EXPECT_EQ(attemptArguments({"--steps=8", "--", "m.mlir"}, 1, "c", "p"),
            (std::vector<std::string>{"--steps=8", "--resume=c",
                                      "--progress-file=p", "--", "m.mlir"}));
}

TEST(RunRestarts, TheCostIsWhenTheNextAttemptReachedTheSameStep) {
  AttemptProgress p = parseProgress("start 0 100.0\nstep 1 101.0\n"
                                    "step 2 102.0\nstep 3 103.0\nstep 4 10");
  ASSERT_TRUE(p.startStep);
  EXPECT_EQ(*p.startStep, 0);
  EXPECT_EQ(p.lastStep(), std::optional<int64_t>(3)); // a cut line is skipped
  EXPECT_EQ(p.reached(2), std::optional<double>(102.0));
  EXPECT_FALSE(p.reached(7));
  EXPECT_FALSE(p.setupError);
  EXPECT_TRUE(parseProgress("setup-error 5.5\n").setupError);

  Attempt failed, next;
  failed.launchedS = 98;
  failed.progress = p;
  failed.endedS = 105; // 2 s after step 3
  failed.exitCode = 137;
  next.launchedS = 105.5;
  next.progress = parseProgress("start 2 108\nstep 3 108.5\nstep 4 109\n");
  next.endedS = 110;
  RestartCost c = restartCost(failed, next);
  EXPECT_EQ(c.reachedStep, std::optional<int64_t>(3));
  EXPECT_EQ(c.fromStep, std::optional<int64_t>(2));
  EXPECT_DOUBLE_EQ(*c.detectionS, 2.0);
  EXPECT_DOUBLE_EQ(*c.restartS, 3.0);
  EXPECT_DOUBLE_EQ(*c.redoneS, 0.5);
  // Step 3 came 5.5 s later than the first time.
  EXPECT_DOUBLE_EQ(*c.lostS(), 5.5);
  EXPECT_EQ(formatRestarts({failed, next}, 2),
            "restarts: 1 of at most 2 (--max-restarts); time lost 5.50 s\n"
            "  restart 1: attempt 1 failed (exit code 137) after step 3; "
            "attempt 2 resumed from the checkpoint of step 2, 1 step redone; "
            "time lost 5.50 s (detection 2.00 s, restart 3.00 s, redone steps "
            "0.50 s)\n");

  // The next attempt never got back to step 3: what was lost is not known.
  next.progress = parseProgress("start 2 108\n");
  c = restartCost(failed, next);
  EXPECT_FALSE(c.redoneS);
  EXPECT_FALSE(c.lostS());
  // A failed attempt that never began training lost all its time.
  failed.progress = AttemptProgress();
  c = restartCost(failed, next);
  EXPECT_FALSE(c.reachedStep);
  EXPECT_DOUBLE_EQ(*c.detectionS, 7.0);
  EXPECT_DOUBLE_EQ(*c.redoneS, 0.0);
  EXPECT_DOUBLE_EQ(*c.lostS(), 10.0);
}

/// A stand-in for `mpirun ... oasr-run`: it writes the progress file it is
/// given; the first attempt (no --resume) completes 3 steps, checkpoints
/// step 2 and fails with 137 (`fail` times in all); a resumed one goes on
/// from the checkpoint to step 4.
std::string fakeJob(const TempDir &tmp, int fail) {
  return tmp.write(
      "job.sh",
      "progress=; resume=\n"
      "for a; do case $a in --progress-file=*) progress=${a#*=};;\n"
      "  --resume=*) resume=${a#*=};; esac; done\n"
      "t() { date +%s.%N; }\n"
      "n=$(cat \"$0.count\" 2>/dev/null || echo 0); echo $((n + 1)) > "
      "\"$0.count\"\n"
      "echo \"$@\" >> \"$0.args\"\n"
      "if [ -z \"$resume\" ]; then echo \"start 0 $(t)\" >> $progress; "
      "else echo \"start 2 $(t)\" >> $progress; fi\n"
      "for s in 1 2 3 4; do [ -n \"$resume\" ] && [ $s -le 2 ] && continue\n"
      "  [ $n -lt " +
          std::to_string(fail) +
          " ] && [ $s = 4 ] && exit 137\n"
          "  echo \"step $s $(t)\" >> $progress\n"
          "  [ $s = 2 ] && mkdir -p \"$CKPT/step-00000002\" && : > "
          "\"$CKPT/step-00000002/manifest.json\"\n"
          "done; exit 0\n");
}

/// A plan that runs fakeJob with `args`, its checkpoints in `ckpt`.
RestartPlan fakePlan(const TempDir &tmp, const std::string &ckpt, int fail,
                     int maxRestarts, std::vector<std::string> args) {
  ::setenv("CKPT", ckpt.c_str(), 1);
  RestartPlan plan;
  plan.command = {"/bin/sh", fakeJob(tmp, fail)};
  plan.args = std::move(args);
  plan.checkpointDir = ckpt;
  plan.maxRestarts = maxRestarts;
  return plan;
}

/// runWithRestarts' exit code and what it printed.
struct Launched {
  int code = 0;
  std::string out, err;
};
Launched launch(const RestartPlan &plan) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  Launched l;
  l.code = runWithRestarts(plan);
  l.out = testing::internal::GetCapturedStdout();
  l.err = testing::internal::GetCapturedStderr();
  return l;
}

TEST(RunRestarts, TheLauncherResumesUntilTheJobSucceeds) {
  TempDir tmp;
  std::string ckpt = tmp.path("ckpt");
  Launched l = launch(fakePlan(
      tmp, ckpt, 1, 2, {"m.mlir", "--fail-at-step=3", "--checkpoint=" + ckpt}));
  EXPECT_EQ(l.code, 0);
  EXPECT_NE(l.err.find("oasr-run: attempt 1 failed (exit code 137) after step "
                       "3; restart 1 of 2: every rank again from the newest "
                       "complete checkpoint in " +
                       ckpt + " (step-00000002)"),
            std::string::npos)
      << l.err;
  EXPECT_EQ(
      l.out.rfind("restarts: 1 of at most 2 (--max-restarts); time lost ", 0),
      0u)
      << l.out;
  EXPECT_NE(l.out.find("  restart 1: attempt 1 failed (exit code 137) after "
                       "step 3; attempt 2 resumed from the checkpoint of step "
                       "2, 1 step redone; time lost "),
            std::string::npos)
      << l.out;
  // The restart resumed without the injected failure; no progress file is
  // left in DIR.
  auto args = llvm::MemoryBuffer::getFile(tmp.path("job.sh.args"));
  ASSERT_TRUE(args);
  EXPECT_NE((*args)->getBuffer().find("\nm.mlir --checkpoint=" + ckpt +
                                      " --resume=" + ckpt +
                                      " --progress-file="),
            llvm::StringRef::npos)
      << (*args)->getBuffer().str();
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(ckpt, ec), end; !ec && it != end;
       it.increment(ec))
    EXPECT_EQ(llvm::sys::path::filename(it->path()), "step-00000002");
}

TEST(RunRestarts, NoRestartLeftEndsWithTheFailure) {
  TempDir tmp;
  RestartPlan plan = fakePlan(tmp, tmp.path("ckpt"), 5, 1, {"m.mlir"});
  Launched l = launch(plan);
  EXPECT_EQ(l.code, 137);
  EXPECT_NE(l.err.find("oasr-run: error: attempt 2 failed (exit code 137) "
                       "after step 3; no restarts left (--max-restarts=1)"),
            std::string::npos)
      << l.err;
  EXPECT_EQ(l.out.rfind("restarts: 1 of at most 1", 0), 0u) << l.out;

  // A set-up error every rank agreed on is not restarted.
  TempDir other;
  plan.command = {"/bin/sh",
                  other.write("setup.sh", "for a; do case $a in "
                                          "--progress-file=*) echo "
                                          "\"setup-error 1.0\" > ${a#*=};; "
                                          "esac; done; exit 1\n")};
  plan.maxRestarts = 3;
  l = launch(plan);
  EXPECT_EQ(l.code, 1);
  EXPECT_NE(l.err.find("oasr-run: attempt 1 failed (exit code 1) before "
                       "training began; not restarting: the ranks agreed on a "
                       "set-up error"),
            std::string::npos)
      << l.err;
  // A command that cannot run is an error, not a failure to restart.
  plan.command = {tmp.path("missing")};
  l = launch(plan);
  EXPECT_EQ(l.code, 1);
  EXPECT_NE(
      l.err.find("oasr-run: error: cannot execute " + tmp.path("missing")),
      std::string::npos)
      << l.err;
}

} // namespace
