"""The guard: a mechanism stays on only where measurement shows it helps.

The product's promise is that it never leaves a host or a tenant worse.
vSMT-IO's mechanisms can: a retention holds a hyperthread a computing
vCPU could have used, the sibling split halves the threads computing
vCPUs get when I/O is light, borrowing puts a computing vCPU where a
serving one is about to wake. So the guard tests each mechanism against
what the host does without it, on this host's own workloads, and keeps it
only where every VM keeps its floor and the serving tenants gain
(:mod:`vsmtio_agent.policy.probe_stats` holds the tests).

A test is a *probe block*: ``2 * pairs`` measured periods (up to ``2 *
max_pairs`` while a computing VM's result is undecided) that alternate the
candidate configuration (A) and the same without the mechanism (B) in
ABBA order, so a drift in load weighs on both arms alike. After each
switch between the arms the block runs ``settle_periods`` unmeasured: a
change of placement or weight takes effect as the host's load averages
follow it, and a period that caught only part of it would understate its
cost and its gain alike. Each VM is classed at the block's start, from
what does not depend on the mechanisms (a VM whose
vCPUs idle at least ``io_halt_rate`` times a second serves; the others
compute), and measured by its own throughput. A block ends as soon as a
VM loses: after any pair whose A arms put it below ``window_min`` of its
B arms beyond its own noise (so a costly trial never holds a VM low for
a whole window), or whose arm that runs the held configuration falls
that far below its level before the block (a trial whose effect outlasts
its own periods), and from the third pair on when a test shows the loss.

**Mechanisms are per VM where the host allows it.** Retention is kept or
dropped, and its timeout chosen, for each serving VM on its own (the
simulated kernel; a host whose kernel has one timeout for every guest
tests them all together, as the VM ``*``). A VM's timeout is *searched*
on a ladder of doubling rungs from the cost of a deschedule
(``reschedule_cost_us``): retention is first tried there, a refusal tries
the next rung down (shorter retentions cost the neighbours less), and a
kept VM explores one rung down, then one up, each judged against the same
bare arm (the VM not retaining) and kept only if it beats its current
rung's gain; a light serving VM's weight walks its factors upward on no
gain the same way, and where each light serving VM's own weight was
refused, their weights are tried together. A VM explores again after each
retest: exploration is periodic, its cost the A arms of a probe that does
not pay. The sibling
split (graded by the share of cores it covers) and borrowing are
host-wide and judged against the bare host, so the computing VMs' losses
never add up step by step. They are tried wherever a VM serves, whether
or not a retention is kept: where none is, RASS classes vCPUs by their
idle entries (:func:`vsmtio_agent.policy.rass.by_idle_entries`).

**Evidence is pooled.** A cost or a gain within a block's noise of its
floor is shown by no one block, kept or refused as that block's noise
falls. So the pairs of every block that ran to its end are kept for the
comparison it made (the same A and B configurations, the same VMs),
for ``pool_periods`` and up to ``pool_pairs`` per VM, and the next block
of that comparison (a retry, a retest of what the addition kept) is
judged on them all, each block a look of a sequential test of a keep
(Pocock's level, :func:`probe_stats.look_alpha`); a loss is also judged
on the block's own pairs, and a block whose pairs differ from the
pool's beyond doubt (the workload changed) starts a pool of its own,
though a VM the pool it left shows below its floor still loses (an
effect that moves with the workload is kept only where it keeps the
floors before and now). A block a rail or an early
test ended stopped where its noise ran extreme, and is judged alone and
pooled nowhere.

**Kept, retested, dropped.** A kept mechanism is retested every
``retest_periods`` by the same test with the floors relaxed by
``hysteresis`` for the test of a loss; it is dropped at once when a VM
loses, and after two failed retests in a row when it only stopped
showing a gain or a VM's mean fell short of its floor. A dropped
mechanism is retried after an exponential back-off from
``retest_periods`` up to ``max_backoff`` times that, and a retry's gain
must clear the hysteresis. Every ``baseline_every`` retests the whole
kept configuration is tested against the bare host, which catches what
no single retest can (a mechanism kept when the host was another); so is
every per-VM addition that joins anything else kept, at once, since its
own block only compared it with what was kept before it: the floors are
each VM's against the bare host, and costs kept one at a time must not
add up past them.

**After-effects.** Every drop is followed by ``2 * pairs`` periods of
the configuration now in force, compared VM by VM with what the host did
under it before the probe (or, for a retest, with the probe's B arms):
a VM still below ``after_min`` of that, beyond doubt, means removing the
mechanism did not restore the host. That is reported loudly (the verdict
is an ``after_effect`` the status, metrics and log show) and the
mechanism is held off for the longest back-off. Every retest is also a
long-run check: the periods held under the kept configuration before it
against its B arms (:func:`_held_below`), which catches a cost that
builds over longer than a pair; what that drops is held off too, and
a held mean short of the floor is a strike. Its additions' pairs never
see such a cost, so what it dropped is marked (``held_cost``): kept again,
it is retested first and dropped at once if its held mean is short again,
and a held level that keeps the floor clears the mark.

A VM that cannot be measured (no instruction counter: no PMU) cannot be
shown not to lose, so no mechanism is probed while a computing VM is
blind. The guard is pure: samples in, state out.

These are the rules, one of two guard procedures (``guard_procedure``;
the other is :mod:`vsmtio_agent.policy.search`). What they choose among
(the mechanisms, :class:`~vsmtio_agent.policy.vocabulary.Config`, the
timeout ladder) is :mod:`vsmtio_agent.policy.vocabulary`, and how a
period is read and a verdict reported :mod:`vsmtio_agent.policy.probing`:
shared with the search, so that either procedure can go without the
other. What is here and in :mod:`~vsmtio_agent.policy.probe_stats` is the
rules' own.
"""

import dataclasses
import math
import statistics
from typing import Optional

from vsmtio_agent.policy import probe_stats
from vsmtio_agent.policy import probing
from vsmtio_agent.policy import vocabulary


# added together, retested apart
BUNDLE = {vocabulary.SPLIT: (vocabulary.BORROW,)}
# the whole kept configuration against the bare host
BASELINE = 'baseline'

HOLD = 'hold'
PROBE = 'probe'
AFTER = 'after'
DOWN = 'down'
UP = 'up'


