"""The search guard: one procedure that finds what to keep on a host.

The guard's procedure (doc/source/policy.rst): a configuration
stays only where every VM keeps its floor against the bare host and the
serving VMs gain. Candidates (whole configurations: a timeout and a
weight per group of serving VMs, a split grade) grow from the levers the
host offers, each survivor opening its one-step neighbours, so joint
configurations are built from parts that held up, and no lever steps
past a value where a candidate it moved lost a floor. Each is probed
against the bare host in ABBA blocks; each VM's per-pair log-ratio has
an anytime-valid bound (:mod:`vsmtio_agent.policy.bounds`) read after
every pair, candidate ``i`` at level ``alpha / (i * (i + 1))``, so the
chance of keeping anything that misses a floor or the gain is at most
``alpha`` however often the search looks. A candidate goes once a VM's
upper bound is below its floor or its gain's upper bound below the best
safe candidate's lower bound; the best safe one is kept. One bare
holdout period in ``holdout_every`` feeds a CUSUM per VM, whose alarm,
or a tenant's change, starts the search again. Where nothing is kept,
the period at the holdout's place feeds each VM's level to the same
detector instead: repeating a search on a host that has not changed
would cost its tenants the same probes for the same answer. Pure:
samples in, state out (``in_force``, ``kept``, ``phase``, ``verdicts``,
``finished``).

What it chooses among is :mod:`vsmtio_agent.policy.vocabulary` (the
mechanisms, a configuration, the timeout ladder); how a probe reads a
period and reports is :mod:`vsmtio_agent.policy.probing`.
"""

import dataclasses
import math
from typing import Optional

from vsmtio_agent.policy import bounds
from vsmtio_agent.policy import probing
from vsmtio_agent.policy import vocabulary

# the phases the engine reads (``phase == PROBE``: a probe is running)
HOLD = 'hold'
PROBE = 'probe'
GRADES = (vocabulary.SPLIT,) + vocabulary.WIDER
ACTIVE, SAFE, OUT, DONE = 'active', 'safe', 'eliminated', 'retired'
_STARVED = math.log(1e3)
MIN_LOSS_PAIRS = 4
# a survivor grows neighbours while among this many leaders by gain
LEADERS = 4


