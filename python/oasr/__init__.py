"""oasr's Python side: export a PyTorch model for oasr's training compiler.

    from oasr import export
    export(model, example_inputs, "m.onnx")

or, from a shell, ``python3 -m oasr.export model.py:make_model --input
8x3x224x224 -o m.onnx`` (docs/pytorch.md).
"""
from ._export import ExportError, Exported, export

__all__ = ["export", "Exported", "ExportError"]
