#!/bin/sh
# Runs inside a TCG guest booted from the patched kernel: exercise the
# series' ABI for real, then run the KVM selftest in a nested (SVM) VM.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
echo "VSMTIO-GUEST: kernel $(cat /proc/sys/kernel/osrelease)"
echo "VSMTIO-GUEST: cpus $(cat /sys/devices/system/cpu/online) smt0 $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list) svm $(grep -c -w svm /proc/cpuinfo)"
ok=0; bad=0
check() {  # check <description> <expected rc> <command...>
    d=$1; want=$2; shift 2
    ( "$@" ) 2>/dev/null; rc=$?
    if [ "$rc" = "$want" ]; then ok=$((ok+1)); echo "VSMTIO-GUEST: ok   $d"
    else bad=$((bad+1)); echo "VSMTIO-GUEST: FAIL $d (rc $rc, want $want)"; fi
}
w() { echo "$2" > "$1"; }
V=/sys/kernel/vsmtio
echo "VSMTIO-GUEST: abi_version $(cat $V/abi_version) rass_io_cpus '$(cat $V/rass_io_cpus)' evictions $(cat $V/rass_evictions)"
check "rass_io_cpus rejects both siblings of a core" 1 w $V/rass_io_cpus 0-1
check "rass_io_cpus rejects a CPU that does not exist" 1 w $V/rass_io_cpus 64
check "rass_io_cpus rejects garbage" 1 w $V/rass_io_cpus all
check "rass_io_cpus accepts one thread per core" 0 w $V/rass_io_cpus 1,3
check "rass_io_cpus reads back" 0 test "$(cat $V/rass_io_cpus)" = "1,3"
check "rass_evictions is read-only" 1 w $V/rass_evictions 0
P=/sys/module/kvm/parameters/ctx_retention_timeout_ns
check "global timeout default is 200000" 0 test "$(cat $P)" = 200000
check "global timeout rejects 10000001" 1 w $P 10000001
check "global timeout rejects -1" 1 w $P -1
check "global timeout accepts 10000000" 0 w $P 10000000
check "global timeout accepts 200000" 0 w $P 200000
check "sched_rass default is none" 0 test "$(cat /proc/$$/sched_rass)" = none
check "sched_rass rejects a bad word" 1 w /proc/$$/sched_rass fast
check "sched_rass accepts io" 0 w /proc/$$/task/$$/sched_rass io
check "sched_rass reads io" 0 test "$(cat /proc/$$/task/$$/sched_rass)" = io
w /proc/$$/sched_rass none
# RASS behaviour, control first: CPU 0 is kept busy by an unclassified
# spinner, so the load balancer has little reason of its own to move a
# CPU-bound spinner (allowed on 0-1) off the I/O hyperthread, CPU 1, where
# an I/O-bound task wakes every ms.  (With CPU 0 idle the balancer moves
# it anyway, and the experiment would show nothing.)
w $V/rass_io_cpus ""
taskset -c 0 sh -c 'while :; do :; done' & other=$!
taskset -c 1 sh -c 'while :; do :; done' & spin=$!
sleep 1
echo cpu > /proc/$spin/sched_rass
taskset -p -c 0,1 $spin >/dev/null
taskset -c 1 sh -c 'while :; do usleep 1000; done' & io=$!
echo io > /proc/$io/sched_rass
n0=0; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.2; [ "$(awk '{print $39}' /proc/$spin/stat)" = 0 ] && n0=$((n0+1)); done
e0=$(cat $V/rass_evictions)
echo "VSMTIO-GUEST: control (RASS off): CPU-bound spinner seen on CPU 0 in $n0 of 10 samples, evictions $e0"
w $V/rass_io_cpus 1,3
n1=0; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.2; [ "$(awk '{print $39}' /proc/$spin/stat)" = 0 ] && n1=$((n1+1)); done
e1=$(cat $V/rass_evictions)
echo "VSMTIO-GUEST: RASS on (io cpus 1,3): CPU-bound spinner seen on CPU 0 in $n1 of 10 samples, evictions $e0 -> $e1"
check "RASS sends the CPU-bound spinner home more than the control" 0 test "$n1" -gt "$n0"
check "evictions counted while RASS is on" 0 test "$e1" -gt "$e0"
kill $spin $io $other
w $V/rass_io_cpus ""
check "rass_io_cpus accepts empty (RASS off)" 0 test -z "$(cat $V/rass_io_cpus)"
echo "VSMTIO-GUEST: abi checks: $ok ok, $bad failed"
if [ -e /dev/kvm ]; then
    echo "VSMTIO-GUEST: running ctx_retention_test in a nested VM"
    timeout 600 /bin/ctx_retention_test; echo "VSMTIO-GUEST: selftest rc=$?"
else
    echo "VSMTIO-GUEST: no /dev/kvm in the guest: $(dmesg | grep -i -E 'kvm|svm' | tail -3)"
fi
echo "VSMTIO-GUEST: done"
poweroff -f
