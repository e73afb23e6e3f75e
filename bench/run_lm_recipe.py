#!/usr/bin/python3
"""Language-model recipe: oasr-run against PyTorch on the same training run.

    python3 bench/run_lm_recipe.py --out bench/results/lm-recipe-DATE.md
        [--oasr-run build/bin/oasr-run] [--torch-python /root/venv-torch/bin/python]
        [--seeds 1,2,3] [--steps 300] [--eval-every 50] [--np2] [--work DIR]
    python3 bench/run_lm_recipe.py --check      # a few steps, compare, no results

Both sides train the same character-level GPT from the same initial weights
on the same batches in the same order, with the same optimizer, schedule,
clipping and accumulation, and evaluate on the same validation windows:

  * corpus: the Python standard library's sources on this machine
    (/usr/lib/python3.*/**/*.py sorted by path, concatenated, bytes above
    127 dropped), the first --corpus-bytes of it; the vocabulary is the
    sorted set of bytes present; 90 % train / 10 % val, written as
    little-endian u16 token ids (nanoGPT's train.bin / val.bin);
  * model: a nanoGPT-style GPT (token + learned position embedding,
    --n-layer pre-LN blocks of causal self-attention, its mask a
    register_buffer of 0/-inf added to the scores, and a GELU MLP, final
    LayerNorm, an untied head; dropout 0), initialised as nanoGPT does after
    torch.manual_seed(SEED), exported once per seed with oasr.export under
    Debian's torch (--export-python: the TorchScript exporter in training
    mode, which also checks oasr's loss on a batch against PyTorch's), its
    state_dict saved at the same moment as PyTorch's starting point;
  * recipe: AdamW (lr --lr, betas 0.9,0.95, eps 1e-8, weight decay --wd on
    every tensor of rank >= 2, none on biases and LayerNorm weights: oasr's
    --decay-exclude=1d and two PyTorch param groups), --warmup linear
    warmup steps from 0 then cosine to --min-lr (oasr --lr-schedule=cosine;
    PyTorch LinearLR + CosineAnnealingLR chained by SequentialLR, as
    test/runtime/Inputs/check_lr_schedule.py checks them), global-norm
    clipping --clip, --accumulate micro-batches of --batch windows per step,
    --steps optimizer steps, f32, --threads threads on each side;
  * data order: oasr's token loader cuts a file into windows of T + 1 tokens
    at stride T and shuffles them per epoch with a Fisher-Yates over
    a keyed 4-round Feistel permutation of the windows per (seed, epoch)
    (runtime/data/DataLoader.cpp, ImplicitOrder; its results file of
    2026-12-02 ran the earlier std::mt19937_64 shuffle); this script replays
    it in pure Python, so PyTorch
    sees the same micro-batches in the same order;
  * evaluation: every --eval-every steps, in eval mode, oasr evaluates its
    --eval-data loader's full batches (the val windows in that loader's own
    epoch-0 order, the last partial batch dropped; runtime/train/
    Evaluation.cpp); PyTorch evaluates the same batches, the loss the mean
    of the per-batch means.

Every run is verified: oasr's first-step loss (its metrics file's first
line, computed on the initial weights) must match PyTorch's to --loss-rtol
relative, and the learning rate of every step to 1e-9; a run that does not
is reported as such and the script exits 1. Seeds run interleaved (oasr,
PyTorch, oasr, PyTorch ...), one process at a time.

Timing: the training wall time at each evaluation, without the
evaluations (oasr: its `eval step S  time T s` lines; PyTorch: the summed
wall time of its steps), and the median step (oasr: its metrics file's
step_ms, the interval's wall time over its steps; PyTorch: its own per-step wall time; on both the
first step and each right after an evaluation left out, as oasr's metrics
interval of such a step holds the evaluation). Time to PyTorch's final
validation loss: the first evaluation at which a side's loss is at most
PyTorch's final one times 1 + --reach-rtol (the runs agree to float
rounding, so a strict comparison would be a coin flip; the strict step is
reported too).

--np2 also runs oasr-run --np 2 on each seed with half the batch per rank
(the same global batch and, rank r taking every other window of the same
shuffle, the same windows per step) against PyTorch in one process on the
global batch with twice the threads (the same cores), evaluated on the
2-rank run's validation batches.

A run takes about half a minute per seed and side at the defaults (300
steps of 30-45 ms on one core, six evaluations of 292 batches, oasr's
compile); the whole benchmark with --np2 (15 runs) about 8 minutes on an
idle 2-core host, up to about 25 where every run waits --max-wait for a
busy host (17 minutes on 2026-12-02).

Writes --out (markdown) and refuses to overwrite it. The oasr-run binary
should be a copy that nothing relinks during the run. PyTorch: PyPI's build
in --torch-python, set up once with
    python3 -m venv /root/venv-torch && /root/venv-torch/bin/pip install torch numpy
"""
import argparse
import datetime
import glob
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
sys.path.insert(0, BENCH)
from results_io import new_results  # noqa: E402
from run_precision import cpu_name, fmt_load, git_commit  # noqa: E402

DEBIAN_PY = "/usr/bin/python3"
TORCH_VENV_PY = "/root/venv-torch/bin/python"

# ---------------------------------------------------------------------------
# oasr's window order


M64 = (1 << 64) - 1


def mix64(x):
    """runtime/data/DataLoader.cpp's mix64 (splitmix64)."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def implicit_order(count, seed, epoch):
    """runtime/data/DataLoader.cpp's ImplicitOrder, the order of a token
    file's windows: a 4-round Feistel network, cycle-walked into
    [0, count)."""
    half = 1
    while (1 << (2 * half)) < count:
        half += 1
    mask = (1 << half) - 1
    keys = [mix64((seed * 0x9E3779B97F4A7C15 + epoch * 4 + r) & M64)
            for r in range(4)]

    def at(i):
        x = i
        while True:
            left, right = x >> half, x & mask
            for k in keys:
                left, right = right, left ^ (mix64(right ^ k) & mask)
            x = (left << half) | right
            if x < count:
                return x
    return at


def epoch_shard(count, rank, size, seed, epoch, start=0):
    """runtime/data/DataLoader.cpp's EpochWalk over a token file: this
    rank's windows of one epoch, element start + rank + k * size of the
    epoch's implicit order."""
    at = implicit_order(count, seed, epoch)
    return [at(i) for i in range(start + rank, count, size)]


