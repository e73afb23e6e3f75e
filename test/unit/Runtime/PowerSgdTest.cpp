//===- PowerSgdTest.cpp - PowerSGD on a fused group, one rank -------------===//
//
// On the one-process communicator (averaging is the identity): a matrix of
// rank <= r comes back whole, the error feedback holds exactly what the
// factors left out, vectors pass through, and a state saved and restored
// continues bit for bit. test/runtime/compress.test runs it on 2 MPI ranks.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/PowerSGD.h"
#include "oasr/Runtime/Communicator.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using namespace oasr::rt;

namespace {

/// A group of a 40 x 30 matrix and a 7-element vector (at element 1216,
/// after padding), compressed at `rank`.
struct Group {
  std::vector<float> buf = std::vector<float>(1216 + 16, -7.0f);
  GradGroup g;
  explicit Group(unsigned rank) {
    g.buffer.data = buf.data();
    g.buffer.desc.dtype = DType::F32;
    g.buffer.desc.shape = {int64_t(buf.size())};
    g.powerSgdRank = rank;
    g.spans = {{"w", 0, {40, 30}}, {"b", 1216, {7}}};
  }
  float *w() { return buf.data(); }
  float *b() { return buf.data() + 1216; }
};

std::vector<float> randomMatrix(std::mt19937 &rng, int rows, int cols,
                                int rank) {
  std::normal_distribution<float> n;
  std::vector<float> u(rows * rank), v(cols * rank), m(rows * cols, 0);
  for (float &x : u)
    x = n(rng);
  for (float &x : v)
    x = n(rng);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      for (int k = 0; k < rank; ++k)
        m[i * cols + j] += u[i * rank + k] * v[j * rank + k];
  return m;
}

double norm(const std::vector<float> &x) {
  double s = 0;
  for (float v : x)
    s += double(v) * v;
  return std::sqrt(s);
}

TEST(PowerSgd, LowRankComesBackWhole) {
  auto self = createSelfCommunicator();
  std::mt19937 rng(1);
  Group grp(2);
  std::vector<float> m = randomMatrix(rng, 40, 30, 2);
  std::copy(m.begin(), m.end(), grp.w());
  for (int i = 0; i < 7; ++i)
    grp.b()[i] = float(i) - 3.0f;
  PowerSgd ps(42);
  ps.reduce(*self, grp.g);
  std::vector<float> diff(m.size());
  for (size_t e = 0; e < m.size(); ++e)
    diff[e] = grp.w()[e] - m[e];
  EXPECT_LT(norm(diff), 1e-5 * norm(m));
  for (int i = 0; i < 7; ++i)
    EXPECT_EQ(grp.b()[i], float(i) - 3.0f);
  // The padding between the spans is not touched.
  EXPECT_EQ(grp.buf[1200], -7.0f);
  PowerSgd::Stats s = ps.stats();
  EXPECT_EQ(s.groups, 1u);
  EXPECT_EQ(s.wireFloats, uint64_t(2 * 40 + 7 + 2 * 30));
  EXPECT_EQ(s.denseFloats, uint64_t(40 * 30 + 7));
}

TEST(PowerSgd, ErrorFeedbackKeepsWhatTheFactorsLeaveOut) {
  auto self = createSelfCommunicator();
  std::mt19937 rng(2);
  Group grp(2);
  std::vector<float> m = randomMatrix(rng, 40, 30, 30); // full rank
  std::copy(m.begin(), m.end(), grp.w());
  PowerSgd ps(42);
  ps.reduce(*self, grp.g);
  std::vector<float> g1(grp.w(), grp.w() + m.size());
  // The error is M - G: sending a zero gradient next sends the error.
  std::vector<float> e = ps.saveLocal({"w", "b"});
  ASSERT_EQ(e.size(), m.size());
  std::vector<float> sum(m.size());
  for (size_t k = 0; k < m.size(); ++k)
    sum[k] = e[k] + g1[k] - m[k];
  EXPECT_LT(norm(sum), 1e-6 * norm(m));
  // Rank 2 of a full-rank matrix leaves a real error.
  EXPECT_GT(norm(e), 0.1 * norm(m));
  // Over steps the sum of what was sent approaches what was given: the
  // error feedback loses nothing.
  std::vector<float> sent = g1, given = m;
  for (int step = 0; step < 30; ++step) {
    std::fill(grp.w(), grp.w() + m.size(), 0.0f);
    ps.reduce(*self, grp.g);
    for (size_t k = 0; k < m.size(); ++k)
      sent[k] += grp.w()[k];
  }
  std::vector<float> left(m.size());
  for (size_t k = 0; k < m.size(); ++k)
    left[k] = given[k] - sent[k];
  EXPECT_LT(norm(left), 0.05 * norm(m));
}

TEST(PowerSgd, SavedStateContinuesBitwise) {
  auto self = createSelfCommunicator();
  std::mt19937 rng(3);
  std::vector<std::vector<float>> grads;
  for (int s = 0; s < 4; ++s)
    grads.push_back(randomMatrix(rng, 40, 30, 30));
  auto step = [&](PowerSgd &ps, Group &grp, int s) {
    std::copy(grads[s].begin(), grads[s].end(), grp.w());
    ps.reduce(*self, grp.g);
    return std::vector<float>(grp.w(), grp.w() + 1200);
  };
  Group a(3), b(3);
  PowerSgd straight(9), resumed(9);
  step(straight, a, 0);
  step(straight, a, 1);
  const std::vector<std::string> params = {"w", "b"};
  const std::vector<uint64_t> elements = {1200, 7};
  std::vector<float> shared = straight.saveShared(params),
                     local = straight.saveLocal(params);
  // "w": flag, rank, rows, columns and Q (3 x 30); "b": no state.
  EXPECT_EQ(shared.size(), 4u + 90u + 1u);
  EXPECT_EQ(local.size(), 1200u);
  ASSERT_FALSE(bool(resumed.restore(params, elements, shared, local)));
  for (int s = 2; s < 4; ++s)
    EXPECT_EQ(step(straight, a, s), step(resumed, b, s)) << "step " << s;
  // The state of another model does not fit, and the error says where.
  llvm::Error err = resumed.restore(params, {1000, 7}, shared, local);
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "the checkpoint's PowerSGD state does not fit this model's 2 "
            "gradients: 'w' has 1000 elements");
  llvm::Error shortErr =
      resumed.restore(params, elements, shared,
                      std::vector<float>(local.begin(), local.end() - 1));
  ASSERT_TRUE(bool(shortErr));
  EXPECT_NE(llvm::toString(std::move(shortErr)).find("it ends in 'w'"),
            std::string::npos);
}

