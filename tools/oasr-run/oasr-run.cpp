//===- oasr-run.cpp - Runs a compiled training step on MPI ranks ---------===//
//
//   mpirun -np P oasr-run MODEL.(mlir|onnx) [--data=...] [--steps=N] ...
//   oasr-run --np P MODEL ...          (re-launches itself under mpirun)
//
// Every rank parses the module, builds the execution plan, loads the same
// weights, and trains with the planned fused allreduces overlapping
// backward. Rank 0 prints progress and a summary.
//
// This file is the command line: the options, the --threads and
// --list-devices pre-scan, the --np relaunch. The run itself is
// oasr::rt::runTraining (runtime/train/Run.cpp); compiling an .onnx and
// its weights' source come from lib/Compile through RunModelHooks.
//
//===----------------------------------------------------------------------===//

#include "oasr/Compile/SourceModel.h"
#include "oasr/Config.h"
#include "oasr/Driver/Run.h"
#include "oasr/Lower/Lower.h"
#include "oasr/Runtime/Communicator.h"
#include "oasr/Runtime/DeviceSetup.h"
#include "oasr/Runtime/ProgramIO.h"
#include "oasr/Schedule/Schedule.h"
#if OASR_HAVE_PASSES
#include "oasr/Compile/Compile.h"
#include "oasr/Passes/Passes.h"
#else
#include "oasr/Dialect/OASRDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#endif

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <unistd.h>

using namespace oasr::rt;
namespace cl = llvm::cl;

static cl::OptionCategory runCat("oasr-run options");

/// --strategy's help: every strategy the planner accepts (one list,
/// schedule::strategyHelp; kept alive for cl::desc).
static llvm::StringRef strategyDesc() {
  static const std::string desc = "Allreduce plan for an .onnx input (" +
                                  oasr::schedule::strategyHelp() + ")";
  return desc;
}
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx | model.mlir | "
                                               "model.oasrprog>"),
                                      cl::cat(runCat));
static cl::opt<int>
    np("np",
       cl::desc("Re-launch under `mpirun -np N` (under $OASR_MPIRUN instead "
                "when set: a command, words split at spaces, given "
                "`-np N oasr-run ARGS...`)"),
       cl::init(0), cl::cat(runCat));
static cl::opt<std::string> strategy("strategy", cl::desc(strategyDesc()),
                                     cl::init(""), cl::cat(runCat));
static cl::opt<double> alpha("alpha", cl::desc("Start-up latency (s)"),
                             cl::init(-1), cl::cat(runCat));
static cl::opt<double> beta("beta", cl::desc("Per-byte time (s/B)"),
                            cl::init(-1), cl::cat(runCat));
static cl::opt<double> overlapRate(
    "overlap-rate",
    cl::desc("Plan with communication progressing at this rate in [0, 1] "
             "while backward computes (default: the calibration's, else 1)"),
    cl::init(-1), cl::cat(runCat));
static cl::opt<std::string> gradDtype(
    "grad-dtype",
    cl::desc("Element type gradients travel in for an .onnx input: f32 "
             "(default), bf16 or f16 (half the bytes; docs/runtime.md)"),
    cl::init("f32"), cl::cat(runCat));
static cl::opt<std::string> compress(
    "compress",
    cl::desc("What fused groups send, for an .onnx input: off (default), "
             "powersgd:R (every group with a matrix worth compressing as "
             "rank-R PowerSGD factors with error feedback) or auto[:R[-M]] "
             "(the planner chooses per group: plain, or rank R, 8 by "
             "default, raised up to M where the step hides it); the factors "
             "travel in --grad-dtype (f32 or bf16) and on the group's "
             "--two-level route; on --device=cuda through host memory; "
             "docs/compression.md"),
    cl::init("off"), cl::cat(runCat));
static cl::opt<std::string> twoLevel(
    "two-level",
    cl::desc("Allreduce per fused group, for an .onnx input, where the "
             "calibration (--comm) has a second tier: auto (default: the "
             "faster for the group's size), flat (one collective over every "
             "rank) or two-level (reduce-scatter in the node, allreduce "
             "between nodes, all-gather in the node); docs/compression.md"),
    cl::init("auto"), cl::cat(runCat));
static cl::opt<int> ranksPerNode(
    "ranks-per-node",
    cl::desc("Ranks of each node for the two-level allreduce: consecutive "
             "ranks form a node (default 0: the nodes MPI reports, ranks "
             "sharing memory)"),
    cl::init(0), cl::cat(runCat));
static cl::opt<int64_t> compressStart(
    "compress-start",
    cl::desc("Steps sent uncompressed before PowerSGD starts (default 0)"),
    cl::init(0), cl::cat(runCat));
