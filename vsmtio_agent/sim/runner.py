"""Run a scenario under one kernel model, or under all of them.

Under the ``vsmtio`` kernel the REAL agent drives the simulated host: every
period ``Agent(conf, SimulatedHostDriver(conf)).tick()`` runs the host for
the period, samples its counters and applies the policy engine's decision.
The other kernel models have no agent; the host just runs.
"""

import concurrent.futures
import sys
import time

from oslo_config import cfg

from vsmtio_agent.conf import agent as agent_conf
from vsmtio_agent.conf import simulator as sim_conf
from vsmtio_agent.sim import kernels
from vsmtio_agent.sim import report
from vsmtio_agent.sim import scenario as scenario_mod

CHUNK_S = 0.1


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
    for (group, name), value in (overrides or {}).items():
        conf.set_override(name, value, group)
    return conf


def _window(sc, duration):
    total = duration or sc.duration_s
    warmup = sc.warmup_s if sc.warmup_s < total else total / 4.0
    return warmup, total


class _Progress(object):
    """Progress lines on stderr for runs that take a while."""

    def __init__(self, label, total_s, stream):
        self.label, self.total, self.stream = label, total_s, stream
        self.start = time.time()
        self.next = 0.25

    def __call__(self, sim_s):
        if self.stream is None or sim_s < self.next * self.total:
            return
        while self.next * self.total <= sim_s:
            self.next += 0.25
        self.stream.write('  %s: %3.0f%% (%.2f of %.2f simulated s, '
                          '%.0f s wall)\n'
                          % (self.label, 100.0 * min(sim_s / self.total, 1),
                             sim_s, self.total, time.time() - self.start))
        self.stream.flush()


def run_conf(conf, progress=None):
    """Run the scenario ``conf`` names; return the result dict."""
    from vsmtio_agent.drivers import simulated
    opts = conf.vsmtio_sim
    driver = simulated.SimulatedHostDriver(conf)
    sim = driver.simulation
    warmup, total = _window(sim.scenario, opts.duration)
    prog = _Progress('%s/%s' % (sim.scenario.name, sim.kernel.name), total,
                     progress)
    wall0 = time.time()
    start = None
    extra = {}
    if sim.kernel.agent:
        from vsmtio_agent import agent as agent_mod
        ag = agent_mod.Agent(conf, driver)
        ag.tick()                       # first sample, initial timeout
        try:
            while sim.now < total * 1e9:
                if start is None and sim.now >= warmup * 1e9:
                    start = sim.totals()
                ag.tick()
                prog(sim.now / 1e9)
            extra['agent'] = {
                'decisions': sim.decisions, 'swaps': sim.swaps,
                'period_s': conf.vsmtio_agent.period,
                'timeout_us': sim.timeout_ns / 1e3}
        finally:
            ag.stop()
    else:
        t = 0.0
        while t < total - 1e-12:
            t = min(total, t + CHUNK_S)
            if start is None and t > warmup:
                sim.advance_to(warmup * 1e9)
                start = sim.totals()
            sim.advance_to(t * 1e9)
            prog(t)
    if start is None:
        start = sim.totals()
    return report.measure(sim, start, sim.totals(), time.time() - wall0,
                          extra)


def run(scenario, kernel, seed=1, duration=0.0, progress=None,
        overrides=None):
    """Run ``scenario`` (name or path) under ``kernel``."""
    kernels.get(kernel)
    scenario_mod.load(scenario)         # fail early, in this process
    return run_conf(make_conf(scenario, kernel, seed, duration, overrides),
                    progress)


def _worker(args):
    scenario, kernel, seed, duration, overrides, quiet = args
    return run(scenario, kernel, seed, duration,
               None if quiet else sys.stderr, overrides)


def compare(scenario, seed=1, duration=0.0, kernel_names=kernels.NAMES,
            processes=2, progress=True, overrides=None):
    """Run every kernel model on ``scenario``; ``{kernel: result}``."""
    scenario_mod.load(scenario)
    for k in kernel_names:
        kernels.get(k)
    jobs = [(scenario, k, seed, duration, overrides, not progress)
            for k in kernel_names]
    if processes <= 1:
        results = [_worker(j) for j in jobs]
    else:
        with concurrent.futures.ProcessPoolExecutor(processes) as pool:
            results = list(pool.map(_worker, jobs))
    return dict(zip(kernel_names, results))
