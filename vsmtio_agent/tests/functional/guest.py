"""A real libvirtd and a real qemu guest for the agent's functional tests.

Brought up from Debian's libvirt and qemu packages: a system
``libvirtd`` started by the test without systemd, with a ``qemu.conf``
that runs QEMU as root with file stdio (``QEMU_CONF``), a Debian kernel
and a busybox initramfs built here whose two vCPUs behave differently:
vCPU 0 spins, vCPU 1 sleeps and wakes every 2 ms. KVM cannot boot a
stock guest on these machines, so the domain is ``type='qemu'`` (TCG)
unless ``VSMTIO_GUEST_TYPE=kvm``.
Downloads are cached under ``/var/tmp/vsmtio-host``.
"""

import glob
import lzma
import os
import shutil
import stat
import subprocess
import time
import uuid
from xml.etree import ElementTree

import fixtures
import libvirt

from vsmtio_agent.drivers.libvirt import qemu_identity
from vsmtio_agent.linux import procfs
from vsmtio_agent.tests import system_user

CACHE = os.environ.get('VSMTIO_CACHE', '/var/tmp/vsmtio-host/guest')
PACKAGES = {
    '/usr/sbin/libvirtd': 'libvirt-daemon',
    '/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/'
    'libvirt_driver_qemu.so': 'libvirt-daemon-driver-qemu',
    '/usr/bin/virsh': 'libvirt-clients',
    '/usr/bin/qemu-system-x86_64': 'qemu-system-x86',
    '/bin/busybox': 'busybox-static',
}
QEMU_CONF = ('# written by vsmtio functional tests\n'
             'user = "root"\ngroup = "root"\nstdio_handler = "file"\n')
URI = 'qemu:///system'

libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


class Unavailable(Exception):
    """The host cannot run the real-guest tests; the text says why."""


def _run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True,
                          **kw).stdout


def ensure_packages():
    """Install what is missing from Debian, or raise Unavailable."""
    missing = sorted({p for f, p in PACKAGES.items() if not os.path.exists(f)})
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which('apt-get'):
        raise Unavailable('Debian packages %s are missing and cannot be '
                          'installed here (needs root and apt-get)'
                          % ' '.join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    try:
        _run('apt-get', '-o', 'DPkg::Lock::Timeout=300', 'install', '-y',
             '-q', '--no-install-recommends', *missing, env=env)
    except subprocess.CalledProcessError as exc:
        raise Unavailable('apt-get install %s failed: %s'
                          % (' '.join(missing), exc.stderr[-300:]))


def kernel_image():
    """A Debian kernel: the host's /boot one, or one downloaded once."""
    found = sorted(glob.glob('/boot/vmlinuz-*')) + sorted(
        glob.glob(os.path.join(CACHE, 'kernel/boot/vmlinuz-*')))
    if found:
        return found[-1]
    os.makedirs(CACHE, exist_ok=True)
    try:
        deps = _run('apt-cache', 'depends', '--important',
                    'linux-image-amd64')
        pkg = next(line.split(':', 1)[1].strip() for line in
                   deps.splitlines() if line.strip().startswith('Depends:')
                   and 'linux-image-' in line)
        _run('apt-get', 'download', pkg, cwd=CACHE)
        deb = sorted(glob.glob(os.path.join(CACHE, pkg + '_*.deb')))[-1]
        _run('dpkg-deb', '-x', deb, os.path.join(CACHE, 'kernel'))
        os.unlink(deb)
    except (subprocess.CalledProcessError, StopIteration, IndexError) as exc:
        raise Unavailable('no Debian kernel for the guest: %s' % exc)
    return sorted(glob.glob(os.path.join(CACHE, 'kernel/boot/vmlinuz-*')))[-1]


GUEST_INIT = """#!/bin/busybox sh
B=/bin/busybox
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
echo vsmtio-guest: up on $($B nproc) vCPUs
# vCPU 0 spins; vCPU 1 sleeps and wakes every 2 ms, with shell builtins
# only (a fork per wake-up would keep an emulated vCPU busy).
$B mkfifo /wake
$B taskset -c 0 $B sh -c 'while :; do :; done' &
$B taskset -c 1 $B sh -c 'exec 3<>/wake
  while :; do read -t 0.002 x <&3; done' &
echo vsmtio-guest: workloads started
while :; do $B sleep 3600; done
"""


def _cpio_entry(name, mode, data=b'', rdev=(0, 0), ino=[0]):
    ino[0] += 1
    name_b = name.encode() + b'\0'
    fields = (ino[0], mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1],
              len(name_b), 0)
    head = b'070701' + b''.join(b'%08X' % f for f in fields)
    out = head + name_b
    out += b'\0' * (-len(out) % 4)
    out += data + b'\0' * (-len(data) % 4)
    return out


