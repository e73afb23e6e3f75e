//===- RecurrentKernels.cpp - LSTM and GRU on oneDNN's RNN primitives -----===//
//
// ONNX LSTM and GRU (layout 0) and their gradients LSTMGrad / GRUGrad
// (lib/Ops/NNOps.cpp, gradRecurrent) on oneDNN 2.6's lstm, gru
// (linear_before_reset=0) and lbr_gru (linear_before_reset=1, what PyTorch
// exports) primitives.
//
// Layouts. X [T, N, I] is oneDNN's tnc and initial_h / Y_h [D, N, H] its
// ldnc with one layer, so those are bound in place, as is Y [T, 1, N, H] of
// a one-direction node. ONNX's W [D, G*H, I] and R [D, G*H, H] are oneDNN's
// ldgoi once the gates are in oneDNN's order (LSTM: ONNX i, o, f, c is
// oneDNN i, f, c, o; GRU: ONNX z, r, h is oneDNN u, r, o): each run copies
// them gate by gate into an ldgoi scratch and reorders that into the layout
// the primitive chose. oneDNN has one bias per gate, ONNX's Wb + Rb; lbr_gru
// has a fourth, the h gate's Rb, which stays inside r * (R h + Rb). So the
// bias gradient goes back to both halves (dWb = dRb), except that the lbr h
// gate's halves get their own. A bidirectional node is one
// bidirectional_concat primitive; its [T, N, 2H] output is rearranged into
// ONNX's Y [T, 2, N, H] (and dY the other way).
//
// Forward and backward. oneDNN's backward needs the forward's training
// workspace (every step's gates), but the executor hands a gradient kernel
// only the node's operands -- no state of the forward kernel. So the forward
// kernel runs forward_inference (no workspace), and the gradient kernel
// recomputes the forward in forward_training mode into a workspace that is
// kernel scratch, then runs the backward primitive. That is one extra
// forward per step (the cost rule counts it) and nothing held alive between
// the two passes; keeping the workspace instead would need an extra result
// on the forward node that autodiff and every other backend would have to
// carry.
//
// Not implemented, refused at kernel creation with the node's name:
// sequence_lens, peephole weights (P), clip, input_forget, activations
// other than the defaults, activation_alpha/beta, layout=1.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include <cstring>
#include <unordered_map>

namespace oasr::rt::cpu {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;
using Args = std::unordered_map<int, memory>;

namespace {

enum class Cell { LSTM, GRU, LbrGRU };

} // namespace

/// oneDNN gate q is ONNX gate perm[q].
constexpr int kLstmGates[4] = {0, 2, 3, 1};
constexpr int kGruGates[3] = {0, 1, 2};

namespace {

/// Shapes, operand positions and oneDNN descriptors of one LSTM/GRU node or
/// its gradient.
struct RnnGeom {
  Cell cell = Cell::LSTM;
  bool grad = false;
  int64_t T = 0, N = 0, I = 0, H = 0, D = 1;
  int64_t G = 4;         ///< gates
  int64_t biasGates = 4; ///< oneDNN's bias vectors (lbr_gru: G + 1)
  const int *perm = kLstmGates;
  dnnl::rnn_direction dir = dnnl::rnn_direction::unidirectional_left2right;
  /// Operand positions; -1 where the op has none.
  int h0 = 5, c0 = 6, dy = -1, dyh = -1, dyc = -1;

  bool lstm() const { return cell == Cell::LSTM; }
  bool lbr() const { return cell == Cell::LbrGRU; }
  memory::desc layerIn() const {
    return memory::desc({T, N, I}, dt::f32, tag::tnc);
  }
  memory::desc layerOut() const {
    return memory::desc({T, N, D * H}, dt::f32, tag::tnc);
  }
  memory::desc iter() const {
    return memory::desc({1, D, N, H}, dt::f32, tag::ldnc);
  }
  /// Weights applied to a K-wide input (K = I: W, K = H: R).
  memory::desc weights(int64_t k, tag t) const {
    return memory::desc({1, D, k, G, H}, dt::f32, t);
  }
  memory::desc bias() const {
    return memory::desc({1, D, biasGates, H}, dt::f32, tag::ldgo);
  }
};

} // namespace

/// Optional operands left out are TensorDescs without dimensions (and past
/// the end when trailing); none of the recurrent operands is a scalar.
static bool present(const OpSpec &spec, int idx) {
  return idx >= 0 && size_t(idx) < spec.inputs.size() &&
         !spec.inputs[size_t(idx)].shape.empty();
}

static std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const std::string &e : v)
    s += (s.empty() ? "" : ", ") + e;
  return "[" + s + "]";
}

