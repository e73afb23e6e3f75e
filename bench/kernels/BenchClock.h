//===- BenchClock.h - The kernel benchmarks' clock and timing loop -*- C++
//-*-===//
//
// Wall time, or process CPU time (--clock cpu: the number to compare with
// one thread on a shared machine), and the mean of at least three calls and
// `minTime` seconds after two warm-up calls.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_BENCH_KERNELS_BENCHCLOCK_H
#define OASR_BENCH_KERNELS_BENCHCLOCK_H

#include <chrono>
#include <ctime>

namespace oasr::bench {

inline bool gCpuClock = false;

inline double seconds() {
  if (gCpuClock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename F> double timeIt(F &&f, double minTime) {
  f(); // warm-up (first touch, reorders' buffers)
  f();
  int iters = 0;
  double start = seconds(), now = start;
  while (iters < 3 || now - start < minTime) {
    f();
    ++iters;
    now = seconds();
  }
  return (now - start) / iters;
}

} // namespace oasr::bench

#endif // OASR_BENCH_KERNELS_BENCHCLOCK_H
