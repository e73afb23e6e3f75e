#!/usr/bin/env python3
"""Compares the oasr.param arguments of an imported module (read from stdin
or a file) with PyTorch's trainable parameters (a manifest written by
scripts/export_models.py): same count, same number of elements, same bytes,
same names. Prints one summary line; exits non-zero on a mismatch."""

import json
import re
import sys

manifest = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read() if len(sys.argv) > 2 else sys.stdin.read()
sig = text[text.index("func.func @forward("):]
sig = sig[: sig.index(") -> (")]

SIZES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8}
params = []
state = 0
for m in re.finditer(r"tensor<([0-9x]*?)x?(f32|f16|bf16|f64)> \{oasr\.(param|state) = \"([^\"]+)\"\}", sig):
    dims, elem, kind, name = m.groups()
    numel = 1
    for d in filter(None, dims.split("x")):
        numel *= int(d)
    if kind == "param":
        params.append((name, numel, numel * SIZES[elem]))
    else:
        state += 1

numel = sum(p[1] for p in params)
nbytes = sum(p[2] for p in params)
names_ok = sorted(p[0] for p in params) == sorted(manifest["names"])
ok = (len(params) == manifest["params"] and numel == manifest["numel"]
      and nbytes == manifest["bytes"] and names_ok)
print(f"{manifest['model']}: {'OK' if ok else 'MISMATCH'} params {len(params)}/{manifest['params']} "
      f"numel {numel}/{manifest['numel']} bytes {nbytes}/{manifest['bytes']} "
      f"names {'match' if names_ok else 'differ'} state {state}")
if not names_ok:
    mine = set(p[0] for p in params)
    theirs = set(manifest["names"])
    print("  only in IR:", sorted(mine - theirs)[:10])
    print("  only in PyTorch:", sorted(theirs - mine)[:10])
sys.exit(0 if ok else 1)