@dataclasses.dataclass(frozen=True)
class Params:
    """The floors, the search's budget and the holdout's schedule."""

    cpu_min: float = 0.97
    io_min: float = 1.0
    alpha: float = 0.1
    pairs: int = 8
    max_pairs: int = 32
    max_candidates: int = 24
    settle_periods: int = 1
    rungs: tuple = (50000, 100000, 200000, 400000, 800000)
    start_ns: int = 50000
    # the oracle's grid, 1 to 4 by 0.25 (empty: the host sets no weight)
    weights: tuple = tuple(1.0 + 0.25 * i for i in range(1, 13))
    light_utilisation: float = 0.5
    io_halt_rate: float = 20.0
    holdout_every: int = 40
    cusum_drift: float = 0.5
    cusum_threshold: float = 10.0
    confirm_periods: int = 3
    per_vm: bool = True
    smt: bool = True
    retention: bool = True

    def __post_init__(self):
        if (self.pairs < 2 or self.max_pairs < self.pairs
                or not 0.0 < self.alpha < 0.5
                or self.holdout_every < self.settle_periods + 3):
            raise ValueError('bad search parameters: %r' % (self,))

    @classmethod
    def from_conf(cls, conf, bounds=None, per_vm=True, smt=True,
                  weights=True, retention=True):
        o = conf.vsmtio_agent
        extra = {}
        if bounds is not None:
            extra = dict(rungs=vocabulary.ladder(bounds),
                         start_ns=vocabulary.start_rung(bounds))
        return cls(cpu_min=o.guard_cpu_min, io_min=o.guard_io_min,
                   alpha=1.0 - o.guard_confidence,
                   pairs=o.guard_probe_pairs,
                   max_pairs=4 * o.guard_probe_pairs,
                   settle_periods=o.guard_settle_periods,
                   **({} if weights else {'weights': ()}),
                   io_halt_rate=o.guard_io_halt_rate, per_vm=per_vm,
                   smt=smt, retention=retention, **extra)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A configuration under test and what its pairs showed so far.

    ``index`` is its order of opening (its level); ``move`` the lever and
    VMs that differ from the candidate it grew from, ``value`` theirs.
    """

    config: vocabulary.Config
    index: int
    move: tuple = ()
    value: Optional[float] = None
    logs: tuple = ()                    # ((vm, bounds.Running), ...)
    gain: bounds.Running = bounds.Running()
    status: str = ACTIVE
    reason: str = 'not yet probed'
    safe: bool = False                  # every floor and the gain shown
    lost: bool = False                  # a VM shown below its floor

    def level(self, params):
        return bounds.spent(self.index, params.alpha)

    @property
    def n(self):
        return self.gain.n


@dataclasses.dataclass(frozen=True)
class State:
    phase: str = HOLD
    kept: vocabulary.Config = vocabulary.BARE
    in_force: vocabulary.Config = vocabulary.BARE
    kinds: tuple = ()
    light: frozenset = frozenset()
    groups: tuple = ()
    by_run_time: bool = False
    candidates: tuple = ()
    current: Optional[int] = None       # the candidate being visited
    target: int = 0                     # its pairs at the visit's end
    position: int = 0                   # measured periods of the visit
    pending: Optional[dict] = None      # the first period of a pair
    settling: int = 0
    verdicts: tuple = ()
    alarms: tuple = ()
    finished: Optional[probing.Verdict] = None
    searches: int = 0
    held: int = 0                       # periods since the last holdout
    last_kept: Optional[dict] = None    # the last measured kept period
    # what the detector compares a period with, per VM: the kept
    # configuration's log-ratio over the bare host, or, with nothing
    # kept, the VM's log level on the bare host
    reference: tuple = ()               # ((vm, bounds.Running), ...)
    detector: tuple = ()                # ((vm, bounds.Cusum), ...)
    holdout_gain: bounds.Running = bounds.Running()
    changed: int = 0                    # periods a tenant change was seen

    @property
    def split_share(self):
        return vocabulary.split_share(self.in_force.mechanisms)


def start():
    """Nothing kept; the search starts at the first period."""
    return State(held=-1)


def step(state, params, stats, served=None):
    """Account the period just run; return the state for the next one."""
    ran = state.in_force
    state = dataclasses.replace(state, finished=None)
    if state.settling:
        return dataclasses.replace(state, settling=state.settling - 1)
    kinds = probing.vm_kinds(stats, params)
    # a tenant changed (a VM came, left or changed class): seen in
    # ``confirm_periods`` periods in a row, for classes may flicker
    state = dataclasses.replace(state, changed=0 if kinds == state.kinds
                                else state.changed + 1)
    if state.changed >= params.confirm_periods or state.held < 0:
        nxt = _begin(state, params, stats, kinds)
    elif state.phase == PROBE:
        nxt = _search_step(state, params, stats, served)
    else:
        nxt = _hold_step(state, params, stats, served)
    if nxt.in_force != ran:
        nxt = dataclasses.replace(nxt, settling=params.settle_periods)
    return nxt


# -- what the host offers ------------------------------------------------

def groups(stats, kinds):
    """The serving VMs grouped by workload, as far as the host shows it.

    VMs whose vCPUs idle at rates within a factor of two of their
    neighbour's in rate order are taken as one workload: a real host knows
    VMs by UUID only, and its VMs of one workload wait alike.
    """
    serving = {vm for vm, kind in kinds if kind == probing.SERVING}
    idle = {}
    for ref, st in stats.items():
        if ref.domain in serving:
            rate = max(st.halt_rate or 0.0, st.retention_frequency or 0.0)
            idle.setdefault(ref.domain, []).append(rate)
    order = sorted(idle, key=lambda vm: (sum(idle[vm]) / len(idle[vm]), vm))
    out, last = [], None
    for vm in order:
        rate = max(sum(idle[vm]) / len(idle[vm]), 1e-9)
        if last is None or rate > 2.0 * last:
            out.append([])
        out[-1].append(vm)
        last = rate
    return tuple(tuple(sorted(g)) for g in out)


def _offers(state, params):
    """The levers this host and these VMs offer: ``{lever: values}``."""
    out = {}
    if params.retention and params.rungs:
        out[vocabulary.RETENTION] = params.rungs
    if params.weights and state.light:
        out[vocabulary.WEIGHT] = params.weights
    if params.smt and not state.by_run_time:
        out[vocabulary.SPLIT] = GRADES
    return out


def untried(state, params):
    """``{lever: why}`` of the levers this host and these VMs do not offer.

    The reasons :func:`_offers` leaves a lever out, so ``status`` says why
    rather than ``mechanisms kept: none`` with nothing said.
    """
    offered = _offers(state, params)
    out = {}
    if vocabulary.RETENTION not in offered:
        out[vocabulary.RETENTION] = 'the host has no retention timeout to turn'
    if vocabulary.WEIGHT not in offered:
        out[vocabulary.WEIGHT] = (
            'the host sets no VM CPU weights' if not params.weights
            else 'no VM is light enough (light_utilisation) to weigh more')
    if vocabulary.SPLIT not in offered:
        out[vocabulary.SPLIT] = (
            'no core has SMT siblings to split' if not params.smt else
            'computing VMs are judged by CPU time here (no instruction '
            'counter), which does not show what a sibling costs them')
        out[vocabulary.BORROW] = 'borrowing comes with the split'
    return out


def _units(state, params, lever):
    """The VM tuples a ``lever`` moves together: groups, then single VMs."""
    if lever == vocabulary.SPLIT:
        return [()]
    if lever == vocabulary.RETENTION and not params.per_vm:
        return [(vocabulary.ALL_VMS,)]
    units = []
    for g in state.groups:
        vms = g if lever == vocabulary.RETENTION else tuple(
            vm for vm in g if vm in state.light)
        if vms:
            units.append(vms)
    return units


def _value(config, lever, vms):
    """``lever``'s value for every VM of ``vms`` (None: unset or mixed)."""
    if lever == vocabulary.SPLIT:
        return vocabulary.top_split(config.mechanisms)
    got = {config.value(lever, vm) for vm in vms}
    return got.pop() if len(got) == 1 else None


