#!/usr/bin/env python3
"""Regenerates the TrainingInfoProto text models of this folder that carry
the full ONNX training convention: optimizer state (V, H) and the update
count T are initializers bound in update_binding next to the parameters
(run by hand with Debian's /usr/bin/python3; outputs are committed).
Usage: gen_training_inputs.py [output dir]"""

import os
import sys

import numpy as np
import onnx
from google.protobuf import text_format
from onnx import helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
DOMAIN = "ai.onnx.preview.training"


def linear_model(name, op, attrs, slots, with_optimizer=True):
    w = numpy_helper.from_array(np.full((3, 4), 0.1, np.float32), "fc.weight")
    b = numpy_helper.from_array(np.zeros(3, np.float32), "fc.bias")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["y"],
                          name="/fc/Gemm", transB=1)],
        name, [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 3])],
        [w, b])
    params = ["fc.weight", "fc.bias"]
    state = [f"{p}.{s}" for s in "VH"[:slots] for p in params]
    for s in state:
        shape = (3, 4) if s.startswith("fc.weight") else (3,)
        graph.initializer.append(numpy_helper.from_array(np.zeros(shape, np.float32), s))
    graph.initializer.append(numpy_helper.from_array(np.array(0, np.int64), "T"))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(DOMAIN, 1)])
    model.ir_version = 8
    ti = model.training_info.add()
    alg = ti.algorithm
    alg.name = "algorithm"
    grads = [p + ".grad" for p in params]
    alg.node.append(helper.make_node("Gradient", ["x"], grads, domain=DOMAIN,
                                     name="grad", xs=params, y="loss"))
    if with_optimizer:
        alg.node.append(helper.make_node(
            op, ["R", "T"] + params + grads + state,
            [p + ".new" for p in params + state], domain=DOMAIN, name="opt", **attrs))
    alg.node.append(helper.make_node("Add", ["T", "one"], ["T.new"], name="count"))
    alg.initializer.extend([numpy_helper.from_array(np.array(0.01, np.float32), "R"),
                            numpy_helper.from_array(np.array(1, np.int64), "one")])
    for key in params + state + ["T"]:
        bnd = ti.update_binding.add()
        bnd.key, bnd.value = key, key + ".new"
    return model


def save(model, name):
    with open(os.path.join(OUT, name), "w") as f:
        f.write(text_format.MessageToString(model))


save(linear_model("adam", "Adam", dict(alpha=0.85, beta=0.99, epsilon=1e-4,
                                       norm_coefficient=1e-3,
                                       norm_coefficient_post=1e-2), 2),
     "training_adam.txtpb")
save(linear_model("nesterov", "Momentum", dict(alpha=0.5, beta=0.8, mode="nesterov",
                                               norm_coefficient=2e-4), 1),
     "training_nesterov.txtpb")
save(linear_model("adagrad", "Adagrad", dict(decay_factor=0.1, epsilon=1e-5,
                                             norm_coefficient=0.0), 1),
     "training_adagrad.txtpb")
# A hand-written update rule: no optimizer node, the Gradient's xs decide.
save(linear_model("custom", None, {}, 1, with_optimizer=False), "training_custom.txtpb")
