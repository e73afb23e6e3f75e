#!/usr/bin/env python3
"""PyTorch DDP trained for time to accuracy, the peer of oasr-run --eval-every
on the emulated cluster (bench/run_compress.py drives both).

    scripts/cluster.sh run NP -- /root/venv-torch/bin/python bench/ddp_train.py \\
        --data DIR --master=10.77.0.1 [--init-onnx MODEL.onnx] [--model resnet18] \\
        [--batch 32] [--steps 300] [--eval-every 25] [--lr 0.01] \\
        [--optimizer momentum] [--momentum 0.9] [--seed 1] \\
        [--hook none|bf16|fp16|powersgd:R[+bf16]] [--powersgd-start K]
    ... bench/ddp_train.py --model bert --data FILE ...    (token sequences)

Launch and rendezvous as bench/ddp_step.py: one process per rank, rank and
world size from Open MPI's environment (OMPI_COMM_WORLD_RANK/SIZE, or
RANK/WORLD_SIZE), gloo's rendezvous on --master (node 1's address inside the
cluster), gloo's sockets on --ifname (eth0: the node's shaped link), 1
compute thread a rank (as oasr-run --threads=1).

What it trains, and how it matches `oasr-run MODEL.onnx --data=cifar10:DIR
--batch=B --optimizer=momentum --lr=LR --seed=S --eval-every=E`:

* Data: DIR in CIFAR-10's binary layout (data_batch_1..5.bin for training,
  test_batch.bin held out; each record 1 label byte and 3072 pixel bytes,
  planes R, G, B of 32x32), read as oasr's loader reads it
  (runtime/data/DataLoader.cpp): pixels scaled to [0, 1] by float(byte) *
  (1/255) in float32 and nothing else (no mean/std normalisation, no
  augmentation: oasr has none). Each epoch a permutation of the training
  records drawn from (seed, epoch) with std::mt19937_64 seeded
  seed * 0x9E3779B97F4A7C15 + epoch and the same Fisher-Yates loop, element
  i of it to rank i % world: the generator is ported below, so every rank
  sees the same samples in the same order as oasr-run's rank of the same
  number (checked against the C++ generator's 10000th output). The
  test shard is oasr's too: records rank, rank + world, ...
* Model: torchvision's MODEL (default resnet18) with num_classes from the
  data, built after torch.manual_seed(0), as scripts/export_models.py
  builds it (bench/run_compress.py exports the same construction to ONNX
  with Debian's torch for oasr-run). With --init-onnx the weights and BN
  statistics are then copied from that ONNX file's initializers, by name,
  so both sides start from the very same numbers whatever the two torch
  builds' initialisers do; the summary says how many parameters the seeded
  construction already had bit for bit equal (all of them, torch 1.13 and
  2.15; the BN running statistics differ, moved by the exporter's traced
  forward pass, and neither side reads them).
* Loss: mean softmax cross-entropy, as oasr appends to an .onnx model.
* Optimizer: --optimizer momentum (torch.optim.SGD, momentum 0.9, no
  dampening or weight decay: v' = m v + g, p' = p - lr v', oasr's
  optimizer_update rule) or sgd; --lr is oasr-run's --lr.
* Communication: DistributedDataParallel over gloo, --bucket-cap-mb (25,
  DDP's own), broadcast_buffers off (oasr never exchanges BN's running
  statistics; neither side's training or evaluation reads them). --hook:
  none (DDP's allreduce), bf16 / fp16 (default_hooks.bf16_compress_hook /
  fp16_compress_hook) or powersgd:R, PyTorch's powerSGD_hook with
  PowerSGDState(process_group=None, matrix_approximation_rank=R,
  start_powerSGD_iter=K, use_error_feedback=True, warm_start=True) and the
  rest at PyTorch's defaults (min_compression_rate 2: a tensor whose
  factors would not be half its size, every bias and BN vector among them,
  is allreduced uncompressed; random_seed 0). K = --powersgd-start: the
  first K steps are plain allreduces. PyTorch requires K >= 2 with error
  feedback or warm start (it raises ValueError for K <= 1: DDP rebuilds its
  buckets after the first step, and the per-bucket error and Q must not
  change shape under it). One change to it, for gloo: while it compresses,
  a bucket's hook waits for the previous bucket's exchange to finish
  (ordered_powersgd_hook) -- the hook issues a bucket's second and third
  collectives from completion callbacks, which race the next bucket's first
  one, and the two ranks issued them in different orders (gloo aborted on
  the first compressed step at 200 Mbit/s). The cost: backward does not run
  past a bucket boundary while the previous bucket's compressed exchange
  (a few small collectives) is in flight.

With --model bert (or bert-tiny) it trains bench/token_model.py's BERT-like
encoder on a token file as oasr-run --data=tokens:FILE reads it (u16 ids,
SEQ a sequence; FILE.labels: int64 labels, one a sequence): the model built
by token_model.make_model(**token_model.MODELS[name]) after
torch.manual_seed(0), every parameter copied from --init-onnx by name (the
export's initializers are the module's parameter names, 52 of 52); the
sequences walked in oasr's order (the same EpochWalk over the sequences);
ids as int64. There is no test set (oasr-run's token loader has none), so
an evaluation line reports what oasr-run's progress line does: the
accuracy and mean loss of the training batches since the previous line,
summed over the ranks, each batch's forward pass before its update. While
no sequence repeats (steps x batch x ranks <= the file's sequences) that
accuracy is on sequences the model has not yet trained on.

Evaluation (--eval-every E, and after the last step): the test accuracy of
the current weights on every rank's test shard in full batches of
--batch (the remainder skipped: oasr's model has a static batch), summed over
the ranks, with BatchNorm in training mode (batch statistics) and the
running statistics put back afterwards -- what oasr-run's evaluation does
(its forward pass is the training graph's). The clock: wall time from the
first step's start (after a barrier) on rank 0, less the time spent in
evaluations -- oasr-run's 'eval step S  time T s' -- so evaluations are
off the clock on both sides; their own time is reported separately
(eval_s). The train loss of an eval line is the mean loss of the steps
since the previous eval line, averaged over the ranks (oasr-run's progress
line with --log-every=E); its allreduce runs inside the evaluation.

Rank 0 prints one JSON line per evaluation:
    {"event": "eval", "step": S, "seconds": T, "loss": L, "accuracy": A, ...}
and a final one, {"event": "summary", ...}: the mean and median step
(steps 2..N, forward start to update end, as ddp_step.py and oasr-run's
summary), the training wall time, the final loss and accuracy, the first
step's loss averaged over the ranks (to compare with oasr-run's first
progress line at --log-every=1: the same weights and batch give the same
number), PowerSGD's compression statistics, and the torch build.
"""
import argparse
import json
import os
import statistics
import sys
import time
import warnings

