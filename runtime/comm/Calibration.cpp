//===- Calibration.cpp - Measuring the communication the planner models ---===//
//
// `oasr-bench comm` (tools/oasr-bench, which parses the options): times the
// runtime's allreduce and its halves through the Communicator and the
// communication thread oasr-run uses, over message sizes in powers of two,
// fits T(M) = alpha + beta * M, measures the overlap rate for each way the
// communication thread can compete for a CPU and records the one that
// keeps more work going, and writes the `oasr-comm-v1` calibration. The
// choice of priority is CommEngine's calibrationCandidates /
// chooseCalibratedPriority, which oasr-run shares.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/Calibration.h"

#include "oasr/Runtime/PowerSGD.h"
#include "oasr/Schedule/Schedule.h"
#include "oasr/Support/JSON.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace oasr::rt {

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Point {
  double bytes, seconds;
};

/// Busy compute for bursts and the overlap load: a scaled add sweeping
/// --working-set-bytes. Returns the blocks of work done until `until`; with
/// `done`, `*atDone` gets the blocks done when it was first seen set (all of
/// them if it never was).
uint64_t computeUntil(uint64_t workingSetBytes, double until,
                      const std::atomic<bool> *done = nullptr,
                      uint64_t *atDone = nullptr) {
  // Per thread, kept across calls: successive bursts sweep the whole
  // working set, as a training step's kernels and updates sweep theirs.
  thread_local std::vector<float> x, y;
  thread_local size_t cursor = 0;
  const size_t n = std::max<size_t>(workingSetBytes / 8, 1 << 14);
  if (x.size() != n) {
    x.assign(n, 1.0f);
    y.assign(n, 0.5f);
    cursor = 0;
  }
  const size_t block = 1 << 14;
  uint64_t blocks = 0;
  bool seen = false;
  while (now() < until) {
    size_t end = std::min(cursor + block, n);
    for (size_t i = cursor; i < end; ++i)
      y[i] = y[i] * 0.999f + x[i];
    cursor = end == n ? 0 : end;
    ++blocks;
    if (done && !seen && done->load(std::memory_order_relaxed)) {
      seen = true;
      *atDone = blocks;
    }
  }
  if (done && !seen)
    *atDone = blocks;
  volatile float sink = y[blocks % n];
  (void)sink;
  return blocks;
}

/// Runs `threads` compute threads (the caller is one) until `until`;
/// returns the passes done, and with `done` the passes done by the time each
/// thread saw it set in `*atDone`.
uint64_t computeOnThreads(const CalibrationOptions &opts, double until,
                          const std::atomic<bool> *done = nullptr,
                          uint64_t *atDone = nullptr) {
  const unsigned threads = opts.computeThreads;
  const uint64_t workingSetBytes = opts.workingSetBytes;
  std::vector<uint64_t> per(threads, 0), perAtDone(threads, 0);
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back([&, t] {
      per[t] = computeUntil(workingSetBytes, until, done, &perAtDone[t]);
    });
  per[0] = computeUntil(workingSetBytes, until, done, &perAtDone[0]);
  for (std::thread &th : pool)
    th.join();
  uint64_t passes = 0;
  for (unsigned t = 0; t < threads; ++t) {
    passes += per[t];
    if (atDone)
      *atDone += perAtDone[t];
  }
  return passes;
}

const char *priorityName(CommEngine::Priority p) {
  return p == CommEngine::Priority::Idle       ? "idle"
         : p == CommEngine::Priority::Sleep    ? "sleep"
         : p == CommEngine::Priority::Realtime ? "realtime"
                                               : "normal";
}

/// Times allreduces as oasr-run issues them: on a communication thread, and
/// (with --burst-us) each one right after the compute threads ran, timed from
/// the end of the burst.
class AllreduceTimer {
public:
  AllreduceTimer(Communicator &comm, std::vector<float> &buf,
                 CommEngine::Priority priority, const CalibrationOptions &opts)
      : engine(comm, priority), priority(priority), opts(opts), buf(buf) {
    if (opts.commCpu)
      pinError = engine.pinToCpu(*opts.commCpu);
  }

