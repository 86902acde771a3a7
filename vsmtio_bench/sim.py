#!/usr/bin/env python3
"""Benchmark the simulated SMT host at steady state on every shipped scenario.

Runs every kernel model on every shipped scenario with
``vsmtio_sim.runner.run(..., steady=True)``: the real agent drives the
two vSMT-IO kernels (``vsmtio-paper``, the paper taken literally;
``vsmtio``, the product) until its state settles, then every kernel is
measured over the same window (as long as one whole search by the
guard, ``runner.steady_window``). Writes
``doc/source/benchmarks/simulator.rst`` and two pictures beside it:

- ``simulator.png``: I/O against CPU throughput (normalised to vanilla)
  per kernel and scenario, and the retention timeout's trajectory;
- ``breakeven.png``: where the paper-literal vSMT-IO's CPU side breaks
  even, over the per-switch indirect cost and the SMT co-run gain.

Its last section, "Sensitivity", sweeps every unsourced or disputed input
(``SWEEP``) on ``SENSITIVITY_SCENARIOS`` over several seeds and says
which conclusions hold across each input's range and which survive every
row, judging every honest VM on its own; and it sweeps the weight lever's
cliff across the wake-up granularity and both schedulers.

Every kernel on one seed: the product against the best static
configuration, over several seeds and with intervals, is the yardstick's
(``vsmtio-bench yardstick``, ``doc/source/benchmarks/yardstick.rst``).

Every run is under one host scheduler: each scenario's own
``scheduler.policy`` (EEVDF for every shipped one), or the one
``--scheduler`` names, passed to every run as ``vsmtio-sim --scheduler``
passes it (the ``[vsmtio_sim] scheduler`` override), the break-even map's
and the sensitivity rows' too; the sensitivity study's
``scheduler.policy`` row and the cliff sweep run both schedulers
whatever it says. The document names the scheduler, and so does the
JSON, which ``--from-json`` reads it from.

A benchmark, not a test: it asserts nothing. The costs are the shipped
inputs; nothing here is tuned toward the paper's numbers.

This module runs the study and puts it together; the rest of it is in
its own modules: :mod:`vsmtio_bench.stats` (replication, the noise band,
dominance, Holm's correction), :mod:`vsmtio_bench.sensitivity` (the
sweep, its runs and records) and :mod:`vsmtio_bench.sensitivity_page`
(what they conclude, the section and the study's page),
:mod:`vsmtio_bench.figures` (the
pictures and the break-even map) and :mod:`vsmtio_bench.document` (the
RST document).

    vsmtio-bench sim [--out FILE] [--json FILE] [--only PREFIX]
        [--scheduler {cfs,eevdf}]
        [--sensitivity S1,S2] [--sensitivity-rows TEXT]
        [--sensitivity-duration SECONDS] [--sensitivity-seeds 1,2,3]
        [--sensitivity-cliff SCENARIO] [--sensitivity-only [--recorded]]

``--sensitivity-only`` runs the study alone and writes its own page,
``sensitivity.rst``, taking every point ``sensitivity.json`` records for
this code and recording each new one as it completes; with
``--recorded`` it runs nothing and makes the page from the records.
"""

import argparse
import concurrent.futures
import json
import os
import sys
import time

from vsmtio_agent import cmd as agent_cmd
from vsmtio_bench import cache
from vsmtio_bench import document
from vsmtio_bench import documents
from vsmtio_bench import figures
from vsmtio_bench import oracle as bench_oracle
from vsmtio_bench import sensitivity
from vsmtio_bench import sensitivity_page
from vsmtio_bench import stats
from vsmtio_sim import kernels
from vsmtio_sim import runner
from vsmtio_sim import scenario

KERNELS = kernels.NAMES


def _job(args):
    """One run of the bench, or the one the cache holds for the same code.

    The whole bench takes hours under EEVDF, more than one sitting, so
    each run is kept under the version of the code that made it
    (:class:`~vsmtio_bench.cache.Store`, the product's sources: the
    agent drives two of the kernels) and a rerun only does what changed.
    A fresh result goes through JSON, as a cached one did, so the two
    have one shape. The key names the scheduler the run is under
    (:func:`policies`), so ``--scheduler eevdf`` and the scenarios' own
    EEVDF share their runs.
    """
    name, kernel, scheduler = args
    batches = stats.BATCHES if kernel in stats.REPLICATED else 1
    store = cache.Store('sim', cache.PRODUCT)
    key = {'name': name, 'kernel': kernel,
           'scheduler': policies([name], scheduler)[name],
           'batches': batches}
    r = store.get(key)
    if r is not None:
        r['bench_cached'] = True
        return name, kernel, r
    t, c = time.time(), time.process_time()
    overrides = bench_oracle.scheduler_overrides(scheduler)
    if kernel == stats.AA:
        r = runner.run_aa(name, overrides=overrides)
    else:
        r = runner.run(name, kernel, steady=True, overrides=overrides,
                       batches=batches)
    r['bench_wall_s'] = time.time() - t
    r['bench_cpu_s'] = time.process_time() - c
    return name, kernel, store.put(key, json.loads(json.dumps(r)))