/// Validates an LSTM/GRU node (grad: LSTMGrad/GRUGrad) and fills `g`.
static Status rnnGeom(const OpSpec &spec, bool lstm, bool grad, RnnGeom &g) {
  auto fail = [&](const std::string &msg) { return nodeError(spec, msg); };
  // Forward: X W R [B] [sequence_lens] [initial_h] [initial_c] [P] ->
  // [Y] [Y_h] [Y_c]; gradient: X W R B h0 [c0] dY dY_h [dY_c] ->
  // dX dW dR dB dh0 [dc0].
  size_t maxIn = grad ? (lstm ? 9 : 7) : (lstm ? 8 : 6);
  size_t minOut = grad ? (lstm ? 6 : 5) : 0;
  size_t maxOut = grad ? minOut : (lstm ? 3 : 2);
  OASR_RETURN_IF_ERROR(checkArity(spec, 3, maxIn, minOut, maxOut));
  if (!grad && present(spec, 4))
    return fail("sequence_lens is not supported (every sequence must have "
                "the full length)");
  if (!grad && lstm && present(spec, 7))
    return fail("peephole weights (input P) are not supported");
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (present(spec, int(i)))
      OASR_RETURN_IF_ERROR(checkDType(spec, true, i, DType::F32));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    OASR_RETURN_IF_ERROR(checkDType(spec, false, i, DType::F32));

  const AttrMap &a = spec.attrs;
  if (a.getInt("layout", 0) != 0)
    return fail("layout=1 (batch first) is not supported");
  if (a.has("clip"))
    return fail("clip is not supported");
  if (a.has("activation_alpha") || a.has("activation_beta"))
    return fail("activation_alpha/activation_beta are not supported");
  if (lstm && a.getInt("input_forget", 0) != 0)
    return fail("input_forget=1 is not supported");
  std::string direction = a.getString("direction", "forward");
  if (direction == "forward") {
    g.D = 1;
  } else if (direction == "reverse") {
    g.D = 1;
    g.dir = dnnl::rnn_direction::unidirectional_right2left;
  } else if (direction == "bidirectional") {
    g.D = 2;
    g.dir = dnnl::rnn_direction::bidirectional_concat;
  } else {
    return fail("direction '" + direction +
                "' is not one of forward, reverse, bidirectional");
  }
  if (a.has("activations")) {
    std::vector<std::string> want;
    for (int64_t d = 0; d < g.D; ++d)
      for (const char *f :
           lstm ? std::vector<const char *>{"Sigmoid", "Tanh", "Tanh"}
                : std::vector<const char *>{"Sigmoid", "Tanh"})
        want.push_back(f);
    std::vector<std::string> got = a.getStrings("activations");
    if (got != want)
      return fail("activations " + joined(got) +
                  " are not supported (oneDNN implements only the default " +
                  joined(want) + ")");
  }
  int64_t lbr = lstm ? 0 : a.getInt("linear_before_reset", 0);
  if (lbr != 0 && lbr != 1)
    return fail("linear_before_reset must be 0 or 1, got " +
                std::to_string(lbr));

  g.grad = grad;
  g.cell = lstm ? Cell::LSTM : lbr ? Cell::LbrGRU : Cell::GRU;
  g.G = lstm ? 4 : 3;
  g.biasGates = g.G + (lbr ? 1 : 0);
  g.perm = lstm ? kLstmGates : kGruGates;
  if (grad) {
    g.h0 = 4;
    g.c0 = lstm ? 5 : -1;
    g.dy = lstm ? 6 : 5;
    g.dyh = g.dy + 1;
    g.dyc = lstm ? 8 : -1;
  } else {
    g.h0 = 5;
    g.c0 = lstm ? 6 : -1;
  }

  const TensorDesc &x = spec.inputs[0], &w = spec.inputs[1];
  if (x.rank() != 3 || w.rank() != 3 || w.shape[1] % g.G != 0)
    return fail("X " + shapeStr(x.shape) + " and W " + shapeStr(w.shape) +
                " must be [T, N, I] and [D, " + std::to_string(g.G) + "*H, I]");
  g.T = x.shape[0];
  g.N = x.shape[1];
  g.I = x.shape[2];
  g.H = w.shape[1] / g.G;
  if (a.has("hidden_size") && a.getInt("hidden_size") != g.H)
    return fail("hidden_size=" + std::to_string(a.getInt("hidden_size")) +
                " does not match W " + shapeStr(w.shape));
  std::vector<int64_t> state = {g.D, g.N, g.H};
  std::vector<int64_t> y = {g.T, g.D, g.N, g.H};
  std::vector<int64_t> bias = {g.D, 2 * g.G * g.H};
  // Expected shapes by position; empty: no operand there.
  std::vector<std::vector<int64_t>> ins(spec.inputs.size());
  ins[0] = x.shape;
  ins[1] = {g.D, g.G * g.H, g.I};
  ins[2] = {g.D, g.G * g.H, g.H};
  auto expect = [&](int idx, const std::vector<int64_t> &s) {
    if (idx >= 0 && size_t(idx) < ins.size())
      ins[size_t(idx)] = s;
  };
  expect(3, bias);
  expect(g.h0, state);
  expect(g.c0, state);
  expect(g.dy, y);
  expect(g.dyh, state);
  expect(g.dyc, state);
  for (size_t i = 0; i < ins.size(); ++i)
    if (present(spec, int(i)) && spec.inputs[i].shape != ins[i])
      return fail("operand #" + std::to_string(i) + " has shape " +
                  shapeStr(spec.inputs[i].shape) + ", expected " +
                  shapeStr(ins[i]) + " (X " + shapeStr(x.shape) + ", " +
                  direction + ", hidden size " + std::to_string(g.H) + ")");
  std::vector<std::vector<int64_t>> outs =
      grad ? std::vector<std::vector<int64_t>>{x.shape, ins[1], ins[2],
                                               bias,    state,  state}
           : std::vector<std::vector<int64_t>>{y, state, state};
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].shape != outs[i])
      return fail("result #" + std::to_string(i) + " has shape " +
                  shapeStr(spec.outputs[i].shape) + ", expected " +
                  shapeStr(outs[i]));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Primitive descriptors
