#!/usr/bin/python3
"""Time to accuracy with gradient compression: oasr-run --compress against
PyTorch DDP's powerSGD_hook, ResNet-18 (or a BERT-like encoder on token
data) on 2 emulated nodes.

    bench/run_compress.py [--out NAME] [--out-dir DIR] [--build BUILD]
                          [--rates 200mbit[,1gbit...]] [--seeds 3]
                          [--steps 300] [--eval-every 25] [--batch 32]
                          [--lr 0.01] [--momentum 0.9]
                          [--oasr-configs off,auto] [--ddp-hooks powersgd:4]
                          [--compress-start 10] [--target rel:0.9 | 0.8]
                          [--data DIR] [--noise 2.0] [--oasr-args "..."]
                          [--model resnet18 | bert | bert-tiny]
                          [--cluster-name compress] [--subnet 10.77.0.0/24]

For every rate (scripts/cluster.sh up 2 --rate=RATE, a cluster named
--cluster-name, default `compress`, on --subnet) it first calibrates the link for oasr (oasr-bench comm as
bench/run_cluster.sh runs it, allreduce only: 2-3 minutes at 200 Mbit/s;
--no-calibrate skips it), then runs every seed (1..SEEDS: oasr-run's --seed
and ddp_train.py's, the data order; the initial weights are the same in
every run) and every config, interleaved within each seed round:

  oasr C    scripts/cluster.sh run 2 -- build/bin/oasr-run resnet18.onnx
            --data=cifar10:DIR --batch=B --steps=N --eval-every=E
            --log-every=E --threads=1 --optimizer=momentum --momentum=M
            --lr=LR --seed=S --comm=CALIBRATION
            [--compress=C --compress-start=K]
            (C from --oasr-configs: off, auto, auto:R, powersgd:R; `off`
            passes no compression flag at all, so it runs on an oasr-run
            that has none). Without --comm oasr-run plans with its default
            link model (2 GB/s), and --compress=auto then finds nothing
            worth compressing at 200 Mbit/s.
  ddp H     scripts/cluster.sh run 2 -- /root/venv-torch/bin/python
            bench/ddp_train.py --data DIR --init-onnx resnet18.onnx
            --hook H --powersgd-start K ... (H from --ddp-hooks: powersgd:R,
            none, bf16, fp16)

Both sides train the same model from the same weights on the same data in
the same order with the same optimizer (bench/ddp_train.py's docstring says
how, and where they differ); one compute thread a rank, rank r pinned to
CPU r. Per run it records the curve of (step, seconds, train loss, test
accuracy) at every E-th step -- seconds: the wall time of training so far,
evaluations excluded (oasr-run's 'eval step S  time T s' line, the same
clock in ddp_train.py; start-up -- oasr's compile and plan, PyTorch's
imports and DDP's construction -- is before either clock starts), loss:
the mean train loss of the steps since the previous evaluation over both
ranks (oasr-run's progress line at --log-every=E) -- its mean step (each
tool's own summary: oasr-run's 'mean iteration', steps after its last
re-plan; ddp_train.py's steps 2..N), and the time to the target accuracy:
the seconds of the first evaluation at or above it. oasr-run's mean step
covers steps 2..N, or the steps after its re-plan where it re-plans
(uncompressed runs, once after their first few steps; with compression
only configs written C+replan, which add --replan=once); both sides'
means hold the K uncompressed steps.

--target A: a test accuracy in [0, 1]; rel:F (default rel:0.9): F times the
median final accuracy of the uncompressed oasr runs (`oasr off`) at the same
rate (the first config's when off is not among them), so the target follows
the data set (the default data: uncompressed training reaches about 80 % in
300 steps at batch 2 x 32).

The data: --data DIR, any CIFAR-10 binary directory (data_batch_1..5.bin,
test_batch.bin; the real CIFAR-10 where a copy exists), else a set that
scripts/gen_cifar_like.py generates with --noise 2.0 (10000 train / 2000
test records; NOT CIFAR-10: at its default noise 0.5 ResNet-18 passes 93 %
after 50 steps, and time to accuracy would only measure the first steps).
The model: torchvision's resnet18(weights=None, num_classes=10) after
torch.manual_seed(0), exported here to ONNX as scripts/export_models.py
exports its models (Debian's torch 1.13, the TorchScript exporter, training
mode, no constant folding, opset 14, dynamic batch), which cannot itself
export ResNet-18 at 32x32: its example batch of 1 leaves layer4's
BatchNorm one value per channel in training mode, which PyTorch refuses;
the example here is 2 x 3 x 32 x 32. Before the first rate, one step of
each side checks that oasr's first loss equals PyTorch's (same weights,
same first batch); a mismatch stops the benchmark (--skip-init-check).

--model bert: bench/token_model.py's BERT-like encoder (scripts/model_zoo.py's
TinyEncoder scaled up: 4 post-norm layers of width 128, 4 heads, a
vocabulary of 8192, 1.85 M parameters, 7.4 MB of f32 gradients, 4.2 MB of
them the token embedding) classifying generated token sequences into 16
classes (each class's topic tokens among Zipf background tokens; the
module's docstring), exported once by Debian's torch and trained by
oasr-run --data=tokens:FILE and ddp_train.py --model bert from the same
initializers. The file has steps x batch x 2 sequences (rounded up to 1024)
or --sequences, so no sequence repeats in a run. oasr-run's token loader
has no test set, so the accuracy of a point is the one both tools report
for the training batches since the previous point (oasr-run's progress line
at --log-every=E, summed over the ranks; each batch's forward pass comes
before its update, so while nothing repeats it is measured on sequences the
model has not trained on), and its seconds are oasr-run's progress clock
(the sum of each interval's sequences over its seq/s), not an --eval-every
line. --target applies to that accuracy. bert-tiny (2 layers of width 32)
is for quick checks of the pipeline.

With the defaults (one rate, 3 seeds, 300 steps) a run takes about an hour:
`oasr off` is some 2-3 s a step at 200 Mbit/s (11-15 minutes a run), the
compressed configs 0.2-0.4 s a step after their 10 plain steps (2-3
minutes), plus the calibration and 12 evaluations a run.

Writes OUT_DIR/NAME.json and NAME.md (default bench/results/,
NAME compress-resnet18-2xRATES-DATE) and refuses to overwrite them: machine,
date, load average before and after (and at each run's start), the torch
builds, every run's curve, and per rate and config the median over seeds
(with the range) of the time to the target, the final accuracy, the final
loss and the mean step; and the ratios oasr C / DDP (each compressed oasr
config against each DDP PowerSGD hook) and oasr C / oasr off.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
TORCH_PY = "/root/venv-torch/bin/python"
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
TOKEN_MODELS = ("bert", "bert-tiny")  # bench/token_model.py
PROGRESS_RE = re.compile(r"^step (\d+)/\d+  loss ([-+0-9.naifNAIF]+)  acc\s+([0-9.]+)%  "
                         r"([0-9.]+) seq/s", re.M)

EVAL_RE = re.compile(r"^eval step (\d+)  time ([0-9.]+) s  test accuracy ([0-9.]+)% "
                     r"\((\d+)/(\d+)\)", re.M)
LOSS_RE = re.compile(r"^step (\d+)/\d+  loss ([-+0-9.naifNAIF]+)", re.M)
STEP_RE = re.compile(r"mean iteration\s+([0-9.]+) ms \(median ([0-9.]+) ms")
PLAN_RE = re.compile(r"^summary: .*strategy (\S+), (\d+) group", re.M)
COMPRESS_RE = re.compile(r"(?i)\bpowersgd\b|\bcompress(ion|ed|es)?\b")


def export_onnx(path, model_name, classes):
    """The model for oasr-run, as scripts/export_models.py exports (run
    under Debian's torch: the TorchScript exporter)."""
    import torch
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, model_name)(weights=None, num_classes=classes)
    model.train()
    # Batch 2: at 32x32 layer4's BatchNorm sees 1x1 maps, and PyTorch refuses
    # one value per channel in training mode.
    torch.onnx.export(model, torch.randn(2, 3, 32, 32), path,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=14,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}})


