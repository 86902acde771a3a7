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
