#!/usr/bin/python3
"""Checks that training lowered the loss: reads oasr-run's progress lines
(`step K/N  loss X ...`) and exits 1 unless the last logged loss is below
--ratio times the first.

    check_loss.py LOG [--ratio 0.5]
"""
import argparse
import re
import sys

p = argparse.ArgumentParser()
p.add_argument("log")
p.add_argument("--ratio", type=float, default=0.5)
a = p.parse_args()
losses = [float(m.group(1)) for m in
          re.finditer(r"^step \d+/\d+  loss ([0-9.]+)", open(a.log).read(), re.M)]
if len(losses) < 2:
    sys.exit(f"{a.log}: {len(losses)} progress line(s), need at least 2")
first, last = losses[0], losses[-1]
if not last < a.ratio * first:
    sys.exit(f"loss {first:.4f} -> {last:.4f}: not below {a.ratio} x the first")
print(f"loss went down over {len(losses)} progress lines: below {a.ratio} x the first")
