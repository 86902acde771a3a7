#!/usr/bin/env python3
"""Boot the vsmtio CPU balloon in a real QEMU guest, capped or not.

The balloon acts inside a guest kernel on a vCPU the host caps, so it is
run for real: the module compiled against Debian's headers, Debian's
kernel booted under QEMU TCG with a busybox initramfs, the host's cap
passed the way the vsmtio compute driver passes it (an SMBIOS type 11 OEM
string, here ``-smbios type=11,...``), and, where asked, the guest's vCPU
thread really capped with a cgroup CPU quota (what libvirt does for
``<cputune><quota>``).  An I/O-bound responder in the guest echoes bytes
on its second serial port; the host times each round trip.

Used by ``guest_image_elements/tests/test_balloon.py`` and runnable by
hand::

    python3 guest_image_elements/tools/balloon_boot.py check --oem 50
    python3 guest_image_elements/tools/balloon_boot.py bench

``bench`` prints the latency table of ``doc/source/benchmarks/balloon.rst``.
"""

import argparse
import contextlib
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

# beside this script: on the path of a script run as one, and loaded
# first by a test that loads this file
import guest_boot

HERE = os.path.dirname(os.path.abspath(__file__))

ELEMENT = os.path.join(os.path.dirname(HERE), 'vsmtio-balloon')
MODULE_NAME = 'vsmtio_balloon'
MODULE_SRC = os.path.join(ELEMENT, 'static', 'usr', 'src',
                          'vsmtio-balloon-0.1.0')
GUEST_PROGRAM = os.path.join(HERE, 'balloon_guest.c')
OEM_PREFIX = 'vsmtio:cpu_cap='
PERIOD_US = 100000

# The guest's /init.  Kernel command line: vsmtio.balloon=0|1 (load the
# module), vsmtio.hog=SECONDS (run the CPU hog), vsmtio.check=0|1 (exercise
# the module's parameters), vsmtio.modargs=a=1,b=2 (module parameters).
# Everything goes to the console as "VSMTIO key=value"
# (guest_boot.parse_report reads it).
INIT_SCRIPT = r'''#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
M=/sys/module/vsmtio_balloon
say() { echo "VSMTIO $1"; }
arg() { sed -n "s/.*vsmtio\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
snap() {
    for f in $M/stats/*; do say "$1_$(basename $f)=$(cat $f)"; done
    say "$1_uptime=$(cut -d' ' -f1 /proc/uptime)"
    say "$1_steal=$(set -- $(head -1 /proc/stat); echo $9)"
}
threads() { ps -o comm | grep -c '^\[*vsmtio_balloon'; }
say "begin=1"
say "kernel=$(uname -r)"
say "ncpu=$(grep -c ^processor /proc/cpuinfo)"
D=/sys/devices/system
say "clocksource=$(cat $D/clocksource/clocksource0/current_clocksource)"
say "clockevent=$(cat $D/clockevents/clockevent0/current_device)"
say "hres=$(grep -m1 hres_active /proc/timer_list | tr -d ' ')"
say "resolution=$(grep -m1 '\.resolution' /proc/timer_list | tr -d ' ')"
for e in /sys/firmware/dmi/entries/11-*; do
    [ -e "$e/raw" ] && say "oem=$(strings $e/raw | tr '\n' ' ')"
done
/balloon_guest echo /dev/ttyS1 &
if [ "$(arg balloon)" = 1 ]; then
    if insmod /vsmtio_balloon.ko $(arg modargs | tr , ' '); then
        say "insmod=ok"; else say "insmod=failed"; fi
    say "threads=$(threads)"
    for p in $M/parameters/*; do say "param_$(basename $p)=$(cat $p)"; done
fi
HOG=$(arg hog)
if [ -n "$HOG" ]; then /balloon_guest hog "$HOG" & HOGPID=$!; fi
say "ready=1"
if [ "$(arg check)" = 1 ] && [ -d $M/stats ]; then
    sleep 1; snap t0
    sleep 3; snap t1
    if echo 101 > $M/parameters/cap_pct 2>/dev/null; then
        say "bad_cap=accepted"; else say "bad_cap=refused"; fi
    if echo 10 > $M/parameters/quantum_us 2>/dev/null; then
        say "bad_quantum=accepted"; else say "bad_quantum=refused"; fi
    echo 100 > $M/parameters/cap_pct
    sleep 1; snap t2
    sleep 2; snap t3
    echo 0 > $M/parameters/cap_pct
    sleep 1; snap t4
    [ -n "$HOGPID" ] && kill $HOGPID
    if rmmod vsmtio_balloon; then say "rmmod=ok"; else say "rmmod=failed"; fi
    say "threads_after=$(threads)"
elif [ -n "$HOGPID" ]; then
    wait $HOGPID
    [ -d $M/stats ] && snap end
else
    sleep "$(arg sleep)"
    [ -d $M/stats ] && snap end
fi
dmesg | grep vsmtio_balloon | while read -r l; do say "dmesg=$l"; done
say "end=1"
poweroff -f
'''


