"""Which live migrations bring stranded hosts back into the band. Pure.

A host is *stranded* when departures have left its I/O share outside the
band the scheduler's filter keeps (``[vsmtio] min_io_fraction`` ..
``max_io_fraction``, judged from ``filter_min_classified_vcpus``
classified vCPUs): its CPU-bound guests left and only I/O-bound ones
remain, or the reverse. The scheduler repairs such a host only when new
arrivals of the missing class come; this plans the repair now.

The mix is the arithmetic the scheduler uses (:mod:`vsmtio_nova.mix`):
vCPUs of instances counted ``io`` or ``cpu``, a share judged only on
hosts holding enough classified vCPUs. The plan is greedy: each step
takes the one migration that most reduces the fleet's vCPUs outside the
band, never one that takes a host inside the band out of it, nor one
that leaves any host further outside; ties go to the move that most
reduces the weigher's fleet objective (:func:`~vsmtio_nova.mix.weigh`),
so a repair also moves the fleet towards the target. It stops when no
host is stranded, when no move helps, or after ``max_moves``.
"""

import typing

from vsmtio_contract import workload
from vsmtio_nova import mix

IO = workload.WorkloadClass.IO
CPU = workload.WorkloadClass.CPU
#: The classes a host's mix counts (``auto`` without a measurement is not).
COUNTED = (IO, CPU)


class Guest(typing.NamedTuple):
    """An instance the plan may move: counted class and vCPUs."""

    uuid: str
    cls: workload.WorkloadClass
    vcpus: int


class Host(typing.NamedTuple):
    """A compute host as the plan sees it.

    ``guests`` are the instances that may be live-migrated (the counted
    ones a migration can move); ``mix`` counts every classified instance
    on the host, movable or not. ``free_vcpus`` is the room left for
    more vCPUs; ``accepts`` says whether the host may receive guests.
    """

    name: str
    mix: mix.Mix
    free_vcpus: float
    guests: typing.Tuple[Guest, ...] = ()
    accepts: bool = True


class Band(typing.NamedTuple):
    """The filter's band of the I/O share and the weigher's target."""

    low: float = 0.1
    high: float = 0.9
    min_classified: int = 16
    target: float = 0.5

    def check(self):
        """Raise ValueError for a band the scheduler would refuse."""
        for name in ('low', 'high', 'target'):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:  # also refuses NaN
                raise ValueError('%s=%r is not a fraction in [0, 1]'
                                 % (name, value))
        if self.low > self.high:
            raise ValueError('low=%r exceeds high=%r' % (self.low, self.high))
        if self.min_classified < 0:
            raise ValueError('min_classified=%r is negative'
                             % (self.min_classified,))


class Move(typing.NamedTuple):
    uuid: str
    source: str
    destination: str
    cls: workload.WorkloadClass
    vcpus: int


class Plan(typing.NamedTuple):
    moves: typing.Tuple[Move, ...]
    #: Every host's mix once the moves are done.
    mixes: typing.Dict[str, mix.Mix]
    #: Hosts still outside the band after the plan.
    stranded: typing.Tuple[str, ...]


def _minus(m, cls, vcpus):
    return m.plus(cls, -vcpus)


def outside(m, band):
    """Classified vCPUs beyond the band: 0 within it or when not judged.

    The I/O vCPUs above ``high`` or below ``low`` of the host's classified
    vCPUs, the filter's own measure of how far a host is out.
    """
    if not m.classified or m.classified < band.min_classified:
        return 0.0
    return (max(0.0, m.io - band.high * m.classified)
            + max(0.0, band.low * m.classified - m.io))


def stranded(hosts, band):
    """Names of the hosts outside the band, worst first."""
    out = [(outside(h.mix, band), h.name) for h in hosts]
    return tuple(name for gap, name in sorted(out, key=lambda x: (-x[0],
                                                                  x[1]))
                 if gap > 0)


def _term(m, band):
    imb = mix.imbalance(m, band.target)
    return imb * imb / (m.classified + mix.PRIOR_VCPUS)


def _score(src, dst, guest, band):
    """``(gain, objective gain)`` of moving ``guest`` from src to dst.

    None when the move takes a host that is within the band out of it, or
    leaves either host further outside than it was.
    """
    src_after = _minus(src.mix, guest.cls, guest.vcpus)
    dst_after = dst.mix.plus(guest.cls, guest.vcpus)
    gains = []
    for before, after in ((src.mix, src_after), (dst.mix, dst_after)):
        gap_before, gap_after = outside(before, band), outside(after, band)
        if gap_after > gap_before:
            return None
        gains.append(gap_before - gap_after)
    objective = (_term(src.mix, band) + _term(dst.mix, band)
                 - _term(src_after, band) - _term(dst_after, band))
    return sum(gains), objective


def _candidates(hosts, band):
    for src in hosts:
        for guest in src.guests:
            if guest.cls not in COUNTED:
                continue
            for dst in hosts:
                if (dst.name == src.name or not dst.accepts
                        or dst.free_vcpus < guest.vcpus):
                    continue
                score = _score(src, dst, guest, band)
                if score is not None and score[0] > 1e-9:
                    yield score, src, dst, guest


def plan(hosts, band, max_moves=10):
    """The live migrations that bring stranded hosts back into the band.

    ``hosts`` is every host the audit covers (the candidates to take or
    give guests too). Each guest moves at most once. Deterministic: ties
    are broken by fewer vCPUs moved, then by names.
    """
    band.check()
    hosts = {h.name: h for h in hosts}
    moves = []
    while len(moves) < max_moves and stranded(hosts.values(), band):
        best = None
        for score, src, dst, guest in _candidates(
                sorted(hosts.values()), band):
            key = (-score[0], -score[1], guest.vcpus, src.name, dst.name,
                   guest.uuid)
            if best is None or key < best[0]:
                best = (key, src, dst, guest)
        if best is None:
            break
        _key, src, dst, guest = best
        hosts[src.name] = src._replace(
            mix=_minus(src.mix, guest.cls, guest.vcpus),
            free_vcpus=src.free_vcpus + guest.vcpus,
            guests=tuple(g for g in src.guests if g.uuid != guest.uuid))
        # A moved guest stays where it went: it is not among dst's guests.
        hosts[dst.name] = dst._replace(
            mix=dst.mix.plus(guest.cls, guest.vcpus),
            free_vcpus=dst.free_vcpus - guest.vcpus)
        moves.append(Move(guest.uuid, src.name, dst.name, guest.cls,
                          guest.vcpus))
    return Plan(tuple(moves), {n: h.mix for n, h in hosts.items()},
                stranded(hosts.values(), band))
