#!/usr/bin/env python3
"""The yardstick: the product against the oracle, per tenant, over seeds.

What a change to the guard or the model is judged on. For every scenario,
scheduler and seed it runs the product (the real agent on the simulated
host, at steady state), judges each honest VM against its floors net of
the model's noise (:func:`vsmtio_sim.tenants.floors`: the seed's vanilla,
A/A and null runs over the same window), and sets the product's I/O gain beside
the oracle's and the margin oracle's (:mod:`vsmtio_bench.oracle`, searched
over the same seeds: the one ``oracle.json`` records for this model when
it covers the seeds, else searched, its runs cached so that a search
already made replays in seconds).

**One headline.** The product's share of the oracle's I/O gain,
gain-weighted over the scenarios where the oracle gains 5% or more
(``GAIN_MIN``): per seed, the sum of the product's gains over the sum of
the oracle's, with a 95% interval over the seeds. A scenario whose
oracle gains less is reported apart as *no-harm only*: no probe budget
can show a gain of 1%, and an unweighted mean would be ruled by them.
Beside it, every honest VM of every seed that fell below its floor,
and how many fall below when vanilla itself runs again after yet another
history (``NULL_SHIFT_S``): the floors' own false alarms, which one A/A
run cannot make rare, so a count of the product's is read against them.

Two guards (or two settings, ``--set``) are compared by
``--against FILE``: the paired difference of the headline and of each
scenario's gain over the seeds both ran. ``--no-oracle`` judges the
product per VM only, for no-harm on scenarios whose oracle is not yet
searched.

Every run is cached by the version of the code that made it
(:mod:`vsmtio_bench.cache`), and every oracle and judged product run is
recorded in the repository (``oracle.json``, ``yardstick.json``:
:mod:`vsmtio_bench.records`), so the full bench, more compute than one
machine's session, is measured in parts on any machines and its page
made from the records (``--recorded``, which runs nothing and names what
is not yet measured). ``--quick`` runs a few scenarios on two seeds for
development: twelve runs of the product under both schedulers once the
oracle's are cached (they depend on the model only, so a change to the
guard reruns none of them).

    vsmtio-bench yardstick [--quick | --names N,N | --only PREFIX]
        [--schedulers cfs,eevdf] [--seeds 1,2,3,4,5] [--set G.O=V]
        [--no-oracle | --recorded] [--json FILE] [--against FILE]
        [--out RST]
"""

import argparse
import concurrent.futures
import json
import os
import sys
import time

from oslo_config import cfg

from vsmtio_bench import cache
from vsmtio_bench import document as bench_document
from vsmtio_bench import documents
from vsmtio_bench import oracle as bench_oracle
from vsmtio_bench import records
from vsmtio_bench import space
from vsmtio_sim import intervals
from vsmtio_sim import runner
from vsmtio_sim import scenario as scenario_mod
from vsmtio_sim import tenants

GAIN_MIN = 1.05
DOCUMENT = os.path.join(documents.BENCHMARKS, 'yardstick.rst')
RUNS_JSON = documents.YARDSTICK_JSON
_AGENT_KEEP = ('mechanisms', 'weights', 'timeouts_us', 'settled_at_s')
# vanilla again, later than the A/A run: a run that changes nothing
NULL_SHIFT_S = 2 * runner.AA_SHIFT_S


def product_run(name, seed, scheduler, overrides):
    """The product's steady run, trimmed to what the yardstick reads."""
    ov = dict(overrides)
    ov[bench_oracle.SCHEDULER] = scheduler
    r = runner.run_conf(runner.make_conf(name, 'vsmtio', seed, overrides=ov),
                        steady=True)
    out = bench_oracle.trim(r)
    out['agent'] = {k: r['agent'].get(k) for k in _AGENT_KEEP}
    return out


