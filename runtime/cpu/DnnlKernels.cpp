//===- DnnlKernels.cpp - oneDNN-backed CPU kernels ------------------------===//
//
// Convolution, batch normalization and Gemm/MatMul on oneDNN 2.6 (v2 API:
// op descriptor, then primitive descriptor), the family of the CUDA
// backend's DnnKernels.cpp (cuDNN, cuBLAS). The other oneDNN-backed kernels
// live in their op family's file on the same plumbing (Dnnl.h): average
// pooling in PoolingLossKernels, activations in PointwiseKernels, softmax in
// TransformerKernels, bf16 arithmetic in ArithmeticKernels, Transpose in
// ShapeKernels. Primitives are built once in create(); run()
// only binds the executor's buffers and executes. Tensors are f32 in plain
// row-major (NCHW / OIHW) layout; where oneDNN prefers a blocked layout
// (convolutions) the kernel keeps cached reorders into blocked copies that,
// like the convolutions' scratchpads, live in the kernel's workspace: the
// executor places it in the activation arena, so copies of different layers
// share memory instead of each kernel holding its own.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "oasr/Runtime/LowFloat.h"

#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <unordered_map>

namespace oasr::rt::cpu {
namespace {

/// Where a convolution's tensors live inside oneDNN. Blocked layouts (e.g.
/// nChw8c on AVX2) run 3x3 convolutions ~1.5x faster than plain NCHW even
/// with the reorders from and to the executor's plain buffers; for 1x1,
/// stride-1 convolutions on large planes the reorders cost more than the
/// blocked kernel saves (bench/results/kernels.txt). OASR_CPU_CONV_LAYOUT =
/// plain | blocked | auto (default) overrides the choice.
enum class ConvLayout { Plain, Blocked, Auto };

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

/// Shapes and descriptors of one convolution.
struct ConvGeom {
  Window win;
  dt type = dt::f32; ///< every tensor's (f32 or bf16)
  int64_t group = 1;
  bool bias = false;
  memory::desc xUser, wUser, bUser, yUser; // plain
  memory::desc xPrim, wPrim, bPrim, yPrim; // any (or plain)
};

static bool convGeom(const OpSpec &spec, const TensorDesc &x,
                     const TensorDesc &w, const TensorDesc &y, bool bias,
                     ConvGeom &g, std::string &error) {
  if (!convWindow(spec, x, w, y, g.group, g.win, error))
    return false;
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
  return true;
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

static std::unique_ptr<Kernel> createConv(const OpSpec &spec,
                                          std::string &error) {
  dt type;
  if (!checkArity(spec, 2, 3, 1, 1, error) ||
      !uniformFloat(spec, {0, 1, 2}, {0}, type, error))
    return nullptr;
  ConvGeom g;
  if (!convGeom(spec, spec.inputs[0], spec.inputs[1], spec.outputs[0],
                spec.inputs.size() == 3, g, error))
    return nullptr;
  if (g.bias && spec.inputs[2].numel() != spec.inputs[1].shape[0]) {
    error =
        nodeError(spec, "bias has " + std::to_string(spec.inputs[2].numel()) +
                            " elements, expected " +
                            std::to_string(spec.inputs[1].shape[0]));
    return nullptr;
  }
  return guardCreate(spec, error,
                     [&] { return std::make_unique<ConvKernel>(spec, g); });
}

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

static std::unique_ptr<Kernel> createConvGrad(const OpSpec &spec,
                                              std::string &error) {
  dt type;
  if (!checkArity(spec, 3, 3, 2, 3, error) ||
      !uniformFloat(spec, {0, 1, 2}, {0, 1, 2}, type, error))
    return nullptr;
  const auto &dy = spec.inputs[0], &x = spec.inputs[1], &w = spec.inputs[2];
  if (spec.outputs[0].shape != x.shape || spec.outputs[1].shape != w.shape ||
      (spec.outputs.size() == 3 && spec.outputs[2].numel() != w.shape[0])) {
    error = nodeError(spec, "result shapes must be X's, W's and [M]");
    return nullptr;
  }
  ConvGeom g;
  if (!convGeom(spec, x, w, dy, spec.outputs.size() == 3, g, error))
    return nullptr;
  bool wantDx = outputUsed(spec, 0);
  bool wantDw = outputUsed(spec, 1) || (g.bias && outputUsed(spec, 2));
  return guardCreate(spec, error, [&] {
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
static bool convTransposeGeom(const OpSpec &spec, const TensorDesc &x,
                              const TensorDesc &w, const TensorDesc &y,
                              ConvGeom &g, std::string &error) {
  return checkConvTransposeAttrs(spec, error) &&
         convGeom(spec, y, w, x, /*bias=*/false, g, error);
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

static std::unique_ptr<Kernel> createConvTranspose(const OpSpec &spec,
                                                   std::string &error) {
  if (!checkSpec(spec, 2, 3, 1, 1, {0, 1, 2}, {0}, error))
    return nullptr;
  ConvGeom g;
  if (!convTransposeGeom(spec, spec.inputs[0], spec.inputs[1], spec.outputs[0],
                         g, error))
    return nullptr;
  if (spec.inputs.size() == 3 &&
      spec.inputs[2].numel() != spec.outputs[0].shape[1]) {
    error =
        nodeError(spec, "bias has " + std::to_string(spec.inputs[2].numel()) +
                            " elements, expected " +
                            std::to_string(spec.outputs[0].shape[1]));
    return nullptr;
  }
  return guardCreate(spec, error, [&] {
    return std::make_unique<ConvTransposeKernel>(spec, g);
  });
}

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

static std::unique_ptr<Kernel> createConvTransposeGrad(const OpSpec &spec,
                                                       std::string &error) {
  if (!checkSpec(spec, 3, 3, 2, 3, {0, 1, 2}, {0, 1, 2}, error))
    return nullptr;
  const auto &dy = spec.inputs[0], &x = spec.inputs[1], &w = spec.inputs[2];
  if (spec.outputs[0].shape != x.shape || spec.outputs[1].shape != w.shape ||
      (spec.outputs.size() == 3 && spec.outputs[2].numel() != dy.shape[1])) {
    error = nodeError(spec, "result shapes must be X's, W's and [C_out]");
    return nullptr;
  }
  ConvGeom g;
  if (!convTransposeGeom(spec, x, w, dy, g, error))
    return nullptr;
  bool wantDx = outputUsed(spec, 0), wantDw = outputUsed(spec, 1);
  bool wantDb = spec.outputs.size() == 3 && outputUsed(spec, 2);
  return guardCreate(spec, error, [&] {
    return std::make_unique<ConvTransposeGradKernel>(spec, g, wantDx, wantDw,
                                                     wantDb);
  });
}

//===----------------------------------------------------------------------===//
// BatchNormalization / BatchNormalizationGrad
//===----------------------------------------------------------------------===//

static const dnnl::normalization_flags kScaleShift =
    dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

static bool checkBnShapes(const OpSpec &spec, const TensorDesc &x,
                          const std::vector<size_t> &perChannelInputs,
                          const std::vector<size_t> &perChannelOutputs,
                          std::string &error) {
  if (x.rank() < 2 || x.rank() > 5) {
    error =
        nodeError(spec, "expects X of rank 2 to 5, got " + shapeStr(x.shape));
    return false;
  }
  int64_t c = x.shape[1];
  auto bad = [&](bool isInput, size_t i, const TensorDesc &d) {
    error = nodeError(spec, std::string(isInput ? "operand " : "result ") +
                                std::to_string(i) + " has shape " +
                                shapeStr(d.shape) + ", expected [" +
                                std::to_string(c) + "]");
    return false;
  };
  for (size_t i : perChannelInputs)
    if (i < spec.inputs.size() && spec.inputs[i].numel() != c)
      return bad(true, i, spec.inputs[i]);
  for (size_t i : perChannelOutputs)
    if (i < spec.outputs.size() && spec.outputs[i].numel() != c)
      return bad(false, i, spec.outputs[i]);
  return true;
}

/// The oneDNN type of a normalisation whose data tensors (`ins`, `outs`)
/// are one type, f32 or bf16, and whose other float tensors (scale, bias,
/// statistics) are f32; oneDNN computes the statistics in f32 either way.
static bool normTypes(const OpSpec &spec, const std::vector<size_t> &ins,
                      const std::vector<size_t> &outs,
                      const std::vector<size_t> &f32Ins,
                      const std::vector<size_t> &f32Outs, dt &type,
                      std::string &error) {
  return uniformFloat(spec, ins, outs, type, error) &&
         checkAllF32(spec, f32Ins, f32Outs, error);
}

/// BatchNormalization: X, scale, B, mean, var -> Y[, running_mean',
/// running_var'[, saved_mean, saved_inv_std]] (training) or -> Y (inference).
class BatchNormKernel final : public CpuKernel {
public:
  BatchNormKernel(const OpSpec &spec, bool training)
      : CpuKernel(spec), training(training) {
    const TensorDesc &xd = spec.inputs[0];
    c = xd.shape[1];
    count = xd.numel() / c;
    eps = float(spec.attrs.getFloat("epsilon", 1e-5));
    momentum = float(spec.attrs.getFloat("momentum", 0.9));
    numOutputs = spec.outputs.size();
    memory::desc md = plainDesc(xd.shape, dataType(xd)), cmd = plainDesc({c});
    auto flags =
        training ? kScaleShift
                 : kScaleShift | dnnl::normalization_flags::use_global_stats;
    dnnl::batch_normalization_forward::desc d(
        training ? dnnl::prop_kind::forward_training
                 : dnnl::prop_kind::forward_inference,
        md, eps, flags);
    dnnl::batch_normalization_forward::primitive_desc pd(d, engine());
    prim = dnnl::batch_normalization_forward(pd);
    x = userMem(md);
    y = userMem(md);
    scale = userMem(cmd);
    shift = userMem(cmd);
    mean = userMem(cmd);
    var = userMem(cmd);
    if (training) {
      meanBuf.resize(c);
      varBuf.resize(c);
    }
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    auto &s = stream();
    bindMem(x, in[0].data);
    bindMem(scale, in[1].data);
    bindMem(shift, in[2].data);
    bindMem(y, out[0].data);
    if (!training) {
      bindMem(mean, in[3].data);
      bindMem(var, in[4].data);
    } else {
      // Batch statistics land in saved_mean (when present) and a scratch
      // variance; the inputs' running stats are read after the primitive.
      bindMem(mean, numOutputs >= 4 ? out[3].data : meanBuf.data());
      bindMem(var, varBuf.data());
    }
    prim.execute(s, {{DNNL_ARG_SRC, x},
                     {DNNL_ARG_DST, y},
                     {DNNL_ARG_SCALE, scale},
                     {DNNL_ARG_SHIFT, shift},
                     {DNNL_ARG_MEAN, mean},
                     {DNNL_ARG_VARIANCE, var}});
    s.wait();
    if (!training)
      return;
    const float *bm = static_cast<const float *>(mean.get_data_handle());
    const float *bv = varBuf.data();
    const float *rm = in[3].as<float>(), *rv = in[4].as<float>();
    float *rmOut = numOutputs >= 2 ? out[1].as<float>() : nullptr;
    float *rvOut = numOutputs >= 3 ? out[2].as<float>() : nullptr;
    float *invStd = numOutputs >= 5 ? out[4].as<float>() : nullptr;
    // PyTorch updates the running variance with the unbiased estimate.
    float unbias = count > 1 ? float(count) / float(count - 1) : 1.0f;
    for (int64_t i = 0; i < c; ++i) {
      float m = bm[i], v = bv[i];
      if (rmOut)
        rmOut[i] = momentum * rm[i] + (1 - momentum) * m;
      if (rvOut)
        rvOut[i] = momentum * rv[i] + (1 - momentum) * v * unbias;
      if (invStd)
        invStd[i] = 1.0f / std::sqrt(v + eps);
    }
  }

private:
  bool training;
  int64_t c, count;
  float eps, momentum;
  size_t numOutputs;
  dnnl::batch_normalization_forward prim;
  memory x, y, scale, shift, mean, var;
  std::vector<float> meanBuf, varBuf;
};

static std::unique_ptr<Kernel> createBatchNorm(const OpSpec &spec,
                                               std::string &error) {
  dt type;
  if (!checkArity(spec, 5, 5, 1, 5, error) ||
      !normTypes(spec, {0}, {0}, {1, 2, 3, 4}, {1, 2, 3, 4}, type, error))
    return nullptr;
  bool training = spec.attrs.has("training_mode")
                      ? spec.attrs.getInt("training_mode") != 0
                      : spec.outputs.size() > 1;
  if (!training && spec.outputs.size() > 1) {
    error = nodeError(spec, "inference form (training_mode = 0) has one "
                            "result, got " +
                                std::to_string(spec.outputs.size()));
    return nullptr;
  }
  if (!checkBnShapes(spec, spec.inputs[0], {1, 2, 3, 4}, {1, 2, 3, 4}, error))
    return nullptr;
  if (spec.outputs[0].shape != spec.inputs[0].shape) {
    error = nodeError(spec, "Y must have X's shape");
    return nullptr;
  }
  if (type == dt::bf16)
    return createBatchNormBF16(spec, training);
  return guardCreate(spec, error, [&] {
    return std::make_unique<BatchNormKernel>(spec, training);
  });
}

/// BatchNormalizationGrad: dY, X, scale, saved_mean, saved_inv_std -> dX,
/// dScale, dBias.
class BatchNormGradKernel final : public CpuKernel {
public:
  explicit BatchNormGradKernel(const OpSpec &spec) : CpuKernel(spec) {
    const TensorDesc &xd = spec.inputs[1];
    c = xd.shape[1];
    eps = float(spec.attrs.getFloat("epsilon", 1e-5));
    numOutputs = spec.outputs.size();
    memory::desc md = plainDesc(xd.shape, dataType(xd)), cmd = plainDesc({c});
    dnnl::batch_normalization_forward::desc fd(
        dnnl::prop_kind::forward_training, md, eps, kScaleShift);
    dnnl::batch_normalization_forward::primitive_desc fpd(fd, engine());
    dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, md,
                                               md, eps, kScaleShift);
    dnnl::batch_normalization_backward::primitive_desc pd(d, engine(), fpd);
    prim = dnnl::batch_normalization_backward(pd);
    dy = userMem(md);
    x = userMem(md);
    dx = userMem(md);
    scale = userMem(cmd);
    mean = userMem(cmd);
    var = memory(cmd, engine());
    dScale = userMem(cmd);
    dShift = userMem(cmd);
    scratchScale.resize(c);
    scratchShift.resize(c);
    // oneDNN 2.6 lists SHIFT among the backward pass's inputs (unread).
    shift = memory(cmd, engine());
    std::memset(shift.get_data_handle(), 0, size_t(c) * sizeof(float));
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    auto &s = stream();
    const float *invStd = in[4].as<float>();
    float *v = static_cast<float *>(var.get_data_handle());
    for (int64_t i = 0; i < c; ++i)
      v[i] = 1.0f / (invStd[i] * invStd[i]) - eps;
    bindMem(dy, in[0].data);
    bindMem(x, in[1].data);
    bindMem(scale, in[2].data);
    bindMem(mean, in[3].data);
    bindMem(dx, out[0].data);
    bindMem(dScale, numOutputs >= 2 ? out[1].data : scratchScale.data());
    bindMem(dShift, numOutputs >= 3 ? out[2].data : scratchShift.data());
    prim.execute(s, {{DNNL_ARG_DIFF_DST, dy},
                     {DNNL_ARG_SRC, x},
                     {DNNL_ARG_SCALE, scale},
                     {DNNL_ARG_SHIFT, shift},
                     {DNNL_ARG_MEAN, mean},
                     {DNNL_ARG_VARIANCE, var},
                     {DNNL_ARG_DIFF_SRC, dx},
                     {DNNL_ARG_DIFF_SCALE, dScale},
                     {DNNL_ARG_DIFF_SHIFT, dShift}});
    s.wait();
  }

private:
  int64_t c;
  float eps;
  size_t numOutputs;
  dnnl::batch_normalization_backward prim;
  memory dy, x, dx, scale, shift, mean, var, dScale, dShift;
  std::vector<float> scratchScale, scratchShift;
};

static std::unique_ptr<Kernel> createBatchNormGrad(const OpSpec &spec,
                                                   std::string &error) {
  dt type;
  if (!checkArity(spec, 5, 5, 1, 3, error) ||
      !normTypes(spec, {0, 1}, {0}, {2, 3, 4}, {1, 2}, type, error) ||
      !checkBnShapes(spec, spec.inputs[1], {2, 3, 4}, {1, 2}, error))
    return nullptr;
  if (spec.inputs[0].shape != spec.inputs[1].shape ||
      spec.outputs[0].shape != spec.inputs[1].shape) {
    error = nodeError(spec, "dY, X and dX must have the same shape");
    return nullptr;
  }
  if (type == dt::bf16)
    return createBatchNormGradBF16(spec);
  return guardCreate(
      spec, error, [&] { return std::make_unique<BatchNormGradKernel>(spec); });
}

//===----------------------------------------------------------------------===//
// Gemm / GemmGrad / MatMul
//===----------------------------------------------------------------------===//

/// rows x cols view of a row-major buffer; `transposed` means the buffer
/// holds the cols x rows matrix.
static memory::desc matDesc(int64_t rows, int64_t cols, bool transposed,
                            dt type) {
  return memory::desc({rows, cols}, type,
                      transposed ? dims{1, rows} : dims{cols, 1});
}

/// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] on row-major buffers; A and B
/// are operands `a` and `b` of the node, C is its result `c`.
static PlainPrimitive matMul2D(int64_t m, int64_t k, int64_t n, bool ta,
                               bool tb, float alpha, size_t a, size_t b,
                               size_t c, dt type = dt::f32,
                               std::optional<size_t> rowBias = {},
                               dt outType = dt::undef) {
  if (outType == dt::undef)
    outType = type;
  auto amd = matDesc(m, k, ta, type), bmd = matDesc(k, n, tb, type),
       cmd = matDesc(m, n, false, outType), biasMd = matDesc(1, n, false, type);
  dnnl::primitive_attr attr;
  if (alpha != 1.0f)
    attr.set_output_scales(0, {alpha});
  dnnl::matmul::primitive_desc pd(
      rowBias ? dnnl::matmul::desc(amd, bmd, biasMd, cmd)
              : dnnl::matmul::desc(amd, bmd, cmd),
      attr, engine());
  PlainPrimitive p{dnnl::matmul(pd)};
  p.in(DNNL_ARG_SRC, amd, a)
      .in(DNNL_ARG_WEIGHTS, bmd, b)
      .out(DNNL_ARG_DST, cmd, c);
  if (rowBias)
    p.in(DNNL_ARG_BIAS, biasMd, *rowBias);
  return p;
}

/// How a Gemm's C operand broadcasts onto [M, N].
enum class BiasKind { None, Scalar, Row /*[N]*/, Col /*[M,1]*/, Full };

static bool biasKind(const OpSpec &spec, const TensorDesc &c, int64_t m,
                     int64_t n, BiasKind &kind, std::string &error) {
  std::vector<int64_t> s = c.shape;
  while (s.size() < 2)
    s.insert(s.begin(), 1);
  if (s.size() == 2 && s[0] == 1 && s[1] == 1)
    kind = BiasKind::Scalar;
  else if (s.size() == 2 && s[0] == 1 && s[1] == n)
    kind = BiasKind::Row;
  else if (s.size() == 2 && s[0] == m && s[1] == 1)
    kind = BiasKind::Col;
  else if (s.size() == 2 && s[0] == m && s[1] == n)
    kind = BiasKind::Full;
  else {
    error = gemmBiasError(spec, c, m, n);
    return false;
  }
  return true;
}

class GemmKernel final : public CpuKernel {
public:
  /// `fusedBias`: oneDNN adds a row bias C (beta 1) itself (bf16).
  GemmKernel(const OpSpec &spec, const GemmShape &g, BiasKind kind, dt type,
             bool fusedBias)
      : CpuKernel(spec), g(g), kind(fusedBias ? BiasKind::None : kind),
        mm(matMul2D(g.m, g.k, g.n, g.ta, g.tb, g.alpha, 0, 1, 0, type,
                    fusedBias ? std::optional<size_t>(2) : std::nullopt,
                    dataType(spec.outputs[0]))) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    mm.run(in, out);
    if (kind == BiasKind::None || g.beta == 0.0f)
      return;
    float *y = out[0].as<float>();
    const float *c = in[2].as<float>();
    const float beta = g.beta;
    const int64_t m = g.m, n = g.n;
    BiasKind kd = kind;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      float *row = y + i * n;
      switch (kd) {
      case BiasKind::Scalar:
        for (int64_t j = 0; j < n; ++j)
          row[j] += beta * c[0];
        break;
      case BiasKind::Row:
        for (int64_t j = 0; j < n; ++j)
          row[j] += beta * c[j];
        break;
      case BiasKind::Col:
        for (int64_t j = 0; j < n; ++j)
          row[j] += beta * c[i];
        break;
      case BiasKind::Full:
        for (int64_t j = 0; j < n; ++j)
          row[j] += beta * c[i * n + j];
        break;
      case BiasKind::None:
        break;
      }
    }
  }

private:
  GemmShape g;
  BiasKind kind;
  PlainPrimitive mm;
};

static std::unique_ptr<Kernel> createGemm(const OpSpec &spec,
                                          std::string &error) {
  dt type;
  if (!checkArity(spec, 2, 3, 1, 1, error) ||
      !uniformFloat(spec, {0, 1, 2}, {0}, type, error,
                    /*wideOutputs=*/true))
    return nullptr;
  GemmShape g;
  BiasKind kind = BiasKind::None;
  if (!gemmShape(spec, spec.inputs[0], spec.inputs[1], spec.outputs[0], g,
                 error))
    return nullptr;
  if (spec.inputs.size() == 3 &&
      !biasKind(spec, spec.inputs[2], g.m, g.n, kind, error))
    return nullptr;
  bool fusedBias = type != dt::f32 && kind == BiasKind::Row && g.beta == 1.0f;
  if (type != dt::f32 && kind != BiasKind::None && g.beta != 0.0f &&
      !fusedBias) {
    // Other biases are added on f32 buffers: the backend widens this node.
    error = nodeError(spec, "a bf16 Gemm with this C runs widened");
    return nullptr;
  }
  return guardCreate(spec, error, [&] {
    return std::make_unique<GemmKernel>(spec, g, kind, type, fusedBias);
  });
}

/// GemmGrad: dY, A, B -> dA, dB[, dC].
class GemmGradKernel final : public CpuKernel {
public:
  GemmGradKernel(const OpSpec &spec, const GemmShape &g, BiasKind kind, dt type)
      : CpuKernel(spec), g(g), kind(kind), bf16(type == dt::bf16) {
    // Y = alpha op(A) op(B): dop(A) = alpha dY op(B)^T, dop(B) = alpha
    // op(A)^T dY; a transposed operand's gradient is the transposed product.
    // Operands dY [M,N] (0); A (1) is [M,K] or (transA) [K,M]; B (2) is [K,N]
    // or [N,K].
    if (outputUsed(spec, 0)) {
      if (!g.ta) // dA[M,K] = dY[M,N] * op(B)^T[N,K]
        mmA.emplace(matMul2D(g.m, g.n, g.k, false, !g.tb, g.alpha, 0, 2, 0,
                             type, {}, dataType(spec.outputs[0])));
      else // dA[K,M] = op(B)[K,N] * dY^T[N,M]
        mmA.emplace(matMul2D(g.k, g.n, g.m, g.tb, true, g.alpha, 2, 0, 0, type,
                             {}, dataType(spec.outputs[0])));
    }
    if (outputUsed(spec, 1)) {
      if (!g.tb) // dB[K,N] = op(A)^T[K,M] * dY[M,N]
        mmB.emplace(matMul2D(g.k, g.m, g.n, !g.ta, false, g.alpha, 1, 0, 1,
                             type, {}, dataType(spec.outputs[1])));
      else // dB[N,K] = dY^T[N,M] * op(A)[M,K]
        mmB.emplace(matMul2D(g.n, g.m, g.k, true, g.ta, g.alpha, 0, 1, 1, type,
                             {}, dataType(spec.outputs[1])));
    }
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    if (mmA)
      mmA->run(in, out);
    if (mmB)
      mmB->run(in, out);
    if (kind == BiasKind::None || out.size() <= 2)
      return;
    if (!bf16)
      return reduceBias(in[0].as<float>(), out[2].as<float>());
    // bf16 dY: a row bias is summed from widened copies of 64-column
    // strips, then rounded once (or written f32).
    const uint16_t *dyh = in[0].as<uint16_t>();
    const bool wide = out[2].desc.dtype == DType::F32;
    const int64_t m = g.m, n = g.n;
    const float beta = g.beta;
#pragma omp parallel for schedule(static)
    for (int64_t j0 = 0; j0 < n; j0 += 64) {
      int64_t j1 = std::min(n, j0 + 64);
      float acc[64] = {0};
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = j0; j < j1; ++j)
          acc[j - j0] += bf16ToFloat(dyh[i * n + j]);
      for (int64_t j = j0; j < j1; ++j) {
        if (wide)
          out[2].as<float>()[j] = beta * acc[j - j0];
        else
          out[2].as<uint16_t>()[j] = floatToBF16(beta * acc[j - j0]);
      }
    }
  }

private:
  void reduceBias(const float *dy, float *dc) {
    const int64_t m = g.m, n = g.n;
    const float beta = g.beta;
    switch (kind) {
    case BiasKind::Scalar: {
      double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
      for (int64_t i = 0; i < m * n; ++i)
        sum += dy[i];
      dc[0] = float(beta * sum);
      break;
    }
    case BiasKind::Row:
#pragma omp parallel for schedule(static)
      for (int64_t j0 = 0; j0 < n; j0 += 64) {
        int64_t j1 = std::min(n, j0 + 64);
        float acc[64] = {0};
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = j0; j < j1; ++j)
            acc[j - j0] += dy[i * n + j];
        for (int64_t j = j0; j < j1; ++j)
          dc[j] = beta * acc[j - j0];
      }
      break;
    case BiasKind::Col:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < m; ++i) {
        float acc = 0;
        for (int64_t j = 0; j < n; ++j)
          acc += dy[i * n + j];
        dc[i] = beta * acc;
      }
      break;
    case BiasKind::Full:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < m * n; ++i)
        dc[i] = beta * dy[i];
      break;
    case BiasKind::None:
      break;
    }
  }