@dataclasses.dataclass(frozen=True)
class Params:
    """The operator's floors and the probing schedule."""

    cpu_min: float = 0.97
    io_min: float = 1.0
    pairs: int = 8
    max_pairs: int = 24
    confidence: float = 0.9
    hysteresis: float = 0.01
    retest_periods: int = 150
    max_backoff: int = 4
    io_halt_rate: float = 20.0
    after_min: float = 0.95
    # a computing VM's A arms below this of its B arms end a block at once
    window_min: float = 0.95
    # periods a block runs unmeasured after each switch of its arm
    settle_periods: int = 0
    baseline_every: int = 4
    # the retention timeout ladder, ns, ascending, and the rung first tried
    rungs: tuple = (50000, 100000, 200000, 400000, 800000)
    start_ns: int = 50000
    # the factors a light serving VM's CPU weight is tried at (none: off)
    weight_factors: tuple = (2.0, 4.0)
    # a serving VM is light (its weight may be raised) while its vCPUs
    # run at most this share of the period on average: a raised weight
    # then buys its wake-ups precedence, not CPU time it would compute
    light_utilisation: float = 0.5
    # evidence pooled across the blocks of one comparison: each VM's
    # latest pairs kept, and for how many periods a block's pairs count
    pool_pairs: int = 72
    pool_periods: int = 1200
    per_vm: bool = True
    smt: bool = True
    # the host has a retention timeout to turn (else only the weights)
    retention: bool = True

    def __post_init__(self):
        if self.pairs < 2 or self.pairs % 2:
            raise ValueError('probe pairs must be an even number >= 2, got '
                             '%r' % (self.pairs,))
        if self.max_pairs < self.pairs:
            raise ValueError('max_pairs (%r) must be at least pairs (%r)'
                             % (self.max_pairs, self.pairs))
        if not 0.5 < self.confidence < 1.0:
            raise ValueError('confidence must be within (0.5, 1), got %r'
                             % (self.confidence,))
        if not 0.0 < self.window_min <= self.cpu_min:
            raise ValueError('window_min must be within (0, cpu_min], got '
                             '%r' % (self.window_min,))
        if not self.rungs or self.start_ns not in self.rungs:
            raise ValueError('the start timeout must be a rung of the '
                             'ladder')
        if self.settle_periods < 0:
            raise ValueError('settle_periods must be >= 0, got %r'
                             % (self.settle_periods,))
        if self.pool_pairs < 0 or self.pool_periods < 0:
            raise ValueError('pool_pairs and pool_periods must be >= 0 (0: '
                             'no pooling), got %r and %r'
                             % (self.pool_pairs, self.pool_periods))
        if any(not 1.0 < f < 100.0 for f in self.weight_factors) or list(
                self.weight_factors) != sorted(set(self.weight_factors)):
            raise ValueError('weight factors must rise, each within '
                             '(1, 100), got %r' % (self.weight_factors,))

    @classmethod
    def from_conf(cls, conf, bounds=None, per_vm=True, smt=True,
                  weights=True, retention=True):
        o = conf.vsmtio_agent
        extra = {}
        if bounds is not None:
            extra = dict(rungs=vocabulary.ladder(bounds),
                         start_ns=vocabulary.start_rung(bounds))
        return cls(cpu_min=o.guard_cpu_min, io_min=o.guard_io_min,
                   weight_factors=(tuple(sorted(set(o.guard_weight_factors)))
                                   if weights else ()),
                   pairs=o.guard_probe_pairs,
                   max_pairs=3 * o.guard_probe_pairs,
                   settle_periods=o.guard_settle_periods,
                   confidence=o.guard_confidence,
                   retest_periods=o.guard_retest_periods,
                   pool_pairs=9 * o.guard_probe_pairs,
                   pool_periods=2 * cls.max_backoff * o.guard_retest_periods,
                   io_halt_rate=o.guard_io_halt_rate,
                   per_vm=per_vm, smt=smt, retention=retention, **extra)


@dataclasses.dataclass(frozen=True)
class Trial:
    """What a probe block tests.

    ``mechanism`` with, for retention, the VM (``domain``) and the
    ``timeout_ns`` tried; ``adding`` is False for a retest of what is
    kept.
    """

    mechanism: str
    domain: Optional[str] = None
    timeout_ns: Optional[int] = None
    adding: bool = True
    factor: Optional[float] = None

    @property
    def key(self):
        return (self.mechanism, self.domain)

    @property
    def value(self):
        if self.mechanism == vocabulary.RETENTION:
            return self.timeout_ns
        return self.factor


def _trial(mechanism, domain, value, adding=True):
    if mechanism == vocabulary.RETENTION:
        return Trial(mechanism, domain, value, adding)
    return Trial(mechanism, domain, adding=adding, factor=value)


@dataclasses.dataclass(frozen=True)
class State:
    kept: vocabulary.Config = vocabulary.BARE
    phase: str = HOLD
    countdown: int = 0
    trial: Optional[Trial] = None
    position: int = 0
    kinds: tuple = ()                   # ((vm, kind), ...) of the block
    samples: tuple = ()                 # (with, {vm: value}, blind)
    # what the period being run has
    in_force: vocabulary.Config = vocabulary.BARE
    backoff: tuple = ()                 # ((key, periods, waited), ..)
    turn: int = 0                       # round robin of the retests
    strikes: frozenset = frozenset()    # keys one failed retest behind
    verdicts: tuple = ()                # the last Verdict per key
    # the verdict the last step reached
    finished: Optional[probing.Verdict] = None
    recheck: bool = False               # the kept config against bare next
    # the addition a recheck verifies: (key, the Config kept before it)
    last_added: Optional[tuple] = None
    explored: frozenset = frozenset()   # (mechanism, domain, way) tried
    light: frozenset = frozenset()      # serving VMs that may be weighted
    by_run_time: bool = False           # computing VMs judged by CPU time
    add_at: tuple = ()                  # ((domain, ns, way), ..): next try
    weight_at: tuple = ()               # ((domain, factor), ..): next try
    held: tuple = ()                    # recent {vm: value}s under kept
    # ((vm, sd), ..): a pair's noise as the held periods before the last
    # change of what is kept showed it (:func:`_noise`)
    noise: tuple = ()
    after: Optional[tuple] = None       # (key, {vm: reference}, samples)
    alarms: tuple = ()                  # after-effect verdicts, by key
    watched: int = 0                    # periods held, from the start
    period: int = 0                     # periods stepped, from the start
    settling: int = 0                   # unmeasured periods still to run
    # evidence of earlier blocks: ((a, b), kinds, ((vm, logs), ..),
    # looks, period), by the arms they compared
    pooled: tuple = ()
    # keys last dropped for a cost only their held level showed: kept
    # again on pairs, each is retested first and without a strike's grace
    held_cost: frozenset = frozenset()

    @property
    def split_share(self):
        """The share of cores the split covers in the period being run."""
        return vocabulary.split_share(self.in_force.mechanisms)

    def verdict(self, mechanism, domain=None):
        for v in self.verdicts:
            if v.key == (mechanism, domain):
                return v
        return None


def start():
    """The guard before any evidence: nothing kept, the first probe next."""
    return State()


# -- what each VM is and does ------------------------------------------


def step(state, params, stats, served=None):
    """Account the period just run; return the state for the next one.

    ``stats`` are the period's :class:`~vsmtio_agent.model.VcpuStats`,
    ``served`` each domain's requests and packets per second (None where
    the host counts none), both measured under ``state.in_force``. The
    returned state's ``in_force`` is what the next period runs with.
    """
    ran = state.in_force
    state = dataclasses.replace(state, finished=None,
                                period=state.period + 1)
    if state.settling:
        # the period just run followed a switch of the block's arm: the
        # host was still moving to it (load averages follow a change of
        # placement or weight), so it measures neither arm
        return dataclasses.replace(state, settling=state.settling - 1)
    nxt = _step(state, params, stats, served)
    if nxt.phase == PROBE and nxt.in_force != ran:
        nxt = dataclasses.replace(nxt, settling=params.settle_periods)
    return nxt


