#!/usr/bin/env bash
#===- bench/run_json_read.sh - The JSON reader alone, old against new -----===#
# Usage: bench/run_json_read.sh OLD_REV OUT.md [ROUNDS] [RUNS]
#   (default 7 rounds of 5 reads)
#
# Builds bench/json/JSONReadBench.cpp twice with the same flags (-O3): once
# against the working tree's reader (lib/Support/JSON*.cpp, on simdjson)
# and once, with -DOASR_JSON_OLD, against the hand-written reader of
# OLD_REV (lib/Schedule/JSON.cpp, before the move to simdjson). Runs the two
# in turn (A B A B ...) on a synthetic 10^5-tensor profile (10.8 MB,
# bench/planner/gen_synthetic_profile.py) and writes the median over rounds
# of each round's medians, with the range, to OUT.md (never overwritten).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
root="$ROOT"
. "$ROOT/bench/lib.sh"
old_rev="$1" out="$2" rounds="${3:-7}" runs="${4:-5}"
bench_fresh_out run_json_read "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags="$(llvm-config-19 --cxxflags) -O3 -DNDEBUG -w"
libs="$(llvm-config-19 --ldflags) -lLLVM-19"
c++ $flags -I"$root/include" "$root/bench/json/JSONReadBench.cpp" \
  "$root/lib/Support/JSON.cpp" "$root/lib/Support/JSONLocate.cpp" \
  -o "$work/new" $libs -lsimdjson
mkdir -p "$work/old/include/oasr/Schedule"
git -C "$root" show "$old_rev:include/oasr/Schedule/JSON.h" \
  > "$work/old/include/oasr/Schedule/JSON.h"
git -C "$root" show "$old_rev:lib/Schedule/JSON.cpp" > "$work/old/JSON.cpp"
c++ $flags -DOASR_JSON_OLD -I"$work/old/include" \
  "$root/bench/json/JSONReadBench.cpp" "$work/old/JSON.cpp" \
  -o "$work/old/bench" $libs
/usr/bin/python3 "$root/bench/planner/gen_synthetic_profile.py" \
  "$work/p100k.json" --tensors 100000
/usr/bin/python3 - "$work/old/bench" "$work/new" "$work/p100k.json" "$rounds" \
  "$runs" "$out" "$old_rev" "$(git -C "$root" rev-parse --short HEAD)" <<'PY'
import datetime, os, statistics, subprocess, sys
old, new, profile, rounds, runs, out, old_rev, head = sys.argv[1:9]
rounds, runs = int(rounds), int(runs)
cols = ["first", "parse", "copy", "walk", "error", "where"]
got = {"old": [], "new": []}
load = [os.getloadavg()[0]]
for _ in range(rounds):
    for name, b in (("old", old), ("new", new)):
        line = subprocess.run([b, profile, str(runs)], capture_output=True,
                              text=True, check=True).stdout.split()
        rec = dict(zip(line[0::2], line[1::2]))
        got[name].append(rec)
    load.append(os.getloadavg()[0])
values = {n: {r["values"] for r in got[n]} for n in got}
if values["old"] != values["new"]:
    sys.exit(f"the readers walk different numbers of values: {values}")
cpu = subprocess.run("lscpu | grep 'Model name' | sed 's/.*: *//'", shell=True,
                     capture_output=True, text=True).stdout.strip()
size = os.path.getsize(profile)
def cell(name, col):
    v = [float(r[col]) for r in got[name]]
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
with open(out, "x") as f:
    f.write("# The JSON reader alone on a 10^5-tensor profile\n\n")
    f.write(f"Machine: {cpu}, {os.cpu_count()} cores shared with other builds; "
            f"date {datetime.date.today()}; load average (1 min) "
            f"{min(load):.2f}-{max(load):.2f} during the runs.\n")
    f.write(f"Profile: bench/planner/gen_synthetic_profile.py, 100,000 tensors, "
            f"{size / 1e6:.1f} MB, {values['new'].pop()} values. Command: "
            f"`bench/run_json_read.sh {old_rev} OUT {rounds} {runs}` at {head} "
            f"(plus the uncommitted changes, if any): {rounds} rounds, old and "
            f"new in turn, {runs} reads each per round.\n\n")
    f.write(f"- old: the hand-written reader of {old_rev} (lib/Schedule/JSON.cpp)\n")
    f.write("- new: simdjson 3.0.1 (Debian) with the tape walk and the error "
            "scanner (lib/Support/JSON*.cpp)\n\n")
    f.write("Milliseconds, median over rounds of each round's median (range "
            "of the round medians). first: the first JSONDocument::parse of each "
            "process (a tool reading one file; simdjson's buffers and the "
            "tape are faulted in); parse: JSONDocument::parse, the median over "
            "the process's reads; copy: the text "
            "copied into a fresh buffer (simdjson's padded copy costs about "
            "this, inside parse); walk: parse and a walk over every value; "
            "error: parse of the text with its last byte made wrong (the "
            "error is found at the end); where: position() of the last "
            "layer.\n\n")
    f.write("| reader | " + " | ".join(cols) + " |\n")
    f.write("|---" * (len(cols) + 1) + "|\n")
    for name in ("old", "new"):
        f.write(f"| {name} | " + " | ".join(cell(name, c) for c in cols) + " |\n")
print(open(out).read())
PY
