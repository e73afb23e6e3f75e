#!/usr/bin/python3
"""ONNX's own training optimizers (ai.onnx.preview.training Momentum, Adagrad,
Adam) end to end: a model carrying TrainingInfoProto trains in oasr-run with
that optimizer and its hyper-parameters, and the weights equal ONNX's
reference update rules applied to PyTorch's gradients.

  onnx_optimizers.py add MODEL.onnx OUT.onnx --optimizer NAME [--update-count T]
      Adds a TrainingInfoProto to MODEL (exported by torch_reference.py):
      a Gradient node over every float initializer, the optimizer node with
      non-default hyper-parameters, its learning rate and update count T
      (default 0), zero optimizer state initializers and the update_binding
      of parameters, state and counter.
  onnx_optimizers.py check MODEL.onnx TRAINED.onnx --data DIR --steps N
                     --optimizer NAME [--model mlp] [--rtol R]
      Replays N steps on the batch in DIR: PyTorch's gradients of the mean
      cross-entropy, then ONNX's reference rules (onnx.backend.test.case.node:
      apply_momentum, apply_nesterov, apply_adagrad, apply_adam) with the
      update count T = T0, T0 + 1, ... from MODEL's T; compares with
      TRAINED's initializers.

NAME: momentum (standard, alpha 0.8, beta 0.7, norm_coefficient 1e-3),
nesterov (alpha 0.9, beta 1, norm_coefficient 0), adagrad (decay_factor 0.1,
epsilon 1e-5, norm_coefficient 1e-3), adam (alpha 0.85, beta 0.99, epsilon
1e-4, norm_coefficient 1e-3, norm_coefficient_post 1e-2).
"""
import argparse
import os
import sys

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper
from onnx.backend.test.case.node.adagrad import apply_adagrad
from onnx.backend.test.case.node.adam import apply_adam
from onnx.backend.test.case.node.momentum import apply_momentum, apply_nesterov

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import torch_reference  # noqa: E402

LR = 0.05
DOMAIN = "ai.onnx.preview.training"
SETTINGS = {
    "momentum": ("Momentum", dict(alpha=0.8, beta=0.7, mode="standard",
                                  norm_coefficient=1e-3), 1),
    "nesterov": ("Momentum", dict(alpha=0.9, beta=1.0, mode="nesterov",
                                  norm_coefficient=0.0), 1),
    "adagrad": ("Adagrad", dict(decay_factor=0.1, epsilon=1e-5,
                                norm_coefficient=1e-3), 1),
    "adam": ("Adam", dict(alpha=0.85, beta=0.99, epsilon=1e-4,
                          norm_coefficient=1e-3, norm_coefficient_post=1e-2), 2),
}


def trained_names(model):
    return [t.name for t in model.graph.initializer
            if t.data_type == onnx.TensorProto.FLOAT]


def cmd_add(a):
    model = onnx.load(a.model)
    op, attrs, slots = SETTINGS[a.optimizer]
    names = trained_names(model)
    shapes = {t.name: list(t.dims) for t in model.graph.initializer}
    grads = [n + ".grad" for n in names]
    state = [[f"{n}.{s}" for n in names] for s in "VH"[:slots]]
    for group in state:
        for n, s in zip(names, group):
            model.graph.initializer.append(
                numpy_helper.from_array(np.zeros(shapes[n], np.float32), s))
    ti = model.training_info.add()
    alg = ti.algorithm
    alg.name = "training_algorithm"
    alg.node.append(helper.make_node("Gradient", ["input"], grads, domain=DOMAIN,
                                     name="grad", xs=names, y="loss"))
    outs = [n + ".new" for n in names] + [s + ".new" for g in state for s in g]
    alg.node.append(helper.make_node(
        op, ["R", "T"] + names + grads + [s for g in state for s in g], outs,
        domain=DOMAIN, name="optimizer", **attrs))
    alg.node.append(helper.make_node("Add", ["T", "one"], ["T.new"], name="count"))
    alg.initializer.extend([
        numpy_helper.from_array(np.array(LR, np.float32), "R"),
        numpy_helper.from_array(np.array(1, np.int64), "one")])
    model.graph.initializer.append(
        numpy_helper.from_array(np.array(a.update_count, np.int64), "T"))
    for key in names + [s for g in state for s in g]:
        b = ti.update_binding.add()
        b.key, b.value = key, key + ".new"
    b = ti.update_binding.add()
    b.key, b.value = "T", "T.new"
    model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    onnx.save(model, a.out)
    print(f"wrote {a.out}: {op} over {len(names)} parameters, "
          f"{len(ti.update_binding)} bindings")


