"""The kernel bench's page and printed table, from its JSON profile.

Text only: :func:`render` writes ``doc/source/benchmarks/kernel.rst``
from the profile :mod:`vsmtio_bench.kernel` wrote, every number taken
from it; :func:`table_text` is the comparison as the command prints it.
"""

TITLE = 'Benchmark: the real kernel against the model'
GUEST_TITLE = 'Benchmark: a real CFS kernel, in a guest, against the model'
FIGURE_NAMES = {'server_norm': 'server req/s / alone',
                'spinner_cpu': 'spinner CPU share'}


def rst_table(header, rows):
    """A simple RST table (an empty first cell holds a comment)."""
    rows = [[str(r[0]) if str(r[0]).strip() else '..']
            + [str(x) for x in r[1:]] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = '  '.join('=' * w for w in widths)
    out = [line, '  '.join(str(h).ljust(w) for h, w in zip(header, widths)),
           line]
    out += ['  '.join(x.ljust(w) for x, w in zip(r, widths)).rstrip()
            for r in rows]
    out.append(line)
    return '\n'.join(out)


def num(v, fmt='%.3f'):
    return '-' if v is None else fmt % v


def spread(s, fmt='%.3f'):
    """``min-max`` of a summary, the repetitions' range."""
    if not s or s.get('median') is None:
        return '-'
    return '%s-%s' % (fmt % s['min'], fmt % s['max'])


def verdict(ok):
    return {True: 'ok', False: '**out**', None: '-'}[ok]


#: The comparisons a profile holds: the model of this host (its host
#: profile's costs) and the model with the shipped costs (the paper's
#: host's), when the profile has both.
HOST, SHIPPED = 'comparison', 'comparison_shipped'
HEADER = ['point', 'figure', 'real', 'spread', 'model', 'model/real',
          'verdict']


def comparison_rows(prof, policy):
    """Per point and figure: real, spread, the model, and shipped costs'."""
    real = prof['real'].get('weights', {})
    shipped = prof.get(SHIPPED, {}).get(policy)
    rows = []
    for i, r in enumerate(prof[HOST].get(policy, [])):
        s = real.get(r['point'], {}).get(r['figure'])
        row = [r['point'], FIGURE_NAMES[r['figure']],
               num(r['real']), spread(s), num(r['model']),
               num(r['ratio']), verdict(r['ok'])]
        if shipped is not None:
            u = shipped[i]
            row += [num(u['model']), num(u['ratio']), verdict(u['ok'])]
        rows.append(row)
    return rows


def header(prof):
    if SHIPPED not in prof:
        return HEADER
    return HEADER + ['shipped costs', 'model/real', 'verdict']


def _outside(prof, policy, which=HOST):
    rows = prof.get(which, {}).get(policy, [])
    judged = [r for r in rows if r['ok'] is not None]
    out = [r for r in judged if r['ok'] is False]
    return judged, out


def counts(prof):
    """``{policy: {which: (outside, judged)}}`` of the profile's tables."""
    out = {}
    for pol in prof['model']['policies']:
        out[pol] = {}
        for which in (HOST, SHIPPED):
            if which in prof:
                judged, bad = _outside(prof, pol, which)
                out[pol][which] = (len(bad), len(judged))
    return out


def count_lines(prof):
    """One line per policy: figures outside the tolerance, both models."""
    tol = 100 * prof['settings']['tolerance']
    out = []
    for pol, c in counts(prof).items():
        bad, judged = c[HOST]
        line = 'model %s: %d of %d figures outside +-%.0f%%' % (
            pol, bad, judged, tol)
        if SHIPPED in c:
            line += (' with this host\'s costs, %d of %d with the shipped '
                     'costs' % c[SHIPPED])
        out.append(line)
    return out


def table_text(prof):
    """The comparison as the command prints it, one table per policy."""
    out = []
    for pol, line in zip(prof['model']['policies'], count_lines(prof)):
        out.append(line)
        out.append(rst_table(header(prof), comparison_rows(prof, pol)))
    return '\n'.join(out + count_lines(prof)) + '\n'


def _guest_lines(prof):
    """What ran, where the bench's processes ran in a guest."""
    h, st = prof['host'], prof['settings']
    g = h['guest']
    return [
        'Linux %s (fair class: %s, from the release), ``HZ`` %s (%s), '
        'one vCPU (%s), the ``cpu`` controller on cgroup v%s, '
        'preemption %s, clock source ``%s``; booted with ``%s`` on CPU %d '
        'of the host (Linux %s), whose other jobs shared it: load average '
        '``%s`` before and ``%s`` after. The run took %.1f minutes, weight '
        'points of %g s and wake-up and spin points of %g s, each after '
        '%g s of warm-up, %d repetitions (ascending, descending, '
        'shuffled), then the model.' % (
            h['kernel_release'], h['scheduler'] or 'unknown',
            h['hz'] or 'unknown', h['hz_source'] or 'no configuration',
            h['cpu_model'], h['cgroup_version'], h['preempt'],
            g['clocksource'], g['qemu'], g['host_cpu'], g['host_kernel'],
            h['loadavg_before'], h['loadavg_after'], h['elapsed_s'] / 60.0,
            st['seconds'], st['small_seconds'], st['warmup_s'],
            st['repetitions']),
    ] + _scaled(g) + _available(prof)


def _scaled(g):
    if g.get('scale', 1) == 1:
        return []
    return ['', 'Times scaled to the guest\'s speed: every weight point\'s '
            'burst and wait are %d times the host bench\'s, and so are the '
            'guest\'s %s, which it set before the plan ran (the model of '
            'this host takes them as it ran with them); the tick (``HZ``) '
            'cannot be scaled, so it is %d times finer against the slices '
            'than on a host. The wake-up and spin points are not scaled: '
            'they measure the guest\'s costs.'
            % (g['scale'], ', '.join('``%s``' % t for t in g['scaled']),
               g['scale'])]


def _host_lines(prof):
    if prof['host'].get('guest'):
        return _guest_lines(prof)
    h, st = prof['host'], prof['settings']
    busy = h.get('busy_before') or {}
    after = h.get('busy_after') or {}
    return [
        'Linux %s (fair class: %s, from the release), ``HZ`` %s (%s), '
        '%s, %d CPUs, SMT %s, the ``cpu`` controller on cgroup v%s; '
        'Python %s.' % (
            h['kernel_release'], h['scheduler'] or 'unknown',
            h['hz'] or 'unknown', h['hz_source'] or 'no configuration',
            h['cpu_model'], h['cpus'],
            {True: 'on', False: 'off or absent', None: 'unknown'}[
                h['smt_active']],
            h['cgroup_version'] or '-', h['python']),
        '',
        'Every process ran pinned to CPU %d, the less busy one when the '
        'run began (busy %s over one second; after the run %s); the '
        'bench itself kept to the other CPUs. The machine is shared with '
        'other jobs: load average ``%s`` before and ``%s`` after. The run '
        'took %.1f minutes: weight points of %g s and wake-up and spin '
        'points of %g s, each after %g s of warm-up, %d repetitions '
        '(ascending, descending, shuffled), then the model.' % (
            h['cpu'], _busy(busy), _busy(after), h['loadavg_before'],
            h['loadavg_after'], h['elapsed_s'] / 60.0, st['seconds'],
            st['small_seconds'], st['warmup_s'], st['repetitions']),
    ] + _available(prof)


def _available(prof):
    """What the machine's other load left the bench of its CPU."""
    s = prof['real'].get('weights', {}).get('spinner alone', {}).get(
        'spinner_cpu')
    if not s or s['median'] is None:
        return []
    return ['', 'The spinner alone, once per repetition, got %.3f of the '
            'CPU (%s over the repetitions): the rest is what the '
            'machine\'s other jobs took from the measured CPU.'
            % (s['median'], spread(s))]


def _busy(busy):
    return ', '.join('CPU %s %.0f%%' % (c, 100 * b)
                     for c, b in sorted(busy.items()))


def _calibration(prof):
    cal = prof['real']['calibration']
    rows = [['%g' % b['target_us'], num(b['median_us'], '%.1f'),
             num(b['min_us'], '%.1f'), num(b['p99_us'], '%.1f')]
            for b in sorted(cal['bursts'].values(),
                            key=lambda b: b['target_us'])]
    return cal, rst_table(['burst (us)', 'median', 'fastest', 'p99'], rows)


def _burst_error(cal):
    errs = sorted((b['target_us'], b['median_us'] / b['target_us'] - 1)
                  for b in cal['bursts'].values())
    lo = min(e for _, e in errs)
    hi = max(e for _, e in errs)
    return ('%+.0f%% to %+.0f%%' % (100 * lo, 100 * hi),
            ', '.join('%g us: %+.1f%%' % (t, 100 * e) for t, e in errs))


def _overheads(prof):
    """Per profile alone: the request's period beyond burst + wait + wake."""
    rows = []
    w = prof['real'].get('weights', {})
    for b, wait in prof['settings']['profiles']:
        key = 'b%g/w%g t1 alone' % (b, wait)
        p = w.get(key)
        if not p:
            continue
        rate = p['requests_per_s']['median']
        wake = p['wake_mean_us']['median']
        period = 1e6 / rate
        rows.append(['%g/%g' % (b, wait), '%.1f' % period, '%.1f' % wake,
                     '%.1f' % (period - b - wait - wake)])
    return rst_table(['burst/wait (us)', 'period (us)', 'wake-up (us)',
                      'the rest (us)'], rows)


def _small_rows(prof):
    small = prof['real'].get('small', {})
    pols = prof['model']['policies']
    rows = []
    for key in sorted(small, key=_small_order):
        s = small[key]
        row = [key, num(s['wake_mean_us']['median'], '%.1f'),
               spread(s['wake_mean_us'], '%.1f'),
               num(s['wake_p99_us']['median'], '%.1f'),
               num(s['wake_p999_us']['median'], '%.1f'),
               num(s['server_cpu']['median'], '%.3f'),
               num(s['spinner_cpu']['median'], '%.3f')]
        for pol in pols:
            m = prof['model']['points'][pol].get(key, {})
            row += [num(m.get('wake_mean_us'), '%.1f'),
                    num(m.get('spinner_cpu'), '%.3f')]
        rows.append(row)
    header = ['point', 'wake mean', 'spread', 'p99', 'p99.9', 'server CPU',
              'spinner CPU']
    for pol in pols:
        header += ['%s wake' % pol, '%s spinner' % pol]
    return rst_table(header, rows)


def _small_order(key):
    kind, rest = key.split(' ', 1)
    parts = rest.split()
    wait = float(parts[0].split('/w')[1])
    spin = float(parts[1][1:]) if kind == 'spin' else 0.0
    return (kind != 'wake', wait, spin, parts[-1])


def _delay_rows(prof):
    w = prof['real'].get('weights', {})
    rows = []
    for key, s in w.items():
        if 'wake_mean_us' not in s or s['wake_mean_us']['median'] is None:
            continue
        m = {pol: prof['model']['points'][pol].get(key, {})
             for pol in prof['model']['policies']}
        rows.append([key, num(s['wake_mean_us']['median'], '%.1f'),
                     spread(s['wake_mean_us'], '%.1f'),
                     num(s['wake_p99_us']['median'], '%.1f'),
                     num(s['wake_p999_us']['median'], '%.1f')]
                    + [num(m[p].get('wake_mean_us'), '%.1f') for p in m])
    return rst_table(['point', 'mean (us)', 'spread', 'p99', 'p99.9']
                     + ['%s mean' % p for p in prof['model']['policies']],
                     rows)


def _us(s):
    """A summary in ns as one in us."""
    return {k: (v / 1e3 if k in ('median', 'min', 'max') and v is not None
                else v) for k, v in s.items()}


def _switch_lines(prof):
    sw = prof['real']['switches']
    rows = [[name, num(_us(sw[key])['median'], '%.2f'),
             spread(_us(sw[key]), '%.2f')]
            for name, key in (
                ('round trip, one CPU', 'round_trip_one_cpu_ns'),
                ('round trip, two CPUs', 'round_trip_two_cpus_ns'),
                ('four pipe operations, no switch', 'pipe_baseline_ns'))]
    for name, key in (('context switch (derived)', 'context_switch_ns'),
                      ('wake-up on another CPU (derived)',
                       'remote_wakeup_ns')):
        v = sw[key]
        rows.append([name, num(v / 1e3 if v is not None else None, '%.2f'),
                     ''])
    return rst_table(['what (us)', 'median', 'spread'], rows)


def _shipped_note(prof, policy):
    if SHIPPED not in prof:
        return ''
    judged, bad = _outside(prof, policy, SHIPPED)
    return ('; with the shipped costs (the last three columns) %d of %d '
            'are not' % (len(bad), len(judged)))


def _host_model(prof):
    """Which inputs came from this host, each with its source."""
    hp = prof.get('host_profile')
    if not hp:
        return []
    inputs = prof['model']['host_inputs']
    rows = []
    for key in sorted(hp['sources']):
        group, name = key.split('.', 1)
        used = inputs[group].get(name, '(the policy of each table)')
        value = _value(used)
        if name in inputs[group] and used != hp[group][name]:
            # the bench's processes pay it otherwise (kernel_sim.host_costs)
            value += ' (the profile\'s: %s)' % _value(hp[group][name])
        rows.append([key, value, hp['sources'][key]])
    for name, value in sorted(inputs['costs'].items()):
        if 'costs.%s' % name not in hp['sources']:
            rows.append(['costs.%s' % name, _value(value),
                         'the bench\'s processes (above)'])
    c = counts(prof)
    title = 'The model of this host'
    return [
        title, '=' * len(title), '',
        'The model\'s shipped costs are the paper\'s bare-metal host\'s '
        '(``vsmtio_sim/data/costs.yaml``: ``intel_idle``\'s Skylake-SP '
        'C-states, a 3 us context switch, a 2 us IPI). The tables below '
        'compare the real kernel with the model of *this* host: the host '
        'profile measured in this run (the figures ``vsmtio-bench '
        'calibrate`` measures, taken from this run\'s own points; '
        '``host_profile`` in the JSON) laid over the bench\'s scenarios, '
        'as ``vsmtio-sim --profile`` lays one over any scenario '
        '(:doc:`../simulator`). The inputs that came from the host, and '
        'where each came from:', '',
        rst_table(['input', 'value', 'source'], rows), '',
        'Every other input is shipped. The same points with the shipped '
        'costs stay in each table\'s last three columns (and in the JSON, '
        '``comparison_shipped``). Figures outside the tolerance:', '',
        rst_table(['policy', 'this host\'s costs', 'shipped costs'],
                  [[pol, '%d of %d' % v.get(HOST, (0, 0)),
                    '%d of %d' % v[SHIPPED] if SHIPPED in v else '-']
                   for pol, v in c.items()]), '']


def _value(v):
    if isinstance(v, dict) and 'states' in v:
        return '%s: %s' % (v['governor'], ', '.join(
            '%s %g/%g us' % (s['name'], s['exit_latency_us'],
                             s['target_residency_us'])
            for s in v['states']))
    if isinstance(v, float):
        return '%g' % round(v, 3)
    return str(v)


def render(prof):
    """The page, from the profile."""
    st = prof['settings']
    tol = st['tolerance']
    title = GUEST_TITLE if prof['host'].get('guest') else TITLE
    measured = prof.get('measured_at') or prof['commit']
    stamp = 'Measured with ``%s`` at commit ``%s``' % (
        prof['command'], measured)
    if measured != prof['commit']:
        stamp += '; the model ran at commit ``%s``' % prof['commit']
    lines = ['=' * len(title), title, '=' * len(title), '',
             stamp + '.', '']
    lines += [_intro(prof), '', 'What ran', '========', '']
    lines += _host_lines(prof)
    lines += [
        '', '* **Weights**: a request server (1 or 4 processes, each '
        'serving requests of a calibrated busy loop of *burst* us then an '
        'absolute ``clock_nanosleep`` of *wait* us, its device wait, with '
        'a timer slack of 1 ns) and a spinner, in two groups of the '
        '``cpu`` controller created for the run and removed after it '
        '(``cpu.shares`` on cgroup v1, ``cpu.weight`` on v2), the '
        'server\'s weight at *r* times the spinner\'s; each profile\'s '
        'server alone too. A repetition\'s server throughput is '
        'normalised by the server alone in the same repetition. The '
        'wake-up delay is from the sleep\'s deadline to running again.',
        '* **Wake-up** after a device wait (a 20 us request), alone and '
        'beside a spinner of equal weight, and a **short spin** of *s* us '
        'before blocking (the server spins for its completion and catches '
        'one that comes within the spin without sleeping, as KVM\'s halt '
        'polling does).',
        '* **Context switch** (two processes ping-ponging a byte through '
        'two pipes on one CPU) and **wake-up on another CPU** (the same '
        'across two CPUs), less the pipe operations alone.', '',
        'Processes are not vCPUs. What that leaves out:', '']
    lines += ['* %s.' % s for s in prof['stand_ins']]
    lines += ['', 'What could not be measured:', '']
    if prof['unmeasured']:
        lines += ['* %s: %s.' % (u['what'], u['why'])
                  for u in prof['unmeasured']]
    else:
        lines += ['* nothing the bench sets out to measure was missing.']
    cal, cal_table = _calibration(prof)
    title = '%s\'s timing' % _program(prof).capitalize()
    lines += [
        '', title, '=' * len(title), '',
        'The busy loop runs %.2f ns per iteration at its fastest on the '
        'measured CPU; each burst is that many iterations, a fixed amount '
        'of work. Each calibrated burst, timed alone 2000 times:'
        % cal['ns_per_iteration'], '', cal_table, '',
        'At the median a burst is %s of its target (%s): the server\'s '
        'real bursts are that much shorter or longer than the model\'s '
        '``const`` ones, and the fastest and the p99 show what the '
        'timer interrupts and the machine\'s other jobs add. The period '
        'of a request of the server alone beyond its burst, wait and '
        'wake-up (medians) is %s and what the '
        'machine\'s other jobs took from the server:'
        % (_burst_error(cal) + (_own_work(prof),)), '', _overheads(prof),
        '']
    lines += _host_model(prof)
    for pol in prof['model']['policies']:
        judged, bad = _outside(prof, pol)
        title = 'Weights: the real kernel against the model (%s)' % pol
        lines += [title, '=' * len(title), '',
                  'Per point, *real* is the median over the repetitions '
                  'and *spread* their range; the model ran %g simulated s '
                  'per point (mean of %d seeds). A figure is within '
                  'tolerance when abs(model / real - 1) <= %.0f%%: '
                  '**%d of %d figures%s are not** (marked **out**)%s.'
                  % (st['model_seconds'], st['model_seeds'], 100 * tol,
                     len(bad), len(judged),
                     ' of the model of this host' if SHIPPED in prof else '',
                     _shipped_note(prof, pol)), '',
                  rst_table(header(prof), comparison_rows(prof, pol)), '']
    sched = prof['model']['scheduler_inputs']
    lines += [
        'The points are named *b*\\ burst/\\ *w*\\ wait, *t*\\ server '
        'processes and *r*\\ the weight ratio. The model\'s scenarios: one '
        'core, its sibling hyperthread idle, a server VM of 1 or 4 vCPUs '
        'whose request is a ``const`` burst and a ``const`` wait, a '
        'spinner VM of one CPU-bound vCPU, every vCPU on hyperthread 0, '
        'each VM in its own cgroup, the server VM\'s weight set with '
        '``Simulation.set_vm_weights``; the scheduler inputs scaled for '
        'this host\'s CPUs as the kernel scales them (%s), no VM exit or '
        'L1D flush, working sets of %g KiB, every other input as shipped '
        '(``vsmtio_bench/kernel_sim.py``)%s.'
        % (', '.join('``%s`` %g' % kv for kv in sorted(sched.items())),
           prof['model']['working_set_kib'],
           ' or, for the model of this host, the host profile\'s (above)'
           if prof.get('host_profile') else ''), '',
        'Wake-up delays of the weight points', '',
        '(the model\'s: a woken vCPU\'s time runnable before it runs, per '
        'request%s)' % _whose(prof), '', _delay_rows(prof), '',
        'Wake-up and spin', '================', '',
        'Wake-up delay in us (mean, the repetitions\' range of the mean, '
        'p99, p99.9) and CPU shares; the model\'s spin is the enhanced '
        'halt-polling kernel model held at a fixed window of *s*%s:'
        % _whose(prof), '',
        _small_rows(prof), '',
        'Context switch and remote wake-up', '=' * 33, '',
        _switch_lines(prof), '',
        'The model charges a switch between two vCPU threads ``%s`` ns '
        '(``context_switch_ns`` in ``vsmtio_sim/data/costs.yaml``) and a '
        'wake-up onto an idle hyperthread an IPI of ``%s`` ns plus that '
        'switch and the C-state exit%s. The derived figures include what '
        '%s does around each pipe operation beyond the baseline.'
        % (prof['model']['costs']['context_switch_ns'],
           prof['model']['costs']['ipi_ns'], _host_switch(prof),
           _program(prof)), '']
    return '\n'.join(lines)


def _intro(prof):
    if prof['host'].get('guest'):
        return (
            '``python3 guest_image_elements/tools/kernel_guest.py`` '
            '(``tox -e bench-kernel-guest``, root) runs the kernel bench\'s '
            'situations (:doc:`kernel`) on a kernel this machine does not '
            'run: Debian 12\'s, whose fair class is CFS, booted under QEMU '
            'TCG with a busybox initramfs, the bench\'s processes as '
            '``sched_guest`` (C: the initramfs has no Python), the same '
            'points in the same orders. ``vsmtio-bench kernel '
            '--model-only`` then runs the same situations in the model '
            '(``vsmtio_sim``) under every scheduler policy it offers and '
            'compares them; the guest\'s own costs, measured in it, are '
            'the model of this host. Its JSON profile is '
            '``doc/source/benchmarks/kernel_guest.json``; every number '
            'below is from it. The guest\'s clock is the host\'s, so its '
            'slices, its tick and the bench\'s bursts and waits are real '
            'time; what TCG slows (every switch, timer interrupt and '
            'wake-up) is measured and given to the model.')
    return (
        '``vsmtio-bench kernel`` (``tox -e bench-kernel``, root) runs the '
        'scheduling situations the product\'s levers act on, on the '
        'machine\'s real kernel, with processes standing in for vCPUs, '
        'then the same situations in the model (``vsmtio_sim``) under '
        'every scheduler policy the model offers, and compares them. Its '
        'JSON profile of the host is ``doc/source/benchmarks/kernel.json``; '
        'every number below is from it.')


def _program(prof):
    return 'the guest program' if prof['host'].get('guest') else 'Python'


def _own_work(prof):
    if prof['host'].get('guest'):
        return ('the program\'s own work (the clock reads, the loop) and '
                'what the emulated timer and switches add')
    return ('Python\'s own work (the clock reads, the ``ctypes`` call into '
            '``clock_nanosleep``, the loop)')


def _whose(prof):
    return '; the model of this host' if prof.get('host_profile') else ''


def _host_switch(prof):
    """The model of this host's switch and IPI, beside the shipped ones."""
    hp = prof.get('host_profile')
    if not hp:
        return ''
    c = hp['costs']
    return ('; the model of this host charges the switch measured here, '
            '``%s`` ns, and an IPI of ``%s`` ns (a wake-up from another '
            'CPU beyond one by the CPU\'s own timer; 0 in this bench, whose '
            'device is that timer)' % (c.get('context_switch_ns', '-'),
                                       c.get('ipi_ns', '-')))
