#!/usr/bin/env python3
"""GPU step benchmark: oasr-run --device=cuda against the machine's PyTorch,
one GPU, one rank, in f32, tf32 and bf16.

    python3 bench/run_gpu.py --oasr-run BUNDLE/bin/oasr-run --out DIR
        [--models resnet50:64,vit_b_16:32,bert_base:32] [--modes f32,tf32,bf16]
        [--steps 20] [--rounds 1] [--work DIR] [--timeout 240] [--device cuda]
        [--cuda-graph] [--torch-compile bf16 [--compile-timeout 480]]
        [--shared-gpu resnet50:32 [--mpirun mpirun]]

Runs on the GPU machine from the repository's root (scripts/gpu-bench.sh
calls it with the bundle of scripts/gpu-bundle.sh). For every MODEL:BATCH
(bench/precision.py's models) it exports the model once with
bench/precision_export.py under this python3 (training mode, TorchScript
exporter, opset 17, the fixed batch beside it), all models at once. Then
in each round, per model and mode, one after the other (interleaved):
  * oasr-run MODEL.onnx --device=cuda --batch=B --steps=N --data=...
    --lr=0.01 --precision=MODE;
  * bench/precision.py MODEL --device cuda --mode MODE (the same seeded
    model and batch, SGD lr 0.01): f32 with TF32 off everywhere, tf32 as
    PyTorch's default (cuDNN convolutions on TF32, matrix products in f32),
    bf16 as torch.autocast("cuda", dtype=torch.bfloat16).
With --torch-compile MODES, PyTorch is also timed in those modes under
torch.compile(mode="reduce-overhead") (bench/precision.py --compile: the
first 3 steps, compiling and recording CUDA graphs, not timed), the peer
of oasr-run --cuda-graph; a model that does not compile is recorded as a
failed run with torch's error.
A run's step times are the steps after its first: oasr-run's from its
summary (`mean iteration ... (median M ms, range A-B ms)`, each step ending
when the device has finished it), PyTorch's with torch.cuda.synchronize()
after each step. A cell is the median of the rounds' medians and the
smallest and largest step of all rounds. Memory: oasr-run's `memory:` line
(activation arena with the kernels' workspaces, weights and optimizer
state, gradients: what the executor allocates; cuBLAS's and cuDNN's own
handles' memory is not in it) against torch.cuda.max_memory_allocated
(PyTorch's caching allocator's peak of live tensors).

With --shared-gpu MODEL:BATCH[,...], two ranks share the GPU under mpirun
(--device=cuda --comm-backend=mpi: the host-staged allreduce) and oasr's
plan is timed against wfbp and single, with exposed communication and the
prediction's error (bench/gpu_shared.py), after the rounds above;
`--models=` leaves those out.

Writes DIR/gpu-steps.json and DIR/gpu-steps.md (the machine: GPU, driver,
CUDA, cuDNN, PyTorch) and goes on past a failing run, recording its error.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

import gpu_shared

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# torch.compile's untimed steps: compiling, then reduce-overhead's warm-up
# and CUDA graph recording.
COMPILE_WARMUP = 3
BENCH = os.path.join(ROOT, "bench")

SUMMARY_RE = re.compile(r"mean iteration\s+([0-9.]+) ms \(median ([0-9.]+) ms, "
                        r"range ([0-9.]+)-([0-9.]+) ms")
MEMORY_RE = re.compile(r"memory: activations ([0-9.]+) MiB .*?weights\+state "
                       r"([0-9.]+) MiB, gradients ([0-9.]+) MiB")
WAITS_RE = re.compile(r"host waits\s+([0-9.]+) copies to the host and "
                      r"([0-9.]+) synchronizations per step"
                      r"(?:.*?blocked in them ([0-9.]+) ms per step)?")
LOSS_RE = re.compile(r"final loss\s+(\S+)")
BASELINE = {"f32": "eager f32, TF32 off",
            "tf32": "eager default (cuDNN TF32, products f32)",
            "bf16": "torch.autocast(\"cuda\", dtype=torch.bfloat16)"}


def run(cmd, timeout, env=None):
    """(returncode, stdout + stderr); 124 when the timeout killed it."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout
    except OSError as e:
        return 127, str(e)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n(killed after {timeout} s)"


