//===- ORTCheckpointTest.cpp - ORT checkpoints written and read back ------===//
//
// Writes ONNX Runtime checkpoints with oasr's own writer and reads them back
// byte for byte (parameters, AdamW's moments, the step, properties); checks
// that the reader names the file for every broken input: truncated or
// corrupt bytes, another FlatBuffer, a newer format, a tensor whose data
// does not match its dims. Needs no onnxruntime.
//
//===----------------------------------------------------------------------===//

#include "oasr/Import/ORTCheckpoint.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <numeric>

using namespace oasr::ort;

namespace {

class ORTCheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("oasr-ortckpt", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string write(llvm::StringRef name, const std::string &bytes) {
    llvm::SmallString<128> p(dir);
    llvm::sys::path::append(p, name);
    std::ofstream(std::string(p), std::ios::binary) << bytes;
    return std::string(p);
  }

  /// A tensor of `n` floats 0.5 * i + offset, stored in `store`.
  CheckpointTensor floats(const std::string &name, std::vector<int64_t> dims,
                          float offset) {
    int64_t n = std::accumulate(dims.begin(), dims.end(), int64_t(1),
                                std::multiplies<int64_t>());
    store.emplace_back(size_t(n));
    for (int64_t i = 0; i < n; ++i)
      store.back()[size_t(i)] = 0.5f * float(i) + offset;
    CheckpointTensor t;
    t.name = name;
    t.dims = std::move(dims);
    t.dataType = 1;
    t.bytes = {reinterpret_cast<const uint8_t *>(store.back().data()),
               size_t(n) * sizeof(float)};
    return t;
  }

  CheckpointContent sample() {
    CheckpointContent c;
    c.trainable = {floats("fc.weight", {3, 4}, 1), floats("fc.bias", {3}, 2)};
    c.frozen = {floats("bn.running_mean", {3}, 3)};
    OptimizerGroup g;
    g.name = "group0";
    g.step = 7;
    g.initialLearningRate = 0.01f;
    for (const CheckpointTensor &p : c.trainable) {
      ParameterOptimizerState s;
      s.param = p.name;
      for (auto [name, off] : {std::make_pair(kMomentum0, 10.0f),
                               std::make_pair(kMomentum1, 20.0f)}) {
        s.momentums.push_back(floats(name.str(), p.dims, off));
      }
      g.states.push_back(std::move(s));
    }
    c.optimizerGroups.push_back(std::move(g));
    c.properties.ints = {{"epoch", 3}};
    c.properties.floats = {{"best", 0.25f}};
    c.properties.strings = {{"note", "oasr"}};
    return c;
  }

  static std::vector<uint8_t> bytesOf(const CheckpointTensor &t) {
    return {t.bytes.begin(), t.bytes.end()};
  }

  llvm::SmallString<128> dir;
  std::vector<std::vector<float>> store;
};

TEST_F(ORTCheckpointTest, RoundTrip) {
  CheckpointContent c = sample();
  std::string bytes = serializeCheckpoint(c);
  std::string p = write("checkpoint", bytes);
  auto read = readCheckpoint(p);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->version, kCheckpointVersion);
  ASSERT_EQ(read->trainable.size(), 2u);
  ASSERT_EQ(read->frozen.size(), 1u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(read->trainable[i].name, c.trainable[i].name);
    EXPECT_EQ(read->trainable[i].dims, c.trainable[i].dims);
    EXPECT_EQ(read->trainable[i].dataType, 1);
    EXPECT_EQ(bytesOf(read->trainable[i]), bytesOf(c.trainable[i]));
    // The offset is where the bytes lie in the file.
    EXPECT_EQ(0, std::memcmp(bytes.data() + read->trainable[i].offset,
                             c.trainable[i].bytes.data(),
                             c.trainable[i].bytes.size()));
  }
  EXPECT_EQ(bytesOf(*read->find("bn.running_mean")), bytesOf(c.frozen[0]));
  ASSERT_EQ(read->optimizerGroups.size(), 1u);
  const OptimizerGroup &g = read->optimizerGroups[0];
  EXPECT_EQ(g.name, "group0");
  EXPECT_EQ(g.step, 7);
  EXPECT_FLOAT_EQ(g.initialLearningRate, 0.01f);
  const ParameterOptimizerState *s = g.find("fc.bias");
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->find(kMomentum1));
  EXPECT_EQ(bytesOf(*s->find(kMomentum1)),
            bytesOf(*c.optimizerGroups[0].find("fc.bias")->find(kMomentum1)));
  EXPECT_EQ(read->properties.ints, c.properties.ints);
  EXPECT_EQ(read->properties.floats, c.properties.floats);
  EXPECT_EQ(read->properties.strings, c.properties.strings);
}

TEST_F(ORTCheckpointTest, Errors) {
  std::string bytes = serializeCheckpoint(sample());
  auto message = [&](const std::string &name, const std::string &content) {
    auto read = readCheckpoint(write(name, content));
    EXPECT_FALSE(bool(read));
    return read ? std::string() : llvm::toString(read.takeError());
  };
  // Truncated: the identifier is there, the tables are not.
  std::string cut = message("cut", bytes.substr(0, bytes.size() / 2));
  EXPECT_NE(cut.find("truncated or corrupt ONNX Runtime checkpoint"),
            std::string::npos)
      << cut;
  EXPECT_NE(cut.find("/cut:"), std::string::npos) << cut;
  // Another file.
  std::string other = message("other", std::string(64, 'x'));
  EXPECT_NE(other.find("not an ONNX Runtime checkpoint"), std::string::npos)
      << other;
  // A newer format.
  CheckpointContent newer = sample();
  newer.version = kCheckpointVersion + 1;
  std::string v = message("newer", serializeCheckpoint(newer));
  EXPECT_NE(v.find("checkpoint format version 3 is not supported"),
            std::string::npos)
      << v;
  // Data that does not fill the dims.
  CheckpointContent shortData = sample();
  shortData.trainable[0].dims = {3, 5};
  std::string d = message("short", serializeCheckpoint(shortData));
  EXPECT_NE(d.find("tensor 'fc.weight' has 48 bytes of data; its dims and "
                   "type FLOAT need 60"),
            std::string::npos)
      << d;
  std::string missing = message("absent/none", "");
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
}

} // namespace