static cl::opt<std::string> precision(
    "precision",
    cl::desc("Precision of the step for an .onnx input: f32 (default), tf32 "
             "(GPU tensor cores), bf16 or f16 (mixed precision with f32 "
             "master weights; docs/precision.md)"),
    cl::init("f32"), cl::cat(runCat));
static cl::opt<double> timeout(
    "timeout",
    cl::desc("Seconds a collective may go without progress before every rank "
             "stops, naming it and the newest checkpoint (default: 10x the "
             "predicted step, at least 60)"),
    cl::init(-1), cl::cat(runCat));
static cl::opt<bool> fuseAttention(
    "fuse-attention",
    cl::desc("For an .onnx input: fold scaled dot-product attention into "
             "FusedAttention, which saves no attention probabilities for "
             "backward (default true; docs/passes.md)"),
    cl::init(true), cl::cat(runCat));
static cl::opt<std::string> trainable(
    "trainable",
    cl::desc("For an .onnx input: train only the parameters whose name "
             "matches this regular expression (searched); the others are "
             "held constant (docs/pytorch.md, \"Parameters and buffers\")"),
    cl::value_desc("regex"), cl::cat(runCat));
static cl::opt<std::string> freeze(
    "freeze",
    cl::desc("For an .onnx input: hold the parameters whose name matches "
             "this regular expression constant (fine-tuning: "
             "--freeze='^features\\.'); they get no gradient and send no "
             "bytes"),
    cl::value_desc("regex"), cl::cat(runCat));
static cl::opt<bool> allowInferenceGraph(
    "allow-inference-graph",
    cl::desc("Train an .onnx model that looks exported for inference "
             "(BatchNormalization folded away by PyTorch's exporter) as it "
             "is, instead of refusing it"),
    cl::init(false), cl::cat(runCat));
static cl::opt<std::string>
    commFile("comm", cl::desc("Calibration JSON from `oasr-bench comm`"),
             cl::init(""), cl::cat(runCat));
static cl::list<std::string>
    dims("dim",
         cl::desc("Symbolic dimension of an .onnx input: name=value "
                  "(repeatable)"),
         cl::cat(runCat));
static cl::opt<std::string>
    planProfile("plan-profile",
                cl::desc("Measured oasr-profile-v1 the .onnx plan uses for "
                         "its costs (e.g. from an earlier --profile)"),
                cl::init(""), cl::cat(runCat));
static cl::opt<std::string> optimizer(
    "optimizer",
    cl::desc("sgd | momentum | adagrad | adam | adamw (decoupled weight "
             "decay, as torch.optim.AdamW), for an .onnx input"),
    cl::init(""), cl::cat(runCat));
static cl::opt<double> momentum("momentum",
                                cl::desc("Momentum, for an .onnx input"),
                                cl::init(-1), cl::cat(runCat));
static cl::opt<std::string>
    dataSpec("data",
             cl::desc("synthetic | tokens:FILE[:u16|:u32] | mnist:DIR | "
                      "cifar10:DIR | imagefolder:DIR"),
             cl::init("synthetic"), cl::cat(runCat));
static cl::opt<std::string>
    augment("augment",
            cl::desc("Training transforms of image data: none, or a comma "
                     "list of resized-crop, crop:PAD and flip (evaluation "
                     "resizes and centre-crops)"),
            cl::init("none"), cl::cat(runCat));
static cl::opt<std::string>
    badSamples("bad-samples",
               cl::desc("An image that cannot be read: error (stop the run) "
                        "or skip (warn and draw the next sample)"),
               cl::init("error"), cl::cat(runCat));
static cl::opt<std::string>
    normalize("normalize",
              cl::desc("Per-channel normalisation of image data: none, "
                       "imagenet, or M1,M2,M3/S1,S2,S3"),
              cl::init("none"), cl::cat(runCat));
static cl::opt<int64_t>
    vocab("vocab",
          cl::desc("Token ids lie in [0, N) (default: the rows of the "
                   "embedding table the input indexes)"),
          cl::init(0), cl::cat(runCat));
static cl::opt<int64_t> ignoreIndex(
    "ignore-index",
    cl::desc("Label value the appended loss ignores (padding; compiling an "
             ".onnx only)"),
    cl::init(-1), cl::cat(runCat));
static cl::opt<double> labelSmoothing(
    "label-smoothing",
    cl::desc("Label smoothing E of the appended cross-entropy, in [0, 1), "
             "as torch.nn.CrossEntropyLoss(label_smoothing=E); compiling "
             "an .onnx only"),
    cl::init(0), cl::cat(runCat));
static cl::opt<int> batch("batch",
                          cl::desc("Per-rank batch (must match the module)"),
                          cl::init(0), cl::cat(runCat));
