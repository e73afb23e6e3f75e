#!/usr/bin/python3
"""A small CNN for the 8x8 digits that behaves differently in training and
in eval mode: BatchNorm (batch statistics vs running statistics) and
Dropout. Exported through oasr.export, so its parameter and buffer names
are PyTorch's.

    eval_model.py export OUT.onnx
    eval_model.py check WEIGHTS.safetensors DIGITS_DIR METRICS.jsonl --batch N

`check` loads oasr-run's --save file with load_state_dict(strict=True),
evaluates the module in eval mode on the first full batches of the test
split (the samples a 1-rank oasr-run evaluates) and compares its loss and
accuracy with the last evaluation line of oasr-run's --metrics file. The loss is a mean of f32 values over
the same samples; the two sides' kernels differ only in rounding, so they
agree to 1e-4 relative (well above f32's accumulated rounding on a 300-term
mean of O(1) values, ~300 u = 2e-5). Training-mode statistics would differ
by far more: the check also prints how far that is.
"""
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "python"))


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(6 * 8 * 8, 10)

    def forward(self, x):
        x = self.drop(torch.relu(self.bn(self.conv(x))))
        return self.fc(x.flatten(1))


def read_idx(path):
    with open(path, "rb") as f:
        _, _, _, ndim = struct.unpack(">BBBB", f.read(4))
        shape = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(shape)


def last_eval(metrics):
    lines = [json.loads(l) for l in open(metrics) if l.strip()]
    evals = [l for l in lines if "eval_loss" in l]
    if not evals:
        sys.exit(f"{metrics}: no evaluation line")
    return evals[-1]["eval_loss"], 100 * evals[-1]["eval_accuracy"]


def check(weights, digits, metrics, batch):
    from safetensors.torch import load_file
    torch.manual_seed(3)  # other weights than the trained ones
    model = DigitsCNN()
    model.load_state_dict(load_file(weights), strict=True)
    images = read_idx(os.path.join(digits, "t10k-images-idx3-ubyte"))
    labels = read_idx(os.path.join(digits, "t10k-labels-idx1-ubyte"))
    n = len(labels) // batch * batch
    x = torch.tensor(images[:n], dtype=torch.float32).reshape(n, 1, 8, 8) / 255
    y = torch.tensor(labels[:n], dtype=torch.int64)
    oasr_loss, oasr_acc = last_eval(metrics)
    with torch.no_grad():
        model.eval()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y).item()
        acc = 100 * (logits.argmax(1) == y).float().mean().item()
        model.train()
        torch.manual_seed(0)
        train_loss = nn.functional.cross_entropy(model(x), y).item()
    rel = abs(loss - oasr_loss) / abs(loss)
    if rel > 1e-4:
        sys.exit(f"eval loss: oasr {oasr_loss}, PyTorch {loss:.6f} "
                 f"({rel:.2e} relative)")
    if abs(acc - oasr_acc) > 100 / n:
        sys.exit(f"eval accuracy: oasr {oasr_acc}%, PyTorch {acc:.2f}%")
    far = abs(train_loss - loss) / abs(loss)
    if far < 10 * rel + 1e-3:
        sys.exit(f"training mode gives {train_loss:.6f}, too close to eval "
                 f"mode's {loss:.6f} for this check to tell them apart")
    print(f"eval mode matches PyTorch's model.eval() on {n} samples "
          f"(loss within {max(rel, 1e-9):.1e}); training mode is "
          f"{far:.1e} away")


def main():
    if sys.argv[1] == "export":
        from oasr import export
        torch.manual_seed(0)
        export(DigitsCNN(), torch.rand(8, 1, 8, 8), sys.argv[2], check=False)
        print(f"wrote {sys.argv[2]}")
    else:
        batch = int(sys.argv[sys.argv.index("--batch") + 1])
        check(sys.argv[2], sys.argv[3], sys.argv[4], batch)


if __name__ == "__main__":
    main()