def one(job):
    """One scenario, scheduler and seed: the product judged per VM.

    And vanilla run again (``NULL_SHIFT_S``), judged the same way.
    """
    name, scheduler, seed, overrides = job
    runs = bench_oracle.cached_run(cache.Store('oracle'))
    ev = bench_oracle.Evaluator(name, scheduler, seed, None, runs)
    again = tenants.judge(runs(name, 'vanilla', None, None, seed, scheduler,
                               NULL_SHIFT_S), ev.base, ev.aa, ev.cycle_s,
                          ev.null)
    store = cache.Store('product', cache.PRODUCT)
    key = {'scenario': name, 'seed': seed, 'scheduler': scheduler,
           'overrides': sorted('%s.%s=%s' % (g, o, v)
                               for (g, o), v in overrides)}
    prod = store.memo(key, lambda: product_run(name, seed, scheduler,
                                               overrides))
    judged = tenants.judge(prod, ev.base, ev.aa, ev.cycle_s, ev.null)
    s = tenants.summary(judged)
    return {'scenario': name, 'scheduler': scheduler, 'seed': seed,
            'io': s['io_gain'] or 1.0, 'cpu': s['cpu'], 'ok': s['ok'],
            'below': _below_floors(judged), 'null_below': _below_floors(again),
            'kept': prod['agent']}


def _below_floors(judged):
    return sorted((vm, v['ratio'], v['floor'], v['min_window'],
                   v['window_floor'])
                  for vm, v in judged.items() if v['ok'] is False)


def by_scenario(runs, oracles):
    """``{(scheduler, scenario): row}``: the product and the oracles."""
    rows = {}
    for r in runs:
        k = (r['scheduler'], r['scenario'])
        o = oracles.get(r['scheduler'], {}).get(r['scenario'])
        row = rows.setdefault(k, {'product': {}, 'oracle': {}, 'margin': {},
                                  'below': [], 'null_below': [],
                                  'oracle_label': None, 'kept': {}})
        row['product'][r['seed']] = r['io']
        for field in ('below', 'null_below'):
            row[field] += [(r['seed'],) + tuple(b)
                           for b in r.get(field, ())]
        row['kept'][r['seed']] = r['kept']
        if o is not None:
            row['oracle_label'] = o['label']
            row['why'] = o.get('why')
            row['margin_label'] = o['margin']['label']
            for field, src in (('oracle', o), ('margin', o['margin'])):
                got = src['io_by_seed'].get(str(r['seed']))
                if got is not None:
                    row[field][r['seed']] = got
    return rows


def headline(rows, field='oracle', gain_min=GAIN_MIN):
    """The gain-weighted share over scenarios where ``field`` gains enough.

    Returns ``(mean, low, high, scenarios)``: per seed, the product's
    summed gains over the oracle's on the scenarios whose oracle's mean
    gain is at least ``gain_min``; the interval is over seeds.
    """
    shares, chosen = seed_shares(rows, field, gain_min)
    return intervals.interval(shares.values()) + (chosen,)


def seed_shares(rows, field='oracle', gain_min=GAIN_MIN, chosen=None):
    """``({seed: share}, scenarios)``: the headline's share per seed.

    ``chosen`` (default: where ``field``'s mean gain reaches
    ``gain_min``) fixes the scenarios, so two guards are compared on the
    same ones.
    """
    if chosen is None:
        chosen = sorted(
            k for k, row in rows.items()
            if (intervals.interval(row[field].values())[0] or 0.0)
            >= gain_min)
    seeds = sorted({s for k in chosen if k in rows
                    for s in rows[k]['product']})
    shares = {s: _share([(rows[k]['product'].get(s), rows[k][field].get(s))
                         for k in chosen if k in rows]) for s in seeds}
    return {s: v for s, v in shares.items() if v is not None}, chosen


def settled_at(row):
    """When the guard settled in each seed: its search's end, in seconds."""
    return [k.get('settled_at_s') for _s, k in sorted(row['kept'].items())
            if k.get('settled_at_s') is not None]