def tail(text, n=6):
    return "\n".join(text.strip().splitlines()[-n:])


def export(model, batch, work, timeout):
    rc, out = run([sys.executable, os.path.join(BENCH, "precision_export.py"),
                   model, work, "--batch", str(batch)], timeout)
    if rc != 0:
        return {"error": f"export exit {rc}: {tail(out)}"}
    return json.loads(out.strip().splitlines()[-1])


def run_oasr(a, env, model, batch, mode, exported, graph=False):
    cmd = [a.oasr_run, exported["onnx"], f"--device={a.device}", f"--batch={batch}",
           f"--steps={a.steps}", f"--data={exported['data']}", "--lr=0.01",
           f"--precision={mode}", f"--log-every={a.steps}"]
    if graph:
        cmd.append("--cuda-graph")
    rc, out = run(cmd, a.timeout, env)
    r = {"cmd": " ".join(cmd), "rc": rc}
    m = SUMMARY_RE.search(out)
    if rc != 0 or not m:
        r["error"] = tail(out)
        return r
    r.update(mean_ms=float(m.group(1)), median_ms=float(m.group(2)),
             min_ms=float(m.group(3)), max_ms=float(m.group(4)))
    if mm := MEMORY_RE.search(out):
        r["memory_mib"] = {"activations": float(mm.group(1)),
                           "weights_state": float(mm.group(2)),
                           "gradients": float(mm.group(3))}
        r["memory_total_mib"] = sum(r["memory_mib"].values())
    if w := WAITS_RE.search(out):
        r["host_copies_per_step"] = float(w.group(1))
        r["host_syncs_per_step"] = float(w.group(2))
        if w.group(3):
            r["host_blocked_ms_per_step"] = float(w.group(3))
    if loss := LOSS_RE.search(out):
        r["final_loss"] = loss.group(1)
    r["log_tail"] = tail(out, 14)
    return r


def profile_oasr(a, env, model, batch, mode, exported):
    """Per op type, the device time of oasr-run's kernels over a short run
    (OASR_CUDA_KERNEL_TIMES: CUDA events around every kernel, every run but
    the first and the last), sorted by time."""
    path = os.path.join(a.work, f"kernel-times-{model}-{batch}-{mode}.tsv")
    env = dict(env, OASR_CUDA_KERNEL_TIMES=path)
    steps = 5
    cmd = [a.oasr_run, exported["onnx"], f"--device={a.device}", f"--batch={batch}",
           f"--steps={steps}", f"--data={exported['data']}", "--lr=0.01",
           f"--precision={mode}", "--quiet"]
    rc, out = run(cmd, a.timeout, env)
    if rc != 0 or not os.path.exists(path):
        return {"error": tail(out)}
    rows = [line.rstrip("\n").split("\t") for line in open(path)]
    return {"steps_timed": steps - 2, "header": rows[0],
            "rows": [[r[0], float(r[1]), int(r[2]), float(r[3])] for r in rows[1:]]}


def run_torch(a, model, batch, mode, compiled=False):
    cmd = [sys.executable, os.path.join(BENCH, "precision.py"), model,
           "--device", a.device, "--mode", mode, "--batch", str(batch),
           "--steps", str(a.steps + (COMPILE_WARMUP - 1 if compiled else 0))]
    if compiled:
        cmd += ["--compile", "--warmup", str(COMPILE_WARMUP)]
    rc, out = run(cmd, a.compile_timeout if compiled else a.timeout)
    r = {"cmd": " ".join(cmd[1:]), "rc": rc}
    try:
        j = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        r["error"] = tail(out)
        return r
    r.update(median_ms=j["median_s"] * 1e3, min_ms=j["min_s"] * 1e3,
             max_ms=j["max_s"] * 1e3, peak_gpu_mib=j.get("peak_gpu_mib"),
             loss_last=j["loss_last"], torch=j["torch"], gpu=j.get("gpu"),
             cudnn=j.get("cudnn"), cuda=j.get("cuda"))
    if "compile_s" in j:
        r["compile_s"] = j["compile_s"]
    return r


