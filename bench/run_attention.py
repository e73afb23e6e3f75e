#!/usr/bin/python3
"""Fused attention benchmark: oasr-run with and without oasr-fuse-attention
on one rank, the memory it plans and the step time.

    bench/run_attention.py --out NAME [--model bert_base] [--precision bf16]
                           [--rounds 3] [--steps 3] [--batch 32]
                           [--threads 2] [--build BUILD] [--work DIR]
                           [--timeout 1800]

Exports MODEL (bench/precision.py's, by bench/precision_export.py under
Debian's python3-torch, as bench/run_precision.py does) with its fixed batch,
then in each round runs, one after the other (interleaved, so that a change
in the host's load hits both alike):
  * oasr-run MODEL.onnx --batch=B --threads=T --steps=N --data=... --lr=0.01
    --precision=P --fuse-attention=false   (before: the exported graph)
  * the same with --fuse-attention=true    (after: FusedAttention)
A run's step time is its summary line's median and range (every step after
the first); a cell is the median of the rounds' medians [smallest - largest
step of all rounds], ms. Memory: oasr-run's `memory:` line (the activation
arena as planned) and its `saved for backward` figure, and the child's peak
resident set (ru_maxrss). The host's load average is read before every run.

Writes bench/results/NAME.json and bench/results/NAME.md and refuses to
start if either exists: results are never overwritten.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import run_precision as rp  # noqa: E402  (its export, parsing and children)
from results_io import new_results  # noqa: E402

ROOT = os.path.dirname(BENCH)
VARIANTS = [("unfused", "false"), ("fused", "true")]  # (key, --fuse-attention)
ARENA_RE = re.compile(r"activations ([0-9.]+) MiB \(([0-9.]+) MiB without reuse\)")
SAVED_RE = re.compile(r"saved for backward ([0-9.]+) MiB, ([0-9.]+) MiB of it in 16 bits")
FUSED_RE = re.compile(r"oasr-fuse-attention: (\d+) attention\(s\) fused, (\d+) left unfused")


def run(a, onnx, data, fuse):
    cmd = [os.path.join(a.build, "bin", "oasr-run"), onnx, f"--batch={a.batch}",
           f"--threads={a.threads}", f"--steps={a.steps}", f"--data={data}",
           "--lr=0.01", f"--precision={a.precision}", f"--fuse-attention={fuse}"]
    load = os.getloadavg()
    rc, out, err, rss = rp.run_child(cmd, a.timeout)
    r = {"cmd": shlex.join(cmd), "rc": rc, "peak_rss_mib": rss, "load_before": load}
    if rc:
        r["error"] = rp.failure(rc, out, err)
        return r
    for regex, keys in ((ARENA_RE, ("arena_mib", "arena_unshared_mib")),
                        (SAVED_RE, ("saved_mib", "saved_low_mib")),
                        (FUSED_RE, ("attention_fused", "attention_unfused"))):
        m = regex.search(out)
        if m:
            r.update({k: float(v) for k, v in zip(keys, m.groups())})
    s = rp.SUMMARY_RE.search(out)
    if s:
        r["median_s"], r["min_s"], r["max_s"] = (float(s.group(k)) / 1e3 for k in (2, 3, 4))
    else:
        r["error"] = "no summary line in oasr-run's output"
    return r


def write_md(path, res):
    with open(path, "w") as f:
        f.write(f"# Fused attention: {res['model']} batch {res['batch']}, "
                f"{res['precision']}, one rank, {res['threads']} thread(s)\n\n")
        f.write(f"{res['date']}, {res['host']}; oasr {res['oasr_commit']}. "
                f"{res['rounds']} interleaved rounds of {res['steps']} steps (the first "
                "not timed), SGD lr 0.01 on one fixed batch. `unfused`: "
                "`--fuse-attention=false` (the exported graph: the attention "
                "probabilities are saved for backward); `fused`: the default "
                "(FusedAttention recomputes them). Step: median of the rounds' "
                "medians [fastest-slowest step of all rounds], ms. Memory as oasr-run "
                "plans it (the same in every round) and the largest peak resident set "
                "of the rounds.\n\n")
        f.write("| variant | attention fused | step, ms | activation arena, MiB "
                "| saved for backward, MiB | peak RSS, MiB |\n|---|---|---|---|---|---|\n")
        for key, _ in VARIANTS:
            agg = res["summary"][key]
            step = rp.cell(agg)
            f.write(f"| {key} | {agg.get('attention_fused', '-')} | {step} | "
                    f"{agg.get('arena_mib', '-')} | {agg.get('saved_mib', '-')} | "
                    f"{agg.get('peak_rss_mib', '-')} |\n")
        f.write(f"\nLoad average (1/5/15 min) before the first run "
                f"{rp.fmt_load(res['load_before'])}, after the last "
                f"{rp.fmt_load(res['load_after'])}; before each run: "
                + ", ".join(f"{r['variant']} {r['load_before'][0]:.2f}" for r in res["runs"])
                + ".\n\nCommands:\n\n```\n"
                + res["export"].get("cmd", "# export reused from --work: " + res["export"]["onnx"])
                + "\n")
        for key, _ in VARIANTS:
            f.write(next(r["cmd"] for r in res["runs"] if r["variant"] == key) + "\n")
        f.write("```\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="results name: bench/results/NAME.{json,md}")
    p.add_argument("--model", default="bert_base", choices=rp.MODELS)
    p.add_argument("--precision", default="bf16", choices=("f32", "bf16"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--work", default="", help="keep the export here and reuse it")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    if a.steps < 2 or a.rounds < 1:
        p.error("--steps must be at least 2 and --rounds at least 1")
    out = new_results(p, a.out)
    work = a.work or tempfile.mkdtemp(prefix="oasr-attention-")
    os.makedirs(work, exist_ok=True)
    exp = rp.export(a, a.model, work)
    res = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "host": f"{rp.cpu_name()}, {os.cpu_count()} CPUs, {platform.node()}",
           "command": shlex.join(sys.argv), "oasr_commit": rp.git_commit(),
           "model": a.model, "precision": a.precision, "batch": a.batch,
           "threads": a.threads, "steps": a.steps, "rounds": a.rounds,
           "export": exp, "load_before": os.getloadavg(), "runs": []}
    for rnd in range(a.rounds):
        for key, flag in VARIANTS:
            r = run(a, exp["onnx"], exp["data"], flag)
            r.update(variant=key, round=rnd)
            res["runs"].append(r)
            shown = (f"{1e3 * r['median_s']:.1f} ms" if "median_s" in r
                     else r.get("error", "?"))
            print(f"round {rnd + 1}/{a.rounds} {key}: {shown}, arena "
                  f"{r.get('arena_mib', '?')} MiB, saved {r.get('saved_mib', '?')} MiB",
                  flush=True)
    res["load_after"] = os.getloadavg()
    res["summary"] = {}
    for key, _ in VARIANTS:
        runs = [r for r in res["runs"] if r["variant"] == key]
        agg = rp.aggregate(runs)
        ok = [r for r in runs if "median_s" in r]
        for k in ("arena_mib", "arena_unshared_mib", "saved_mib", "saved_low_mib",
                  "attention_fused", "attention_unfused"):
            vals = sorted({r[k] for r in ok if k in r})
            if vals:
                agg[k] = vals[0] if len(vals) == 1 else vals
        if ok:
            agg["peak_rss_mib"] = round(max(r["peak_rss_mib"] for r in ok), 1)
        res["summary"][key] = agg
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)
    write_md(out + ".md", res)
    print(f"wrote {out}.json and {out}.md")


if __name__ == "__main__":
    main()
