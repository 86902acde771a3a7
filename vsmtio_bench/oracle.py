#!/usr/bin/env python3
"""The oracle: per scenario and scheduler, the best static configuration.

What the product is measured against: the best any fixed setting of the
host's levers achieves on a scenario, chosen knowing the outcome, under the
floors the product must keep. Its space (:mod:`vsmtio_bench.space`) is a
superset of what the product can do, so what it finds is a lower bound on
the best static setting and, where the search finds the optimum, an upper
bound on the product: a product that beats it shows the search missed.

**Judged as the product is.** A configuration is applied once to the
simulated host with no agent and measured over the same window as vanilla
(common random numbers), each honest VM against its floors net of the
model's noise (:func:`vsmtio_sim.tenants.floors`, from an A/A run and a
null run over a window as long). The objective is the I/O gain (the
geometric mean of the honest serving VMs' ratios); a configuration that
breaks a floor is never chosen (while the search is among broken ones it
climbs the worst VM's margin).

**Searched jointly.** Coordinate descent over :func:`space.coordinates`:
each serving group's weight with its timeout (or the host's halt-polling
maximum) as one coordinate (every combination: the greedy one-at-a-time
search cannot build what pays only together), the computing groups'
timeouts and the split's grades; passes repeat until none changes (at
most ``MAX_PASSES``, the later ones trying a weight only near where it
is), from all off, and again from each grade of the split that keeps
every floor and from the best single move from all off (descent takes the
first coordinate's move first and may never leave its basin;
:func:`other_starts`);
then each VM of a group on its own, and each serving group's weight on a
finer grid near where it settled. It finds a local optimum, not a proven
global one. While searching, each
configuration is measured over ``SEARCH_S`` simulated seconds after the
warm-up, on the first seed.

**Confirmed over seeds.** Each family's configurations that gain and keep
every floor over the short window are measured, best first, over the
scenario's whole steady window on every seed (``vsmtio_sim.intervals.SEEDS``),
each seed with its own vanilla, A/A and null run, until ``CONFIRM`` of them
keep every honest VM's floors in every seed (and, for the margin oracle,
one keeps the margin). The oracle is the one with the highest mean I/O gain
among those that kept every floor; all off (vanilla itself, gain 1) when
none did. A configuration that breaks a floor in one seed is not run on
the seeds after it: it can be neither oracle, and its steady runs are most
of the bench's time. The best of a short window is often the one that goes
furthest, and so the first to break a floor over a longer one; the walk
goes on past it rather than jump to a fixed fraction of its gain, since a
setting just below it may hold (a wider search, more of whose best break,
must not end below a narrower one's). At most ``WALK`` of a family are
confirmed so; where every one of them broke a floor, the family backs off:
the most gaining configuration within each share of ``BACK_OFF`` of the
best's gain is confirmed in turn, until one holds.

**The margin oracle.** An online method can only keep what its probes can
show: a computing VM's loss smaller than the least its probes can detect
passes unseen either way. The margin oracle is the best confirmed
configuration whose every computing VM keeps its mean floor raised by that
least detectable effect (:func:`detectable`) in every seed: the best any
online method can prove, and the fair mark for the product's share.

Every run is cached by the model's version (:mod:`vsmtio_bench.cache`):
a run of other code is never reused. ``oracle.json`` records each result
as it is found, with that version, the floors' and the search's
(:mod:`vsmtio_bench.records`): a machine that has not the cache takes it
from there.

    vsmtio-bench oracle [--names N,N | --only PREFIX | --quick]
        [--schedulers cfs,eevdf] [--seeds 1,2,3,4,5] [--processes N]
    vsmtio-bench oracle --names NAME[,NAME] --config JSON [--scheduler S]
"""

import argparse
import concurrent.futures
import dataclasses
import functools
import math
import os
import statistics
import sys
import time

import prettytable

from vsmtio_bench import cache
from vsmtio_bench import documents
from vsmtio_bench import records
from vsmtio_bench import space
from vsmtio_sim import intervals
from vsmtio_sim import runner
from vsmtio_sim import scenario as scenario_mod
from vsmtio_sim import tenants

MAX_PASSES = 3
# where descent starts (:func:`search`), named in oracle.json's identity:
# an oracle searched from fewer starts is not this search's
STARTS = ('all off, each host-wide setting that keeps every floor, and '
          'the best single move from all off')
