"""The host's real kernel against the model, on the product's levers.

``vsmtio-bench kernel`` (root) runs, on the machine it is started on,
the scheduling situations the product's levers act on, with processes
standing in for vCPUs, all pinned to the least loaded CPU:

1. **weights**: a request server (1 or 4 processes; a request is a
   calibrated busy loop of ``burst`` us, then an absolute
   ``clock_nanosleep`` of ``wait`` us as its device wait) and a spinner,
   in two groups of the ``cpu`` controller, the server's weight at 1 to 4
   times the spinner's; each profile's server alone too. Repetitions
   run the points ascending, descending, shuffled;
2. **wake-up** after a device wait, and a **short spin** before blocking
   (halt polling's analogue);
3. the cost of a **context switch** and of **waking a process on
   another CPU** (a pipe ping-pong).

Then the same situations in the simulator (:mod:`~vsmtio_bench.kernel_sim`)
under every scheduler policy it offers, and a comparison of the two per
point under a tolerance: with the model of this host, its host profile
(:mod:`~vsmtio_bench.host_calibration`: the idle states, switch and IPI
``vsmtio-bench calibrate`` measures, taken from this run's own points,
or ``--profile``) over the scenarios, and with the shipped costs, the
paper's host's, which the page keeps beside it. Writes the host's
figures as JSON and the page ``doc/source/benchmarks/kernel.rst``.

Run (root): vsmtio-bench kernel [--seconds 2] [--repetitions 3]
[--tolerance 0.05] [--model-only] [--profile FILE]
"""

import argparse
import json
import os
import platform
import signal
import sys
import time

from vsmtio_bench import documents
from vsmtio_bench import host_calibration
from vsmtio_bench import host_tables
from vsmtio_bench import kernel_host
from vsmtio_bench import kernel_math
from vsmtio_bench import kernel_page
from vsmtio_bench import kernel_sim
from vsmtio_sim import host_profile
from vsmtio_sim import scenario as scenario_mod

# (burst us, wait us) of the server's request
PROFILES = ((50, 200), (20, 900), (500, 100))
THREADS = (1, 4)
RATIOS = (1, 1.5, 2, 2.5, 2.75, 3, 4)
# the wake-up after a device wait: a 20 us request, these waits
WAKE_BURST = 20
WAKE_WAITS = (50, 200, 1000)
# a short spin before blocking: these waits, these spins
SPIN_WAITS = (50, 200)
SPINS = (0, 100, 400)
BURSTS = (20, 50, 500)
# the figures the comparison judges: the server's requests/s over the
# server alone, and the spinner's share of the CPU
FIGURES = ('server_norm', 'spinner_cpu')
JSON = os.path.join(documents.BENCHMARKS, 'kernel.json')
PAGE = os.path.join(documents.BENCHMARKS, 'kernel.rst')

# what processes standing in for vCPUs leave out
STAND_INS = (
    'no SMT sibling: the host has none, so the model\'s sibling is idle '
    'and every co-run factor is 1',
    'no VM exits, no L1D flush on entry, no posted interrupts: a process '
    'blocks in a system call, not in HLT (the model is given 0 for those '
    'costs)',
    'the device is a timer of the same CPU (an hrtimer), not an '
    'interrupt from a device or another CPU',
    'the server\'s vCPUs are processes of one group, not threads of one '
    'QEMU: Python\'s threads would share one interpreter lock',
    'the host is itself a virtual machine: its idle is the hypervisor\'s '
    'and its IPIs are virtualised, so the wake-up costs are those of this '
    'guest, not of bare metal',
)


def point_key(burst, wait, threads, ratio):
    return 'b%g/w%g t%d %s' % (burst, wait, threads,
                               'alone' if ratio is None else 'r%g' % ratio)


def progress(msg):
    """One line of a bench's progress, on standard error at once."""
    sys.stderr.write(msg + '\n')
    sys.stderr.flush()


