"""The sensitivity study's page: what its recorded points conclude.

:mod:`vsmtio_bench.sensitivity` runs the study and records each point
judged per VM; this module reads those verdicts. Per row
(:func:`conclusions`): which of the benchmark's conclusions hold across
the input's range; over every row (:func:`survival`): which survive, per
scheduler; for the weight lever's cliff (:func:`cliff_text`): where the
floors end and where the computing VMs' share falls. Then the section of
the simulator's page (:func:`sensitivity_section`) or the study's own page
(:func:`page`), valid RST, naming what is not yet measured.
"""

import textwrap

from vsmtio_bench import cache
from vsmtio_bench import document
from vsmtio_bench import sensitivity as study
from vsmtio_bench import stats
from vsmtio_sim import intervals


def pm(mean_low_high, fmt='%.3f', scale=1.0):
    """``1.012±0.011``: a mean and half its interval; the mean alone."""
    m, lo, hi = mean_low_high
    if m is None:
        return '-'
    if lo is None:
        return fmt % (scale * m)
    return (fmt + '±' + fmt.replace('+', '')) % (
        scale * m, scale * (hi - lo) / 2.0)


def conclusions(points, shipped):
    """Which conclusions hold across one input's values.

    ``points`` is ``[(value label, over_seeds() of it)]`` in the row's
    order, ``shipped`` the label of the shipped value. Returns one cell
    per conclusion: whether it holds at every value, then its figure at
    each (the shipped one starred).
    """
    def figures(fmt):
        return ' '.join(fmt(j) + ('*' if v == shipped else '')
                        for v, j in points)

    fails = [v for v, j in points if not j['no_regression']]
    cells = {'no_regression': '%s: %s' % (
        'holds' if not fails else 'fails at ' + ', '.join(fails),
        figures(lambda j: pm(j['worst'])))}
    ref = dict(points).get(shipped) or points[0][1]
    for prefix, _kernel in study.DIRECTIONS:
        for key in (prefix + '_io', prefix + '_cpu'):
            flips = [v for v, j in points if j[key] != ref[key]]
            cells[key] = '%s: %s' % (
                'holds' if not flips else 'flips at ' + ', '.join(flips),
                figures(lambda j: j[key]))
    gains = [v for v, j in points if j['gains']]
    cells['gain'] = '%s: %s' % (
        'holds' if len(gains) == len(points) else
        'none anywhere' if not gains else
        'only at ' + ', '.join(gains),
        figures(lambda j: pm(j['gain'], '%+.1f', 100.0) + '%'))
    return cells


def _row_points(got, values):
    """``[(label, over_seeds())]`` of one row's results, in its order."""
    return [(v, study.judged(got['points'][v])) for v in
            (study.value_label(x) for x in values) if v in got['points']]


def sensitivity_rows(results, names):
    """The conclusions table: one row per scenario and input."""
    rows = []
    for name in names:
        for paths, values, _why in study.SWEEP:
            got = results.get(name, {}).get(paths)
            if not got or not got['points']:
                continue
            c = conclusions(_row_points(got, values), got['shipped'])
            rows.append([name, paths.replace(',', ', ')] +
                        [c[k] for k, _title in study.CONCLUSIONS])
    return rows


def _failures(results, names):
    """``{scheduler: {conclusion: [where it fails]}}`` over every point.

    A direction fails where it differs from its row's shipped point
    (under the scheduler the row runs): it is a conclusion about that
    scenario. Each place is ``scenario input=value``.
    """
    out = {}
    for name in names:
        rows = results.get(name, {})
        for paths, _values, _why in study.SWEEP:
            got = rows.get(paths)
            if not got:
                continue
            if got['shipped'] not in got['points']:
                continue
            ref = study.judged(got['points'][got['shipped']])
            for label, point in got['points'].items():
                sched = got.get('schedulers', {}).get(label, 'cfs')
                j = study.judged(point)
                fails = out.setdefault(sched, {k: [] for k, _t
                                               in study.CONCLUSIONS})
                where = '%s ``%s=%s``' % (name, paths, label)
                if not j['no_regression']:
                    fails['no_regression'].append(where)
                if not j['gains']:
                    fails['gain'].append(where)
                for key in fails:
                    if key not in ('no_regression', 'gain') and (
                            j[key] != ref[key]):
                        fails[key].append(where)
    return out


