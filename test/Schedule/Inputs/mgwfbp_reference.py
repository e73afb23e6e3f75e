"""Differential test of oasr-plan's strategies against independent references.

usage: mgwfbp_reference.py OASR_PLAN [--instances=N] [--seed=S]
                           [--dp-max-layers=L]

For N seeded random profiles it runs
  OASR_PLAN PROFILE --strategy=mgwfbp,optimal,oasr --format=json
(and again with a per-group overhead and a packing cost on the instances with
at most L layers) and checks:

* mgwfbp: the groups equal, exactly, those of MG-WFBP's merge rule as the
  authors published it: HKBU-HPML/MG-WFBP, distributed_optimizer.py,
  `_DistributedOptimizer._generate_groups_mgwfbp` (with
  `utils.predict_allreduce_time_with_size`). `mgwfbp_groups` below is our own
  transcription of that rule, kept in the reference's shape (per-tensor lists
  in forward order, start times recomputed after every merge) so that it
  shares no structure with lib/Schedule's one-pass implementation. MG-WFBP
  plans with the basic alpha-beta model, so its groups must not change when
  the extras are given.
* optimal, oasr: the reported iteration time equals the minimum of a plain
  O(n^2) dynamic program over prefixes (DESIGN.md's recurrence, written here
  without any pruning), under the basic model for `optimal` and under the model
  with the extras for `oasr`; the reported groups are a partition of the
  gradients in ready order whose time, under an independent simulator here,
  is that minimum. (Optimal plans may tie, so the groups themselves are not
  compared.)

Prints one summary line per check, e.g. "mgwfbp: 400/400 instances match the
reference rule", the first mismatches on stderr, and exits 1 on any mismatch.

Mapping between the reference and our profiles. The reference takes
`seq_layernames`, one entry per parameter tensor in forward order, with
`layerwise_times[l]` the backward time charged to tensor l; backward visits
index L-1 first, tensor l is ready at taob[l] + tb[l] where
taob[l] = sum of tb[m] for m > l. Our profiles list layers in forward order,
each with its gradient tensors; backward visits layers last to first starting
at forward_us, and all tensors of a layer are ready when the layer ends; within
a layer tensors become ready in the order listed (docs/planner.md, "Ready
order"). So the reference's tensor sequence is our ready order reversed, and
the first ready tensor of a layer carries that layer's backward time, plus the
backward time of the gradient-free layers just before it in backward order
(and forward_us for the very first one); the other tensors of the layer carry
0. All generated times are multiples of 1/8 us, so every such sum is exact in
binary floating point and both ways of accumulating ready times give the same
numbers. The reference's unit is the second and the profile's the
microsecond; the rule only compares sums of times and alpha, so it runs here
in microseconds with alpha and beta converted as the planner converts them
(seconds * 1e6), which keeps every comparison bit-identical. Sizes: the
reference counts elements times `nbytes` (4 for fp32); generated sizes are
multiples of 4 bytes. The message time is
`utils.predict_allreduce_time_with_size` = alpha + beta * bytes; utils.py is
not in the copy of the repository we read, and the public copies of that
helper differ only for an empty message (some return 0.0 for size 0). We take
T(0) = 0, DESIGN.md's model; it matters only for zero-byte tensors.
"""

import json
import os
import random
import subprocess
import sys
import tempfile

NBYTES = 4  # fp32 elements, as the reference's `nbytes` without FP16

# alpha (s) and beta (s/byte): 0, MG-WFBP's measured points (2..16 workers,
# 56 Gb IB and 10 GbE) and a few others.
ALPHAS = [0.0, 1e-6, 2.554691138304671e-06, 4e-6, 2.5e-5,
          4.204298980348825e-05, 9.75367204301171e-05,
          0.00023583677659915685, 0.0005230272768511732,
          0.0009080981007148093]
BETAS = [0.0, 9.837548167872609e-11, 2.0589360830118177e-10,
         3.0568230536676206e-10, 7.395651186836712e-10,
         8.570746975492128e-10, 1e-9, 1e-8]
OVERHEADS_US = [0.0, 0.5, 5.0, 20.0, 100.0]
PACKS_US_PER_BYTE = [0.0, 1e-4, 2e-4, 1e-3]


# ---------------------------------------------------------------------------
# Random profiles
# ---------------------------------------------------------------------------

def eighths(rng, hi_us):
    """A time in [0, hi_us] that is a multiple of 1/8 us."""
    return rng.randint(0, int(hi_us * 8)) / 8


