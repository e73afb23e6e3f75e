//===- oasr-bench.cpp - Measures what the planner models ----------------===//
//
//   mpirun -np P oasr-bench comm [--min-bytes=4] [--max-bytes=268435456]
//                                [--out=calibration.json]
//
// `comm` times the runtime's allreduce (sum and average over ranks, in place,
// through the same Communicator oasr-run uses) for message sizes from
// --min-bytes to --max-bytes in powers of two, fits T(M) = alpha + beta * M
// by least squares on relative error, and writes the `oasr-comm-v1`
// calibration JSON that oasr-plan, the passes and oasr-run accept.
//
//===----------------------------------------------------------------------===//

#include "oasr/Config.h"
#include "oasr/Runtime/Communicator.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

using namespace oasr::rt;
namespace cl = llvm::cl;

static cl::OptionCategory benchCat("oasr-bench options");
static cl::opt<std::string> command(cl::Positional, cl::Required,
                                    cl::desc("<comm>"), cl::cat(benchCat));
static cl::opt<uint64_t> minBytes("min-bytes", cl::desc("Smallest message"),
                                  cl::init(4), cl::cat(benchCat));
static cl::opt<uint64_t> maxBytes("max-bytes",
                                  cl::desc("Largest message (256 MiB)"),
                                  cl::init(uint64_t(256) << 20),
                                  cl::cat(benchCat));
static cl::opt<double> budget("seconds-per-size",
                              cl::desc("Measuring time per size (s)"),
                              cl::init(0.2), cl::cat(benchCat));
static cl::opt<std::string> outPath("out", cl::desc("Calibration JSON"),
                                    cl::init("comm-calibration.json"),
                                    cl::cat(benchCat));
static cl::opt<bool> quiet("quiet", cl::desc("No table"), cl::init(false),
                           cl::cat(benchCat));

static double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {
struct Point {
  double bytes, seconds;
};

/// Least squares of t = a + b*M weighted by 1/t^2 (relative error), so the
/// start-up latency is fitted from the small messages and the bandwidth term
/// from the large ones.
void fit(const std::vector<Point> &pts, double &a, double &b) {
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
  for (const Point &p : pts) {
    double w = 1.0 / (p.seconds * p.seconds);
    s00 += w;
    s01 += w * p.bytes;
    s11 += w * p.bytes * p.bytes;
    r0 += w * p.seconds;
    r1 += w * p.seconds * p.bytes;
  }
  double det = s00 * s11 - s01 * s01;
  a = (r0 * s11 - r1 * s01) / det;
  b = (s00 * r1 - s01 * r0) / det;
  if (a < 0) { // refit the slope through the origin
    a = 0;
    b = r1 / s11;
  }
}

int commBench(Communicator &comm) {
  const int rank = comm.rank(), size = comm.size();
  if (rank == 0 && !quiet)
    std::printf("oasr-bench comm: %d rank(s) [%s], allreduce average of f32 "
                "in place\n%12s %8s %14s %14s\n",
                size, comm.name(), "bytes", "iters", "seconds", "GB/s(bus)");
  std::vector<float> buf(std::max<uint64_t>(maxBytes, 4) / 4 + 1, 1.0f);
  std::vector<Point> pts;
  for (uint64_t bytes = std::max<uint64_t>(minBytes, 4); bytes <= maxBytes;
       bytes *= 2) {
    size_t count = size_t(bytes / 4);
    // Warm up and estimate the per-call time; every rank uses rank 0's
    // iteration count so the collectives match.
    comm.allreduceAverage(buf.data(), count, DType::F32); // page faults
    comm.barrier();
    double t0 = now();
    for (int i = 0; i < 3; ++i)
      comm.allreduceAverage(buf.data(), count, DType::F32);
    double est = (now() - t0) / 3;
    comm.allreduceMax(&est, 1);
    double iters =
        std::clamp(std::floor(budget / std::max(est, 1e-7)), 2.0, 2000.0);
    comm.broadcast(&iters, sizeof iters, 0);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      comm.barrier();
      double s = now();
      for (int i = 0; i < int(iters); ++i)
        comm.allreduceAverage(buf.data(), count, DType::F32);
      double t = (now() - s) / iters;
      comm.allreduceMax(&t, 1);
      best = std::min(best, t);
    }
    pts.push_back(Point{double(bytes), best});
    if (rank == 0 && !quiet) {
      double busBw = size > 1 ? 2.0 * (size - 1) / size * bytes / best * 1e-9
                              : bytes / best * 1e-9;
      std::printf("%12llu %8d %14.9f %14.3f\n", (unsigned long long)bytes,
                  int(iters), best, busBw);
      std::fflush(stdout);
    }
  }
  if (rank != 0)
    return 0;
  double a = 0, b = 0;
  fit(pts, a, b);
  double worst = 0;
  for (const Point &p : pts)
    worst = std::max(worst, std::fabs(a + b * p.bytes - p.seconds) / p.seconds);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  llvm::json::Array points;
  for (const Point &p : pts)
    points.push_back(llvm::json::Object{{"bytes", int64_t(p.bytes)},
                                        {"seconds", p.seconds}});
  llvm::json::Object doc{
      {"format", "oasr-comm-v1"},
      {"alpha_s", a},
      {"beta_s_per_byte", b},
      {"ranks", int64_t(size)},
      {"source", llvm::formatv("oasr-bench comm {0}, {1} rank(s) [{2}] on {3}",
                               OASR_VERSION, size, comm.name(), host)
                     .str()},
      {"points", std::move(points)}};
  std::error_code ec;
  llvm::raw_fd_ostream os(outPath, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    llvm::errs() << "oasr-bench: error: cannot write " << outPath << ": "
                 << ec.message() << "\n";
    return 1;
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(doc))) << "\n";
  std::printf("fit: alpha = %.4g s, beta = %.4g s/B (%.2f GB/s), worst "
              "relative error %.0f%%; wrote %s\n",
              a, b, b > 0 ? 1e-9 / b : 0.0, 100 * worst, outPath.c_str());
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(benchCat);
  cl::ParseCommandLineOptions(argc, argv,
                              "oasr-bench: measurements for the planner\n\n"
                              "  comm  allreduce time over message sizes -> "
                              "alpha/beta calibration JSON\n");
  if (command != "comm") {
    llvm::errs() << "oasr-bench: error: unknown command '" << command
                 << "' (expected: comm)\n";
    return 1;
  }
  if (minBytes > maxBytes || maxBytes < 4) {
    llvm::errs() << "oasr-bench: error: need 4 <= --min-bytes <= "
                    "--max-bytes\n";
    return 1;
  }
  std::unique_ptr<Communicator> comm;
  if (launchedByMpi()) {
    std::string error;
    comm = createMpiCommunicator(&argc, &argv, error);
    if (!comm) {
      llvm::errs() << "oasr-bench: error: " << error << "\n";
      return 1;
    }
  } else {
    comm = createSelfCommunicator();
  }
  int rc = commBench(*comm);
  comm->finalize();
  return rc;
}
