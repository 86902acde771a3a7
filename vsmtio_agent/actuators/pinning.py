"""vCPU pinning of one libvirt domain: which host CPUs each vCPU may use.

Keys are vCPU indexes (as strings); values sorted lists of host CPUs. The
original is nova's pinning (or the domain's cpuset), which also bounds
where the agent may move the vCPU. Changes are live only: the domain's
persistent definition is never touched, so a restarted domain is back at
nova's placement by itself.
"""

import libvirt

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import bounds
from vsmtio_agent.actuators import libvirt_errors

KIND = 'pins'


def cpus_of(cpumap):
    """The host CPUs a libvirt cpumap (a tuple of booleans) allows."""
    return frozenset(i for i, on in enumerate(cpumap) if on)


class VcpuPinning(base.Actuator):

    kind = KIND

    def __init__(self, record, dom):
        super().__init__(record)
        self.dom = dom

    def read(self, key):
        try:
            maps = self.dom.vcpuPinInfo(0)
        except libvirt.libvirtError as exc:
            raise libvirt_errors.translate(exc) from exc
        try:
            return sorted(cpus_of(maps[int(key)]))
        except IndexError:
            raise base.ActuatorError('%s has no vCPU %s'
                                     % (self.dom.name(), key))

    def invalid(self, key, original):
        """A vCPU the domain has, pinned to CPUs the host has."""
        why = bounds.number_key(key, bounds.MAX_VCPUS - 1, 'vCPU')
        if why:
            return why
        try:
            vcpus = len(self.dom.vcpuPinInfo(0))
            host = range(self.dom.connect().getCPUMap()[0])
        except libvirt.libvirtError:
            vcpus, host = None, None    # the write says what is wrong
        if vcpus is not None and int(key) >= vcpus:
            return 'the domain has %d vCPU(s)' % vcpus
        return bounds.cpus(original, host)

    def _set(self, key, value):
        try:
            ncpus = self.dom.connect().getCPUMap()[0]
        except libvirt.libvirtError as exc:
            raise libvirt_errors.translate(exc) from exc
        wanted = set(value)
        cpumap = tuple(c in wanted for c in range(ncpus))
        libvirt_errors.call_live(self.dom.pinVcpuFlags, self.dom.pinVcpu,
                                 int(key), cpumap)
