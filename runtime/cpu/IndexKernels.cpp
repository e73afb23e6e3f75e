//===- IndexKernels.cpp - Selection by index
//--------------------------------===//
//
// The ops of the CUDA backend's IndexKernels.cpp: ArgMax/ArgMin, TopK,
// OneHot and GatherND, on the line rules of KernelMath.h and the geometry of
// OpGeometry.h that both backends share.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace oasr::rt::cpu {

namespace {

/// ArgMax / ArgMin: one line of X per result element.
class ArgKernel final : public CpuKernel {
public:
  ArgKernel(const OpSpec &spec, const ArgGeom &g) : CpuKernel(spec), g(g) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const ArgGeom p = g;
    const float *x = in[0].as<float>();
    int64_t *y = out[0].as<int64_t>();
    const int64_t lines = p.outer * p.inner;
#pragma omp parallel for schedule(static) if (lines * p.n > 16384)
    for (int64_t l = 0; l < lines; ++l)
      y[l] = argExtremeLine(p, x, l);
  }

private:
  ArgGeom g;
};

/// TopK: values and indices of the k best of each line. Small k keeps a
/// sorted buffer while it walks the line once (the order of topKBefore:
/// an element scanned later goes after equals); a large k runs the shared
/// k-pass rule.
class TopKKernel final : public CpuKernel {
public:
  TopKKernel(const OpSpec &spec, const TopKGeom &g) : CpuKernel(spec), g(g) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const TopKGeom p = g;
    const float *x = in[0].as<float>();
    float *v = out[0].as<float>();
    int64_t *ix = out[1].as<int64_t>();
    const int64_t lines = p.outer * p.inner;
#pragma omp parallel for schedule(static) if (lines * p.n > 16384)
    for (int64_t l = 0; l < lines; ++l) {
      if (p.k > kBuffered) {
        topKLine(p, x, v, ix, l);
        continue;
      }
      const int64_t o = l / p.inner, i = l % p.inner;
      const float *xl = x + o * p.n * p.inner + i;
      float bv[kBuffered];
      int64_t bi[kBuffered];
      int64_t cnt = 0;
      for (int64_t m = 0; m < p.n; ++m) {
        const float e = xl[m * p.inner];
        if (cnt == p.k &&
            !topKBefore(p.largest, e, m, bv[cnt - 1], bi[cnt - 1]))
          continue;
        int64_t at = cnt < p.k ? cnt++ : cnt - 1;
        for (; at > 0 && topKBefore(p.largest, e, m, bv[at - 1], bi[at - 1]);
             --at) {
          bv[at] = bv[at - 1];
          bi[at] = bi[at - 1];
        }
        bv[at] = e;
        bi[at] = m;
      }
      for (int64_t j = 0; j < p.k; ++j) {
        v[(o * p.k + j) * p.inner + i] = bv[j];
        ix[(o * p.k + j) * p.inner + i] = bi[j];
      }
    }
  }

private:
  static constexpr int64_t kBuffered = 64;
  TopKGeom g;
};

/// OneHot: `on` where the index names the position along depth, else `off`.
class OneHotKernel final : public CpuKernel {
public:
  OneHotKernel(const OpSpec &spec, const OneHotGeom &g)
      : CpuKernel(spec), g(g), elem(dtypeSize(spec.outputs[0].dtype)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const OneHotGeom p = g;
    const char *values = static_cast<const char *>(in[2].data);
    char *y = static_cast<char *>(out[0].data);
    const size_t e = elem;
    const int64_t lines = p.outer * p.inner;
    if (e == 4) {
      uint32_t vals[2];
      std::memcpy(vals, values, 8);
      uint32_t *y4 = reinterpret_cast<uint32_t *>(y);
      std::fill(y4, y4 + lines * p.depth, vals[0]);
#pragma omp parallel for schedule(static) if (lines > 16384)
      for (int64_t l = 0; l < lines; ++l)
        if (int64_t k = oneHotIndex(in[0], l, p.depth); k >= 0)
          y4[((l / p.inner) * p.depth + k) * p.inner + l % p.inner] = vals[1];
      return;
    }
#pragma omp parallel for schedule(static) if (lines * p.depth > 16384)
    for (int64_t l = 0; l < lines; ++l) {
      const int64_t o = l / p.inner, i = l % p.inner;
      int64_t k = oneHotIndex(in[0], l, p.depth);
      for (int64_t d = 0; d < p.depth; ++d)
        std::memcpy(y + size_t((o * p.depth + d) * p.inner + i) * e,
                    values + (d == k ? e : 0), e);
    }
  }

private:
  /// Element `l` of the indices, negative ones from the end; -1 outside.
  int64_t oneHotIndex(const TensorRef &t, int64_t l, int64_t depth) const {
    int64_t k = g.indexType == DType::F32
                    ? int64_t(t.as<float>()[l])
                    : indexAt(t.data, g.indexType == DType::I64, l);
    k = k < 0 ? k + depth : k;
    return k >= 0 && k < depth ? k : -1;
  }
  OneHotGeom g;
  size_t elem;
};

/// GatherND: the slice each index tuple names, copied in order.
class GatherNDKernel final : public CpuKernel {
public:
  GatherNDKernel(const OpSpec &spec, const ScatterNDGeom &g)
      : CpuKernel(spec), g(g), elem(dtypeSize(spec.inputs[0].dtype)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const ScatterNDGeom p = g;
    const char *x = static_cast<const char *>(in[0].data);
    const int64_t *idx = in[1].as<int64_t>();
    char *y = static_cast<char *>(out[0].data);
    const size_t bytes = size_t(p.slice) * elem;
    for (int64_t t = 0; t < p.count; ++t) {
      int64_t bad = 0, off = ndTupleOffset(p, idx, t, &bad);
      if (off < 0)
        fatalDataError(nodeName, op,
                       "index " + std::to_string(bad) + " of tuple " +
                           std::to_string(t) + " is outside its dimension");
      std::memcpy(y + size_t(t) * bytes, x + size_t(off) * elem, bytes);
    }
  }

private:
  ScatterNDGeom g;
  size_t elem;
};

} // namespace

static KernelOr createArg(const OpSpec &spec) {
  ArgGeom g;
  OASR_RETURN_IF_ERROR(argGeom(spec, g));
  return std::make_unique<ArgKernel>(spec, g);
}

static KernelOr createTopK(const OpSpec &spec) {
  TopKGeom g;
  OASR_RETURN_IF_ERROR(topKGeom(spec, g));
  return std::make_unique<TopKKernel>(spec, g);
}

static KernelOr createOneHot(const OpSpec &spec) {
  OneHotGeom g;
  OASR_RETURN_IF_ERROR(oneHotGeom(spec, g));
  return std::make_unique<OneHotKernel>(spec, g);
}

static KernelOr createGatherND(const OpSpec &spec) {
  ScatterNDGeom g;
  OASR_RETURN_IF_ERROR(gatherNDGeom(spec, g));
  return std::make_unique<GatherNDKernel>(spec, g);
}

void registerIndexKernels(KernelRegistry &r) {
  r["ArgMax"] = createArg;
  r["ArgMin"] = createArg;
  r["TopK"] = createTopK;
  r["OneHot"] = createOneHot;
  r["GatherND"] = createGatherND;
}

} // namespace oasr::rt::cpu
