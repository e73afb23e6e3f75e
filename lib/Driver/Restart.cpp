//===- Restart.cpp - Relaunching a failed job (--max-restarts) ------------===//
//
// The launcher's side of --max-restarts: the mpirun attempts, each
// attempt's progress, and the time a restart lost.
//
//===----------------------------------------------------------------------===//

#include "oasr/Driver/Run.h"
#include "oasr/Runtime/DataLoader.h"
#include "oasr/Runtime/DeviceSetup.h"
#include "oasr/Runtime/Report.h"
#include "oasr/Runtime/Training.h"
#include "oasr/Schedule/Schedule.h"

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

//===----------------------------------------------------------------------===//
// Restarts: the launcher's side
//===----------------------------------------------------------------------===//

namespace oasr::rt {

/// Adds `option` to `args`, before a "--" (whatever follows one is
/// positional).
static void addOption(std::vector<std::string> &args, std::string option) {
  auto dashes = std::find(args.begin(), args.end(), "--");
  args.insert(dashes, std::move(option));
}

void dropOption(std::vector<std::string> &args, llvm::StringRef name,
                bool takesValue) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef flag(args[i]);
    if (flag == "--") {
      kept.insert(kept.end(), args.begin() + long(i), args.end());
      break;
    }
    if (flag.consume_front("--") || flag.consume_front("-")) {
      if (flag == name) {
        i += takesValue ? 1 : 0;
        continue;
      }
      if (flag.consume_front(name) && flag.starts_with("="))
        continue;
    }
    kept.push_back(args[i]);
  }
  args = std::move(kept);
}

std::vector<std::string> attemptArguments(std::vector<std::string> args,
                                          int attempt,
                                          llvm::StringRef resumeDir,
                                          llvm::StringRef progressFile) {
  if (attempt > 0) {
    for (const char *injection : {"fail-at-step", "fail-rank", "fail-signal"})
      dropOption(args, injection);
    if (!resumeDir.empty()) {
      dropOption(args, "resume");
      addOption(args, "--resume=" + resumeDir.str());
    }
  }
  dropOption(args, "progress-file");
  if (!progressFile.empty())
    addOption(args, "--progress-file=" + progressFile.str());
  return args;
}

std::optional<double> AttemptProgress::reached(int64_t step) const {
  if (startStep && *startStep == step)
    return startS;
  for (const auto &[s, t] : steps)
    if (s == step)
      return t;
  return std::nullopt;
}

std::optional<int64_t> AttemptProgress::lastStep() const {
  if (!steps.empty())
    return steps.back().first;
  return startStep;
}

AttemptProgress parseProgress(llvm::StringRef text) {
  AttemptProgress p;
  // A line without its newline was cut short.
  text = text.take_front(text.rfind('\n') + 1);
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    llvm::SmallVector<llvm::StringRef, 3> w;
    line.split(w, ' ', -1, /*KeepEmpty=*/false);
    int64_t step = 0;
    double t = 0;
    if (w.size() == 2 && w[0] == "setup-error") {
      p.setupError = true;
    } else if (w.size() == 3 && !w[1].getAsInteger(10, step) &&
               !w[2].getAsDouble(t)) {
      if (w[0] == "start") {
        p.startStep = step;
        p.startS = t;
      } else if (w[0] == "step") {
        p.steps.push_back({step, t});
      }
    }
  }
  return p;
}

std::optional<double> RestartCost::lostS() const {
  if (!detectionS || !restartS || !redoneS)
    return std::nullopt;
  return *detectionS + *restartS + *redoneS;
}

RestartCost restartCost(const Attempt &failed, const Attempt &next) {
  RestartCost c;
  c.reachedStep = failed.progress.lastStep();
  // A failed attempt that never began training lost all of its time.
  double reachedS = failed.launchedS;
  if (c.reachedStep)
    reachedS = failed.progress.reached(*c.reachedStep).value_or(reachedS);
  c.detectionS = std::max(0.0, failed.endedS - reachedS);
  if (next.progress.startStep) {
    c.fromStep = next.progress.startStep;
    c.restartS = std::max(0.0, next.progress.startS - failed.endedS);
  }
  if (!c.reachedStep || (c.fromStep && *c.fromStep >= *c.reachedStep))
    c.redoneS = 0;
  else if (c.fromStep)
    if (std::optional<double> t = next.progress.reached(*c.reachedStep))
      c.redoneS = std::max(0.0, *t - next.progress.startS);
  return c;
}

static std::string seconds(std::optional<double> s) {
  return s ? llvm::formatv("{0:f2} s", *s).str() : std::string("unknown");
}

