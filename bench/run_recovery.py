#!/usr/bin/python3
"""Recovering from faults: a stopped or killed rank on the emulated cluster,
a restart from the last checkpoint, and a run resized to fewer or more ranks.

    bench/run_recovery.py [--build BUILD] [--steps 300] [--resize-at 150]
                          [--name NAME]

- Stopped and killed rank (2 nodes of scripts/cluster.sh, 1 Gbit/s): oasr's
  test MLP with --timeout=30 and a checkpoint every 2000 steps; rank 1's
  process is sent SIGSTOP or SIGKILL 6 s after the launch. The seconds from
  the signal to the job's end, and rank 0's report.
- Restart: the same job for 12000 steps with --max-restarts=1 and SIGKILL at
  step 7000; the launcher's account of the time lost, the wall time against
  the same run without the fault, and whether the final weights are equal
  bit for bit (--dump-grads).
- Resize: the 8x8 digits (scripts/make_digits.py) on a BatchNorm CNN, global
  batch 16 (4 ranks x 4 or 2 x 8), momentum SGD lr 0.05, STEPS steps,
  locally under mpirun. Uninterrupted 4- and 2-rank runs against 4 -> 2 and
  2 -> 4 resized at RESIZE-AT with --allow-resize --keep-global-batch: the
  loss every 25 steps after the resize, the final loss (mean of the last 5
  logged) and the test accuracy.
Needs root (network namespaces). Writes bench/results/NAME.json and .md
(NAME: recovery-DATE); never overwrites.
"""
import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import results_io

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
PY = "/usr/bin/python3"
MPIRUN = ["mpirun", "--oversubscribe"]


def load():
    return open("/proc/loadavg").read().split()[0]


