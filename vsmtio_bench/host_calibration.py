"""A host profile from what the calibration measured and read.

Pure functions of the measurements (no processes, no clocks), so the
unit tests hold them exactly; :mod:`vsmtio_bench.calibrate` and the
kernel bench (:mod:`vsmtio_bench.kernel`, which measures the same
things in its own run) measure, these turn the figures into the model's
inputs (:mod:`vsmtio_sim.host_profile` reads the document):

- ``costs.context_switch_ns``: half a pipe round trip between two
  processes on one CPU, less the pipe operations alone;
- ``costs.host_idle``: the kernel's own cpuidle table where it has a
  driver; where it has none (``current_driver`` is ``none``) the CPU
  idles by HLT, in a VM the hypervisor's idle, and the one state the
  model is given exits in what was measured: the wake-up after a timer
  wait, less the context switch the model charges on top of it;
- ``costs.ipi_ns``: where a second CPU exists, the wake-up of a process
  sleeping on another CPU beyond the wake-up by its own CPU's timer (both
  leave an idle CPU and switch in; only the first needs an IPI);
- ``costs.sibling_polling_speed``: with SMT, a computing loop's speed
  beside a waiting one on its sibling, against the sibling idle;
- ``scheduler``: the fair class of the release (EEVDF since 6.6), the
  configured ``HZ``, the tunables debugfs shows, else the kernel's
  defaults scaled for the host's CPUs as the kernel scales them.

What was not measured stays the shipped input, and the profile says
which and why.
"""

import json
import statistics

from vsmtio_bench import host_tables
from vsmtio_bench import kernel_math
from vsmtio_bench import kernel_sim
from vsmtio_sim import eevdf
from vsmtio_sim import host_profile

# the one state of a CPU without a cpuidle driver
HALT = 'halt'

# the costs a process cannot measure, and why; they stay the shipped ones
NOT_BY_PROCESSES = (
    ('costs.vm_exit_ns, costs.l1d_flush_ns, costs.retention_resume_ns',
     'a process blocks in a system call, not in HLT inside a guest: a VM '
     'exit, the L1D flush on VM entry and a posted interrupt need KVM and '
     'a guest, which this calibration does not start'),
    ('costs.sibling_switching_speed',
     'a sibling switching vCPUs pays VM exits and flushes that processes '
     'switching do not'),
    ('costs.cache_refill_gbps, costs.cache_share_kib, costs.cpu_ghz',
     'the refill rate and the cache a switch evicts need the PMU\'s cache '
     'counters; the clock is the paper\'s, which the workloads\' CPI '
     'stacks were set against'),
)


def _where(host):
    return 'measured on %s at %s' % (host['name'], host['measured_at'])


def per_repetition(switches):
    """Context switch and remote wake-up (ns), each over the repetitions.

    Each repetition's round trips less its own pipe baseline, halved: the
    spread is the derived figure's, not its parts'. A record without the
    repetitions (an older kernel bench's) gives the medians' figure with
    no spread.
    """
    rows = switches.get('repetitions')
    if not rows:
        one = [switches['context_switch_ns']]
        two = [switches.get('remote_wakeup_ns')]
        return (kernel_math.summary(one), kernel_math.summary(two))
    base = rows['pipe_baseline_ns']

    def derived(trips):
        return kernel_math.summary([(t - b) / 2.0
                                    for t, b in zip(trips, base)])
    return (derived(rows['round_trip_one_cpu_ns']),
            derived(rows['round_trip_two_cpus_ns']))


def typical_wakeup(wakeups):
    """``(us, wait)``: the median over waits, and the shortest wait's.

    ``wakeups`` maps a wait (us, as text) to the summary of the mean
    wake-up delay after it over the repetitions.
    """
    known = sorted((float(w), s['median']) for w, s in wakeups.items()
                   if s and s.get('median') is not None)
    if not known:
        return None, None
    return (statistics.median(v for _, v in known), known[0])


