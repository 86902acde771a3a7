"""Long Term Context Retention: the paper's Algorithm 1 (§4.2).

The timeout bounds how long a waiting vCPU may hold its hyperthread with
MWAIT. Algorithm 1 is a loop that collects performance data for a period P
under each timeout it tries; here it is a state machine stepped once per
period, so the policy stays pure. One pass of the loop is::

    BASE_UP:    T_e = T_d            measure the baseline
    TRY_UP:     T_e = T_d * 1.1      keep it (T_d *= 1.1) if both classes
                                     sped up, and start over; else
    BASE_DOWN:  T_e = T_d            measure a fresh baseline
    TRY_DOWN:   T_e = T_d * 0.9      keep it (T_d *= 0.9) if both sped up

Two measures of a class's speed-up (``[vsmtio_agent] ltcr_measure``):

``paper``       the paper's: the mean over a class's vCPUs of trial /
                baseline, with IPC for CPU-bound vCPUs and retention
                frequency for I/O-bound ones.
``throughput``  the product's: the class's total work in the trial period
                over the baseline's, instructions retired per second for
                CPU-bound vCPUs and requests served (idle entries: a
                request loop idles once per request) for I/O-bound ones.

IPC cannot see the hyperthread time a retention takes from a CPU-bound
vCPU that would have borrowed the sibling: its IPC rises (it runs beside
a resting sibling) while the instructions it retires fall. Retention
frequency rises with the timeout whether or not more requests are served.
On the simulated host the paper's measure accepts every step up while
CPU-bound throughput falls (doc/benchmarks/simulator.rst); judging by what
each class gets done does not.

A trial is kept only if both classes sped up; a class with no vCPU that
has a usable measurement vetoes the change, so the timeout never moves
on half the evidence, and no trial even starts from a baseline that lacks
a class: a host without a PMU keeps its initial timeout and never moves
the knob for a trial it could not judge.

With the guard, the product asks Algorithm 1's question of a test that
can answer it. One period against one cannot: a period's class
throughput varies by more than one timeout step moves it
(doc/benchmarks/simulator.rst), so "both sped up" is a coin toss that
keeps trades as often as gains, and the timeout walks where the noisier
class's loss hides. So a trial is a probe block
like the guard's (:mod:`vsmtio_agent.policy.probe_stats`): ``2 * pairs``
periods alternating the trial timeout (A) and the desired one (B) in ABBA
order, each class's work summed over the vCPUs it held when the block
began, and the step kept when neither class's mean is below the
baseline's, neither is significantly below, and one is significantly
faster: both sped up, as far as the host can tell. A step that trades one
class for the other is not kept; the timeout moves only for a gain shown.
"""

import dataclasses
import enum
import operator
import statistics
from typing import Optional

from vsmtio_agent import model
from vsmtio_agent.policy import probe_stats

GROW = 1.1
SHRINK = 0.9
# How far the timeout may move from the last timeout the guard verified,
# in Algorithm 1's steps (see ``LtcrState.anchor_ns``).
LEASH = 2
PAPER = 'paper'
THROUGHPUT = 'throughput'
MEASURES = (PAPER, THROUGHPUT)
ABBA = (True, False, False, True)       # A = at the trial timeout


class Phase(str, enum.Enum):
    BASE_UP = 'base-up'
    TRY_UP = 'try-up'
    BASE_DOWN = 'base-down'
    TRY_DOWN = 'try-down'


@dataclasses.dataclass(frozen=True)
class Bounds:
    """Timeout limits in nanoseconds.

    ``reschedule_cost_ns`` is the cost of descheduling and rescheduling a
    vCPU: a retention no longer than that is always cheaper than the switch
    it avoids, so the initial timeout is at least that (§4.2).
    """

    initial_ns: int
    min_ns: int
    max_ns: int
    reschedule_cost_ns: int

    def __post_init__(self):
        if not 0 < self.min_ns <= self.max_ns:
            raise ValueError('timeout bounds must satisfy 0 < min <= max '
                             '(min=%d ns, max=%d ns)'
                             % (self.min_ns, self.max_ns))

    def clamp(self, value):
        return int(min(self.max_ns, max(self.min_ns, round(value))))

    @property
    def start_ns(self):
        return self.clamp(max(self.initial_ns, self.reschedule_cost_ns))


# each measure's reading of a CPU-bound and an I/O-bound vCPU's stats
_MEASURED = {
    PAPER: (operator.attrgetter('ipc'),
            operator.attrgetter('retention_frequency')),
    THROUGHPUT: (operator.attrgetter('instruction_rate'),
                 operator.attrgetter('halt_rate'))}


def performance(stats, roles, measure=PAPER):
    """Each vCPU's LTCR performance measure under its role, or None."""
    if measure not in MEASURES:
        raise ValueError('unknown LTCR measure %r' % (measure,))
    # (one comprehension: this runs for every vCPU in LTCR's periods)
    cpu, io = model.Role.CPU, model.Role.IO
    cpu_value, io_value = _MEASURED[measure]
    role_of = roles.get
    return {ref: (role, cpu_value(st) if role is cpu else io_value(st))
            for ref, st in stats.items()
            if (role := role_of(ref)) is cpu or role is io}


