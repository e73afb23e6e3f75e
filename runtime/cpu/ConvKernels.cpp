//===- ConvKernels.cpp - Convolutions on oneDNN ---------------------------===//
//
// Conv/ConvGrad and ConvTranspose/ConvTransposeGrad on oneDNN 2.6 (v2 API:
// op descriptor, then primitive descriptor), the ops of the CUDA backend's
// ConvKernels.cpp (cuDNN). Primitives are built once in create(); run()
// only binds the executor's buffers and executes. Tensors are f32 or bf16
// in plain row-major (NCHW / OIHW) layout; where oneDNN prefers a blocked
// layout the kernel keeps cached reorders into blocked copies that, like
// the convolutions' scratchpads, live in the kernel's workspace: the
// executor places it in the activation arena, so copies of different
// layers share memory instead of each kernel holding its own.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"

#include <cstdlib>
#include <string>

namespace oasr::rt::cpu {

namespace {

/// Where a convolution's tensors live inside oneDNN. Blocked layouts (e.g.
/// nChw8c on AVX2) run 3x3 convolutions ~1.5x faster than plain NCHW even
/// with the reorders from and to the executor's plain buffers; for 1x1,
/// stride-1 convolutions on large planes the reorders cost more than the
/// blocked kernel saves (bench/results/kernels.txt). OASR_CPU_CONV_LAYOUT =
/// plain | blocked | auto (default) overrides the choice.
enum class ConvLayout { Plain, Blocked, Auto };

} // namespace

static ConvLayout convLayoutSetting() {
  static ConvLayout layout = [] {
    const char *e = std::getenv("OASR_CPU_CONV_LAYOUT");
    std::string v = e ? e : "auto";
    if (v == "plain")
      return ConvLayout::Plain;
    if (v == "blocked")
      return ConvLayout::Blocked;
    return ConvLayout::Auto;
  }();
  return layout;
}

static bool usePlainLayout(const std::vector<int64_t> &x,
                           const std::vector<int64_t> &w, const Window &win,
                           int64_t group) {
  ConvLayout l = convLayoutSetting();
  if (l != ConvLayout::Auto)
    return l == ConvLayout::Plain;
  int64_t plane = 1;
  for (size_t i = 2; i < x.size(); ++i)
    plane *= x[i];
  bool pointwise = group == 1;
  for (size_t i = 0; i < win.kernel.size(); ++i)
    pointwise = pointwise && w[i + 2] == 1 && win.strides[i] == 1 &&
                win.padL[i] == 0 && win.padR[i] == 0;
  return pointwise && plane >= 28 * 28;
}

//===----------------------------------------------------------------------===//
// Conv / ConvGrad
//===----------------------------------------------------------------------===//

namespace {

/// Shapes and descriptors of one convolution.
struct ConvGeom {
  Window win;
  dt type = dt::f32; ///< every tensor's (f32 or bf16)
  int64_t group = 1;
  bool bias = false;
  memory::desc xUser, wUser, bUser, yUser; // plain
  memory::desc xPrim, wPrim, bPrim, yPrim; // any (or plain)
};

} // namespace

static Status convGeom(const OpSpec &spec, const TensorDesc &x,
                       const TensorDesc &w, const TensorDesc &y, bool bias,
                       ConvGeom &g) {
  OASR_RETURN_IF_ERROR(convWindow(spec, x, w, y, g.group, g.win));
  int64_t m = w.shape[0];
  g.bias = bias;
  g.type = dataType(x);
  g.xUser = plainDesc(x.shape, g.type);
  g.yUser = plainDesc(y.shape, g.type);
  dims wd = toDims(w.shape);
  if (g.group > 1) {
    wd[0] = m / g.group;
    wd.insert(wd.begin(), g.group);
  }
  g.wUser = plainDesc(std::vector<int64_t>(wd.begin(), wd.end()), g.type);
  g.bUser = plainDesc({m}, g.type);
  bool plain = usePlainLayout(x.shape, w.shape, g.win, g.group);
  g.xPrim = plain ? g.xUser : anyDesc(toDims(x.shape), g.type);
  g.yPrim = plain ? g.yUser : anyDesc(toDims(y.shape), g.type);
  g.wPrim = plain ? g.wUser : anyDesc(wd, g.type);
  g.bPrim = g.bUser;
  return Status::success();
}

static dnnl::convolution_forward::primitive_desc
convForwardPd(const ConvGeom &g,
              const dnnl::primitive_attr &attr = dnnl::primitive_attr()) {
  const Window &w = g.win;
  auto d = g.bias
               ? dnnl::convolution_forward::desc(
                     dnnl::prop_kind::forward_training,
                     dnnl::algorithm::convolution_direct, g.xPrim, g.wPrim,
                     g.bPrim, g.yPrim, w.strides, w.dilations, w.padL, w.padR)
               : dnnl::convolution_forward::desc(
                     dnnl::prop_kind::forward_training,
                     dnnl::algorithm::convolution_direct, g.xPrim, g.wPrim,
                     g.yPrim, w.strides, w.dilations, w.padL, w.padR);
  return dnnl::convolution_forward::primitive_desc(d, attr, engine());
}

namespace {

class ConvKernel final : public BlockedKernel {
public:
  ConvKernel(const OpSpec &spec, const ConvGeom &g)
      : BlockedKernel(spec), bias(g.bias) {
    auto pd = convForwardPd(g, userScratchpad());
    prim = dnnl::convolution_forward(pd);
    x.init(g.xUser, pd.src_desc(), false);
    w.init(g.wUser, pd.weights_desc(), false);
    y.init(g.yUser, pd.dst_desc(), true);
    declareScratch({&x, &w, &y});
    pad = scratchpad(pd);
    if (bias)
      b = userMem(g.bUser);
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    auto &s = stream();
    x.bind(in[0].data);
    w.bind(in[1].data);
    y.bind(out[0].data);
    x.in(s);
    w.in(s);
    Args args{{DNNL_ARG_SRC, x.prim},
              {DNNL_ARG_WEIGHTS, w.prim},
              {DNNL_ARG_DST, y.prim}};
    if (bias) {
      bindMem(b, in[2].data);
      args[DNNL_ARG_BIAS] = b;
    }
    if (pad)
      args[DNNL_ARG_SCRATCHPAD] = pad;
    prim.execute(s, args);
    y.out(s);
    s.wait();
  }

private:
  bool bias;
  dnnl::convolution_forward prim;
  BoundArg x, w, y;
  memory b, pad;
};

} // namespace

static KernelOr createConv(const OpSpec &spec) {
  dt type;
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 3, 1, 1));
  OASR_RETURN_IF_ERROR(uniformFloat(spec, {0, 1, 2}, {0}, type));
  ConvGeom g;
  OASR_RETURN_IF_ERROR(convGeom(spec, spec.inputs[0], spec.inputs[1],
                                spec.outputs[0], spec.inputs.size() == 3, g));
  if (g.bias && spec.inputs[2].numel() != spec.inputs[1].shape[0]) {
    return nodeError(spec, "bias has " +
                               std::to_string(spec.inputs[2].numel()) +
                               " elements, expected " +
                               std::to_string(spec.inputs[1].shape[0]));
  }
  return guardCreate(spec,
                     [&] { return std::make_unique<ConvKernel>(spec, g); });
}

