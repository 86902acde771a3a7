#!/usr/bin/env python3
"""The oracle: per scenario, the best static per-VM configuration in hindsight.

What the product should be measured against: the best any fixed setting
of the host's levers achieves on a scenario, chosen knowing the outcome,
under the same per-VM floors the product must keep
(:mod:`vsmtio_sim.tenants`: every honest serving VM >= 1.0 of
vanilla and every computing one >= 0.97 as a mean, every honest VM >=
0.95 in every window). A configuration is applied once, as a Decision, to
the simulated host with no agent, and measured over the same steady
window as vanilla with common random numbers (``simulate.run_conf``'s
``setup``).

Search space (``SPACE``), two families:

- the vSMT-IO kernel (``vsmtio``): per VM, retention off or on at a
  timeout of 25, 50, 100, 200, 400, 800 or 1000 us (each step at most a
  doubling); the split (RASS, each vCPU's class from its VM's workload: a
  VM that does I/O is the I/O class) off, or on with borrowing; per
  honest serving VM, a factor of 1, 2 or 4 on its cgroup CPU weight;
- the stock host (``haltpoll``, KVM's halt polling): its maximum polling
  window (``halt_poll_ns``, a module parameter, so one for the host: the
  kernel model reads it per run) off or 25 to 1000 us on the same steps,
  and the same CPU weight factors.

Full enumeration is out of reach (8^4 x 3^2 x 2 for four VMs), so each
family is searched by coordinate descent: one coordinate at a time (a
VM's timeout, a VM's weight, the split, the halt-poll maximum) takes its
best value given the others, passes repeat until none changes (at most
``MAX_PASSES``), from several starts (``STARTS``: all off, and others).
It finds a local optimum, not a proven global one. The objective is the
I/O gain: the geometric mean over the honest serving VMs of their ratio to
vanilla; a configuration that breaks any honest VM's floor is never
chosen (while the search is among broken ones, it climbs the worst VM's
margin). All off is vanilla itself, so the oracle never does worse than
1.0.

To stay cheap the search measures a shorter window than the steady one
(``--search-s``, 2 s by default, four per-VM windows); the best feasible
configurations it found (``--confirm``) are then measured again over the
scenario's whole steady window, against vanilla over that window, and the
best one that still keeps every floor there is the oracle. Every figure
printed is from that full window. ``--check`` measures a few scenarios'
best ``CHECK_TOP`` configurations (by the short window) and all off over
both windows and prints their rank correlation, to show the short window
ranks as the long one does. A setting that does not pay is put back to
off before the oracle is reported (``prune``). ``--remeasure`` measures
the configurations a cached result confirmed again over the current
steady window, searching nothing (for a steady window that changed).

``--config`` measures one static configuration given as JSON (the
``config`` of a result, fields left out are off) on the scenarios of
``--names`` over the steady window, and prints each VM against its floor,
writing nothing: the static runs a bench document cites, reproducible.

    vsmtio-bench oracle [--only PREFIX] [--json FILE]
        [--processes N] [--search-s S] [--check NAME,NAME] [--remeasure]
    vsmtio-bench oracle --names NAME[,NAME] --config JSON
"""

import argparse
import concurrent.futures
import json
import os
import sys
import time

import prettytable

from vsmtio_agent import model
from vsmtio_agent.policy import rass
from vsmtio_bench import documents
from vsmtio_bench import stats
from vsmtio_sim import runner
from vsmtio_sim import scenario as scenario_mod
from vsmtio_sim import tenants

SPACE = {
    'timeouts_us': (25, 50, 100, 200, 400, 800, 1000),
    'weights': (1, 2, 4),
    'haltpoll_max_us': (25, 50, 100, 200, 400, 800, 1000),
}
FAMILIES = ('vsmtio', 'haltpoll')
MAX_PASSES = 4
SEARCH_S = 2.0
CONFIRM = 3
CHECK_TOP = 12
DEFAULT_JSON = documents.ORACLE_JSON


def all_off(family):
    """Vanilla's own setting in either family."""
    return {'family': family, 'retain': {}, 'split': False, 'weights': {},
            'haltpoll_max_us': 0}


def starts(family, vms):
    """Where coordinate descent starts: all off first, then others.

    vSMT-IO: every VM retaining at the paper's 200 us; every serving VM
    at 50 us with the split. Halt polling: KVM's default 200 us maximum.
    """
    off = all_off(family)
    if family == 'haltpoll':
        return [off, dict(off, haltpoll_max_us=200)]
    serving = [vm for vm, v in vms.items() if tenants.role(v) == 'serving']
    return [off, dict(off, retain={vm: 200 for vm in vms}),
            dict(off, retain={vm: 50 for vm in serving}, split=True)]


