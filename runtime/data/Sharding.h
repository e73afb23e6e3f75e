//===- Sharding.h - What the data loaders share ------------------*- C++
//-*-===//
//
// Private to runtime/data: errors and file reads, the position record of a
// shuffled loader, the per-epoch orders (a stored shuffle, or ImplicitOrder
// for sources of many samples) and EpochWalk, a rank's walk through them.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_DATA_SHARDING_H
#define OASR_RUNTIME_DATA_SHARDING_H

#include "oasr/Runtime/DataLoader.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace oasr::rt::data {

inline llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

inline llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return fail(path + ": " + buf.getError().message());
  return std::move(*buf);
}

/// "epoch E pos P": a shuffled loader's position; "epoch E from G pos P"
/// when the epoch was recut at its G-th sample for another number of ranks
/// (a resized resume).
inline std::string shardState(uint64_t epoch, size_t from, size_t pos) {
  return "epoch " + std::to_string(epoch) +
         (from ? " from " + std::to_string(from) : std::string()) + " pos " +
         std::to_string(pos);
}

inline llvm::Error badState(llvm::StringRef what, llvm::StringRef state) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "data state '%s' does not fit %s (saved by another data source?)",
      state.take_front(60).str().c_str(), what.str().c_str());
}

/// Parses shardState's text.
inline llvm::Error parseShardState(llvm::StringRef what, llvm::StringRef state,
                                   uint64_t &epoch, size_t &from, size_t &pos) {
  llvm::SmallVector<llvm::StringRef, 6> parts;
  state.split(parts, ' ');
  unsigned long long e = 0, g = 0, p = 0;
  bool recut = parts.size() == 6;
  if ((parts.size() != 4 && !recut) || parts[0] != "epoch" ||
      parts[1].getAsInteger(10, e) ||
      (recut && (parts[2] != "from" || parts[3].getAsInteger(10, g))) ||
      parts[parts.size() - 2] != "pos" ||
      parts[parts.size() - 1].getAsInteger(10, p))
    return badState(what, state);
  epoch = e;
  from = size_t(g);
  pos = size_t(p);
  return llvm::Error::success();
}

/// A random generator's state as text (the standard's stream format).
inline std::string rngState(const std::mt19937_64 &rng) {
  std::ostringstream os;
  os << rng;
  return "mt19937_64 " + os.str();
}

inline llvm::Error parseRngState(llvm::StringRef what, llvm::StringRef state,
                                 std::mt19937_64 &rng) {
  if (!state.consume_front("mt19937_64 "))
    return badState(what, state);
  std::istringstream is(state.str());
  std::mt19937_64 restored;
  is >> restored;
  if (is.fail())
    return badState(what, state);
  rng = restored;
  return llvm::Error::success();
}

/// splitmix64: a counter-based hash, so a value depends only on its index.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A permutation of [0, count) drawn from (seed, epoch) without storing
/// it, for sources of many samples (a token corpus's windows): element i is
/// i through a 4-round Feistel network on the even number of bits that
/// holds count, walked again while it lands at or past count (a bijection
/// of [0, count), under 4 walks expected).
class ImplicitOrder {
public:
  ImplicitOrder(int64_t count, uint64_t seed, uint64_t epoch) : count(count) {
    while ((int64_t(1) << (2 * half)) < count)
      ++half;
    for (int r = 0; r < 4; ++r)
      keys[r] = mix64(seed * 0x9E3779B97F4A7C15ull + epoch * 4 + uint64_t(r));
  }
  int64_t at(int64_t i) const {
    uint64_t x = uint64_t(i);
    do
      x = round4(x);
    while (x >= uint64_t(count));
    return int64_t(x);
  }

private:
  uint64_t round4(uint64_t x) const {
    const uint64_t mask = (uint64_t(1) << half) - 1;
    uint64_t l = x >> half, r = x & mask;
    for (uint64_t k : keys) {
      uint64_t t = l ^ (mix64(r ^ k) & mask);
      l = r;
      r = t;
    }
    return (l << half) | r;
  }
  int64_t count;
  int half = 1;
  uint64_t keys[4];
};

/// This rank's samples of one epoch: a permutation of [0, count) drawn from
/// (seed, epoch), the same on every rank; from its `from`-th element on,
/// element from + i goes to rank i % size.
inline std::vector<int64_t> epochShard(int64_t count, int rank, int size,
                                       uint64_t seed, uint64_t epoch,
                                       size_t from = 0) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + epoch);
  for (size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[size_t(rng() % i)]);
  std::vector<int64_t> mine;
  for (size_t i = from + size_t(rank); i < order.size(); i += size_t(size))
    mine.push_back(order[i]);
  return mine;
}

