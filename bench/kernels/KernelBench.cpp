//===- KernelBench.cpp - Convolution kernels of the cpu backend, timed ----===//
//
// Times Conv (forward) and ConvGrad (backward data + weights + bias) of the
// cpu backend on ResNet-50 layer shapes and prints one line per layer:
//   name  fwd_ms  bwd_ms  fwd_GFLOP/s  bwd_GFLOP/s
// OASR_CPU_CONV_LAYOUT=plain|blocked|auto picks the layouts inside oneDNN
// (plain NCHW/OIHW, or its preferred blocked ones plus reorders).
//
// --clock cpu measures process CPU time instead of wall time: with one
// thread on a shared machine it is the number to compare.
//
// Usage: oasr-bench-kernels [--batch N] [--threads T] [--min-time S]
//                           [--clock wall|cpu]
//
//===----------------------------------------------------------------------===//

#include "BenchClock.h"
#include "oasr/Runtime/Kernel.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

using namespace oasr::rt;
using oasr::bench::gCpuClock;
using oasr::bench::timeIt;

namespace {

struct Layer {
  const char *name;
  int64_t c, hw, m, k, stride, pad;
};

// ResNet-50 (224x224) convolutions, one of each kind.
const Layer kLayers[] = {
    {"conv1_7x7s2", 3, 224, 64, 7, 2, 3},
    {"l1_1x1_64", 64, 56, 64, 1, 1, 0},
    {"l1_3x3_64", 64, 56, 64, 3, 1, 1},
    {"l1_1x1_256", 64, 56, 256, 1, 1, 0},
    {"l2_3x3s2_128", 128, 56, 128, 3, 2, 1},
    {"l3_3x3_256", 256, 14, 256, 3, 1, 1},
    {"l4_3x3_512", 512, 7, 512, 3, 1, 1},
    {"l4_1x1_2048", 512, 7, 2048, 1, 1, 0},
};

struct Buf {
  KernelBackend &b;
  TensorRef ref;
  Buf(KernelBackend &b, TensorDesc d) : b(b) {
    ref.desc = d;
    ref.data = b.allocate(d.bytes());
    float *p = ref.as<float>();
    for (int64_t i = 0; i < d.numel(); ++i)
      p[i] = float((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  }
  ~Buf() { b.deallocate(ref.data); }
};

} // namespace

int main(int argc, char **argv) {
  int64_t batch = 8;
  int threads = 0;
  double minTime = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--batch")
      batch = std::atoll(argv[i + 1]);
    else if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--min-time")
      minTime = std::atof(argv[i + 1]);
    else if (a == "--clock")
      gCpuClock = std::string(argv[i + 1]) == "cpu";
  }
  auto backend = createCpuBackend();
  if (threads)
    backend->setNumThreads(threads);
  const char *layout = std::getenv("OASR_CPU_CONV_LAYOUT");
  std::printf("# oasr cpu backend, batch %lld, threads %d, layout %s, %s "
              "time\n",
              (long long)batch, threads, layout ? layout : "auto",
              gCpuClock ? "cpu" : "wall");
  std::printf("%-14s %9s %9s %9s %9s\n", "layer", "fwd_ms", "bwd_ms",
              "fwd_GF/s", "bwd_GF/s");
  for (const Layer &l : kLayers) {
    int64_t o = (l.hw + 2 * l.pad - l.k) / l.stride + 1;
    TensorDesc x{DType::F32, {batch, l.c, l.hw, l.hw}};
    TensorDesc w{DType::F32, {l.m, l.c, l.k, l.k}};
    TensorDesc b{DType::F32, {l.m}};
    TensorDesc y{DType::F32, {batch, l.m, o, o}};
    OpSpec spec;
    spec.opType = "Conv";
    spec.name = l.name;
    spec.attrs.set("strides", std::vector<int64_t>{l.stride, l.stride});
    spec.attrs.set("pads", std::vector<int64_t>(4, l.pad));
    spec.inputs = {x, w, b};
    spec.outputs = {y};
    OpSpec grad = spec;
    grad.opType = "ConvGrad";
    grad.inputs = {y, x, w};
    grad.outputs = {x, w, b};
    std::string err;
    auto fwd = backend->create(spec, err);
    auto bwd = fwd ? backend->create(grad, err) : nullptr;
    if (!fwd || !bwd) {
      std::fprintf(stderr, "%s\n", err.c_str());
      return 1;
    }
    Buf bx(*backend, x), bw(*backend, w), bb(*backend, b), by(*backend, y),
        bdy(*backend, y), bdx(*backend, x), bdw(*backend, w), bdb(*backend, b);
    double tf = timeIt(
        [&] {
          fwd->run({bx.ref, bw.ref, bb.ref}, {by.ref});
        },
        minTime);
    double tb = timeIt(
        [&] {
          bwd->run({bdy.ref, bx.ref, bw.ref}, {bdx.ref, bdw.ref, bdb.ref});
        },
        minTime);
    double flops = 2.0 * double(batch) * l.m * o * o * l.c * l.k * l.k;
    std::printf("%-14s %9.3f %9.3f %9.1f %9.1f\n", l.name, tf * 1e3, tb * 1e3,
                flops / tf * 1e-9, 2 * flops / tb * 1e-9);
  }
  return 0;
}
