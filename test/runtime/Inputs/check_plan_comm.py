#!/usr/bin/python3
"""Checks that a compiled module's plan used a calibration's alpha and beta.

    check_plan_comm.py CALIBRATION.json MODULE.mlir

Reads alpha_s / beta_s_per_byte from the oasr-comm-v1 file (or from the
`comm` object of an oasr-profile-v1 file) and from the module's `oasr.plan`
attribute (as `oasr-run --emit-mlir` writes it) and exits 1 unless they
agree to 1e-6 relative.
"""
import json
import re
import sys

calib = json.load(open(sys.argv[1]))
if calib.get("format") == "oasr-profile-v1":
    calib = calib["comm"]
module = open(sys.argv[2]).read()
for key in ("alpha_s", "beta_s_per_byte"):
    m = re.search(key + r" = ([0-9.eE+-]+) : f64", module)
    if not m:
        sys.exit(f"{sys.argv[2]}: no {key} in the module's oasr.plan")
    got, want = float(m.group(1)), float(calib[key])
    if abs(got - want) > 1e-6 * abs(want):
        sys.exit(f"{key}: plan {got}, calibration {want}")
print(f"plan uses the calibration: alpha {calib['alpha_s']:.3g} s, "
      f"beta {calib['beta_s_per_byte']:.3g} s/B")