  GemmShape g;
  BiasKind kind;
  bool bf16;
  std::optional<PlainPrimitive> mmA, mmB; // when dA / dB is read
};

static std::unique_ptr<Kernel> createGemmGrad(const OpSpec &spec,
                                              std::string &error) {
  dt type;
  if (!checkArity(spec, 3, 3, 2, 3, error) ||
      !uniformFloat(spec, {0, 1, 2}, {0, 1, 2}, type, error,
                    /*wideOutputs=*/true))
    return nullptr;
  GemmShape g;
  if (!gemmGradShape(spec, g, error))
    return nullptr;
  BiasKind kind = BiasKind::None;
  if (spec.outputs.size() == 3 &&
      !biasKind(spec, spec.outputs[2], g.m, g.n, kind, error))
    return nullptr;
  if (type != dt::f32 && kind != BiasKind::None && kind != BiasKind::Row) {
    // Other dC are summed on f32 buffers: the backend widens this node.
    error = nodeError(spec, "a bf16 GemmGrad with this dC runs widened");
    return nullptr;
  }
  return guardCreate(spec, error, [&] {
    return std::make_unique<GemmGradKernel>(spec, g, kind, type);
  });
}

/// MatMul with numpy semantics (1-D operands promoted, batch dims
/// broadcast), on oneDNN's batched matmul.
static PlainPrimitive matMul(const dims &ad, const dims &bd, const dims &yd,
                             dt type, dt outType) {
  auto amd = plainDesc({ad.begin(), ad.end()}, type),
       bmd = plainDesc({bd.begin(), bd.end()}, type),
       ymd = plainDesc({yd.begin(), yd.end()}, outType);
  PlainPrimitive p(dnnl::matmul(dnnl::matmul::primitive_desc(
      dnnl::matmul::desc(amd, bmd, ymd), engine())));
  p.in(DNNL_ARG_SRC, amd, 0)
      .in(DNNL_ARG_WEIGHTS, bmd, 1)
      .out(DNNL_ARG_DST, ymd, 0);
  return p;
}

