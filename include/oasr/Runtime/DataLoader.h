//===- DataLoader.h - Training data, sharded by rank ------------*- C++ -*-===//
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
  int64_t features = 0; ///< values per sample (product of input dims 1..)
  int64_t classes = 0;  ///< label range [0, classes); 0 when unknown
  /// The input is token ids (an integer tensor [N, T]; T = features).
  bool tokens = false;
  /// Token ids lie in [0, vocab) (0: unknown).
  int64_t vocab = 0;
  /// Labels per sample: 1 (a class per sample or sequence) or T (the next
  /// token at every position, for causal language models).
  int64_t labelsPerSample = 1;
  /// The per-sample input dimensions ([C, H, W] for images; empty when
  /// unknown), which decoded images are fitted to.
  std::vector<int64_t> dims;
};

/// How image sources turn a file into a sample (docs/runtime.md, "Data").
struct ImageOptions {
  /// --augment: "none", or a comma list of `resized-crop` (torchvision's
  /// RandomResizedCrop to the model's size), `crop:PAD` (a random crop of
  /// the image padded by PAD) and `flip` (horizontal, p = 0.5).
  std::string augment = "none";
  /// --normalize: "none" (values in [0, 1]), "imagenet", or
  /// "M1,M2,M3/S1,S2,S3": (x - mean) / std per channel.
  std::string normalize = "none";
  /// Evaluation: no augmentation, whatever `augment` says.
  bool eval = false;
  /// --bad-samples: a file that cannot be read stops the run ("error"), or
  /// is skipped with a warning and the next sample drawn ("skip").
  std::string badSamples = "error";
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
  /// True for token sources (nextTokens instead of nextBatch).
  virtual bool givesTokens() const { return false; }
  /// Fills the next `n` sequences of token ids (n x T) and their labels
  /// (n x labelsPerSample). Only token sources implement it.
  virtual void nextTokens(int64_t *ids, int64_t *labels, int64_t n) {
    (void)ids, (void)labels, (void)n;
  }
  /// This rank's position in its training stream, as one line of text: the
  /// epoch and the offset into its shuffled shard, or the state of the random
  /// generator that draws synthetic samples. A checkpoint saves it;
  /// `restoreState` continues the stream from it, so the samples that follow
  /// are the ones the saving run would have read next.
  virtual std::string saveState() const = 0;
  /// Continues from a `saveState()` of a loader with the same source, rank,
  /// ranks and seed. Errors name what does not fit.
  virtual llvm::Error restoreState(llvm::StringRef state) = 0;
  /// Continues from the saveState() of every rank of a run with another
  /// number of ranks (`states[r]`: old rank r's), as rank `rank` of this
  /// one (--allow-resize). A shuffled source recuts the rest of the epoch
  /// after the samples the slowest old rank had reached, so no sample is
  /// skipped; a per-rank random stream continues where old rank `rank` left
  /// it, or starts fresh on a rank the old run did not have.
  virtual llvm::Error restoreResized(const std::vector<std::string> &states,
                                     int rank) {
    if (rank < int(states.size()))
      return restoreState(states[size_t(rank)]);
    return llvm::Error::success();
  }
  /// One line for the run's summary on what reading the data cost (empty
  /// when there is nothing to say).
  virtual std::string report() const { return ""; }
  /// A --data spec of this source's held-out split read as a source of its
  /// own (imagefolder's DIR/val), for evaluation when --eval-data is not
  /// given; empty when there is none or testSet() holds it.
  virtual std::string heldOutSpec() const { return ""; }
  /// The held-out split of this rank (null when the source has none).
  virtual const Dataset *testSet() const { return nullptr; }
  /// Test samples of this rank's shard: indices into testSet().
  virtual const std::vector<int64_t> &testShard() const { return noShard; }

private:
  std::vector<int64_t> noShard;
};

/// Parses --data=SPEC: `synthetic` (images, or token ids when
/// `shape.tokens`), `tokens:FILE[:u16|:u32]` (a flat little-endian file of
/// token ids cut into windows of T + 1 tokens at stride T: the first T are
/// the input, the last T the next-token labels), `mnist:DIR`
/// (train-images-idx3-ubyte,
/// train-labels-idx1-ubyte and optionally t10k-*; float IDX files accepted),
/// `cifar10:DIR` (data_batch_{1..5}.bin, test_batch.bin). Every rank checks
/// that samples have `shape.features` values and labels fit `shape.classes`;
/// errors name the file and what is wrong.
llvm::Expected<std::unique_ptr<DataLoader>>
createDataLoader(llvm::StringRef spec, const SampleShape &shape, int rank,
                 int size, uint64_t seed, const ImageOptions &images = {});

/// Reads an IDX file (unsigned byte or float data) into `data` (samples x
/// features) or `labels` (1-D). Exposed for tests.
llvm::Error readIdxImages(llvm::StringRef path, Dataset &data);
llvm::Error readIdxLabels(llvm::StringRef path, std::vector<int64_t> &labels);

} // namespace oasr::rt

#endif // OASR_RUNTIME_DATALOADER_H
