"""The simulated host's counters: what drivers sample and reports difference.

``counters()`` is the host driver's view (one
:class:`~vsmtio_agent.model.VcpuCounters` per vCPU, as a real host's
procfs, perf and KVM statistics give them); ``totals()`` a copy of every
cumulative figure the report differences between two instants. A mixin of
:class:`~vsmtio_sim.engine.Simulation`.
"""

import typing

from vsmtio_agent import model
from vsmtio_sim import entities

# the inner loop reads these as globals
STATES = entities.STATES
V_READY = entities.V_READY


class VcpuTotals(typing.NamedTuple):
    """One vCPU's cumulative figures at an instant (reports difference two)."""

    instructions: float
    requests: int
    switches: int
    per_request: tuple      # sleep, ready, run ns summed over requests
    retentions: int
    retention_timeouts: int


class Counters(object):
    """The counting half of the simulated host."""

    def counters(self):
        """Every vCPU's cumulative counters, as the HostDriver reports."""
        out = {}
        for v in self.vcpus:
            ready = v.acc[V_READY]
            out[v.ref] = model.VcpuCounters(
                weight=v.weight, cpu=v.th.cpu, run_ns=int(v.run_ns),
                retention_ns=int(v.retention_ns),
                retentions=v.retentions,
                retention_timeouts=v.retention_timeouts,
                instructions=int(v.instructions), cycles=int(v.cycles),
                base_cycles=int(v.base_cycles),
                miss_cycles=int(v.miss_cycles),
                voluntary_switches=v.vol, involuntary_switches=v.invol,
                runqueue_delay_ns=int(ready), halts=v.halts)
        return out

    def domain_counters(self):
        """``{vm: DomainCounters}``: each VM's requests served so far.

        As a host's block and interface statistics count them.
        """
        served = {}
        for v in self.vcpus:
            served[v.vm] = served.get(v.vm, 0) + v.requests
        return {vm: model.DomainCounters(io_requests=n)
                for vm, n in served.items()}

    def totals(self):
        """A copy of every cumulative figure the report differences."""
        return {
            'time': self.now,
            'events': self.events,
            'state_ns': [sum(th.state_ns[s] for th in self.threads)
                         for s in range(len(STATES))],
            'io_state_ns': [sum(th.state_ns[s] for th in self.threads
                                if th.is_io) for s in range(len(STATES))],
            'vcpus': {v.ref: VcpuTotals(
                v.instructions, v.requests, v.vol + v.invol,
                tuple(v.req_acc), v.retentions, v.retention_timeouts)
                for v in self.vcpus},
        }
