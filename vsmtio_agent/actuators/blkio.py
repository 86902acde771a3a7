"""The block I/O weight of one libvirt domain (MIST's I/O protection).

``blkiotune`` weight (``dom.setBlkioParameters({'weight': w})``) is
libvirt's proportional block I/O share: cgroup v1 ``blkio.weight`` (or
``blkio.bfq.weight``), v2 ``io.weight`` (or ``io.bfq.weight``); it acts
only under a proportional I/O scheduler (BFQ; CFQ in the paper's days).
One key, ``weight``, kept in the domain's record: a restarted domain
has a new cgroup and none of the agent's values.

A host where no proportional scheduler is loaded has no weight file in
the domain's cgroup, and libvirt refuses even to read the weight of a
running domain (``VIR_ERR_OPERATION_INVALID``, "blkio device weight is
valid only for bfq or cfq scheduler"): :class:`Unavailable`, the host's
configuration rather than a failed change.
"""

import libvirt

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import bounds
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.actuators import libvirt_errors

KIND = checkpoint.BLKIO_WEIGHT
KEY = 'weight'


class Unavailable(base.ActuatorError):
    """The host offers no block I/O weight for this running domain.

    libvirt refused it with ``VIR_ERR_OPERATION_INVALID`` while the
    domain runs (the same code for a domain that stopped, hence the
    check): no proportional I/O scheduler, no weight file. Not a
    failure: nothing was changed, and trying again changes nothing
    until the operator loads BFQ.
    """

    def __init__(self, message):
        super().__init__(message, denied=True)


class BlkioWeight(base.Actuator):

    kind = KIND

    def __init__(self, record, dom):
        super().__init__(record)
        self.dom = dom

    def _error(self, exc):
        """The ActuatorError of libvirt's ``exc``: Unavailable if it is."""
        if exc.get_error_code() == libvirt.VIR_ERR_OPERATION_INVALID:
            try:
                running = self.dom.isActive()
            except libvirt.libvirtError:
                running = False
            if running:
                return Unavailable(exc.get_error_message() or str(exc))
        return libvirt_errors.translate(exc)

    def read(self, key):
        try:
            params = self.dom.blkioParameters(libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as exc:
            raise self._error(exc) from exc
        if KEY not in params:
            raise base.ActuatorError('%s has no block I/O weight (libvirt '
                                     'offers %s)'
                                     % (self.dom.name(), sorted(params)),
                                     denied=True)
        return int(params[KEY])

    def invalid(self, key, original):
        return bounds.integer(original, *bounds.BLKIO_WEIGHT,
                              what='block I/O weight')

    def _set(self, key, value):
        try:
            self.dom.setBlkioParameters({KEY: int(value)},
                                        libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as exc:
            raise self._error(exc) from exc
