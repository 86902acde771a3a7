"""The simulator bench's statistics: replication, noise and dominance.

The product and vanilla are measured over several consecutive windows of
one run (batch means) and a one-sided t-test over them says whether a
shortfall against the objective is the product's or chance's; Holm's
correction keeps the chance of any false alarm over all those tests at
once at its level. An A/A run (vanilla against vanilla after a different
past) measures the run-to-run difference two kernels show with nothing
between them: the largest over every scenario is the noise band a
difference must clear to be one.

Numbers only: :mod:`vsmtio_bench.document` words and tabulates them.
"""

import math
import statistics

from vsmtio_sim import report

# The stock kernels: the product is dominated where one of them beats it on
# both classes at once.
BASELINES = ('vanilla', 'polling', 'haltpoll', 'haltpoll-enhanced')

# A ratio within this of its reference is a tie: the A/A runs of the main
# study put the class figures' run-to-run difference below 0.2%, and one
# VM is a few tenths of a class.
NOISE = 0.005

# The product and vanilla are measured over this many consecutive windows
# of their one run (batch means): whether a shortfall is the product's or
# chance's (a one-sided t-test over the batches).
BATCHES = 3
REPLICATED = ('vanilla', 'vsmtio')

# The A/A run (runner.run_aa; see noise_band).
AA = 'vanilla-aa'


def replicated(res, key, floor):
    """The product over vanilla in each window, and what they say.

    Returns the ratios, their geometric mean and the p-value that the
    true ratio is below ``floor`` (one-sided t-test on the logs).
    """
    from scipy import stats as scipy_stats
    pairs = zip(res['vsmtio']['batches'], res['vanilla']['batches'])
    ratios = [a[key] / b[key] for a, b in pairs if b[key]]
    if len(ratios) < 2:
        return ratios, None, None
    logs = [math.log(r) for r in ratios]
    if len(set(logs)) < 2:
        p = 0.0 if logs[0] < math.log(floor) else 1.0
    else:
        p = float(scipy_stats.ttest_1samp(logs, math.log(floor),
                                          alternative='less').pvalue)
    return ratios, math.exp(statistics.fmean(logs)), p


def aa_difference(res):
    """Per class, |the A/A run's first window / vanilla's - 1|.

    Every kernel's windows start from a reseed (common random numbers), so
    two kernels compared window by window draw the same requests and
    differ by their mechanisms plus what is left of their different pasts
    (the queues, the run-queue order, the requests in flight when the
    window began). The A/A run measures that rest: vanilla against
    vanilla, its window started after a different history.
    """
    van, aa = res['vanilla'], res['vanilla'].get('aa')
    out = []
    for key in ('io_throughput', 'cpu_throughput'):
        base = van[key]
        out.append(abs(aa[key] / base - 1.0) if aa and base else 0.0)
    return tuple(out)


def noise_band(results):
    """Per class, the largest A/A difference over every scenario.

    One A/A pair per scenario is one draw of that difference (it can be 0
    by luck); the largest over all of them is the band a difference
    between two kernels must clear to be one: a smaller one is a tie.
    """
    diffs = [aa_difference(res) for res in results.values()]
    return tuple(max((d[i] for d in diffs), default=0.0) for i in (0, 1))


def dominated_by(results, band):
    """Baselines better than the product on both classes at once.

    Returns ``(beyond, within)``: those better on both by more than the
    noise ``band`` (per class), and those better on both only within it.
    """
    norm = report.normalise(results)
    mine = norm['vsmtio']
    io_band, cpu_band = band
    beyond, within = [], []
    for k in BASELINES:
        d_io = (norm[k]['io'] or 0) - (mine['io'] or 0)
        d_cpu = (norm[k]['cpu'] or 0) - (mine['cpu'] or 0)
        if d_io > 0 and d_cpu > 0:
            text = '%s (I/O +%.3f, CPU +%.3f)' % (k, d_io, d_cpu)
            if d_io > io_band and d_cpu > cpu_band:
                beyond.append(text)
            else:
                within.append(text)
    return beyond, within


def holm(pvalues, alpha=0.05):
    """Which of ``{key: p}`` stay significant over all the tests at once.

    Holm's step-down correction: with two classes tested on every
    scenario, about one test in twenty would fall below 0.05 by chance
    alone; Holm keeps the chance of any false alarm over the whole
    family at ``alpha``.
    """
    ranked = sorted((p, k) for k, p in pvalues.items() if p is not None)
    m, out = len(ranked), {}
    for i, (p, k) in enumerate(ranked):
        if p * (m - i) >= alpha:
            break
        out[k] = True
    return {k: out.get(k, False) for k in pvalues}


def mean(values):
    """The mean of the values there are; None where there are none."""
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None