SEARCH_S = 2.0
CONFIRM = 2
# at most this many of a family confirmed best first by each of its two
# walks (the floors', the margin's); each that breaks a floor costs one
# steady run, most of them on the first seed
WALK = 12
# where a family's best all break a floor, the shares of the best's gain
# its milder configurations are confirmed at, in turn
BACK_OFF = (0.75, 0.5, 0.25)
SCHEDULERS = ('cfs', 'eevdf')
# a few scenarios for development: a Fig. 5 pair with a known static gain,
# one where the weight lever sits near a modelled cliff, one with none
QUICK = ('fig5_hbase_pagerank', 'fig5_dbt1_multipleclassify', 'io_only')
QUICK_SEEDS = (1, 2)
DEFAULT_JSON = documents.ORACLE_JSON
# one-sided 5% test with 80% power: z(0.95) + z(0.80)
Z_DETECT = 1.6449 + 0.8416
# the pairs an online probe may pool, in ``guard_probe_pairs``: more than
# the search gives any one candidate (four times), so the margin oracle
# is held to what a guard with a larger budget could prove
PROBE_PAIRS = 9
# the trimmed result a judgement reads (the cache stores only this)
_KEEP = ('measured_s', 'io_throughput', 'cpu_throughput', 'windows')
_VM_KEEP = ('kind', 'adversary', 'workload', 'requests_per_s',
            'instructions_per_s')


#: The override (of :func:`vsmtio_sim.runner.make_conf`) that plays a run
#: under another host scheduler, as ``vsmtio-sim --scheduler`` does.
SCHEDULER = ('vsmtio_sim', 'scheduler')


def scheduler_overrides(scheduler):
    """The overrides that run a scenario under ``scheduler``.

    None (no overrides) for None: the scenario's own ``scheduler.policy``.
    """
    return {SCHEDULER: scheduler} if scheduler else None


def run(name, kernel, cfg, measure_s, seed, scheduler, shift_s=0.0):
    """One trimmed steady run: ``cfg`` applied statically (None: none).

    ``shift_s`` starts the window that much later (the A/A run's other
    history, ``runner.AA_SHIFT_S``).
    """
    conf = runner.make_conf(name, kernel, seed,
                            overrides={SCHEDULER: scheduler})
    warmup = (runner.shifted_warmup(scenario_mod.load(name), shift_s)
              if shift_s else None)
    r = runner.run_conf(conf, steady=True, measure_s=measure_s,
                        warmup_s=warmup,
                        setup=space.setup_for(cfg) if cfg else None)
    return trim(r)


def trim(r):
    """What a judgement reads of a run (what the caches keep of it)."""
    out = {k: r[k] for k in _KEEP}
    out['vms'] = {vm: {k: v.get(k) for k in _VM_KEEP}
                  for vm, v in r['vms'].items()}
    return out


def cached_run(store):
    """:func:`run` through ``store`` (None: uncached)."""
    def go(name, kernel, cfg, measure_s, seed, scheduler, shift_s=0.0):
        if store is None:
            return run(name, kernel, cfg, measure_s, seed, scheduler, shift_s)
        k = {'scenario': name, 'scenario_file': _scenario_text(name),
             'kernel': kernel, 'config': cfg, 'measure_s': measure_s,
             'seed': seed, 'scheduler': scheduler, 'shift_s': shift_s}
        return store.memo(k, lambda: run(name, kernel, cfg, measure_s, seed,
                                         scheduler, shift_s))
    return go


def _scenario_text(name):
    # a scenario given by path is keyed by its content, not its name
    return scenario_mod.load(name).source if os.path.exists(name) else None


def detectable(aa, base, vm):
    """The least loss of ``vm``'s mean an online guard's probes can show.

    A probe compares periods with and without a change, over up to
    :data:`PROBE_PAIRS` times ``guard_probe_pairs`` pairs; a period's
    ratio varies by the A/A run's per-window spread times the square root
    of the periods in a window. At a one-sided 5% level with 80% power the
    least detectable shift is ``Z_DETECT * sd_period * sqrt(2 / pairs)``.
    (A pair is two adjacent periods, so its spread is the short-scale
    one of windows, not the long-run one of batch means the floors take:
    windows anti-correlate, which narrows a long mean but widens a
    difference of neighbours.)
    """
    metric = tenants.METRIC[tenants.role(base['vms'][vm])]
    wins = [a[vm][metric] / b[vm][metric] for a, b in zip(
        aa.get('windows', {}).get('vms', ()),
        base.get('windows', {}).get('vms', ())) if b[vm][metric]]
    if len(wins) < 2:
        return 0.0
    period_s, pairs = _probe_budget()
    per_window = max(1, round(aa['windows']['window_s'] / period_s))
    return (Z_DETECT * statistics.stdev(wins) * math.sqrt(per_window)
            * math.sqrt(2.0 / pairs))


