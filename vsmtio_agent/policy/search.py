"""The guard: one search for what to keep on a host (doc/source/policy.rst).

A configuration stays only where every VM keeps its floor against the
bare host and the serving VMs gain. Candidates grow from parts that held
up, judged after every pair by anytime-valid bounds (``bounds``); a
bare holdout then watches what is kept, and a change searches again.
"""

import dataclasses
import math
from typing import Optional

from vsmtio_agent.policy import bounds
from vsmtio_agent.policy import vocabulary

# the phases the engine reads (``phase == PROBE``: a probe is running)
HOLD = 'hold'
PROBE = 'probe'
SERVING = 'serving'
COMPUTING = 'computing'
ABBA = (True, False, False, True)       # A = with the candidate
GRADES = vocabulary.GRADES
ACTIVE, SAFE, OUT, DONE = 'active', 'safe', 'eliminated', 'retired'
_STARVED = math.log(1e3)
MIN_LOSS_PAIRS = 4      # a loss is read from an ABBA quadruple on
LEADERS = 4             # of those that may yet be kept, these grow
MAX_DOUBLINGS = 6       # a wait for the classes to hold: at most 64 holdouts


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
    def from_conf(cls, conf, bounds, per_vm=True, smt=True, weights=True,
                  retention=True):
        o = conf.vsmtio_agent
        return cls(cpu_min=o.guard_cpu_min, io_min=o.guard_io_min,
                   alpha=1.0 - o.guard_confidence, pairs=o.guard_probe_pairs,
                   max_pairs=4 * o.guard_probe_pairs,
                   settle_periods=o.guard_settle_periods,
                   rungs=vocabulary.ladder(bounds),
                   start_ns=vocabulary.start_rung(bounds),
                   io_halt_rate=o.guard_io_halt_rate, per_vm=per_vm,
                   smt=smt, retention=retention,
                   **({} if weights else {'weights': ()}))


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the guard decided of one lever for one VM (None: host-wide)."""
    mechanism: str
    kept: bool
    reason: str
    domain: Optional[str] = None
    timeout_ns: Optional[int] = None
    ratios: tuple = ()                  # ((vm, kind, ratio), ...)
    factor: Optional[float] = None

    def _class_ratio(self, kind):
        """The geometric-mean ratio of the VMs of ``kind`` (None: none)."""
        logs = [math.log(r) for _vm, k, r in self.ratios
                if k == kind and r > 0]
        return math.exp(sum(logs) / len(logs)) if logs else None

    cpu_ratio = property(lambda self: self._class_ratio(COMPUTING))
    io_ratio = property(lambda self: self._class_ratio(SERVING))


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A configuration under test (``move``: the lever it changed, how)."""
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
    cleared: bool = False               # every floor shown, once
    spends: int = 0                     # floors' level's index (0: own)

    def gain_bounds(self, params, prior):
        return bounds.interval(self.gain, bounds.spent(
            self.index, params.alpha), prior)

    n = property(lambda self: self.gain.n)


@dataclasses.dataclass(frozen=True)
class State:
    phase: str = HOLD
    kept: vocabulary.Config = vocabulary.BARE
    in_force: vocabulary.Config = vocabulary.BARE
    kinds: tuple = ()                   # ((vm, SERVING or COMPUTING), ...)
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
    finished: Optional[Verdict] = None
    searches: int = 0
    held: int = -1                      # since the last holdout (-1: search)
    last_kept: Optional[dict] = None    # the last measured kept period
    # ((vm, bounds.Running), ...) a holdout is compared with: the kept
    # configuration's log-ratio, or with nothing kept the VM's log level
    reference: tuple = ()
    detector: tuple = ()                # ((vm, bounds.Cusum), ...)
    holdout_gain: bounds.Running = bounds.Running()
    changed: int = 0                    # periods a tenant change was seen
    wait: int = 0                       # bare periods left before a search
    interrupted: int = 0                # searches a change cut short in a row


