"""The statistics of a probe block: is a mechanism shown to help?

A probe block (:mod:`vsmtio_agent.policy.guard`) alternates periods with
the mechanism (A) and without it (B) in ABBA order. Each adjacent A/B pair
gives one log-ratio per class (the CPU-bound class's instructions per
second, the I/O-bound class's requests per second); this module tests
them with one-sided t-tests (``scipy.stats``) and returns the
:class:`Verdict`. It is apart from the guard's state machine because it is
the part a reviewer checks against the statistics, and the part the
simulator's benchmark and the operator's logs quote (the ratios, the
reason). Pure: samples in, verdict out.
"""

import dataclasses
import math
from typing import Optional

from scipy import special as scipy_special
from scipy import stats as scipy_stats


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The outcome of one probe block, for logs, status and reports."""

    mechanism: str
    kept: bool
    cpu_ratio: Optional[float]
    io_ratio: Optional[float]
    reason: str
    # a class lost: its mean below the objective or significantly so (not
    # merely no gain shown, nor its keeping the objective not shown)
    loses: bool = False
    # the probe's log-ratios per class: a wider split's gain is tested
    # against the narrower split's own probe
    cpu_logs: tuple = ()
    io_logs: tuple = ()


def _log_ratios(samples, index):
    """Log of A over B for each adjacent pair of the ABBA sequence."""
    out = []
    for i in range(0, len(samples) - 1, 2):
        a, b = samples[i], samples[i + 1]
        if not a[0]:
            a, b = b, a
        va, vb = a[index], b[index]
        if va is None or vb is None or va <= 0 or vb <= 0:
            return None
        out.append(math.log(va / vb))
    return out


def _p(logs, bound, alternative):
    """One-sided t-test p-value of the mean log-ratio against ``bound``."""
    if len(set(logs)) < 2:
        mean = sum(logs) / len(logs)
        hit = mean < bound if alternative == 'less' else mean > bound
        return 0.0 if hit else 1.0
    return float(scipy_stats.ttest_1samp(
        logs, bound, alternative=alternative).pvalue)


# The unit roundoff of a float, and the slack _p_below allows a p-value
# beside the t distribution's own rounding.
_U = 2.0 ** -53
_P_SLACK = 1e-9


def _p_below(logs, bound, alternative, alpha):
    """Whether ``_p(logs, bound, alternative) < alpha``, scipy rarely asked.

    A probe block asks this of each class after every pair from the
    third, and of LTCR's trials every period: scipy's ttest_1samp costs
    about a millisecond a call (its array and NaN-policy machinery), over
    the whole budget of an agent's period. Its answer is the t
    distribution's ``stdtr(n - 1, t)`` (``-t`` for 'greater') of
    ``t = (mean - bound) / (std / sqrt(n))``; so this computes ``t`` in
    floats, with a bound ``dt`` on how far scipy's ``t`` (another
    summation order) can be from it: both are within ``8 n u`` of
    ``|mean| + |bound|`` over the standard error and a few ``n u`` of
    ``t`` itself from the exact one, which ``1e-9 * n`` over-covers when
    the standard error is not minute beside the values (else scipy
    answers). Where ``alpha`` is outside ``stdtr`` over ``t +- dt``, with
    a relative slack, that is scipy's answer; on the edge, scipy gives it.
    """
    n = len(logs)
    # (a log-ratio of two floats is within 1500 of zero)
    scale = max(map(abs, logs)) + abs(bound)
    if len(set(logs)) < 2 or not scale < 1e100:
        return _p(logs, bound, alternative) < alpha
    mean = math.fsum(logs) / n
    se = math.sqrt(math.fsum([d * d for d in [x - mean for x in logs]])
                   / (n - 1) / n)
    if not se > 0.0 or n * _U * scale / se > 5e-7:
        return _p(logs, bound, alternative) < alpha
    t = (mean - bound) / se
    if alternative == 'greater':
        t = -t
    dt = 1e-9 * n * (abs(t) + scale / se)
    low = float(scipy_special.stdtr(n - 1, t - dt))
    high = float(scipy_special.stdtr(n - 1, t + dt))
    if high * (1.0 + _P_SLACK) < alpha:
        return True
    if low * (1.0 - _P_SLACK) > alpha:
        return False
    return _p(logs, bound, alternative) < alpha


def blind(mechanism):
    return Verdict(mechanism, False, None, None,
                   'CPU-bound throughput cannot be measured here (no '
                   'instruction counter), so nothing shows it does not '
                   'lose', loses=True)


def _gain_shown(logs, reference, alpha):
    """Whether ``logs`` beat ``reference``'s probe (or no change).

    At significance ``alpha``. Against another probe's log-ratios:
    Welch's one-sided t-test, for the two probes ran at different times
    with their own noise.
    """
    if not reference:
        return _p_below(logs, 0.0, 'greater', alpha)
    return _gain_p(logs, reference) < alpha


def _gain_p(logs, reference):
    """Welch's p-value that ``logs`` beat ``reference``'s log-ratios."""
    if len(set(logs)) < 2 and len(set(reference)) < 2:
        return 0.0 if min(logs) > max(reference) else 1.0
    return float(scipy_stats.ttest_ind(
        logs, reference, equal_var=False, alternative='greater').pvalue)


# the classes a sample measures: (name, index in a sample)
CLASSES = (('CPU', 1), ('I/O', 2))


def _floor(params, index, adding):
    """The ratio class ``index`` is held to in this block.

    A retest gives a kept mechanism the hysteresis' slack in its test of a
    loss (dropped at once): one on the objective's edge is not dropped by
    every twentieth noisy probe. Its mean is still held to the objective
    (:func:`judge`: below it, the retest falls short, a strike).
    """
    floor = params.cpu_min if index == 1 else params.io_min
    return floor if adding else floor - params.hysteresis


def harm_shown(samples, params, adding):
    """Whether a class already loses, beyond doubt, mid-block.

    A sequential look after each pair from the third: a mechanism that
    costs a class half its throughput (the split where I/O is light) is
    dropped after three pairs rather than eight, for every A period a
    probe runs is a period of that loss. Only a loss stops a block early
    (a gain must still be shown over all of it), and each look tests at
    the significance level divided by the number of looks (Bonferroni),
    so the early stops together drop a harmless mechanism no more often
    than the final test alone would.
    """
    done = len(samples) // 2
    looks = params.pairs - 3
    if len(samples) % 2 or done < 3 or looks < 1:
        return False
    alpha = (1.0 - params.confidence) / 2.0 / looks
    for _name, index in CLASSES:
        logs = _log_ratios(samples, index)
        if logs and _p_below(logs, math.log(_floor(params, index, adding)),
                             'less', alpha):
            return True
    return False


def judge(samples, params, adding, mechanism='mechanism', reference=None,
          retry=False):
    """The :class:`Verdict` of a finished probe block.

    ``reference`` is the Verdict a gain must beat instead of no change:
    a wider split, judged like the narrower one against the bare host,
    must serve a class significantly better than the narrower one did.
    ``retry`` says the mechanism is being added again after it was
    dropped: the I/O objective is then raised by the hysteresis, as a
    retest lowers it, so noise alone does not flip it back and forth.
    """
    if any(s[3] for s in samples):
        return blind(mechanism)
    alpha = (1.0 - params.confidence) / 2.0     # two classes tested
    ratios, all_logs = {}, {}
    worse = []
    unproven = []
    better = []
    short = []
    for name, index in CLASSES:
        floor = _floor(params, index, adding)
        logs = _log_ratios(samples, index)
        if not logs:
            ratios[name] = None         # the class is empty or idle
            continue
        all_logs[name] = tuple(logs)
        mean = sum(logs) / len(logs)
        ratios[name] = math.exp(mean)
        bound = math.log(floor)
        if mean < bound or _p_below(logs, bound, 'less', alpha):
            worse.append('%s %.3f < %.2f' % (name, ratios[name], floor))
        elif not adding and mean < math.log(floor + params.hysteresis):
            # a retest's slack is for its test of a loss, not for where the
            # mean may settle: a kept mechanism whose class sits below the
            # objective falls short (a strike: dropped at the second in a
            # row), so none stays below it for good
            unproven.append('%s %.3f < %.2f' % (
                name, ratios[name], floor + params.hysteresis))
        elif (adding and name == 'CPU'
                and not _p_below(logs, bound, 'greater', alpha)):
            # the burden of proof is on the mechanism: the CPU side's
            # lower confidence bound must clear the objective
            unproven.append('CPU %.3f not shown >= %.2f' % (ratios[name],
                                                            floor))
        elif retry and name == 'I/O':
            # and a retry owes the I/O side the slack a retest gives it,
            # for only its mean is held to the objective (the CPU side's
            # lower confidence bound already has to clear it: noise does
            # not re-add a CPU loss)
            if mean < math.log(floor + params.hysteresis):
                short.append('%s %.3f' % (name, ratios[name]))
        ref = None
        if reference is not None:
            ref = (reference.cpu_logs if name == 'CPU'
                   else reference.io_logs)
        if _gain_shown(logs, ref, alpha):
            better.append('%s %.3f' % (name, ratios[name]))
    cpu_r, io_r = ratios['CPU'], ratios['I/O']
    logs = dict(cpu_logs=all_logs.get('CPU', ()),
                io_logs=all_logs.get('I/O', ()))
    if worse:
        return Verdict(mechanism, False, cpu_r, io_r,
                       'a class loses: ' + ', '.join(worse + unproven),
                       loses=True, **logs)
    if unproven:
        return Verdict(mechanism, False, cpu_r, io_r,
                       ('a class may lose: ' if adding else
                        'a class falls short of the objective: ')
                       + ', '.join(unproven), **logs)
    if not better:
        return Verdict(mechanism, False, cpu_r, io_r,
                       'no class gains significantly' + (
                           ' over %s' % reference.mechanism
                           if reference is not None else ''), **logs)
    if short:
        return Verdict(mechanism, False, cpu_r, io_r,
                       'a retry must clear the objective by the hysteresis '
                       '(%.2f): ' % params.hysteresis + ', '.join(short),
                       **logs)
    return Verdict(mechanism, True, cpu_r, io_r,
                   'gains: ' + ', '.join(better) + (
                       ' over %s' % reference.mechanism
                       if reference is not None else ''), **logs)
