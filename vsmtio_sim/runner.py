"""Run a scenario under one kernel model, or under all of them.

Under the ``vsmtio`` kernels the REAL agent drives the simulated host: its
one loop (:meth:`Agent.loop`) over ``SimulatedHostDriver`` runs the host for
each period, samples its counters and applies the policy engine's
decision, exactly as the daemon does on a real host. The other kernel
models have no agent; the host just runs.

This module sits above ``agent``, ``drivers`` and ``sim`` (the host
model), which know nothing of it: the simulator stays a host, and what
runs an agent on it lives with the other things that run agents
(``cmd``, this module).
"""

import concurrent.futures
import dataclasses
import math
import statistics
import sys
import time
import warnings

from oslo_config import cfg

from vsmtio_agent import agent as agent_mod
from vsmtio_agent.conf import agent as agent_conf
from vsmtio_sim import conf as sim_conf
from vsmtio_sim import driver as sim_driver
from vsmtio_sim import host_profile
from vsmtio_sim import kernels
from vsmtio_sim import report
from vsmtio_sim import scenario as scenario_mod
from vsmtio_sim import tenants

CHUNK_S = 0.1
#: The override (of :func:`make_conf`) that names a host profile.
PROFILE = ('vsmtio_sim', 'profile')


def make_conf(scenario, kernel, seed=1, duration=0.0, overrides=None):
    """A private oslo.config object for one run."""
    conf = cfg.ConfigOpts()
    agent_conf.register_opts(conf)
    sim_conf.register_opts(conf)
    conf([], project='vsmtio', default_config_files=[])
    conf.set_override('scenario', scenario, 'vsmtio_sim')
    conf.set_override('kernel', kernel, 'vsmtio_sim')
    conf.set_override('seed', seed, 'vsmtio_sim')
    conf.set_override('duration', duration, 'vsmtio_sim')
    for name, value in kernels.get(kernel).agent_conf:
        conf.set_override(name, value, 'vsmtio_agent')
    for (group, name), value in (overrides or {}).items():
        conf.set_override(name, value, group)
    return conf


def _window(sc, duration, warmup_s=None):
    total = duration or sc.duration_s
    warmup = sc.warmup_s if warmup_s is None else warmup_s
    if warmup >= total:
        warmup = total / 4.0
    return warmup, total


class _Progress(object):
    """Progress lines on stderr for runs that take a while."""

    def __init__(self, label, total_s, stream):
        self.label, self.total, self.stream = label, total_s, stream
        self.start = time.time()
        self.next = 0.25
        self.settling = False       # the end is not known until it settles

    def __call__(self, sim_s):
        if self.stream is None or sim_s < self.next * self.total:
            return
        while self.next * self.total <= sim_s:
            self.next += 0.25
        if self.settling:
            self.stream.write('  %s: settling (%.2f simulated s, %.0f s '
                              'wall)\n' % (self.label, sim_s,
                                           time.time() - self.start))
        else:
            self.stream.write('  %s: %3.0f%% (%.2f of %.2f simulated s, '
                              '%.0f s wall)\n'
                              % (self.label,
                                 100.0 * min(sim_s / self.total, 1),
                                 sim_s, self.total,
                                 time.time() - self.start))
        self.stream.flush()


def settled(history, window, tolerance=0.25):
    """Whether the agent's state has stopped travelling.

    ``history`` is one ``(timeout_ns, kept mechanisms)`` per period.
    Settled means the guard kept the same mechanisms over the last two
    ``window``s and the median timeout of the later window is within
    ``1 + tolerance`` of the earlier one's: LTCR may still step by 10% and
    back, as Algorithm 1 always does (a random walk where no step pays),
    but no longer drifts. The run also waits for the guard's first search
    to end (:attr:`~vsmtio_agent.policy.engine.PolicyEngine.guard_settled`):
    before that, the same kept mechanisms over two windows may be the bare
    host a search has not yet left.
    """
    if len(history) < 2 * window:
        return False
    recent = history[-2 * window:]
    if len({kept for _, kept in recent}) != 1:
        return False
    before = statistics.median(t for t, _ in recent[:window])
    after = statistics.median(t for t, _ in recent[window:])
    return max(before, after) <= (1.0 + tolerance) * min(before, after)


# Visits of ``guard_probe_pairs`` ABBA pairs a steady window is as long
# as (:func:`steady_window`)
SEARCH_VISITS = 28