def host_idle(table, wake_us, ctx_ns):
    """``(host_idle, source)``, or ``(None, why)`` where there is none.

    A driver's table as the kernel declares it, without its polling state
    (:func:`~vsmtio_bench.host_tables.usable_states`), under the model's
    ``menu`` (the kernel's ``teo``, ``ladder`` or ``haltpoll`` are not
    modelled: ``menu`` stands in, and the source says so). Without a
    driver, one state, ``halt``, its exit what the timer wake-up measured
    beyond a context switch.
    """
    states = host_tables.usable_states(table)
    driver = table['driver']
    if driver not in (None, 'none') and states:
        gov = table['governor'] or 'unknown'
        spec = {'governor': 'menu', 'per_core': True, 'states': [
            {'name': s['name'], 'exit_latency_us': s['exit_latency_us'],
             'target_residency_us': s['target_residency_us']}
            for s in states]}
        note = ('' if gov == 'menu' else '; the kernel\'s governor is %s, '
                'which the model does not have: menu stands in' % gov)
        return spec, ('read from the kernel: cpuidle driver %s, states %s '
                      '(exit latency / target residency us, %s)%s'
                      % (driver, ', '.join(
                          '%s %d/%d' % (s['name'], s['exit_latency_us'],
                                        s['target_residency_us'])
                          for s in states), table['source'], note))
    if wake_us is None:
        return None, ('the CPU has no cpuidle driver and no wake-up after '
                      'a timer wait was measured')
    exit_us = round(max(0.0, wake_us - ctx_ns / 1e3), 1)
    spec = {'governor': 'shallowest', 'per_core': True, 'states': [
        {'name': HALT, 'exit_latency_us': exit_us,
         'target_residency_us': 0}]}
    return spec, (
        'no cpuidle driver (%s/current_driver: %s), so the CPU idles by '
        'HLT, in a virtual machine the hypervisor\'s idle: one state, its '
        'exit latency the wake-up after a timer wait (%.1f us, the median '
        'over the waits measured) less a context switch (%.2f us)'
        % (table['source'], driver or 'absent', wake_us, ctx_ns / 1e3))


def scheduler(host, tunables, why_not):
    """``(scheduler inputs, sources, unmeasured)`` of the host's kernel."""
    out, src, missing = {}, {}, []
    fair = host.get('scheduler')
    if fair:
        out['policy'] = fair.lower()
        src['policy'] = ('Linux %s: %s (the release; EEVDF since 6.6)'
                         % (host['kernel_release'], fair))
    else:
        missing.append({'what': 'scheduler.policy',
                        'why': 'the release %r names no version'
                               % host.get('kernel_release')})
    hz = host.get('hz')
    if hz and 100 <= hz <= 1000:
        out['tick_hz'] = hz
        src['tick_hz'] = 'CONFIG_HZ=%d in %s' % (hz, host['hz_source'])
    else:
        missing.append({'what': 'scheduler.tick_hz',
                        'why': 'no kernel configuration gives HZ (%s)'
                               % (hz or 'no /proc/config.gz, no /boot/config'
                                  ' of the running release')})
    cpus = host['cpus']
    defaults = kernel_sim.scheduler_inputs(cpus, None)
    scale = kernel_math.cfs_scale(cpus)
    for key, name in (('latency_us', 'latency_ns'),
                      ('min_granularity_us', 'min_granularity_ns'),
                      ('wakeup_granularity_us', 'wakeup_granularity_ns')):
        if name in tunables:
            out[key] = tunables[name] / 1e3
            src[key] = 'read from %s/%s' % (host_tables.DEBUG_SCHED, name)
            continue
        out[key] = defaults[key]
        src[key] = ('CFS\'s default %g us scaled by %d for %d CPUs as the '
                    'kernel scales it (not read: %s)%s'
                    % (kernel_sim.CFS_BASE_US[key], scale, cpus, why_not,
                       '; an EEVDF kernel has no such tunable: it matters '
                       'only to a scenario run under cfs'
                       if fair == 'EEVDF' else ''))
    if 'base_slice_ns' in tunables:
        factor = eevdf.slice_factor(cpus)
        out['base_slice_us'] = tunables['base_slice_ns'] / 1e3 / factor
        src['base_slice_us'] = (
            'read from %s/base_slice_ns (%d ns) over the factor %d the '
            'kernel scaled it by for %d CPUs: the model scales it again '
            'for the scenario\'s' % (host_tables.DEBUG_SCHED,
                                     tunables['base_slice_ns'], factor, cpus))
    elif fair == 'EEVDF':
        missing.append({'what': 'scheduler.base_slice_us',
                        'why': '%s: the shipped 0.70 ms, the kernel\'s '
                               'default, stays' % why_not})
    return out, src, missing


