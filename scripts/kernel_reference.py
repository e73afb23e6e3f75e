#!/usr/bin/env python3
# ===- kernel_reference.py - PyTorch reference results for the kernel tests -===#
#
# Writes random inputs and PyTorch's results (forward values and autograd
# gradients, computed in float64 from the float32 inputs) for the cpu kernel
# tests (test/unit/Kernels/KernelTests.cpp) into a directory:
#
#   <out>/manifest.txt   one block per case (format below)
#   <out>/<case>.<k>.bin raw little-endian tensors (f32, i64, bool as u8)
#
#   case <name> <op type>
#   attr <name> int|float|str <value> | ints|floats <n> <values...>
#   seed <n>
#   in  <dtype> <file> <rank> <dims...>   (file "-": an absent operand)
#   out <dtype> <file or -> <rank> <dims...> [unused]
#   end
#
# An output whose file is "-" is not compared. Nothing generated here is
# committed; the tests run this script at test time.
#
# --precision bf16 writes the cases as a bf16 step runs them: every random
# input is drawn representable in bf16 and written as bf16 (dtype "bf16",
# 16-bit elements), except what mixed precision keeps in f32 (scalars, and
# the normalisations' scale, bias and statistics, KEEP_F32); float results
# are declared bf16 likewise, while their files hold the float64 reference
# (from the same bf16 inputs) as f32, so the test measures the kernel's
# error and not the reference's rounding.
#
# Usage: kernel_reference.py --out DIR [--group G ...] [--precision P]
# ===------------------------------------------------------------------------===#

import argparse
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the test skips on 77
    print(f"kernel_reference.py: {e}", file=sys.stderr)
    sys.exit(77)

DT = {
    torch.float32: "f32",
    torch.float64: "f32",
    torch.int64: "i64",
    torch.bool: "i1",
}

GROUPS = {}


def group(name):
    def deco(fn):
        GROUPS[name] = fn
        return fn

    return deco


class Case:
    def __init__(self, name, op, attrs=None, seed=0):
        self.name, self.op = name, op
        self.attrs = attrs or {}
        self.seed = seed
        self.inputs = []  # tensors
        self.outputs = []  # (tensor or (dtype, shape), compare, used)
        self.f32_outputs = set()  # results kept f32 under --precision bf16

    def inp(self, *ts):
        self.inputs += ts
        return self

    def out(self, *ts, compare=True, used=True):
        for t in ts:
            self.outputs.append((t, compare, used))
        return self


PRECISION = "f32"

# Per op: the operands and results that stay f32 under mixed precision
# (the registry's `normalize` policy: scale, bias and statistics).
KEEP_F32 = {
    "BatchNormalization": ({1, 2, 3, 4}, {1, 2, 3, 4}),
    "BatchNormalizationGrad": ({2, 3, 4}, {1, 2}),
    "LayerNormalization": ({1, 2}, {1, 2}),
    "LayerNormalizationGrad": ({2, 3, 4}, {1, 2}),
}


def rnd(*shape, lo=-1.0, hi=1.0):
    """float32 random values (bf16-representable under --precision bf16),
    returned as float64 for exact references."""
    t = torch.rand(tuple(shape), dtype=torch.float32) * (hi - lo) + lo
    if PRECISION == "bf16":
        t = t.to(torch.bfloat16).float()
    return t.double()


def is_float(t):
    return not isinstance(t, tuple) and t.dtype in (torch.float32, torch.float64)


def low_input(op, i, t):
    """Whether operand `i` of `op` is written as bf16."""
    if PRECISION != "bf16" or not is_float(t) or t.dim() == 0:
        return False
    if i in KEEP_F32.get(op, (set(), set()))[0]:
        return False
    # Inputs built otherwise than by rnd() (ones, arange) go as bf16 only
    # when bf16 holds them exactly.
    return bool(torch.equal(t.float().to(torch.bfloat16).double(), t.double()))


def low_output(case, i, t):
    return (PRECISION == "bf16" and (isinstance(t, tuple) and t[0] == "f32" or is_float(t))
            and i not in KEEP_F32.get(case.op, (set(), set()))[1]
            and i not in case.f32_outputs)


def f64(t):
    return t.detach().double()


def write_tensor(path, t, bf16=False):
    t = t.detach()
    if bf16:
        a = t.float().to(torch.bfloat16).view(torch.int16).numpy().astype("<i2")
    elif t.dtype == torch.bool:
        a = t.numpy().astype(np.uint8)
    elif t.dtype == torch.int64:
        a = t.numpy().astype("<i8")
    else:
        a = t.numpy().astype("<f4")
    a.tofile(path)


def fmt_attr(name, v):
    if isinstance(v, bool) or isinstance(v, int):
        return f"attr {name} int {int(v)}"
    if isinstance(v, float):
        return f"attr {name} float {v!r}"
    if isinstance(v, str):
        return f"attr {name} str {v}"
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, int) for x in v):
            return f"attr {name} ints {len(v)} " + " ".join(map(str, v))
        return f"attr {name} floats {len(v)} " + " ".join(repr(float(x)) for x in v)
    raise TypeError(f"attribute {name}: {v!r}")


def desc(t, bf16=False):
    if isinstance(t, tuple):
        dtype, shape = t
    else:
        dtype, shape = DT[t.dtype], list(t.shape)
    if bf16:
        dtype = "bf16"
    return f"{dtype} {{}} {len(shape)} " + " ".join(map(str, shape))


def write_cases(out_dir, cases, manifest):
    for c in cases:
        manifest.append(f"case {c.name} {c.op}")
        for k, v in c.attrs.items():
            manifest.append(fmt_attr(k, v))
        manifest.append(f"seed {c.seed}")
        for i, t in enumerate(c.inputs):
            if t is None:  # an optional operand left out in the middle
                manifest.append("in f32 - 0")
                continue
            fname = f"{c.name}.in{i}.bin"
            low = low_input(c.op, i, t)
            write_tensor(os.path.join(out_dir, fname), t, bf16=low)
            manifest.append("in " + desc(t, low).format(fname))
        for i, (t, compare, used) in enumerate(c.outputs):
            fname = "-"
            if compare:
                fname = f"{c.name}.out{i}.bin"
                write_tensor(os.path.join(out_dir, fname), t)
            low = low_output(c, i, t)
            manifest.append("out " + desc(t, low).format(fname) + ("" if used else " unused"))
        manifest.append("end")


def grad_of(fn, inputs, dy):
    """Gradients of sum(fn(*inputs) * dy) w.r.t. every input."""
    ins = [x.clone().requires_grad_(True) for x in inputs]
    y = fn(*ins)
    y.backward(dy)
    return [f64(x.grad) for x in ins]


# ---------------------------------------------------------------- conv ----


