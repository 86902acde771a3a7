"""Per-domain libvirt knobs MIST turns: block I/O weight, cpu shares.

``blkiotune`` weight (``dom.setBlkioParameters({'weight': w})``) is libvirt's
proportional block I/O share: cgroup v1 ``blkio.weight`` (or
``blkio.bfq.weight``), v2 ``io.weight`` (or ``io.bfq.weight``); it acts
only under a proportional I/O scheduler (BFQ; CFQ in the paper's days).
The cpu shares boost is MIST's fallback where the host grants no
real-time runtime.

Keys are domain UUIDs; originals carry the libvirt domain id, so a restore
never writes to a domain that has restarted since (its cgroup, and every
value in it, is new).
"""

import libvirt

from vsmtio_agent.actuators import attempt
from vsmtio_agent.actuators import base

_DENIED = (libvirt.VIR_ERR_ACCESS_DENIED, libvirt.VIR_ERR_OPERATION_DENIED,
           libvirt.VIR_ERR_AUTH_FAILED)
_GONE = (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_OPERATION_INVALID)
_LIVE = libvirt.VIR_DOMAIN_AFFECT_LIVE


class _DomainParam(base.Actuator):
    """One integer parameter of a running domain, read and set live."""

    #: the parameter names, in the order tried ('weight' in blkiotune;
    #: 'cpu_shares' in qemu's scheduler parameters)
    names = ()
    what = ''

    def __init__(self, record, lookup):
        """``lookup(uuid)`` returns the virDomain (or raises libvirtError)."""
        super().__init__(record)
        self.lookup = lookup

    def _get(self, dom):
        raise NotImplementedError

    def _put(self, dom, params):
        raise NotImplementedError

    def _error(self, uuid, exc, doing):
        return base.ActuatorError(
            '%s %s of %s: %s' % (doing, self.what, uuid,
                                 exc.get_error_message()),
            denied=exc.get_error_code() in _DENIED)

    def read(self, key):
        try:
            dom = self.lookup(key)
            params = self._get(dom)
            dom_id = dom.ID()
        except libvirt.libvirtError as exc:
            raise self._error(key, exc, 'cannot read')
        for name in self.names:
            if name in params:
                return {'name': name, 'value': int(params[name]),
                        'id': dom_id}
        raise base.ActuatorError('%s has no %s (libvirt offers %s)'
                                 % (key, self.what, sorted(params)),
                                 denied=True)

    def _set(self, key, value):
        try:
            dom = self.lookup(key)
            if 'id' in value and dom.ID() != value['id']:
                return      # restarted since: nothing of ours is live
            self._put(dom, {value['name']: value['value']})
        except libvirt.libvirtError as exc:
            if 'id' in value and exc.get_error_code() in _GONE:
                return      # restoring a domain that is gone
            raise self._error(key, exc, 'cannot set')

    def set(self, uuid, number):
        """Set the parameter to ``number``; False if it is already."""
        now = self.read(uuid)
        if now['value'] == number:
            return False
        attempt.write(self, uuid, {'name': now['name'],
                                   'value': int(number)})
        return True

    def original_value(self, uuid):
        """The recorded original number, or None."""
        try:
            return self.record.original(self.kind, uuid)['value']
        except KeyError:
            return None


class BlkioWeight(_DomainParam):
    """A domain's proportional block I/O weight (``blkiotune``)."""

    kind = 'mist_blkio_weight'
    names = ('weight',)
    what = 'block I/O weight'

    def _get(self, dom):
        return dom.blkioParameters(_LIVE)

    def _put(self, dom, params):
        dom.setBlkioParameters(params, _LIVE)


class CpuShares(_DomainParam):
    """A domain's cpu shares (cgroup v1 ``cpu.shares``, v2 ``cpu.weight``)."""

    kind = 'mist_cpu_shares'
    names = ('cpu_shares', 'weight')   # qemu; the test driver's fake
    what = 'cpu shares'

    def _get(self, dom):
        return dom.schedulerParameters()

    def _put(self, dom, params):
        try:
            dom.setSchedulerParametersFlags(params, _LIVE)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() not in (libvirt.VIR_ERR_INVALID_ARG,
                                            libvirt.VIR_ERR_NO_SUPPORT):
                raise
            dom.setSchedulerParameters(params)
