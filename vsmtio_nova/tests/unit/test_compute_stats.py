"""MixStats: each node's mix, kept where nova keeps num_instances."""

import fixtures
from oslo_utils import uuidutils

from nova.compute import resource_tracker
from nova.compute import stats as compute_stats
from nova.compute import vm_states
from nova import objects
from nova import test

from vsmtio_contract import specs
from vsmtio_contract import workload
from vsmtio_nova.compute import stats
from vsmtio_nova.tests.unit import base
from vsmtio_nova.watcher.tests import measured_steps

SECRET = 'the-controllers-root-secret'
#: What h1's nova-compute and agent hold: h1's key, not the root secret.
KEY = workload.derive_host_key(SECRET, 'h1')
NOW = 1800000000


def instance(cls, vcpus=2, metadata=None, vm_state=vm_states.ACTIVE):
    return objects.Instance(
        uuid=uuidutils.generate_uuid(), flavor=base.flavor(cls, vcpus),
        vm_state=vm_state, task_state=None, os_type='linux',
        project_id='p', metadata=metadata or {}, host='h1')


def signed(uuid, cls='io', key=KEY, host='h1', expires=NOW + 600):
    return workload.sign_measured(key, uuid, cls, host, expires)


class MixStatsTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(measured_class_host_keys=[KEY], group='vsmtio')
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
                              signed(wrong_key.uuid, key='guess')}
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

    def test_no_key_trusts_no_measurement(self):
        self.flags(measured_class_host_keys=None, group='vsmtio')
        inst = instance(None, 4)
        inst.metadata = {workload.MEASURED_CLASS_KEY: signed(inst.uuid)}
        self.stats.update_stats_for_instance(inst)
        self.assertEqual((0, 0), self.mix())

    def recount(self, *instances):
        """The resource tracker's periodic task: clear, count every one."""
        self.stats.clear()
        for inst in instances:
            self.stats.update_stats_for_instance(inst)
        return self.mix()

    def test_deleting_the_key_changes_nothing_until_its_expiry(self):
        # A tenant deleting its key must not make its instance uncounted:
        # the Watcher strategy would then move a neighbour.
        inst = instance(None, 4)
        inst.metadata = {workload.MEASURED_CLASS_KEY: signed(inst.uuid)}
        neighbour = instance('cpu', 4)
        self.assertEqual((4, 4), self.recount(inst, neighbour))
        inst.metadata = {}                    # the owner deletes it
        self.stats.update_stats_for_instance(inst)   # a state change
        self.assertEqual((4, 4), self.mix())
        self.now = NOW + 599
        self.assertEqual((4, 4), self.recount(inst, neighbour))
        # the last verified class lapses with its own signed expiry
        self.now = NOW + 600
        self.assertEqual((0, 4), self.recount(inst, neighbour))

    def test_forged_or_replayed_values_change_nothing(self):
        inst = instance(None, 2)
        earlier = signed(inst.uuid, 'io', expires=NOW + 600)
        inst.metadata = {workload.MEASURED_CLASS_KEY: earlier}
        self.recount(inst)
        later = signed(inst.uuid, 'cpu', expires=NOW + 660)
        inst.metadata = {workload.MEASURED_CLASS_KEY: later}
        self.assertEqual((0, 2), self.recount(inst))
        for value in ('io',                                  # made up
                      signed(inst.uuid, 'io', key='a-guess'),
                      signed(inst.uuid, 'io', host='h2'),    # elsewhere
                      earlier):             # put back, still unexpired
            inst.metadata = {workload.MEASURED_CLASS_KEY: value}
            self.assertEqual((0, 2), self.recount(inst), value)
        self.assertIn('signed to expire later', self.stdlog.logger.output)

    def test_another_hosts_key_signs_nothing_here(self):
        # h2's agent (or whoever stole h2's key) signs for h1's instance:
        # h1 verifies with its own key, so neither claim counts.
        other = workload.derive_host_key(SECRET, 'h2')
        for host in ('h1', 'h2'):
            inst = instance(None, 4)
            inst.metadata = {workload.MEASURED_CLASS_KEY: signed(
                inst.uuid, key=other, host=host)}
            self.assertEqual((0, 0), self.recount(inst))

    def test_the_previous_key_counts_during_a_rotation(self):
        new = workload.derive_host_key('the-next-root', 'h1')
        self.flags(measured_class_host_keys=[new, KEY], group='vsmtio')
        old_signed, new_signed = instance(None, 2), instance(None, 4)
        old_signed.metadata = {workload.MEASURED_CLASS_KEY: signed(
            old_signed.uuid)}
        new_signed.metadata = {workload.MEASURED_CLASS_KEY: signed(
            new_signed.uuid, key=new)}
        self.assertEqual((6, 0), self.recount(old_signed, new_signed))
        self.flags(measured_class_host_keys=[new], group='vsmtio')
        self.stats.measured.clear()     # a restart once rotated
        self.assertEqual((4, 0), self.recount(old_signed, new_signed))

    def test_root_secret_on_a_compute_still_works_and_says_why_not(self):
        self.flags(measured_class_host_keys=None,
                   measured_class_secret=SECRET, group='vsmtio')
        # said once per process: a fresh record of what was said
        self.useFixture(fixtures.MonkeyPatch(
            'vsmtio_nova.compute.stats._WARNED', specs.OnceEach()))
        inst = instance(None, 4)
        inst.metadata = {workload.MEASURED_CLASS_KEY: signed(inst.uuid)}
        self.assertEqual((4, 0), self.recount(inst))
        self.assertIn('can sign classes for every host',
                      self.stdlog.logger.output)

    def test_the_steps_the_watcher_strategy_counts_the_same(self):
        self.flags(host=measured_steps.HOST)
        self.flags(measured_class_host_keys=[measured_steps.KEY],
                   group='vsmtio')
        self.now = measured_steps.NOW
        inst = instance(None, measured_steps.VCPUS)
        inst.host = measured_steps.HOST
        for what, metadata, later, want in measured_steps.steps(inst.uuid):
            self.now += later
            inst.metadata = metadata
            self.assertEqual(want, self.recount(inst), what)

    def test_install_makes_the_resource_tracker_use_it(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.resource_tracker.compute_stats', compute_stats))
        stats.install()
        rt = resource_tracker.ResourceTracker('host', driver=None)
        self.assertIsInstance(rt.stats['node'], stats.MixStats)
        # nova's own class is untouched.
        self.assertIs(compute_stats.Stats, type(compute_stats.Stats()))