def conv_cases(name, xs, ws, bias, stride=1, pad=0, dil=1, group=1, auto_pad=None):
    x, w = rnd(*xs), rnd(*ws)
    b = rnd(ws[0]) if bias else None
    attrs = {"strides": [stride] * 2, "dilations": [dil] * 2, "group": group}
    tpad = pad
    if auto_pad:
        attrs["auto_pad"] = auto_pad
        tpad = 0
        pl = []
        for i in (2, 3):
            o = -(-xs[i] // stride)
            total = max(0, (o - 1) * stride + (ws[i] - 1) * dil + 1 - xs[i])
            lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pl.append((lo, total - lo))
        fpad = (pl[1][0], pl[1][1], pl[0][0], pl[0][1])
    else:
        attrs["pads"] = [pad] * 4
        fpad = None

    def fn(x, w, *b):
        if fpad:
            x = F.pad(x, fpad)
        return F.conv2d(x, w, b[0] if b else None, stride, tpad, dil, group)

    ins = [x, w] + ([b] if bias else [])
    y = fn(*ins)
    fwd = Case(name, "Conv", attrs).inp(*ins).out(f64(y))
    dy = rnd(*y.shape)
    grads = grad_of(fn, ins, dy)
    bwd = Case(name + "_grad", "ConvGrad", attrs).inp(dy, x, w).out(*grads)
    return [fwd, bwd]


@group("conv")
def g_conv():
    cs = []
    cs += conv_cases("conv_pad1", (2, 3, 9, 9), (4, 3, 3, 3), False, pad=1)
    cs += conv_cases("conv_s2_bias", (2, 8, 15, 15), (16, 8, 3, 3), True, stride=2, pad=1)
    cs += conv_cases("conv_stem7x7", (2, 3, 32, 32), (16, 3, 7, 7), False, stride=2, pad=3)
    cs += conv_cases("conv_1x1_s2", (2, 16, 8, 8), (32, 16, 1, 1), True, stride=2)
    cs += conv_cases("conv_groups_dil", (2, 8, 10, 10), (8, 2, 3, 3), True, pad=2, dil=2, group=4)
    cs += conv_cases("conv_depthwise", (2, 8, 9, 9), (8, 1, 3, 3), False, pad=1, group=8)
    cs += conv_cases("conv_same_upper", (1, 4, 7, 7), (4, 4, 3, 3), True, stride=2, auto_pad="SAME_UPPER")
    cs += conv_cases("conv_wide", (2, 32, 14, 14), (64, 32, 3, 3), True, pad=1)
    # 1-D convolution (NCW).
    x, w, b = rnd(2, 4, 17), rnd(6, 4, 5), rnd(6)
    attrs = {"strides": [2], "pads": [2, 1], "dilations": [1], "group": 1}

    def fn1(x, w, b):
        return F.conv1d(F.pad(x, (2, 1)), w, b, 2)

    y = fn1(x, w, b)
    cs.append(Case("conv1d", "Conv", attrs).inp(x, w, b).out(f64(y)))
    dy = rnd(*y.shape)
    cs.append(Case("conv1d_grad", "ConvGrad", attrs).inp(dy, x, w).out(*grad_of(fn1, [x, w, b], dy)))
    # ConvGrad whose dX nobody reads (the first convolution).
    c = conv_cases("conv_nodx", (2, 3, 8, 8), (4, 3, 3, 3), True, pad=1)[1]
    c.outputs[0] = (c.outputs[0][0], False, False)
    cs.append(c)
    return cs


# ------------------------------------------------------------ batchnorm ----


def bn_cases(name, xs, momentum=0.9, eps=1e-5):
    c = xs[1]
    x, scale, bias = rnd(*xs, lo=-2, hi=3), rnd(c, lo=0.5, hi=1.5), rnd(c)
    mean, var = rnd(c), rnd(c, lo=0.5, hi=2.0)
    attrs = {"epsilon": eps, "momentum": momentum, "training_mode": 1}
    rm, rv = mean.clone(), var.clone()
    y = F.batch_norm(x, rm, rv, scale, bias, training=True, momentum=1 - momentum, eps=eps)
    dims = [0] + list(range(2, len(xs)))
    saved_mean = x.mean(dim=dims)
    saved_inv = 1.0 / torch.sqrt(x.var(dim=dims, unbiased=False) + eps)
    fwd = Case(name, "BatchNormalization", attrs).inp(x, scale, bias, mean, var)
    fwd.out(f64(y), f64(rm), f64(rv), f64(saved_mean), f64(saved_inv))

    dy = rnd(*xs)

    def fn(x, s, b):
        return F.batch_norm(x, None, None, s, b, training=True, eps=eps)

    dx, ds, db = grad_of(fn, [x, scale, bias], dy)
    bwd = Case(name + "_grad", "BatchNormalizationGrad", {"epsilon": eps})
    bwd.inp(dy, x, scale, saved_mean, saved_inv).out(dx, ds, db)

    inf = Case(name + "_infer", "BatchNormalization", {"epsilon": eps, "momentum": momentum, "training_mode": 0})
    yi = F.batch_norm(x, mean.clone(), var.clone(), scale, bias, training=False, eps=eps)
    inf.inp(x, scale, bias, mean, var).out(f64(yi))
    return [fwd, bwd, inf]


@group("bn")
def g_bn():
    return bn_cases("bn4d", (4, 6, 5, 5)) + bn_cases("bn2d", (8, 5), momentum=0.7, eps=1e-3) + bn_cases(
        "bn_wide", (2, 64, 7, 7)
    )


# -------------------------------------------------------------- eltwise ----


@group("eltwise")
def g_eltwise():
    cs = []
    shape = (3, 4, 5, 6)
    for op, fn, attrs in [
        ("Relu", torch.relu, {}),
        ("LeakyRelu", lambda x: F.leaky_relu(x, 0.2), {"alpha": 0.2}),
        ("Sigmoid", torch.sigmoid, {}),
        ("Tanh", torch.tanh, {}),
        ("Neg", torch.neg, {}),
        ("Clip", lambda x: torch.clamp(x, -0.3, 0.6), {"min": -0.3, "max": 0.6}),
    ]:
        x = rnd(*shape, lo=-2, hi=2)
        y = fn(x)
        cs.append(Case(op.lower(), op, attrs).inp(x).out(f64(y)))
        dy = rnd(*shape)
        (dx,) = grad_of(fn, [x], dy)
        if op in ("Relu", "LeakyRelu", "Sigmoid", "Tanh"):
            cs.append(Case(op.lower() + "_grad", op + "Grad", attrs).inp(dy, f64(y)).out(dx))
        if op == "Clip":
            cs.append(Case("clip_grad", "ClipGrad", attrs).inp(dy, x).out(dx))
    x = rnd(2, 10)
    cs.append(Case("clip_inputs", "Clip").inp(x, torch.tensor(-0.5).double(), torch.tensor(0.25).double()).out(f64(torch.clamp(x, -0.5, 0.25))))
    return cs


# ---------------------------------------------------------------- pools ----


@group("pool")
def g_pool():
    cs = []
    for name, xs, k, s, p, ceil in [
        ("maxpool_3x3s2p1", (2, 4, 11, 11), 3, 2, 1, False),
        ("maxpool_2x2s2", (2, 3, 8, 8), 2, 2, 0, False),
        ("maxpool_ceil", (1, 2, 8, 8), 3, 2, 0, True),
    ]:
        x = rnd(*xs)
        attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4, "ceil_mode": int(ceil)}
        y, idx = F.max_pool2d(x, k, s, p, ceil_mode=ceil, return_indices=True)
        cs.append(Case(name, "MaxPool", attrs).inp(x).out(f64(y), idx))
        dy = rnd(*y.shape)
        (dx,) = grad_of(lambda x: F.max_pool2d(x, k, s, p, ceil_mode=ceil), [x], dy)
        cs.append(Case(name + "_grad", "MaxPoolGrad", attrs).inp(dy, idx).out(dx))
    for name, xs, k, s, p, inc, ceil in [
        ("avgpool_3x3s2p1", (2, 4, 11, 11), 3, 2, 1, 0, False),
        ("avgpool_incpad", (2, 4, 10, 10), 3, 2, 1, 1, False),
        ("avgpool_2x2", (2, 3, 8, 8), 2, 2, 0, 0, False),
        ("avgpool_ceil", (1, 2, 8, 8), 3, 2, 1, 0, True),
    ]:
        x = rnd(*xs)
        attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4, "count_include_pad": inc, "ceil_mode": int(ceil)}

        def fn(x):
            return F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=bool(inc))

        y = fn(x)
        cs.append(Case(name, "AveragePool", attrs).inp(x).out(f64(y)))
        dy = rnd(*y.shape)
        (dx,) = grad_of(fn, [x], dy)
        cs.append(Case(name + "_grad", "AveragePoolGrad", attrs).inp(dy).out(dx))
    x = rnd(2, 16, 7, 7)
    y = x.mean(dim=(2, 3), keepdim=True)
    cs.append(Case("gap", "GlobalAveragePool").inp(x).out(f64(y)))
    dy = rnd(*y.shape)
    (dx,) = grad_of(lambda x: x.mean(dim=(2, 3), keepdim=True), [x], dy)
    cs.append(Case("gap_grad", "GlobalAveragePoolGrad").inp(dy).out(dx))
    return cs