def epoch_walk(count, rank, size, seed, n):
    """The first n windows EpochWalk::next() gives this rank, epoch after
    epoch."""
    out, epoch = [], 0
    while len(out) < n:
        out.extend(epoch_shard(count, rank, size, seed, epoch))
        epoch += 1
    return out[:n]


def train_order(cfg, seed):
    """The windows of every micro-batch as PyTorch takes them on one
    process: [steps * accumulate][global batch]. With R ranks of batch B/R,
    rank r's k-th micro-batch is its walk's k-th run of B/R windows; the
    step's gradient is the mean over the ranks, so the single-process
    micro-batch is the ranks' micro-batches together."""
    ranks, b = cfg["ranks"], cfg["batch"]
    per = b // ranks
    micro = cfg["steps"] * cfg["accumulate"]
    walks = [epoch_walk(cfg["train_windows"], r, ranks, seed, micro * per)
             for r in range(ranks)]
    return [sum((w[m * per:(m + 1) * per] for w in walks), [])
            for m in range(micro)]


def eval_batches(cfg, seed):
    """The validation batches oasr evaluates: each rank's full batches of its
    shard of the eval loader's epoch-0 order (runtime/train/Evaluation.cpp:
    trainSize() / batch batches from the loader's start)."""
    ranks, per = cfg["ranks"], cfg["batch"] // cfg["ranks"]
    out = []
    for r in range(ranks):
        mine = epoch_shard(cfg["val_windows"], r, ranks, seed, 0)
        out.extend(mine[k * per:(k + 1) * per] for k in range(len(mine) // per))
    return out


# ---------------------------------------------------------------------------
# The corpus


def write_corpus(work, limit, val_fraction=0.1):
    files = sorted(glob.glob("/usr/lib/python3.*/**/*.py", recursive=True))
    text = bytearray()
    used = 0
    for path in files:
        if len(text) >= limit:
            break
        with open(path, "rb") as f:
            text.extend(b for b in f.read() if b <= 127)
        used += 1
    text = bytes(text[:limit])
    vocab = sorted(set(text))
    index = {b: i for i, b in enumerate(vocab)}
    ids = [index[b] for b in text]
    n_train = int(len(ids) * (1 - val_fraction))
    import array
    for name, part in (("train.bin", ids[:n_train]), ("val.bin", ids[n_train:])):
        a = array.array("H", part)
        if sys.byteorder != "little":
            a.byteswap()
        with open(os.path.join(work, name), "wb") as f:
            a.tofile(f)
    import hashlib
    return {"files": used, "files_found": len(files), "first": files[0] if files else "",
            "last": files[used - 1] if used else "", "bytes": len(text),
            "sha256": hashlib.sha256(text).hexdigest()[:16], "vocab": len(vocab),
            "train_tokens": n_train, "val_tokens": len(ids) - n_train}


# ---------------------------------------------------------------------------
# The model (built under either torch)


def make_model(cfg):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    T, d, h, L, V = (cfg["seq"], cfg["n_embd"], cfg["n_head"], cfg["n_layer"],
                     cfg["vocab"])

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.register_buffer("mask", torch.full((T, T), -math.inf).triu(1))

        def forward(self, x):
            q, k, v = self.c_attn(x).split(d, dim=2)
            q = q.reshape(-1, T, h, d // h).transpose(1, 2)
            k = k.reshape(-1, T, h, d // h).transpose(1, 2)
            v = v.reshape(-1, T, h, d // h).transpose(1, 2)
            att = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(d // h)) + self.mask
            y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).reshape(-1, T, d))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, d)
            self.wpe = nn.Embedding(T, d)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, V, bias=False)
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, 0.0, 0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)
            for name, p in self.named_parameters():  # nanoGPT's scaled residuals
                if name.endswith("c_proj.weight") or name.endswith("mlp.2.weight"):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))

        def forward(self, ids):
            # wpe(arange(T)) is wpe.weight: the input is always T long.
            x = self.wte(ids) + self.wpe.weight
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def read_tokens(path):
    import numpy as np
    return np.fromfile(path, dtype="<u2").astype(np.int64)


# ---------------------------------------------------------------------------
# Child roles: export (Debian's torch) and train (PyPI torch)


def role_export(cfg_path, seed):
    """Builds the model for `seed`, saves its weights, exports it with
    oasr.export (which checks oasr's loss on one batch against torch's)."""
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from oasr import export
    cfg = json.load(open(cfg_path))
    work = cfg["work"]
    torch.manual_seed(seed)
    model = make_model(cfg)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    np.savez(os.path.join(work, f"init-{seed}.npz"),
             **{k: v.numpy() for k, v in state.items()})
    train = read_tokens(os.path.join(work, "train.bin"))
    T, B = cfg["seq"], cfg["batch"]
    ids = torch.from_numpy(train[:B * T].reshape(B, T).copy())
    onnx = os.path.join(work, f"gpt-{seed}.onnx")
    r = export(model, ids, onnx, check=True, oasr_run=cfg["oasr_run"], quiet=True)
    same = all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    print(json.dumps({"onnx": onnx, "check": r.check_note, "oasr_loss": r.oasr_loss,
                      "torch_loss": r.torch_loss, "torch": torch.__version__,
                      "weights_unchanged": same,
                      "parameters": sum(p.numel() for p in model.parameters())}))