@functools.lru_cache(maxsize=1)
def _probe_budget():
    """(agent period s, pairs a probe pools) at the default options."""
    o = runner.make_conf(scenario_mod.shipped()[0], 'vsmtio').vsmtio_agent
    return o.period, PROBE_PAIRS * o.guard_probe_pairs


class Evaluator(object):
    """Runs and judges configurations of one scenario, seed and scheduler.

    Each configuration once; vanilla, its A/A run and the null run (vanilla
    of the next seed, :func:`vsmtio_sim.tenants.null_seed`) over the same
    window are the reference every VM is judged against.
    """

    def __init__(self, name, scheduler='cfs', seed=1, measure_s=None,
                 runs=None):
        self.name, self.scheduler, self.seed = name, scheduler, seed
        self.measure_s = measure_s
        self.runs = runs or cached_run(None)
        self.cache = {}
        self.base = self.runs(name, 'vanilla', None, measure_s, seed,
                              scheduler)
        self.aa = self.runs(name, 'vanilla', None, measure_s, seed,
                            scheduler, runner.AA_SHIFT_S)
        self.null = self.runs(name, 'vanilla', None, measure_s,
                              tenants.null_seed(seed), scheduler)
        # on a host whose tenants cycle, a judged window is one cycle
        self.cycle_s = tenants.cycle_s(scenario_mod.load(name))
        self.margins = {vm: detectable(self.aa, self.base, vm)
                        for vm, v in self.base['vms'].items()
                        if tenants.role(v) == 'computing'
                        and not v['adversary']}

    def __call__(self, cfg):
        k = space.key(cfg)
        if k not in self.cache:
            if cfg == space.all_off(cfg['family']):
                r = self.base           # all off is vanilla itself
            else:
                r = self.runs(self.name, cfg['family'], cfg, self.measure_s,
                              self.seed, self.scheduler)
            verdicts = tenants.judge(r, self.base, self.aa, self.cycle_s,
                                     self.null)
            s = tenants.summary(verdicts)
            # (all off changes nothing, so it needs no probe to show it)
            s['margin_ok'] = s['ok'] and (r is self.base or all(
                verdicts[vm]['ratio'] >= verdicts[vm]['floor'] + d
                for vm, d in self.margins.items()))
            s['vms'] = {vm: {f: v[f] for f in ('ratio', 'min_window', 'floor',
                                               'window_floor', 'ok')}
                        for vm, v in verdicts.items()}
            self.cache[k] = (cfg, s)
        return self.cache[k][1]


def score(summary):
    """Feasible first, then the I/O gain; else the worst VM's margin."""
    if summary['ok']:
        return (1, summary['io_gain'] or 1.0)
    return (0, summary['worst'][1] if summary['worst'] else 0.0)


def descend(evaluate, coords, start, max_passes=MAX_PASSES):
    """Coordinate descent from ``start``; the configuration it ends at.

    The first pass tries each coordinate's every value; later ones a
    joint weight only near where it is (:func:`space.near`).
    """
    cur = start
    cur_score = score(evaluate(cur))
    for n in range(max_passes):
        changed = False
        for coord in coords:
            fields, vms, values = coord if not n else space.near(coord, cur)
            now = space.value(cur, fields, vms)
            best, best_score = cur, cur_score
            for v in values:
                if v == now:
                    continue
                cand = space.setting(cur, fields, vms, v)
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
    for fields, vms, values in coords:
        if space.value(cfg, fields, vms) == values[0]:
            continue
        cand = space.setting(cfg, fields, vms, values[0])
        s = score(evaluate(cand))
        if s >= cur_score:
            cfg, cur_score = cand, s
    return cfg


