"""A figure over several seeds: its mean and its 95% interval.

One seed is one draw of the guard's chaotic path and of the model's
noise: on a Fig. 5 pair two seeds can differ by more than the change
under study. So every figure the simulator reports for comparison is a
mean over seeds with a Student t interval, and two configurations (two
guards, the product and the oracle) are compared by their paired
difference over the seeds both ran (common random numbers within a seed
make the pairing worth it: both drew the same requests).
"""

import math
import statistics

LEVEL = 0.95
# The seeds a figure is reported over unless told otherwise.
SEEDS = (1, 2, 3, 4, 5)


def parse_seeds(text):
    """The distinct seeds of ``text`` (comma-separated), in its order.

    Each within the ``[vsmtio_sim] seed`` option's bounds; a duplicate
    would count one draw twice in an interval that assumes independent
    ones. ValueError, one line, otherwise.
    """
    from vsmtio_sim import conf as sim_conf
    bounds = next(o for o in sim_conf.sim_opts if o.dest == 'seed').type
    if not text.strip():
        raise ValueError('no seed given')
    seeds = []
    for item in text.split(','):
        try:
            seed = int(item.strip())
        except ValueError:
            raise ValueError('not a comma-separated list of integers: %r'
                             % text)
        if not bounds.min <= seed <= bounds.max:
            raise ValueError('seed %d out of range [%d, %d]'
                             % (seed, bounds.min, bounds.max))
        if seed in seeds:
            raise ValueError('seed %d given twice' % seed)
        seeds.append(seed)
    return tuple(seeds)


def interval(values, level=LEVEL):
    """``(mean, low, high)`` of ``values`` (None ones left out).

    A Student t interval on the mean; one value has no interval (low
    and high are None), no value has no mean.
    """
    values = [v for v in values if v is not None]
    if not values:
        return None, None, None
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, None, None
    from scipy import stats as scipy_stats
    half = (float(scipy_stats.t.ppf(0.5 + level / 2.0, len(values) - 1))
            * statistics.stdev(values) / math.sqrt(len(values)))
    return m, m - half, m + half


def paired(a, b, level=LEVEL):
    """``a - b`` over the seeds both have: ``(mean, low, high, n)``.

    ``a`` and ``b`` map a seed to a figure (None: not measured).
    """
    common = sorted(s for s in set(a) & set(b)
                    if a[s] is not None and b[s] is not None)
    return interval([a[s] - b[s] for s in common], level) + (len(common),)


def text(mean, low, high, fmt='%.3f'):
    """``1.023 [1.011, 1.035]``; a figure without interval alone."""
    if mean is None:
        return '-'
    if low is None:
        return fmt % mean
    return (fmt + ' [' + fmt + ', ' + fmt + ']') % (mean, low, high)