def coordinates(family, vms):
    """``[(field, vm or None, values)]``: what descent varies, one at a time.

    Weights only for honest serving VMs: raising a computing VM's weight
    takes CPU from the serving ones, and an adversary's is not the host's
    to raise.
    """
    out = []
    if family == 'vsmtio':
        for vm in sorted(vms):
            out.append(('retain', vm, (0,) + SPACE['timeouts_us']))
        out.append(('split', None, (False, True)))
    else:
        out.append(('haltpoll_max_us', None,
                    (0,) + SPACE['haltpoll_max_us']))
    for vm in sorted(vms):
        v = vms[vm]
        if tenants.role(v) == 'serving' and not v['adversary']:
            out.append(('weights', vm, SPACE['weights']))
    return out


def get(cfg, field, vm):
    if vm is None:
        return cfg[field]
    return cfg[field].get(vm, 1 if field == 'weights' else 0)


def put(cfg, field, vm, value):
    """A copy of ``cfg`` with one coordinate set (defaults left out)."""
    if vm is None:
        return dict(cfg, **{field: value})
    inner = dict(cfg[field])
    inner.pop(vm, None)
    if value != (1 if field == 'weights' else 0):
        inner[vm] = value
    return dict(cfg, **{field: inner})


def key(cfg):
    return json.dumps(cfg, sort_keys=True)


def label(cfg):
    """A short readable form: ``vsmtio: web 50us x2, db 100us; split``."""
    parts = []
    for vm in sorted(set(cfg['retain']) | set(cfg['weights'])):
        bits = []
        if cfg['retain'].get(vm):
            bits.append('%dus' % cfg['retain'][vm])
        if cfg['weights'].get(vm, 1) != 1:
            bits.append('x%g' % cfg['weights'][vm])
        parts.append('%s %s' % (vm, ' '.join(bits)))
    head = cfg['family']
    if cfg['family'] == 'haltpoll':
        head += ' max %dus' % cfg['haltpoll_max_us']
    if cfg['split']:
        parts.append('split')
    return '%s: %s' % (head, ', '.join(parts) or 'all off')


def parse_config(text):
    """A static configuration from ``--config``'s JSON, or ValueError.

    The fields of :func:`all_off` (any left out are off): ``family``,
    ``retain`` (``{vm: us}``, each a timeout within 1 us to 100 ms),
    ``split``, ``weights`` (``{vm: factor}``, each within 1 and 100) and
    ``haltpoll_max_us`` (0 to 100 ms). Which VMs a scenario has is checked
    against it (:func:`check_vms`).
    """
    try:
        got = json.loads(text)
    except ValueError as e:
        raise ValueError('--config is not JSON: %s' % e)
    if not isinstance(got, dict):
        raise ValueError('--config must be a JSON object, got %r' % (got,))
    family = got.get('family', 'vsmtio')
    if family not in FAMILIES:
        raise ValueError('family must be one of %s, got %r'
                         % (', '.join(FAMILIES), family))
    cfg = all_off(family)
    unknown = sorted(set(got) - set(cfg))
    if unknown:
        raise ValueError('unknown --config fields: %s (known: %s)'
                         % (', '.join(map(str, unknown)),
                            ', '.join(sorted(cfg))))

    def number(what, v, low, high):
        # (bool is an int to json; inf and nan are not numbers here)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                low <= v <= high):
            raise ValueError('%s must be a number within %g and %g, got %r'
                             % (what, low, high, v))
        return v

    for field, low, high in (('retain', 1, 100000), ('weights', 1, 100)):
        inner = got.get(field, {})
        if not isinstance(inner, dict):
            raise ValueError('%s must map VM names to numbers, got %r'
                             % (field, inner))
        cfg[field] = {str(vm): number('%s of %s' % (field, vm), v, low,
                                      high) for vm, v in inner.items()}
    split = got.get('split', False)
    if not isinstance(split, bool):
        raise ValueError('split must be true or false, got %r' % (split,))
    cfg['split'] = split
    cfg['haltpoll_max_us'] = number('haltpoll_max_us',
                                    got.get('haltpoll_max_us', 0), 0, 100000)
    if family != 'haltpoll' and cfg['haltpoll_max_us']:
        raise ValueError('haltpoll_max_us is the haltpoll family\'s')
    if family == 'haltpoll' and (cfg['retain'] or cfg['split']):
        raise ValueError('the haltpoll family has no retention or split')
    return cfg


