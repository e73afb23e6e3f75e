//===- WeightInit.cpp - Initial weights of a plan -------------------------===//

#include "ExecutorImpl.h"

using llvm::Expected;

namespace oasr::rt {

uint64_t hashName(const std::string &s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (char c : s) {
    h ^= uint8_t(c);
    h *= 1099511628211ull;
  }
  return h;
}

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

Expected<unsigned> initializeWeights(Executor &exec,
                                     const InitializerLoader &loader,
                                     uint64_t seed) {
  unsigned loaded = 0;
  KernelBackend &backend = exec.backend();
  for (PersistentTensor &t : exec.persistent()) {
    std::vector<char> host(t.ref.bytes(), 0);
    TensorRef staging{host.data(), t.ref.desc};
    bool fromFile = false;
    if (t.kind != PersistentTensor::OptState && loader) {
      std::string error;
      fromFile = loader(t.name, staging, error);
      if (!fromFile && !error.empty())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "initializer '%s': %s", t.name.c_str(),
                                       error.c_str());
    }
    if (fromFile) {
      ++loaded;
    } else if (t.ref.desc.dtype == DType::F32) {
      float *v = staging.as<float>();
      int64_t n = t.ref.numel();
      if (t.init == PersistentTensor::Ones)
        std::fill(v, v + n, 1.0f);
      else if (t.init == PersistentTensor::HeNormal) {
        std::mt19937_64 rng(hashName(t.name, seed));
        std::normal_distribution<float> dist(
            0.0f, std::sqrt(2.0f / float(std::max<int64_t>(t.fanIn, 1))));
        for (int64_t i = 0; i < n; ++i)
          v[i] = dist(rng);
      }
    }
    backend.copyToDevice(t.ref.data, host.data(), host.size());
  }
  return loaded;
}

} // namespace oasr::rt
