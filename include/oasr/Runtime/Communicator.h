//===- Communicator.h - Communicators and the comm engine -------*- C++ -*-===//
//
// A Communicator moves bytes between the data-parallel ranks (MPI between
// processes, the trivial one-process communicator, NCCL later). The
// CommEngine owns the one communication thread: every collective of a run is
// issued on it, in the order it was enqueued, so collectives progress while
// the compute thread keeps running backward (Open MPI has no asynchronous
// progress of its own) and every rank issues them in the same order.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_COMMUNICATOR_H
#define OASR_RUNTIME_COMMUNICATOR_H

#include "oasr/Runtime/GradWire.h"
#include "oasr/Runtime/Kernel.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace oasr::rt {

/// Bytes between data-parallel ranks. Collectives are called from one thread
/// at a time (the CommEngine's thread while training runs); `send` and
/// `receive` may also be called from the parameter-server threads at the
/// same time (see `pointToPointUnavailable`). `abort` may be called from any
/// thread.
class Communicator {
public:
  virtual ~Communicator();
  /// "mpi", "self", "nccl".
  virtual const char *name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Host name of this rank (for error messages).
  virtual std::string host() const;

  /// Replaces `count` elements at `data` by their sum over all ranks divided
  /// by size(), in place. The same elements reduced in any grouping give the
  /// same sums as long as the library's reduction order per element is the
  /// same (see docs/runtime.md).
  virtual void allreduceAverage(void *data, size_t count, DType dtype) = 0;
  /// allreduceAverage of `count` f32 elements sent as `wire` (BF16 or F16,
  /// GradWire.h): `data` is rounded into `scratch` (`count` 16-bit elements
  /// in the same memory as `data`, which the executor provides), summed over
  /// the ranks in that type (each partial sum in f32, rounded back), and the
  /// sum times 1/size() written back to `data` in f32. The default refuses
  /// (aborts naming the communicator).
  virtual void allreduceAverageWire(float *data, size_t count, GradWire wire,
                                    void *scratch);
  /// The gradient allreduce of a fused group: (`twoLevel` and tiers set
  /// up) allreduceAverageTwoLevel, else allreduceAverageWire when `wire` is
  /// narrower than f32, else allreduceAverage.
  void allreduceGradients(void *data, size_t count, DType dtype, GradWire wire,
                          void *scratch, bool twoLevel = false) {
    if (dtype != DType::F32)
      allreduceAverage(data, count, dtype);
    else if (twoLevel && ranksPerNode())
      allreduceAverageTwoLevel(static_cast<float *>(data), count, wire,
                               scratch);
    else if (wire != GradWire::F32)
      allreduceAverageWire(static_cast<float *>(data), count, wire, scratch);
    else
      allreduceAverage(data, count, dtype);
  }
  /// Sets up the two tiers of the two-level allreduce (a collective call):
  /// nodes of `ranksPerNode` consecutive ranks, or with 0 the nodes the
  /// library reports (MPI: ranks that share memory). Returns "" when the
  /// job has two tiers, equal nodes of two or more ranks and two or more
  /// nodes, else why not; groups planned two-level are then sent as one
  /// collective. An impossible `ranksPerNode` (not dividing the ranks) is
  /// reported the same way; the caller refuses it. The default has one
  /// tier.
  virtual std::string setUpTiers(int ranksPerNode);
  /// The ranks of each node once setUpTiers succeeded, else 0.
  virtual int ranksPerNode() const { return 0; }
  /// allreduceAverage of `count` f32 elements in two tiers: a reduce-scatter
  /// inside the node, an allreduce of each share between the nodes (one
  /// per local rank, at once), and an all-gather inside the node. The sums
  /// are in another order than allreduceAverage's, the same on every rank.
  /// With a 16-bit `wire` only the share between the nodes travels so
  /// (ZeRO++'s form): it is rounded into `scratch` and summed as
  /// allreduceAverageWire sums; the node's sums stay f32. The default is
  /// allreduceAverageWire.
  virtual void allreduceAverageTwoLevel(float *data, size_t count,
                                        GradWire wire = GradWire::F32,
                                        void *scratch = nullptr) {
    allreduceAverageWire(data, count, wire, scratch);
  }
  /// Seconds the last allreduceAverageTwoLevel spent inside the node (its
  /// reduce-scatter and all-gather) and between the nodes (the share's
  /// allreduce), for `oasr-bench comm`'s two tiers. Zeros by default.
  struct TierSeconds {
    double intra = 0, inter = 0;
  };
  virtual TierSeconds lastTwoLevelSeconds() const { return {}; }
  /// The two halves of an allreduce (DeAR, docs/planner.md "The
  /// steady-state step"): rank r receives in `recv` block r of the average
  /// over ranks of `send` (`countPerRank * size()` f32 elements, blocks in
  /// rank order); and every rank receives in `recv` the concatenation of
  /// every rank's `send` block of `countPerRank` elements. Device memory on
  /// a device communicator. The defaults refuse (abort naming the
  /// communicator).
  virtual void reduceScatterAverage(const float *send, float *recv,
                                    size_t countPerRank);
  virtual void allGather(const float *send, float *recv, size_t countPerRank);
  /// In-place elementwise sum / max over ranks of doubles (metrics, flags).
  virtual void allreduceSum(double *data, size_t count) = 0;
  virtual void allreduceMax(double *data, size_t count) = 0;
  /// Copies `bytes` at `data` from `root` to every rank.
  virtual void broadcast(void *data, size_t bytes, int root) = 0;
  /// For a fused group in device memory that a job reduces on the host
  /// (PowerSGD): whether this communicator copies it there and back.
  virtual bool copiesDeviceGradients() const { return false; }
  /// Copies `bytes` of a group's device memory at `device` into `host` once
  /// the compute work marked for the group is done (consuming its
  /// markComputeReady, as the group's collective would), and back. The
  /// calls return when the copy is done. The default aborts naming the
  /// communicator (it has no device memory).
  virtual void copyGradientsToHost(void *host, const void *device,
                                   size_t bytes);
  virtual void copyGradientsToDevice(void *device, const void *host,
                                     size_t bytes);
  virtual void barrier() = 0;
  /// Gathers a variable number of bytes from every rank to `root`, which
  /// receives them concatenated in rank order in `out` (with `counts[r]`
  /// bytes from rank r). Other ranks leave `out` untouched.
  virtual void gatherBytes(const void *data, size_t bytes, int root,
                           std::vector<char> &out,
                           std::vector<size_t> &counts) = 0;
  /// Point-to-point messages, for the parameter-server algorithms (async and
  /// Hogwild SGD/EASGD), whose server threads on rank 0 call them
  /// concurrently with the CommEngine's thread. Empty when they are
  /// available, else why not.
  virtual std::string pointToPointUnavailable() const {
    return std::string("the ") + name() +
           " communicator has no point-to-point messages";
  }
  /// Sends `bytes` at `data` to rank `dest` with `tag` (blocking).
  virtual void send(const void *data, size_t bytes, int dest, int tag);
  /// Receives at most `bytes` from rank `source` with `tag` (blocking).
  /// Returns the bytes received.
  virtual size_t receive(void *data, size_t bytes, int source, int tag);
  /// Ends every rank of the job with a non-zero status after printing
  /// `message` (which should name this rank). Does not return.
  [[noreturn]] virtual void abort(const std::string &message, int code) = 0;
  /// Shuts the communicator down at the end of a run (MPI_Finalize).
  virtual void finalize() {}

