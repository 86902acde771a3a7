"""The statistics of a probe block: is a mechanism shown to help?

A probe block (:mod:`vsmtio_agent.policy.guard`) alternates periods with
the mechanism (A) and without it (B) in ABBA order. Each period measures
every VM on the host by its own throughput: a *computing* VM by the
instructions its vCPUs retire per second, a *serving* VM by the requests
and packets it serves (:attr:`vsmtio_agent.model.DomainCounters.served`,
:func:`vsmtio_agent.policy.probing.measure`).
Each adjacent A/B pair gives one log-ratio per VM, and this module tests
them with one-sided t-tests (``scipy.stats``):

- every VM is held to its own floor (``cpu_min`` for a computing VM,
  ``io_min`` for a serving one): a VM shown below it, or a computing VM
  whose mean is below it, makes the mechanism lose. The tests of the VMs
  share the significance level (Bonferroni), so a host with many VMs
  drops a harmless mechanism no more often than one with two. No class
  total is judged: one tenant's gain, honest or shaped, cannot hide
  another's loss;
- the mechanism's gain is the geometric mean of the serving VMs' ratios
  (each tenant counts once, whatever its size or its number of tiny
  waits; every VM's where none serves), which must be significantly
  above no change (or above a reference probe's, for a longer timeout or
  a wider split). What the mechanisms are for is I/O served; a computing
  VM is held to its floor, not traded against it, so the guard seeks
  what the oracle of the bench does (the most I/O with every tenant at
  its floor), and a cost within the floors does not cancel a gain.

Pure: samples in, verdict out. Apart from the guard's state machine
because it is the part a reviewer checks against the statistics, and the
part logs, status and reports quote (each VM's ratio, the reason). The
rules' own: the search has its bounds (:mod:`vsmtio_agent.policy.bounds`);
what both read and report, a VM's class and the verdict, is in
:mod:`vsmtio_agent.policy.probing`.
"""

import functools
import math

import numpy
from scipy import optimize as scipy_optimize
from scipy import special as scipy_special
from scipy import stats as scipy_stats

from vsmtio_agent.policy import probing


# A period in which a VM did nothing in one arm and something in the other
# is a ratio of this much (a VM starved by the mechanism loses, it is not
# left out); nothing in both arms is no change.
_STARVED = math.log(1e3)


def _pair_log(va, vb):
    if va is None or vb is None:
        return None
    if va > 0 and vb > 0:
        return math.log(va / vb)
    if va <= 0 and vb <= 0:
        return 0.0
    return -_STARVED if va <= 0 else _STARVED


def vm_logs(samples, vm):
    """Log of A over B for ``vm`` in each adjacent pair; None if unmeasured.

    ``samples`` are ``(with, {vm: value})`` in ABBA order.
    """
    out = []
    for i in range(0, len(samples) - 1, 2):
        a, b = samples[i], samples[i + 1]
        if not a[0]:
            a, b = b, a
        got = _pair_log(a[1].get(vm), b[1].get(vm))
        if got is None:
            return None
        out.append(got)
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


# the grid step of look_alpha's recursion, in standard deviations of a look
_GRID = 0.02


@functools.lru_cache(maxsize=None)
def look_alpha(alpha, looks):
    """The level each of up to ``looks`` looks at growing evidence tests at.

    Pocock's boundary: the one level whose chance that some look of
    ``looks`` equally spaced ones crosses it, under no effect, is
    ``alpha``. The looks see nested evidence (each block's pairs join the
    pool the earlier looks saw), so their tests are strongly correlated,
    and the level is above Bonferroni's ``alpha / looks`` (at nine looks
    of 0.025, 0.0056 against 0.0028). It is the same at every look,
    the first included: a level that starts at ``alpha`` and falls as
    ``alpha / k`` at the ``k``-th look (this guard's before) spends
    ``alpha`` times the harmonic number, and keeps a cost right at the
    floor 1.7 times as often as it says. Computed by the recursion of
    Armitage, McPherson and Rowe (1969) on a grid; Pocock (1977) tabulates
    the same boundary (2.413 standard errors at five looks of 0.025).
    """
    if looks <= 1:
        return alpha
    c = scipy_optimize.brentq(
        lambda c: _crossing(c, looks) - alpha, scipy_stats.norm.isf(alpha),
        scipy_stats.norm.isf(alpha / looks) + 0.1, xtol=1e-6)
    return float(scipy_stats.norm.sf(c))


