#!/usr/bin/env python3
"""Benchmark: ``PolicyEngine.step`` alone, on recorded periods.

The agent's period is sampling, deriving and the policy step; this times
the step, warm, on the inputs of a real run, so the figure is not at the
mercy of a shared host's noise. The inputs are recorded first, from one
of:

``sim:SCENARIO``  the simulator's run of SCENARIO (every counter: the
                  guard probes, LTCR runs its trials, the adjuster swaps);
``host``          the bench host of ``vsmtio-bench tick`` (10 domains of
                  20 vCPU threads on this machine's cores; its counters:
                  no retention, no PMU, so the guard keeps nothing);
``FILE.pickle``   what ``--save`` wrote.

Each step is timed ``--repeat`` times, each time replaying the whole
recording through a new engine (a step's cost depends on the state the
steps before left), and its best time kept; the report is the mean, the
median, the 90th percentile and the worst over the steps, in ms, so the
rare steps (the guard's and LTCR's tests, the adjuster's swaps) count in
the mean as they do in an agent's CPU time. Absolute figures: no second
engine runs in the same tree to give a ratio; compare runs of two trees
on the same recording (``--save`` then the pickle).
``doc/source/benchmarks/agent_tick.rst`` has the figures.

    vsmtio-bench step [--source sim:fig5_rocksdb_nginx]
        [--periods 600] [--repeat 5] [--save FILE]
        [--trust-domain any|project|vm]
"""

import argparse
import dataclasses
import pickle
import tempfile
import time

from vsmtio_agent.policy import engine


def record_sim(scenario, periods):
    """Every step's inputs of the simulator's run of ``scenario``."""
    from vsmtio_sim import runner

    rec = {'calls': []}
    step = engine.PolicyEngine.step

    def recording(self, stats, vms=None, tenancy=None,
                  core_scheduling=None):
        if 'topology' not in rec:
            rec.update(topology=self.topology, params=self.params)
        rec['calls'].append((dict(stats), vms, tenancy, core_scheduling))
        return step(self, stats, vms, tenancy, core_scheduling)

    engine.PolicyEngine.step = recording
    try:
        conf = runner.make_conf(scenario, 'vsmtio')
        # the agent's period is the simulator's: run just long enough
        conf.set_override('duration', periods * conf.vsmtio_agent.period,
                          'vsmtio_sim')
        runner.run_conf(conf)
    finally:
        engine.PolicyEngine.step = step
    return rec


def record_host(periods):
    """Every step's inputs of the agent on the bench host."""
    from vsmtio_bench import tick as bench_tick

    procs = bench_tick.start_host(0)
    agent = bench_tick.make_agent(tempfile.mkdtemp(), 'procfs')
    calls = []
    for _ in range(periods):
        time.sleep(0.1)
        period = agent.tick()
        calls.append((dict(period.stats), None, period.snapshot.tenancy,
                      period.snapshot.core_scheduling))
    for proc in procs:      # their vCPU threads would share the replay's CPU
        proc.kill()
        proc.wait()
    return {'topology': agent.topology, 'params': agent.engine.params,
            'calls': calls}


def replay(rec, repeat, trust_domain=None):
    """Each step's best time (s) over ``repeat`` replays.

    ``trust_domain`` replaces the recorded rule (same inputs, so two
    rules compare on one recording). A recording made before trust
    domains has no tenancy: every domain is then its own tenant.
    """
    clock = time.perf_counter
    best = None
    params = rec['params']
    if trust_domain is not None:
        params = dataclasses.replace(params, trust_domain=trust_domain)
    for _ in range(repeat):
        eng = engine.PolicyEngine(rec['topology'], params)
        times = []
        for stats, vms, *trust in rec['calls']:
            start = clock()
            eng.step(stats, vms, *trust)
            times.append(clock() - start)
        best = times if best is None else list(map(min, best, times))
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--source', default='sim:fig5_rocksdb_nginx')
    p.add_argument('--periods', type=int, default=600)
    p.add_argument('--repeat', type=int, default=5)
    p.add_argument('--save', help='write the recording to this file')
    p.add_argument('--trust-domain', choices=('any', 'project', 'vm'),
                   help='replay under this trust domain rule instead of '
                        'the recorded one')
    args = p.parse_args(argv)
    if args.source.startswith('sim:'):
        rec = record_sim(args.source[4:], args.periods)
    elif args.source == 'host':
        rec = record_host(args.periods)
    else:
        with open(args.source, 'rb') as f:
            rec = pickle.load(f)
    if args.save:
        with open(args.save, 'wb') as f:
            pickle.dump(rec, f)
    times = sorted(replay(rec, args.repeat, args.trust_domain))
    n = len(times)
    print('%s: %d steps, %d vCPUs, %d cores: step ms mean %.3f median '
          '%.3f p90 %.3f max %.3f'
          % (args.source, n, len(rec['calls'][-1][0]),
             len(rec['topology'].cores), sum(times) / n * 1e3,
             times[n // 2] * 1e3, times[int(n * 0.9)] * 1e3,
             times[-1] * 1e3))


if __name__ == '__main__':
    main()
