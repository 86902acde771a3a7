"""The block I/O weight of one libvirt domain (MIST's I/O protection).

``blkiotune`` weight (``dom.setBlkioParameters({'weight': w})``) is
libvirt's proportional block I/O share: cgroup v1 ``blkio.weight`` (or
``blkio.bfq.weight``), v2 ``io.weight`` (or ``io.bfq.weight``); it acts
only under a proportional I/O scheduler (BFQ; CFQ in the paper's days).
One key, ``weight``, kept in the domain's record: a restarted domain
has a new cgroup and none of the agent's values.
"""

import libvirt

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import bounds
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.actuators import libvirt_errors

KIND = checkpoint.BLKIO_WEIGHT
KEY = 'weight'


class BlkioWeight(base.Actuator):

    kind = KIND

    def __init__(self, record, dom):
        super().__init__(record)
        self.dom = dom

    def read(self, key):
        try:
            params = self.dom.blkioParameters(libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as exc:
            raise libvirt_errors.translate(exc) from exc
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
            raise libvirt_errors.translate(exc) from exc