static cl::opt<int64_t> steps("steps", cl::desc("Training steps"), cl::init(10),
                              cl::cat(runCat));
static cl::opt<double> lr("lr",
                          cl::desc("Learning rate (overrides the "
                                   "module's)"),
                          cl::init(-1), cl::cat(runCat));
// The recipe (docs/runtime.md, "Recipes").
static cl::opt<std::string> lrSchedule(
    "lr-schedule",
    cl::desc("The learning rate of each step, as torch.optim.lr_scheduler: "
             "constant | step:MILESTONES:GAMMA | cosine | linear | poly:P | "
             "onecycle (default constant)"),
    cl::init("constant"), cl::cat(runCat));
static cl::opt<int64_t>
    warmup("warmup", cl::desc("Steps of linear warmup before the schedule"),
           cl::init(0), cl::cat(runCat));
static cl::opt<double> warmupStart(
    "warmup-start",
    cl::desc("The warmup's first rate as a factor of --lr (default 0)"),
    cl::init(0), cl::cat(runCat));
static cl::opt<double>
    minLr("min-lr", cl::desc("The last rate of cosine and linear (default 0)"),
          cl::init(0), cl::cat(runCat));
static cl::opt<double> clipGradNorm(
    "clip-grad-norm",
    cl::desc("Clip the averaged gradients to this global L2 norm before "
             "the update, as torch.nn.utils.clip_grad_norm_ (0: off)"),
    cl::init(0), cl::cat(runCat));
static cl::opt<int64_t> accumulate(
    "accumulate",
    cl::desc("Micro-batches per optimizer step (gradient accumulation; the "
             "gradients are their mean, exchanged once per step)"),
    cl::init(1), cl::cat(runCat));
static cl::opt<std::string> metricsPath(
    "metrics",
    cl::desc("Write one JSON line per logged step (step, loss, lr, gradient "
             "norm, samples/s, step ms, exposed communication) to FILE"),
    cl::value_desc("FILE.jsonl"), cl::cat(runCat));
static cl::opt<double> weightDecay(
    "weight-decay",
    cl::desc("For an .onnx input: weight decay, coupled L2 for sgd, "
             "momentum, adagrad and adam (as torch.optim.SGD), decoupled for "
             "adamw (as torch.optim.AdamW, default 0.01 there)"),
    cl::init(-1), cl::cat(runCat));
static cl::opt<std::string> decayExclude(
    "decay-exclude",
    cl::desc("For an .onnx input: parameters without weight decay: 1d "
             "(default: biases and normalisation weights, every tensor of "
             "rank <= 1), none, or a regular expression on their names"),
    cl::init("1d"), cl::cat(runCat));
static cl::opt<std::string>
    betas("betas",
          cl::desc("For an .onnx input: adam and adamw's B1,B2 (default "
                   "0.9,0.999)"),
          cl::cat(runCat));
static cl::opt<double>
    eps("eps",
        cl::desc("For an .onnx input: adam and adamw's epsilon (default "
                 "1e-8 for adamw)"),
        cl::init(-1), cl::cat(runCat));
static cl::opt<uint64_t> seed("seed", cl::desc("Seed for data and init"),
                              cl::init(1), cl::cat(runCat));
// `--threads=N` is taken out of argv before llvm::cl sees it: libLLVM
// already registers a global option of that name.
static int threads = 0;
static cl::opt<std::string> tracePath("trace",
                                      cl::desc("Write a Chrome trace JSON"),
                                      cl::init(""), cl::cat(runCat));
static cl::opt<std::string>
    profilePath("profile", cl::desc("Write the measured oasr-profile-v1"),
                cl::init(""), cl::cat(runCat));
static cl::opt<std::string> savePath("save",
                                     cl::desc("Write the trained ONNX model"),
                                     cl::init(""), cl::cat(runCat));
static cl::opt<std::string> saveOrtPath(
    "save-ort",
    cl::desc("Write the trained parameters, Adam's moments and step as an "
             "ONNX Runtime checkpoint (an ORT training model's run; ORT's "
             "CheckpointState.load_checkpoint reads it)"),
    cl::value_desc("file"), cl::init(""), cl::cat(runCat));
static cl::opt<std::string>
    dumpGrads("dump-grads",
              cl::desc("Write the loss, parameters and averaged gradients of "
                       "the last step (FILE.npz: NumPy arrays; else JSON)"),
              cl::init(""), cl::cat(runCat));
static cl::opt<int64_t> logEvery("log-every",
                                 cl::desc("Progress line every N steps"),
                                 cl::init(1), cl::cat(runCat));
