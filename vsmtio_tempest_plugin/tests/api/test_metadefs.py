"""The vsmtio metadata definitions are in glance (Horizon's dialogs)."""

from tempest import config
from tempest.lib import decorators

from vsmtio_tempest_plugin.tests import base

CONF = config.CONF


class MetadefsTest(base.VsmtioBaseTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.glance:
            raise cls.skipException('glance is not available')

    @decorators.idempotent_id('a1e5c9d3-6f2b-4c8a-9e7d-3b0f5a2c8e61')
    def test_flavor_namespace(self):
        ns = self.os_admin.namespaces_client.show_namespace(
            'OS::Compute::VSMTIO')
        self.assertIn('OS::Nova::Flavor', [
            r['name'] for r in ns['resource_type_associations']])
        self.assertEqual(['io', 'cpu', 'auto'],
                         ns['properties']['workload']['enum'])
        self.assertEqual('boolean',
                         ns['properties']['context_retention']['type'])

    @decorators.idempotent_id('d8b2f6a4-1e9c-4a7d-b5e3-9c0a6f4d2e18')
    def test_aggregate_namespace(self):
        ns = self.os_admin.namespaces_client.show_namespace(
            'OS::Compute::VSMTIOAggregate')
        self.assertEqual(
            {'target_io_fraction', 'min_io_fraction', 'max_io_fraction',
             'weight_multiplier'}, set(ns['properties']))
