#!/usr/bin/python3
"""Training algorithms side by side: Sync SGD, Sync EASGD, and the
parameter-server family (Async/Hogwild SGD and EASGD, Async MSGD/MEASGD) on
the 8x8 digits (python3-sklearn), same MLP, same steps, same data shards.

    bench/run_algorithms.py [--build BUILD] [--ranks 2] [--steps 600]
                            [--reps 3] [--hidden 1024] [--tau 4] [--lr 0.05]
                            [--ps-server shared|dedicated]

Per algorithm: the median of REPS runs (rounds interleaved, so a slow spell
of the host does not land on one algorithm) of the mean iteration time, the
time blocked in communication, the wall time of the run and the test
accuracy the final weights reach. Writes bench/results/algorithms.{json,md}
(algorithms-dedicated.* with --ps-server dedicated: the parameter-server
forms then serve from the last rank, which trains nothing).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"

# (algorithm, optimizer in the module): the momentum forms need momentum;
# the rest run plain SGD, so each pair in the SC'17 comparison differs only
# in the algorithm.
ALGOS = [("sync-sgd", "sgd"), ("sync-easgd", "sgd"),
         ("async-sgd", "sgd"), ("async-easgd", "sgd"),
         ("hogwild-sgd", "sgd"), ("hogwild-easgd", "sgd"),
         ("roundrobin-easgd", "sgd"),
         ("async-msgd", "momentum"), ("async-measgd", "momentum")]


NOTES = """
## Reading these numbers

* The elastic forms exchange every tau = 4 steps, their SGD counterparts
  every step, so per step they block on communication about 5x less; the
  pairs reach test accuracies within about a point of each other at the same
  step count. This is the SC'17 comparison (Async EASGD vs Async SGD, Async
  MEASGD vs Async MSGD, Hogwild EASGD vs Hogwild SGD) at toy scale: one
  host, 2 cores, so an "exchange" is a shared-memory round trip to rank 0's
  server thread, which shares the cores with both ranks' compute.
* Sync EASGD is one allreduce of the parameters every tau steps and has no
  server round trip; it is the fastest per step here, as in the paper.
* The parameter-server forms are not deterministic (requests are served as
  they arrive); the accuracy ranges show how much that moves the result.
* The model is small (75 k parameters, 0.3 MB), so the per-step times are
  a fraction of a millisecond and the run's wall time is mostly start-up.
"""


NOTES_DEDICATED = """
## Reading these numbers

* The parameter-server forms train on P - 1 ranks and serve from the last;
  the sync forms have no server and train on all P ranks. On this 2-core
  host 3 ranks oversubscribe the cores, so compare the parameter-server rows
  with each other and with algorithms.md (2 ranks, server threads on rank 0,
  which also trains), not with the sync rows here.
* A server with a rank of its own answers the every-step SGD forms sooner:
  they block ~0.44-0.52 ms per step here against ~0.73-0.86 ms with the
  server threads beside rank 0's compute (algorithms.md). The elastic forms,
  which exchange every 4 steps, block about as long either way (~0.18-0.23
  ms here, ~0.15-0.17 ms there): their server is rarely busy, and here the
  3 ranks share 2 cores.
