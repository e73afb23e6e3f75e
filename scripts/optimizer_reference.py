#!/usr/bin/python3
"""PyTorch's optimizers on given gradients, for the update kernels' tests
(test/unit/Kernels/KernelTests.cpp, KernelsVsTorch.Optimizers).

    optimizer_reference.py --out DIR

For each case: a float32 parameter, STEPS random gradients and the
parameter after torch.optim's STEPS steps on them, as little-endian f4
files, and one manifest line
    case NAME ALGO STEPS N lr momentum weight_decay nesterov beta1 beta2 eps
with oasr's rule name (sgd, momentum, adamw). Exit 77 without PyTorch.
"""
import argparse
import os
import sys

try:
    import numpy as np
    import torch
except ImportError:
    sys.exit(77)

STEPS, N = 20, 1000
CASES = [
    # name, oasr algo, torch optimizer, its arguments
    ("sgd_decay", "sgd", torch.optim.SGD, dict(lr=0.1, weight_decay=5e-4)),
    ("nesterov_decay", "momentum", torch.optim.SGD,
     dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)),
    ("adamw", "adamw", torch.optim.AdamW,
     dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)),
    ("adamw_defaults", "adamw", torch.optim.AdamW, dict(lr=3e-3)),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    lines = []
    for name, algo, cls, kw in CASES:
        param = torch.nn.Parameter(torch.rand(N, generator=g) * 2 - 1)
        param.detach().numpy().astype("<f4").tofile(os.path.join(a.out, f"{name}.p0"))
        opt = cls([param], **kw)
        for t in range(STEPS):
            grad = torch.randn(N, generator=g) * 0.1
            grad.numpy().astype("<f4").tofile(os.path.join(a.out, f"{name}.g{t}"))
            param.grad = grad.clone()
            opt.step()
        param.detach().numpy().astype("<f4").tofile(os.path.join(a.out, f"{name}.p{STEPS}"))
        d = opt.defaults
        betas = d.get("betas", (0.0, 0.0))
        lines.append(" ".join(str(x) for x in [
            "case", name, algo, STEPS, N, d["lr"], d.get("momentum", 0.0),
            d.get("weight_decay", 0.0), int(bool(d.get("nesterov", False))),
            betas[0], betas[1], d.get("eps", 0.0)]))
    with open(os.path.join(a.out, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