def step(state, params, stats, served=None):
    """Account the period just run; return the state for the next one."""
    ran = state.in_force
    kinds = vm_kinds(stats, params)
    # a VM came, left or changed class in enough periods in a row (a
    # settling one counts: else a turn in step with settling is missed)
    state = dataclasses.replace(state, finished=None, changed=0 if (
        kinds == state.kinds) else state.changed + 1)
    if state.settling:
        return dataclasses.replace(state, settling=state.settling - 1)
    confirmed = state.changed >= params.confirm_periods
    if confirmed and (state.phase == PROBE or state.wait):
        nxt = _wait(state, params, kinds)
    elif state.wait:
        nxt = dataclasses.replace(state, wait=state.wait - 1) if (
            state.wait > 1) else _begin(state, params, stats, state.kinds)
    elif confirmed or state.held < 0:
        nxt = _begin(state, params, stats, kinds)
    elif state.phase == PROBE:
        nxt = _search_step(state, params, stats, served)
    else:
        nxt = _hold_step(state, params, stats, served)
    if nxt.in_force != ran:
        nxt = dataclasses.replace(nxt, settling=params.settle_periods)
    return nxt


def _wait(state, params, kinds):
    """Run bare until the classes hold, twice as long per search cut short.

    Else the neighbours of a VM whose class turns faster than a search
    ends pay the first probes over and over. At most 64 holdout intervals
    (``MAX_DOUBLINGS``): a host whose tenants came and went for hours is
    searched again within minutes of their settling.
    """
    n = state.interrupted + (state.phase == PROBE)
    wait = params.holdout_every * 2 ** min(n - 1, MAX_DOUBLINGS)
    note = Verdict('search', False, '%s changed before the search ended: '
                   'bare until the classes hold for %d periods' % (', '.join(
                       sorted({vm for vm, _k in set(kinds) ^ set(
                           state.kinds)})), wait))
    return dataclasses.replace(
        state, phase=HOLD, kinds=kinds, kept=vocabulary.BARE, held=0,
        in_force=vocabulary.BARE, candidates=(), changed=0, wait=wait,
        interrupted=n, verdicts=(note,), finished=note)


def _per_vm(stats, read):
    """``{vm: the mean of read(vCPU stats) over its vCPUs}``."""
    got = {}
    for ref, st in stats.items():
        got.setdefault(ref.domain, []).append(read(st))
    return {vm: sum(xs) / len(xs) for vm, xs in got.items()}


def _idle_rate(st):
    # a retention replaces the halt exit it saves
    return max(st.halt_rate or 0.0, st.retention_frequency or 0.0)


def vm_kinds(stats, params):
    """``((vm, kind), ...)``: a VM serves if its vCPUs idle often enough."""
    return tuple((vm, SERVING if rate >= params.io_halt_rate else COMPUTING)
                 for vm, rate in sorted(_per_vm(stats, _idle_rate).items()))


def measure(stats, served, kinds):
    """One period's ``({vm: throughput}, blind, by_run_time)``.

    What a VM serves (else its idle entries), or the instructions it
    retires (else its CPU time, ``by_run_time``, which bounds what it
    computes but shows no sibling's cost; else ``blind``).
    """
    totals, blind, by_run_time = {}, False, False
    for vm, kind in kinds:
        found = [st for ref, st in stats.items() if ref.domain == vm]
        if not found:
            continue
        if kind == SERVING and served and served.get(vm) is not None:
            totals[vm] = served[vm]
            continue
        for name in (('halt_rate',) if kind == SERVING
                     else ('instruction_rate', 'compute_share')):
            rates = [getattr(st, name) for st in found]
            totals[vm] = None if None in rates else sum(rates)
            if totals[vm] is not None:
                by_run_time |= name == 'compute_share'
                break
        blind |= totals[vm] is None and kind == COMPUTING
    return totals, blind, by_run_time


def groups(stats, kinds):
    """The serving VMs grouped by workload, which a host knows by idling."""
    serving = {vm for vm, kind in kinds if kind == SERVING}
    idle = {vm: rate for vm, rate in _per_vm(stats, _idle_rate).items()
            if vm in serving}
    out, last = [], None
    for vm in sorted(idle, key=lambda vm: (idle[vm], vm)):
        rate = max(idle[vm], 1e-9)
        if last is None or rate > 2.0 * last:
            out.append([])
        out[-1].append(vm)
        last = rate
    return tuple(tuple(sorted(g)) for g in out)