def measure_weights(args, groups, cpu, nsi):
    """Every weight point, every repetition: ``{key: [rep result]}``."""
    groups_of = [(b, w, t) for b, w in args.profiles for t in args.threads]
    reps = {}
    for rep in range(args.repetitions):
        # the spinner alone: how much of the CPU the machine's other load
        # left the bench
        r = kernel_host.run_point(groups, cpu, 0, 0, 0, None, args.seconds,
                                  args.warmup, nsi, server=False)
        reps.setdefault('spinner alone', []).append(
            {'spinner_cpu': r['spinner_cpu']})
        for b, w, t in kernel_math.order(groups_of, rep, args.seed):
            points = [None] + list(args.ratios)
            for ratio in kernel_math.order(points, rep, args.seed):
                key = point_key(b, w, t, ratio)
                r = kernel_host.run_point(
                    groups, cpu, b, w, t, ratio, args.seconds, args.warmup,
                    nsi, spinner=ratio is not None)
                reps.setdefault(key, []).append(_figures(r))
                progress('  rep %d %-22s %8.0f req/s  spinner %s'
                         % (rep + 1, key, r['requests_per_s'],
                            '-' if r['spinner_cpu'] is None
                            else '%.3f' % r['spinner_cpu']))
    normalise(reps, groups_of, args.ratios)
    return reps


def normalise(reps, groups_of, ratios):
    """Each repetition's server over the server alone of that repetition.

    The machine's drift between repetitions cancels. ``groups_of`` is
    the ``(burst, wait, threads)`` of every profile measured.
    """
    for b, w, t in groups_of:
        alone = reps[point_key(b, w, t, None)]
        for ratio in [None] + list(ratios):
            for i, r in enumerate(reps[point_key(b, w, t, ratio)]):
                r['server_norm'] = kernel_math.normalised(
                    r['requests_per_s'], alone[i]['requests_per_s'])


def _figures(r):
    d = kernel_math.delays(r['delays'])
    return {'requests_per_s': r['requests_per_s'],
            'server_cpu': r['server_cpu'], 'spinner_cpu': r['spinner_cpu'],
            'wake_mean_us': d['mean_us'], 'wake_p99_us': d['p99_us'],
            'wake_p999_us': d['p999_us'], 'requests': d['n']}


def summarise(reps):
    """``{key: {figure: summary}}`` over the repetitions of each point."""
    out = {}
    for key, rows in reps.items():
        figs = sorted({f for r in rows for f in r})
        out[key] = {f: kernel_math.summary([r.get(f) for r in rows])
                    for f in figs}
    return out


def medians(summaries):
    return {key: {f: s['median'] for f, s in figs.items()}
            for key, figs in summaries.items()}


def small_points():
    """``(kind, burst, wait, spin, spinner)`` of every small point."""
    points = []
    for wait in WAKE_WAITS:
        for spinner in (False, True):
            points.append(('wake', WAKE_BURST, wait, 0, spinner))
    for wait in SPIN_WAITS:
        for s in SPINS:
            for spinner in (False, True):
                points.append(('spin', WAKE_BURST, wait, s, spinner))
    return points


def measure_small(args, groups, cpu, nsi):
    """The wake-up and spin points: ``{key: [rep result]}``."""
    reps = {}
    for rep in range(args.repetitions):
        for kind, b, w, s, spinner in kernel_math.order(small_points(), rep,
                                                        args.seed):
            key = small_key(kind, b, w, s, spinner)
            r = kernel_host.run_point(
                groups, cpu, b, w, 1, 1.0, args.small_seconds, args.warmup,
                nsi, spinner=spinner, spin_us=s)
            reps.setdefault(key, []).append(_figures(r))
    return reps


def small_key(kind, burst, wait, spin, spinner):
    return '%s b%g/w%g%s %s' % (kind, burst, wait,
                                ' s%g' % spin if kind == 'spin' else '',
                                'spinner' if spinner else 'alone')


def calibration(args, cpu, nsi):
    """How long each calibrated burst takes on the measured CPU."""
    old = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {cpu})
        out = {}
        for b in BURSTS:
            d = kernel_host.burst_accuracy(b, nsi)
            out['%g' % b] = {
                'target_us': b,
                'median_us': kernel_math.percentile(d, 50) / 1e3,
                'min_us': min(d) / 1e3,
                'p99_us': kernel_math.percentile(d, 99) / 1e3}
    finally:
        os.sched_setaffinity(0, old)
    return out


# -- the model ----------------------------------------------------------


