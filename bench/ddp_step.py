#!/usr/bin/env python3
"""PyTorch DDP, the peer of bench/run_cluster.sh on the emulated cluster.

    scripts/cluster.sh run NP -- /root/venv-torch/bin/python bench/ddp_step.py \\
        MODEL --master=10.77.0.1 [--batch 8] [--steps 6] [--bucket-cap-mb 25]

Trains MODEL, built by the same torchvision code and seed that
scripts/export_models.py exports to ONNX for oasr-run, with
DistributedDataParallel over the gloo backend: one process per rank, rank
and world size from Open MPI's environment (OMPI_COMM_WORLD_RANK/SIZE, or
RANK/WORLD_SIZE), the rendezvous on --master (node 1's address inside the
cluster), gloo's sockets on --ifname (eth0: the node's shaped link). Every
rank runs 1 compute thread (as oasr-run --threads=1) on one fixed synthetic
batch (as oasr-run --data=synthetic), with plain SGD (lr 0.01, no momentum,
oasr-run's default optimizer for an .onnx input).

--bucket-cap-mb is DDP's bucket size (default 25, DDP's own); the first
bucket stays DDP's 1 MiB. --grad-dtype=bf16|f16 registers DDP's own
compression hook (torch.distributed.algorithms.ddp_comm_hooks.default_hooks
bf16_compress_hook / fp16_compress_hook: each bucket cast down, allreduced,
divided by the world size and cast back), the peer of oasr-run
--grad-dtype. Steps are timed on rank 0 from the start of the
forward pass to the end of the update; as oasr-run's summary, the mean of
steps 2..N (the first step builds the buckets and the caches). Then
--compute-steps steps under no_sync() (no allreduce) give the compute time
on the same ranks; the exposed communication is the difference of the
medians (the definition bench/run_cluster.sh uses for oasr too: the step
minus the same system's step without communication). DDP runs with
broadcast_buffers=False, as oasr does not broadcast BatchNorm's running
statistics each step; --broadcast-buffers restores DDP's default.

Rank 0 prints oasr-run's summary lines (mean iteration, compute, exposed
comm) and one JSON line with the same numbers, the buckets DDP used and the
torch build.
"""
import argparse
import json
import os
import statistics
import sys
import time

import ddp_launch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="a scripts/export_models.py model (resnet18, resnet50, transformer, ...)")
    ddp_launch.add_rendezvous_args(p)
    p.add_argument("--batch", type=int, default=8, help="per-rank batch")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--compute-steps", type=int, default=5)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--broadcast-buffers", action="store_true",
                   help="DDP's default: broadcast rank 0's buffers (BatchNorm's running "
                        "statistics) before every forward; oasr does not")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--grad-dtype", default="f32", choices=["f32", "bf16", "f16"],
                   help="gradients on the wire (DDP's compression hooks)")
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"],
                   help="bf16: forward and loss under torch.autocast(\"cpu\", bfloat16), "
                        "PyTorch's mixed precision on the CPU")
    a = p.parse_args()
    rank, world = ddp_launch.rank_and_world("ddp_step.py", a)
    if a.steps < 2 or a.compute_steps < 2:
        sys.exit("ddp_step.py: error: --steps and --compute-steps must be >= 2 (the first is not timed)")
    if not a.bucket_cap_mb > 0:
        sys.exit(f"ddp_step.py: error: --bucket-cap-mb={a.bucket_cap_mb}: must be > 0")

    import export_models
    if a.model not in export_models.MODELS + export_models.EXTRA_MODELS:
        sys.exit(f"ddp_step.py: error: unknown model '{a.model}' (expected one of "
                 f"{', '.join(export_models.MODELS + export_models.EXTRA_MODELS)})")
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    ddp_launch.init_gloo(a, rank, world)

    torch.manual_seed(0)
    model, example = export_models.build(a.model)
    model.train()
    g = torch.Generator().manual_seed(1 + rank)
    if a.model == "transformer":
        x = torch.randint(0, 1000, (a.batch, example.shape[1]), generator=g)
        y = torch.randint(0, 10, (a.batch,), generator=g)
    elif a.model == "bert_base":
        x = torch.randint(1, 30522, (a.batch, example.shape[1]), generator=g)
        y = torch.randint(0, 2, (a.batch,), generator=g)
    else:
        x = torch.randn((a.batch,) + tuple(example.shape[1:]), generator=g)
        y = torch.randint(0, 1000, (a.batch,), generator=g)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_cap_mb,
                                                    broadcast_buffers=a.broadcast_buffers)
    if a.grad_dtype != "f32":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook if a.grad_dtype == "bf16"
                               else default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr)

    def step():
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        return time.perf_counter() - t0

    dist.barrier()
    times = [step() for _ in range(a.steps)]
    # Gradient buckets as DDP rebuilt them after the first step (ready order).
    info = ddp._get_ddp_logging_data()
    sizes = info.get("rebuilt_bucket_sizes") or info.get("bucket_sizes") or ""
    buckets = len([s for s in str(sizes).split(",") if s.strip()])
    dist.barrier()
    compute = []
    with ddp.no_sync():
        compute = [step() for _ in range(a.compute_steps)]
    dist.barrier()
    dist.destroy_process_group()
    if rank != 0:
        return
    mean = statistics.fmean(times[1:])
    med = statistics.median(times[1:])
    comp = statistics.median(compute[1:])
    grad_bytes = sum(q.numel() * q.element_size() for q in model.parameters() if q.requires_grad)
    print(f"ddp {a.model}: {world} rank(s), gloo over {a.ifname}, bucket_cap_mb {a.bucket_cap_mb:g}, "
          f"gradients in {a.grad_dtype} on the wire, compute in {a.precision}, "
          f"broadcast_buffers={a.broadcast_buffers}, "
          f"{buckets} bucket(s), {grad_bytes} gradient bytes; torch {torch.__version__}")
    print(f"  mean iteration   {mean * 1e3:9.3f} ms (median {med * 1e3:.3f} ms, "
          f"range {min(times[1:]) * 1e3:.3f}-{max(times[1:]) * 1e3:.3f} ms)")
    print(f"  compute          {comp * 1e3:9.3f} ms (no_sync, no allreduce; median)")
    print(f"  exposed comm     {max(med - comp, 0.0) * 1e3:9.3f} ms (median step - compute)")
    print(json.dumps({"model": a.model, "ranks": world, "batch": a.batch,
                      "bucket_cap_mb": a.bucket_cap_mb, "buckets": buckets,
                      "grad_dtype": a.grad_dtype,
                      "bucket_sizes": str(sizes), "step_ms": [t * 1e3 for t in times],
                      "mean_ms": mean * 1e3, "median_ms": med * 1e3, "compute_ms": comp * 1e3,
                      "torch": torch.__version__,
                      "blas": "mkl" if torch.backends.mkl.is_available() else "generic",
                      "mkldnn": torch.backends.mkldnn.is_available()}))


if __name__ == "__main__":
    main()
