#!/usr/bin/env bash
# expect_fail.sh CMD...: succeeds iff CMD exits non-zero without timing out
# (`timeout` reports 124). Unlike `not`, a hang does not pass.
"$@"
rc=$?
if [ $rc -eq 0 ]; then echo "expect_fail: command succeeded" >&2; exit 1; fi
if [ $rc -eq 124 ]; then echo "expect_fail: command timed out" >&2; exit 1; fi
echo "expect_fail: exit status $rc" >&2
exit 0
