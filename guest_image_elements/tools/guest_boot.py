#!/usr/bin/env python3
"""Build the vsmtio_retention module and boot it in a real QEMU guest.

The guest half of context retention runs in a guest kernel, so the only
honest test is a real one: compile the module against Debian's kernel
headers, boot Debian's own kernel under QEMU (TCG: this works where KVM
cannot boot a guest) with a busybox initramfs that loads it, and read what
the guest reports from sysfs on its serial console.

Used by ``guest_image_elements/tests`` (stestr, tox env ``guest-module``)
and runnable by hand::

    python3 guest_image_elements/tools/guest_boot.py build
    python3 guest_image_elements/tools/guest_boot.py boot --cpu max

Downloads (Debian kernel packages) are cached outside the repository, in
``$VSMTIO_GUEST_CACHE`` (default ``/var/tmp/vsmtio-guest``); every run
builds into a fresh temporary directory, so runs are idempotent.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ELEMENT = os.path.join(os.path.dirname(HERE), 'vsmtio-retention')
MODULE_NAME = 'vsmtio_retention'
MODULE_SRC = glob.glob(os.path.join(
    ELEMENT, 'static', 'usr', 'src', 'vsmtio-retention-*'))[0]
CACHE = os.environ.get('VSMTIO_GUEST_CACHE', '/var/tmp/vsmtio-guest')
HEADERS_GLOB = '/usr/src/linux-headers-*-amd64'
BUSYBOX = '/bin/busybox'
MARK = 'VSMTIO '

# The guest's /init: everything it learns goes to the serial console as
# "VSMTIO key=value" lines that parse_report() reads back.
INIT_SCRIPT = r'''#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
M=/sys/module/vsmtio_retention
C=/sys/devices/system/cpu
say() { echo "VSMTIO $1"; }
stats() {
    for f in $M/stats/*; do say "$1_$(basename $f)=$(cat $f)"; done
}
say "begin=1"
say "kernel=$(uname -r)"
say "cpu_monitor=$(grep -c -w monitor /proc/cpuinfo)"
say "driver_before=$(cat $C/cpuidle/current_driver 2>/dev/null || echo absent)"
if insmod /vsmtio_retention.ko; then
    say "insmod=ok"
else
    say "insmod=failed"
fi
say "driver=$(cat $C/cpuidle/current_driver 2>/dev/null || echo absent)"
if [ -d $M/stats ]; then
    for p in $M/parameters/*; do say "param_$(basename $p)=$(cat $p)"; done
    stats t0
    sleep 2
    stats t1
    say "state1_name=$(cat $C/cpu0/cpuidle/state1/name)"
    say "state1_usage=$(cat $C/cpu0/cpuidle/state1/usage)"
    if echo 0 > $M/parameters/timeout_us 2>/dev/null; then
        say "bad_timeout=accepted"
    else
        say "bad_timeout=refused"
    fi
    echo 50 > $M/parameters/timeout_us
    say "timeout_after_set=$(cat $M/parameters/timeout_us)"
    echo N > $M/parameters/enabled
    sleep 1
    stats t2
    sleep 2
    stats t3
    echo Y > $M/parameters/enabled
    if rmmod vsmtio_retention; then say "rmmod=ok"; else say "rmmod=failed"; fi
    say "driver_after_rmmod=$(cat $C/cpuidle/current_driver)"
fi
dmesg | grep vsmtio_retention | while read -r l; do say "dmesg=$l"; done
say "end=1"
poweroff -f
'''


class GuestError(Exception):
    """A step of the build or the boot failed; the message says which."""


def run(cmd, **kw):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kw)
    if proc.returncode != 0:
        raise GuestError('%s failed (exit %d):\n%s' % (
            ' '.join(cmd), proc.returncode, proc.stdout[-4000:]))
    return proc.stdout


def headers():
    """{kernel release: headers dir} of the installed Debian amd64 headers."""
    found = {}
    for path in sorted(glob.glob(HEADERS_GLOB)):
        if os.path.isfile(os.path.join(path, 'Makefile')):
            found[os.path.basename(path)[len('linux-headers-'):]] = path
    return found


def headers_for(series):
    """The kernel release and headers dir of one series, e.g. '6.12'."""
    for kver, path in headers().items():
        if kver.startswith(series + '.'):
            return kver, path
    raise GuestError(
        'no linux-headers for %s under %s: run .ci/install-debian-packages'
        % (series, HEADERS_GLOB))


def build_module(kdir, outdir):
    """Compile the module against kdir in outdir; returns (ko, warnings).

    warnings are the compiler's warnings about our own sources: the build
    log of kbuild, minus lines about other files.
    """
    src = os.path.join(outdir, 'src')
    shutil.copytree(MODULE_SRC, src)
    log = run(['make', '-C', src, 'KDIR=' + kdir])
    ko = os.path.join(src, MODULE_NAME + '.ko')
    if not os.path.isfile(ko):
        raise GuestError('make succeeded but %s is missing' % ko)
    warnings = [line for line in log.splitlines()
                if 'warning:' in line and MODULE_NAME in line]
    return ko, warnings


def modinfo(ko, field):
    return run(['/sbin/modinfo', '-F', field, ko]).strip()


def dkms_build(kvers, outdir, module_src=MODULE_SRC,
               module_name=MODULE_NAME):
    """Build with DKMS itself, in private trees; {kver: built module path}.

    The same dkms.conf the image element installs, so this is what
    ``dkms autoinstall`` does in an image, minus touching /var/lib/dkms's
    tree or /lib/modules (dkms still makes its signing key there once).
    """
    if not shutil.which('dkms'):
        raise GuestError('dkms is not installed: run '
                         '.ci/install-debian-packages')
    tree = os.path.join(outdir, 'dkms')
    src = os.path.join(outdir, 'src')
    os.makedirs(tree)
    os.makedirs(src)
    name = os.path.basename(module_src)
    shutil.copytree(module_src, os.path.join(src, name))
    package, version = name.rsplit('-', 1)
    common = ['--dkmstree', tree, '--sourcetree', src,
              '-m', package, '-v', version]
    run(['dkms', 'add'] + common)
    built = {}
    for kver in kvers:
        run(['dkms', 'build'] + common + ['-k', kver])
        found = glob.glob(os.path.join(tree, package, version, kver, '*',
                                       'module', module_name + '.ko*'))
        if not found:
            raise GuestError('dkms build for %s left no module' % kver)
        built[kver] = found[0]
    return built


def fetch_kernel(kver):
    """vmlinuz of Debian's linux-image-<kver>, downloaded once to CACHE."""
    kdir = os.path.join(CACHE, 'kernels')
    vmlinuz = os.path.join(kdir, 'vmlinuz-' + kver)
    if os.path.isfile(vmlinuz):
        return vmlinuz
    booted = '/boot/vmlinuz-' + kver
    if os.path.isfile(booted):
        return booted
    os.makedirs(kdir, exist_ok=True)
    pkg = 'linux-image-' + kver
    debs = glob.glob(os.path.join(kdir, pkg + '_*.deb'))
    if not debs:
        run(['apt-get', 'download', pkg], cwd=kdir)
        debs = glob.glob(os.path.join(kdir, pkg + '_*.deb'))
    with tempfile.TemporaryDirectory(dir=kdir) as tmp:
        run(['dpkg-deb', '-x', debs[0], tmp])
        shutil.copy(os.path.join(tmp, 'boot', 'vmlinuz-' + kver),
                    vmlinuz + '.part')
    os.rename(vmlinuz + '.part', vmlinuz)
    return vmlinuz