def random_profile(rng, num_layers):
    scale = rng.choice([2.0, 50.0, 500.0, 4000.0])
    layers = []
    for li in range(num_layers):
        r = rng.random()
        backward = 0.0 if r < 0.15 else eighths(rng, scale)
        num_grads = rng.choices([0, 1, 2, 3], weights=[15, 50, 25, 10])[0]
        grads = []
        for gi in range(num_grads):
            r = rng.random()
            if r < 0.1:
                nbytes = 0
            else:
                cap = rng.choice([64, 4096, 1 << 18, 1 << 22])
                nbytes = NBYTES * rng.randint(1, cap)
            grads.append({"name": "l%d.g%d" % (li, gi), "bytes": nbytes})
        layers.append({"name": "l%d" % li, "backward_us": backward,
                       "grads": grads})
    if not any(l["grads"] for l in layers):
        # The reference needs at least one tensor.
        l = rng.randrange(num_layers)
        layers[l]["grads"].append({"name": "l%d.g0" % l,
                                   "bytes": NBYTES * rng.randint(0, 1000)})
    return {"format": "oasr-profile-v1", "model": "random",
            "forward_us": eighths(rng, scale) if rng.random() < 0.5 else 0.0,
            "update_us": eighths(rng, scale) if rng.random() < 0.5 else 0.0,
            "layers": layers}


def ready_order(profile):
    """[(name, bytes, ready_us)] in the order gradients become ready."""
    out = []
    t = profile["forward_us"]
    for layer in reversed(profile["layers"]):
        t += layer["backward_us"]
        for g in layer["grads"]:
            out.append((g["name"], g["bytes"], t))
    return out


# ---------------------------------------------------------------------------
# MG-WFBP, transcribed from the published rule
# ---------------------------------------------------------------------------