  /// True when allreduceAverage orders itself after the device work issued
  /// before the matching markComputeReady (NCCL: an event on the compute
  /// stream), so the caller need not wait for the device first. Host-memory
  /// communicators read the buffer when called, and answer false.
  virtual bool ordersAfterCompute() const { return false; }
  /// Called on the compute thread when the gradients of the next
  /// allreduceAverage still to be issued are enqueued on the device; calls
  /// pair with allreduceAverage calls in order.
  virtual void markComputeReady() {}
  /// Blocking gradient allreduces wait by sleeping between tests of a
  /// non-blocking call instead of inside the library, which spins
  /// (CommEngine::Priority::Sleep), backing off from 1 us (firstSleepFor)
  /// to `maxSleepUs` between tests. Communicators that do not spin ignore it.
  /// Called on the communication thread's owner before the calls it affects are
  /// queued, or from the communication thread itself.
  virtual void setSleepingWait(bool, int maxSleepUs = kSleepingWaitUs) {
    (void)maxSleepUs;
  }
  /// The sleeping wait's default longest sleep between tests.
  static constexpr int kSleepingWaitUs = 50;
  /// The longest sleep while waiting on a call of `bytes` under the wait's
  /// cap `capUs`: a cap above 50 us (a realtime thread's, the time the link
  /// moves 128 KiB) shrinks in proportion below 1 MiB, down to 50 us. A
  /// call of a few milliseconds then waits at most about an eighth of its
  /// time for the test that sees a ring step done, and a long call wakes no
  /// more often (ResNet-50's 107-group plan at 1 Gbit/s: 1465/1463 ms a
  /// step against 1509/1505 with the whole cap).
  static int callSleepCapUs(int capUs, double bytes);
  /// The first sleep after a call is posted, under the wait's cap `capUs`:
  /// 1 us, except under a realtime thread's cap (above 50 us: compute runs
  /// on the core the thread shares), where it is
  /// kFirstSleepBesideComputeUs. A realtime thread preempts compute at each
  /// wake-up, and backing off from 1 us it woke 6-7 times in a call's first
  /// 100 us: the compute thread's start of a group that found the thread
  /// idle took a median 150-180 us (transformer, 2 nodes at 1 Gbit/s, 24
  /// groups), 45-55 us from 32 us, and the step ran 2-3 ms (4 %) faster;
  /// its small calls took 2-7 % longer.
  static int firstSleepFor(int capUs);
  static constexpr int kFirstSleepBesideComputeUs = 32;
};

