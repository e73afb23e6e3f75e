#!/usr/bin/python3
"""Converts scikit-learn's bundled 8x8 handwritten digits to MNIST IDX files.

    make_digits.py OUTDIR [--test-fraction 0.2] [--seed 0]

Writes OUTDIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte, the layout
`oasr-run --data=mnist:OUTDIR` reads. The data ships with Debian's
python3-sklearn (no download): 1797 images, pixel values 0..16, scaled to
0..255. The train/test split is a seeded shuffle, stratification-free.
"""
import argparse
import os
import struct
import sys

import numpy as np
from sklearn.datasets import load_digits


def write_idx(path, array):
    array = np.ascontiguousarray(array, dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 0x08, array.ndim))
        for d in array.shape:
            f.write(struct.pack(">I", d))
        f.write(array.tobytes())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("outdir")
    p.add_argument("--test-fraction", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    digits = load_digits()
    images = np.rint(digits.images * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
    labels = digits.target.astype(np.uint8)
    order = np.random.RandomState(a.seed).permutation(len(labels))
    n_test = int(round(len(labels) * a.test_fraction))
    test, train = order[:n_test], order[n_test:]
    os.makedirs(a.outdir, exist_ok=True)
    write_idx(os.path.join(a.outdir, "train-images-idx3-ubyte"), images[train])
    write_idx(os.path.join(a.outdir, "train-labels-idx1-ubyte"), labels[train])
    write_idx(os.path.join(a.outdir, "t10k-images-idx3-ubyte"), images[test])
    write_idx(os.path.join(a.outdir, "t10k-labels-idx1-ubyte"), labels[test])
    print(f"{a.outdir}: {len(train)} train, {len(test)} test digits (8x8)")


if __name__ == "__main__":
    sys.exit(main())
