#!/usr/bin/python3
"""Compares a mixed-precision run with the f32 run of the same job: reads
two oasr-run logs and exits 1 unless the loss each run took off (its first
progress line's loss minus the mean of the last half of its progress
lines, `step K/N  loss X ...`) is within --loss (relative) of the f32
run's; with --accuracy, the held-out accuracy (`test accuracy X%`) within
that many points of f32's; with --min-accuracy, at least that for both.
(Comparing the late losses themselves would measure where two runs happen
to be on a steep curve; one run's held-out accuracy early in training
moves by several points from step to step, so a test bounds it from
below and bench/run_precision_curves.py compares means over seeds.)

    compare_precision.py F32_LOG LOW_LOG [--loss 0.1] [--accuracy 3]
                         [--min-accuracy 70]
"""
import argparse
import re
import sys

p = argparse.ArgumentParser()
p.add_argument("f32")
p.add_argument("low")
p.add_argument("--loss", type=float, default=0.1)
p.add_argument("--accuracy", type=float, default=None)
p.add_argument("--min-accuracy", type=float, default=None)
a = p.parse_args()


def read(path):
    text = open(path).read()
    losses = [float(m.group(1)) for m in
              re.finditer(r"^step \d+/\d+  loss ([0-9.]+)", text, re.M)]
    acc = re.search(r"test accuracy +([0-9.]+)%", text)
    if len(losses) < 2 or not acc:
        sys.exit(f"{path}: needs progress lines and a test accuracy")
    tail = losses[len(losses) // 2:]
    return losses[0] - sum(tail) / len(tail), float(acc.group(1))


(l32, a32), (llow, alow) = read(a.f32), read(a.low)
if l32 <= 0:
    sys.exit(f"{a.f32}: the f32 run's loss did not go down")
rel = abs(llow - l32) / l32
print(f"loss taken off: f32 {l32:.4f}, low {llow:.4f} ({100 * rel:.1f} %); "
      f"test accuracy f32 {a32:.1f}%, low {alow:.1f}%")
if rel > a.loss:
    sys.exit(f"the loss taken off differs by {100 * rel:.1f} %, more than {100 * a.loss:.0f} %")
if a.accuracy is not None and abs(alow - a32) > a.accuracy:
    sys.exit(f"test accuracy differs by {abs(alow - a32):.1f} points, more than {a.accuracy}")
if a.min_accuracy is not None and min(a32, alow) < a.min_accuracy:
    sys.exit(f"test accuracy {min(a32, alow):.1f}% is below {a.min_accuracy}%")
print("within bounds")
