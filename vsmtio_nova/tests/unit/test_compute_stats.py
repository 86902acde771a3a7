"""MixStats: each node's mix, kept where nova keeps num_instances."""

import fixtures
from oslo_utils import uuidutils

from nova.compute import resource_tracker
from nova.compute import stats as compute_stats
from nova.compute import vm_states
from nova import objects
from nova import test

from vsmtio_contract import workload
from vsmtio_nova.compute import stats
from vsmtio_nova.tests.unit import base

SECRET = 'agents-and-computes-only'
NOW = 1800000000


def instance(cls, vcpus=2, metadata=None, vm_state=vm_states.ACTIVE):
    return objects.Instance(
        uuid=uuidutils.generate_uuid(), flavor=base.flavor(cls, vcpus),
        vm_state=vm_state, task_state=None, os_type='linux',
        project_id='p', metadata=metadata or {}, host='h1')


def signed(uuid, cls='io', secret=SECRET, host='h1', expires=NOW + 600):
    return workload.sign_measured(secret, uuid, cls, host, expires)


class MixStatsTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(measured_class_secret=SECRET, group='vsmtio')
        self.flags(host='h1')
        self.stats = stats.MixStats()
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_utils.timeutils.utcnow_ts', lambda *a, **k: self.now))
        self.now = NOW

    def mix(self):
        return self.stats[stats.IO_VCPUS], self.stats[stats.CPU_VCPUS]

    def test_counts_declared_vcpus_with_nova_stats(self):
        self.assertEqual((0, 0), self.mix())
        for inst in (instance('io', 4), instance('cpu', 2), instance(None)):
            self.stats.update_stats_for_instance(inst)
        self.assertEqual((4, 2), self.mix())
        self.assertEqual(3, self.stats.num_instances)

    def test_removal_and_state_changes(self):
        io = instance('io', 4)
        self.stats.update_stats_for_instance(io)
        self.stats.update_stats_for_instance(io)   # a state change
        self.assertEqual((4, 0), self.mix())
        self.stats.update_stats_for_instance(io, is_removed=True)
        self.assertEqual((0, 0), self.mix())
        deleted = instance('cpu', vm_state=vm_states.DELETED)
        self.stats.update_stats_for_instance(instance('cpu'))
        self.stats.update_stats_for_instance(deleted)
        self.assertEqual((0, 2), self.mix())

    def test_clear_resets_the_mix(self):
        # The resource tracker's periodic task clears, then recounts.
        self.stats.update_stats_for_instance(instance('io'))
        self.stats.clear()
        self.assertEqual((0, 0), self.mix())

    def test_auto_instance_counts_with_its_signed_measured_class(self):
        inst = instance(None, 4)
        inst.metadata = {workload.MEASURED_CLASS_KEY: signed(inst.uuid)}
        self.stats.update_stats_for_instance(inst)
        self.assertEqual((4, 0), self.mix())

    def test_forged_or_copied_measurement_is_ignored(self):
        forged = instance(None, 4, {workload.MEASURED_CLASS_KEY: 'io'})
        other = instance(None, 4)
        copied = instance(None, 4, {
            workload.MEASURED_CLASS_KEY: signed(other.uuid)})
        wrong_key = instance(None, 4)
        wrong_key.metadata = {workload.MEASURED_CLASS_KEY:
                              signed(wrong_key.uuid, secret='guess')}
        for inst in (forged, copied, wrong_key):
            self.stats.update_stats_for_instance(inst)
        self.assertEqual((0, 0), self.mix())
        self.assertIn('signature does not hold', self.stdlog.logger.output)

    def test_other_host_or_expired_measurement_is_ignored(self):
        moved = instance(None, 4)
        moved.metadata = {workload.MEASURED_CLASS_KEY: signed(
            moved.uuid, host='h0')}
        stale = instance(None, 2)
        stale.metadata = {workload.MEASURED_CLASS_KEY: signed(
            stale.uuid, expires=NOW - 1)}
        for inst in (moved, stale):
            self.stats.update_stats_for_instance(inst)
        self.assertEqual((0, 0), self.mix())
        self.assertIn('measured on h0', self.stdlog.logger.output)
        self.assertIn('expired', self.stdlog.logger.output)

    def test_a_value_stops_counting_once_expired(self):
        inst = instance(None, 4)
        inst.metadata = {workload.MEASURED_CLASS_KEY: signed(inst.uuid)}
        self.stats.update_stats_for_instance(inst)
        self.assertEqual((4, 0), self.mix())
        self.now = NOW + 600     # the periodic recount after its expiry
        self.stats.clear()
        self.stats.update_stats_for_instance(inst)
        self.assertEqual((0, 0), self.mix())

    def test_an_untrusted_value_is_said_once_not_every_recount(self):
        inst = instance(None, 4, {workload.MEASURED_CLASS_KEY: 'io'})
        for _ in range(5):   # five periodic recounts
            self.stats.clear()
            self.stats.update_stats_for_instance(inst)
        self.assertEqual(1, self.stdlog.logger.output.count(
            'counting it with its declared class'))

    def test_declared_class_wins_over_measurement(self):
        inst = instance('cpu', 2)
        inst.metadata = {workload.MEASURED_CLASS_KEY: signed(inst.uuid)}
        self.stats.update_stats_for_instance(inst)
        self.assertEqual((0, 2), self.mix())

    def test_no_secret_trusts_no_measurement(self):
        self.flags(measured_class_secret=None, group='vsmtio')
        inst = instance(None, 4)
        inst.metadata = {workload.MEASURED_CLASS_KEY: signed(inst.uuid)}
        self.stats.update_stats_for_instance(inst)
        self.assertEqual((0, 0), self.mix())

    def test_install_makes_the_resource_tracker_use_it(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.resource_tracker.compute_stats', compute_stats))
        stats.install()
        rt = resource_tracker.ResourceTracker('host', driver=None)
        self.assertIsInstance(rt.stats['node'], stats.MixStats)
        # nova's own class is untouched.
        self.assertIs(compute_stats.Stats, type(compute_stats.Stats()))