/// The one-process communicator: averaging is the identity.
std::unique_ptr<Communicator> createSelfCommunicator();

/// For a job whose ranks are on several hosts (Open MPI's launcher says so
/// before MPI_Init), sets Open MPI's allreduce choices that suit a network
/// link (runtime/comm/OpenMpiTuning.cpp) unless the launch set them; the
/// rules file it writes is `rulesPath`. Returns the line to print, or ""
/// on one host. Called by createMpiCommunicator before MPI_Init.
std::string tuneOpenMpiAcrossHosts(std::string &rulesPath);
/// What tuneOpenMpiAcrossHosts said for this process ("" when nothing).
const std::string &collectiveTuningNote();

/// Initialises MPI (MPI_THREAD_MULTIPLE requested; at least
/// MPI_THREAD_SERIALIZED required, calls are serialized by the CommEngine) and
/// returns the MPI_COMM_WORLD communicator. On failure returns null and sets
/// `error`.
std::unique_ptr<Communicator> createMpiCommunicator(int *argc, char ***argv,
                                                    std::string &error);

/// True when this process was started by mpirun (Open MPI, MPICH, Slurm PMI).
bool launchedByMpi();

/// A timed job on the communication lane (traces, the summary, re-planning).
/// Times are microseconds from CommEngine's epoch, taken on the
/// communication thread around the job's function (the MPI or NCCL call).
struct CommEvent {
  uint32_t job = 0;      ///< the job's tag (fused group id or user tag)
  double startUs = 0;    ///< the call began
  double endUs = 0;      ///< the call returned
  double enqueuedUs = 0; ///< the compute thread queued the job
  /// Time the communication thread spent inside the call runnable but
  /// waiting for a CPU (the kernel's run-queue delay of the thread,
  /// /proc/thread-self/schedstat): `endUs - startUs - cpuWaitUs` is the time
  /// it ran, i.e. communicated. 0 where the kernel does not report it.
  double cpuWaitUs = 0;
  /// Of the time between enqueue and start, the part the thread was not
  /// busy with an earlier job: waking up and waiting for a CPU.
  double dispatchUs = 0;
  /// The thread had nothing queued or running when the job was queued (the
  /// previous job had ended): its wake-up then takes the queueing thread's
  /// core at once (schedule::CommModel::callComputeUs).
  bool queuedIdle = false;
};

/// The communication thread and its FIFO of jobs. `enqueue` returns at once;
/// jobs run one at a time in enqueue order; `wait` blocks until that job ran.
class CommEngine {
public:
  using JobId = uint64_t;

