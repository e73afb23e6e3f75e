"""oasr-run's data formats, written from numpy arrays: images as
MNIST-layout IDX files (`--data=mnist:DIR`, float32 images allowed) and
token ids as a u16 file with int64 labels beside it (`--data=tokens:FILE`).
"""
import os
import struct

import numpy as np


def write_idx(path, array, code):
    """An IDX file of `array`: code 0x0D big-endian float32, 0x08 bytes."""
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, code, array.ndim))
        for d in array.shape:
            f.write(struct.pack(">I", d))
        f.write(array.astype(">f4" if code == 0x0D else np.uint8).tobytes())


def write_images(directory, x, y):
    """float32 images `x` [N, ...] and byte labels `y` [N] as the training
    set of --data=mnist:DIRECTORY; returns that argument."""
    os.makedirs(directory, exist_ok=True)
    write_idx(os.path.join(directory, "train-images-idx3-ubyte"),
              np.asarray(x, np.float32), 0x0D)
    write_idx(os.path.join(directory, "train-labels-idx1-ubyte"),
              np.asarray(y), 0x08)
    return f"mnist:{directory}"


def write_tokens(path, ids, labels):
    """Token ids [N, T] (as u16) and int64 labels (FILE.labels) for
    --data=tokens:PATH; returns that argument."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    np.asarray(ids).reshape(-1).astype("<u2").tofile(path)
    np.asarray(labels).astype("<i8").tofile(path + ".labels")
    return f"tokens:{path}"
