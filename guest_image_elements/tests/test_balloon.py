"""The CPU balloon, compiled and run in a real guest.

Real tools only: kbuild and DKMS against Debian's 6.1 and 6.12 headers,
and Debian's 6.1 kernel booted under QEMU TCG with a busybox initramfs
that loads the module, runs a CPU hog and an echo responder on its second
serial port, and reports what the module's sysfs says.  The host's cap
reaches the guest as the compute driver sends it, an SMBIOS type 11 OEM
string (QEMU ``-smbios type=11``).  These tests do not throttle the vCPU
with a cgroup (``balloon_boot.py bench`` does, for the latency figures),
so they pass on any host with QEMU; what they cannot show is said in
``doc/source/guest.rst`` (under TCG the guest sees no steal time).
"""

import importlib.util
import os
import sys

import testtools

import module_build

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name):
    """A tool script as a module, registered under its name.

    The tools are scripts that import each other from their directory;
    registered, a tool loaded after another finds it.
    """
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(_HERE), 'tools', name + '.py'))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


guest_boot = _load('guest_boot')
balloon_boot = _load('balloon_boot')

PARAMS = {'enabled', 'cap_pct', 'quantum_us', 'max_pct'}


class TestCompile(module_build.BuildTests, testtools.TestCase):
    """kbuild and DKMS, against both header series Debian 12 ships."""

    guest_boot = guest_boot
    params = PARAMS

    def build(self, kdir, out):
        return balloon_boot.build_module(kdir, out)

    def dkms(self, kvers, out):
        return guest_boot.dkms_build(kvers, out, balloon_boot.MODULE_SRC,
                                     balloon_boot.MODULE_NAME)


def _snap(report, name):
    """One snapshot's values: numbers as ints, words as they are."""
    prefix = name + '_'
    return {k[len(prefix):]: int(v) if v.isdigit() else v
            for k, v in report.items()
            if k.startswith(prefix) and isinstance(v, str)}


class TestBoot(testtools.TestCase):
    """Two vCPUs, a CPU hog on one, pings from the host throughout."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.guest = balloon_boot.Guest('6.1')

    @classmethod
    def tearDownClass(cls):
        cls.guest.close()
        super().tearDownClass()

    def _boot(self, oem_cap_pct):
        report, rtts = self.guest.run(
            check=True, hog=60, smp=2, oem_cap_pct=oem_cap_pct,
            cgroup=False, ping=True)
        self.assertEqual('ok', report['insmod'], report['dmesg'])
        self.assertEqual('2', report['threads'], 'one thread per vCPU')
        self.assertEqual('refused', report['bad_cap'])
        self.assertEqual('refused', report['bad_quantum'])
        self.assertTrue(any('cap_pct=101 is out of range' in line
                            for line in report['dmesg']), report['dmesg'])
        self.assertEqual('ok', report['rmmod'])
        self.assertEqual('0', report['threads_after'])
        # The responder answered all along (it would hang on a lost byte).
        self.assertGreater(len(rtts), 50)
        return report

    def _halted_share(self, a, b):
        wall = (float(b['uptime']) - float(a['uptime'])) * 1e9 * 2
        return (b['halted_ns'] - a['halted_ns']) / wall

    def test_on_under_the_host_s_cap(self):
        report = self._boot(50)
        self.assertIn('vsmtio:cpu_cap=50000/100000', report['oem'])
        self.assertTrue(any('host caps each vCPU at 50000 us per 100000 us'
                            in line for line in report['dmesg']))
        t0, t1 = _snap(report, 't0'), _snap(report, 't1')
        for t in (t0, t1):
            self.assertEqual(500, t['host_cap_permille'])
            self.assertEqual('host', t['source'])
            self.assertEqual(1, t['active'])
            # At least what the cap makes unavailable, at most max_pct.
            self.assertGreaterEqual(t['size_permille'], 500)
            self.assertLessEqual(t['size_permille'], 900)
            self.assertEqual(0, t['steal'], 'TCG gives no steal time')
        # Both vCPUs halted for a good share of the time...
        self.assertGreater(t1['quanta'], t0['quanta'])
        share = self._halted_share(t0, t1)
        self.assertGreater(share, 0.2, (t0, t1))
        self.assertLess(share, 0.95, (t0, t1))
        # ...and let the pings' interrupts end their halts.
        self.assertGreater(t1['io_yields'], t0['io_yields'])

        # cap_pct=100: the operator says uncapped; the balloon stops.
        t2, t3 = _snap(report, 't2'), _snap(report, 't3')
        self.assertEqual('uncapped', t2['source'])
        self.assertEqual(0, t2['size_permille'])
        self.assertEqual(0, t3['active'])
        self.assertEqual(t2['halted_ns'], t3['halted_ns'])
        self.assertEqual(t2['quanta'], t3['quanta'])
        # cap_pct=0 again: back to the host's cap.
        t4 = _snap(report, 't4')
        self.assertEqual(('host', 1), (t4['source'], t4['active']))
        self.assertGreater(t4['quanta'], t3['quanta'])

    def test_off_without_a_cap(self):
        report = self._boot(None)
        self.assertNotIn('vsmtio:cpu_cap', report.get('oem', ''))
        for name in ('t0', 't1', 't2', 't3', 't4'):
            t = _snap(report, name)
            self.assertEqual(0, t['size_permille'], name)
            self.assertEqual(0, t['active'], name)
            self.assertEqual(0, t['host_cap_permille'], name)
            self.assertEqual(0, t['quanta'], name)
            self.assertEqual(0, t['halted_ns'], name)
            self.assertIn(t['source'], ('off', 'uncapped'), name)
        self.assertEqual('off', _snap(report, 't1')['source'])