def check_vms(cfg, vms):
    """ValueError unless every VM ``cfg`` names is one of ``vms``."""
    named = set(cfg['retain']) | set(cfg['weights'])
    unknown = sorted(named - set(vms))
    if unknown:
        raise ValueError('no VM %s on this scenario (it has %s)'
                         % (', '.join(unknown), ', '.join(sorted(vms))))


def static_table(name, cfg, s):
    """One configuration's judgement, each VM against its floor."""
    head = ('%s, %s: I/O gain %s, CPU %s, every floor kept: %s'
            % (name, label(cfg), _f(s['io_gain']), _f(s['cpu']),
               'yes' if s['ok'] else 'NO'))
    t = prettytable.PrettyTable(['VM', 'mean', 'min window', 'ok'])
    t.align = 'r'
    t.align['VM'] = 'l'
    for vm, v in sorted(s['vms'].items()):
        t.add_row([vm, _f(v['ratio']), _f(v['min_window']),
                   '-' if v['ok'] is None else 'ok' if v['ok'] else
                   'BELOW'])
    return head + '\n' + t.get_string()


def setup_for(cfg):
    """The static configuration as a ``run_conf`` setup callable."""
    def setup(sim):
        placements = {}
        if cfg['split']:
            for v in sim.vcpus:
                role = (model.Role.CPU if sim.scenario.vm_kind(v.vm) == 'cpu'
                        else model.Role.IO)
                placements[v.ref] = rass.placement(
                    sim.topology.core(v.home.core_id), role)
        if cfg['family'] == 'haltpoll':
            sim.hp_max = cfg['haltpoll_max_us'] * 1000
        sim.apply(model.Decision(
            timeout_ns=0, placements=placements, split=cfg['split'],
            borrow=True, timeouts={vm: us * 1000
                                   for vm, us in cfg['retain'].items()},
            weights=dict(cfg['weights'])))
    return setup


def score(summary):
    """Feasible first, then the I/O gain; else the worst VM's margin."""
    if summary['ok']:
        return (1, summary['io_gain'] or 1.0)
    return (0, summary['worst'][1] if summary['worst'] else 0.0)


def product_gain(res):
    """The product's I/O gain on the oracle's measure (``tenants``)."""
    return tenants.summary(tenants.judge(res['vsmtio'],
                                         res['vanilla']))['io_gain']


def oracle_share(product, oracle):
    """(product - 1) / (oracle - 1); None where the oracle gains nothing."""
    if product is None or oracle is None or oracle <= 1.0 + stats.NOISE:
        return None
    return (product - 1.0) / (oracle - 1.0)


def load_oracle(path):
    """The oracle's cached result, or None where there is none."""
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


class Evaluator(object):
    """Runs and judges configurations of one scenario, each once."""

    def __init__(self, name, measure_s=None, run=None):
        self.name = name
        self.measure_s = measure_s
        self.run = run or self._run
        self.cache = {}
        self.base = self.run(name, 'vanilla', None, measure_s)

    @staticmethod
    def _run(name, kernel, setup, measure_s):
        return runner.run_conf(runner.make_conf(name, kernel), steady=True,
                               setup=setup, measure_s=measure_s)

    def __call__(self, cfg):
        k = key(cfg)
        if k not in self.cache:
            r = self.run(self.name, cfg['family'], setup_for(cfg),
                         self.measure_s)
            verdicts = tenants.judge(r, self.base)
            s = tenants.summary(verdicts)
            s['cpu_class'] = (r['cpu_throughput']
                              / self.base['cpu_throughput']
                              if self.base['cpu_throughput'] else None)
            s['vms'] = {vm: {f: v[f] for f in ('ratio', 'min_window',
                                               'ok')}
                        for vm, v in verdicts.items()}
            self.cache[k] = (cfg, s)
        return self.cache[k][1]


def descend(evaluate, coords, start, max_passes=MAX_PASSES):
    """Coordinate descent from ``start``; the configuration it ends at."""
    cur = start
    cur_score = score(evaluate(cur))
    for _ in range(max_passes):
        changed = False
        for field, vm, values in coords:
            best, best_score = cur, cur_score
            for value in values:
                if value == get(cur, field, vm):
                    continue
                cand = put(cur, field, vm, value)
                s = score(evaluate(cand))
                if s > best_score:
                    best, best_score = cand, s
            if best is not cur:
                cur, cur_score, changed = best, best_score, True
        if not changed:
            break
    return cur