def build_module(kdir, outdir):
    """The balloon module compiled against kdir; returns (ko, warnings)."""
    src = os.path.join(outdir, 'balloon-src')
    shutil.copytree(MODULE_SRC, src)
    log = guest_boot.run(['make', '-C', src, 'KDIR=' + kdir])
    ko = os.path.join(src, MODULE_NAME + '.ko')
    if not os.path.isfile(ko):
        raise guest_boot.GuestError('make succeeded but %s is missing' % ko)
    warnings = [line for line in log.splitlines()
                if 'warning:' in line and MODULE_NAME in line]
    return ko, warnings


def build_program(outdir):
    """The guest's echo responder and CPU hog, a static binary."""
    out = os.path.join(outdir, 'balloon_guest')
    guest_boot.run(['cc', '-O2', '-static', '-Wall', '-Werror', '-o', out,
                    GUEST_PROGRAM])
    return out


def make_initramfs(outdir, ko, program):
    return guest_boot.initramfs(
        outdir, {MODULE_NAME + '.ko': ko, 'balloon_guest': program},
        {'init': INIT_SCRIPT})


class Guest:
    """One prepared guest: kernel, initramfs; boots it as often as asked."""

    def __init__(self, series='6.1'):
        self.kver, kdir = guest_boot.headers_for(series)
        self._tmp = tempfile.TemporaryDirectory(prefix='vsmtio-balloon-')
        self.dir = self._tmp.name
        ko, self.warnings = build_module(kdir, self.dir)
        self.initrd = make_initramfs(self.dir, ko, build_program(self.dir))
        self.vmlinuz = guest_boot.fetch_kernel(self.kver)

    def close(self):
        self._tmp.cleanup()

    def run(self, balloon=True, hog=None, check=False, oem_cap_pct=None,
            cgroup_cap_pct=None, cgroup=True, smp=1, ping=False, sleep=4,
            modargs=(), timeout=300):
        """Boot once; returns (report, round trips in seconds).

        oem_cap_pct: the cap the host announces (SMBIOS OEM string).
        cgroup_cap_pct: the cap the host enforces on the vCPU threads
        (cgroup: whether to place the threads in cgroups at all).
        ping: time round trips to the guest's responder from "ready" to
        the end (the hog's run when there is one).
        """
        sock = os.path.join(self.dir, 'echo.sock')
        args = ['vsmtio.balloon=%d' % balloon, 'vsmtio.check=%d' % check,
                'vsmtio.sleep=%d' % sleep]
        if hog:
            args.append('vsmtio.hog=%d' % hog)
        if modargs:
            args.append('vsmtio.modargs=' + ','.join(modargs))
        cmd = ['qemu-system-x86_64', '-accel', 'tcg', '-cpu', 'max',
               '-smp', str(smp), '-m', '512', '-nodefaults',
               '-display', 'none', '-no-reboot',
               # thread names ("CPU 0/TCG"), as libvirt asks for them
               '-name', 'vsmtio-balloon,debug-threads=on',
               '-serial', 'stdio',
               '-serial', 'unix:%s,server=on,wait=off' % sock,
               '-kernel', self.vmlinuz, '-initrd', self.initrd,
               # (no crypto self-tests, as guest_boot.boot: one of them
               # can hold a TCG vCPU for minutes)
               '-append', 'console=ttyS0 panic=-1 quiet rdinit=/init '
               'cryptomgr.notests ' + ' '.join(args)]
        if oem_cap_pct is not None:
            cmd += ['-smbios', 'type=11,value=%s%d/%d' % (
                OEM_PREFIX, oem_cap_pct * PERIOD_US // 100, PERIOD_US)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        console, ready, done = [], threading.Event(), threading.Event()

        def read():
            for raw in proc.stdout:
                line = raw.decode(errors='replace').replace('\r', '')
                console.append(line)
                if 'VSMTIO ready=1' in line:
                    ready.set()
                if 'VSMTIO hog_loops_per_s' in line or \
                        'VSMTIO end=1' in line:
                    done.set()
            ready.set()
            done.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        rtts, host = [], {}
        try:
            if not ready.wait(timeout) or proc.poll() is not None:
                raise guest_boot.GuestError(
                    'guest never got ready:\n' + ''.join(console)[-4000:])
            with contextlib.ExitStack() as stack:
                if cgroup:
                    host = stack.enter_context(cpu_cap(
                        proc.pid, vcpu_threads(proc.pid, smp),
                        cgroup_cap_pct))
                if ping:
                    rtts = ping_until(sock, done, timeout)
                done.wait(timeout)
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise guest_boot.GuestError(
                'guest did not power off within %d s:\n%s' % (
                    timeout, ''.join(console)[-4000:]))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(10)
        report = guest_boot.parse_report(''.join(console))
        report.update(('host_' + k, v) for k, v in host.items())
        return report, rtts


def vcpu_threads(pid, smp, wait=10):
    """Thread ids of the QEMU process's TCG vCPU threads ("CPU n/TCG")."""
    deadline = time.monotonic() + wait
    while True:
        found = []
        for tid in os.listdir('/proc/%d/task' % pid):
            with open('/proc/%d/task/%s/comm' % (pid, tid)) as f:
                if f.read().strip().endswith('/TCG'):
                    found.append(int(tid))
        if len(found) == smp or time.monotonic() > deadline:
            if len(found) != smp:
                raise guest_boot.GuestError(
                    'found vCPU threads %s, expected %d' % (found, smp))
            return found
        time.sleep(0.1)


SHARES = 102400     # 100x the default 1024


@contextlib.contextmanager
def cpu_cap(qemu_pid, tids, pct, period_us=PERIOD_US):
    """Cap the vCPU threads at pct% of a CPU each (None: no cap).

    What libvirt does for ``<cputune><quota>``: a cgroup with a CPU quota
    holding the vCPU threads (cgroup v1's ``cpu`` hierarchy here).  This
    machine is shared, so the cgroup, and one for QEMU's other threads
    and this process (the pinger), get ``cpu.shares`` 100 times the
    default: other load then does not decide when the vCPU runs, the
    quota does.  Yields a dict filled on exit with what the host saw:
    the throttling of the vCPU cgroup (``nr_periods``, ``nr_throttled``,
    ``throttled_time`` ns) and the vCPU threads' own clock
    (``/proc/<pid>/task/<tid>/schedstat``: ``run_ns`` on a CPU,
    ``wait_ns`` runnable but not running: what KVM reports to its guest
    as steal time).  Everything is moved back and removed on exit.
    Without a cgroup v1 cpu hierarchy it raises GuestError (cgroup v2 is
    not implemented here).
    """
    v1 = '/sys/fs/cgroup/cpu'
    if not os.path.isfile(os.path.join(v1, 'cpu.cfs_quota_us')):
        raise guest_boot.GuestError(
            'no cgroup v1 cpu hierarchy at %s: cgroup v2 capping is not '
            'implemented here (libvirt <cputune><quota> does it)' % v1)
    vcpu = os.path.join(v1, 'vsmtio-balloon-%d-vcpu' % qemu_pid)
    rest = os.path.join(v1, 'vsmtio-balloon-%d-rest' % qemu_pid)
    others = [int(t) for t in os.listdir('/proc/%d/task' % qemu_pid)
              if int(t) not in tids]
    others += [int(t) for t in os.listdir('/proc/self/task')]
    seen, moved, made = {}, [], []
    before = _schedstat(tids)
    start = time.monotonic()
    try:
        for cg in (vcpu, rest):
            os.mkdir(cg)
            made.append(cg)
            _write(cg, 'cpu.shares', SHARES)
        _write(vcpu, 'cpu.cfs_period_us', period_us)
        if pct is not None:
            _write(vcpu, 'cpu.cfs_quota_us', period_us * pct // 100)
        for cg, group in ((vcpu, tids), (rest, others)):
            for tid in group:
                with contextlib.suppress(ProcessLookupError):
                    _write(cg, 'tasks', tid)
                    moved.append(tid)
        yield seen
    finally:
        after = _schedstat(tids)
        seen['seconds'] = time.monotonic() - start
        for key in ('run_ns', 'wait_ns'):
            seen[key] = sum(after[t][key] - before[t][key]
                            for t in after if t in before)
        with contextlib.suppress(OSError):
            with open(os.path.join(vcpu, 'cpu.stat')) as f:
                for line in f:
                    k, v = line.split()
                    seen[k] = int(v)
        for tid in moved:
            with contextlib.suppress(OSError):
                _write(v1, 'tasks', tid)
        for cg in made:
            with contextlib.suppress(OSError):
                os.rmdir(cg)


def _schedstat(tids):
    """{tid: {run_ns, wait_ns}} of live threads (schedstat fields 1, 2)."""
    out = {}
    for tid in tids:
        with contextlib.suppress(OSError):
            with open('/proc/%d/task/%d/schedstat'
                      % (tid, tid)) as f:
                run, wait = f.read().split()[:2]
            out[tid] = {'run_ns': int(run), 'wait_ns': int(wait)}
    return out


def _write(cg, name, value):
    with open(os.path.join(cg, name), 'w') as f:
        f.write(str(value))


def ping_until(sock, done, timeout, gap=(0.005, 0.015)):
    """Round trips of one byte to the responder until done; seconds each.

    Pings are spaced randomly (uniform 5-15 ms) so they land at every
    phase of the host's quota period.
    """
    rng = random.Random(14)
    rtts = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(sock)
        s.settimeout(timeout)
        time.sleep(0.5)       # the responder opens its port after ready
        while not done.is_set():
            start = time.perf_counter()
            s.sendall(b'p')
            got = s.recv(1)
            if not got and done.wait(5):
                break         # the guest powered off
            if got != b'p':
                raise guest_boot.GuestError(
                    'responder answered %r instead of the echo' % got)
            rtts.append(time.perf_counter() - start)
            time.sleep(rng.uniform(*gap))
    return rtts


def summary(rtts):
    """(count, median ms, p99 ms, max ms) of round trips in seconds."""
    ms = sorted(r * 1000 for r in rtts)
    if not ms:
        return 0, float('nan'), float('nan'), float('nan')
    p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
    return len(ms), statistics.median(ms), p99, ms[-1]


CONFIGS = [
    # name, cgroup cap, hog, balloon (with the host's cap announced)
    ('I/O only, uncapped', None, False, False),
    ('I/O only, capped', 50, False, False),
    ('I/O + hog, capped', 50, True, False),
    ('I/O + hog, capped, balloon', 50, True, True),
]


def _host_share(report, key):
    """A host-side duration over the capped interval, percent of wall."""
    try:
        return '%.0f%%' % (100.0 * int(report['host_' + key]) / 1e9 /
                           float(report['host_seconds']))
    except (KeyError, ValueError, ZeroDivisionError):
        return '-'


def bench(seconds, repeat, modargs=()):
    guest = Guest('6.1')
    rows = []
    try:
        for rnd in range(repeat):
            for name, cap, hog, balloon in CONFIGS:
                report, rtts = guest.run(
                    balloon=balloon, hog=seconds if hog else None,
                    sleep=seconds, oem_cap_pct=cap if balloon else None,
                    cgroup_cap_pct=cap, ping=True, modargs=modargs,
                    timeout=seconds + 300)
                n, med, p99, mx = summary(rtts)
                rows.append((rnd, name, n, med, p99, mx,
                             report.get('hog_loops_per_s', '-'),
                             _host_share(report, 'run_ns'),
                             _host_share(report, 'throttled_time'),
                             report.get('end_size_permille', '-'),
                             report.get('end_io_yields', '-')))
                print('round %d  %-28s n=%5d median %7.2f ms  p99 %7.2f ms'
                      '  max %7.2f ms  hog %s loops/s' % (
                          rnd, name, n, med, p99, mx, rows[-1][6]),
                      flush=True)
    finally:
        guest.close()
    print()
    print('QEMU TCG, 1 vCPU, Debian %s guest; balloon module parameters: '
          '%s' % (guest.kver, ' '.join(modargs) or 'defaults'))
    print('%-28s %5s %8s %8s %8s %11s %7s %9s %7s %9s' % (
        'configuration', 'pings', 'median', 'p99', 'max', 'hog loops/s',
        'vCPU ran', 'throttled', 'balloon', 'io_yields'))
    for row in rows:
        print('%-28s %5d %6.2fms %6.2fms %6.2fms %11s %7s %9s %7s %9s'
              % row[1:])
    print()
    base = {r[0]: r for r in rows if r[1] == 'I/O + hog, capped'}
    for r in rows:
        if r[1].endswith('balloon') and r[0] in base:
            b = base[r[0]]
            loops = ('%.3f' % (float(r[6]) / float(b[6]))
                     if '-' not in (r[6], b[6]) else '-')
            print('round %d: balloon / no balloon (capped, with hog): '
                  'median x%.3f, p99 x%.3f, hog loops x%s' % (
                      r[0], r[3] / b[3], r[4] / b[4], loops))


def main(argv=None):
    # A SIGTERM unwinds like an error: cgroups removed, QEMU killed.
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    c = sub.add_parser('check', help='boot once, print the guest report')
    c.add_argument('--oem', type=int, help='announced cap, percent')
    c.add_argument('--cgroup', type=int, help='enforced cap, percent')
    c.add_argument('--smp', type=int, default=2)
    b = sub.add_parser('bench', help='responder latency, capped at 50%%')
    b.add_argument('--seconds', type=int, default=30)
    b.add_argument('--repeat', type=int, default=1)
    b.add_argument('--modarg', action='append', default=[],
                   help='balloon module parameter, e.g. quantum_us=8000')
    args = ap.parse_args(argv)
    try:
        if args.cmd == 'bench':
            bench(args.seconds, args.repeat, args.modarg)
            return 0
        guest = Guest('6.1')
        try:
            report, rtts = guest.run(
                check=True, hog=60, smp=args.smp, oem_cap_pct=args.oem,
                cgroup_cap_pct=args.cgroup, ping=True)
        finally:
            guest.close()
        for key, value in report.items():
            for v in (value if key == 'dmesg' else [value]):
                print('%s=%s' % (key, v))
        print('pings=%d median=%.2fms p99=%.2fms max=%.2fms'
              % summary(rtts))
    except guest_boot.GuestError as e:
        print('error: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