def export_token_onnx(path, model_name, batch):
    """The BERT-like model for oasr-run (Debian's torch, the TorchScript
    exporter as python/oasr/_export.py runs it: training mode, no constant
    folding, opset 17, input "ids" with a dynamic batch)."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import token_model
    from oasr._export import exporter_args

    cfg = token_model.MODELS[model_name]
    torch.manual_seed(0)
    model = token_model.make_model(**cfg)
    model.train()
    ids = torch.randint(1, cfg["vocab"], (batch, cfg["seq"]))
    ids[: batch // 2, -2:] = 0  # padded tails, as the data has
    torch.onnx.export(model, ids, path, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17,
                      input_names=["ids"], output_names=["logits"],
                      dynamic_axes={"ids": {0: "batch"}, "logits": {0: "batch"}},
                      **exporter_args(torch))


def master_of(subnet):
    """Node 0's address: cluster.sh gives node i the subnet's host i + 1."""
    import ipaddress
    return str(ipaddress.ip_network(subnet, strict=False).network_address + 1)


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def load_now():
    return round(os.getloadavg()[0], 2)


def cluster(name, *args, check=True):
    r = subprocess.run([CLUSTER, f"--name={name}", *args], capture_output=True, text=True)
    if check and r.returncode:
        sys.exit(f"run_compress: cluster.sh {' '.join(args)} failed:\n{r.stdout}{r.stderr}")
    return r


def parse_oasr(text, progress_samples=None):
    """oasr-run's output: the curve, the summary's step, plan and loss.
    With progress_samples (the sequences a step takes over all ranks), the
    curve is the progress lines' (token models: no test set): the training
    batches' accuracy and loss, seconds summed from each interval's
    sequences over its seq/s."""
    losses = {int(m.group(1)): float(m.group(2)) for m in LOSS_RE.finditer(text)}
    if progress_samples:
        curve, seconds, prev = [], 0.0, 0
        for m in PROGRESS_RE.finditer(text):
            step, rate = int(m.group(1)), float(m.group(4))
            seconds += (step - prev) * progress_samples / rate if rate > 0 else 0.0
            prev = step
            curve.append({"step": step, "seconds": round(seconds, 4),
                          "loss": float(m.group(2)), "accuracy": float(m.group(3)) / 100})
    else:
        curve = [{"step": int(m.group(1)), "seconds": float(m.group(2)),
                  "loss": losses.get(int(m.group(1))),
                  "accuracy": int(m.group(4)) / int(m.group(5))}
                 for m in EVAL_RE.finditer(text)]
    step = STEP_RE.search(text)
    plan = PLAN_RE.search(text)
    return {"curve": curve,
            "mean_step_ms": float(step.group(1)) if step else None,
            "median_step_ms": float(step.group(2)) if step else None,
            "strategy": plan.group(1) if plan else None,
            "groups": int(plan.group(2)) if plan else None,
            "first_loss": losses.get(1),
            # Whatever oasr-run says about compression, verbatim.
            "compress_lines": [l.strip() for l in text.splitlines()
                               if COMPRESS_RE.search(l)][:20]}


def parse_ddp(text):
    lines = [json.loads(l) for l in text.splitlines() if l.startswith("{\"event\"")]
    curve = [{k: l[k] for k in ("step", "seconds", "loss", "accuracy")}
             for l in lines if l["event"] == "eval"]
    summary = next((l for l in lines if l["event"] == "summary"), None)
    if summary is None:
        return None
    return {"curve": curve, "mean_step_ms": summary["mean_step_ms"],
            "median_step_ms": summary["median_step_ms"], "first_loss": summary["first_loss"],
            "eval_s": summary["eval_s"], "init": summary["init"],
            "powersgd_stats": summary["powersgd_stats"], "torch": summary["torch"],
            "torchvision": summary["torchvision"]}


def time_to(curve, target):
    for pt in curve:
        if pt["accuracy"] is not None and pt["accuracy"] >= target:
            return pt["seconds"], pt["step"]
    return None, None


def med_range(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    return statistics.median(xs), [min(xs), max(xs)]


def summarize(doc):
    """Per rate: the target, each config's medians over seeds, the ratios."""
    out = []
    for rate in doc["rates"]:
        runs = [r for r in doc["runs"] if r["rate"] == rate and not r.get("failed")]
        by = {c: [r for r in runs if r["config"] == c] for c in doc["configs"]}
        spec = doc["target_spec"]
        if spec.startswith("rel:"):
            ref = "oasr off" if by.get("oasr off") else doc["configs"][0]
            finals = [r["curve"][-1]["accuracy"] for r in by.get(ref, []) if r["curve"]]
            target = float(spec[4:]) * statistics.median(finals) if finals else None
            target_note = (f"{spec[4:]} x the median final accuracy of `{ref}`"
                           if finals else f"none: `{ref}` has no finished run")
        else:
            target, target_note = float(spec), "absolute"
        rows = {}
        for c, rs in by.items():
            for r in rs:
                r["time_to_target_s"], r["time_to_target_step"] = (
                    time_to(r["curve"], target) if target is not None else (None, None))
                last = r["curve"][-1] if r["curve"] else {}
                r["final_accuracy"] = last.get("accuracy")
                r["final_loss"] = last.get("loss")
                r["train_s"] = last.get("seconds")
            row = {"runs": len(rs),
                   "failed": sum(1 for r in doc["runs"] if r["rate"] == rate
                                 and r["config"] == c and r.get("failed")),
                   "reached": sum(1 for r in rs if r["time_to_target_s"] is not None)}
            for key in ("time_to_target_s", "final_accuracy", "final_loss", "mean_step_ms",
                        "train_s"):
                row[key], row[key + "_range"] = med_range([r[key] for r in rs])
            rows[c] = row
        ratios = []
        oasr_c = [c for c in doc["configs"] if c.startswith("oasr ") and c != "oasr off"]
        ddp_c = [c for c in doc["configs"] if c.startswith("ddp ")]
        pairs = [(c, d) for c in oasr_c for d in ddp_c]
        if "oasr off" in doc["configs"]:
            pairs += [(c, "oasr off") for c in oasr_c]
        for c, base in pairs:
            ratio = {"config": c, "against": base}
            for key in ("time_to_target_s", "mean_step_ms", "train_s"):
                a, b = rows[c][key], rows[base][key]
                # > 1: the config is faster than what it is set against.
                ratio[key] = b / a if a and b else None
                per_seed = []
                for r in by[c]:
                    o = next((x for x in by[base] if x["seed"] == r["seed"]), None)
                    if o and r[key] and o[key]:
                        per_seed.append(o[key] / r[key])
                ratio[key + "_per_seed_range"] = ([min(per_seed), max(per_seed)]
                                                  if per_seed else None)
            ratios.append(ratio)
        out.append({"rate": rate, "target": target, "target_note": target_note,
                    "configs": rows, "ratios": ratios})
    return out