def model(args, host, cpus, inputs=None):
    """Every point under every policy: ``{policy: {key: figures}}``.

    ``inputs``: a host profile's (``{'costs', 'scheduler'}``), for the
    model of this host; None: the shipped costs, the paper's host's.
    Either way every scheduler policy runs (the profile's is the one its
    kernel has: the page states both).
    """
    field, pols = kernel_sim.policies()
    sched = kernel_sim.scheduler_inputs(cpus, host.get('hz'))
    costs = None
    if inputs is not None:
        sched = {k: v for k, v in inputs['scheduler'].items()
                 if k != field}
        costs = kernel_sim.host_costs(inputs['costs'])
    out = {}
    for pol in pols:
        pts = out[pol] = {}
        kw = dict(field=field, policy=pol if field else None, sched=sched,
                  duration_s=args.model_seconds + 0.5, warmup_s=0.5,
                  costs=costs)
        for b, w in args.profiles:
            for t in args.threads:
                alone = _model_point(kernel_sim.scenario_doc(
                    b, w, t, spinner=False, **kw), None, args)
                pts[point_key(b, w, t, None)] = alone
                for ratio in args.ratios:
                    r = _model_point(kernel_sim.scenario_doc(b, w, t, **kw),
                                     ratio, args)
                    r['server_norm'] = kernel_math.normalised(
                        r['requests_per_s'], alone['requests_per_s'])
                    pts[point_key(b, w, t, ratio)] = r
                alone['server_norm'] = 1.0
        for wait in WAKE_WAITS:
            for spinner in (False, True):
                pts[small_key('wake', WAKE_BURST, wait, 0, spinner)] = (
                    _model_point(kernel_sim.scenario_doc(
                        WAKE_BURST, wait, 1, spinner=spinner, **kw),
                        1.0, args))
        for wait in SPIN_WAITS:
            for s in SPINS:
                for spinner in (False, True):
                    pts[small_key('spin', WAKE_BURST, wait, s, spinner)] = (
                        _model_point(kernel_sim.scenario_doc(
                            WAKE_BURST, wait, 1, spinner=spinner,
                            spin_us=s, **kw), 1.0, args, spin=bool(s)))
        progress('  model %s (%s): %d points'
                 % (pol, 'this host' if inputs else 'shipped costs',
                    len(pts)))
    return field, sched, costs, out


def _model_point(doc, ratio, args, spin=False):
    runs = [kernel_sim.run_point(doc, ratio, seed=s, spin=spin)
            for s in range(1, args.model_seeds + 1)]
    out = {}
    for f in ('requests_per_s', 'server_cpu', 'spinner_cpu', 'ready_us'):
        vals = [r[f] for r in runs if r[f] is not None]
        out[f] = sum(vals) / len(vals) if vals else None
    out['wake_mean_us'] = out.pop('ready_us')
    return out


def _costs():
    """The model's shipped switch costs the page quotes (ns)."""
    doc = kernel_sim.scenario_doc(50, 200, 1)
    del doc['costs']
    costs = scenario_mod.inputs(doc)['costs']
    return {k: costs[k] for k in ('context_switch_ns', 'ipi_ns',
                                  'vm_exit_ns', 'l1d_flush_ns')}


def host_profile_of(host, real, cmdline):
    """This run's host profile, from the bench's own measurements.

    The same figures ``vsmtio-bench calibrate`` measures, taken from
    this run: its switches, its wake-ups of the server alone after each
    timer wait, the host's cpuidle table and scheduler. The SMT co-run
    is calibrate's alone.
    """
    small = real.get('small', {})
    wakeups = {}
    for wait in WAKE_WAITS:
        s = small.get(small_key('wake', WAKE_BURST, wait, 0, False))
        if s:
            wakeups['%g' % wait] = s['wake_mean_us']
    why = host_tables.smt_refusal(host_tables.smt(),
                                  os.sched_getaffinity(0)) or (
        'the kernel bench does not run it: vsmtio-bench calibrate does')
    return host_calibration.build(
        dict(host), host_tables.cpuidle(cpu=host.get('cpu') or 0),
        real['switches'], wakeups, tunables=host_tables.sched_tunables(),
        unmeasured=[{'what': 'costs.sibling_polling_speed, the SMT co-run '
                     'of computing and waiting loops', 'why': why}],
        command=cmdline, commit=documents.commit())


def comparisons(real, models, tolerance):
    """``{policy: rows}`` over the weight points with a spinner."""
    pts = {k: v for k, v in real.items()
           if ' r' in k and not k.startswith(('wake', 'spin'))}
    return {pol: kernel_math.compare(pts, m, FIGURES, tolerance)
            for pol, m in models.items()}


