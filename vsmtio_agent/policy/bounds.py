"""Anytime-valid bounds and a change detector for the guard's search.

The search reads its evidence after every pair, so a fixed-sample test
would keep a harmless candidate far more often than its level says. The
bound is a confidence sequence, the normal mixture (Howard et al.,
2021): for ``n`` observations of variance ``s2`` summing to ``S_n``,
``V = n * s2`` and ``rho`` a multiple of it, at every ``n`` at once

    P(|S_n| < sqrt((V + rho) * (log((V + rho) / rho) + 2 log(1 / alpha))))
        >= 1 - alpha.

Its variance is a plug-in, so the tests check coverage on null runs.
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


def radius(n, variance, alpha, mixture_pairs=MIXTURE_PAIRS):
    """Half the width of the two-sided sequence for a mean of ``n``."""
    if n < 2 or not math.isfinite(variance):
        return float('inf')
    w = (n + mixture_pairs) * variance          # V + rho
    return math.sqrt(w * (math.log(1.0 + n / mixture_pairs)
                          + 2.0 * math.log(1.0 / alpha))) / n


def interval(run, alpha, prior=None):
    """``(low, high)``: where the mean of ``run`` lies, at level ``alpha``.

    The variance is shrunk toward ``prior`` (the VM's noise under other
    candidates), so first pairs cannot agree their way to a tiny interval.
    """
    variance = run.variance
    if prior is not None and run.n >= 2:
        variance = max((run.m2 + PRIOR_PAIRS * prior)
                       / (run.n - 1 + PRIOR_PAIRS), MIN_VARIANCE)
    r = radius(run.n, variance, alpha)
    return run.mean - r, run.mean + r


def spent(i, alpha):
    """The ``i``-th hypothesis's level: all sum to ``alpha``, however many."""
    return alpha / (i * (i + 1))


@dataclasses.dataclass(frozen=True)
class Cusum:
    """Page's two-sided CUSUM statistics (in standard deviations)."""
    low: float = 0.0
    high: float = 0.0

    def step(self, z, drift, threshold):
        """``(cusum, alarm)`` after the standardised observation ``z``.

        ``drift`` is half the shift to detect. Either way alarms: a
        configuration gaining more than it did is as much a sign of
        another host as one that costs more.
        """
        low = max(0.0, self.low - z - drift)
        high = max(0.0, self.high + z - drift)
        return Cusum(low, high), low >= threshold or high >= threshold
