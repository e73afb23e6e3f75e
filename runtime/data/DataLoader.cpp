//===- DataLoader.cpp - Synthetic, MNIST IDX and CIFAR-10 loaders --------===//

#include "oasr/Runtime/DataLoader.h"

#include "Sharding.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>

namespace oasr::rt {

using namespace data;

DataLoader::~DataLoader() = default;

void Dataset::sample(int64_t i, float *dst) const {
  if (!floats.empty()) {
    std::memcpy(dst, floats.data() + i * features, size_t(features) * 4);
    return;
  }
  const uint8_t *src = bytes.data() + i * features;
  for (int64_t k = 0; k < features; ++k)
    dst[k] = float(src[k]) * (1.0f / 255.0f);
}

static uint32_t be32(const unsigned char *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 |
         uint32_t(p[3]);
}

/// Parses an IDX header: type code, dims. Returns the data offset.
static llvm::Expected<size_t> idxHeader(llvm::StringRef path,
                                        llvm::StringRef data, uint8_t &type,
                                        std::vector<int64_t> &dims) {
  auto *p = reinterpret_cast<const unsigned char *>(data.data());
  if (data.size() >= 2 && p[0] == 0x1f && p[1] == 0x8b)
    return fail(path + ": gzip-compressed; gunzip it first");
  if (data.size() < 4 || p[0] != 0 || p[1] != 0)
    return fail(path + ": not an IDX file (bad magic number)");
  type = p[2];
  unsigned rank = p[3];
  if (type != 0x08 && type != 0x0D)
    return fail(path + ": IDX element type 0x" +
                llvm::utohexstr(type, /*LowerCase=*/false, /*Width=*/2) +
                " is not supported (unsigned byte 0x08 or float 0x0D)");
  if (rank == 0 || data.size() < 4 + 4 * size_t(rank))
    return fail(path + ": truncated IDX header");
  dims.clear();
  size_t elems = 1;
  for (unsigned k = 0; k < rank; ++k) {
    dims.push_back(be32(p + 4 + 4 * k));
    elems *= size_t(dims.back());
  }
  size_t off = 4 + 4 * size_t(rank);
  size_t elemSize = type == 0x08 ? 1 : 4;
  if (data.size() != off + elems * elemSize)
    return fail(path + ": IDX header announces " + llvm::Twine(elems) +
                " elements but the file holds " +
                llvm::Twine((data.size() - off) / elemSize));
  return off;
}

/// An IDX file read and its header parsed: the element type, the dims and
/// the elements' bytes.
struct IdxFile {
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  uint8_t type = 0;
  std::vector<int64_t> dims;
  llvm::StringRef elements;
};

static llvm::Expected<IdxFile> readIdx(llvm::StringRef path) {
  IdxFile f;
  auto buf = readFile(path);
  if (!buf)
    return buf.takeError();
  f.buffer = std::move(*buf);
  llvm::StringRef data = f.buffer->getBuffer();
  auto off = idxHeader(path, data, f.type, f.dims);
  if (!off)
    return off.takeError();
  f.elements = data.drop_front(*off);
  return std::move(f);
}

llvm::Error readIdxImages(llvm::StringRef path, Dataset &out) {
  llvm::Expected<IdxFile> f = readIdx(path);
  if (!f)
    return f.takeError();
  const uint8_t type = f->type;
  const std::vector<int64_t> &dims = f->dims;
  out.count = dims[0];
  out.features = 1;
  for (size_t k = 1; k < dims.size(); ++k)
    out.features *= dims[k];
  const char *p = f->elements.data();
  if (type == 0x08) {
    out.bytes.assign(p, p + size_t(out.count * out.features));
    out.floats.clear();
  } else {
    out.floats.resize(size_t(out.count * out.features));
    // IDX stores big-endian floats.
    for (size_t i = 0; i < out.floats.size(); ++i) {
      uint32_t bits = be32(reinterpret_cast<const unsigned char *>(p) + 4 * i);
      std::memcpy(&out.floats[i], &bits, 4);
    }
    out.bytes.clear();
  }
  return llvm::Error::success();
}

llvm::Error readIdxLabels(llvm::StringRef path, std::vector<int64_t> &labels) {
  llvm::Expected<IdxFile> f = readIdx(path);
  if (!f)
    return f.takeError();
  if (f->dims.size() != 1 || f->type != 0x08)
    return fail(path + ": a label file is a 1-D unsigned-byte IDX file");
  labels.assign(f->elements.begin(), f->elements.end());
  for (int64_t &l : labels)
    l = int64_t(uint8_t(l));
  return llvm::Error::success();
}

namespace {
/// Shared logic: per-epoch shuffled order over the whole train split,
/// sample i of the order goes to rank i % size.
class ShardedLoader : public WalkedLoader {
public:
  ShardedLoader(std::string what, Dataset train, Dataset test, int rank,
                int size, uint64_t seed)
      : WalkedLoader(std::move(what), EpochWalk(train.count, rank, size, seed)),
        train(std::move(train)), test(std::move(test)) {
    for (int64_t i = rank; i < this->test.count; i += size)
      shard.push_back(i);
  }
  void nextBatch(float *images, int64_t *labels, int64_t n) override {
    for (int64_t k = 0; k < n; ++k) {
      int64_t i = walk.next();
      train.sample(i, images + k * train.features);
      labels[k] = train.labels[size_t(i)];
    }
  }
  const Dataset *testSet() const override {
    return test.count ? &test : nullptr;
  }
  const std::vector<int64_t> &testShard() const override { return shard; }

private:
  Dataset train, test;
  std::vector<int64_t> shard;
};

/// Seeded synthetic classification data that is learnable: sample = its
/// class's prototype (the same on every rank) + N(0, 1) noise, each rank
/// drawing its own stream (seed, rank). Prototype values are hashed from
/// (seed, class, feature) when needed instead of stored: an ImageNet-shaped
/// model (1000 classes x 150528 values) would otherwise hold 600 MB of
/// prototypes.
class SyntheticLoader : public DataLoader {
public:
  SyntheticLoader(const SampleShape &shape, int rank, uint64_t seed)
      : shape(shape), rng(seed * 1000003ull + uint64_t(rank) + 1),
        protoSeed(mix64(seed ^ 0x5EEDull)) {}
  std::string describe() const override { return "synthetic"; }
  int64_t trainSize() const override { return 0; }
  std::string saveState() const override { return rngState(rng); }
  llvm::Error restoreState(llvm::StringRef state) override {
    return parseRngState("synthetic", state, rng);
  }
  void nextBatch(float *images, int64_t *labels, int64_t n) override {
    std::normal_distribution<float> noise(0.0f, 1.0f);
    int64_t classes = std::max<int64_t>(shape.classes, 1);
    for (int64_t k = 0; k < n; ++k) {
      int64_t c = int64_t(rng() % uint64_t(classes));
      labels[k] = c;
      uint64_t row = mix64(protoSeed + uint64_t(c)) * uint64_t(shape.features);
      float *dst = images + k * shape.features;
      for (int64_t f = 0; f < shape.features; ++f)
        dst[f] = prototype(row + uint64_t(f)) + noise(rng);
    }
  }

private:
  /// ~N(0, 1): the sum of four 16-bit uniforms of one hash (Irwin-Hall),
  /// centred and scaled to unit variance.
  static float prototype(uint64_t index) {
    uint64_t h = mix64(index);
    float sum = float(h & 0xFFFF) + float((h >> 16) & 0xFFFF) +
                float((h >> 32) & 0xFFFF) + float(h >> 48);
    return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
  }