def _offers(state, params, why=False):
    """``{lever: its values}`` here (``why``: ``{lever: why not here}``)."""
    got = {
        vocabulary.RETENTION: params.rungs if params.retention
        and params.rungs else 'the host has no retention timeout to turn',
        vocabulary.WEIGHT: params.weights if params.weights and state.light
        else 'the host sets no VM CPU weights' if not params.weights
        else 'no VM is light enough (light_utilisation) to weigh more',
        vocabulary.SPLIT: GRADES if params.smt and not state.by_run_time
        else 'no core has SMT siblings to split' if not params.smt else
        'computing VMs are judged by CPU time here (no instruction '
        'counter), which does not show what a sibling costs them'}
    return {lever: x for lever, x in got.items() if isinstance(x, str) == why}


def untried(state, params):
    """``{lever: why}`` of the levers the host does not offer."""
    out = _offers(state, params, why=True)
    if vocabulary.SPLIT in out:
        out[vocabulary.BORROW] = 'borrowing comes with the split'
    return out


def _units(state, params, lever):
    """The VM tuples a ``lever`` moves together: its groups."""
    if lever == vocabulary.SPLIT:
        return [()]
    if lever == vocabulary.RETENTION and not params.per_vm:
        return [(vocabulary.ALL_VMS,)]
    units = [g if lever == vocabulary.RETENTION else tuple(
        vm for vm in g if vm in state.light) for g in state.groups]
    return [vms for vms in units if vms]


def _steps(lever, values, config, vms, start_ns):
    """The values one step up from the VMs' own, and a timeout's down."""
    got = {config.value(lever, vm) for vm in vms}
    now = (vocabulary.top_split(config.mechanisms) if lever == vocabulary.SPLIT
           else got.pop() if len(got) == 1 else None)
    if now is None:
        return [start_ns if lever == vocabulary.RETENTION else values[0]]
    if now not in values:
        return []
    i = values.index(now)
    return [*values[i + 1:i + 2],
            *(values[i - 1:i] if lever == vocabulary.RETENTION else ())]


def _moves(state, params, config, single=False):
    """``(config, move, value)``: one lever of one unit (``single``: VM)."""
    out = []
    for lever, values in _offers(state, params).items():
        units = _units(state, params, lever)
        for vms in ([(vm,) for u in units if len(u) > 1 for vm in u]
                    if single else units):
            for v in _steps(lever, values, config, vms, params.start_ns):
                if lever == vocabulary.SPLIT:   # each grade, and borrowing
                    new = dataclasses.replace(config, mechanisms=frozenset(
                        config.mechanisms | set(GRADES[:GRADES.index(v) + 1])
                        | {vocabulary.BORROW}))
                else:
                    new = config
                    for vm in vms:
                        new = new.with_value(lever, vm, v)
                out.append((new, (lever, vms), v))
    return out


def _up(move, value, than):
    """Whether ``value`` is up ``move``'s ladder (costlier) from ``than``."""
    rank = GRADES.index if move[0] == vocabulary.SPLIT else float
    return rank(value) > rank(than)


def _ladder(state, params):
    """``{config: index}``: a step up from each candidate whose floors held."""
    return {m[0]: b.spends or b.index for b in state.candidates if b.cleared
            for m in _moves(state, params, b.config)
            if m[1] == b.move and _up(b.move, m[2], b.value)}


def _open(state, params, proposals):
    """``state`` with new proposals, none past a value that lost a floor.

    A step up from a candidate whose floors were shown (``_ladder``) is
    held to its level: a fixed sequence spends no more, nor is it capped.
    """
    cands = list(state.candidates)
    seen = {c.config for c in cands}
    ladder = _ladder(state, params)
    for config, move, value in proposals:
        if config in seen or config == vocabulary.BARE or any(
                c.lost and c.move == move and _up(move, value, c.value)
                for c in cands) or (len(cands) >= params.max_candidates
                                    and config not in ladder):
            continue
        seen.add(config)
        cands.append(Candidate(config, len(cands) + 1, move, value))
    return dataclasses.replace(state, candidates=tuple(cands))


