"""nova's and placement's answers into the mix filter's records.

The clients are stood in for with objects shaped as openstacksdk's and
novaclient's resources are; what the panel reads of them is checked.
"""

import types
import unittest
from unittest import mock

from openstack_dashboard import api

from vsmtio_dashboard.api import nova
from vsmtio_dashboard import mixfilter

NS = types.SimpleNamespace


class NovaApiTest(unittest.TestCase):
    def test_servers_with_their_embedded_flavor(self):
        flavor = NS(original_name='vsmtio.io', vcpus=2,
                    extra_specs={'vsmtio:workload': 'io'})
        listed = [NS(compute_host='h', hypervisor_hostname='h.node',
                     flavor=flavor),
                  # shelved: no host; a flavor without what 2.47 adds
                  NS(compute_host=None, hypervisor_hostname=None,
                     flavor=NS(id='f'))]
        client = mock.Mock()
        client.servers.return_value = iter(listed)
        with mock.patch.object(nova._nova, 'computeclient',
                               return_value=client):
            got = nova.servers('request')
        client.servers.assert_called_once_with(details=True,
                                               all_projects=True)
        self.assertEqual(
            [mixfilter.Server('h', 'h.node', mixfilter.Flavor(
                'vsmtio.io', 2, {'vsmtio:workload': 'io'})),
             mixfilter.Server(None, None, mixfilter.Flavor(None, 0, {}))],
            got)

    def test_nodes_with_placements_ratio(self):
        hypervisors = [NS(name='h.node', vcpus=8, vcpus_used=3,
                          service_details={'host': 'h'}),
                       NS(name='g', vcpus=None, vcpus_used=None,
                          service_details=None)]
        with mock.patch.object(api.nova, 'hypervisor_list',
                               return_value=hypervisors):
            got = nova.nodes('request', {'h.node': 4.0})
        self.assertEqual([mixfilter.Node('h', 'h.node', 8, 3, 4.0),
                          mixfilter.Node('g', 'g', 0, 0, None)], got)

    def test_ratios_of_root_providers(self):
        providers = [{'uuid': 'u1', 'name': 'h.node',
                      'parent_provider_uuid': None},
                     {'uuid': 'u2', 'name': 'h.node_pci',
                      'parent_provider_uuid': 'u1'},
                     {'uuid': 'u3', 'name': 'storage',
                      'parent_provider_uuid': None}]
        inventories = {'u1': {'VCPU': {'total': 8, 'allocation_ratio': 4.0},
                              'MEMORY_MB': {}},
                       'u3': {'DISK_GB': {}}}
        with mock.patch.object(api.placement, 'resource_providers',
                               return_value=providers), \
                mock.patch.object(api.placement,
                                  'resource_provider_inventories',
                                  side_effect=lambda r, u: inventories[u]):
            self.assertEqual({'h.node': 4.0},
                             nova.vcpu_allocation_ratios('request'))

    def test_aggregates(self):
        listed = [NS(name='a', hosts=['h'], metadata={'k': 'v'}),
                  NS(name='b', hosts=None, metadata=None)]
        with mock.patch.object(api.nova, 'aggregate_details_list',
                               return_value=listed):
            self.assertEqual([mixfilter.Aggregate('a', ('h',), {'k': 'v'}),
                              mixfilter.Aggregate('b', (), {})],
                             nova.aggregates('request'))