def fmt(v, spec, rng=None, scale=1.0, unit=""):
    if v is None:
        return "-"
    s = f"{v * scale:{spec}}{unit}"
    if rng:
        s += f" [{rng[0] * scale:{spec}}-{rng[1] * scale:{spec}}]"
    return s


def write_report(doc, md_path):
    a = doc["args"]
    lines = [f"# Time to accuracy with gradient compression: oasr against PyTorch DDP "
             f"PowerSGD, {doc['model']} on 2 emulated nodes", "",
             f"{doc['date']}; {doc['machine']}; load average (1 min) {doc['load_before'][0]:.2f} "
             f"before, {doc['load_after'][0]:.2f} after (each run's start: "
             f"{min(doc['run_loads']):.2f}-{max(doc['run_loads']):.2f}); oasr {doc['commit']}"
             f"{' (work tree modified)' if doc.get('dirty') else ''}; PyTorch side: torch "
             f"{doc['torch']}, torchvision {doc['torchvision']} (gloo); export: Debian torch "
             f"{doc['export_torch']}.", "",
             f"* Where: scripts/cluster.sh, 2 nodes, one rank a node, 1 compute thread a rank "
             f"(rank r pinned to CPU r of {os.cpu_count()}), links shaped to "
             f"{', '.join(doc['rates'])}.",
             f"* Model: {doc['model_desc']}. Data: {doc['data_desc']}.",
             f"* Training: batch {a['batch']}/rank, {a['steps']} steps, momentum SGD "
             f"(momentum {a['momentum']:g}, lr {a['lr']:g}, no weight decay), no augmentation; "
             + (f"accuracy every {a['eval_every']} steps: the training batches' since the "
                "previous point (both ranks, each forward pass before its update; no sequence "
                "repeats, so the model has not trained on them), as oasr-run's progress line "
                "reports it. " if doc.get("tokens") else
                f"test accuracy every {a['eval_every']} steps on all "
                f"{doc['test_evaluated']} evaluated test records (BatchNorm on batch "
                "statistics, as oasr-run evaluates). ") + "Compression starts after "
             f"{a['compress_start']} uncompressed steps on both sides (oasr --compress-start, "
             "PyTorch start_powerSGD_iter).",
             f"* Seeds {', '.join(str(s) for s in doc['seeds'])} (the data order; the initial "
             "weights are the same in every run), configs interleaved within each seed round.",
             f"* Initial check: {doc['init_check_note']}.",
             "* oasr's link model: " + ("; ".join(
                 f"{r}: `oasr-bench comm` (as bench/run_cluster.sh, allreduce only; "
                 f"{c['seconds']:.0f} s): alpha {c['alpha_s'] * 1e3:.3f} ms, beta "
                 f"{c['beta_s_per_byte'] * 1e9:.2f} ns/B, communication thread at "
                 f"{c['comm_priority']} priority, every oasr run given it with --comm"
                 for r, c in doc["calibration"].items()) or
                 "none (--no-calibrate): oasr-run plans, and --compress=auto chooses, from "
                 "its default allreduce model") + ".",
             "* *Seconds* are training wall time, evaluations excluded, from the first step "
             "(start-up excluded on both sides). *Time to target*: the seconds at the first "
             "evaluation at or above the target (so it is rounded up to an evaluation); "
             "*reached*: runs that got there. *Mean step*: each tool's own mean (oasr-run: "
             "steps 2..N, or those after its re-plan in the runs that re-plan, the "
             "uncompressed ones; DDP: steps 2..N; both hold the uncompressed first steps). "
             "*Final*: at the last step. "
             "Cells: median over seeds [range].", ""]
    for s in doc["summary"]:
        tgt = "-" if s["target"] is None else f"{100 * s['target']:.1f} %"
        lines += [f"## {s['rate']}", "",
                  f"Target: {tgt} ({s['target_note']}).", "",
                  "| config | time to target (s) | reached | final accuracy | final loss | "
                  "mean step (ms) | training wall (s) |",
                  "|---|---|---|---|---|---|---|"]
        for c, r in s["configs"].items():
            failed = f" ({r['failed']} failed)" if r["failed"] else ""
            lines.append(
                f"| {c}{failed} | {fmt(r['time_to_target_s'], '.1f', r['time_to_target_s_range'])} "
                f"| {r['reached']}/{r['runs']} | "
                f"{fmt(r['final_accuracy'], '.1f', r['final_accuracy_range'], 100, '')} % | "
                f"{fmt(r['final_loss'], '.4f', r['final_loss_range'])} | "
                f"{fmt(r['mean_step_ms'], '.1f', r['mean_step_ms_range'])} | "
                f"{fmt(r['train_s'], '.1f', r['train_s_range'])} |")
        if s["ratios"]:
            lines += ["", "Speed-up of the first config over the second (the second's median "
                      "over the first's; > 1: the first is faster; per-seed range in brackets):",
                      "", "| config | against | time to target | mean step | training wall |",
                      "|---|---|---|---|---|"]
            for q in s["ratios"]:
                cells = []
                for key in ("time_to_target_s", "mean_step_ms", "train_s"):
                    v, rng = q[key], q[key + "_per_seed_range"]
                    cells.append("-" if v is None else
                                 f"{v:.2f}x" + (f" [{rng[0]:.2f}-{rng[1]:.2f}]" if rng else ""))
                lines.append(f"| {q['config']} | {q['against']} | " + " | ".join(cells) + " |")
        lines += ["", ("Accuracy of the training batches since the previous point (%)"
                       if doc.get("tokens") else "Test accuracy (%)")
                  + " and seconds at each evaluation, median over seeds:", ""]
        for c in s["configs"]:
            rs = [r for r in doc["runs"] if r["rate"] == s["rate"] and r["config"] == c
                  and not r.get("failed")]
            steps = sorted({p["step"] for r in rs for p in r["curve"]})
            pts = []
            for st in steps:
                at = [p for r in rs for p in r["curve"] if p["step"] == st]
                pts.append(f"{st}: {100 * statistics.median(p['accuracy'] for p in at):.0f} "
                           f"({statistics.median(p['seconds'] for p in at):.0f} s)")
            lines.append(f"* {c}: " + ", ".join(pts))
        notes = []
        for c in s["configs"]:
            first = next((r for r in doc["runs"] if r["rate"] == s["rate"]
                          and r["config"] == c and r.get("compress_lines")), None)
            if first:
                notes += [f"{c}, seed {first['seed']}:"] + [f"  {l}" for l in
                                                            first["compress_lines"][:6]]
        if notes:
            lines += ["", "What oasr-run says about compression (each config's first run):",
                      "", "```"] + notes + ["```"]
    fails = [r for r in doc["runs"] if r.get("failed")]
    if fails:
        lines += ["", "## Failed runs", ""]
        lines += [f"* {r['rate']} seed {r['seed']} {r['config']}: {r['error'][-300:]!r}"
                  for r in fails]
    lines += ["", "## Where the two sides differ", "", doc["differences"].strip(), "",
              "## Commands", "", "```sh", f"bench/run_compress.py {doc['argv']}"]
    lines += [c for c in doc["commands"]] + ["```", ""]
    with open(md_path, "w") as f:
        f.write("\n".join(lines))