  SampleShape shape;
  std::mt19937_64 rng;
  uint64_t protoSeed;
};

/// `dir`/`name`.
std::string fileIn(llvm::StringRef dir, const llvm::Twine &name) {
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, name);
  return std::string(p);
}

/// Checks samples against the model's input and labels against its classes;
/// errors name the file at fault (`images`, or `labels` for the labels).
llvm::Error checkShape(const std::string &images, const std::string &labels,
                       const Dataset &d, const SampleShape &shape) {
  if (d.features != shape.features)
    return fail(images + ": samples have " + llvm::Twine(d.features) +
                " values but the model's input takes " +
                llvm::Twine(shape.features) + " per sample");
  if (int64_t(d.labels.size()) != d.count)
    return fail(labels + ": " + llvm::Twine(d.labels.size()) +
                " labels for the " + llvm::Twine(d.count) + " samples of " +
                images);
  for (size_t i = 0; i < d.labels.size(); ++i) {
    int64_t l = d.labels[i];
    if (l < 0 || (shape.classes > 0 && l >= shape.classes))
      return fail(labels + ": label " + llvm::Twine(l) + " (sample " +
                  llvm::Twine(i) + ") is outside the model's " +
                  llvm::Twine(shape.classes) + " classes");
  }
  return llvm::Error::success();
}

/// Reads one MNIST IDX pair, `prefix`-images-idx3-ubyte and
/// `prefix`-labels-idx1-ubyte in `dir`, checked against the model.
llvm::Error readMnistSplit(llvm::StringRef dir, llvm::StringRef prefix,
                           const SampleShape &shape, Dataset &d) {
  std::string images = fileIn(dir, prefix + "-images-idx3-ubyte");
  std::string labels = fileIn(dir, prefix + "-labels-idx1-ubyte");
  if (auto err = readIdxImages(images, d))
    return err;
  if (auto err = readIdxLabels(labels, d.labels))
    return err;
  return checkShape(images, labels, d, shape);
}

llvm::Expected<std::unique_ptr<DataLoader>> loadMnist(llvm::StringRef dir,
                                                      const SampleShape &shape,
                                                      int rank, int size,
                                                      uint64_t seed) {
  if (!llvm::sys::fs::is_directory(dir))
    return fail("--data=mnist:" + dir + ": no such directory");
  Dataset train, test;
  if (auto err = readMnistSplit(dir, "train", shape, train))
    return std::move(err);
  // The test split is optional.
  if (llvm::sys::fs::exists(fileIn(dir, "t10k-images-idx3-ubyte")))
    if (auto err = readMnistSplit(dir, "t10k", shape, test))
      return std::move(err);
  return std::make_unique<ShardedLoader>(("mnist:" + dir).str(),
                                         std::move(train), std::move(test),
                                         rank, size, seed);
}

/// Appends the records of one CIFAR-10 binary batch file to `d` after
/// checking them against the model (errors name the file).
llvm::Error readCifarBatch(const std::string &file, const SampleShape &shape,
                           Dataset &d) {
  auto buf = readFile(file);
  if (!buf)
    return buf.takeError();
  llvm::StringRef data = (*buf)->getBuffer();
  const size_t record = 1 + 3072;
  if (data.empty() || data.size() % record != 0)
    return fail(file + ": not a CIFAR-10 binary batch (size " +
                llvm::Twine(data.size()) + " is not a multiple of 3073)");
  size_t n = data.size() / record;
  Dataset part;
  part.count = int64_t(n);
  part.features = 3072;
  part.bytes.reserve(n * 3072);
  for (size_t i = 0; i < n; ++i) {
    const char *r = data.data() + i * record;
    part.labels.push_back(int64_t(uint8_t(r[0])));
    part.bytes.insert(part.bytes.end(), r + 1, r + record);
  }
  if (auto err = checkShape(file, file, part, shape))
    return err;
  d.features = part.features;
  d.labels.insert(d.labels.end(), part.labels.begin(), part.labels.end());
  d.bytes.insert(d.bytes.end(), part.bytes.begin(), part.bytes.end());
  d.count += part.count;
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<DataLoader>> loadCifar(llvm::StringRef dir,
                                                      const SampleShape &shape,
                                                      int rank, int size,
                                                      uint64_t seed) {
  if (!llvm::sys::fs::is_directory(dir))
    return fail("--data=cifar10:" + dir + ": no such directory");
  auto path = [&](const llvm::Twine &name) { return fileIn(dir, name); };
  Dataset train, test;
  for (int b = 1; b <= 5; ++b)
    if (auto err = readCifarBatch(path("data_batch_" + llvm::Twine(b) + ".bin"),
                                  shape, train))
      return std::move(err);
  if (llvm::sys::fs::exists(path("test_batch.bin")))
    if (auto err = readCifarBatch(path("test_batch.bin"), shape, test))
      return std::move(err);
  return std::make_unique<ShardedLoader>(("cifar10:" + dir).str(),
                                         std::move(train), std::move(test),
                                         rank, size, seed);
}

//===----------------------------------------------------------------------===//
// Token sources
//===----------------------------------------------------------------------===//

/// Seeded synthetic token sequences with structure a model can learn: each
/// next token is (7 * token + 3) mod vocab nine times in ten, else random.
/// A sequence's class label (one label per sample) is its first token mod
/// the classes; next-token labels are the sequence shifted by one.
class SyntheticTokenLoader : public DataLoader {
public:
  SyntheticTokenLoader(const SampleShape &shape, int rank, uint64_t seed)
      : shape(shape), rng(seed * 1000003ull + uint64_t(rank) + 1) {}
  std::string describe() const override { return "synthetic tokens"; }
  int64_t trainSize() const override { return 0; }
  std::string saveState() const override { return rngState(rng); }
  llvm::Error restoreState(llvm::StringRef state) override {
    return parseRngState("synthetic tokens", state, rng);
  }
  void nextBatch(float *, int64_t *, int64_t) override {}
  bool givesTokens() const override { return true; }
  void nextTokens(int64_t *ids, int64_t *labels, int64_t n) override {
    const int64_t t = shape.features, v = shape.vocab;
    std::vector<int64_t> seq(size_t(t + 1));
    for (int64_t k = 0; k < n; ++k) {
      seq[0] = int64_t(rng() % uint64_t(v));
      for (int64_t i = 1; i <= t; ++i)
        seq[size_t(i)] = rng() % 10 ? (7 * seq[size_t(i - 1)] + 3) % v
                                    : int64_t(rng() % uint64_t(v));
      std::copy(seq.begin(), seq.begin() + t, ids + k * t);
      if (shape.labelsPerSample == 1)
        labels[k] = seq[0] % std::max<int64_t>(shape.classes, 1);
      else
        std::copy(seq.begin() + 1, seq.end(), labels + k * t);
    }
  }

private:
  SampleShape shape;
  std::mt19937_64 rng;
};

/// A token file read where it lies: the file is mapped (llvm::MemoryBuffer)
/// and ids are decoded as windows are drawn, so memory stays flat however
/// large the corpus (nanoGPT's .bin of little-endian u16 or u32 ids).
struct TokenFile {
  std::unique_ptr<llvm::MemoryBuffer> buf;
  size_t width = 2;
  int64_t count = 0;

  uint32_t at(int64_t i) const {
    const auto *q =
        reinterpret_cast<const unsigned char *>(buf->getBufferStart()) +
        size_t(i) * width;
    return width == 2
               ? uint32_t(q[0] | q[1] << 8)
               : uint32_t(q[0] | q[1] << 8 | q[2] << 16 | uint32_t(q[3]) << 24);
  }
};

/// Windows of a token file, shuffled per epoch and sharded by rank as the
/// image loaders do: T + 1 tokens at stride T with next-token labels, or
/// (with one label per sequence) T tokens at stride T and `classes[k]`.
class TokenFileLoader : public WalkedLoader {
public:
  TokenFileLoader(std::string what, TokenFile file,
                  std::vector<int64_t> classes, const SampleShape &shape,
                  int rank, int size, uint64_t seed)
      : WalkedLoader(std::move(what),
                     EpochWalk(windowCount(file, classes, shape), rank, size,
                               seed, /*implicit=*/true)),
        file(std::move(file)), classes(std::move(classes)), shape(shape) {}
  void nextBatch(float *, int64_t *, int64_t) override {}
  bool givesTokens() const override { return true; }
  void nextTokens(int64_t *ids, int64_t *labels, int64_t n) override {
    const int64_t t = shape.features;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t w = walk.next() * t;
      for (int64_t i = 0; i < t; ++i)
        ids[k * t + i] = file.at(w + i);
      if (!classes.empty())
        labels[k] = classes[size_t(w / t)];
      else
        for (int64_t i = 0; i < t; ++i)
          labels[k * t + i] = file.at(w + i + 1);
    }
  }

private:
  /// T + 1 tokens at stride T with next-token labels, or one window per
  /// class label.
  static int64_t windowCount(const TokenFile &file,
                             const std::vector<int64_t> &classes,
                             const SampleShape &shape) {
    return classes.empty() ? (file.count - 1) / shape.features
                           : int64_t(classes.size());
  }

  TokenFile file;
  std::vector<int64_t> classes;
  SampleShape shape;
};

llvm::Expected<std::unique_ptr<DataLoader>> loadTokens(llvm::StringRef arg,
                                                       const SampleShape &shape,
                                                       int rank, int size,
                                                       uint64_t seed) {
  std::string spec = ("--data=tokens:" + arg).str();
  if (!shape.tokens)
    return fail(spec + ": the model's input is not integer token ids");
  if (shape.labelsPerSample != 1 && shape.labelsPerSample != shape.features)
    return fail(spec + ": the model's loss takes " +
                llvm::Twine(shape.labelsPerSample) +
                " labels per sequence of " + llvm::Twine(shape.features) +
                " tokens (expected 1 or one per token)");
  auto [path, type] = arg.rsplit(':');
  if (type != "u16" && type != "u32") {
    path = arg;
    type = "u16";
  }
  size_t width = type == "u16" ? 2 : 4;
  auto buf = readFile(path);
  if (!buf)
    return buf.takeError();
  llvm::StringRef data = (*buf)->getBuffer();
  if (data.size() % width != 0)
    return fail(path + ": " + llvm::Twine(data.size()) +
                " bytes is not a whole number of " + type + " token ids");
  size_t count = data.size() / width;
  int64_t window = shape.features + (shape.labelsPerSample == 1 ? 0 : 1);
  if (int64_t(count) < window)
    return fail(path + ": " + llvm::Twine(count) +
                " token(s), fewer than one window of " + llvm::Twine(window) +
                " (the model's sequence length" +
                (shape.labelsPerSample == 1 ? "" : " + 1") + ")");
  TokenFile file{std::move(*buf), width, int64_t(count)};
  // One streaming pass over the mapping: every id within the vocabulary.
  if (shape.vocab > 0)
    for (int64_t i = 0; i < file.count; ++i)
      if (int64_t id = file.at(i); id >= shape.vocab)
        return fail(path + ": token id " + llvm::Twine(id) +
                    " at byte offset " + llvm::Twine(uint64_t(i) * width) +
                    " is outside the model's vocabulary of " +
                    llvm::Twine(shape.vocab));
  // One label per sequence: sequences of T tokens, labels in FILE.labels.
  std::vector<int64_t> classes;
  if (shape.labelsPerSample == 1) {
    std::string labelPath = (path + ".labels").str();
    if (!llvm::sys::fs::exists(labelPath))
      return fail(spec +
                  ": the model takes one label per sequence; put them "
                  "in " +
                  labelPath + " (little-endian int64, one per " +
                  llvm::Twine(shape.features) + " tokens)");
    auto lbuf = readFile(labelPath);
    if (!lbuf)
      return lbuf.takeError();
    llvm::StringRef l = (*lbuf)->getBuffer();
    int64_t sequences = int64_t(count) / shape.features;
    if (l.size() % 8 != 0 || int64_t(l.size() / 8) != sequences)
      return fail(labelPath + ": " + llvm::Twine(l.size()) + " bytes; " + path +
                  " holds " + llvm::Twine(sequences) + " sequences of " +
                  llvm::Twine(shape.features) + " tokens, so 8 x " +
                  llvm::Twine(sequences) + " bytes expected");
    classes.resize(size_t(sequences));
    std::memcpy(classes.data(), l.data(), l.size());
    for (size_t i = 0; i < classes.size(); ++i)
      if (classes[i] < 0 || (shape.classes > 0 && classes[i] >= shape.classes))
        return fail(labelPath + ": label " + llvm::Twine(classes[i]) +
                    " (sequence " + llvm::Twine(i) +
                    ") is outside the model's " + llvm::Twine(shape.classes) +
                    " classes");
  }
  return std::make_unique<TokenFileLoader>(("tokens:" + arg).str(),
                                           std::move(file), std::move(classes),
                                           shape, rank, size, seed);
}

} // namespace

