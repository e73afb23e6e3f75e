//===- DataBench.cpp - A data source's samples per second -----------------===//
//
// Draws batches from a --data spec as oasr-run does (createDataLoader with
// the model's sample shape) and prints the samples per second over
// --batches batches after one warm-up batch, in process CPU time per core
// used and in wall time: OMP_NUM_THREADS sets the decoding threads.
//
// Usage: oasr-bench-data --data SPEC --shape C,H,W [--batch 32]
//            [--batches 20] [--augment LIST] [--normalize M/S] [--classes K]
//
//===----------------------------------------------------------------------===//

#include "../kernels/BenchClock.h"
#include "oasr/Runtime/DataLoader.h"

#include "llvm/ADT/StringExtras.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace oasr::rt;

int main(int argc, char **argv) {
  std::string spec, shapeArg = "3,224,224";
  int64_t batch = 32, batches = 20, classes = 1000;
  ImageOptions images;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--data")
      spec = v;
    else if (a == "--shape")
      shapeArg = v;
    else if (a == "--batch")
      batch = std::atoll(v.c_str());
    else if (a == "--batches")
      batches = std::atoll(v.c_str());
    else if (a == "--augment")
      images.augment = v;
    else if (a == "--normalize")
      images.normalize = v;
    else if (a == "--classes")
      classes = std::atoll(v.c_str());
  }
  SampleShape shape;
  llvm::SmallVector<llvm::StringRef> dims;
  llvm::StringRef(shapeArg).split(dims, ',');
  shape.features = 1;
  for (llvm::StringRef d : dims) {
    int64_t n = 0;
    d.getAsInteger(10, n);
    shape.dims.push_back(n);
    shape.features *= n;
  }
  shape.classes = classes;
  auto loader = createDataLoader(spec, shape, 0, 1, 1, images);
  if (!loader) {
    std::fprintf(stderr, "%s\n", llvm::toString(loader.takeError()).c_str());
    return 1;
  }
  std::vector<float> x(static_cast<size_t>(batch * shape.features));
  std::vector<int64_t> y(static_cast<size_t>(batch));
  (*loader)->nextBatch(x.data(), y.data(), batch);
  using oasr::bench::gCpuClock, oasr::bench::seconds;
  gCpuClock = true;
  double c0 = seconds();
  gCpuClock = false;
  double w0 = seconds();
  for (int64_t b = 0; b < batches; ++b)
    (*loader)->nextBatch(x.data(), y.data(), batch);
  double wall = seconds() - w0;
  gCpuClock = true;
  double cpu = seconds() - c0;
  double n = double(batch * batches);
  std::printf("%s: %.0f images, %.1f images/s per CPU second, %.1f images/s "
              "wall\n",
              (*loader)->describe().c_str(), n, n / cpu, n / wall);
  return 0;
}
