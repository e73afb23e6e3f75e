#!/usr/bin/env python3
"""Compares two `oasr-run --dump-grads` files (JSON) of the same model.

    compare_weights.py A.json B.json                 bitwise
    compare_weights.py A.json B.json --summation [--lr LR]
    compare_weights.py A.json B.json --rtol R

Bitwise (the default): every parameter value and f32 state tensor
(BatchNorm statistics) must be identical in float32. For runs whose only
difference is the order the ranks' gradients are summed in (another plan,
route or collective on 3+ ranks, where a sum of two is the same in any order).

--summation: the two runs took ONE step from the same weights on the same
data, so each rank's own gradient g_r is the same in both, and only the
average over the P ranks was summed in another order. For any order of P
terms in float32, |fl(sum) - sum| <= gamma(P-1) * sum_r |g_r| with
gamma(n) = n u / (1 - n u), u = 2^-24 (Higham, Accuracy and Stability of
Numerical Algorithms, 2nd ed., eq. 4.4), and the scaling by 1/P (a multiply
by the rounded 1/P, or a divide) adds at most 2u |avg| on each side. So per
element

    |gA - gB| <= 2 gamma(P-1) M / P + 2u (|gA| + |gB|) = bound_g,

where M = sum_r |g_r| is the dump's "grad_abs_sum" (oasr-run records each
rank's gradient before averaging and sums the magnitudes over the ranks).
With --lr LR the values are the weights after that step's SGD update
w1 = w0 - LR g (momentum's first velocity is g itself), each rounded once
more in the product and the difference:

    |wA - wB| <= LR bound_g + u LR (|gA| + |gB|) + u (|wA| + |wB|).

BatchNorm statistics come from the forward, which is the same: bitwise.
Prints the worst error as a fraction of its bound.

--rtol R: every value within R relative to the tensor's largest magnitude
(kept for comparisons that are not one summation, e.g. two algorithms).
Exits 1 on a mismatch, naming the tensor and element.
"""
import argparse
import json
import struct
import sys

U = 2.0 ** -24


def gamma(n):
    return n * U / (1 - n * U)


def number(x):
    # Non-finite values are the strings "NaN", "Infinity", "-Infinity".
    return float(x) if isinstance(x, str) else x


def load(path):
    d = json.load(open(path))
    for p in d["params"].values():
        for k in ("value", "grad", "grad_abs_sum"):
            if k in p:
                p[k] = [number(x) for x in p[k]]
    for s in d.get("state", {}).values():
        s["value"] = [number(x) for x in s["value"]]
    return d


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def same_bits(a, b):
    # NaN equals NaN here: a buffer's non-finite values must match too.
    return f32(a) == f32(b) or (a != a and b != b)


p = argparse.ArgumentParser()
p.add_argument("a")
p.add_argument("b")
mode = p.add_mutually_exclusive_group()
mode.add_argument("--rtol", type=float, default=0.0)
mode.add_argument("--summation", action="store_true")
p.add_argument("--lr", type=float, default=None)
a = p.parse_args()
if a.lr is not None and not a.summation:
    sys.exit("--lr belongs to --summation")
DA, DB = load(a.a), load(a.b)
PA, PB = DA["params"], DB["params"]
if sorted(PA) != sorted(PB):
    sys.exit(f"parameter names differ: {sorted(PA)} vs {sorted(PB)}")
SA, SB = DA.get("state", {}), DB.get("state", {})
if sorted(SA) != sorted(SB):
    sys.exit(f"state names differ: {sorted(SA)} vs {sorted(SB)}")


def check_bitwise(name, va, vb):
    if len(va) != len(vb) or not va:
        sys.exit(f"{name}: {len(va)} vs {len(vb)} values")
    for i, (x, y) in enumerate(zip(va, vb)):
        if not same_bits(x, y):
            sys.exit(f"{name}[{i}]: {x!r} != {y!r} (not bitwise identical)")


counts = f"{len(PA)} parameters, {len(SA)} state"
if a.summation:
    ranks = DA.get("ranks")
    if ranks is None or DB.get("ranks") != ranks:
        sys.exit(f"--summation needs dumps with the same 'ranks' (got "
                 f"{ranks} and {DB.get('ranks')}): oasr-run writes it with "
                 "the gradient magnitudes")
    worst, where = 0.0, ""
    for name in sorted(PA):
        pa, pb = PA[name], PB[name]
        if "grad_abs_sum" not in pa or "grad_abs_sum" not in pb:
            sys.exit(f"{name}: no grad_abs_sum in the dumps")
        # The two runs saw the same local gradients: their magnitudes agree
        # up to the sum over ranks of magnitudes (itself summed in double).
        M = [max(x, y) for x, y in zip(pa["grad_abs_sum"], pb["grad_abs_sum"])]
        tensors = [("grad", pa["grad"], pb["grad"])]
        if a.lr is not None:
            tensors.append(("value", pa["value"], pb["value"]))
        for i, (ga, gb) in enumerate(zip(pa["grad"], pb["grad"])):
            bg = 2 * gamma(ranks - 1) * M[i] / ranks + 2 * U * (abs(ga) + abs(gb))
            checks = [(f"{name}.grad[{i}]", ga, gb, bg)]
            if a.lr is not None:
                wa, wb = pa["value"][i], pb["value"][i]
                bw = (a.lr * bg + U * a.lr * (abs(ga) + abs(gb)) +
                      U * (abs(wa) + abs(wb)))
                checks.append((f"{name}.value[{i}]", wa, wb, bw))
            for where_i, x, y, bound in checks:
                d = abs(x - y)
                if d > bound:
                    sys.exit(f"{where_i}: |{x!r} - {y!r}| = {d:.3g} > the "
                             f"summation bound {bound:.3g} ({ranks} ranks, "
                             f"sum of magnitudes {M[i]:.3g})")
                if bound > 0 and d / bound > worst:
                    worst, where = d / bound, where_i
    for name in sorted(SA):
        check_bitwise("state:" + name, SA[name]["value"], SB[name]["value"])
    print(f"within the summation bound ({counts}, {ranks} ranks; worst "
          f"err/bound {worst:.2f}" + (f" at {where})" if where else ")"))
    sys.exit(0)

A = {k: v["value"] for k, v in PA.items()}
B = {k: v["value"] for k, v in PB.items()}
for k in SA:
    A["state:" + k], B["state:" + k] = SA[k]["value"], SB[k]["value"]
worst, where = 0.0, ""
for name in sorted(A):
    va, vb = A[name], B[name]
    if a.rtol == 0.0:
        check_bitwise(name, va, vb)
        continue
    if len(va) != len(vb) or not va:
        sys.exit(f"{name}: {len(va)} vs {len(vb)} values")
    scale = max(max(abs(x) for x in va), 1e-30)
    for x, y in zip(va, vb):
        d = abs(x - y) / max(abs(x), abs(y), scale * 1e-3)
        if d > worst:
            worst, where = d, name
if a.rtol and worst > a.rtol:
    sys.exit(f"{where}: relative difference {worst:.3g} > {a.rtol}")
print(f"identical ({counts}" +
      (f", max rel diff {worst:.3g})" if a.rtol else ", bitwise)"))