TEST(PowerSgd, AnotherRankKeepsTheStateItCan) {
  // A plan change (re-planning, or a resume under another --compress) that
  // raises a matrix's rank keeps Q's rows and adds fresh ones, and one that
  // lowers it keeps the first rows; the error feedback stays, so over the
  // steps what was sent still approaches what was given.
  auto self = createSelfCommunicator();
  std::mt19937 rng(5);
  std::vector<float> m = randomMatrix(rng, 40, 30, 30);
  Group two(2), four(4);
  PowerSgd ps(3);
  std::copy(m.begin(), m.end(), two.w());
  ps.reduce(*self, two.g);
  std::vector<float> sent(two.w(), two.w() + 1200);
  ASSERT_EQ(ps.saveShared({"w"}).size(), 4u + 2 * 30u);
  for (int step = 0; step < 40; ++step) {
    Group &g = step < 20 ? four : two;
    std::fill(g.w(), g.w() + 1200, 0.0f);
    ps.reduce(*self, g.g);
    if (step == 0) {
      std::vector<float> q = ps.saveShared({"w"});
      ASSERT_EQ(q.size(), 4u + 4 * 30u);
      EXPECT_EQ(q[1], 4.0f);
    }
    for (size_t k = 0; k < 1200; ++k)
      sent[k] += g.w()[k];
  }
  EXPECT_EQ(ps.saveShared({"w"})[1], 2.0f);
  std::vector<float> left(1200);
  for (size_t k = 0; k < 1200; ++k)
    left[k] = m[k] - sent[k];
  EXPECT_LT(norm(left), 0.05 * norm(m));
}

