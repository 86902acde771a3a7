"""The running domains the driver knows, and their vCPU threads.

A domain is tracked by its UUID and its libvirt id (a restarted domain is
a new incarnation, with new threads and none of the agent's changes).
What the driver last saw or set (pins, shares, RASS classes) is kept here
so that an unchanged plan costs no libvirt call.
"""

import time
from xml.etree import ElementTree

import libvirt
from oslo_log import log as logging

from vsmtio_agent.actuators import base as actuator_base
from vsmtio_agent.actuators import libvirt_errors
from vsmtio_agent.actuators import pinning
from vsmtio_agent.actuators import shares as shares_mod
from vsmtio_agent.drivers.libvirt import carried as carried_mod
from vsmtio_agent.drivers.libvirt import qemu_identity
from vsmtio_agent.linux import procfs
from vsmtio_agent.linux import sched_core
from vsmtio_agent import model

LOG = logging.getLogger(__name__)

# How long a domain whose QEMU process was not established is left alone
# before the next search (a domain of another host's URI, or starting up).
PID_RETRY_S = 30.0
# Seconds between two listings of the running domains, at most, on a
# connection with lifecycle events: an event lost (none has been seen
# lost) leaves a domain unseen this long, not for ever.
RELIST_S = 10.0
_NO_STATS = {}      # never modified
# why a domain's QEMU user is unknown before its XML is read
_XML_UNREAD = 'its live XML was not read'
# nova's libvirt metadata namespaces (1.0, 1.1, ...) begin with this
NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/'


def _nova_instance(xml):
    """``(namespace prefix, <nova:instance>)`` of a domain's XML, or None."""
    metadata = xml.find('metadata')
    if metadata is None:
        return None
    for instance in metadata:
        tag = instance.tag
        if tag.startswith('{' + NOVA_NS) and tag.endswith('}instance'):
            return tag[:tag.index('}') + 1], instance
    return None


def nova_project(xml):
    """The project UUID nova wrote in a domain's XML, or None.

    ``<metadata><nova:instance><nova:owner><nova:project uuid=...>``: nova
    writes it from the instance's owner, and a tenant cannot change a
    domain's XML, so it is what trust domains go by.
    """
    found = _nova_instance(xml)
    if found is None:
        return None
    ns, instance = found
    project = instance.find('%sowner/%sproject' % (ns, ns))
    if project is not None and project.get('uuid'):
        return project.get('uuid').strip() or None
    return None


def nova_name(xml):
    """The server's name nova wrote in a domain's XML, or None.

    ``<nova:instance><nova:name>``: what the operator knows the VM by (the
    domain's own name is nova's ``instance-0000002a``). Written when the
    domain is defined: a later rename through the API shows at the next
    hard reboot or migration, as in nova's own XML.
    """
    found = _nova_instance(xml)
    if found is None:
        return None
    ns, instance = found
    name = instance.findtext(ns + 'name')
    return (name.strip() or None) if name else None


def is_kvm(dom):
    """Whether ``dom`` runs on KVM (its XML's type), not TCG or another."""
    return ElementTree.fromstring(dom.XMLDesc(0)).get('type') == 'kvm'


class Domain:
    """What the driver knows about one running domain."""

    def __init__(self, dom, uuid, dom_id, name):
        self.dom = dom
        self.uuid = uuid
        self.id = dom_id
        self.name = name
        self.kvm = False
        self.pid = None
        self.pid_checked = 0.0
        # the uid libvirt runs its QEMU as (its DAC label), or why unknown
        self.qemu_uid = None
        self.qemu_uid_why = _XML_UNREAD
        # why its QEMU was not established (logged once), None: it was
        self.qemu_why = None
        self.qemu_by_name = False   # its executable judged by exec name
        self.tids = {}
        # vCPU count of a driver without vCPU stats (virDomainGetVcpus)
        self.nvcpus = None
        self.pins = {}       # vCPU index -> frozenset of host CPUs, as now
        self.shares = None   # (parameter, value) as now, or None
        self.rass = {}       # vCPU index -> the kernel RASS class, as now
        self.project = None  # its nova project (nova's metadata), if any
        self.server = None   # its nova server name (nova's metadata)
        self.cookies = {}    # vCPU index -> core-scheduling cookie, read
        # originals it arrived carrying, until the driver takes them
        self.carried = None
        self._tenancy = None

    @property
    def tenancy(self):
        """Whose it is: its :class:`~vsmtio_agent.model.Tenancy`."""
        if self._tenancy is None:
            self._tenancy = model.Tenancy(project=self.project,
                                          cookies=dict(self.cookies))
        return self._tenancy

    @property
    def label(self):
        """How the log and ``status`` name it: the server's name first."""
        if self.server:
            return '%s (%s)' % (self.server, self.name)
        return self.name

    def record(self, checkpoint):
        """This incarnation's record of originals in ``checkpoint``.

        What travels with the domain is also carried in its metadata
        (:mod:`~vsmtio_agent.drivers.libvirt.carried`).
        """
        return carried_mod.Record(
            checkpoint.domain(self.uuid, self.id, self.name), self.dom)

    def thread_of(self, index):
        """(QEMU pid, tid) of vCPU ``index``, or None if not found."""
        tid = self.tids.get(index)
        return None if tid is None else (self.pid, tid)


