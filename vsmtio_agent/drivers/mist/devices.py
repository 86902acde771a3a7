"""Which host interrupts serve a domain's disks and NICs (MIST §IV).

MIST separates the interrupts of the devices a reserved VM's I/O goes
through. The domain XML names what the VM uses on the host side; sysfs
names the hardware under it, and the hardware its IRQs:

* a disk whose source is a file lives on the block device of the file's
  filesystem (``st_dev``), a block source is that device (``st_rdev``);
  ``/sys/dev/block/<major>:<minor>`` leads to it, through the ``slaves``
  of a device-mapper or md device to the disks below, and up from a
  partition to its disk and the controller that raises its interrupts: the
  first device above with ``msi_irqs`` (MSI/MSI-X vectors) or a non-zero
  ``irq`` (a legacy line);
* a NIC's host side is its ``target dev`` (a tap or macvtap) and its
  ``source dev`` or ``source bridge``; the physical ports under them are
  found through the kernel's ``upper_*``/``lower_*`` links (a tap's
  bridge, a bridge's or bond's ports, a macvtap's link), stopping at a
  port with a ``device``: its controller's IRQs.

What cannot be identified is left alone: a disk on a filesystem with no
block device (NFS, tmpfs, overlay), a network disk (RBD, iSCSI: its I/O
goes through a NIC the VM's interfaces need not name), a port under Open
vSwitch's datapath when it is not linked to ``ovs-system``. The operator
who wants those moved names them through ``mist_irq_scope = pattern``.
"""

import os
import stat
from xml.etree import ElementTree

# a bridge of bonds of VLANs is a few levels deep; a loop in the links
# (which the kernel forbids) or a huge bridge is not followed further
_MAX_NETDEVS = 256
_MAX_DEPTH = 8


def host_sources(xml_text):
    """``(disk paths, network device names)`` a domain's XML names.

    ``ValueError`` if the XML does not parse.
    """
    try:
        root = ElementTree.fromstring(xml_text)
    except ElementTree.ParseError as exc:
        raise ValueError('domain XML: %s' % exc)
    disks, nets = [], []
    for disk in root.findall('./devices/disk'):
        source = disk.find('source')
        if source is None:
            continue
        path = source.get('file') or source.get('dev')
        if path:
            disks.append(path)
    for iface in root.findall('./devices/interface'):
        for tag, attr in (('target', 'dev'), ('source', 'dev'),
                          ('source', 'bridge')):
            node = iface.find(tag)
            if node is not None and node.get(attr):
                nets.append(node.get(attr))
    return disks, nets


def _read_int(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def device_irqs(sysfs_root, path):
    """The IRQs of the first device at or above sysfs ``path``."""
    top = os.path.realpath(os.path.join(sysfs_root, 'devices'))
    node = os.path.realpath(path)
    while node.startswith(top + os.sep):
        try:
            vectors = os.listdir(os.path.join(node, 'msi_irqs'))
        except OSError:
            vectors = None      # no MSI: a legacy line, or further up
        if vectors is not None:
            return {int(n) for n in vectors if n.isdigit()}
        irq = _read_int(os.path.join(node, 'irq'))
        if irq:
            return {irq}
        node = os.path.dirname(node)
    return set()


def _block_node_irqs(sysfs_root, node, depth):
    slaves = os.path.join(node, 'slaves')
    try:
        below = sorted(os.listdir(slaves))
    except OSError:
        below = []
    if below and depth < _MAX_DEPTH:
        out = set()
        for name in below:
            out |= _block_node_irqs(sysfs_root, os.path.realpath(
                os.path.join(slaves, name)), depth + 1)
        return out
    return device_irqs(sysfs_root, node)


def disk_irqs(sysfs_root, path):
    """The IRQs of the block device a disk source lives on; empty if none.

    ``OSError`` if the source cannot be looked at.
    """
    st = os.stat(path)
    dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    if os.major(dev) == 0:
        return set()        # no block device: tmpfs, NFS, overlay
    node = os.path.join(sysfs_root, 'dev/block',
                        '%d:%d' % (os.major(dev), os.minor(dev)))
    if not os.path.exists(node):
        return set()
    return _block_node_irqs(sysfs_root, os.path.realpath(node), 0)


def net_irqs(sysfs_root, names):
    """The IRQs of the physical ports under network devices ``names``."""
    base = os.path.join(sysfs_root, 'class/net')
    todo, seen, out = list(names), set(), set()
    while todo and len(seen) < _MAX_NETDEVS:
        name = todo.pop()
        if name in seen or '/' in name or name in ('.', '..'):
            continue
        seen.add(name)
        node = os.path.join(base, name)
        if os.path.exists(os.path.join(node, 'device')):
            # a port with hardware: the traffic leaves here
            out |= device_irqs(sysfs_root, os.path.join(node, 'device'))
            continue
        try:
            links = os.listdir(node)
        except OSError:
            continue
        todo.extend(link[len('upper_'):] for link in links
                    if link.startswith(('upper_', 'lower_')))
    return out


def domain_irqs(sysfs_root, xml_text):
    """``(block IRQs, network IRQs, problems)`` of one domain.

    ``problems`` are the sources that could not be looked at, as text.
    """
    disks, nets = host_sources(xml_text)
    block, problems = set(), []
    for path in disks:
        try:
            block |= disk_irqs(sysfs_root, path)
        except OSError as exc:
            problems.append('disk %s: %s' % (path, exc))
    return block, net_irqs(sysfs_root, nets), problems
