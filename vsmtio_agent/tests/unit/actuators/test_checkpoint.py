"""The checkpoint file: atomic, tied to a boot, corrupt files kept aside."""

import json
import os

import fixtures
import testtools

from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.actuators import statefile

HALT = 'module/kvm/parameters/halt_poll_ns'


def aside(path):
    """The names refused copies of ``path`` were kept under, sorted."""
    directory, name = os.path.split(path)
    return sorted(os.path.join(directory, n) for n in os.listdir(directory)
                  if n.startswith(name + '.corrupt-'))


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
        self.assertTrue(c.record('knobs', 'module/kvm/parameters/x',
                                 200000))
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
        c.record('knobs', HALT, 1)
        c.save()
        c.forget('knobs', HALT)
        c.save()
        self.assertFalse(os.path.exists(self.path))

    def test_restarted_domain_starts_a_new_record(self):
        c = checkpoint.Checkpoint(self.path, 'b')
        c.domain('u1', 3, 'vm').record('pins', '0', [1])
        self.assertTrue(c.domain('u1', 4, 'vm').record('pins', '0', [2]))
        self.assertEqual([2], c.domain('u1', 4).original('pins', '0'))

    def test_earlier_boot_is_dropped(self):
        c = checkpoint.Checkpoint(self.path, 'boot-a')
        c.record('knobs', HALT, 1)
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
            with open(aside(self.path)[-1]) as f:
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
                ({'version': 1, 'knobs': {HALT: [1]}}, "at $.knobs['"
                 "module/kvm/parameters/halt_poll_ns']")):
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
            c.record('knobs', HALT, 7)
            self.assertFalse(os.path.exists(self.path))
        with open(self.path) as f:
            data = json.load(f)
        self.assertEqual(checkpoint.VERSION, data['version'])
        self.assertEqual({'0': [1]}, data['domains']['u1']['pins'])
        self.assertEqual({HALT: 7}, data['knobs'])

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

    def test_mist_kinds_are_in_the_one_checkpoint(self):
        # MIST's actuators record here too: one record of originals
        c = checkpoint.Checkpoint(self.path, 'b')
        c.record(checkpoint.IRQ_AFFINITY, '24', '0-3')
        c.record(checkpoint.SCHED_POLICY, '10/11',
                 {'policy': 0, 'priority': 0, 'start': 5})
        c.record(checkpoint.RT_RUNTIME, 'machine/q/vcpu0', 0)
        c.domain('u1', 3, 'vm').record(checkpoint.BLKIO_WEIGHT, 'weight',
                                       500)
        d = checkpoint.Checkpoint(self.path, 'b')
        self.assertTrue(d.load())
        self.assertEqual(4, d.count())
        self.assertEqual('0-3', d.original(checkpoint.IRQ_AFFINITY, '24'))
        self.assertEqual(500, d.domain('u1', 3).original(
            checkpoint.BLKIO_WEIGHT, 'weight'))
        d.forget(checkpoint.IRQ_AFFINITY, '24')
        d.forget(checkpoint.SCHED_POLICY, '10/11')
        d.forget(checkpoint.RT_RUNTIME, 'machine/q/vcpu0')
        d.domain('u1', 3).forget(checkpoint.BLKIO_WEIGHT, 'weight')
        self.assertTrue(d.empty)

    def test_boot_id_of_this_machine(self):
        self.assertEqual(36, len(checkpoint.boot_id()))


