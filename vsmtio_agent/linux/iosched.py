"""The I/O scheduler of the block devices under a set of files.

A cgroup's block I/O weight (libvirt's ``blkiotune`` weight: cgroup v1
``blkio.bfq.weight``/``blkio.weight``, v2 ``io.bfq.weight``/``io.weight``)
is honoured only by a proportional I/O scheduler: BFQ (CFQ before Linux
5.0). ``none``, ``mq-deadline`` and ``kyber`` have no weights, and a host
where no BFQ is loaded has no weight file for libvirt to read at all.
When libvirt refuses the weight, the scheduler of the disks under a
domain's images names the cause for the operator.

The root is injectable: tests present a host's block devices as a fake
sysfs tree.
"""

import os
import re
import stat

PROPORTIONAL = ('bfq', 'cfq')
_CHOSEN = re.compile(r'\[([^\]]+)\]')


def current(node):
    """The scheduler in use by the request queue at sysfs ``node``.

    The bracketed name of ``queue/scheduler``; None where the device has
    no request queue of its own or the file cannot be read.
    """
    try:
        with open(os.path.join(node, 'queue', 'scheduler')) as f:
            text = f.read()
    except OSError:
        return None
    found = _CHOSEN.search(text)
    if found:
        return found.group(1)
    text = text.strip()
    return text if text and ' ' not in text else None


def _disks(node, seen):
    """The sysfs nodes of the whole disks under the block device ``node``.

    A stacked device (device-mapper, md) has ``slaves``: its I/O is
    scheduled on theirs. A partition has no queue of its own: its disk's.
    """
    node = os.path.realpath(node)
    if node in seen:
        return []
    seen.add(node)
    try:
        slaves = sorted(os.listdir(os.path.join(node, 'slaves')))
    except OSError:
        slaves = []
    if slaves:
        out = []
        for name in slaves:
            out += _disks(os.path.join(node, 'slaves', name), seen)
        return out
    if not os.path.isdir(os.path.join(node, 'queue')):
        parent = os.path.dirname(node)
        if os.path.isdir(os.path.join(parent, 'queue')):
            return [parent]
    return [node]


def _device_of(path):
    """``(major, minor)`` of the block device holding (or being) ``path``."""
    st = os.stat(path)
    number = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    return os.major(number), os.minor(number)


def schedulers(sysfs_root, paths):
    """``{disk name: scheduler}`` of the disks under ``paths``.

    ``paths`` are files (a disk image: the device of its filesystem) or
    block devices (the device itself). A path that cannot be looked at,
    or a device sysfs does not show (a network filesystem's), is left out:
    what is returned is what could be established.
    """
    out = {}
    seen = set()
    for path in paths:
        try:
            major, minor = _device_of(path)
        except OSError:
            continue
        node = os.path.join(sysfs_root, 'dev', 'block',
                            '%d:%d' % (major, minor))
        if not os.path.exists(node):
            continue
        for disk in _disks(node, seen):
            name = current(disk)
            if name is not None:
                out[os.path.basename(disk)] = name
    return out