def prune(evaluate, coords, cfg):
    """``cfg`` with every setting that does not pay put back to its default.

    A computing VM that never idles retains or not to the same effect; the
    oracle says only what matters.
    """
    cur_score = score(evaluate(cfg))
    for field, vm, values in coords:
        default = values[0]
        if get(cfg, field, vm) == default:
            continue
        cand = put(cfg, field, vm, default)
        s = score(evaluate(cand))
        if s >= cur_score:
            cfg, cur_score = cand, s
    return cfg


def search(evaluate, vms, families=FAMILIES):
    """Every family from every start; the evaluator's cache holds all."""
    ends = []
    for family in families:
        coords = coordinates(family, vms)
        for start in starts(family, vms):
            ends.append(prune(evaluate, coords,
                              descend(evaluate, coords, start)))
    return ends


def ranked(evaluator, configs):
    """The feasible ones of ``configs``, best I/O gain first.

    Each outcome once: the first (the simplest, pruned) of configurations
    that measure alike.
    """
    rows, seen = [], set()
    for cfg in configs:
        s = evaluator(cfg)
        outcome = (round(s['io_gain'] or 1.0, 9), round(s['cpu'] or 1.0, 9))
        if s['ok'] and outcome not in seen:
            seen.add(outcome)
            rows.append((cfg, s))
    rows.sort(key=lambda cs: -(cs[1]['io_gain'] or 1.0))
    return rows


def oracle(name, search_s=SEARCH_S, confirm=CONFIRM, run=None,
           confirm_s=None):
    """The oracle of scenario ``name``: a dict for the JSON and the table.

    ``confirm_s``: the window the best are confirmed over (None: the
    steady window).
    """
    t0, c0 = time.time(), time.process_time()
    short = Evaluator(name, search_s, run)
    vms = short.base['vms']
    ends = search(short, vms)
    full = short if not search_s else Evaluator(name, confirm_s, run)
    best_cfg, best = all_off('vsmtio'), None
    # the descents' ends first (pruned), then whatever else was evaluated
    candidates = [cfg for cfg, s in ranked(
        short, ends + [c for c, _s in short.cache.values()])
        if (s['io_gain'] or 1.0) > 1.0][:confirm]
    for cfg in candidates:
        s = full(cfg)
        if s['ok'] and (best is None or (s['io_gain'] or 1.0)
                        > (best['io_gain'] or 1.0)):
            best_cfg, best = cfg, s
    if best is None:
        best = full(best_cfg)
    return {
        'scenario': name, 'config': best_cfg, 'label': label(best_cfg),
        'io_gain': best['io_gain'], 'cpu': best['cpu'],
        'cpu_class': best['cpu_class'], 'vms': best['vms'],
        'worst': best['worst'],
        'search': {'measure_s': search_s or full.base['measured_s'],
                   'evaluated': len(short.cache),
                   'confirmed': [{'label': label(c), 'config': c,
                                  'io_gain': full(c)['io_gain'],
                                  'ok': full(c)['ok']}
                                 for c in candidates]},
        'measured_s': full.base['measured_s'],
        'wall_s': time.time() - t0, 'cpu_s': time.process_time() - c0}


def _job(args):
    name, search_s, confirm, confirm_s = args
    return oracle(name, search_s, confirm, confirm_s=confirm_s)


def remeasure(found, run=None, measure_s=None):
    """``found`` (one scenario's oracle) measured again over today's window.

    For a steady window that changed after the search: the configurations
    it confirmed (or the one it chose), best first, against vanilla over
    the current :func:`~vsmtio_sim.runner.steady_window`; the first
    that keeps every floor there is the oracle, else all off. No search.
    """
    t0, c0 = time.time(), time.process_time()
    configs = [c['config'] for c in found['search'].get('confirmed', ())
               if 'config' in c] or [found['config']]
    configs = [c for c in configs if c != all_off(c['family'])]
    if not configs:
        # all off is vanilla itself, over any window
        return dict(found, remeasured={'skipped': 'all off'})
    configs.append(all_off('vsmtio'))
    full = Evaluator(found['scenario'], measure_s, run)
    for cfg in configs:
        s = full(cfg)
        if s['ok']:
            break
    out = dict(found, config=cfg, label=label(cfg), io_gain=s['io_gain'],
               cpu=s['cpu'], cpu_class=s['cpu_class'], vms=s['vms'],
               worst=s['worst'], measured_s=full.base['measured_s'])
    out['remeasured'] = {'wall_s': time.time() - t0,
                         'cpu_s': time.process_time() - c0,
                         'tried': [{'label': label(c), 'config': c,
                                    'io_gain': full(c)['io_gain'],
                                    'ok': full(c)['ok']}
                                   for c in configs if key(c) in full.cache]}
    return out