def cell(runs):
    ok = [r for r in runs if "median_ms" in r]
    if not ok:
        return None
    return {"median_ms": statistics.median(r["median_ms"] for r in ok),
            "min_ms": min(r["min_ms"] for r in ok),
            "max_ms": max(r["max_ms"] for r in ok)}


def machine():
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds")}
    rc, out = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                   "--format=csv,noheader"], 30)
    info["nvidia_smi"] = out.strip() if rc == 0 else f"(exit {rc})"
    info["cpus"] = os.cpu_count()
    try:
        info["load_avg"] = os.getloadavg()
    except OSError:
        pass
    return info


def write_md(path, res):
    m = res["machine"]
    t = next((r for cellruns in res["runs"].values() for r in cellruns["torch"]
              if r.get("torch")), {})
    lines = [
        "# oasr on one GPU against PyTorch", "",
        f"Machine: {m['nvidia_smi']} (name, driver, memory); CUDA "
        f"{t.get('cuda')}, cuDNN {t.get('cudnn')}, PyTorch {t.get('torch')} "
        f"(the machine's); {m['cpus']} CPUs; {m['date']}. "
        f"Produced by `{res['command']}`.", "",
        f"One rank, one GPU, {res['steps']} steps per run, the first not "
        f"timed; {res['rounds']} round(s), oasr and PyTorch interleaved. Cells: "
        "median step in ms [fastest - slowest step]. Memory: oasr's "
        "activation arena + weights and state + gradients; PyTorch's "
        "torch.cuda.max_memory_allocated. Host blocked: the time oasr's host "
        "waited for the device per step (near the step time: the device is "
        "the bottleneck; near zero: launching is).", "",
        "| model | batch | oasr mode | PyTorch | oasr ms | PyTorch ms | "
        "oasr / PyTorch | oasr MiB | PyTorch MiB | oasr host waits/step | "
        "oasr host blocked ms/step | oasr --cuda-graph ms | graph / PyTorch |"
        " PyTorch compiled ms | graph / compiled |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, c in res["cells"].items():
        model, batch, mode = key.split("/")
        o, p = c.get("oasr"), c.get("torch")
        runs = res["runs"][key]

        def fmt(x):
            return (f"{x['median_ms']:.1f} [{x['min_ms']:.1f}-{x['max_ms']:.1f}]"
                    if x else "failed")
        ratio = f"{o['median_ms'] / p['median_ms']:.2f}x" if o and p else "n/a"
        mem_o = next((r.get("memory_total_mib") for r in runs["oasr"]
                      if r.get("memory_total_mib")), None)
        mem_p = next((r.get("peak_gpu_mib") for r in runs["torch"]
                      if r.get("peak_gpu_mib")), None)
        waits = next((f"{r['host_copies_per_step']:.2f} copies, "
                      f"{r['host_syncs_per_step']:.2f} syncs"
                      for r in runs["oasr"] if "host_copies_per_step" in r), "")
        blocked = next((f"{r['host_blocked_ms_per_step']:.1f}"
                        for r in runs["oasr"]
                        if "host_blocked_ms_per_step" in r), "")
        mib = [f"{x:.0f}" if x else "" for x in (mem_o, mem_p)]
        g = c.get("graph")
        graph = fmt(g) if runs.get("graph") else "not run"
        gratio = f"{g['median_ms'] / p['median_ms']:.2f}x" if g and p else ""
        k = c.get("compiled")
        compiled = fmt(k) if runs.get("compiled") else "not run"
        kratio = f"{g['median_ms'] / k['median_ms']:.2f}x" if g and k else ""
        lines.append(
            f"| {model} | {batch} | {mode} | {BASELINE[mode]} | {fmt(o)} | "
            f"{fmt(p)} | {ratio} | {mib[0]} | {mib[1]} | {waits} | {blocked} | "
            f"{graph} | {gratio} | {compiled} | {kratio} |")
    if res.get("shared_gpu"):
        lines += [""] + gpu_shared.markdown(res["shared_gpu"])
    for key, prof in res.get("kernel_times", {}).items():
        if "rows" not in prof:
            continue
        steps = prof["steps_timed"]
        lines += ["", f"Kernel device time of oasr {key} (OASR_CUDA_KERNEL_TIMES, "
                  f"{steps} steps; 'widened' rows hold their f32 kernel's row "
                  "and the conversions):", "",
                  "| op | ms per step | runs per step | share |", "|---|---|---|---|"]
        for op, ms, runs, share in prof["rows"][:15]:
            lines.append(f"| {op} | {ms / steps:.2f} | {runs / steps:.0f} | "
                         f"{100 * share:.1f}% |")
    errors = [(k, side, r["error"]) for k, v in res["runs"].items()
              for side in ("oasr", "torch", "graph", "compiled")
              for r in v.get(side, []) if "error" in r]
    errors += [(k, "export", v["error"]) for k, v in res["exports"].items()
               if "error" in v]
    if errors:
        lines += ["", "## Failed runs", ""]
        for k, side, e in errors:
            lines += [f"- {k} ({side}):", "", "```", e, "```"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--oasr-run", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="resnet50:64,vit_b_16:32,bert_base:32")
    p.add_argument("--modes", default="f32,tf32,bf16")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--work", default="/tmp/oasr-gpu-bench")
    p.add_argument("--timeout", type=int, default=240)
    p.add_argument("--cuda-graph", action="store_true",
                   help="also time oasr-run --cuda-graph, interleaved")
    p.add_argument("--torch-compile", default="",
                   help="modes in which PyTorch is also timed under "
                   'torch.compile(mode="reduce-overhead"), interleaved (the '
                   "peer of --cuda-graph; e.g. bf16)")
    p.add_argument("--compile-timeout", type=int, default=480,
                   help="seconds a compiled PyTorch run may take (compiling "
                   "included)")
    p.add_argument("--profile-modes", default="",
                   help="modes whose kernels get a profiled oasr-run per model "
                   "(OASR_CUDA_KERNEL_TIMES), after the timed rounds")
    p.add_argument("--device", default="cuda",
                   help="cpu: a smoke test of this script (f32, bf16)")
    p.add_argument("--shared-gpu", default="",
                   help="MODEL:BATCH[,...]: also time 2 ranks sharing the GPU "
                   "(--comm-backend=mpi, staged through the host): oasr's "
                   "plan against wfbp and single (bench/gpu_shared.py)")
    p.add_argument("--mpirun", default=os.environ.get("OASR_MPIRUN", "mpirun"),
                   help="the launcher of --shared-gpu's ranks (default: "
                   "$OASR_MPIRUN, else mpirun)")
    a = p.parse_args()

    def specs(text):
        return [(m.split(":")[0], int(m.split(":")[1]))
                for m in text.split(",") if m]
    models, shared = specs(a.models), specs(a.shared_gpu)
    modes = a.modes.split(",")
    for mode in modes:
        if mode not in BASELINE:
            p.error(f"--modes: unknown mode '{mode}' (f32, tf32, bf16)")
    compile_modes = set(filter(None, a.torch_compile.split(",")))
    if compile_modes - set(modes):
        p.error(f"--torch-compile: {','.join(sorted(compile_modes - set(modes)))}"
                " not among --modes")
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    # oasr-run takes the bundle's libraries; python3 keeps the machine's.
    env = dict(os.environ)
    if "OASR_LD_LIBRARY_PATH" in env:
        env["LD_LIBRARY_PATH"] = env["OASR_LD_LIBRARY_PATH"]
    res = {"command": "python3 bench/run_gpu.py " + " ".join(sys.argv[1:]),
           "machine": machine(), "steps": a.steps, "rounds": a.rounds,
           "exports": {}, "runs": {}, "cells": {}}
    with concurrent.futures.ThreadPoolExecutor(len(models + shared)) as pool:
        futures = {f"{m}/{b}": pool.submit(export, m, b, a.work, a.timeout)
                   for m, b in dict.fromkeys(models + shared)}
        for k, f in futures.items():
            res["exports"][k] = f.result()
            print(f"export {k}: {res['exports'][k].get('error', 'ok')}",
                  flush=True)
    for rnd in range(a.rounds):
        for m, b in models:
            exported = res["exports"][f"{m}/{b}"]
            for mode in modes:
                key = f"{m}/{b}/{mode}"
                runs = res["runs"].setdefault(
                    key, {"oasr": [], "torch": [], "graph": [], "compiled": []})
                o = (run_oasr(a, env, m, b, mode, exported)
                     if "onnx" in exported else {"error": "not exported"})
                t = run_torch(a, m, b, mode)
                runs["oasr"].append(o)
                runs["torch"].append(t)
                if a.cuda_graph and "onnx" in exported:
                    runs["graph"].append(
                        run_oasr(a, env, m, b, mode, exported, graph=True))
                if mode in compile_modes:
                    runs["compiled"].append(
                        run_torch(a, m, b, mode, compiled=True))
                print(f"round {rnd + 1} {key}: oasr "
                      f"{o.get('median_ms', 'FAILED')} ms, torch "
                      f"{t.get('median_ms', 'FAILED')} ms" +
                      (f", oasr --cuda-graph "
                       f"{runs['graph'][-1].get('median_ms', 'FAILED')} ms"
                       if runs["graph"] else "") +
                      (f", torch.compile "
                       f"{runs['compiled'][-1].get('median_ms', 'FAILED')} ms"
                       if runs["compiled"] else ""), flush=True)
                res["cells"][key] = {"oasr": cell(runs["oasr"]),
                                     "torch": cell(runs["torch"]),
                                     "graph": cell(runs["graph"]),
                                     "compiled": cell(runs["compiled"])}
                # Written after every pair: a run cut short keeps its cells.
                with open(os.path.join(a.out, "gpu-steps.json"), "w") as f:
                    json.dump(res, f, indent=1)
                write_md(os.path.join(a.out, "gpu-steps.md"), res)
    for mode in filter(None, a.profile_modes.split(",")):
        for m, b in models:
            exported = res["exports"][f"{m}/{b}"]
            if "onnx" not in exported:
                continue
            key = f"{m}/{b}/{mode}"
            prof = profile_oasr(a, env, m, b, mode, exported)
            res.setdefault("kernel_times", {})[key] = prof
            print(f"profile {key}: " + (prof.get("error") or ", ".join(
                f"{r[0]} {r[1] / prof['steps_timed']:.1f} ms"
                for r in prof["rows"][:6]) + " per step"), flush=True)
            with open(os.path.join(a.out, "gpu-steps.json"), "w") as f:
                json.dump(res, f, indent=1)
            write_md(os.path.join(a.out, "gpu-steps.md"), res)
    for m, b in shared:
        res.setdefault("shared_gpu", []).append(gpu_shared.bench(
            a, env, run, tail, m, b, res["exports"][f"{m}/{b}"]))
        with open(os.path.join(a.out, "gpu-steps.json"), "w") as f:
            json.dump(res, f, indent=1)
        write_md(os.path.join(a.out, "gpu-steps.md"), res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