def _step(state, params, stats, served):
    if state.phase == PROBE:
        return _probe_step(state, params, stats, served)
    if state.phase == AFTER:
        return _after_step(state, params, stats, served)
    kinds = probing.vm_kinds(stats, params)
    state, blind = _hold_account(state, params, stats, served, kinds)
    if state.countdown > 0 and _keys(state.kept) and _turned(
            state.kinds, kinds):
        # a VM changed what it does (a batch job turned server): what is
        # kept was judged on the host as it was, so the whole of it is
        # tested against the bare host now, not at its retests' turn
        state = dataclasses.replace(state, countdown=0, recheck=True,
                                    last_added=None)
    if state.countdown > 0 or (not state.verdicts and not blind
                               and state.watched < 2 * params.pairs):
        # (before its first probe the guard watches the host for a
        # block's length: the level an after-effect check compares with)
        return dataclasses.replace(
            state, countdown=max(0, state.countdown - 1),
            in_force=state.kept, watched=state.watched + 1,
            backoff=tuple((k, p, w + 1) for k, p, w in state.backoff))
    return _begin(state, params, stats)


def untried(state, params):
    """``{mechanism: why}`` of the mechanisms the guard does not try now.

    A mechanism the guard never probes has no verdict to give its reason,
    so ``status`` would read ``mechanisms kept: none`` with nothing said:
    these are the reasons :func:`_next_trial` skips it. The wider split
    levels follow the split and are not listed.
    """
    out = {}
    if not params.retention:
        out[vocabulary.RETENTION] = (
            'the host has no retention timeout to turn')
    if not params.weight_factors:
        out[vocabulary.WEIGHT] = ('the host sets no VM CPU weights, or '
                                  'guard_weight_factors is empty')
    if not params.smt:
        out[vocabulary.SPLIT] = 'no core has SMT siblings to split'
    elif state.by_run_time:
        out[vocabulary.SPLIT] = (
            'computing VMs are judged by CPU time here (no '
            'instruction counter), which does not show what a '
            'sibling costs them')
    elif state.kinds and not _serving(state.kinds, params):
        out[vocabulary.SPLIT] = (
            'no VM serves I/O: there is no I/O class to split off')
    if vocabulary.SPLIT in out:
        out[vocabulary.BORROW] = 'borrowing comes with the split'
    return out


def _turned(before, now):
    """Whether a VM classed in both ``before`` and ``now`` changed class."""
    was = dict(before)
    return any(was.get(vm, kind) != kind for vm, kind in now)


def _hold_account(state, params, stats, served, kinds):
    """Each VM's throughput in the last held periods of the kept config.

    The reference an after-effect check compares with: what the host did
    under the configuration a failed trial returns to, just before the
    trial touched it (the last ``2 * pairs`` periods: a workload's own
    drift over minutes is no after-effect). Also whether a computing VM
    is blind.
    """
    if not stats:
        return state, False
    values, blind, _cpu_time = probing.measure(stats, served, kinds)
    if blind:
        return state, True
    held = state.held + (values,)
    return dataclasses.replace(
        state, held=held[-2 * params.pairs:]), False


def _serving(kinds, params):
    """The retention keys: each serving VM, or ``*`` for them all."""
    vms = [vm for vm, kind in kinds if kind == probing.SERVING]
    if not params.per_vm:
        return [vocabulary.ALL_VMS] if vms else []
    return vms


def _waiting(state, key):
    for k, periods, waited in state.backoff:
        if k == key:
            return waited < periods
    return False


def _rung(params, ns, direction, mechanism=vocabulary.RETENTION):
    """The rung one step ``direction`` of ``ns``, or None at the end."""
    rungs = (params.rungs if mechanism == vocabulary.RETENTION
             else params.weight_factors)
    if ns not in rungs:
        return None
    i = rungs.index(ns) + (1 if direction == UP else -1)
    return rungs[i] if 0 <= i < len(rungs) else None


def _next_trial(state, params, kinds):
    """The next addition or exploration due, or None."""
    kept = state.kept
    add_at = {d: ns for d, ns, _way in state.add_at}
    weight_at = dict(state.weight_at)
    for m in vocabulary.PER_VM:
        vms = _serving(kinds, params)
        if m == vocabulary.RETENTION and not params.retention:
            vms = []
        if m == vocabulary.WEIGHT:
            # a weight is every host's per VM, whatever its timeout is
            vms = [vm for vm, kind in kinds if kind == probing.SERVING
                   and (vm in state.light or kept.weight(vm) is not None)]
            if not params.weight_factors:
                vms = []
        for vm in vms:
            now = kept.value(m, vm)
            if now is None:
                if not _waiting(state, (m, vm)):
                    first = (add_at.get(vm, params.start_ns)
                             if m == vocabulary.RETENTION else weight_at.get(
                                 vm, params.weight_factors[0]))
                    return _trial(m, vm, first)
                continue
            if m == vocabulary.WEIGHT and not _own_verdict(state, vm, now):
                # raised by the joint trial: its gain alone is measured
                # at its first retest, the reference a move must beat
                continue
            for direction in (DOWN, UP):
                if (m, vm, direction) in state.explored:
                    continue
                to = _rung(params, now, direction, m)
                if to is not None:
                    return _trial(m, vm, to)
        if m == vocabulary.WEIGHT and _joint_due(state, kinds):
            return _trial(vocabulary.WEIGHT, vocabulary.ALL_VMS, weight_at.get(
                vocabulary.ALL_VMS, params.weight_factors[0]))
    if not params.smt or state.by_run_time or not _serving(kinds, params):
        # (the split's cost is a sibling's interference, which CPU time
        # does not show: without instruction counters it is never tried;
        # nor where no VM serves, for then there is no I/O class)
        return None
    for m in (vocabulary.SPLIT,) + vocabulary.WIDER:
        if m in kept.mechanisms or not _split_open(state, m):
            continue
        if not _waiting(state, (m, None)):
            return Trial(m)
    return None


def _own_verdict(state, vm, factor):
    """Whether ``vm``'s weight at ``factor`` has a kept verdict of its own."""
    v = state.verdict(vocabulary.WEIGHT, vm)
    return v is not None and v.kept and v.factor == factor


def _joint(kept, kinds, light):
    """The VMs a joint weight trial raises: light, serving, unweighted."""
    return [vm for vm, kind in kinds
            if kind == probing.SERVING and vm in light
            and kept.weight(vm) is None]