def _remeasure_job(args):
    found, measure_s = args
    return remeasure(found, measure_s=measure_s)


def spearman(a, b):
    """Spearman's rank correlation of two lists of scores (ties averaged)."""
    from scipy import stats as scipy_stats
    if len(a) < 2:
        return None
    # scores are tuples (feasible, figure): rank them as one number each
    flat = [[x[0] * 1e3 + x[1] for x in xs] for xs in (a, b)]
    return float(scipy_stats.spearmanr(*flat)[0])


def check(name, search_s, top=CHECK_TOP):
    """``name``'s best configurations by the short window, over both.

    The ``top`` of the search by the short window's score, and all off.
    """
    short = Evaluator(name, search_s)
    search(short, short.base['vms'])
    full = Evaluator(name, None)
    rows = sorted(short.cache.values(), key=lambda cs: score(cs[1]),
                  reverse=True)[:top]
    rows.append((all_off('vsmtio'), short(all_off('vsmtio'))))
    return [(label(cfg), score(s), score(full(cfg))) for cfg, s in rows]


def table(results):
    head = ['scenario', 'oracle (best static config)', 'I/O gain', 'CPU',
            'CPU class', 'worst VM / floor', 'evaluated', 'wall s']
    rows = []
    for r in results:
        w = r.get('worst')
        rows.append([r['scenario'], r['label'], _f(r['io_gain']),
                     _f(r.get('cpu')), _f(r.get('cpu_class')),
                     '%s %.3f' % tuple(w) if w else '-',
                     str(r['search'].get('evaluated') or '-'),
                     '%.0f' % r['wall_s']])
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    line = '  '.join('=' * w for w in widths)
    fmt = '  '.join('%%-%ds' % w for w in widths)
    return '\n'.join([line, fmt % tuple(head), line]
                     + [fmt % tuple(r) for r in rows] + [line])


def _f(v):
    return '-' if v is None else '%.3f' % v


