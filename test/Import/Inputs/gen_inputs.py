#!/usr/bin/env python3
"""Regenerates the small text ModelProtos in this folder (run by hand with
Debian's /usr/bin/python3, which has onnx; the outputs are committed so the
lit tests need no Python). Usage: gen_inputs.py [output dir]"""

import os
import sys

import numpy as np
import onnx
from google.protobuf import json_format, text_format
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def init(name, shape, dtype=np.float32, value=None):
    if value is None:
        value = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) * 0.01
    return numpy_helper.from_array(np.asarray(value, dtype=dtype).reshape(shape), name)


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], name=name,
                            value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))


def save(model, name, fmt="text"):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        if fmt == "json":
            f.write(json_format.MessageToJson(model))
        else:
            f.write(text_format.MessageToString(model))


def model(graph, opset=15, ir=8, extra_opsets=()):
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(graph, opset_imports=opsets, producer_name="gen_inputs")
    m.ir_version = ir
    return m


# A CNN block in PyTorch's training-mode export form.
def cnn():
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c"], name="/conv1/Conv",
                         pads=[1, 1, 1, 1], strides=[1, 1], kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization",
                         ["c", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"],
                         ["b", "bn1.rm_out", "bn1.rv_out"], name="/bn1/BatchNormalization",
                         epsilon=1e-5, momentum=0.9, training_mode=1),
        helper.make_node("Relu", ["b"], ["r"], name="/relu/Relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="/pool/MaxPool",
                         kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=0),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="/gap/GlobalAveragePool"),
        helper.make_node("Flatten", ["g"], ["f"], name="/Flatten", axis=1),
        const("ratio", 0.5, np.float32),
        const("training", True, np.bool_),
        helper.make_node("Dropout", ["f", "ratio", "training"], ["d", "mask"], name="/drop/Dropout"),
        helper.make_node("Gemm", ["d", "fc.weight", "fc.bias"], ["y"], name="/fc/Gemm",
                         alpha=1.0, beta=1.0, transB=1),
    ]
    g = helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        [init("conv1.weight", [4, 3, 3, 3]), init("conv1.bias", [4]),
         init("bn1.weight", [4]), init("bn1.bias", [4]),
         init("bn1.running_mean", [4]), init("bn1.running_var", [4]),
         init("fc.weight", [10, 4]), init("fc.bias", [10])])
    return model(g, opset=15)