def steady_window(conf):
    """Seconds of simulated time every kernel is measured over.

    :data:`SEARCH_VISITS` visits of ``guard_probe_pairs`` pairs, each pair
    two measured periods and the settling periods after its switch, and
    the first switch's settling: about one whole search of the guard's
    default candidates on a small host, so that at steady state, when the
    search is over, the window holds many of the holdout's cycles and the
    product's figure includes what the holdout costs (a search the holdout
    starts again on a large host may run past the window's end).
    The benches' cached runs are measured over this window, so its
    length changes only with the options it reads, never with the
    agent's code.
    """
    o = conf.vsmtio_agent
    pair = 2 + o.guard_settle_periods
    return ((SEARCH_VISITS * o.guard_probe_pairs * pair
             + o.guard_settle_periods) * o.period)


def sub_edges(start_s, measure_s, window_s):
    """The inner edges of the per-VM windows of one measured window (s).

    Windows of ``window_s`` from ``start_s``; the last one takes the
    remainder (between one and two windows), so none is a sliver.
    """
    n = max(1, int(measure_s / window_s + 1e-9))
    return [start_s + i * window_s for i in range(1, n)]


def run_conf(conf, progress=None, steady=False, settle_window_s=5.0,
             max_settle_s=300.0, warmup_s=None, batches=1, setup=None,
             measure_s=None):
    """Run the scenario ``conf`` names; return the result dict.

    With ``steady``, the agent's kernels run until :func:`settled` (or
    ``max_settle_s``, then the result says it did not settle) and every
    kernel is then measured over :func:`steady_window` (the others after
    ``warmup_s``, by default the scenario's); otherwise the scenario's (or
    ``duration``'s) fixed window is used. Every window starts with
    :meth:`~vsmtio_sim.engine.Simulation.reseed`, so kernels
    compared window by window draw the same requests. A steady window of
    a scenario with phases is whole phase cycles, starting on a cycle
    (:meth:`~vsmtio_sim.scenario.Scenario.align`).

    ``batches`` > 1 measures that many consecutive windows of the same
    run (batch means): the result is the first window's, and
    ``result['batches']`` holds each window's class throughputs, which
    tell a real difference from the run's own noise without settling a
    new run per replicate.

    The first window is also cut into per-VM windows
    (:data:`~vsmtio_sim.tenants.WINDOW_S` of whole agent periods,
    :func:`sub_edges`): ``result['windows']`` holds each VM's throughputs
    in each, which :mod:`~vsmtio_sim.tenants` judges. The streams
    are not reseeded at these edges: only the window's own are.

    ``setup``, a callable given the :class:`Simulation` before it runs,
    configures a host statically (a Decision applied once, a halt-polling
    maximum); the run then has no agent, whatever the kernel model.
    ``measure_s`` shortens (or lengthens) a steady window, for a search
    that ranks many configurations and says so.
    """
    opts = conf.vsmtio_sim
    driver = sim_driver.SimulatedHostDriver(conf)
    sim = driver.simulation
    if steady:
        # whole phase cycles, so every kernel sees the same phases
        warmup, measure_s = sim.scenario.align(
            sim.scenario.warmup_s if warmup_s is None else warmup_s,
            measure_s or steady_window(conf))
    else:
        warmup, total = _window(sim.scenario, opts.duration, warmup_s)
        measure_s = total - warmup
    total = warmup + batches * measure_s
    prog = _Progress('%s/%s' % (sim.scenario.name, sim.kernel.name), total,
                     progress)
    wall0 = time.time()
    marks = []                  # totals at every window's edge
    subs = []                   # totals at the first window's inner edges
    period_s = conf.vsmtio_agent.period
    window_s = period_s * max(1, int(round(tenants.WINDOW_S / period_s)))
    extra = {}
    if setup is not None:
        setup(sim)
    if sim.kernel.agent and setup is None:
        ag = agent_mod.Agent(conf, driver)
        window = max(1, int(round(settle_window_s / period_s)))
        every = max(1, int(round(1.0 / period_s)))
        history = []
        trajectory = []
        inner = []              # the inner edges to come (ns)
        prog.settling = steady
        state = {'start_ns': None if steady else warmup * 1e9,
                 'settled_at': None if steady else 0.0}

        def before():
            """Whether to run another period; marks the windows' edges."""
            start_ns = state['start_ns']
            if start_ns is None:
                now_s = sim.now / 1e9
                done = (settled(history, window)
                        and ag.engine.guard_settled)
                if done or now_s >= max_settle_s:
                    state['settled_at'] = now_s if done else None
                    start_s = sim.scenario.align(now_s, measure_s)[0]
                    state['start_ns'] = start_ns = start_s * 1e9
                    prog.total = start_s + batches * measure_s
                    prog.settling = False
                    prog.next = 0.25
                    while prog.next * prog.total <= now_s:
                        prog.next += 0.25
            if start_ns is None:
                return True
            if sim.now >= start_ns + batches * measure_s * 1e9 - 1:
                return False
            if sim.now >= start_ns + len(marks) * measure_s * 1e9 - 1:
                marks.append(sim.totals())
                sim.reseed('window %d' % len(marks))
                if len(marks) == 1:
                    inner.extend(e * 1e9 for e in sub_edges(
                        start_ns / 1e9, measure_s, window_s))
            elif inner and sim.now >= inner[0] - 1:
                inner.pop(0)
                subs.append(sim.totals())
            return True

        def after(period):
            history.append((period.timeout_ns, tuple(sorted(period.kept))))
            if len(history) % every == 0:
                trajectory.append(
                    (round(sim.now / 1e9, 3), period.timeout_ns / 1e3,
                     sorted(period.mechanisms)))
            prog(sim.now / 1e9)

        try:
            ag.tick()                   # first sample, initial timeout
            ag.loop(before=before, after=after)
            marks.append(sim.totals())
            verdicts = ag.period.verdicts
            extra['agent'] = {
                'decisions': sim.decisions, 'swaps': sim.swaps,
                'period_s': period_s,
                'timeout_us': sim.timeout_ns / 1e3,
                # per VM where the guard keeps retention VM by VM
                'timeouts_us': ({vm: ns / 1e3 for vm, ns
                                 in sorted(sim.vm_timeouts.items())}
                                if sim.vm_timeouts is not None else None),
                'weights': dict(sorted(sim.vm_weights.items())),
                'settled_at_s': state['settled_at'],
                'mechanisms': list(history[-1][1]) if history else [],
                'trajectory': trajectory,
                'verdicts': ([dict(dataclasses.asdict(v),
                                   cpu_ratio=v.cpu_ratio,
                                   io_ratio=v.io_ratio) for v in verdicts]
                             if verdicts is not None else None)}
        finally:
            ag.stop()
    else:
        edges = [warmup + i * measure_s for i in range(batches + 1)]
        inner = sub_edges(warmup, measure_s, window_s)
        t = 0.0
        while edges:
            t = min(edges[0], t + CHUNK_S, *inner[:1])
            sim.advance_to(t * 1e9)
            if inner and t >= inner[0] - 1e-9:
                subs.append(sim.totals())
                inner.pop(0)
            elif t >= edges[0] - 1e-9:
                marks.append(sim.totals())
                sim.reseed('window %d' % len(marks))
                edges.pop(0)
            prog(t)
    wall = time.time() - wall0
    result = report.measure(sim, marks[0], marks[1], wall, extra)
    edges = [marks[0]] + subs + [marks[1]]
    result['windows'] = {'window_s': window_s, 'vms': [
        {vm: {k: x[k] for k in ('requests_per_s', 'instructions_per_s')}
         for vm, x in report.measure(sim, a, b, wall)['vms'].items()}
        for a, b in zip(edges, edges[1:])]}
    if opts.profile:
        # whose costs the figures stand on, each input with its source
        result['profile'] = host_profile.load(opts.profile).provenance()
    if batches > 1:
        result['batches'] = [
            {k: r[k] for k in ('io_throughput', 'cpu_throughput', 'vms')}
            for r in (report.measure(sim, a, b, wall)
                      for a, b in zip(marks, marks[1:]))]
    return result