def costs(host, table, switches, wakeups, corun):
    """``(cost inputs, sources, measured, unmeasured)``."""
    where = _where(host)
    out, src, missing = {}, {}, []
    ctx, remote = per_repetition(switches)
    measured = {'context_switch_ns': ctx, 'remote_wakeup_ns': remote,
                'timer_wakeup_us': wakeups,
                'round_trips': switches.get('round_trips')}
    if ctx['median'] is not None:
        out['context_switch_ns'] = int(round(max(0.0, ctx['median'])))
        src['context_switch_ns'] = (
            '%s: half a pipe round trip between two processes on one CPU '
            'less the pipe operations alone, median of %d repetitions of %s '
            'round trips (spread %s)' % (
                where, ctx['n'], switches.get('round_trips'),
                _pct(ctx['spread'])))
    else:
        missing.append({'what': 'costs.context_switch_ns',
                        'why': 'the round trips were not measured'})
    wake_us, shortest = typical_wakeup(wakeups)
    spec, why = host_idle(table, wake_us, out.get('context_switch_ns', 0))
    if spec is not None:
        out['host_idle'] = spec
        src['host_idle'] = (why if table['driver'] not in (None, 'none')
                            else '%s: %s' % (where, why))
    else:
        missing.append({'what': 'costs.host_idle', 'why': why})
    if remote['median'] is not None and shortest is not None:
        wait, short_us = shortest
        out['ipi_ns'] = int(round(max(0.0, remote['median']
                                      - short_us * 1e3)))
        src['ipi_ns'] = (
            '%s: a wake-up of a process sleeping on another CPU (half a '
            'two-CPU round trip less the pipe operations, %.2f us, spread '
            '%s) beyond a wake-up by its own CPU\'s timer after a %g us '
            'wait (%.2f us)' % (where, remote['median'] / 1e3,
                                _pct(remote['spread']), wait, short_us))
    else:
        missing.append({'what': 'costs.ipi_ns', 'why': (
            'one CPU only: no wake-up from another CPU to measure'
            if remote['median'] is None else
            'no wake-up after a timer wait to tell it from')})
    if corun:
        measured['smt_corun'] = corun
        speed = corun['computing_beside_waiting']['median']
        if speed:
            out['sibling_polling_speed'] = round(min(1.0, speed), 3)
            src['sibling_polling_speed'] = (
                '%s: a computing loop\'s speed on CPU %d beside a waiting '
                'loop on its sibling %d, against the sibling idle, median '
                'of %d repetitions (spread %s; Python\'s waiting loop is '
                'heavier than a PAUSE loop)' % (
                    where, corun['pair'][0], corun['pair'][1],
                    corun['computing_beside_waiting']['n'],
                    _pct(corun['computing_beside_waiting']['spread'])))
    missing += [{'what': what, 'why': why} for what, why in NOT_BY_PROCESSES]
    return out, src, measured, missing


def _pct(spread):
    return 'unknown' if spread is None else '%.0f%%' % (100 * spread)


def build(host, table, switches, wakeups, corun=None, tunables=(),
          unmeasured=(), command=None, commit=None, settings=None):
    """The profile document; checked as ``vsmtio-sim`` will read it.

    ``host`` is the kernel bench's host facts with ``name`` and
    ``measured_at``; ``table`` :func:`host_tables.cpuidle`'s; ``switches``
    :func:`kernel_host.measure_switches`'; ``wakeups`` ``{wait us:
    summary of the mean wake-up delay}``; ``corun`` the SMT co-run
    speeds or None; ``tunables`` ``(values, why not)`` of
    :func:`host_tables.sched_tunables`; ``unmeasured`` what the caller
    could not measure (``[{'what', 'why'}]``).
    """
    values, why_not = tunables or ({}, 'not read')
    host = dict(host, name=host.get('name') or 'an unnamed host',
                measured_at=host.get('measured_at') or 'an unrecorded time')
    cost, csrc, measured, cmiss = costs(host, table, switches, wakeups,
                                        corun)
    sched, ssrc, smiss = scheduler(host, values, why_not)
    measured['scheduler_tunables_ns'] = dict(values)
    sources = {'costs.%s' % k: v for k, v in csrc.items()}
    sources.update(('scheduler.%s' % k, v) for k, v in ssrc.items())
    doc = {
        'kind': host_profile.KIND, 'version': host_profile.VERSION,
        'host': host, 'command': command or '', 'commit': commit,
        'settings': settings or {}, 'cpuidle': table,
        'measured': measured,
        'not_measured': list(unmeasured) + cmiss + smiss,
        'costs': cost, 'scheduler': sched, 'sources': sources,
    }
    # as it will be read: JSON's text keys (the host's busy CPUs are
    # numbered), then the reader's own checks
    doc = json.loads(json.dumps(doc))
    host_profile.check(doc, '<the calibration>')
    return doc
