#!/usr/bin/env python3
"""The image devstack uploads for tempest, built here instead of downloaded.

devstack's default image comes from the network; offline, ``IMAGE_URLS``
names a local file instead. This writes the one the project's real-guest
tests and tools/cloud boot (a Debian kernel and a busybox initramfs that
idles; ``vsmtio_agent/tests/functional/guest.py``) as the kernel/ramdisk
tarball devstack's ``upload_image`` registers as ``aki``/``ari``/``ami``:
``NAME-vmlinuz``, ``NAME-initrd`` and a 1 MiB ``NAME.img`` root disk.

    guest-image.py KERNEL OUT.tar.gz
"""

import io
import os
import sys
import tarfile
import tempfile

from vsmtio_agent.tests.functional import guest

# tools/cloud/image.py's guest with no work asked for: it only sleeps.
INIT = """#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
echo vsmtio-guest: up
while :; do $B sleep 3600; done
"""


def main(kernel, out):
    name = os.path.basename(out)[:-len('.tar.gz')]
    with tempfile.TemporaryDirectory() as tmp:
        ramdisk = os.path.join(tmp, 'initrd')
        guest.build_initramfs(ramdisk, init=INIT)
        with tarfile.open(out, 'w:gz') as tar:
            tar.add(kernel, '%s-vmlinuz' % name)
            tar.add(ramdisk, '%s-initrd' % name)
            root = tarfile.TarInfo('%s.img' % name)
            root.size = 1 << 20
            tar.addfile(root, io.BytesIO(bytes(root.size)))


if __name__ == '__main__':
    main(*sys.argv[1:])
