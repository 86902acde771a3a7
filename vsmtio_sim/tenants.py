"""Each honest tenant against its floor: the per-VM judgement of a run.

Class totals hide a tenant's loss: one VM with many tiny waits can lift
the I/O class while another VM loses. So a kernel is judged VM by VM
against the same VM under the baseline over the same measured window
(common random numbers): a VM whose workload does I/O by the requests it
served, any other by the instructions it retired. Its ratio must reach
its floor as a mean over the window (``FLOORS``: a serving VM keeps at
least vanilla's service, a computing VM 0.97 of its instructions), and
``WINDOW_FLOOR`` in every window of about ``WINDOW_S``: half a second is
five agent periods, short enough that a loss lasting a few periods (a
probe's arms) shows, long enough to hold tens of requests of the
slowest shipped loop. A VM the scenario marks as an adversary is reported
but never judged: what it gains by shaping its waits is not the host's.

The floors are net of the model's own noise (:func:`floors`). Two runs
of the same host differ even with common random numbers: the measured
window starts after a different history (the product's after it settles,
vanilla's after the warm-up). The A/A run measures that noise for each VM
(vanilla again after another history, :func:`~vsmtio_sim.runner.run_aa`),
and a floor is set so that vanilla run yet again falls below it in at
most ``ALPHA`` of VMs: the mean floor lies ``t`` standard errors of the
A/A run's mean under ``FLOORS`` (batch means of ``BATCH_WINDOWS``
windows, since consecutive windows are not independent: a request that
straddles an edge counts in one or the other), and the window floor
under ``WINDOW_FLOOR`` where one window's own spread makes its lowest of
``n`` reach lower by chance. One draw of the noise is not a band: a
floor set at the A/A run's own distance from 1 is crossed by the next
draw about half the time. No test can tell a difference inside the band
from the model's noise, so none is held against the product or a static
configuration; a run judged without an A/A run gets the bare floors.

A window's spread is not the A/A run's alone. Common random numbers
restart every stream where the window starts, so the k-th request of a
vCPU draws the same burst and device time in every run; a run that
serves as vanilla does (the A/A run, vanilla again) stays in step with
it window by window, and its windows' ratios are narrow. A run that
serves more or less falls out of step: its k-th request comes earlier or
later, so each of its windows holds other requests than vanilla's same
window, and its windows' ratios spread as two independent runs' do,
about three times as wide as the A/A run's on the Fig. 5 servers
(``doc/source/simulator.rst``). Judged by the A/A run's spread
alone, every change that moves a mean would break a window floor by
chance. So the window floor takes the wider of the A/A run's spread and
the *null run*'s: vanilla of another seed over the same window
(``null`` of :func:`judge`), whose requests are independent of
vanilla's while what is set by the clock (phases, an adversary's cycle)
is the same. The mean keeps the A/A run's band: over the whole window a
run out of step has still drawn the same requests, so its mean moves
only by what it does.

On a host whose tenants change phase in a cycle, a window is one whole
cycle (``cycle_s`` of :func:`judge`, :func:`cycle_s`) and a batch whole
cycles. The floors take one spread for every window, and half a second
at a phase change differs between two histories far more than half a
second inside a phase (tens of times more on a server that starts a
compaction), so the lowest short window falls where the phases change,
below what one spread predicts, in vanilla run again as often as in the
product; a whole cycle holds every phase once, and its windows share one
spread. What a short window would catch there, a loss of a few agent
periods, is inside that noise anyway. With a handful of cycles the
spread itself is uncertain, which Student's t on its degrees of freedom
carries into the window floor.
"""

import collections
import math
import statistics

import prettytable
from scipy import stats as scipy_stats

WINDOW_S = 0.5
FLOORS = {'serving': 1.0, 'computing': 0.97}
WINDOW_FLOOR = 0.95
# the share of honest VMs a vanilla host run again may find below each of
# its floors: small, since a yardstick judges hundreds of VMs in a sitting
ALPHA = 0.001
# 5 s batches: each batch's mean is nearly independent of the next one's
BATCH_WINDOWS = 10
METRIC = {'serving': 'requests_per_s', 'computing': 'instructions_per_s'}


def role(vm):
    """'serving' for a VM (a result's ``vms`` entry) that does I/O."""
    return 'computing' if vm['kind'] == 'cpu' else 'serving'


def _ratio(a, b):
    return a / b if b else None


