"""Reserved I/O: what the agent honours, and the inventory a host declares."""

import nova.conf
from nova import test

from vsmtio_contract import io_reservation as io_res
from vsmtio_nova import conf  # noqa: F401 (registers [vsmtio] for flags)
from vsmtio_nova import io_inventory

CONF = nova.conf.CONF
MIB = 1024 * 1024


class HonouredTest(test.NoDBTestCase):

    def test_declared_and_admitted_agree(self):
        iops, bps, problems = io_res.honoured({
            io_res.EXTRA_SPEC_IOPS: '500',
            'resources:CUSTOM_VSMTIO_IO_IOPS': '500',
            io_res.EXTRA_SPEC_MIB_PER_S: '40',
            'resources1:CUSTOM_VSMTIO_IO_MIB_PER_S': '40'})
        self.assertEqual((500, 40 * MIB, []), (iops, bps, problems))

    def test_capped_at_what_placement_admitted(self):
        iops, _, problems = io_res.honoured({
            io_res.EXTRA_SPEC_IOPS: '500',
            'resources:CUSTOM_VSMTIO_IO_IOPS': '200'})
        self.assertEqual(200, iops)
        self.assertIn('placement admitted 200', problems[0])

    def test_not_admitted_is_not_honoured(self):
        iops, bps, problems = io_res.honoured({io_res.EXTRA_SPEC_IOPS: '9'})
        self.assertIsNone(iops)
        self.assertIsNone(bps)
        self.assertIn('not admitted by placement', problems[0])

    def test_unreserved_and_garbage(self):
        self.assertEqual((None, None, []), io_res.honoured({}))
        # a hand-edited domain could hold anything: never a reservation,
        # and the agent is told why
        iops, bps, problems = io_res.honoured({
            io_res.EXTRA_SPEC_IOPS: 'lots',
            'resources:CUSTOM_VSMTIO_IO_IOPS': '-3'})
        self.assertEqual((None, None), (iops, bps))
        self.assertEqual(1, len(problems))
        self.assertIn("'lots' is ignored", problems[0])

    def test_what_the_api_refuses_reserves_nothing(self):
        # Before: 2**31 was read as a reservation the API refuses.
        for value in (str(2 ** 31), '0', '1.5'):
            iops, _bps, problems = io_res.honoured({
                io_res.EXTRA_SPEC_IOPS: value,
                'resources:CUSTOM_VSMTIO_IO_IOPS': '100'})
            self.assertIsNone(iops, value)
            self.assertIn('nova-api refuses it', problems[0])


class CapacityTest(test.NoDBTestCase):
    """The capacities as placement inventory (``test_provider_config``)."""

    def test_capacity_becomes_inventory(self):
        self.flags(io_reservation_capacity_iops=1000, group='vsmtio')
        self.assertEqual({io_res.RC_IOPS: {
            'total': 1000, 'reserved': 0, 'min_unit': 1, 'max_unit': 1000,
            'step_size': 1, 'allocation_ratio': 1.0}},
            io_inventory.inventory(CONF))

    def test_capacity_zero_is_no_inventory(self):
        self.assertEqual({}, io_inventory.inventory(CONF))

    def test_bounds(self):
        self.assertRaises(ValueError, self.flags, group='vsmtio',
                          io_reservation_capacity_iops=-1)
        self.assertRaises(ValueError, self.flags, group='vsmtio',
                          io_reservation_capacity_iops=2 ** 31)