# ----------------------------------------------------------- gemm/matmul ----


def gemm_cases(name, m, k, n, ta, tb, alpha, beta, cshape):
    a = rnd(*((k, m) if ta else (m, k)))
    b = rnd(*((n, k) if tb else (k, n)))
    ins = [a, b] + ([rnd(*cshape)] if cshape is not None else [])
    attrs = {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta}

    def fn(a, b, *c):
        y = alpha * ((a.t() if ta else a) @ (b.t() if tb else b))
        return y + beta * c[0] if c else y

    y = fn(*ins)
    fwd = Case(name, "Gemm", attrs).inp(*ins).out(f64(y))
    dy = rnd(m, n)
    grads = grad_of(fn, ins, dy)
    bwd = Case(name + "_grad", "GemmGrad", attrs).inp(dy, a, b).out(*grads)
    return [fwd, bwd]


@group("gemm")
def g_gemm():
    cs = []
    cs += gemm_cases("gemm_tb_bias", 8, 20, 10, 0, 1, 1.0, 1.0, (10,))
    cs += gemm_cases("gemm_ta_col", 6, 7, 9, 1, 0, 0.5, 2.0, (6, 1))
    cs += gemm_cases("gemm_both_full", 5, 12, 4, 1, 1, 1.5, 0.5, (5, 4))
    cs += gemm_cases("gemm_scalar_c", 7, 3, 5, 0, 0, 1.0, 1.0, ())
    cs += gemm_cases("gemm_nobias", 16, 64, 32, 0, 1, 1.0, 1.0, None)
    cs += gemm_cases("gemm_fc", 32, 512, 100, 0, 1, 1.0, 1.0, (100,))
    # Products that write f32 from bf16 operands (oasr-fuse-casts): the
    # classifier's logits and a weight gradient with its bias gradient.
    wide = gemm_cases("gemm_wide", 16, 48, 24, 0, 1, 1.0, 1.0, (24,))
    wide[0].f32_outputs = {0}
    wide[1].f32_outputs = {1, 2}
    return cs + wide


@group("matmul")
def g_matmul():
    cs = []
    for name, sa, sb in [
        ("matmul_batched", (3, 4, 5), (3, 5, 6)),
        ("matmul_bcast_b", (2, 3, 4, 5), (5, 6)),
        ("matmul_bcast_a", (4, 5), (3, 5, 6)),
        ("matmul_bcast_both", (2, 1, 4, 5), (1, 3, 5, 6)),
        ("matmul_vec_mat", (5,), (5, 6)),
        ("matmul_mat_vec", (3, 4, 5), (5,)),
        ("matmul_2d", (17, 33), (33, 9)),
    ]:
        a, b = rnd(*sa), rnd(*sb)
        cs.append(Case(name, "MatMul").inp(a, b).out(f64(torch.matmul(a, b))))
    x = rnd(2, 3, 4, 5)
    for perm in ([0, 2, 3, 1], [3, 1, 0, 2], None):
        y = x.permute(*(perm or [3, 2, 1, 0]))
        attrs = {"perm": perm} if perm else {}
        cs.append(Case("transpose_" + ("".join(map(str, perm)) if perm else "default"), "Transpose", attrs).inp(x).out(f64(y.contiguous())))
    # Swin's window partition (6-D, merges to a contiguous inner run), a 2-D
    # transpose with partial 32x32 tiles, and unit dimensions.
    for name, shape, perm in [("transpose_window", (2, 3, 5, 4, 5, 7), [0, 1, 3, 2, 4, 5]),
                              ("transpose_tiles", (37, 45), [1, 0]),
                              ("transpose_units", (1, 33, 1, 40), [3, 1, 2, 0])]:
        x = rnd(*shape)
        cs.append(Case(name, "Transpose", {"perm": perm}).inp(x).out(f64(x.permute(*perm).contiguous())))
    # FusedMatMul (oasr-fuse-matmul-transpose): operands stored transposed in
    # their last two axes, batch broadcast, alpha.
    for name, sa, sb, ta, tb, alpha in [
        ("fusedmm_ta", (3, 5, 4), (3, 5, 6), 1, 0, 1.0),
        ("fusedmm_tb", (2, 3, 4, 5), (6, 5), 0, 1, 1.0),
        ("fusedmm_tab", (4, 17), (9, 4), 1, 1, 1.0),
        ("fusedmm_bcast_alpha", (2, 1, 5, 4), (1, 3, 6, 5), 1, 1, 0.5),
    ]:
        a, b = rnd(*sa), rnd(*sb)
        la = a.transpose(-1, -2) if ta else a
        lb = b.transpose(-1, -2) if tb else b
        attrs = {"transA": ta, "transB": tb, "alpha": alpha}
        cs.append(Case(name, "FusedMatMul", attrs).inp(a, b).out(f64(alpha * torch.matmul(la, lb))))
    a, b = rnd(6, 16), rnd(6, 8)
    wide = Case("fusedmm_wide_ta", "FusedMatMul", {"transA": 1}).inp(a, b).out(f64(a.t() @ b))
    a, b = rnd(2, 5, 16), rnd(16, 8)
    wide2 = Case("matmul_wide", "MatMul").inp(a, b).out(f64(torch.matmul(a, b)))
    wide.f32_outputs = wide2.f32_outputs = {0}
    return cs + [wide, wide2]


# ------------------------------------------------------------------ loss ----


