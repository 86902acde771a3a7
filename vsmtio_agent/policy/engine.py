"""The vSMT-IO policy engine: one deterministic step per period (§4.1).

Each period: busy vCPUs are kept on distinct cores where there are
enough (:mod:`~vsmtio_agent.policy.spread`, as RASS's pairing wants); the
Workload Adjuster may swap vCPUs between cores (§4.4);
RASS classifies every core's vCPUs and plans their hyperthreads (§4.3);
LTCR judges the period it just saw and picks the next retention timeout
(§4.2). The guard (:mod:`vsmtio_agent.policy.search`) decides which of the
mechanisms (retention per VM and its timeout, a VM's CPU weight, the
sibling split, borrowing) are in force, and searches each VM's timeout
itself; without
it (the paper-literal configuration) every mechanism is always on and
LTCR's Algorithm 1 tunes one host-wide timeout. A mechanism whose
precondition the host lacks is never in force, guard or not: the split
and borrowing need SMT siblings. The engine keeps only what the next
step needs (each vCPU's core, the roles in force, Algorithm 1's or the
guard's state) and does no I/O.
"""

import dataclasses
import functools
import operator

from vsmtio_agent import model
from vsmtio_agent.policy import adjuster
from vsmtio_agent.policy import ltcr
from vsmtio_agent.policy import mist as mist_mod
from vsmtio_agent.policy import rass
from vsmtio_agent.policy import search as search_mod
from vsmtio_agent.policy import spread
from vsmtio_agent.policy import trust as trust_mod
from vsmtio_agent.policy import vocabulary

US = 1000
_retention_rate = operator.attrgetter('retention_rate')


@dataclasses.dataclass(frozen=True)
class Params:
    bounds: ltcr.Bounds
    adjuster_std_threshold: float = 0.1
    adjuster_min_mean_gap: float = 0.1
    adjuster_max_swaps: int = 1
    io_min_retention_rate: float = 0.005
    ltcr_measure: str = ltcr.THROUGHPUT
    guard: search_mod.Params = None
    fair_share: bool = True
    # the share of the host's cores the split covers when it is in force
    # (without the guard; the guard chooses its own, vocabulary.SHARES)
    split_share: float = 1.0
    mist: mist_mod.Params = None
    # whose vCPUs may share a core (trust.RULES); the paper's is any
    trust_domain: str = trust_mod.ANY

    @classmethod
    def from_conf(cls, conf, per_vm=False, weights=False, retention=True):
        """The engine's parameters.

        ``per_vm``: the host sets a retention timeout per VM; ``weights``:
        it sets VMs' CPU weights (the guard's weight lever);
        ``retention``: it has a retention timeout at all.
        """
        opts = conf.vsmtio_agent
        # reading the deprecated option, whose one choice is 'search',
        # refuses at start a configuration that still asks for the rules
        opts.guard_procedure
        bounds = ltcr.Bounds(
            initial_ns=opts.initial_timeout_us * US,
            min_ns=opts.min_timeout_us * US,
            max_ns=opts.max_timeout_us * US,
            reschedule_cost_ns=opts.reschedule_cost_us * US)
        return cls(
            bounds=bounds,
            adjuster_std_threshold=opts.adjuster_std_threshold,
            adjuster_min_mean_gap=opts.adjuster_min_mean_gap,
            adjuster_max_swaps=opts.adjuster_max_swaps,
            io_min_retention_rate=opts.io_min_retention_rate,
            ltcr_measure=opts.ltcr_measure,
            guard=(search_mod.Params.from_conf(
                conf, bounds, per_vm, weights=weights, retention=retention)
                if opts.guard else None),
            fair_share=opts.fair_share,
            split_share=opts.split_share,
            trust_domain=opts.trust_domain,
            # MIST's options are the daemon's (absent from the simulator's
            # configuration): no option, no MIST.
            mist=(mist_mod.Params.from_conf(conf)
                  if getattr(opts, 'mist', False) else None))


def _follow_host(assignment, stats, split, cores):
    """``assignment`` with each vCPU off the ``split`` cores on its own.

    A vCPU outside the split is where the host's scheduler put it (its
    stats' core, where that is one of ``cores``); one on a split core
    stays where the engine put it.
    """
    return {ref: (core if core in split
                  or (now := stats[ref].core_id) not in cores else now)
            for ref, core in assignment.items()}


def _group(assignment, stats):
    """``{core: {ref: stats}}``: each core's vCPUs, in assignment order."""
    by_core = {}
    for ref, core in assignment.items():
        found = by_core.get(core)
        if found is None:
            found = by_core[core] = {}
        found[ref] = stats[ref]
    return by_core


