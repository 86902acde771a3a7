"""Kernel knobs: found writable by a no-op write, refused ones reported."""

import os

import testtools

from vsmtio_agent.linux import kernel_knobs
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures


class TestKnob(testtools.TestCase):

    def test_writable_knob(self):
        sysfs = self.useFixture(host_fixtures.FakeSysfs(halt_poll_ns=1234))
        knob = kernel_knobs.Knob(sysfs.root, kernel_knobs.HALT_POLL_NS)
        self.assertEqual((True, '%s is writable' % knob.path), knob.probe())
        self.assertEqual(1234, knob.read())
        knob.write(50000)
        self.assertEqual(50000, sysfs.read_knob())

    def test_read_only_knob_refuses_even_root(self):
        sysfs = self.useFixture(host_fixtures.FakeSysfs(knob_writable=False))
        knob = kernel_knobs.Knob(sysfs.root, kernel_knobs.HALT_POLL_NS)
        ok, why = knob.probe()
        self.assertFalse(ok)
        self.assertIn('Permission denied', why)
        exc = self.assertRaises(kernel_knobs.KnobError, knob.write, 1)
        self.assertTrue(exc.denied)

    def test_look_without_writing(self):
        # check, status and dry runs may not write, not even the same value.
        sysfs = self.useFixture(host_fixtures.FakeSysfs())
        knob = kernel_knobs.Knob(sysfs.root, kernel_knobs.HALT_POLL_NS)
        mtime = os.stat(knob.path).st_mtime_ns
        ok, why = knob.probe(write=False)
        self.assertTrue(ok, why)
        self.assertEqual(mtime, os.stat(knob.path).st_mtime_ns)
        ro = self.useFixture(host_fixtures.FakeSysfs(knob_writable=False))
        ok, why = kernel_knobs.Knob(
            ro.root, kernel_knobs.HALT_POLL_NS).probe(write=False)
        self.assertFalse(ok)
        self.assertIn('read-only (mode 444)', why)

    def test_missing_and_garbage(self):
        sysfs = self.useFixture(host_fixtures.FakeSysfs())
        self.assertEqual(
            (False, '%s/nope does not exist' % sysfs.root),
            kernel_knobs.Knob(sysfs.root, 'nope').probe())
        host_fixtures.write(sysfs.knob, 'Y\n')
        knob = kernel_knobs.Knob(sysfs.root, kernel_knobs.HALT_POLL_NS)
        self.assertIn('not an integer',
                      str(self.assertRaises(kernel_knobs.KnobError,
                                            knob.read)))