def _set(config, lever, vms, value):
    """``config`` with ``lever`` at ``value`` for ``vms`` (split: borrow)."""
    if lever == vocabulary.SPLIT:
        levels = GRADES[:GRADES.index(value) + 1]
        return dataclasses.replace(config, mechanisms=frozenset(
            config.mechanisms | set(levels) | {vocabulary.BORROW}))
    for vm in vms:
        config = config.with_value(lever, vm, value)
    return config


def _next(values, now):
    """The value one step up from ``now`` (the first from unset), or None."""
    if now is None:
        return values[0]
    i = values.index(now) + 1 if now in values else len(values)
    return values[i] if i < len(values) else None


def _moves(state, params, config, single=False):
    """``(config, move, value)``: one lever of one unit one step on.

    A step is up (a longer timeout, a larger weight, a wider split) from
    where the unit is; a timeout also steps down. ``single`` moves each VM
    of a multi-VM group alone (the refinement of a leader).
    """
    out = []
    for lever, values in _offers(state, params).items():
        units = _units(state, params, lever)
        if single:
            units = [(vm,) for u in units if len(u) > 1 for vm in u]
        for vms in units:
            now = _value(config, lever, vms)
            steps = [_next(values, now)]
            if lever == vocabulary.RETENTION and now is None:
                steps = [params.start_ns]
            elif lever == vocabulary.RETENTION and now in values:
                i = values.index(now)
                steps.append(values[i - 1] if i else None)
            for v in steps:
                if v is not None:
                    out.append((_set(config, lever, vms, v), (lever, vms), v))
    return out


