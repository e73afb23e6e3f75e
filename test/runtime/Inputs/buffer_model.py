#!/usr/bin/python3
"""Exports a small attention classifier that keeps two buffers, as
nanoGPT-style models do (register_buffer): a causal mask of 0 and -inf
added to the attention scores, and a fixed rotary-like table `rope_cos`
multiplied into the input. Both reach the loss through ops that also carry
weights (Add, Mul with an activation), so only a record or their values
tell them from parameters.

    buffer_model.py OUT.onnx [--record] [--seed S]

--record exports through oasr.export (which writes the parameters' names
into the file); without it, plain torch.onnx.export in training mode.
Input [batch, 8, 16] floats, 4 classes.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
from torch_reference import torchscript_exporter  # noqa: E402

T, D, C = 8, 16, 4


class MaskedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.full((T, T), -math.inf).triu(1))
        pos = torch.arange(T, dtype=torch.float32)[:, None]
        freq = torch.arange(D, dtype=torch.float32)[None, :]
        self.register_buffer("rope_cos", torch.cos(pos * freq * 0.1))
        self.q = nn.Linear(D, D)
        self.k = nn.Linear(D, D)
        self.v = nn.Linear(D, D)
        self.head = nn.Linear(D, C)

    def forward(self, x):
        x = x * self.rope_cos
        att = self.q(x) @ self.k(x).transpose(1, 2) / math.sqrt(D) + self.mask
        y = torch.softmax(att, dim=-1) @ self.v(x)
        return self.head(y.mean(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--record", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = MaskedAttention()
    x = torch.randn(4, T, D)
    if a.record:
        from oasr import export
        export(model, x, a.out, check=False)
    else:
        torch.onnx.export(model, x, a.out,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=17,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"},
                                        "logits": {0: "batch"}},
                          **torchscript_exporter())
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
