"""``vsmtio-agent restore`` on a real qemu guest under a real libvirtd.

Whatever the agent changed is put back with the daemon not running:
after a SIGKILL (the daemon's own stop never ran) the guest's vCPU
threads have their original affinity and the domain its original cpu
shares again, as the kernel and libvirt report them; a second
``restore`` finds nothing and says so; while a daemon runs, ``restore``
refuses and changes nothing; after a clean stop there is nothing to do.
"""

import os
import signal
import subprocess
import sys

import fixtures

from vsmtio_agent.tests.functional import guest as guest_mod
from vsmtio_agent.tests.functional import test_real_guest as real


class TestRestoreCommand(real.RealGuestTestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.conf_file = os.path.join(self.dir, 'agent.conf')
        self.checkpoint = os.path.join(self.dir, 'state', 'ckpt.json')
        self.status = os.path.join(self.dir, 'status.json')
        with open(self.conf_file, 'w') as f:
            # the guard off: the daemon's pins are what this test follows
            # and CPUs 0 and 1 as siblings (RealGuestTestCase.siblings)
            f.write('[vsmtio_agent]\nhost_driver = libvirt\n'
                    'libvirt_uri = %s\nperiod = 0.3\nguard = false\n'
                    'sysfs_root = %s\n'
                    'checkpoint_path = %s\nstatus_path = %s\n'
                    'metrics_port = 0\n'
                    % (guest_mod.URI, self.siblings.root, self.checkpoint,
                       self.status))

    def agent(self, *args):
        log = open(os.path.join(self.dir, 'agent.log'), 'a')
        proc = subprocess.Popen(
            [sys.executable, '-m', 'vsmtio_agent.cmd.agent',
             '--config-file', self.conf_file] + list(args),
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.addCleanup(self._kill, proc)
        return proc

    @staticmethod
    def _kill(proc):
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    def restore(self):
        out = subprocess.run(
            [sys.executable, '-m', 'vsmtio_agent.cmd.agent',
             '--config-file', self.conf_file, 'restore'],
            capture_output=True, text=True, timeout=120)
        said = [line for line in out.stdout.splitlines()
                if not line[:4].isdigit()]      # not oslo.log's lines
        return out.returncode, '\n'.join(said)

    def diagnostics(self):
        try:
            with open(os.path.join(self.dir, 'agent.log')) as f:
                return 'agent log:\n%s' % f.read()[-3000:]
        except OSError:
            return ''

    def changed(self):
        return (self.affinity() != self.original_affinity
                and os.path.exists(self.checkpoint))

    def test_after_sigkill_and_with_the_daemon_stopped(self):
        # A bounded run is one process (no oslo.service launcher whose
        # worker would outlive its killed parent and restore by itself):
        # SIGKILL kills the process that changed the host.
        self.needs_a_change()
        proc = self.agent('run', '--periods', '100000')
        self.wait_for('the agent to pin', self.changed)
        # a running daemon holds the host: restore refuses, changes nothing
        pinned = self.affinity()
        rc, said = self.restore()
        self.assertEqual(1, rc, said)
        self.assertIn('another vsmtio agent holds', said)
        self.assertEqual(pinned, self.affinity())

        # SIGKILL: no stop ran; the changes and their record stay
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.assertNotEqual(self.original_affinity, self.affinity())
        self.assertTrue(os.path.exists(self.checkpoint))
        self.assertEqual(0o600, os.stat(self.checkpoint).st_mode & 0o777)

        # restore with the daemon stopped: every original back
        rc, said = self.restore()
        self.assertEqual(0, rc, said)
        self.assertIn('restored', said)
        self.assertNotIn('could not', said)
        self.assertEqual(self.original_affinity, self.affinity())
        self.assertEqual(self.original_shares, self.shares())
        self.assertFalse(os.path.exists(self.checkpoint))

        # idempotent: nothing left, and it says so
        rc, said = self.restore()
        self.assertEqual(0, rc, said)
        self.assertIn('nothing to restore', said)
        self.assertEqual(self.original_affinity, self.affinity())

        # a clean stop restores itself: restore (ExecStopPost) finds nothing
        proc = self.agent('run')
        self.wait_for('the agent to pin again', self.changed)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(0, proc.wait(60))
        rc, said = self.restore()
        self.assertEqual(0, rc, said)
        self.assertIn('nothing to restore', said)
        self.assertEqual(self.original_affinity, self.affinity())
        self.assertEqual(self.original_shares, self.shares())