/// This rank's walk through `count` samples, epoch after epoch: each epoch
/// a new shuffled shard (epochShard); its position is the loader's state.
class EpochWalk {
public:
  /// `implicit`: the order is an ImplicitOrder, computed as it is read
  /// (no memory per sample), instead of epochShard's stored shuffle.
  EpochWalk(int64_t count, int rank, int size, uint64_t seed,
            bool implicit = false)
      : count(count), rank(rank), size(size), seed(seed), implicit(implicit) {
    newEpoch();
  }
  /// The next sample index, starting a new epoch when this one is done.
  int64_t next() {
    while (pos >= shardSize) {
      ++epoch;
      from = 0;
      newEpoch();
    }
    if (implicit)
      return order->at(int64_t(from) + rank + int64_t(pos++) * size);
    return mine[pos++];
  }
  /// The epoch of the sample next() gave last.
  uint64_t currentEpoch() const { return epoch; }
  /// Samples per epoch on this rank.
  int64_t perRank() const { return (count - rank + size - 1) / size; }
  std::string save() const { return shardState(epoch, from, pos); }
  llvm::Error restore(llvm::StringRef what, llvm::StringRef state) {
    uint64_t e = 0;
    size_t g = 0, p = 0;
    if (auto err = parseShardState(what, state, e, g, p))
      return err;
    if (g > size_t(count))
      return badState(what, state);
    epoch = e;
    from = g;
    newEpoch();
    if (p > shardSize)
      return badState(what, state);
    pos = p;
    return llvm::Error::success();
  }
  /// Continues the walks of `states.size()` ranks (each one's save()) as
  /// this rank of `size`: the epoch is recut after the samples every old
  /// rank has read (a rank ahead of the slowest re-reads at most its lead).
  llvm::Error restoreResized(llvm::StringRef what,
                             const std::vector<std::string> &states) {
    const size_t oldSize = states.size();
    uint64_t slowest = UINT64_MAX;
    size_t done = SIZE_MAX;
    for (const std::string &s : states) {
      uint64_t e = 0;
      size_t g = 0, p = 0;
      if (auto err = parseShardState(what, s, e, g, p))
        return err;
      // Samples [0, g + p * oldSize) of epoch e: read by this rank's turn.
      size_t read = std::min(g + p * oldSize, size_t(count));
      if (e < slowest || (e == slowest && read < done)) {
        slowest = e;
        done = read;
      }
    }
    if (oldSize == 0 || slowest == UINT64_MAX)
      return badState(what, "");
    epoch = slowest;
    from = done;
    newEpoch();
    pos = 0;
    return llvm::Error::success();
  }

private:
  void newEpoch() {
    pos = 0;
    if (implicit) {
      order.emplace(count, seed, epoch);
      int64_t left = count - int64_t(from) - rank;
      shardSize = left > 0 ? size_t((left + size - 1) / size) : 0;
      return;
    }
    mine = epochShard(count, rank, size, seed, epoch, from);
    shardSize = mine.size();
  }

  int64_t count;
  int rank, size;
  uint64_t seed, epoch = 0;
  bool implicit;
  size_t from = 0; ///< the sample of the epoch its shards start at
  std::vector<int64_t> mine;
  std::optional<ImplicitOrder> order;
  size_t shardSize = 0, pos = 0;
};

/// A loader that walks its samples with an EpochWalk: its description,
/// shard size and position record.
class WalkedLoader : public DataLoader {
public:
  WalkedLoader(std::string what, EpochWalk walk)
      : what(std::move(what)), walk(std::move(walk)) {}
  std::string describe() const override { return what; }
  int64_t trainSize() const override { return walk.perRank(); }
  std::string saveState() const override { return walk.save(); }
  llvm::Error restoreState(llvm::StringRef state) override {
    return walk.restore(what, state);
  }
  llvm::Error restoreResized(const std::vector<std::string> &states,
                             int) override {
    return walk.restoreResized(what, states);
  }

protected:
  std::string what;
  EpochWalk walk;
};

/// An image decoded to `c` interleaved 8-bit channels.
struct Pixels {
  int64_t w = 0, h = 0;
  std::vector<uint8_t> data;
};

/// A JPEG or PNG file's bytes decoded to `c` (1 or 3) channels; the error
/// (what is wrong with the file), or empty (ImageFolder.cpp).
std::string decodeImage(llvm::StringRef bytes, int64_t c, Pixels &out);

/// A crop [y, y + h) x [x, x + w) of an image, in its pixels.
struct Crop {
  double y = 0, x = 0, h = 0, w = 0;
};
/// torchvision's RandomResizedCrop.get_params, and the evaluation crop.
Crop randomResizedCrop(int64_t h, int64_t w, std::mt19937_64 &rng);
Crop centerCrop(int64_t h, int64_t w, int64_t oh, int64_t ow);
/// The crop of `px` resampled to [c, oh, ow] f32 in [0, 1].
void resample(const Pixels &px, int64_t c, Crop crop, int64_t oh, int64_t ow,
              float *dst);

/// --data=imagefolder:DIR (ImageFolder.cpp).
llvm::Expected<std::unique_ptr<DataLoader>>
loadImageFolder(llvm::StringRef dir, const SampleShape &shape, int rank,
                int size, uint64_t seed, const ImageOptions &options);

} // namespace oasr::rt::data

#endif // OASR_RUNTIME_DATA_SHARDING_H
