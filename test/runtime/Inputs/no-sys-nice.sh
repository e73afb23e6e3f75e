#!/bin/sh
# Runs "$@" as a process that may not leave SCHED_IDLE: no CAP_SYS_NICE and
# RLIMIT_NICE 0. Root drops the capability where it may change its bounding
# set (CAP_SETPCAP); a container without it usually lacks CAP_SYS_NICE too.
if [ "$(id -u)" = 0 ] &&
   setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice true 2>/dev/null; then
  exec setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice prlimit --nice=0 "$@"
fi
exec prlimit --nice=0 "$@"
