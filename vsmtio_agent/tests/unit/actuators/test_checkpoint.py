"""The checkpoint file: atomic, tied to a boot, corrupt files kept aside."""

import json
import os

import fixtures
import testtools

from vsmtio_agent.actuators import checkpoint


class TestCheckpoint(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'sub', 'ckpt.json')

    def test_roundtrip_and_first_original_wins(self):
        c = checkpoint.Checkpoint(self.path, 'boot-a')
        vm = c.domain('u1', 3, 'vm')
        self.assertTrue(vm.record('pins', '0', [1, 2]))
        self.assertFalse(vm.record('pins', '0', [5]))
        self.assertTrue(vm.record('cpu_shares', 'cpu_shares', 1024))
        self.assertTrue(c.record('knobs', 'module/kvm/parameters/x', 200000))
        c.save()
        self.assertEqual([], [n for n in os.listdir(os.path.dirname(
            self.path)) if '.tmp' in n])
        d = checkpoint.Checkpoint(self.path, 'boot-a')
        self.assertTrue(d.load())
        vm = d.domain('u1', 3)
        self.assertEqual([1, 2], vm.original('pins', '0'))
        self.assertEqual(1024, vm.original('cpu_shares', 'cpu_shares'))
        self.assertEqual({'module/kvm/parameters/x': 200000},
                         {k: d.original('knobs', k) for k in d.keys('knobs')})

    def test_empty_record_removes_the_file(self):
        c = checkpoint.Checkpoint(self.path, 'b')
        c.record('knobs', 'k', 1)
        c.save()
        c.forget('knobs', 'k')
        c.save()
        self.assertFalse(os.path.exists(self.path))

    def test_restarted_domain_starts_a_new_record(self):
        c = checkpoint.Checkpoint(self.path, 'b')
        c.domain('u1', 3, 'vm').record('pins', '0', [1])
        self.assertTrue(c.domain('u1', 4, 'vm').record('pins', '0', [2]))
        self.assertEqual([2], c.domain('u1', 4).original('pins', '0'))

    def test_earlier_boot_is_dropped(self):
        c = checkpoint.Checkpoint(self.path, 'boot-a')
        c.record('knobs', 'k', 1)
        self.assertFalse(checkpoint.Checkpoint(self.path, 'boot-b').load())
        self.assertFalse(os.path.exists(self.path))

    def test_corrupt_files_are_moved_aside_with_an_error(self):
        os.makedirs(os.path.dirname(self.path))
        for garbage in ('{not json', '[]', json.dumps({'version': 99}),
                        json.dumps({'version': 1, 'domains': {
                            'u': {'id': 1, 'pins': {'0': 'all'}}}})):
            log = self.useFixture(fixtures.FakeLogger())
            with open(self.path, 'w') as f:
                f.write(garbage)
            c = checkpoint.Checkpoint(self.path, 'b')
            self.assertRaises(checkpoint.CheckpointError, c.load)
            self.assertFalse(os.path.exists(self.path))
            with open(self.path + '.corrupt') as f:
                self.assertEqual(garbage, f.read())
            self.assertIn('is corrupt', log.output)
            self.assertTrue(c.empty)

    def test_schema_names_what_is_wrong(self):
        os.makedirs(os.path.dirname(self.path))
        for doc, where in (
                ({'version': 1, 'domains': {'u': {'pins': {}}}},
                 "'id' is a required property at $.domains.u"),
                ({'version': 1, 'domains': {'u': {'id': 1,
                                                  'rass': {'x': 'io'}}}},
                 "at $.domains.u.rass"),
                ({'version': 1, 'knobs': {'k': [1]}}, 'at $.knobs.k')):
            self.useFixture(fixtures.FakeLogger())
            with open(self.path, 'w') as f:
                json.dump(doc, f)
            exc = self.assertRaises(checkpoint.CheckpointError,
                                    checkpoint.Checkpoint(self.path).load)
            self.assertIn(where, str(exc))

    def test_record_is_durable_before_it_returns(self):
        # the actuator contract: a crash right after record() loses nothing
        c = checkpoint.Checkpoint(self.path, 'b')
        c.domain('u1', 3, 'vm').record('rass', '1', 'none')
        d = checkpoint.Checkpoint(self.path, 'b')
        self.assertTrue(d.load())
        self.assertEqual('none', d.domain('u1', 3).original('rass', '1'))
        # forgetting is not durable until saved (writing the original back
        # twice after a crash is harmless)
        c.domain('u1', 3).forget('rass', '1')
        self.assertTrue(os.path.exists(self.path))
        c.save()
        self.assertFalse(os.path.exists(self.path))

    def test_deferred_saves_once_at_the_end(self):
        c = checkpoint.Checkpoint(self.path, 'b')
        with c.deferred():
            c.domain('u1', 3, 'vm').record('pins', '0', [1])
            c.record('knobs', 'k', 7)
            self.assertFalse(os.path.exists(self.path))
        with open(self.path) as f:
            data = json.load(f)
        self.assertEqual(checkpoint.VERSION, data['version'])
        self.assertEqual({'0': [1]}, data['domains']['u1']['pins'])
        self.assertEqual({'k': 7}, data['knobs'])

    def test_an_earlier_incarnation_is_not_read(self):
        c = checkpoint.Checkpoint(self.path, 'b')
        c.domain('u1', 3, 'vm').record('pins', '0', [1])
        self.assertRaises(KeyError, c.domain('u1', 4).original, 'pins', '0')
        self.assertEqual([], c.domain('u1', 4).keys('pins'))
        self.assertEqual({'u1': (3, 'vm')}, c.domains())
        self.assertEqual('vm', c.drop_domain('u1'))
        self.assertTrue(c.empty)

    def test_version_1_files_are_read_as_they_are(self):
        # what the agent before the actuators wrote: an upgrade restores it
        os.makedirs(os.path.dirname(self.path))
        with open(self.path, 'w') as f:
            json.dump({
                'version': 1, 'boot_id': 'b',
                'domains': {'u1': {
                    'id': 3, 'name': 'vm', 'pins': {'0': [0, 1]},
                    'cpu_shares': 1024, 'rass': {'1': 'none'}}},
                'knobs': {'module/kvm/parameters/halt_poll_ns': 200000,
                          'kernel/vsmtio/rass_io_cpus': ''}}, f)
        c = checkpoint.Checkpoint(self.path, 'b')
        self.assertTrue(c.load())
        vm = c.domain('u1', 3)
        self.assertEqual(['0'], vm.keys('pins'))
        self.assertEqual([0, 1], vm.original('pins', '0'))
        self.assertEqual(1024, vm.original('cpu_shares', 'cpu_shares'))
        self.assertEqual('none', vm.original('rass', '1'))
        self.assertEqual(['kernel/vsmtio/rass_io_cpus',
                          'module/kvm/parameters/halt_poll_ns'],
                         c.keys('knobs'))
        # saved again as the current version, nothing lost
        c.save()
        d = checkpoint.Checkpoint(self.path, 'b')
        d.load()
        self.assertEqual(1024, d.domain('u1', 3).original('cpu_shares',
                                                          'cpu_shares'))

    def test_kinds_beyond_the_first_four_are_kept(self):
        # new actuators (MIST's) plug in without a change of format
        c = checkpoint.Checkpoint(self.path, 'b')
        c.record('irq_affinity', '24', '0-3')
        c.domain('u1', 3, 'vm').record('blkio_weight', 'vda', 500)
        d = checkpoint.Checkpoint(self.path, 'b')
        self.assertTrue(d.load())
        self.assertEqual('0-3', d.original('irq_affinity', '24'))
        self.assertEqual(500, d.domain('u1', 3).original('blkio_weight',
                                                         'vda'))
        d.forget('irq_affinity', '24')
        d.domain('u1', 3).forget('blkio_weight', 'vda')
        self.assertTrue(d.empty)

    def test_boot_id_of_this_machine(self):
        self.assertEqual(36, len(checkpoint.boot_id()))