  /// Seconds per allreduce of `count` floats over `iters` calls: back to
  /// back the mean; after bursts the median, since a burst ends at slightly
  /// different times on different ranks and an allreduce waits for the last.
  double timed(size_t count, int iters) {
    const double burst = opts.burstUs * 1e-6;
    std::vector<double> times;
    double begin = now();
    for (int i = 0; i < iters; ++i) {
      if (burst > 0)
        computeOnThreads(opts, now() + burst);
      double s = now();
      engine.run([&](Communicator &c) { allreduce(c, count); });
      times.push_back(now() - s);
    }
    if (burst <= 0)
      return (now() - begin) / iters;
    std::nth_element(times.begin(), times.begin() + times.size() / 2,
                     times.end());
    return times[times.size() / 2];
  }
  /// Which collective `allreduce` issues; `count` floats is the whole
  /// buffer in each (rounded down to a multiple of the ranks for the
  /// halves), so the three compare at equal sizes.
  enum class Collective { AllReduce, ReduceScatter, AllGather, TwoLevel };
  Collective collective = Collective::AllReduce;
  /// The two-level allreduce's seconds in each tier, summed over the calls
  /// since the last reset.
  Communicator::TierSeconds tierSum;
  void allreduce(Communicator &c, size_t count) {
    const size_t block = count / size_t(c.size());
    switch (collective) {
    case Collective::AllReduce:
      c.allreduceAverage(buf.data(), count, DType::F32);
      return;
    case Collective::TwoLevel: {
      c.allreduceAverageTwoLevel(buf.data(), count);
      Communicator::TierSeconds t = c.lastTwoLevelSeconds();
      tierSum.intra += t.intra;
      tierSum.inter += t.inter;
      return;
    }
    case Collective::ReduceScatter:
      if (out.size() < block)
        out.resize(block);
      c.reduceScatterAverage(buf.data(), out.data(), block);
      return;
    case Collective::AllGather:
      if (out.size() < block * size_t(c.size()))
        out.resize(block * size_t(c.size()));
      c.allGather(buf.data(), out.data(), block);
      return;
    }
  }
  CommEngine engine;
  CommEngine::Priority priority;
  const CalibrationOptions &opts;
  std::string pinError; ///< why --comm-cpu failed, empty if it did not

private:
  std::vector<float> &buf;
  std::vector<float> out; ///< the halves' other buffer
};

struct Overlap {
  double rate = 1, aloneS = 0, loadedS = 0, loadS = 0;
  double computeRate = 1; ///< compute speed while the allreduce runs
  /// The sleeping wait's longest sleep (CommEngine::pollCapUs, from the
  /// allreduce's time alone).
  int pollCapUs = Communicator::kSleepingWaitUs;
  /// Calls the size of a plan's groups beside the same load: their time
  /// alone over their time beside compute, the rate at which a call
  /// progresses there (1 when it is not measured). Two sizes: a small one
  /// (--latency-bytes, a call's start-up) and kMidCallBytes (a few of a
  /// transport's fragments, a transformer's group). The lower rate counts.
  /// A sleeping thread at normal priority waits for the compute thread's
  /// time slice at each step of a call: on the emulated cluster at 1 Gbit/s
  /// a 4 KiB allreduce took 0.31 ms alone and 6.4 ms beside compute (0.05),
  /// at realtime priority 0.11 and 0.17 ms (0.65), where the large
  /// allreduce's overlap rates tied (0.96 and 0.98). A spinning thread at
  /// normal priority finished a 4 KiB call inside the slice its wake-up
  /// preempted (0.05 ms beside, 0.13 alone: rate 1) in one calibration and
  /// not in the next (0.07); its 256 KiB call took 2.6 ms beside compute
  /// against 0.4 alone (0.15), realtime's 0.64 against 0.49 (0.76), and a
  /// transformer's 13-group plan trained 42.6 ms a step at normal, 35.4 at
  /// realtime.
  struct Call {
    uint64_t bytes = 0;
    double aloneS = 0, besideS = 0;
    /// The queueing thread's time in the enqueue that woke the idle
    /// communication thread (schedule::CommModel::callComputeUs): a thread
    /// that shares its core posts the call first.
    double startS = 0;
    double rate() const {
      return besideS > 0 ? std::clamp(aloneS / besideS, 0.0, 1.0) : 1.0;
    }
  };
  std::vector<Call> calls;
  double callRate() const {
    double r = 1;
    for (const Call &c : calls)
      r = std::min(r, c.rate());
    return r;
  }
  /// A call's start on compute: the mean over the sizes timed (0 if none).
  double callComputeUs() const {
    double sum = 0;
    for (const Call &c : calls)
      sum += c.startS;
    return calls.empty() ? 0 : 1e6 * sum / double(calls.size());
  }
  /// Work kept going beside an allreduce, in [0, 2]: 2 when both run at
  /// full speed, 1 when they take turns. The communication side is the
  /// mean of the bytes' overlap rate and the calls' rate: a plan's groups
  /// pay both.
  double score() const { return 0.5 * (rate + callRate()) + computeRate; }
};

/// The middle size Overlap::calls times: two of Open MPI's 128 KiB TCP
/// fragments, a call that needs its thread more than once.
constexpr uint64_t kMidCallBytes = 256 << 10;

