#!/usr/bin/env python3
"""The kernel bench on a kernel the host does not run: CFS in a guest.

``vsmtio-bench kernel`` measures the scheduling situations the product's
levers act on with the machine's own kernel; where that kernel is EEVDF
(6.6 and later) the model's CFS, the scheduler of Debian 12's 6.1 and
RHEL 9's 5.14 that hosts still run, goes unchecked. This runs the same
situations on Debian 12's 6.1 kernel booted under QEMU TCG (KVM cannot
boot a guest on every machine this runs on; TCG can) with a busybox
initramfs: the bench's processes as ``sched_guest`` (C, beside this
file: the initramfs has no Python), the same points in the same orders,
the guest's own tunables, switch and wake-up costs read and measured in
it. The figures are written in the kernel bench's JSON shape and
``vsmtio-bench kernel --model-only`` then runs the model and the
comparison on them and writes the page::

    python3 guest_image_elements/tools/kernel_guest.py          (root)

The guest's clock is the host's, so its bursts, waits and the
scheduler's slices are in real time; what TCG slows is every instruction,
switch and timer interrupt, as a slower machine would be. Those costs are
measured in the guest and given to its model, and the weight points'
bursts and waits are scaled to the guest's speed with CFS's slices
(``--scale``), so that a switch is again a small part of a request.
"""

import argparse
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

# beside this script: on the path of a script run as one
import guest_boot

from vsmtio_bench import documents
from vsmtio_bench import host_calibration
from vsmtio_bench import kernel
from vsmtio_bench import kernel_host
from vsmtio_bench import kernel_math

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, 'sched_guest.c')
SERIES = '6.1'
CGROUPS = '/sys/fs/cgroup'
JSON = os.path.join(documents.BENCHMARKS, 'kernel_guest.json')
PAGE = os.path.join(documents.BENCHMARKS, 'kernel_guest.rst')
TUNABLES = ('latency_ns', 'min_granularity_ns', 'wakeup_granularity_ns',
            'base_slice_ns')
# the tunables scaled with the bench's times (--scale): CFS's slices
SCALED = ('latency_ns', 'min_granularity_ns', 'wakeup_granularity_ns')
# The guest's switch is about 50 times the host's, its wake-up after a
# timer about 12 times, its busy loop 2 times (kernel_guest.rst). Unscaled,
# a switch and a wake-up are as long as the light server's burst; times
# 10 makes a switch at most a fifth of the shortest burst and a wake-up
# about an eighth of the shortest wait, in windows of a few seconds.
SCALE = 10

# the host bench's, but for its sibling, its threads and its host
STAND_INS = (
    'no SMT sibling and one vCPU: the model\'s sibling is idle, every '
    'co-run factor is 1, and no wake-up comes from another CPU',
) + kernel.STAND_INS[1:3] + (
    'the server\'s vCPUs are processes of one group, not threads of one '
    'QEMU',
    'the kernel runs under QEMU TCG, binary translation without KVM: its '
    'clock is the host\'s, so slices, bursts and waits are real time, but '
    'every instruction, switch and timer interrupt is emulated, a slower '
    'machine\'s; those costs are measured in the guest and given to its '
    'model, and the host\'s other jobs and QEMU\'s own threads take time '
    'the guest cannot see',
)

# The guest's /init: facts as "VSMTIO key=value", then the plan.
INIT_SCRIPT = r'''#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t cgroup2 cgroup2 /sys/fs/cgroup
say() { echo "VSMTIO $1"; }
D=/sys/devices/system
S=/sys/kernel/debug/sched
say "begin=1"
say "kernel=$(uname -r)"
say "ncpu=$(grep -c ^processor /proc/cpuinfo)"
say "cpu_model=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
say "clocksource=$(cat $D/clocksource/clocksource0/current_clocksource)"
say "cpuidle_driver=$(cat $D/cpu/cpuidle/current_driver 2>/dev/null)"
say "cpuidle_governor=$(cat $D/cpu/cpuidle/current_governor_ro 2>/dev/null)"
say "preempt=$(cat $S/preempt 2>/dev/null)"
for t in %(tunables)s; do
    [ -r $S/$t ] || continue
    say "default_$t=$(cat $S/$t)"
    case " %(scaled)s " in
    *" $t "*) echo $(( $(cat $S/$t) * %(scale)d )) > $S/$t ;;
    esac
    say "tunable_$t=$(cat $S/$t)"
done
echo +cpu > %(cgroups)s/cgroup.subtree_control
mkdir %(cgroups)s/server %(cgroups)s/spinner
say "controllers=$(cat %(cgroups)s/cgroup.subtree_control)"
NSI=$(/sched_guest calibrate | sed -n 's/^VSMTIO ns_per_iteration=//p')
say "ns_per_iteration=$NSI"
/sched_guest bursts $NSI %(bursts)s
weights() {
    echo $1 > %(cgroups)s/server/cpu.weight
    echo $2 > %(cgroups)s/spinner/cpu.weight
}
. /plan.sh
say "end=1"
poweroff -f
'''