@group("loss")
def g_loss():
    cs = []
    for name, shape, red, ignore in [
        ("sce_mean", (8, 10), "mean", None),
        ("sce_sum", (6, 7), "sum", None),
        ("sce_ignore", (9, 5), "mean", 2),
        ("sce_none", (5, 4), "none", None),
        ("sce_spatial", (3, 5, 4), "mean", None),
    ]:
        x = rnd(*shape, lo=-3, hi=3)
        lab = torch.randint(0, shape[1], (shape[0],) + tuple(shape[2:]))
        attrs = {"reduction": red}
        if ignore is not None:
            attrs["ignore_index"] = ignore
            lab[0] = ignore

        def fn(x):
            return F.cross_entropy(x, lab, reduction=red, ignore_index=ignore if ignore is not None else -100)

        loss = fn(x)
        logp = F.log_softmax(x, dim=1)
        cs.append(Case(name, "SoftmaxCrossEntropyLoss", attrs).inp(x, lab).out(f64(loss), f64(logp)))
        dl = rnd(*loss.shape, lo=0.5, hi=2.0)
        (dx,) = grad_of(fn, [x], dl)
        cs.append(Case(name + "_grad", "SoftmaxCrossEntropyLossGrad", attrs).inp(dl, f64(logp), lab).out(dx))
    x = rnd(4, 5, 6, lo=-3, hi=3)
    for op, axis, fn in [
        ("Softmax", -1, lambda x: torch.softmax(x, -1)),
        ("Softmax", 1, lambda x: torch.softmax(x, 1)),
        ("LogSoftmax", 1, lambda x: torch.log_softmax(x, 1)),
        ("LogSoftmax", -1, lambda x: torch.log_softmax(x, -1)),
    ]:
        y = fn(x)
        nm = f"{op.lower()}_ax{axis % 3}"
        cs.append(Case(nm, op, {"axis": axis}).inp(x).out(f64(y)))
        dy = rnd(*x.shape)
        (dx,) = grad_of(fn, [x], dy)
        cs.append(Case(nm + "_grad", op + "Grad", {"axis": axis}).inp(dy, f64(y)).out(dx))
    return cs


# ------------------------------------------------------- shapes & arith ----


@group("shape")
def g_shape():
    cs = []
    a, b, c = rnd(2, 3, 4), rnd(2, 5, 4), rnd(2, 1, 4)
    y = torch.cat([a, b, c], 1)
    cs.append(Case("concat_ax1", "Concat", {"axis": 1}).inp(a, b, c).out(f64(y)))
    cs.append(Case("concat_axneg", "Concat", {"axis": -1}).inp(a, a).out(f64(torch.cat([a, a], -1))))
    cs.append(Case("concat_ax0_i64", "Concat", {"axis": 0}).inp(torch.arange(6).reshape(2, 3), torch.arange(3).reshape(1, 3)).out(torch.cat([torch.arange(6).reshape(2, 3), torch.arange(3).reshape(1, 3)], 0)))
    parts = torch.split(y, [3, 5, 1], 1)
    cs.append(Case("split_ax1", "Split", {"axis": 1, "split": [3, 5, 1]}).inp(y).out(*[f64(p.contiguous()) for p in parts]))
    x = rnd(4, 6, 2)
    cs.append(Case("split_ax2", "Split", {"axis": -1}).inp(x).out(*[f64(p.contiguous()) for p in torch.split(x, 1, -1)]))
    cs.append(Case("reshape", "Reshape").inp(x, torch.tensor([8, 6])).out(f64(x.reshape(8, 6))))
    cs.append(Case("flatten", "Flatten", {"axis": 1}).inp(x).out(f64(x.reshape(4, 12))))
    cs.append(Case("identity", "Identity").inp(x).out(f64(x)))
    # Pad: attribute form and operand form.
    x = rnd(2, 3, 4, 5)
    pads = [0, 0, 1, 2, 0, 1, 2, 0]
    y = F.pad(x, (2, 0, 1, 2, 0, 1), value=1.5)
    cs.append(Case("pad_attr", "Pad", {"pads": pads, "value": 1.5}).inp(x).out(f64(y)))
    y2 = F.pad(x, (1, 1, 0, 3), value=-0.5)
    cs.append(Case("pad_operands", "Pad").inp(x, torch.tensor([0, 0, 0, 1, 0, 0, 3, 1]), torch.tensor(-0.5).double()).out(f64(y2)))
    dy = rnd(*y.shape)
    (dx,) = grad_of(lambda x: F.pad(x, (2, 0, 1, 2, 0, 1), value=1.5), [x], dy)
    cs.append(Case("pad_grad", "PadGrad", {"pads": pads}).inp(dy).out(dx))
    return cs


@group("arith")
def g_arith():
    cs = []
    for name, op, fn, sa, sb in [
        ("add_bcast", "Add", torch.add, (2, 3, 4, 5), (3, 1, 5)),
        ("add_same", "Add", torch.add, (7, 9), (7, 9)),
        ("add_scalar", "Add", torch.add, (4, 5), ()),
        ("sub_outer", "Sub", torch.sub, (4, 1), (3,)),
        ("mul_channel", "Mul", torch.mul, (2, 3, 4, 5), (1, 3, 1, 1)),
        ("div_bcast", "Div", torch.div, (6, 1, 5), (1, 4, 5)),
        ("mul_big", "Mul", torch.mul, (8, 64, 32), (64, 1)),
    ]:
        a = rnd(*sa)
        b = rnd(*sb, lo=0.5, hi=2.0) if op == "Div" else rnd(*sb)
        cs.append(Case(name, op).inp(a, b).out(f64(fn(a, b))))
    a, b = torch.randint(-5, 5, (3, 4)), torch.randint(-5, 5, (4,))
    cs.append(Case("add_i64", "Add").inp(a, b).out(a + b))
    xs = [rnd(3, 4, 5) for _ in range(3)]
    cs.append(Case("sum_same", "Sum").inp(*xs).out(f64(xs[0] + xs[1] + xs[2])))
    ys = [rnd(3, 1, 5), rnd(4, 1), rnd(3, 4, 5)]
    cs.append(Case("sum_bcast", "Sum").inp(*ys).out(f64(ys[0] + ys[1] + ys[2])))
    for name, sy, sx in [
        ("rst_bias", (8, 10), (10,)),
        ("rst_channel", (2, 3, 4, 5), (1, 3, 1, 1)),
        ("rst_mixed", (2, 3, 4, 5), (3, 1, 5)),
        ("rst_rows", (6, 7), (6, 1)),
        ("rst_scalar", (3, 4, 5), ()),
        ("rst_same", (3, 4), (3, 4)),
        ("rst_big", (64, 300), (300,)),
    ]:
        dy = rnd(*sy)
        lead = len(sy) - len(sx)
        red = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(sx) if d == 1 and sy[i + lead] != 1)
        dx = dy.sum(dim=red, keepdim=True) if red else dy
        cs.append(Case(name, "ReduceSumTo").inp(dy).out(f64(dx.reshape(sx))))
    return cs