/// One of Overlap::calls: seven allreduces of `bytes`, each queued as every
/// rank starts its compute threads for 20 ms, against the same alone; the
/// medians, agreed as the slowest rank's, and the enqueue's time (the
/// ranks' mean of their medians).
Overlap::Call measureCall(Communicator &comm, AllreduceTimer &timer,
                          uint64_t bytes) {
  const size_t count = std::max<size_t>(1, bytes / 4);
  CommEngine &engine = timer.engine;
  Overlap::Call call;
  call.bytes = bytes;
  timer.timed(count, 3);
  comm.barrier();
  call.aloneS = timer.timed(count, 9);
  std::vector<double> beside, starts;
  for (int rep = 0; rep < 7; ++rep) {
    comm.barrier();
    const double s = now();
    double end = 0;
    std::atomic<bool> finished{false};
    CommEngine::JobId id = engine.enqueue([&](Communicator &c) {
      timer.allreduce(c, count);
      end = now();
      finished.store(true, std::memory_order_relaxed);
    });
    starts.push_back(now() - s);
    computeOnThreads(timer.opts, s + 0.02, &finished);
    engine.wait(id);
    beside.push_back(end - s);
  }
  std::sort(beside.begin(), beside.end());
  std::sort(starts.begin(), starts.end());
  call.besideS = beside[beside.size() / 2];
  double both[2] = {call.aloneS, call.besideS};
  comm.allreduceMax(both, 2);
  call.aloneS = both[0], call.besideS = both[1];
  call.startS = starts[starts.size() / 2];
  comm.allreduceSum(&call.startS, 1);
  call.startS /= comm.size();
  return call;
}

/// The overlap rate of an allreduce of `bytes` (see the file comment). Each
/// repetition: every rank starts its compute threads for `load` seconds and
/// at the same time queues the allreduce on a CommEngine; the allreduce ends
/// at `t`. Work done during the load is rate * min(t, load); the rest ran at
/// full speed after it, so rate = (alone - max(0, t - load)) / min(t, load).
/// The compute rate while the allreduce ran: the load's passes until it
/// ended (or until the load ended), against a load alone over that time.
/// Three more repetitions measure it with the odd ranks queueing their
/// allreduce half its time late, as ranks of a training run reach a group
/// at different moments: the even ranks' thread then waits for them inside
/// the call, and a thread that waits by polling takes compute's CPU (at
/// normal priority on the emulated cluster this made runs 20-75 % slower
/// than a simultaneous start predicted). The compute rate is the mean of
/// both kinds; the overlap rate comes from the simultaneous ones.
Overlap measureOverlap(Communicator &comm, AllreduceTimer &timer,
                       uint64_t bytes) {
  size_t count = std::max<size_t>(1, bytes / 4);
  CommEngine &engine = timer.engine;
  auto allreduce = [&](Communicator &c) { timer.allreduce(c, count); };
  Overlap o;
  timer.timed(count, 1); // page faults, connections
  comm.barrier();
  o.aloneS = timer.timed(count, 5);
  comm.allreduceMax(&o.aloneS, 1);
  // A realtime thread tests as rarely as this link allows (every rank
  // computes the same cap from the agreed time).
  o.pollCapUs =
      CommEngine::pollCapUs(timer.priority, o.aloneS / double(count * 4));
  engine.setPollCapUs(o.pollCapUs);
  o.loadS = std::max(2.0 * o.aloneS, 0.02);

  // Compute speed alone, for the compute rate.
  comm.barrier();
  const uint64_t basePasses = computeOnThreads(timer.opts, now() + o.loadS);

  std::vector<double> rates, loaded;
  double computeRate = 0;
  const bool late = comm.rank() % 2 == 1;
  for (int rep = 0; rep < 6; ++rep) {
    const bool staggered = rep >= 3;
    comm.barrier();
    double s = now(), end = 0;
    std::atomic<bool> finished{false};
    // Staggered: the odd ranks compute alone for half the allreduce's time
    // first (a pass of the load: passes are counted from the start).
    double queued = s;
    if (staggered && late) {
      computeOnThreads(timer.opts, s + 0.5 * o.aloneS);
      queued = now();
    }
    CommEngine::JobId id = engine.enqueue([&](Communicator &c) {
      allreduce(c);
      end = now();
      finished.store(true, std::memory_order_relaxed);
    });
    uint64_t passesDuring = 0;
    computeOnThreads(timer.opts, s + o.loadS, &finished, &passesDuring);
    engine.wait(id);
    double t = end - s;
    double during = std::min(t, o.loadS) - (queued - s);
    if (!staggered) {
      double rate = (o.aloneS - std::max(0.0, t - o.loadS)) / during;
      rates.push_back(std::clamp(rate, 0.0, 1.0));
      loaded.push_back(t);
    }
    double c =
        basePasses && during > 0
            ? double(passesDuring) / (double(basePasses) * during / o.loadS)
            : 0;
    computeRate += std::clamp(c, 0.0, 1.0) / 6;
  }
  std::sort(rates.begin(), rates.end());
  std::sort(loaded.begin(), loaded.end());
  o.rate = rates[1];
  o.loadedS = loaded[1];
  o.computeRate = computeRate;
  // One value for every rank: the mean.
  double sums[3] = {o.rate, o.loadedS, o.computeRate};
  comm.allreduceSum(sums, 3);
  o.rate = sums[0] / comm.size();
  o.loadedS = sums[1] / comm.size();
  o.computeRate = sums[2] / comm.size();
  if (timer.opts.latencyBytes > 0) {
    o.calls.push_back(measureCall(comm, timer, timer.opts.latencyBytes));
    if (kMidCallBytes > timer.opts.latencyBytes && kMidCallBytes < bytes)
      o.calls.push_back(measureCall(comm, timer, kMidCallBytes));
  }
  return o;
}