def _beyond_cliff(candidates, move, value):
    """Whether ``value`` of ``move`` passes one a candidate failed a floor at.

    Only a loss (an upper bound below a floor) marks a cliff; every lever
    costs the neighbours more as it grows (a longer retention holds a
    hyperthread longer, a larger weight takes more of the period).
    """
    def rank(v):
        return GRADES.index(v) if move[0] == vocabulary.SPLIT else v
    for c in candidates:
        if c.lost and c.move == move and rank(value) > rank(c.value):
            return True
    return False


def _open(state, params, proposals):
    """``state`` with the proposals not yet opened added, up to the cap."""
    cands = list(state.candidates)
    seen = {c.config for c in cands}
    for config, move, value in proposals:
        if len(cands) >= params.max_candidates:
            break
        if config in seen or config == vocabulary.BARE or _beyond_cliff(
                cands, move, value):
            continue
        seen.add(config)
        cands.append(Candidate(config, len(cands) + 1, move, value))
    return dataclasses.replace(state, candidates=tuple(cands))


# -- the search ----------------------------------------------------------

def _begin(state, params, stats, kinds):
    """Start a search from the bare host (the tenants are these now)."""
    _values, blind, by_run_time = probing.measure(stats, None, kinds)
    state = dataclasses.replace(
        state, kinds=kinds, light=probing.light(stats, params),
        groups=groups(stats, kinds), by_run_time=by_run_time,
        candidates=(), changed=0, held=0, pending=None, position=0,
        last_kept=None, detector=(), holdout_gain=bounds.Running())
    if blind or not state.groups:
        why = ('a computing VM cannot be measured (no instruction counter '
               'nor CPU time): nothing is probed' if blind else
               'no VM serves: the mechanisms are for I/O')
        return _finish(state, params, why)
    state = _open(state, params, _moves(state, params, vocabulary.BARE))
    if not state.candidates:
        return _finish(state, params, 'the host offers no lever')
    return _visit(state, params)


def _visit(state, params):
    """Visit the active candidate with the fewest pairs, or finish."""
    active = [c for c in state.candidates if c.status in (ACTIVE, SAFE)]
    best = _best(state.candidates, params)
    if not active or (len(active) == 1 and active[0] is best):
        return _finish(state, params, None)
    c = min(active, key=lambda x: (x.n, x.index))
    target = min(params.max_pairs, max(params.pairs, 2 * c.n))
    i = state.candidates.index(c)
    return dataclasses.replace(state, phase=PROBE, current=i, target=target,
                               position=0, pending=None, in_force=c.config)


def _floor(params, kind):
    return math.log(params.cpu_min if kind == probing.COMPUTING
                    else params.io_min)


def pair_logs(kinds, a, b):
    """``({vm: log of a over b}, gain log)`` of one pair, or None.

    None where a VM went unmeasured in either period: the pair then says
    nothing of it, and a candidate's VMs are judged on the same pairs.
    """
    logs = {}
    for vm, _kind in kinds:
        va, vb = a.get(vm), b.get(vm)
        if va is None or vb is None:
            return None
        # (a VM starved in one arm loses; idle in both, no change)
        logs[vm] = (math.log(va / vb) if va > 0 and vb > 0 else 0.0
                    if va <= 0 and vb <= 0 else math.copysign(
                        _STARVED, va - vb))
    serving = [logs[vm] for vm, kind in kinds if kind == probing.SERVING]
    if not serving:
        return None
    return logs, math.fsum(serving) / len(serving)


def add_pair(c, kinds, params, logs, gain, prior=None):
    """``c`` with one pair added, eliminated if a VM is below its floor."""
    runs = dict(c.logs)
    runs = {vm: runs.get(vm, bounds.Running()).add(logs[vm])
            for vm, _kind in kinds}
    c = dataclasses.replace(c, logs=tuple(sorted(runs.items())),
                            gain=c.gain.add(gain))
    return judge(c, kinds, params, prior or {})