class TestCheckpointIsData(testtools.TestCase):
    """The checkpoint root acts on is data, never code."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'state', 'ckpt.json')
        self.log = self.useFixture(fixtures.FakeLogger())

    def put(self, doc, mode=0o600):
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        with open(self.path, 'w') as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        os.chmod(self.path, mode)

    def refused(self, doc, mode=0o600):
        self.put(doc, mode)
        c = checkpoint.Checkpoint(self.path, 'b')
        exc = self.assertRaises(checkpoint.CheckpointError, c.load)
        self.assertTrue(c.empty)
        self.assertFalse(os.path.exists(self.path))
        self.assertEqual(1, len(str(exc).splitlines()))
        return str(exc)

    def test_knob_keys_outside_the_managed_knobs_are_refused(self):
        for key in ('/etc/shadow', '../../etc/shadow',
                    'module/kvm/parameters/../../../../etc/passwd',
                    'kernel/mm/transparent_hugepage/enabled'):
            why = self.refused({'version': 3, 'boot_id': 'b',
                                'knobs': {key: 1}})
            self.assertIn('at $.knobs', why)

    def test_cgroup_and_thread_keys_stay_relative(self):
        for kind, key, value in (
                (checkpoint.RT_RUNTIME, '/sys/fs/cgroup/x', 0),
                (checkpoint.RT_RUNTIME, 'machine/../../x', 0),
                (checkpoint.RT_RUNTIME, '..', 0),
                (checkpoint.SCHED_POLICY, '1/../2',
                 {'policy': 0, 'priority': 0}),
                (checkpoint.IRQ_AFFINITY, '../1', '0'),
                ('shell_command', 'x', 'rm -rf /')):
            why = self.refused({'version': 3, 'boot_id': 'b',
                                'host': {kind: {key: value}}})
            self.assertIn('at $.host', why)
        self.assertEqual(6, len(aside(self.path)))

    def test_knob_paths_never_leave_their_root(self):
        # the second line of defence, below the schema
        from vsmtio_agent.linux import kernel_knobs
        for key in ('/etc/shadow', '../etc/shadow', 'a/../../b', ''):
            self.assertRaises(kernel_knobs.KnobError, kernel_knobs.Knob,
                              self.dir, key)

    def test_a_planted_symlink_is_not_followed(self):
        # a file elsewhere that a link at any name beside the checkpoint
        # points to must never be written
        victim = os.path.join(self.dir, 'victim')
        with open(victim, 'w') as f:
            f.write('precious')
        os.makedirs(os.path.dirname(self.path), mode=0o700)
        for name in ('ckpt.json.tmp.%d' % os.getpid(), 'ckpt.json.tmp'):
            os.symlink(victim, os.path.join(os.path.dirname(self.path),
                                            name))
        c = checkpoint.Checkpoint(self.path, 'b')
        c.record('knobs', HALT, 200000)
        with open(victim) as f:
            self.assertEqual('precious', f.read())
        self.assertFalse(os.path.islink(self.path))
        # and a link in the checkpoint's own place is refused on load
        os.unlink(self.path)
        os.symlink(victim, self.path)
        exc = self.assertRaises(checkpoint.CheckpointError,
                                checkpoint.Checkpoint(self.path, 'b').load)
        self.assertIn('symbolic link', str(exc))
        with open(victim) as f:
            self.assertEqual('precious', f.read())

    def test_written_0600_in_a_0700_directory(self):
        c = checkpoint.Checkpoint(self.path, 'b')
        c.record('knobs', HALT, 200000)
        self.assertEqual(0o600, os.stat(self.path).st_mode & 0o777)
        self.assertEqual(0o700, os.stat(os.path.dirname(self.path)).st_mode
                         & 0o777)

    def test_a_directory_others_can_write_is_refused(self):
        os.makedirs(os.path.dirname(self.path))
        os.chmod(os.path.dirname(self.path), 0o777)
        c = checkpoint.Checkpoint(self.path, 'b')
        self.assertRaises(OSError, c.record, 'knobs', HALT, 1)
        self.assertTrue(c.empty)
        self.assertFalse(os.path.exists(self.path))

    def test_a_file_others_can_write_is_refused(self):
        doc = {'version': 3, 'boot_id': 'b', 'knobs': {HALT: 1}}
        for mode in (0o620, 0o602, 0o666):
            why = self.refused(doc, mode)
            self.assertIn('writable by group or others', why)

    def test_a_file_of_another_owner_is_refused(self):
        if os.geteuid() != 0:
            self.skipTest('changing a file\'s owner needs root')
        self.put({'version': 3, 'boot_id': 'b', 'knobs': {HALT: 1}})
        os.chown(self.path, 65534, 65534)
        exc = self.assertRaises(checkpoint.CheckpointError,
                                checkpoint.Checkpoint(self.path, 'b').load)
        self.assertIn('owned by uid 65534', str(exc))

    def test_deep_nesting_is_refused_not_a_recursion_error(self):
        deep = '[' * 100000 + ']' * 100000
        why = self.refused('{"version": 3, "knobs": %s}' % deep)
        self.assertIn('nested deeper than', why)
        # brackets inside strings are not nesting
        statefile.check_depth('{"a": "%s"}' % ('[' * 1000))

    def test_a_second_corruption_keeps_the_first(self):
        self.refused('{first')
        self.refused('{second')
        kept = aside(self.path)
        self.assertEqual(2, len(kept))
        texts = set()
        for path in kept:
            with open(path) as f:
                texts.add(f.read())
        self.assertEqual({'{first', '{second'}, texts)


class TestLegacyMistRecord(testtools.TestCase):
    """An upgrade takes in what MIST kept beside the checkpoint before."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'ckpt.json')
        self.useFixture(fixtures.FakeLogger())

    def legacy(self, kinds, mode=0o600):
        with open(self.path + '.actuators.json', 'w') as f:
            json.dump({'version': 1, 'boot_id': 'b', 'kinds': kinds}, f)
        os.chmod(self.path + '.actuators.json', mode)

    def test_taken_in_and_removed(self):
        c = checkpoint.Checkpoint(self.path, 'b')
        c.domain('u1', 3, 'vm').record('pins', '0', [1])
        self.legacy({
            'mist_irq_affinity': {'36': '0-3'},
            'mist_sched_policy': {'7/8': {'policy': 0, 'priority': 0,
                                          'start': 99}},
            'mist_cpu_shares': {'u1': {'name': 'cpu_shares', 'value': 1024,
                                       'id': 3}},
            'mist_blkio_weight': {'u2': {'name': 'weight', 'value': 500,
                                         'id': 9}}})
        d = checkpoint.Checkpoint(self.path, 'b')
        self.assertTrue(d.load())
        self.assertTrue(d.adopt_legacy())
        self.assertFalse(os.path.exists(self.path + '.actuators.json'))
        e = checkpoint.Checkpoint(self.path, 'b')
        e.load()
        self.assertEqual('0-3', e.original(checkpoint.IRQ_AFFINITY, '36'))
        self.assertEqual(['7/8'], e.keys(checkpoint.SCHED_POLICY))
        self.assertEqual([1], e.domain('u1', 3).original('pins', '0'))
        self.assertEqual(1024, e.domain('u1', 3).original(
            checkpoint.CPU_SHARES, 'cpu_shares'))
        self.assertEqual(500, e.domain('u2', 9).original(
            checkpoint.BLKIO_WEIGHT, 'weight'))
        self.assertFalse(checkpoint.Checkpoint(self.path, 'b').adopt_legacy())

    def test_a_hostile_legacy_record_is_refused(self):
        self.legacy({'mist_rt_runtime': {'../../../etc': 0}})
        c = checkpoint.Checkpoint(self.path, 'b')
        exc = self.assertRaises(checkpoint.CheckpointError, c.adopt_legacy)
        self.assertIn('at $.host', str(exc))
        self.assertTrue(c.empty)
        self.assertFalse(os.path.exists(self.path + '.actuators.json'))
        self.legacy({'mist_irq_affinity': {'36': '0'}}, mode=0o666)
        self.assertRaises(checkpoint.CheckpointError, c.adopt_legacy)
