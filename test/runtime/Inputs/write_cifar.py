#!/usr/bin/python3
"""Writes a small real dataset in the CIFAR-10 binary layout.

    write_cifar.py OUTDIR [--seed 0]

Source: scikit-learn's bundled 8x8 handwritten digits (Debian
python3-sklearn, no download), upsampled to 32x32 and given three colour
planes (red the digit, green its inverse, blue the digit at half intensity),
so every record is a 1-byte label and 3072 bytes (1024 R, 1024 G, 1024 B,
rows top to bottom), as in the original distribution. The shuffled train
split goes to data_batch_1.bin ... data_batch_5.bin, a fifth of the digits
to test_batch.bin.
"""
import argparse
import os

import numpy as np
from sklearn.datasets import load_digits

p = argparse.ArgumentParser()
p.add_argument("outdir")
p.add_argument("--seed", type=int, default=0)
a = p.parse_args()

digits = load_digits()
gray = np.rint(digits.images * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
big = np.kron(gray, np.ones((1, 4, 4), dtype=np.uint8))  # N x 32 x 32
planes = np.stack([big, 255 - big, big // 2], axis=1)  # N x 3 x 32 x 32
records = np.concatenate(
    [digits.target.astype(np.uint8)[:, None], planes.reshape(len(big), 3072)],
    axis=1)
assert records.shape[1] == 3073

order = np.random.RandomState(a.seed).permutation(len(records))
n_test = len(records) // 5
test, train = order[:n_test], order[n_test:]
os.makedirs(a.outdir, exist_ok=True)
for b, part in enumerate(np.array_split(train, 5), start=1):
    records[part].tofile(os.path.join(a.outdir, f"data_batch_{b}.bin"))
records[test].tofile(os.path.join(a.outdir, "test_batch.bin"))
print(f"{a.outdir}: {len(train)} train records in 5 batches, "
      f"{len(test)} test records (32x32x3)")
