"""The checkpoint file: atomic, tied to a boot, corrupt files kept aside."""

import json
import os

import fixtures
import testtools

from vsmtio_agent.host import checkpoint


class TestCheckpoint(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'sub', 'ckpt.json')

    def test_roundtrip_and_first_original_wins(self):
        c = checkpoint.Checkpoint(self.path, 'boot-a')
        self.assertTrue(c.record_pin('u1', 3, 'vm', 0, {2, 1}))
        self.assertFalse(c.record_pin('u1', 3, 'vm', 0, {5}))
        self.assertTrue(c.record_shares('u1', 3, 'vm', 1024))
        self.assertTrue(c.record_knob('module/kvm/parameters/x', 200000))
        c.save()
        self.assertEqual([], [n for n in os.listdir(os.path.dirname(
            self.path)) if '.tmp' in n])
        d = checkpoint.Checkpoint(self.path, 'boot-a')
        self.assertTrue(d.load())
        self.assertEqual([1, 2], d.domains['u1']['pins']['0'])
        self.assertEqual(1024, d.domains['u1']['cpu_shares'])
        self.assertEqual({'module/kvm/parameters/x': 200000}, d.knobs)

    def test_empty_record_removes_the_file(self):
        c = checkpoint.Checkpoint(self.path, 'b')
        c.record_knob('k', 1)
        c.save()
        del c.knobs['k']
        c.save()
        self.assertFalse(os.path.exists(self.path))

    def test_restarted_domain_starts_a_new_record(self):
        c = checkpoint.Checkpoint(self.path, 'b')
        c.record_pin('u1', 3, 'vm', 0, {1})
        self.assertTrue(c.record_pin('u1', 4, 'vm', 0, {2}))
        self.assertEqual([2], c.domains['u1']['pins']['0'])

    def test_earlier_boot_is_dropped(self):
        c = checkpoint.Checkpoint(self.path, 'boot-a')
        c.record_knob('k', 1)
        c.save()
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

    def test_boot_id_of_this_machine(self):
        self.assertEqual(36, len(checkpoint.boot_id()))