# Transformer-style pieces: embedding, computed reshape, attention, LayerNorm.
def transformer():
    nodes = [
        helper.make_node("Gather", ["embed.weight", "tokens"], ["e"], name="/embed/Gather"),
        helper.make_node("MatMul", ["e", "q.weight"], ["qm"], name="/q/MatMul"),
        helper.make_node("Add", ["q.bias", "qm"], ["q"], name="/q/Add"),
        # reshape [B, S, 8] -> [B, S, 2, 4] with the shape computed from Shape.
        helper.make_node("Shape", ["q"], ["qs"], name="/Shape"),
        const("idx0", 0), const("idx1", 1),
        helper.make_node("Gather", ["qs", "idx0"], ["b"], name="/Gather_b", axis=0),
        helper.make_node("Gather", ["qs", "idx1"], ["s"], name="/Gather_s", axis=0),
        const("axes0", [0]),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["bu"], name="/Unsqueeze_b"),
        helper.make_node("Unsqueeze", ["s", "axes0"], ["su"], name="/Unsqueeze_s"),
        const("heads", [2, 4]),
        helper.make_node("Concat", ["bu", "su", "heads"], ["shape"], name="/Concat", axis=0),
        helper.make_node("Reshape", ["q", "shape"], ["qh"], name="/Reshape"),
        helper.make_node("Transpose", ["qh"], ["qt"], name="/Transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["qh"], ["kt"], name="/TransposeK", perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qt", "kt"], ["att"], name="/att/MatMul"),
        const("scale", 2.0, np.float32),
        helper.make_node("Div", ["att", "scale"], ["atts"], name="/att/Div"),
        helper.make_node("Softmax", ["atts"], ["attp"], name="/att/Softmax", axis=-1),
        helper.make_node("MatMul", ["attp", "qt"], ["ctx"], name="/ctx/MatMul"),
        helper.make_node("Transpose", ["ctx"], ["ctxt"], name="/ctx/Transpose", perm=[0, 2, 1, 3]),
        const("flat", [0, 0, -1]),
        helper.make_node("Reshape", ["ctxt", "flat"], ["ctxf"], name="/ctx/Reshape"),
        helper.make_node("LayerNormalization", ["ctxf", "ln.weight", "ln.bias"], ["ln"],
                         name="/ln/LayerNormalization", axis=-1, epsilon=1e-5),
        # GELU through Erf
        const("sqrt2", 1.4142135, np.float32),
        helper.make_node("Div", ["ln", "sqrt2"], ["gd"], name="/gelu/Div"),
        helper.make_node("Erf", ["gd"], ["ge"], name="/gelu/Erf"),
        helper.make_node("ReduceMean", ["ge"], ["rm"], name="/ReduceMean", axes=[-1], keepdims=1),
        helper.make_node("Sub", ["ge", "rm"], ["cen"], name="/Sub"),
        const("two", 2.0, np.float32),
        helper.make_node("Pow", ["cen", "two"], ["sq"], name="/Pow"),
        helper.make_node("ReduceSum", ["sq", "axes_last"], ["ss"], name="/ReduceSum", keepdims=0),
        helper.make_node("Sqrt", ["ss"], ["rs"], name="/Sqrt"),
        # mask handling: Cast, Where, Expand, ConstantOfShape, Slice, Squeeze
        helper.make_node("Cast", ["tokens"], ["tf"], name="/Cast", to=TensorProto.FLOAT),
        helper.make_node("ConstantOfShape", ["qs"], ["zeros"], name="/ConstantOfShape",
                         value=numpy_helper.from_array(np.array([0.0], dtype=np.float32))),
        helper.make_node("Equal", ["tokens", "pad_id"], ["ispad"], name="/Equal"),
        helper.make_node("Where", ["ispad", "neg", "tf"], ["masked"], name="/Where"),
        helper.make_node("Expand", ["masked", "expand_to"], ["mx"], name="/Expand"),
        helper.make_node("Slice", ["zeros", "sl_start", "sl_end", "sl_axes"], ["zs"], name="/Slice"),
        helper.make_node("Squeeze", ["mx", "axes0"], ["msq"], name="/Squeeze"),
        helper.make_node("Identity", ["rs"], ["out"], name="/Identity"),
    ]
    g = helper.make_graph(
        nodes, "transformer",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("msq", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("zs", TensorProto.FLOAT, None)],
        [init("embed.weight", [20, 8]), init("q.weight", [8, 8]), init("q.bias", [8]),
         init("ln.weight", [8]), init("ln.bias", [8]),
         init("axes_last", [1], np.int64, [-1]), init("pad_id", [], np.int64, 0),
         init("neg", [], np.float32, -1.0),
         init("expand_to", [3], np.int64, [1, 1, 1]),
         init("sl_start", [1], np.int64, [1]), init("sl_end", [1], np.int64, [-1]),
         init("sl_axes", [1], np.int64, [2])])
    return model(g, opset=17)


# Opsets newer than libonnx 1.12 knows: ReduceMean-18 (axes input), Pad-18
# (axes input), Gelu-20, Split-18 (num_outputs), at opset 21.
def new_opsets():
    nodes = [
        helper.make_node("Pad", ["x", "pads", "", "pad_axes"], ["p"], name="/Pad", mode="constant"),
        helper.make_node("Gelu", ["p"], ["g"], name="/Gelu", approximate="tanh"),
        helper.make_node("ReduceMean", ["g", "rm_axes"], ["m"], name="/ReduceMean", keepdims=1),
        helper.make_node("Split", ["g"], ["s0", "s1"], name="/Split", axis=1, num_outputs=2),
        helper.make_node("Add", ["s0", "s1"], ["y"], name="/Add"),
        helper.make_node("Conv", ["y", "w"], ["c"], name="/Conv", kernel_shape=[1, 1]),
    ]
    g = helper.make_graph(
        nodes, "new_opsets",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 6, 6])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, None)],
        [init("pads", [4], np.int64, [1, 2, 1, 2]), init("pad_axes", [2], np.int64, [2, 3]),
         init("rm_axes", [1], np.int64, [1]), init("w", [3, 2, 1, 1])])
    return model(g, opset=21, ir=10)


