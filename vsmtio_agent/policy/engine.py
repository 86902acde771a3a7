"""The vSMT-IO policy engine: one deterministic step per period (§4.1).

Each period: the Workload Adjuster may swap vCPUs between cores (§4.4);
RASS classifies every core's vCPUs and plans their hyperthreads (§4.3);
LTCR judges the period it just saw and picks the next retention timeout
(§4.2). The engine keeps only what the next step needs (each vCPU's core,
the roles in force, Algorithm 1's state) and does no I/O.
"""

import dataclasses

from vsmtio_agent import model
from vsmtio_agent.policy import adjuster
from vsmtio_agent.policy import ltcr
from vsmtio_agent.policy import rass

US = 1000


@dataclasses.dataclass(frozen=True)
class Params:
    bounds: ltcr.Bounds
    adjuster_std_threshold: float = 0.1
    adjuster_min_mean_gap: float = 0.1
    adjuster_max_swaps: int = 1
    io_min_retention_rate: float = 0.005

    @classmethod
    def from_conf(cls, conf):
        opts = conf.vsmtio_agent
        return cls(
            bounds=ltcr.Bounds(
                initial_ns=opts.initial_timeout_us * US,
                min_ns=opts.min_timeout_us * US,
                max_ns=opts.max_timeout_us * US,
                reschedule_cost_ns=opts.reschedule_cost_us * US),
            adjuster_std_threshold=opts.adjuster_std_threshold,
            adjuster_min_mean_gap=opts.adjuster_min_mean_gap,
            adjuster_max_swaps=opts.adjuster_max_swaps,
            io_min_retention_rate=opts.io_min_retention_rate)


class PolicyEngine(object):
    """Samples in, decisions out."""

    def __init__(self, topology, params):
        if not topology.cores:
            raise ValueError('the topology has no cores')
        self.topology = topology
        self.params = params
        self.ltcr = ltcr.start(params.bounds)
        self.assignment = {}
        self.roles = {}

    @property
    def timeout_ns(self):
        """The retention timeout in force now."""
        return self.ltcr.effective_ns

    def _least_loaded_core(self, assignment, stats):
        load = {core.core_id: 0 for core in self.topology.cores}
        for ref, core in assignment.items():
            load[core] += stats[ref].weight
        return min(load, key=lambda c: (load[c], c))

    def _reconcile(self, stats):
        """Keep known vCPUs where the engine put them; adopt new ones."""
        cores = {core.core_id for core in self.topology.cores}
        assignment = {ref: core for ref, core in self.assignment.items()
                      if ref in stats}
        for ref in sorted(stats):
            if ref in assignment:
                continue
            core = stats[ref].core_id
            if core not in cores:
                core = self._least_loaded_core(assignment, stats)
            assignment[ref] = core
        return assignment

    def step(self, stats):
        """The :class:`~vsmtio_agent.model.Decision` for the next period."""
        assignment = self._reconcile(stats)
        p = self.params
        swaps = ()
        if p.adjuster_max_swaps:
            rates = {ref: st.retention_rate for ref, st in stats.items()}
            swaps = adjuster.plan_swaps(
                assignment, rates, p.adjuster_std_threshold,
                p.adjuster_min_mean_gap, p.adjuster_max_swaps)
            assignment = adjuster.apply_swaps(assignment, swaps)

        by_core = {}
        for ref, core in assignment.items():
            by_core.setdefault(core, {})[ref] = stats[ref]
        roles = {}
        for core_stats in by_core.values():
            roles.update(rass.classify(core_stats, p.io_min_retention_rate))

        # The period just measured ran under the roles planned last time.
        measured_roles = {ref: self.roles.get(ref, role)
                          for ref, role in roles.items()}
        self.ltcr = ltcr.step(self.ltcr, p.bounds,
                              ltcr.performance(stats, measured_roles))

        self.assignment = assignment
        self.roles = roles
        placements = {
            ref: rass.placement(self.topology.core(assignment[ref]), role)
            for ref, role in sorted(roles.items())}
        return model.Decision(timeout_ns=self.ltcr.effective_ns,
                              placements=placements, swaps=swaps)
