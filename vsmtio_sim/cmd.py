"""``vsmtio-sim``: run the simulated SMT host from the command line.

    vsmtio-sim list
    vsmtio-sim run --scenario NAME|FILE --kernel K [--seed N]
                   [--duration S] [--scheduler S] [--profile FILE] [--json]
    vsmtio-sim compare --scenario NAME|FILE [--seed N] [--duration S]
                       [--scheduler S] [--profile FILE] [--json]
                       [--processes N]
    vsmtio-sim compare --scenario NAME|FILE --steady [--seed N | --seeds LIST]
                       [--scheduler S] [--profile FILE] [--json]
                       [--processes N]

``compare`` runs every kernel model and normalises to ``vanilla``; with
``--steady`` it also runs vanilla's A/A run and judges each honest VM
against its own floors net of the model's noise
(:mod:`vsmtio_sim.tenants`), and reports the product against vanilla
over the seeds it ran (:mod:`vsmtio_sim.seeds`): every kernel on the
first, the product, vanilla and its A/A run on the others. Under
the ``vsmtio`` kernel the real agent drives the host. Bad input gets one
error line and exit status 2, never a traceback.

``--profile`` takes a host profile ``vsmtio-bench calibrate`` wrote
(:mod:`vsmtio_sim.host_profile`): its costs and scheduler replace the
scenario's, and the output says whose they are.

``--scheduler`` plays the scenario under another of the model's host
schedulers (``cfs``, the paper's; ``eevdf``, today's hosts'); the tables
say which ran.

The options ``--scenario``, ``--kernel``, ``--seed``, ``--duration``,
``--scheduler`` and ``--profile`` are the ``[vsmtio_sim]`` options of
``vsmtio_sim/conf.py``, parsed with their own types and bounds and
handed to the run's oslo.config object
(:func:`vsmtio_sim.runner.make_conf`); a kernel name is checked by the
kernel models themselves. Only what has no
configuration option (``--steady``, ``--seeds``, ``--json``,
``--processes``) is declared here.
"""

import argparse
import json
import sys
import warnings

from vsmtio_agent import cmd
from vsmtio_sim import conf as sim_conf
from vsmtio_sim import intervals
from vsmtio_sim import kernels
from vsmtio_sim import report
from vsmtio_sim import runner
from vsmtio_sim import scenario as scenario_mod
from vsmtio_sim import seeds as seeds_mod
from vsmtio_sim import tenants


class _Parser(argparse.ArgumentParser):

    def error(self, message):
        raise _Usage(message)


class _Usage(Exception):
    pass


_OPTS = {opt.dest: opt for opt in sim_conf.sim_opts}


