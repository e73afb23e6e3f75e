#!/usr/bin/python3
"""Writes a small trainable ONNX model around one op, for the errors a
model with that op can get:

    op_model.py einsum OUT.onnx EQUATION
        X [B, 4, 6] -> Einsum(X, W [6, 5]) with EQUATION -> mean -> logits
    op_model.py groupnorm OUT.onnx GROUPS [--opset 18|21]
        X [B, 6, 4, 4] -> Conv -> GroupNormalization(num_groups) -> logits
        (scale and bias per channel at opset 21, per group at 18)
    op_model.py mean OUT.onnx N
        X [B, 6, 4, 4] -> N convolutions -> Mean of them and X -> logits
    op_model.py node OUT.onnx "OP key=value ... [| OP ...]" [--opset N]
        X [B, 8, 4, 4] -> Conv -> each OP in turn, with the attributes (an int, a float
        with a '.', a list of ints a,b or a, ; else a string; +TYPE[@AxB]:v,...
        a constant operand of i64 or f32; #N results) -> logits
    op_model.py gather OUT.onnx BAD_INDEX
        X [2, 8, 4, 4] -> Conv -> GatherElements along axis 1 with constant
        indices [2, 2, 4, 4], one of them BAD_INDEX -> logits
    op_model.py rmsnorm OUT.onnx AXIS
    op_model.py attention OUT.onnx gqa-causal|mask-softcap
        X [B, 8, 4, 4] -> Conv -> RMSNormalization-23 along AXIS, or 3-D
        grouped-query causal Attention-23 (4 query, 2 key/value heads) or
        4-D Attention-23 with a bool mask, scale and softcap -> logits; also
        writes OUT-ref.onnx, the same model at opset 17 with the op written
        out as ONNX's function body defines it (ONNX Runtime here predates
        opset 23), whose initializers have the same names
    op_model.py same DUMP.json REF_DUMP.json
        The two first-step gradient dumps agree within 1e-5 (normwise)
    op_model.py check MODEL.onnx DATA_DIR DUMP.json [REF.onnx]
        Writes one batch of 2 under DATA_DIR on the first call (no DUMP
        yet); then compares oasr-run's first-step loss (--dump-grads at
        --lr=0) with ONNX Runtime's on that batch, within 1e-5 relative
        (a mean of 2 float32 losses that differ in rounding only).
"""
import os
import sys
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def init(name, shape, seed):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array(
        rng.standard_normal(shape).astype(np.float32) * 0.3, name)


def head(nodes, inits, x, channels):
    """x [B, channels, ...] -> GlobalAveragePool-free mean -> Gemm logits."""
    nodes.append(helper.make_node("Flatten", [x], ["flat"], name="flatten",
                                  axis=1))
    inits.append(init("fc.weight", (3, channels), 9))
    inits.append(init("fc.bias", (3,), 10))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"],
                                  ["logits"], name="fc", transB=1))


def check(model, data, dump, ref=None):
    rng = np.random.default_rng(0)
    shape = [d.dim_value or 2 for d in
             onnx.load(model).graph.input[0].type.tensor_type.shape.dim]
    x = rng.standard_normal(shape).astype(np.float32)
    y = np.arange(shape[0]) % 3
    if not os.path.exists(dump):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
            __file__)), "..", "..", "..", "python"))
        from oasr.data import write_images
        print(write_images(data, x, y.astype(np.uint8)))
        return
    import json
    import onnxruntime as ort
    logits = ort.InferenceSession(ref or model).run(None, {"input": x})[0]
    logits = logits.astype(np.float64)
    top = logits.max(1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(1)) + top[:, 0]
    want = float(np.mean(lse - logits[np.arange(len(y)), y]))
    got = json.load(open(dump))["loss"]
    rel = abs(got - want) / abs(want)
    if rel > 1e-5:
        sys.exit(f"loss: oasr {got}, ONNX Runtime {want} ({rel:.2e} relative)")
    print(f"loss equals ONNX Runtime's within {max(rel, 1e-12):.1e}")


def same(dump, ref):
    import json
    a, b = json.load(open(dump))["params"], json.load(open(ref))["params"]
    if sorted(a) != sorted(b):
        sys.exit(f"parameters differ: {sorted(a)} against {sorted(b)}")
    worst = 0.0
    for k in a:
        g, h = np.array(a[k]["grad"]), np.array(b[k]["grad"])
        err = np.linalg.norm(g - h) / max(np.linalg.norm(h), 1e-30)
        if err > 1e-5:
            sys.exit(f"{k}: gradients differ by {err:.2e} (normwise)")
        worst = max(worst, err)
    print(f"gradients equal the written-out model's: {len(a)} parameters, "
          f"worst {worst:.1e}")