//===----------------------------------------------------------------------===//

namespace {

/// The forward primitive (inference, or training when `g.grad`) and, for a
/// gradient, the backward one. Weights are `any`: the kernels reorder into
/// whatever layout each primitive picks.
struct RnnPds {
  dnnl::rnn_primitive_desc_base fwd, bwd;
};

} // namespace

static RnnPds lstmPds(const RnnGeom &g, const dnnl::primitive_attr &attr) {
  using Fwd = dnnl::lstm_forward;
  using Bwd = dnnl::lstm_backward;
  memory::desc x = g.layerIn(), y = g.layerOut(), h = g.iter(), b = g.bias();
  memory::desc wl = g.weights(g.I, tag::any), wi = g.weights(g.H, tag::any);
  auto pk = g.grad ? dnnl::prop_kind::forward_training
                   : dnnl::prop_kind::forward_inference;
  Fwd::primitive_desc fwd(Fwd::desc(pk, g.dir, x, h, h, wl, wi, b, y, h, h),
                          attr, engine());
  RnnPds p{fwd, {}};
  if (g.grad)
    p.bwd = Bwd::primitive_desc(Bwd::desc(dnnl::prop_kind::backward, g.dir, x,
                                          h, h, wl, wi, b, y, h, h, x, h, h, wl,
                                          wi, b, y, h, h),
                                attr, engine(), fwd);
  return p;
}

/// gru and lbr_gru take the same arguments.
template <typename Fwd, typename Bwd>
static RnnPds gruPds(const RnnGeom &g, const dnnl::primitive_attr &attr) {
  memory::desc x = g.layerIn(), y = g.layerOut(), h = g.iter(), b = g.bias();
  memory::desc wl = g.weights(g.I, tag::any), wi = g.weights(g.H, tag::any);
  auto pk = g.grad ? dnnl::prop_kind::forward_training
                   : dnnl::prop_kind::forward_inference;
  typename Fwd::primitive_desc fwd(
      typename Fwd::desc(pk, g.dir, x, h, wl, wi, b, y, h), attr, engine());
  RnnPds p{fwd, {}};
  if (g.grad)
    p.bwd = typename Bwd::primitive_desc(
        typename Bwd::desc(dnnl::prop_kind::backward, g.dir, x, h, wl, wi, b, y,
                           h, x, h, wl, wi, b, y, h),
        attr, engine(), fwd);
  return p;
}