def _line(rep, key):
    return '%d|%s' % (rep, key)


def plan(args):
    """The shell lines of every point, in the kernel bench's orders."""
    groups_of = [(b, w, t) for b, w in args.profiles for t in args.threads]
    lines = []

    def point(rep, key, burst, wait, spin, threads, spinner, ratio,
              seconds):
        lines.append('weights %d %d' % (kernel_math.v2_weight(ratio or 1.0),
                                        kernel_math.v2_weight(1.0)))
        lines.append("/sched_guest point $NSI %d %d %d %d %d %g %g %s '%s'"
                     % (burst * 1e3, wait * 1e3, spin * 1e3, threads,
                        spinner, seconds, args.warmup, CGROUPS,
                        _line(rep, key)))

    for rep in range(args.repetitions):
        point(rep, 'spinner alone', 0, 0, 0, 0, 1, None, args.seconds)
        for b, w, t in kernel_math.order(groups_of, rep, args.seed):
            for ratio in kernel_math.order([None] + list(args.ratios), rep,
                                           args.seed):
                point(rep, kernel.point_key(b, w, t, ratio), b, w, 0, t,
                      int(ratio is not None), ratio, args.seconds)
    for rep in range(args.repetitions):
        for kind, b, w, s, spinner in kernel_math.order(
                kernel.small_points(), rep, args.seed):
            point(rep, 'small|' + kernel.small_key(kind, b, w, s, spinner),
                  b, w, s, 1, int(spinner), 1.0, args.small_seconds)
    for rep in range(args.repetitions):
        lines.append('/sched_guest switch %d' % args.switch_round_trips)
    return '\n'.join(lines) + '\n', groups_of


def build(outdir, plan_text, scale=1):
    """The static program and the initramfs that runs the plan.

    ``scale``: the factor on CFS's tunables the guest sets before it and
    on the bursts it times.
    """
    program = os.path.join(outdir, 'sched_guest')
    guest_boot.run(['cc', '-O2', '-static', '-Wall', '-Werror', '-o',
                    program, PROGRAM])
    init = INIT_SCRIPT % {
        'tunables': ' '.join(TUNABLES), 'scaled': ' '.join(SCALED),
        'scale': scale, 'cgroups': CGROUPS,
        'bursts': ' '.join('%g' % (b * scale) for b in kernel.BURSTS)}
    return guest_boot.initramfs(outdir, {'sched_guest': program},
                                {'init': init, 'plan.sh': plan_text})


def kernel_hz(kver):
    """``(HZ, source)`` from the configuration in Debian's image package."""
    kdir = os.path.join(guest_boot.CACHE, 'kernels')
    debs = sorted(f for f in (os.listdir(kdir) if os.path.isdir(kdir)
                              else ())
                  if f.startswith('linux-image-%s_' % kver))
    if not debs:
        return None, None
    with tempfile.TemporaryDirectory() as tmp:
        guest_boot.run(['dpkg-deb', '-x', os.path.join(kdir, debs[-1]), tmp])
        with open(os.path.join(tmp, 'boot', 'config-' + kver)) as f:
            hz = kernel_math.config_value(f.read(), 'HZ')
    return (int(hz) if hz and hz.isdigit() else None,
            '/boot/config-%s of %s' % (kver, debs[-1]))


def boot(vmlinuz, initrd, cpu, timeout):
    """The console of one boot, QEMU pinned to the host's ``cpu``."""
    cmd = ['taskset', '-c', str(cpu), 'qemu-system-x86_64', '-accel', 'tcg',
           '-cpu', 'max', '-smp', '1', '-m', '1024', '-nodefaults',
           '-display', 'none', '-no-reboot', '-serial', 'stdio',
           '-kernel', vmlinuz, '-initrd', initrd,
           '-append', 'console=ttyS0 panic=-1 quiet rdinit=/init '
           'cryptomgr.notests']
    lines = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    # a guest that hangs says nothing more: the timer ends it, and its
    # console ends with it
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        for raw in proc.stdout:
            line = raw.decode(errors='replace').replace('\r', '')
            lines.append(line)
            if line.startswith('VSMTIO point='):
                kernel.progress('  ' + line.rsplit('|', 1)[0][13:])
        proc.wait(60)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode == -signal.SIGKILL:
        raise guest_boot.GuestError('the guest ran over %d s:\n%s'
                                    % (timeout, ''.join(lines)[-4000:]))
    # the command as the page shows it: files by name, not where they lay
    shown = [os.path.basename(a) if a in (vmlinuz, initrd) else a
             for a in cmd[3:]]
    return ''.join(lines), shown


