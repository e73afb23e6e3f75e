"""Models for export-python.test and inference-graph.test: factories that
python3 -m oasr.export names as FILE.py:FUNCTION, and a writer of
inference-style exports (`python3 export_models.py KIND OUT.onnx`)."""
import sys

import torch
from torch import nn


def cnn_bn():
    """Conv, BatchNorm, ReLU, pooling, Dropout and a classifier."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Dropout(0.2), nn.Linear(8 * 4 * 4, 10))


def cnn_plain():
    """A convolutional network without normalisation (not an inference
    graph, whatever exporter wrote it)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                         nn.Flatten(), nn.Linear(8 * 8 * 8, 10))


class Tokens(nn.Module):
    """Token ids -> a Transformer layer with dropout (also in the attention
    weights) -> mean pooling -> 3 classes."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1,
                                                batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, ids):
        return self.head(self.layer(self.emb(ids)).mean(1))


def tokens():
    torch.manual_seed(0)
    return Tokens()


def not_a_module():
    return 3


def per_token_logits():
    return nn.Embedding(100, 8)


def feature_map():
    """Float input [batch, 3, 8] to [batch, 5, 8]: no logits of either kind."""
    torch.manual_seed(0)
    return nn.Conv1d(3, 5, 1)


def write(kind, path):
    """Writes an export as PyTorch users make one without oasr.export."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    if kind == "eval":  # TorchScript, eval mode: BatchNorm fused into Conv
        m = cnn_bn().eval()
        torch.onnx.export(m, torch.randn(2, 3, 8, 8), path, opset_version=13)
        return
    if kind == "train-plain":  # TorchScript, training mode, no BatchNorm
        torch.onnx.export(cnn_plain().train(), torch.randn(2, 3, 8, 8), path,
                          opset_version=13,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
        return
    # What PyTorch's dynamo exporter (torch >= 2.9's default) writes for
    # cnn_bn: producer pytorch, IR 10, opset 20, BatchNorm folded away.
    rng = torch.Generator().manual_seed(0)
    w = numpy_helper.from_array(torch.randn(8, 3, 3, 3, generator=rng).numpy(),
                                "0.weight")
    b = numpy_helper.from_array(torch.zeros(8).numpy(), "0.bias")
    fw = numpy_helper.from_array(torch.randn(10, 128, generator=rng).numpy(),
                                 "6.weight")
    fb = numpy_helper.from_array(torch.zeros(10).numpy(), "6.bias")
    shape = numpy_helper.from_array(torch.tensor([2, 128]).numpy(), "shape")
    nodes = [helper.make_node("Conv", ["x", "0.weight", "0.bias"], ["c"],
                              pads=[1, 1, 1, 1], name="node_conv2d"),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Reshape", ["p", "shape"], ["f"]),
             helper.make_node("Gemm", ["f", "6.weight", "6.bias"], ["logits"],
                              transB=1)]
    if kind == "dynamo-mlp":  # no convolution: nothing was folded
        nodes = [helper.make_node("Reshape", ["x", "shape2"], ["f"]),
                 helper.make_node("Gemm", ["f", "w", "6.bias"], ["logits"],
                                  transB=1)]
        fw = numpy_helper.from_array(torch.randn(10, 192, generator=rng).numpy(),
                                     "w")
        shape = numpy_helper.from_array(torch.tensor([2, 192]).numpy(),
                                        "shape2")
        w = b = None
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 10])],
        [t for t in (w, b, fw, fb, shape) if t is not None])
    model = helper.make_model(graph, producer_name="pytorch",
                              producer_version="2.15.0",
                              opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    onnx.save(model, path)


if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2])