def function_op(kind, arg, nodes, inits, ref):
    """The RMSNormalization / Attention model on the conv's result c
    [2, 8, 4, 4] into "y"; with `ref`, the op written out in opset-17 ops.
    Returns (features per sample, opset)."""
    def n(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def i64(name, *v):
        return const(name, np.array(v, np.int64))

    if kind == "rmsnorm":
        axis = int(arg)
        first = axis if axis >= 0 else 4 + axis
        inits.append(init("rms.weight", [2, 8, 4, 4][first:], 2))
        if not ref:
            n("RMSNormalization", ["c", "rms.weight"], "y", axis=axis,
              epsilon=1e-3)
            return 128, 23
        ms = n("ReduceMean", [n("Mul", ["c", "c"], "sq")], "ms",
               axes=list(range(first, 4)), keepdims=1)
        rms = n("Sqrt", [n("Add", [ms, const("eps", np.float32(1e-3))], "mse")], "rms")
        n("Mul", [n("Div", ["c", rms], "normed"), "rms.weight"], "y")
        return 128, 17
    # Attention over 8 positions of 16 features; 4 query heads, 2 key/value
    # heads, head size 4.
    h = n("Reshape", ["c", i64("hshape", 2, 8, 16)], "h")
    for w, cols, seed in [("q", 16, 3), ("k", 8, 4), ("v", 8, 5)]:
        inits.append(init("w" + w, (16, cols), seed))
        n("MatMul", [h, "w" + w], w)
    back = lambda y4: n("Reshape", [n("Transpose", [y4], "yt", perm=[0, 2, 1, 3]),
                                    i64("yshape", 2, 8, 16)], "y")
    heads = {w: n("Transpose", [n("Reshape", [w, i64(w + "s", 2, 8, hh, 4)], w + "4")],
                  w + "t", perm=[0, 2, 1, 3])
             for w, hh in [("q", 4), ("k", 2), ("v", 2)]} if (ref or arg != "gqa-causal") else {}
    if arg == "mask-softcap":
        keep = np.random.default_rng(3).random((1, 1, 8, 8)) > 0.3
        np.fill_diagonal(keep[0, 0], True)
        const("mask", keep)
    if not ref:
        if arg == "gqa-causal":
            n("Attention", ["q", "k", "v"], "y", q_num_heads=4, kv_num_heads=2,
              is_causal=1)
        else:
            back(n("Attention", [heads["q"], heads["k"], heads["v"], "mask"],
                   "y4", scale=0.3, softcap=2.0))
        return 128, 23
    rep = {}
    for w in "kv":
        u = n("Unsqueeze", [heads[w], i64(w + "ax", 2)], w + "u")
        e = n("Expand", [u, i64(w + "es", 2, 2, 2, 8, 4)], w + "e")
        rep[w] = n("Reshape", [e, i64(w + "rs", 2, 4, 8, 4)], w + "r")
    kt = n("Transpose", [rep["k"]], "kT", perm=[0, 1, 3, 2])
    s = n("MatMul", [heads["q"], kt], "scores")
    scale = 0.5 if arg == "gqa-causal" else 0.3
    s = n("Mul", [s, const("scale", np.float32(scale))], "scaled")
    if arg == "gqa-causal":
        s = n("Add", [s, const("causal", np.triu(np.full((8, 8), -np.inf, np.float32), 1))], "masked")
    else:
        bias = n("Where", ["mask", const("zero", np.float32(0)),
                           const("ninf", np.float32(-np.inf))], "bias")
        s = n("Add", [s, bias], "masked")
        cap = const("cap", np.float32(2.0))
        s = n("Mul", [n("Tanh", [n("Div", [s, cap], "sdiv")], "stanh"), cap], "capped")
    p = n("Softmax", [s], "probs", axis=-1)
    back(n("MatMul", [p, rep["v"]], "y4"))
    return 128, 17


def main():
    if sys.argv[1] == "check":
        return check(*sys.argv[2:6])
    if sys.argv[1] == "same":
        return same(*sys.argv[2:4])
    p = argparse.ArgumentParser()
    p.add_argument("op", choices=["einsum", "groupnorm", "mean", "node",
                                  "gather", "rmsnorm", "attention"])
    p.add_argument("out")
    p.add_argument("arg")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--features", type=int,
                   help="the last op's result size per sample, where ONNX's "
                        "shape inference cannot tell (OneHot's depth)")
    a = p.parse_args()
    nodes, inits = [], []
    if a.op == "einsum":
        x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4, 6])
        inits.append(init("w", (6, 5), 1))
        nodes.append(helper.make_node("Einsum", ["input", "w"], ["y"],
                                      name="einsum", equation=a.arg))
        head(nodes, inits, "y", 20)
        opset = 12
    elif a.op == "node":
        x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 8, 4, 4])
        inits.append(init("conv.weight", (8, 8, 3, 3), 1))
        nodes.append(helper.make_node("Conv", ["input", "conv.weight"], ["c"],
                                      name="conv", pads=[1, 1, 1, 1]))
        ops = [s.split() for s in a.arg.split("|")]
        for i, (op, *kvs) in enumerate(ops):
            attrs, extra, outs = {}, [], 1
            for kv in kvs:
                if kv.startswith("+"):
                    # A constant operand: +TYPE[@AxBxC]:v,v,...
                    head_, vals = kv[1:].split(":")
                    kind, _, shape = head_.partition("@")
                    arr = np.array([float(t) for t in vals.split(",")],
                                   np.int64 if kind == "i64" else np.float32)
                    if shape:
                        arr = arr.reshape([int(d) for d in shape.split("x")])
                    name = f"k{i}_{len(extra)}"
                    inits.append(numpy_helper.from_array(arr, name))
                    extra.append(name)
                    continue
                if kv.startswith("#"):
                    outs = int(kv[1:])  # results beyond the first go unused
                    continue
                k, v = kv.split("=")
                if "," in v:
                    attrs[k] = [int(t) for t in v.split(",") if t]
                elif "." in v:
                    attrs[k] = float(v)
                else:
                    attrs[k] = int(v) if v.lstrip("-").isdigit() else v
            result = "y" if i + 1 == len(ops) else f"t{i + 1}"
            nodes.append(helper.make_node(
                op, ["c" if i == 0 else f"t{i}"] + extra,
                [result] + [f"{result}_{j}" for j in range(1, outs)],
                name="op" if i + 1 == len(ops) else f"op{i}", **attrs))
        probe = helper.make_model(
            helper.make_graph(nodes, "probe", [helper.make_tensor_value_info(
                "input", TensorProto.FLOAT, [2, 8, 4, 4])], [], inits),
            opset_imports=[helper.make_opsetid("", a.opset)])
        shapes = onnx.shape_inference.infer_shapes(probe).graph.value_info
        dims = [d.dim_value for v in shapes if v.name == "y"
                for d in v.type.tensor_type.shape.dim]
        features = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        if a.features:
            dims, features = [2, a.features], a.features
        if len(dims) < 2:
            nodes.append(helper.make_node("Unsqueeze", ["y", "one"], ["y2"],
                                          name="unsqueeze"))
            inits.append(numpy_helper.from_array(np.array([1], np.int64), "one"))
            head(nodes, inits, "y2", features)
        else:
            head(nodes, inits, "y", features)
        opset = a.opset
    elif a.op == "gather":
        x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 8, 4, 4])
        inits.append(init("conv.weight", (8, 8, 3, 3), 1))
        nodes.append(helper.make_node("Conv", ["input", "conv.weight"], ["c"],
                                      name="conv", pads=[1, 1, 1, 1]))
        idx = np.random.default_rng(4).integers(0, 8, (2, 2, 4, 4))
        idx[1, 1, 2, 3] = int(a.arg)
        inits.append(numpy_helper.from_array(idx.astype(np.int64), "idx"))
        nodes.append(helper.make_node("GatherElements", ["c", "idx"], ["y"],
                                      name="gather", axis=1))
        head(nodes, inits, "y", 32)
        opset = 13
    elif a.op in ("rmsnorm", "attention"):
        for ref in (True, False):
            nodes, inits = [], [init("conv.weight", (8, 8, 3, 3), 1)]
            x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 8, 4, 4])
            nodes.append(helper.make_node("Conv", ["input", "conv.weight"], ["c"],
                                          name="conv", pads=[1, 1, 1, 1]))
            features, opset = function_op(a.op, a.arg, nodes, inits, ref)
            head(nodes, inits, "y", features)
            if ref:
                write(nodes, inits, x, opset, a.out[:-5] + "-ref.onnx")
        return write(nodes, inits, x, opset, a.out)
    elif a.op == "mean":
        x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 6, 4, 4])
        terms = ["input"]
        for k in range(int(a.arg)):
            inits.append(init(f"conv{k}.weight", (6, 6, 3, 3), k + 1))
            nodes.append(helper.make_node("Conv", ["input", f"conv{k}.weight"],
                                          [f"c{k}"], name=f"conv{k}",
                                          pads=[1, 1, 1, 1]))
            terms.append(f"c{k}")
        nodes.append(helper.make_node("Mean", terms, ["y"], name="mean"))
        head(nodes, inits, "y", 96)
        opset = 13
    else:
        x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 6, 4, 4])
        inits.append(init("conv.weight", (6, 6, 3, 3), 1))
        nodes.append(helper.make_node("Conv", ["input", "conv.weight"], ["c"],
                                      name="conv", pads=[1, 1, 1, 1]))
        g = int(a.arg)
        a.opset = 21 if a.opset == 17 else a.opset
        n = 6 if a.opset >= 21 else max(g, 1)
        inits.append(init("gn.weight", (n,), 2))
        inits.append(init("gn.bias", (n,), 3))
        nodes.append(helper.make_node("GroupNormalization",
                                      ["c", "gn.weight", "gn.bias"], ["y"],
                                      name="gn", num_groups=g, epsilon=1e-5))
        head(nodes, inits, "y", 96)
        opset = a.opset
    write(nodes, inits, x, opset, a.out)


def write(nodes, inits, x, opset, out):
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])
    graph = helper.make_graph(nodes, "op_model", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
