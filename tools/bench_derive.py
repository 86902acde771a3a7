#!/usr/bin/env python3
"""Benchmark: ``monitor.derive`` alone, its C loop against its Python loop.

Synthetic counters for ``--vcpus`` vCPUs (10 domains), as the libvirt
driver gives them on the switch cadence (``switch_read_periods = 10``): a
tenth of the vCPUs have new switch counts this period, the rest hold the
last period's stats, which come in a ``mappingproxy`` as the agent's
period records hold them. Two counter sets: this host's (no PMU, no
retention counters) and one with every counter (the CPI stack). Each
loop is timed warm with ``timeit`` (the best of ``--repeat`` runs of
``--number`` calls, the garbage collector on as in the agent: the objects
built wake it), in the same run, and the C loop's result is checked
equal to the Python one's. ``doc/benchmarks/agent_tick.rst`` has the
figures.

    python tools/bench_derive.py [--vcpus 200] [--repeat 9] [--number 200]
"""

import argparse
import gc
import os
import random
import sys
import timeit
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from vsmtio_agent import model  # noqa: E402
from vsmtio_agent.policy import monitor  # noqa: E402

PERIOD = 10 ** 8
THRESHOLD = 10.0
# the counters this host lacks: retention, PMU and halts
NO_PMU = (1, 2, 3, 4, 5, 6, 7, 11)


def snapshots(n, pmu, rng):
    """Two snapshots a period apart and the period before's stats."""
    t0, t1 = 10 ** 12, 10 ** 12 + PERIOD
    prev, cur = {}, {}
    for i in range(n):
        ref = model.VcpuRef('dom%d' % (i * 10 // n), i)
        base = [rng.randrange(10 ** 12) for _ in range(12)]
        step = [rng.randrange(10 ** 7) for _ in range(12)]
        if not pmu:
            for k in NO_PMU:
                base[k] = step[k] = None
        after = [None if b is None else b + s for b, s in zip(base, step)]
        # a tenth read their switch counts this period, the rest earlier
        read = t0 - 9 * PERIOD if i % 10 == 0 else t0 - (i % 10) * PERIOD
        cpu = rng.randrange(2 * 16)
        prev[ref] = model.VcpuCounters(1024, cpu, *base, read)
        cur[ref] = model.VcpuCounters(1024, cpu, *after,
                                      t1 if i % 10 == 0 else read)
    prev_s, cur_s = model.Snapshot(t0, prev), model.Snapshot(t1, cur)
    return prev_s, cur_s


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--vcpus', type=int, default=200)
    p.add_argument('--repeat', type=int, default=9)
    p.add_argument('--number', type=int, default=200)
    args = p.parse_args(argv)
    if monitor._monitor is None:
        sys.exit('the C loop (vsmtio_agent.policy._monitor) is not built')
    topology = model.Topology.uniform(16)
    rng = random.Random(1)
    print('%-22s %10s %10s %8s'
          % ('%d vCPUs' % args.vcpus, 'Python ms', 'C ms', 'C/Py'))
    for pmu in (False, True):
        prev, cur = snapshots(args.vcpus, pmu, rng)
        before = model.Snapshot(prev.time_ns - PERIOD, prev.vcpus)
        monitor.native = False
        last = types.MappingProxyType(monitor.derive(
            before, prev, THRESHOLD, topology))
        best, out = {}, {}
        for native in (False, True):
            monitor.native = native

            def call():
                return monitor.derive(prev, cur, THRESHOLD, topology, last)
            out[native] = call()
            best[native] = min(timeit.repeat(
                call, setup='gc.enable()', number=args.number,
                repeat=args.repeat, globals={'gc': gc})) / args.number
        if out[True] != out[False] or repr(out[True]) != repr(out[False]):
            sys.exit('the C loop gave other stats than the Python loop')
        print('%-22s %10.3f %10.3f %8.2f' % (
            'every counter' if pmu else 'no PMU (this host)',
            best[False] * 1e3, best[True] * 1e3, best[True] / best[False]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