class Domains:
    """The tracked domains of one libvirt URI, by UUID."""

    def __init__(self, uri, procfs_root, sysfs_root='/sys'):
        self.uri = uri
        self.procfs_root = procfs_root
        # where the domains' QEMU processes are named: libvirt's own state
        self.qemu = qemu_identity.QemuFinder.for_uri(uri, sysfs_root,
                                                     procfs_root)
        self.entries = {}
        self._listed_on = None  # the connection they were listed on
        self._listed = (None, 0.0)  # its changes count then, and when
        # whether the kernel answers PR_SCHED_CORE_GET (None: not asked)
        self.cookies_supported = None
        self.cookies_why = 'not asked yet'
        self.cookie_failure = None  # why a vCPU's cookie was not read

    def get(self, uuid):
        return self.entries.get(uuid)

    def values(self):
        return self.entries.values()

    def pop(self, uuid):
        return self.entries.pop(uuid, None)

    def clear(self):
        self.entries.clear()

    def running(self, connection, conn, groups):
        """``[(entry, stats)]`` of the running domains, with ``groups``.

        ``connection`` is the :class:`connection.Connection` whose open
        ``conn`` this asks.

        Where no stats group beyond the state is wanted (the served
        statistics off: ``served_stats``), the tracked
        entries are the running domains, with no stats, while nothing
        says they changed: no lifecycle event since they were listed
        (:attr:`connection.Connection.changes`; at most ``RELIST_S``
        apart, in case one was lost), or, on a connection without events,
        the same ids listed (``listDomainsID``: no domain object, nothing
        read per domain; a domain that restarts has a new id). Only a
        domain that started, stopped or restarted costs a
        ``getAllDomainStats`` call, with its domain objects and look-ups
        per domain. Through a real libvirtd any call costs libvirtd and
        the agent alike, ``listDomainsID`` as much as the call it replaced
        (``tox -e bench-libvirtd``): the events save both, every period
        where nothing changed. A new connection lists them afresh.
        """
        changes = connection.changes   # before listing: no race
        if groups == libvirt.VIR_DOMAIN_STATS_STATE:
            if (conn is self._listed_on and connection.events
                    and changes == self._listed[0]
                    and time.monotonic() - self._listed[1] < RELIST_S):
                return [(entry, _NO_STATS) for entry in self.entries.values()]
            ids = connection.call(conn.listDomainsID, 'listDomainsID')
            if conn is self._listed_on and set(ids) == {
                    entry.id for entry in self.entries.values()}:
                self._listed = (changes, time.monotonic())
                return [(entry, _NO_STATS) for entry in self.entries.values()]
        records = connection.call(
            conn.getAllDomainStats, 'getAllDomainStats', groups,
            libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE)
        running = []
        for dom, stats in records:
            try:
                running.append((self.track(dom), stats))
            except libvirt.libvirtError as exc:
                if exc.get_error_code() not in libvirt_errors.GONE:
                    LOG.warning('Skipping a domain this period: %s',
                                exc.get_error_message())
        self._listed_on = conn
        self._listed = (changes, time.monotonic())
        return running

    def track(self, dom):
        """The entry of ``dom``; a new one for a new incarnation."""
        uuid, dom_id = dom.UUIDString(), dom.ID()
        entry = self.entries.get(uuid)
        if entry is not None and entry.id == dom_id:
            entry.dom = dom
            return entry
        entry = Domain(dom, uuid, dom_id, dom.name())
        xml = ElementTree.fromstring(dom.XMLDesc(0))
        entry.kvm = xml.get('type') == 'kvm'
        entry.qemu_uid, entry.qemu_uid_why = qemu_identity.dac_uid(xml)
        entry.project = nova_project(xml)
        entry.server = nova_name(xml)
        entry.carried = carried_mod.read(xml, entry.label)
        entry.pins = {i: pinning.cpus_of(m)
                      for i, m in enumerate(dom.vcpuPinInfo(0))}
        try:
            entry.shares = shares_mod.read_shares(dom)
        except actuator_base.ActuatorError:
            entry.shares = None
        LOG.info('Domain %s (%s) is running: %d vCPU(s)%s', entry.label,
                 uuid, len(entry.pins),
                 '' if entry.kvm else ', not type kvm')
        self.entries[uuid] = entry
        return entry

    def threads_of(self, entry, nvcpus):
        """vCPU index -> tid, re-discovered when threads or QEMU changed.

        Only threads of the process libvirt's own state names as the
        domain's QEMU (:meth:`identify`); none where it names none.
        """
        if entry.pid is None or len(entry.tids) < nvcpus:
            now = time.monotonic()
            if entry.pid is None and now - entry.pid_checked < \
                    PID_RETRY_S and entry.pid_checked:
                return {}
            entry.pid_checked = now
            entry.pid = self.identify(entry)
            entry.tids = (procfs.vcpu_threads(entry.pid, self.procfs_root)
                          if entry.pid else {})
            self._read_cookies(entry)
        return entry.tids

    def identify(self, entry, quiet=False):
        """The pid of ``entry``'s QEMU, or None, said once per incarnation.

        ``quiet``: log nothing (``vsmtio-agent check`` says it instead).

        A domain whose QEMU libvirt's state does not establish is left
        alone: no thread of it is read or written (no real-time priority,
        RASS class, core-scheduling cookie or thread counter); what goes
        through libvirt (its pinning, cpu shares, statistics) still does,
        libvirt addressing its own QEMU.
        """
        if entry.qemu_uid_why is _XML_UNREAD:
            # an entry made without its XML (a restore after a crash)
            try:
                xml = ElementTree.fromstring(entry.dom.XMLDesc(0))
                entry.qemu_uid, entry.qemu_uid_why = \
                    qemu_identity.dac_uid(xml)
            except (libvirt.libvirtError, ElementTree.ParseError) as exc:
                entry.qemu_uid_why = 'its live XML: %s' % exc
        if entry.qemu_uid is None:
            found = qemu_identity.Found(None, entry.qemu_uid_why)
        else:
            found = self.qemu.find(entry.uuid, entry.name, entry.id,
                                   entry.qemu_uid)
        if found.pid is None:
            if entry.qemu_why is None and not quiet:
                LOG.warning('Domain %s (%s): its QEMU process is not '
                            'established by libvirt\'s state (%s); its '
                            'threads are left alone (no real-time '
                            'priority, RASS class or thread counters)',
                            entry.label, entry.uuid, found.why)
            entry.qemu_why = found.why
            return None
        if not quiet and (entry.qemu_why is not None
                          or entry.pid != found.pid):
            LOG.info('Domain %s (%s): QEMU is pid %d, %s', entry.label,
                     entry.uuid, found.pid, found.why)
        entry.qemu_why = None
        entry.qemu_by_name = found.by_name
        return found.pid

    def _read_cookies(self, entry):
        """Each vCPU thread's core-scheduling cookie, where there are any.

        Read when the threads are found: libvirt sets a VM's cookie
        before its vCPUs run. A kernel without core scheduling is asked
        once.
        """
        if self.cookies_supported is None:
            self.cookies_supported, self.cookies_why = sched_core.supported()
        cookies = {}
        if self.cookies_supported:
            for index, tid in entry.tids.items():
                found, why = sched_core.cookie(tid)
                if found is not None:
                    cookies[index] = found
                else:
                    # EPERM under the hardened unit, for QEMU's threads
                    # of another user (the kernel asks CAP_SYS_PTRACE)
                    self.cookie_failure = why
        if cookies != entry.cookies:
            entry.cookies = cookies
            entry._tenancy = None

    def vcpu_threads(self):
        """{VcpuRef: tid} of the vCPU threads found."""
        return {model.VcpuRef(e.uuid, i): tid
                for e in self.entries.values() for i, tid in e.tids.items()}

    def vcpu_pins(self):
        """{VcpuRef: frozenset of CPUs} as last seen or set."""
        return {model.VcpuRef(e.uuid, i): cpus
                for e in self.entries.values()
                for i, cpus in e.pins.items()}
