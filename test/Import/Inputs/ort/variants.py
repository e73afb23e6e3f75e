#!/usr/bin/env python3
"""Broken variants of the ONNX Runtime training model in this directory, one
per error the ORT importer reports, written as binary models into OUT_DIR.

training_model.ckpt.txtpb and optimizer_model.txtpb are what
`scripts/ort_artifacts.py export tiny DIR --batch 2` wrote (onnxruntime-training
1.19.2's generate_artifacts; the checkpoint folded in), as text ModelProtos.

Usage: variants.py OUT_DIR"""

import copy
import os
import sys

import onnx
from google.protobuf import text_format

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    model = onnx.ModelProto()
    with open(os.path.join(HERE, name)) as f:
        text_format.Parse(f.read(), model)
    return model


def node(model, op):
    return next(n for n in model.graph.node if n.op_type == op)


def add_node(model, op, inputs, outputs, domain="com.microsoft", **attrs):
    n = onnx.helper.make_node(op, inputs, outputs, name="/extra/" + op,
                              domain=domain, **attrs)
    model.graph.node.append(n)


def main(out):
    os.makedirs(out, exist_ok=True)
    base = load("training_model.ckpt.txtpb")
    variants = {}

    def variant(name):
        m = copy.deepcopy(base)
        variants[name] = m
        return m

    # The training model as generate_artifacts writes it: the parameters'
    # values only in the checkpoint.
    m = variant("no_values")
    params = {i.name for i in m.graph.input}
    keep = [t for t in m.graph.initializer if t.name not in params]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)

    m = variant("unmapped_op")
    node(m, "ReluGrad").op_type = "FrobnicateGrad"

    m = variant("bad_buffer")
    acc = node(m, "InPlaceAccumulatorV2")
    acc.input[0] = "mystery_buffer"
    acc.input[1] = node(m, "Relu").output[0]

    m = variant("no_loss")
    del m.graph.output[0]

    m = variant("no_grads")
    accs = [n for n in m.graph.node if n.op_type == "InPlaceAccumulatorV2"]
    outs = {n.output[0] for n in accs}
    for n in accs:
        m.graph.node.remove(n)
    for o in [o for o in m.graph.output if o.name in outs]:
        m.graph.output.remove(o)

    # Without gradient accumulation: the graph returns '<param>_grad'.
    m = variant("no_accumulation")
    accs = [n for n in m.graph.node if n.op_type == "InPlaceAccumulatorV2"]
    grads = [n.input[1] for n in accs]
    dropped = {n.input[0] for n in accs} | {"lazy_reset_grad"}
    for n in accs:
        m.graph.node.remove(n)
    loss = m.graph.output[0]
    del m.graph.output[1:]
    for g in grads:
        m.graph.output.add().name = g
    for i in [i for i in m.graph.input if i.name in dropped]:
        m.graph.input.remove(i)

    # ORT's GatherGrad (an embedding's gradient): typed from its shape input.
    m = variant("gather_grad")
    m.graph.initializer.append(onnx.helper.make_tensor(
        "/extra/table_shape", onnx.TensorProto.INT64, [2], [5, 8]))
    add_node(m, "GatherGrad", ["/extra/table_shape", "labels",
                               node(m, "Flatten").output[0]], ["/extra/dtable"])

    # The mapped com.microsoft ops the tiny model does not have, on values
    # it does (their results unused): what the transformer's graph holds.
    m = variant("mapped_ops")
    flat = node(m, "Flatten").output[0]  # [2, 8]
    m.graph.initializer.extend([
        onnx.helper.make_tensor("/extra/bias8", onnx.TensorProto.FLOAT, [8],
                                [0.1] * 8),
        onnx.helper.make_tensor("/extra/count", onnx.TensorProto.INT64, [], [4]),
        onnx.helper.make_tensor("/extra/axis1", onnx.TensorProto.INT64, [1], [1]),
    ])
    add_node(m, "FusedMatMul", [flat, "fc.weight"], ["/extra/mm"], transB=1,
             alpha=0.5)
    add_node(m, "BiasGelu", [flat, "/extra/bias8"], ["/extra/gelu"])
    add_node(m, "BiasGeluGrad_dX", ["/extra/gelu", flat, "/extra/bias8"],
             ["/extra/dgelu"])
    add_node(m, "Scale", [flat, "/extra/count"], ["/extra/scaled"],
             scale_down=1)
    add_node(m, "ReduceSum", [flat, "/extra/axis1"], ["/extra/rows"],
             domain="", keepdims=0)

    m = variant("bn_outputs")
    del node(m, "BatchNormInternal").output[3:]

    m = variant("pool_grad_name")
    grad = node(m, "MaxPoolGrad")
    for n in m.graph.node:
        for i, v in enumerate(n.input):
            if v == grad.output[0]:
                n.input[i] = "/pool_dx"
    grad.output[0] = "/pool_dx"

    m = variant("pool_grad_inputs")
    node(m, "MaxPoolGrad").input.append(node(m, "MaxPool").input[0])

    m = variant("sce_weights")
    node(m, "SoftmaxCrossEntropyLossGrad").input.append("fc.bias")

    m = variant("scale_inputs")
    add_node(m, "Scale", ["fc.bias"], ["/extra/scaled"], scale_down=1)

    m = variant("bias_gelu_inputs")
    add_node(m, "BiasGelu", ["fc.bias"], ["/extra/gelu"])

    m = variant("pass_through")
    add_node(m, "PassThrough", ["fc.bias", "fc.weight"], ["/extra/pass"])

    m = variant("dropout_ratio")
    add_node(m, "DropoutGrad", ["fc.bias", "fc.bias", "fc.weight"],
             ["/extra/ddx"])

    m = variant("fused_matmul_batch")
    add_node(m, "FusedMatMul", ["fc.weight", "fc.weight"], ["/extra/mm"],
             transB=1, transBatchA=1)

    for name, model in variants.items():
        onnx.save(model, os.path.join(out, name + ".onnx"))

    # Optimizer models, each beside a copy of the good training model.
    opt = load("optimizer_model.txtpb")
    cases = {"opt_good": opt}
    m = copy.deepcopy(opt)
    for a in node(m, "AdamWOptimizer").attribute:
        if a.name == "adam_mode":
            a.i = 0
    cases["opt_mode0"] = m
    m = copy.deepcopy(opt)
    for a in node(m, "AdamWOptimizer").attribute:
        if a.name == "weight_decay":
            a.f = 0.01
    cases["opt_decay"] = m
    m = copy.deepcopy(opt)
    node(m, "AdamWOptimizer").op_type = "LambOptimizer"
    cases["opt_lamb"] = m
    for name, model in cases.items():
        os.makedirs(os.path.join(out, name), exist_ok=True)
        onnx.save(model, os.path.join(out, name, "optimizer_model.onnx"))
        onnx.save(base, os.path.join(out, name, "training_model.onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