def _count(results, names, sched):
    """How many points of ``results`` ran under ``sched``."""
    return sum(1 for name in names for got in results.get(name, {}).values()
               for label in got['points']
               if got.get('schedulers', {}).get(label, 'cfs') == sched)


def _verdict(fails, points):
    """One scheduler's sentence: what holds everywhere, what fails where.

    ``points`` is how many points ran under the scheduler: a conclusion
    failing at each of several is said so, not listed.
    """
    held = [t for k, t in study.CONCLUSIONS if not fails[k]]
    broken = ['%s fails at %s' % (t, 'every point'
                                  if len(fails[k]) == points > 1
                                  else ', '.join(fails[k]))
              for k, t in study.CONCLUSIONS if fails[k]]
    return '%s%s.' % (
        ('holding at every point: ' + '; '.join(held) + '. ') if held
        else 'none holds at every point. ',
        '; '.join(broken) if broken else 'Nothing fails')


def survival(results, names):
    """The section's verdict: which conclusions survive every row.

    One bullet per scheduler the points ran under, each conclusion
    either holding at every point or failing at the places named; then
    the conclusions whose verdict differs between the schedulers.
    """
    fails = _failures(results, names)
    scheds = sorted(fails)
    counts = {s: _count(results, names, s) for s in scheds}
    out = ['- Under %s (%d point(s)): %s' % (
        s.upper(), counts[s], _verdict(fails[s], counts[s]))
        for s in scheds]
    if len(scheds) > 1:
        differ = [t for k, t in study.CONCLUSIONS
                  if len({bool(fails[s][k]) for s in scheds}) > 1]
        out.append('- ' + ('Differing by scheduler: ' + '; '.join(differ)
                           + '.' if differ else
                           'Every conclusion has the same verdict under %s.'
                           % ' and '.join(s.upper() for s in scheds)))
    return '\n'.join(out) + '\n' if out else ''


def cliff_points(cliff):
    """``[(scheduler, granularity, factor, figures over the seeds)]``.

    The figures: ``io_gain`` and ``cpu_low`` as ``(mean, low, high)``,
    ``ok`` the seeds that kept every floor, ``seeds`` how many ran.
    """
    out = []
    for sched in sorted(cliff['points']):
        grans = cliff['points'][sched]
        for w in sorted(grans, key=lambda g: (g == study.NOT_READ, float(
                g) if g != study.NOT_READ else 0.0)):
            per_seed = grans[w]
            for factor in cliff['factors']:
                js = [study.cliff_judge(judged[factor]) for _s, judged
                      in sorted(per_seed.items()) if factor in judged]
                out.append((sched, w, factor, {
                    'io_gain': intervals.interval([j['io_gain'] for j in js]),
                    'cpu_low': intervals.interval([j['cpu_low'] for j in js]),
                    'ok': sum(bool(j['ok']) for j in js), 'seeds': len(js)}))
    return out


def cliff_rows(cliff):
    """The cliff's table: one row per scheduler, granularity and factor."""
    return [[sched, w, factor, pm(f['io_gain']), pm(f['cpu_low']),
             '%d/%d' % (f['ok'], f['seeds'])]
            for sched, w, factor, f in cliff_points(cliff)]


def _kept(pts):
    """Where a curve keeps every floor in every seed, and its best gain."""
    kept = [(factor, f) for factor, f in pts
            if f['seeds'] and f['ok'] == f['seeds']]
    if not kept:
        return 'no factor keeps the floors in every seed'
    where = ('at every factor' if len(kept) == len(pts) else
             'at ' + ', '.join(factor for factor, _f in kept) + ' only')
    factor, f = max(kept, key=lambda kf: kf[1]['io_gain'][0] or 0.0)
    return ('floors kept in every seed %s (the best I/O gain among them %s '
            'at %s)' % (where, pm(f['io_gain']), factor))


