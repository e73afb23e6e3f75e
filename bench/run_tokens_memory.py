#!/usr/bin/env python3
"""Memory of oasr-run on token corpora of growing size (issue 50:
`--data=tokens:FILE` memory-mapped, flat memory however large the file).

Exports scripts/model_zoo.py's GPT (next-token), writes random u16 token
files of each --sizes MiB, trains --steps steps on each, and samples the
process's /proc/PID/status every 10 ms: the peak anonymous memory (RssAnon:
the heap, what a corpus copied into memory would grow) and the peak of the
file pages mapped (RssFile: the corpus read where it lies, which the kernel
may drop and read again). Writes a markdown table to OUT.

With --memory-limit MIB each run is put in a cgroup (v1 memory
controller) holding the process's memory, page cache included, to that
limit: a corpus several times larger than the limit must still train.

Usage: bench/run_tokens_memory.py --out bench/results/tokens-memory-DATE.md
           [--oasr-run build/bin/oasr-run] [--sizes 16,256,1024] [--steps 20]
           [--memory-limit MIB]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def status_kb(pid, key):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


CGROUP = "/sys/fs/cgroup/memory/oasr-tokens-bench"


def run(cmd, limit_mib=None):
    if limit_mib:
        os.makedirs(CGROUP, exist_ok=True)
        with open(os.path.join(CGROUP, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit_mib << 20))
        cmd = ["sh", "-c", f'echo $$ > {CGROUP}/tasks && exec "$@"', "sh"] + cmd
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    anon = file_ = 0
    while p.poll() is None:
        a, f = status_kb(p.pid, "RssAnon"), status_kb(p.pid, "RssFile")
        anon, file_ = max(anon, a or 0), max(file_, f or 0)
        time.sleep(0.01)
    out, err = p.communicate()
    if p.returncode:
        sys.exit(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{err}")
    peak = None
    if limit_mib:
        peak = int(open(os.path.join(CGROUP, "memory.max_usage_in_bytes")).read()) >> 20
        open(os.path.join(CGROUP, "memory.max_usage_in_bytes"), "w").write("0")
    return anon, file_, peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--oasr-run", default=os.path.join(ROOT, "build/bin/oasr-run"))
    ap.add_argument("--sizes", default="16,256,1024")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--memory-limit", type=int)
    a = ap.parse_args()
    if os.path.exists(a.out):
        sys.exit(f"{a.out} exists; results are never overwritten")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "gpt.onnx")
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts/model_zoo.py"),
                        "export", "gpt", model], check=True, stdout=subprocess.DEVNULL)
        vocab = 32  # below the zoo GPT's vocabulary
        for mib in [int(s) for s in a.sizes.split(",")]:
            path = os.path.join(d, f"corpus-{mib}.bin")
            n = mib * (1 << 20) // 2
            mm = np.memmap(path, dtype=np.uint16, mode="w+", shape=(n,))
            rng = np.random.default_rng(mib)
            for s in range(0, n, 1 << 24):
                mm[s:s + (1 << 24)] = rng.integers(0, vocab, min(1 << 24, n - s), dtype=np.uint16)
            mm.flush()
            del mm
            # The corpus's pages leave the cache, so the run reads them itself
            # (charged to its cgroup); best effort, said in the results.
            try:
                os.sync()
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("1")
                cold = True
            except OSError:
                cold = False
            t0 = time.time()
            anon, file_, peak = run([a.oasr_run, model, f"--data=tokens:{path}",
                                     f"--steps={a.steps}", "--threads=1",
                                     "--quiet"], a.memory_limit)
            rows.append((mib, anon / 1024, file_ / 1024, time.time() - t0, peak,
                         cold))
            os.remove(path)
    load = os.getloadavg()[0]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    lines = [f"# Memory on token corpora of growing size, {time.strftime('%Y-%m-%d')}", "",
             f"`bench/run_tokens_memory.py --out {a.out} --sizes {a.sizes} --steps {a.steps}`: "
             f"scripts/model_zoo.py's GPT (its exported batch of 4, sequences of 8), {a.steps} steps, one thread, on random "
             f"u16 corpora; peaks of /proc/PID/status sampled every 10 ms. Machine: {cpu}, "
             f"{os.cpu_count()} cores, load {load:.2f} at the end." +
             (f" Each run in a memory cgroup limited to {a.memory_limit} MiB (page cache "
              f"included); its peak usage is the last column." if a.memory_limit else ""), "",
             "| corpus MiB | peak RssAnon MiB | peak RssFile MiB | run s | cgroup peak MiB |",
             "|---|---|---|---|---|"]
    for mib, anon, file_, secs, peak, _ in rows:
        lines.append(f"| {mib} | {anon:.1f} | {file_:.1f} | {secs:.1f} | "
                     f"{peak if peak is not None else '-'} |")
    growth = abs(rows[-1][1] - rows[0][1])
    cold = all(r[5] for r in rows)
    lines += ["", f"RssAnon differs by {growth:.1f} MiB between the {rows[0][0]} MiB corpus and "
              f"the {rows[-1][0]} MiB one; the file's pages are mapped, not copied. "
              + ("The page cache was dropped before each run, so the run read the corpus "
                 "itself." if cold else "The page cache could not be dropped: the corpus's "
                 "pages may have been cached by the process that wrote it."), ""]
    open(a.out, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