"""


def field(pattern, text, what):
    m = re.search(pattern, text)
    if not m:
        sys.exit(f"run_algorithms: no {what} in oasr-run's output:\n{text}")
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--tau", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--ps-server", default="shared", choices=["shared", "dedicated"])
    a = p.parse_args()
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    work = os.path.join(a.build, "bench-algorithms")
    os.makedirs(work, exist_ok=True)
    digits = os.path.join(work, "digits")
    if not os.path.isdir(digits):
        subprocess.run([PY, os.path.join(ROOT, "scripts", "make_digits.py"), digits],
                       check=True, stdout=subprocess.DEVNULL)
    modules = {}
    for opt in ("sgd", "momentum"):
        path = os.path.join(work, f"mlp-{opt}.mlir")
        with open(path, "w") as f:
            subprocess.run([PY, os.path.join(ROOT, "test", "runtime", "Inputs", "gen_mlp.py"),
                            "--groups", "wfbp", "--hidden", str(a.hidden), "--optimizer", opt,
                            "--lr", str(a.lr)], check=True, stdout=f)
        modules[opt] = path

    runs = {name: [] for name, _ in ALGOS}
    for rep in range(a.reps):
        for name, opt in ALGOS:
            cmd = ["mpirun", "--oversubscribe", "-np", str(a.ranks),
                   os.path.join(a.build, "bin", "oasr-run"), modules[opt],
                   f"--algo={name}", f"--easgd-tau={a.tau}", f"--data=mnist:{digits}",
                   f"--steps={a.steps}", "--threads=1", "--quiet"]
            if a.ps_server == "dedicated" and not name.startswith("sync"):
                cmd.append("--ps-server=dedicated")
            t0 = time.monotonic()
            r = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.monotonic() - t0
            if r.returncode:
                sys.exit(f"run_algorithms: {' '.join(cmd)} failed:\n{r.stderr}")
            out = r.stdout
            runs[name].append({
                "iteration_ms": field(r"mean iteration\s+([0-9.]+) ms", out, "iteration"),
                "blocked_ms": field(r"exposed comm\s+([0-9.]+) ms", out, "exposed comm"),
                "test_accuracy": field(r"test accuracy\s+([0-9.]+)%", out, "accuracy") / 100,
                "wall_s": wall})
            print(f"round {rep + 1}/{a.reps} {name}: {runs[name][-1]}", flush=True)

    results = []
    for name, opt in ALGOS:
        rs = runs[name]
        med = lambda k: statistics.median(x[k] for x in rs)
        results.append({"algorithm": name, "optimizer": opt,
                        "iteration_ms": med("iteration_ms"),
                        "iteration_range_ms": [min(x["iteration_ms"] for x in rs),
                                               max(x["iteration_ms"] for x in rs)],
                        "blocked_ms": med("blocked_ms"), "wall_s": med("wall_s"),
                        "test_accuracy": med("test_accuracy"),
                        "accuracy_range": [min(x["test_accuracy"] for x in rs),
                                           max(x["test_accuracy"] for x in rs)]})
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    doc = {"benchmark": "algorithms",
           "date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores, {cpu}, "
                      f"load {os.getloadavg()[0]:.2f}",
           "ranks": a.ranks, "steps": a.steps, "reps": a.reps, "hidden": a.hidden,
           "tau": a.tau, "lr": a.lr, "batch_per_rank": 16, "ps_server": a.ps_server,
           "results": results}
    suffix = "" if a.ps_server == "shared" else "-dedicated"
    out_dir = os.path.join(ROOT, "bench", "results")
    with open(os.path.join(out_dir, f"algorithms{suffix}.json"), "w") as f:
        json.dump(doc, f, indent=1)
    lines = ["# Training algorithms: Sync SGD, Sync EASGD and the parameter-server family\n",
             f"{doc['date']}, {doc['machine']}; `bench/run_algorithms.py`: the digits "
             f"(1438 train / 359 test, 8x8), MLP 64-{a.hidden}-10, batch 16/rank, "
             f"{a.ranks} ranks, {a.steps} steps, lr {a.lr}, tau {a.tau} for the elastic "
             f"forms, alpha 0.9/P (P: the ranks that train), parameter server "
             f"{'on rank 0, which also trains' if a.ps_server == 'shared' else 'on the last rank, which only serves'}. "
             f"Median of {a.reps} interleaved rounds (range in "
             "brackets). *Blocked*: time per step the compute thread waited on "
             "communication (allreduces or exchanges).\n",
             "| algorithm | optimizer | iteration (ms) | blocked (ms) | run wall (s) | test accuracy |",
             "|---|---|---|---|---|---|"]
    for r in results:
        lo, hi = r["iteration_range_ms"]
        alo, ahi = r["accuracy_range"]
        lines.append(f"| {r['algorithm']} | {r['optimizer']} | {r['iteration_ms']:.3f} "
                     f"[{lo:.3f}-{hi:.3f}] | {r['blocked_ms']:.3f} | {r['wall_s']:.2f} | "
                     f"{100 * r['test_accuracy']:.1f} % [{100 * alo:.1f}-{100 * ahi:.1f}] |")
    lines += ["", (NOTES if a.ps_server == "shared" else NOTES_DEDICATED).strip()]
    with open(os.path.join(out_dir, f"algorithms{suffix}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