def to_reference_input(profile):
    """(names, tb, sizes): the reference's per-tensor inputs in forward order."""
    names, tb, sizes = [], [], []  # built in ready order, reversed at the end
    carried = profile["forward_us"]
    for layer in reversed(profile["layers"]):
        carried += layer["backward_us"]
        for g in layer["grads"]:
            names.append(g["name"])
            tb.append(carried)
            sizes.append(g["bytes"] // NBYTES)
            carried = 0.0
    return names[::-1], tb[::-1], sizes[::-1]


def mgwfbp_groups(tb, sizes, alpha, beta):
    """Groups of tensor indices (forward order) in communication order."""
    L = len(sizes)

    def allreduce_time(numel):
        if numel == 0:
            return 0.0
        return alpha + beta * (numel * NBYTES)

    p = list(sizes)  # elements; a merged group's are summed into its head
    tc = [allreduce_time(s) for s in p]
    taob = [0.0] * L  # when tensor l's backward starts
    for l in range(L - 2, -1, -1):
        taob[l] = taob[l + 1] + tb[l + 1]

    def comm_starts():
        taoc = [0.0] * L
        taoc[L - 1] = taob[L - 1] + tb[L - 1]
        for l in range(L - 2, -1, -1):
            taoc[l] = max(taoc[l + 1] + tc[l + 1], taob[l] + tb[l])
        return taoc

    def merge(l):
        # Tensor l joins tensor l-1: the group's message moves to l-1.
        tc[l] = 0.0
        p[l - 1] += p[l]
        p[l] = 0
        tc[l - 1] = allreduce_time(p[l - 1])

    taoc = comm_starts()
    groups, group = [], []
    for l in range(L - 1, 0, -1):
        group.append(l)
        next_ready = taob[l - 1] + tb[l - 1]
        merged = False
        if next_ready < taoc[l] + tc[l]:  # the group is still communicating
            if taoc[l] > next_ready:  # ... and has not started: merge
                merged = True
            elif next_ready - taoc[l] < alpha:  # wait < start-up saved
                merged = True
        if merged:
            merge(l)
            taoc = comm_starts()
        else:
            groups.append(group)
            group = []
    group.append(0)
    groups.append(group)
    return groups


# ---------------------------------------------------------------------------
# The timeline model, simulated and optimized by the plain recurrence
# ---------------------------------------------------------------------------

class Model:
    def __init__(self, alpha_us, beta_us, overhead_us=0.0, pack_us=0.0):
        self.alpha, self.beta = alpha_us, beta_us
        self.overhead, self.pack = overhead_us, pack_us

    def group_time(self, nbytes, ntensors):
        if nbytes == 0:
            return 0.0
        t = self.alpha + self.beta * nbytes + self.overhead
        if ntensors >= 2:
            t += self.pack * nbytes
        return t


def backward_end(profile):
    return profile["forward_us"] + sum(l["backward_us"]
                                       for l in profile["layers"])


def simulate(profile, model, sizes_of_groups):
    ready = ready_order(profile)
    end, k = 0.0, 0
    for size in sizes_of_groups:
        members = ready[k:k + size]
        k += size
        start = max(end, members[-1][2])
        end = start + model.group_time(sum(m[1] for m in members), size)
    return max(backward_end(profile), end) + profile["update_us"]


def dp_optimum(profile, model):
    ready = ready_order(profile)
    n = len(ready)
    prefix = [0]
    for _, b, _ in ready:
        prefix.append(prefix[-1] + b)
    f = [0.0] * (n + 1)
    for j in range(1, n + 1):
        r = ready[j - 1][2]
        f[j] = min(max(f[i], r) + model.group_time(prefix[j] - prefix[i], j - i)
                   for i in range(j))
    return max(backward_end(profile), f[n]) + profile["update_us"]


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def run_plan(tool, path, args):
    out = subprocess.run([tool, path, "--strategy=mgwfbp,optimal,oasr",
                          "--format=json"] + args, check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    return {s["name"]: s for s in json.loads(out)["strategies"]}


def check_dp(name, profile, model, strategy, expect, sim_model, failures):
    """`strategy`'s groups partition the ready order and simulate (under
    `sim_model`) to `expect`; its reported time is its simulated time under
    the model the CLI scored it with."""
    names = [n for n, _, _ in ready_order(profile)]
    flat = [g for group in strategy["groups"] for g in group]
    if flat != names:
        failures.append("%s: groups are not the ready order" % name)
        return False
    sizes = [len(g) for g in strategy["groups"]]
    got = simulate(profile, sim_model, sizes)
    if not close(got, expect):
        failures.append("%s: plan %s takes %r us, the O(n^2) DP %r us"
                        % (name, sizes, got, expect))
        return False
    if not close(simulate(profile, model, sizes), strategy["iteration_us"]):
        failures.append("%s: reported %r us, simulated %r us" % (
            name, strategy["iteration_us"], simulate(profile, model, sizes)))
        return False
    return True


def main(argv):
    tool = argv[1]
    opts = dict(a[2:].split("=", 1) for a in argv[2:])
    instances = int(opts.get("instances", 400))
    rng = random.Random(int(opts.get("seed", 1)))
    dp_max_layers = int(opts.get("dp-max-layers", 40))

    counts = {k: [0, 0] for k in ["mgwfbp", "mgwfbp with extras", "optimal",
                                  "oasr", "optimal with extras",
                                  "oasr with extras"]}
    failures = []

    def tally(key, ok, what):
        counts[key][1] += 1
        if ok:
            counts[key][0] += 1
        elif len(failures) < 20:
            failures.append("instance %d: %s" % (index, what))

    with tempfile.TemporaryDirectory() as tmp:
        for index in range(instances):
            num_layers = rng.choice([rng.randint(1, 6), rng.randint(1, 40),
                                     rng.randint(41, 100)])
            profile = random_profile(rng, num_layers)
            alpha_s, beta_s = rng.choice(ALPHAS), rng.choice(BETAS)
            args = ["--alpha=%r" % alpha_s, "--beta=%r" % beta_s]
            if index % 4 == 3:  # the profile's own comm object instead
                profile["comm"] = {"alpha_s": alpha_s,
                                   "beta_s_per_byte": beta_s}
                args = []
            path = os.path.join(tmp, "p%d.json" % index)
            with open(path, "w") as f:
                json.dump(profile, f)
            basic = Model(alpha_s * 1e6, beta_s * 1e6)

            names, tb, sizes = to_reference_input(profile)
            expect = [[names[i] for i in g]
                      for g in mgwfbp_groups(tb, sizes, basic.alpha,
                                             basic.beta)]
            got = run_plan(tool, path, args)
            tally("mgwfbp", got["mgwfbp"]["groups"] == expect,
                  "mgwfbp %s, reference %s" % (got["mgwfbp"]["groups"],
                                               expect))
            if num_layers > dp_max_layers:
                continue

            best = dp_optimum(profile, basic)
            for key in ["optimal", "oasr"]:
                msgs = []
                tally(key, check_dp(key, profile, basic, got[key], best, basic,
                                    msgs), "; ".join(msgs))

            extras = Model(basic.alpha, basic.beta,
                           rng.choice(OVERHEADS_US[1:]),
                           rng.choice(PACKS_US_PER_BYTE))
            got = run_plan(tool, path, args + [
                "--group-overhead-us=%r" % extras.overhead,
                "--pack-us-per-byte=%r" % extras.pack])
            tally("mgwfbp with extras", got["mgwfbp"]["groups"] == expect,
                  "mgwfbp with extras %s, reference %s"
                  % (got["mgwfbp"]["groups"], expect))
            msgs = []
            # optimal plans for the basic model and is scored with the extras.
            tally("optimal with extras",
                  check_dp("optimal with extras", profile, extras,
                           got["optimal"], best, basic, msgs), "; ".join(msgs))
            msgs = []
            tally("oasr with extras",
                  check_dp("oasr with extras", profile, extras, got["oasr"],
                           dp_optimum(profile, extras), extras, msgs),
                  "; ".join(msgs))

    reference = {"mgwfbp": "the reference rule",
                 "mgwfbp with extras": "the reference rule"}
    for key, (ok, total) in counts.items():
        print("%s: %d/%d instances match %s"
              % (key, ok, total, reference.get(key, "the O(n^2) DP")))
    for f in failures:
        print(f, file=sys.stderr)
    return 0 if all(ok == total for ok, total in counts.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