def role_train(cfg_path, seed, order_path):
    """PyTorch's side of the recipe; prints one JSON line."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    cfg = json.load(open(cfg_path))
    torch.set_num_threads(cfg["threads"])
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    work = cfg["work"]
    order = json.load(open(order_path))
    T, V, acc = cfg["seq"], cfg["vocab"], cfg["accumulate"]
    model = make_model(cfg)
    init = np.load(os.path.join(work, f"init-{seed}.npz"))
    model.load_state_dict({k: torch.from_numpy(init[k]) for k in init.files})
    train = torch.from_numpy(read_tokens(os.path.join(work, "train.bin")))
    val = torch.from_numpy(read_tokens(os.path.join(work, "val.bin")))
    span = torch.arange(T + 1)

    def windows(tokens, idx):
        seq = tokens[torch.tensor(idx)[:, None] * T + span]
        return seq[:, :-1], seq[:, 1:]

    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["wd"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8)
    S = torch.optim.lr_scheduler
    main = S.CosineAnnealingLR(opt, T_max=cfg["steps"] - cfg["warmup"],
                               eta_min=cfg["min_lr"])
    sched = main
    if cfg["warmup"]:
        # LinearLR needs a start factor above 0; oasr's first rate is 0.
        warm = S.LinearLR(opt, start_factor=1e-30, end_factor=1.0,
                          total_iters=cfg["warmup"])
        sched = S.SequentialLR(opt, [warm, main], milestones=[cfg["warmup"]])
    evals = order["eval"]

    def evaluate():
        model.eval()
        total = 0.0
        with torch.no_grad():
            for idx in evals:
                x, y = windows(val, idx)
                total += float(F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1)))
        model.train()
        return total / len(evals)

    model.train()
    losses, lrs, norms, step_ms, ev = [], [], [], [], []
    trained = 0.0
    micro = order["train"]
    for step in range(cfg["steps"]):
        t0 = time.perf_counter()
        lrs.append(opt.param_groups[0]["lr"])
        opt.zero_grad(set_to_none=True)
        step_loss = 0.0
        for k in range(acc):
            x, y = windows(train, micro[step * acc + k])
            loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
            (loss / acc).backward()
            step_loss += float(loss.detach())
        norm = torch.nn.utils.clip_grad_norm_(params, cfg["clip"])
        opt.step()
        sched.step()
        dt = time.perf_counter() - t0
        trained += dt
        step_ms.append(dt * 1e3)
        losses.append(step_loss / acc)
        norms.append(float(norm))
        if (step + 1) % cfg["eval_every"] == 0:
            ev.append({"step": step + 1, "time_s": trained, "loss": evaluate()})
    print(json.dumps({"losses": losses, "lrs": lrs, "grad_norms": norms,
                      "step_ms": step_ms, "evals": ev, "train_s": trained,
                      "eval_batches": len(evals), "torch": torch.__version__}))


# ---------------------------------------------------------------------------
# The orchestrator


EVAL_RE = re.compile(r"^eval step (\d+)\s+time ([0-9.]+) s.*?loss ([0-9.naif]+)", re.M)


def run(cmd, env=None, timeout=3600):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def cpu_busy_s():
    """Seconds of CPU time all processes have used (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def measured(cfg, fn):
    """Runs fn() -> dict after waiting (up to --max-wait s) for the 1-min
    load to drop below --max-load; adds the load at its start and the cores
    other processes kept busy while it ran (all CPU time less the
    children's, over the wall time)."""
    t0 = time.time()
    while os.getloadavg()[0] > cfg["max_load"] and time.time() - t0 < cfg["max_wait"]:
        time.sleep(5)
    waited, load = time.time() - t0, os.getloadavg()[0]
    import resource
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0, w0 = cpu_busy_s(), time.time()
    r = fn()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1, wall = cpu_busy_s(), time.time() - w0
    mine = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    r["load_start"], r["waited_s"] = load, waited
    if busy0 is not None and busy1 is not None and wall > 0:
        r["other_cores"] = max(0.0, (busy1 - busy0 - mine) / wall)
    return r


def child_env(threads):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


def oasr_cmd(cfg, seed, onnx, metrics, ranks):
    cmd = [cfg["oasr_run"], onnx]
    if ranks > 1:
        cmd.append(f"--np={ranks}")
    return cmd + [
        f"--batch={cfg['batch'] // ranks}", f"--threads={cfg['threads'] // ranks}",
        f"--steps={cfg['steps']}", f"--data=tokens:{cfg['work']}/train.bin",
        f"--eval-data=tokens:{cfg['work']}/val.bin", f"--eval-every={cfg['eval_every']}",
        "--optimizer=adamw", f"--lr={cfg['lr']}", "--betas=0.9,0.95", "--eps=1e-8",
        f"--weight-decay={cfg['wd']}", "--decay-exclude=1d", "--lr-schedule=cosine",
        f"--warmup={cfg['warmup']}", "--warmup-start=0", f"--min-lr={cfg['min_lr']}",
        f"--clip-grad-norm={cfg['clip']}", f"--accumulate={cfg['accumulate']}",
        f"--seed={seed}", "--log-every=1", f"--metrics={metrics}"]


def run_oasr(cfg, seed, onnx, ranks=1):
    metrics = os.path.join(cfg["work"], f"oasr-{seed}-np{ranks}.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)  # oasr-run appends
    cmd = oasr_cmd(cfg, seed, onnx, metrics, ranks)
    env = child_env(cfg["threads"] // ranks)
    if ranks > 1 and os.geteuid() == 0 and "OASR_MPIRUN" not in env:
        env["OASR_MPIRUN"] = "mpirun --allow-run-as-root --oversubscribe"
    t0 = time.time()
    rc, out, err = run(cmd, env=env)
    r = {"cmd": shlex.join(cmd), "rc": rc, "wall_s": time.time() - t0}
    if rc:
        r["error"] = (err + out).strip()[-1500:]
        return r
    lines = [json.loads(l) for l in open(metrics) if l.strip()]
    steps = [l for l in lines if "loss" in l and "eval_loss" not in l]
    eloss = {l["step"]: l["eval_loss"] for l in lines if "eval_loss" in l}
    r["losses"] = [l["loss"] for l in steps]
    r["lrs"] = [l["lr"] for l in steps]
    r["grad_norms"] = [l.get("grad_norm") for l in steps]
    r["step_ms"] = [l["step_ms"] for l in steps]
    r["evals"] = [{"step": int(m.group(1)), "time_s": float(m.group(2)),
                   "loss": eloss.get(int(m.group(1)), float(m.group(3)))}
                  for m in EVAL_RE.finditer(out)]
    r["train_s"] = r["evals"][-1]["time_s"] if r["evals"] else None
    r["notes"] = [l.strip() for l in (out + err).splitlines()
                  if re.search(r"attention|holds \d+ constant", l)]
    r["summary"] = [l.strip() for l in out.splitlines()
                    if l.strip().startswith(("mean iteration", "compute", "accumulation"))]
    return r


def run_torch(cfg, seed, order_path):
    cmd = [cfg["torch_python"], os.path.abspath(__file__), "--role", "train",
           "--cfg", cfg["cfg_path"], "--seed", str(seed), "--order", order_path]
    t0 = time.time()
    rc, out, err = run(cmd, env=child_env(cfg["threads"]))
    r = {"cmd": shlex.join(cmd), "rc": rc, "wall_s": time.time() - t0}
    if rc:
        r["error"] = (err + out).strip()[-1500:]
        return r
    r.update(json.loads(out.strip().splitlines()[-1]))
    return r


def steady_median(step_ms, eval_every):
    """The median step without the first and those right after an
    evaluation (oasr's metrics interval of such a step holds it)."""
    keep = [t for i, t in enumerate(step_ms)
            if i > 0 and not (i % eval_every == 0)]
    return statistics.median(keep) if keep else None


def compare(cfg, o, t, rtol):
    """The verification and the numbers of one seed's pair of runs."""
    c = {}
    if "error" in o or "error" in t:
        c["error"] = o.get("error") or t.get("error")
        return c
    c["first_loss_oasr"], c["first_loss_torch"] = o["losses"][0], t["losses"][0]
    c["first_loss_rel"] = abs(o["losses"][0] - t["losses"][0]) / abs(t["losses"][0])
    c["first_loss_ok"] = c["first_loss_rel"] <= rtol
    n = min(len(o["lrs"]), len(t["lrs"]))
    c["lr_max_rel"] = max((abs(a - b) / max(abs(b), 1e-300)
                           for a, b in zip(o["lrs"][:n], t["lrs"][:n]) if b > 1e-20),
                          default=0.0)
    c["lr_max_abs"] = max(abs(a - b) for a, b in zip(o["lrs"][:n], t["lrs"][:n]))
    c["lr_ok"] = n == len(t["lrs"]) == len(o["lrs"]) and c["lr_max_rel"] <= 1e-9 and \
        c["lr_max_abs"] <= 1e-20 + 1e-9 * cfg["lr"]
    c["loss_rel_by_step"] = [abs(a - b) / abs(b) for a, b in
                             zip(o["losses"][:10], t["losses"][:10])]
    fo, ft = o["evals"][-1]["loss"], t["evals"][-1]["loss"]
    c["final_oasr"], c["final_torch"], c["final_ratio"] = fo, ft, fo / ft
    c["train_s_oasr"], c["train_s_torch"] = o["train_s"], t["train_s"]

    def reach(evals, target):
        for e in evals:
            if e["loss"] <= target:
                return e
        return None
    # Within reach_rtol of PyTorch's final loss: the two runs agree to float
    # rounding (~1e-8 relative), which a strict <= would turn into a coin flip.
    target = ft * (1 + cfg["reach_rtol"])
    ro, rt = reach(o["evals"], target), reach(t["evals"], target)
    c["reach_oasr"], c["reach_torch"] = ro, rt
    strict = reach(o["evals"], ft)
    c["reach_oasr_strict"] = strict and strict["step"]
    c["reach_ratio"] = ro["time_s"] / rt["time_s"] if ro and rt else None
    c["step_ms_oasr"] = steady_median(o["step_ms"], cfg["eval_every"])
    c["step_ms_torch"] = steady_median(t["step_ms"], cfg["eval_every"])
    return c


def fmt(x, spec=".4f"):
    return "-" if x is None else format(x, spec)


def busy(r):
    """`load L, other C cores`: a run's 1-min load at its start and the cores
    other processes kept busy during it."""
    return (f"load {fmt(r.get('load_start'), '.2f')}, others "
            f"{fmt(r.get('other_cores'), '.2f')} cores")


def write_md(path, res):
    cfg, h = res["cfg"], res["host"]
    L = []
    w = L.append
    w("# Language-model recipe: oasr-run against PyTorch, same weights, same data order\n")
    w(f"{res['date']}; {h['cpu']}, {h['cores']} cores ({h['machine']}); load average "
      f"(1/5/15 min) {fmt_load(res['load_before'])} before, {fmt_load(res['load_after'])} "
      f"after, 1-min load {min(res['load_samples']):.2f}-{max(res['load_samples']):.2f} "
      f"between runs (a shared host: another job's builds may run beside).\n")
    w(f"oasr {res['oasr_commit']}, binary {res['oasr_binary']}. PyTorch {res['torch']} "
      f"({res['torch_python']}): {res['torch_build']}. ONNX exported by "
      f"python/oasr/_export.py under torch {res['export_torch']} ({res['export_python']}).\n")
    co = res["corpus"]
    w(f"Corpus: {co['files']} of the {co['files_found']} files "
      f"/usr/lib/python3.*/**/*.py sorted by path ({co['first']} .. {co['last']}), bytes "
      f"above 127 dropped, the first {co['bytes']} bytes (sha256 {co['sha256']}...); "
      f"vocabulary {co['vocab']} bytes; {co['train_tokens']} train / {co['val_tokens']} val "
      f"tokens, {cfg['train_windows']} / {cfg['val_windows']} windows of T+1 = "
      f"{cfg['seq'] + 1}.\n")
    w(f"Model: nanoGPT-style char GPT, n_layer {cfg['n_layer']}, n_embd {cfg['n_embd']}, "
      f"n_head {cfg['n_head']}, T {cfg['seq']}, vocab {cfg['vocab']}, "
      f"{res['parameters']} parameters, dropout 0, untied head, causal mask a "
      f"register_buffer. Recipe: AdamW lr {cfg['lr']}, betas 0.9,0.95, eps 1e-8, weight "
      f"decay {cfg['wd']} on rank >= 2 tensors only; {cfg['warmup']} warmup steps linear "
      f"from 0, cosine to {cfg['min_lr']}; clip-grad-norm {cfg['clip']}; batch "
      f"{cfg['batch']} x accumulate {cfg['accumulate']} ({cfg['batch'] * cfg['accumulate']} "
      f"windows, {cfg['batch'] * cfg['accumulate'] * cfg['seq']} tokens per step); "
      f"{cfg['steps']} steps; evaluation every {cfg['eval_every']} steps over "
      f"{res['eval_batches']} full batches of {cfg['batch']} val windows; f32; "
      f"{cfg['threads']} thread(s) per side; 1 rank.\n")
    w("Verification per run: first-step training loss (on the initial weights, the "
      "same batches) oasr vs PyTorch, and the learning rate of every step.\n")
    w("Times: training wall time without the evaluations (oasr: its `eval step ... time` "
      "line; PyTorch: the sum of its step times). Step: median over the steps, the first "
      "and each right after an evaluation left out. Time to PyTorch's final loss: the first "
      f"evaluation whose loss is at most PyTorch's final one times 1 + {cfg['reach_rtol']:g} "
      "(the two runs agree to float rounding, so a strict comparison would be a coin flip; "
      "the strict result is given per seed). Before each run the script waits up to "
      f"{cfg['max_wait']:g} s for the 1-min load average to drop below {cfg['max_load']:g}; "
      "'cores busy with other work': all CPU time used on the host during the run less "
      "the run's own, over its wall time (another job's build shows here).\n")
    notes = sorted({n for s in res["seeds"] for n in s["oasr"].get("notes", [])})
    if notes:
        w("oasr-run's remarks on the model (every seed):\n")
        w("```")
        L.extend(notes)
        w("```\n")
    for s in res["seeds"]:
        c = s["compare"]
        w(f"\n## Seed {s['seed']}\n")
        if "error" in c:
            w(f"Failed: {c['error']}\n")
            continue
        w(f"Export check: {s['export']['check']}. First-step loss oasr "
          f"{c['first_loss_oasr']:.7g}, PyTorch {c['first_loss_torch']:.7g} (relative "
          f"{c['first_loss_rel']:.1e}, {'matches' if c['first_loss_ok'] else 'DOES NOT MATCH'}"
          f"); learning rates: largest difference {c['lr_max_abs']:.1e} absolute, "
          f"{c['lr_max_rel']:.1e} relative. Training loss, relative difference at "
          f"steps 1-10: " + ", ".join(f"{x:.0e}" for x in c["loss_rel_by_step"]) + ".\n")
        w("| eval step | oasr val loss | PyTorch val loss | oasr / PyTorch | oasr train time (s) "
          "| PyTorch train time (s) |")
        w("|---|---|---|---|---|---|")
        te = {e["step"]: e for e in s["torch"]["evals"]}
        for e in s["oasr"]["evals"]:
            t = te.get(e["step"])
            w(f"| {e['step']} | {e['loss']:.4f} | {fmt(t and t['loss'])} | "
              f"{fmt(t and e['loss'] / t['loss'], '.4f')} | {e['time_s']:.2f} | "
              f"{fmt(t and t['time_s'], '.2f')} |")
        ro, rt = c["reach_oasr"], c["reach_torch"]
        w(f"\nFinal val loss: oasr {c['final_oasr']:.4f}, PyTorch {c['final_torch']:.4f}, "
          f"ratio {c['final_ratio']:.4f}. Time to PyTorch's final loss "
          f"({c['final_torch']:.4f}): oasr "
          + (f"step {ro['step']}, {ro['time_s']:.2f} s" if ro else "not reached")
          + f"; PyTorch step {rt['step']}, {rt['time_s']:.2f} s"
          + (f"; ratio {c['reach_ratio']:.2f}x" if c["reach_ratio"] else "")
          + " (strictly at or below it: oasr "
          + (f"at step {c['reach_oasr_strict']}" if c["reach_oasr_strict"] else "never")
          + ")"
          + f". Median step: oasr {fmt(c['step_ms_oasr'], '.2f')} ms, PyTorch "
          f"{fmt(c['step_ms_torch'], '.2f')} ms. Whole runs (process wall, with compile, "
          f"evaluations): oasr {s['oasr']['wall_s']:.1f} s, PyTorch "
          f"{s['torch']['wall_s']:.1f} s. Host during the runs: oasr {busy(s['oasr'])}; "
          f"PyTorch {busy(s['torch'])}.\n")
    w("\n## Summary\n")
    ok = [s["compare"] for s in res["seeds"] if "error" not in s["compare"]]
    w("| seed | final val loss oasr | final val loss PyTorch | ratio | time to PyTorch's "
      "final loss oasr / PyTorch (s) | ratio | train time oasr / PyTorch (s) | step ms "
      "oasr / PyTorch | first-step loss rel. diff | cores busy with other work during oasr "
      "/ PyTorch |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for s in res["seeds"]:
        c = s["compare"]
        if "error" in c:
            w(f"| {s['seed']} | failed | | | | | | | | |")
            continue
        ro, rt = c["reach_oasr"], c["reach_torch"]
        w(f"| {s['seed']} | {c['final_oasr']:.4f} | {c['final_torch']:.4f} | "
          f"{c['final_ratio']:.4f} | {fmt(ro and ro['time_s'], '.2f')} / "
          f"{fmt(rt and rt['time_s'], '.2f')} | {fmt(c['reach_ratio'], '.2f')} | "
          f"{c['train_s_oasr']:.2f} / {c['train_s_torch']:.2f} | "
          f"{fmt(c['step_ms_oasr'], '.2f')} / {fmt(c['step_ms_torch'], '.2f')} | "
          f"{c['first_loss_rel']:.1e} | {fmt(s['oasr'].get('other_cores'), '.2f')} / "
          f"{fmt(s['torch'].get('other_cores'), '.2f')} |")
    if ok:
        med = statistics.median
        reach = [c["reach_ratio"] for c in ok if c["reach_ratio"]]
        w(f"| median | | | {med(c['final_ratio'] for c in ok):.4f} | | "
          f"{fmt(med(reach) if reach else None, '.2f')} | "
          f"{med(c['train_s_oasr'] / c['train_s_torch'] for c in ok):.2f}x | "
          f"{med(c['step_ms_oasr'] for c in ok):.2f} / {med(c['step_ms_torch'] for c in ok):.2f}"
          f" | | |")
        fr = med(c["final_ratio"] for c in ok)
        w(f"\nGoals: final val loss within 1 % of PyTorch's (median ratio {fr:.4f}: "
          f"{'met' if abs(fr - 1) <= 0.01 else 'not met'}); time to PyTorch's final loss "
          f"at most 0.8x (median {fmt(med(reach) if reach else None, '.2f')}: "
          f"{'met' if reach and med(reach) <= 0.8 else 'not met'}"
          f"{'' if len(reach) == len(ok) else '; oasr did not reach it on every seed'}).\n")
    w("\n## Two ranks\n")
    two = res.get("np2")
    if not two:
        w(res.get("np2_note", "Not run (--np2 not given).") + "\n")
    else:
        tt = res["np2_torch_threads"]
        w(f"oasr-run --np 2 with batch {cfg['batch'] // 2} per rank, so the global batch "
          f"({cfg['batch']} x accumulate {cfg['accumulate']}) is unchanged: rank r takes "
          f"every other window of the same shuffle, so each step averages the gradients of "
          f"the same windows as one process does; {cfg['threads']} thread per rank (2 ranks: "
          f"the 2 cores). Against PyTorch in one process on the global batch with "
          f"{' and with '.join(map(str, tt))} thread(s) (the latter the same cores as "
          f"oasr's 2 ranks), the same initial weights and windows; all evaluated on oasr's "
          f"2-rank val batches (each rank's full batches of {cfg['batch'] // 2} of its half "
          f"of the val windows). A PyTorch run with 2 threads on this "
          f"2-core host stalls badly whenever another process takes a core (OpenMP threads "
          f"waiting for each other): see its 'cores busy with other work'.\n")
        names = [f"PyTorch {n} thr" for n in tt]
        w("| seed | first-step loss rel. diff | final val loss oasr 2 ranks / "
          + " / ".join(names) + " | time to PyTorch's final loss (s): oasr 2 ranks / "
          + " / ".join(names) + " | ratio oasr / " + " / ".join(names)
          + " | step ms oasr 2 ranks / " + " / ".join(names)
          + " | cores busy with other work: oasr / " + " / ".join(names) + " |")
        w("|---|---|---|---|---|---|---|")
        for s in two:
            cs = s["compare"]
            if any("error" in c for c in cs):
                err = next(c["error"] for c in cs if "error" in c)
                w(f"| {s['seed']} | failed: {err[-300:]!r} | | | | | |")
                continue
            c0 = cs[0]

            def t(e):
                return fmt(e and e["time_s"], ".2f")
            w(f"| {s['seed']} | " + " / ".join(f"{c['first_loss_rel']:.1e}" for c in cs)
              + f" | {c0['final_oasr']:.4f} / "
              + " / ".join(f"{c['final_torch']:.4f}" for c in cs)
              + " | " + " / ".join([t(c0["reach_oasr"])] + [t(c["reach_torch"]) for c in cs])
              + " | " + " / ".join(fmt(c["reach_ratio"], ".2f") for c in cs)
              + f" | {fmt(c0['step_ms_oasr'], '.2f')} / "
              + " / ".join(fmt(c["step_ms_torch"], ".2f") for c in cs)
              + f" | {fmt(s['oasr'].get('other_cores'), '.2f')} / "
              + " / ".join(fmt(r.get("other_cores"), ".2f") for r in s["torch"]) + " |")
        if res.get("np2_note"):
            w("\n" + res["np2_note"] + "\n")
    w("\n## Commands\n")
    w("```sh")
    w(res["command"])

    def short(cmd):
        return cmd.replace(cfg["work"], "WORK").replace(ROOT + "/", "")
    s0 = res["seeds"][0]
    w(short(s0["oasr"]["cmd"]))
    w(short(s0["torch"]["cmd"]))
    if two:
        w(short(two[0]["oasr"]["cmd"]))
        w(short(two[0]["torch"][-1]["cmd"]))
    w("```")
    w(f"\nWORK was {cfg['work']}; the whole benchmark took {res['elapsed_s'] / 60:.1f} min.")
    with open(path, "x") as f:
        f.write("\n".join(L) + "\n")


def lscpu():
    """lscpu's model name, family/model/stepping and caches, one line."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return cpu_name()
    f = dict(l.split(":", 1) for l in out.splitlines() if ":" in l)
    f = {k.strip(): v.strip() for k, v in f.items()}
    parts = [f.get("Model name", cpu_name())]
    if "CPU family" in f:
        parts.append(f"family {f['CPU family']} model {f.get('Model', '?')} stepping "
                     f"{f.get('Stepping', '?')}")
    parts += [f"{k} {f[k]}" for k in ("L1d cache", "L2 cache", "L3 cache") if k in f]
    if "Hypervisor vendor" in f:
        parts.append(f"under {f['Hypervisor vendor']}")
    flags = f.get("Flags", "").split()
    parts.append("AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "")
    return ", ".join(p for p in parts if p)


def torch_info(python):
    code = ("import torch, json; c = torch.__config__.show().splitlines(); "
            "print(json.dumps([torch.__version__, c[:8], torch.backends.mkldnn.is_available(), "
            "torch.backends.mkl.is_available()]))")
    p = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if p.returncode:
        return None
    v, lines, dnn, mkl = json.loads(p.stdout.strip().splitlines()[-1])
    keep = [l.strip(" -") for l in lines[1:] if l.strip() and
            any(k in l for k in ("GCC", "Math Kernel", "MKL-DNN", "oneDNN", "OpenMP",
                                 "CPU capability"))]
    return v, "; ".join(keep) + f" (mkldnn {dnn}, mkl {mkl})"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--role", choices=("export", "train"), help=argparse.SUPPRESS)
    p.add_argument("--cfg", help=argparse.SUPPRESS)
    p.add_argument("--order", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    p.add_argument("--out", help="the results file (markdown), never overwritten")
    p.add_argument("--check", action="store_true",
                   help="a short verification (--steps 4, one seed), no results file")
    p.add_argument("--oasr-run", default=os.path.join(ROOT, "build", "bin", "oasr-run"))
    p.add_argument("--torch-python", default=TORCH_VENV_PY if os.path.exists(TORCH_VENV_PY)
                   else DEBIAN_PY)
    p.add_argument("--export-python", default=DEBIAN_PY,
                   help="a python with torch and onnx for oasr.export (default Debian's)")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--accumulate", type=int, default=2)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--corpus-bytes", type=int, default=3_000_000)
    p.add_argument("--loss-rtol", type=float, default=1e-5,
                   help="first-step loss: oasr within this of PyTorch's, relative")
    p.add_argument("--reach-rtol", type=float, default=1e-4,
                   help="a loss counts as PyTorch's final one within this, relative")
    p.add_argument("--max-load", type=float, default=1.5,
                   help="before each run, wait for the 1-min load average to drop below this")
    p.add_argument("--max-wait", type=float, default=60,
                   help="... for at most this many seconds")
    p.add_argument("--np2", action="store_true", help="also oasr-run --np 2 per seed")
    p.add_argument("--work", default="", help="working directory (default: a new "
                   "temporary one, kept)")
    a = p.parse_args()
    if a.role == "export":
        return role_export(a.cfg, a.seed)
    if a.role == "train":
        return role_train(a.cfg, a.seed, a.order)

    if a.check:
        a.steps, a.eval_every = min(a.steps, 4), 2
        a.warmup = min(a.warmup, 1)
        a.seeds = a.seeds.split(",")[0]
    elif not a.out:
        p.error("--out FILE.md is required (or --check)")
    out = None
    if a.out:
        out = os.path.abspath(a.out)
        if os.path.exists(out):
            p.error(f"{a.out} exists: results are never overwritten; pass another --out")
        if os.path.dirname(out) == os.path.join(BENCH, "results") and out.endswith(".md"):
            new_results(p, os.path.basename(out)[:-3])  # nor a NAME.json beside it
    oasr = os.path.abspath(a.oasr_run)
    if not os.access(oasr, os.X_OK):
        p.error(f"no oasr-run at {oasr}")
    if a.batch % 2 and a.np2:
        p.error("--np2 needs an even --batch")
    info = torch_info(a.torch_python)
    if not info:
        p.error(f"{a.torch_python} has no torch")
    export_torch = torch_info(a.export_python)
    if not export_torch:
        p.error(f"{a.export_python} has no torch")

    t_start = time.time()
    work = os.path.abspath(a.work) if a.work else tempfile.mkdtemp(prefix="oasr-lm-recipe-")
    os.makedirs(work, exist_ok=True)
    corpus = write_corpus(work, a.corpus_bytes)
    T = a.seq
    cfg = {"work": work, "oasr_run": oasr, "torch_python": a.torch_python,
           "seq": T, "n_embd": a.n_embd, "n_head": a.n_head, "n_layer": a.n_layer,
           "vocab": corpus["vocab"], "batch": a.batch, "accumulate": a.accumulate,
           "steps": a.steps, "eval_every": a.eval_every, "lr": a.lr, "min_lr": a.min_lr,
           "warmup": a.warmup, "wd": a.wd, "clip": a.clip, "threads": a.threads,
           "train_windows": (corpus["train_tokens"] - 1) // T,
           "val_windows": (corpus["val_tokens"] - 1) // T, "ranks": 1,
           "reach_rtol": a.reach_rtol, "max_load": a.max_load, "max_wait": a.max_wait}
    cfg["cfg_path"] = os.path.join(work, "cfg.json")
    json.dump(cfg, open(cfg["cfg_path"], "w"), indent=1)
    seeds = [int(s) for s in a.seeds.split(",") if s]
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "host": {"cpu": lscpu(), "cores": os.cpu_count(), "machine": platform.machine()},
           "command": shlex.join(["python3", os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)]
                                 + sys.argv[1:]),
           "oasr_commit": git_commit(), "oasr_binary": oasr, "torch": info[0],
           "torch_build": info[1], "torch_python": a.torch_python,
           "export_torch": export_torch[0], "export_python": a.export_python,
           "corpus": corpus, "cfg": cfg, "seeds": [], "load_before": list(os.getloadavg()),
           "load_samples": []}
    res["load_samples"].append(res["load_before"][0])
    print(f"work {work}; corpus {corpus}", flush=True)

    exports, orders = {}, {}
    for seed in seeds:
        rc, so, se = run([a.export_python, os.path.abspath(__file__), "--role", "export",
                          "--cfg", cfg["cfg_path"], "--seed", str(seed)],
                         env=child_env(a.threads))
        if rc:
            sys.exit(f"run_lm_recipe.py: exporting seed {seed} failed:\n{(se + so)[-3000:]}")
        exports[seed] = json.loads(so.strip().splitlines()[-1])
        print(f"seed {seed}: exported, {exports[seed]['check']}", flush=True)
        path = os.path.join(work, f"order-{seed}.json")
        json.dump({"train": train_order(cfg, seed), "eval": eval_batches(cfg, seed)},
                  open(path, "w"))
        orders[seed] = path
    res["parameters"] = exports[seeds[0]]["parameters"]
    res["eval_batches"] = len(json.load(open(orders[seeds[0]]))["eval"])

    bad = []
    for seed in seeds:  # interleaved: oasr, PyTorch, oasr, PyTorch ...
        o = measured(cfg, lambda: run_oasr(cfg, seed, exports[seed]["onnx"]))
        res["load_samples"].append(os.getloadavg()[0])
        t = measured(cfg, lambda: run_torch(cfg, seed, orders[seed]))
        res["load_samples"].append(os.getloadavg()[0])
        c = compare(cfg, o, t, a.loss_rtol)
        res["seeds"].append({"seed": seed, "export": exports[seed], "oasr": o, "torch": t,
                             "compare": c})
        if "error" in c:
            print(f"seed {seed}: FAILED: {c['error']}", flush=True)
            bad.append(seed)
            continue
        if not (c["first_loss_ok"] and c["lr_ok"]):
            bad.append(seed)
        print(f"seed {seed}: first-step loss oasr {c['first_loss_oasr']:.7g} PyTorch "
              f"{c['first_loss_torch']:.7g} (rel {c['first_loss_rel']:.1e}); lr max rel "
              f"{c['lr_max_rel']:.1e}; final val oasr {c['final_oasr']:.4f} PyTorch "
              f"{c['final_torch']:.4f}; train s {c['train_s_oasr']:.2f} / "
              f"{c['train_s_torch']:.2f}; step ms {fmt(c['step_ms_oasr'], '.2f')} / "
              f"{fmt(c['step_ms_torch'], '.2f')}", flush=True)
        if a.check:
            print("losses oasr  ", o["losses"])
            print("losses torch ", t["losses"])
            print("lrs oasr     ", o["lrs"])
            print("lrs torch    ", t["lrs"])
            print("norms oasr   ", o["grad_norms"])
            print("norms torch  ", t["grad_norms"])
            print("evals oasr   ", o["evals"])
            print("evals torch  ", t["evals"])

    if a.np2:
        cfg2 = dict(cfg, ranks=2, threads=2 * a.threads)
        cfg2["cfg_path"] = os.path.join(work, "cfg-np2.json")
        json.dump(cfg2, open(cfg2["cfg_path"], "w"), indent=1)
        res["np2"] = []
        res["np2_torch_threads"] = [a.threads, 2 * a.threads]
        for seed in seeds:  # oasr 2 ranks, PyTorch 1 thread, PyTorch 2 threads
            o = measured(cfg2, lambda: run_oasr(cfg2, seed, exports[seed]["onnx"], ranks=2))
            res["load_samples"].append(os.getloadavg()[0])
            path = os.path.join(work, f"order-{seed}-np2.json")
            order2 = {"train": train_order(cfg2, seed), "eval": eval_batches(cfg2, seed)}
            json.dump(order2, open(path, "w"))
            one = json.load(open(orders[seed]))
            same_train = [sorted(m) for m in order2["train"]] == \
                [sorted(m) for m in one["train"]]
            ts, cs = [], []
            for threads in res["np2_torch_threads"]:
                # One process, the global batch; evaluated on the 2-rank run's
                # val batches (each rank's full batches of B/2).
                ct = dict(cfg2, threads=threads)
                ct["cfg_path"] = os.path.join(work, f"cfg-np2-t{threads}.json")
                json.dump(ct, open(ct["cfg_path"], "w"), indent=1)
                t = measured(ct, lambda: run_torch(ct, seed, path))
                res["load_samples"].append(os.getloadavg()[0])
                c = compare(cfg2, o, t, a.loss_rtol)
                ts.append(t)
                cs.append(c)
                if "error" in c or not (c["first_loss_ok"] and c["lr_ok"]):
                    bad.append(f"{seed} (2 ranks)")
                keys = ("error", "first_loss_rel", "final_oasr", "final_torch",
                        "reach_ratio", "step_ms_oasr", "step_ms_torch")
                print(f"seed {seed}, 2 ranks vs PyTorch {threads} thread(s): "
                      + json.dumps({k: c[k] for k in keys if k in c}), flush=True)
            res["np2"].append({"seed": seed, "oasr": o, "torch": ts, "compare": cs,
                               "same_windows_per_step": same_train})
    res["load_after"] = list(os.getloadavg())
    res["elapsed_s"] = time.time() - t_start
    json.dump(res, open(os.path.join(work, "results.json"), "w"), indent=1)
    if out:
        os.makedirs(os.path.dirname(out), exist_ok=True)
        write_md(out, res)
        print(open(out).read())
        print(f"wrote {out}; raw data in {work}/results.json")
    if bad:
        print(f"run_lm_recipe.py: seed(s) {bad}: oasr's first-step loss or learning "
              f"rates do not match PyTorch's (or a run failed)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