/// Checks one call of `collective` against the values every rank can
/// compute: rank r's element i is r + i / 8 (exact in f32). Returns the
/// first wrong element, or an empty string; every rank gets the verdict.
std::string verifyCollective(Communicator &comm,
                             AllreduceTimer::Collective collective) {
  using Collective = AllreduceTimer::Collective;
  const size_t p = size_t(comm.size()), block = 64, n = block * p;
  const double r = comm.rank();
  std::vector<float> in(n), out(n, -1.0f);
  for (size_t i = 0; i < n; ++i)
    in[i] = float(r + double(i) / 8);
  // The average over ranks of q + i / 8 is (p - 1) / 2 + i / 8.
  auto average = [&](size_t i) { return float((p - 1) / 2.0 + double(i) / 8); };
  std::string wrong;
  auto expect = [&](const char *what, size_t i, float got, float want) {
    if (wrong.empty() && got != want)
      wrong = llvm::formatv("rank {0}: {1} gave {2} at element {3}, expected "
                            "{4}",
                            comm.rank(), what, got, i, want)
                  .str();
  };
  switch (collective) {
  case Collective::AllReduce:
    comm.allreduceAverage(in.data(), n, DType::F32);
    for (size_t i = 0; i < n; ++i)
      expect("allreduce", i, in[i], average(i));
    break;
  case Collective::ReduceScatter:
    comm.reduceScatterAverage(in.data(), out.data(), block);
    for (size_t i = 0; i < block; ++i)
      expect("reduce-scatter", i, out[i], average(size_t(r) * block + i));
    break;
  case Collective::TwoLevel:
    comm.allreduceAverageTwoLevel(in.data(), n);
    for (size_t i = 0; i < n; ++i)
      expect("two-level allreduce", i, in[i], average(i));
    break;
  case Collective::AllGather:
    comm.allGather(in.data(), out.data(), block);
    for (size_t q = 0; q < p; ++q)
      for (size_t i = 0; i < block; ++i)
        expect("all-gather", q * block + i, out[q * block + i],
               float(double(q) + double(i) / 8));
    break;
  }
  double failed = wrong.empty() ? 0 : 1;
  comm.allreduceMax(&failed, 1);
  if (failed && wrong.empty())
    wrong = "another rank's result was wrong";
  return wrong;
}

/// `oasr-bench comm` in phases: the communication thread's priority, the
/// sweeps of sizes (allreduce and its halves), the fits, the calibration
/// file and its report.
class CommBench {
public:
  CommBench(Communicator &comm, const CalibrationOptions &opts)
      : comm(comm), opts(opts), rank(comm.rank()), size(comm.size()),
        buf(std::max<uint64_t>(opts.maxBytes, 4) / 4 + 1, 1.0f),
        ovBytes(std::min<uint64_t>(opts.overlapBytes, opts.maxBytes)) {}

  int run() {
    if (rank == 0 && !opts.quiet)
      std::printf("oasr-bench comm: %d rank(s) [%s], allreduce average of "
                  "f32 in place\n%12s %8s %14s %14s\n",
                  size, comm.name(), "bytes", "iters", "seconds", "GB/s(bus)");
    if (!choosePriority() || !measure())
      return 1;
    if (rank != 0)
      return 0;
    return writeCalibration();
  }

private:
  using Priority = CommEngine::Priority;
  using Collective = AllreduceTimer::Collective;
  /// A half of an allreduce, measured at the same sizes and priority.
  struct Half {
    const char *name, *key;
    Collective collective;
    std::vector<Point> pts, latency;
  };

  /// --comm-cpu failures, agreed on by all ranks.
  bool pinFailed(const AllreduceTimer &t) {
    double failed = t.pinError.empty() ? 0 : 1;
    comm.allreduceMax(&failed, 1);
    if (failed && !t.pinError.empty())
      std::fprintf(stderr, "oasr-bench: error: --comm-cpu=%d: %s\n",
                   opts.commCpu ? *opts.commCpu : -1, t.pinError.c_str());
    return failed != 0;
  }