std::string formatRestarts(const std::vector<Attempt> &attempts,
                           int maxRestarts) {
  std::string lines;
  double lost = 0;
  bool allKnown = true;
  for (size_t k = 1; k < attempts.size(); ++k) {
    const Attempt &failed = attempts[k - 1], &next = attempts[k];
    RestartCost c = restartCost(failed, next);
    std::string line = llvm::formatv("  restart {0}: attempt {0} failed (exit "
                                     "code {1}) ",
                                     k, failed.exitCode)
                           .str();
    line += c.reachedStep ? "after step " + std::to_string(*c.reachedStep)
                          : std::string("before training began");
    line += llvm::formatv("; attempt {0} ", k + 1).str();
    if (!c.fromStep)
      line += "did not begin training";
    else if (*c.fromStep == 0)
      line += "began again at step 0 (no checkpoint)";
    else
      line +=
          "resumed from the checkpoint of step " + std::to_string(*c.fromStep);
    if (c.fromStep && c.reachedStep) {
      int64_t redone = std::max<int64_t>(0, *c.reachedStep - *c.fromStep);
      line +=
          llvm::formatv(", {0} step{1} redone", redone, redone == 1 ? "" : "s");
    }
    line += "; time lost " + seconds(c.lostS()) + " (detection " +
            seconds(c.detectionS) + ", restart " + seconds(c.restartS) +
            ", redone steps " + seconds(c.redoneS) + ")\n";
    lines += line;
    if (std::optional<double> s = c.lostS())
      lost += *s;
    else
      allKnown = false;
  }
  return llvm::formatv("restarts: {0} of at most {1} (--max-restarts); time "
                       "lost {2}{3:f2} s\n",
                       attempts.size() - 1, maxRestarts,
                       allKnown ? "" : "at least ", lost)
             .str() +
         lines;
}

namespace {
volatile sig_atomic_t stopSignal = 0;
volatile pid_t attemptPid = 0;

/// The launcher was told to stop: no restart. A signal sent to it alone
/// (kill, a batch scheduler) is passed on to the attempt; a terminal's
/// (si_code SI_KERNEL) reached the attempt's process group already.
void onLauncherSignal(int sig, siginfo_t *info, void *) {
  stopSignal = sig;
  pid_t pid = attemptPid;
  if (pid > 0 && info && info->si_code <= 0)
    ::kill(pid, sig);
}

double secondsNow() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Starts `argv` and waits for it; the exit code (128 + N for signal N),
/// or an error when it cannot be executed.
llvm::Expected<int> runAttempt(const std::vector<std::string> &argv) {
  std::vector<char *> cargs;
  for (const std::string &a : argv)
    cargs.push_back(const_cast<char *>(a.c_str()));
  cargs.push_back(nullptr);
  // exec's errno comes back through a pipe closed by a successful exec.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot create a pipe: " +
                                       std::string(std::strerror(errno)));
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot fork: " +
                                       std::string(std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::execv(cargs[0], cargs.data());
    int err = errno;
    ssize_t ignored = ::write(fds[1], &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  }
  attemptPid = pid;
  ::close(fds[1]);
  int execErrno = 0;
  ssize_t got;
  while ((got = ::read(fds[0], &execErrno, sizeof execErrno)) < 0 &&
         errno == EINTR) {
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  attemptPid = 0;
  if (got == ssize_t(sizeof execErrno))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot execute " + argv[0] + ": " +
                                       std::strerror(execErrno));
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

/// While it lives, SIGINT, SIGTERM and SIGHUP reach onLauncherSignal.
class ForwardSignals {
public:
  ForwardSignals() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = onLauncherSignal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < 3; ++k)
      ::sigaction(kSignals[k], &sa, &old[k]);
  }
  ~ForwardSignals() {
    for (int k = 0; k < 3; ++k)
      ::sigaction(kSignals[k], &old[k], nullptr);
  }

private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old[3];
};