def load(scenario, overrides=None):
    """The scenario a run of ``overrides`` runs: with its host profile.

    Loaded in the calling process before any run starts, so a bad
    scenario or profile is one error there, not one per worker.
    """
    return host_profile.load_scenario(scenario,
                                      (overrides or {}).get(PROFILE))


def check_window(duration, warmup_s=None):
    """ValueError, one line, for a window that no run could end.

    oslo.config's float bounds and the comparisons that end a run are
    all false for NaN, which would run (and print progress) forever.
    """
    for name, value in (('duration', duration), ('warmup_s', warmup_s)):
        if value is not None and not math.isfinite(value):
            raise ValueError('%s: not a finite number (%r)' % (name, value))


def run(scenario, kernel, seed=1, duration=0.0, progress=None,
        overrides=None, steady=False, warmup_s=None, batches=1):
    """Run ``scenario`` (name or path) under ``kernel``."""
    check_window(duration, warmup_s)
    kernels.get(kernel)
    load(scenario, overrides)           # fail early, in this process
    return run_conf(make_conf(scenario, kernel, seed, duration, overrides),
                    progress, steady=steady, warmup_s=warmup_s,
                    batches=batches)


# The A/A run: vanilla again, its window started this much later, so its
# streams were reseeded after a different history: what is left of two
# runs' pasts when nothing else differs (the bench's noise band).
AA_SHIFT_S = 7.3