  /// The communication thread's priority: the one given, or the one of the
  /// candidates that keeps more work going (chooseCalibratedPriority).
  bool choosePriority() {
    std::optional<Priority> given = opts.priority;
    const bool realtimePermitted = CommEngine::realtimeIsPermitted();
    if (given == Priority::Realtime && !realtimePermitted) {
      if (comm.rank() == 0)
        std::fprintf(stderr,
                     "oasr-bench: error: --comm-priority=realtime: this "
                     "process may not run a thread at SCHED_FIFO (needs "
                     "CAP_SYS_NICE or `ulimit -r 1`)\n");
      return false;
    }
    candidates = calibrationCandidates(given, CommEngine::idleIsRaisable(),
                                       realtimePermitted);
    std::vector<double> scores, alones;
    if (opts.overlapBytes > 0)
      for (Priority p : candidates) {
        AllreduceTimer t(comm, buf, p, opts);
        if (pinFailed(t))
          return false;
        overlaps.push_back({p, measureOverlap(comm, t, ovBytes)});
        scores.push_back(overlaps.back().second.score());
        alones.push_back(overlaps.back().second.aloneS);
      }
    comparable = calibrationComparable(alones);
    best = chooseCalibratedPriority(candidates, scores, alones);
    chosen = candidates[best];
    return true;
  }

  /// The sweeps: the allreduce's sizes and its small message, then each
  /// half asked for, checked against known values first.
  bool measure() {
    timer.emplace(comm, buf, chosen, opts);
    if (pinFailed(*timer))
      return false;
    if (!overlaps.empty())
      timer->engine.setPollCapUs(overlaps[best].second.pollCapUs);
    sweep(pts, opts.minBytes, opts.maxBytes);
    // The start-up measured on one small message (--latency-bytes).
    if (opts.latencyBytes > 0)
      sweep(latency, opts.latencyBytes, opts.latencyBytes);
    for (const std::string &c : opts.collectives)
      if (c == "reduce-scatter" || c == "all-gather")
        halves.push_back(
            Half{c == "reduce-scatter" ? "reduce-scatter" : "all-gather",
                 c == "reduce-scatter" ? "reduce_scatter" : "all_gather",
                 c == "reduce-scatter" ? Collective::ReduceScatter
                                       : Collective::AllGather,
                 {},
                 {}});
    if (!measureTiers())
      return false;
    for (Half &h : halves) {
      std::string wrong = verifyCollective(comm, h.collective);
      if (!wrong.empty()) {
        std::fprintf(stderr, "oasr-bench: error: %s\n", wrong.c_str());
        return false;
      }
      if (rank == 0 && !opts.quiet)
        std::printf("%s of f32 (bytes: the whole buffer; checked against "
                    "known values first)\n",
                    h.name);
      timer->collective = h.collective;
      sweep(h.pts, opts.minBytes, opts.maxBytes);
      // Its own start-up, as the allreduce's: a fit from large sizes alone
      // extrapolates alpha to about 0, which lets a plan cut reduce-scatter
      // groups into dozens that each pay the real per-call time.
      if (opts.latencyBytes > 0)
        sweep(h.latency, opts.latencyBytes, opts.latencyBytes);
    }
    return true;
  }

  /// The two-level allreduce's tiers where ranks share nodes (or
  /// --ranks-per-node makes nodes): each tier's seconds per call, swept
  /// at the allreduce's sizes. The inter-node points are at the share's
  /// bytes, 1/L of the buffer.
  bool measureTiers() {
    if (opts.ranksPerNode < 0 || size < 2)
      return true;
    std::string why = comm.setUpTiers(opts.ranksPerNode);
    if (!why.empty()) {
      if (opts.ranksPerNode > 0) {
        if (rank == 0)
          std::fprintf(stderr, "oasr-bench: error: %s\n", why.c_str());
        return false;
      }
      if (rank == 0 && !opts.quiet)
        std::printf("two-level allreduce: not measured (%s)\n", why.c_str());
      return true;
    }
    tierRanks = comm.ranksPerNode();
    if (std::string wrong = verifyCollective(comm, Collective::TwoLevel);
        !wrong.empty()) {
      std::fprintf(stderr, "oasr-bench: error: %s\n", wrong.c_str());
      return false;
    }
    if (rank == 0 && !opts.quiet)
      std::printf("two-level allreduce of f32 in %d nodes of %d ranks "
                  "(seconds: the whole call; its tiers are fitted apart; "
                  "checked against known values first)\n",
                  size / tierRanks, tierRanks);
    timer->collective = Collective::TwoLevel;
    sweep(tierPts, opts.minBytes, opts.maxBytes);
    timer->collective = Collective::AllReduce;
    return true;
  }

