"""Trust domains on a real qemu guest managed by a real libvirtd.

The guest is created with the metadata nova 34 writes
(``<nova:owner><nova:project uuid=...>``); the libvirt driver reads its
project back from the running domain, reads libvirt's ``sched_core``
setting from the ``qemu.conf`` the test's libvirtd runs with, and asks
the kernel for each vCPU thread's core-scheduling cookie, which Debian's
kernels (built without ``CONFIG_SCHED_CORE``) refuse: that refusal is
what is asserted where it happens.
"""

import uuid

import fixtures
import testtools

from vsmtio_agent.drivers import libvirt as libvirt_driver
from vsmtio_agent.linux import sched_core
from vsmtio_agent.tests.functional import guest as guest_mod
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures
from vsmtio_agent.tests.unit.host import test_trust_libvirt


class TestTrustOnRealGuest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(level=20))
        self.libvirtd = guest_mod.libvirtd_for(self)
        self.project = uuid.uuid4().hex
        self.guest = self.useFixture(guest_mod.Guest(
            metadata=test_trust_libvirt.NOVA_METADATA % {
                'name': 'trust-guest', 'project': self.project}))

    def test_project_core_scheduling_and_cookies(self):
        conf = host_fixtures.make_conf(self, libvirt_uri=guest_mod.URI,
                                       guard=False)
        driver = libvirt_driver.LibvirtHostDriver(conf)
        self.addCleanup(driver.close)
        snap = driver.sample()
        tenancy = snap.tenancy[self.guest.uuid]
        self.assertEqual(self.project, tenancy.project)
        # the test's qemu.conf (guest.QEMU_CONF) sets no sched_core
        self.assertIs(False, snap.core_scheduling)
        mode = driver.describe()
        text = ' '.join(mode.capabilities + mode.missing)
        self.assertIn('trust domains: project; core scheduling: off '
                      '(/etc/libvirt/qemu.conf: sched_core not set', text)
        supported, why = sched_core.supported()
        if supported:
            # no sched_core: libvirt gave the vCPU threads no cookie
            self.assertEqual({0: 0, 1: 0}, dict(tenancy.cookies))
        else:
            self.assertIn('CONFIG_SCHED_CORE', why)
            self.assertEqual({}, dict(tenancy.cookies))
            self.assertIn('core-scheduling cookies: ' + why, text)