# ConvTranspose: strides, asymmetric pads, output_padding and dilations; a
# grouped one with auto_pad SAME_UPPER; one with an explicit output_shape, and
# one whose output_shape includes N and C (as ONNX Runtime accepts).
# Weights and bias are parameters.
def conv_transpose():
    nodes = [
        helper.make_node("ConvTranspose", ["x", "up.weight", "up.bias"], ["u"],
                         name="/up/ConvTranspose", kernel_shape=[3, 3], strides=[2, 3],
                         pads=[1, 0, 2, 1], output_padding=[1, 2], dilations=[1, 2]),
        helper.make_node("ConvTranspose", ["x", "up2.weight"], ["u2"],
                         name="/up2/ConvTranspose", group=2, strides=[2, 2],
                         auto_pad="SAME_UPPER"),
        helper.make_node("ConvTranspose", ["x", "up3.weight"], ["u3"],
                         name="/up3/ConvTranspose", strides=[2, 2], output_shape=[10, 14]),
        helper.make_node("ConvTranspose", ["x", "up3.weight"], ["u4"],
                         name="/up4/ConvTranspose", strides=[2, 2],
                         output_shape=[2, 2, 10, 14]),
    ]
    g = helper.make_graph(
        nodes, "conv_transpose",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 5, 7])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["u", "u2", "u3", "u4"]],
        [init("up.weight", [4, 3, 3, 3]), init("up.bias", [3]),
         init("up2.weight", [4, 3, 2, 2]), init("up3.weight", [4, 2, 3, 3])])
    return model(g, opset=17)


# Activations and products: LeakyRelu, Sigmoid, Tanh, a gated Mul, a Mul by
# a per-channel scale (a parameter) and by a scalar (a constant), LogSoftmax.
def activations():
    nodes = [
        helper.make_node("LeakyRelu", ["x"], ["lr"], name="/LeakyRelu", alpha=0.1),
        helper.make_node("Sigmoid", ["lr"], ["sg"], name="/gate/Sigmoid"),
        helper.make_node("Tanh", ["lr"], ["th"], name="/Tanh"),
        helper.make_node("Mul", ["sg", "th"], ["gm"], name="/gate/Mul"),
        helper.make_node("Mul", ["gm", "scale.weight"], ["sc"], name="/scale/Mul"),
        helper.make_node("Mul", ["sc", "half"], ["h"], name="/half/Mul"),
        helper.make_node("LogSoftmax", ["h"], ["y"], name="/LogSoftmax", axis=1),
    ]
    g = helper.make_graph(
        nodes, "activations",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [init("scale.weight", [3, 1, 1]), init("half", [], np.float32, 0.5)])
    return model(g, opset=13)


# AveragePool: ceil_mode (a partial last window), pads with
# count_include_pad, and ceil_mode where the last window would start in the
# end padding (the ONNX spec drops it, libonnx 1.12 does not); MaxPool in
# that last case too.
def pooling():
    nodes = [
        helper.make_node("AveragePool", ["x"], ["ceil"], name="/ceil/AveragePool",
                         kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("AveragePool", ["x"], ["padded"], name="/padded/AveragePool",
                         kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         count_include_pad=1),
        helper.make_node("AveragePool", ["x"], ["dropped"], name="/dropped/AveragePool",
                         kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=1),
        helper.make_node("MaxPool", ["x"], ["max"], name="/max/MaxPool",
                         kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=1),
    ]
    g = helper.make_graph(
        nodes, "pooling",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 9, 10])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
         for n in ["ceil", "padded", "dropped", "max"]])
    return model(g, opset=17)


# Opset 11: Unsqueeze/Squeeze/ReduceSum/ReduceMean axes and Split sizes are
# attributes, Pad's pads and Clip's min/max are inputs (max absent), Dropout's
# ratio is an attribute; Slice with a negative axis and step.
def opset11():
    nodes = [
        helper.make_node("Unsqueeze", ["x"], ["u"], name="/Unsqueeze", axes=[1, -1]),
        helper.make_node("Squeeze", ["u"], ["s"], name="/Squeeze", axes=[1, -1]),
        helper.make_node("Clip", ["s", "lo", ""], ["c"], name="/Clip"),
        helper.make_node("Split", ["c"], ["c0", "c1"], name="/Split", axis=2, split=[2, 4]),
        helper.make_node("Pad", ["c0", "pads", "fill"], ["p"], name="/Pad", mode="constant"),
        helper.make_node("Dropout", ["p"], ["d", "mask"], name="/Dropout", ratio=0.25),
        helper.make_node("Softmax", ["d"], ["sm"], name="/Softmax", axis=1),
        helper.make_node("MatMul", ["sm", "fc.weight"], ["mm"], name="/fc/MatMul"),
        helper.make_node("ReduceSum", ["c1"], ["rs"], name="/ReduceSum", axes=[1], keepdims=0),
        helper.make_node("ReduceMean", ["c1"], ["rm"], name="/ReduceMean", axes=[-1]),
        helper.make_node("Slice", ["c1", "sl_start", "sl_end", "sl_axes", "sl_steps"], ["sl"],
                         name="/Slice"),
    ]
    g = helper.make_graph(
        nodes, "opset11",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["mm", "rs", "rm", "sl"]]
        + [helper.make_tensor_value_info("mask", TensorProto.BOOL, None)],
        [init("lo", [], np.float32, 0.0), init("pads", [6], np.int64, [0, 0, 1, 0, 0, 2]),
         init("fill", [], np.float32, 0.0), init("fc.weight", [5, 3]),
         init("sl_start", [1], np.int64, [-1]), init("sl_end", [1], np.int64, [-5]),
         init("sl_axes", [1], np.int64, [-1]), init("sl_steps", [1], np.int64, [-2])])
    return model(g, opset=11, ir=6)