def build_initramfs(path, init=GUEST_INIT, files=()):
    """A newc cpio archive: static busybox and ``init`` as /init.

    ``init`` is by default the two-vCPU workload above; ``files`` are
    more ``(name, bytes)`` at the root (kernel modules).
    """
    with open('/bin/busybox', 'rb') as f:
        busybox = f.read()
    parts = [_cpio_entry(d, stat.S_IFDIR | 0o755)
             for d in ('bin', 'dev', 'proc', 'sys')]
    parts.append(_cpio_entry('dev/console', stat.S_IFCHR | 0o600,
                             rdev=(5, 1)))
    parts.append(_cpio_entry('bin/busybox', stat.S_IFREG | 0o755, busybox))
    for name, data in files:
        parts.append(_cpio_entry(name, stat.S_IFREG | 0o644, data))
    parts.append(_cpio_entry('init', stat.S_IFREG | 0o755, init.encode()))
    parts.append(_cpio_entry('TRAILER!!!', 0))
    with open(path, 'wb') as f:
        f.write(b''.join(parts))


class LibvirtDaemon(fixtures.Fixture):
    """A system libvirtd this test starts (and may stop and restart)."""

    def _setUp(self):
        ensure_packages()
        self.dir = self.useFixture(fixtures.TempDir()).path
        if self._reachable():
            raise Unavailable('a libvirtd the test did not start is already '
                              'running; it is left alone')
        why = system_user.ensure()
        if why:
            raise Unavailable(why)
        conf = '/etc/libvirt/qemu.conf'
        old = None
        if os.path.exists(conf):
            with open(conf) as f:
                old = f.read()
        if old != QEMU_CONF:
            os.makedirs('/etc/libvirt', exist_ok=True)
            with open(conf, 'w') as f:
                f.write(QEMU_CONF)
            self.addCleanup(self._put_back, conf, old)
        self.proc = None
        self.start()
        self.addCleanup(self.stop)

    @staticmethod
    def _put_back(path, text):
        if text is None:
            os.unlink(path)
        else:
            with open(path, 'w') as f:
                f.write(text)

    @staticmethod
    def _reachable():
        try:
            libvirt.open(URI).close()
            return True
        except libvirt.libvirtError:
            return False

    def start(self):
        log = open(os.path.join(self.dir, 'libvirtd.log'), 'a')
        self.proc = subprocess.Popen(
            ['libvirtd', '--pid-file', os.path.join(self.dir, 'libvirtd.pid')],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 20
        while not self._reachable():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()     # running but unreachable: not left behind
                raise Unavailable('libvirtd did not start: %s' % self.log())
            time.sleep(0.1)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.proc = None

    def log(self):
        with open(os.path.join(self.dir, 'libvirtd.log')) as f:
            return f.read()[-2000:]


def libvirtd_for(test):
    """A :class:`LibvirtDaemon` for ``test``, or skip it saying why.

    The set-up every real-guest test shares: the Debian packages, a
    system libvirtd this test starts, stopped at its clean-up.
    """
    try:
        ensure_packages()
        daemon = LibvirtDaemon()
        daemon.setUp()
    except Unavailable as exc:
        test.skipTest(str(exc))
    test.addCleanup(daemon.cleanUp)
    return daemon


def kernel_module(kernel, relpath):
    """An uncompressed module of ``kernel`` (a vmlinuz path), as bytes.

    ``relpath`` below the version's ``kernel/`` directory, without its
    extension (``drivers/net/virtio_net``): Debian builds the virtio disk
    and network drivers as modules, so an initramfs carries them.
    """
    version = os.path.basename(kernel)[len('vmlinuz-'):]
    for root in (os.path.join(os.path.dirname(kernel), '..', 'lib',
                              'modules'), '/lib/modules'):
        for path in glob.glob(os.path.join(root, version, 'kernel',
                                           relpath + '.ko*')):
            if path.endswith('.xz'):
                with lzma.open(path) as f:
                    return f.read()
            with open(path, 'rb') as f:
                return f.read()
    raise Unavailable('no module %s for kernel %s' % (relpath, version))


# A direct-kernel-boot guest on a serial console; the MIST guests
# (mist_guests.py) fill in more vCPUs, a cpuset and a disk
DOMAIN_XML = """<domain type='%(type)s'>
  <name>%(name)s</name>
  <uuid>%(uuid)s</uuid>
  <memory unit='MiB'>192</memory>
  <vcpu placement='static'%(cpuset)s>%(vcpus)d</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>%(kernel)s</kernel>
    <initrd>%(initrd)s</initrd>
    <cmdline>console=ttyS0 panic=-1 quiet rdinit=/init</cmdline>
  </os>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model>
  </cpu>
  <on_poweroff>destroy</on_poweroff>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    %(disk)s
    <serial type='file'><source path='%(console)s'/><target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""


def qemu_of(dom):
    """``(pid, {index: tid})`` of ``dom``'s QEMU and its vCPU threads.

    Found as the agent finds it: from libvirt's state of the connection
    ``dom`` came from (:mod:`~vsmtio_agent.drivers.libvirt.qemu_identity`).
    """
    uid, why = qemu_identity.dac_uid(ElementTree.fromstring(dom.XMLDesc(0)))
    if uid is None:
        raise AssertionError('no QEMU user for %s: %s' % (dom.name(), why))
    found = qemu_identity.QemuFinder.for_uri(dom.connect().getURI()).find(
        dom.UUIDString(), dom.name(), dom.ID(), uid)
    if found.pid is None:
        raise AssertionError('no QEMU of %s: %s' % (dom.name(), found.why))
    return found.pid, procfs.vcpu_threads(found.pid)


def console_text(path):
    """What a guest wrote to its serial console so far."""
    try:
        with open(path, errors='replace') as f:
            return f.read()
    except FileNotFoundError:
        return ''


def wait_for_boot(console, timeout):
    """Wait until the guest's /init says its workloads started."""
    deadline = time.monotonic() + timeout
    while 'workloads started' not in console_text(console):
        if time.monotonic() > deadline:
            raise AssertionError('guest did not boot in %d s:\n%s'
                                 % (timeout, console_text(console)[-1500:]))
        time.sleep(0.5)


class Guest(fixtures.Fixture):
    """A transient guest, booted until its workloads run.

    By default two vCPUs running :data:`GUEST_INIT`'s workloads.
    """

    def __init__(self, boot_timeout=240, metadata='', init=GUEST_INIT,
                 vcpus=2, modules=(), devices='', disk_mib=0):
        """``metadata``: a ``<metadata>`` element for the domain XML.

        ``init`` is the guest's /init; ``modules`` the kernel modules it
        needs (:func:`kernel_module`'s ``relpath``; /init loads them from
        its root); ``devices`` more device XML, in which ``%(disk)s`` is
        the path of a sparse raw image of ``disk_mib`` MiB made for it.
        """
        super().__init__()
        self.boot_timeout = boot_timeout
        self.metadata = metadata
        self.init, self.vcpus = init, vcpus
        self.modules, self.devices = modules, devices
        self.disk_mib = disk_mib

    def _setUp(self):
        self.dir = self.useFixture(fixtures.TempDir()).path
        os.chmod(self.dir, 0o755)
        kernel = kernel_image()
        initrd = os.path.join(self.dir, 'initramfs.cpio')
        build_initramfs(initrd, self.init, [
            (os.path.basename(m) + '.ko', kernel_module(kernel, m))
            for m in self.modules])
        disk = os.path.join(self.dir, 'disk.raw')
        if self.disk_mib:
            with open(disk, 'wb') as f:
                f.truncate(self.disk_mib << 20)
        self.console = os.path.join(self.dir, 'console.log')
        self.uuid = str(uuid.uuid4())
        self.name = 'vsmtio-ft-' + self.uuid[:8]
        conn = libvirt.open(URI)
        self.addCleanup(conn.close)
        xml = DOMAIN_XML % {
            'type': os.environ.get('VSMTIO_GUEST_TYPE', 'qemu'),
            'name': self.name, 'uuid': self.uuid, 'kernel': kernel,
            'initrd': initrd, 'console': self.console, 'vcpus': self.vcpus,
            'cpuset': '', 'disk': self.devices % {'disk': disk}}
        self.dom = conn.createXML(xml.replace(
            '</uuid>', '</uuid>\n  ' + self.metadata, 1))
        self.addCleanup(self.destroy)
        wait_for_boot(self.console, self.boot_timeout)

    def console_text(self):
        return console_text(self.console)

    def lookup(self):
        """A fresh handle (the daemon may have been restarted)."""
        conn = libvirt.open(URI)
        self.addCleanup(conn.close)
        return conn.lookupByUUIDString(self.uuid)

    def destroy(self):
        try:
            self.lookup().destroy()
        except libvirt.libvirtError:
            pass
