#!/usr/bin/python3
"""PyTorch references for the oasr runtime's end-to-end gradient tests.

Run with Debian's interpreter (python3-torch, python3-onnx):

  torch_reference.py export {mlp,cnn} OUT.onnx [--batch N] [--seed S]
      Builds the small model with seeded weights and exports it to ONNX the
      way scripts/export_models.py does (training mode, no constant folding).
  torch_reference.py batch DIR --model {mlp,cnn} [--batch N] [--seed S]
      Writes one batch as MNIST-layout IDX files (float32 images, ubyte
      labels) for `oasr-run --data=mnist:DIR`.
  torch_reference.py check DUMP.json --model {mlp,cnn} --data DIR
                     [--seed S | --weights-from-dump] [--rtol 1e-4]
                     [--label-smoothing E]
      Recomputes the loss and every parameter gradient of the batch in DIR
      with PyTorch on the same weights (the seeded model, or the values in
      the dump), compares with `oasr-run --steps=1 --lr=0 --dump-grads=DUMP`
      and exits 1 if any parameter differs by more than rtol relative
      (max |g_oasr - g_torch| / max |g_torch| per parameter).

The mean softmax cross-entropy over the batch is invariant to the order in
which oasr-run's loader visits the batch's samples.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

# oasr's data writers (python/oasr/data.py), found from this checkout.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "python"))
from oasr.data import write_idx  # noqa: E402

SHAPES = {"mlp": (64,), "cnn": (3, 8, 8)}
CLASSES = 10


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 32)
        self.fc2 = torch.nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class CNN(torch.nn.Module):
    """conv -> BN -> relu -> maxpool -> conv (+bias) -> relu -> avgpool ->
    flatten -> gemm: every op family of the CNN test. (A bias right before
    BN has a zero gradient, so the biased conv is the one without BN.)"""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1, bias=True)
        self.fc = torch.nn.Linear(16 * 2 * 2, CLASSES)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.nn.functional.avg_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def build(name, seed):
    torch.manual_seed(seed)
    model = {"mlp": MLP, "cnn": CNN}[name]()
    # Non-trivial BN affine parameters so their gradients are exercised.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    code, rank = data[2], data[3]
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    dtype = ">f4" if code == 0x0D else np.uint8
    return np.frombuffer(data[4 + 4 * rank:], dtype=dtype).reshape(dims)


def torchscript_exporter():
    """torch.onnx.export's arguments for the TorchScript exporter (oasr's
    export's: torch 2.9 and later export through dynamo by default)."""
    from oasr._export import exporter_args
    return exporter_args(torch)


def cmd_export(a):
    model = build(a.model, a.seed)
    model.train()
    x = torch.randn(a.batch, *SHAPES[a.model])
    torch.onnx.export(model, x, a.out, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17,
                      **torchscript_exporter(),
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}})
    print(f"wrote {a.out}")


def cmd_batch(a):
    rng = np.random.RandomState(a.seed)
    x = rng.standard_normal((a.batch,) + SHAPES[a.model]).astype(np.float32)
    y = rng.randint(0, CLASSES, size=a.batch)
    os.makedirs(a.dir, exist_ok=True)
    write_idx(os.path.join(a.dir, "train-images-idx3-ubyte"), x, 0x0D)
    write_idx(os.path.join(a.dir, "train-labels-idx1-ubyte"), y, 0x08)
    print(f"{a.dir}: batch of {a.batch} {a.model} samples")


def cmd_check(a):
    dump = json.load(open(a.dump))
    params = dump["params"]
    model = build(a.model, a.seed)
    model.train()
    named = dict(model.named_parameters())
    missing = sorted(set(named) - set(params))
    if missing:
        sys.exit(f"parameters missing from {a.dump}: {missing}")
    with torch.no_grad():
        for name, p in named.items():
            value = torch.tensor(params[name]["value"], dtype=torch.float32).reshape(p.shape)
            if a.weights_from_dump:
                p.copy_(value)
            elif not torch.equal(value, p):
                diff = (value - p).abs().max().item()
                sys.exit(f"{name}: oasr-run's weights differ from the model's "
                         f"(max abs diff {diff:.3g}); were they loaded from the ONNX file?")
    x = torch.from_numpy(read_idx(os.path.join(a.data, "train-images-idx3-ubyte")).astype(np.float32))
    y = torch.from_numpy(read_idx(os.path.join(a.data, "train-labels-idx1-ubyte")).astype(np.int64))
    x = x.reshape((x.shape[0],) + SHAPES[a.model])
    loss = torch.nn.functional.cross_entropy(model(x), y,
                                             label_smoothing=a.label_smoothing)
    loss.backward()
    worst = 0.0
    ok = True
    lrel = abs(dump["loss"] - loss.item()) / max(abs(loss.item()), 1e-12)
    print(f"loss: oasr {dump['loss']:.7g} torch {loss.item():.7g} rel {lrel:.2e}")
    if lrel > a.rtol:
        ok = False
    for name, p in named.items():
        got = np.asarray(params[name]["grad"], dtype=np.float64)
        want = p.grad.detach().double().numpy().reshape(-1)
        if got.shape != want.shape:
            print(f"{name}: {got.size} gradient values, expected {want.size}")
            ok = False
            continue
        rel = np.abs(got - want).max() / max(np.abs(want).max(), 1e-12)
        worst = max(worst, rel)
        status = "ok" if rel <= a.rtol else "MISMATCH"
        print(f"{name}: max rel err {rel:.2e} {status}")
        ok &= rel <= a.rtol
    print(f"{'PASS' if ok else 'FAIL'}: {len(named)} parameters, worst {worst:.2e} (rtol {a.rtol:g})")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("model", choices=sorted(SHAPES))
    e.add_argument("out")
    e.add_argument("--batch", type=int, default=8)
    e.add_argument("--seed", type=int, default=0)
    b = sub.add_parser("batch")
    b.add_argument("dir")
    b.add_argument("--model", choices=sorted(SHAPES), required=True)
    b.add_argument("--batch", type=int, default=8)
    b.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("check")
    c.add_argument("dump")
    c.add_argument("--model", choices=sorted(SHAPES), required=True)
    c.add_argument("--data", required=True)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--weights-from-dump", action="store_true")
    c.add_argument("--rtol", type=float, default=1e-4)
    c.add_argument("--label-smoothing", type=float, default=0.0)
    a = p.parse_args()
    return {"export": cmd_export, "batch": cmd_batch, "check": cmd_check}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