def _figures(text):
    out = {}
    for kv in text.split():
        k, _, v = kv.partition('=')
        out[k] = float(v)
    return out


def parse(console, args, groups_of, scale=1):
    """``(report, real weights reps, small reps, switches rows, bursts)``."""
    report = guest_boot.parse_report(console)
    weights, small = {}, {}
    for m in re.finditer(r'^VSMTIO point=(\d+)\|(small\|)?([^|]+)\|(.*)$',
                         console, re.MULTILINE):
        rep, is_small, key, figs = m.groups()
        f = _figures(figs)
        row = ({'spinner_cpu': f['spinner_cpu']} if key == 'spinner alone'
               else {k: f.get(k) for k in (
                   'requests_per_s', 'server_cpu', 'spinner_cpu',
                   'wake_mean_us', 'wake_p99_us', 'wake_p999_us',
                   'requests')})
        (small if is_small else weights).setdefault(key, {})[int(rep)] = row
    reps = {}
    for table, into in ((weights, 'weights'), (small, 'small')):
        reps[into] = {k: [v[r] for r in sorted(v)] for k, v in table.items()}
    kernel.normalise(reps['weights'], groups_of, args.ratios)
    rows = {'round_trip_one_cpu_ns': [], 'round_trip_two_cpus_ns': [],
            'pipe_baseline_ns': []}
    for m in re.finditer(r'^VSMTIO switch=(\S+) (\S+)$', console,
                         re.MULTILINE):
        rows['pipe_baseline_ns'].append(float(m.group(1)))
        rows['round_trip_one_cpu_ns'].append(float(m.group(2)))
    bursts = {}
    for b in (b * scale for b in kernel.BURSTS):
        med, fast, p99 = (float(x) / 1e3
                          for x in report['burst_%g' % b].split())
        bursts['%g' % b] = {'target_us': b, 'median_us': med,
                            'min_us': fast, 'p99_us': p99}
    return report, reps, rows, bursts


def measure(args):
    """Boot the guest once; the kernel bench's host, real and unmeasured."""
    t0 = time.time()
    kver, _ = guest_boot.headers_for(SERIES)
    vmlinuz = guest_boot.fetch_kernel(kver)
    hz, hz_source = kernel_hz(kver)
    cpu, busy = kernel_host.least_loaded(1.0)
    if args.cpu is not None:
        cpu = args.cpu
    load0 = kernel_host.loadavg()
    plan_text, groups_of = plan(args)
    with tempfile.TemporaryDirectory(prefix='vsmtio-kguest-') as tmp:
        initrd = build(tmp, plan_text, args.scale)
        kernel.progress('booting Debian %s under QEMU TCG on host CPU %d'
                        % (kver, cpu))
        console, qemu = boot(vmlinuz, initrd, cpu, args.timeout)
    report, reps, rows, bursts = parse(console, args, groups_of,
                                       args.scale)
    release = report['kernel']
    host = {
        'name': 'a Debian %s guest on %s' % (release, platform.node()),
        'kernel_release': release,
        'scheduler': kernel_math.scheduler_of(release),
        'scheduler_source': 'the release (EEVDF since 6.6)',
        'hz': hz, 'hz_source': hz_source,
        'cpu_model': report.get('cpu_model') or None,
        'cpus': int(report['ncpu']), 'smt_active': False,
        'cgroup_version': 2, 'preempt': report.get('preempt') or None,
        'python': None, 'timer_slack_ns': 1, 'clock_nanosleep': True,
        'is_root': True, 'cpu': 0,
        'measured_at': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(t0)),
        'guest': {'qemu': ' '.join(qemu), 'host_cpu': cpu,
                  'scale': args.scale, 'scaled': list(SCALED),
                  'host_kernel': platform.release(),
                  'clocksource': report.get('clocksource'),
                  'controllers': report.get('controllers')},
        'busy_before': busy, 'loadavg_before': load0,
        'busy_after': kernel_host.cpu_busy(1.0),
        'loadavg_after': kernel_host.loadavg(),
        'elapsed_s': time.time() - t0,
    }
    real = {
        'calibration': {'ns_per_iteration': float(report['ns_per_iteration']),
                        'bursts': bursts},
        'weights': kernel.summarise(reps['weights']),
        'small': kernel.summarise(reps['small']),
        'repetitions': reps,
        'switches': kernel_host.switch_summary(
            rows, args.switch_round_trips, None),
    }
    tunables = {t: int(report['tunable_' + t]) for t in TUNABLES
                if report.get('tunable_' + t, '').isdigit()}
    unmeasured = [{'what': 'waking a process on another CPU',
                   'why': 'the guest has one vCPU'}]
    return host, real, unmeasured, report, tunables


