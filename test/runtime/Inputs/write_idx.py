#!/usr/bin/env python3
"""Writes a small random MNIST-layout IDX dataset: write_idx.py DIR N FEATURES."""
import os
import random
import struct
import sys

d, n, f = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(d, exist_ok=True)
rng = random.Random(0)
with open(os.path.join(d, "train-images-idx3-ubyte"), "wb") as out:
    out.write(struct.pack(">BBBBII", 0, 0, 8, 2, n, f))
    out.write(bytes(rng.randrange(256) for _ in range(n * f)))
with open(os.path.join(d, "train-labels-idx1-ubyte"), "wb") as out:
    out.write(struct.pack(">BBBBI", 0, 0, 8, 1, n))
    out.write(bytes(rng.randrange(10) for _ in range(n)))