def shifted_warmup(sc, shift_s):
    """The warm-up that starts a steady window ``shift_s`` after ``sc``'s.

    Counted from where the unshifted window starts, on whole phase cycles
    (:meth:`~vsmtio_sim.scenario.Scenario.align`), so the shifted window
    starts at least ``shift_s`` later, on a later cycle; counted from the
    warm-up, a shift shorter than a cycle would be rounded back onto the
    same start, and the two runs would be one.
    """
    return sc.align(sc.warmup_s, 0.0)[0] + shift_s


def run_aa(scenario, seed=1, progress=None, overrides=None):
    """The A/A run of ``scenario`` at steady state (``AA_SHIFT_S``)."""
    return run(scenario, 'vanilla', seed=seed, progress=progress,
               overrides=overrides, steady=True,
               warmup_s=shifted_warmup(load(scenario, overrides),
                                       AA_SHIFT_S))


# The name a job of compare() gives the A/A run among the kernels' runs.
AA = 'aa'


def _worker(args):
    scenario, kernel, seed, duration, overrides, quiet, steady = args
    # compare() loaded the scenario first and said what is deprecated
    warnings.simplefilter('ignore', scenario_mod.ScenarioDeprecationWarning)
    progress = None if quiet else sys.stderr
    if kernel == AA:
        return run_aa(scenario, seed, progress, overrides)
    return run(scenario, kernel, seed, duration, progress, overrides, steady)


def _pool(jobs, processes):
    """Each job's result, in order, on up to ``processes`` processes."""
    if processes <= 1:
        return [_worker(j) for j in jobs]
    with concurrent.futures.ProcessPoolExecutor(processes) as pool:
        return list(pool.map(_worker, jobs))


def compare(scenario, seed=1, duration=0.0, kernel_names=kernels.NAMES,
            processes=2, progress=True, overrides=None, steady=False):
    """Run every kernel model on ``scenario``; ``{kernel: result}``."""
    check_window(duration)
    load(scenario, overrides)
    for k in kernel_names:
        kernels.get(k)
    jobs = [(scenario, k, seed, duration, overrides, not progress, steady)
            for k in kernel_names]
    return dict(zip(kernel_names, _pool(jobs, processes)))


# What compare_seeds runs on every seed after the first: the product, its
# baseline and the baseline's A/A run, what the figures over seeds need.
SEED_KERNELS = ('vanilla', 'vsmtio')


def compare_seeds(scenario, seeds, kernel_names=kernels.NAMES,
                  processes=2, progress=True, overrides=None):
    """Every kernel on the first seed, the product's figures on the rest.

    At steady state. ``{seed: {'results': {kernel: result}, 'aa': the
    A/A run}}``, in the order of ``seeds``: the first seed runs every
    kernel of ``kernel_names``, the others only ``SEED_KERNELS`` (one
    seed's every kernel shows the models side by side; the product
    against vanilla over several seeds shows how far one seed's figure
    can be trusted, at a third of the cost of every kernel on every
    seed). All runs share one pool of ``processes``.
    """
    load(scenario, overrides)
    for k in kernel_names:
        kernels.get(k)
    plan = [(seed, k) for i, seed in enumerate(seeds)
            for k in tuple(kernel_names if i == 0 else SEED_KERNELS) + (AA,)]
    jobs = [(scenario, k, seed, 0.0, overrides, not progress, True)
            for seed, k in plan]
    out = {seed: {'results': {}} for seed in seeds}
    for (seed, k), result in zip(plan, _pool(jobs, processes)):
        if k == AA:
            out[seed]['aa'] = result
        else:
            out[seed]['results'][k] = result
    return out