def other_starts(evaluate, coords, start):
    """Where else descent starts: each host-wide setting, and the best move.

    Descent moves along the coordinates in their order and may never leave
    the basin of its first move. A host-wide setting (the split's grade)
    changes which weights and timeouts keep the floors: from the serving
    VM's weight and timeout the split may break a floor that it keeps with
    a shorter timeout, where together they gain more than anything the
    weight's basin holds. So descent starts again from each value of a
    host-wide coordinate that keeps every floor from ``start``, and from
    the best of every coordinate's moves from ``start`` where that keeps
    every floor and gains (``[]`` where no move does).
    """
    moves = [(score(evaluate(c)), vms is None, c) for fields, vms, values
             in coords for c in (space.setting(start, fields, vms, v)
                                 for v in values
                                 if v != space.value(start, fields, vms))]
    out = [c for s, host, c in moves if host and s[0] == 1]
    # the best move, the first of equals; none that does not beat start
    top = max(moves, key=lambda m: m[0], default=None)
    if top and top[0][0] == 1 and top[0] > score(evaluate(start)) and (
            top[2] not in out):
        out.append(top[2])
    return out


def search(evaluate, vms, families=space.FAMILIES):
    """Every family from every start; the evaluator's cache holds all.

    The groups descend until they settle, then each VM on its own; from
    all off, and from each host-wide setting and the best single move
    from all off (:func:`other_starts`).
    """
    ends = []
    for family in families:
        groups = space.coordinates(family, vms)
        each = space.coordinates(family, vms, per_vm=True)
        starts = space.starts(family, vms)
        starts += [c for s in list(starts)
                   for c in other_starts(evaluate, groups, s)]
        for start in starts:
            cfg = descend(evaluate, groups, start)
            if each:
                cfg = descend(evaluate, each, cfg, max_passes=2)
            cfg = descend(evaluate, space.refine(cfg, vms), cfg,
                          max_passes=1)
            ends.append(prune(evaluate, groups + each, cfg))
    return ends


def walk(evaluator, ends, check, confirm_n=CONFIRM, most=None):
    """Confirm each family's best in turn until enough hold; back off else.

    ``check`` confirms a list of configurations and returns their rows
    (:func:`confirm`'s, all off among them); the rows of all it confirmed
    are returned. Per family,
    the configurations that gain and keep every floor over the short
    window (the descents' ends first among equals: pruned, the simplest
    of those that measure alike), best first, until ``confirm_n`` keep
    every floor in every seed; then the ones that also keep the margin,
    until one keeps it in every seed (the margin oracle's); at most
    ``most`` (default ``WALK``) confirmed by each walk. Where none kept
    every floor, the configurations :func:`milder` picks, in turn, until
    one does.
    """
    most = WALK if most is None else most
    confirmed = check([])
    tried = ends + [c for c, _s in evaluator.cache.values()]
    seen = set()
    for family in space.FAMILIES:
        rows = _gaining(evaluator, [c for c in tried
                                    if c['family'] == family], seen)
        for field, need, pool in (
                ('ok', confirm_n, rows),
                ('margin_ok', 1, [cs for cs in rows if cs[1]['margin_ok']])):
            done = 0
            for cfg, _s in pool:
                if done >= most or _held(confirmed, family, field) >= need:
                    break
                if space.key(cfg) not in confirmed:
                    confirmed.update(check([cfg]))
                    done += 1
        picked = [r['config'] for r in confirmed.values()]
        for cfg in milder(rows, picked):
            if _held(confirmed, family, 'ok'):
                break
            confirmed.update(check([cfg]))
    return confirmed


def milder(rows, picked, shares=BACK_OFF):
    """Of ``rows`` (best first), the most gaining within each share.

    Within ``share`` of the best's gain over 1, each configuration once
    and none of ``picked``.
    """
    if not rows:
        return []
    top, out = rows[0][1]['io_gain'], []
    for share in shares:
        cap = 1.0 + (top - 1.0) * share
        for cfg, s in rows:
            if s['io_gain'] <= cap and cfg not in picked + out:
                out.append(cfg)
                break
    return out


def _gaining(evaluator, configs, seen):
    """``[(cfg, summary)]`` that keep every floor and gain, best first.

    Each outcome once (``seen`` holds those of earlier calls).
    """
    rows = []
    for cfg in configs:
        s = evaluator(cfg)
        outcome = (round(s['io_gain'] or 1.0, 9), round(s['cpu'] or 1.0, 9))
        if s['ok'] and (s['io_gain'] or 1.0) > 1.0 and outcome not in seen:
            seen.add(outcome)
            rows.append((cfg, s))
    rows.sort(key=lambda cs: -(cs[1]['io_gain'] or 1.0))
    return rows