def _joint_due(state, kinds):
    """Whether the weights of the unweighted light VMs are tried together.

    Where two or more light serving VMs each had their own weight refused:
    one VM's raised weight takes its wake-ups' precedence from the others
    as well as from the computing VMs, so alone it may cost a serving
    neighbour what the two together do not, or gain too little to show;
    together the class gains what neither does alone (on
    ``fig5_mongodb_kmeans`` both MongoDB VMs at twice their weight serve
    1.19 of vanilla at each KMeans VM's 0.977, where one alone costs the
    other MongoDB VM). Tried at the first factor and walked up as a VM's
    own weight is; what it keeps is each VM's weight, retested on its own.
    """
    free = _joint(state.kept, kinds, state.light)
    weight = vocabulary.WEIGHT
    return (len(free) >= 2
            and not _waiting(state, (weight, vocabulary.ALL_VMS))
            and all(state.verdict(weight, vm) is not None
                    and not state.verdict(weight, vm).kept for vm in free))


def _with_joint(state, factor):
    """``state.kept`` with every VM of :func:`_joint` at ``factor``."""
    kept = state.kept
    for vm in _joint(kept, state.kinds, state.light):
        kept = kept.with_value(vocabulary.WEIGHT, vm, factor)
    return kept


def _split_open(state, level):
    """Whether the split may be tried at ``level`` now.

    Where the level below it is kept, or was refused for want of a gain
    with no VM losing: the gain of an eighth of the cores may be within
    the noise where a wider split's is not (the gain and the cost grow
    with the share), so the search widens. A level refused for a loss
    closes every wider one, which would cost more.
    """
    need = vocabulary.REQUIRES.get(level)
    if need is None or need in state.kept.mechanisms:
        return True
    v = state.verdict(need)
    return (v is not None and not v.kept and not v.loses
            and _split_open(state, need))


def _with_added(kept, mechanism):
    """``kept`` with the host-wide ``mechanism`` added: a trial's A arm.

    What comes with it: each split level below it that is not kept (a
    wider level tried after a narrower one showed no gain), and what
    each is bundled with.
    """
    add = set()
    m = mechanism
    while m is not None and m not in kept.mechanisms:
        add.add(m)
        add.update(BUNDLE.get(m, ()))
        m = vocabulary.REQUIRES.get(m) if m in vocabulary.SHARES else None
    return vocabulary.closure(dataclasses.replace(
        kept, mechanisms=kept.mechanisms | add))


def _retests(state):
    """What a retest may test, in turn: each retaining VM, the split."""
    out = [Trial(vocabulary.RETENTION, vm, ns, adding=False)
           for vm, ns in state.kept.timeouts]
    out += [Trial(vocabulary.WEIGHT, vm, adding=False, factor=f)
            for vm, f in state.kept.weights]
    top = vocabulary.top_split(state.kept.mechanisms)
    if top is not None:
        out.append(Trial(top, adding=False))
    if vocabulary.BORROW in state.kept.mechanisms:
        out.append(Trial(vocabulary.BORROW, adding=False))
    return out


def _arms(state):
    """The A (with) and B (without) configurations of the block."""
    t = state.trial
    kept = state.kept
    if t.mechanism == BASELINE:
        return kept, vocabulary.BARE
    if t.mechanism == vocabulary.WEIGHT and t.domain == vocabulary.ALL_VMS:
        return _with_joint(state, t.factor), kept
    if t.mechanism in vocabulary.PER_VM:
        a = (kept.with_value(t.mechanism, t.domain, t.value) if t.adding
             else kept)
        return a, kept.without_value(t.mechanism, t.domain)
    if t.mechanism == vocabulary.BORROW:
        return kept, vocabulary.closure(dataclasses.replace(
            kept, mechanisms=kept.mechanisms - {vocabulary.BORROW}))
    # the split, at any width, is judged against the bare host: the
    # floors hold for everything the agent does together
    if t.adding:
        return _with_added(kept, t.mechanism), vocabulary.BARE
    return kept, vocabulary.BARE


def _reference(state):
    """The verdict a trial's gain must beat, or None (no change)."""
    t = state.trial
    if not t.adding:
        return None
    if t.mechanism in vocabulary.PER_VM:
        now = state.kept.value(t.mechanism, t.domain)
        if now is None:
            return None
        v = state.verdict(t.mechanism, t.domain)
        # (the verdict of the value in force: a move a recheck undid left
        # the verdict of the value it moved to, which a return to that
        # value could never beat)
        value = v and (v.timeout_ns if t.mechanism == vocabulary.RETENTION
                       else v.factor)
        return v if v is not None and v.kept and value == now else None
    if t.mechanism in vocabulary.WIDER:
        return state.verdict(vocabulary.top_split(state.kept.mechanisms))
    return None


def _begin(state, params, stats):
    """Start the next probe block, or hold."""
    kinds = probing.vm_kinds(stats, params)
    state = dataclasses.replace(state, light=probing.light(stats, params))
    present = {vm for vm, _kind in kinds}
    gone = [vm for vm, _ns in state.kept.timeouts + state.kept.weights
            if vm != vocabulary.ALL_VMS and vm not in present]
    # the split and borrowing are for an I/O class: with no VM serving
    # there is none to split for
    idle_split = (not _serving(kinds, params)
                  and state.kept.mechanisms & set(vocabulary.HOST_WIDE))
    if gone or idle_split:
        # a VM that left the host retains nowhere: forget it
        kept = state.kept
        for vm in gone:
            kept = kept.without(vm).without_value(vocabulary.WEIGHT, vm)
        if idle_split:
            kept = dataclasses.replace(
                kept, mechanisms=kept.mechanisms - set(vocabulary.HOST_WIDE))
        state = dataclasses.replace(state, kept=kept, in_force=kept,
                                    held=(), noise=_kept_noise(state))
    # (nor is a VM that left marked for a held cost, nor its next try)
    state = dataclasses.replace(state, held_cost=frozenset(
        k for k in state.held_cost if k[1] in present or k[1] in (
            None, vocabulary.ALL_VMS)), add_at=tuple(
        x for x in state.add_at
        if x[0] in present or x[0] == vocabulary.ALL_VMS),
        weight_at=tuple(x for x in state.weight_at
                        if x[0] in present or x[0] == vocabulary.ALL_VMS),
        noise=tuple(x for x in state.noise if x[0] in present))
    turn = state.turn
    trial = None
    if state.recheck:
        # after an addition it is judged as one (its mean held to the
        # floors themselves), else as a retest
        trial = Trial(BASELINE, adding=state.last_added is not None)
    else:
        trial = _next_trial(state, params, kinds)
    explored = state.explored
    _values, blind, by_run_time = probing.measure(stats, None, kinds)
    state = dataclasses.replace(state, by_run_time=by_run_time)
    if trial is None and blind:
        # nothing is due, but the operator is told why nothing ever is
        trial = Trial(vocabulary.RETENTION)
    if trial is None:
        retests = _retests(state)
        if not retests:
            return dataclasses.replace(state, countdown=params.retest_periods,
                                       in_force=state.kept)
        suspect = [r for r in retests if r.key in state.held_cost]
        if suspect:
            # kept again on pairs after its held level dropped it: its
            # held level is what decides, so it is retested first
            trial = suspect[0]
        elif turn and turn % (params.baseline_every * len(retests)) == 0:
            trial = Trial(BASELINE, adding=False)
        else:
            trial = retests[turn % len(retests)]
        if trial.mechanism in vocabulary.PER_VM:
            # a VM explores its neighbouring rungs again after each
            # retest: the search is periodic, not one climb
            explored = frozenset(x for x in explored
                                 if x[:2] != trial.key)
        turn += 1
    probe = dataclasses.replace(
        state, phase=PROBE, trial=trial, position=0, samples=(),
        turn=turn, kinds=kinds, recheck=False, explored=explored)
    if blind:
        # blind on a computing VM: no probe at all, for a probe's A arms
        # would move host knobs for a trial nothing can judge
        verdict = probe_stats.blind(trial.mechanism, trial.domain,
                                    trial.timeout_ns, trial.factor)
        return _settle(probe, params, verdict, stats)
    a, _b = _arms(probe)
    return dataclasses.replace(probe, in_force=a)


