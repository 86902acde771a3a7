"""``vsmtio-sim``: run the simulated SMT host from the command line.

    vsmtio-sim list
    vsmtio-sim run --scenario NAME|FILE --kernel K [--seed N]
                   [--duration S] [--json]
    vsmtio-sim compare --scenario NAME|FILE [--seed N] [--duration S]
                       [--json] [--processes N]

``compare`` runs every kernel model and normalises to ``vanilla``; with
``--steady`` it also judges each honest VM against its own floors
(:mod:`vsmtio_sim.tenants`). Under
the ``vsmtio`` kernel the real agent drives the host. Bad input gets one
error line and exit status 2, never a traceback.

The options ``--scenario``, ``--kernel``, ``--seed`` and ``--duration`` are
the ``[vsmtio_sim]`` options of ``vsmtio_sim/conf.py``, parsed with their own
types and bounds and handed to the run's oslo.config object
(:func:`vsmtio_sim.runner.make_conf`); a kernel name is checked by the
kernel models themselves. Only what has no configuration option
(``--steady``, ``--json``, ``--processes``) is declared here.
"""

import argparse
import json
import sys
import warnings

from vsmtio_agent import cmd
from vsmtio_sim import conf as sim_conf
from vsmtio_sim import kernels
from vsmtio_sim import report
from vsmtio_sim import runner
from vsmtio_sim import scenario as scenario_mod
from vsmtio_sim import tenants


class _Parser(argparse.ArgumentParser):

    def error(self, message):
        raise _Usage(message)


class _Usage(Exception):
    pass


_OPTS = {opt.dest: opt for opt in sim_conf.sim_opts}


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
        cmd.add_argument(c, _OPTS['seed'], default=_OPTS['seed'].default)
        when = c.add_mutually_exclusive_group()
        cmd.add_argument(when, _OPTS['duration'],
                         default=_OPTS['duration'].default)
        when.add_argument('--steady', action='store_true',
                          help='run the agent until its state settles, '
                               'then measure every kernel over one cycle '
                               'of the guard\'s probing')
        c.add_argument('--json', action='store_true',
                       help='print JSON instead of tables')
    return p


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
                                steady=args.steady)
            print(json.dumps(result, indent=2, sort_keys=True)
                  if args.json else report.run_table(result))
            return 0
        results = runner.compare(args.scenario, args.seed, args.duration,
                                 processes=args.processes,
                                 steady=args.steady)
        # each honest VM judged on its own: at steady state only (a
        # transient says nothing about a tenant's floor)
        judged = tenants.compare(results) if args.steady else None
        if args.json:
            doc = {'results': results,
                   'normalised': report.normalise(results)}
            if judged is not None:
                doc['tenants'] = judged
            print(json.dumps(doc, indent=2, sort_keys=True))
        else:
            print(report.compare_table(results))
            if judged is not None:
                print(tenants.table(results))
            for r in results.values():
                print('%-18s %s' % (r['kernel'], report.speed_line(r)))
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


if __name__ == '__main__':
    sys.exit(main())
