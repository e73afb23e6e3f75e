#!/usr/bin/env python3
"""Structural checks of a planned @train_step printed by oasr-opt.

Checks the issue's invariants on the text IR after --oasr-train-pipeline:
every parameter gets exactly one update from exactly one averaged gradient,
every gradient is in exactly one allreduce group, starts come in group order
and each precedes its wait, waits come in group order. Prints a one-line
summary; exits 1 with a message on the first violation.
"""
import re
import sys


def fail(msg):
    print("check_step: FAIL: " + msg)
    sys.exit(1)


text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
lines = text.splitlines()
sig = next((l for l in lines if "func.func @train_step" in l), None)
if sig is None:
    fail("no @train_step")
params = re.findall(r'(%[\w.]+): tensor<[^>]*> \{oasr\.param = "([^"]+)"\}', sig)
if not params:
    fail("no oasr.param arguments")

starts, waits, updates = {}, {}, {}
start_order, wait_order = [], []
for i, line in enumerate(lines):
    m = re.match(r'\s*(%[\w.]+) = oasr\.allreduce_start (.*?) \{(.*?)\} :', line)
    if m:
        group = int(re.search(r'group = (\d+)', m.group(3)).group(1))
        operands = [o.strip() for o in m.group(2).split(",")]
        starts[m.group(1)] = (i, group, operands)
        start_order.append(group)
        continue
    m = re.match(r'\s*(%[\w.]+)(?::(\d+))? = oasr\.allreduce_wait (%[\w.]+)', line)
    if m:
        if m.group(3) not in starts:
            fail("wait on unknown token " + m.group(3))
        s_line, group, operands = starts[m.group(3)]
        if s_line > i:
            fail("wait of group %d before its start" % group)
        waits[m.group(1)] = (i, group, len(operands))
        wait_order.append(group)
        continue
    m = re.match(r'\s*.*= oasr\.optimizer_update "\w+" (%[\w.]+), (%[\w.]+(?:#\d+)?)', line)
    if m:
        if m.group(1) in updates:
            fail("parameter %s updated twice" % m.group(1))
        updates[m.group(1)] = (i, m.group(2))

if start_order != list(range(len(start_order))):
    fail("starts not in group order: %s" % start_order)
if wait_order != start_order:
    fail("waits not in group order: %s" % wait_order)
used = set()
for value, name in params:
    if value not in updates:
        fail("parameter %s (%s) has no update" % (name, value))
    line, grad = updates[value]
    base, _, index = grad.partition("#")
    if base not in waits:
        fail("parameter %s is updated from %s, not an averaged gradient" % (name, grad))
    w_line, group, n = waits[base]
    index = int(index or 0)
    if index >= n or (base, index) in used:
        fail("gradient %s used twice or out of range" % grad)
    if w_line > line:
        fail("update of %s before its wait" % name)
    used.add((base, index))
total = sum(n for (_, _, n) in waits.values())
if total != len(params) or len(used) != len(params):
    fail("%d parameters but %d gradients in groups" % (len(params), total))
grads = [o for (_, _, ops) in starts.values() for o in ops]
if len(set(grads)) != len(grads):
    fail("a gradient is in two groups")
print("check_step: OK: %d parameters, %d groups, %d gradients" %
      (len(params), len(starts), total))
