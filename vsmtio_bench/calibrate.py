"""``vsmtio-bench calibrate``: this host's costs, as the model's inputs.

The model's shipped costs are the paper's bare-metal host's. On the host
it runs on (root; an operator's compute host), this command reads what
the kernel says of itself and measures what it does not, with processes
standing in for vCPUs as in ``vsmtio-bench kernel`` and with the same
measurements (:mod:`vsmtio_bench.kernel_host`):

- the cpuidle driver, governor and states (:mod:`~vsmtio_bench.host_tables`);
- the wake-up delay after a timer wait of 50, 200 and 1000 us, a
  one-process server alone on the least loaded CPU;
- a context switch and a wake-up on another CPU (pipe ping-pongs);
- the fair class from the release (EEVDF since 6.6), ``HZ`` from the
  kernel's configuration, the tunables debugfs shows;
- with SMT siblings, a computing loop's speed beside a computing and
  beside a waiting loop; without, it says so and measures nothing there.

Each measurement is repeated (``--repetitions``, ascending, descending,
shuffled) and its spread kept. It writes a host profile
(:mod:`vsmtio_sim.host_profile`; :mod:`~vsmtio_bench.host_calibration`
derives its inputs): what was measured, what was not and why, and
``costs`` and ``scheduler`` sections ``vsmtio-sim --profile`` lays over a
scenario's. A host where it cannot run is refused before anything is
measured or written, in one line; ``--dry-run`` reads the tables and says
what a run would measure and refuse, and measures and writes nothing.

Run (root): vsmtio-bench calibrate [--output FILE|-] [--dry-run]
[--repetitions 3] [--seconds 1]
"""

import argparse
import datetime
import json
import os
import platform
import signal
import sys
import time

from vsmtio_bench import documents
from vsmtio_bench import host_calibration
from vsmtio_bench import host_tables
from vsmtio_bench import kernel
from vsmtio_bench import kernel_host
from vsmtio_bench import kernel_math

OUTPUT = 'vsmtio-host-profile.json'
WAITS = kernel.WAKE_WAITS


class Refused(Exception):
    """The calibration cannot run on this host; the message says why."""


def parse(argv):
    p = argparse.ArgumentParser(
        prog='vsmtio-bench calibrate', description=__doc__.split('\n')[0])
    p.add_argument('--output', default=OUTPUT,
                   help='the profile to write ("-": standard output; '
                   'default %(default)s)')
    p.add_argument('--dry-run', action='store_true',
                   help='read the kernel\'s tables, say what a run would '
                   'measure and refuse; measure and write nothing')
    p.add_argument('--seconds', type=float, default=1.0,
                   help='measured seconds of each wake-up point')
    p.add_argument('--waits', default=','.join('%g' % w for w in WAITS),
                   help='the timer waits (us) of the wake-up points')
    p.add_argument('--corun-seconds', type=float, default=1.0,
                   help='measured seconds of each SMT co-run point')
    kernel.add_process_options(p)
    args = p.parse_args(argv)
    try:
        args.waits = sorted(float(w) for w in args.waits.split(',') if w)
    except ValueError:
        p.error('--waits: numbers in us, comma separated')
    if (not args.waits or min(args.waits) <= 0 or args.repetitions < 1
            or args.switch_round_trips < 1 or args.seconds <= 0):
        p.error('nothing to measure')
    return args


def command_line(argv):
    return ' '.join(['vsmtio-bench calibrate'] + list(argv))


# -- what the host allows -----------------------------------------------