  /// How the communication thread competes with compute for a CPU.
  enum class Priority {
    /// An ordinary thread: woken by a group's start, it preempts the compute
    /// thread when they share a core.
    Normal,
    /// SCHED_IDLE: it runs on any CPU compute leaves free (an idle core, or
    /// the compute thread's own core while that thread waits), never in its
    /// place. With the CPU backend, where collectives are CPU work, this
    /// keeps a rank whose threads share a core from time-slicing every
    /// allreduce into backward. While a thread waits on a job (compute has
    /// nothing left to do) the thread runs at normal priority, where the
    /// process may raise it (see `raisesWhileWaited`).
    Idle,
    /// An ordinary thread that sleeps while an allreduce waits on the
    /// network (tests of a non-blocking call, backing off to 50 us) instead
    /// of spinning in the MPI library: between tests it is not runnable, so
    /// it takes no CPU from compute, and the scheduler runs it promptly when
    /// it wakes. For links slower than the CPU; `oasr-bench comm` measures
    /// it against the others.
    Sleep,
    /// Sleep's waiting, at SCHED_FIFO's lowest real-time priority: between
    /// tests it leaves the CPU as Sleep does, and when a test is due or a
    /// group starts it takes the core at once instead of queueing behind the
    /// compute thread's time slice. On a shaped link beside compute that
    /// queueing is paid at every step of every call (the thread waited for
    /// the core 2.9 of its 4.1 busy seconds in a 86-group ResNet-50 plan at
    /// 1 Gbit/s). Needs CAP_SYS_NICE or RLIMIT_RTPRIO >= 1
    /// (`realtimeIsPermitted`); the kernel's real-time throttling (95 % of
    /// each second by default) bounds what it can take.
    Realtime,
  };

  explicit CommEngine(Communicator &comm, Priority priority = Priority::Normal);
  ~CommEngine();
  CommEngine(const CommEngine &) = delete;
  CommEngine &operator=(const CommEngine &) = delete;

  Communicator &communicator() { return comm; }

  /// Whether an Idle engine can raise its thread to normal priority while a
  /// thread waits on it (CAP_SYS_NICE or RLIMIT_NICE 20 are needed to leave
  /// SCHED_IDLE). Without it, other processes' load starves communication.
  bool raisesWhileWaited() const { return raisable; }
  /// Whether this process may move a thread out of SCHED_IDLE (probed on a
  /// short-lived thread): what `raisesWhileWaited` would say for an Idle
  /// engine, known before choosing the priority.
  static bool idleIsRaisable();
  /// Whether this process may run a thread at SCHED_FIFO (probed on a
  /// short-lived thread): a Realtime engine needs it.
  static bool realtimeIsPermitted();

  /// The longest sleep between tests of the sleeping wait for `priority`
  /// on a link of `betaSPerByte` (0: unknown). Sleep: 50 us -- its wake-ups
  /// wait for the compute thread's time slice anyway. Realtime: each wake-up
  /// preempts compute (at 50 us the compute thread kept 67 % of the core on
  /// the emulated cluster at 1 Gbit/s), so it sleeps up to the time the
  /// link takes to move 128 KiB (Open MPI's TCP fragment) -- tests any
  /// rarer let the socket run dry (at 1 Gbit/s: 1 ms trained ResNet-50's
  /// 86-group plan at 1400 ms a step, 2 ms at 1690 ms) -- clamped to
  /// [50 us, 5 ms]; 1 ms where the link is unknown.
  static int pollCapUs(Priority priority, double betaSPerByte);
  /// Sets the sleeping wait's longest sleep (Sleep and Realtime engines);
  /// call before queueing the jobs it should affect. While a thread waits on
  /// a Realtime engine (compute has left the CPU) the thread tests every
  /// 50 us at most, as Sleep does.
  void setPollCapUs(int us);

  /// Pins the communication thread to CPU `cpu` (a core left free for it,
  /// e.g. `taskset -c 0 oasr-run --comm-cpu=1`). Returns an empty string on
  /// success, else why it failed.
  std::string pinToCpu(int cpu);

  /// Queues `fn` (which may call the communicator). `tag` names the job in
  /// the event log when `record` is set.
  JobId enqueue(std::function<void(Communicator &)> fn, uint32_t tag = 0,
                bool record = false);
  /// Blocks until job `id` has finished.
  void wait(JobId id);
  /// Runs `fn` on the communication thread and waits for it.
  void run(std::function<void(Communicator &)> fn) {
    wait(enqueue(std::move(fn)));
  }
  /// Blocks until every queued job has finished.
  void drain();

