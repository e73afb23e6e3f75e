//===- DataLoader.h - Training data, sharded by rank --------------*- C++
//-*-===//
//
// Data sources for oasr-run: seeded synthetic data and real datasets in
// their standard formats (MNIST IDX, CIFAR-10 binary), sharded by rank and
// shuffled per epoch deterministically from --seed.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_DATALOADER_H
#define OASR_RUNTIME_DATALOADER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace oasr::rt {

/// What the model expects per sample.
struct SampleShape {
  int64_t features = 0; ///< f32 values per sample (product of input dims 1..)
  int64_t classes = 0;  ///< label range [0, classes); 0 when unknown
};

/// A dataset split held in memory: `count` samples, each `features` values
/// stored either as bytes (scaled by 1/255 when read) or as floats.
struct Dataset {
  int64_t count = 0;
  int64_t features = 0;
  std::vector<uint8_t> bytes;  ///< count * features, or empty
  std::vector<float> floats;   ///< count * features, or empty
  std::vector<int64_t> labels; ///< count
  /// Writes sample `i` as floats to `dst`.
  void sample(int64_t i, float *dst) const;
};

/// Batches of one rank's shard.
class DataLoader {
public:
  virtual ~DataLoader();
  /// "synthetic", "mnist:DIR", ... for the log.
  virtual std::string describe() const = 0;
  /// Training samples of this rank's shard (0 for endless synthetic data).
  virtual int64_t trainSize() const = 0;
  /// Fills the next batch of `n` samples of this rank's shard.
  virtual void nextBatch(float *images, int64_t *labels, int64_t n) = 0;
  /// The held-out split of this rank (null when the source has none).
  virtual const Dataset *testSet() const { return nullptr; }
  /// Test samples of this rank's shard: indices into testSet().
  virtual const std::vector<int64_t> &testShard() const { return noShard; }

private:
  std::vector<int64_t> noShard;
};

/// Parses --data=SPEC: `synthetic`, `mnist:DIR` (train-images-idx3-ubyte,
/// train-labels-idx1-ubyte and optionally t10k-*; float IDX files accepted),
/// `cifar10:DIR` (data_batch_{1..5}.bin, test_batch.bin). Every rank checks
/// that samples have `shape.features` values and labels fit `shape.classes`;
/// errors name the file and what is wrong.
llvm::Expected<std::unique_ptr<DataLoader>>
createDataLoader(llvm::StringRef spec, const SampleShape &shape, int rank,
                 int size, uint64_t seed);

/// Reads an IDX file (unsigned byte or float data) into `data` (samples x
/// features) or `labels` (1-D). Exposed for tests.
llvm::Error readIdxImages(llvm::StringRef path, Dataset &data);
llvm::Error readIdxLabels(llvm::StringRef path, std::vector<int64_t> &labels);

} // namespace oasr::rt

#endif // OASR_RUNTIME_DATALOADER_H