def confirm(name, scheduler, configs, seeds, runs):
    """Each of ``configs`` over the steady window, seed by seed.

    ``{key: {'config', 'per_seed': {seed: summary}, 'stopped'}}``, all off
    included (vanilla itself: gain 1 and every floor kept in every seed).
    A configuration that breaks a floor stops there (``stopped``: that
    seed): the oracles keep every floor in every seed.
    """
    out = {}
    live = [space.all_off('vsmtio')] + [
        c for c in configs if c != space.all_off(c['family'])]
    for seed in seeds:
        ev = Evaluator(name, scheduler, seed, None, runs)
        for cfg in list(live):
            row = out.setdefault(space.key(cfg),
                                 {'config': cfg, 'per_seed': {},
                                  'stopped': None})
            row['per_seed'][seed] = s = ev(cfg)
            row.setdefault('margins', {})[seed] = ev.margins
            if not s['ok']:
                row['stopped'] = seed
                live.remove(cfg)
    return out


def over_seeds(row):
    """A confirmed configuration's figures over its seeds."""
    per = row['per_seed']
    io = [s['io_gain'] or 1.0 for s in per.values()]
    cpu = [s['cpu'] for s in per.values()]
    m, lo, hi = intervals.interval(io)
    return {'config': row['config'], 'label': space.label(row['config']),
            'io_gain': m, 'io_interval': [lo, hi],
            'io_by_seed': {str(k): s['io_gain'] or 1.0
                           for k, s in sorted(per.items())},
            'cpu': intervals.interval(cpu)[0],
            'ok_seeds': sum(bool(s['ok']) for s in per.values()),
            'margin_ok_seeds': sum(bool(s['margin_ok'])
                                   for s in per.values()),
            'seeds': len(per), 'stopped_at': row.get('stopped'),
            'worst': min((s['worst'] for s in per.values() if s['worst']),
                         key=lambda w: w[1], default=None)}


def best(rows, field):
    """The highest mean I/O gain among rows whose ``field`` held always."""
    ok = [r for r in rows if r[field] == r['seeds']]
    return max(ok, key=lambda r: r['io_gain'])


def oracle(name, scheduler='cfs', seeds=intervals.SEEDS, search_s=SEARCH_S,
           confirm_n=CONFIRM, store=None, runs=None):
    """The oracle of scenario ``name`` under ``scheduler``: a dict."""
    t0, c0 = time.time(), time.process_time()
    runs = runs or cached_run(store)
    short = Evaluator(name, scheduler, seeds[0], search_s, runs)
    ends = search(short, short.base['vms'])
    confirmed = walk(short, ends, lambda cfgs: confirm(name, scheduler, cfgs,
                                                       seeds, runs),
                     confirm_n)
    rows = [over_seeds(r) for r in confirmed.values()]
    top, margin = best(rows, 'ok_seeds'), best(rows, 'margin_ok_seeds')
    return dict(top, scenario=name, scheduler=scheduler,
                why=why(top, rows, len(short.cache)),
                margin={k: margin[k] for k in ('config', 'label', 'io_gain',
                                               'io_interval', 'io_by_seed')},
                confirmed=sorted(rows, key=lambda r: -r['io_gain']),
                seed_list=list(seeds),
                search={'measure_s': search_s, 'seed': seeds[0],
                        'evaluated': len(short.cache),
                        'ends': [space.label(c) for c in ends]},
                wall_s=time.time() - t0, cpu_s=time.process_time() - c0)


def _held(confirmed, family, field):
    """How many gaining configurations of ``family`` held ``field``.

    In every seed confirmed: ``'ok'``, every floor (a row that broke one
    stopped there); ``'margin_ok'``, the floors raised by the margin too.
    """
    return sum(1 for r in confirmed.values()
               if r['stopped'] is None and r['config']['family'] == family
               and r['config'] != space.all_off(family)
               and all(s[field] for s in r['per_seed'].values()))


