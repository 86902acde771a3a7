"""Workload models: what each vCPU of a VM does (see data/workloads.yaml).

A CPU-bound vCPU always has work; its speed comes from its CPI stack. An
I/O-bound vCPU loops: compute a burst, then wait on a device. Bursts are
drawn in solo microseconds and turned into instructions with the CPI stack,
so a burst takes longer when the sibling slows it down, as on real SMT.
"""

import dataclasses
import math
from typing import Callable, Optional

CPU = 'cpu'
IO = 'io'
MIXED = 'mixed'
KINDS = (CPU, IO, MIXED)


@dataclasses.dataclass(frozen=True)
class Workload:
    """One benchmark's model; ``burst``/``device`` are None for ``cpu``."""

    name: str
    kind: str
    base: float
    miss: float
    burst: Optional[dict] = None
    device: Optional[dict] = None

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
                   burst=spec.get('burst'), device=spec.get('device'))


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
