#!/usr/bin/env python3
"""The product against vanilla over several seeds: is a result the guard's?

The guard's path is chaotic: which probe a period's noise tips decides
what is kept, so one run per scenario cannot tell two guards apart (on
``fig5_hbase_pagerank`` one guard gave 1.000 and 1.117 with seeds 1 and
2). This runs the product and vanilla at steady state
(:func:`vsmtio_agent.runner.run`, common random numbers within a seed)
for every scenario and seed given, judges each honest VM against its
floor (:mod:`vsmtio_sim.tenants`), and prints per scenario and seed
the oracle's I/O measure and the honest computing VMs' geometric mean
(``tenants.summary``), the product's share of the oracle's I/O gain
(``doc/source/benchmarks/oracle.json``, ``oracle.oracle_share``), every
honest VM whose mean misses its floor, and every honest VM whose lowest
window (``tenants.WINDOW_S``) is below ``tenants.WINDOW_FLOOR``, then the
means over all. A window below it is often the model's own noise: with
``--aa`` each scenario and seed also runs vanilla against itself (the A/A
run, :func:`vsmtio_agent.runner.run_aa`), and a window counts as the
product's only where it is more than ``AA_MARGIN`` below that run's
lowest for the VM.

``--set GROUP.OPTION=VALUE`` overrides an option of the product's run
(not vanilla's), as a configuration file would: an input that decides a
conclusion, swept by running the tool once per value.

Workers: one process per core (``--processes``); each scenario and seed
is two steady runs, about 20 s of CPU for the Fig. 5 pairs.
"""

import argparse
import json
import math
import multiprocessing
import os
import sys

from oslo_config import cfg
import prettytable

from vsmtio_bench import documents
from vsmtio_bench import oracle as bench_oracle
from vsmtio_sim import runner
from vsmtio_sim import scenario as scenario_mod
from vsmtio_sim import tenants

ORACLE = documents.ORACLE_JSON


# a window this far below the A/A run's lowest is the product's
AA_MARGIN = 0.01


def one(job):
    """The product's result against vanilla's for one scenario and seed."""
    name, seed, aa, overrides = job
    van = runner.run(name, 'vanilla', seed=seed, steady=True)
    prod = runner.run(name, 'vsmtio', seed=seed, steady=True,
                      overrides=dict(overrides))
    judged = tenants.judge(prod, van, runner.run_aa(name, seed)
                           if aa else None)
    summary = tenants.summary(judged)
    agent = prod['agent']
    honest = {vm: v for vm, v in judged.items() if v['ok'] is not None}
    return {
        'scenario': name, 'seed': seed,
        'overrides': ['%s.%s=%s' % (g, o, v) for (g, o), v in overrides],
        'io': summary['io_gain'], 'cpu': summary['cpu'],
        'misses': sorted((vm, round(v['ratio'], 4), v['floor'])
                         for vm, v in honest.items()
                         if v['ratio'] < v['floor']),
        # (vm, lowest window, the A/A run's lowest or None)
        'low_windows': sorted(
            (vm, round(v['min_window'], 4),
             None if v.get('aa_window') is None
             else round(v['aa_window'], 4))
            for vm, v in honest.items()
            if v['min_window'] < tenants.WINDOW_FLOOR),
        'kept': {'mechanisms': agent['mechanisms'],
                 'timeouts_us': agent.get('timeouts_us'),
                 'weights': agent.get('weights')}}


def parse_overrides(items):
    """``((group, option), value)`` pairs of ``GROUP.OPTION=VALUE`` items.

    Each is checked as oslo.config checks a file's (its type and bounds,
    a known option) before any run starts, so a typo costs no bench time.
    """
    out = []
    for item in items:
        key, sep, value = item.partition('=')
        group, dot, name = key.strip().partition('.')
        if not sep or not dot or not group or not name:
            raise ValueError('%r is not GROUP.OPTION=VALUE' % item)
        out.append(((group, name), value.strip()))
    conf = runner.make_conf(scenario_mod.shipped()[0], 'vsmtio')
    for (group, name), value in out:
        try:
            conf.set_override(name, value, group)
            getattr(getattr(conf, group), name)
        except (cfg.Error, ValueError, AttributeError) as e:
            raise ValueError('%s.%s=%s: %s' % (group, name, value, e))
    return tuple(out)