def _share(pairs):
    """The summed gains of ``(product, oracle)`` pairs over the oracle's."""
    pairs = [(p, o) for p, o in pairs if p is not None and o is not None]
    total = sum(o - 1.0 for _p, o in pairs)
    return sum(p - 1.0 for p, _o in pairs) / total if total > 0 else None


def table_rows(rows):
    out = []
    for (scheduler, name), row in sorted(rows.items()):
        o = intervals.interval(row['oracle'].values())
        p = intervals.interval(row['product'].values())
        d = intervals.paired(row['product'], row['oracle'])
        out.append([
            name, scheduler, row['oracle_label'] or 'not searched',
            intervals.text(*o),
            intervals.text(*intervals.interval(row['margin'].values())),
            intervals.text(*p), intervals.text(*d[:3]), intervals.text(
                *intervals.interval(settled_at(row)), fmt='%.0f'),
            'gain' if o[0] is not None and o[0] >= GAIN_MIN
            else 'no-harm only'] + [
                '%d / %d' % (len({b[0] for b in row[field]}),
                             len(row['product']))
                for field in ('below', 'null_below')])
    return out


HEADER = ['scenario', 'scheduler', 'oracle (best static)',
          'oracle I/O', 'margin oracle I/O', 'product I/O',
          'product - oracle', 'search ends, s', 'counted as',
          'seeds with a VM below',
          'vanilla again: seeds below']


def below_lines(rows):
    """One line per honest VM of a seed below a floor net of noise."""
    out = []
    for (scheduler, name), row in sorted(rows.items()):
        for seed, vm, mean, floor, low, wfloor in row['below']:
            what = ('mean ' + _below(mean, floor) if mean < floor
                    else 'window ' + _below(low, wfloor))
            out.append('%s (%s) seed %d: %s %s'
                       % (name, scheduler, seed, vm, what))
    return out


def above_oracle(rows):
    """Where the product beats its oracle beyond the noise, one line each.

    The oracle is the best *static* configuration the search found, so
    it bounds the product only where no configuration it missed, and no
    change of configuration over time, does better. A row whose paired
    difference lies above zero says one of the two happened; its share
    of the gain passes 100% and is named rather than let pass.
    """
    out = []
    for (scheduler, name), row in sorted(rows.items()):
        d = intervals.paired(row['product'], row['oracle'])
        if d[1] is not None and d[1] > 0:
            out.append('%s (%s): product - oracle %s over %d seeds'
                       % (name, scheduler, intervals.text(*d[:3]), d[3]))
    return out


def _below(value, floor):
    """``value < floor`` in as many digits as it takes to show it."""
    for digits in (4, 6, 9):
        a, b = '%.*f' % (digits, value), '%.*f' % (digits, floor)
        if a != b:
            break
    return '%s < %s' % (a, b)


def summary_lines(rows):
    """The headline and no-harm lines, per scheduler where there are two.

    The schedulers are different hosts: a share pooled over both would
    let one's gain hide the other's loss.
    """
    parts = by_scheduler(rows)
    out = []
    for scheduler, mine in parts:
        for line in _summary(mine):
            out.append('Under %s: %s' % (scheduler, line) if len(parts) > 1
                       else line[0].upper() + line[1:])
    return out


def by_scheduler(rows):
    """``[(scheduler, rows)]``: ``by_scenario``'s rows split by scheduler."""
    return [(s, {k: r for k, r in rows.items() if k[0] == s})
            for s in sorted({k[0] for k in rows})]


def _summary(rows):
    out = []
    for field, what in (('oracle', 'oracle'),
                        ('margin', 'margin oracle')):
        m, lo, hi, chosen = headline(rows, field)
        out.append('share of the %s\'s I/O gain, gain-weighted over the %d '
                   'scenarios where it gains %d%% or more: %s'
                   % (what, len(chosen), round(100 * (GAIN_MIN - 1)),
                      '-' if m is None else intervals.text(
                          100 * m, *(None if x is None else 100 * x
                                     for x in (lo, hi)), fmt='%.0f%%')))
    below = sum(len(r['below']) for r in rows.values())
    null = sum(len(r['null_below']) for r in rows.values())
    runs = sum(len(r['product']) for r in rows.values())
    out.append('honest VMs below a floor net of noise: %d in %d runs '
               '(vanilla run again: %d in as many)' % (below, runs, null))
    return out