def preflight(args):
    """Refused unless a run can measure and write here; nothing changes.

    Root: the measured processes run in a group of the ``cpu``
    controller weighted above the machine's other jobs, as the kernel
    bench's do (a CPU others take turns on would be measured, not the
    kernel). The output is checked before minutes of measuring, not
    after.
    """
    if platform.system() != 'Linux' or not os.path.exists('/proc/stat'):
        raise Refused('needs Linux: it reads /proc and /sys and measures '
                      'Linux\'s scheduler')
    if os.geteuid() != 0:
        raise Refused('needs root: the measured processes run in a group '
                      'of the cpu controller that shields them from the '
                      'machine\'s other jobs (nothing was measured or '
                      'written)')
    try:
        kernel_host.find_controller()
    except kernel_host.Unavailable as exc:
        raise Refused('%s (nothing was measured or written)' % exc)
    if args.cpu is not None and args.cpu not in os.sched_getaffinity(0):
        raise Refused('--cpu %d: not a CPU this process may run on (%s)'
                      % (args.cpu, ','.join(
                          map(str, sorted(os.sched_getaffinity(0))))))
    if args.output != '-':
        where = os.path.dirname(os.path.abspath(args.output))
        if not os.access(where, os.W_OK):
            raise Refused('cannot write %s: %s is not a writable directory '
                          '(nothing was measured)' % (args.output, where))


def smt_plan(allowed, root=host_tables.CPU_ROOT):
    """``(sibling pair, None)`` to measure, or ``(None, why not)``."""
    info = host_tables.smt(root)
    why = host_tables.smt_refusal(info, allowed)
    if why:
        return None, why
    return host_tables.sibling_pair(info, allowed), None


def plan(args, allowed, cpu_root=host_tables.CPU_ROOT,
         debug_root=host_tables.DEBUG_SCHED):
    """What a run would read, measure and refuse here: lines of text."""
    host = kernel_host.host_profile()
    table = host_tables.cpuidle(cpu_root, args.cpu or 0)
    states = host_tables.usable_states(table)
    pair, why = smt_plan(allowed, cpu_root)
    _, tun_why = host_tables.sched_tunables(debug_root)
    idle = ('driver %s, governor %s: states %s, read'
            % (table['driver'], table['governor'],
               ', '.join(s['name'] for s in states))
            if table['driver'] not in (None, 'none') and states else
            'no cpuidle driver (%s): one state, its exit measured'
            % (table['driver'] or 'no cpuidle'))
    n = args.repetitions
    return [
        'host %s: Linux %s (%s), HZ %s, %d CPUs'
        % (host['name'], host['kernel_release'], host['scheduler'],
           host['hz'] or 'unknown', host['cpus']),
        'idle states: %s' % idle,
        'would measure: the wake-up after timer waits of %s us, %d x %g s '
        'each; a context switch and a wake-up on another CPU, %d x %d '
        'round trips' % (', '.join('%g' % w for w in args.waits), n,
                         args.seconds, n, args.switch_round_trips),
        ('would measure: SMT co-run on CPUs %d and %d, %d x 3 x %g s'
         % (pair[0], pair[1], n, args.corun_seconds)) if pair else
        'would not measure the SMT co-run: %s' % why,
        'scheduler tunables: %s' % ('read from debugfs' if tun_why is None
                                    else 'defaults (%s)' % tun_why),
        'would write: %s' % ('standard output' if args.output == '-'
                             else args.output),
    ]


# -- measuring ----------------------------------------------------------


def measure_wakeups(args, groups, cpu, nsi):
    """``{wait: summary of the mean wake-up delay (us)}`` over repetitions.

    A one-process server alone, a 20 us request then an absolute sleep
    of the wait, as the kernel bench's wake-up points run it.
    """
    reps = {}
    for rep in range(args.repetitions):
        for wait in kernel_math.order(args.waits, rep, args.seed):
            r = kernel_host.run_point(
                groups, cpu, kernel.WAKE_BURST, wait, 1, None, args.seconds,
                args.warmup, nsi, spinner=False)
            reps.setdefault('%g' % wait, []).append(
                kernel_math.delays(r['delays'])['mean_us'])
            kernel.progress('  rep %d wake-up after %g us: %.1f us'
                            % (rep + 1, wait, reps['%g' % wait][-1] or 0))
    return {w: kernel_math.summary(v) for w, v in reps.items()}


