"""The guard: a mechanism stays on only where measurement shows it helps.

The product's promise is that it never leaves a host worse. vSMT-IO's
mechanisms can: a retention holds a hyperthread a CPU-bound vCPU could have
used, the sibling split halves the threads CPU-bound vCPUs get when I/O is
light, borrowing puts a CPU-bound vCPU where an I/O-bound one is about to
wake. So the guard tests each mechanism against what the host does without
it, on this host's own workloads, and keeps it only if neither class loses
beyond the operator's objective and at least one gains.

A test is a *probe block*: ``2 * pairs`` periods that alternate the
candidate configuration (A) and the same without the mechanism (B) in
ABBA order, so a drift in load weighs on both arms alike. Each period gives
the CPU-bound class's instructions per second and the I/O-bound class's
requests per second (idle entries, see :class:`~vsmtio_agent.model.
VcpuCounters`). The log-ratios of the adjacent A/B periods are tested with
a one-sided t-test (each class at half the significance level: two are
tested):

- a mechanism is *added* when the CPU-bound class is shown (the lower
  confidence bound of its ratio) to keep at least ``cpu_min``, the
  I/O-bound class's mean ratio meets ``io_min`` and is not significantly
  below it, and one class is significantly faster: the burden of proof is
  on the mechanism;
- a kept mechanism is *retested* every ``retest_periods`` by the same
  test, the objective relaxed by ``hysteresis`` for the test of a loss
  (and when a retest drops one, what stays kept is retested against the
  bare host at once: it was verified with what just went);
  it is dropped at once when a class loses beyond that, and after two
  failed retests in a row when it only stopped showing a gain or a class's
  mean fell short of the objective itself (a noisy period does not flip
  it, and nothing stays kept below the objective);
- a dropped mechanism is retried after an exponential back-off (one that
  made a class lose waits the longest back-off at once), and a
  retry must clear the I/O objective by the ``hysteresis``: the band works
  both ways, so a mechanism whose true effect sits just below the
  objective is not re-added by every noisy probe that lands above it
  (and kept, costing its class, until the next retest drops it again).

The classes are fixed for the whole block from what does not depend on
the mechanisms (a vCPU that idles at least ``io_halt_rate`` times a second
is I/O-bound), so both arms are measured on the same vCPUs. A class that
cannot be measured (no instruction counter: no PMU) cannot be shown not to
lose, so no mechanism is kept while CPU-bound vCPUs are present.

Mechanisms depend on each other: RASS's split classifies by retention rate
and borrowing needs the split. A mechanism is tested only when what it
needs is kept, and dropping one drops what needs it. The guard is pure:
samples in, state out. This module is its state machine (what to probe,
when, what is kept); the tests of a block are
:mod:`vsmtio_agent.policy.probe_stats`.
"""

import dataclasses
from typing import Optional

from vsmtio_agent.policy import probe_stats


RETENTION = 'retention'
SPLIT = 'split'
BORROW = 'borrow'
# The split is graded: it starts on an eighth of the cores (those where
# I/O-bound vCPUs wait longest, rass.split_order) and widens a step at a
# time while the wider split still meets the objective against no split
# at all, so the CPU side's losses never add up step by step.
SPLIT_QUARTER = 'split-1/4'
SPLIT_HALF = 'split-1/2'
SPLIT_ALL = 'split-all'
WIDER = (SPLIT_QUARTER, SPLIT_HALF, SPLIT_ALL)
SHARES = {SPLIT: 0.125, SPLIT_QUARTER: 0.25, SPLIT_HALF: 0.5,
          SPLIT_ALL: 1.0}
MECHANISMS = (RETENTION, SPLIT, BORROW) + WIDER
REQUIRES = {SPLIT: RETENTION, BORROW: SPLIT, SPLIT_QUARTER: SPLIT,
            SPLIT_HALF: SPLIT_QUARTER, SPLIT_ALL: SPLIT_HALF}
BUNDLE = {SPLIT: (BORROW,)}        # added together, retested apart

HOLD = 'hold'
PROBE = 'probe'
ABBA = (True, False, False, True)       # A = with the mechanism