namespace {

/// ConvGrad: dY, X, W -> dX, dW[, dB].
class ConvGradKernel final : public BlockedKernel {
public:
  ConvGradKernel(const OpSpec &spec, const ConvGeom &g, bool wantDx,
                 bool wantDw)
      : BlockedKernel(spec), bias(g.bias), wantDx(wantDx), wantDw(wantDw) {
    auto fwd = convForwardPd(g);
    const Window &win = g.win;
    if (wantDx) {
      dnnl::convolution_backward_data::desc d(
          dnnl::algorithm::convolution_direct, g.xPrim, g.wPrim, g.yPrim,
          win.strides, win.dilations, win.padL, win.padR);
      dnnl::convolution_backward_data::primitive_desc pd(d, userScratchpad(),
                                                         engine(), fwd);
      bwdData = dnnl::convolution_backward_data(pd);
      dyD.init(g.yUser, pd.diff_dst_desc(), false);
      wD.init(g.wUser, pd.weights_desc(), false);
      dx.init(g.xUser, pd.diff_src_desc(), true);
      declareScratch({&dyD, &wD, &dx});
      padD = scratchpad(pd);
    }
    if (wantDw) {
      auto d =
          bias ? dnnl::convolution_backward_weights::desc(
                     dnnl::algorithm::convolution_direct, g.xPrim, g.wPrim,
                     g.bPrim, g.yPrim, win.strides, win.dilations, win.padL,
                     win.padR)
               : dnnl::convolution_backward_weights::desc(
                     dnnl::algorithm::convolution_direct, g.xPrim, g.wPrim,
                     g.yPrim, win.strides, win.dilations, win.padL, win.padR);
      dnnl::convolution_backward_weights::primitive_desc pd(d, userScratchpad(),
                                                            engine(), fwd);
      bwdWeights = dnnl::convolution_backward_weights(pd);
      shareDy = wantDx && pd.diff_dst_desc() == dyD.prim.get_desc();
      if (!shareDy)
        dyW.init(g.yUser, pd.diff_dst_desc(), false);
      xW.init(g.xUser, pd.src_desc(), false);
      dw.init(g.wUser, pd.diff_weights_desc(), true);
      declareScratch({&dyW, &xW, &dw});
      padW = scratchpad(pd);
      if (bias)
        db = userMem(g.bUser);
    }
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    auto &s = stream();
    if (wantDx) {
      dyD.bind(in[0].data);
      wD.bind(in[2].data);
      dx.bind(out[0].data);
      dyD.in(s);
      wD.in(s);
      Args args{{DNNL_ARG_DIFF_DST, dyD.prim},
                {DNNL_ARG_WEIGHTS, wD.prim},
                {DNNL_ARG_DIFF_SRC, dx.prim}};
      if (padD)
        args[DNNL_ARG_SCRATCHPAD] = padD;
      bwdData.execute(s, args);
      dx.out(s);
    }
    if (wantDw) {
      memory dyPrim;
      if (shareDy) {
        dyPrim = dyD.prim;
      } else {
        dyW.bind(in[0].data);
        dyW.in(s);
        dyPrim = dyW.prim;
      }
      xW.bind(in[1].data);
      xW.in(s);
      dw.bind(out[1].data);
      Args args{{DNNL_ARG_DIFF_DST, dyPrim},
                {DNNL_ARG_SRC, xW.prim},
                {DNNL_ARG_DIFF_WEIGHTS, dw.prim}};
      if (bias) {
        bindMem(db, out[2].data);
        args[DNNL_ARG_DIFF_BIAS] = db;
      }
      if (padW)
        args[DNNL_ARG_SCRATCHPAD] = padW;
      bwdWeights.execute(s, args);
      dw.out(s);
    }
    s.wait();
  }

private:
  bool bias, wantDx, wantDw, shareDy = false;
  dnnl::convolution_backward_data bwdData;
  dnnl::convolution_backward_weights bwdWeights;
  BoundArg dyD, wD, dx, dyW, xW, dw;
  memory db, padD, padW;
};

} // namespace

