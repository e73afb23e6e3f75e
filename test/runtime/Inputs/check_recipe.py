#!/usr/bin/python3
"""Checks of one recipe piece on oasr-run's --dump-grads files (JSON).

check_recipe.py decay DUMP MODEL.onnx --lr LR --wd WD [--exclude 1d|none]
    One SGD step with coupled weight decay from the ONNX file's initial
    weights: value = w0 - LR (grad + WD w0) for every parameter that
    decays, value = w0 - LR grad for those excluded (rank <= 1 with 1d),
    within 1e-6 of the tensor's largest magnitude.
check_recipe.py clip PLAIN CLIPPED METRICS --max-norm C
    The clipped run's gradients are the plain run's scaled by
    C / (norm + 1e-6), norm their global L2 norm, which the metrics file
    reports; both within 1e-6 relative.
check_recipe.py steps METRICS
    The metrics file has each step once, in order.
"""
import argparse
import json
import sys

import numpy as np


def dump(path):
    d = json.load(open(path))
    return {k: (np.array(v["value"], np.float64), np.array(v["grad"], np.float64),
                v["shape"]) for k, v in d["params"].items()}


p = argparse.ArgumentParser()
sub = p.add_subparsers(dest="cmd", required=True)
d = sub.add_parser("decay")
d.add_argument("dump")
d.add_argument("model")
d.add_argument("--lr", type=float, required=True)
d.add_argument("--wd", type=float, required=True)
d.add_argument("--exclude", default="1d")
c = sub.add_parser("clip")
c.add_argument("plain")
c.add_argument("clipped")
c.add_argument("metrics")
c.add_argument("--max-norm", type=float, required=True)
s = sub.add_parser("steps")
s.add_argument("metrics")
t = sub.add_parser("interval")
t.add_argument("metrics")
t.add_argument("--global-batch", type=int, required=True)
a = p.parse_args()

if a.cmd == "decay":
    import onnx
    from onnx import numpy_helper
    w0 = {t.name: numpy_helper.to_array(t).astype(np.float64).ravel()
          for t in onnx.load(a.model).graph.initializer}
    decayed = excluded = 0
    for name, (value, grad, shape) in sorted(dump(a.dump).items()):
        decays = a.exclude == "none" or len(shape) > 1
        want = w0[name] - a.lr * (grad + (a.wd * w0[name] if decays else 0))
        err = np.abs(value - want).max() / max(np.abs(want).max(), 1e-30)
        if err > 1e-6:
            sys.exit(f"{name}: {'decayed' if decays else 'undecayed'} update "
                     f"off by {err:.2e} of its largest value")
        decayed += decays
        excluded += not decays
    print(f"decay: {decayed} parameters decayed, {excluded} excluded")
elif a.cmd == "clip":
    plain, clipped = dump(a.plain), dump(a.clipped)
    norm = np.sqrt(sum((g ** 2).sum() for _, g, _ in plain.values()))
    reported = [json.loads(l)["grad_norm"] for l in open(a.metrics) if l.strip()][-1]
    if abs(reported - norm) > 1e-6 * norm:
        sys.exit(f"metrics grad_norm {reported} against the gradients' {norm}")
    coef = min(1.0, a.max_norm / (norm + 1e-6))
    for name in plain:
        want = plain[name][1] * coef
        err = np.abs(clipped[name][1] - want).max() / max(np.abs(want).max(), 1e-30)
        if err > 1e-6:
            sys.exit(f"{name}: clipped gradient off by {err:.2e}")
    print(f"clip: norm {norm:.4f} scaled by {coef:.4f} in every parameter")
elif a.cmd == "interval":
    # samples_per_s counts every rank's samples over the interval and
    # step_ms is the interval over its steps: their product is the global
    # batch, whatever the timings.
    for l in (json.loads(l) for l in open(a.metrics) if l.strip()):
        samples = l["samples_per_s"] * l["step_ms"] * 1e-3
        if abs(samples - a.global_batch) > 1e-6 * a.global_batch:
            sys.exit(f"step {l['step']}: step_ms x samples_per_s is {samples} "
                     f"samples a step, not {a.global_batch}")
    print(f"interval: {a.global_batch} samples a step")
else:
    steps = [json.loads(l)["step"] for l in open(a.metrics) if l.strip()]
    if steps != list(range(1, len(steps) + 1)):
        sys.exit(f"steps {steps}")
    print(f"metrics: steps 1 to {len(steps)}, each once")
