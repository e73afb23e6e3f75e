//===- FailureReport.cpp - What a rank says when the job is ended --------===//
//
// A rank that crashes (killed by a signal, out of memory, its host gone)
// says nothing itself, and mpirun then ends the survivors. The survivors
// know more than mpirun prints: how far training got and where the newest
// checkpoint is. Each rank exchanges its host and pid with every other rank
// before training; a handler for the terminating signals then looks up
// which peers on this host no longer run, and the lowest surviving rank of
// the host prints one line before the process ends as the signal says.
//
// mpirun signals the survivors one after another, and a loaded host may
// run their handlers far apart, so a survivor that has already ended would
// look failed to a later one. Every rank therefore binds a datagram socket
// in Linux's abstract namespace (no file, gone with the process) before
// training, and a handler first tells the other ranks of its host "I was
// signalled"; a peer that is gone without having said so is the one that
// failed, and the lowest rank that is running or said so is the reporter.
//
// The handler only calls async-signal-safe functions (open, read, kill,
// sendto, recv, write, nanosleep, sigaction, raise) on buffers prepared before
// training.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/Training.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace oasr::rt {

namespace {
struct Peer {
  int pid = 0;
  bool sameHost = false;
  std::string name;      ///< "rank R (host)"
  sockaddr_un address{}; ///< its abstract socket (same host only)
  socklen_t addressLength = 0;
  bool signalled = false; ///< said "I was signalled" (handler only)
};

int myRank = -1;
std::vector<Peer> peers; ///< filled once, before the handler is installed
std::atomic<int64_t> completed{0};
/// Two buffers for the checkpoint path: the handler reads the one `current`
/// names, noteCheckpoint writes the other and then flips it.
char checkpointPaths[2][1024];
std::atomic<int> current{-1};
std::atomic<bool> silenced{false};
int noteSocket = -1; ///< this rank's abstract datagram socket
int progressFd = -1; ///< rank 0's --progress-file, once training began
int reportFd = -1;   ///< the launcher's report file (any rank), if given

/// Appends to a fixed buffer without allocating (usable in the handler).
struct Line {
  char text[4096];
  size_t n = 0;
  Line &operator<<(const char *s) {
    while (*s && n + 1 < sizeof text)
      text[n++] = *s++;
    return *this;
  }
  Line &operator<<(int64_t v) {
    char digits[24];
    int k = 0;
    bool negative = v < 0;
    uint64_t u = negative ? uint64_t(-(v + 1)) + 1 : uint64_t(v);
    do {
      digits[k++] = char('0' + u % 10);
      u /= 10;
    } while (u);
    if (negative)
      *this << "-";
    while (k > 0 && n + 1 < sizeof text)
      text[n++] = digits[--k];
    return *this;
  }
};

/// Whether process `pid` has ended: it does not exist, or it is a zombie
/// its parent has not reaped yet.
bool processGone(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH)
    return true;
  Line p;
  p << "/proc/" << int64_t(pid) << "/stat";
  p.text[p.n] = 0;
  int fd = ::open(p.text, O_RDONLY);
  if (fd < 0)
    return errno == ENOENT;
  char buf[512];
  ssize_t got = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (got <= 0)
    return false;
  buf[got] = 0;
  // "pid (comm) S ...": the state follows the last ')'.
  char *close = std::strrchr(buf, ')');
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

/// Whether rank `r` of this host failed: it is gone without having said
/// that it was signalled.
bool failed(size_t r) {
  return !peers[r].signalled && processGone(peers[r].pid);
}

void onTerminate(int sig) {
  // "I was signalled" to the other ranks of this host (not from a rank that
  // ends the job with its own error: that one failed), then read theirs.
  int32_t me = myRank;
  if (noteSocket >= 0 && !silenced.load())
    for (size_t r = 0; r < peers.size(); ++r)
      if (int(r) != myRank && peers[r].sameHost)
        ::sendto(noteSocket, &me, sizeof me, MSG_DONTWAIT,
                 reinterpret_cast<const sockaddr *>(&peers[r].address),
                 peers[r].addressLength);
  int32_t note = -1;
  while (noteSocket >= 0 && ::recv(noteSocket, &note, sizeof note,
                                   MSG_DONTWAIT) == ssize_t(sizeof note))
    if (note >= 0 && size_t(note) < peers.size())
      peers[size_t(note)].signalled = true;
  // This rank reports only if no lower rank of the host survives (running,
  // or signalled like this one): one line per host, not one per rank.
  bool lowest = !silenced.load(), anyGone = false, anyRemote = false;
  for (size_t r = 0; r < peers.size(); ++r) {
    if (int(r) == myRank)
      continue;
    if (!peers[r].sameHost) {
      anyRemote = true;
      continue;
    }
    bool gone = failed(r);
    anyGone |= gone;
    if (!gone && int(r) < myRank)
      lowest = false;
  }
  if (lowest) {
    Line line;
    line << "oasr-run: " << peers[size_t(myRank)].name.c_str() << ": "
         << (sig == SIGTERM  ? "terminated (SIGTERM)"
             : sig == SIGINT ? "interrupted (SIGINT)"
             : sig == SIGHUP ? "hung up (SIGHUP)"
                             : "ended by a signal")
         << "; ";
    if (anyGone) {
      line << "gone:";
      for (size_t r = 0; r < peers.size(); ++r)
        if (int(r) != myRank && peers[r].sameHost && failed(r))
          line << " " << peers[r].name.c_str();
      line << "; ";
    } else if (anyRemote) {
      line << "no rank on this host has failed, so a rank on another host "
              "failed or became unreachable; ";
    }
    line << "last completed step " << completed.load() << "; ";
    int c = current.load();
    if (c >= 0)
      line << "last checkpoint " << checkpointPaths[c]
           << " (resume with --resume=" << checkpointPaths[c] << ")";
    else
      line << "no checkpoint written (--checkpoint=DIR --checkpoint-every=N)";
    line << "\n";
    if (reportFd >= 0) {
      // The launcher prints it once the job has ended: mpirun may end
      // before it forwards a loaded rank's last stderr line.
      ssize_t ignored = ::write(reportFd, line.text, line.n);
      (void)ignored;
    } else {
      ssize_t ignored = ::write(2, line.text, line.n);
      (void)ignored;
      // mpirun forwards a rank's stderr while the rank runs; a rank that
      // ends right after writing sometimes loses the line. Give it time.
      struct timespec pause = {0, 300 * 1000 * 1000};
      ::nanosleep(&pause, nullptr);
    }
  }
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}
} // namespace