static KernelOr createConvGrad(const OpSpec &spec) {
  dt type;
  OASR_RETURN_IF_ERROR(checkArity(spec, 3, 3, 2, 3));
  OASR_RETURN_IF_ERROR(uniformFloat(spec, {0, 1, 2}, {0, 1, 2}, type));
  const auto &dy = spec.inputs[0], &x = spec.inputs[1], &w = spec.inputs[2];
  if (spec.outputs[0].shape != x.shape || spec.outputs[1].shape != w.shape ||
      (spec.outputs.size() == 3 && spec.outputs[2].numel() != w.shape[0])) {
    return nodeError(spec, "result shapes must be X's, W's and [M]");
  }
  ConvGeom g;
  OASR_RETURN_IF_ERROR(convGeom(spec, x, w, dy, spec.outputs.size() == 3, g));
  bool wantDx = outputUsed(spec, 0);
  bool wantDw = outputUsed(spec, 1) || (g.bias && outputUsed(spec, 2));
  return guardCreate(spec, [&] {
    return std::make_unique<ConvGradKernel>(spec, g, wantDx, wantDw);
  });
}

//===----------------------------------------------------------------------===//
// ConvTranspose / ConvTransposeGrad
//===----------------------------------------------------------------------===//
//
// A transposed convolution is the data gradient of the convolution that maps
// its result back to its input with the same weights (ONNX's ConvTranspose W
// [C, M/group, k...] is that convolution's [M', C'/group, k...]). So with the
// geometry of that convolution (input Y, weights W, output X):
//   ConvTranspose:    Y  = conv_backward_data(diff_dst = X, W) (+ bias)
//   ConvTransposeGrad: dX = conv_forward(dY, W)
//                      dW = conv_backward_weights(src = dY, diff_dst = X)
//                      dB = the sum of dY over all but the channel axis.

/// The convolution view of a ConvTranspose whose input has `x`'s shape and
/// result `y`'s; rejects auto_pad other than NOTSET/VALID (ConvTranspose's
/// SAME padding is defined on the result).
static Status convTransposeGeom(const OpSpec &spec, const TensorDesc &x,
                                const TensorDesc &w, const TensorDesc &y,
                                ConvGeom &g) {
  OASR_RETURN_IF_ERROR(checkConvTransposeAttrs(spec));
  return convGeom(spec, y, w, x, /*bias=*/false, g);
}

/// Adds bias[c] to every element of channel c of y [N, C, ...].
static void addChannelBias(const float *bias, float *y, int64_t n, int64_t c,
                           int64_t plane) {
#pragma omp parallel for collapse(2) schedule(static) if (n * c * plane > 16384)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      float *p = y + (i * c + ch) * plane;
      for (int64_t k = 0; k < plane; ++k)
        p[k] += bias[ch];
    }
}