  /// One sweep of sizes for the timer's collective, into `out`.
  void sweep(std::vector<Point> &out, uint64_t lo, uint64_t hi) {
    const double burst = opts.burstUs * 1e-6;
    const bool half = timer->collective != Collective::AllReduce;
    for (uint64_t bytes = std::max<uint64_t>(lo, 4); bytes <= hi; bytes *= 2) {
      size_t count = size_t(bytes / 4);
      if (half && count < size_t(size))
        continue; // less than one element per rank
      // Warm up and estimate the per-call time; every rank uses rank 0's
      // iteration count so the opts.collectives match.
      timer->timed(count, 1); // page faults
      comm.barrier();
      double est = timer->timed(count, 3) + burst;
      comm.allreduceMax(&est, 1);
      double iters = std::clamp(
          std::floor(opts.secondsPerSize / std::max(est, 1e-7)), 2.0, 2000.0);
      comm.broadcast(&iters, sizeof iters, 0);
      double fastest = 1e30;
      double tiers[2] = {0, 0};
      for (int rep = 0; rep < 3; ++rep) {
        comm.barrier();
        timer->tierSum = {};
        double t = timer->timed(count, int(iters));
        comm.allreduceMax(&t, 1);
        // Each tier's mean per call on the slowest rank.
        double rt[2] = {timer->tierSum.intra / iters,
                        timer->tierSum.inter / iters};
        comm.allreduceMax(rt, 2);
        if (t < fastest)
          tiers[0] = rt[0], tiers[1] = rt[1];
        fastest = std::min(fastest, t);
      }
      out.push_back(Point{double(bytes), fastest});
      if (timer->collective == Collective::TwoLevel) {
        tierIntra.push_back(Point{double(bytes), tiers[0]});
        tierInter.push_back(Point{double(bytes) / tierRanks, tiers[1]});
      }
      if (rank == 0 && !opts.quiet) {
        // Bus bandwidth: each rank sends 2(P-1)/P of the buffer in an
        // allreduce, (P-1)/P in either half.
        double busBw = size > 1 ? (half ? 1.0 : 2.0) * (size - 1) / size *
                                      bytes / fastest * 1e-9
                                : bytes / fastest * 1e-9;
        std::printf("%12llu %8d %14.9f %14.3f\n", (unsigned long long)bytes,
                    int(iters), fastest, busBw);
        std::fflush(stdout);
      }
    }
  }

  /// alpha and beta of a sweep: the least-squares fit, or with a latency
  /// point, alpha is the small message's time and beta the relative-error
  /// slope of what the sweep's times leave above it (never negative).
  std::optional<std::pair<double, double>>
  fit(const std::vector<Point> &sizes, const std::vector<Point> &small) const {
    std::vector<std::pair<double, double>> xy;
    for (const Point &p : sizes)
      xy.push_back({p.bytes, p.seconds});
    llvm::Expected<oasr::schedule::CommModel> fitted =
        oasr::schedule::fitAlphaBeta(xy, size);
    if (!fitted) {
      llvm::consumeError(fitted.takeError());
      return std::nullopt;
    }
    double a = fitted->alphaS, b = fitted->betaSPerByte;
    if (!small.empty()) {
      a = small.front().seconds;
      double num = 0, den = 0;
      for (const Point &p : sizes) {
        double w = 1.0 / (p.seconds * p.seconds);
        num += w * p.bytes * (p.seconds - a);
        den += w * p.bytes * p.bytes;
      }
      b = den > 0 ? std::max(0.0, num / den) : 0.0;
    }
    return std::pair{a, b};
  }

  static llvm::json::Array pointsJSON(const std::vector<Point> &pts) {
    llvm::json::Array points;
    for (const Point &p : pts)
      points.push_back(llvm::json::Object{{"bytes", int64_t(p.bytes)},
                                          {"seconds", p.seconds}});
    return points;
  }
  static llvm::json::Object overlapJSON(const Overlap &o) {
    llvm::json::Array calls;
    for (const Overlap::Call &c : o.calls)
      calls.push_back(llvm::json::Object{{"bytes", int64_t(c.bytes)},
                                         {"alone_s", c.aloneS},
                                         {"beside_s", c.besideS},
                                         {"rate", c.rate()},
                                         {"start_s", c.startS}});
    return llvm::json::Object{{"overlap_rate", o.rate},
                              {"compute_rate", o.computeRate},
                              {"alone_s", o.aloneS},
                              {"under_load_s", o.loadedS},
                              {"load_s", o.loadS},
                              {"poll_cap_us", o.pollCapUs},
                              {"call_rate", o.callRate()},
                              {"calls", std::move(calls)},
                              {"call_compute_us", o.callComputeUs()},
                              {"score", o.score()}};
  }