DIFFERENCES = """
* The same: the weights (the ONNX file's initializers, copied into the
  torchvision model by name), the data and its order (oasr's per-epoch
  std::mt19937_64 shuffle ported to Python, record i of the permutation to
  rank i % 2), the pixels (byte / 255, no normalisation, no augmentation),
  the loss (mean cross-entropy), the update (v' = 0.9 v + g, p' = p - lr v'),
  the evaluation (each rank's test records rank, rank + 2, ... in full
  batches, BatchNorm on batch statistics, the running statistics restored)
  and the clock (training wall time from the first step, evaluations off it).
* Kernels differ (oneDNN through oasr's executor against PyTorch's CPU
  kernels), so the float results part after the first step; the runs then
  follow different but statistically alike trajectories.
* Communication: oasr's planned fused allreduces on a communication thread
  (Open MPI over TCP, the cluster's allreduce rules) against DDP's 25 MB
  buckets over gloo; oasr's own compression (--compress) against PyTorch's
  powerSGD_hook (per bucket: the P and Q allreduces, 1-D and small tensors
  uncompressed at min_compression_rate 2, warm-started Q, error feedback).
  DDP does not broadcast BN buffers (broadcast_buffers off; oasr never
  does). PyTorch's hook is run with one change (ddp_train.py's
  ordered_powersgd_hook): while it compresses, a bucket's exchange starts
  only after the previous bucket's has finished, because over gloo the
  hook's callback-issued collectives race the next bucket's and the ranks
  issued them in different orders (gloo aborted on the first compressed
  step at 200 Mbit/s); backward then waits at a bucket boundary for the
  previous bucket's few small collectives.
* The clock's edges: oasr-run's includes its re-plans and the allreduce of
  each progress line (5 doubles); ddp_train.py's train-loss allreduce runs
  inside its evaluation, off the clock.
"""

