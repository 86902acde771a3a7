"""Host aggregate metadata overrides the I/O share bounds per host."""

from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib import decorators

from vsmtio_tempest_plugin.tests import base

CONF = config.CONF


class AggregateOverrideTest(base.VsmtioBaseTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if CONF.vsmtio.filter_min_classified_vcpus > 1:
            raise cls.skipException(
                'the WorkloadMixFilter judges a host only from '
                '[vsmtio] filter_min_classified_vcpus=%d classified vCPUs'
                % CONF.vsmtio.filter_min_classified_vcpus)

    def _aggregate(self, hosts):
        client = self.os_admin.aggregates_client
        agg = client.create_aggregate(
            name=data_utils.rand_name('vsmtio-agg'))['aggregate']
        self.addCleanup(client.delete_aggregate, agg['id'])
        for host in hosts:
            client.add_host(agg['id'], host=host)
            self.addCleanup(client.remove_host, agg['id'], host=host)
        return agg

    def _bounds(self, agg, low, high):
        self.os_admin.aggregates_client.set_metadata(
            agg['id'], metadata={'vsmtio:min_io_fraction': str(low),
                                 'vsmtio:max_io_fraction': str(high)})

    @decorators.attr(type=['scenario'])
    @decorators.idempotent_id('9a4d2e7b-6c1f-4b3a-8e5d-2f7c9a0b4e16')
    def test_max_io_fraction_override(self):
        """max_io_fraction=0 on every host refuses an io boot; 1 allows it.

        A cpu server first, so every host that may take the io server
        holds a classified vCPU and is judged.
        """
        hosts = self.compute_hosts()
        agg = self._aggregate(hosts)
        self._bounds(agg, 0.0, 1.0)
        io = self.vsmtio_flavor({'vsmtio:workload': 'io'})
        cpu = self.vsmtio_flavor({'vsmtio:workload': 'cpu'})
        for _host in hosts:
            self.boot(cpu)
        self._bounds(agg, 0.0, 0.0)
        refused = self.boot(io, wait_until=None)
        fault = self.wait_for_fault(refused['id'])
        self.assertIn('No valid host', fault)
        self._bounds(agg, 0.0, 1.0)
        server = self.boot(io)
        self.assertIn(server['OS-EXT-SRV-ATTR:host'], hosts)