def make_initramfs(ko, outdir):
    """A cpio (newc) initramfs: static busybox, /init, the module."""
    return initramfs(outdir, {MODULE_NAME + '.ko': ko},
                     {'init': INIT_SCRIPT})


def initramfs(outdir, files, scripts):
    """A cpio (newc) initramfs of a static busybox and what is given.

    ``files`` ``{name: path}`` are copied to the root, ``scripts``
    ``{name: text}`` written there executable (``init`` among them).
    """
    if not os.path.isfile(BUSYBOX):
        raise GuestError('%s missing: install busybox-static' % BUSYBOX)
    root = os.path.join(outdir, 'root')
    for d in ('bin', 'sbin', 'proc', 'sys', 'dev', 'usr/bin', 'usr/sbin'):
        os.makedirs(os.path.join(root, d))
    shutil.copy(BUSYBOX, os.path.join(root, 'bin', 'busybox'))
    for name, path in files.items():
        shutil.copy(path, os.path.join(root, name))
    for name, text in scripts.items():
        with open(os.path.join(root, name), 'w') as f:
            f.write(text)
        os.chmod(os.path.join(root, name), 0o755)
    image = os.path.join(outdir, 'initramfs.cpio')
    names = run(['find', '.'], cwd=root)
    with open(image, 'wb') as out:
        proc = subprocess.run(['cpio', '--quiet', '-o', '-H', 'newc'],
                              cwd=root, input=names.encode(), stdout=out,
                              stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise GuestError('cpio failed: %s' % proc.stderr.decode())
    return image


def boot(vmlinuz, initrd, cpu, smp=2, timeout=240):
    """Boot under QEMU TCG; returns (serial console text, seconds)."""
    cmd = ['qemu-system-x86_64', '-accel', 'tcg', '-cpu', cpu,
           '-smp', str(smp), '-m', '512', '-nodefaults', '-display', 'none',
           '-serial', 'stdio', '-no-reboot',
           '-kernel', vmlinuz, '-initrd', initrd,
           # (no crypto self-tests: under TCG with two vCPUs one of them
           # soft-locked Debian's 6.1.0-57 guest in cryptomgr_test for
           # over 200 s in one of two boots, and they test the kernel's
           # crypto, not what these guests are booted for)
           '-append', 'console=ttyS0 panic=-1 quiet rdinit=/init '
           'cryptomgr.notests']
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise GuestError('guest did not power off within %d s:\n%s' % (
            timeout, (e.stdout or b'').decode(errors='replace')[-4000:]))
    out = proc.stdout.decode(errors='replace').replace('\r', '')
    return out, time.monotonic() - start


def parse_report(console):
    """{key: value} of the guest's "VSMTIO key=value" lines (dmesg: list)."""
    report = {'dmesg': []}
    for line in console.splitlines():
        idx = line.find(MARK)
        if idx < 0:
            continue
        key, _, value = line[idx + len(MARK):].partition('=')
        if key == 'dmesg':
            report['dmesg'].append(value)
        else:
            report[key] = value.strip()
    if report.get('begin') != '1' or report.get('end') != '1':
        raise GuestError('incomplete guest report; console:\n%s'
                         % console[-4000:])
    return report


def stats(report, snap):
    """The numeric counters of one snapshot ("t0", "t1", ...) of a report."""
    pat = re.compile(r'^%s_([a-z_]+)$' % re.escape(snap))
    out = {}
    for key, value in report.items():
        m = pat.match(key)
        if m and value.isdigit():
            out[m.group(1)] = int(value)
    return out


def build_and_boot(series, cpu, smp=2):
    """Compile for one header series, boot that kernel; the parsed report."""
    kver, kdir = headers_for(series)
    with tempfile.TemporaryDirectory(prefix='vsmtio-guest-') as tmp:
        ko, _ = build_module(kdir, tmp)
        initrd = make_initramfs(ko, tmp)
        console, secs = boot(fetch_kernel(kver), initrd, cpu, smp=smp)
    report = parse_report(console)
    report['boot_seconds'] = '%.1f' % secs
    return report


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    sub.add_parser('build', help='compile against every installed header')
    b = sub.add_parser('boot', help='build, boot a guest, print its report')
    b.add_argument('--series', default='6.1')
    b.add_argument('--cpu', default='max')
    b.add_argument('--smp', type=int, default=2)
    args = ap.parse_args(argv)
    try:
        if args.cmd == 'build':
            if not headers():
                raise GuestError('no headers match %s' % HEADERS_GLOB)
            for kver, kdir in headers().items():
                with tempfile.TemporaryDirectory() as tmp:
                    start = time.monotonic()
                    ko, warnings = build_module(kdir, tmp)
                    print('%s: %s in %.1f s, vermagic %s, %d warnings' % (
                        kver, os.path.basename(ko),
                        time.monotonic() - start, modinfo(ko, 'vermagic'),
                        len(warnings)))
                    for w in warnings:
                        print('  ' + w)
        else:
            report = build_and_boot(args.series, args.cpu, args.smp)
            for key, value in report.items():
                if key == 'dmesg':
                    for line in value:
                        print('dmesg: ' + line)
                else:
                    print('%s=%s' % (key, value))
    except GuestError as e:
        print('error: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
