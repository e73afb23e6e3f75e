#!/usr/bin/python3
"""Writes a small classifier as ONNX with onnx.helper, for the tests of
models that carry their own loss.

  own_loss_model.py OUT.onnx {logits|sce|sce-log-prob} [--batch N] [--hidden H]

logits: Gemm -> Relu -> Gemm, output the logits [N, 3] (oasr appends the
loss); sce: the same followed by the model's own SoftmaxCrossEntropyLoss
(mean) without the optional log_prob output, the labels an int64 [N] graph
input; sce-log-prob: with log_prob. H hidden units (6 by default). Weights
are deterministic.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("kind", choices=["logits", "sce", "sce-log-prob"])
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--hidden", type=int, default=6)
args = parser.parse_args()

rng = np.random.default_rng(7)
inits = [
    numpy_helper.from_array(rng.standard_normal((8, args.hidden)).astype(np.float32) * 0.3, "fc1.weight"),
    numpy_helper.from_array(np.zeros(args.hidden, np.float32), "fc1.bias"),
    numpy_helper.from_array(rng.standard_normal((args.hidden, 3)).astype(np.float32) * 0.3, "fc2.weight"),
    numpy_helper.from_array(np.zeros(3, np.float32), "fc2.bias"),
]
nodes = [
    helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], name="/fc1/Gemm"),
    helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
    helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["logits"], name="/fc2/Gemm"),
]
inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [args.batch, 8])]
output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [args.batch, 3])
if args.kind != "logits":
    inputs.append(helper.make_tensor_value_info("labels", TensorProto.INT64, [args.batch]))
    output = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
if args.kind == "sce":
    nodes.append(helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"],
                                  name="/loss/SoftmaxCrossEntropyLoss", reduction="mean"))
elif args.kind == "sce-log-prob":
    nodes.append(helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"],
                                  ["loss", "log_prob"],
                                  name="/loss/SoftmaxCrossEntropyLoss", reduction="mean"))
graph = helper.make_graph(nodes, "own_loss", inputs, [output], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model)
onnx.save(model, args.out)