def step(name, attrs, t, x, g, state):
    r, t = np.float32(LR), np.int64(t)
    if name == "adagrad":
        x, h = apply_adagrad(r, t, x, g, state[0], attrs["norm_coefficient"],
                             attrs["epsilon"], attrs["decay_factor"])
        return x, [h]
    if name == "adam":
        x, v, h = apply_adam(r, t, x, g, state[0], state[1],
                             attrs["norm_coefficient"], attrs["norm_coefficient_post"],
                             attrs["alpha"], attrs["beta"], attrs["epsilon"])
        return x, [v, h]
    rule = apply_nesterov if attrs["mode"] == "nesterov" else apply_momentum
    x, v = rule(r, t, x, g, state[0], attrs["norm_coefficient"], attrs["alpha"],
                attrs["beta"])
    return x, [v]


def cmd_check(a):
    model = onnx.load(a.model)
    trained = {t.name: numpy_helper.to_array(t) for t in onnx.load(a.trained).graph.initializer}
    _, attrs, slots = SETTINGS[a.optimizer]
    # ONNX stores the attributes as float32.
    attrs = {k: (np.float32(v) if isinstance(v, float) else v) for k, v in attrs.items()}
    net = torch_reference.build(a.model_kind, 0)
    named = dict(net.named_parameters())
    weights = {t.name: numpy_helper.to_array(t).astype(np.float32)
               for t in model.graph.initializer if t.name in named}
    state = {n: [np.zeros_like(w) for _ in range(slots)] for n, w in weights.items()}
    x = torch_reference.read_idx(os.path.join(a.data, "train-images-idx3-ubyte"))
    y = torch_reference.read_idx(os.path.join(a.data, "train-labels-idx1-ubyte"))
    x = torch.from_numpy(x.astype(np.float32).reshape((x.shape[0],) + torch_reference.SHAPES[a.model_kind]))
    y = torch.from_numpy(y.astype(np.int64))
    t0 = int(next(numpy_helper.to_array(i) for i in model.graph.initializer
                  if i.name == "T"))
    for t in range(t0, t0 + a.steps):
        with torch.no_grad():
            for n, p in named.items():
                p.copy_(torch.from_numpy(weights[n]))
        net.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        for n, p in named.items():
            g = p.grad.detach().numpy().astype(np.float32)
            weights[n], state[n] = step(a.optimizer, attrs, t, weights[n], g, state[n])
    ok, worst = True, 0.0
    for n in named:
        got, want = trained[n].astype(np.float64), weights[n].astype(np.float64)
        moved = np.abs(want - numpy_helper.to_array(
            next(i for i in model.graph.initializer if i.name == n))).max()
        rel = np.abs(got - want).max() / max(moved, 1e-12)
        worst = max(worst, rel)
        status = "ok" if rel <= a.rtol else "MISMATCH"
        print(f"{n}: moved {moved:.3e}, max err / movement {rel:.2e} {status}")
        ok &= rel <= a.rtol
    # The saved model carries the update count reached: T0 + steps.
    t_saved = int(trained["T"]) if "T" in trained else None
    ok &= t_saved == t0 + a.steps
    print(f"{'PASS' if ok else 'FAIL'}: {a.optimizer}, {a.steps} steps, "
          f"{len(named)} parameters, worst {worst:.2e} (rtol {a.rtol:g})")
    print(f"T: {t0} -> {t_saved}" +
          ("" if t_saved == t0 + a.steps else f" MISMATCH (expected {t0 + a.steps})"))
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    ad = sub.add_parser("add")
    ad.add_argument("model")
    ad.add_argument("out")
    ad.add_argument("--optimizer", choices=sorted(SETTINGS), required=True)
    ad.add_argument("--update-count", type=int, default=0)
    c = sub.add_parser("check")
    c.add_argument("model")
    c.add_argument("trained")
    c.add_argument("--optimizer", choices=sorted(SETTINGS), required=True)
    c.add_argument("--data", required=True)
    c.add_argument("--steps", type=int, required=True)
    c.add_argument("--model-kind", default="mlp", choices=sorted(torch_reference.SHAPES))
    c.add_argument("--rtol", type=float, default=1e-3)
    a = p.parse_args()
    return {"add": cmd_add, "check": cmd_check}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