# -- the command --------------------------------------------------------


def add_process_options(p):
    """The options of the processes that stand in for vCPUs.

    Shared with ``vsmtio-bench calibrate``, which measures with the
    same processes in the same groups.
    """
    p.add_argument('--warmup', type=float, default=0.2,
                   help='seconds run before each point is measured')
    p.add_argument('--repetitions', type=int, default=3)
    p.add_argument('--cpu', type=int, default=None,
                   help='the CPU to pin to (default: the least loaded)')
    p.add_argument('--shield', type=float, default=100.0,
                   help='the weight of the bench\'s own group, which holds '
                   'its processes\' groups, as a multiple of the default: '
                   'the machine\'s other jobs take less of the measured '
                   'CPU (0: the groups\' parent has the default)')
    p.add_argument('--seed', type=int, default=0,
                   help='of the shuffled repetitions\' order')
    p.add_argument('--switch-round-trips', type=int, default=20000)


def parse(argv):
    p = argparse.ArgumentParser(
        prog='vsmtio-bench kernel', description=__doc__.split('\n')[0])
    p.add_argument('--seconds', type=float, default=2.0,
                   help='measured seconds of each weight point')
    p.add_argument('--small-seconds', type=float, default=1.0,
                   help='measured seconds of each wake-up and spin point')
    p.add_argument('--tolerance', type=float, default=0.05,
                   help='a point is within it when |model/real - 1| <= it')
    add_process_options(p)
    p.add_argument('--profiles', default=','.join(
        '%d/%d' % pr for pr in PROFILES),
        help='burst/wait pairs in us, comma separated')
    p.add_argument('--threads', default=','.join(map(str, THREADS)))
    p.add_argument('--ratios', default=','.join('%g' % r for r in RATIOS))
    p.add_argument('--model-seconds', type=float, default=4.0,
                   help='simulated seconds of each model point')
    p.add_argument('--model-seeds', type=int, default=2)
    p.add_argument('--json', default=JSON)
    p.add_argument('--page', default=PAGE,
                   help='the page to write ("" for none)')
    p.add_argument('--model-only', action='store_true',
                   help='read the real kernel\'s figures from --json and '
                   'run only the model and the comparison')
    p.add_argument('--profile', default=None, metavar='FILE',
                   help='the host profile of the model of this host (as '
                   'vsmtio-bench calibrate writes it); default: the one '
                   'this run measures (with --model-only: the one --json '
                   'holds, else one from its measurements)')
    args = p.parse_args(argv)
    args.profiles = [tuple(float(x) for x in pr.split('/'))
                     for pr in args.profiles.split(',') if pr]
    args.threads = [int(x) for x in args.threads.split(',') if x]
    args.ratios = [float(x) for x in args.ratios.split(',') if x]
    if not args.profiles or not args.threads or args.repetitions < 1:
        p.error('nothing to measure')
    return args


def command_line(argv):
    return ' '.join(['vsmtio-bench kernel'] + list(argv))


def measure_real(args):
    """The real kernel's part: the profile's host, real and unmeasured."""
    t0 = time.time()
    host = kernel_host.host_profile()
    host['measured_at'] = time.strftime('%Y-%m-%dT%H:%M:%SZ',
                                        time.gmtime(t0))
    unmeasured = []
    load0 = kernel_host.loadavg()
    cpu, busy = kernel_host.least_loaded(1.0)
    if args.cpu is not None:
        cpu = args.cpu
    host.update({'cpu': cpu, 'busy_before': busy, 'loadavg_before': load0})
    # calibrated on the measured CPU, then kept off it
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    nsi = kernel_host.calibrate()
    kernel_host.pin_parent(cpu, allowed)
    real = {'calibration': {'ns_per_iteration': nsi,
                            'bursts': calibration(args, cpu, nsi)}}
    progress('kernel bench on CPU %d (busy %s), %.2f ns per iteration'
             % (cpu, ', '.join('%d: %.0f%%' % (c, 100 * b)
                               for c, b in sorted(busy.items())), nsi))
    try:
        groups = kernel_host.Groups(args.shield)
    except kernel_host.Unavailable as exc:
        groups = None
        unmeasured.append({'what': 'weights, wake-up beside a spinner, '
                           'spin beside a spinner', 'why': str(exc)})
    if groups is not None:
        with groups:
            host['cgroup_root'] = groups.root
            weights = measure_weights(args, groups, cpu, nsi)
            small = measure_small(args, groups, cpu, nsi)
        real['weights'] = summarise(weights)
        real['small'] = summarise(small)
        real['repetitions'] = {'weights': weights, 'small': small}
    real['switches'] = kernel_host.measure_switches(
        cpu, args.repetitions, args.switch_round_trips)
    if real['switches']['remote_wakeup_ns'] is None:
        unmeasured.append({'what': 'waking a process on another CPU',
                           'why': 'one CPU only'})
    if host['hz'] is None:
        unmeasured.append({'what': 'HZ', 'why': 'no /proc/config.gz and '
                           'no /boot/config of the running release'})
    host['busy_after'] = kernel_host.cpu_busy(1.0)
    host['loadavg_after'] = kernel_host.loadavg()
    host['elapsed_s'] = time.time() - t0
    return host, real, unmeasured


