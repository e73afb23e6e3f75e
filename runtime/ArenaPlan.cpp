//===- ArenaPlan.cpp - Where each activation lives in the arena -----------===//

#include "oasr/Runtime/ArenaPlan.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <map>

namespace oasr::rt {

ArenaPlan planArena(llvm::ArrayRef<ArenaBuffer> buffers, size_t alignment,
                    bool reuse) {
  assert(alignment && (alignment & (alignment - 1)) == 0);
  auto align = [&](size_t n) {
    n = std::max<size_t>(n, 1);
    return (n + alignment - 1) & ~(alignment - 1);
  };
  ArenaPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::map<size_t, size_t> freeList; // offset -> size
  size_t top = 0;
  auto allocate = [&](size_t n) -> size_t {
    n = align(n);
    if (reuse) {
      auto best = freeList.end();
      for (auto it = freeList.begin(); it != freeList.end(); ++it)
        if (it->second >= n &&
            (best == freeList.end() || it->second < best->second))
          best = it;
      if (best != freeList.end()) {
        size_t off = best->first, size = best->second;
        freeList.erase(best);
        if (size > n)
          freeList[off + n] = size - n;
        return off;
      }
      // Grow the last free interval if it touches the top.
      if (!freeList.empty()) {
        auto last = std::prev(freeList.end());
        if (last->first + last->second == top) {
          size_t off = last->first;
          freeList.erase(last);
          top = off + n;
          return off;
        }
      }
    }
    size_t off = top;
    top += n;
    return off;
  };
  auto release = [&](size_t off, size_t n) {
    if (!reuse)
      return;
    n = align(n);
    auto it = freeList.emplace(off, n).first;
    auto next = std::next(it);
    if (next != freeList.end() && it->first + it->second == next->first) {
      it->second += next->second;
      freeList.erase(next);
    }
    if (it != freeList.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        freeList.erase(it);
      }
    }
  };

  // Buffers freed after each step, and which were given away.
  std::map<int, std::vector<size_t>> dying;
  std::vector<char> donated(buffers.size(), 0);
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].donor >= 0)
      donated[size_t(buffers[b].donor)] = 1;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (!buffers[b].scratch && buffers[b].lastUse != ArenaBuffer::kLive &&
        !donated[b])
      dying[std::max(buffers[b].lastUse, buffers[b].def)].push_back(b);

  auto freeThrough = [&](int step) {
    while (!dying.empty() && dying.begin()->first <= step) {
      for (size_t b : dying.begin()->second)
        release(plan.offsets[b], buffers[b].bytes);
      dying.erase(dying.begin());
    }
  };
  for (size_t b = 0; b < buffers.size(); ++b) {
    const ArenaBuffer &buf = buffers[b];
    // Everything whose last use came before this step is free again.
    freeThrough(buf.def - 1);
    plan.unsharedBytes += align(buf.bytes);
    if (buf.donor >= 0 && reuse) {
      assert(size_t(buf.donor) < b &&
             buffers[size_t(buf.donor)].lastUse == buf.def &&
             "donor must die here");
      plan.offsets[b] = plan.offsets[size_t(buf.donor)];
    } else {
      plan.offsets[b] = allocate(buf.bytes);
    }
    if (buf.scratch)
      release(plan.offsets[b], buf.bytes);
  }
  plan.bytes = top;
  return plan;
}

} // namespace oasr::rt
