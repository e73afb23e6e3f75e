#!/usr/bin/python3
"""Write a large synthetic oasr-profile-v1 file for timing the profile reader.

  /usr/bin/python3 bench/planner/gen_synthetic_profile.py OUT.json \
      [--tensors 100000] [--seed 1]

CNN-like: one layer per weight + bias pair (so --tensors 100000 gives 50,000
layers), names shaped like torchvision's ("stage3.block0412.conv2.weight"),
times and sizes drawn from a fixed seed, one document on one line (Python's
json.dump defaults): 10^5 tensors make 10.8 MB.
"""

import argparse
import json
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--tensors", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    layers = []
    for i in range((args.tensors + 1) // 2):
        name = f"stage{i % 4}.block{i:06d}.conv{i % 3}"
        channels = rng.choice([64, 128, 256, 512])
        grads = [{"name": f"{name}.weight", "bytes": 4 * channels * channels * 9},
                 {"name": f"{name}.bias", "bytes": 4 * channels}]
        layers.append({"name": name,
                       "backward_us": round(rng.uniform(5.0, 900.0), 3),
                       "forward_us": round(rng.uniform(2.0, 450.0), 3),
                       "grads": grads[: args.tensors - 2 * i]})
    doc = {"format": "oasr-profile-v1", "model": f"synthetic-{args.tensors}",
           "source": "bench/planner/gen_synthetic_profile.py", "batch": 32,
           "forward_us": 41000.0, "update_us": 950.0, "layers": layers,
           "comm": {"alpha_s": 9.75e-5, "beta_s_per_byte": 3.06e-10, "ranks": 8}}
    with open(args.out, "w") as f:
        json.dump(doc, f)
        f.write("\n")


if __name__ == "__main__":
    main()
