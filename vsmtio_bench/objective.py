#!/usr/bin/env python3
"""What the guard's objective costs: the product under other CPU floors.

The default objective (``guard_cpu_min = 0.97``) keeps a mechanism only if
the CPU-bound class is shown to keep 97% of its throughput. vSMT-IO's
larger I/O gains come from the sibling split, which trades CPU for I/O, so
the objective decides how much of them a host gets. This runs the product
(``vsmtio``) at steady state on the chosen scenarios under each floor
given, and vanilla in the same run, and prints each ratio to vanilla, the
mechanisms the guard kept, and the mean over the scenarios. It is the
operator's dial, measured; a benchmark, not a test: it asserts nothing.

    vsmtio-bench objective [--only PREFIX] [--processes N] \\
        FLOOR [FLOOR ...]
"""

import argparse
import concurrent.futures
import statistics

from vsmtio_sim import runner
from vsmtio_sim import scenario


def _job(args):
    name, floor = args
    if floor is None:
        r = runner.run(name, 'vanilla', steady=True)
    else:
        r = runner.run(name, 'vsmtio', steady=True, overrides={
            ('vsmtio_agent', 'guard_cpu_min'): floor})
    kept = sorted((r.get('agent') or {}).get('mechanisms') or ())
    return name, floor, r['io_throughput'], r['cpu_throughput'], kept


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('floors', nargs='+', type=float, metavar='FLOOR',
                        help='guard_cpu_min values to run the product at')
    parser.add_argument('--only', default='fig5_',
                        help='scenario name prefix (default: the Fig. 5 '
                             'pairs)')
    parser.add_argument('--processes', type=int, default=2)
    args = parser.parse_args(argv)
    names = [n for n in scenario.shipped() if n.startswith(args.only)]
    if not names:
        parser.error('no shipped scenario starts with %r' % args.only)
    jobs = [(n, f) for n in names for f in [None] + args.floors]
    out = {}
    with concurrent.futures.ProcessPoolExecutor(args.processes) as pool:
        for name, floor, io, cpu, kept in pool.map(_job, jobs):
            out[name, floor] = (io, cpu, kept)
    print('%-6s %-28s %6s %6s  %s' % ('floor', 'scenario', 'I/O', 'CPU',
                                      'kept'))
    for floor in args.floors:
        ios, cpus = [], []
        for name in names:
            vio, vcpu, _ = out[name, None]
            io, cpu, kept = out[name, floor]
            io_r = io / vio if vio else None
            cpus.append(cpu / vcpu)
            if io_r is not None:
                ios.append(io_r)
            print('%-6.2f %-28s %6s %6.3f  %s' % (
                floor, name, '-' if io_r is None else '%.3f' % io_r,
                cpu / vcpu, '+'.join(kept) or 'none'))
        print('%-6.2f %-28s %6.3f %6.3f  (min CPU %.3f)' % (
            floor, 'mean', statistics.fmean(ios), statistics.fmean(cpus),
            min(cpus)))


if __name__ == '__main__':
    main()
