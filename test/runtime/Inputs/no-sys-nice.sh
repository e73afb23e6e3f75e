#!/bin/sh
# Runs "$@" as a process that may not leave SCHED_IDLE: no CAP_SYS_NICE (root
# drops it) and RLIMIT_NICE 0.
if [ "$(id -u)" = 0 ]; then
  exec setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice prlimit --nice=0 "$@"
fi
exec prlimit --nice=0 "$@"