def why(top, rows, evaluated):
    """Why the oracle is what it is, in one line (all off above all)."""
    if top['config'] != space.all_off(top['config']['family']):
        return 'the best gain that kept every floor in every seed'
    gaining = [r for r in rows if r['io_gain'] > 1.0
               and r['config'] != top['config']]
    if not gaining:
        return ('nothing of %d configurations searched gained while keeping '
                'every floor over the search window' % evaluated)
    r = max(gaining, key=lambda r: r['io_gain'])
    vm, margin = r['worst'] or ('?', 0.0)
    return ('the best that gained, %s (I/O %.3f over %d seeds), broke a '
            'floor in seed %s; at its worst %s at %.3f of its floor'
            % (r['label'], r['io_gain'], r['seeds'], r['stopped_at'], vm,
               margin))


def _job(args):
    name, scheduler, seeds, search_s, confirm_n = args
    store = cache.Store('oracle')
    return oracle(name, scheduler, seeds, search_s, confirm_n, store)


def table(results):
    t = prettytable.PrettyTable(
        ['scenario', 'scheduler', 'oracle (best static)', 'I/O gain [95%]',
         'CPU', 'floors kept', 'margin oracle', 'margin I/O gain',
         'evaluated', 'wall s'])
    t.align = 'l'
    for r in results:
        t.add_row([r['scenario'], r['scheduler'], r['label'],
                   intervals.text(r['io_gain'], *r['io_interval']),
                   _f(r['cpu']), '%d/%d seeds' % (r['ok_seeds'], r['seeds']),
                   r['margin']['label'],
                   intervals.text(r['margin']['io_gain'],
                                  *r['margin']['io_interval']),
                   r['search']['evaluated'], '%.0f' % r['wall_s']])
    return t.get_string()


def static_table(name, cfg, s):
    """One configuration's judgement, each VM against its floors."""
    head = ('%s, %s: I/O gain %s, CPU %s, every floor kept: %s'
            % (name, space.label(cfg), _f(s['io_gain']), _f(s['cpu']),
               'yes' if s['ok'] else 'NO'))
    t = prettytable.PrettyTable(['VM', 'mean', 'floor', 'min window',
                                 'window floor', 'ok'])
    t.align = 'r'
    t.align['VM'] = 'l'
    for vm, v in sorted(s['vms'].items()):
        t.add_row([vm, _f(v['ratio']), _f(v['floor']), _f(v['min_window']),
                   _f(v['window_floor']),
                   '-' if v['ok'] is None else 'ok' if v['ok'] else
                   'BELOW'])
    return head + '\n' + t.get_string()


def _f(v):
    return '-' if v is None else '%.3f' % v


def seeds_arg(p, text, what='--seeds'):
    """The seeds of an option, or the parser's one-line error."""
    try:
        return intervals.parse_seeds(text)
    except ValueError as e:
        p.error('%s: %s' % (what, e))


def _names(p, args):
    shipped = scenario_mod.shipped()
    if args.quick:
        return list(QUICK)
    if args.names:
        names = args.names.split(',')
    else:
        names = [n for n in shipped if n.startswith(args.only)]
    for n in names:
        try:
            scenario_mod.load(n)
        except (scenario_mod.ScenarioError, ValueError) as e:
            p.error('%s: %s' % (n, e))
    if not names:
        p.error('no scenario matches')
    return names


def _static(p, args, names):
    """--config: each configuration on each scenario, judged, no file."""
    try:
        configs = [space.parse_config(c) for c in args.config]
        for name in names:
            vms = [vm['name'] for vm in scenario_mod.load(name).vms]
            for cfg in configs:
                space.check_vms(cfg, vms)
    except ValueError as e:
        p.error(str(e))
    for scheduler in args.schedulers:
        for name in names:
            for seed in args.seeds:
                ev = Evaluator(name, scheduler, seed,
                               runs=cached_run(cache.Store('oracle')))
                for cfg in configs:
                    print('%s seed %d: ' % (scheduler, seed)
                          + static_table(name, cfg, ev(cfg)))
    return 0


def identity():
    """What ``oracle.json``'s results were made under: code and search.

    A result found on another model, judged by other floors, or by
    another search (its space, passes, window, confirmations, walk or
    back-off) is not this oracle's.
    """
    return {'model_version': cache.version(),
            'judge_version': cache.version(cache.JUDGE),
            'commit': documents.commit(),
            'space': {k: list(v) for k, v in space.SPACE.items()},
            'max_passes': MAX_PASSES, 'search_s': SEARCH_S,
            'starts': STARTS,
            'confirm': CONFIRM, 'walk': WALK, 'back_off': list(BACK_OFF)}