@group("transformer")
def g_transformer():
    cs = []
    emb = rnd(50, 8)
    idx = torch.randint(0, 50, (4, 6))
    idx[0, 0] = idx[1, 1] = idx[2, 2]  # repeated rows accumulate in the grad
    idx[3, 5] = -1  # counts from the end
    y = emb[idx % 50]
    cs.append(Case("gather_embed", "Gather", {"axis": 0}).inp(emb, idx).out(f64(y)))
    dy = rnd(*y.shape)
    (demb,) = grad_of(lambda e: e[idx % 50], [emb], dy)
    cs.append(Case("gather_embed_grad", "GatherGrad", {"axis": 0}).inp(torch.tensor([50, 8]), idx, dy).out(demb))
    x = rnd(3, 7, 5)
    i1 = torch.tensor([6, 0, 2])
    cs.append(Case("gather_ax1", "Gather", {"axis": 1}).inp(x, i1).out(f64(x[:, i1])))
    dy = rnd(3, 3, 5)
    (dx,) = grad_of(lambda x: x[:, i1], [x], dy)
    cs.append(Case("gather_ax1_grad", "GatherGrad", {"axis": 1}).inp(torch.tensor([3, 7, 5]), i1, dy).out(dx))
    shp = torch.tensor([16, 8, 128])
    cs.append(Case("gather_scalar_i64", "Gather", {"axis": 0}).inp(shp, torch.tensor(2)).out(shp[2]))
    # CumSum: inclusive, exclusive, reversed (ONNX's attributes).
    x = rnd(3, 6, 4)
    cs.append(Case("cumsum", "CumSum").inp(x, torch.tensor(1)).out(f64(torch.cumsum(x, 1))))
    excl = torch.cumsum(x, 2) - x
    cs.append(Case("cumsum_excl", "CumSum", {"exclusive": 1}).inp(x, torch.tensor(-1)).out(f64(excl)))
    rev = torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])
    cs.append(Case("cumsum_rev", "CumSum", {"reverse": 1}).inp(x, torch.tensor(1)).out(f64(rev)))
    ci = torch.randint(-5, 5, (4, 7))
    cs.append(Case("cumsum_i64", "CumSum").inp(ci, torch.tensor(1)).out(torch.cumsum(ci, 1)))
    # ReduceMax / ReduceMin, a NaN kept as torch.amax keeps it.
    x = rnd(3, 4, 5)
    x[1, 2, 3] = float("nan")
    cs.append(Case("reduce_max", "ReduceMax", {"axes": [1], "keepdims": 0}).inp(x).out(f64(torch.amax(x, 1))))
    cs.append(Case("reduce_min", "ReduceMin", {"axes": [0, 2], "keepdims": 1}).inp(x).out(f64(torch.amin(x, (0, 2), keepdim=True))))
    # ReduceProd, with a zero in one of the products.
    x = rnd(3, 4, 5, lo=0.5, hi=1.5)
    x[0, 1, 2] = 0.0
    cs.append(Case("reduce_prod", "ReduceProd", {"axes": [1], "keepdims": 0}).inp(x).out(f64(torch.prod(x, 1))))
    cs.append(Case("reduce_prod_all", "ReduceProd", {"keepdims": 1}).inp(x[1:]).out(f64(torch.prod(x[1:]).reshape(1, 1, 1))))
    # ArgMax/ArgMin: ties go to the first (or, select_last_index, the last)
    # index; a NaN wins (torch.argmax).
    x = rnd(4, 6, 5)
    x[0, 2, 1] = x[0, 4, 1] = 9.0
    x[2, 3, 3] = float("nan")
    cs.append(Case("argmax", "ArgMax", {"axis": 1, "keepdims": 0}).inp(x).out(torch.argmax(x, 1)))
    cs.append(Case("argmin_keep", "ArgMin", {"axis": -1}).inp(x[:, :4]).out(torch.argmin(x[:, :4], -1, keepdim=True)))
    xs = x[0:1, :, 1:2]
    last = 5 - torch.argmax(torch.flip(xs, [1]), 1, keepdim=True)
    cs.append(Case("argmax_last", "ArgMax", {"axis": 1, "select_last_index": 1}).inp(xs).out(last))
    # TopK: largest and smallest along an inner axis, on distinct values
    # that bf16 holds exactly (torch.topk leaves the order of ties open).
    x = torch.randperm(108).reshape(3, 9, 4).double() / 16 - 3
    v, i = torch.topk(x, 3, dim=1)
    cs.append(Case("topk", "TopK", {"axis": 1}).inp(x, torch.tensor([3])).out(f64(v), i))
    v, i = torch.topk(x, 4, dim=-1, largest=False)
    cs.append(Case("topk_smallest", "TopK", {"largest": 0}).inp(x, torch.tensor([4])).out(f64(v), i))
    # OneHot: negative indices count from the end, values in their type.
    ids = torch.tensor([[0, 3, -1], [2, -4, 1]])
    depth = 4
    oh = F.one_hot(ids % depth, depth)
    cs.append(Case("onehot", "OneHot").inp(ids, torch.tensor(depth), torch.tensor([0.0, 1.0]).double()).out(f64(oh.double())))
    cs.append(Case("onehot_ax0_i64", "OneHot", {"axis": 0}).inp(ids, torch.tensor([depth]), torch.tensor([-1, 5])).out((oh * 6 - 1).permute(2, 0, 1).contiguous()))
    # GatherND with and without batch dimensions; ScatterND adds into zeros
    # with the same tuples (GatherND's gradient).
    data = rnd(2, 5, 4, 3)
    nd = torch.stack([torch.randint(0, 2, (2, 3)), torch.randint(-5, 5, (2, 3))], -1)
    g0 = data[nd[..., 0], nd[..., 1] % 5]
    cs.append(Case("gathernd", "GatherND").inp(data, nd).out(f64(g0)))
    bi = torch.stack([torch.randint(0, 5, (2, 6)), torch.randint(0, 4, (2, 6))], -1)
    g1 = torch.stack([data[b][bi[b, :, 0], bi[b, :, 1]] for b in range(2)])
    cs.append(Case("gathernd_batch", "GatherND", {"batch_dims": 1}).inp(data, bi).out(f64(g1)))
    dy = rnd(*g1.shape)
    acc = torch.zeros_like(data)
    for b in range(2):
        for t in range(6):
            acc[b, bi[b, t, 0], bi[b, t, 1]] += dy[b, t]
    cs.append(Case("scatternd_batch_add", "ScatterND", {"batch_dims": 1, "reduction": "add"}).inp(torch.zeros_like(data), bi, dy).out(f64(acc)))
    # GatherElements / ScatterElements along an axis, negative indices and
    # repeats (scatter-add); the replacing scatter writes each element once.
    x = rnd(3, 7, 5)
    ix = torch.randint(-7, 7, (3, 4, 5))
    cs.append(Case("gather_elements", "GatherElements", {"axis": 1}).inp(x, ix).out(f64(torch.gather(x, 1, ix % 7))))
    upd = rnd(3, 4, 5)
    cs.append(Case("scatter_elements_add", "ScatterElements", {"axis": 1, "reduction": "add"}).inp(x, ix, upd).out(f64(x.scatter_add(1, ix % 7, upd))))
    perm = torch.stack([torch.randperm(7)[:4] for _ in range(15)]).reshape(3, 5, 4).transpose(1, 2).contiguous()
    cs.append(Case("scatter_elements", "ScatterElements", {"axis": 1}).inp(x, perm, upd).out(f64(x.scatter(1, perm, upd))))
    x = rnd(4, 6, 9)
    y = torch.from_numpy(x.numpy()[:, 1:5, 8:1:-3].copy())  # torch has no negative steps
    cs.append(Case("slice_operands", "Slice").inp(x, torch.tensor([1, -1]), torch.tensor([5, 1]), torch.tensor([1, 2]), torch.tensor([1, -3])).out(f64(y.contiguous())))
    y = x[:, :, 6:]
    cs.append(Case("slice_qkv", "Slice").inp(x, torch.tensor([6]), torch.tensor([9]), torch.tensor([2])).out(f64(y.contiguous())))
    dy = rnd(4, 6, 3)
    (dx,) = grad_of(lambda x: x[:, :, 6:], [x], dy)
    cs.append(Case("slice_grad", "SliceGrad", {"starts": [6], "ends": [9], "axes": [2], "steps": [1]}).inp(dy).out(dx))
    dy = rnd(4, 2, 3)
    (dx,) = grad_of(lambda x: x[:, 0:4:2, 1:9:3], [x], dy)
    cs.append(Case("slice_grad_steps", "SliceGrad", {"starts": [0, 1], "ends": [4, 9], "axes": [1, 2], "steps": [2, 3]}).inp(dy).out(dx))
    x = rnd(8, 1, 16)
    cs.append(Case("expand", "Expand").inp(x, torch.tensor([8, 5, 16])).out(f64(x.expand(8, 5, 16).contiguous())))
    x = rnd(8, 16, 32)
    cs.append(Case("reducemean_last", "ReduceMean", {"axes": [-1]}).inp(x).out(f64(x.mean(-1, keepdim=True))))
    cs.append(Case("reducemean_nokeep", "ReduceMean", {"axes": [1], "keepdims": 0}).inp(x).out(f64(x.mean(1))))
    cs.append(Case("reducesum_all", "ReduceSum", {"keepdims": 0}).inp(x).out(f64(x.sum())))
    cs.append(Case("pow_square", "Pow").inp(x, torch.tensor(2.0).double()).out(f64(x ** 2)))
    xp, e = rnd(5, 6, lo=0.1, hi=2.0), rnd(6, lo=-2, hi=3)
    cs.append(Case("pow_bcast", "Pow").inp(xp, e).out(f64(xp ** e)))
    xc = rnd(4, 5, lo=-10, hi=10)
    cs.append(Case("cast_f32_i64", "Cast", {"to": 7}).inp(xc).out(xc.float().to(torch.int64)))
    ic = torch.randint(-100, 100, (3, 4))
    cs.append(Case("cast_i64_f32", "Cast", {"to": 1}).inp(ic).out(f64(ic.double())))
    cs.append(Case("shape", "Shape").inp(x).out(torch.tensor([8, 16, 32])))
    cs.append(Case("shape_slice", "Shape", {"start": 1, "end": -1}).inp(x).out(torch.tensor([16])))
    # LayerNormalization (training form: Mean, InvStdDev) and its gradient.
    for name, shape, axis, bias in [("ln_last", (4, 6, 32), -1, True), ("ln_ax1", (3, 5, 4, 6), 1, False)]:
        x = rnd(*shape, lo=-2, hi=3)
        ns = shape[axis:] if axis >= 0 else shape[axis:]
        sc, b = rnd(*ns, lo=0.5, hi=1.5), rnd(*ns)
        ins = [x, sc] + ([b] if bias else [])

        def fn(x, s, *b):
            return F.layer_norm(x, ns, s, b[0] if b else None, 1e-5)

        dims = tuple(range(len(shape) - len(ns), len(shape)))
        mean = x.mean(dim=dims, keepdim=True)
        inv = 1.0 / torch.sqrt(x.var(dim=dims, unbiased=False, keepdim=True) + 1e-5)
        attrs = {"axis": axis, "epsilon": 1e-5}
        cs.append(Case(name, "LayerNormalization", attrs).inp(*ins).out(f64(fn(*ins)), f64(mean), f64(inv)))
        dy = rnd(*shape)
        grads = grad_of(fn, ins, dy)
        cs.append(Case(name + "_grad", "LayerNormalizationGrad", attrs).inp(dy, x, sc, mean, inv).out(*grads))
    x = rnd(4, 50, lo=-4, hi=4)
    for approx in ("none", "tanh"):
        fn = lambda x, a=approx: F.gelu(x, approximate=a)
        cs.append(Case("gelu_" + approx, "Gelu", {"approximate": approx}).inp(x).out(f64(fn(x))))
        dy = rnd(*x.shape)
        cs.append(Case("gelu_" + approx + "_grad", "GeluGrad", {"approximate": approx}).inp(dy, x).out(*grad_of(fn, [x], dy)))
    cs.append(Case("erf", "Erf").inp(x).out(f64(torch.erf(x))))
    return cs