def compare(rows, other):
    """Paired differences of each scenario's gain and of the headline."""
    lines = []
    for k in sorted(set(rows) & set(other)):
        d = intervals.paired(rows[k]['product'], other[k]['product'])
        lines.append('%s/%s: product I/O gain this - other %s over %d '
                     'seeds' % (k[1], k[0], intervals.text(*d[:3]), d[3]))
    for scheduler, here in by_scheduler(rows):
        mine, chosen = seed_shares(here)
        theirs, _c = seed_shares(other, chosen=chosen)
        d = intervals.paired(mine, theirs)
        if d[3]:
            lines.append('%s: headline share of the oracle\'s gain, this - '
                         'other, over the same %d scenarios: %s over %d '
                         'seeds' % (scheduler, len(chosen), intervals.text(
                             *(None if x is None else 100 * x
                               for x in d[:3]), fmt='%.0f%%'), d[3]))
    return lines


def pending(names, schedulers, seeds, oracles, runs, no_oracle=False):
    """``{(scheduler, name): what it lacks}``: not yet measured in full.

    Its oracle not yet searched, or the product not yet run on every seed:
    a page made from the records leaves it out of the headline and the
    table, and says what it lacks rather than leave it out unnamed.
    """
    ran = {}
    for r in runs:
        ran.setdefault((r['scheduler'], r['scenario']), set()).add(r['seed'])
    out = {}
    for s in schedulers:
        for n in names:
            lack = []
            if not no_oracle and n not in oracles.get(s, {}):
                lack.append('oracle not searched')
            got = len(ran.get((s, n), set()) & set(seeds))
            if got < len(seeds):
                lack.append('product run on %d of %d seeds'
                            % (got, len(seeds)))
            if lack:
                out[(s, n)] = ', '.join(lack)
    return out


def _minutes(seconds):
    if seconds < 30:
        return 'under a minute'
    m = max(1, int(round(seconds / 60.0)))
    return '%d minute%s' % (m, '' if m == 1 else 's')


