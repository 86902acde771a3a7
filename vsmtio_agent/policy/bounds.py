"""Anytime-valid bounds and a change detector for the search guard.

:mod:`vsmtio_agent.policy.search` reads its evidence after every pair
and stops as soon as it knows enough; a fixed-sample test read at every
look would keep a harmless candidate far more often than its level says.
So the bound is a *confidence sequence*, the normal mixture (Robbins;
Howard et al., "Time-uniform, nonparametric, nonasymptotic confidence
sequences", 2021): for a sum ``S_n`` of ``n`` centred observations of
variance ``s2``, ``V = n * s2`` and mixture precision ``rho``,

    |S_n| < sqrt((V + rho) * (log((V + rho) / rho) + 2 * log(1 / alpha)))

at every ``n`` at once with probability at least ``1 - alpha``. The
variance is the running one (a plug-in: the tests check coverage on
simulated null runs rather than take it on trust), ``rho`` a multiple of
it (scale-free). The change detector is Page's two-sided CUSUM, its
false-alarm rate stated as a mean run length (:func:`cusum_arl0`). Pure.
"""

import dataclasses
import math

MIXTURE_PAIRS = 8       # where the interval is tightest: a first look
MIN_VARIANCE = 1e-6     # pairs that agree by chance show no zero noise
PRIOR_PAIRS = 4         # the weight, in pairs, of a prior variance


@dataclasses.dataclass(frozen=True)
class Running:
    """A running mean and sum of squared deviations (Welford)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x):
        n = self.n + 1
        delta = x - self.mean
        mean = self.mean + delta / n
        return Running(n, mean, self.m2 + delta * (x - mean))

    @property
    def variance(self):
        """The sample variance (at least :data:`MIN_VARIANCE`)."""
        if self.n < 2:
            return float('inf')
        return max(self.m2 / (self.n - 1), MIN_VARIANCE)

    @property
    def sd(self):
        return math.sqrt(self.variance)


def radius(n, variance, alpha, mixture_pairs=MIXTURE_PAIRS):
    """Half the width of the normal-mixture sequence for a mean of ``n``.

    Valid at every ``n`` at once with probability ``1 - alpha``
    (two-sided); infinite with fewer than two observations.
    """
    if n < 2 or not math.isfinite(variance):
        return float('inf')
    v = n * variance
    rho = mixture_pairs * variance
    return math.sqrt((v + rho) * (math.log((v + rho) / rho)
                                  + 2.0 * math.log(1.0 / alpha))) / n


def interval(run, alpha, prior=None):
    """``(low, high)``: where the mean of ``run`` lies, at level ``alpha``.

    ``prior``: a variance the running one is shrunk toward, weighing
    :data:`PRIOR_PAIRS` pairs (the same VM's noise under the other
    candidates), so a candidate's first pairs cannot agree their way to a
    tiny interval.
    """
    variance = run.variance
    if prior is not None and run.n >= 2:
        variance = max((run.m2 + PRIOR_PAIRS * prior)
                       / (run.n - 1 + PRIOR_PAIRS), MIN_VARIANCE)
    r = radius(run.n, variance, alpha)
    return run.mean - r, run.mean + r


def pooled_variance(runs):
    """The variance pooled over ``runs`` (None with too few pairs)."""
    df = sum(r.n - 1 for r in runs if r.n > 1)
    if df < 2:
        return None
    return math.fsum(r.m2 for r in runs if r.n > 1) / df


def spent(i, alpha):
    """The level of the ``i``-th hypothesis (from 1) of an open-ended set.

    ``alpha / (i * (i + 1))`` sums to ``alpha`` over every ``i``: a
    search may open candidates as it goes, in any order, and the chance
    that any one of them is wrongly kept stays below ``alpha``. The first
    candidates (those the host's levers suggest first) get the most.
    """
    return alpha / (i * (i + 1))


@dataclasses.dataclass(frozen=True)
class Cusum:
    """Page's two-sided CUSUM statistics (in standard deviations)."""

    low: float = 0.0
    high: float = 0.0


def cusum_step(state, z, drift, threshold):
    """``(state, alarm)`` after the standardised observation ``z``.

    ``drift`` (``k``) is half the shift to detect, in standard
    deviations; ``threshold`` (``h``) sets the false-alarm rate
    (:func:`cusum_arl0`). A shift either way alarms: a kept
    configuration that now gains more than it did is as much a sign of
    another host as one that costs more.
    """
    low = max(0.0, state.low - z - drift)
    high = max(0.0, state.high + z - drift)
    alarm = low >= threshold or high >= threshold
    return Cusum(low, high), alarm


def cusum_arl0(drift, threshold):
    """The mean observations to a false alarm of the two-sided CUSUM.

    Siegmund's approximation for one side on N(0, 1) observations,
    halved for two sides (a close lower bound for them).
    """
    b = threshold + 1.166
    one = (math.exp(2 * drift * b) - 2 * drift * b - 1) / (2 * drift ** 2)
    return one / 2.0


def cusum_arl1(shift, drift, threshold):
    """The mean observations to detect a step of ``shift`` sds (Siegmund)."""
    d = shift - drift
    b = threshold + 1.166
    if abs(d) < 1e-9:
        return b * b
    return (math.exp(-2 * d * b) + 2 * d * b - 1) / (2 * d * d)
