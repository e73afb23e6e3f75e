//===- PowerSGD.cpp - Groups sent as low-rank factors ---------------------===//
//
// Each rank's own products, P = M Q and Q = M^T P, are oneDNN's sgemm on one
// thread: its result depends on the operands alone, so a resumed run
// computes the same factors. What every rank must compute bit for bit
// from the averaged factors (P's Gram-Schmidt, G = P Q^T) are serial loops
// fixed in order (PowerSGD.h): streams beside r <= a few rows of factors
// that the compiler vectorizes (the dot products in 16 independent lanes,
// no reassociation), the same instructions on every rank.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/PowerSGD.h"

#include "oasr/Runtime/Communicator.h"
#include "oasr/Schedule/Compression.h"

#include "llvm/Support/FormatVariadic.h"

#include "oneapi/dnnl/dnnl.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>

namespace oasr::rt {

namespace {

float dot(const float *a, const float *b, size_t n) {
  float lane[16] = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (size_t l = 0; l < 16; ++l)
      lane[l] += a[i + l] * b[i + l];
  float s = 0;
  for (float v : lane)
    s += v;
  for (; i < n; ++i)
    s += a[i] * b[i];
  return s;
}

void axpy(float a, const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; ++i)
    y[i] += a * x[i];
}

/// G = P Q^T and E -= G, row by row of G (rows x cols; P^T is r x rows,
/// Q^T r x cols). Each element is 0 + p0 q0 + p1 q1 + ... in k's order,
/// multiplied and added apart (this file builds with -ffp-contract=off), so
/// every clone gives the same bits; a block of each row stays in cache
/// while the r rows of Q^T pass over it.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
lowRankProduct(const float *pt, size_t rows, const float *qt, unsigned r,
               size_t cols, float *g, float *e) {
  constexpr size_t kBlock = 512;
  float acc[kBlock];
  for (size_t i = 0; i < rows; ++i) {
    float *gi = g + i * cols, *ei = e + i * cols;
    for (size_t j0 = 0; j0 < cols; j0 += kBlock) {
      const size_t nb = std::min(kBlock, cols - j0);
      std::fill(acc, acc + nb, 0.0f);
      for (unsigned k = 0; k < r; ++k) {
        const float p = pt[k * rows + i];
        const float *q = qt + k * cols + j0;
        for (size_t j = 0; j < nb; ++j)
          acc[j] += p * q[j];
      }
      for (size_t j = 0; j < nb; ++j) {
        gi[j0 + j] = acc[j];
        ei[j0 + j] -= acc[j];
      }
    }
  }
}

/// Gram-Schmidt on the r rows of `pt` (P's columns, each n long): each
/// row made orthogonal to those before it, then of unit length. A row that
/// vanishes stays zero (its factor contributes nothing).
void orthogonalize(float *pt, unsigned r, size_t n) {
  for (unsigned k = 0; k < r; ++k) {
    float *col = pt + k * n;
    for (unsigned j = 0; j < k; ++j) {
      const float *prev = pt + j * n;
      axpy(-dot(col, prev, n), prev, col, n);
    }
    double norm = std::sqrt(double(dot(col, col, n)));
    float inv = norm > 0 ? float(1.0 / norm) : 0.0f;
    for (size_t i = 0; i < n; ++i)
      col[i] *= inv;
  }
}

/// A span's matrix shape under PowerSGD at `rank`: rows and columns, or
/// {0, numel} when it travels as it is.
std::pair<int64_t, int64_t> matrixShape(const GradGroup::Span &s,
                                        unsigned rank) {
  int64_t numel = 1;
  for (int64_t d : s.shape)
    numel *= d;
  if (s.shape.size() >= 2 &&
      schedule::powerSgdCompresses(uint64_t(s.shape[0]), uint64_t(numel), rank))
    return {s.shape[0], numel / s.shape[0]};
  return {0, numel};
}

/// Row-major C (m x n) = op(A) op(B), op transposing where `ta`/`tb` is
/// 'T', on the calling thread alone (its OpenMP team restored after). A
/// failure ends every rank through the communicator, naming the product.
void gemm(Communicator &c, char ta, char tb, int64_t m, int64_t n, int64_t k,
          const float *a, int64_t lda, const float *b, int64_t ldb, float *out,
          int64_t ldc) {
  const int threads = omp_get_max_threads();
  if (threads != 1)
    omp_set_num_threads(1);
  dnnl_status_t st =
      dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, out, ldc);
  if (threads != 1)
    omp_set_num_threads(threads);
  if (st != dnnl_success)
    c.abort(llvm::formatv("oasr-run: rank {0}: error: PowerSGD: oneDNN's "
                          "sgemm ({1} x {2} x {3}) failed with status {4}",
                          c.rank(), m, n, k, int(st))
                .str(),
            1);
}

double nowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

PowerSgd::Matrix &PowerSgd::matrixFor(const std::string &param, int64_t rows,
                                      int64_t cols, unsigned rank) {
  Matrix &m = matrices[param];
  if (!m.started) {
    // The first Q: standard normal, from the parameter's name and the
    // run's seed, the same on every rank.
    m.qt.resize(size_t(rank) * size_t(cols));
    std::mt19937_64 rng(std::hash<std::string>()(param) ^
                        (seed * 0x9e3779b97f4a7c15ull));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float &v : m.qt)
      v = normal(rng);
    m.error.assign(size_t(rows) * size_t(cols), 0.0f);
    m.started = true;
  }
  return m;
}

void PowerSgd::reduce(Communicator &c, const GradGroup &g) {
  const unsigned r = g.powerSgdRank;
  float *buf = static_cast<float *>(g.buffer.data);
  struct Item {
    const GradGroup::Span *span;
    int64_t rows, cols;  // rows 0: sent as it is, cols elements
    size_t atP, atQ;     // offsets in `first` and `second`
    Matrix *m = nullptr; // compressed
  };
  std::vector<Item> items;
  size_t n1 = 0, n2 = 0;
  for (const GradGroup::Span &s : g.spans) {
    auto [rows, cols] = matrixShape(s, r);
    Item it{&s, rows, cols, n1, n2};
    if (rows) {
      n1 += size_t(r) * size_t(rows);
      n2 += size_t(r) * size_t(cols);
      totals.denseFloats += uint64_t(rows * cols);
    } else {
      n1 += size_t(cols);
      totals.denseFloats += uint64_t(cols);
    }
    items.push_back(it);
  }
  first.assign(n1, 0.0f);
  second.assign(n2, 0.0f);

  // M = G + E in E's memory; P^T[k][i] = M[i] . Q^T[k].
  double t0 = nowUs();
  for (Item &it : items) {
    const float *grad = buf + it.span->offset;
    if (!it.rows) {
      std::memcpy(first.data() + it.atP, grad, size_t(it.cols) * 4);
      continue;
    }
    it.m = &matrixFor(it.span->param, it.rows, it.cols, r);
    float *mm = it.m->error.data();
    const size_t n = size_t(it.rows) * size_t(it.cols);
    for (size_t e = 0; e < n; ++e)
      mm[e] += grad[e];
    // P^T (r x rows) = Q^T M^T.
    gemm(c, 'N', 'T', r, it.rows, it.cols, it.m->qt.data(), it.cols, mm,
         it.cols, first.data() + it.atP, it.rows);
  }
  double computeUs = nowUs() - t0;
  c.allreduceAverage(first.data(), n1, DType::F32);

  // P orthonormal; Q^T[k] = sum_i P^T[k][i] M[i].
  t0 = nowUs();
  for (Item &it : items) {
    if (!it.rows) {
      std::memcpy(buf + it.span->offset, first.data() + it.atP,
                  size_t(it.cols) * 4);
      continue;
    }
    float *pt = first.data() + it.atP;
    orthogonalize(pt, r, size_t(it.rows));
    // Q^T (r x cols) = P^T M.
    gemm(c, 'N', 'N', r, it.cols, it.rows, pt, it.rows, it.m->error.data(),
         it.cols, second.data() + it.atQ, it.cols);
  }
  computeUs += nowUs() - t0;
  c.allreduceAverage(second.data(), n2, DType::F32);

  // G = P Q^T; E = M - G; Q kept for the next step.
  t0 = nowUs();
  for (Item &it : items) {
    if (!it.rows)
      continue;
    const float *pt = first.data() + it.atP;
    const float *qt = second.data() + it.atQ;
    float *grad = buf + it.span->offset;
    float *mm = it.m->error.data();
    const size_t cols = size_t(it.cols);
    lowRankProduct(pt, size_t(it.rows), qt, r, cols, grad, mm);
    std::memcpy(it.m->qt.data(), qt, size_t(r) * cols * 4);
  }
  computeUs += nowUs() - t0;
  ++totals.groups;
  totals.wireFloats += n1 + n2;
  totals.computeUs += computeUs;
}

/// Calls `fn(span, rows, cols)` for every compressed matrix of `groups`, in
/// group and buffer order.
template <typename Fn>
static void forEachMatrix(const std::vector<GradGroup> &groups, Fn fn) {
  for (const GradGroup &g : groups) {
    if (!g.powerSgdRank)
      continue;
    for (const GradGroup::Span &s : g.spans) {
      auto [rows, cols] = matrixShape(s, g.powerSgdRank);
      if (rows)
        fn(s, g.powerSgdRank, rows, cols);
    }
  }
}