def _step(pts):
    """The steepest fall of the computing VMs' lowest ratio, or none."""
    steps = [(a[1]['cpu_low'][0] - b[1]['cpu_low'][0], a, b)
             for a, b in zip(pts, pts[1:])
             if a[1]['cpu_low'][0] is not None
             and b[1]['cpu_low'][0] is not None]
    drop, a, b = max(steps, key=lambda s: s[0], default=(0.0, None, None))
    if drop <= stats.NOISE:
        return 'no step of the computing VMs\' lowest ratio beyond %g' % (
            stats.NOISE)
    return ('the computing VMs\' lowest ratio falls most from %s to %s, '
            '%s to %s' % (a[0], b[0], pm(a[1]['cpu_low']),
                          pm(b[1]['cpu_low'])))


def cliff_text(cliff):
    """What the cliff's table says, one bullet per curve.

    For each scheduler and granularity: the factors at which every seed
    keeps every honest VM's floors, with the best I/O gain among them, and
    the steepest fall of the computing VMs' lowest ratio between
    neighbouring factors beyond the noise band (where the cliff is, if
    there is one).
    """
    curves = {}
    for sched, w, factor, f in cliff_points(cliff):
        curves.setdefault((sched, w), []).append((factor, f))
    return '\n'.join('- %s, wake-up granularity %s: %s; %s.' % (
        sched.upper(), w + (' us' if w != study.NOT_READ else ''), _kept(pts),
        _step(pts)) for (sched, w), pts in curves.items()) + '\n'


def _window(duration):
    return ('a fixed %g s run (warm-up as the scenario says): a transient, '
            'for trying the code only' % duration if duration else
            'at steady state like the main study (the agent settles, then '
            'a window as long as one whole search by the guard is '
            'measured)')


def _inputs_table(sens):
    shipped = next(iter(sens.values()), {})

    def cell(p, v):
        label = study.value_label(v)
        return label + ('*' if label == shipped.get(p, {}).get('shipped')
                        else '')
    return document.rst_table(
        ['input', 'values (shipped \\*)', 'why this range'],
        [[p.replace(',', ', '), ' '.join(cell(p, v) for v in vals), why]
         for p, vals, why in study.SWEEP])


def cliff_section(cliff, duration=0.0):
    """The lever's cliff: its text and table ('' without a sweep)."""
    if not cliff or not cliff.get('points'):
        return ''
    seeds = sorted({s for grans in cliff['points'].values()
                    for per_seed in grans.values() for s in per_seed},
                   key=int)
    return CLIFF_HEAD.format(
        scenario=cliff['scenario'], serving=', '.join(cliff['serving']),
        factors=', '.join(cliff['factors']), seeds=', '.join(seeds),
        window=('measured for %g s after the warm-up: a transient, for '
                'trying the code only' % duration if duration else
                'measured over the main study\'s steady window after the '
                'warm-up')) + cliff_text(cliff) + '\n' + \
        document.rst_table(
            ['scheduler', 'wakeup_granularity_us', 'weight factor',
             'serving I/O gain', 'computing lowest', 'floors kept'],
            cliff_rows(cliff)) + '\n'


def rows_schedulers(sens):
    """The schedulers the rows' points ran under, but the policy row's.

    As each point recorded it (a run that recorded none was CFS's, as
    :func:`_count` reads it).
    """
    return sorted({got.get('schedulers', {}).get(label, 'cfs')
                   for rows in sens.values() for paths, got in rows.items()
                   if study.POLICY not in paths.split(',')
                   for label in got['points']})


