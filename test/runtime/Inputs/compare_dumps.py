#!/usr/bin/python3
"""compare_dumps.py DUMP.npz DUMP.json: the .npz gradient dump holds exactly
the JSON dump's arrays (same names, shapes and float32 values, bitwise) and
is a well-formed zip (every member's CRC checks). Prints one line per kind
and 'same' at the end; exits 1 on any difference."""
import json
import sys
import zipfile

import numpy as np

npz_path, json_path = sys.argv[1], sys.argv[2]
bad = zipfile.ZipFile(npz_path).testzip()
if bad is not None:
    sys.exit(f"{npz_path}: member {bad} fails its CRC")
z = np.load(npz_path)
j = json.load(open(json_path))
want = {"loss": np.float32(j["loss"])}
for name, p in j["params"].items():
    shape = tuple(p["shape"])
    want[name + ".value"] = np.array(p["value"], np.float32).reshape(shape)
    if p["grad"]:
        want[name + ".grad"] = np.array(p["grad"], np.float32).reshape(shape)
for name, s in j["state"].items():
    want[name + ".state"] = np.array(s["value"], np.float32)
if sorted(z.files) != sorted(want):
    sys.exit(f"keys differ: {sorted(set(z.files) ^ set(want))}")
for k, v in want.items():
    got = z[k]
    if got.dtype != np.float32 or got.size != v.size or \
            (got.shape != v.shape and not k.endswith(".state")) or \
            not np.array_equal(got.ravel(), v.ravel()):
        sys.exit(f"{k}: differs ({got.dtype} {got.shape} vs {v.shape})")
kinds = {}
for k in z.files:
    kind = k.rsplit(".", 1)[-1]
    kinds[kind] = kinds.get(kind, 0) + 1
for kind in sorted(kinds):
    print(f"{kind}: {kinds[kind]}")
print("same")