def _place(order, assignment, roles, table):
    """``{ref: placement}`` in ``order``: ``table``'s of its core and role.

    ``table`` is ``{core: {role: placement}}``.
    """
    return {ref: table[assignment[ref]][roles[ref]] for ref in order}


class PolicyEngine(object):
    """Samples in, decisions out."""

    def __init__(self, topology, params):
        if not topology.cores:
            raise ValueError('the topology has no cores')
        # RASS's split and borrowing need SMT siblings: on a host without
        # them, a "split" would stack vCPUs on one CPU while another idles
        self.smt = any(len(core.threads) > 1 for core in topology.cores)
        if params.guard is not None and params.guard.smt != self.smt:
            params = dataclasses.replace(params, guard=dataclasses.replace(
                params.guard, smt=self.smt))
        self.topology = topology
        self.params = params
        self.ltcr = ltcr.start(params.bounds)
        self.guard = search_mod.State() if params.guard else None
        self.assignment = {}
        self.roles = {}
        self.split_cores = ()       # the cores split for the next period
        self._split_taken = ()      # every core taken while the split is kept
        self.mist_states = {}     # MIST's detector memory, per domain
        self.mist_verdicts = {}   # its last verdict per reserved domain
        # {core id: {role: rass.placement}}, every one a vCPU can have
        # (every core the engine assigns is the topology's): a placement
        # depends on nothing else and is immutable, so the vCPUs of a core
        # and class share one instead of building one each per period
        self._placements = {
            core.core_id: {role: rass.placement(
                topology.core(core.core_id), role) for role in model.Role}
            for core in topology.cores}
        self._cores = frozenset(core.core_id for core in topology.cores)
        self._core_order = tuple(dict.fromkeys(
            core.core_id for core in topology.cores))
        # each core's hyperthread count, RASS's fair share (as
        # topology.core(core_id) finds it: the first core so numbered)
        self._threads = {core.core_id: len(topology.core(
            core.core_id).threads) for core in topology.cores}
        self._last_placements = {}    # the last decision's, by ref

    @property
    def _possible(self):
        """Without the guard: the paper's mechanisms this host can have.

        No split without SMT; no VM weight (a lever only the guard tries).
        """
        if self.smt:
            return frozenset(vocabulary.MECHANISMS) - {vocabulary.WEIGHT}
        return frozenset((vocabulary.RETENTION,))

    @property
    def kept(self):
        """The mechanisms the guard keeps (in force outside its probes)."""
        if self.guard is None:
            return self._possible
        return frozenset(self.guard.kept.names())

    @property
    def guard_settled(self):
        """Whether the guard has ended a search (or there is no guard)."""
        return self.guard is None or (self.guard.searches > 0
                                      and self.guard.phase == search_mod.HOLD)

    @property
    def untried(self):
        """``{mechanism: why}`` of those not tried on this host now.

        With the guard its reasons (:func:`search.untried`); without it
        the paper's mechanisms the host cannot have.
        """
        if self.guard is not None:
            return search_mod.untried(self.guard, self.params.guard)
        out = {vocabulary.WEIGHT: 'only the guard tries VM weights'}
        if not self.smt:
            out[vocabulary.SPLIT] = 'no core has SMT siblings to split'
            out[vocabulary.BORROW] = 'borrowing comes with the split'
        return out

    @property
    def mechanisms(self):
        """The mechanisms in force for the period being run."""
        if self.guard is None:
            return self._possible
        return frozenset(self.guard.in_force.names())

    @property
    def timeouts(self):
        """``{domain: ns}`` of the VMs retaining now, None: host-wide."""
        g = self.params.guard
        if g is None or not g.per_vm:
            return None
        return dict(self.guard.in_force.timeouts)

    @property
    def weights(self):
        """``{domain: factor}`` on the VMs' CPU weights in force now."""
        if self.guard is None:
            return {}
        return dict(self.guard.in_force.weights)

    @property
    def timeout_ns(self):
        """The retention timeout in force now (the longest, per VM)."""
        g = self.params.guard
        if g is None:
            return self.ltcr.effective_ns
        found = [ns for _vm, ns in self.guard.in_force.timeouts]
        return max(found) if found else g.start_ns

    def first_decision(self):
        """The decision before any sample: the switches, no placement.

        With the guard nothing is kept yet, so no VM retains; without
        it, retention at Algorithm 1's initial timeout.
        """
        return model.Decision(
            timeout_ns=self.timeout_ns, timeouts=self.timeouts,
            weights=self.weights,
            placements={}, retention=vocabulary.RETENTION in self.mechanisms,
            split=False, borrow=vocabulary.BORROW in self.mechanisms)

    def _least_loaded_core(self, assignment, stats):
        load = {core.core_id: 0 for core in self.topology.cores}
        for ref, core in assignment.items():
            load[core] += stats[ref].weight
        return min(load, key=lambda c: (load[c], c))

    def _reconcile(self, stats):
        """Keep known vCPUs where the engine put them; adopt new ones."""
        if self.assignment.keys() == stats.keys():
            # the same vCPUs as last period (nearly every period): last
            # period's assignment itself (never changed in place: a
            # step builds a new one to change it)
            return self.assignment
        cores = self._cores
        assignment = {ref: core for ref, core in self.assignment.items()
                      if ref in stats}
        # new vCPUs in order (sorting only them: the rest are known)
        for ref in sorted(ref for ref in stats if ref not in assignment):
            core = stats[ref].core_id
            if core not in cores:
                core = self._least_loaded_core(assignment, stats)
            assignment[ref] = core
        return assignment

    def step(self, stats, vms=None, tenancy=None, core_scheduling=None,
             served=None):
        """The :class:`~vsmtio_agent.model.Decision` for the next period.

        ``vms`` (``{domain: mist.VmPeriod}``, from :func:`mist.observe`)
        feeds MIST's detector where it is configured. ``tenancy`` and
        ``core_scheduling`` are the snapshot's (whose each domain is, and
        whether the host fences VMs by core scheduling): with the
        ``trust_domain`` rule they say which vCPUs may share a core
        (:mod:`~vsmtio_agent.policy.trust`), and no core the split
        covers, no swap, holds vCPUs of two trust domains. ``served``
        (``{domain: requests and packets per second}``) is what the guard
        judges a serving VM by.
        """
        trust = trust_mod.keys(self.params.trust_domain, stats,
                               tenancy or {}, core_scheduling)
        # in a period run without retention (a probe's B arm, or retention
        # dropped) retention rates are zero: they say nothing of a vCPU's
        # class, so RASS classes by idle entries (or holds the roles it
        # planned before, where the host counts none)
        retained = vocabulary.RETENTION in self.mechanisms
        self._guard_step(stats, served)
        active = self.mechanisms
        share = (vocabulary.split_share(self.guard.in_force.mechanisms)
                 if self.guard is not None
                 else self.params.split_share)
        assignment, swaps = self._assign(stats, share, active, retained,
                                         trust)
        by_core = _group(assignment, stats)
        roles = self._classify(by_core, retained)
        # without the guard, LTCR judges the period just run under the
        # roles planned for it (a new vCPU: the role it has now)
        self._ltcr_step(stats, roles)
        placements = self._place(assignment, roles)
        self._split(by_core, roles, share, active,
                    trust_mod.mixed(assignment, trust))
        return model.Decision(timeout_ns=self.timeout_ns,
                              timeouts=self.timeouts, weights=self.weights,
                              placements=placements, swaps=swaps,
                              retention=vocabulary.RETENTION in active,
                              split=vocabulary.SPLIT in active,
                              borrow=vocabulary.BORROW in active,
                              split_cores=frozenset(self.split_cores),
                              protect=self._mist_step(vms),
                              trial=(self.guard is not None and
                                     self.guard.phase == search_mod.PROBE))

    def _guard_step(self, stats, served):
        """The guard's step (it chooses every timeout itself)."""
        if self.guard is not None:
            self.guard = search_mod.step(self.guard, self.params.guard,
                                         stats, served)

    def _assign(self, stats, share, active, retained, trust):
        """Each vCPU's core for the next period, and the adjuster's swaps.

        With a split over part of the cores, a vCPU outside it is where
        the host's scheduler put it, and the adjuster mixes the split
        cores among themselves. Under trust domains (``trust``, the
        vCPUs' keys) the vCPUs of a mixed core are separated where
        another core can take them, and a swap that would put a vCPU
        beside another domain's is never planned. Busy vCPUs are then
        put on distinct cores where there are enough and the domains
        allow (:mod:`~vsmtio_agent.policy.spread`), guard or not, and no
        swap stacks them again.
        """
        p = self.params
        assignment = self._reconcile(stats)
        split = set(self.split_cores)
        if share < 1.0:
            assignment = _follow_host(assignment, stats, split, self._cores)
        if trust is not None:
            assignment = trust_mod.separate(
                assignment, trust, self._core_order,
                {ref: st.weight for ref, st in stats.items()},
                functools.partial(self._incumbents, trust))
        busy = spread.busy(stats)
        rates = None
        if len(busy) > 1:
            rates = dict(zip(stats, map(_retention_rate, stats.values())))
            assignment = spread.spread(assignment, busy, self._core_order,
                                       trust, rates, self.assignment)
        if not (p.adjuster_max_swaps and vocabulary.SPLIT in active
                and retained):
            return assignment, ()
        movable = (assignment if share >= 1.0 else
                   {ref: core for ref, core in assignment.items()
                    if core in split})
        if rates is None:
            rates = dict(zip(stats, map(_retention_rate, stats.values())))
        allowed = spread.both(trust_mod.swap_checker(assignment, trust),
                              spread.swap_checker(assignment, busy))
        swaps = adjuster.plan_swaps(
            movable, rates, p.adjuster_std_threshold,
            p.adjuster_min_mean_gap, p.adjuster_max_swaps, allowed)
        assignment = adjuster.apply_swaps(assignment, swaps)
        if swaps:
            # a swap may have opened a core a busy vCPU can now go to
            assignment = spread.spread(assignment, busy, self._core_order,
                                       trust, rates, self.assignment)
            # and may move a swapped vCPU on: report only the swaps that
            # stand, which the trust check above judged where they land
            swaps = tuple(sw for sw in swaps
                          if assignment[sw.a] == sw.core_b
                          and assignment[sw.b] == sw.core_a)
        return assignment, swaps

    def _incumbents(self, trust):
        """``{core: key}`` of the split cores one trust domain held."""
        split = set(self.split_cores)
        found = {}
        for ref, core in self.assignment.items():
            if core in split and ref in trust:
                found.setdefault(core, set()).add(trust[ref])
        return {core: ks.pop() for core, ks in found.items() if len(ks) == 1}

    def _classify(self, by_core, retained):
        """RASS's role of every vCPU, core by core.

        With the guard, a core that retained nothing is classed by its
        vCPUs' idle entries, at the rate the guard calls a VM serving: a
        split the guard tries on a host where no retention pays needs
        classes all the same. (Without it retention is always on, as the
        paper runs it.)
        """
        p = self.params
        roles = {}
        held = None if retained else self.roles
        idle = p.guard.io_halt_rate if p.guard is not None else None
        for core_id, core_stats in by_core.items():
            roles.update(rass.classify(
                core_stats, p.io_min_retention_rate,
                self._threads[core_id] if p.fair_share else None, held,
                idle))
        return roles

    def _ltcr_step(self, stats, roles):
        """LTCR's judgement of the period just run (without the guard)."""
        p = self.params
        if self.guard is None:
            # a ref only in the planned roles is gone, so never looked up
            measured_roles = {**roles, **self.roles}
            self.ltcr = ltcr.step(
                self.ltcr, p.bounds,
                ltcr.performance(stats, measured_roles, p.ltcr_measure),
                p.ltcr_measure)

    def _place(self, assignment, roles):
        """``{ref: placement}``, by ref; remembers the assignment and roles.

        The same vCPUs on the same cores in the same roles as last period
        (nearly every period) keep last period's placements: a decision's
        placements are never changed once made, so they are shared.
        """
        same = roles == self.roles and assignment == self.assignment
        self.assignment = assignment
        self.roles = roles
        if not same:
            last = self._last_placements.keys()
            order = last if roles.keys() == last else sorted(roles)
            self._last_placements = _place(order, assignment, roles,
                                           self._placements)
        return self._last_placements

    def _split(self, by_core, roles, share, active, mixed=frozenset()):
        """The cores split for the next period.

        The cores taken so far stay first while the split is kept, so a
        probe's arms and a wider level move only the cores at the edge.
        A core holding vCPUs of two trust domains (``mixed``) is never
        split: the agent pins no such pair, the host's scheduler places
        them as it would without the agent.
        """
        if mixed:
            by_core = {core: found for core, found in by_core.items()
                       if core not in mixed}
        if vocabulary.SPLIT not in self.kept:
            self._split_taken = ()
        n = rass.split_count(len(self.topology.cores),
                             share if vocabulary.SPLIT in active else 0.0)
        if not self.smt:
            n = 0
        if n:
            order = rass.split_order(by_core, roles, self._split_taken)
            self._split_taken = tuple(order[:max(n, len(self._split_taken))])
        self.split_cores = self._split_taken[:n]

    def _mist_step(self, vms):
        """MIST's protection set for the next period (empty without it)."""
        if self.params.mist is None or vms is None:
            return {}
        self.mist_states, self.mist_verdicts = mist_mod.step(
            self.params.mist, self.mist_states, vms)
        return mist_mod.protection_set(self.mist_verdicts)