namespace {

/// ConvTranspose: X, W[, B] -> Y.
class ConvTransposeKernel final : public CpuKernel {
public:
  ConvTransposeKernel(const OpSpec &spec, const ConvGeom &g)
      : CpuKernel(spec), data(spec, g, /*wantDx=*/true, /*wantDw=*/false),
        bias(spec.inputs.size() == 3) {
    const auto &y = spec.outputs[0].shape;
    n = y[0];
    c = y[1];
    plane = spec.outputs[0].numel() / std::max<int64_t>(n * c, 1);
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    data.run({in[0], TensorRef{}, in[1]}, {out[0]});
    if (bias)
      addChannelBias(in[2].as<float>(), out[0].as<float>(), n, c, plane);
  }

private:
  ConvGradKernel data;
  bool bias;
  int64_t n = 0, c = 0, plane = 0;
};

} // namespace

static KernelOr createConvTranspose(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 2, 3, 1, 1, {0, 1, 2}, {0}));
  ConvGeom g;
  OASR_RETURN_IF_ERROR(convTransposeGeom(spec, spec.inputs[0], spec.inputs[1],
                                         spec.outputs[0], g));
  if (spec.inputs.size() == 3 &&
      spec.inputs[2].numel() != spec.outputs[0].shape[1]) {
    return nodeError(spec, "bias has " +
                               std::to_string(spec.inputs[2].numel()) +
                               " elements, expected " +
                               std::to_string(spec.outputs[0].shape[1]));
  }
  return guardCreate(
      spec, [&] { return std::make_unique<ConvTransposeKernel>(spec, g); });
}

namespace {

/// ConvTransposeGrad: dY, X, W -> dX, dW[, dB] (ConvTranspose's attributes).
class ConvTransposeGradKernel final : public CpuKernel {
public:
  ConvTransposeGradKernel(const OpSpec &spec, const ConvGeom &g, bool wantDx,
                          bool wantDw, bool wantDb)
      : CpuKernel(spec), wantDb(wantDb) {
    if (wantDx)
      dataGrad = std::make_unique<ConvKernel>(spec, g);
    if (wantDw)
      weightGrad = std::make_unique<ConvGradKernel>(spec, g, false, true);
    const auto &dy = spec.inputs[0].shape;
    n = dy[0];
    c = dy[1];
    plane = spec.inputs[0].numel() / std::max<int64_t>(n * c, 1);
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    if (dataGrad)
      dataGrad->run({in[0], in[2]}, {out[0]});
    if (weightGrad)
      weightGrad->run({in[1], in[0], in[2]}, {TensorRef{}, out[1]});
    if (wantDb) {
      const float *dy = in[0].as<float>();
      float *db = out[2].as<float>();
      for (int64_t ch = 0; ch < c; ++ch) {
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) {
          const float *p = dy + (i * c + ch) * plane;
          for (int64_t k = 0; k < plane; ++k)
            sum += p[k];
        }
        db[ch] = float(sum);
      }
    }
  }

private:
  std::unique_ptr<ConvKernel> dataGrad;
  std::unique_ptr<ConvGradKernel> weightGrad;
  bool wantDb;
  int64_t n = 0, c = 0, plane = 0;
};

} // namespace

static KernelOr createConvTransposeGrad(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 3, 3, 2, 3, {0, 1, 2}, {0, 1, 2}));
  const auto &dy = spec.inputs[0], &x = spec.inputs[1], &w = spec.inputs[2];
  if (spec.outputs[0].shape != x.shape || spec.outputs[1].shape != w.shape ||
      (spec.outputs.size() == 3 && spec.outputs[2].numel() != dy.shape[1])) {
    return nodeError(spec, "result shapes must be X's, W's and [C_out]");
  }
  ConvGeom g;
  OASR_RETURN_IF_ERROR(convTransposeGeom(spec, x, w, dy, g));
  bool wantDx = outputUsed(spec, 0), wantDw = outputUsed(spec, 1);
  bool wantDb = spec.outputs.size() == 3 && outputUsed(spec, 2);
  return guardCreate(spec, [&] {
    return std::make_unique<ConvTransposeGradKernel>(spec, g, wantDx, wantDw,
                                                     wantDb);
  });
}

void registerConvKernels(KernelRegistry &r) {
  r["Conv"] = createConv;
  r["ConvGrad"] = createConvGrad;
  r["ConvTranspose"] = createConvTranspose;
  r["ConvTransposeGrad"] = createConvTransposeGrad;
}

} // namespace oasr::rt::cpu