static RnnPds makePds(const RnnGeom &g) {
  dnnl::primitive_attr attr = userScratchpad();
  switch (g.cell) {
  case Cell::LSTM:
    return lstmPds(g, attr);
  case Cell::GRU:
    return gruPds<dnnl::gru_forward, dnnl::gru_backward>(g, attr);
  case Cell::LbrGRU:
    return gruPds<dnnl::lbr_gru_forward, dnnl::lbr_gru_backward>(g, attr);
  }
  return {};
}

//===----------------------------------------------------------------------===//
// ONNX <-> oneDNN layouts
//===----------------------------------------------------------------------===//

/// ONNX weights [D, G*H, K] -> ldgoi {1, D, K, G, H} (memory order d, g,
/// h, k) in oneDNN's gate order: one H*K block per gate.
static void packWeights(const RnnGeom &g, int64_t k, const float *onnx,
                        float *ldgoi) {
  int64_t block = g.H * k;
  for (int64_t d = 0; d < g.D; ++d)
    for (int64_t q = 0; q < g.G; ++q)
      std::memcpy(ldgoi + (d * g.G + q) * block,
                  onnx + (d * g.G + g.perm[q]) * block,
                  size_t(block) * sizeof(float));
}

static void unpackWeights(const RnnGeom &g, int64_t k, const float *ldgoi,
                          float *onnx) {
  int64_t block = g.H * k;
  for (int64_t d = 0; d < g.D; ++d)
    for (int64_t q = 0; q < g.G; ++q)
      std::memcpy(onnx + (d * g.G + g.perm[q]) * block,
                  ldgoi + (d * g.G + q) * block, size_t(block) * sizeof(float));
}

/// ONNX B [D, 2*G*H] (Wb then Rb; null: zeros) -> oneDNN's ldgo bias.
static void packBias(const RnnGeom &g, const float *onnx, float *bias) {
  int64_t gh = g.G * g.H, H = g.H;
  if (!onnx) {
    std::memset(bias, 0, size_t(g.D * g.biasGates * H) * sizeof(float));
    return;
  }
  for (int64_t d = 0; d < g.D; ++d) {
    const float *wb = onnx + d * 2 * gh, *rb = wb + gh;
    float *b = bias + d * g.biasGates * H;
    for (int64_t q = 0; q < g.G; ++q) {
      int64_t src = g.perm[q] * H;
      // lbr_gru's h gate adds Rb inside the reset product, as gate G.
      bool ownRb = g.lbr() && q == 2;
      for (int64_t h = 0; h < H; ++h)
        b[q * H + h] = wb[src + h] + (ownRb ? 0.0f : rb[src + h]);
    }
    if (g.lbr())
      std::memcpy(b + 3 * H, rb + 2 * H, size_t(H) * sizeof(float));
  }
}

/// oneDNN's bias gradient -> dB [D, 2*G*H]: a summed bias's gradient is
/// both halves' gradient.
static void unpackBias(const RnnGeom &g, const float *dbias, float *onnx) {
  int64_t gh = g.G * g.H, H = g.H;
  for (int64_t d = 0; d < g.D; ++d) {
    float *wb = onnx + d * 2 * gh, *rb = wb + gh;
    const float *b = dbias + d * g.biasGates * H;
    for (int64_t q = 0; q < g.G; ++q) {
      int64_t dst = g.perm[q] * H;
      const float *rbSrc = g.lbr() && q == 2 ? b + 3 * H : b + q * H;
      std::memcpy(wb + dst, b + q * H, size_t(H) * sizeof(float));
      std::memcpy(rb + dst, rbSrc, size_t(H) * sizeof(float));
    }
  }
}