def run_all(names, processes, scheduler=None):
    """Every kernel on every scenario, at steady state, and the A/A run.

    Under the host ``scheduler`` (None: each scenario's own). The A/A
    result is kept in vanilla's as ``aa``: it is no kernel.
    """
    jobs = [(n, k, scheduler) for n in names for k in KERNELS + (stats.AA,)]
    # the agent's kernels take longest: start them first
    jobs.sort(key=lambda j: j[1] not in ('vsmtio', 'vsmtio-paper'))
    results = {n: {} for n in names}
    with concurrent.futures.ProcessPoolExecutor(processes) as pool:
        for i, (name, kernel, r) in enumerate(pool.map(_job, jobs), 1):
            results[name][kernel] = r
            sys.stderr.write('[%d/%d] %s %s: %.0f s%s\n'
                             % (i, len(jobs), name, kernel,
                                r['bench_wall_s'],
                                ' (cached)' if r.get('bench_cached')
                                else ''))
    for res in results.values():
        aa = res.pop(stats.AA)
        res['vanilla']['aa'] = {k: aa[k] for k in (
            'io_throughput', 'cpu_throughput', 'bench_cpu_s', 'vms',
            'windows', 'bench_cached') if k in aa}
    return results


def _parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench = documents.BENCHMARKS
    p.add_argument('--out', default=None,
                   help='the document (default: simulator.rst beside the '
                        'package; with --sensitivity-only, sensitivity.rst '
                        'for the whole study as shipped, else stdout only)')
    p.add_argument('--png', default=os.path.join(bench, 'simulator.png'))
    p.add_argument('--map-png', default=os.path.join(bench,
                                                     'breakeven.png'))
    p.add_argument('--json', default=None,
                   help='also write every result as JSON here')
    p.add_argument('--only', default='', help='scenario name prefix')
    agent_cmd.add_argument(
        p, document.SCHEDULER_OPT,
        choices=list(document.SCHEDULER_OPT.type.choices),
        help='the host scheduler of every run (default: each scenario\'s '
             'own scheduler.policy): the kernels\' runs, the A/A runs, the '
             'break-even map and the sensitivity rows (its scheduler.policy '
             'row and the cliff sweep run both schedulers whatever this '
             'says)')
    p.add_argument('--processes', type=int, default=2)
    p.add_argument('--from-json', default=None,
                   help='write the document and pictures again from a '
                        '--json file of an earlier run, running nothing')
    p.add_argument('--sensitivity',
                   default=','.join(sensitivity.SENSITIVITY_SCENARIOS),
                   help='scenarios of the sensitivity study, comma '
                        'separated (empty: none)')
    p.add_argument('--sensitivity-rows', default='',
                   help='only the SWEEP rows whose path contains this')
    p.add_argument('--sensitivity-duration', type=float, default=0.0,
                   help='simulated seconds per sensitivity run instead of '
                        'steady state (a transient: to try the code)')
    p.add_argument('--sensitivity-seeds',
                   default=','.join(map(str, sensitivity.SENS_SEEDS)),
                   help='seeds of every sensitivity point, comma separated')
    p.add_argument('--sensitivity-cliff', default=sensitivity.CLIFF_SCENARIO,
                   help='scenario of the weight lever\'s cliff sweep '
                        '(empty: none)')
    p.add_argument('--sensitivity-only', action='store_true',
                   help='run only the sensitivity study and write its own '
                        'page to --out (no pictures); each point is '
                        'recorded in sensitivity.json as it completes')
    p.add_argument('--recorded', action='store_true',
                   help='with --sensitivity-only: run nothing, the page '
                        'from what sensitivity.json records for this code, '
                        'each point not yet measured named as such')
    return p


def _sensitivity(args, rows, names):
    """The sensitivity study and the cliff sweep as the options say."""
    sens, cliff, cpu_s = {}, None, 0.0
    if names and rows:
        sens, cpu_s = sensitivity.run_sensitivity(
            names, rows, args.processes, args.sensitivity_duration,
            args.sensitivity_seeds, args.scheduler, args.recorded)
    if args.sensitivity_cliff:
        cliff, cliff_cpu = sensitivity.run_cliff(
            args.sensitivity_cliff, args.sensitivity_seeds, args.processes,
            args.sensitivity_duration, only_recorded=args.recorded)
        cpu_s += cliff_cpu
    return sens, cliff, cpu_s


def policies(names, scheduler):
    """``{scenario: the host scheduler its runs are under}``.

    ``scheduler`` where one is asked for, else the scenario's own
    ``scheduler.policy``.
    """
    return {n: scheduler or runner.load(n).scheduler['policy']
            for n in names}


