"""The cpu shares (CFS weight) of one libvirt domain.

The one actuator of the knob, whoever wants it changed: RASS's split
raises an I/O domain's shares, MIST's fallback a reserved domain's, and
the ledger (:mod:`~vsmtio_agent.actuators.ledger`) says which of them may.
One key, ``cpu_shares``, kept in the domain's record. QEMU domains call
the parameter ``cpu_shares``; libvirt's test driver fakes it as
``weight``: the actuator writes the one the domain has.
"""

import libvirt

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import bounds
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.actuators import libvirt_errors

KIND = checkpoint.CPU_SHARES
KEY = 'cpu_shares'
PARAMETERS = ('cpu_shares', 'weight')   # qemu; the test driver's fake


def read_shares(dom):
    """(parameter, value) of ``dom``'s shares; ActuatorError if none."""
    try:
        params = dom.schedulerParameters()
    except libvirt.libvirtError as exc:
        raise libvirt_errors.translate(exc) from exc
    for name in PARAMETERS:
        if name in params:
            return name, int(params[name])
    raise base.ActuatorError('%s has no cpu shares parameter' % dom.name())


class CpuShares(base.Actuator):

    kind = KIND

    def __init__(self, record, dom, parameter=None):
        super().__init__(record)
        self.dom = dom
        self.parameter = parameter

    def read(self, key):
        self.parameter, value = read_shares(self.dom)
        return value

    def invalid(self, key, original):
        return bounds.integer(original, *bounds.CPU_SHARES,
                              what='cpu shares')

    def _set(self, key, value):
        if self.parameter is None:
            self.parameter, _ = read_shares(self.dom)
        libvirt_errors.call_live(self.dom.setSchedulerParametersFlags,
                                 self.dom.setSchedulerParameters,
                                 {self.parameter: int(value)})