def document(rows, args, wall_s, lacking=None, twins=None):
    """The reStructuredText page of a run.

    ``lacking``: :func:`pending`; ``twins``: the scenarios measured as
    another, :func:`vsmtio_bench.oracle.same_hosts`.
    """
    space_doc = space.SPACE
    head = DOC_HEAD.format(
        command=documents.command('yardstick', args.argv, (
            '--out', '--json', '--processes', '--against')),
        commit=documents.commit(), version=cache.version(cache.PRODUCT),
        seeds=', '.join(map(str, args.seeds)), gain=GAIN_MIN,
        wall=_minutes(wall_s), alpha=tenants.ALPHA,
        batch_s=tenants.BATCH_WINDOWS * tenants.WINDOW_S,
        window=tenants.WINDOW_FLOOR, window_s=tenants.WINDOW_S,
        serving=tenants.FLOORS['serving'],
        computing=tenants.FLOORS['computing'],
        null_shift=NULL_SHIFT_S,
        weights='%g to %g in steps of %g' % (
            space_doc['weights'][0], space_doc['weights'][-1],
            space_doc['weights'][1] - space_doc['weights'][0]),
        timeouts=', '.join(map(str, space_doc['timeouts_us'])),
        splits=', '.join('%g' % s for s in space_doc['splits'][1:]),
        passes=bench_oracle.MAX_PASSES, search_s=bench_oracle.SEARCH_S,
        confirm=bench_oracle.CONFIRM, walk=bench_oracle.WALK,
        back_off=', '.join('%g%%' % (100 * f) for f in bench_oracle.BACK_OFF))
    body = ['\n'.join('- ' + line for line in summary_lines(rows)), '',
            bench_document.rst_table(HEADER, table_rows(rows)), '']
    if twins:
        body += ['Measured once under the first name, the same simulated '
                 'host (they differ only in their names and the paper\'s '
                 'figures they are read against):', ''] + [
                     '- %s: as %s.' % (n, m)
                     for n, m in sorted(twins.items())] + ['']
    if lacking:
        body += ['Not yet measured in full, so outside the headline, the '
                 'table and the counts above (%d):' % len(lacking), ''] + [
                     '- %s (%s): %s.' % (n, s, what)
                     for (s, n), what in sorted(lacking.items())] + ['']
    below = below_lines(rows)
    if below:
        body += ['Every honest VM of a seed below a floor net of noise:',
                 ''] + ['- ' + line for line in below] + ['']
    above = above_oracle(rows)
    if above:
        body += ['Where the product beats its oracle beyond the noise: the '
                 'oracle is no upper bound there, since the product either '
                 'changes its configuration over time where no static one '
                 'does as well, or found one the search missed:', ''] + [
                     '- ' + line + '.' for line in above] + ['']
    off = ['- %s (%s): %s.' % (name, scheduler, row['why'])
           for (scheduler, name), row in sorted(rows.items())
           if row.get('why') and row['oracle_label'].endswith('all off')]
    if off:
        body += ['Where the oracle is all off, why:', ''] + off + ['']
    return head + '\n'.join(body)


DOC_HEAD = """\
=========================================
The yardstick: the product and the oracle
=========================================

Generated by ``{command}`` at commit ``{commit}`` (model and agent version
``{version}``), over seeds {seeds}. Every oracle and product run is
recorded under that version (``oracle.json``, ``yardstick.json``) and
taken from there, not run again:
this invocation took {wall} of wall time.

What it measures
================

Each honest VM against its floors, net of the model's noise
(``vsmtio_sim/tenants.py``): a serving VM keeps {serving} of its vanilla
requests, a computing VM {computing} of its instructions, as a mean over
the steady window, and {window} in every {window_s} s window. Two runs of
the same host differ even with common random numbers (their windows start
after different histories), so each floor is lowered by the noise
vanilla against itself shows for that VM in the same seed (the A/A run):
the mean floor by Student's t at one-sided {alpha:g} times the standard
error of the A/A run's mean (batch means of {batch_s:g} s; consecutive
windows are not independent), the window floor, where lower than
{window}, to where the lowest of the A/A run's windows would fall with
probability {alpha:g} given one window's spread (Student's t on the
windows' degrees of freedom, since the spread is itself estimated), one
window's spread being the wider of the A/A run's and the null run's
(vanilla of the next seed). Common random numbers keep a run that serves
as vanilla does in step with it window by window, so the A/A run's
windows are narrow; a run that serves more or less falls out of step,
each of its windows holds other requests than vanilla's, and its windows
spread as two independent runs' do, as the null run's. The mean keeps
the A/A run's band: over the whole window the same requests were drawn.
On a
host whose tenants change phase in a cycle a window, and a batch, is
whole cycles: a short window at a phase change differs between two
histories tens of times more than one inside a phase, so no one spread
describes them, and vanilla run again fell below the half-second floors
as often as the product did. A smaller difference
cannot be told from noise by any test. Vanilla run again after yet
another history ({null_shift:g} s later) is judged the same way: how
often it falls below (*vanilla again*) is the floors' own false-alarm
rate, which the product's count is read against. It stays in step with
vanilla, as the A/A run does, so it tries the mean floors and the
window floors of a run in step; the null run sets the window floors of
runs out of step.

The oracle (``vsmtio_bench/oracle.py``) is the best static configuration
in hindsight, searched on the first seed over {search_s} s windows by
coordinate descent from all off, and again from each grade of the split
that keeps every floor and from the best single move from all off, since
descent may never leave the basin of its first move (at most {passes}
passes; the first tries
every value of each coordinate, the later ones a weight within two steps
of where it is; then each VM of a group on its own, then each serving
group's weight in steps of 0.05 near it), each serving
group's weight and timeout jointly: per-VM CPU weight {weights},
per-VM retention timeout off or {timeouts} us, the split on a share of
{splits} of the cores, or, as a stock host, KVM's halt polling with a
maximum of {timeouts} us and the same weights. Each family's
configurations that gain and keep every floor over the search window are
measured over the whole steady window seed by seed, best first (one that
breaks a floor is not run on the seeds after it), until {confirm} of them
keep every floor in every seed, at most {walk}; where all of those break,
the family backs off to the search's most gaining configuration within
{back_off} of the best's gain, in turn, until one holds. The oracle is the
best that keeps every floor in every seed. The margin oracle
also keeps each computing VM's mean floor raised by the least loss the
guard's probes can detect (``oracle.detectable``): the best an online
method can prove.

The headline is the product's share of the oracle's I/O gain,
gain-weighted over the scenarios where the oracle gains {gain:g}x or
more (per seed, summed gains over summed gains; the interval is over
seeds). Scenarios where it gains less are counted as *no-harm only*.
Each interval is a 95% Student t interval over the seeds; "product -
oracle" is the paired difference over the seeds both ran. *Search ends*
is when the guard's search settled, in seconds of the simulated host from
its start: until then it alternates candidates with the bare host in ABBA
blocks; after it, the steady window, where one period in
``holdout_every`` (40) runs bare besides its settling period.

Results
=======

"""


