"""oasr's Python side: export a PyTorch model for oasr's training compiler.

    from oasr import export
    export(model, example_inputs, "m.onnx")

    load_weights(model, "ckpt/step-00000100")   # the trained weights back

or, from a shell, ``python3 -m oasr.export model.py:make_model --input
8x3x224x224 -o m.onnx`` (docs/pytorch.md).
"""
from ._export import ExportError, Exported, export
from .weights import WeightsError, load_weights, read_weights

__all__ = ["export", "Exported", "ExportError", "load_weights", "read_weights",
           "WeightsError"]