# the verdict of a probe block and how it is reached
Verdict = probe_stats.Verdict
judge = probe_stats.judge


@dataclasses.dataclass(frozen=True)
class Params:
    """The operator's objective and the probing schedule."""

    cpu_min: float = 0.97
    io_min: float = 1.0
    pairs: int = 8
    confidence: float = 0.9
    hysteresis: float = 0.01
    retest_periods: int = 150
    max_backoff: int = 8
    io_halt_rate: float = 20.0

    def __post_init__(self):
        if self.pairs < 2 or self.pairs % 2:
            raise ValueError('probe pairs must be an even number >= 2, got '
                             '%r' % (self.pairs,))
        if not 0.5 < self.confidence < 1.0:
            raise ValueError('confidence must be within (0.5, 1), got %r'
                             % (self.confidence,))

    @classmethod
    def from_conf(cls, conf):
        o = conf.vsmtio_agent
        return cls(cpu_min=o.guard_cpu_min, io_min=o.guard_io_min,
                   pairs=o.guard_probe_pairs,
                   confidence=o.guard_confidence,
                   retest_periods=o.guard_retest_periods,
                   io_halt_rate=o.guard_io_halt_rate)


@dataclasses.dataclass(frozen=True)
class State:
    kept: frozenset = frozenset()
    phase: str = HOLD
    countdown: int = 0
    candidate: Optional[str] = None
    adding: bool = True
    position: int = 0
    io_class: frozenset = frozenset()
    samples: tuple = ()                 # (with, cpu, io, blind) a period
    in_force: frozenset = frozenset()   # what the period being run has
    backoff: tuple = ()                 # ((mechanism, periods, waited), ..)
    turn: int = 0                       # round robin of the retests
    strikes: frozenset = frozenset()    # kept, one failed retest behind
    verdicts: tuple = ()                # the last Verdict per mechanism
    finished: Optional['Block'] = None  # the block the last step ended
    recheck: bool = False               # what is kept, against none, next

    @property
    def probing(self):
        return self.phase == PROBE

    @property
    def split_share(self):
        """The share of cores the split covers in the period being run."""
        return split_share(self.in_force)

    def verdict(self, mechanism):
        for v in self.verdicts:
            if v.mechanism == mechanism:
                return v
        return None


@dataclasses.dataclass(frozen=True)
class Block:
    """A probe block as it ended: its two arms and whether it passed.

    ``passed`` is the test's verdict before the hysteresis keeps a
    mechanism for one more retest: the engine reads it to anchor the
    retention timeout (:func:`vsmtio_agent.policy.ltcr.verified`) or roll
    it back, and a strike is a failed test of the timeout it ran at.
    """

    a: frozenset
    b: frozenset
    passed: bool

    @property
    def tests_retention(self):
        """Whether the block judged retention against none at all."""
        return RETENTION in self.a and RETENTION not in self.b


def start():
    """The guard before any evidence: nothing kept, the first probe next."""
    return State()


def io_class(stats, params):
    """The vCPUs measured as I/O-bound: they idle often enough."""
    return frozenset(ref for ref, st in stats.items()
                     if st.halt_rate is not None
                     and st.halt_rate >= params.io_halt_rate)


def measure(stats, io_refs):
    """One period's ``(cpu, io, blind)``.

    ``cpu`` is the CPU-bound class's instructions per second and ``io``
    the I/O-bound class's requests per second, None for an empty class;
    ``blind`` says the CPU-bound class exists but has no instruction
    counter.
    """
    cpu = io = 0.0
    n_cpu = n_io = 0
    blind = False
    for ref, st in stats.items():
        if ref in io_refs:
            if st.halt_rate is not None:
                io += st.halt_rate
                n_io += 1
        else:
            n_cpu += 1
            if st.instruction_rate is None:
                blind = True
            else:
                cpu += st.instruction_rate
    return (cpu if n_cpu and not blind else None, io if n_io else None,
            blind)