def _paired(baseline, trial):
    """``(role, before, after)`` per vCPU measured in both periods.

    Only under the same role in both.
    """
    for ref, (role, after) in trial.items():
        role_before, before = baseline.get(ref, (None, None))
        if role_before is role and before is not None and after is not None:
            yield role, before, after


def mean_speedups(baseline, trial):
    """Mean speed-up per role between two performance maps.

    Only vCPUs measured in both periods, under the same role, with a
    positive baseline count. A role with none maps to None.
    """
    ratios = {model.Role.CPU: [], model.Role.IO: []}
    for role, before, after in _paired(baseline, trial):
        if before > 0:
            ratios[role].append(after / before)
    return {role: (statistics.fmean(r) if r else None)
            for role, r in ratios.items()}


def total_speedups(baseline, trial):
    """Each role's total in ``trial`` over its total in ``baseline``.

    Over the vCPUs measured in both periods under the same role; a role
    with none, or with nothing done in the baseline, maps to None.
    """
    sums = {model.Role.CPU: [0.0, 0.0], model.Role.IO: [0.0, 0.0]}
    for role, before, after in _paired(baseline, trial):
        sums[role][0] += before
        sums[role][1] += after
    return {role: (after / before if before > 0 else None)
            for role, (before, after) in sums.items()}


def speedups(baseline, trial, measure=PAPER):
    """TESTTIMEOUT's two class speed-ups under ``measure``."""
    if measure == PAPER:
        return mean_speedups(baseline, trial)
    return total_speedups(baseline, trial)


def improved(speedups):
    """TESTTIMEOUT's verdict: both classes strictly faster."""
    cpu = speedups[model.Role.CPU]
    io = speedups[model.Role.IO]
    return cpu is not None and io is not None and cpu > 1 and io > 1


@dataclasses.dataclass(frozen=True)
class LtcrState:
    """Where Algorithm 1 is: desired timeout, phase, and the baseline.

    ``anchor_ns`` is the timeout the guard last verified (retention at it
    kept its objective against no retention), or None without the guard.
    One step of Algorithm 1 is judged on one period against one period,
    and a period's class throughput varies by more than one step moves
    it: a step's cost is below what its test can see, so steps a class
    pays for pass about as often as steps it gains from, and the timeout
    drifts where the other class's gain lies, past the objective before
    the guard's retest catches it. So the timeout stays
    within ``LEASH`` steps of the anchor: what the guard has not judged
    adds up to two steps at most, and the guard's next test of retention
    judges it (:func:`verified`, :func:`rolled_back`).
    """

    desired_ns: int
    effective_ns: int
    phase: Phase
    baseline: tuple = ()
    anchor_ns: Optional[int] = None
    # a trial's probe block: its samples so far and the vCPUs of each class
    samples: tuple = ()
    classes: tuple = ()


def start(bounds, anchored=False):
    """Algorithm 1 at its initial timeout, anchored there with the guard."""
    t = bounds.start_ns
    return LtcrState(desired_ns=t, effective_ns=t, phase=Phase.BASE_UP,
                     anchor_ns=t if anchored else None)


def _limit(state, bounds, value):
    """``value`` within the bounds and within the leash of the anchor."""
    if state.anchor_ns is not None:
        value = min(state.anchor_ns * GROW ** LEASH,
                    max(state.anchor_ns * SHRINK ** LEASH, value))
    return bounds.clamp(value)


def verified(state):
    """The guard kept retention at the desired timeout: anchor it there."""
    return dataclasses.replace(state, anchor_ns=state.desired_ns)


def rolled_back(state):
    """The guard's test of retention failed: back to the anchor.

    The timeout it failed at may be one Algorithm 1 moved to since the
    last verification; the anchor is the last one shown to keep the
    objective, and the one a retry of retention is tested at.
    """
    t = state.anchor_ns if state.anchor_ns is not None else state.desired_ns
    return LtcrState(t, t, Phase.BASE_UP, anchor_ns=state.anchor_ns)


def judgeable(perf):
    """Whether both classes have a usable measurement in ``perf``."""
    seen = {role for role, value in perf.values() if value is not None}
    return model.Role.CPU in seen and model.Role.IO in seen


def hold(state):
    """Abandon a trial in flight: back to measuring a baseline at T_d.

    Used while something else owns the periods (the guard's probes): the
    next step starts Algorithm 1's loop afresh at the desired timeout.
    A state held already is returned as it is (it runs every period the
    guard keeps retention out of force).
    """
    if (state.effective_ns == state.desired_ns
            and state.phase is Phase.BASE_UP and state.baseline == ()
            and state.samples == () and state.classes == ()):
        return state
    return LtcrState(state.desired_ns, state.desired_ns, Phase.BASE_UP,
                     anchor_ns=state.anchor_ns)