def _overrides(p, items):
    out = []
    conf = runner.make_conf(scenario_mod.shipped()[0], 'vsmtio')
    for item in items:
        k, sep, v = item.partition('=')
        group, dot, name = k.strip().partition('.')
        if not sep or not dot or not group or not name:
            p.error('--set %r is not GROUP.OPTION=VALUE' % item)
        try:
            conf.set_override(name, v.strip(), group)
            getattr(getattr(conf, group), name)
        except (cfg.Error, ValueError, AttributeError) as e:
            p.error('--set %s: %s' % (item, e))
        out.append(((group, name), v.strip()))
    return tuple(out)


def identity():
    """What ``yardstick.json``'s runs were made under.

    The product's code (the agent and the model its runs and vanilla's
    read), the floors that judged them and the null run's shift.
    """
    return {'product_version': cache.version(cache.PRODUCT),
            'judge_version': cache.version(cache.JUDGE),
            'null_shift_s': NULL_SHIFT_S, 'commit': documents.commit()}


def recorded(path=None):
    """The product's runs recorded for this code (at ``RUNS_JSON``).

    ``{scheduler: {scenario: {seed: run}}}``, seeds as strings (JSON's).
    """
    return records.read(path or RUNS_JSON, identity())


def record(run, path=None, made_by=None):
    """Keep one product run (a :func:`one`) in the record.

    ``made_by``: the :func:`identity` taken when the bench started, as
    :func:`vsmtio_bench.oracle.record`'s.
    """
    records.put(path or RUNS_JSON, made_by or identity(),
                (run['scheduler'], run['scenario'], str(run['seed'])), run)