def climbed(state):
    """Whether every mechanism that may be tried has been judged once.

    Until then the guard is still on its first climb (retention, the
    split, each wider split in turn) and what it keeps is not yet what it
    will keep; later changes come from retests and retries only.
    """
    for m in MECHANISMS:
        need = REQUIRES.get(m)
        if need is not None and need not in state.kept:
            continue
        if state.verdict(m) is None:
            return False
    return True


def retries_periodic(state, params):
    """Whether every dropped mechanism waits the longest back-off.

    Until then its retries come every 15, 30, 60 s... (a transient of
    the guard's own schedule, each retry costing what the mechanism costs
    for the A periods of a probe); from then on every ``retest_periods *
    max_backoff`` periods, and the guard's probing is periodic. Only the
    mechanisms that may be tried now count (those whose requirement is
    kept).
    """
    cap = params.retest_periods * params.max_backoff
    waits = {m: p for m, p, _ in state.backoff}
    for m in MECHANISMS:
        need = REQUIRES.get(m)
        if m in state.kept or (need is not None and need not in state.kept):
            continue
        if m in waits and waits[m] < cap:
            return False
    return True


def split_share(mechanisms):
    """The widest split level among ``mechanisms`` (0 without a split)."""
    return max((SHARES[m] for m in mechanisms if m in SHARES), default=0.0)


def _top_split(kept):
    """The widest split level kept, the one a retest of the split tests."""
    levels = [m for m in (SPLIT,) + WIDER if m in kept]
    return levels[-1] if levels else None


def _closure(kept):
    """``kept`` less every mechanism whose requirement is not in it."""
    out = set(kept)
    for m in MECHANISMS:                # requirements come first
        need = REQUIRES.get(m)
        if m in out and need is not None and need not in out:
            out.discard(m)
    return frozenset(out)


def _needing(m):
    """``m`` and what is tried with it: the split with borrowing."""
    return {m} | set(BUNDLE.get(m, ()))


def _arms(state):
    """The A (with) and B (without) configurations of the block.

    An addition brings what needs it along (the split is tried with
    borrowing, as the paper runs it: borrowing is what gives CPU-bound
    vCPUs the I/O sibling back); each is later retested on its own.
    """
    m = state.candidate
    if m in SHARES:
        # the split, at any width, is judged against the bare host: the
        # CPU side's objective holds for everything the agent does
        # together, and losses never add up from step to step
        without = _closure(state.kept - {RETENTION})
    else:
        without = _closure(state.kept - {m})
    if state.adding:
        return state.kept | _needing(m), (without if m in SHARES
                                          else state.kept)
    return state.kept, without


def _addable(state):
    """The first mechanism that may be added now, or None."""
    waits = {m: (p, w) for m, p, w in state.backoff}
    for m in MECHANISMS:
        need = REQUIRES.get(m)
        if m in state.kept or (need is not None and need not in state.kept):
            continue
        periods, waited = waits.get(m, (0, 0))
        if waited >= periods:
            return m
    return None


def _with_verdict(verdicts, verdict):
    kept = tuple(v for v in verdicts if v.mechanism != verdict.mechanism)
    return kept + (verdict,)


def _backed_off(backoff, m, params, lost=False):
    """``backoff`` with ``m`` dropped now: its wait doubled, capped.

    A mechanism shown to cost a class (``lost``: its mean below the
    objective, not merely its keeping it unproven) waits the longest
    back-off at once: a loss shown beyond the test's doubt is no fluke to
    re-check in a few seconds, and each retry costs that class again for
    the probe's A periods. Only a workload that changes makes it worth
    retrying, and that is no likelier soon after than later.
    """
    cap = params.retest_periods * params.max_backoff
    waits = {x: (p, w) for x, p, w in backoff}
    last = waits.get(m, (0, 0))[0]
    waits[m] = (cap if lost else min(max(2 * last, params.retest_periods),
                                     cap), 0)
    return tuple((x, p, w) for x, (p, w) in sorted(waits.items()))


def step(state, params, stats):
    """Account the period just run; return the state for the next one.

    ``stats`` are the period's :class:`~vsmtio_agent.model.VcpuStats`,
    measured under ``state.in_force``. The returned state's ``in_force``
    is what the next period runs with.
    """
    if state.finished is not None:
        state = dataclasses.replace(state, finished=None)
    if state.phase == PROBE:
        return _probe_step(state, params, stats)
    if state.countdown > 0:
        return dataclasses.replace(
            state, countdown=state.countdown - 1, in_force=state.kept,
            backoff=tuple((m, p, w + 1) for m, p, w in state.backoff))
    return _begin(state, params, stats)