def _begin(state, params, stats, kinds):
    """Start a search from the bare host (the tenants are these now)."""
    _values, blind, by_run_time = measure(stats, None, kinds)
    # a raised weight buys a light VM wake-ups, not CPU time
    load = _per_vm(stats, lambda st: 1.0 if st.utilisation is None
                   else st.utilisation)
    state = dataclasses.replace(state, kinds=kinds, light=frozenset(
        vm for vm, u in load.items() if u <= params.light_utilisation),
        groups=groups(stats, kinds), by_run_time=by_run_time,
        candidates=(), changed=0, held=0, wait=0, pending=None, position=0,
        last_kept=None, detector=(), holdout_gain=bounds.Running())
    if blind or not state.groups:
        return _finish(state, params, (
            'a computing VM cannot be measured (no instruction counter '
            'nor CPU time): nothing is probed' if blind else
            'no VM serves: the mechanisms are for I/O'))
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
    return dataclasses.replace(
        state, phase=PROBE, current=state.candidates.index(c),
        target=min(params.max_pairs, max(params.pairs, 2 * c.n)),
        position=0, pending=None, in_force=c.config)


def pair_logs(kinds, a, b):
    """``({vm: log a/b}, gain log)``, each on the same pairs (or None)."""
    logs = {}
    for vm, _kind in kinds:
        va, vb = a.get(vm), b.get(vm)
        if va is None or vb is None:
            return None
        # (a VM starved in one arm loses; idle in both, no change)
        logs[vm] = (math.log(va / vb) if va > 0 and vb > 0 else 0.0
                    if va <= 0 and vb <= 0 else math.copysign(
                        _STARVED, va - vb))
    serving = [logs[vm] for vm, kind in kinds if kind == SERVING]
    if not serving:
        return None
    return logs, math.fsum(serving) / len(serving)


def _fed(runs, logs):
    """``runs`` (``((vm, Running), ...)``) with ``{vm: x}`` taken in."""
    runs = dict(runs)
    for vm, x in logs.items():
        runs[vm] = runs.get(vm, bounds.Running()).add(x)
    return tuple(sorted(runs.items()))


def add_pair(c, kinds, params, logs, gain, prior=None):
    """``c`` with one pair added: out, safe or still active."""
    c = dataclasses.replace(c, logs=_fed(c.logs, logs),
                            gain=c.gain.add(gain))
    low, prior, runs = True, prior or {}, dict(c.logs)
    alpha = bounds.spent(c.spends or c.index, params.alpha)
    for vm, kind in kinds:
        floor = math.log(params.cpu_min if kind == COMPUTING
                         else params.io_min)
        lo, hi = bounds.interval(runs[vm], alpha, prior.get(vm))
        if hi < floor and c.n >= MIN_LOSS_PAIRS:
            return dataclasses.replace(c, status=OUT, lost=True, reason=(
                '%s at most %.3f, below its floor %.2f, after %d pairs'
                % (vm, math.exp(hi), math.exp(floor), c.n)))
        low = low and lo >= floor
    lo, _hi = c.gain_bounds(params, prior.get(None))
    safe = low and lo > 0.0 and c.n >= params.pairs
    status = c.status if c.status == DONE else (SAFE if safe else ACTIVE)
    return dataclasses.replace(c, status=status, safe=safe, cleared=(
        c.cleared or low and c.n >= params.pairs), reason=(
        'every VM clears its floor and the gain is at least %.3f after %d '
        'pairs' % (math.exp(lo), c.n) if safe else
        'not yet shown to clear every floor and gain after %d pairs' % c.n))


def priors(candidates):
    """``{vm: variance}`` pooled over the candidates (``None``: the gain).

    A VM whose pairs leave fewer than two degrees of freedom has none.
    """
    runs = {}
    for c in candidates:
        for vm, r in ((None, c.gain),) + c.logs:
            if r.n > 1:
                runs.setdefault(vm, []).append(r)
    df = {vm: sum(r.n - 1 for r in rs) for vm, rs in runs.items()}
    return {vm: math.fsum(r.m2 for r in rs) / df[vm]
            for vm, rs in runs.items() if df[vm] >= 2}


