#!/usr/bin/env python3
"""ONNX Runtime checkpoints for the training model in this directory, written
without onnxruntime: JSON in the tables of lib/Import/ORTCheckpoint.fbs,
turned into the FlatBuffer by flatc. One directory per case under OUT_DIR,
each holding the model as generate_artifacts writes it (the parameters graph
inputs without values), optimizer_model.onnx and a `checkpoint`:

  good           the folded values (training_model.ckpt.txtpb's) as the
                 checkpoint's trainable tensors; also folded.onnx, the
                 folded model, to compare with
  adam           plus an optimizer group (step 3, momentum0/momentum1)
  adam_partial   an optimizer group without momentum1 for fc.bias
  truncated      the good checkpoint cut in half
  garbage        bytes that are no FlatBuffer
  missing        no checkpoint at all
  extra_name     one tensor more, 'mystery.weight', no graph input
  missing_param  no fc.bias
  bad_shape      fc.weight with its dims swapped (the same bytes)
  bad_dtype      fc.bias as DOUBLE
  newer          format version 3

Usage: checkpoints.py OUT_DIR FLATC SCHEMA"""

import copy
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from google.protobuf import text_format
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
BUFFER = "_grad.accumulation.buffer"


def load(name):
    model = onnx.ModelProto()
    with open(os.path.join(HERE, name)) as f:
        text_format.Parse(f.read(), model)
    return model


def tensor(name, array, data_type=1):
    return {"name": name, "dims": list(array.shape), "data_type": data_type,
            "raw_data": list(array.tobytes())}


def main(out, flatc, schema):
    folded = load("training_model.ckpt.txtpb")
    optimizer = load("optimizer_model.txtpb")
    inputs = {i.name for i in folded.graph.input}
    values = {t.name: numpy_helper.to_array(t)
              for t in folded.graph.initializer if t.name in inputs}
    trainable = [n for n in values if n + BUFFER in inputs]
    raw = copy.deepcopy(folded)
    keep = [t for t in raw.graph.initializer if t.name not in values]
    del raw.graph.initializer[:]
    raw.graph.initializer.extend(keep)

    def good():
        return {"version": 2, "module_state": {
            "requires_grad_params": [tensor(n, values[n]) for n in trainable],
            "frozen_params": [tensor(n, values[n]) for n in values
                              if n not in trainable]}}

    def adam(skip=None):
        c = good()
        states = []
        for k, n in enumerate(trainable):
            moments = [tensor("momentum0", np.full(values[n].shape, 0.01 * (k + 1), np.float32))]
            if n != skip:
                moments.append(tensor("momentum1", np.full(values[n].shape, 1e-4 * (k + 1), np.float32)))
            states.append({"param_name": n, "momentums": moments})
        c["optimizer_groups"] = [{"group_name": "group0", "step": 3,
                                  "initial_learning_rate": 0.001,
                                  "optimizer_states": states}]
        return c

    def params(c):
        return c["module_state"]["requires_grad_params"]

    def find(c, name):
        return next(t for t in params(c) if t["name"] == name)

    cases = {"good": good(), "adam": adam(), "adam_partial": adam("fc.bias"),
             "truncated": good(), "garbage": None, "missing": None}
    c = good()
    params(c).append(tensor("mystery.weight", np.zeros(2, np.float32)))
    cases["extra_name"] = c
    c = good()
    params(c).remove(find(c, "fc.bias"))
    cases["missing_param"] = c
    c = good()
    find(c, "fc.weight")["dims"].reverse()
    cases["bad_shape"] = c
    c = good()
    find(c, "fc.bias").update(tensor("fc.bias", values["fc.bias"].astype(np.float64), 11))
    cases["bad_dtype"] = c
    c = good()
    c["version"] = 3
    cases["newer"] = c

    for name, content in cases.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        onnx.save(raw, os.path.join(d, "training_model.onnx"))
        onnx.save(optimizer, os.path.join(d, "optimizer_model.onnx"))
        ckpt = os.path.join(d, "checkpoint")
        if name == "garbage":
            with open(ckpt, "wb") as f:
                f.write(b"not a flatbuffer, not a checkpoint" * 4)
        if content is None:
            continue
        with open(os.path.join(d, "checkpoint.json"), "w") as f:
            json.dump(content, f)
        subprocess.run([flatc, "-b", "-o", d, schema,
                        os.path.join(d, "checkpoint.json")], check=True)
        os.replace(os.path.join(d, "checkpoint.bin"), ckpt)
        if name == "truncated":
            data = open(ckpt, "rb").read()
            open(ckpt, "wb").write(data[:len(data) // 2])
    onnx.save(folded, os.path.join(out, "good", "folded.onnx"))


if __name__ == "__main__":
    main(*sys.argv[1:])
