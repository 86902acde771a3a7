"""Busy guests keep their CPU with the agent running.

On this machine's two cores, no SMT siblings: two one-vCPU guests spin and
two light guests sleep and wake every 2 ms, all TCG (KVM cannot boot a
stock guest here), under a real libvirtd, with the agent daemon running
as an operator would run it: the product's defaults, and with the guard
off. The failure guarded against: the agent pins both spinners onto one
core while the other holds the light guests, which leaves each 45% of a
CPU, against 84-90% without the agent. Two checks, through the agent's
whole run after it has settled:

* placement: the spinners' vCPU threads are never both confined to one
  and the same CPU (read with ``sched_getaffinity`` twice a second);
* CPU: the spinners' shares of a CPU (each vCPU thread's ``schedstat``
  run time over a window, against the window's wall time) add up to at
  least twice ``MIN_SHARE``, or, on a machine other jobs load (it is
  shared), to at least ``BASELINE_FRACTION`` of what they got in the same
  run's window just before the agent started. Added up, not each: with
  load from other jobs, how the host's own scheduler shares the cores
  between the two moves from window to window (seen: 0.79 and 0.24
  without the agent, at a load average of 12).
"""

import json
import os
import subprocess
import sys
import time

import fixtures
import testtools

from vsmtio_agent.tests.functional import guest as guest_mod

SPIN_INIT = """#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
echo vsmtio-guest: workloads started
while :; do :; done
"""
LIGHT_INIT = """#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mkfifo /wake
echo vsmtio-guest: workloads started
exec 3<>/wake
while :; do read -t 0.002 x <&3; done
"""
# Seconds the agent runs before the window (its probes and placements
# settle), and the window itself.
SETTLE_S, WINDOW_S = 20, 20
# Each spinner's share of one CPU, on average, must reach this; the host
# alone gives 0.84-0.90 with the light guests, the stacking 0.45; or this
# fraction of their shares without the agent, where that is lower.
MIN_SHARE, BASELINE_FRACTION = 0.8, 0.85


def run_ns(tid):
    with open('/proc/%d/schedstat' % tid) as f:
        return int(f.read().split()[0])


class TestBusyGuestsKeepTheirCpu(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.libvirtd = guest_mod.libvirtd_for(self)
        guests = [guest_mod.Guest(init=init, vcpus=1, boot_timeout=400)
                  for init in (SPIN_INIT, SPIN_INIT, LIGHT_INIT, LIGHT_INIT)]
        for guest in guests:
            self.useFixture(guest)
        self.spinners = guests[:2]
        self.tids = []
        for guest in self.spinners:
            _pid, threads = guest_mod.qemu_of(guest.lookup())
            self.assertEqual([0], sorted(threads))
            self.tids.append(threads[0])
        self.dir = self.useFixture(fixtures.TempDir()).path

    def agent(self, *options):
        """The agent daemon with the defaults but for ``options``."""
        conf = os.path.join(self.dir, 'agent.conf')
        self.status = os.path.join(self.dir, 'status.json')
        with open(conf, 'w') as f:
            f.write('[vsmtio_agent]\nhost_driver = libvirt\n'
                    'libvirt_uri = %s\ncheckpoint_path = %s\n'
                    'status_path = %s\nmetrics_port = 0\n%s'
                    % (guest_mod.URI, os.path.join(self.dir, 'ckpt.json'),
                       self.status, ''.join(o + '\n' for o in options)))
        self.log = os.path.join(self.dir, 'agent.log')
        with open(self.log, 'a') as log:
            proc = subprocess.Popen(
                [sys.executable, '-m', 'vsmtio_agent.cmd.agent',
                 '--config-file', conf, 'run', '--periods', '100000'],
                stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(self._stop, proc)
        return proc

    @staticmethod
    def _stop(proc):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def shares(self):
        """Each spinner's share of one CPU over the window, and stacking.

        Stacking: how many of the readings of the spinners' affinity,
        twice a second, found both confined to one and the same CPU.
        """
        before = [run_ns(t) for t in self.tids]
        start = time.monotonic_ns()
        stacked = 0
        while time.monotonic_ns() - start < WINDOW_S * 1e9:
            cpus = [os.sched_getaffinity(t) for t in self.tids]
            stacked += len(cpus[0]) == 1 and cpus[0] == cpus[1]
            time.sleep(0.5)
        after = [run_ns(t) for t in self.tids]
        span = time.monotonic_ns() - start
        return [(b - a) / span for a, b in zip(before, after)], stacked

    def where(self):
        """What the spinners' threads may run on, and the agent's view."""
        said = ['spinner %d: CPUs %s' % (i, sorted(os.sched_getaffinity(t)))
                for i, t in enumerate(self.tids)]
        try:
            with open(self.status) as f:
                doc = json.load(f)
            said.append('status: %s' % json.dumps(doc.get('vcpus'))[:1500])
        except (OSError, ValueError) as exc:
            said.append('no status: %s' % exc)
        with open(self.log) as f:
            said.append('agent log:\n' + f.read()[-3000:])
        return '\n'.join(said)

    def check(self, *options):
        baseline, _stacked = self.shares()
        proc = self.agent(*options)
        time.sleep(SETTLE_S)
        self.assertIsNone(proc.poll(), self.where())
        self.assertTrue(os.path.exists(self.status), self.where())
        shares, stacked = self.shares()
        self.assertIsNone(proc.poll(), self.where())
        seen = ('spinners got %s of a CPU (%s), %s without the agent; '
                'stacked on one CPU in %d readings\n%s' % (
                    ', '.join('%.2f' % s for s in shares),
                    ', '.join(options) or 'defaults',
                    ', '.join('%.2f' % s for s in baseline), stacked,
                    self.where()))
        print(seen.splitlines()[0])
        self.assertEqual(0, stacked, seen)
        self.assertGreaterEqual(sum(shares), min(
            2 * MIN_SHARE, BASELINE_FRACTION * sum(baseline)), seen)

    def test_with_the_defaults(self):
        self.check()

    def test_with_the_guard_off(self):
        self.check('guard = false')