  /// The two tiers' points and fits into `doc` ('two_level', which plans
  /// read: Schedule.h's TwoLevelTier); a line for the report.
  std::vector<std::string> tiersInto(llvm::json::Object &doc) const {
    if (!tierRanks)
      return {};
    std::optional<std::pair<double, double>> intra = fit(tierIntra, {}),
                                             inter = fit(tierInter, {}),
                                             whole = fit(tierPts, {});
    if (!intra || !inter || !whole)
      return {};
    // A fitted negative start-up is noise around zero.
    auto line = [](std::pair<double, double> f, const std::vector<Point> &p) {
      return llvm::json::Object{{"alpha_s", std::max(0.0, f.first)},
                                {"beta_s_per_byte", f.second},
                                {"points", pointsJSON(p)}};
    };
    doc["two_level"] =
        llvm::json::Object{{"ranks_per_node", int64_t(tierRanks)},
                           {"intra", line(*intra, tierIntra)},
                           {"inter", line(*inter, tierInter)},
                           {"points", pointsJSON(tierPts)}};
    return {llvm::formatv("two-level fit ({0} ranks a node): inside the "
                          "node alpha = {1:e3} s, beta = {2:e3} s/B; between "
                          "the nodes alpha = {3:e3} s, beta = {4:e3} s/B per "
                          "share byte; the whole call alpha = {5:e3} s, beta "
                          "= {6:e3} s/B",
                          tierRanks, intra->first, intra->second, inter->first,
                          inter->second, whole->first, whole->second)
                .str()};
  }

  /// The halves' points and fits into `doc`; a line each for the report.
  std::vector<std::string> halvesInto(llvm::json::Object &doc) const {
    std::vector<std::string> halfFits;
    for (const Half &h : halves) {
      llvm::json::Object o{{"points", pointsJSON(h.pts)}};
      if (!h.latency.empty())
        o["alpha_from"] =
            llvm::json::Object{{"bytes", int64_t(h.latency.front().bytes)},
                               {"seconds", h.latency.front().seconds}};
      if (std::optional<std::pair<double, double>> f = fit(h.pts, h.latency)) {
        o["alpha_s"] = f->first;
        o["beta_s_per_byte"] = f->second;
        halfFits.push_back(llvm::formatv("{0} fit: alpha = {1:e3} s{2}, beta = "
                                         "{3:e3} s/B",
                                         h.name, f->first,
                                         h.latency.empty()
                                             ? ""
                                             : " (its small message's time)",
                                         f->second)
                               .str());
      } else {
        halfFits.push_back(std::string(h.name) +
                           ": too few sizes to fit (points recorded)");
      }
      doc[h.key] = std::move(o);
    }
    return halfFits;
  }

  /// The measured overlap of the chosen priority (and every candidate's)
  /// into `doc`.
  void overlapInto(llvm::json::Object &doc) const {
    if (overlaps.empty())
      return;
    const Overlap &o = overlaps[best].second;
    doc["overlap_rate"] = o.rate;
    doc["compute_rate"] = std::clamp(o.computeRate, 0.01, 1.0);
    if (!o.calls.empty())
      doc["call_compute_us"] = o.callComputeUs();
    llvm::json::Object byPriority;
    for (auto &[p, m] : overlaps)
      byPriority[priorityName(p)] = overlapJSON(m);
    llvm::json::Object ov = overlapJSON(o);
    ov.erase("overlap_rate");
    ov.erase("call_compute_us");
    ov["bytes"] = int64_t(ovBytes);
    ov["threads_per_rank"] = int64_t(opts.computeThreads);
    ov["comm_priority"] = priorityName(chosen);
    ov["by_priority"] = std::move(byPriority);
    doc["overlap"] = std::move(ov);
  }

  /// Rank 0: the fits, the oasr-comm-v1 file and the report.
  int writeCalibration() {
    std::optional<std::pair<double, double>> fitted = fit(pts, latency);
    if (!fitted) {
      llvm::errs() << "oasr-bench: error: --min-bytes=" << opts.minBytes
                   << " --max-bytes=" << opts.maxBytes
                   << " measure one message size (sizes double from the "
                      "smallest); alpha and beta need two\n";
      return 1;
    }
    auto [a, b] = *fitted;
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    llvm::json::Object doc{
        {"format", "oasr-comm-v1"},
        {"alpha_s", a},
        {"beta_s_per_byte", b},
        {"ranks", int64_t(size)},
        {"burst_us", double(opts.burstUs)},
        {"comm_priority", priorityName(chosen)},
        {"source",
         llvm::formatv("oasr-bench comm {0}, {1} rank(s) [{2}] on {3}",
                       opts.version, size, comm.name(), host)
             .str()},
        {"points", pointsJSON(pts)}};
    std::optional<CompressionRate> compression;
    if (opts.compressRate) {
      compression = measureCompressionRate();
      doc["compress_us_per_mac"] = compression->usPerMac;
      doc["compress_us_per_element"] = compression->usPerElement;
    }
    if (!latency.empty())
      doc["alpha_from"] =
          llvm::json::Object{{"bytes", int64_t(latency.front().bytes)},
                             {"seconds", latency.front().seconds}};
    std::vector<std::string> halfFits = halvesInto(doc);
    for (std::string &line : tiersInto(doc))
      halfFits.push_back(std::move(line));
    overlapInto(doc);
    std::error_code ec;
    llvm::raw_fd_ostream os(opts.outPath, ec, llvm::sys::fs::OF_Text);
    if (ec) {
      llvm::errs() << "oasr-bench: error: cannot write " << opts.outPath << ": "
                   << ec.message() << "\n";
      return 1;
    }
    os << formatJSON(std::move(doc), 2) << "\n";
    report(a, b, halfFits, compression);
    return 0;
  }

