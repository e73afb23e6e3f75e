#!/bin/sh
# Runs "$@" as a process that may neither leave SCHED_IDLE nor use
# SCHED_FIFO: no CAP_SYS_NICE, RLIMIT_NICE 0 and RLIMIT_RTPRIO 0. Root drops
# the capability where it may change its bounding set (CAP_SETPCAP); a
# container without it usually lacks CAP_SYS_NICE too.
if [ "$(id -u)" = 0 ] &&
   setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice true 2>/dev/null; then
  exec setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice prlimit --nice=0 --rtprio=0 "$@"
fi
exec prlimit --nice=0 --rtprio=0 "$@"
