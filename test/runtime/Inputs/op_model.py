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
        with a '.', a list of ints a,b or a, ; else a string) -> logits
    op_model.py gather OUT.onnx BAD_INDEX
        X [2, 8, 4, 4] -> Conv -> GatherElements along axis 1 with constant
        indices [2, 2, 4, 4], one of them BAD_INDEX -> logits
    op_model.py check MODEL.onnx DATA_DIR DUMP.json
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


def check(model, data, dump):
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
    logits = ort.InferenceSession(model).run(None, {"input": x})[0]
    logits = logits.astype(np.float64)
    top = logits.max(1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(1)) + top[:, 0]
    want = float(np.mean(lse - logits[np.arange(len(y)), y]))
    got = json.load(open(dump))["loss"]
    rel = abs(got - want) / abs(want)
    if rel > 1e-5:
        sys.exit(f"loss: oasr {got}, ONNX Runtime {want} ({rel:.2e} relative)")
    print(f"loss equals ONNX Runtime's within {max(rel, 1e-12):.1e}")


def main():
    if sys.argv[1] == "check":
        return check(*sys.argv[2:5])
    p = argparse.ArgumentParser()
    p.add_argument("op", choices=["einsum", "groupnorm", "mean", "node",
                                  "gather"])
    p.add_argument("out")
    p.add_argument("arg")
    p.add_argument("--opset", type=int, default=17)
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
            attrs = {}
            for kv in kvs:
                k, v = kv.split("=")
                if "," in v:
                    attrs[k] = [int(t) for t in v.split(",") if t]
                elif "." in v:
                    attrs[k] = float(v)
                else:
                    attrs[k] = int(v) if v.lstrip("-").isdigit() else v
            nodes.append(helper.make_node(
                op, ["c" if i == 0 else f"t{i}"],
                ["y" if i + 1 == len(ops) else f"t{i + 1}"],
                name="op" if i + 1 == len(ops) else f"op{i}", **attrs))
        probe = helper.make_model(
            helper.make_graph(nodes, "probe", [helper.make_tensor_value_info(
                "input", TensorProto.FLOAT, [2, 8, 4, 4])], [], inits),
            opset_imports=[helper.make_opsetid("", a.opset)])
        shapes = onnx.shape_inference.infer_shapes(probe).graph.value_info
        dims = [d.dim_value for v in shapes if v.name == "y"
                for d in v.type.tensor_type.shape.dim]
        features = int(np.prod(dims[1:])) if len(dims) > 1 else 1
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
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])
    graph = helper.make_graph(nodes, "op_model", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
