#!/usr/bin/python3
"""Kills `oasr-run --save=TARGET` during the write, again and again.

    kill_during_save.py TARGET ROUNDS -- OASR-RUN-COMMAND...

TARGET must already hold a good model. Three uninterrupted runs of the
command measure how long its save takes (from the moment it begins to the
process' exit; the shortest counts). Each round then starts the command (which must save to
TARGET), waits until its save has begun -- a temporary file `.NAME.tmp-*`
appears next to TARGET, or TARGET itself changes (a non-atomic save) --
sleeps a delay spread over that duration, and sends SIGKILL. After every round TARGET must still load with onnx.load and
pass onnx.checker.check_model, and be the old model byte for byte, and no
other `*.onnx` file may have appeared in its directory. Prints how many
rounds were killed while the save was being written; fewer than half of
the rounds is a failure (the kills would not test anything).
"""
import glob
import os
import signal
import subprocess
import sys
import time

import onnx

target, rounds = sys.argv[1], int(sys.argv[2])
cmd = sys.argv[sys.argv.index("--") + 1:]
folder = os.path.dirname(os.path.abspath(target)) or "."
name = os.path.basename(target)


def start_and_wait_for_save():
    """Starts the command; returns it once its save has begun (or ended)."""
    before = os.stat(target)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline:
        temps = glob.glob(os.path.join(folder, "." + name + ".tmp-*"))
        st = os.stat(target) if os.path.exists(target) else None
        changed = st is None or (st.st_mtime_ns, st.st_size, st.st_ino) != (
            before.st_mtime_ns, before.st_size, before.st_ino)
        if temps or changed:
            break
        time.sleep(0.0005)
    return proc


# How long a save takes, uninterrupted (the new model is then the old one):
# the shortest of three, so that one slow spell of a shared host does not
# spread the kills past the end of every later save.
durations = []
for _ in range(3):
    proc = start_and_wait_for_save()
    t1 = time.time()
    if proc.wait() != 0:
        sys.exit("the command fails without being killed")
    durations.append(time.time() - t1)
duration = min(durations)
onnx.checker.check_model(onnx.load(target))
old = open(target, "rb").read()
models = sorted(glob.glob(os.path.join(folder, "*.onnx")))
midway = 0
for r in range(rounds):
    proc = start_and_wait_for_save()
    # Spread the kills over the save: from its start to 90 % of its length.
    time.sleep(duration * 0.9 * r / max(rounds - 1, 1))
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        midway += 1
    proc.wait()
    model = onnx.load(target)
    onnx.checker.check_model(model)
    if open(target, "rb").read() != old:
        sys.exit(f"round {r}: {target} changed")
    now = sorted(glob.glob(os.path.join(folder, "*.onnx")))
    if now != models:
        sys.exit(f"round {r}: other .onnx files appeared: "
                 f"{sorted(set(now) - set(models))}")
print(f"{rounds} rounds, {midway} killed during the save; {name} loads and "
      f"passes onnx.checker every time")
print(f"save took {duration * 1000:.0f} ms", file=sys.stderr)
if midway < rounds // 2:
    sys.exit("too few kills landed during the save")