void silenceFailureReport() { silenced.store(true); }

std::string progressReport() {
  std::string text =
      "last completed step " + std::to_string(completed.load()) + "; ";
  int c = current.load();
  if (c >= 0)
    text += std::string("last checkpoint ") + checkpointPaths[c] +
            " (resume with --resume=" + checkpointPaths[c] + ")";
  else
    text += "no checkpoint written (--checkpoint=DIR --checkpoint-every=N)";
  return text;
}

/// Appends "EVENT [STEP] TIME\n" to `fd` in one write (seconds since the
/// epoch: the launcher reading it may be another process on this host).
static void appendProgress(int fd, const char *event, int64_t step) {
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  double t = double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
  char line[96];
  int n = step >= 0 ? std::snprintf(line, sizeof line, "%s %lld %.6f\n", event,
                                    (long long)step, t)
                    : std::snprintf(line, sizeof line, "%s %.6f\n", event, t);
  if (n > 0 && ::write(fd, line, size_t(n)) < 0)
    return; // the launcher then knows less; training goes on
}

static int openProgress(const std::string &path) {
  if (path.empty())
    return -1;
  return ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

void startProgressLog(const std::string &path, int64_t startStep) {
  progressFd = openProgress(path);
  if (progressFd >= 0)
    appendProgress(progressFd, "start", startStep);
}

void noteSetupError(const std::string &path) {
  int fd = openProgress(path);
  if (fd < 0)
    return;
  appendProgress(fd, "setup-error", -1);
  ::close(fd);
}

void noteProgress(int64_t completedSteps) {
  completed.store(completedSteps);
  if (progressFd >= 0)
    appendProgress(progressFd, "step", completedSteps);
}

void noteCheckpoint(const std::string &path) {
  if (path.empty())
    return;
  int next = current.load() == 0 ? 1 : 0;
  std::strncpy(checkpointPaths[next], path.c_str(),
               sizeof checkpointPaths[next] - 1);
  checkpointPaths[next][sizeof checkpointPaths[next] - 1] = 0;
  current.store(next);
}

void installFailureReport(CommEngine &engine, const std::string &reportFile) {
  Communicator &comm = engine.communicator();
  if (!reportFile.empty())
    reportFd = ::open(reportFile.c_str(),
                      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  const int size = comm.size();
  myRank = comm.rank();
  // "pid host\0" of every rank, gathered on rank 0 and broadcast.
  std::string mine = std::to_string(::getpid()) + " " + comm.host();
  std::vector<char> all;
  std::vector<size_t> counts;
  engine.run([&](Communicator &c) {
    c.gatherBytes(mine.data(), mine.size(), 0, all, counts);
    uint64_t total = all.size();
    c.broadcast(&total, sizeof total, 0);
    all.resize(total);
    counts.resize(size_t(size));
    c.broadcast(all.data(), all.size(), 0);
    c.broadcast(counts.data(), counts.size() * sizeof(size_t), 0);
  });
  peers.assign(size_t(size), Peer{});
  size_t off = 0;
  for (int r = 0; r < size; ++r) {
    std::string entry(all.data() + off, counts[size_t(r)]);
    off += counts[size_t(r)];
    size_t space = entry.find(' ');
    Peer &p = peers[size_t(r)];
    p.pid = std::atoi(entry.substr(0, space).c_str());
    std::string host =
        space == std::string::npos ? "" : entry.substr(space + 1);
    p.sameHost = host == comm.host();
    p.name = "rank " + std::to_string(r) + " (" + host + ")";
  }
  // Abstract socket names "\0oasr-report-<rank 0's pid>-<rank>": unique per
  // job on a host, shared by its ranks.
  auto addressOf = [&](int r, Peer &p) {
    std::string name =
        "oasr-report-" + std::to_string(peers[0].pid) + "-" + std::to_string(r);
    p.address.sun_family = AF_UNIX;
    std::memcpy(p.address.sun_path + 1, name.data(),
                std::min(name.size(), sizeof p.address.sun_path - 2));
    p.addressLength =
        socklen_t(offsetof(sockaddr_un, sun_path) + 1 +
                  std::min(name.size(), sizeof p.address.sun_path - 2));
  };
  for (int r = 0; r < size; ++r)
    if (peers[size_t(r)].sameHost)
      addressOf(r, peers[size_t(r)]);
  noteSocket = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const Peer &self = peers[size_t(myRank)];
  if (noteSocket >= 0 &&
      ::bind(noteSocket, reinterpret_cast<const sockaddr *>(&self.address),
             self.addressLength) != 0) {
    ::close(noteSocket); // then only process lookups tell who failed
    noteSocket = -1;
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onTerminate;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    ::sigaction(sig, &sa, nullptr);
}

} // namespace oasr::rt