static cl::opt<int64_t> evalEvery(
    "eval-every",
    cl::desc("Evaluate after every N-th step (rank 0 prints 'eval step "
             "S  time T s  test accuracy A% (ok/n)  loss L': T is the wall "
             "time of training so far, without the evaluations)"),
    cl::init(0), cl::cat(runCat));
static cl::opt<std::string> evalDataSpec(
    "eval-data",
    cl::desc("Evaluate on this data (a --data spec: its held-out split, "
             "else all its samples; default: --data's held-out split), in "
             "eval mode, sharded over the ranks"),
    cl::init(""), cl::cat(runCat));
static cl::opt<std::string>
    commKind("communicator",
             cl::desc("mpi | self (default: mpi under mpirun, else self)"),
             cl::init(""), cl::cat(runCat));
static cl::opt<std::string>
    device("device",
           cl::desc("Kernel backend: cpu (oneDNN) | cuda (cuDNN/cuBLAS, one "
                    "GPU per rank); --list-devices shows what is visible"),
           cl::init("cpu"), cl::cat(runCat));
static cl::opt<bool> cudaGraph(
    "cuda-graph",
    cl::desc("With --device=cuda: from the second step on, replay the "
             "step's runs of kernels as CUDA graphs (one launch each; "
             "allreduces and updates run between them as before)"),
    cl::init(false), cl::cat(runCat));
static cl::opt<std::string>
    commBackend("comm-backend",
                cl::desc("Gradient averaging: mpi | nccl (default: nccl with "
                         "--device=cuda on several ranks, else mpi)"),
                cl::init(""), cl::cat(runCat));
static cl::opt<std::string> commPriority(
    "comm-priority",
    cl::desc("Communication thread against compute for a CPU: idle (runs "
             "only where compute leaves a CPU free; default with --device=cpu, "
             "whose allreduces are CPU work, where the process may raise it "
             "while compute waits) | normal (default with cuda) | sleep (an "
             "ordinary thread that sleeps between MPI tests while an "
             "allreduce waits on the network) | realtime (sleep's waiting at "
             "SCHED_FIFO priority: takes the core at once when a test is due; "
             "needs CAP_SYS_NICE or `ulimit -r 1`); with --comm=FILE on the "
             "CPU, "
             "default: the calibration's measured comm_priority"),
    cl::init(""), cl::cat(runCat));
static cl::opt<int> commCpu(
    "comm-cpu",
    cl::desc("Pin the communication thread to this CPU (a core left free for "
             "it, e.g. `taskset -c 0 oasr-run --comm-cpu=1`)"),
    cl::init(-1), cl::cat(runCat));
static cl::opt<std::string>
    algoName("algo",
             cl::desc("Training algorithm: sync-sgd (planned allreduces) | "
                      "sync-easgd (local steps, elastic averaging) | "
                      "async-easgd, async-measgd, hogwild-easgd (elastic "
                      "exchanges with a center variable on a parameter "
                      "server, see --ps-server) | roundrobin-easgd (SC'17's "
                      "original EASGD: the server takes the ranks in turn) | "
                      "async-sgd, async-msgd, hogwild-sgd (their SGD "
                      "baselines); the m- forms need a momentum optimizer"),
             cl::init("sync-sgd"), cl::cat(runCat));
static cl::opt<std::string> psServer(
    "ps-server",
    cl::desc("Parameter-server algorithms: shared (rank 0 trains and serves "
             "the center variable) | dedicated (the last rank only serves, "
             "the others split the data)"),
    cl::init("shared"), cl::cat(runCat));
static cl::opt<int64_t>
    easgdTau("easgd-tau",
             cl::desc("EASGD: steps between exchanges "
                      "(the SGD forms exchange every step)"),
             cl::init(4), cl::cat(runCat));
static cl::opt<double> easgdAlpha("easgd-alpha",
                                  cl::desc("EASGD: elastic moving rate"),
                                  cl::init(-1), cl::cat(runCat));
static cl::opt<bool> quiet("quiet", cl::desc("No progress lines"),
                           cl::init(false), cl::cat(runCat));
static cl::opt<std::string>
    emitMlir("emit-mlir", cl::desc("Write the compiled module (rank 0)"),
             cl::init(""), cl::cat(runCat));
static cl::opt<std::string> compileOnly(
    "compile-only",
    cl::desc("Compile the model into FILE.oasrprog and exit without "
             "training; `oasr-run FILE.oasrprog` then runs it on every rank "
             "with no compiler"),
    cl::value_desc("FILE"), cl::init(""), cl::cat(runCat));
static cl::opt<std::string> checkpointDir(
    "checkpoint",
    cl::desc("Write checkpoints (parameters, optimizer and BN state, step, "
             "data order, random state) into DIR/step-NNNNNNNN/"),
    cl::value_desc("DIR"), cl::init(""), cl::cat(runCat));