# Opset 12, PyTorch's older training export: BatchNormalization-9 with its
# five outputs, MaxPool with indices, Dropout-12 with ratio and training_mode
# inputs, attribute axes for Unsqueeze/Squeeze/ReduceSum, Split sizes as an
# attribute, Clip with both bounds, reflect Pad, Constant value_floats.
def opset12():
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["b", "bn.mean_out", "bn.var_out", "bn.saved_mean", "bn.saved_var"],
                         name="/bn/BatchNormalization", epsilon=1e-5, momentum=0.9),
        helper.make_node("MaxPool", ["b"], ["mp", "idx"], name="/pool/MaxPool",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Constant", [], ["bounds"], name="/bounds", value_floats=[0.0, 6.0]),
        helper.make_node("Constant", [], ["lo"], name="/lo", value_float=0.0),
        helper.make_node("Constant", [], ["hi"], name="/hi", value_float=6.0),
        helper.make_node("Clip", ["mp", "lo", "hi"], ["r"], name="/Clip"),
        const("ratio", 0.5, np.float32),
        const("training", True, np.bool_),
        helper.make_node("Dropout", ["r", "ratio", "training"], ["d", "mask"], name="/Dropout"),
        helper.make_node("Pad", ["d", "pads"], ["p"], name="/Pad", mode="reflect"),
        helper.make_node("Split", ["p"], ["s0", "s1"], name="/Split", axis=1, split=[1, 3]),
        helper.make_node("ReduceSum", ["s1"], ["rs"], name="/ReduceSum", axes=[2, 3], keepdims=1),
        helper.make_node("Squeeze", ["rs"], ["sq"], name="/Squeeze", axes=[2, 3]),
        helper.make_node("Unsqueeze", ["sq"], ["us"], name="/Unsqueeze", axes=[0]),
        helper.make_node("Flatten", ["s0"], ["f"], name="/Flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], name="/fc/Gemm",
                         transB=1),
    ]
    g = helper.make_graph(
        nodes, "opset12",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("us", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("idx", TensorProto.INT64, None),
         helper.make_tensor_value_info("bounds", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("bn.saved_var", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, None)],
        [init("conv.weight", [4, 3, 3, 3]), init("bn.weight", [4]), init("bn.bias", [4]),
         init("bn.running_mean", [4]), init("bn.running_var", [4]),
         init("pads", [8], np.int64, [0, 0, 1, 2, 0, 0, 1, 0]),
         init("fc.weight", [2, 25]), init("fc.bias", [2])])
    return model(g, opset=12, ir=7)


def training_info():
    m = cnn()
    algo_nodes = [
        helper.make_node("Gradient", ["x"], ["dW", "dB"], name="grad",
                         domain="ai.onnx.preview.training", xs=["fc.weight", "fc.bias"], y="loss"),
        helper.make_node("Momentum", ["lr", "T", "fc.weight", "fc.bias", "dW", "dB", "v1", "v2"],
                         ["fc.weight_new", "fc.bias_new", "v1_new", "v2_new"], name="momentum",
                         domain="ai.onnx.preview.training", alpha=0.9, beta=1.0,
                         norm_coefficient=1e-4, mode="standard"),
    ]
    algo = helper.make_graph(algo_nodes, "algorithm", [], [],
                             [init("lr", [], np.float32, 0.05), init("T", [], np.int64, 0)])
    ti = m.training_info.add()
    ti.algorithm.CopyFrom(algo)
    for k, v in [("fc.weight", "fc.weight_new"), ("fc.bias", "fc.bias_new")]:
        e = ti.update_binding.add()
        e.key, e.value = k, v
    m.opset_import.append(helper.make_opsetid("ai.onnx.preview.training", 1))
    return m


# Constants: a big Constant node and a big integer initializer become
# resource blobs, small ones dense attributes; a big float initializer at a
# non-trainable position is state, a float scalar a Constant.
def constants():
    big = np.linspace(0, 1, 2048, dtype=np.float32).reshape(2, 1024)
    nodes = [
        helper.make_node("Constant", [], ["table"], name="/table",
                         value=numpy_helper.from_array(big)),
        helper.make_node("Gather", ["table", "ids"], ["rows"], name="/rows", axis=1),
        helper.make_node("Clip", ["rows", "lo", "hi"], ["clipped"], name="/clip"),
        helper.make_node("Div", ["clipped", "half"], ["y"], name="/div"),
    ]
    g = helper.make_graph(
        nodes, "constants", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [init("ids", [1500], np.int64, np.arange(1500) % 1024),
         init("lo", [], np.float32, 0.1), init("hi", [], np.float32, 0.9),
         init("half", [2, 1500], np.float32, np.full((2, 1500), 0.5))])
    return model(g, opset=13)


def external():
    m = cnn()
    for t in m.graph.initializer:
        if t.name in ("conv1.weight", "fc.weight"):
            raw = numpy_helper.to_array(t).tobytes()
            offset = 0 if t.name == "conv1.weight" else 512
            t.ClearField("raw_data")
            t.ClearField("float_data")
            t.data_location = TensorProto.EXTERNAL
            for k, v in [("location", "cnn_weights.bin"), ("offset", str(offset)),
                         ("length", str(len(raw)))]:
                e = t.external_data.add()
                e.key, e.value = k, v
    return m


# Error cases.
def unknown_domain():
    g = helper.make_graph(
        [helper.make_node("Frobnicate", ["x"], ["y"], name="/custom/Frobnicate", domain="my.company")],
        "unknown_domain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return model(g, extra_opsets=[("my.company", 1)])


def conv_transpose_bad_output_shape():
    g = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "up.weight"], ["u"], name="/up/ConvTranspose",
                          strides=[2, 2], output_shape=[1, 10, 14])], "bad_output_shape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 5, 7])],
        [helper.make_tensor_value_info("u", TensorProto.FLOAT, None)],
        [init("up.weight", [4, 2, 3, 3])])
    return model(g, opset=17)


