"""Checks oasr-run --eval-every output: the last 'eval step' line reports
the end-of-run test accuracy; with --same-training OTHER, the run's final
loss equals OTHER's (a run without --eval-every)."""
import re
import sys


def final(text, what, pattern):
    m = re.findall(pattern, text)
    if not m:
        sys.exit(f"no {what} in the output")
    return m[-1]


out = open(sys.argv[1]).read()
ok, total = map(int, final(out, "eval line", r"eval step \d+ .*\((\d+)/(\d+)\)"))
acc, samples = final(out, "test accuracy", r"test accuracy +([0-9.]+)% \((\d+) samples\)")
if f"{100 * ok / total:.1f}" != acc or total != int(samples):
    sys.exit(f"last eval {ok}/{total}, end of run {acc}% of {samples}")
msg = "last eval = end of run"
if len(sys.argv) > 3 and sys.argv[2] == "--same-training":
    other = open(sys.argv[3]).read()
    a = final(out, "final loss", r"final loss +(\S+)")
    b = final(other, "final loss", r"final loss +(\S+)")
    if a != b:
        sys.exit(f"final loss {a} with --eval-every, {b} without")
    msg += "; training unchanged"
print(msg)