def profile_of(host, real, report, tunables, unmeasured, cmdline):
    """The guest's host profile, as ``vsmtio-bench calibrate`` would.

    Its scheduler's tunables are those the guest ran with, scaled with
    the bench's times where it scaled them.
    """
    table = {'driver': report.get('cpuidle_driver') or 'none',
             'governor': report.get('cpuidle_governor') or None,
             'source': '/sys/devices/system/cpu/cpuidle of the guest',
             'cpu': 0, 'states': []}
    wakeups = {}
    for wait in kernel.WAKE_WAITS:
        s = real['small'].get(kernel.small_key('wake', kernel.WAKE_BURST,
                                               wait, 0, False))
        if s:
            wakeups['%g' % wait] = s['wake_mean_us']
    doc = host_calibration.build(
        dict(host), table, real['switches'], wakeups,
        tunables=(tunables, None if tunables else 'debugfs showed none'),
        unmeasured=list(unmeasured) + [{
            'what': 'costs.sibling_polling_speed, the SMT co-run of '
            'computing and waiting loops', 'why': 'the guest has no SMT'}],
        command=cmdline, commit=documents.commit())
    scale = host['guest']['scale']
    for t in SCALED:
        key = 'scheduler.%s_us' % t[:-len('_ns')]
        default = report.get('default_' + t)
        if scale != 1 and key in doc['sources'] and default:
            doc['sources'][key] += (', which the guest set to %d times its '
                                    'default %s ns with the bench\'s times'
                                    % (scale, default))
    return doc


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--seconds', type=float, default=4.0)
    p.add_argument('--small-seconds', type=float, default=1.0)
    p.add_argument('--warmup', type=float, default=0.2)
    p.add_argument('--repetitions', type=int, default=3)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--switch-round-trips', type=int, default=20000)
    p.add_argument('--cpu', type=int, default=None,
                   help='the host CPU QEMU runs on (default: the least '
                   'loaded)')
    p.add_argument('--scale', type=int, default=SCALE,
                   help='the factor on the weight points\' bursts and '
                   'waits and on CFS\'s tunables in the guest (1: none)')
    p.add_argument('--timeout', type=float, default=3600.0)
    p.add_argument('--json', default=JSON)
    p.add_argument('--page', default=PAGE)
    args = p.parse_args(argv)
    if args.scale < 1:
        p.error('--scale: at least 1')
    args.profiles = [(b * args.scale, w * args.scale)
                     for b, w in kernel.PROFILES]
    args.threads = list(kernel.THREADS)
    args.ratios = list(kernel.RATIOS)
    if os.geteuid() != 0:
        sys.stderr.write('kernel_guest: needs root (QEMU\'s CPU, the '
                         'kernel package)\n')
        return 2
    cmdline = ' '.join(['python3 guest_image_elements/tools/kernel_guest.py']
                       + argv)
    try:
        host, real, unmeasured, report, tunables = measure(args)
    except guest_boot.GuestError as exc:
        sys.stderr.write('kernel_guest: %s\n' % exc)
        return 1
    doc = {'command': cmdline, 'measured_at': documents.commit(),
           'host': host, 'real': real,
           'unmeasured': unmeasured, 'stand_ins': list(STAND_INS),
           'host_profile': profile_of(host, real, report, tunables,
                                      unmeasured, cmdline)}
    kernel.write_json(args.json, doc)
    return kernel.main(['--model-only', '--json', args.json,
                        '--page', args.page,
                        '--seconds', '%g' % args.seconds,
                        '--small-seconds', '%g' % args.small_seconds,
                        '--warmup', '%g' % args.warmup,
                        '--repetitions', str(args.repetitions),
                        '--profiles', ','.join('%g/%g' % pr
                                               for pr in args.profiles)])


if __name__ == '__main__':
    sys.exit(main())