def priors(candidates):
    """``{vm: variance}`` pooled over the candidates (``None``: the gain)."""
    runs = {}
    for c in candidates:
        runs.setdefault(None, []).append(c.gain)
        for vm, r in c.logs:
            runs.setdefault(vm, []).append(r)
    return {vm: bounds.pooled_variance(rs) for vm, rs in runs.items()}


def judge(c, kinds, params, prior):
    """``c``'s status after its latest pair: out, safe or still active.

    A loss is read from ``MIN_LOSS_PAIRS`` pairs on (an ABBA quadruple).
    """
    alpha = c.level(params)
    low = True
    runs = dict(c.logs)
    for vm, kind in kinds:
        lo, hi = bounds.interval(runs[vm], alpha, prior.get(vm))
        if hi < _floor(params, kind) and c.n >= MIN_LOSS_PAIRS:
            return dataclasses.replace(c, status=OUT, lost=True, reason=(
                '%s at most %.3f, below its floor %.2f, after %d pairs'
                % (vm, math.exp(hi), math.exp(_floor(params, kind)), c.n)))
        low = low and lo >= _floor(params, kind)
    lo, _hi = bounds.interval(c.gain, alpha, prior.get(None))
    safe = low and lo > 0.0 and c.n >= params.pairs
    status = c.status if c.status == DONE else (SAFE if safe else ACTIVE)
    return dataclasses.replace(c, status=status, safe=safe, reason=(
        'every VM clears its floor and the gain is at least %.3f after %d '
        'pairs' % (math.exp(lo), c.n) if safe else
        'not yet shown to clear every floor and gain after %d pairs' % c.n))


def _best(candidates, params):
    """The safe candidate with the highest lower bound on its gain."""
    safe = [c for c in candidates if c.safe and c.status != OUT]
    prior = priors(candidates).get(None)
    return max(safe, key=lambda c: (bounds.interval(
        c.gain, c.level(params), prior)[0], -c.index), default=None)


def _search_step(state, params, stats, served):
    """Account one measured period of the visit under way."""
    values, blind, _cpu = probing.measure(stats, served, state.kinds)
    if blind:
        return _begin(state, params, stats, state.kinds)
    c = state.candidates[state.current]
    pos = state.position + 1
    if state.pending is None:
        return dataclasses.replace(
            state, position=pos, pending=(state.in_force == c.config,
                                          values),
            in_force=c.config if probing.ABBA[pos % 4] else vocabulary.BARE)
    first_with, first = state.pending
    a, b = (first, values) if first_with else (values, first)
    got = pair_logs(state.kinds, a, b)
    if got is not None:
        c = add_pair(c, state.kinds, params, *got,
                     prior=priors(state.candidates))
    cands = list(state.candidates)
    cands[state.current] = c
    state = dataclasses.replace(state, candidates=tuple(cands),
                                position=pos, pending=None)
    if c.status == OUT or c.n >= state.target or pos >= 4 * state.target:
        return _visit(_after_visit(state, params), params)
    return dataclasses.replace(
        state, in_force=c.config if probing.ABBA[pos % 4] else vocabulary.BARE)


def _after_visit(state, params):
    """Retire, eliminate by gain, and grow from the visited candidate."""
    cands = list(state.candidates)
    c = cands[state.current]
    if c.status in (ACTIVE, SAFE) and c.n >= params.max_pairs:
        c = cands[state.current] = dataclasses.replace(
            c, status=DONE, reason=c.reason + ' (its pairs spent)')
    best = _best(cands, params)
    prior = priors(cands).get(None)
    if best is not None:
        floor = bounds.interval(best.gain, best.level(params), prior)[0]
        for i, x in enumerate(cands):
            hi = bounds.interval(x.gain, x.level(params), prior)[1]
            if x is not best and x.status != OUT and hi < floor:
                cands[i] = dataclasses.replace(x, status=OUT, reason=(
                    'gains at most %.3f, below the %.3f %s is shown to '
                    'gain' % (math.exp(hi), math.exp(floor),
                              describe(best.config))))
    state = dataclasses.replace(state, candidates=tuple(cands))
    leaders = sorted((x for x in cands if x.status != OUT),
                     key=lambda x: (-x.gain.mean, x.index))[:LEADERS]
    if not any(x is c for x in leaders):
        return state
    state = _open(state, params, _moves(state, params, c.config))
    if leaders[0] is c and c.n >= 2 * params.pairs:
        state = _open(state, params, _moves(state, params, c.config, True))
    return state