/// bidirectional_concat's layer [T, N, D*H] -> ONNX's Y [T, D, N, H].
static void concatToOnnx(const RnnGeom &g, const float *cat, float *y) {
  for (int64_t t = 0; t < g.T; ++t)
    for (int64_t d = 0; d < g.D; ++d)
      for (int64_t n = 0; n < g.N; ++n)
        std::memcpy(y + ((t * g.D + d) * g.N + n) * g.H,
                    cat + (t * g.N + n) * g.D * g.H + d * g.H,
                    size_t(g.H) * sizeof(float));
}

static void onnxToConcat(const RnnGeom &g, const float *y, float *cat) {
  for (int64_t t = 0; t < g.T; ++t)
    for (int64_t d = 0; d < g.D; ++d)
      for (int64_t n = 0; n < g.N; ++n)
        std::memcpy(cat + (t * g.N + n) * g.D * g.H + d * g.H,
                    y + ((t * g.D + d) * g.N + n) * g.H,
                    size_t(g.H) * sizeof(float));
}

static float *ptr(const memory &m) {
  return static_cast<float *>(m.get_data_handle());
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

namespace {

/// What LSTM/GRU and their gradients share: argument slots bound to the
/// executor's buffers or to scratch, and the parameters in oneDNN's layout.
class RnnKernel : public CpuKernel {
protected:
  RnnKernel(const OpSpec &spec, const RnnGeom &g)
      : CpuKernel(spec), g(g), spec(spec) {}

  /// One primitive argument: an operand or result of the node bound in place,
  /// or kernel scratch -- for an absent operand zeroed every run (oneDNN's
  /// default initial state, no incoming gradient), for a result the node
  /// lacks or must rearrange written and dropped.
  struct Slot {
    memory mem;
    int index = -1; ///< operand/result position; -1: scratch
    bool output = false, zero = false;
  };

  memory scratchMem(const memory::desc &md) {
    memory m(md, engine(), DNNL_MEMORY_NONE);
    addScratch(m);
    return m;
  }
  Slot operand(const memory::desc &md, int idx) {
    if (present(spec, idx))
      return {memory(md, engine(), DNNL_MEMORY_NONE), idx, false, false};
    return {scratchMem(md), -1, false, true};
  }
  Slot result(const memory::desc &md, int idx) {
    if (size_t(idx) < spec.outputs.size())
      return {memory(md, engine(), DNNL_MEMORY_NONE), idx, true, false};
    return {scratchMem(md), -1, true, false};
  }
  static void bind(Slot &s, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
    if (s.index >= 0)
      s.mem.set_data_handle(s.output ? out[size_t(s.index)].data
                                     : in[size_t(s.index)].data);
    else if (s.zero)
      std::memset(s.mem.get_data_handle(), 0, s.mem.get_desc().get_size());
  }

  /// `src` in layout `md` (the primitive's for parameters, plain ldgoi
  /// for their gradients): `src` itself when the layouts agree, else
  /// scratch filled by `r`.
  memory layoutCopy(const memory &src, const memory::desc &md,
                    dnnl::reorder &r) {
    if (md == src.get_desc())
      return src;
    memory m = scratchMem(md);
    r = dnnl::reorder(src, m);
    return m;
  }

  /// Builds the state, parameter and forward-output slots of `pd`.
  void initForward(const dnnl::rnn_primitive_desc_base &pd) {
    x = operand(g.layerIn(), 0);
    h0 = operand(g.iter(), g.h0);
    if (g.lstm())
      c0 = operand(g.iter(), g.c0);
    wlUser = scratchMem(g.weights(g.I, tag::ldgoi));
    wiUser = scratchMem(g.weights(g.H, tag::ldgoi));
    wl = layoutCopy(wlUser, pd.weights_layer_desc(), wlReorder);
    wi = layoutCopy(wiUser, pd.weights_iter_desc(), wiReorder);
    bias = scratchMem(g.bias());
    fwdPad = scratchpad(pd);
  }

  /// Binds and converts the operands shared by both kernels.
  void prepareForward(const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out) {
    for (Slot *s : {&x, &h0, &c0})
      if (s->mem)
        bind(*s, in, out);
    packWeights(g, g.I, in[1].as<float>(), ptr(wlUser));
    packWeights(g, g.H, in[2].as<float>(), ptr(wiUser));
    packBias(g, present(spec, 3) ? in[3].as<float>() : nullptr, ptr(bias));
    auto &s = stream();
    if (wlReorder)
      wlReorder.execute(s, wlUser, wl);
    if (wiReorder)
      wiReorder.execute(s, wiUser, wi);
  }

  Args forwardArgs(const memory &y, const memory &yh, const memory &yc) {
    Args args{{DNNL_ARG_SRC_LAYER, x.mem},  {DNNL_ARG_SRC_ITER, h0.mem},
              {DNNL_ARG_WEIGHTS_LAYER, wl}, {DNNL_ARG_WEIGHTS_ITER, wi},
              {DNNL_ARG_BIAS, bias},        {DNNL_ARG_DST_LAYER, y},
              {DNNL_ARG_DST_ITER, yh}};
    if (g.lstm()) {
      args[DNNL_ARG_SRC_ITER_C] = c0.mem;
      args[DNNL_ARG_DST_ITER_C] = yc;
    }
    if (fwdPad)
      args[DNNL_ARG_SCRATCHPAD] = fwdPad;
    return args;
  }

  RnnGeom g;
  const OpSpec spec;
  Slot x, h0, c0;
  memory wlUser, wiUser, wl, wi, bias, fwdPad;
  dnnl::reorder wlReorder, wiReorder;
};

/// LSTM / GRU: forward_inference.
class RnnForwardKernel final : public RnnKernel {
public:
  RnnForwardKernel(const OpSpec &spec, const RnnGeom &g) : RnnKernel(spec, g) {
    RnnPds pds = makePds(g);
    prim = dnnl::primitive(pds.fwd);
    initForward(pds.fwd);
    // One direction: Y [T, 1, N, H] is the tnc layer output itself.
    if (g.D == 1)
      y = result(g.layerOut(), 0);
    else
      y = {scratchMem(g.layerOut()), -1, true, false};
    yh = result(g.iter(), 1);
    if (g.lstm())
      yc = result(g.iter(), 2);
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    prepareForward(in, out);
    for (Slot *s : {&y, &yh, &yc})
      if (s->mem)
        bind(*s, in, out);
    auto &s = stream();
    prim.execute(s, forwardArgs(y.mem, yh.mem, yc.mem));
    s.wait();
    if (g.D > 1 && !out.empty())
      concatToOnnx(g, ptr(y.mem), out[0].as<float>());
  }

private:
  dnnl::primitive prim;
  Slot y, yh, yc;
};

/// LSTMGrad / GRUGrad: the forward again in training mode (its workspace is
/// scratch), then the backward primitive.
class RnnGradKernel final : public RnnKernel {
public:
  RnnGradKernel(const OpSpec &spec, const RnnGeom &g) : RnnKernel(spec, g) {
    RnnPds pds = makePds(g);
    fwd = dnnl::primitive(pds.fwd);
    bwd = dnnl::primitive(pds.bwd);
    initForward(pds.fwd);
    const dnnl::rnn_primitive_desc_base &b = pds.bwd;
    // The backward may want the weights in another layout than the forward.
    wlB = b.weights_layer_desc() == wl.get_desc()
              ? wl
              : layoutCopy(wlUser, b.weights_layer_desc(), wlBReorder);
    wiB = b.weights_iter_desc() == wi.get_desc()
              ? wi
              : layoutCopy(wiUser, b.weights_iter_desc(), wiBReorder);
    y = scratchMem(g.layerOut());
    yh = scratchMem(g.iter());
    if (g.lstm())
      yc = scratchMem(g.iter());
    workspace = scratchMem(pds.fwd.workspace_desc());
    if (g.D == 1)
      dy = operand(g.layerOut(), g.dy);
    else
      dy = {scratchMem(g.layerOut()), -1, false, !present(spec, g.dy)};
    dyh = operand(g.iter(), g.dyh);
    if (g.lstm())
      dyc = operand(g.iter(), g.dyc);
    dx = result(g.layerIn(), 0);
    dh0 = result(g.iter(), 4);
    if (g.lstm())
      dc0 = result(g.iter(), 5);
    dwl = scratchMem(b.diff_weights_layer_desc());
    dwi = scratchMem(b.diff_weights_iter_desc());
    dbias = scratchMem(g.bias());
    dwlUser = layoutCopy(dwl, g.weights(g.I, tag::ldgoi), dwlReorder);
    dwiUser = layoutCopy(dwi, g.weights(g.H, tag::ldgoi), dwiReorder);
    bwdPad = scratchpad(pds.bwd);
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    auto &s = stream();
    prepareForward(in, out);
    if (wlBReorder)
      wlBReorder.execute(s, wlUser, wlB);
    if (wiBReorder)
      wiBReorder.execute(s, wiUser, wiB);
    Args args = forwardArgs(y, yh, yc);
    args[DNNL_ARG_WORKSPACE] = workspace;
    fwd.execute(s, args);

    for (Slot *sl : {&dy, &dyh, &dyc, &dx, &dh0, &dc0})
      if (sl->mem)
        bind(*sl, in, out);
    if (g.D > 1 && present(spec, g.dy))
      onnxToConcat(g, in[size_t(g.dy)].as<float>(), ptr(dy.mem));
    // The backward adds its weight and bias gradients to these.
    for (memory *m : {&dwl, &dwi, &dbias})
      std::memset(m->get_data_handle(), 0, m->get_desc().get_size());
    Args b{{DNNL_ARG_SRC_LAYER, x.mem},
           {DNNL_ARG_SRC_ITER, h0.mem},
           {DNNL_ARG_WEIGHTS_LAYER, wlB},
           {DNNL_ARG_WEIGHTS_ITER, wiB},
           {DNNL_ARG_BIAS, bias},
           {DNNL_ARG_DST_LAYER, y},
           {DNNL_ARG_DST_ITER, yh},
           {DNNL_ARG_DIFF_DST_LAYER, dy.mem},
           {DNNL_ARG_DIFF_DST_ITER, dyh.mem},
           {DNNL_ARG_WORKSPACE, workspace},
           {DNNL_ARG_DIFF_SRC_LAYER, dx.mem},
           {DNNL_ARG_DIFF_SRC_ITER, dh0.mem},
           {DNNL_ARG_DIFF_WEIGHTS_LAYER, dwl},
           {DNNL_ARG_DIFF_WEIGHTS_ITER, dwi},
           {DNNL_ARG_DIFF_BIAS, dbias}};
    if (g.lstm()) {
      b[DNNL_ARG_SRC_ITER_C] = c0.mem;
      b[DNNL_ARG_DST_ITER_C] = yc;
      b[DNNL_ARG_DIFF_DST_ITER_C] = dyc.mem;
      b[DNNL_ARG_DIFF_SRC_ITER_C] = dc0.mem;
    }
    if (bwdPad)
      b[DNNL_ARG_SCRATCHPAD] = bwdPad;
    bwd.execute(s, b);
    if (dwlReorder)
      dwlReorder.execute(s, dwl, dwlUser);
    if (dwiReorder)
      dwiReorder.execute(s, dwi, dwiUser);
    s.wait();
    unpackWeights(g, g.I, ptr(dwlUser), out[1].as<float>());
    unpackWeights(g, g.H, ptr(dwiUser), out[2].as<float>());
    unpackBias(g, ptr(dbias), out[3].as<float>());
  }

private:
  dnnl::primitive fwd, bwd;
  memory wlB, wiB, y, yh, yc, workspace, dwl, dwi, dbias, dwlUser, dwiUser,
      bwdPad;
  dnnl::reorder wlBReorder, wiBReorder, dwlReorder, dwiReorder;
  Slot dy, dyh, dyc, dx, dh0, dc0;
};

} // namespace

template <bool IsLSTM, bool IsGrad>
static KernelOr createRnn(const OpSpec &spec) {
  RnnGeom g;
  OASR_RETURN_IF_ERROR(rnnGeom(spec, IsLSTM, IsGrad, g));
  return guardCreate(spec, [&]() -> std::unique_ptr<Kernel> {
    if (IsGrad)
      return std::make_unique<RnnGradKernel>(spec, g);
    return std::make_unique<RnnForwardKernel>(spec, g);
  });
}

void registerRecurrentKernels(KernelRegistry &r) {
  r["LSTM"] = createRnn<true, false>;
  r["LSTMGrad"] = createRnn<true, true>;
  r["GRU"] = createRnn<false, false>;
  r["GRUGrad"] = createRnn<false, true>;
}

} // namespace oasr::rt::cpu
