#!/usr/bin/python3
"""check_lr_schedule.py METRICS.jsonl --lr LR --steps N [--schedule SPEC]
       [--warmup W] [--warmup-start S] [--min-lr M]

The "lr" of every line of oasr-run's --metrics file (one per step with
--log-every=1) against torch.optim.lr_scheduler's rate for the same step:
LinearLR for the warmup chained by SequentialLR in front of the schedule's
class (constant: ConstantLR at factor 1; step:M:G MultiStepLR; cosine
CosineAnnealingLR; linear LinearLR to M / LR; poly:P PolynomialLR;
onecycle OneCycleLR with its defaults). Each within 1e-12 relative; prints
how many steps matched, exits 1 at the first that does not."""
import argparse
import json
import sys

import torch

p = argparse.ArgumentParser()
p.add_argument("metrics")
p.add_argument("--lr", type=float, required=True)
p.add_argument("--steps", type=int, required=True)
p.add_argument("--schedule", default="constant")
p.add_argument("--warmup", type=int, default=0)
p.add_argument("--warmup-start", type=float, default=0.0)
p.add_argument("--min-lr", type=float, default=0.0)
a = p.parse_args()

opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=a.lr)
S = torch.optim.lr_scheduler
rest = a.steps - a.warmup
name, *args = a.schedule.split(":")
if name == "constant":
    main = S.ConstantLR(opt, factor=1.0, total_iters=0)
elif name == "step":
    main = S.MultiStepLR(opt, [int(m) for m in args[0].split(",")], gamma=float(args[1]))
elif name == "cosine":
    main = S.CosineAnnealingLR(opt, T_max=rest, eta_min=a.min_lr)
elif name == "linear":
    main = S.LinearLR(opt, start_factor=1.0, end_factor=a.min_lr / a.lr, total_iters=rest)
elif name == "poly":
    main = S.PolynomialLR(opt, total_iters=rest, power=float(args[0]))
elif name == "onecycle":
    main = S.OneCycleLR(opt, max_lr=a.lr, total_steps=a.steps)
else:
    sys.exit(f"unknown schedule {a.schedule}")
sched = main
if a.warmup:
    # The main scheduler was built on the base rate; the warmup's first
    # factor is set before SequentialLR rewinds both.
    warm = S.LinearLR(opt, start_factor=a.warmup_start if a.warmup_start > 0 else 1e-30,
                      end_factor=1.0, total_iters=a.warmup)
    sched = S.SequentialLR(opt, [warm, main], milestones=[a.warmup])
want = []
for _ in range(a.steps):
    want.append(opt.param_groups[0]["lr"])
    opt.step()
    sched.step()
got = [json.loads(l)["lr"] for l in open(a.metrics) if l.strip()]
if len(got) != a.steps:
    sys.exit(f"{a.metrics}: {len(got)} lines, expected {a.steps}")
for i, (g, w) in enumerate(zip(got, want)):
    if abs(g - w) > 1e-12 * max(abs(w), 1e-300) and abs(g - w) > 1e-15:
        sys.exit(f"step {i + 1}: oasr's lr {g!r}, torch's {w!r}")
print(f"lr matches torch.optim.lr_scheduler at {a.steps} steps ({a.schedule}"
      f"{', warmup ' + str(a.warmup) if a.warmup else ''})")
