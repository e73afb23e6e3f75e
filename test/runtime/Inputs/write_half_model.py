#!/usr/bin/python3
"""Writes a one-layer model whose weights and activations are f16, as an
export after `model.half()` has them.

    write_half_model.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float16), "w")
x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", 3])
graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], "half", [x], [y], [w])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
