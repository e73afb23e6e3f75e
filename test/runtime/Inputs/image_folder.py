#!/usr/bin/python3
"""Image folders for --data=imagefolder:DIR (test/runtime/imagefolder.test).

    image_folder.py make DIR IDX_DIR [--size 8]
        DIR/{cat,dog,owl}/: 8x8 RGB PNGs, palette PNGs, gray PNGs and
        quality-95 JPEGs, seeded; IDX_DIR: the same images as PIL decodes
        them (convert("RGB"), [N, 3, 8, 8] bytes) in the loader's order
        (classes, then files, by name), for --data=mnist:IDX_DIR
    image_folder.py big DIR
        DIR/{a,b}/: 40x30 and 23x57 JPEGs and PNGs, for the crops
    image_folder.py bad KIND DIR
        One class folder holding one broken case: notimage, empty, truncated,
        cmyk, bomb (a PNG header claiming 100000x100000 pixels), link-out
    image_folder.py same A.json B.json
        The two gradient dumps are equal (the same batch went in)
"""
import json
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image


def make(d, idx_dir, size):
    rng = np.random.default_rng(3)
    images, labels = [], []
    for label, name in enumerate(["cat", "dog", "owl"]):
        os.makedirs(os.path.join(d, name))
        for k in range(4):
            px = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
            kind = ["rgb", "palette", "gray", "jpeg"][k]
            path = os.path.join(d, name, f"{k:02d}-{kind}.{'jpg' if kind == 'jpeg' else 'png'}")
            img = Image.fromarray(px)
            if kind == "palette":
                img = img.convert("P")
            elif kind == "gray":
                img = img.convert("L")
            img.save(path, quality=95) if kind == "jpeg" else img.save(path)
            back = np.asarray(Image.open(path).convert("RGB"))
            images.append(back.transpose(2, 0, 1))
            labels.append(label)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "..", "..", "python"))
    from oasr.data import write_idx
    os.makedirs(idx_dir, exist_ok=True)
    write_idx(os.path.join(idx_dir, "train-images-idx3-ubyte"),
              np.stack(images).astype(np.uint8), 0x08)
    write_idx(os.path.join(idx_dir, "train-labels-idx1-ubyte"),
              np.array(labels, np.uint8), 0x08)
    print(f"{len(images)} images in 3 classes")


def big(d):
    rng = np.random.default_rng(4)
    for name in "ab":
        os.makedirs(os.path.join(d, name))
        for k, (h, w) in enumerate([(30, 40), (57, 23), (30, 40)]):
            img = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
            img.save(os.path.join(d, name, f"{k}.{'jpg' if k % 2 else 'png'}"), quality=90)


def png_chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def bad(kind, d):
    c = os.path.join(d, "cls")
    os.makedirs(c)
    ok = Image.fromarray(np.zeros((8, 8, 3), np.uint8))
    if kind == "notimage":
        ok.save(os.path.join(c, "a.png"))
        open(os.path.join(c, "notes.txt"), "w").write("not an image\n")
    elif kind == "empty":
        ok.save(os.path.join(c, "a.png"))
        os.makedirs(os.path.join(d, "empty"))
    elif kind == "truncated":
        ok.save(os.path.join(c, "a.jpg"), quality=95)
        data = open(os.path.join(c, "a.jpg"), "rb").read()
        open(os.path.join(c, "a.jpg"), "wb").write(data[:len(data) // 2])
    elif kind == "cmyk":
        ok.convert("CMYK").save(os.path.join(c, "a.jpg"))
    elif kind == "bomb":
        ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
        with open(os.path.join(c, "a.png"), "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) +
                    png_chunk(b"IDAT", zlib.compress(b"\0" * 64)) +
                    png_chunk(b"IEND", b""))
    elif kind == "link-out":
        outside = os.path.join(os.path.dirname(os.path.abspath(d)), "outside.png")
        ok.save(outside)
        os.symlink(outside, os.path.join(c, "a.png"))
    else:
        sys.exit(f"unknown case {kind}")


def same(a, b):
    pa, pb = json.load(open(a))["params"], json.load(open(b))["params"]
    worst = 0.0
    for k in pa:
        g, h = np.array(pa[k]["grad"]), np.array(pb[k]["grad"])
        worst = max(worst, float(np.abs(g - h).max()))
    if worst != 0.0:
        sys.exit(f"gradients differ by up to {worst:.3e}")
    print(f"gradients equal: {len(pa)} parameters")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        size = int(sys.argv[5]) if len(sys.argv) > 5 else 8
        make(sys.argv[2], sys.argv[3], size)
    elif cmd == "big":
        big(sys.argv[2])
    elif cmd == "bad":
        bad(sys.argv[2], sys.argv[3])
    elif cmd == "same":
        same(sys.argv[2], sys.argv[3])