def shape_mismatch():
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="/fc/MatMul")], "mismatch",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [init("w", [5, 4])])
    return model(g)


def shape_unknown():
    g = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="/view/Reshape"),
         helper.make_node("Relu", ["y"], ["z"], name="/relu")], "unknown_shape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    return model(g)


def bad_dtype():
    g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"], name="/id")], "bad_dtype",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [helper.make_tensor("labels", TensorProto.STRING, [2], [b"cat", b"dog"])])
    return model(g)


# An op new in opset 20 that libonnx 1.12 does not know and oasr has no
# shape rule for.
def unknown_new_op():
    g = helper.make_graph(
        [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], name="/grid/AffineGrid")],
        "unknown_new_op",
        [helper.make_tensor_value_info("theta", TensorProto.FLOAT, [2, 2, 3])],
        [helper.make_tensor_value_info("grid", TensorProto.FLOAT, None)],
        [init("size", [4], np.int64, [2, 3, 8, 8])])
    return model(g, opset=20, ir=9)


def relu_model(opset=15, ir=8):
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="/relu")], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return model(g, opset=opset, ir=ir)


if __name__ == "__main__":
    save(cnn(), "cnn.txtpb")
    save(cnn(), "cnn.json", "json")
    save(transformer(), "transformer.txtpb")
    save(new_opsets(), "new_opsets.txtpb")
    save(conv_transpose(), "conv_transpose.txtpb")
    save(activations(), "activations.txtpb")
    save(pooling(), "pooling.txtpb")
    save(opset11(), "opset11.txtpb")
    save(opset12(), "opset12.txtpb")
    save(training_info(), "training_info.txtpb")
    save(external(), "external.txtpb")
    save(constants(), "constants.txtpb")
    save(unknown_domain(), "unknown_domain.txtpb")
    save(shape_mismatch(), "shape_mismatch.txtpb")
    save(conv_transpose_bad_output_shape(), "conv_transpose_bad_output_shape.txtpb")
    save(shape_unknown(), "shape_unknown.txtpb")
    save(bad_dtype(), "bad_dtype.txtpb")
    save(relu_model(), "relu.txtpb")
    save(unknown_new_op(), "unknown_new_op.txtpb")
    save(relu_model(ir=12), "bad_ir.txtpb")
    save(relu_model(opset=9), "old_opset.txtpb")
    save(relu_model(opset=23), "new_opset.txtpb")