def _best(candidates, params):
    """The safe candidate with the highest lower bound on its gain."""
    safe = [c for c in candidates if c.safe and c.status != OUT]
    prior = priors(candidates).get(None)
    return max(safe, key=lambda c: (c.gain_bounds(params, prior)[0],
                                    -c.index), default=None)


def _search_step(state, params, stats, served):
    """Account one measured period of the visit under way."""
    values, blind, _cpu = measure(stats, served, state.kinds)
    if blind:
        return _begin(state, params, stats, state.kinds)
    i = state.current
    c = state.candidates[i]
    pos = state.position + 1
    arm = c.config if ABBA[pos % 4] else vocabulary.BARE
    if state.pending is None:
        return dataclasses.replace(state, position=pos, in_force=arm,
                                   pending=(state.in_force == c.config,
                                            values))
    first_with, first = state.pending
    got = pair_logs(state.kinds, *((first, values) if first_with
                                   else (values, first)))
    if got is not None:
        c = add_pair(dataclasses.replace(c, spends=min(_ladder(
            state, params).get(c.config, c.index), c.spends or c.index)),
            state.kinds, params, *got, prior=priors(state.candidates))
    state = dataclasses.replace(state, position=pos, pending=None,
                                candidates=state.candidates[:i] + (c,)
                                + state.candidates[i + 1:])
    if c.status == OUT or c.n >= state.target or pos >= 4 * state.target:
        return _visit(_after_visit(state, params), params)
    return dataclasses.replace(state, in_force=arm)


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
        floor = best.gain_bounds(params, prior)[0]
        for i, x in enumerate(cands):
            hi = x.gain_bounds(params, prior)[1]
            if x is not best and x.status != OUT and hi < floor:
                cands[i] = dataclasses.replace(x, status=OUT, reason=(
                    'gains at most %.3f, below the %.3f %s is shown to '
                    'gain' % (math.exp(hi), math.exp(floor),
                              describe(best.config))))
    state = dataclasses.replace(state, candidates=tuple(cands))
    if c.lost and c.move[0] == vocabulary.RETENTION:
        # a shorter timeout costs the neighbours less: it may keep floors
        state = _open(state, params, [
            m for m in _moves(state, params, c.config)
            + _moves(state, params, c.config, True)
            if m[1] == c.move and m[2] < c.value])
    leaders = sorted((x for x in cands if x.status == ACTIVE
                      or x.safe and x.status != OUT),
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
    parts.append(vocabulary.top_split(config.mechanisms))
    return ', '.join(p for p in parts if p) or 'the bare host'


def _finish(state, params, why):
    """Keep the best safe candidate (or nothing); say why for each lever."""
    best = _best(state.candidates, params)
    kept = best.config if best is not None else vocabulary.BARE
    summary = Verdict('search', best is not None, why or (
        'kept %s of %d candidates: %s' % (
            describe(kept), len(state.candidates),
            best.reason if best else 'none shown safe and gaining, so '
            'none is probed again until the bare host changes')))
    return dataclasses.replace(
        state, phase=HOLD, kept=kept, in_force=kept, current=None,
        pending=None, searches=state.searches + 1, held=0, finished=summary,
        interrupted=0,
        reference=best.logs if best is not None else (), detector=(),
        verdicts=tuple(_verdict(state, kept, best, lever, vm, why)
                       for lever in _offers(state, params)
                       for vms in _units(state, params, lever)
                       for vm in vms or (None,)) + (summary,),
        last_kept=None, holdout_gain=bounds.Running())


def _verdict(state, kept, best, lever, vm, why):
    """One lever's verdict for one VM: kept, or why its candidates went."""
    def has(config):
        if lever == vocabulary.SPLIT:
            return vocabulary.SPLIT in config.mechanisms
        return config.value(lever, vm) is not None
    with_it = [c for c in state.candidates if has(c.config)]
    now = has(kept)
    # the one with most pairs speaks for the candidates that went
    speaker = best if now else max(with_it, key=lambda c: c.n, default=None)
    if speaker is None:
        reason = why or 'not tried'
    elif now:
        reason = 'kept in %s: %s' % (describe(kept), speaker.reason)
    else:
        reason = 'not kept (%d candidates with it; %s: %s)' % (
            len(with_it), describe(speaker.config), speaker.reason
            + (', but gains less than what is kept' if speaker.safe
               else ''))
    kind = dict(state.kinds)
    return Verdict(
        lever, now, reason, domain=vm,
        timeout_ns=kept.value(lever, vm) if lever == vocabulary.RETENTION
        else None,
        factor=kept.value(lever, vm) if lever == vocabulary.WEIGHT else None,
        ratios=tuple((x, kind.get(x), math.exp(r.mean))
                     for x, r in (speaker.logs if speaker else ())))


def _hold_step(state, params, stats, served):
    """A period of the kept configuration, or of the holdout."""
    held = state.held + 1
    values, blind, _cpu = measure(stats, served, state.kinds)
    if state.kept == vocabulary.BARE and (held < params.holdout_every
                                          or blind):
        return dataclasses.replace(state, held=held)
    if vocabulary.BARE in (state.kept, state.in_force):
        return _observe(state, params, values)
    holdout = held >= params.holdout_every - params.settle_periods - 1
    return dataclasses.replace(
        state, held=held, last_kept=None if blind else values,
        in_force=vocabulary.BARE if holdout else state.kept)


def _observe(state, params, values):
    """Feed the detector one holdout; search again on an alarm.

    A holdout is each VM's ratio of the bare period to the last kept one
    or, with nothing kept, its level, whose first ``pairs`` only make the
    reference (as many as a kept candidate's).
    """
    state = dataclasses.replace(state, held=0, in_force=state.kept)
    if state.kept == vocabulary.BARE:
        logs = {vm: math.log(v) for vm, v in values.items() if v and v > 0}
        known = dict(state.reference)
        if min((known[vm].n for vm in logs if vm in known), default=0) < (
                params.pairs):
            return dataclasses.replace(state, reference=_fed(
                state.reference, logs))
    else:
        got = (pair_logs(state.kinds, state.last_kept, values)
               if state.last_kept is not None else None)
        if got is None:
            return state
        logs, gain = got
    state, alarm = _detect(state, params, logs)
    if state.kept == vocabulary.BARE:
        note = Verdict('watch', False, (
            'nothing kept; the bare host changed: %s; searching again'
            % ', '.join('%s at %.3f of its level' % (vm, math.exp(d))
                        for vm, d in alarm)))
    else:
        run = state.holdout_gain.add(gain)
        note = _holdout_verdict(params, run, logs, alarm)
        state = dataclasses.replace(state, holdout_gain=run, verdicts=tuple(
            v for v in state.verdicts if v.mechanism != 'holdout') + (note,))
    return dataclasses.replace(state, finished=note, held=-1) if alarm \
        else state


def _holdout_verdict(params, run, logs, alarm):
    cost = math.expm1(run.mean) * (params.settle_periods + 1) / (
        params.holdout_every + params.settle_periods)
    return Verdict('holdout', not alarm, (
        'one period in %d bare: %d holdouts, the kept configuration gains '
        '%.3f over them, so the holdout costs %.2f%% of what is served; %s'
        % (params.holdout_every, run.n, math.exp(run.mean), 100.0 * cost,
           'changed: %s; searching again' % ', '.join(
               '%s at %.3f' % (vm, math.exp(logs[vm])) for vm, _d in alarm)
           if alarm else 'no change')))


def _detect(state, params, logs):
    """``(state, [(vm, log distance)])`` with one observation per VM in.

    Each a new draw from its reference (whose mean's error counts).
    """
    cusums, reference, alarm = dict(state.detector), dict(state.reference), []
    for vm, r in state.reference:
        if vm in logs:
            z = (logs[vm] - r.mean) / (math.sqrt(r.variance)
                                       * math.sqrt(1.0 + 1.0 / r.n))
            cusums[vm], hit = cusums.get(vm, bounds.Cusum()).step(
                z, params.cusum_drift, params.cusum_threshold)
            reference[vm] = r.add(logs[vm])
            alarm += [(vm, logs[vm] - r.mean)] if hit else []
    return dataclasses.replace(
        state, detector=tuple(sorted(cusums.items())),
        reference=tuple(sorted(reference.items()))), alarm
