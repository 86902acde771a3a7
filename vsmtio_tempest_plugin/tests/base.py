"""Common base of the vsmtio tempest tests: admin + project clients."""

import time

from tempest.api.compute import base as compute_base
from tempest.common import waiters
from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib import exceptions as lib_exc

from vsmtio_tempest_plugin.tests import host

CONF = config.CONF

#: nova validates flavor extra specs from this microversion on.
EXTRA_SPEC_MICROVERSION = '2.86'


class VsmtioBaseTest(compute_base.BaseV2ComputeAdminTest):
    """Skips unless ``[service_available] vsmtio``; boots without networks.

    Microversion 2.86: extra specs are validated, and servers are created
    with ``networks: none`` (2.37+), so the tests need no tenant network.
    """

    min_microversion = EXTRA_SPEC_MICROVERSION
    max_microversion = 'latest'

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.vsmtio:
            raise cls.skipException('[service_available] vsmtio is False')

    @classmethod
    def skip_without_host(cls, *options):
        """Skip unless tempest can act on a compute host with ``options``.

        Host-side checks run only through ``[vsmtio] host_command``; where
        it (or an option the test needs) is unset the test skips, saying
        which, rather than acting on the machine tempest runs on.
        """
        reason = host.missing_access(*options)
        if reason:
            raise cls.skipException(reason)

    def vsmtio_flavor(self, specs, vcpus=1, ram=128):
        flavor = self.create_flavor(ram=ram, vcpus=vcpus, disk=1)
        if specs:
            self.admin_flavors_client.set_flavor_extra_spec(
                flavor['id'], **specs)
        return flavor

    def boot(self, flavor, image=None, wait_until='ACTIVE', **kwargs):
        """A server of ``flavor``, deleted (and waited for) at cleanup."""
        body = self.servers_client.create_server(
            name=data_utils.rand_name(prefix=CONF.resource_name_prefix,
                                      name=self.__class__.__name__),
            flavorRef=flavor['id'],
            imageRef=image or CONF.compute.image_ref,
            networks='none', **kwargs)['server']
        self.addCleanup(waiters.wait_for_server_termination,
                        self.servers_client, body['id'])
        self.addCleanup(self._delete_quietly, body['id'])
        if wait_until:
            waiters.wait_for_server_status(self.servers_client, body['id'],
                                           wait_until)
        return self.admin_servers_client.show_server(body['id'])['server']

    def _delete_quietly(self, server_id):
        try:
            self.servers_client.delete_server(server_id)
        except lib_exc.NotFound:
            pass

    def wait_for_fault(self, server_id, timeout=None):
        """Wait until the server is ERROR; return its fault message."""
        timeout = timeout or CONF.compute.build_timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            server = self.admin_servers_client.show_server(
                server_id)['server']
            if server['status'] == 'ERROR':
                return server.get('fault', {}).get('message', '')
            if server['status'] == 'ACTIVE':
                self.fail('server %s became ACTIVE' % server_id)
            time.sleep(2)
        self.fail('server %s not in ERROR after %d s' % (server_id, timeout))

    def compute_hosts(self, zone=None):
        """Enabled, up compute hosts; of one availability zone if given."""
        return [s['host'] for s in self.os_admin.services_client.
                list_services(binary='nova-compute')['services']
                if s['state'] == 'up' and s['status'] == 'enabled'
                and zone in (None, s['zone'])]