import ddp_launch
import token_model

import numpy as np

RECORD = 1 + 3 * 32 * 32
GOLDEN = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1


class MT19937_64:
    """std::mt19937_64 (C++11's parameters), for oasr's shuffles."""

    N, M = 312, 156

    def __init__(self, seed):
        self.mt = [0] * self.N
        self.mt[0] = seed & MASK64
        for i in range(1, self.N):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64
        self.index = self.N

    def _twist(self):
        mt, n, m = self.mt, self.N, self.M
        upper, lower = 0xFFFFFFFF80000000, 0x7FFFFFFF
        for i in range(n):
            x = (mt[i] & upper) | (mt[(i + 1) % n] & lower)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[i] = mt[(i + m) % n] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= self.N:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK64


def epoch_shard(count, rank, world, seed, epoch):
    """oasr's epochShard: this rank's samples of one epoch."""
    order = list(range(count))
    rng = MT19937_64((seed * GOLDEN + epoch) & MASK64)
    for i in range(count, 1, -1):
        j = rng() % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order[rank::world]


class EpochWalk:
    """oasr's EpochWalk: a new shuffled shard each epoch."""

    def __init__(self, count, rank, world, seed):
        self.count, self.rank, self.world, self.seed = count, rank, world, seed
        self.epoch = 0
        self.mine = epoch_shard(count, rank, world, seed, 0)
        self.pos = 0

    def take(self, n):
        out = []
        for _ in range(n):
            if self.pos >= len(self.mine):
                self.epoch += 1
                self.mine = epoch_shard(self.count, self.rank, self.world, self.seed,
                                        self.epoch)
                self.pos = 0
            out.append(self.mine[self.pos])
            self.pos += 1
        return out