static std::unique_ptr<Kernel> createMatMul(const OpSpec &spec,
                                            std::string &error) {
  dt type;
  if (!checkArity(spec, 2, 2, 1, 1, error) ||
      !uniformFloat(spec, {0, 1}, {0}, type, error, /*wideOutputs=*/true))
    return nullptr;
  dims ad, bd, yd;
  if (!matMulShapes(spec, ad, bd, yd, error))
    return nullptr;
  size_t r = yd.size();
  if (r > DNNL_MAX_NDIMS) {
    error = nodeError(spec, "rank above oneDNN's limit");
    return nullptr;
  }
  return guardCreate(spec, error, [&] {
    return std::make_unique<PrimitiveKernel>(
        spec, matMul(ad, bd, yd, type, dataType(spec.outputs[0])));
  });
}

/// FusedMatMul {transA, transB, alpha} (com.microsoft): MatMul reading a
/// transposed operand through its strides (no copy). Rank >= 2 operands,
/// batch dimensions broadcast as MatMul's.
static std::unique_ptr<Kernel> createFusedMatMul(const OpSpec &spec,
                                                 std::string &error) {
  dt type;
  if (!checkArity(spec, 2, 2, 1, 1, error) ||
      !uniformFloat(spec, {0, 1}, {0}, type, error, /*wideOutputs=*/true))
    return nullptr;
  if (spec.attrs.getInt("transBatchA", 0) ||
      spec.attrs.getInt("transBatchB", 0)) {
    error = nodeError(spec, "transBatchA/transBatchB are not supported");
    return nullptr;
  }
  bool trans[2] = {spec.attrs.getInt("transA", 0) != 0,
                   spec.attrs.getInt("transB", 0) != 0};
  // The logical (untransposed) operands, for MatMul's shape rule.
  OpSpec logical = spec;
  for (size_t i = 0; i < 2; ++i) {
    auto &s = logical.inputs[i].shape;
    if (s.size() < 2) {
      error = nodeError(spec, "operands must have rank >= 2");
      return nullptr;
    }
    if (trans[i])
      std::swap(s[s.size() - 1], s[s.size() - 2]);
  }
  dims ad, bd, yd;
  if (!matMulShapes(logical, ad, bd, yd, error))
    return nullptr;
  if (yd.size() > DNNL_MAX_NDIMS) {
    error = nodeError(spec, "rank above oneDNN's limit");
    return nullptr;
  }
  // A transposed operand's logical view: its stored row-major strides with
  // the last two swapped.
  auto view = [&](const dims &d, bool t) {
    dims stored = d, strides(d.size());
    if (t)
      std::swap(stored[d.size() - 1], stored[d.size() - 2]);
    int64_t acc = 1;
    for (size_t i = d.size(); i-- > 0;) {
      strides[i] = acc;
      acc *= stored[i];
    }
    if (t)
      std::swap(strides[d.size() - 1], strides[d.size() - 2]);
    return memory::desc(d, type, strides);
  };
  float alpha = float(spec.attrs.getFloat("alpha", 1.0));
  return guardCreate(spec, error, [&]() -> std::unique_ptr<Kernel> {
    auto amd = view(ad, trans[0]), bmd = view(bd, trans[1]),
         ymd = plainDesc({yd.begin(), yd.end()}, dataType(spec.outputs[0]));
    dnnl::primitive_attr attr;
    if (alpha != 1.0f)
      attr.set_output_scales(0, {alpha});
    PlainPrimitive p(dnnl::matmul(dnnl::matmul::primitive_desc(
        dnnl::matmul::desc(amd, bmd, ymd), attr, engine())));
    p.in(DNNL_ARG_SRC, amd, 0)
        .in(DNNL_ARG_WEIGHTS, bmd, 1)
        .out(DNNL_ARG_DST, ymd, 0);
    return std::make_unique<PrimitiveKernel>(spec, std::move(p));
  });
}

} // namespace

void registerDnnlKernels(KernelRegistry &r) {
  r["Conv"] = createConv;
  r["ConvGrad"] = createConvGrad;
  r["ConvTranspose"] = createConvTranspose;
  r["ConvTransposeGrad"] = createConvTransposeGrad;
  r["BatchNormalization"] = createBatchNorm;
  r["BatchNormalizationGrad"] = createBatchNormGrad;
  r["Gemm"] = createGemm;
  r["GemmGrad"] = createGemmGrad;
  r["MatMul"] = createMatMul;
  r["FusedMatMul"] = createFusedMatMul;
}

} // namespace oasr::rt::cpu