def design_looks(params):
    """How many blocks' looks a pool may span: blocks of ``pairs``, capped."""
    return max(1, params.pool_pairs // params.pairs)


def keep_level(params, tries=1):
    """The level each of an addition's tests of a keep runs at.

    An addition is kept only where every computing VM is shown at its
    floor and the gain is shown, so it is kept in error only where the
    test of the VM that is in fact short (or of a gain that is not there)
    errs: each test at level ``alpha`` keeps a mechanism that puts some
    VM below its floor at most ``alpha`` of the time, however many VMs
    there are (an intersection-union test, Berger 1982). The level is not
    shared among the VMs, as the tests of a loss share it (any one VM
    shown to lose drops a mechanism, so each of them may err); it is
    shared among the tests a search runs for one choice (``tries``: the
    rungs of a ladder, any of which it may keep) and spent over the looks
    a pool spans (:func:`look_alpha`).
    """
    return look_alpha((1.0 - params.confidence) / tries,
                      design_looks(params))


def _crossing(c, looks):
    """P(some ``S_k >= c sqrt(k)``, ``k <= looks``): ``S_k`` sums k N(0,1).

    The density of ``S_k`` on the paths not yet crossed, on a grid whose
    cells straddling the boundary count in part.
    """
    h = _GRID
    x = numpy.arange(-8.0 * math.sqrt(looks) - 8.0,
                     c * math.sqrt(looks) + 8.0, h)
    kernel = scipy_stats.norm.pdf(numpy.arange(-8.0, 8.0 + h / 2, h)) * h
    f = scipy_stats.norm.pdf(x) * h
    crossed = 0.0
    for k in range(1, looks + 1):
        if k > 1:
            f = numpy.convolve(f, kernel, mode='same')
        over = numpy.clip((x + h / 2 - c * math.sqrt(k)) / h, 0.0, 1.0)
        crossed += float((f * over).sum())
        f = f * (1.0 - over)
    return crossed


def blind(mechanism, domain=None, timeout_ns=None, factor=None):
    return probing.Verdict(
        mechanism, False,
        'a computing VM\'s throughput cannot be measured here (no '
        'instruction counter), so nothing shows it does not '
        'lose', domain=domain, timeout_ns=timeout_ns, loses=True,
        factor=factor)


def gain_p(logs, reference):
    """Welch's p-value that ``logs`` beat ``reference``'s log-ratios."""
    if len(set(logs)) < 2 and len(set(reference)) < 2:
        return 0.0 if min(logs) > max(reference) else 1.0
    return float(scipy_stats.ttest_ind(
        logs, reference, equal_var=False, alternative='greater').pvalue)


def floor(params, kind, adding):
    """The ratio a VM of ``kind`` is held to in this block.

    A retest gives a kept mechanism the hysteresis' slack in its test of a
    loss: one on the objective's edge is not dropped by every twentieth
    noisy probe. Its mean is still held to the objective (:func:`judge`:
    below it, the retest falls short, a strike).
    """
    f = params.cpu_min if kind == probing.COMPUTING else params.io_min
    return f if adding else f - params.hysteresis


def block_logs(samples, kinds):
    """``{vm: logs}`` of every VM measured in every pair of the block."""
    out = {}
    for vm, _kind in kinds:
        logs = vm_logs(samples, vm)
        if logs:
            out[vm] = logs
    return out


def utility_logs(logs_by_vm, kinds=None):
    """Per pair, the mean of the serving VMs' log-ratios: the gain.

    The log of the serving VMs' geometric-mean ratio (each tenant counts
    once, whatever its size or its number of tiny waits), of every VM's
    where none serves. The computing VMs are held by their floors, not
    traded against the I/O.
    """
    kind_of = dict(kinds or ())
    vms = [logs for vm, logs in sorted(logs_by_vm.items())
           if kind_of.get(vm) == probing.SERVING] or list(logs_by_vm.values())
    if not vms:
        return []
    return [math.fsum(pair) / len(vms) for pair in zip(*vms)]


def harm_shown(samples, kinds, params, adding):
    """Whether a VM already loses, beyond doubt, mid-block.

    A sequential look after each pair from the third: a mechanism that
    costs a VM half its throughput is dropped after three pairs rather
    than eight, for every A period a probe runs is a period of that loss.
    Only a loss stops a block early, and each look tests at the
    significance level divided by the number of looks and of VMs
    (Bonferroni), so the early stops together drop a harmless mechanism
    no more often than the final test alone would.
    """
    done = len(samples) // 2
    looks = params.max_pairs - 3
    if len(samples) % 2 or done < 3 or looks < 1:
        return False
    logs_by_vm = block_logs(samples, kinds)
    if not logs_by_vm:
        return False
    alpha = (1.0 - params.confidence) / looks / len(logs_by_vm)
    kind_of = dict(kinds)
    return any(_p_below(logs, math.log(floor(params, kind_of[vm], adding)),
                        'less', alpha)
               for vm, logs in logs_by_vm.items())


# standard errors by which a rail's loss must be shown (one-sided, about
# one chance in 700 for a VM that loses nothing, at each look)
RAIL_Z = 3.0


def rail_crossed(samples, kinds, params, spread=None):
    """Whether a VM's A arms already cost it past a window's floor.

    :func:`harm_shown` looks from the third pair on; a mechanism that
    costs a VM a tenth of what it does would by then have held it below
    ``window_min`` for a whole window (five periods hold three A arms).
    So after each pair a VM whose A arms are below ``window_min`` of its
    B arms on average, by a loss shown beyond its own noise (``RAIL_Z``
    standard errors of its pairs' mean, from ``spread``: the standard
    deviation of one pair's log-ratio, as the periods held before the
    block, or before the last change of what is kept, show it), ends the
    block at once. No such mechanism could be
    kept (the floors are above ``window_min``), and :func:`judge` finds
    the VM's loss. A computing VM's work varies little from period to
    period, so one pair settles a loss of a tenth; a serving VM's varies
    more, and one that has no held periods is left to the test.
    """
    if len(samples) % 2 or not samples:
        return False
    limit = math.log(params.window_min)
    kind_of = dict(kinds)
    spread = spread or {}
    for vm, logs in block_logs(samples, kinds).items():
        sd = spread.get(vm)
        if sd is None:
            if kind_of[vm] != probing.COMPUTING:
                continue
            sd = 0.0
        se = sd / math.sqrt(len(logs))
        if math.fsum(logs) / len(logs) < min(limit, -RAIL_Z * se):
            return True
    return False


def undecided(samples, kinds, params, prior=None, tries=1):
    """Whether an addition's block should run more pairs before judging.

    A computing VM whose confidence interval straddles its floor (its
    mean on one side, the bound on the other) is neither shown to keep
    its floor nor to lose it: more pairs decide it (the guard runs up to
    ``max_pairs``), where judging now would keep a mechanism whose true
    cost may be past the floor, or refuse one whose cost is within it,
    as the block's noise happens to fall. ``prior`` is the evidence
    earlier blocks of the same comparison left (:func:`pooled`);
    ``tries`` as :func:`judge`'s.
    """
    logs_by_vm = pooled(prior, block_logs(samples, kinds))
    if not logs_by_vm:
        return False
    alpha = (1.0 - params.confidence) / len(logs_by_vm)
    # (shown kept at the level judge keeps at)
    alpha_keep = keep_level(params, tries)
    kind_of = dict(kinds)
    for vm, logs in logs_by_vm.items():
        if kind_of[vm] != probing.COMPUTING:
            continue
        bound = math.log(params.cpu_min)
        mean = math.fsum(logs) / len(logs)
        if mean >= bound and not _p_below(logs, bound, 'greater',
                                          alpha_keep):
            return True
        if mean < bound and not _p_below(logs, bound, 'less', alpha):
            return True
    return False


def pooled(prior, logs_by_vm, cap=None):
    """A block's logs after those earlier blocks of its comparison left.

    ``prior`` (``{vm: logs}`` or None) counts only where it measured the
    same VMs as the block; ``cap`` keeps each VM's latest pairs.
    """
    if prior and logs_by_vm and set(prior) == set(logs_by_vm):
        logs_by_vm = {vm: list(prior[vm]) + list(logs)
                      for vm, logs in logs_by_vm.items()}
    if cap:
        logs_by_vm = {vm: list(logs)[-cap:]
                      for vm, logs in logs_by_vm.items()}
    return logs_by_vm


def _welch_p(a, b):
    """Welch's two-sided p-value that ``a`` and ``b`` share a mean.

    In floats with ``stdtr`` (as :func:`_p_below`): it is asked of every
    VM at every look of a pooled block, where scipy's ``ttest_ind``
    costs a millisecond a call.
    """
    na, nb = len(a), len(b)
    ma, mb = math.fsum(a) / na, math.fsum(b) / nb
    va = math.fsum((x - ma) ** 2 for x in a) / (na - 1) / na
    vb = math.fsum((x - mb) ** 2 for x in b) / (nb - 1) / nb
    if not va + vb > 0.0:
        return 1.0 if ma == mb else 0.0
    t = (ma - mb) / math.sqrt(va + vb)
    # Welch-Satterthwaite's (va + vb)^2 / (va^2/(na-1) + vb^2/(nb-1)),
    # in shares of va + vb: squared variances of 1e-160 underflow to 0
    ra, rb = va / (va + vb), vb / (va + vb)
    df = 1.0 / (ra * ra / (na - 1) + rb * rb / (nb - 1))
    return float(2.0 * scipy_special.stdtr(df, -abs(t)))


def consistent(prior, logs_by_vm, params, kinds=()):
    """Whether a block measures what the earlier blocks of its pool did.

    Pooling assumes one effect; a workload that changed since makes
    another, whose pairs the old ones would outvote (a gain that has
    gone, kept on the strength of the pairs that showed it). So a block
    whose own pairs differ from the pool's for any VM, or in their mean
    over the VMs (the gain), by Welch's two-sided test at the
    significance level shared among them, starts a pool of its own.
    """
    if not prior or not logs_by_vm or set(prior) != set(logs_by_vm):
        return False
    pairs = [(prior[vm], logs) for vm, logs in logs_by_vm.items()]
    pairs.append((utility_logs(prior, kinds), utility_logs(logs_by_vm, kinds)))
    alpha = (1.0 - params.confidence) / len(pairs)
    return all(len(a) < 2 or len(b) < 2 or _welch_p(a, b) >= alpha
               for a, b in pairs)


def _short(logs, kind, bound, alpha):
    """Whether ``logs`` put a VM of ``kind`` below its floor ``bound``.

    A loss shown; for a computing VM, its mean below the floor as well
    (the floor's margin below no change is what an unaffected VM's noise
    needs); a serving VM's floor is no change itself, so only a loss
    shown counts, or every bystander would lose half the tests.
    """
    return _p_below(logs, bound, 'less', alpha) or (
        kind == probing.COMPUTING and math.fsum(logs) < bound * len(logs))


def judge(samples, kinds, params, adding, mechanism='mechanism',
          domain=None, timeout_ns=None, reference=None, retry=False,
          tries=1, factor=None, prior=None, past=None):
    """The :class:`~vsmtio_agent.policy.probing.Verdict` of a finished block.

    ``kinds`` is ``((vm, kind), ...)``, fixed when the block began.
    ``reference`` is the Verdict a gain must beat instead of no change (a
    longer or shorter timeout, a wider split: each judged against the
    same bare arm as the one it would replace). ``retry`` says the
    mechanism is being added again after it was dropped: its gain must
    then clear the hysteresis, as a retest's floor is lowered by it, so
    noise alone does not flip it back and forth. ``tries`` is how many
    such tests a search may run for one choice (the rungs of a timeout
    ladder): the gain and each computing VM's floor are tested at the
    significance level divided by it (:func:`keep_level`), so walking the
    ladder keeps a rung that gains nothing, or that puts a VM below its
    floor, no more often than one test would.

    ``prior`` is what earlier blocks of the same comparison (the same A
    and B arms, the same VMs) measured, ``{vm: logs}``. A cost or a gain
    within a block's noise of the floor, which no one block shows either
    way, is shown by several: the tests of a keep (a floor shown kept, a
    gain shown) run on the pooled logs, every block a look of a
    sequential test of as many looks as the pool holds blocks
    (:func:`look_alpha`), so looking again at growing evidence keeps a
    mechanism that misses its floor as often as one test; a loss
    is shown by the pooled logs or by this block's own (what a workload
    that changed since does now is not averaged away).

    ``past`` is a pool this block's pairs departed from (``{vm: logs}``):
    the block is judged on its own, and a VM ``past`` shows below its
    floor (as the pool would: a loss shown, a computing VM's mean) loses
    all the same. Where an effect moves with the workload, a block that
    caught it at its best keeps nothing the pairs just before refuted.
    """
    if any(s[2] for s in samples):
        return blind(mechanism, domain, timeout_ns)
    common = dict(domain=domain, timeout_ns=timeout_ns, factor=factor)
    logs_by_vm = block_logs(samples, kinds)
    if not logs_by_vm:
        return probing.Verdict(mechanism, False,
                               'no VM was measured in every '
                               'period of the probe', **common)
    own = logs_by_vm
    logs_by_vm = pooled(prior, own)
    # (the pooled logs are more than this block's own)
    earlier = logs_by_vm is not own
    kind_of = dict(kinds)
    n = len(logs_by_vm)
    alpha = (1.0 - params.confidence) / n
    # (a loss is tested at the level shared among the VMs, a keep at
    # keep_level's)
    alpha_keep = keep_level(params, tries)
    ratios = []
    worse = []
    short = []
    for vm in sorted(logs_by_vm):
        logs = logs_by_vm[vm]
        kind = kind_of[vm]
        mean = math.fsum(logs) / len(logs)
        ratio = math.exp(mean)
        ratios.append((vm, kind, ratio))
        f = floor(params, kind, adding)
        bound = math.log(f)
        # (a computing VM is held to its floor by its mean as well)
        before = (past or {}).get(vm)
        if _short(logs, kind, bound, alpha) or (
                earlier and _p_below(own[vm], bound, 'less', alpha)):
            worse.append('%s %.3f < %.2f' % (vm, ratio, f))
        elif before and _short(before, kind, bound, alpha):
            worse.append('%s %.3f < %.2f in the %d pairs before this '
                         'block, which it departs from' % (
                             vm, math.exp(math.fsum(before) / len(before)),
                             f, len(before)))
        elif adding and kind == probing.COMPUTING and not _p_below(
                logs, bound, 'greater', alpha_keep):
            # an addition is kept only where the block shows the VM
            # keeps its floor: one whose interval still straddles it
            # after every pair the block may run is a coin's toss, and
            # a cost right at the floor would leave it below half the
            # time
            short.append('%s %.3f not shown >= %.2f' % (vm, ratio, f))
        elif (not adding and kind == probing.COMPUTING
              and mean < math.log(f + params.hysteresis)):
            # a retest's slack is for its test of a loss, not for where
            # the mean may settle: a kept mechanism under which a VM sits
            # below its floor falls short (a strike: dropped at the
            # second in a row), so none stays below it for good
            short.append('%s %.3f < %.2f' % (vm, ratio,
                                             f + params.hysteresis))
    util = utility_logs(logs_by_vm, kinds)
    mean_util = math.fsum(util) / len(util)
    out = dict(ratios=tuple(ratios), utility=math.exp(mean_util),
               utility_logs=tuple(util), **common)
    if worse:
        return probing.Verdict(mechanism, False,
                               'a VM loses: ' + ', '.join(worse),
                               loses=True, **out)
    if short:
        # (an addition's VM not shown at its floor may be past it: a
        # shorter timeout, not a longer one, is what the search tries)
        return probing.Verdict(mechanism, False,
                               'a VM falls short of its floor: '
                               + ', '.join(short), loses=adding, **out)
    against = ''
    if reference is not None and reference.utility_logs:
        gained = gain_p(util, list(reference.utility_logs)) < alpha_keep
        against = ' over %s' % _describe(reference)
    else:
        gained = _p_below(util, 0.0, 'greater', alpha_keep)
    if not gained:
        return probing.Verdict(mechanism, False,
                               'no gain shown%s (geometric mean '
                               '%.3f)' % (against, math.exp(mean_util)),
                               **out)
    if retry and mean_util < math.log(1.0 + params.hysteresis):
        return probing.Verdict(mechanism, False,
                               'a retry must gain more than the '
                               'hysteresis (%.2f): %.3f' % (
                                   params.hysteresis, math.exp(mean_util)),
                               **out)
    return probing.Verdict(mechanism, True,
                           'gains %.3f%s, every VM at its floor'
                           % (math.exp(mean_util), against), **out)


def _describe(v):
    if v.timeout_ns is not None:
        return '%d us' % (v.timeout_ns // 1000)
    if v.factor is not None:
        return 'weight x%g' % v.factor
    return v.mechanism