llvm::Expected<std::unique_ptr<DataLoader>>
createDataLoader(llvm::StringRef spec, const SampleShape &shape, int rank,
                 int size, uint64_t seed, const ImageOptions &images) {
  auto [kind, dir] = spec.split(':');
  if (shape.tokens && kind != "tokens" && kind != "synthetic" && !spec.empty())
    return fail("--data=" + spec +
                ": the model's input is token ids; use synthetic or "
                "tokens:FILE");
  if (spec == "synthetic" || spec.empty()) {
    if (!shape.tokens)
      return std::make_unique<SyntheticLoader>(shape, rank, seed);
    if (shape.vocab <= 0)
      return fail("--data=synthetic: the model's vocabulary is unknown (no "
                  "embedding Gather reads the input); give --vocab=N");
    return std::make_unique<SyntheticTokenLoader>(shape, rank, seed);
  }
  if (kind == "tokens" && !dir.empty())
    return loadTokens(dir, shape, rank, size, seed);
  if (kind == "imagefolder" && !dir.empty())
    return data::loadImageFolder(dir, shape, rank, size, seed, images);
  if (images.augment != "none" || images.normalize != "none")
    return fail("--augment and --normalize apply to imagefolder data, not "
                "--data=" +
                spec);
  if (kind == "mnist" && !dir.empty())
    return loadMnist(dir, shape, rank, size, seed);
  if (kind == "cifar10" && !dir.empty())
    return loadCifar(dir, shape, rank, size, seed);
  return fail("--data=" + spec +
              ": expected synthetic, tokens:FILE[:u16|:u32], mnist:DIR, "
              "cifar10:DIR or imagefolder:DIR");
}

} // namespace oasr::rt
