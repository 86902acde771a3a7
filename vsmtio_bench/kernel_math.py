"""The kernel bench's arithmetic: orders, summaries, verdicts, host facts.

Pure functions of numbers and text, no processes and no clocks, so the
unit tests hold them exactly: the interleaved order of a repetition's
points, a sample's median and spread, percentiles, the normalisation of a
repetition's server throughput by the server alone in the same
repetition, cgroup weights in either version's units, the scheduler and
``HZ`` a kernel's release and configuration say, and the comparison of
the real kernel's figures with the model's under a tolerance.
:mod:`vsmtio_bench.kernel` runs the processes.
"""

import math
import random
import re
import statistics

# cgroup v1 ``cpu.shares`` of a group at the default weight, and v2's
# ``cpu.weight`` of the same share (the kernel's own conversion maps one
# onto the other: cgroup_weight 100 is shares 1024)
V1_DEFAULT = 1024
V2_DEFAULT = 100
V1_RANGE = (2, 262144)
V2_RANGE = (1, 10000)

# the first release whose fair class is EEVDF ("sched/fair: Implement an
# EEVDF-like scheduling policy", merged for 6.6)
EEVDF_SINCE = (6, 6)


def order(keys, repetition, seed=0):
    """The order of ``keys`` in ``repetition``: up, down, shuffled, again.

    Repetition 0 runs them as given (ascending), 1 reversed, 2 in a
    seeded shuffle, 3 ascending again and so on: a drift in the machine's
    other load over the run falls on every point alike instead of on the
    last ones.
    """
    keys = list(keys)
    kind = repetition % 3
    if kind == 1:
        keys.reverse()
    elif kind == 2:
        random.Random('%s/%d' % (seed, repetition)).shuffle(keys)
    return keys


def percentile(values, q):
    """The ``q``-th percentile (0-100) of ``values``, nearest rank."""
    if not values:
        return None
    s = sorted(values)
    # the epsilon keeps 99.9% of 1000 at rank 999, not float fuzz's 1000
    rank = max(1, int(math.ceil(q * len(s) / 100.0 - 1e-9)))
    return s[min(rank, len(s)) - 1]


def delays(values_ns):
    """Mean, p99 and p99.9 of wake-up delays, in microseconds."""
    if not values_ns:
        return {'n': 0, 'mean_us': None, 'p99_us': None, 'p999_us': None}
    return {'n': len(values_ns),
            'mean_us': sum(values_ns) / len(values_ns) / 1e3,
            'p99_us': percentile(values_ns, 99) / 1e3,
            'p999_us': percentile(values_ns, 99.9) / 1e3}


def summary(values):
    """Median, min, max and relative spread of a repetition's values.

    ``spread`` is (max - min) / median: what separates the repetitions
    of one point, against which a difference between the model and the
    kernel is read. None where there is nothing to summarise.
    """
    vals = [v for v in values if v is not None]
    if not vals:
        return {'median': None, 'min': None, 'max': None, 'spread': None,
                'n': 0}
    med = statistics.median(vals)
    return {'median': med, 'min': min(vals), 'max': max(vals),
            'spread': (max(vals) - min(vals)) / med if med else None,
            'n': len(vals)}


def normalised(value, alone):
    """``value`` over ``alone``; None where either is missing or 0."""
    if value is None or not alone:
        return None
    return value / alone


def fair_share(ratio, demand):
    """The server's CPU share its weight entitles it to, beside a spinner.

    A server of weight ``ratio`` (the spinner's is 1) that wants at most
    ``demand`` of the CPU alone gets ``min(demand, ratio / (ratio + 1))``
    under a proportional-share scheduler that gives what one does not use
    to the other: the reference the measured shares are read against.
    """
    return min(demand, ratio / (ratio + 1.0))


def v1_shares(ratio):
    """cgroup v1 ``cpu.shares`` for ``ratio`` times the default weight."""
    lo, hi = V1_RANGE
    return max(lo, min(hi, int(round(V1_DEFAULT * ratio))))


def v2_weight(ratio):
    """cgroup v2 ``cpu.weight`` for ``ratio`` times the default weight."""
    lo, hi = V2_RANGE
    return max(lo, min(hi, int(round(V2_DEFAULT * ratio))))


def release_version(release):
    """``(major, minor)`` of a kernel release string, or None."""
    m = re.match(r'(\d+)\.(\d+)', release or '')
    return (int(m.group(1)), int(m.group(2))) if m else None


def scheduler_of(release):
    """The fair class a kernel release runs: ``EEVDF``, ``CFS`` or None."""
    v = release_version(release)
    if v is None:
        return None
    return 'EEVDF' if v >= EEVDF_SINCE else 'CFS'


def config_value(text, name):
    """The value of ``CONFIG_<name>`` in a kernel configuration, or None."""
    m = re.search(r'^CONFIG_%s=(\S+)$' % re.escape(name), text or '',
                  re.MULTILINE)
    return m.group(1).strip('"') if m else None


def cfs_scale(ncpus):
    """CFS's tunables' factor on a host of ``ncpus``: 1 + ilog2(min(n, 8)).

    ``sched_latency``, ``min_granularity`` and ``wakeup_granularity``
    (and EEVDF's ``base_slice``) are scaled by it
    (``SCHED_TUNABLESCALING_LOG``, kernel/sched/fair.c).
    """
    n = max(1, min(int(ncpus), 8))
    return 1 + int(math.floor(math.log2(n)))


def within(model, real, tolerance):
    """``(ratio, ok)``: model / real and whether it is within tolerance.

    ``ok`` is None where either figure is missing or the real one is 0:
    there is nothing to judge.
    """
    if model is None or real is None or not real:
        return None, None
    ratio = model / real
    return ratio, abs(ratio - 1.0) <= tolerance


def compare(real_points, model_points, figures, tolerance):
    """One row per point and figure: real, model, ratio, verdict.

    ``real_points`` and ``model_points`` map a point's key to its figures
    (``{figure: value}``; the real ones are medians over repetitions);
    a point the model lacks gets None. Rows are in ``real_points``'
    order.
    """
    rows = []
    for key, real in real_points.items():
        model = model_points.get(key) or {}
        for fig in figures:
            r, m = real.get(fig), model.get(fig)
            ratio, ok = within(m, r, tolerance)
            rows.append({'point': key, 'figure': fig, 'real': r,
                         'model': m, 'ratio': ratio, 'ok': ok})
    return rows


def outside(rows):
    """The rows a verdict puts outside the tolerance."""
    return [r for r in rows if r['ok'] is False]