def write_json(path, doc):
    with open(path, 'w') as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write('\n')


def terminated(signum, frame):
    """SIGTERM unwinds as ^C does: what a bench started is removed."""
    raise SystemExit(128 + signum)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    if args.model_only:
        with open(args.json) as f:
            prof = json.load(f)
        host, real, unmeasured = (prof['host'], prof['real'],
                                  prof['unmeasured'])
        cmdline = prof['command']
        # the real figures keep the commit they were measured at
        measured_at = prof.get('measured_at') or prof.get('commit')
        hprof = prof.get('host_profile')
        # a guest's run says what its stand-ins leave out
        stand_ins = prof.get('stand_ins', STAND_INS)
    else:
        if os.geteuid() != 0:
            sys.stderr.write('vsmtio-bench kernel: needs root (the cpu '
                             'controller\'s groups)\n')
            return 2
        # a SIGTERM unwinds like ^C: the processes are killed and the
        # groups removed on the way out
        signal.signal(signal.SIGTERM, terminated)
        host, real, unmeasured = measure_real(args)
        cmdline = command_line(argv)
        measured_at = documents.commit()
        hprof = None
        stand_ins = STAND_INS
    try:
        if args.profile:
            hprof = host_profile.read(args.profile)
            host_profile.check(hprof, args.profile)
        elif hprof is None:
            hprof = host_profile_of(host, real, cmdline)
    except host_profile.ProfileError as exc:
        sys.stderr.write('vsmtio-bench kernel: %s\n' % exc)
        return 2
    t0 = time.time()
    cpus = host.get('cpus') or 1
    field, sched, _, shipped = model(args, host, cpus)
    _, host_sched, host_costs, models = model(
        args, host, cpus, {g: hprof[g] for g in host_profile.GROUPS})
    real_medians = medians(real.get('weights', {}))
    prof = {
        'command': cmdline,
        'commit': documents.commit(),
        'measured_at': measured_at,
        'host': host,
        'settings': {
            'seconds': args.seconds, 'warmup_s': args.warmup,
            'small_seconds': args.small_seconds,
            'repetitions': args.repetitions, 'tolerance': args.tolerance,
            'shield': args.shield,
            'profiles': args.profiles, 'threads': args.threads,
            'ratios': args.ratios, 'model_seconds': args.model_seconds,
            'model_seeds': args.model_seeds},
        'stand_ins': list(stand_ins),
        'unmeasured': unmeasured,
        'real': real,
        'host_profile': hprof,
        'model': {'policy_field': field, 'policies': list(models),
                  'scheduler_inputs': sched,
                  'working_set_kib': kernel_sim.WORKING_SET_KIB,
                  'costs': _costs(),
                  # the model of this host: the profile's inputs as the
                  # bench's processes pay them
                  'host_inputs': {'costs': host_costs,
                                  'scheduler': host_sched},
                  'points': models, 'points_shipped': shipped,
                  'elapsed_s': time.time() - t0},
        'comparison': comparisons(real_medians, models, args.tolerance),
        'comparison_shipped': comparisons(real_medians, shipped,
                                          args.tolerance),
    }
    write_json(args.json, prof)
    text = kernel_page.render(prof)
    if args.page:
        with open(args.page, 'w') as f:
            f.write(text)
    sys.stdout.write(kernel_page.table_text(prof))
    progress('wrote %s%s (python %s)'
             % (args.json, ' and ' + args.page if args.page else '',
                platform.python_version()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