def _tries(trial, params):
    """How many tests a search may run for the choice ``trial`` makes.

    Each rung of a ladder (a VM's timeouts, its weight factors, the
    split's shares, widened while none gains) may be kept, so a keep's
    tests share their level among them (:func:`probe_stats.keep_level`).
    """
    return {vocabulary.RETENTION: len(params.rungs),
            vocabulary.WEIGHT: len(params.weight_factors),
            **dict.fromkeys(vocabulary.SHARES, len(vocabulary.SHARES))}.get(
                trial.mechanism, 1)


def _probe_step(state, params, stats, served):
    values, blind, _cpu_time = probing.measure(stats, served, state.kinds)
    sample = (probing.ABBA[state.position % 4], values, blind)
    samples = state.samples + (sample,)
    position = state.position + 1
    t = state.trial
    arms = _arms(state)
    # a block runs on or ends (a rail or a test aside) only where a
    # quadruple ends from its minimum on: there it needs the pool
    prior, looks, past = (
        (None, 0, None) if position < 2 * params.pairs or position % 4
        else _prior(state, params, arms, samples))
    tries = _tries(t, params)
    more = position < 2 * params.pairs or (
        t.adding and position < 2 * params.max_pairs and position % 4 == 0
        and probe_stats.undecided(samples, state.kinds, params, prior,
                                  tries))
    if position % 4 and position >= 2 * params.pairs:
        more = True         # finish the ABBA quadruple under way
    left = _left_level(state, samples, params)
    # (a block a rail or a test ended early stopped where its noise ran
    # extreme: its pairs would bias a pool)
    early = more and bool(left or probe_stats.rail_crossed(
        samples, state.kinds, params, _noise(state))
        or probe_stats.harm_shown(samples, state.kinds, params, t.adding))
    if more and not early:
        a, b = arms
        return dataclasses.replace(
            state, samples=samples, position=position,
            in_force=a if probing.ABBA[position % 4] else b)
    last = state.verdict(*t.key)
    retry = (t.adding and t.mechanism not in vocabulary.PER_VM
             and last is not None and not last.kept)
    if left or early:
        # (judged on its own pairs, and pooled nowhere)
        prior, looks, past = None, 0, None
    verdict = probe_stats.judge(
        samples, state.kinds, params, t.adding, t.mechanism, t.domain,
        t.timeout_ns, _reference(state), retry, tries=tries,
        factor=t.factor, prior=prior, past=past)
    if not (left or early):
        state = _pool(state, params, arms, prior, looks, samples)
        if prior is not None:
            verdict = dataclasses.replace(
                verdict, reason=verdict.reason + ' (pooled: %d pairs of '
                '%d blocks)' % (len(verdict.utility_logs), looks + 1))
    if left:
        # the pairs compare two disturbed arms: whatever they say, the
        # trial moved the host off its level beyond its own periods
        verdict = dataclasses.replace(
            verdict, kept=False, loses=True,
            reason='the host left its level in the arms without the '
            'change (%s of the level before the block): the trial '
            'outlasts its own periods' % ', '.join(left))
    low, short, seen = ((), (), False) if (
        left or early or t.adding or verdict.loses) \
        else _held_below(state, samples, params)
    if low:
        # (its pairs would keep it again at every retry: it waits the
        # longest back-off, as a mechanism that left an after-effect)
        verdict = dataclasses.replace(
            verdict, kept=False, loses=True,
            reason='held under it, %s of the arms without it: a steady '
            'cost its pairs do not show; held off' % ', '.join(low))
    short = short if verdict.kept and not low else ()
    held_cost = state.held_cost
    if short:
        # (as a retest's mean short of the floor: a strike, dropped and
        # held off at the second in a row; at once where the same cost
        # dropped it before, for its additions' pairs never see it)
        again = t.key in held_cost
        verdict = dataclasses.replace(
            verdict, kept=False,
            reason='held under it, %s of the arms without it, short of '
            'the floor: a steady cost its pairs do not show%s'
            % (', '.join(short), ', as when it was last dropped; held '
               'off' if again else ''))
        if again:
            state = dataclasses.replace(
                state, strikes=state.strikes | {t.key})
    elif seen and verdict.kept and not low:
        # its held level kept the floor: what dropped it is gone
        held_cost = held_cost - {t.key}
    if state.by_run_time:
        verdict = dataclasses.replace(
            verdict, reason=verdict.reason + ' (computing VMs judged by '
            'CPU time: no instruction counter)')
    state = dataclasses.replace(state, samples=samples, held_cost=held_cost)
    return _settle(state, params, verdict, stats,
                   hold_off=bool(low or short))


def _held_below(state, samples, params):
    """``(low, short, seen)``: computing VMs a retest's held level puts below.

    The long-run check. A pair compares periods a switch apart; a cost
    that builds for longer than the settling periods (a cache the kept
    configuration wears down, a backlog) shows only in what the host
    does held under it. So a retest also compares the periods held under
    the kept configuration just before it (``held``) with its own B arms,
    which ran without the mechanism: a computing VM whose held level is
    shown below its floor of those (Welch's one-sided test, as the
    after-effect watch) is ``low``, and loses; one whose held mean is only
    below its floor itself (not the retest's, lowered by the hysteresis)
    is ``short``, as a retest's own mean short of the floor: a cost
    within a percent of the floor is shown by no unpaired test, and a
    mechanism kept under such a VM for good must not stay. Not a serving
    VM: what it serves follows its clients, whose level over seconds no
    unpaired comparison can tell from a cost. ``seen``: some computing
    VM had held periods enough to be checked.
    """
    b_arm = [values for with_, values, _blind in samples if not with_]
    alpha = (1.0 - params.confidence) / max(1, len(state.kinds))
    low, short, seen = [], [], False
    for vm, kind in state.kinds:
        held = _logs(state.held, vm)
        if kind != probing.COMPUTING or len(held) < 2 * params.pairs:
            continue
        seen = True
        logs = _logs(b_arm, vm)
        ratio = math.exp(math.fsum(held) / len(held)
                         - math.fsum(logs) / len(logs))
        f = probe_stats.floor(params, kind, True)
        if _below(held, logs, probe_stats.floor(params, kind, False), alpha):
            low.append('%s at %.3f' % (vm, ratio))
        elif ratio < f:
            short.append('%s at %.3f < %.2f' % (vm, ratio, f))
    return low, short, seen