def describe(config):
    """A configuration in a few words (for reasons and logs)."""
    parts = ['%s %gus' % (vm, ns / 1000) for vm, ns in config.timeouts]
    parts += ['%s x%g' % (vm, f) for vm, f in config.weights]
    top = vocabulary.top_split(config.mechanisms)
    if top is not None:
        parts.append(top)
    return ', '.join(parts) or 'the bare host'


# -- the end of a search, and the holdout ---------------------------------

def _finish(state, params, why):
    """Keep the best safe candidate (or nothing); say why for each lever."""
    best = _best(state.candidates, params)
    kept = best.config if best is not None else vocabulary.BARE
    reference = best.logs if best is not None else ()
    summary = probing.Verdict('search', best is not None, why or (
        'kept %s of %d candidates: %s' % (
            describe(kept), len(state.candidates),
            best.reason if best else 'none shown safe and gaining, so '
            'none is probed again until the bare host changes')))
    return dataclasses.replace(
        state, phase=HOLD, kept=kept, in_force=kept, current=None,
        pending=None, searches=state.searches + 1, held=0,
        reference=reference, detector=(), verdicts=verdicts(
            state, params, kept, best, why) + (summary,),
        alarms=(), finished=summary, last_kept=None,
        holdout_gain=bounds.Running())


def verdicts(state, params, kept, best, why=None):
    """One verdict per lever and VM the search could have kept.

    Kept where ``kept`` has it; otherwise why the candidates with it
    went (the one with most pairs speaks for them), or ``why`` none ran.
    """
    return tuple(_verdict(state, kept, best, lever, vm, why)
                 for lever in _offers(state, params)
                 for vms in _units(state, params, lever)
                 for vm in vms or (None,))


def _verdict(state, kept, best, lever, vm, why):
    has = [c for c in state.candidates if _has(c.config, lever, vm)]
    now = _has(kept, lever, vm)
    speaker = best if now else max(has, key=lambda c: c.n, default=None)
    if speaker is None:
        reason = why or 'not tried'
    elif now:
        reason = 'kept in %s: %s' % (describe(kept), speaker.reason)
    else:
        reason = 'not kept (%d candidates with it; %s: %s)' % (
            len(has), describe(speaker.config), speaker.reason
            + (', but gains less than what is kept' if speaker.safe
               else ''))
    return probing.Verdict(
        lever, now, reason, domain=vm,
        timeout_ns=kept.timeout(vm) if lever == vocabulary.RETENTION else None,
        factor=kept.weight(vm) if lever == vocabulary.WEIGHT else None,
        ratios=_ratios(state, speaker),
        utility=(math.exp(speaker.gain.mean)
                 if speaker is not None and speaker.n else None))


def _has(config, lever, vm):
    if lever == vocabulary.SPLIT:
        return vocabulary.SPLIT in config.mechanisms
    return config.value(lever, vm) is not None


def _ratios(state, c):
    kind = dict(state.kinds)
    return tuple((vm, kind.get(vm), math.exp(r.mean))
                 for vm, r in (c.logs if c else ()))


def _hold_step(state, params, stats, served):
    """A period of the kept configuration, or of the holdout."""
    held = state.held + 1
    values, blind, _cpu = probing.measure(stats, served, state.kinds)
    if state.kept == vocabulary.BARE:
        if held < params.holdout_every or blind:
            return dataclasses.replace(state, held=held)
        return _watch(dataclasses.replace(state, held=0), params, values)
    if state.in_force == vocabulary.BARE:
        # the holdout period just ran: its pair with the last kept one
        return _holdout(state, params, values)
    last = None if blind else values
    if held >= params.holdout_every - params.settle_periods - 1:
        return dataclasses.replace(state, held=held, last_kept=last,
                                   in_force=vocabulary.BARE)
    return dataclasses.replace(state, held=held, last_kept=last,
                               in_force=state.kept)