def seed_list(text):
    """``--seeds``: :func:`~vsmtio_sim.intervals.parse_seeds` for argparse."""
    try:
        return list(intervals.parse_seeds(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def build_parser():
    p = _Parser(prog='vsmtio-sim',
                description='The simulated SMT host of vsmtio.')
    sub = p.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True
    sub.add_parser('list', help='list shipped scenarios and kernel models')
    for name, helptext in (('run', 'run one kernel model'),
                           ('compare', 'run every kernel model, '
                                       'normalised to vanilla')):
        c = sub.add_parser(name, help=helptext)
        cmd.add_argument(c, _OPTS['scenario'], required=True)
        if name == 'run':
            # by name: the kernel models say which exist (one line, no
            # usage dump, for a typo)
            c.add_argument('--kernel', required=True,
                           help='one of: ' + ', '.join(kernels.NAMES))
        else:
            c.add_argument('--processes', type=int, default=2,
                           choices=(1, 2, 3, 4),
                           help='worker processes (default 2)')
        which = c.add_mutually_exclusive_group()
        cmd.add_argument(which, _OPTS['seed'],
                         default=_OPTS['seed'].default)
        if name == 'compare':
            which.add_argument(
                '--seeds', type=seed_list, metavar='N,N,...',
                help='with --steady: every kernel on the first seed, '
                     'vanilla, its A/A run and vsmtio on the others, and '
                     'vsmtio against vanilla over them all')
        when = c.add_mutually_exclusive_group()
        cmd.add_argument(when, _OPTS['duration'],
                         default=_OPTS['duration'].default)
        when.add_argument('--steady', action='store_true',
                          help='run the agent until its state settles, '
                               'then measure every kernel over a window '
                               'as long as one whole search by the guard')
        cmd.add_argument(c, _OPTS['scheduler'])
        cmd.add_argument(c, _OPTS['profile'], metavar='FILE')
        c.add_argument('--json', action='store_true',
                       help='print JSON instead of tables')
    return p


def _overrides(args):
    """The run's configuration beyond its own arguments.

    The host profile and the scheduler, as ``[vsmtio_sim]`` overrides.
    """
    out = {}
    if args.profile:
        out[runner.PROFILE] = args.profile
    if args.scheduler:
        out[('vsmtio_sim', 'scheduler')] = args.scheduler
    return out or None


def _scheduler_line(args):
    """Which host scheduler the model ran: the figures differ by it."""
    policy = (args.scheduler or runner.load(
        args.scenario, _overrides(args)).scheduler['policy'])
    return 'host scheduler: %s' % policy


def _list():
    lines = ['Scenarios:']
    for name in scenario_mod.shipped():
        try:
            sc = scenario_mod.load(name)
            lines.append('  %-28s %s' % (name, sc.title))
        except scenario_mod.ScenarioError as e:
            lines.append('  %-28s INVALID: %s' % (name, e))
    lines.append('Kernel models:')
    for k in kernels.KERNELS.values():
        lines.append('  %-28s %s' % (k.name, k.description))
    print('\n'.join(lines))


def _warning(message, category, filename, lineno, file=None, line=None):
    """A deprecated scenario field, said in one line like the errors."""
    sys.stderr.write('vsmtio-sim: warning: %s\n' % message)


def main(argv=None):
    with warnings.catch_warnings():
        warnings.showwarning = _warning
        return _main(argv)


def _main(argv):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command == 'list':
            _list()
            return 0
        if args.command == 'run':
            result = runner.run(args.scenario, args.kernel, args.seed,
                                args.duration, progress=sys.stderr,
                                overrides=_overrides(args),
                                steady=args.steady)
            if not args.json:
                print(_scheduler_line(args))
            print(json.dumps(result, indent=2, sort_keys=True)
                  if args.json else report.run_table(result))
            return 0
        if args.steady:
            return _steady(args)
        if args.seeds is not None:
            raise _Usage('--seeds: only with --steady')
        results = runner.compare(args.scenario, args.seed, args.duration,
                                 processes=args.processes,
                                 overrides=_overrides(args))
        if args.json:
            print(json.dumps({'results': results,
                              'normalised': report.normalise(results)},
                             indent=2, sort_keys=True))
        else:
            print(_scheduler_line(args))
            print(report.compare_table(results))
            _speed(results)
        return 0
    except _Usage as e:
        sys.stderr.write('vsmtio-sim: error: %s\n' % e)
        return 2
    except (scenario_mod.ScenarioError, ValueError) as e:
        sys.stderr.write('vsmtio-sim: error: %s\n' % e)
        return 2
    except KeyboardInterrupt:
        sys.stderr.write('vsmtio-sim: interrupted\n')
        return 130


def _speed(results):
    for r in results.values():
        print('%-18s %s' % (r['kernel'], report.speed_line(r)))


def _steady(args):
    """``compare --steady``: each VM judged net of noise, over the seeds.

    Only at steady state: a transient says nothing about a tenant's
    floor, and the A/A run the floors are net of is a steady one.
    """
    seeds = args.seeds or [args.seed]
    runs = runner.compare_seeds(args.scenario, seeds,
                                processes=args.processes,
                                overrides=_overrides(args))
    first = runs[seeds[0]]
    results, aa = first['results'], first['aa']
    cycle = tenants.cycle_s(runner.load(args.scenario, _overrides(args)))
    agg = seeds_mod.aggregate(runs, cycle_s=cycle)
    null = seeds_mod.nulls(runs)
    if args.json:
        for seed, run in runs.items():
            run['tenants'] = tenants.compare(run['results'], aa=run['aa'],
                                             cycle_s=cycle,
                                             null=null.get(seed))
        print(json.dumps({'results': results, 'aa': aa,
                          'normalised': report.normalise(results),
                          'tenants': first['tenants'],
                          'seeds': runs, 'over_seeds': agg},
                         indent=2, sort_keys=True))
        return 0
    print(_scheduler_line(args))
    print(report.compare_table(results))
    print(tenants.table(results, aa=aa, cycle_s=cycle,
                        null=null.get(seeds[0])))
    print(seeds_mod.report(agg))
    _speed(results)
    return 0


if __name__ == '__main__':
    sys.exit(main())
