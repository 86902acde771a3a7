"""Real qemu guests for MIST: one that reserved I/O, one that interferes.

They run under an embedded libvirt (``qemu:///embed?root=DIR``): real
libvirt and QEMU in this process, with the domain cgroups, block
statistics and blkiotune of a system daemon but no daemon, so the tests do
not need (or disturb) a system libvirtd another job on the host may run.
The guests are TCG (KVM cannot boot a stock guest on these machines;
``VSMTIO_GUEST_TYPE=kvm`` where it can):

* the *reserved* guest has one vCPU and a virtio disk it reads with 4 KiB
  ``O_DIRECT`` reads in a loop (``virtio_blk`` is a module in Debian's
  kernel, so the initramfs carries it); its flavor metadata, as nova
  writes it, reserves IOPS;
* the *interfering* guest spins on every vCPU.

Shared by ``test_mist.py`` and ``vsmtio-bench mist``.
"""

import dataclasses
import os
import time
import uuid

import fixtures
import libvirt

from vsmtio_agent import agent as agent_mod
from vsmtio_agent.drivers import libvirt as libvirt_driver
from vsmtio_agent.drivers.libvirt import connection
from vsmtio_agent.policy import engine as engine_mod
from vsmtio_agent.tests.functional import guest as guest_mod
from vsmtio_agent.tests import system_user
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures

NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/1.1'

READER_INIT = """#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
$B insmod /virtio_blk.ko
echo vsmtio-guest: disk $($B ls /dev/vda)
( while :; do
    $B dd if=/dev/vda of=/dev/null bs=4096 count=4096 iflag=direct 2>/dev/null
  done ) &
echo vsmtio-guest: workloads started
while :; do $B sleep 3600; done
"""

SPINNER_INIT = """#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
for c in $($B seq 0 $(($($B nproc) - 1))); do
  $B taskset -c $c $B sh -c 'while :; do :; done' &
done
echo vsmtio-guest: workloads started
while :; do $B sleep 3600; done
"""

DISK_XML = """<disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='%s'/><target dev='vda' bus='virtio'/>
    </disk>"""

NOVA_INSTANCE = """<instance>
  <flavor name="reserved" id="1">
    <vcpus>1</vcpus>
    <extraSpecs>
      <extraSpec name="vsmtio:io_reservation_iops">%(iops)d</extraSpec>
      <extraSpec name="resources:CUSTOM_VSMTIO_IO_IOPS">%(iops)d</extraSpec>
    </extraSpecs>
  </flavor>
</instance>"""


class EmbeddedLibvirt(fixtures.Fixture):
    """A ``qemu:///embed`` root with the functional tests' qemu.conf."""

    def _setUp(self):
        guest_mod.ensure_packages()
        why = system_user.ensure()
        if why:
            raise guest_mod.Unavailable(why)
        self.root = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(self.root, 'etc'))
        with open(os.path.join(self.root, 'etc', 'qemu.conf'), 'w') as f:
            f.write(guest_mod.QEMU_CONF)
        self.uri = 'qemu:///embed?root=' + self.root
        connection.event_loop()   # embed needs it
        try:
            self.conn = libvirt.open(self.uri)
        except libvirt.libvirtError as exc:
            raise guest_mod.Unavailable('embedded libvirt: %s' % exc)
        self.addCleanup(self.conn.close)