def recorded(path=None):
    """The oracles recorded for this code, by scheduler and name.

    A search made on the same code, whoever made it and on what machine;
    ``path`` defaults to ``DEFAULT_JSON``.
    """
    return records.read(path or DEFAULT_JSON, identity())


def record(result, path=None, made_by=None):
    """Keep ``result`` (an :func:`oracle`) in the record at ``path``.

    ``made_by``: the :func:`identity` of the code that found it, taken
    when the bench started (default: now); the files may have changed
    since, the code that ran has not.
    """
    records.put(path or DEFAULT_JSON, made_by or identity(),
                (result['scheduler'], result['scenario']), result)


def same_hosts(names, among=None):
    """``{name: other}``: each of ``names`` whose host is another's.

    Two scenarios may differ only in their names and the paper's figures
    they are read against (Fig. 8's 48:48 mix is Fig. 5's pair): the
    simulated host, and so every run, is the same. Of such scenarios,
    among ``names`` and ``among`` (default: every shipped one), the first
    by name is measured and a page names the others as the same host, so
    naming a twin alone measures, and records, nothing twice.
    """
    among = scenario_mod.shipped() if among is None else among
    hosts, out = [], {}
    for n in sorted(set(names) | set(among)):
        sc = scenario_mod.load(n)
        h = dataclasses.replace(sc, name='', title='', source='', paper={})
        twin = next((m for m, hm in hosts if hm == h), None)
        if twin is None:
            hosts.append((n, h))
        elif n in names:
            out[n] = twin
    return out


def measured(names, twins):
    """``names`` with each twin replaced by the scenario measured for it."""
    return list(dict.fromkeys(twins.get(n, n) for n in names))


def selection_args(p):
    """The options the oracle and the yardstick choose their runs by."""
    p.add_argument('--only', default='', help='scenario name prefix')
    p.add_argument('--names', default='',
                   help='these scenarios, comma separated')
    p.add_argument('--quick', action='store_true',
                   help='%s on seeds %s (development)'
                        % (', '.join(QUICK), ','.join(map(str, QUICK_SEEDS))))
    p.add_argument('--schedulers', default=','.join(SCHEDULERS),
                   help='comma-separated, of %s' % ', '.join(SCHEDULERS))
    p.add_argument('--seeds', default=None,
                   help='comma-separated seeds (default %s)'
                        % ','.join(map(str, intervals.SEEDS)))
    p.add_argument('--processes', type=int, default=2)


def selection(p, args):
    """The scenario names; ``args``' schedulers and seeds checked.

    Every choice is checked before any run: a typo costs no bench time.
    """
    if args.processes < 1:
        p.error('--processes must be >= 1')
    args.schedulers = args.schedulers.split(',')
    if not set(args.schedulers) <= set(SCHEDULERS):
        p.error('--schedulers: each one of %s' % ', '.join(SCHEDULERS))
    args.seeds = (seeds_arg(p, args.seeds) if args.seeds else
                  QUICK_SEEDS if args.quick else intervals.SEEDS)
    return _names(p, args)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    selection_args(p)
    p.add_argument('--json', default=DEFAULT_JSON,
                   help='write the results here (not with --quick)')
    p.add_argument('--config', action='append', default=[],
                   help='measure this static configuration (JSON, as a '
                        'result\'s config; repeatable) on the scenarios '
                        'named, searching and writing nothing')
    args = p.parse_args(argv)
    names = selection(p, args)
    if args.config:
        return _static(p, args, names)
    twins = same_hosts(names)
    for n, m in sorted(twins.items()):
        sys.stderr.write('%s: the same host as %s, searched once\n' % (n, m))
    names = measured(names, twins)
    t0, made_by = time.time(), identity()
    jobs = [(n, s, args.seeds, SEARCH_S, CONFIRM)
            for s in args.schedulers for n in names]
    results = []
    with concurrent.futures.ProcessPoolExecutor(args.processes) as pool:
        for r in pool.map(_job, jobs):
            results.append(r)
            sys.stderr.write('%s/%s: %s, I/O gain %.3f (%.0f s)\n'
                             % (r['scenario'], r['scheduler'], r['label'],
                                r['io_gain'], r['wall_s']))
            if args.json and not args.quick:
                # after every scenario: a run cut short keeps what it found
                record(r, args.json, made_by)
    print(table(results))
    print('wall %.0f s on %d processes' % (time.time() - t0, args.processes))
    return 0


if __name__ == '__main__':
    sys.exit(main())
