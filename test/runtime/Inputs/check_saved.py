#!/usr/bin/env python3
"""Checks an `oasr-run --save` model: ONNX's checker accepts it, the graph is
the original's, and every trained initializer equals oasr-run's final
weights (from --dump-grads) and differs from the original.

    check_saved.py ORIGINAL.onnx SAVED.onnx DUMP.json
"""
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper

orig, saved, dump = onnx.load(sys.argv[1]), onnx.load(sys.argv[2]), json.load(open(sys.argv[3]))
onnx.checker.check_model(saved)
if [n.op_type for n in orig.graph.node] != [n.op_type for n in saved.graph.node]:
    sys.exit("the saved graph differs from the original")
before = {i.name: numpy_helper.to_array(i) for i in orig.graph.initializer}
after = {i.name: numpy_helper.to_array(i) for i in saved.graph.initializer}
expected = {k: v["value"] for k, v in dump["params"].items()}
expected.update({k: v["value"] for k, v in dump.get("state", {}).items()})
changed = 0
for name, values in expected.items():
    got = after[name].reshape(-1)
    if not np.array_equal(got, np.asarray(values, dtype=np.float32)):
        sys.exit(f"{name}: saved values are not oasr-run's final weights")
    changed += not np.array_equal(got, before[name].reshape(-1))
print(f"saved model ok: {len(expected)} initializers match oasr-run, {changed} changed by training")
