"""The compute driver's own view of context retention on its host.

The retention trait reaches placement through nova's provider config
(:mod:`vsmtio_nova.provider_config`, written at deploy time from the same
probe). Mixed into the vsmtio libvirt driver (and, in the functional tests,
into nova's fake driver), this probes the host again at ``init_host`` (a
kernel changes only with a reboot, which restarts nova-compute) for two
things provider config cannot do: the driver refuses an instance asking for
retention on a host that cannot give it, and it takes the trait away from
a host that lost it (booted a stock kernel), because nova only ever adds
what a provider config file says and never removes a trait it added
before. It logs when the file and the probe disagree.
"""

from oslo_log import log as logging

import nova.conf

from vsmtio_nova import capability
from vsmtio_nova import conf  # noqa: F401 (registers [vsmtio])
from vsmtio_nova import provider_config

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)


class RetentionTraitMixin:
    """A virt driver that knows whether its host can retain contexts."""

    _retention = None

    def init_host(self, host):
        result = super().init_host(host)
        self._retention = capability.host_can_retain(
            CONF.libvirt.virt_type, CONF.vsmtio.sysfs_root)
        LOG.info('Context retention %s on this host: %s',
                 'available' if self._retention[0] else 'unavailable',
                 self._retention[1])
        self._check_provider_config()
        return result

    def _check_provider_config(self):
        advertised = capability.TRAIT in provider_config.advertised_traits(
            CONF)
        if advertised and not self._retention[0]:
            LOG.error('The provider config gives this host %s but it cannot '
                      'retain (%s): instances asking for retention are '
                      'sent here, refused and rescheduled; run '
                      'vsmtio-nova-conf provider-config and restart '
                      'nova-compute.', capability.TRAIT, self._retention[1])
        elif self._retention[0] and not advertised:
            LOG.warning('This host can retain but its provider config does '
                        'not give it %s, so no instance asking for '
                        'retention lands here: run vsmtio-nova-conf '
                        'provider-config and restart nova-compute.',
                        capability.TRAIT)

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
        if not self.retention[0] and provider_tree.has_traits(
                nodename, [capability.TRAIT]):
            provider_tree.remove_traits(nodename, capability.TRAIT)