def _schedulers_sentence(sens):
    """Which scheduler the study's points ran under, said from its runs."""
    scheds = rows_schedulers(sens)
    if not scheds:
        return ''
    return (' Every point runs under %s, but the ``%s`` row\'s, one under '
            'each scheduler.' % (' or '.join(s.upper() for s in scheds)
                                 + (' as its scenario says'
                                    if len(scheds) > 1 else ''), study.POLICY))


def sensitivity_section(sens, names, cpu_s, duration, cliff=None,
                        heading=True):
    """The 'Sensitivity' section of the document (valid RST).

    A run that left the study out says so, rather than a page without it
    reading as a study that found nothing. ``heading``: under its own
    title (False: the body alone, as the study's page has it).
    """
    if not sens and not (cliff and cliff.get('points')):
        return SENS_NOT_RUN
    seeds = sorted({s for rows in sens.values() for got in rows.values()
                    for point in got['points'].values() for s in point},
                   key=int)
    text = (SECTION if heading else '') + SENS_HEAD.format(
        scenarios=', '.join(names), n=len(sens),
        kernels=', '.join(study.SENSITIVITY_KERNELS),
        window=_window(duration), cpu=cpu_s / 60.0,
        wall=cpu_s / 120.0, noise=stats.NOISE,
        seeds=', '.join(seeds or map(str, study.SENS_SEEDS)),
        schedulers=_schedulers_sentence(sens))
    if sens:
        text += _inputs_table(sens) + '\n\n'
    text += missing_text(sens, cliff)
    if any(got['points'] for rows in sens.values() for got in rows.values()):
        text += SENS_SURVIVE + survival(
            sens, names) + '\n' + SENS_TABLE + document.rst_table(
            ['scenario', 'input'] + [h for h in TABLE_HEADS],
            sensitivity_rows(sens, names)) + '\n\n'
    return text + cliff_section(cliff, duration)


def missing_text(sens, cliff=None):
    """The points and curves not yet measured, a bullet per row, or ''.

    They are left out of every verdict and table: a row judged on part of
    its range says so rather than read as the whole.
    """
    where = ['- %s ``%s``: %s' % (name, paths, ', '.join(got['missing']))
             for name, rows in sens.items() for paths, got in rows.items()
             if got.get('missing')]
    curves = (cliff or {}).get('missing', ())
    if curves:
        where.append('- the weight lever\'s cliff on %s: %s' % (
            cliff['scenario'], ', '.join(
                '%s at wake-up granularity %s' % (sched.upper(), w)
                for sched, w in curves)))
    if not where:
        return ''
    return ('Not yet measured, and left out of every verdict and table '
            'below:\n\n%s\n\n' % '\n'.join(where))


def page(sens, names, cpu_s, duration, cliff, command, commit):
    """The study's own page (valid RST): where it came from, its section.

    ``command`` and ``commit``: what made it and at which commit.
    """
    title = ('The model\'s sensitivity: which conclusions hold across its '
             'inputs')
    rule = '=' * len(title)
    head = PAGE_HEAD.format(command=command, commit=commit,
                            version=cache.version(cache.PRODUCT))
    return '%s\n%s\n%s\n\n%s\n\n%s' % (
        rule, title, rule, textwrap.fill(head, 75, break_long_words=False,
                                         break_on_hyphens=False),
        sensitivity_section(sens, names, cpu_s, duration, cliff,
                            heading=False))


PAGE_HEAD = (
    'Generated by ``{command}`` at commit ``{commit}`` (product version '
    '``{version}``). Every point is judged per VM as soon as its runs are '
    'done and recorded under that version (``sensitivity.json``); a point '
    'recorded is taken from there, not run again, so the study is '
    'measured in parts, on any machine, and ``--recorded`` makes this '
    'page from the records alone.\n')

