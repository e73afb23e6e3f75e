#!/usr/bin/python3
"""Checks training with gradients sent as bf16/f16 against f32 on the wire.

    check_grad_dtype.py DIGITS_DIR DUMP_DIR [--tol 0.005] [--wires bf16,f16]

DUMP_DIR holds `oasr-run --dump-grads` files (rank 0's) of a two-layer MLP
(fc1, fc2) trained on 2 ranks on the same data, seed and steps: WIRE.json
for WIRE in f32 and each of --wires. For each wire:

* the averaged gradients of the last step are what the wire can carry: a
  16-bit value times 1/2 (2 ranks), so the conversion really happened;
* the weights differ from the f32 run's (the rounding changed something);
* the loss of the final weights over the whole training set is within
  --tol (relative) of the f32 run's.
Prints one line per wire; exits 1 on the first failure.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("digits")
p.add_argument("dumps")
p.add_argument("--tol", type=float, default=0.005)
p.add_argument("--wires", default="bf16,f16")
a = p.parse_args()


def idx(path):
    data = open(path, "rb").read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


x = idx(os.path.join(a.digits, "train-images-idx3-ubyte"))
x = x.reshape(len(x), -1).astype(np.float64) / 255.0
labels = idx(os.path.join(a.digits, "train-labels-idx1-ubyte")).astype(np.int64)


def load(name):
    d = json.load(open(os.path.join(a.dumps, name + ".json")))
    return {k: np.array(v["value"], np.float32) for k, v in d["params"].items()}, \
        {k: np.array(v["grad"], np.float32) for k, v in d["params"].items()}


def loss(w):
    h = np.maximum(x @ w["fc1.weight"].astype(np.float64).reshape(-1, x.shape[1]).T
                   + w["fc1.bias"], 0.0)
    y = h @ w["fc2.weight"].astype(np.float64).reshape(-1, h.shape[1]).T + w["fc2.bias"]
    y -= y.max(axis=1, keepdims=True)
    logp = y - np.log(np.exp(y).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(labels)), labels].mean())


def carried(wire, g):
    """True when 2 * g is exactly a `wire` value for every element."""
    g2 = (g * np.float32(2)).astype(np.float32)
    if wire == "bf16":
        return bool(np.all((g2.view(np.uint32) & 0xFFFF) == 0))
    return bool(np.all(g2.astype(np.float16).astype(np.float32) == g2))


base, _ = load("f32")
base_loss = loss(base)
print(f"f32: training-set loss {base_loss:.6f}")
for wire in a.wires.split(","):
    w0, g0 = load(wire)
    for k, g in g0.items():
        if not carried(wire, g):
            sys.exit(f"{wire}: the averaged gradient of {k} is not a {wire} "
                     "value / 2: the gradients did not travel as " + wire)
    if all(np.array_equal(w0[k], base[k]) for k in w0):
        sys.exit(f"{wire}: the weights equal the f32 run's bit for bit")
    l = loss(w0)
    rel = abs(l - base_loss) / base_loss
    verdict = "within" if rel <= a.tol else "NOT within"
    print(f"{wire}: training-set loss {l:.6f}, {100 * rel:.3f}% from f32 "
          f"({verdict} {100 * a.tol:g}%), gradients carried as {wire}")
    if rel > a.tol:
        sys.exit(1)