DIFFERENCES_TOKENS = """
* The same: the weights (the ONNX file's initializers, copied into
  bench/token_model.py's module by name: every parameter), the
  data and its order (oasr's per-epoch std::mt19937_64 shuffle of the
  sequences ported to Python, sequence i of the permutation to rank i % 2),
  the ids (int64, the padding mask from id 0 on both), the loss (mean
  cross-entropy over sequences), the update (v' = 0.9 v + g,
  p' = p - lr v'), the accuracy (the training batches' correct predictions
  since the previous point, summed over both ranks, from the forward pass
  before each update) and the clock (training wall time from the first
  step; oasr-run's is the sum of its progress intervals, each interval's
  sequences over its seq/s, the progress line's own 5-double allreduce
  between intervals; ddp_train.py's leaves its accuracy and loss allreduce
  off the clock).
* Kernels differ (oneDNN through oasr's executor against PyTorch's CPU
  kernels; PyTorch's attention is its own multi_head_attention_forward,
  oasr's the exported graph's MatMul, Softmax and Where), so the float
  results part after the first step; the runs then follow different but
  statistically alike trajectories.
* Communication: oasr's planned fused allreduces on a communication thread
  (Open MPI over TCP, the cluster's allreduce rules) against DDP's 25 MB
  buckets over gloo (the whole model is one bucket or two); oasr's own
  compression (--compress) against PyTorch's powerSGD_hook (per bucket: the
  P and Q allreduces, 1-D and small tensors uncompressed at
  min_compression_rate 2, warm-started Q, error feedback). PyTorch's hook is
  run with one change (ddp_train.py's ordered_powersgd_hook): while it
  compresses, a bucket's exchange starts only after the previous bucket's
  has finished (over gloo its callback-issued collectives race the next
  bucket's).
* The token embedding's gradient is dense on both sides (PyTorch's
  nn.Embedding without sparse=True; oasr's Gather gradient): in `bert`,
  4.2 of the 7.4 MB, a 8192 x 128 matrix to PowerSGD on both sides.
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="results name (default compress-MODEL-2xRATES-DATE)")
    p.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rates", default="200mbit", help="comma-separated tc rates")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--batch", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--oasr-configs", default="off,auto",
                   help="oasr-run --compress values: off, auto, auto:R, powersgd:R; "
                        "VALUE+replan also passes --replan=once, VALUE+bf16 "
                        "--grad-dtype=bf16")
    p.add_argument("--ddp-hooks", default="powersgd:4",
                   help="ddp_train.py --hook values: powersgd:R, powersgd:R+bf16, none, "
                        "bf16, fp16")
    p.add_argument("--compress-start", type=int, default=10,
                   help="steps sent uncompressed first, both sides (>= 2: PyTorch's minimum)")
    p.add_argument("--target", default="rel:0.9",
                   help="test accuracy in [0, 1], or rel:F (F x oasr off's median final)")
    p.add_argument("--data", help="CIFAR-10 binary directory (default: generated)")
    p.add_argument("--noise", type=float, default=2.0,
                   help="the generated data's noise (scripts/gen_cifar_like.py --noise)")
    p.add_argument("--model", default="resnet18",
                   help="a torchvision classification model, or bert / bert-tiny "
                        "(bench/token_model.py, on generated token data)")
    p.add_argument("--sequences", type=int, default=0,
                   help="token models: sequences generated (default: steps x batch x 2, "
                        "rounded up to 1024, so none repeats)")
    p.add_argument("--oasr-args", default="", help="more oasr-run options (split as by a shell)")
    p.add_argument("--cluster-name", default="compress",
                   help="scripts/cluster.sh --name: one of several clusters on the host")
    p.add_argument("--subnet", default="10.77.0.0/24",
                   help="the cluster's subnet (cluster.sh up --subnet); node 0 is its "
                        "first host, PyTorch's rendezvous")
    p.add_argument("--run-timeout", type=int, default=3600, help="seconds a run may take")
    p.add_argument("--skip-init-check", action="store_true")
    p.add_argument("--no-calibrate", action="store_true",
                   help="no oasr-bench comm calibration: oasr plans (and auto chooses) "
                        "from its default link model")
    p.add_argument("--work", help="keep the model and data here (default: a temporary "
                   "directory, removed at the end)")
    p.add_argument("--export-onnx", help=argparse.SUPPRESS)
    p.add_argument("--classes", type=int, default=10, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.export_onnx:
        if a.model in TOKEN_MODELS:
            return export_token_onnx(a.export_onnx, a.model, a.batch)
        return export_onnx(a.export_onnx, a.model, a.classes)

    rates = [r for r in a.rates.split(",") if r]
    oasr_cfgs = [c for c in a.oasr_configs.split(",") if c]
    ddp_cfgs = [c for c in a.ddp_hooks.split(",") if c]
    configs = [f"oasr {c}" for c in oasr_cfgs] + [f"ddp {h}" for h in ddp_cfgs]
    if not rates or not configs:
        p.error("no rates or no configs")
    if a.seeds < 1 or a.steps < 1 or a.eval_every < 1 or a.steps % a.eval_every:
        p.error("--seeds, --steps, --eval-every must be >= 1 and --steps a multiple of "
                "--eval-every (the last evaluation is the final accuracy)")
    if a.compress_start < 2:
        p.error("--compress-start must be >= 2: PyTorch's PowerSGD with error feedback and "
                "warm start starts at step 2 at the earliest")
    if a.target.startswith("rel:"):
        try:
            float(a.target[4:])
        except ValueError:
            p.error(f"--target={a.target}: expected rel:F with a number F")
    else:
        try:
            if not 0 <= float(a.target) <= 1:
                raise ValueError
        except ValueError:
            p.error(f"--target={a.target}: expected an accuracy in [0, 1] or rel:F")
    oasr = os.path.join(a.build, "bin", "oasr-run")
    if not os.access(oasr, os.X_OK):
        sys.exit(f"run_compress: {oasr}: no oasr-run (build it first)")
    if any(c != "off" for c in oasr_cfgs):
        helptext = subprocess.run([oasr, "--help"], capture_output=True, text=True).stdout
        if "--compress" not in helptext:
            sys.exit(f"run_compress: {oasr} has no --compress option (a build from before "
                     "gradient compression): run --oasr-configs off, or rebuild")
    date = datetime.datetime.now(datetime.timezone.utc)
    name = a.out or f"compress-{a.model}-2x{'-'.join(rates)}-{date:%Y-%m-%d}"
    md_path, json_path = (os.path.join(a.out_dir, name + ext) for ext in (".md", ".json"))
    for f in (md_path, json_path):
        if os.path.exists(f):
            sys.exit(f"run_compress: {f} exists: results files are never overwritten; "
                     "choose another --out")

    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    load_before = os.getloadavg()
    work = a.work or tempfile.mkdtemp(prefix="oasr-ttacc-")
    os.makedirs(work, exist_ok=True)
    try:
        run_benchmark(a, rates, oasr_cfgs, ddp_cfgs, configs, oasr, work, name, md_path,
                      json_path, load_before, date)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


def token_setup(a, work):
    """The token model's data file and ONNX export (bench/token_model.py)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import token_model

    cfg, gen = token_model.MODELS[a.model], token_model.DATA[a.model]
    sequences = a.sequences or -(-a.steps * a.batch * 2 // 1024) * 1024
    data = os.path.join(work, f"{a.model}-tokens-{sequences}.bin")
    if not os.path.exists(data + ".labels"):
        token_model.generate(data, cfg["vocab"], cfg["seq"], cfg["classes"],
                             sequences=sequences, **gen)
    model = os.path.join(work, f"{a.model}-b{a.batch}.onnx")
    if not os.path.exists(model):
        subprocess.run([PY, os.path.abspath(__file__), "--export-onnx", model, "--model",
                        a.model, "--batch", str(a.batch)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    params = (cfg["vocab"] * cfg["dim"] + cfg["seq"] * cfg["dim"]
              + cfg["layers"] * (4 * cfg["dim"] * cfg["dim"] + 2 * cfg["dim"] * cfg["ff"]
                                 + 9 * cfg["dim"] + cfg["ff"])
              + cfg["dim"] * cfg["classes"] + cfg["classes"])
    model_desc = (f"bench/token_model.py's {a.model}, BERT-like: token embedding "
                  f"{cfg['vocab']} x {cfg['dim']}, learned positions ({cfg['seq']}), "
                  f"{cfg['layers']} nn.TransformerEncoderLayer (post-norm, width {cfg['dim']}, "
                  f"{cfg['heads']} heads, feed-forward {cfg['ff']}, GELU, no dropout) with the "
                  f"padding mask of id 0, mean over positions, a linear classifier of "
                  f"{cfg['classes']} classes; {params / 1e6:.2f} M parameters, "
                  f"{4 * params / 1e6:.1f} MB of f32 gradients; after torch.manual_seed(0), "
                  "exported to ONNX in training mode by Debian's torch (TorchScript exporter, "
                  f"opset 17), every one of its parameters an initializer of the same name")
    data_desc = (f"generated by bench/token_model.py (NOT a corpus): {sequences} sequences "
                 f"of {cfg['seq'] // 2}-{cfg['seq']} token ids, "
                 f"padded to {cfg['seq']} with id 0, classes uniform over {cfg['classes']}; each "
                 f"class has {gen['topic']} topic ids, a position is one of its class's with "
                 f"probability {gen['signal']:g}, else a Zipf({gen['zipf']:g}) background id; "
                 f"{100 * gen['label_noise']:g} % of labels redrawn uniformly; generator seed "
                 f"{gen['seed']}; every sequence is used at most once in a run")
    return data, model, cfg["classes"], model_desc, data_desc


def run_benchmark(a, rates, oasr_cfgs, ddp_cfgs, configs, oasr, work, name, md_path,
                  json_path, load_before, date):
    tokens = a.model in TOKEN_MODELS
    master = master_of(a.subnet)
    if tokens:
        data, model, classes, model_desc, data_desc = token_setup(a, work)
        test_evaluated = None
    elif a.data:
        data = os.path.abspath(a.data)
        data_desc = f"`{a.data}` (CIFAR-10 binary records)"
    else:
        data = os.path.join(work, f"cifar-like-noise{a.noise:g}")
        if not os.path.exists(os.path.join(data, "test_batch.bin")):
            subprocess.run([PY, os.path.join(ROOT, "scripts", "gen_cifar_like.py"), data,
                            "--noise", str(a.noise)], check=True, stdout=subprocess.DEVNULL)
        data_desc = (f"generated by scripts/gen_cifar_like.py --noise {a.noise:g} (10 classes "
                     "of coloured gratings and shapes under noise and jitter, 10000 train / "
                     "2000 test 32x32x3 records; NOT CIFAR-10)")
    if not tokens:
        model, classes, test_evaluated = cifar_setup(a, data, work)
        model_desc = (f"torchvision {a.model}(weights=None, num_classes={classes}) after "
                      "torch.manual_seed(0), input 3x32x32, exported to ONNX in training "
                      "mode by Debian's torch (TorchScript exporter, opset 14)")
    export_torch = subprocess.run([PY, "-c", "import torch; print(torch.__version__)"],
                                  capture_output=True, text=True).stdout.strip()
    extra = shlex.split(a.oasr_args)
    run_all(a, rates, oasr_cfgs, ddp_cfgs, configs, oasr, work, name, md_path, json_path,
            load_before, date, tokens, master, data, model, classes, test_evaluated,
            model_desc, data_desc, export_torch, extra)


def cifar_setup(a, data, work):
    """The CIFAR-format data's classes and test records, and the export."""
    labels = []
    for f in [f"data_batch_{b}.bin" for b in range(1, 6)] + ["test_batch.bin"]:
        with open(os.path.join(data, f), "rb") as fh:
            labels.append(fh.read()[::3073])
    classes = max(max(l) for l in labels) + 1
    test_records = len(labels[-1])
    # Every rank evaluates full batches of its records rank, rank + 2, ...
    test_evaluated = sum((len(range(r, test_records, 2)) // a.batch) * a.batch for r in (0, 1))
    model = os.path.join(work, f"{a.model}-{classes}c-32.onnx")
    if not os.path.exists(model):
        subprocess.run([PY, os.path.abspath(__file__), "--export-onnx", model, "--model",
                        a.model, "--classes", str(classes)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return model, classes, test_evaluated


def run_all(a, rates, oasr_cfgs, ddp_cfgs, configs, oasr, work, name, md_path, json_path,
            load_before, date, tokens, master, data, model, classes, test_evaluated,
            model_desc, data_desc, export_torch, extra):
    comm = {}  # rate -> the calibration oasr-run plans with

    def oasr_cmd(cfg, seed, steps, log_every, eval_every=None, rate=None):
        cmd = [oasr, model, f"--data={'tokens' if tokens else 'cifar10'}:{data}",
               f"--batch={a.batch}",
               f"--steps={steps}", f"--log-every={log_every}", "--threads=1",
               "--optimizer=momentum", f"--momentum={a.momentum:g}", f"--lr={a.lr:g}",
               f"--seed={seed}"]
        if rate in comm:
            cmd.append(f"--comm={comm[rate]['file']}")
        if eval_every and not tokens:  # a token file has no test set
            cmd.append(f"--eval-every={eval_every}")
        # CFG+replan: also --replan=once (the groups and forms planned again
        # on the run's measured compute after its first steps); CFG+bf16:
        # also --grad-dtype=bf16 (the factors and plain groups in bf16).
        form, *flags = cfg.split("+")
        if form != "off":
            cmd += [f"--compress={form}", f"--compress-start={a.compress_start}"]
        if "replan" in flags:
            cmd.append("--replan=once")
        if "bf16" in flags:
            cmd.append("--grad-dtype=bf16")
        return cmd + extra

    def ddp_cmd(hook, seed, steps, eval_every, port):
        return [TORCH_PY, os.path.join(ROOT, "bench", "ddp_train.py"), "--data", data,
                "--model", a.model, "--init-onnx", model, f"--master={master}",
                f"--port={port}", f"--batch={a.batch}", f"--steps={steps}",
                f"--eval-every={eval_every}", "--optimizer=momentum",
                f"--momentum={a.momentum:g}", f"--lr={a.lr:g}", f"--seed={seed}",
                f"--hook={hook}", f"--powersgd-start={a.compress_start}"]

    def launch(cmd):
        t0 = time.monotonic()
        try:
            r = subprocess.run([CLUSTER, f"--name={a.cluster_name}", "run", "2", "--"] + cmd,
                               capture_output=True, text=True, timeout=a.run_timeout)
            return r.returncode, r.stdout, r.stderr, time.monotonic() - t0
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            return None, out, f"timed out after {a.run_timeout} s", time.monotonic() - t0

    def shown(cmd):
        return " ".join(shlex.quote(c) for c in cmd).replace(work, "WORK").replace(ROOT + "/", "")

    runs, run_loads, commands = [], [], []
    init_check = None
    port = 29500
    torch_build = torchvision_build = None
    try:
        for ri, rate in enumerate(rates):
            cluster(a.cluster_name, "up", "2", f"--rate={rate}", f"--subnet={a.subnet}")
            if not a.no_calibrate:
                # The link as oasr-run's planner (and --compress=auto) needs it:
                # bench/run_cluster.sh's calibration, allreduce only.
                cfile = os.path.join(work, f"comm-2x{rate}.json")
                cal = [os.path.join(a.build, "bin", "oasr-bench"), "comm", "--quiet",
                       "--collectives=allreduce", "--min-bytes=65536", "--latency-bytes=4096",
                       "--max-bytes=67108864", "--seconds-per-size=0.2", "--burst-us=20000",
                       "--compute-threads=1", "--comm-priority=auto", f"--out={cfile}"]
                rc, out, err, wall = launch(cal)
                if rc != 0 or not os.path.exists(cfile):
                    sys.exit(f"run_compress: the calibration at {rate} failed:\n"
                             f"{(out + err)[-1500:]}")
                with open(cfile) as f:
                    c = json.load(f)
                comm[rate] = {"file": cfile, "seconds": round(wall, 1),
                              **{k: c.get(k) for k in ("alpha_s", "beta_s_per_byte",
                                                       "overlap_rate", "compute_rate",
                                                       "comm_priority")}}
                if ri == 0:
                    commands.append(f"scripts/cluster.sh run 2 -- {shown(cal)}")
                print(f"{rate}: calibrated in {wall:.0f} s: alpha {c.get('alpha_s', 0) * 1e3:.3f} "
                      f"ms, beta {c.get('beta_s_per_byte', 0) * 1e9:.2f} ns/B, "
                      f"{c.get('comm_priority')} priority", flush=True)
            if ri == 0 and not a.skip_init_check:
                rc, out, err, _ = launch(oasr_cmd("off", 1, 1, 1, rate=rate))
                o = parse_oasr(out) if rc == 0 else {}
                port += 1
                rc2, out2, err2, _ = launch(ddp_cmd("none", 1, 1, 0, port))
                d = parse_ddp(out2) if rc2 == 0 else None
                if not o.get("first_loss") or not d:
                    sys.exit("run_compress: the initial check's runs failed:\n"
                             f"{(out + err)[-1500:]}\n{(out2 + err2)[-1500:]}")
                # oasr-run prints the loss to 4 decimals.
                ok = abs(o["first_loss"] - d["first_loss"]) <= 2e-4
                init_check = {"oasr_first_loss": o["first_loss"],
                              "ddp_first_loss": d["first_loss"], "equal": ok,
                              "ddp_init": d["init"]}
                print(f"initial check: first loss oasr {o['first_loss']:.4f}, PyTorch "
                      f"{d['first_loss']:.6f}: {'equal' if ok else 'DIFFERENT'}; "
                      f"{d['init']}", flush=True)
                if not ok:
                    sys.exit("run_compress: oasr's and PyTorch's first losses differ: the "
                             "weights or the first batch are not the same "
                             "(--skip-init-check to go on anyway)")
            for seed in range(1, a.seeds + 1):
                for cfg in configs:
                    side, what = cfg.split(" ", 1)
                    port += 1
                    cmd = (oasr_cmd(what, seed, a.steps, a.eval_every, a.eval_every, rate)
                           if side == "oasr" else
                           ddp_cmd(what, seed, a.steps, a.eval_every, port))
                    if seed == 1 and ri == 0:
                        commands.append(f"scripts/cluster.sh run 2 -- {shown(cmd)}")
                    load0 = load_now()
                    run_loads.append(load0)
                    rc, out, err, wall = launch(cmd)
                    rec = {"rate": rate, "seed": seed, "config": cfg, "load": load0,
                           "run_wall_s": round(wall, 1)}
                    parsed = None
                    out = out.replace(work, "WORK")
                    if rc == 0:
                        parsed = (parse_oasr(out, 2 * a.batch if tokens else None)
                                  if side == "oasr" else parse_ddp(out))
                    if not parsed or len(parsed["curve"]) != a.steps // a.eval_every:
                        rec.update(failed=True, error=(out + err)[-2000:], returncode=rc)
                        print(f"{rate} seed {seed} {cfg}: FAILED (exit {rc})\n"
                              f"{(out + err)[-800:]}", flush=True)
                        if rc is None:  # a timeout: whatever is left goes with the nodes
                            cluster(a.cluster_name, "down", check=False)
                            cluster(a.cluster_name, "up", "2", f"--rate={rate}", f"--subnet={a.subnet}")
                    else:
                        rec.update(parsed)
                        if side == "ddp":
                            torch_build = parsed["torch"]
                            torchvision_build = parsed["torchvision"]
                        last = parsed["curve"][-1]
                        print(f"{rate} seed {seed} {cfg}: step {parsed['mean_step_ms']:.1f} ms, "
                              f"{last['seconds']:.1f} s, final accuracy "
                              f"{100 * last['accuracy']:.1f} %, loss {last['loss']:.4f} "
                              f"(load {load0})", flush=True)
                    runs.append(rec)
    finally:
        cluster(a.cluster_name, "down", check=False)

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "lib",
                                 "runtime", "passes", "tools", "include"],
                                capture_output=True, text=True).stdout.strip())
    if init_check is None:
        init_note = "skipped (--skip-init-check)"
    else:
        ini = init_check["ddp_init"]
        init_note = (f"oasr's first loss (seed 1, both ranks) {init_check['oasr_first_loss']:.4f}, "
                     f"PyTorch's {init_check['ddp_first_loss']:.6f} "
                     f"({'equal to oasr-run' if init_check['equal'] else 'DIFFERENT'}'s 4 "
                     f"decimals); the seeded {'token_model' if tokens else 'torchvision'} "
                     f"model had {ini.get('seeded_parameters_equal')} of {ini.get('parameters')} "
                     "parameters bit for bit equal to the export's (Debian torch against PyPI "
                     "torch), and PyTorch copies all of them"
                     + ("" if tokens else " and the BN statistics") + " from the ONNX file")
    doc = {"benchmark": "compress", "date": date.strftime("%Y-%m-%dT%H:%MZ"),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores, {cpu_name()}, "
                      f"kernel {platform.release()}",
           "load_before": list(load_before), "load_after": list(os.getloadavg()),
           "run_loads": run_loads or [load_now()], "commit": commit, "dirty": dirty,
           "torch": torch_build, "torchvision": torchvision_build,
           "export_torch": export_torch, "model": a.model,
           "model_desc": model_desc, "tokens": tokens, "subnet": a.subnet,
           "data_desc": data_desc, "classes": classes, "test_evaluated": test_evaluated,
           "rates": rates, "seeds": list(range(1, a.seeds + 1)), "configs": configs,
           "target_spec": a.target, "init_check": init_check, "init_check_note": init_note,
           "calibration": {r: {k: v for k, v in c.items() if k != "file"}
                           for r, c in comm.items()},
           "args": {k: v for k, v in vars(a).items() if k not in ("export_onnx", "classes")},
           "argv": " ".join(shlex.quote(x) for x in sys.argv[1:]),
           "commands": commands,
           "differences": DIFFERENCES_TOKENS if tokens else DIFFERENCES, "runs": runs}
    doc["summary"] = summarize(doc)
    os.makedirs(a.out_dir, exist_ok=True)
    with open(json_path, "w") as f:
        json.dump(doc, f, indent=1)
    write_report(doc, md_path)
    print(open(md_path).read())
    print(f"wrote {md_path} and {json_path}")


if __name__ == "__main__":
    main()
