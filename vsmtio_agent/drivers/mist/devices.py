"""Which host interrupts a domain alone owns (MIST §IV, ``domain`` scope).

MIST separates the interrupts that serve a reserved VM's I/O. Moving an
IRQ moves it for every user of its device, so in ``domain`` scope the
agent moves only the IRQs of devices the protected domain alone owns,
found from its domain XML and sysfs:

* a PCI device assigned to it (``<hostdev mode='subsystem' type='pci'>``,
  ``<interface type='hostdev'>``: an NVMe controller, an SR-IOV VF), while
  it is bound to a VFIO driver (a VFIO device is opened by one QEMU
  only): its own MSI/MSI-X vectors (``msi_irqs`` of that PCI function);
* the port under a macvtap in ``passthrough`` mode
  (``<interface type='direct'>``, ``<source mode='passthrough'>``), while
  that macvtap is the port's only upper device (the kernel lets one
  passthrough macvtap take a port, and then the port carries that
  domain's traffic alone): its own MSI/MSI-X vectors.

A device is a block device when its PCI class is mass storage (``0x01``),
a network one when it is a network controller (``0x02``); any other is
left alone. A legacy INTx line (``irq``) is never moved: lines are shared
between devices.

Everything else a domain uses shares a device with the host or with
other domains, and its IRQs are never moved in this scope: a disk image
on the host's filesystem (the root disk's controller), a block device
source (its controller serves the host's other disks or namespaces), a
tap on a bridge or an Open vSwitch port (the bridge's ports, the uplink
and its queues carry every domain's and the host's traffic), a macvtap
in another mode (its port is shared), a network disk. A tap or vhost
queue has no interrupt of its own on the host: the guest is notified
through KVM (irqfd), and vhost's work runs in its worker thread (since
Linux 6.4 a thread of QEMU's process, which ``mist_rt_threads = all``
makes real-time with the others).
The operator who wants shared devices' interrupts separated names them,
host-wide, through ``mist_irq_scope = pattern``.
"""

import os
from xml.etree import ElementTree

PCI_STORAGE, PCI_NETWORK = 0x01, 0x02


def _pci_name(address):
    """``0000:03:00.1`` of a libvirt ``<address>``; None if incomplete."""
    try:
        return '%04x:%02x:%02x.%x' % tuple(
            int(address.get(attr), 0)
            for attr in ('domain', 'bus', 'slot', 'function'))
    except (TypeError, ValueError):
        return None


def owned_sources(xml_text):
    """``(PCI devices assigned, [(macvtap, port)] in passthrough mode)``.

    What a domain's XML says it alone holds; ``ValueError`` if the XML
    does not parse.
    """
    try:
        root = ElementTree.fromstring(xml_text)
    except ElementTree.ParseError as exc:
        raise ValueError('domain XML: %s' % exc)
    addresses = [node.find('source/address') for node in
                 root.findall("./devices/hostdev[@mode='subsystem']"
                              "[@type='pci']")]
    addresses += [node.find('source/address') for node in
                  root.findall("./devices/interface[@type='hostdev']")]
    pci = sorted({_pci_name(a) for a in addresses if a is not None
                  and a.get('type', 'pci') == 'pci'} - {None})
    macvtaps = []
    for iface in root.findall("./devices/interface[@type='direct']"):
        source, target = iface.find('source'), iface.find('target')
        if (source is not None and source.get('mode') == 'passthrough'
                and source.get('dev') and target is not None
                and target.get('dev')):
            macvtaps.append((target.get('dev'), source.get('dev')))
    return pci, macvtaps


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def own_vectors(node):
    """The MSI/MSI-X vectors of the PCI function at sysfs ``node``.

    Only its own: a legacy line, or a parent bridge's IRQ, is shared.
    """
    try:
        names = os.listdir(os.path.join(node, 'msi_irqs'))
    except OSError:
        return set()
    return {int(n) for n in names if n.isdigit()}


def pci_role(node):
    """``'block'``, ``'net'`` or None, from the function's PCI class."""
    try:
        base = int(_read(os.path.join(node, 'class')) or '', 16) >> 16
    except ValueError:
        return None
    return {PCI_STORAGE: 'block', PCI_NETWORK: 'net'}.get(base)


def _valid_name(name):
    return bool(name) and '/' not in name and name not in ('.', '..')


def assigned_irqs(sysfs_root, pci):
    """``(role, IRQs, problem)`` of a PCI device assigned to a domain."""
    node = os.path.join(sysfs_root, 'bus/pci/devices', pci)
    if not os.path.isdir(node):
        return None, set(), 'assigned device %s: not in sysfs' % pci
    link = os.path.join(node, 'driver')
    driver = (os.path.basename(os.path.realpath(link))
              if os.path.exists(link) else 'none')
    if 'vfio' not in driver:
        return None, set(), ('assigned device %s: bound to %s, not to a '
                             'VFIO driver: not the domain\'s alone'
                             % (pci, driver))
    role = pci_role(node)
    if role is None:
        return None, set(), ('assigned device %s: neither a storage nor a '
                             'network controller' % pci)
    return role, own_vectors(node), None


def passthrough_irqs(sysfs_root, macvtap, port):
    """``(IRQs, problem)`` of the port under a passthrough macvtap."""
    if not (_valid_name(macvtap) and _valid_name(port)):
        return set(), 'macvtap %s on %s: not a device name' % (macvtap, port)
    node = os.path.join(sysfs_root, 'class/net', port)
    try:
        uppers = {n[len('upper_'):] for n in os.listdir(node)
                  if n.startswith('upper_')}
    except OSError:
        return set(), 'macvtap %s: port %s not in sysfs' % (macvtap, port)
    if uppers != {macvtap}:
        return set(), ('macvtap %s: port %s has other upper devices (%s): '
                       'shared' % (macvtap, port,
                                   ', '.join(sorted(uppers - {macvtap}))
                                   or 'none of its own'))
    device = os.path.join(node, 'device')
    if not os.path.exists(device):
        return set(), 'macvtap %s: port %s has no hardware' % (macvtap,
                                                               port)
    return own_vectors(os.path.realpath(device)), None


def domain_irqs(sysfs_root, xml_text):
    """``(block IRQs, network IRQs, problems)`` a domain alone owns.

    ``problems`` say, as text, what the domain was assigned that is not
    its alone, or cannot be looked at: its IRQs are left alone.
    """
    pci, macvtaps = owned_sources(xml_text)
    block, net, problems = set(), set(), []
    for name in pci:
        role, irqs, problem = assigned_irqs(sysfs_root, name)
        if problem:
            problems.append(problem)
        elif role == 'block':
            block |= irqs
        else:
            net |= irqs
    for macvtap, port in macvtaps:
        irqs, problem = passthrough_irqs(sysfs_root, macvtap, port)
        if problem:
            problems.append(problem)
        net |= irqs
    return block, net, problems


def disk_sources(xml_text):
    """The host files and block devices behind a domain's disks.

    ``<source file=...>`` and ``<source dev=...>`` of its ``<disk>``
    elements (a network disk has neither: its I/O is not scheduled on the
    host's disks); ``ValueError`` if the XML does not parse.
    """
    try:
        root = ElementTree.fromstring(xml_text)
    except ElementTree.ParseError as exc:
        raise ValueError('domain XML: %s' % exc)
    out = []
    for source in root.findall('./devices/disk/source'):
        path = source.get('file') or source.get('dev')
        if path and path not in out:
            out.append(path)
    return out