def cycle_s(sc):
    """The period of the scenario ``sc``'s phases; 0 where no VM cycles.

    The shortest window of whole cycles its steady runs are measured
    over (:meth:`~vsmtio_sim.scenario.Scenario.align`).
    """
    return sc.align(0.0, 0.0)[1]


def span(base, cycle_s=0.0):
    """How many of ``base``'s windows make one judged window.

    One, or the nearest whole number of them to one phase cycle of
    ``cycle_s`` seconds (a steady window starts on a cycle).
    """
    window_s = base.get('windows', {}).get('window_s')
    if not cycle_s or not window_s:
        return 1
    return max(1, int(round(cycle_s / window_s)))


def _windows(result, base, name, metric, width=1):
    """``name``'s ratio of ``result`` to ``base`` in each common window.

    A window is ``width`` consecutive windows of the runs (:func:`span`);
    an incomplete last one is left out.
    """
    def sums(r):
        w = [x[name][metric] for x in r.get('windows', {}).get('vms', ())]
        return [math.fsum(w[i:i + width])
                for i in range(0, len(w) - width + 1, width)]
    out = [_ratio(x, y) for x, y in zip(sums(result), sums(base))]
    return [w for w in out if w is not None]


Noise = collections.namedtuple('Noise', 'se sd n dof')
Noise.__doc__ = """A VM's noise in an A/A run (:func:`noise`).

``se``: the standard error of its mean log ratio; ``sd``: the standard
deviation of one window's log ratio; ``n``: the number of windows;
``dof``: the degrees of freedom of ``se`` (batches less one)."""