TEST(PowerSgd, APlainGroupSendsTheErrorItsMatricesKept) {
  // After a re-plan sends a compressed matrix plain, its first plain
  // allreduce carries its error feedback: over the steps nothing is lost.
  auto self = createSelfCommunicator();
  std::mt19937 rng(6);
  std::vector<float> m = randomMatrix(rng, 40, 30, 30);
  Group grp(2);
  std::copy(m.begin(), m.end(), grp.w());
  PowerSgd ps(8);
  ps.reduce(*self, grp.g);
  std::vector<float> sent(grp.w(), grp.w() + 1200);
  std::vector<float> e = ps.saveLocal({"w"});
  ASSERT_GT(norm(e), 0.1 * norm(m));
  // Plain now: a zero gradient sends exactly the error, once.
  GradGroup plain = grp.g;
  plain.powerSgdRank = 0;
  std::fill(grp.w(), grp.w() + 1200, 0.0f);
  ps.flushInto(plain);
  std::vector<float> left(1200);
  for (size_t k = 0; k < 1200; ++k)
    left[k] = m[k] - sent[k] - grp.w()[k];
  EXPECT_LT(norm(left), 1e-6 * norm(m));
  EXPECT_TRUE(ps.saveLocal({"w"}).empty());
  std::fill(grp.w(), grp.w() + 1200, 0.0f);
  ps.flushInto(plain);
  EXPECT_EQ(norm(std::vector<float>(grp.w(), grp.w() + 1200)), 0.0);
}

/// The one-process communicator for a group whose buffer stands for device
/// memory: copies to and from the host are memcpys, counted.
class CopyingSelf final : public Communicator {
public:
  const char *name() const override { return "copying-self"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduceAverage(void *d, size_t n, DType t) override {
    self->allreduceAverage(d, n, t);
  }
  void allreduceSum(double *, size_t) override {}
  void allreduceMax(double *, size_t) override {}
  void broadcast(void *, size_t, int) override {}
  void barrier() override {}
  void gatherBytes(const void *data, size_t bytes, int root,
                   std::vector<char> &out,
                   std::vector<size_t> &counts) override {
    self->gatherBytes(data, bytes, root, out, counts);
  }
  [[noreturn]] void abort(const std::string &m, int code) override {
    self->abort(m, code);
  }
  bool copiesDeviceGradients() const override { return true; }
  void copyGradientsToHost(void *host, const void *device,
                           size_t bytes) override {
    std::memcpy(host, device, bytes);
    ++toHost;
  }
  void copyGradientsToDevice(void *device, const void *host,
                             size_t bytes) override {
    std::memcpy(device, host, bytes);
    ++toDevice;
  }
  std::unique_ptr<Communicator> self = createSelfCommunicator();
  int toHost = 0, toDevice = 0;
};

TEST(PowerSgd, StagedReducesAHostCopyBitwise) {
  // The same steps on a group in place and on one reduced through a host
  // copy (--device=cuda): the same bits, the whole buffer copied each way
  // once a step, the state (Q, E) the same.
  CopyingSelf staged;
  auto self = createSelfCommunicator();
  std::mt19937 rng(5);
  Group direct(3), device(3);
  PowerSgd a(42), b(42);
  for (int step = 0; step < 4; ++step) {
    std::vector<float> m = randomMatrix(rng, 40, 30, 30);
    std::copy(m.begin(), m.end(), direct.w());
    std::copy(m.begin(), m.end(), device.w());
    for (int i = 0; i < 7; ++i)
      direct.b()[i] = device.b()[i] = float(step * 7 + i);
    a.reduce(*self, direct.g);
    b.reduceStaged(staged, device.g);
    ASSERT_EQ(direct.buf, device.buf) << "step " << step;
  }
  EXPECT_EQ(staged.toHost, 4);
  EXPECT_EQ(staged.toDevice, 4);
  EXPECT_EQ(a.saveShared({"w", "b"}), b.saveShared({"w", "b"}));
  EXPECT_EQ(a.saveLocal({"w", "b"}), b.saveLocal({"w", "b"}));
}

} // namespace