def report(results, oracle, tolerance):
    """The table, and the summary lines, of ``results``."""
    table = prettytable.PrettyTable(
        ['scenario', 'seed', 'I/O', 'CPU', 'oracle I/O', 'share',
         'below a floor (by more than %g)' % tolerance,
         'lowest window < %g (A/A run)' % tenants.WINDOW_FLOOR])
    table.align = 'l'
    shares, scenario_shares, misses = [], {}, 0
    windows = beyond = 0
    for r in sorted(results, key=lambda r: (r['scenario'], r['seed'])):
        o = oracle.get(r['scenario'], {}).get('io_gain')
        s = bench_oracle.oracle_share(r['io'], o)
        if s is not None:
            shares.append(s)
            scenario_shares.setdefault(r['scenario'], []).append(s)
        low = ['%s %.4f' % (vm, ratio) for vm, ratio, floor in r['misses']
               if ratio < floor - tolerance]
        misses += len(low)
        lows = []
        for vm, w, aa in r.get('low_windows', ()):
            windows += 1
            # (without an A/A run every low window counts)
            mine = aa is None or w < aa - AA_MARGIN
            beyond += mine
            versus = '' if aa is None else ' (%.3f)' % aa
            lows.append('%s%s %.3f%s' % ('*' if mine else '', vm, w, versus))
        table.add_row([r['scenario'], r['seed'],
                       '%.3f' % r['io'] if r['io'] else '-',
                       '%.3f' % r['cpu'] if r['cpu'] else '-',
                       '%.3f' % o if o else '-',
                       '%.0f%%' % (100 * s) if s is not None else '-',
                       ', '.join(low), ', '.join(lows)])
    lines = [table.get_string()]
    if scenario_shares:
        # each scenario's mean over its seeds, a share capped at 100%
        # (beating a coordinate descent is not a gain over the best)
        means = [sum(min(1.0, x) for x in v) / len(v)
                 for v in scenario_shares.values()]
        lines.append('share of the oracle\'s I/O gain: mean %.0f%% over %d '
                     'scenarios (each the mean over its seeds, capped at '
                     '100%%)' % (100 * sum(means) / len(means), len(means)))
    lines.append('honest VMs whose mean is below its floor by more than %g: '
                 '%d in %d runs' % (tolerance, misses, len(results)))
    lines.append('honest VMs with a window below %g: %d, of them (*) more '
                 'than %g below the A/A run\'s lowest, or with no A/A run: '
                 '%d' % (tenants.WINDOW_FLOOR, windows, AA_MARGIN, beyond))
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--scenarios', default='fig5_',
                        help='comma-separated scenario names or prefixes')
    parser.add_argument('--seeds', default='1,2,3',
                        help='comma-separated seeds')
    parser.add_argument('--processes', type=int,
                        default=os.cpu_count() or 1)
    parser.add_argument('--oracle', default=ORACLE)
    parser.add_argument('--tolerance', type=float, default=0.002,
                        help='a mean this far below a floor is noise (the '
                        'A/A runs of the bench stay within it)')
    parser.add_argument('--aa', action='store_true',
                        help='also run vanilla against itself per scenario '
                        'and seed, to read each low window against the '
                        'model\'s own noise')
    parser.add_argument('--set', action='append', default=[],
                        metavar='GROUP.OPTION=VALUE',
                        help='override an option of the product\'s run '
                        '(repeatable), e.g. '
                        'vsmtio_agent.guard_settle_periods=2')
    parser.add_argument('--json', help='also write every result here')
    args = parser.parse_args(argv)
    try:
        overrides = parse_overrides(args.set)
    except ValueError as e:
        parser.error('--set: %s' % e)
    try:
        seeds = [int(s) for s in args.seeds.split(',')]
    except ValueError:
        parser.error('--seeds must be comma-separated integers')
    if not math.isfinite(args.tolerance) or args.tolerance < 0:
        parser.error('--tolerance must be a finite number >= 0')
    shipped = scenario_mod.shipped()
    names = [n for n in shipped if any(
        n.startswith(p) for p in args.scenarios.split(',') if p)]
    if not names:
        parser.error('no shipped scenario matches %r' % args.scenarios)
    oracle = (bench_oracle.load_oracle(args.oracle) or {}).get('results', {})
    jobs = [(n, s, args.aa, overrides) for n in names for s in seeds]
    with multiprocessing.Pool(max(1, args.processes)) as pool:
        results = []
        for r in pool.imap_unordered(one, jobs):
            results.append(r)
            print('%s seed %d done (%d of %d)' % (
                r['scenario'], r['seed'], len(results), len(jobs)),
                file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1, sort_keys=True)
    print(report(results, oracle, args.tolerance))


if __name__ == '__main__':
    main()
