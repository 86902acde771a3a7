"""Advertise context retention to placement from the compute driver.

Mixed into the vsmtio libvirt driver (and, in the functional tests, into
nova's fake driver): at ``init_host`` it finds whether this host can retain
(:func:`vsmtio_nova.capability.host_can_retain`; a kernel changes only with
a reboot, which restarts nova-compute), and each ``update_provider_tree``
adds :data:`~vsmtio_nova.capability.TRAIT` to the compute node's provider,
or takes it away from a host that lost it (booted a stock kernel). Other
traits, nova's and operators', are left as they are.
"""

from oslo_log import log as logging

import nova.conf

from vsmtio_nova import capability
from vsmtio_nova import conf  # noqa: F401 (registers [vsmtio])

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)


class RetentionTraitMixin:
    """A virt driver whose compute node carries the retention trait."""

    _retention = None

    def init_host(self, host):
        result = super().init_host(host)
        self._retention = capability.host_can_retain(
            CONF.libvirt.virt_type, CONF.vsmtio.sysfs_root)
        LOG.info('Context retention %s on this host: %s',
                 'available' if self._retention[0] else 'unavailable',
                 self._retention[1])
        return result

    @property
    def retention(self):
        """``(bool, why)``; found now if ``init_host`` has not run."""
        if self._retention is None:
            self._retention = capability.host_can_retain(
                CONF.libvirt.virt_type, CONF.vsmtio.sysfs_root)
        return self._retention

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        super().update_provider_tree(provider_tree, nodename,
                                     allocations=allocations)
        if self.retention[0]:
            provider_tree.add_traits(nodename, capability.TRAIT)
        elif provider_tree.has_traits(nodename, [capability.TRAIT]):
            provider_tree.remove_traits(nodename, capability.TRAIT)
