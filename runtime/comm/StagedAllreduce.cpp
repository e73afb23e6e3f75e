//===- StagedAllreduce.cpp - A collective on device memory via the host ---===//
//
// The chunk pipeline of a host-staged allreduce (see StagedAllreduce.h) and
// its chunk size. Plain C++: no MPI and no CUDA, which the callers bring.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/StagedAllreduce.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <utility>

namespace oasr::rt {

StagingCopies::~StagingCopies() = default;

void stagedAllreduce(StagingCopies &copies, size_t count, size_t elemBytes,
                     const std::function<void(void *, size_t)> &reduce) {
  assert(elemBytes > 0 && copies.slotBytes() >= elemBytes);
  if (count == 0)
    return;
  const size_t per = std::max<size_t>(1, copies.slotBytes() / elemBytes);
  const size_t chunks = (count + per - 1) / per;
  const size_t slots = std::max<size_t>(1, copies.slotCount());
  // Chunk k's first element and element count.
  auto span = [&](size_t k) {
    const size_t first = k * per;
    return std::make_pair(first, std::min(per, count - first));
  };
  auto in = [&](size_t k) {
    auto [first, n] = span(k);
    copies.copyIn(k % slots, first * elemBytes, n * elemBytes);
  };
  for (size_t k = 0; k < std::min(slots, chunks); ++k)
    in(k);
  for (size_t k = 0; k < chunks; ++k) {
    const size_t s = k % slots;
    auto [first, n] = span(k);
    copies.waitIn(s);
    reduce(copies.slot(s), n);
    copies.copyOut(s, first * elemBytes, n * elemBytes);
    // The slot's next chunk: its copy in follows this copy out.
    if (k + slots < chunks)
      in(k + slots);
  }
  copies.waitOut();
}

size_t stagedChunkBytesFromEnv(std::string &error) {
  const char *env = std::getenv("OASR_STAGED_CHUNK_BYTES");
  if (!env)
    return kDefaultStagedChunkBytes;
  char *end = nullptr;
  unsigned long long v = std::strtoull(env, &end, 10);
  if (!*env || *end || env[0] == '-' || v < kMinStagedChunkBytes ||
      v > kMaxStagedChunkBytes) {
    error = std::string("OASR_STAGED_CHUNK_BYTES='") + env +
            "': expected a number of bytes from " +
            std::to_string(kMinStagedChunkBytes) + " to " +
            std::to_string(kMaxStagedChunkBytes);
    return 0;
  }
  return size_t(v);
}

} // namespace oasr::rt