SENS_NOT_RUN = """\
Sensitivity
===========

Not run with these runs (``--sensitivity ''`` and
``--sensitivity-cliff ''``). The study sweeps every unsourced or
disputed input of the model over several seeds, hundreds of steady
runs, hours more than the runs above. ``vsmtio-bench sim
--sensitivity-only`` runs it alone and writes its own page,
``sensitivity.rst``; each of its points is judged and recorded in
``sensitivity.json`` as its runs complete, so the study is measured in
parts, on any machine.
"""

TABLE_HEADS = ('(a) no regression', '(b) paper I/O', '(b) paper CPU',
               '(c) product gain', '(d) haltpoll I/O', '(d) haltpoll CPU')

SECTION = """\
Sensitivity
===========

"""

SENS_HEAD = """\
Every input of the model that is unsourced or disputed, swept over its
plausible range, and whether the conclusions this benchmark draws hold
across it. Swept on {scenarios}, under {kernels}, every run {window};
each point a scenario of its own (``scenario.set_input``), the others at
their shipped values, run on seeds {seeds}.{schedulers}
{n} scenario(s); the study's
runs used {cpu:.1f} CPU-minutes ({wall:.1f} min on two idle cores).

The conclusions are judged per tenant and per seed, each honest VM
against its own vanilla figure on the same seed (requests per second for
a serving VM, instructions per second for a computing one; an adversary
not at all), never by class totals, with floors net of the model's noise
measured by that point's A/A run on that seed (vanilla after another
history, ``vsmtio_sim.tenants``):

(a) the product's no-regression: every honest VM under ``vsmtio`` at or
    above its floors (1.0 of vanilla serving, 0.97 computing, as means
    and 0.95 in every half-second window, each lowered by the A/A run's
    distance from 1); the figure is the worst VM's ratio over its floor;
(b) the direction of the paper-literal kernel (``vsmtio-paper``) against
    vanilla, for the serving and for the computing VMs: ``+`` every such
    VM above vanilla, ``-`` every one below, ``~`` neither;
(c) the product's gain: the largest gain over vanilla of any honest VM
    under ``vsmtio``;
(d) the direction of KVM's halt polling (``haltpoll``) against vanilla,
    as (b).

A ratio within {noise} of 1, or within its A/A run's distance from 1 if
that is larger, is a tie. A conclusion holds at a point only if it holds
in every seed: (a) met in every seed, (c) a gain beyond the tie in every
seed, a direction the same in every seed (``?`` where the seeds
disagree). Figures are means over the seeds with half their 95% Student
t interval (``1.012±0.011``). "holds" in a row means the conclusion is
the same at every value of the input. Not swept:
``host.remote_memory_latency_ratio``, read by two-socket hosts only. The
inputs and their ranges (``SWEEP`` in ``vsmtio_bench.sensitivity``;
adding an input is one line there):

"""

SENS_SURVIVE = """\
Which conclusions survive every row, per scheduler the points ran under
(the ``scheduler.policy`` row runs the other one too); a direction
survives where it is its row's shipped one at every point:

"""

SENS_TABLE = """\
Each cell: whether the conclusion holds across the input's values, then
its figure at each value in the order above (the shipped value starred):

"""

CLIFF_HEAD = """\
The weight lever's cliff
------------------------

The product's main lever raises the CPU weight of the serving VMs'
cgroups. On {scenario} it may meet a cliff: past some factor the
serving VMs win every wake-up and the computing VMs lose more than their
floor allows. Whether such a cliff is CFS's wake-up rule or the host's,
and how far it moves, is swept here: the static factor on every
serving VM ({serving}) at {factors}, no agent (the factor applied once,
``vsmtio_bench.space.setup_for``), under CFS at each wake-up granularity
of the ``scheduler.wakeup_granularity_us`` row and under EEVDF (which
reads none), every run {window}, on seeds {seeds}. Each seed is judged
against vanilla and its A/A run on the same scheduler, granularity and
seed. Per point: the serving VMs' I/O gain (geometric mean of their
ratios), the computing VMs' lowest ratio, both a mean with half its 95%
interval, and the seeds in which every honest VM kept its floors.

"""