/// The file the ranks' failure reports go to (OASR_REPORT_FILE, read by
/// oasr-run and handed to installFailureReport): a fresh one under TMPDIR
/// unless a launcher above this one named it already, which then prints
/// it. mpirun passes the variable to the ranks it starts on this host
/// (and with -x, which launchCommand adds, on others).
class ReportFile {
public:
  ReportFile() {
    if (const char *given = std::getenv(kReportFileVariable); given && *given)
      return;
    llvm::SmallString<256> name;
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, name);
    llvm::sys::path::append(name,
                            llvm::formatv("oasr-report-{0}", ::getpid()).str());
    path = name.str().str();
    llvm::sys::fs::remove(path);
    ::setenv(kReportFileVariable, path.c_str(), 1);
  }
  ~ReportFile() {
    if (path.empty())
      return;
    llvm::sys::fs::remove(path);
    ::unsetenv(kReportFileVariable);
  }
  /// Prints the lines the ranks wrote since the last call, on stderr.
  void flush() {
    if (path.empty())
      return;
    if (auto text = llvm::MemoryBuffer::getFile(path)) {
      llvm::errs() << (*text)->getBuffer();
      llvm::errs().flush();
    }
    llvm::sys::fs::remove(path);
  }

private:
  std::string path; ///< empty: not this launcher's to print
};
} // namespace

int runLaunched(const std::vector<std::string> &argv) {
  ReportFile report;
  ForwardSignals forward;
  llvm::Expected<int> ran = runAttempt(argv);
  report.flush();
  if (!ran) {
    llvm::errs() << "oasr-run: error: " << llvm::toString(ran.takeError())
                 << "\n";
    return 1;
  }
  return *ran;
}

int runWithRestarts(const RestartPlan &plan) {
  namespace fs = llvm::sys::fs;
  llvm::SmallString<256> dir(plan.checkpointDir);
  fs::make_absolute(dir);
  // The progress files go into DIR, where rank 0 writes (also on another
  // host, with DIR on a shared file system).
  if (std::error_code ec = fs::create_directories(dir)) {
    llvm::errs() << "oasr-run: error: --checkpoint=" << plan.checkpointDir
                 << ": cannot create: " << ec.message() << "\n";
    return 1;
  }

  ReportFile report;
  ForwardSignals forward;
  std::vector<Attempt> attempts;
  std::string resumeDir;
  int code = 0;
  for (int attempt = 0;; ++attempt) {
    llvm::SmallString<256> progress(dir);
    llvm::sys::path::append(
        progress,
        llvm::formatv(".progress-{0}-{1}", ::getpid(), attempt).str());
    fs::remove(progress);
    std::vector<std::string> argv = plan.command;
    for (std::string &a :
         attemptArguments(plan.args, attempt, resumeDir, progress))
      argv.push_back(std::move(a));
    Attempt a;
    a.launchedS = secondsNow();
    llvm::Expected<int> ran = runAttempt(argv);
    a.endedS = secondsNow();
    report.flush();
    if (!ran) {
      llvm::errs() << "oasr-run: error: " << llvm::toString(ran.takeError())
                   << "\n";
      code = 1;
      break;
    }
    a.exitCode = code = *ran;
    if (auto text = llvm::MemoryBuffer::getFile(progress))
      a.progress = parseProgress((*text)->getBuffer());
    fs::remove(progress);
    attempts.push_back(a);
    if (code == 0)
      break;
    std::string failed =
        llvm::formatv("attempt {0} failed (exit code {1}) ", attempt + 1, code)
            .str();
    if (std::optional<int64_t> last = a.progress.lastStep())
      failed += "after step " + std::to_string(*last);
    else
      failed += "before training began";
    if (stopSignal) {
      llvm::errs() << "oasr-run: " << failed
                   << "; not restarting: the launcher got signal "
                   << int(stopSignal) << "\n";
      break;
    }
    if (a.progress.setupError) {
      llvm::errs() << "oasr-run: " << failed
                   << "; not restarting: the ranks agreed on a set-up error, "
                      "which a restart would repeat\n";
      break;
    }
    if (attempt >= plan.maxRestarts) {
      llvm::errs() << "oasr-run: error: " << failed
                   << "; no restarts left (--max-restarts=" << plan.maxRestarts
                   << ")\n";
      break;
    }
    llvm::errs() << "oasr-run: " << failed
                 << llvm::formatv("; restart {0} of {1}: every rank again ",
                                  attempt + 1, plan.maxRestarts);
    if (auto latest = findLatestCheckpoint(dir)) {
      resumeDir = dir.str().str();
      llvm::errs() << "from the newest complete checkpoint in " << dir << " ("
                   << llvm::sys::path::filename(*latest) << ")\n";
    } else {
      llvm::consumeError(latest.takeError());
      resumeDir.clear();
      llvm::errs() << "from the start (no complete checkpoint in " << dir
                   << " yet)\n";
    }
  }
  if (attempts.size() > 1) {
    llvm::outs() << formatRestarts(attempts, plan.maxRestarts);
    llvm::outs().flush();
  }
  return code;
}

} // namespace oasr::rt