def step(state, bounds, perf, measure=PAPER, test=None):
    """Advance Algorithm 1 by one period whose data is ``perf``.

    ``perf`` is what :func:`performance` measured while ``effective_ns``
    was in force. Returns the new state; its ``effective_ns`` is the
    timeout for the next period. ``test`` (the guard's
    :class:`~vsmtio_agent.policy.guard.Params`) makes each trial a probe
    block judged as the module says; without it a trial is one period.
    """
    if test is not None:
        return _block_step(state, bounds, perf, test)
    t_d = state.desired_ns
    a = state.anchor_ns

    def to(desired, effective, phase, baseline=()):
        return LtcrState(desired, effective, phase, baseline, a)

    if state.phase in (Phase.BASE_UP, Phase.BASE_DOWN) and not judgeable(
            perf):
        # a trial this host could not judge would only move the knob (on a
        # stock host, kvm.halt_poll_ns for every guest): measure again
        return to(t_d, t_d, state.phase)
    if state.phase is Phase.BASE_UP:
        return to(t_d, _limit(state, bounds, t_d * GROW), Phase.TRY_UP,
                  tuple(perf.items()))
    if state.phase is Phase.BASE_DOWN:
        return to(t_d, _limit(state, bounds, t_d * SHRINK), Phase.TRY_DOWN,
                  tuple(perf.items()))
    kept = improved(speedups(dict(state.baseline), perf, measure))
    if state.phase is Phase.TRY_UP:
        if kept:
            t_d = _limit(state, bounds, t_d * GROW)
            return to(t_d, t_d, Phase.BASE_UP)
        return to(t_d, t_d, Phase.BASE_DOWN)
    if kept:
        t_d = _limit(state, bounds, t_d * SHRINK)
    return to(t_d, t_d, Phase.BASE_UP)


def _trial_ns(state, bounds):
    """The timeout the trial of ``state`` tries."""
    up = state.phase in (Phase.BASE_UP, Phase.TRY_UP)
    return _limit(state, bounds,
                  state.desired_ns * (GROW if up else SHRINK))


def _totals(perf, classes):
    """``(cpu, io)``: each class's work, over the vCPUs it began with.

    None for a class one of whose vCPUs has no measurement (gone, or
    moved to the other role: the block cannot compare like with like).
    """
    out = []
    for role, refs in zip((model.Role.CPU, model.Role.IO), classes):
        total = 0.0
        for ref in refs:
            got = perf.get(ref)
            if got is None or got[0] is not role or got[1] is None:
                return None, None
            total += got[1]
        out.append(total)
    return tuple(out)


def _block_step(state, bounds, perf, test):
    """:func:`step` with a probe block for each trial."""
    t_d = state.desired_ns
    a = state.anchor_ns
    if state.phase in (Phase.BASE_UP, Phase.BASE_DOWN):
        if not judgeable(perf):
            return LtcrState(t_d, t_d, state.phase, anchor_ns=a)
        trial = _trial_ns(state, bounds)
        up = state.phase is Phase.BASE_UP
        if trial == t_d:
            # at a bound or the leash's end: nothing to try this way
            return LtcrState(t_d, t_d, Phase.BASE_DOWN if up
                             else Phase.BASE_UP, anchor_ns=a)
        classes = tuple(
            frozenset(ref for ref, (role, value) in perf.items()
                      if role is r and value is not None)
            for r in (model.Role.CPU, model.Role.IO))
        return LtcrState(t_d, trial, Phase.TRY_UP if up else Phase.TRY_DOWN,
                         anchor_ns=a, classes=classes)
    up = state.phase is Phase.TRY_UP
    cpu, io = _totals(perf, state.classes)
    if cpu is None:
        # the classes changed under the block: start again from the desired
        return LtcrState(t_d, t_d, Phase.BASE_UP, anchor_ns=a)
    samples = state.samples + ((ABBA[len(state.samples) % 4], cpu, io,
                                False),)
    if (len(samples) < 2 * test.pairs
            and not probe_stats.harm_shown(samples, test, False)):
        return dataclasses.replace(
            state, samples=samples,
            effective_ns=(_trial_ns(state, bounds)
                          if ABBA[len(samples) % 4] else t_d))
    if probe_stats.judge(samples, test, False).kept:
        t_d = _trial_ns(state, bounds)
        return LtcrState(t_d, t_d, Phase.BASE_UP, anchor_ns=a)
    return LtcrState(t_d, t_d, Phase.BASE_DOWN if up else Phase.BASE_UP,
                     anchor_ns=a)


def step_test(guard_params):
    """The test a trial's block must pass: no class slower, one faster.

    The guard's pairs and confidence, the objective "no change" for both
    classes and no slack: judged as a retest (a mean below 1.0 is a
    shortfall, one significantly below a loss), so the two classes are
    held alike, unlike the guard's addition test where the CPU side must
    be shown to keep its objective.
    """
    return dataclasses.replace(guard_params, cpu_min=1.0, io_min=1.0,
                               hysteresis=0.0)
