"""What MIST measures on a libvirt host: block I/O and reservations.

Each running domain's cumulative block I/O (libvirt block statistics,
summed over its disks) and the reservation its flavor holds, read from the
nova metadata nova writes into the domain XML (``<nova:extraSpecs>``) and
capped at what placement admitted
(:func:`vsmtio_contract.io_reservation.honoured`).
"""

from xml.etree import ElementTree

import libvirt
from oslo_log import log as logging

from vsmtio_agent import model
from vsmtio_contract import io_reservation

LOG = logging.getLogger(__name__)

NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/1.1'
_SPEC = ('./{%(ns)s}instance/{%(ns)s}flavor/{%(ns)s}extraSpecs/'
         '{%(ns)s}extraSpec' % {'ns': NOVA_NS})


def flavor_extra_specs(xml_text):
    """The flavor extra specs nova wrote into a domain's metadata."""
    root = ElementTree.fromstring(xml_text)
    meta = root.find('metadata')
    if meta is None:
        return {}
    return {e.get('name'): (e.text or '') for e in meta.findall(_SPEC)
            if e.get('name')}


def block_totals(stats):
    """(requests, bytes, busy ns) summed over a domain's disks.

    Busy ns is the time its requests spent in flight (libvirt's
    ``rd.times``, ``wr.times`` and ``fl.times``), the evidence of demand
    MIST's detector needs; ``None`` where a disk lacks it. Everything is
    ``None`` where the domain has no block statistics.
    """
    count = stats.get('block.count')
    if count is None:
        return None, None, None
    reqs = nbytes = busy = 0
    for i in range(count):
        p = 'block.%d.' % i
        try:
            reqs += stats[p + 'rd.reqs'] + stats[p + 'wr.reqs']
            nbytes += stats[p + 'rd.bytes'] + stats[p + 'wr.bytes']
        except KeyError:
            return None, None, None
        if busy is not None:
            try:
                busy += (stats[p + 'rd.times'] + stats[p + 'wr.times']
                         + stats.get(p + 'fl.times', 0))
            except KeyError:
                busy = None
    return reqs, nbytes, busy


class Meter(object):
    """Block I/O and the admitted reservation of every running domain."""

    def __init__(self):
        self._reservations = {}     # uuid -> (domain id, Reservation)

    def reservation(self, dom):
        """The domain's honoured :class:`~vsmtio_agent.model.Reservation`."""
        uuid, dom_id = dom.UUIDString(), dom.ID()
        cached = self._reservations.get(uuid)
        if cached is not None and cached[0] == dom_id:
            return cached[1]
        try:
            specs = flavor_extra_specs(dom.XMLDesc(0))
        except (libvirt.libvirtError, ElementTree.ParseError) as exc:
            LOG.warning('Cannot read the flavor of %s: %s', uuid, exc)
            specs = {}
        iops, bps, problems = io_reservation.honoured(specs)
        for problem in problems:
            LOG.warning('Domain %s (%s): %s', dom.name(), uuid, problem)
        res = model.Reservation(iops=iops, bytes_per_s=bps)
        self._reservations[uuid] = (dom_id, res)
        return res

    def reserved(self, uuid):
        """The reservation last read for domain ``uuid`` (none if unread)."""
        cached = self._reservations.get(uuid)
        return cached[1] if cached else model.Reservation()

    def domain_counters(self, conn):
        """``{uuid: DomainCounters}`` of every running domain."""
        try:
            records = conn.getAllDomainStats(
                libvirt.VIR_DOMAIN_STATS_BLOCK,
                libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE)
        except libvirt.libvirtError as exc:
            LOG.warning('No block statistics this period: %s',
                        exc.get_error_message())
            return {}
        out = {}
        for dom, stats in records:
            try:
                res = self.reservation(dom)
                uuid = dom.UUIDString()
            except libvirt.libvirtError:
                continue
            reqs, nbytes, busy = block_totals(stats)
            out[uuid] = model.DomainCounters(io_requests=reqs,
                                             io_bytes=nbytes,
                                             reservation=res,
                                             io_busy_ns=busy)
        live = set(out)
        for uuid in set(self._reservations) - live:
            del self._reservations[uuid]
        return out