def _prior(state, params, arms, samples):
    """``(prior, looks, past)``: the evidence earlier blocks of ``arms`` left.

    ``prior`` (``{vm: logs}``, or None) and ``looks`` are the pool the
    block is judged on. Evidence counts for the same comparison only: the
    same A and B configurations (a change to what else is kept makes
    another), the same VMs classed the same way, blocks of the last
    ``pool_periods`` (a workload's slow drift outlasts a pair, not minutes
    of them), and only while the block's own pairs (``samples``) measure
    what the pool did (:func:`probe_stats.consistent`). A pool they depart
    from is ``past``: it supports no keep, but a VM it shows below its
    floor still loses (an effect that moves over time is kept only where
    it keeps the floors at both; a pool that shows no loss says nothing).
    """
    prior, looks = _pooled(state, params, arms)
    if prior is None:
        return None, 0, None
    if not probe_stats.consistent(
            prior, probe_stats.block_logs(samples, state.kinds), params,
            state.kinds):
        return None, 0, prior
    return prior, looks, None


def _pooled(state, params, arms):
    """``({vm: logs}, looks)`` of the pool of ``arms``, or (None, 0)."""
    for got, kinds, logs, looks, at in state.pooled:
        if (got == arms and kinds == state.kinds
                and state.period - at <= params.pool_periods):
            return {vm: list(x) for vm, x in logs}, looks
    return None, 0


def _pool(state, params, arms, prior, looks, samples):
    """``state`` with this block's pairs added to its comparison's pool.

    Each VM keeps its latest ``pool_pairs`` pairs; entries past
    ``pool_periods`` are forgotten, so the pool stays a few comparisons
    long.
    """
    if not params.pool_pairs or any(s[2] for s in samples):
        return state
    logs = probe_stats.pooled(prior, probe_stats.block_logs(
        samples, state.kinds), params.pool_pairs)
    if not logs:
        return state
    # (a look whose pairs have all left the pool no longer counts)
    looks = min(looks + 1, probe_stats.design_looks(params))
    entry = (arms, state.kinds, tuple(sorted(
        (vm, tuple(x)) for vm, x in logs.items())), looks, state.period)
    keep = tuple(e for e in state.pooled if e[0] != arms
                 and state.period - e[4] <= params.pool_periods)
    return dataclasses.replace(state, pooled=keep + (entry,))


def _left_level(state, samples, params):
    """The VMs the block's control arm shows far below the held level.

    The control arm runs what the held periods ran (B for an addition, A
    for a retest). An A/B pair cannot see a trial whose effect outlasts
    its periods (a backlog a long retention builds, then drains in the B
    period after it): both arms fall together and their ratio stays
    near one. Against the level the VM held just before the block they
    do not, so a VM whose control periods (two at least) are below
    ``window_min`` of it by ``RAIL_Z`` standard errors, the held periods'
    own spread giving the noise of both means, ends the block as a
    loss. A block whose arms both differ from the held configuration (a
    kept VM trying another rung), or after a change with no held periods
    yet, has no control and is left to the pairs.
    """
    a, b = _arms(state)
    if state.kept not in (a, b) or len(samples) % 2:
        return []
    control = b == state.kept
    out = []
    for vm, _kind in state.kinds:
        held = _logs(state.held, vm)
        if len(held) < 2 * params.pairs:
            continue
        logs = _logs([values for with_, values, _blind in samples
                      if with_ != control], vm)
        if len(logs) < 2:
            continue
        drop = math.fsum(logs) / len(logs) - math.fsum(held) / len(held)
        se = statistics.stdev(held) * math.sqrt(1 / len(logs)
                                                + 1 / len(held))
        if drop < min(math.log(params.window_min),
                      -probe_stats.RAIL_Z * se):
            out.append('%s at %.2f' % (vm, math.exp(drop)))
    return out


def _settle(state, params, verdict, stats, hold_off=False):
    """The state after ``verdict`` on the block of ``state.trial``.

    ``hold_off``: what the verdict drops waits the longest back-off.
    """
    t = state.trial
    key = t.key
    strikes = set(state.strikes)
    kept = state.kept
    if verdict.kept:
        strikes.discard(key)
    elif not t.adding and key not in strikes and not verdict.loses:
        # hysteresis: a kept mechanism that only stopped showing a gain
        # stays for one more retest
        strikes.add(key)
        verdict = dataclasses.replace(
            verdict, kept=True,
            reason=verdict.reason + ' (once: kept until the next retest)')
    elif not t.adding:
        strikes.discard(key)
    # (a kept VM's exploration of another rung that is not kept leaves its
    # strike: else the explorations between two retests would clear it,
    # and a rung that stopped gaining would never go)
    explored = set(state.explored)
    add_at = {d: (ns, w) for d, ns, w in state.add_at}
    weight_at = dict(state.weight_at)
    descend = False
    backoff = state.backoff
    dropped = False
    record = verdict
    if t.mechanism == BASELINE:
        kept, backoff = _baseline_settled(state, params, verdict, hold_off)
        dropped = not verdict.kept
    elif t.mechanism in vocabulary.PER_VM and t.adding:
        now = kept.value(t.mechanism, t.domain)
        if now is None:
            if verdict.kept:
                kept, _b = _arms(state)
                if t.mechanism == vocabulary.RETENTION:
                    add_at.pop(t.domain, None)
                else:
                    weight_at.pop(t.domain, None)
                if _keys(kept) == 1:
                    backoff = _cleared(backoff, key)
            else:
                descend = _walk(state, params, t, verdict, add_at,
                                weight_at)
                if not descend:
                    backoff = _backed_off(backoff, key, params)
                dropped = True
        else:
            direction = UP if t.value > now else DOWN
            m = t.mechanism
            if verdict.kept:
                kept = kept.with_value(m, t.domain, t.value)
                # the rung it came from is known worse
                explored.discard((m, t.domain, direction))
                explored.add((m, t.domain, UP if direction == DOWN
                              else DOWN))
            else:
                explored.add((m, t.domain, direction))
                # the rung in force keeps its own verdict
                record = None
                dropped = True
    elif t.adding:
        if verdict.kept:
            kept = _with_added(kept, t.mechanism)
            backoff = _cleared(backoff, key)
        else:
            backoff = _backed_off(backoff, key, params)
            dropped = True
    elif not verdict.kept:
        dropped = True
        if t.mechanism in vocabulary.PER_VM:
            kept = kept.without_value(t.mechanism, t.domain)
        else:
            kept = vocabulary.closure(dataclasses.replace(
                kept, mechanisms=kept.mechanisms - {t.mechanism}))
        backoff = _backed_off(backoff, key, params, hold_off=hold_off)
    verdicts = state.verdicts
    if record is not None:
        verdicts = _with_verdict(verdicts, record)
    held_cost = state.held_cost
    if hold_off and not verdict.kept:
        # (what its held level dropped: kept again on pairs, it is
        # retested first and without grace)
        held_cost = held_cost | (set(_kept_keys(state.kept))
                                 - set(_kept_keys(kept)))
    changed = kept != state.kept
    held = () if changed else state.held
    noise = _kept_noise(state) if changed else state.noise
    # what stays kept was verified with what a retest just dropped, or
    # against what was kept before an addition, not against the bare
    # host: it is tested against the bare host next, not in its turn
    last_added = None
    if (verdict.kept and t.adding and t.mechanism in vocabulary.PER_VM
            and _keys(kept) > 1):
        last_added = (key, state.kept)
    recheck = _keys(kept) > 0 and (
        last_added is not None
        or (not verdict.kept and not t.adding and t.mechanism != BASELINE)
        or (t.mechanism == BASELINE and not verdict.kept
            and state.last_added is not None))
    settled = dataclasses.replace(
        state, kept=kept, phase=HOLD,
        countdown=0 if recheck else params.retest_periods, recheck=recheck,
        last_added=last_added,
        trial=None, backoff=backoff, strikes=frozenset(
            k for k in strikes if _is_kept(kept, k)), verdicts=verdicts,
        in_force=kept, finished=verdict, explored=frozenset(explored),
        add_at=tuple(sorted((d, ns, w) for d, (ns, w) in add_at.items())),
        weight_at=tuple(sorted(weight_at.items())),
        held=held, noise=noise, samples=(),
        held_cost=frozenset(held_cost))
    if descend:
        return _begin(settled, params, stats)
    if dropped and state.samples:
        settled = _after_start(settled, state, verdict, params)
        if settled.phase == AFTER:
            return settled
    nxt = _next_trial(settled, params, state.kinds)
    if t.adding and (recheck or nxt is not None and (
            verdict.kept or nxt.key != key)):
        # the recheck of what it joined, what it unlocks, the next rung,
        # or another VM's addition is tested at once: the climb is quick
        # (a refused addition's own retry waits its back-off)
        return _begin(settled, params, stats)
    return settled


