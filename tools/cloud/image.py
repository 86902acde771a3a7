"""The cloud's guest images: a Debian kernel and a busybox initramfs.

The project's real-guest tests already boot these under TCG
(``vsmtio_agent/tests/functional/guest.py``); the cloud reuses that code
and registers them in glance the way nova boots a kernel and ramdisk: an
``aki`` kernel, an ``ari`` ramdisk and a tiny ``ami`` root disk whose
``kernel_id``/``ramdisk_id`` properties name them. The guest's work is
chosen on its kernel command line (image property ``os_command_line``):
``vsmtio.work=io`` wakes every 2 ms and sleeps (an I/O-like vCPU),
``vsmtio.work=cpu`` computes, ``idle`` only sleeps.
"""

import os

import layout
from vsmtio_agent.tests.functional import guest

INIT = """#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
work=idle
for arg in $($B cat /proc/cmdline); do
  case $arg in vsmtio.work=*) work=${arg#vsmtio.work=};; esac
done
echo vsmtio-guest: up, work=$work
case $work in
  cpu) while :; do :; done ;;
  io) $B mkfifo /wake; exec 3<>/wake
      while :; do read -t 0.002 x <&3; done ;;
esac
while :; do $B sleep 3600; done
"""

CMDLINE = 'console=ttyS0 panic=-1 quiet vsmtio.work=%s'
WORKS = ('idle', 'io', 'cpu')


def build():
    """Paths of the kernel, the initramfs and the 1 MiB root disk."""
    out = layout.path('data', 'images')
    os.makedirs(out, exist_ok=True)
    guest.ensure_packages()
    kernel = guest.kernel_image()
    ramdisk = os.path.join(out, 'vsmtio-initramfs.cpio')
    guest.build_initramfs(ramdisk, init=INIT)
    root = os.path.join(out, 'vsmtio-root.img')
    with open(root, 'wb') as f:
        f.truncate(1 << 20)
    return kernel, ramdisk, root


def upload(conn):
    """Register the images in glance; return ``{work: image id}``."""
    kernel, ramdisk, root = build()
    ids = {}
    aki = conn.image.create_image(
        name='vsmtio-kernel', filename=kernel, disk_format='aki',
        container_format='aki', visibility='public', wait=True)
    ari = conn.image.create_image(
        name='vsmtio-ramdisk', filename=ramdisk, disk_format='ari',
        container_format='ari', visibility='public', wait=True)
    for work in WORKS:
        img = conn.image.create_image(
            name='vsmtio-guest-%s' % work, filename=root,
            disk_format='ami', container_format='ami', visibility='public',
            wait=True, kernel_id=aki.id, ramdisk_id=ari.id,
            os_command_line=CMDLINE % work, hw_disk_bus='virtio')
        ids[work] = img.id
    return ids