def noise(aa, base, name, metric, width=1):
    """``name``'s :class:`Noise` in the A/A run ``aa`` against ``base``.

    Windows of ``width`` of the runs' windows (:func:`span`); ``se`` by
    batch means of at least ``BATCH_WINDOWS`` of the runs' windows, never
    finer than one unit of ``metric`` per batch (a count can move by one
    at a batch's edge from the phase of the run alone). None where the
    A/A run has too few windows to tell.
    """
    logs = [math.log(w) for w in _windows(aa, base, name, metric, width)
            if w > 0]
    size = -(-BATCH_WINDOWS // width)       # judged windows per batch
    batches = len(logs) // size
    if batches < 2:
        return None
    means = [statistics.fmean(logs[i * size:(i + 1) * size])
             for i in range(batches)]
    per_batch = (base['vms'][name][metric] * size * width
                 * base['windows']['window_s'])
    unit = 1.0 / per_batch if per_batch > 0 else 0.0
    se = max(statistics.stdev(means), unit) / math.sqrt(batches)
    return Noise(se, statistics.stdev(logs), len(logs), batches - 1)


def floors(role, aa_noise=None, null_noise=None):
    """``(mean floor, window floor)`` of a VM of ``role``, net of noise.

    ``aa_noise`` is the VM's :class:`Noise` in the A/A run (None: no A/A
    run, the bare floors), ``null_noise`` in the null run (None: none).
    The mean floor is ``FLOORS[role]`` lowered by :func:`band` (as a
    factor, ``exp(-band)``, since the noise is of log ratios); the window
    floor is ``WINDOW_FLOOR`` or, where lower, ``exp(-t sd)``, ``t`` the
    quantile of Student's t on the windows' ``n - 1`` degrees of freedom
    that the lowest of ``n`` windows passes with ``1 - ALPHA``, and ``sd``
    one window's spread, the wider of the two runs'.
    """
    mean, window = FLOORS[role], WINDOW_FLOOR
    if aa_noise is None:
        return mean, window
    n, sd = aa_noise.n, window_sd(aa_noise, null_noise)
    mean *= math.exp(-band(aa_noise))
    window = min(window, math.exp(
        -scipy_stats.t.ppf(1.0 - ALPHA / n, n - 1) * sd))
    return mean, window


def window_sd(aa_noise, null_noise=None):
    """One window's spread (of its log ratio) that the window floor takes.

    The wider of the A/A run's and the null run's (the module's
    docstring says why); the A/A run's alone without a null run.
    """
    return max(aa_noise.sd, null_noise.sd if null_noise else 0.0)


def band(aa_noise):
    """How far (as a log ratio) noise alone moves a VM's mean.

    The one-sided ``1 - ALPHA`` quantile of Student's t on the batches'
    degrees of freedom times the mean's standard error; 0 without an A/A
    run's :class:`Noise`.
    """
    if aa_noise is None:
        return 0.0
    return scipy_stats.t.ppf(1.0 - ALPHA, aa_noise.dof) * aa_noise.se


def judge(result, base, aa=None, cycle_s=0.0, null=None):
    """``{vm: verdict}``: each VM of ``result`` against ``base``'s.

    Both are results of :func:`~vsmtio_sim.runner.run_conf` over the
    same window. A verdict holds the VM's ``role``, ``metric``, mean
    ``ratio``, ``min_window`` (its lowest ratio in one window), its
    ``floor`` and ``window_floor`` (:func:`floors`) and ``ok`` (None for
    an adversary, or a VM the baseline saw do nothing). ``aa``, where
    given, is the baseline run again after another history (the A/A run,
    over a window as long): each verdict then also holds ``aa_ratio`` and
    ``aa_window``, that run's mean and lowest window against ``base``,
    and ``band``, how far noise alone moves the mean (a fraction,
    :func:`band`), and its floors are net of that noise (:func:`noise`).
    ``cycle_s``, the period of the scenario's phases (:func:`cycle_s`),
    makes a window one cycle; every verdict holds its ``window_s``.
    ``null``, with ``aa``: vanilla of another seed over the same window,
    whose spread the window floor also takes (:func:`window_sd`); each
    verdict then holds ``window_sd``, the spread it took.
    """
    width = span(base, cycle_s)
    window_s = base.get('windows', {}).get('window_s')
    out = {}
    for name, b in sorted(base['vms'].items()):
        r = role(b)
        metric = METRIC[r]
        mean = _ratio(result['vms'][name][metric], b[metric])
        windows = _windows(result, base, name, metric, width)
        low = min(windows, default=mean)
        aa_ratio = aa_window = aa_noise = None
        if aa is not None:
            aa_ratio = _ratio(aa['vms'][name][metric], b[metric])
            aa_window = min(_windows(aa, base, name, metric, width),
                            default=aa_ratio)
            aa_noise = noise(aa, base, name, metric, width)
        null_noise = (noise(null, base, name, metric, width)
                      if null is not None and aa_noise is not None else None)
        floor, window_floor = floors(r, aa_noise, null_noise)
        ok = None
        if not b['adversary'] and mean is not None:
            ok = mean >= floor and low >= window_floor
        out[name] = {'role': r, 'metric': metric,
                     'adversary': b['adversary'], 'ratio': mean,
                     'min_window': low,
                     'windows': len(windows),
                     'window_s': window_s and window_s * width,
                     'floor': floor, 'window_floor': window_floor,
                     'ok': ok}
        if aa is not None:
            out[name].update(aa_ratio=aa_ratio, aa_window=aa_window,
                             band=math.expm1(band(aa_noise)))
        if null_noise is not None:
            out[name]['window_sd'] = window_sd(aa_noise, null_noise)
    return out


def null_seed(seed, seeds=()):
    """The seed whose vanilla run is ``seed``'s null run (:func:`judge`).

    The next of ``seeds`` after ``seed``, cyclically, where more than one
    was run (their vanilla runs are at hand); else ``seed + 1``. Any other
    seed would do: the seeds draw independently.
    """
    seeds = sorted(set(seeds))
    if len(seeds) > 1 and seed in seeds:
        return seeds[(seeds.index(seed) + 1) % len(seeds)]
    return seed + 1


def nulls(vanillas):
    """``{seed: null run}`` from ``{seed: vanilla run}`` of several seeds.

    Each seed's null run is the vanilla run of :func:`null_seed` among
    them; empty with one seed, which has no other to take.
    """
    if len(vanillas) < 2:
        return {}
    return {s: vanillas[null_seed(s, vanillas)] for s in vanillas}


def geomean(values):
    values = [v for v in values if v]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summary(verdicts):
    """The host's figures from one kernel's verdicts.

    ``io_gain``: the geometric mean of the honest serving VMs' ratios (a
    VM with many tiny waits weighs no more than one with few); ``cpu``:
    the same over the honest computing VMs; ``ok``: every honest VM at its
    floors; ``worst``: the honest VM furthest below (or least above) its
    floor, as ``(vm, ratio / floor)``.
    """
    honest = {vm: v for vm, v in verdicts.items() if v['ok'] is not None}
    worst = min(((vm, min(v['ratio'] / v['floor'],
                          v['min_window'] / v['window_floor']))
                 for vm, v in honest.items()),
                key=lambda x: x[1], default=None)
    return {
        'io_gain': geomean([v['ratio'] for v in honest.values()
                            if v['role'] == 'serving']),
        'cpu': geomean([v['ratio'] for v in honest.values()
                        if v['role'] == 'computing']),
        'ok': all(v['ok'] for v in honest.values()),
        'worst': worst}


def compare(results, baseline='vanilla', aa=None, cycle_s=0.0, null=None):
    """``{kernel: {'vms': verdicts, **summary}}`` for a comparison.

    ``aa``: the baseline's A/A run (:func:`judge`), None for the bare
    floors; ``cycle_s``: the period of the scenario's phases; ``null``:
    the null run (:func:`judge`).
    """
    base = results[baseline]
    out = {}
    for kernel, r in results.items():
        verdicts = judge(r, base, aa, cycle_s, null)
        out[kernel] = dict(summary(verdicts), vms=verdicts)
    return out


def mark(verdict):
    """What the table says of a verdict: only a VM outside its floors.

    A VM within its floors gets nothing: a mark beside every row would
    hide the one that matters.
    """
    if verdict['adversary']:
        return 'adversary, not judged'
    if verdict['ok'] is None:
        return 'not judged'
    return '' if verdict['ok'] else 'BELOW'


def header(baseline, window, aa, cycle=False, null=False):
    """How the table's figures and floors are made, for its first lines.

    ``window``: the judged window's length in seconds; ``cycle``: whether
    it is one cycle of the scenario's phases; ``null``: whether the
    window floors also take a null run's spread.
    """
    head = ('Each VM against itself under %s: its mean ratio over the '
            'measured window and the lowest of its %s s windows%s.'
            % (baseline, '%g' % window if window else '?',
               ' (one cycle of its phases each)' if cycle else ''))
    if aa is None:
        return head + (' Bare floors (no A/A run): mean %.2f serving, '
                       '%.2f computing; every window %.2f. BELOW: outside '
                       'a floor.' % (FLOORS['serving'], FLOORS['computing'],
                                     WINDOW_FLOOR))
    return head + (
        '\nFloors net of the model\'s noise, from the A/A run (%s again, '
        'measured after another history): %.2f serving / %.2f computing, '
        'and %.2f in every window, each lowered by the A/A run\'s spread '
        'so far that %s run yet again falls below it in %g of VMs. '
        '%s'
        'BELOW: outside a floor.'
        % (baseline, FLOORS['serving'], FLOORS['computing'], WINDOW_FLOOR,
           baseline, ALPHA,
           'The window floors take the wider of that spread and the null '
           'run\'s (%s of another seed): a run that serves more or less '
           'than %s falls out of step with its requests window by window. '
           % (baseline, baseline) if null else
           'No null run: a run out of step with %s\'s requests may fall '
           'below a window floor by chance. ' % baseline))


def table(results, baseline='vanilla', aa=None, cycle_s=0.0, null=None):
    """The per-VM judgement of a comparison, one row per kernel and VM.

    With ``aa`` (the baseline's A/A run) each row also shows the A/A
    figures its floors are net of; ``cycle_s`` and ``null`` as for
    :func:`judge`.
    """
    judged = compare(results, baseline, aa, cycle_s, null)
    base = results[baseline]
    width = span(base, cycle_s)
    window = base.get('windows', {}).get('window_s')
    t = prettytable.PrettyTable(['kernel', 'VM', 'judged on', 'mean',
                                 'min window', 'floors mean / window',
                                 'A/A mean / window', 'mark'])
    t.align = 'r'
    for c in ('kernel', 'VM', 'judged on', 'mark'):
        t.align[c] = 'l'
    for kernel, j in judged.items():
        for vm, v in j['vms'].items():
            t.add_row([kernel, vm, v['metric'].replace('_per_s', '/s'),
                       _x(v['ratio']), _x(v['min_window']),
                       '%s / %s' % (_x(v['floor']), _x(v['window_floor'])),
                       '%s / %s' % (_x(v.get('aa_ratio')),
                                    _x(v.get('aa_window'))),
                       mark(v)])
    return (header(baseline, window and window * width, aa, width > 1,
                   null is not None)
            + '\n' + t.get_string())


def _x(v):
    return '-' if v is None else '%.3f' % v
