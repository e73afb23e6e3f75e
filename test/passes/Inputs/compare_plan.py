#!/usr/bin/env python3
"""Compares the plan of --oasr-plan-report=format=json with oasr-plan's.

usage: compare_plan.py OASR_PLAN.json REPORT.json [REPORT.json ...]

Each REPORT is the JSON plan report of one planned module; its "name" is the
strategy, looked up in oasr-plan's "strategies". The predicted iteration time
must agree (relative 1e-9: the passes sum per-node costs spread from the same
profile) and the groups must be the same lists of gradient names. Prints one
line per strategy and a summary line; exits 1 on any mismatch.
"""
import json
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    doc = json.load(open(sys.argv[1]))
    planned = {s["name"]: s for s in doc["strategies"]}
    mismatches = 0
    for path in sys.argv[2:]:
        report = json.load(open(path))
        name = report["name"]
        entry = planned.get(name)
        if entry is None:
            print("%s: MISMATCH: oasr-plan has no strategy '%s'" % (path, name))
            mismatches += 1
            continue
        problems = []
        us, ref_us = report["iteration_us"], entry["iteration_us"]
        if abs(us - ref_us) > 1e-9 * max(1.0, abs(ref_us)):
            problems.append("iteration %.6f us vs %.6f us" % (us, ref_us))
        if report["num_groups"] != entry["num_groups"]:
            problems.append("%d groups vs %d" %
                            (report["num_groups"], entry["num_groups"]))
        for k, (a, b) in enumerate(zip(report["groups"], entry["groups"])):
            if a != b:
                problems.append("group %d: %s vs %s" % (k, a, b))
                break
        sizes = "/".join(str(len(g)) for g in report["groups"])
        if problems:
            mismatches += 1
            print("%s: MISMATCH: %s" % (name, "; ".join(problems)))
        else:
            print("%s: match: %.6f us, %d groups of %s gradients" %
                  (name, us, report["num_groups"], sizes))
    total = len(sys.argv) - 2
    print("compare_plan: %d of %d strategies match" % (total - mismatches,
                                                        total))
    sys.exit(1 if mismatches else 0)


main()