size_t PowerSgd::stateFloats(const std::vector<GradGroup> &groups) {
  size_t n = 0;
  forEachMatrix(groups, [&](const GradGroup::Span &, unsigned r, int64_t rows,
                            int64_t cols) {
    n += 1 + size_t(r) * size_t(cols) + size_t(rows) * size_t(cols);
  });
  return n;
}

std::vector<float>
PowerSgd::saveShared(const std::vector<GradGroup> &groups) const {
  std::vector<float> out;
  forEachMatrix(
      groups, [&](const GradGroup::Span &s, unsigned r, int64_t, int64_t cols) {
        auto it = matrices.find(s.param);
        bool started = it != matrices.end() && it->second.started;
        out.push_back(started ? 1.0f : 0.0f);
        if (started)
          out.insert(out.end(), it->second.qt.begin(), it->second.qt.end());
        else
          out.resize(out.size() + size_t(r) * size_t(cols), 0.0f);
      });
  return out;
}

std::vector<float>
PowerSgd::saveLocal(const std::vector<GradGroup> &groups) const {
  std::vector<float> out;
  forEachMatrix(groups, [&](const GradGroup::Span &s, unsigned, int64_t rows,
                            int64_t cols) {
    auto it = matrices.find(s.param);
    if (it != matrices.end() && it->second.started)
      out.insert(out.end(), it->second.error.begin(), it->second.error.end());
    else
      out.resize(out.size() + size_t(rows) * size_t(cols), 0.0f);
  });
  return out;
}

llvm::Error PowerSgd::restore(const std::vector<GradGroup> &groups,
                              const std::vector<float> &shared,
                              const std::vector<float> &local) {
  matrices.clear();
  if (shared.empty() && local.empty())
    return llvm::Error::success();
  size_t wantShared = 0, wantLocal = 0;
  forEachMatrix(groups, [&](const GradGroup::Span &, unsigned r, int64_t rows,
                            int64_t cols) {
    wantShared += 1 + size_t(r) * size_t(cols);
    wantLocal += size_t(rows) * size_t(cols);
  });
  if (shared.size() != wantShared || local.size() != wantLocal)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("the checkpoint's PowerSGD state holds {0} + {1} "
                      "floats, and this plan's compressed groups keep {2} + "
                      "{3}: it was written with another --compress or plan",
                      shared.size(), local.size(), wantShared, wantLocal)
            .str());
  size_t at = 0, atLocal = 0;
  forEachMatrix(groups, [&](const GradGroup::Span &s, unsigned r, int64_t rows,
                            int64_t cols) {
    bool started = shared[at++] != 0.0f;
    size_t nq = size_t(r) * size_t(cols), ne = size_t(rows) * size_t(cols);
    if (started) {
      Matrix &m = matrices[s.param];
      m.qt.assign(shared.begin() + at, shared.begin() + at + nq);
      m.error.assign(local.begin() + atLocal, local.begin() + atLocal + ne);
      m.started = true;
    }
    at += nq;
    atLocal += ne;
  });
  return llvm::Error::success();
}

CompressionRate measureCompressionRate(int64_t rows, int64_t cols, int reps) {
  std::unique_ptr<Communicator> self = createSelfCommunicator();
  const size_t n = size_t(rows) * size_t(cols);
  std::vector<float> grad(n);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto timeAt = [&](unsigned rank) {
    GradGroup g;
    g.buffer.data = grad.data();
    g.buffer.desc = TensorDesc{DType::F32, {int64_t(n)}};
    g.bytes = n * 4;
    g.powerSgdRank = rank;
    g.spans.push_back(GradGroup::Span{"m", 0, {rows, cols}});
    PowerSgd p(1);
    std::vector<double> times;
    for (int k = 0; k <= reps; ++k) {
      for (float &v : grad)
        v = normal(rng);
      double before = p.stats().computeUs;
      p.reduce(*self, g);
      if (k > 0) // the first allocates the matrix's state
        times.push_back(p.stats().computeUs - before);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  auto macs = [&](double r) {
    return 3 * double(rows) * double(cols) * r + double(rows) * r * r;
  };
  const double t1 = timeAt(1), t8 = timeAt(8);
  CompressionRate c;
  c.usPerMac = std::max(0.0, (t8 - t1) / (macs(8) - macs(1)));
  c.usPerElement = std::max(0.0, (t1 - c.usPerMac * macs(1)) / double(n));
  return c;
}

} // namespace oasr::rt