def _holdout(state, params, values):
    """Feed the detector one holdout pair; restart the search on alarm."""
    state = dataclasses.replace(state, held=0, in_force=state.kept)
    got = (pair_logs(state.kinds, state.last_kept, values)
           if state.last_kept is not None else None)
    if got is None:
        return state
    logs, gain = got
    state, alarm = _detect(state, params, logs)
    run = state.holdout_gain.add(gain)
    cost = math.expm1(run.mean) * (params.settle_periods + 1) / (
        params.holdout_every + params.settle_periods)
    note = probing.Verdict('holdout', not alarm, (
        'one period in %d bare: %d holdouts, the kept configuration gains '
        '%.3f over them, so the holdout costs %.2f%% of what is served; %s'
        % (params.holdout_every, run.n, math.exp(run.mean), 100.0 * cost,
           'changed: %s; searching again' % ', '.join(
               '%s at %.3f' % (vm, math.exp(logs[vm])) for vm, _d in alarm)
           if alarm else 'no change')))
    verdicts = tuple(v for v in state.verdicts if v.mechanism != 'holdout')
    state = dataclasses.replace(state, holdout_gain=run,
                                verdicts=verdicts + (note,))
    return _again(state, note) if alarm else state


def _watch(state, params, values):
    """With nothing kept: one period's level of each VM, as a holdout's.

    Its first ``pairs`` observations only make the reference, so the
    detector starts from as many as a kept candidate's.
    """
    logs = {vm: math.log(v) for vm, v in values.items() if v and v > 0}
    known = dict(state.reference)
    if min((known[vm].n for vm in logs if vm in known), default=0) < (
            params.pairs):
        return dataclasses.replace(state, reference=_levels(
            state.reference, logs))
    state, alarm = _detect(state, params, logs)
    if not alarm:
        return state
    return _again(state, probing.Verdict('watch', False, (
        'nothing kept; the bare host changed: %s; searching again'
        % ', '.join('%s at %.3f of its level' % (vm, math.exp(d))
                    for vm, d in alarm))))


def _detect(state, params, logs):
    """``(state, [(vm, log distance)])``: one observation per VM taken in.

    The alarms are the VMs whose CUSUM crossed, with the observation's
    distance from their reference.

    Each is standardised as a new draw from the reference (its mean's own
    error included), which then takes it in: the detector starts from the
    kept candidate's pairs (or the watch's first periods) and sharpens
    with every observation.
    """
    cusums = dict(state.detector)
    reference = dict(state.reference)
    alarm = []
    for vm, r in state.reference:
        if vm not in logs:
            continue
        z = (logs[vm] - r.mean) / (r.sd * math.sqrt(1.0 + 1.0 / r.n))
        cusums[vm], hit = bounds.cusum_step(
            cusums.get(vm, bounds.Cusum()), z, params.cusum_drift,
            params.cusum_threshold)
        reference[vm] = r.add(logs[vm])
        if hit:
            alarm.append((vm, logs[vm] - r.mean))
    return dataclasses.replace(
        state, detector=tuple(sorted(cusums.items())),
        reference=tuple(sorted(reference.items()))), alarm


def _again(state, note):
    """The search starts at the next period, from the bare host."""
    return dataclasses.replace(state, finished=note, held=-1)


def _levels(levels, logs):
    """``levels`` with each VM's log level of one period added."""
    runs = dict(levels)
    for vm, x in logs.items():
        runs[vm] = runs.get(vm, bounds.Running()).add(x)
    return tuple(sorted(runs.items()))


def climbed(state):
    """Whether a search has ended and what it keeps is in force."""
    return state.searches > 0 and state.phase == HOLD