@group("convtranspose")
def g_convtranspose():
    """ConvTranspose and ConvTransposeGrad (U-Net's up-sampling)."""
    cs = []
    for name, xs, ws, bias, stride, pad, outpad, dil, groups in [
        ("up2x2", (2, 6, 4, 4), (6, 3, 2, 2), True, 2, 0, 0, 1, 1),
        ("k3s2p1op1", (2, 4, 5, 5), (4, 5, 3, 3), True, 2, 1, 1, 1, 1),
        ("grouped_dil", (1, 4, 6, 6), (4, 2, 3, 3), False, 1, 2, 0, 2, 2),
    ]:
        x, w = rnd(*xs), rnd(*ws)
        b = rnd(ws[1] * groups) if bias else None
        attrs = {"strides": [stride] * 2, "pads": [pad] * 4, "dilations": [dil] * 2,
                 "group": groups, "kernel_shape": list(ws[2:])}
        if outpad:
            attrs["output_padding"] = [outpad] * 2

        def fn(x, w, *b):
            return F.conv_transpose2d(x, w, b[0] if b else None, stride, pad, outpad, groups, dil)

        ins = [x, w] + ([b] if bias else [])
        y = fn(*ins)
        cs.append(Case(name, "ConvTranspose", attrs).inp(*ins).out(f64(y)))
        dy = rnd(*y.shape)
        grads = grad_of(fn, ins, dy)
        cs.append(Case(name + "_grad", "ConvTransposeGrad", attrs).inp(dy, x, w).out(*grads))
    return cs