def run(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return out.returncode, out.stdout + out.stderr


def losses(text):
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"^step (\d+)/\d+  loss ([0-9.naif]+)", text, re.M)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--resize-at", type=int, default=150)
    p.add_argument("--name", default="")
    a = p.parse_args()
    date = datetime.datetime.now(datetime.timezone.utc)
    out = results_io.new_results(p, a.name or f"recovery-{date:%Y-%m-%d}")
    oasr = os.path.join(a.build, "bin", "oasr-run")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    loads = [load()]
    res = {"benchmark": "recovery", "date": date.isoformat(timespec="minutes"),
           "machine": {"cores": os.cpu_count()},
           "command": "bench/run_recovery.py " + " ".join(sys.argv[1:])}
    with tempfile.TemporaryDirectory() as work:
        mlp = os.path.join(work, "mlp.mlir")
        with open(mlp, "w") as f:
            subprocess.run([PY, os.path.join(ROOT, "test", "runtime", "Inputs", "gen_mlp.py"),
                            "--groups", "wfbp", "--hidden", "64"], stdout=f, check=True)
        cenv = dict(env, OASR_CLUSTER="rcv%d" % (os.getpid() % 100000))
        up = subprocess.run([CLUSTER, "up", "2"], env=cenv, capture_output=True, text=True)
        if up.returncode:
            sys.exit("run_recovery: cluster.sh up failed:\n" + up.stderr)
        try:
            faults = {}
            for label, sig in (("stopped (SIGSTOP)", signal.SIGSTOP),
                               ("killed (SIGKILL)", signal.SIGKILL)):
                ck = os.path.join(work, "ck-%d" % sig)
                job = subprocess.Popen(
                    [CLUSTER, "run", "2", "--", oasr, mlp, "--steps=100000000",
                     "--threads=1", "--log-every=1000000000", "--timeout=30",
                     f"--checkpoint={ck}", "--checkpoint-every=2000"],
                    env=cenv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                time.sleep(6)
                node = cenv["OASR_CLUSTER"] + "-n1"
                pids = subprocess.run(["ip", "netns", "pids", node], capture_output=True,
                                      text=True).stdout.split()
                ranks = [q for q in pids
                         if open(f"/proc/{q}/comm").read().strip() == "oasr-run"]
                if not ranks:
                    job.kill()
                    sys.exit(f"run_recovery: no oasr-run in {node}")
                os.kill(int(ranks[0]), sig)
                t0 = time.monotonic()
                text, _ = job.communicate()
                took = time.monotonic() - t0
                if sig == signal.SIGSTOP:  # a stopped rank the job left behind
                    subprocess.run(["kill", "-KILL", ranks[0]], capture_output=True)
                line = next((l for l in text.splitlines()
                             if l.startswith("oasr-run: rank 0")), "")
                faults[label] = {"status": job.returncode, "exit_after_s": round(took, 1),
                                 "rank0": line[:400], "tail": text[-1200:]}
                print(f"{label}: status {job.returncode}, exit {took:.1f} s after the signal",
                      flush=True)
            res["faults"] = faults
            loads.append(load())

            # Restart: the same job with and without a SIGKILL at step 7000.
            base = [CLUSTER, "run", "2", "--", oasr, mlp, "--steps=12000", "--threads=1",
                    "--log-every=1000000000", "--checkpoint-every=2000"]
            t0 = time.monotonic()
            rc0, text0 = run(base + [f"--checkpoint={work}/straight",
                                     f"--dump-grads={work}/straight.json"], cenv)
            straight = time.monotonic() - t0
            t0 = time.monotonic()
            rc1, text1 = run(base + [f"--checkpoint={work}/restart", "--max-restarts=1",
                                     "--fail-at-step=7000", "--fail-rank=1", "--fail-signal=9",
                                     f"--dump-grads={work}/restart.json"], cenv)
            restarted = time.monotonic() - t0
            same = run([PY, os.path.join(ROOT, "test", "runtime", "Inputs", "compare_weights.py"),
                        f"{work}/straight.json", f"{work}/restart.json"])
            res["restart"] = {"status": [rc0, rc1], "straight_s": round(straight, 1),
                              "restarted_s": round(restarted, 1),
                              "launcher": [l for l in text1.splitlines()
                                           if l.startswith(("oasr-run: attempt",
                                                            "restarts:", "  restart "))],
                              "weights": same[1].strip()[:300], "weights_equal": same[0] == 0}
            print(f"restart: {straight:.1f} s straight, {restarted:.1f} s with the restart; "
                  f"{same[1].strip()[:120]}", flush=True)
            loads.append(load())
        finally:
            subprocess.run([CLUSTER, "down"], env=cenv, capture_output=True)

        # Resize.
        subprocess.run([PY, os.path.join(ROOT, "scripts", "make_digits.py"), f"{work}/digits"],
                       check=True, capture_output=True)
        subprocess.run([PY, os.path.join(ROOT, "test", "runtime", "Inputs", "export_model.py"),
                        "digits-cnn", f"{work}/digits.onnx"], check=True, capture_output=True)
        common = [oasr, f"{work}/digits.onnx", f"--data=mnist:{work}/digits",
                  "--optimizer=momentum", "--lr=0.05", "--threads=1", "--log-every=5"]
        curves = {}

        def train(np, args):
            rc, text = run(MPIRUN + ["-np", str(np)] + common + args, env)
            if rc:
                sys.exit(f"run_recovery: {' '.join(args)} failed:\n{text[-2000:]}")
            return text

        for ranks, batch in ((4, 4), (2, 8)):
            text = train(ranks, [f"--batch={batch}", f"--steps={a.steps}"])
            curves[f"{ranks} ranks"] = text
            other = 6 - ranks
            ck = f"{work}/ck{ranks}"
            train(ranks, [f"--batch={batch}", f"--steps={a.resize_at}", f"--checkpoint={ck}"])
            curves[f"{ranks} -> {other} ranks"] = train(
                other, [f"--steps={a.steps}", f"--resume={ck}", "--allow-resize",
                        "--keep-global-batch"])
            print(f"resize from {ranks}: done", flush=True)
        loads.append(load())
    rows = {}
    for k, text in curves.items():
        ls = losses(text)
        last = [ls[s] for s in sorted(ls)[-5:]]
        acc = re.search(r"test accuracy +([0-9.]+)%", text)
        rows[k] = {"losses": ls, "final_loss": sum(last) / len(last),
                   "test_accuracy": float(acc.group(1)) if acc else None,
                   "resized": next((l for l in text.splitlines() if "resized:" in l), "")}
    res["resize"] = {"steps": a.steps, "resize_at": a.resize_at, "runs": rows}
    res["machine"]["load_1min"] = loads
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)

    lines = ["# Recovering from faults: a stopped or killed rank, a restart, a resize", "",
             f"{res['date']}, {os.cpu_count()} cores, load (1 min) {', '.join(loads)}. "
             f"Produced by `{res['command']}`.", "",
             "## A stopped or killed rank (2 emulated nodes, 1 Gbit/s, oasr's test MLP, "
             "--timeout=30)", "",
             "Rank 1's process gets the signal 6 s after the launch; the time is from the "
             "signal to the end of the job.", "",
             "| fault | the job ends after | exit status | rank 0 |", "|---|---|---|---|"]
    for k, v in res["faults"].items():
        lines.append(f"| {k} | {v['exit_after_s']} s | {v['status']} | {v['rank0'][:300]} |")
    r = res["restart"]
    lines += ["", "## Restart from the last checkpoint (--max-restarts=1, SIGKILL of rank 1 at "
              "step 7000 of 12000, checkpoints every 2000)", "",
              f"- Wall time: {r['straight_s']} s without the fault, {r['restarted_s']} s with it "
              f"(exit status {r['status'][1]}).",
              f"- Final weights against the run without the fault: {r['weights']}.",
              "- The launcher's account:", ""]
    lines += ["      " + l for l in r["launcher"]]
    lines += ["", f"## Resize (8x8 digits, BatchNorm CNN, global batch 16, {a.steps} steps, "
              f"resized after step {a.resize_at} with --keep-global-batch)", "",
              "Final loss: the mean of the last 5 logged losses (every 5 steps). BatchNorm "
              "normalises over each rank's own batch, so a resized run is not the same "
              "computation as either uninterrupted one.", "",
              "| run | final loss | test accuracy | loss at steps "
              + ", ".join(str(s) for s in range(a.resize_at + 25, a.steps + 1, 25)) + " |",
              "|---|---|---|---|"]
    for k, v in rows.items():
        pts = ", ".join(f"{v['losses'].get(s, float('nan')):.3f}"
                        for s in range(a.resize_at + 25, a.steps + 1, 25))
        lines.append(f"| {k} | {v['final_loss']:.4f} | {v['test_accuracy']}% | {pts} |")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