static cl::opt<int64_t>
    checkpointEvery("checkpoint-every",
                    cl::desc("Checkpoint after every N-th step (with "
                             "--checkpoint; default: only after the last)"),
                    cl::init(0), cl::cat(runCat));
static cl::opt<int64_t>
    keepCheckpoints("keep-checkpoints",
                    cl::desc("Keep the newest K checkpoints (0: all)"),
                    cl::init(2), cl::cat(runCat));
static cl::opt<std::string> resumeDir(
    "resume",
    cl::desc("Continue from the newest complete checkpoint in DIR (or the "
             "step directory DIR); --steps stays the total"),
    cl::value_desc("DIR"), cl::init(""), cl::cat(runCat));
static cl::opt<bool> allowResize(
    "allow-resize",
    cl::desc("With --resume: continue a checkpoint written by another number "
             "of ranks (sync-sgd, sync-easgd). The data shards are recut "
             "after the samples every old rank had read, the plan is made "
             "for this run's ranks, new ranks start from rank 0's weights "
             "(sync-easgd: from the center variable), and each rank's own "
             "state (PowerSGD's error feedback) restarts at zero. The per-rank "
             "batch stays, so the global batch changes, and the run says so"),
    cl::init(false), cl::cat(runCat));
static cl::opt<bool> keepGlobalBatch(
    "keep-global-batch",
    cl::desc("With --allow-resize: set the per-rank batch to the checkpoint's "
             "global batch over this run's ranks (it must divide)"),
    cl::init(false), cl::cat(runCat));
static cl::opt<int> maxRestarts(
    "max-restarts",
    cl::desc("When the job fails (a rank dies, the watchdog stops it, any "
             "non-zero exit), run every rank again from the newest complete "
             "checkpoint in --checkpoint=DIR, up to N times (needs "
             "--checkpoint; --steps stays the total; the launcher of --np "
             "restarts, and says at the end where and what each restart "
             "cost); a set-up error is not restarted"),
    cl::value_desc("N"), cl::init(0), cl::cat(runCat));
static cl::opt<bool> allowNonFinite(
    "allow-nonfinite",
    cl::desc("Keep training when the loss becomes NaN or Inf (default: stop, "
             "naming the step and the first non-finite tensor)"),
    cl::init(false), cl::cat(runCat));
static cl::opt<std::string> replan(
    "replan",
    cl::desc("Re-plan the fused allreduces from this run's measurements: "
             "off | once (after 1 + 3 steps; the default for sync-sgd on "
             "several CPU ranks with a strategy that plans with a model: "
             "mgwfbp, optimal, oasr) | every:N (every N steps)"),
    cl::init(""), cl::cat(runCat));
static cl::opt<std::string> replanProfile(
    "replan-profile",
    cl::desc("Write the last re-plan's agreed profile and fitted allreduce "
             "model (oasr-profile-v1 with `comm`; as --plan-profile it plans "
             "the same groups from the start)"),
    cl::init(""), cl::cat(runCat));
static cl::opt<bool> debugMemory("debug-memory", cl::Hidden, cl::init(false),
                                 cl::desc("Print RSS at each setup phase"));
// Testing only.
static cl::opt<int64_t> failAtStep("fail-at-step", cl::Hidden, cl::init(-1));
static cl::opt<int> failRank("fail-rank", cl::Hidden, cl::init(-1));
static cl::opt<int> failSignal("fail-signal", cl::Hidden, cl::init(0));
// The --max-restarts launcher's, for rank 0's progress.
static cl::opt<std::string> progressFile("progress-file", cl::Hidden,
                                         cl::init(""));