def read_records(paths):
    parts = []
    for path in paths:
        raw = np.fromfile(path, dtype=np.uint8)
        if raw.size == 0 or raw.size % RECORD:
            sys.exit(f"ddp_train.py: error: {path}: not a CIFAR-10 binary batch "
                     f"(size {raw.size} is not a multiple of {RECORD})")
        parts.append(raw.reshape(-1, RECORD))
    rec = np.concatenate(parts)
    return np.ascontiguousarray(rec[:, 1:]), rec[:, 0].astype(np.int64)


def load_cifar(data_dir):
    train = [os.path.join(data_dir, f"data_batch_{b}.bin") for b in range(1, 6)]
    test = os.path.join(data_dir, "test_batch.bin")
    for path in train + [test]:
        if not os.path.exists(path):
            sys.exit(f"ddp_train.py: error: {path}: no such file (--data is a CIFAR-10 "
                     "binary directory: data_batch_1..5.bin and test_batch.bin)")
    return read_records(train), read_records([test])


def to_images(pixels):
    """oasr's Dataset::sample: float(byte) * (1/255) in float32."""
    return pixels.astype(np.float32) * np.float32(1.0 / 255.0)


def load_tokens(path, seq):
    """oasr's tokens:FILE for a classifier: (ids [N, SEQ] int64, labels)."""
    for f in (path, path + ".labels"):
        if not os.path.exists(f):
            sys.exit(f"ddp_train.py: error: {f}: no such file (--model bert reads "
                     "--data FILE, u16 token ids, and FILE.labels)")
    ids = np.fromfile(path, dtype="<u2").astype(np.int64)
    labels = np.fromfile(path + ".labels", dtype="<i8")
    if ids.size % seq or ids.size // seq != labels.size:
        sys.exit(f"ddp_train.py: error: {path}: {ids.size} ids and {labels.size} labels "
                 f"are not sequences of {seq} tokens with one label each")
    return ids.reshape(-1, seq), labels


class OrderedPowerSGD:
    """PowerSGD's state and the previous bucket's future."""

    def __init__(self, state):
        self.state = state
        self.previous = None