def _probe_step(state, params, stats):
    sample = (ABBA[state.position % 4],) + measure(stats, state.io_class)
    samples = state.samples + (sample,)
    position = state.position + 1
    if (position < 2 * params.pairs
            and not probe_stats.harm_shown(samples, params, state.adding)):
        a, b = _arms(state)
        return dataclasses.replace(
            state, samples=samples, position=position,
            in_force=a if ABBA[position % 4] else b)
    m = state.candidate
    reference = None
    if state.adding and m in WIDER:
        reference = state.verdict(_top_split(state.kept))
    last = state.verdict(m)
    retry = state.adding and last is not None and not last.kept
    verdict = judge(samples, params, state.adding, m, reference, retry)
    finished = Block(*_arms(state), passed=verdict.kept)
    strikes = set(state.strikes)
    if verdict.kept:
        strikes.discard(m)
    elif not state.adding and m not in strikes and not verdict.loses:
        # hysteresis: a kept mechanism that only stopped showing a gain
        # stays for one more retest
        strikes.add(m)
        verdict = dataclasses.replace(
            verdict, kept=True,
            reason=verdict.reason + ' (once: kept until the next retest)')
    else:
        strikes.discard(m)
    if verdict.kept:
        added = _arms(state)[0] - state.kept
        kept = _closure(state.kept | added)
        backoff = tuple(b for b in state.backoff if b[0] not in added)
    else:
        kept = _closure(state.kept - {m})
        backoff = _backed_off(state.backoff, m, params, verdict.loses)
    # what stays kept was verified with what a retest just dropped (the
    # quarter split with borrowing giving the CPU side back): it is
    # retested against the bare host at once, not in its turn
    recheck = not state.adding and not verdict.kept and bool(kept)
    held = State(kept=kept, phase=HOLD,
                 countdown=0 if recheck else params.retest_periods,
                 backoff=backoff,
                 turn=state.turn, strikes=frozenset(strikes & kept),
                 verdicts=_with_verdict(state.verdicts, verdict),
                 in_force=kept, finished=finished, recheck=recheck)
    if verdict.kept and state.adding and _addable(held) is not None:
        # what it unlocks is tested at once: the initial climb is quick
        return _begin(held, params, stats)
    return held


def _begin(state, params, stats):
    """Start the next probe block, or hold.

    An addition if one is due, else the next kept mechanism's retest.
    """
    m = None if state.recheck else _addable(state)
    adding = m is not None
    turn = state.turn
    if state.recheck:
        m = _top_split(state.kept) or RETENTION
    elif not adding:
        # the split is retested once, at its widest level, against the
        # bare host (which also retests retention): a failure narrows it
        # by one step
        top = _top_split(state.kept)
        kept = [x for x in MECHANISMS if x in state.kept
                and (x not in SHARES or x == top)
                and not (x == RETENTION and top is not None)]
        if not kept:
            return dataclasses.replace(state, countdown=params.retest_periods,
                                       in_force=state.kept)
        m = kept[turn % len(kept)]
        turn += 1
    io_refs = io_class(stats, params)
    if measure(stats, io_refs)[2]:
        # blind on the CPU side: no probe at all, for a probe's A arms
        # would move host knobs for a trial nothing can judge
        kept = _closure(state.kept - {m})
        return dataclasses.replace(
            state, kept=kept, in_force=kept, turn=turn, recheck=False,
            countdown=params.retest_periods,
            backoff=_backed_off(state.backoff, m, params),
            verdicts=_with_verdict(state.verdicts, probe_stats.blind(m)))
    probe = dataclasses.replace(
        state, phase=PROBE, candidate=m, adding=adding, position=0,
        samples=(), turn=turn, io_class=io_refs, recheck=False)
    a, _b = _arms(probe)
    return dataclasses.replace(probe, in_force=a)