def measure_corun(args, pair):
    """A computing loop's speed beside a computing and a waiting sibling."""
    a, b = pair
    rows = {beside: [] for beside in kernel_host.BESIDE}
    for rep in range(args.repetitions):
        for beside in kernel_math.order(kernel_host.BESIDE, rep, args.seed):
            rows[beside].append(kernel_host.corun(
                a, b, args.corun_seconds, args.warmup, beside))
    alone = rows[None]

    def speed(kind):
        return kernel_math.summary([x / y for x, y in zip(rows[kind], alone)
                                    if x and y])
    return {'pair': [a, b],
            'iterations_per_s': {str(k): kernel_math.summary(v)
                                 for k, v in rows.items()},
            'computing_beside_computing': speed('compute'),
            'computing_beside_waiting': speed('wait')}


def measure(args, argv):
    """Measure on this host; the checked profile document."""
    t0 = time.time()
    allowed = os.sched_getaffinity(0)
    host = kernel_host.host_profile()
    host['measured_at'] = datetime.datetime.now(
        datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
    host['loadavg_before'] = kernel_host.loadavg()
    cpu, busy = kernel_host.least_loaded(1.0)
    cpu = cpu if args.cpu is None else args.cpu
    host.update({'cpu': cpu, 'busy_before': busy})
    table = host_tables.cpuidle(cpu=cpu)
    pair, why = smt_plan(allowed)
    unmeasured = []
    if why:
        unmeasured.append({'what': 'costs.sibling_polling_speed, the SMT '
                           'co-run of computing and waiting loops',
                           'why': why})
    os.sched_setaffinity(0, {cpu})
    nsi = kernel_host.calibrate()
    kernel_host.pin_parent(cpu, allowed)
    kernel.progress('calibrating on CPU %d, %.2f ns per iteration'
                    % (cpu, nsi))
    try:
        with kernel_host.Groups(args.shield) as groups:
            wakeups = measure_wakeups(args, groups, cpu, nsi)
    except kernel_host.Unavailable as exc:
        raise Refused('%s (nothing was written)' % exc)
    switches = kernel_host.measure_switches(cpu, args.repetitions,
                                            args.switch_round_trips)
    corun = measure_corun(args, pair) if pair else None
    os.sched_setaffinity(0, allowed)
    host['loadavg_after'] = kernel_host.loadavg()
    host['elapsed_s'] = time.time() - t0
    return host_calibration.build(
        host, table, switches, wakeups, corun=corun,
        tunables=host_tables.sched_tunables(), unmeasured=unmeasured,
        command=command_line(argv), commit=documents.commit(),
        settings={'repetitions': args.repetitions, 'seconds': args.seconds,
                  'warmup_s': args.warmup, 'waits_us': args.waits,
                  'switch_round_trips': args.switch_round_trips,
                  'corun_seconds': args.corun_seconds,
                  'shield': args.shield, 'ns_per_iteration': nsi})


def write(doc, path):
    """The profile at ``path`` whole or not at all (a rename)."""
    text = json.dumps(doc, indent=1, sort_keys=True) + '\n'
    if path == '-':
        sys.stdout.write(text)
        return
    tmp = '%s.tmp-%d' % (path, os.getpid())
    try:
        with open(tmp, 'w') as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def summary(doc):
    """What the profile sets and leaves, one line each."""
    lines = ['%s = %s' % (k, json.dumps(
        doc[k.split('.')[0]][k.split('.', 1)[1]], sort_keys=True))
        for k in sorted(doc['sources'])]
    lines += ['not measured: %s (%s)' % (u['what'], u['why'])
              for u in doc['not_measured']]
    return '\n'.join(lines) + '\n'


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    try:
        preflight(args)
        if args.dry_run:
            sys.stdout.write('\n'.join(
                plan(args, os.sched_getaffinity(0))) + '\n')
            return 0
        # a SIGTERM unwinds like ^C: the processes are killed and the
        # group removed on the way out, and nothing is written
        signal.signal(signal.SIGTERM, kernel.terminated)
        doc = measure(args, argv)
    except Refused as exc:
        sys.stderr.write('vsmtio-bench calibrate: %s\n' % exc)
        return 2
    write(doc, args.output)
    sys.stderr.write(summary(doc))
    if args.output != '-':
        kernel.progress('wrote %s' % args.output)
    return 0


if __name__ == '__main__':
    sys.exit(main())