def ordered_powersgd_hook(ordered, bucket):
    """powerSGD_hook, a bucket's collectives issued only after the previous
    bucket's are done while it compresses. The hook issues each bucket's
    second and third collectives from completion callbacks on gloo's worker
    threads, racing the next bucket's first one from the backward pass; the
    ranks then issue them in different orders and gloo aborts ("Received
    data size doesn't match expected size": the first compressed step at
    200 Mbit/s on the emulated cluster, 3 buckets)."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

    state = ordered.state
    if state.iter >= state.start_powerSGD_iter and ordered.previous is not None:
        ordered.previous.wait()
    ordered.previous = psgd.powerSGD_hook(state, bucket)
    return ordered.previous


def parse_hook(text):
    """(hook, rank, bf16): powersgd:R+bf16 wraps PowerSGD in
    default_hooks.bf16_compress_wrapper (the bucket, and so the factors, in
    bf16)."""
    if text in ("none", "bf16", "fp16"):
        return text, None, False
    wrapped = text.endswith("+bf16")
    body = text[:-len("+bf16")] if wrapped else text
    if body.startswith("powersgd:"):
        try:
            rank = int(body.split(":", 1)[1])
        except ValueError:
            rank = 0
        if rank >= 1:
            return "powersgd", rank, wrapped
    sys.exit(f"ddp_train.py: error: --hook={text}: expected none, bf16, fp16, "
             "powersgd:R or powersgd:R+bf16 (R >= 1, the matrix approximation rank)")


def load_onnx_init(model, path):
    """Copies PATH's initializers into model's parameters and buffers by
    name. Returns (parameters copied, how many of them the seeded model
    already had bit for bit equal, buffers copied)."""
    import onnx
    from onnx import numpy_helper
    import torch

    inits = {t.name: t for t in onnx.load(path, load_external_data=True).graph.initializer}
    params = {n for n, _ in model.named_parameters()}
    copied = equal = buffers = 0
    missing = []
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            if name not in inits:
                missing.append(name)
                continue
            value = torch.from_numpy(numpy_helper.to_array(inits[name]).copy())
            if tuple(value.shape) != tuple(tensor.shape):
                sys.exit(f"ddp_train.py: error: {path}: initializer {name} has shape "
                         f"{tuple(value.shape)}, the model's {tuple(tensor.shape)}")
            if name in params:
                copied += 1
                equal += bool(torch.equal(value.to(tensor.dtype), tensor))
            else:
                buffers += 1
            tensor.copy_(value)
    if missing:
        sys.exit(f"ddp_train.py: error: {path} lacks {len(missing)} of the model's "
                 f"tensors ({', '.join(missing[:4])}...): not this model's export")
    return copied, equal, buffers


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True,
                   help="CIFAR-10 binary directory; with --model bert, a token file")
    p.add_argument("--model", default="resnet18",
                   help="a torchvision classification model, or bert / bert-tiny "
                        "(bench/token_model.py)")
    p.add_argument("--init-onnx", help="copy the initial weights from this ONNX export")
    ddp_launch.add_rendezvous_args(p)
    p.add_argument("--batch", type=int, default=32, help="per-rank batch")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--optimizer", default="momentum", choices=["sgd", "momentum"])
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1, help="the data order's seed (oasr-run --seed)")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--hook", default="none",
                   help="none | bf16 | fp16 | powersgd:R | powersgd:R+bf16 (DDP's "
                        "communication hooks)")
    p.add_argument("--powersgd-start", type=int, default=10,
                   help="PowerSGD's start_powerSGD_iter: steps allreduced uncompressed "
                        "first (>= 2)")
    a = p.parse_args()
    hook, psgd_rank, psgd_bf16 = parse_hook(a.hook)
    rank, world = ddp_launch.rank_and_world("ddp_train.py", a)
    if a.steps < 1 or a.batch < 1 or a.eval_every < 0:
        sys.exit("ddp_train.py: error: --steps and --batch must be >= 1, --eval-every >= 0")
    if hook == "powersgd" and a.powersgd_start < 2:
        sys.exit(f"ddp_train.py: error: --powersgd-start={a.powersgd_start}: PyTorch's "
                 "PowerSGD with error feedback and warm start needs >= 2")

    tokens = a.model in token_model.MODELS
    if tokens:
        cfg = token_model.MODELS[a.model]
        train_px, train_y = load_tokens(a.data, cfg["seq"])
        test_px, test_y = train_px[:0], train_y[:0]
        classes = cfg["classes"]
    else:
        (train_px, train_y), (test_px, test_y) = load_cifar(a.data)
        classes = int(max(train_y.max(), test_y.max())) + 1

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    import torchvision

    # broadcast_buffers=False is deprecated in favour of forward_sync_buffers,
    # which still syncs at init: every rank loads the same weights anyway.
    warnings.filterwarnings("ignore", message=".*broadcast_buffers.*")
    ddp_launch.init_gloo(a, rank, world)

    torch.manual_seed(0)
    if tokens:
        model = token_model.make_model(**cfg)
        init = {"source": f"token_model {a.model}, torch.manual_seed(0)"}
    else:
        model = getattr(torchvision.models, a.model)(weights=None, num_classes=classes)
        init = {"source": f"torchvision {a.model}, torch.manual_seed(0)"}
    if a.init_onnx:
        copied, equal, buffers = load_onnx_init(model, a.init_onnx)
        init = {"source": os.path.basename(a.init_onnx), "parameters": copied,
                "seeded_parameters_equal": equal, "buffers": buffers}
    model.train()
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=a.bucket_cap_mb, broadcast_buffers=False)
    psgd_state = None
    if hook in ("bf16", "fp16"):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook if hook == "bf16"
                               else default_hooks.fp16_compress_hook)
    elif hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        psgd_state = psgd.PowerSGDState(process_group=None,
                                        matrix_approximation_rank=psgd_rank,
                                        start_powerSGD_iter=a.powersgd_start,
                                        use_error_feedback=True, warm_start=True)
        if psgd_bf16:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            ddp.register_comm_hook(OrderedPowerSGD(psgd_state),
                                   default_hooks.bf16_compress_wrapper(ordered_powersgd_hook))
        else:
            ddp.register_comm_hook(OrderedPowerSGD(psgd_state), ordered_powersgd_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr,
                          momentum=a.momentum if a.optimizer == "momentum" else 0.0)

    walk = EpochWalk(len(train_y), rank, world, a.seed)
    test_shard = list(range(rank, len(test_y), world))

    def batch_of(pixels, labels, idx):
        if tokens:
            return torch.from_numpy(pixels[idx]), torch.from_numpy(labels[idx])
        x = torch.from_numpy(to_images(pixels[idx])).view(len(idx), 3, 32, 32)
        return x, torch.from_numpy(labels[idx])

    def evaluate():
        """Correct and total over all ranks' test shards (training-mode BN,
        running statistics restored), as oasr-run's evaluation."""
        saved = {k: v.clone() for k, v in model.named_buffers()}
        correct = total = 0
        with torch.no_grad():
            for b in range(0, len(test_shard) - a.batch + 1, a.batch):
                x, y = batch_of(test_px, test_y, test_shard[b:b + a.batch])
                correct += int((model(x).argmax(1) == y).sum())
                total += a.batch
        with torch.no_grad():
            for k, v in model.named_buffers():
                v.copy_(saved[k])
        counts = torch.tensor([correct, total], dtype=torch.float64)
        dist.all_reduce(counts)
        return int(counts[0]), int(counts[1])

    times, evals = [], []
    interval_loss, interval_steps = 0.0, 0
    interval_correct = interval_seen = 0
    first_loss = None
    eval_s = 0.0
    dist.barrier()
    start = time.perf_counter()
    for step in range(a.steps):
        x, y = batch_of(train_px, train_y, walk.take(a.batch))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = ddp(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        if tokens:  # the training batch's correct predictions
            interval_correct += int((logits.detach().argmax(1) == y).sum())
            interval_seen += len(y)
        value = loss.item()
        if first_loss is None:
            first_loss = value
        interval_loss += value
        interval_steps += 1
        done = step + 1
        if (a.eval_every and done % a.eval_every == 0) or done == a.steps:
            e0 = time.perf_counter()
            seconds = e0 - start - eval_s
            correct, total = evaluate() if not tokens else (0, 0)
            agg = torch.tensor([interval_loss, interval_steps, interval_correct,
                                interval_seen], dtype=torch.float64)
            dist.all_reduce(agg)
            mean_loss = float(agg[0] / agg[1])
            if tokens:  # the training batches' accuracy, as oasr-run's progress line
                correct, total = int(agg[2]), int(agg[3])
            interval_loss, interval_steps = 0.0, 0
            interval_correct = interval_seen = 0
            this_eval = time.perf_counter() - e0
            eval_s += this_eval
            line = {"event": "eval", "step": done, "seconds": round(seconds, 4),
                    "loss": round(mean_loss, 6),
                    "accuracy": correct / total if total else None,
                    "correct": correct, "total": total, "eval_s": round(this_eval, 3)}
            evals.append(line)
            if rank == 0:
                print(json.dumps(line), flush=True)
    train_s = time.perf_counter() - start - eval_s
    first = torch.tensor([first_loss], dtype=torch.float64)
    dist.all_reduce(first)
    dist.barrier()
    dist.destroy_process_group()
    if rank != 0:
        return
    later = times[1:] or times
    stats = None
    if psgd_state is not None:
        rate, before, after = psgd_state.compression_stats()
        stats = {"compress_rate": rate, "numel_before": before, "numel_after": after}
    grad_bytes = sum(q.numel() * q.element_size() for q in model.parameters())
    print(json.dumps({
        "event": "summary", "model": a.model, "classes": classes, "ranks": world,
        "batch": a.batch, "steps": a.steps, "eval_every": a.eval_every,
        "optimizer": a.optimizer, "lr": a.lr,
        "momentum": a.momentum if a.optimizer == "momentum" else 0.0,
        "seed": a.seed, "hook": a.hook,
        "powersgd_start": a.powersgd_start if hook == "powersgd" else None,
        "bucket_cap_mb": a.bucket_cap_mb, "gradient_bytes": grad_bytes,
        "mean_step_ms": statistics.fmean(later) * 1e3,
        "median_step_ms": statistics.median(later) * 1e3,
        "train_s": round(train_s, 4), "eval_s": round(eval_s, 3),
        "final_loss": evals[-1]["loss"], "final_accuracy": evals[-1]["accuracy"],
        "first_loss": float(first[0]) / world, "powersgd_stats": stats, "init": init,
        "train_records": len(train_y), "test_records": len(test_y),
        "torch": torch.__version__, "torchvision": torchvision.__version__,
        "blas": "mkl" if torch.backends.mkl.is_available() else "generic"}), flush=True)


if __name__ == "__main__":
    main()
