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

/// The elements of a span's gradient.
int64_t spanElements(const GradGroup::Span &s) {
  int64_t numel = 1;
  for (int64_t d : s.shape)
    numel *= d;
  return numel;
}

/// A span's matrix shape under PowerSGD at `rank`: rows and columns, or
/// {0, numel} when it travels as it is.
std::pair<int64_t, int64_t> matrixShape(const GradGroup::Span &s,
                                        unsigned rank) {
  const int64_t numel = spanElements(s);
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
  const size_t want = size_t(rank) * size_t(cols);
  if (m.started && m.qt.size() == want)
    return m;
  // The first Q, or the rows a higher rank adds: standard normal, from the
  // parameter's name and the run's seed, the same on every rank (row k is
  // the same whatever rank first needs it). A lower rank keeps the first
  // rows; the error feedback stays.
  const size_t kept = m.started ? std::min(m.qt.size(), want) : 0;
  std::vector<float> first(want);
  std::mt19937_64 rng(std::hash<std::string>()(param) ^
                      (seed * 0x9e3779b97f4a7c15ull));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float &v : first)
    v = normal(rng);
  std::copy(m.qt.begin(), m.qt.begin() + long(kept), first.begin());
  m.qt = std::move(first);
  if (!m.started)
    m.error.assign(size_t(rows) * size_t(cols), 0.0f);
  m.rows = size_t(rows);
  m.started = true;
  return m;
}

bool PowerSgd::flushInto(float *grad, const std::string &param, size_t n) {
  auto it = matrices.find(param);
  if (it == matrices.end())
    return false;
  const std::vector<float> &e = it->second.error;
  for (size_t k = 0; k < n && k < e.size(); ++k)
    grad[k] += e[k];
  matrices.erase(it);
  return true;
}

bool PowerSgd::holds(const GradGroup &g) const {
  for (const GradGroup::Span &s : g.spans)
    if (matrices.count(s.param))
      return true;
  return false;
}

void PowerSgd::flushInto(const GradGroup &g) {
  if (matrices.empty())
    return;
  float *buf = static_cast<float *>(g.buffer.data);
  for (const GradGroup::Span &s : g.spans)
    flushInto(buf + s.offset, s.param, size_t(spanElements(s)));
}

void PowerSgd::reduce(Communicator &c, const GradGroup &g) {
  reduceAt(c, g, static_cast<float *>(g.buffer.data));
}

void PowerSgd::reduceStaged(Communicator &c, const GradGroup &g) {
  const size_t bytes = g.buffer.desc.bytes();
  staged.resize(bytes / sizeof(float));
  c.copyGradientsToHost(staged.data(), g.buffer.data, bytes);
  reduceAt(c, g, staged.data());
  c.copyGradientsToDevice(g.buffer.data, staged.data(), bytes);
}

void PowerSgd::reduceAt(Communicator &c, const GradGroup &g, float *buf) {
  const unsigned r = g.powerSgdRank;
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
    float *grad = buf + it.span->offset;
    if (!it.rows) {
      // A matrix compressed under an earlier form sends its error too.
      flushInto(grad, it.span->param, size_t(it.cols));
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
  // The factors travel as the group's gradients would: in its wire type
  // (f32 or bf16: each rank's values rounded, summed in f32 and rounded
  // back, the same on every rank) and on its route (two-level: summed in
  // the node, then between the nodes, each local rank a share).
  auto average = [&](std::vector<float> &v, size_t n) {
    if (g.wire != GradWire::F32)
      wireScratch.resize(std::max(wireScratch.size(), n));
    c.allreduceGradients(v.data(), n, DType::F32, g.wire, wireScratch.data(),
                         g.twoLevel);
  };
  average(first, n1);

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
  average(second, n2);

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
  totals.wireBytes +=
      (n1 + n2) * (g.wire == GradWire::F32 ? sizeof(float) : sizeof(uint16_t));
  totals.computeUs += computeUs;
}

std::vector<float>
PowerSgd::saveShared(llvm::ArrayRef<std::string> params) const {
  std::vector<float> out;
  for (const std::string &p : params) {
    auto it = matrices.find(p);
    if (it == matrices.end()) {
      out.push_back(0.0f);
      continue;
    }
    const Matrix &m = it->second;
    const size_t cols = m.error.size() / std::max<size_t>(m.rows, 1);
    out.insert(out.end(), {1.0f, float(m.qt.size() / std::max<size_t>(cols, 1)),
                           float(m.rows), float(cols)});
    out.insert(out.end(), m.qt.begin(), m.qt.end());
  }
  return out;
}

std::vector<float>
PowerSgd::saveLocal(llvm::ArrayRef<std::string> params) const {
  std::vector<float> out;
  for (const std::string &p : params)
    if (auto it = matrices.find(p); it != matrices.end())
      out.insert(out.end(), it->second.error.begin(), it->second.error.end());
  return out;
}

llvm::Error PowerSgd::restore(llvm::ArrayRef<std::string> params,
                              llvm::ArrayRef<uint64_t> elements,
                              const std::vector<float> &shared,
                              const std::vector<float> &local) {
  matrices.clear();
  if (shared.empty() && local.empty())
    return llvm::Error::success();
  auto misfit = [&](const std::string &why) {
    matrices.clear();
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the checkpoint's PowerSGD state does not fit this model's " +
            std::to_string(params.size()) + " gradients: " + why);
  };
  size_t at = 0, atLocal = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (at >= shared.size())
      return misfit("it ends at gradient " + std::to_string(i));
    if (shared[at] == 0.0f) {
      ++at;
      continue;
    }
    if (at + 4 > shared.size())
      return misfit("it ends at gradient " + std::to_string(i));
    const float r = shared[at + 1], rows = shared[at + 2],
                cols = shared[at + 3];
    if (shared[at] != 1.0f || !(r >= 1) || !(rows >= 1) || !(cols >= 1) ||
        double(rows) * double(cols) != double(elements[i]))
      return misfit("'" + params[i] + "' has " + std::to_string(elements[i]) +
                    " elements");
    const size_t nq = size_t(r) * size_t(cols), ne = size_t(elements[i]);
    at += 4;
    if (at + nq > shared.size() || atLocal + ne > local.size())
      return misfit("it ends in '" + params[i] + "'");
    Matrix &m = matrices[params[i]];
    m.rows = size_t(rows);
    m.qt.assign(shared.begin() + long(at), shared.begin() + long(at + nq));
    m.error.assign(local.begin() + long(atLocal),
                   local.begin() + long(atLocal + ne));
    m.started = true;
    at += nq;
    atLocal += ne;
  }
  if (at != shared.size() || atLocal != local.size())
    return misfit(std::to_string(shared.size() - at + local.size() - atLocal) +
                  " float(s) left over");
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