def _from_json(p, args, sens_names):
    """An earlier run's results; its scheduler, where the JSON has one.

    A ``--scheduler`` other than the one its runs were under is refused:
    the document would name a scheduler no run was under.
    """
    with open(args.from_json) as f:
        doc = json.load(f)
    if args.scheduler and args.scheduler != doc.get('scheduler'):
        p.error('--scheduler %s: the runs of %s were under %s'
                % (args.scheduler, args.from_json,
                   doc.get('scheduler') or 'their scenarios\' own'))
    args.scheduler = doc.get('scheduler')
    grid = {(int(k.split('/')[0]), float(k.split('/')[1])): tuple(v)
            for k, v in doc['breakeven'].items()}
    sens = doc.get('sensitivity') or {}
    return (doc['results'], grid, doc['wall_s'], sens, doc.get('cliff'),
            [n for n in sens_names if n in sens], doc.get('policies'),
            doc.get('commit'))


def _run(args, sens_names, sens_rows):
    names = [n for n in scenario.shipped() if n.startswith(args.only)]
    ran = policies(names, args.scheduler)
    t0 = time.time()
    results = run_all(names, args.processes, args.scheduler)
    main_wall = time.time() - t0
    grid, map_cpu = {}, 0.0
    if figures.TRAJECTORY in results:
        settled_t = results[figures.TRAJECTORY]['vsmtio-paper']['agent'][
            'timeout_us']
        grid, map_cpu = figures.breakeven(settled_t, args.processes,
                                          args.scheduler)
    sens, cliff, sens_cpu = _sensitivity(args, sens_rows, sens_names)
    cpu_s = map_cpu + sens_cpu + sum(
        r['bench_cpu_s'] + r.get('aa', {}).get('bench_cpu_s', 0.0)
        for res in results.values() for r in res.values())
    wall = {'main': main_wall, 'total': time.time() - t0, 'cpu': cpu_s,
            'sensitivity_cpu': sens_cpu}
    return results, grid, wall, sens, cliff, ran


def _write(path, text):
    if path:
        with open(path, 'w') as f:
            f.write(text)
    sys.stdout.write(text)


def main(argv=None):
    p = _parser()
    args = p.parse_args(argv)
    args.sensitivity_seeds = bench_oracle.seeds_arg(
        p, args.sensitivity_seeds, '--sensitivity-seeds')
    sens_names = [n for n in args.sensitivity.split(',') if n]
    sens_rows = [r for r in sensitivity.SWEEP if args.sensitivity_rows in r[0]]
    if args.recorded and not args.sensitivity_only:
        p.error('--recorded makes the sensitivity page alone: it needs '
                '--sensitivity-only')
    if args.sensitivity_only:
        t0 = time.time()
        sens, cliff, sens_cpu = _sensitivity(args, sens_rows, sens_names)
        if args.json:
            with open(args.json, 'w') as f:
                json.dump({'sensitivity': sens, 'cliff': cliff,
                           'sensitivity_cpu': sens_cpu,
                           'scheduler': args.scheduler}, f, indent=1,
                          sort_keys=True)
        whole = (sensitivity.recordable(args.sensitivity_duration,
                                        args.sensitivity_seeds)
                 and not args.sensitivity_rows
                 and sens_names == list(sensitivity.SENSITIVITY_SCENARIOS)
                 and args.sensitivity_cliff == sensitivity.CLIFF_SCENARIO
                 and not args.scheduler)
        # a part of the study, or another procedure, is printed only
        _write(args.out or (documents.SENSITIVITY_RST if whole else None),
               sensitivity_page.page(
            sens, sens_names, sens_cpu, args.sensitivity_duration, cliff,
            documents.command('sim', sys.argv[1:] if argv is None
                              else argv, ('--out', '--json', '--processes')),
            documents.commit()))
        sys.stderr.write('sensitivity: %.0f s wall, its runs %.0f CPU-s\n'
                         % (time.time() - t0, sens_cpu))
        return 0
    if args.from_json:
        results, grid, wall, sens, cliff, sens_names, ran, ran_at = (
            _from_json(p, args, sens_names))
    else:
        results, grid, wall, sens, cliff, ran = _run(args, sens_names,
                                                     sens_rows)
        ran_at = documents.commit()
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'results': results, 'wall_s': wall,
                       'breakeven': {'%s/%s' % k: v
                                     for k, v in grid.items()},
                       'sensitivity': sens, 'cliff': cliff,
                       'scheduler': args.scheduler, 'policies': ran,
                       'commit': ran_at},
                      f, indent=1, sort_keys=True)
    figures.pictures(results, grid, args.png, args.map_png)
    text = document.document(results, grid, sorted(results), wall['main'],
                             wall['total'], wall.get('cpu'), args,
                             args.scheduler, ran,
                             study=bool(sens or (cliff and cliff.get(
                                 'points'))),
                             first_line=document.printed(
                                 ran_at, bool(args.from_json)))
    text += '\n' + sensitivity_page.sensitivity_section(
        sens, sens_names, wall.get('sensitivity_cpu', 0.0),
        args.sensitivity_duration, cliff)
    _write(args.out or os.path.join(documents.BENCHMARKS, 'simulator.rst'),
           text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