  /// What was measured, chosen and written.
  void report(double a, double b, const std::vector<std::string> &halfFits,
              const std::optional<CompressionRate> &compression) const {
    double worst = 0;
    const Point *worstAt = nullptr;
    for (const Point &p : pts) {
      double e = std::fabs(a + b * p.bytes - p.seconds) / p.seconds;
      if (e > worst)
        worst = e, worstAt = &p;
    }
    std::printf("fit: alpha = %.4g s%s, beta = %.4g s/B (%.2f GB/s), worst "
                "relative error %.0f%%\n",
                a,
                latency.empty()
                    ? ""
                    : llvm::formatv(" (the {0}-byte allreduce's time)",
                                    uint64_t(latency.front().bytes))
                          .str()
                          .c_str(),
                b, b > 0 ? 1e-9 / b : 0.0, 100 * worst);
    for (const std::string &line : halfFits)
      std::printf("%s\n", line.c_str());
    if (compression)
      std::printf(
          "compression: %.3g us per multiply-add (%.2f GMAC/s), %.3g us "
          "per element (PowerSGD on a 1024x1024 matrix at ranks 1 and "
          "8, one thread)\n",
          compression->usPerMac,
          compression->usPerMac > 0 ? 1e-3 / compression->usPerMac : 0.0,
          compression->usPerElement);
    // A line through a bursty or token-bucket link's small and large sizes
    // fits neither; say so, and what to do.
    if (worst > 0.5 && worstAt)
      std::fprintf(stderr,
                   "oasr-bench: note: the line alpha + beta * bytes misses the "
                   "measured times by up to %.0f%% (%llu B: %.4g s measured, "
                   "%.4g s on the line); where the link serves small messages "
                   "faster than its rate, calibrate from the sizes your groups "
                   "have (--min-bytes), or let oasr-run re-plan from the run's "
                   "own allreduces (--replan)\n",
                   100 * worst, (unsigned long long)worstAt->bytes,
                   worstAt->seconds, a + b * worstAt->bytes);
    for (auto &[p, o] : overlaps) {
      std::string tested, call;
      if (p == Priority::Realtime)
        tested = llvm::formatv(", tested at least every {0} us", o.pollCapUs);
      for (const Overlap::Call &c : o.calls)
        call += llvm::formatv("; a {0}-byte allreduce {1:f3} ms alone, {2:f3} "
                              "ms beside compute (call rate {3:f2}), its start "
                              "{4:f0} us on the compute thread",
                              c.bytes, c.aloneS * 1e3, c.besideS * 1e3,
                              c.rate(), c.startS * 1e6);
      std::printf(
          "overlap rate %.2f: a %llu-byte allreduce took %.3f ms alone, "
          "%.3f ms beside %u busy compute thread(s) per rank for "
          "%.3f ms (%s priority%s); compute ran at %.0f%% meanwhile%s\n",
          o.rate, (unsigned long long)ovBytes, o.aloneS * 1e3, o.loadedS * 1e3,
          unsigned(opts.computeThreads), o.loadS * 1e3, priorityName(p),
          tested.c_str(), 100 * o.computeRate, call.c_str());
    }
    const bool idleMeasured = candidates.front() == Priority::Idle;
    const char *why = opts.priority      ? "--comm-priority"
                      : overlaps.empty() ? "the default; no overlap measured"
                      : !comparable  ? "the default; the allreduce is under "
                                       "1 ms alone, too short to compare"
                      : idleMeasured ? "the best overlap"
                                     : "the best overlap; this process may "
                                       "not raise an idle thread";
    std::printf("communication thread: %s priority (%s)\n",
                priorityName(chosen), why);
    std::printf("wrote %s\n", opts.outPath.c_str());
  }

  Communicator &comm;
  const CalibrationOptions &opts;
  const int rank, size;
  std::vector<float> buf;
  const uint64_t ovBytes;
  std::vector<Priority> candidates;
  std::vector<std::pair<Priority, Overlap>> overlaps;
  bool comparable = false;
  size_t best = 0;
  Priority chosen = Priority::Normal;
  std::optional<AllreduceTimer> timer;
  std::vector<Point> pts, latency;
  std::vector<Half> halves;
  /// The two-level allreduce's calls, and each tier's part of them; the
  /// node's ranks (0: not measured).
  std::vector<Point> tierPts, tierIntra, tierInter;
  int tierRanks = 0;
};

} // namespace

int calibrateCommunication(Communicator &comm, const CalibrationOptions &opts) {
  return CommBench(comm, opts).run();
}

} // namespace oasr::rt