def _walk(state, params, t, verdict, add_at, weight_at):
    """Whether a VM's refused first value of a mechanism walks on at once.

    Retention: a loss tries a shorter timeout (it costs the neighbours
    less), no gain a longer one (it outlasts more of the VM's waits), and
    the search never turns back; where it ends, its retry starts where it
    ended (a climb that lost, from the last rung that did not). A weight:
    no gain tries a larger factor (a weight's gain can come only past a
    cliff); a loss or the largest factor ends the walk, and its retry
    starts from the first factor again. ``add_at`` and ``weight_at`` (the
    next value each VM tries) are updated in place; False: the VM backs
    off (as one with no VM to probe, the blind host's report, does).
    """
    if t.domain is None:
        return False
    if t.mechanism == vocabulary.WEIGHT:
        nxt = None if verdict.loses else _rung(params, t.factor, UP,
                                               vocabulary.WEIGHT)
        if nxt is None:
            weight_at.pop(t.domain, None)
            return False
        weight_at[t.domain] = nxt
        return True
    way = DOWN if verdict.loses else UP
    came = dict((d, w) for d, _ns, w in state.add_at).get(t.domain, way)
    nxt = _rung(params, t.timeout_ns, way)
    if nxt is not None and way == came:
        add_at[t.domain] = (nxt, way)
        return True
    resume = t.timeout_ns
    if came == UP and verdict.loses:
        resume = _rung(params, resume, DOWN) or resume
    add_at[t.domain] = (resume, came)
    return False


def _baseline_settled(state, params, verdict, hold_off=False):
    """``(kept, backoff)`` after a test of the kept config against bare.

    After an addition it verifies that addition: passed, its back-off is
    over (kept until then, so a failed recheck doubles it); failed, the
    addition broke a floor against the bare host though not against what
    was kept before it, so it goes (a move goes back to the rung it left)
    and the rest is rechecked. A periodic baseline that fails drops all;
    with ``hold_off`` (its long-run check failed) each waits the longest
    back-off.
    """
    kept, backoff = state.kept, state.backoff
    if state.last_added is None:
        if verdict.kept:
            return kept, backoff
        for k in _kept_keys(kept) if hold_off else ():
            backoff = _backed_off(backoff, k, params, hold_off=True)
        return vocabulary.BARE, backoff
    (m, d), before = state.last_added
    if verdict.kept:
        return kept, _cleared(backoff, (m, d))
    # (each VM still kept back at its value before the addition: what the
    # addition raised goes, a move goes back to the rung it left)
    kept = vocabulary.closure(dataclasses.replace(
        kept, timeouts=_still(before.timeouts, kept.timeouts),
        weights=_still(before.weights, kept.weights)))
    return kept, _backed_off(backoff, (m, d), params)


def _still(before, now):
    """The ``(vm, value)`` of ``before`` whose VM ``now`` still has."""
    vms = {vm for vm, _v in now}
    return tuple(x for x in before if x[0] in vms)


def _keys(config):
    """How many mechanisms ``config`` keeps (per VM, and host-wide)."""
    return len(_kept_keys(config))


def _kept_keys(config):
    """The ``(mechanism, domain)`` of everything ``config`` keeps."""
    return ([(vocabulary.RETENTION, vm) for vm, _ns in config.timeouts]
            + [(vocabulary.WEIGHT, vm) for vm, _f in config.weights]
            + [(m, None) for m in sorted(config.mechanisms)])


def _is_kept(config, key):
    mechanism, domain = key
    if mechanism in vocabulary.PER_VM:
        return config.value(mechanism, domain) is not None
    return mechanism in config.mechanisms


def _after_start(settled, probe, verdict, params):
    """Watch the host after a drop: does it come back?

    The reference for each VM is what it did under the configuration now
    in force just before the probe began (``held``). A VM is watched only
    if the probe's B arms, which ran without the mechanism, already left
    it below ``after_min`` of that: the mechanism changed the host for
    both arms, and the watch tells whether the change outlasts it. A VM
    whose B arms kept its level is not watched: were it lower afterwards,
    its workload changed after the probe, which no mechanism caused (and
    a phase change is the commoner cause). A block the window floor ended
    after one pair has one B arm, too few for a test: its VM is watched
    if that arm was below ``after_min`` of the held level (the watch's own
    test then decides). Without a held level there is nothing to compare
    with.
    """
    if settled.kept != probe.kept:
        return settled
    b_arm = [values for with_, values, _blind in probe.samples
             if not with_]
    reference = {}
    alpha = (1.0 - params.confidence) / max(1, len(probe.kinds))
    for vm, _kind in probe.kinds:
        held = _logs(probe.held, vm)
        if len(held) < 2 * params.pairs:
            continue
        logs = _logs(b_arm, vm)
        if _below(logs, held, params.after_min, alpha) or (
                len(logs) == 1 and logs[0] < math.fsum(held) / len(held)
                + math.log(params.after_min)):
            reference[vm] = tuple(held)
    if not reference:
        return settled
    return dataclasses.replace(
        settled, phase=AFTER, countdown=2 * params.pairs,
        after=(verdict.key, tuple(sorted(reference.items())), ()),
        kinds=probe.kinds)