  /// Time origin of event timestamps (steady clock, microseconds); set by
  /// `resetEpoch`, normally right after a barrier so ranks roughly agree.
  /// Returns it (steady clock nanoseconds), for timings of the compute
  /// thread on the same clock.
  int64_t resetEpoch();
  double nowUs() const;
  /// Recorded jobs so far (only read after `drain`).
  const std::vector<CommEvent> &events() const { return recorded; }
  void clearEvents() { recorded.clear(); }
  /// The recorded jobs from index `from` on, copied under the engine's lock
  /// (safe while the thread runs other jobs).
  std::vector<CommEvent> eventsSince(size_t from);
  /// Whether the kernel reports the thread's run-queue delay, so that
  /// `CommEvent::cpuWaitUs` is measured (known once the thread started).
  bool measuresCpuWait() const { return cpuWaitMeasured; }

  /// What the watchdog found: the tag of the job the communication thread
  /// is in (or the next queued one), whether it is running, and how long
  /// nothing has finished while a thread waited.
  struct Stall {
    uint32_t tag = 0;
    bool running = false;
    double seconds = 0;
  };
  /// Stall watchdog (oasr-run --timeout): when a thread has waited in
  /// `wait` and no job has finished for `seconds`, `onStall` runs once, on
  /// the watchdog's own thread; it reports and ends the process (MPI_Abort:
  /// a collective stuck on a cut link or a stopped peer never returns by
  /// itself). Slowness is not a stall: the clock runs only while a thread
  /// waits, and every finished job restarts it. Call before training;
  /// seconds <= 0 leaves it off.
  void setWatchdog(double seconds, std::function<void(const Stall &)> onStall);

private:
  void watch();
  struct Job {
    JobId id;
    std::function<void(Communicator &)> fn;
    uint32_t tag;
    bool record;
    int64_t enqueuedNs;
  };
  void loop();
  /// Moves the thread to SCHED_IDLE or back to SCHED_OTHER; false if refused.
  bool setIdle(bool idle);

  Communicator &comm;
  Priority priority;
  std::mutex mu;
  std::condition_variable queued, finished;
  std::deque<Job> queue;
  JobId nextId = 1;
  JobId doneUpTo = 0; ///< jobs run in order, so one counter suffices
  bool stopping = false;
  bool raisable = false; ///< Idle and allowed to leave SCHED_IDLE
  int waiters = 0;       ///< threads in `wait`, guarded by `mu`
  int pollCap = Communicator::kSleepingWaitUs; ///< setPollCapUs', by `mu`
  std::vector<CommEvent> recorded;
  int64_t epochNs = 0;
  double lastEndUs = 0; ///< end of the previous job (communication thread)
  std::atomic<bool> cpuWaitMeasured{false};
  // The watchdog's view, guarded by `mu`.
  int64_t waitSinceNs = 0; ///< when `waiters` last became non-zero
  int64_t lastDoneNs = 0;  ///< when the last job finished
  bool jobRunning = false;
  uint32_t runningTag = 0;
  double stallS = 0;
  std::function<void(const Stall &)> onStall;
  std::condition_variable watchdogWake;
  std::thread thread, watchdog;
};

/// The calibration's choice of the communication thread's priority
/// (`oasr-bench comm`, which records it for oasr-run's --comm=FILE).
/// The candidates it measures, in order: `given` alone when the user named
/// one; else idle (where this process may raise it while waited on), sleep,
/// normal, and realtime last (where it may use SCHED_FIFO).
std::vector<CommEngine::Priority>
calibrationCandidates(std::optional<CommEngine::Priority> given,
                      bool idleRaisable, bool realtimePermitted);
/// Of the candidates, the index of the one that keeps more work going
/// beside an allreduce (`scores[i]`: its overlap score, in [0, 2]); an
/// earlier one stays unless a later one beats it by more than 0.05. Sleep
/// comes before normal: on a shaped link training ran far faster with the
/// sleeping thread where the measurement nearly tied them. With nothing
/// measured, or an allreduce under 1 ms alone (`aloneS`; a few blocks of
/// work beside it, too coarse to compare), oasr-run's default: idle where
/// it is a candidate, else normal, else the first.
/// Whether the candidates' overlap was measured and each allreduce took at
/// least 1 ms alone (`aloneS`), so that their scores can be compared.
bool calibrationComparable(const std::vector<double> &aloneS);
size_t
chooseCalibratedPriority(const std::vector<CommEngine::Priority> &candidates,
                         const std::vector<double> &scores,
                         const std::vector<double> &aloneS);

} // namespace oasr::rt

#endif // OASR_RUNTIME_COMMUNICATOR_H