class MistGuest(fixtures.Fixture):
    """A transient guest of one kind (``reader`` or ``spinner``)."""

    def __init__(self, conn, kind, vcpus=1, boot_timeout=300, cpuset=None):
        """``cpuset`` pins every thread of the guest to those host CPUs."""
        super().__init__()
        self.conn, self.kind, self.vcpus = conn, kind, vcpus
        self.boot_timeout = boot_timeout
        self.cpuset = cpuset

    def _setUp(self):
        self.dir = self.useFixture(fixtures.TempDir()).path
        os.chmod(self.dir, 0o755)
        kernel = guest_mod.kernel_image()
        initrd = os.path.join(self.dir, 'initramfs.cpio')
        disk = ''
        if self.kind == 'reader':
            guest_mod.build_initramfs(initrd, READER_INIT, [
                ('virtio_blk.ko', guest_mod.kernel_module(
                    kernel, 'drivers/block/virtio_blk'))])
            image = os.path.join(self.dir, 'disk.raw')
            with open(image, 'wb') as f:
                f.truncate(16 << 20)
            disk = DISK_XML % image
        else:
            guest_mod.build_initramfs(initrd, SPINNER_INIT)
        self.console = os.path.join(self.dir, 'console.log')
        self.uuid = str(uuid.uuid4())
        self.name = 'vsmtio-mist-%s-%s' % (self.kind, self.uuid[:8])
        self.dom = self.conn.createXML(guest_mod.DOMAIN_XML % {
            'type': os.environ.get('VSMTIO_GUEST_TYPE', 'qemu'),
            'name': self.name, 'uuid': self.uuid, 'kernel': kernel,
            'initrd': initrd, 'console': self.console,
            'vcpus': self.vcpus, 'disk': disk,
            'cpuset': (" cpuset='%s'" % self.cpuset if self.cpuset else '')})
        self.addCleanup(self.destroy)
        guest_mod.wait_for_boot(self.console, self.boot_timeout)

    def console_text(self):
        return guest_mod.console_text(self.console)

    def reserve(self, iops):
        """Write the nova flavor metadata reserving ``iops`` (and admitted)."""
        self.dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                             NOVA_INSTANCE % {'iops': iops}, 'nova', NOVA_NS,
                             libvirt.VIR_DOMAIN_AFFECT_LIVE)

    def block_reqs(self):
        stats = self.conn.getAllDomainStats(
            libvirt.VIR_DOMAIN_STATS_BLOCK, 0)
        for dom, st in stats:
            if dom.UUIDString() == self.uuid:
                return st['block.0.rd.reqs'] + st['block.0.wr.reqs']
        raise AssertionError('%s has no block statistics' % self.name)

    def iops(self, seconds):
        """Read requests per second measured from the host."""
        start, t0 = self.block_reqs(), time.monotonic()
        time.sleep(seconds)
        return (self.block_reqs() - start) / (time.monotonic() - t0)

    def destroy(self):
        try:
            self.dom.destroy()
        except libvirt.libvirtError:
            pass


class MistOnlyEngine(engine_mod.PolicyEngine):
    """The agent's engine with vSMT-IO's own mechanisms held off.

    The host here has no SMT siblings: RASS would pin each vCPU to its
    core's one CPU and LTCR would move halt polling, which would change
    the experiment. Only MIST's protection set goes through.
    """

    def step(self, stats, vms=None, *args, **kwargs):
        decision = super().step(stats, vms, *args, **kwargs)
        return dataclasses.replace(decision, placements={}, swaps=(),
                                   split=False, retention=False,
                                   borrow=False)


def make_conf(uri, tmpdir, **overrides):
    """A private agent configuration for the embedded host."""
    conf = host_fixtures.private_conf()
    conf([], project='vsmtio-mist')
    settings = {'libvirt_uri': uri, 'host_driver': 'libvirt',
                'period': 0.5, 'guard': False,
                'checkpoint_path': os.path.join(tmpdir, 'ckpt.json'),
                'status_path': os.path.join(tmpdir, 'status.json'),
                'mist_act_periods': 3, 'mist_clear_periods': 1000,
                'mist_max_clear_periods': 1000}
    settings.update(overrides)
    for key, value in settings.items():
        conf.set_override(key, value, group='vsmtio_agent')
    return conf


def make_agent(conf):
    driver = libvirt_driver.LibvirtHostDriver(conf)
    engine = MistOnlyEngine(driver.topology(),
                            engine_mod.Params.from_conf(conf))
    return agent_mod.Agent(conf, driver, engine)


def vcpu_threads(guest):
    """A :class:`MistGuest`'s QEMU pid and its ``{index: tid}``."""
    return guest_mod.qemu_of(guest.dom)
