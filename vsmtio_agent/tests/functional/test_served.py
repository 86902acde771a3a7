"""Served I/O measured on a real qemu guest under a real libvirtd.

The guard judges a serving VM by the requests and packets it serves: the
libvirt driver's snapshots carry them for every running domain, from
libvirt's block and interface statistics. The guest here has a virtio
disk and a virtio NIC on a tap of its own, and its /init alternates, by
its own clock, a phase of I/O (4 KiB ``O_DIRECT`` reads of the disk, and
IPv6 pings of every node on the tap's link, the host's end among them,
each sent as soon as the last reply came) with a phase of nothing.
Link-local only: the test gives the host no address and no route. The
test reads the driver's snapshots over the middle of each phase: the
served rate is well above 0 while the guest does I/O, and near 0 while
it idles. The guest is TCG (KVM cannot boot a stock guest on these
machines), so its rates are an emulated guest's: the test asserts the
measure, not a figure.
"""

import subprocess
import time

import testtools

from vsmtio_agent.drivers import libvirt as libvirt_driver
from vsmtio_agent.tests.functional import guest as guest_mod
from vsmtio_agent.tests.unit.host import fixtures as host_fixtures

PHASE_S = 24

SERVING_INIT = """#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
for m in virtio_blk failover net_failover virtio_net; do $B insmod /$m.ko; done
$B ip link set eth0 up
$B sleep 3     # its link-local address is tentative until DAD is done
echo vsmtio-guest: disk $($B ls /dev/vda)
echo vsmtio-guest: nic $($B cat /sys/class/net/eth0/address)
echo vsmtio-guest: workloads started
while :; do
  echo vsmtio-guest: phase io
  $B ping -6 -q -A -w %(phase)d -I eth0 ff02::1 >/dev/null 2>&1 &
  end=$(( $($B date +%%s) + %(phase)d ))
  while [ $($B date +%%s) -lt $end ]; do
    $B dd if=/dev/vda of=/dev/null bs=4096 count=256 iflag=direct 2>/dev/null
  done
  wait
  echo vsmtio-guest: phase idle
  $B sleep %(phase)d
done
""" % {'phase': PHASE_S}

DEVICES = """<disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='%%(disk)s'/><target dev='vda' bus='virtio'/>
    </disk>
    <interface type='ethernet'>
      <target dev='%s'/><model type='virtio'/>
    </interface>"""


class TestServedIo(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.libvirtd = guest_mod.libvirtd_for(self)
        self.tap = 'vsft%d' % (time.monotonic_ns() % 100000000)
        self.guest = self.useFixture(guest_mod.Guest(
            init=SERVING_INIT, vcpus=1, disk_mib=16,
            modules=('drivers/block/virtio_blk', 'net/core/failover',
                     'drivers/net/net_failover', 'drivers/net/virtio_net'),
            devices=DEVICES % self.tap))
        # the host's end of the tap libvirt made: up, link-local only
        subprocess.run(['ip', 'link', 'set', self.tap, 'up'], check=True)

    def phase(self, name, count):
        """Wait for the guest's ``count``-th phase ``name`` to start."""
        marker = 'vsmtio-guest: phase ' + name
        deadline = time.monotonic() + 6 * PHASE_S
        while self.guest.console_text().count(marker) < count:
            if time.monotonic() > deadline:
                self.fail('no phase %s %d:\n%s' % (
                    name, count, self.guest.console_text()[-1500:]))
            time.sleep(0.2)

    def served_rate(self, driver, seconds):
        """(served, requests, packets) per second, from two snapshots."""
        first = driver.sample()
        time.sleep(seconds)
        last = driver.sample()
        span = (last.time_ns - first.time_ns) / 1e9
        a, b = (s.domains[self.guest.uuid] for s in (first, last))
        return tuple((getattr(b, f) - getattr(a, f)) / span
                     for f in ('served', 'io_requests', 'net_packets'))

    def test_a_guest_doing_io_is_serving_and_idle_is_not(self):
        conf = host_fixtures.make_conf(self, libvirt_uri=guest_mod.URI,
                                       guard=False)
        driver = libvirt_driver.LibvirtHostDriver(conf)
        self.addCleanup(driver.close)
        rates = {}
        for round_ in (2, 3):   # not the first: boot and ARP are behind
            self.phase('io', round_)
            time.sleep(3)
            rates['io', round_] = self.served_rate(driver, PHASE_S - 9)
            self.phase('idle', round_)
            time.sleep(3)
            rates['idle', round_] = self.served_rate(driver, PHASE_S - 9)
        seen = ' '.join('%s %d: %.1f/s (%.1f req, %.1f pkt)' % (k + v)
                        for k, v in sorted(rates.items()))
        print(seen)
        for round_ in (2, 3):
            served, reqs, packets = rates['io', round_]
            idle = rates['idle', round_][0]
            # both kinds of I/O are counted while it does them
            self.assertGreater(reqs, 0, seen)
            self.assertGreater(packets, 0, seen)
            # and its idle phase reads as (next to) nothing served
            self.assertLess(idle, 0.05 * served, seen)
            self.assertLess(idle, 2.0, seen)
