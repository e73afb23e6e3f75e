#!/usr/bin/python3
"""Writes a dataset directory with one specific defect, for the data loader
error tests.

    write_bad_data.py DIR KIND

MNIST IDX kinds (20 samples of 64 values, labels 0..9, otherwise valid):
  gzip            train-images-idx3-ubyte is gzip-compressed
  idx-type        the images' IDX element type is 0x0B (16-bit int)
  idx-header      the images' header stops in the middle of its dimensions
  idx-size        the header announces more samples than the file holds
  label-rank      train-labels-idx1-ubyte is 2-D
  label-count     19 labels for 20 samples
  label-range     a label is 12 (the model has 10 classes)
  no-labels       train-labels-idx1-ubyte is missing
  test-shape      valid train split, t10k images with 100 values per sample
CIFAR-10 binary kinds (2 records per data_batch_N.bin, 3072 values):
  cifar-size      data_batch_3.bin has one byte too many
  cifar-empty     data_batch_1.bin is empty
  cifar-missing   data_batch_4.bin is missing
"""
import gzip
import os
import struct
import sys

d, kind = sys.argv[1], sys.argv[2]
os.makedirs(d, exist_ok=True)


def idx(name, code, dims, payload):
    with open(os.path.join(d, name), "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, code, len(dims)))
        f.write(struct.pack(">" + "I" * len(dims), *dims))
        f.write(payload)


def mnist(prefix="train", n=20, features=64, labels=None):
    labels = labels if labels is not None else [i % 10 for i in range(n)]
    idx(f"{prefix}-images-idx3-ubyte", 8, [n, features], bytes(range(n)) * features)
    idx(f"{prefix}-labels-idx1-ubyte", 8, [len(labels)], bytes(labels))


images = os.path.join(d, "train-images-idx3-ubyte")
if kind == "gzip":
    mnist()
    data = open(images, "rb").read()
    open(images, "wb").write(gzip.compress(data))
elif kind == "idx-type":
    mnist()
    idx("train-images-idx3-ubyte", 0x0B, [20, 32], bytes(20 * 64))
elif kind == "idx-header":
    mnist()
    open(images, "wb").write(struct.pack(">BBBBI", 0, 0, 8, 3, 20))
elif kind == "idx-size":
    mnist()
    idx("train-images-idx3-ubyte", 8, [21, 64], bytes(20 * 64))
elif kind == "label-rank":
    mnist()
    idx("train-labels-idx1-ubyte", 8, [20, 1], bytes(20))
elif kind == "label-count":
    mnist(labels=[i % 10 for i in range(19)])
elif kind == "label-range":
    mnist(labels=[12 if i == 7 else i % 10 for i in range(20)])
elif kind == "no-labels":
    mnist()
    os.remove(os.path.join(d, "train-labels-idx1-ubyte"))
elif kind == "test-shape":
    mnist()
    mnist("t10k", n=10, features=100)
elif kind.startswith("cifar-"):
    record = bytes([3]) + bytes(range(256)) * 12
    for b in range(1, 6):
        with open(os.path.join(d, f"data_batch_{b}.bin"), "wb") as f:
            if not (kind == "cifar-empty" and b == 1):
                f.write(record * 2)
            if kind == "cifar-size" and b == 3:
                f.write(b"\0")
    if kind == "cifar-missing":
        os.remove(os.path.join(d, "data_batch_4.bin"))
    elif kind not in ("cifar-size", "cifar-empty"):
        sys.exit(f"unknown kind {kind}")
else:
    sys.exit(f"unknown kind {kind}")
