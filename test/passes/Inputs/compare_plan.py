#!/usr/bin/env python3
"""Compares oasr.plan of a planned module with oasr-plan's JSON output.

usage: compare_plan.py MODULE.mlir OASR_PLAN.json STRATEGY
Prints the two predicted iteration times and group counts; exits 1 unless
they agree (relative 1e-9: the passes sum per-node costs that came from the
same profile).
"""
import json
import re
import sys

module = open(sys.argv[1]).read()
doc = json.load(open(sys.argv[2]))
strategy = sys.argv[3]
m = re.search(r'oasr\.plan = \{([^}]*)\}', module)
if not m:
    sys.exit("no oasr.plan in " + sys.argv[1])
attrs = m.group(1)
passes_us = float(re.search(r'predicted_iteration_us = ([-+.\deE]+)', attrs).group(1))
passes_groups = int(re.search(r'groups = (\d+)', attrs).group(1))
entry = next(s for s in doc["strategies"] if s["name"] == strategy)
plan_us, plan_groups = entry["iteration_us"], entry["num_groups"]
print("%s: passes %.6f us %d groups, oasr-plan %.6f us %d groups" %
      (strategy, passes_us, passes_groups, plan_us, plan_groups))
if abs(passes_us - plan_us) > 1e-9 * max(1.0, abs(plan_us)) or passes_groups != plan_groups:
    print("MISMATCH")
    sys.exit(1)
print("MATCH")
