"""Workload models: what each vCPU of a VM does (see data/workloads.yaml).

A CPU-bound vCPU always has work; its speed comes from its CPI stack. An
I/O-bound vCPU loops: compute a burst, then wait on a device. Bursts are
drawn in solo microseconds and turned into instructions with the CPI stack,
so a burst takes longer when the sibling slows it down, as on real SMT.

An I/O workload may say where its device completion interrupt lands
(``irq``, paper §6.3 under Table 7): on another vCPU of the same VM, which
must run an interrupt handler burst before its IPI wakes the requester.
``steering: flow_hash`` is multiqueue virtio-net with RSS: the NIC's flow
hash, not the requester, picks the receive queue, and queue ``j``'s
interrupt is affine to vCPU ``j`` (virtio's affinity hint), so the
completion lands on a uniformly drawn queue's vCPU; ``queues`` defaults to
one per vCPU (what nova configures with ``hw_vif_multiqueue_enabled``).
``steering: submitter`` is blk-mq: the submitting vCPU's own queue, so the
completion is local unless there are fewer queues than vCPUs.
"""

import dataclasses
import functools
import math
from typing import Callable, Optional

CPU = 'cpu'
IO = 'io'
MIXED = 'mixed'
KINDS = (CPU, IO, MIXED)
FLOW_HASH = 'flow_hash'
SUBMITTER = 'submitter'
STEERINGS = (FLOW_HASH, SUBMITTER)


@dataclasses.dataclass(frozen=True)
class Workload:
    """One benchmark's model; ``burst``/``device`` are None for ``cpu``."""

    name: str
    kind: str
    base: float
    miss: float
    burst: Optional[dict] = None
    device: Optional[dict] = None
    irq: Optional[dict] = None
    working_set_kib: float = 0.0

    @property
    def cpi(self):
        return self.base + self.miss

    @property
    def does_io(self):
        return self.kind != CPU

    @property
    def counts_cpu(self):
        return self.kind != IO

    @classmethod
    def from_dict(cls, name, spec):
        return cls(name=name, kind=spec['kind'],
                   base=float(spec['cpi']['base']),
                   miss=float(spec['cpi']['miss']),
                   burst=spec.get('burst'), device=spec.get('device'),
                   irq=spec.get('irq'),
                   working_set_kib=float(spec['working_set_kib']))

    def irq_vcpu(self, index, nvcpus, rng):
        """Return a function drawing where ``index``'s completions land.

        It draws the index of the vCPU whose interrupt completes the
        request; None without an ``irq`` model (the requester is woken).
        """
        irq = self.irq
        if not irq:
            return None
        queues = min(irq.get('queues') or nvcpus, nvcpus)
        if irq['steering'] == FLOW_HASH:
            return functools.partial(rng.randrange, queues)
        local = index % queues
        return lambda: local


def sampler(spec, rng) -> Callable[[], float]:
    """Return a function drawing nanoseconds from a distribution spec."""
    dist = spec['dist']
    if dist == 'const':
        value = spec['mean_us'] * 1e3
        return lambda: value
    if dist == 'exponential':
        lambd = 1.0 / (spec['mean_us'] * 1e3)
        return lambda: rng.expovariate(lambd)
    if dist == 'lognormal':
        sigma = float(spec.get('sigma', 0.5))
        mu = math.log(spec['mean_us'] * 1e3) - sigma * sigma / 2.0
        return lambda: rng.lognormvariate(mu, sigma)
    if dist == 'uniform':
        low, high = spec['low_us'] * 1e3, spec['high_us'] * 1e3
        return lambda: rng.uniform(low, high)
    if dist == 'mixture':
        parts = spec['parts']
        total = float(sum(p['weight'] for p in parts))
        cum, acc = [], 0.0
        for p in parts:
            acc += p['weight'] / total
            cum.append(acc)
        subs = [sampler(p, rng) for p in parts]
        last = len(subs) - 1

        def draw():
            x = rng.random()
            for i, edge in enumerate(cum):
                if x < edge:
                    return subs[i]()
            return subs[last]()
        return draw
    raise ValueError('unknown distribution %r' % (dist,))


def mean_ns(spec):
    """The mean of a distribution spec, in nanoseconds."""
    dist = spec['dist']
    if dist == 'uniform':
        return (spec['low_us'] + spec['high_us']) * 500.0
    if dist == 'mixture':
        total = float(sum(p['weight'] for p in spec['parts']))
        return sum(p['weight'] / total * mean_ns(p) for p in spec['parts'])
    return spec['mean_us'] * 1e3
