#!/usr/bin/env python3
"""PyTorch side of the precision benchmark (bench/run_precision.py).

    /root/venv-torch/bin/python bench/precision.py MODEL [--mode f32|tf32|bf16]
        [--device cpu|cuda] [--threads 1] [--batch 8] [--steps 4]
        [--compile [--warmup 3]]

Builds MODEL (seed 0) and trains it with SGD (lr 0.01) on one fixed batch:
forward, cross-entropy, backward, update, STEPS times. --mode=bf16 wraps
forward and loss in torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's
documented CPU mixed precision (weights, gradients and the update stay f32);
--mode=f32 runs plain float32. On --device=cuda (bench/run_gpu.py) every
step ends with torch.cuda.synchronize(); f32 turns TF32 off everywhere,
tf32 is PyTorch's default (cuDNN convolutions on TF32 tensor cores, matrix
products in f32), bf16 is torch.autocast("cuda", dtype=torch.bfloat16)
with those defaults; the JSON adds the peak of
torch.cuda.max_memory_allocated. Prints one JSON line: the median and range of
the step times after the first (s), every step time, the first and last
loss, torch's version, whether oneDNN (mkldnn) is available, and the peak
resident set (getrusage ru_maxrss, MiB).

--compile wraps the model in torch.compile(mode="reduce-overhead")
(Inductor's kernels, replayed as CUDA graphs on a GPU; bench/run_gpu.py's
peer for oasr-run --cuda-graph). Compiling and recording take the first
steps, so the first WARMUP steps are not timed; the JSON adds the seconds
they took ("compile_s"). A model that does not compile exits non-zero
with torch's error.

Models, as oasr-run gets them from bench/precision_export.py:
  resnet18, resnet50  torchvision, 224x224 images, 1000 classes
  vit_b_16            torchvision ViT-B/16, 224x224 images, 1000 classes
  bert_base           BertBase of bench/run_large_models.sh: token + position
                      embeddings, 12 post-norm layers 768 wide, GELU, padding
                      mask, mean pooling, 2 classes; sequence 128, vocab 30522
The batch is make_batch's (numpy, seed 1), the same one the export helper
writes for `oasr-run --data=...`. Image labels lie in [0, 256) (oasr-run's
IDX label files are bytes); half of BERT's sequences end in 32 pad tokens.

This module also serves bench/precision_export.py (Debian's python3-torch
1.13 or any later torch): MODELS, build() and make_batch() are shared.
"""
import argparse
import contextlib
import json
import resource
import statistics
import time

import numpy as np
import torch

SEQ = 128
VOCAB = 30522
PAD_TAIL = 32  # pad tokens at the end of half of BERT's sequences
IMAGE = (3, 224, 224)
LABEL_LIMIT = 256  # IDX label files hold bytes

# name -> (input kind, classes)
MODELS = {
    "resnet18": ("image", 1000),
    "resnet50": ("image", 1000),
    "vit_b_16": ("image", 1000),
    "bert_base": ("tokens", 2),
}


class BertBase(torch.nn.Module):
    """BERT-base's encoder: token + position embeddings, 12 post-norm layers
    (768 wide, 12 heads, 3072 feed-forward, GELU), a padding mask from the
    ids, mean pooling and a 2-way classifier."""

    def __init__(self, vocab=30522, seq=128):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, 768)
        self.pos = torch.nn.Parameter(torch.randn(1, seq, 768) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0,
                                                 activation="gelu",
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 12,
                                                   enable_nested_tensor=False)
        self.head = torch.nn.Linear(768, 2)

    def forward(self, ids):
        x = self.encoder(self.tok(ids) + self.pos, src_key_padding_mask=ids == 0)
        return self.head(x.mean(1))


def build(name):
    """MODELS[name] in training mode, weights from seed 0."""
    import torchvision
    torch.manual_seed(0)
    if name == "bert_base":
        model = BertBase(VOCAB, SEQ)
    else:
        model = getattr(torchvision.models, name)(num_classes=MODELS[name][1])
    return model.train()


def make_batch(name, batch, seed=1):
    """(inputs, labels) of the fixed batch, as numpy arrays: float32 images
    [B, 3, 224, 224] or int64 token ids [B, 128]; int64 labels [B]."""
    kind, classes = MODELS[name]
    rng = np.random.RandomState(seed)
    if kind == "image":
        x = rng.standard_normal((batch,) + IMAGE).astype(np.float32)
    else:
        x = rng.randint(1, VOCAB, size=(batch, SEQ)).astype(np.int64)
        x[: batch // 2, SEQ - PAD_TAIL:] = 0  # padded tails
    y = rng.randint(0, min(classes, LABEL_LIMIT), size=batch).astype(np.int64)
    return x, y


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", choices=sorted(MODELS))
    p.add_argument("--mode", choices=("f32", "tf32", "bf16"), default="f32")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--compile", action="store_true",
                   help='torch.compile(mode="reduce-overhead")')
    p.add_argument("--warmup", type=int, default=3,
                   help="with --compile: steps not timed (compiling, recording)")
    a = p.parse_args()
    skip = a.warmup if a.compile else 1
    if a.warmup < 1:
        p.error("--warmup must be at least 1")
    if a.steps < skip + 1:
        p.error(f"--steps must be at least {skip + 1} (the first {skip} "
                "not timed)")
    import torch.nn.functional as F

    cuda = a.device == "cuda"
    if a.mode == "tf32" and not cuda:
        p.error("--mode tf32 is a GPU mode")
    if cuda:
        # f32: FP32 units everywhere; tf32 and bf16: PyTorch's defaults
        # (cuDNN convolutions on TF32, matrix products in f32).
        torch.backends.cudnn.allow_tf32 = a.mode != "f32"
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
    torch.set_num_threads(a.threads)
    model = build(a.model).to(a.device)
    step_model = (torch.compile(model, mode="reduce-overhead") if a.compile
                  else model)
    x, y = make_batch(a.model, a.batch)
    x, y = torch.from_numpy(x).to(a.device), torch.from_numpy(y).to(a.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def autocast():
        if a.mode == "bf16":
            return torch.autocast(a.device, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    times, losses = [], []
    for _ in range(a.steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast():
            logits = step_model(x)
            loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
        losses.append(loss.detach().item())
    steady = times[skip:]
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    out = {
        "model": a.model, "mode": a.mode, "batch": a.batch,
        "device": a.device, "threads": a.threads, "steps": a.steps,
        "torch": torch.__version__,
        "mkldnn": torch.backends.mkldnn.is_available(),
        "logits_dtype": str(logits.dtype).replace("torch.", ""),
        "median_s": statistics.median(steady),
        "min_s": min(steady), "max_s": max(steady), "times_s": times,
        "loss_first": losses[0], "loss_last": losses[-1],
        "peak_rss_mib": rss_kib / 1024.0, "compiled": a.compile}
    if a.compile:
        out["compile_s"] = sum(times[:skip])
    if cuda:
        out["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
        out["gpu"] = torch.cuda.get_device_name()
        out["cudnn"] = torch.backends.cudnn.version()
        out["cuda"] = torch.version.cuda
    print(json.dumps(out))


if __name__ == "__main__":
    main()
