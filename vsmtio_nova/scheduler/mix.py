"""The arithmetic of a host's I/O : CPU mix. Pure: no nova, no I/O.

A host's *mix* counts the vCPUs of its instances whose flavor declares
``vsmtio:workload`` ``io`` or ``cpu``. vCPUs, not instances, because vSMT-IO
pairs hyperthreads: one 8-vCPU I/O guest balances eight 1-vCPU CPU guests.
``auto`` (or unset) flavors are unknown to the scheduler and not counted.
"""

import typing

from vsmtio_nova import workload

#: Pseudo-vCPUs held at the target share when the weigher judges a host.
#: Without it an empty host and a full homogeneous host look alike (both
#: reach share 1.0 after an I/O instance); with it the empty host, whose
#: share says nothing yet, is judged closer to the target.
PRIOR_VCPUS = 1.0


class Mix(typing.NamedTuple):
    """Classified vCPUs of one host: I/O-bound and CPU-bound."""

    io: int = 0
    cpu: int = 0

    @property
    def classified(self):
        return self.io + self.cpu

    def share(self):
        """The I/O share of classified vCPUs; None for no classified vCPU."""
        if not self.classified:
            return None
        return self.io / self.classified

    def plus(self, cls, vcpus):
        """This mix after adding ``vcpus`` vCPUs of class ``cls``."""
        if cls is workload.WorkloadClass.IO:
            return Mix(self.io + vcpus, self.cpu)
        if cls is workload.WorkloadClass.CPU:
            return Mix(self.io, self.cpu + vcpus)
        return self

    def smoothed_share(self, target, prior=PRIOR_VCPUS):
        """The share with ``prior`` pseudo-vCPUs held at ``target``."""
        return (self.io + target * prior) / (self.classified + prior)


#: Exact extra-spec values: a dict lookup, not a parse, per instance.
_BY_VALUE = {c.value: c for c in workload.WorkloadClass}
_BY_VALUE[None] = workload.WorkloadClass.AUTO


def classify_flavor(flavor):
    """``(WorkloadClass, vcpus)`` of a flavor; AUTO for an invalid class.

    Flavors created before microversion 2.86 (or through the database) may
    hold any value; the scheduler then knows nothing rather than failing.
    """
    value = (flavor.extra_specs or {}).get(workload.EXTRA_SPEC_WORKLOAD)
    cls = _BY_VALUE.get(value)
    if cls is None:
        try:
            cls = workload.parse(value)
        except workload.InvalidWorkloadClass:
            cls = workload.WorkloadClass.AUTO
    return cls, int(flavor.vcpus or 0)


def weigh(mix, cls, vcpus, target):
    """The weigher's raw weight; higher is better, 0 is on target.

    Minus the distance from ``target`` of the host's (smoothed) I/O share
    after placing ``vcpus`` vCPUs of ``cls``.
    """
    return -abs(mix.plus(cls, vcpus).smoothed_share(target) - target)


def violates(mix, cls, vcpus, low, high, min_classified):
    """Whether placing breaks the ``[low, high]`` bounds of the I/O share.

    Returns ``(share_after, bound)`` for a violation, else None. A host is
    judged only once it holds ``min_classified`` classified vCPUs. An I/O
    instance can only raise the share and a CPU instance only lower it, so
    a host already outside the band still takes what brings it back.
    """
    if mix.classified < min_classified or not vcpus:
        return None
    after = mix.plus(cls, vcpus).share()
    if cls is workload.WorkloadClass.IO and after > high:
        return after, high
    if cls is workload.WorkloadClass.CPU and after < low:
        return after, low
    return None
