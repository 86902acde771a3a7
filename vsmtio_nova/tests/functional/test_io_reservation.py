"""Reserved I/O inside nova: nova-api validation and placement admission.

On nova's functional harness (real API, conductor, scheduler, placement and
resource tracker, with nova's fake virt driver): a compute node's
``[vsmtio] io_reservation_capacity_iops`` reaches placement as inventory of
CUSTOM_VSMTIO_IO_IOPS through nova's provider config, written by the code
``vsmtio-nova-conf provider-config`` runs and merged by nova's own resource
tracker; flavors ask for their reservation as a resource, and placement
admits only what fits, so the scheduler answers NoValidHost for a
reservation the host cannot hold. nova-api refuses bad reservation values
with HTTP 400 and keeps the flavor as it was.
"""

import fixtures

import nova.conf
from nova.tests.functional.api import client
from nova.tests.functional import integrated_helpers

from vsmtio_contract import io_reservation
from vsmtio_nova import conf  # noqa: F401 (registers [vsmtio] for flags)
from vsmtio_nova import provider_config
from vsmtio_nova.tests.functional import test_workload_mix

RC = io_reservation.RC_IOPS


class _ReservedIoBase(integrated_helpers._IntegratedTestBase):

    ADMIN_API = True
    microversion = 'latest'
    CAPACITY_IOPS = 1000

    def setUp(self):
        self.flags(api_paste_config=test_workload_mix.api_paste_ini(),
                   group='wsgi')
        self.flags(compute_driver='fake.MediumFakeDriver')
        self.flags(cores=100, instances=100, group='quota')
        super().setUp()

    def _setup_compute_service(self):
        # Set here: nova's base setUp resets config before it starts the
        # computes.
        self.flags(cpu_allocation_ratio=1.0, initial_cpu_allocation_ratio=1.0)
        self.flags(provider_config_location=self.useFixture(
            fixtures.TempDir()).path, group='compute')
        self.set_capacity(self.CAPACITY_IOPS)
        return self._start_compute('compute')

    def set_capacity(self, iops):
        """What an operator does: set it, run provider-config."""
        self.flags(io_reservation_capacity_iops=iops, group='vsmtio')
        provider_config.write(nova.conf.CONF)

    def reserving_flavor(self, iops):
        return self._create_flavor(
            name='r%d' % iops, vcpu=1, memory_mb=256, disk=1, ephemeral=0,
            extra_spec={io_reservation.EXTRA_SPEC_IOPS: str(iops),
                        'resources:%s' % RC: str(iops)})

    def boot(self, flavor, expected_state='ACTIVE'):
        return self._create_server(flavor_id=flavor, networks='none',
                                   expected_state=expected_state)

    def inventory(self):
        [rp] = self._get_all_providers()    # the one compute node
        return self._get_provider_inventory(rp['uuid'])


class IoReservationTest(_ReservedIoBase):

    def test_the_host_reports_its_capacity(self):
        inv = self.inventory()[RC]
        self.assertEqual(self.CAPACITY_IOPS, inv['total'])
        self.assertEqual(self.CAPACITY_IOPS, inv['max_unit'])
        self.assertEqual(1.0, inv['allocation_ratio'])
        # nova's own classes are still there
        self.assertIn('VCPU', self.inventory())

    def test_a_new_capacity_counts_from_the_next_start(self):
        # nova reads provider config files when nova-compute starts
        self.set_capacity(400)
        self._run_periodics()
        self.assertEqual(self.CAPACITY_IOPS, self.inventory()[RC]['total'])
        self.compute = self.restart_compute_service(self.compute)
        self.assertEqual(400, self.inventory()[RC]['total'])
        # 0 removes the file, and the next start the inventory
        self.set_capacity(0)
        self.compute = self.restart_compute_service(self.compute)
        self.assertNotIn(RC, self.inventory())
        self.assertIn('VCPU', self.inventory())

    def test_admission_refuses_a_reservation_the_host_cannot_hold(self):
        r600, r300 = self.reserving_flavor(600), self.reserving_flavor(300)
        first = self.boot(r600)
        allocs = self._get_allocations_by_server_uuid(first['id'])
        [held] = allocs.values()
        self.assertEqual(600, held['resources'][RC])
        # 600 + 600 > 1000: placement has no candidate, the build fails
        refused = self.boot(r600, expected_state='ERROR')
        self.assertIn('No valid host', refused['fault']['message'])
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            refused['id']))
        # 600 + 300 fits
        fits = self.boot(r300)
        self.assertEqual('compute', fits['OS-EXT-SRV-ATTR:host'])
        # and the freed reservation can be taken again
        self._delete_server(first)
        self.boot(r600)

    def test_unreserved_flavors_are_not_affected(self):
        plain = self._create_flavor(name='plain', vcpu=1, memory_mb=256,
                                    disk=1, ephemeral=0)
        self.boot(self.reserving_flavor(1000))
        self.boot(plain)

    def test_bad_reservation_values_are_refused_by_nova_api(self):
        flavor = self.reserving_flavor(200)
        before = self.api.get_flavor(flavor)
        for key in (io_reservation.EXTRA_SPEC_IOPS,
                    io_reservation.EXTRA_SPEC_MIB_PER_S):
            for value in ('0', '-1', 'fast', '2.5', str(2 ** 31)):
                exc = self.assertRaises(
                    client.OpenStackApiException, self.api.post_extra_spec,
                    flavor, {'extra_specs': {key: value}})
                self.assertEqual(400, exc.response.status_code, value)
                self.assertIn('Validation failed', exc.response.text)
        # nothing was lost or half-written
        self.assertEqual(before['extra_specs'],
                         self.api.get_flavor(flavor)['extra_specs'])
        # a good value goes through
        self.api.post_extra_spec(
            flavor, {'extra_specs': {io_reservation.EXTRA_SPEC_MIB_PER_S:
                                     '40'}})


class NoCapacityTest(_ReservedIoBase):
    """A compute node without capacity reports none and takes none."""

    CAPACITY_IOPS = 0

    def test_the_host_reports_its_capacity(self):
        self.assertNotIn(RC, self.inventory())

    def test_admission_refuses_a_reservation_the_host_cannot_hold(self):
        refused = self.boot(self.reserving_flavor(1), expected_state='ERROR')
        self.assertIn('No valid host', refused['fault']['message'])

    def test_unreserved_flavors_are_not_affected(self):
        plain = self._create_flavor(name='plain', vcpu=1, memory_mb=256,
                                    disk=1, ephemeral=0)
        self.boot(plain)
