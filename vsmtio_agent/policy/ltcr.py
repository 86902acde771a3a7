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
CPU-bound throughput falls (doc/source/benchmarks/simulator.rst); judging
by what each class gets done does not.

A trial is kept only if both classes sped up; a class with no vCPU that
has a usable measurement vetoes the change, so the timeout never moves
on half the evidence, and no trial even starts from a baseline that lacks
a class: a host without a PMU keeps its initial timeout and never moves
the knob for a trial it could not judge.

With the guard on, the product does not run Algorithm 1: one period
against one cannot tell a step's gain from noise (a period's class
throughput varies by more than one step moves it), so the guard searches
each VM's timeout itself on a ladder of doubling rungs, each judged by a
candidate's probe (:mod:`vsmtio_agent.policy.search`). Algorithm 1 is the
paper-literal configuration's, and the bench's point of comparison.
"""

import dataclasses
import enum
import operator
import statistics

from vsmtio_agent import model

GROW = 1.1
SHRINK = 0.9
PAPER = 'paper'
THROUGHPUT = 'throughput'
MEASURES = (PAPER, THROUGHPUT)


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
    """Where Algorithm 1 is: desired timeout, phase, and the baseline."""

    desired_ns: int
    effective_ns: int
    phase: Phase
    baseline: tuple = ()


def start(bounds):
    """Algorithm 1 at its initial timeout."""
    t = bounds.start_ns
    return LtcrState(desired_ns=t, effective_ns=t, phase=Phase.BASE_UP)


def judgeable(perf):
    """Whether both classes have a usable measurement in ``perf``."""
    seen = {role for role, value in perf.values() if value is not None}
    return model.Role.CPU in seen and model.Role.IO in seen


def step(state, bounds, perf, measure=PAPER):
    """Advance Algorithm 1 by one period whose data is ``perf``.

    ``perf`` is what :func:`performance` measured while ``effective_ns``
    was in force. Returns the new state; its ``effective_ns`` is the
    timeout for the next period.
    """
    t_d = state.desired_ns

    def to(desired, effective, phase, baseline=()):
        return LtcrState(desired, effective, phase, baseline)

    if state.phase in (Phase.BASE_UP, Phase.BASE_DOWN) and not judgeable(
            perf):
        # a trial this host could not judge would only move the knob (on a
        # stock host, kvm.halt_poll_ns for every guest): measure again
        return to(t_d, t_d, state.phase)
    if state.phase is Phase.BASE_UP:
        return to(t_d, bounds.clamp(t_d * GROW), Phase.TRY_UP,
                  tuple(perf.items()))
    if state.phase is Phase.BASE_DOWN:
        return to(t_d, bounds.clamp(t_d * SHRINK), Phase.TRY_DOWN,
                  tuple(perf.items()))
    kept = improved(speedups(dict(state.baseline), perf, measure))
    if state.phase is Phase.TRY_UP:
        if kept:
            t_d = bounds.clamp(t_d * GROW)
            return to(t_d, t_d, Phase.BASE_UP)
        return to(t_d, t_d, Phase.BASE_DOWN)
    if kept:
        t_d = bounds.clamp(t_d * SHRINK)
    return to(t_d, t_d, Phase.BASE_UP)