@group("resize")
def g_resize():
    """Resize (nearest, linear) and ResizeGrad against F.interpolate."""
    cs = []
    for name, xs, size, attrs, fn in [
        ("nearest2x", (2, 3, 4, 5), (8, 10),
         {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
         lambda x: F.interpolate(x, scale_factor=2, mode="nearest")),
        ("nearest_down", (1, 2, 9, 6), (3, 4),
         {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
         lambda x: F.interpolate(x, size=(3, 4), mode="nearest")),
        ("bilinear_half_pixel", (2, 2, 5, 4), (10, 7),
         {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
         lambda x: F.interpolate(x, size=(10, 7), mode="bilinear", align_corners=False)),
        ("bilinear_align_corners", (1, 3, 4, 6), (7, 11),
         {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
         lambda x: F.interpolate(x, size=(7, 11), mode="bilinear", align_corners=True)),
        ("linear_1d", (2, 3, 5), (9,),
         {"mode": "linear", "coordinate_transformation_mode": "half_pixel"},
         lambda x: F.interpolate(x, size=9, mode="linear", align_corners=False)),
    ]:
        x = rnd(*xs)
        y = fn(x)
        cs.append(Case(name, "Resize", attrs).inp(x).out(f64(y)))
        dy = rnd(*y.shape)
        cs.append(Case(name + "_grad", "ResizeGrad", attrs).inp(dy).out(*grad_of(fn, [x], dy)))
    return cs


@group("pointwise")
def g_pointwise():
    """Activations without oneDNN, comparisons, logic, Where
    (runtime/cpu/PointwiseKernels.cpp) and the mask builders
    (runtime/cpu/ShapeKernels.cpp)."""
    cs = []
    shape = (3, 4, 5, 6)
    for op, fn, attrs in [
        ("HardSigmoid", lambda x: torch.clamp(0.25 * x + 0.4, 0, 1), {"alpha": 0.25, "beta": 0.4}),
        ("HardSwish", F.hardswish, {}),
        ("Mish", F.mish, {}),
    ]:
        x = rnd(*shape, lo=-5, hi=5)
        if op == "HardSwish":
            # The gradient at the kinks (x = -3, 3) is a convention that
            # PyTorch releases differ on; bf16's grid lands on them.
            x = torch.where((x.abs() - 3).abs() < 0.05, x + 0.125, x)
        cs.append(Case(op.lower(), op, attrs).inp(x).out(f64(fn(x))))
        dy = rnd(*shape)
        (dx,) = grad_of(fn, [x], dy)
        cs.append(Case(op.lower() + "_grad", op + "Grad", attrs).inp(dy, x).out(dx))
    x = rnd(4, 7, lo=0.5, hi=3)
    cs.append(Case("reciprocal", "Reciprocal").inp(x).out(f64(1.0 / x)))
    # The activations computed by KernelMath.h's sharedUnary on both
    # backends (their gradients are built from other ops).
    x = rnd(*shape, lo=-25, hi=25)
    for op, fn, attrs in [
        ("Softplus", F.softplus, {}),
        ("Softsign", F.softsign, {}),
        ("Sin", torch.sin, {}),
        ("Cos", torch.cos, {}),
        ("Selu", F.selu, {}),
        ("Celu", lambda v: F.celu(v, alpha=0.5), {"alpha": 0.5}),
        ("ThresholdedRelu", lambda v: torch.where(v > 1.5, v, 0.0), {"alpha": 1.5}),
    ]:
        cs.append(Case(op.lower(), op, attrs).inp(x).out(f64(fn(x))))
    # Piecewise constant ones; Round is half to even, as torch.round.
    xr = torch.cat([x.flatten()[:64], torch.tensor([-2.5, -0.5, 0.5, 1.5, 2.5, 0.0, -0.0]).double()])
    for op, fn in [("Floor", torch.floor), ("Ceil", torch.ceil), ("Round", torch.round), ("Sign", torch.sign)]:
        cs.append(Case(op.lower(), op).inp(xr).out(f64(fn(xr))))
    # Mod: fmod 1 takes the dividend's sign (torch.fmod), fmod 0 the
    # divisor's (torch.remainder), on floats and integers.
    a, b = rnd(3, 8, lo=-9, hi=9), rnd(8, lo=0.5, hi=3) * torch.where(torch.arange(8) % 2 == 0, 1.0, -1.0).double()
    cs.append(Case("fmod_f32", "Mod", {"fmod": 1}).inp(a, b).out(f64(torch.fmod(a.float(), b.float()))))
    cs.append(Case("mod_f32", "Mod").inp(a, b).out(f64(torch.remainder(a.float(), b.float()))))
    ia, ib = torch.randint(-20, 20, (3, 8)), torch.tensor([3, -3, 5, -5, 7, -7, 2, -2])
    cs.append(Case("mod_i64", "Mod").inp(ia, ib).out(torch.remainder(ia, ib)))
    cs.append(Case("fmod_i64", "Mod", {"fmod": 1}).inp(ia, ib).out(torch.fmod(ia, ib)))
    a, s = rnd(2, 3, 4, 5), rnd(3, 1, 1)
    cs.append(Case("prelu", "PRelu").inp(a, s).out(f64(torch.where(a > 0, a, a * s))))
    b = rnd(3, 1, 5)
    b[0, 0, 0] = float("nan")
    cs.append(Case("max_nan", "Max").inp(a, b).out(f64(torch.maximum(a, b))))
    cs.append(Case("min_nan", "Min").inp(a, b).out(f64(torch.minimum(a, b))))
    ia, ib = torch.randint(-9, 9, (2, 3)), torch.randint(-9, 9, (3,))
    cs.append(Case("max_i64", "Max").inp(ia, ib).out(torch.maximum(ia, ib)))
    a, b = torch.randint(0, 4, (3, 1, 5)), torch.randint(0, 4, (4, 1))
    for op, fn in [("Equal", torch.eq), ("Less", torch.lt), ("Greater", torch.gt),
                   ("LessOrEqual", torch.le), ("GreaterOrEqual", torch.ge)]:
        cs.append(Case(op.lower(), op).inp(a, b).out(fn(a, b)))
    fa, fb = rnd(2, 3), rnd(3)
    cs.append(Case("less_f32", "Less").inp(fa, fb).out(fa < fb))
    p, q = torch.rand(4, 5) > 0.5, torch.rand(5) > 0.5
    for op, fn in [("And", torch.logical_and), ("Or", torch.logical_or), ("Xor", torch.logical_xor)]:
        cs.append(Case(op.lower(), op).inp(p, q).out(fn(p, q)))
    cs.append(Case("not", "Not").inp(p).out(~p))
    c, x, y = torch.rand(2, 1, 6) > 0.5, rnd(2, 3, 6), rnd(6)
    cs.append(Case("where_f32", "Where").inp(c, x, y).out(f64(torch.where(c, x, y))))
    cs.append(Case("where_scalar", "Where").inp(c, x, torch.tensor(-1e9).double()).out(f64(torch.where(c, x, torch.tensor(-1e9).double()))))
    xi, yi = torch.randint(-9, 9, (2, 3, 6)), torch.randint(-9, 9, (3, 1))
    cs.append(Case("where_i64", "Where").inp(c, xi, yi).out(torch.where(c, xi, yi)))
    cs.append(Case("constant_of_shape", "ConstantOfShape", {"value": 1.5}).inp(torch.tensor([2, 3])).out(f64(torch.full((2, 3), 1.5))))
    cs.append(Case("constant_of_shape_i64", "ConstantOfShape", {"value": 7}).inp(torch.tensor([4])).out(torch.full((4,), 7, dtype=torch.int64)))
    cs.append(Case("range_i64", "Range").inp(torch.tensor(2), torch.tensor(11), torch.tensor(3)).out(torch.arange(2, 11, 3)))
    cs.append(Case("range_f32", "Range").inp(torch.tensor(0.5).double(), torch.tensor(3.0).double(), torch.tensor(0.5).double()).out(f64(torch.arange(0.5, 3.0, 0.5, dtype=torch.float64))))
    x = rnd(2, 5, 7)
    cs.append(Case("triu", "Trilu", {"upper": 1}).inp(x).out(f64(torch.triu(x))))
    cs.append(Case("triu_k1", "Trilu", {"upper": 1}).inp(x, torch.tensor(1)).out(f64(torch.triu(x, 1))))
    cs.append(Case("tril_km2", "Trilu", {"upper": 0}).inp(x, torch.tensor(-2)).out(f64(torch.tril(x, -2))))
    m = torch.ones(6, 6, dtype=torch.bool)
    cs.append(Case("triu_bool", "Trilu", {"upper": 1}).inp(m, torch.tensor(1)).out(torch.triu(m, 1)))
    return cs


# ----------------------------------------------------------- recurrent ----


def onnx_rnn(op, x, w, r, b, h0, c0, direction, lbr):
    """ONNX LSTM/GRU (layout 0, default activations) written out step by
    step from the operator's equations: gates i, o, f, c (LSTM) and z, r, h
    (GRU) in W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H] (Wb then Rb).
    Returns Y [T, D, N, H], Y_h [D, N, H] (and Y_c)."""
    T, N, _ = x.shape
    D, GH, _ = w.shape
    G = 4 if op == "LSTM" else 3
    H = GH // G
    ys, hs, cs = [], [], []
    for d in range(D):
        rev = direction == "reverse" or (direction == "bidirectional" and d == 1)
        wb, rb = b[d, :GH], b[d, GH:]
        h, c = h0[d], c0[d] if c0 is not None else None
        out = [None] * T
        for t in (reversed(range(T)) if rev else range(T)):
            xw = x[t] @ w[d].T + wb
            hr = h @ r[d].T
            if op == "LSTM":
                g = xw + hr + rb
                i, o, f, cc = (g[:, k * H:(k + 1) * H] for k in range(4))
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(cc)
                h = torch.sigmoid(o) * torch.tanh(c)
            else:
                z = torch.sigmoid(xw[:, :H] + hr[:, :H] + rb[:H])
                rr = torch.sigmoid(xw[:, H:2 * H] + hr[:, H:2 * H] + rb[H:2 * H])
                if lbr:
                    n = torch.tanh(xw[:, 2 * H:] + rr * (hr[:, 2 * H:] + rb[2 * H:]))
                else:
                    n = torch.tanh(xw[:, 2 * H:] + (rr * h) @ r[d, 2 * H:].T + rb[2 * H:])
                h = (1 - z) * n + z * h
            out[t] = h
        ys.append(torch.stack(out))
        hs.append(h)
        cs.append(c)
    y = torch.stack(ys, 1)
    return (y, torch.stack(hs), torch.stack(cs)) if op == "LSTM" else (y, torch.stack(hs))


@group("recurrent")
def g_recurrent():
    """LSTM/GRU and LSTMGrad/GRUGrad against the ONNX equations: every
    direction, both GRU forms, absent B / initial states / output
    gradients (zeros in the reference)."""
    cs = []
    T, N, I, H = 5, 3, 4, 6
    for name, op, direction, lbr, absent in [
        ("lstm", "LSTM", "forward", 0, ()),
        ("lstm_reverse_bare", "LSTM", "reverse", 0, ("B", "h0", "c0")),
        ("lstm_bidir", "LSTM", "bidirectional", 0, ("dY_h",)),
        ("gru", "GRU", "forward", 0, ()),
        ("gru_lbr_reverse", "GRU", "reverse", 1, ("h0",)),
        ("gru_bidir", "GRU", "bidirectional", 0, ("B", "dY")),
        ("gru_lbr_bidir", "GRU", "bidirectional", 1, ()),
    ]:
        D = 2 if direction == "bidirectional" else 1
        G = 4 if op == "LSTM" else 3
        lstm = op == "LSTM"
        attrs = {"hidden_size": H}
        if direction != "forward":
            attrs["direction"] = direction
        if not lstm:
            attrs["linear_before_reset"] = lbr
        x, w, r = rnd(T, N, I), rnd(D, G * H, I, lo=-0.5, hi=0.5), rnd(D, G * H, H, lo=-0.5, hi=0.5)
        b = rnd(D, 2 * G * H)
        h0, c0 = rnd(D, N, H), rnd(D, N, H) if lstm else None
        vals = {"B": b, "h0": h0, "c0": c0}
        for k in absent:
            if k in vals:
                vals[k] = torch.zeros_like(vals[k])
        b, h0, c0 = vals["B"], vals["h0"], vals["c0"]

        def fn(x, w, r, b, h0, *c0, op=op, direction=direction, lbr=lbr):
            return onnx_rnn(op, x, w, r, b, h0, c0[0] if c0 else None, direction, lbr)

        params = [x, w, r, b, h0] + ([c0] if lstm else [])
        outs = fn(*params)
        # Forward operands: X W R B sequence_lens initial_h [initial_c];
        # absent ones are left out (trailing) or holes (middle).
        fwd = [x, w, r, None if "B" in absent else b, None,
               None if "h0" in absent else h0]
        if lstm:
            fwd.append(None if "c0" in absent else c0)
        while fwd[-1] is None:
            fwd.pop()
        cs.append(Case(name, op, attrs).inp(*fwd).out(*[f64(o) for o in outs]))
        # Gradient: X W R B h0 [c0] dY dY_h [dY_c] -> dX dW dR dB dh0 [dc0].
        douts = [rnd(*o.shape) for o in outs]
        for k, i in (("dY", 0), ("dY_h", 1)):
            if k in absent:
                douts[i] = torch.zeros_like(douts[i])
        ins = [p.clone().requires_grad_(True) for p in params]
        res = fn(*ins)
        sum((o * g).sum() for o, g in zip(res, douts)).backward()
        grads = [f64(p.grad) for p in ins]
        gin = fwd[:4] + [None] * (4 - len(fwd[:4]))
        gin += [None if "h0" in absent else h0]
        if lstm:
            gin.append(None if "c0" in absent else c0)
        gin += [None if k in absent else t for k, t in zip(("dY", "dY_h", "dY_c"), douts)]
        while gin[-1] is None:
            gin.pop()
        cs.append(Case(name + "_grad", op + "Grad", attrs).inp(*gin).out(*grads))
    return cs


# ------------------------------------------------------------ attention ----


@group("attention")
def g_attention():
    """FusedAttention(Q, KT, V[, mask]) {scale} and its gradient: batch
    shapes of rank 1 and 2, odd sizes, masks broadcast over heads (padding)
    and over the batch (causal), no mask, and scores larger than one chunk
    of the CUDA kernel's workspace."""
    cs = []
    for name, batch, m, n, d, e, scale, mask_shape in [
        ("attn_plain", (3,), 5, 6, 3, 7, 0.37, None),
        ("attn_pad", (2, 3), 4, 9, 8, 5, 0.125, (2, 1, 1, 9)),
        ("attn_causal", (2, 2), 7, 7, 4, 4, 0.5, (7, 7)),
        ("attn_rowmask", (3,), 6, 5, 2, 3, 1.0, (3, 6, 5)),
        # Scores of 1500 x 1500: the CUDA kernel runs these batch indices
        # in several chunks of its workspace, the padding mask per index.
        ("attn_chunks", (4,), 1500, 1500, 4, 4, 0.5, (4, 1, 1500)),
    ]:
        q = rnd(*batch, m, d, lo=-2, hi=2)
        kt = rnd(*batch, d, n, lo=-2, hi=2)
        v = rnd(*batch, n, e)
        mask = None
        if mask_shape is not None:
            if name == "attn_causal":
                mask = torch.ones(m, n, dtype=torch.bool).triu(1)
            else:
                mask = torch.rand(mask_shape) < 0.4
                mask[..., 0] = False  # no row masked everywhere

        def fn(q, kt, v, mask=mask, scale=scale):
            s = torch.matmul(q, kt) * scale
            if mask is not None:
                s = s.masked_fill(mask, float("-inf"))
            return torch.matmul(torch.softmax(s, -1), v)

        ins = [q, kt, v] + ([mask] if mask is not None else [])
        cs.append(Case(name, "FusedAttention", {"scale": scale}).inp(*ins).out(f64(fn(q, kt, v))))
        dy = rnd(*batch, m, e)
        grads = grad_of(fn, [q, kt, v], dy)
        cs.append(Case(name + "_grad", "FusedAttentionGrad", {"scale": scale}).inp(dy, *ins).out(*grads))
    return cs


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--group", action="append", default=[])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    args = ap.parse_args()
    global PRECISION
    PRECISION = args.precision
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    names = args.group or sorted(GROUPS)
    manifest = []
    for g in names:
        if g not in GROUPS:
            print(f"unknown group {g}; known: {sorted(GROUPS)}", file=sys.stderr)
            return 2
        write_cases(args.out, GROUPS[g](), manifest)
    with open(os.path.join(args.out, "manifest.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