def _spread(periods):
    """``{vm: standard deviation of a pair's log-ratio}``, from ``periods``.

    A probe's pair compares two adjacent periods, so its noise is that of
    the difference between adjacent held periods: a workload's slow drift
    cancels in it as it does in the pair. Of every VM measured in at
    least five periods in a row.
    """
    out = {}
    for vm in {vm for values in periods for vm in values}:
        logs = _logs(periods, vm)
        if len(logs) >= 5:
            out[vm] = statistics.stdev(b - a for a, b in zip(logs, logs[1:]))
    return out


def _noise(state):
    """``{vm: sd}`` the window rail reads a pair's loss against.

    The spread of the periods held under what is kept now, and for a VM
    with too few of them, that of the periods held before the last change
    (``noise``). A change of what is kept empties ``held`` (its level is
    another) and the next trial of a climb starts at once, so without the
    older spread a computing VM would have none, and its first pair alone
    would end the block on noise: a VM whose periods vary by 5% puts a
    pair below 0.95 about a quarter of the time. Noise on the log scale
    is the workload's, whatever the level.
    """
    out = dict(state.noise)
    out.update(_spread(state.held))
    return out


def _kept_noise(state):
    """``noise`` for the state after a change empties ``held``."""
    return tuple(sorted(_noise(state).items()))


def _logs(periods, vm):
    """The logs of ``vm``'s positive values in ``periods`` ({vm: value})."""
    return [math.log(values[vm]) for values in periods
            if (values.get(vm) or 0) > 0]


def _below(logs, held_logs, share, alpha):
    """Whether ``logs`` are shown below ``share`` of the held level.

    Welch's one-sided t-test on the logs: the held level is itself a
    sample of a few periods, with its own noise.
    """
    if len(logs) < 2 or len(held_logs) < 2:
        return False
    shifted = [x + math.log(share) for x in held_logs]
    return probe_stats.gain_p(shifted, logs) < alpha


def _after_step(state, params, stats, served):
    """One period of the watch after a drop (:func:`_after_start`).

    Each VM is measured as it was classed in the probe; a VM that changed
    what it does (serves now, computed then) has changed its workload, not
    been left changed by a mechanism, and the watch raises no alarm.
    """
    key, reference, samples = state.after
    ref = dict(reference)
    changed = samples is None or any(
        dict(state.kinds).get(vm, kind) != kind
        for vm, kind in probing.vm_kinds(stats, params) if vm in ref)
    if not changed:
        values = probing.measure(stats, served, state.kinds)[0]
        samples = samples + (tuple(sorted(
            (vm, v) for vm, v in values.items()
            if v is not None and vm in ref)),)
    else:
        samples = None
    if samples is not None and len(samples) < 2 * params.pairs or (
            samples is None and state.countdown > 1):
        return dataclasses.replace(state, after=(key, reference, samples),
                                   countdown=state.countdown - 1)
    alarm = (_after_effect(key, ref, samples, params)
             if samples is not None else None)
    out = dataclasses.replace(
        state, phase=HOLD, after=None,
        countdown=0 if state.recheck else params.retest_periods)
    if alarm is None:
        return dataclasses.replace(out, alarms=tuple(
            a for a in state.alarms if a.key != key))
    return dataclasses.replace(
        out, alarms=_with_verdict(state.alarms, alarm),
        finished=alarm,
        backoff=_backed_off(state.backoff, key, params, hold_off=True))


def _after_effect(key, reference, samples, params):
    """The alarm verdict if a VM stayed below ``after_min`` of its level.

    ``reference`` maps each watched VM to the logs of its held periods;
    ``samples`` are the watch's periods (``((vm, value), ...)``).
    """
    low = []
    alpha = (1.0 - params.confidence) / len(reference)
    for vm, held in sorted(reference.items()):
        logs = _logs([dict(s) for s in samples], vm)
        if len(logs) < len(samples) // 2:
            logs = [min(held) - math.log(1e3)] * len(samples)
        if _below(logs, held, params.after_min, alpha):
            level = math.exp(sum(logs) / len(logs) - sum(held) / len(held))
            low.append('%s at %.2f' % (vm, level))
    if not low:
        return None
    mechanism, domain = key
    return probing.Verdict(
        mechanism, False,
        'after-effect: dropping it did not restore the host (%s '
        'of the level before); held off' % ', '.join(low),
        domain=domain, loses=True, after_effect=True)


def _with_verdict(verdicts, verdict):
    kept = tuple(v for v in verdicts if v.key != verdict.key)
    return kept + (verdict,)


def _cleared(backoff, key):
    return tuple(b for b in backoff if b[0] != key)


def _backed_off(backoff, key, params, hold_off=False):
    """``backoff`` with ``key`` dropped now: its wait doubled, capped.

    From ``retest_periods``, doubling up to ``max_backoff`` times that: a
    gain the workload has since made possible is found again within
    seconds at first, and a mechanism that keeps failing costs its A arms
    ever more rarely. One whose drop left an after-effect (``hold_off``)
    waits the longest at once.
    """
    cap = params.retest_periods * params.max_backoff
    waits = {k: (p, w) for k, p, w in backoff}
    last = waits.get(key, (0, 0))[0]
    waits[key] = (cap if hold_off else
                  min(max(2 * last, params.retest_periods), cap), 0)
    return tuple((k, p, w) for k, (p, w) in sorted(
        waits.items(), key=lambda x: (x[0][0], x[0][1] or '')))


def climbed(state, params):
    """Whether the guard's first climb is over.

    Every addition it may try has a verdict: retention (and the weight,
    for a light one) for each serving VM, and the split where it may be
    tried. Until then what it keeps is not yet what it will keep; later
    changes come from retests, retries and each VM's periodic
    exploration of its neighbouring rungs, which never end.
    """
    if state.phase != HOLD or not state.kinds:
        return False
    for vm in _serving(state.kinds, params):
        if (params.retention
                and state.verdict(vocabulary.RETENTION, vm) is None):
            return False
        if (params.weight_factors and vm in state.light
                and vm != vocabulary.ALL_VMS
                and state.verdict(vocabulary.WEIGHT, vm) is None):
            return False
    if (params.weight_factors and _joint_due(state, state.kinds)
            and state.verdict(vocabulary.WEIGHT, vocabulary.ALL_VMS) is None):
        return False
    if (params.smt and not state.by_run_time
            and _serving(state.kinds, params)
            and state.verdict(vocabulary.SPLIT) is None):
        return False
    return True


def retries_periodic(state, params):
    """Whether every dropped mechanism waits the longest back-off.

    Until then its retries come every 15, 30, 60 s... (a transient of the
    guard's own schedule); from then on every ``retest_periods *
    max_backoff`` periods, and the guard's probing is periodic.
    """
    cap = params.retest_periods * params.max_backoff
    return all(p >= cap for _k, p, _w in state.backoff)
