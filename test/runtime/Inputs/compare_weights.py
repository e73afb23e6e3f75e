#!/usr/bin/env python3
"""Compares the parameter (and BN state) values of two `oasr-run --dump-grads` files.

    compare_weights.py A.json B.json [--rtol R]

With R = 0 (default) every value must be bitwise identical. Prints the worst
parameter and exits 1 on a mismatch.
"""
import argparse
import json
import struct
import sys

p = argparse.ArgumentParser()
p.add_argument("a")
p.add_argument("b")
p.add_argument("--rtol", type=float, default=0.0)
p.add_argument("--key", default="value")
a = p.parse_args()
DA, DB = json.load(open(a.a)), json.load(open(a.b))
A, B = dict(DA["params"]), dict(DB["params"])
# BN running statistics (state) must agree too.
for k, v in DA.get("state", {}).items():
    A["state:" + k] = {a.key: v["value"]}
for k, v in DB.get("state", {}).items():
    B["state:" + k] = {a.key: v["value"]}
if sorted(A) != sorted(B):
    sys.exit(f"parameter names differ: {sorted(A)} vs {sorted(B)}")
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
worst, where = 0.0, ""
for name in sorted(A):
    va, vb = A[name][a.key], B[name][a.key]
    if len(va) != len(vb) or not va:
        sys.exit(f"{name}: {len(va)} vs {len(vb)} values")
    scale = max(max(abs(x) for x in va), 1e-30)
    for x, y in zip(va, vb):
        if a.rtol == 0.0:
            if f32(x) != f32(y):
                sys.exit(f"{name}: {x!r} != {y!r} (not bitwise identical)")
        else:
            d = abs(x - y) / max(abs(x), abs(y), scale * 1e-3)
            if d > worst:
                worst, where = d, name
if a.rtol and worst > a.rtol:
    sys.exit(f"{where}: relative difference {worst:.3g} > {a.rtol}")
print(f"identical ({len(DA['params'])} parameters, {len(A) - len(DA['params'])} state" + (f", max rel diff {worst:.3g})" if a.rtol else ", bitwise)"))