def remeasure_all(path, names, processes, measure_s=None):
    """--remeasure: every scenario of ``path`` again; the file updated."""
    t0 = time.time()
    with open(path) as f:
        doc = json.load(f)
    found = [doc['results'][n] for n in names if n in doc['results']]
    with concurrent.futures.ProcessPoolExecutor(processes) as pool:
        for r in pool.map(_remeasure_job, [(f, measure_s) for f in found]):
            doc['results'][r['scenario']] = r
            sys.stderr.write('%s: %s, I/O gain %s over %.1f s\n'
                             % (r['scenario'], r['label'],
                                _f(r['io_gain']), r['measured_s']))
            with open(path, 'w') as f:
                json.dump(doc, f, indent=1, sort_keys=True)
    doc['remeasured_wall_s'] = time.time() - t0
    doc['cpu_s'] = sum(r['cpu_s'] + r.get('remeasured', {}).get('cpu_s', 0)
                       for r in doc['results'].values())
    with open(path, 'w') as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    print(table(list(doc['results'].values())))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--only', default='', help='scenario name prefix')
    p.add_argument('--json', default=DEFAULT_JSON,
                   help='write the results here (default: the cached '
                        'result vsmtio-bench sim reads)')
    p.add_argument('--processes', type=int, default=2)
    p.add_argument('--search-s', type=float, default=SEARCH_S,
                   help='simulated seconds measured per configuration '
                        'while searching (0: the whole steady window)')
    p.add_argument('--confirm', type=int, default=CONFIRM,
                   help='best configurations measured again over the '
                        'whole steady window')
    p.add_argument('--names', default='',
                   help='these scenarios, comma separated, in this order '
                        '(instead of --only)')
    p.add_argument('--confirm-s', type=float, default=0.0,
                   help='simulated seconds the best are confirmed (or '
                        'remeasured) over (0: the steady window)')
    p.add_argument('--remeasure', action='store_true',
                   help='measure the configurations of --json again over '
                        'the current steady window, searching nothing')
    p.add_argument('--config', action='append', default=[],
                   help='measure this static configuration (JSON, as a '
                        'result\'s config; repeatable) on the scenarios of '
                        '--names, searching and writing nothing')
    p.add_argument('--check', default='',
                   help='scenarios (comma separated) whose every searched '
                        'configuration is ranked over both windows')
    args = p.parse_args(argv)
    if args.search_s < 0 or args.processes < 1 or args.confirm < 1:
        p.error('--search-s must be >= 0, --processes and --confirm >= 1')
    if args.config:
        if not args.names:
            p.error('--config needs --names')
        try:
            configs = [parse_config(c) for c in args.config]
        except ValueError as e:
            p.error(str(e))
        names = args.names.split(',')
        for name in names:
            # (every name checked before any run)
            try:
                vms = [vm['name'] for vm in scenario_mod.load(name).vms]
                for cfg in configs:
                    check_vms(cfg, vms)
            except ValueError as e:
                p.error('%s: %s' % (name, e))
        for name in names:
            ev = Evaluator(name)
            for cfg in configs:
                print(static_table(name, cfg, ev(cfg)))
        return 0
    if args.check:
        for name in args.check.split(','):
            rows = check(name, args.search_s)
            rho = spearman([r[1] for r in rows], [r[2] for r in rows])
            top_short = max(rows, key=lambda r: r[1])
            top_full = max(rows, key=lambda r: r[2])
            print('%s: %d configurations, rank correlation %.3f between '
                  '%g s and the steady window; best over the short window: '
                  '%s (full %s); best over the full: %s (full %s)'
                  % (name, len(rows), rho, args.search_s, top_short[0],
                     top_short[2], top_full[0], top_full[2]))
        return 0
    names = [n for n in scenario_mod.shipped() if n.startswith(args.only)]
    if args.names:
        names = args.names.split(',')
    t0 = time.time()
    if args.remeasure:
        return remeasure_all(args.json, names, args.processes,
                             args.confirm_s or None)
    jobs = [(n, args.search_s, args.confirm, args.confirm_s or None)
            for n in names]
    doc = {'space': {k: list(v) for k, v in SPACE.items()},
           'families': list(FAMILIES), 'max_passes': MAX_PASSES,
           'search_s': args.search_s, 'confirm': args.confirm,
           'confirm_s': args.confirm_s or None,
           'floors': {'mean': tenants.FLOORS,
                      'window': tenants.WINDOW_FLOOR,
                      'window_s': tenants.WINDOW_S},
           'commit': documents.commit(), 'results': {}}
    if (args.only or args.names) and args.json and os.path.exists(
            args.json):
        # a partial run keeps the other scenarios' results of the same
        # search (the same space, windows and passes)
        with open(args.json) as f:
            old = json.load(f)
        same = ('space', 'families', 'max_passes', 'search_s', 'confirm',
                'floors', 'confirm_s')
        differ = [k for k in same if old.get(k) != doc[k]]
        if differ and old.get('results'):
            # writing this run over them would drop the other scenarios'
            # results without a word
            p.error('%s holds the results of a search with other %s: pass '
                    'another --json, or the same options'
                    % (args.json, ', '.join(differ)))
        doc['results'] = old.get('results', {})
    results = []
    with concurrent.futures.ProcessPoolExecutor(args.processes) as pool:
        for r in pool.map(_job, jobs):
            results.append(r)
            sys.stderr.write('%s: %s, I/O gain %s (%.0f s)\n'
                             % (r['scenario'], r['label'], _f(r['io_gain']),
                                r['wall_s']))
            doc['results'][r['scenario']] = r
            # written after every scenario: a run cut short keeps its
            # finished scenarios
            doc['wall_s'] = time.time() - t0
            doc['cpu_s'] = sum(x['cpu_s'] for x in doc['results'].values())
            if args.json:
                with open(args.json, 'w') as f:
                    json.dump(doc, f, indent=1, sort_keys=True)
    print('Search space: per VM retention off or at %s us; the split off or '
          'on with borrowing; CPU weight x%s for honest serving VMs; '
          'haltpoll: maximum off or %s us. Coordinate descent (at most %d '
          'passes) from %s starts per family, %g s windows while searching, '
          'the best %d confirmed over the steady window.'
          % (', '.join(map(str, SPACE['timeouts_us'])),
             ', x'.join(map(str, SPACE['weights'])),
             ', '.join(map(str, SPACE['haltpoll_max_us'])), MAX_PASSES,
             'several', args.search_s, args.confirm))
    print(table(results))
    return 0


if __name__ == '__main__':
    sys.exit(main())