def measure(args, names, overrides):
    """``(oracles, runs)``: each scenario's oracle and the product's runs.

    The oracles ``oracle.json`` records for this model are taken, the rest
    searched (every run they need is cached, so a search already made
    replays in seconds); the product's runs ``yardstick.json`` records
    for this code are taken, the rest run. What is found is recorded
    as it comes (not for ``--quick`` or ``--set``: a development run, and
    another product than the shipped one), so a bench cut short, or a
    machine lost, keeps it. With ``--recorded`` nothing runs: the records
    alone.
    """
    keep = not (args.quick or overrides)
    # the code that runs is the code loaded now, whatever the files become
    made_by = bench_oracle.identity(), identity()
    oracles, runs = {}, []
    known = {} if args.no_oracle else bench_oracle.recorded()
    done = recorded() if not overrides else {}
    jobs = []
    for s in args.schedulers:
        for n in names:
            o = None if args.no_oracle else known.get(s, {}).get(n)
            if o is not None and set(args.seeds) <= set(o['seed_list']):
                oracles.setdefault(s, {})[n] = o
            elif not args.no_oracle:
                jobs.append((bench_oracle._job, (
                    n, s, args.seeds, bench_oracle.SEARCH_S,
                    bench_oracle.CONFIRM)))
            for seed in args.seeds:
                got = done.get(s, {}).get(n, {}).get(str(seed))
                if got is not None:
                    runs.append(got)
                else:
                    jobs.append((one, (n, s, seed, overrides)))
    if args.recorded:
        return oracles, runs
    # one queue, a scenario's search beside its product runs, each kept
    # as it completes: a bench cut short loses only the jobs under way
    with concurrent.futures.ProcessPoolExecutor(args.processes) as pool:
        kinds = {pool.submit(fn, job): fn for fn, job in jobs}
        for i, f in enumerate(concurrent.futures.as_completed(kinds)):
            r = f.result()
            if kinds[f] is not one:
                oracles.setdefault(r['scheduler'], {})[r['scenario']] = r
                if keep:
                    bench_oracle.record(r, made_by=made_by[0])
                what = 'oracle: %s, I/O %.3f' % (r['label'], r['io_gain'])
            else:
                runs.append(r)
                if keep:
                    record(r, made_by=made_by[1])
                what = 'seed %d: I/O %.3f' % (r['seed'], r['io'])
            sys.stderr.write('%s/%s %s (%d of %d)\n' % (
                r['scenario'], r['scheduler'], what, i + 1, len(jobs)))
    return oracles, runs


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_oracle.selection_args(p)
    p.add_argument('--set', action='append', default=[],
                   metavar='GROUP.OPTION=VALUE',
                   help='an option of the product\'s runs (repeatable)')
    p.add_argument('--no-oracle', action='store_true',
                   help='judge the product per VM only, searching no '
                        'oracle (no-harm on scenarios not yet searched)')
    p.add_argument('--recorded', action='store_true',
                   help='run nothing: the page from what oracle.json and '
                        'yardstick.json record for this code, each '
                        'scenario not yet measured named as such')
    p.add_argument('--json', help='also write every run here')
    p.add_argument('--against', help='a --json of another run: paired '
                                     'differences with it')
    p.add_argument('--out', default=None,
                   help='write the page here (default: %s for a full '
                        'run, nothing for a partial one)' % DOCUMENT)
    args = p.parse_args(argv)
    args.argv = argv
    names = bench_oracle.selection(p, args)
    twins = bench_oracle.same_hosts(names)
    names = bench_oracle.measured(names, twins)
    overrides = _overrides(p, args.set)
    if args.recorded and overrides:
        p.error('--recorded: the records are of the shipped product, '
                'not of one with --set')
    t0 = time.time()
    oracles, runs = measure(args, names, overrides)
    lacking = pending(names, args.schedulers, args.seeds, oracles, runs,
                      args.no_oracle)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(runs, f, indent=1, sort_keys=True)
    rows = by_scenario([r for r in runs if (r['scheduler'], r['scenario'])
                        not in lacking], oracles)
    text = document(rows, args, time.time() - t0, lacking, twins)
    out = args.out or (None if args.quick or args.names or args.only
                       or args.no_oracle else DOCUMENT)
    if out:
        with open(out, 'w') as f:
            f.write(text)
    print(text)
    if args.against:
        with open(args.against) as f:
            print('\n'.join(compare(rows, by_scenario(json.load(f),
                                                      oracles))))
    return 0


if __name__ == '__main__':
    sys.exit(main())
