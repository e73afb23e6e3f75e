#!/usr/bin/env python3
"""Decode + augment throughput of --data=imagefolder against PyTorch's
DataLoader on the same JPEG files, one core each (issue 50).

Generates --images JPEGs of 500x375 (ImageNet's typical size; smooth
random patterns with noise, quality 90) in 10 class folders, then times,
interleaved for --rounds rounds:
  * oasr: oasr-bench-data (bench/data/DataBench.cpp) with OMP_NUM_THREADS=1,
    --augment=resized-crop,flip --normalize=imagenet, batch 32;
  * PyTorch + PIL: DataLoader(ImageFolder(DIR, RandomResizedCrop(224),
    RandomHorizontalFlip(), ToTensor(), Normalize(...)), batch 32,
    num_workers=0), torch.set_num_threads(1);
  * PyTorch + torchvision.io.decode_jpeg: the same transforms on the
    decoded uint8 tensor (antialiased resize), num_workers=0.
Images per second of process CPU time, medians and ranges; writes OUT.

Usage: bench/data/run_data.py --out bench/results/data-imagefolder-DATE.md
           [--build build] [--torch-python /root/venv-torch/bin/python]
           [--images 640] [--rounds 3]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

GEN = r'''
import os, sys, numpy as np
from PIL import Image
d, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
yy, xx = np.mgrid[0:375, 0:500]
for c in range(10):
    os.makedirs(f"{d}/c{c:02d}", exist_ok=True)
for i in range(n):
    base = rng.random(3) * 255
    img = (np.sin(xx / (20 + 30 * rng.random()) + yy / (25 + 40 * rng.random())
                  + rng.random() * 6)[..., None] * 60 + base
           + rng.normal(0, 12, (375, 500, 3))).clip(0, 255).astype(np.uint8)
    Image.fromarray(img).save(f"{d}/c{i % 10:02d}/{i:05d}.jpg", quality=90)
'''

TORCH = r'''
import sys, time, torch, torchvision
from torchvision import datasets, transforms as T
from torchvision.io import decode_jpeg, read_file
torch.set_num_threads(1)
d, mode = sys.argv[1], sys.argv[2]
norm = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
if mode == "pil":
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), norm])
    ds = datasets.ImageFolder(d, tf)
else:
    tf = T.Compose([T.RandomResizedCrop(224, antialias=True), T.RandomHorizontalFlip(),
                    T.ConvertImageDtype(torch.float32), norm])
    ds = datasets.DatasetFolder(d, lambda p: tf(decode_jpeg(read_file(p))), extensions=(".jpg",))
dl = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, num_workers=0)
it = iter(dl)
next(it)
n, t0 = 0, time.process_time()
for x, y in it:
    n += x.shape[0]
print(f"{n} {time.process_time() - t0}")
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--torch-python", default="/root/venv-torch/bin/python")
    ap.add_argument("--images", type=int, default=640)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if os.path.exists(a.out):
        sys.exit(f"{a.out} exists; results are never overwritten")
    subprocess.run(["ninja", "-C", a.build, "oasr-bench-data"], check=True,
                   stdout=subprocess.DEVNULL)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = {"oasr": [], "pil": [], "decode_jpeg": []}
    loads = []
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([a.torch_python, "-c", GEN, d, str(a.images)], check=True)
        batches = a.images // 32 - 1
        for _ in range(a.rounds):
            loads.append(os.getloadavg()[0])
            out = subprocess.run(
                [os.path.join(a.build, "bench", "oasr-bench-data"), "--data",
                 f"imagefolder:{d}", "--shape", "3,224,224", "--batch", "32",
                 "--batches", str(batches), "--augment", "resized-crop,flip",
                 "--normalize", "imagenet", "--classes", "10"],
                check=True, capture_output=True, text=True, env=env).stdout
            res["oasr"].append(float(re.search(r"([0-9.]+) images/s per CPU second",
                                               out).group(1)))
            for mode in ("pil", "decode_jpeg"):
                loads.append(os.getloadavg()[0])
                out = subprocess.run([a.torch_python, "-c", TORCH, d, mode], check=True,
                                     capture_output=True, text=True, env=env).stdout
                n, secs = out.split()
                res[mode].append(int(n) / float(secs))
    ver = subprocess.run([a.torch_python, "-c", "import torch, torchvision, PIL; "
                          "print(torch.__version__, torchvision.__version__, PIL.__version__)"],
                         capture_output=True, text=True).stdout.split()
    tj = subprocess.run(["pkg-config", "--modversion", "libturbojpeg"], capture_output=True,
                        text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    med = {k: statistics.median(v) for k, v in res.items()}
    lines = [f"# Image folder decode + augment throughput, {time.strftime('%Y-%m-%d')}", "",
             f"`bench/data/run_data.py --out {a.out} --images {a.images} --rounds {a.rounds}`: "
             f"{a.images} JPEGs of 500x375 (quality 90) in 10 classes; RandomResizedCrop 224 + "
             f"horizontal flip + ImageNet normalisation, batch 32, one core each "
             f"(OMP_NUM_THREADS=1, torch.set_num_threads(1), num_workers=0); images per "
             f"second of process CPU time, median of {a.rounds} interleaved rounds (range). "
             f"oasr: libjpeg-turbo {tj} (TurboJPEG), oneDNN bilinear resampling; PyTorch "
             f"{ver[0] if ver else '?'}, torchvision {ver[1] if len(ver) > 1 else '?'}, "
             f"PIL {ver[2] if len(ver) > 2 else '?'}. Machine: {cpu}, {os.cpu_count()} cores, "
             f"load {min(loads):.2f}-{max(loads):.2f}.", "",
             "| loader | images/s per core | oasr / it |", "|---|---|---|"]
    for k, label in [("oasr", "oasr imagefolder"), ("pil", "PyTorch DataLoader + PIL"),
                     ("decode_jpeg", "PyTorch DataLoader + torchvision.io.decode_jpeg")]:
        v = res[k]
        lines.append(f"| {label} | {med[k]:.1f} ({min(v):.1f}-{max(v):.1f}) | "
                     f"{med['oasr'] / med[k]:.2f}x |")
    lines.append("")
    open(a.out, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