namespace {
/// What runs the ranks: `mpirun -np P --oversubscribe --bind-to none
/// <self>` for --np (or `$OASR_MPIRUN -np P <self>`: scripts/cluster.sh
/// run), `<self>` alone without it; none (after an error) when mpirun is
/// not on PATH.
std::optional<std::vector<std::string>> launchCommand(const char *argv0) {
  std::string self = llvm::sys::fs::getMainExecutable(argv0, (void *)&np);
  std::vector<std::string> command;
  if (np > 0) {
    const char *custom = std::getenv("OASR_MPIRUN");
    llvm::SmallVector<llvm::StringRef> words;
    llvm::StringRef(custom ? custom : "").split(words, ' ', -1, false);
    if (!words.empty()) {
      auto program = llvm::sys::findProgramByName(words[0]);
      if (!program) {
        llvm::errs() << "oasr-run: error: OASR_MPIRUN=" << custom
                     << ": cannot find " << words[0] << "\n";
        return std::nullopt;
      }
      command.push_back(*program);
      for (llvm::StringRef w : llvm::ArrayRef(words).drop_front())
        command.push_back(w.str());
      command.insert(command.end(), {"-np", std::to_string(np)});
    } else {
      auto mpirun = llvm::sys::findProgramByName("mpirun");
      if (!mpirun) {
        llvm::errs() << "oasr-run: error: --np needs `mpirun` on PATH\n";
        return std::nullopt;
      }
      // Unbound ranks: mpirun's default (--bind-to core for up to 2 ranks)
      // would put each rank's compute threads and communication thread on
      // one core.
      command = {
          *mpirun, "-np", std::to_string(np), "--oversubscribe", "--bind-to",
          "none",  "-x",  kReportFileVariable};
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  command.push_back(self);
  return command;
}

/// This process' arguments for the ranks: without --np and --max-restarts,
/// which are the launcher's.
std::vector<std::string> rankArguments(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  dropOption(args, "np");
  dropOption(args, "max-restarts");
  return args;
}

/// Runs the job under mpirun (launchCommand) once.
int relaunch(int argc, char **argv) {
  std::optional<std::vector<std::string>> command = launchCommand(argv[0]);
  if (!command)
    return 1;
  std::vector<std::string> args = *command;
  for (std::string &a : rankArguments(argc, argv))
    args.push_back(std::move(a));
  return runLaunched(args);
}

/// --max-restarts: runs the job (launchCommand) until it succeeds or the
/// restarts are spent (runWithRestarts).
int restartLoop(int argc, char **argv) {
  std::optional<std::vector<std::string>> command = launchCommand(argv[0]);
  if (!command)
    return 1;
  RestartPlan plan;
  plan.command = std::move(*command);
  plan.args = rankArguments(argc, argv);
  plan.maxRestarts = maxRestarts;
  plan.checkpointDir = checkpointDir;
  return runWithRestarts(plan);
}

/// Scans argv before llvm::cl: --list-devices prints and ends the run, and
/// --threads=N is taken out (libLLVM registers an option of that name).
/// Returns the exit code when the process should end now.
std::optional<int> preScan(int argc, char **argv, std::vector<char *> &args) {
  for (int i = 0; i < argc; ++i) {
    llvm::StringRef a(argv[i]);
    if (i > 0 && (a == "--list-devices" || a == "-list-devices")) {
      printDevices(stdout);
      return 0;
    }
    if (i > 0 && (a.starts_with("--threads=") || a.starts_with("-threads="))) {
      if (a.split('=').second.getAsInteger(10, threads) || threads < 1) {
        llvm::errs() << "oasr-run: error: " << a
                     << ": expected a positive number of threads\n";
        return 1;
      }
      continue;
    }
    if (i > 0 && (a == "--threads" || a == "-threads") && i + 1 < argc) {
      if (llvm::StringRef(argv[i + 1]).getAsInteger(10, threads) ||
          threads < 1) {
        llvm::errs() << "oasr-run: error: --threads " << argv[i + 1]
                     << ": expected a positive number of threads\n";
        return 1;
      }
      ++i;
      continue;
    }
    args.push_back(argv[i]);
  }
  return std::nullopt;
}

/// The value of an option the user gave, else none.
template <typename T> std::optional<T> given(const cl::opt<T> &o) {
  if (!o.getNumOccurrences())
    return std::nullopt;
  return o.getValue();
}

RunOptions runOptions() {
  RunOptions o;
  o.modelPath = modelPath;
  o.strategy = strategy;
  o.alpha = given(alpha);
  o.beta = given(beta);
  o.overlapRate = given(overlapRate);
  o.commFile = commFile;
  o.dims.assign(dims.begin(), dims.end());
  o.planProfile = planProfile;
  o.gradDtype = given(gradDtype).value_or("");
  o.compress = given(compress).value_or("");
  o.compressStart = compressStart;
  o.twoLevel = given(twoLevel).value_or("");
  o.ranksPerNode = ranksPerNode;
  o.precision = given(precision).value_or("");
  o.allowInferenceGraph = allowInferenceGraph;
  o.fuseAttention = fuseAttention;
  o.timeoutS = given(timeout);
  o.optimizer = optimizer;
  o.momentum = given(momentum);
  o.ignoreIndex = ignoreIndex;
  o.labelSmoothing = labelSmoothing;
  o.batch = given(batch);
  o.dataSpec = dataSpec;
  o.images.augment = augment;
  o.images.normalize = normalize;
  o.images.badSamples = badSamples;
  o.vocab = given(vocab);
  o.steps = steps;
  o.lr = given(lr);
  o.recipe.lrSchedule = lrSchedule;
  o.recipe.warmup = warmup;
  o.recipe.warmupStart = warmupStart;
  o.recipe.minLr = minLr;
  o.recipe.clipGradNorm = clipGradNorm;
  o.recipe.accumulate = accumulate;
  o.recipe.metricsPath = metricsPath;
  o.seed = seed;
  o.threads = threads;
  o.logEvery = logEvery;
  o.evalEvery = given(evalEvery);
  o.evalDataSpec = evalDataSpec;
  o.quiet = quiet;
  o.allowNonFinite = allowNonFinite;
  o.tracePath = tracePath;
  o.profilePath = profilePath;
  o.savePath = savePath;
  o.saveOrtPath = saveOrtPath;
  o.dumpGrads = dumpGrads;
  o.emitMlir = emitMlir;
  o.communicator = commKind;
  o.device = device;
  o.cudaGraph = cudaGraph;
  o.commBackend = commBackend;
  o.commPriority = commPriority;
  o.commCpu = given(commCpu);
  o.algorithm = algoName;
  o.psServer = psServer;
  o.easgdTau = easgdTau;
  o.easgdAlpha = given(easgdAlpha);
  o.checkpointDir = checkpointDir;
  o.checkpointEvery = given(checkpointEvery);
  o.keepCheckpoints = given(keepCheckpoints);
  o.resumeDir = resumeDir;
  o.maxRestarts = given(maxRestarts);
  o.allowResize = allowResize;
  o.keepGlobalBatch = keepGlobalBatch;
  o.progressFile = progressFile;
  if (const char *report = std::getenv(kReportFileVariable))
    o.reportFile = report;
  o.replan = replan;
  o.replanProfile = replanProfile;
  o.debugMemory = debugMemory;
  o.failAtStep = failAtStep;
  o.failRank = failRank;
  o.failSignal = failSignal;
  return o;
}

/// Parses or compiles the model into a training module
/// (mlir::oasr::compileForTraining).
llvm::Expected<RunModule> loadModule(mlir::MLIRContext &ctx,
                                     const RunOptions &ro) {
  RunModule m;
  if (oasr::rt::isProgramFile(ro.modelPath)) {
    // A compiled program carries its plan, precision and optimizer.
    const cl::Option *compileOptions[] = {
        &strategy,      &alpha,
        &beta,          &commFile,
        &overlapRate,   &planProfile,
        &gradDtype,     &compress,
        &twoLevel,      &precision,
        &fuseAttention, &optimizer,
        &momentum,      &trainable,
        &freeze,        &weightDecay,
        &decayExclude,  &betas,
        &eps,           &labelSmoothing,
        &ignoreIndex,   static_cast<const cl::Option *>(std::addressof(dims))};
    for (const cl::Option *opt : compileOptions)
      if (opt->getNumOccurrences())
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "--" + opt->ArgStr.str() + " applies to .onnx inputs; " +
                ro.modelPath +
                " is a compiled program that carries its plan (compile it "
                "again with oasr-run --compile-only)");
    auto program = oasr::rt::readProgram(ro.modelPath);
    if (!program)
      return program.takeError();
    m.program = std::move(*program);
    return m;
  }
#if OASR_HAVE_PASSES
  mlir::oasr::TrainingCompileOptions o;
  o.batch = ro.batch.value_or(0);
  o.dims = ro.dims;
  o.ignoreIndex = ro.ignoreIndex;
  o.labelSmoothing = ro.labelSmoothing;
  o.strategy = ro.strategy;
  o.alpha = ro.alpha.value_or(-1);
  o.beta = ro.beta.value_or(-1);
  o.commFile = ro.commFile;
  o.overlapRate = ro.overlapRate;
  o.profile = ro.planProfile;
  o.gradDtype = ro.gradDtype;
  o.compress = ro.compress;
  o.twoLevel = ro.twoLevel;
  o.precision = ro.precision;
  o.allowInferenceGraph = ro.allowInferenceGraph;
  o.fuseAttention = ro.fuseAttention;
  o.optimizer = ro.optimizer;
  o.momentum = ro.momentum.value_or(-1);
  o.lr = ro.lr.value_or(-1);
  o.trainable = trainable;
  o.freeze = freeze;
  o.weightDecay = given(weightDecay);
  o.decayExclude = decayExclude;
  o.betas = betas;
  o.epsilon = given(eps);
  auto compiled = mlir::oasr::compileForTraining(ctx, ro.modelPath, o);
  if (!compiled)
    return compiled.takeError();
  m.module = std::move(compiled->module);
  m.commSource = compiled->commSource;
  m.usedDefaultComm = compiled->usedDefaultComm;
  m.remarks = std::move(compiled->remarks);
  m.defaultAlphaS = mlir::oasr::kDefaultAllreduceAlpha;
  m.defaultBetaSPerByte = mlir::oasr::kDefaultAllreduceBeta;
#else
  m.module = mlir::parseSourceFile<mlir::ModuleOp>(ro.modelPath, &ctx);
  if (!m.module)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        ro.modelPath + ": cannot parse (this oasr-run was built without the "
                       "passes; .onnx inputs need oasr-opt first)");
#endif
  return m;
}

/// The ONNX source through oasr::SourceModel.
class OnnxSource : public RunSourceModel {
public:
  explicit OnnxSource(std::unique_ptr<oasr::SourceModel> model)
      : model(std::move(model)) {}
  InitializerLoader loader() const override { return model->loader(); }
  llvm::Expected<size_t> save(Executor &exec,
                              llvm::StringRef path) const override {
    return model->save(exec, path);
  }
  std::string ortCheckpoint() const override { return model->ortCheckpoint(); }
  llvm::Expected<int64_t> restoreOptimizerState(Executor &exec) override {
    return model->restoreOptimizerState(exec);
  }
  llvm::Expected<size_t> saveORT(Executor &exec, llvm::StringRef path,
                                 double learningRate) const override {
    return model->saveORT(exec, path, learningRate);
  }

private:
  std::unique_ptr<oasr::SourceModel> model;
};

llvm::Expected<std::unique_ptr<RunSourceModel>>
openSource(const Executor &exec) {
  auto source = oasr::SourceModel::open(exec);
  if (!source)
    return source.takeError();
  if (!*source)
    return nullptr;
  return std::make_unique<OnnxSource>(std::move(*source));
}

/// --compile-only=FILE: the model compiled as for training, lowered to a
/// program and written; no MPI, no training.
int compileProgram() {
  auto fail = [](const llvm::Twine &msg) {
    llvm::errs() << "oasr-run: error: " << msg << "\n";
    return 1;
  };
  if (!oasr::rt::isProgramFile(compileOnly))
    return fail("--compile-only=" + compileOnly +
                ": the program file's name must end in .oasrprog");
  if (oasr::rt::isProgramFile(modelPath))
    return fail("--compile-only: " + modelPath +
                " is already a compiled program");
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::oasr::OASRDialect>();
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  auto loaded = loadModule(ctx, runOptions());
  if (!loaded)
    return fail(llvm::toString(loaded.takeError()));
  auto program = oasr::rt::lowerToProgram(*loaded->module);
  if (!program)
    return fail(modelPath + ": " + llvm::toString(program.takeError()));
  if (llvm::Error err = oasr::rt::writeProgram(*program, compileOnly))
    return fail(llvm::toString(std::move(err)));
  std::printf("oasr-run: %s: compiled into %s (%zu instructions, %zu "
              "fused group(s), %s, %s)\n",
              modelPath.c_str(), compileOnly.c_str(), program->instrs.size(),
              program->groups.size(), program->strategy.c_str(),
              program->precision.c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // Line-buffered stdout: its lines and stderr's diagnostics reach a shared
  // pipe or file in the order they happened, and none is lost to a fatal
  // exit (_Exit, MPI_Abort) with lines still buffered.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  cl::HideUnrelatedOptions(runCat);
  cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << "oasr-run " << OASR_VERSION << "\n"; });
  std::vector<char *> args;
  if (std::optional<int> exitCode = preScan(argc, argv, args))
    return *exitCode;
  cl::ParseCommandLineOptions(
      int(args.size()), args.data(),
      "oasr-run: train a compiled model on MPI ranks\n\n"
      "  --threads=N  compute threads per rank "
      "(default: cores / ranks on this host)\n");
  if (np.getNumOccurrences() && np < 1) {
    llvm::errs() << "oasr-run: error: --np=" << np
                 << ": expected a positive number of ranks\n";
    return 1;
  }
  // The launcher (not a rank): --max-restarts, else a plain --np relaunch.
  if (maxRestarts.getNumOccurrences() && !launchedByMpi()) {
    if (llvm::Error err =
            checkRestartOptions(given(maxRestarts), checkpointDir)) {
      llvm::errs() << "oasr-run: error: " << llvm::toString(std::move(err))
                   << "\n";
      return 1;
    }
    return restartLoop(argc, argv);
  }
  if (np > 0 && !launchedByMpi())
    return relaunch(argc, argv);
#if OASR_HAVE_PASSES
  mlir::oasr::registerAllPasses();
#endif
  if (compileOnly.getNumOccurrences())
    return compileProgram();
  return runTraining(runOptions(), {loadModule, openSource}, &argc, &argv);
}
