"""``vsmtio-agent restore``: the host back without the daemon (31.6).

Run as operators and the unit's ``ExecStopPost`` run it: a process of its
own, on a fake sysfs and procfs (the host's knobs and IRQs must not move
in a unit test), after an agent that was killed left a checkpoint. The
same on a real qemu guest, with SIGKILL, is in
``vsmtio_agent/tests/functional/test_restore.py``.
"""

import fcntl
import glob
import json
import os
import subprocess
import sys

import fixtures
import testtools

from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.actuators import irq
from vsmtio_agent.actuators import kernel_knob
from vsmtio_agent.tests.unit.actuators import test_mist_actuators as acts
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures

# libvirt's test:///default driver: its one running domain, as every
# process that opens the URI finds it.
TEST_DOMAIN = '6695eb01-f6a4-8304-79aa-97f2502e193f'

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))


class TestRestoreCommand(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.sysfs = self.useFixture(host_fixtures.FakeSysfs(cores=2))
        self.irqs = self.useFixture(acts.FakeIrqs())
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'state', 'ckpt.json')
        self.conf = os.path.join(self.dir, 'agent.conf')
        with open(self.conf, 'w') as f:
            f.write('[vsmtio_agent]\nhost_driver = libvirt\n'
                    'libvirt_uri = test:///default\n'
                    'sysfs_root = %s\nprocfs_root = %s\n'
                    'checkpoint_path = %s\n'
                    % (self.sysfs.root, self.irqs.root, self.path))

    def killed_agent(self):
        """What an agent killed mid-run leaves: changes and their record."""
        ckpt = checkpoint.Checkpoint(self.path)
        kernel_knob.KernelKnob(ckpt, self.sysfs.root).write(
            'module/kvm/parameters/halt_poll_ns', 50000)
        irq.IrqAffinity(ckpt, self.irqs.root).move(36, {0})
        self.assertEqual('0', self.irqs.affinity(36))
        self.assertEqual(50000, self.sysfs.read_knob())

    def restore(self):
        return subprocess.run(
            [sys.executable, '-m', 'vsmtio_agent.cmd.agent',
             '--config-file', self.conf, 'restore'],
            capture_output=True, text=True, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=ROOT))

    def test_restores_then_finds_nothing(self):
        self.killed_agent()
        first = self.restore()
        self.assertEqual(0, first.returncode, first.stderr)
        self.assertIn('restored 2 of 2 recorded change(s)', first.stdout)
        self.assertEqual('0-3', self.irqs.affinity(36))
        self.assertEqual(200000, self.sysfs.read_knob())
        self.assertFalse(os.path.exists(self.path))
        # idempotent: a second run does nothing, and says so
        second = self.restore()
        self.assertEqual(0, second.returncode, second.stderr)
        self.assertIn('nothing to restore', second.stdout)
        self.assertEqual('0-3', self.irqs.affinity(36))

    def test_refused_while_an_agent_holds_the_host(self):
        self.killed_agent()
        fd = os.open(self.path + '.lock', os.O_RDWR | os.O_CREAT, 0o600)
        self.addCleanup(os.close, fd)
        fcntl.flock(fd, fcntl.LOCK_EX)
        held = self.restore()
        self.assertEqual(1, held.returncode)
        self.assertIn('another vsmtio agent holds', held.stdout)
        self.assertEqual('0', self.irqs.affinity(36))
        self.assertTrue(os.path.exists(self.path))

    def test_an_untrusted_checkpoint_is_one_line_and_not_acted_on(self):
        self.killed_agent()
        os.chmod(self.path, 0o666)
        out = self.restore()
        self.assertEqual(1, out.returncode)
        # (log lines go to stdout too, as oslo.log's default)
        said = [line for line in out.stdout.splitlines()
                if line.startswith('error: ')]
        self.assertEqual(1, len(said), out.stdout)
        self.assertIn('writable by group or others', said[0])
        self.assertNotIn('Traceback', out.stderr)
        self.assertEqual('0', self.irqs.affinity(36))
        self.assertEqual(1, len(glob.glob(self.path + '.corrupt-*')))

    def edit_checkpoint(self, change):
        """Rewrite the checkpoint as a hand (or another program) might."""
        with open(self.path) as f:
            data = json.load(f)
        change(data)
        fd = os.open(self.path, os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, 'w') as f:
            json.dump(data, f)

    def test_out_of_range_records_are_dropped_and_the_rest_restored(self):
        """Values the schema's shapes admit but no host takes.

        Each is one error line naming it, and leaves the record; the
        others are restored, and no traceback stops the command (nor
        the daemon's start, which restores the same way).
        """
        self.killed_agent()
        # a thread whose policy a record without a start time names: it
        # must not be touched, whatever thread has that id now
        sleeper = subprocess.Popen(['sleep', '60'])
        self.addCleanup(sleeper.wait)
        self.addCleanup(sleeper.kill)
        thread = '%d/%d' % (sleeper.pid, sleeper.pid)

        def bad(data):
            data['knobs'].update({
                'module/kvm/parameters/halt_poll_ns_shrink': -1,
                'kernel/vsmtio/rass_io_cpus': '0-100000000000000000'})
            data.setdefault('host', {})['mist_sched_policy'] = {
                thread: {'policy': os.SCHED_IDLE, 'priority': 0,
                         'start': None},
                '1/1': {'policy': os.SCHED_RR, 'priority': 1000,
                        'start': 5},
                '99999999999999999999/1': {'policy': 0, 'priority': 0,
                                           'start': 5}}
            data['domains'] = {TEST_DOMAIN: {
                'id': 1, 'name': 'test',
                'pins': {'0': [10 ** 20], '1': [0],
                         str(10 ** 20): [0]},
                'cpu_shares': -5,
                'blkio_weight': {'weight': 10 ** 30}}}
        self.edit_checkpoint(bad)
        out = self.restore()
        self.assertEqual(1, out.returncode, out.stdout + out.stderr)
        self.assertNotIn('Traceback', out.stdout + out.stderr)
        self.assertNotIn('OverflowError', out.stdout + out.stderr)
        dropped = [line for line in out.stdout.splitlines()
                   if 'is not restored and is dropped' in line]
        for line in dropped:
            self.assertEqual(1, line.count('is not restored'), line)
        for said in ('halt_poll_ns_shrink', 'rass_io_cpus', thread,
                     'no start time', 'mist_sched_policy 1/1',
                     'real-time priority 1000', '99999999999999999999/1',
                     'pins 0 ', 'pins %d' % 10 ** 20, 'cpu_shares',
                     'cpu shares -5', 'blkio_weight'):
            self.assertEqual(1, len([d for d in dropped if said in d]),
                             (said, dropped))
        self.assertEqual(9, len(dropped), dropped)
        self.assertIn('9 recorded value(s) no host takes were dropped',
                      out.stdout)
        # the rest went back: the knob, the IRQ, the domain's good pin
        self.assertEqual('0-3', self.irqs.affinity(36))
        self.assertEqual(200000, self.sysfs.read_knob())
        self.assertIn('Restored domain test (%s)' % TEST_DOMAIN, out.stdout)
        self.assertEqual(os.SCHED_OTHER, os.sched_getscheduler(sleeper.pid))
        # nothing is left to try again
        again = self.restore()
        self.assertEqual(0, again.returncode, again.stdout)
        self.assertIn('nothing to restore', again.stdout)

    def test_a_key_with_a_trailing_newline_is_refused(self):
        """``$`` would let ``halt_poll_ns\\n`` through: another file."""
        self.killed_agent()

        def newline(data):
            data['knobs'] = {'module/kvm/parameters/halt_poll_ns\n': 5}
        self.edit_checkpoint(newline)
        out = self.restore()
        self.assertEqual(1, out.returncode)
        self.assertIn('does not match', out.stdout)
        self.assertFalse(os.path.exists(self.sysfs.knob + '\n'))
        self.assertEqual(50000, self.sysfs.read_knob())

    def test_a_state_directory_others_can_write_is_refused(self):
        self.killed_agent()
        os.chmod(os.path.dirname(self.path), 0o777)
        out = self.restore()
        self.assertEqual(1, out.returncode)
        said = [line for line in out.stdout.splitlines()
                if line.startswith('error: ')]
        self.assertEqual(1, len(said), out.stdout)
        self.assertIn('with mode 0777', said[0])
        self.assertEqual('0', self.irqs.affinity(36))
        self.assertEqual(50000, self.sysfs.read_knob())
