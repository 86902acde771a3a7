"""What MIST reads on a libvirt host: each domain's reservation.

The reservation a running domain's flavor holds, read from the nova
metadata nova writes into the domain XML (``<nova:extraSpecs>``) and
capped at what placement admitted
(:func:`vsmtio_contract.io_reservation.honoured`). Its block I/O is the
sampler's, as every domain's
(:mod:`vsmtio_agent.drivers.libvirt.served`).
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


class Meter(object):
    """The admitted reservation of every running domain."""

    def __init__(self):
        self._reservations = {}     # uuid -> (domain id, Reservation)

    def reservation(self, entry):
        """The honoured :class:`~vsmtio_agent.model.Reservation` of a domain.

        ``entry`` is the driver's :class:`~vsmtio_agent.drivers.libvirt.
        domains.Domain`; its flavor is read once per incarnation.
        """
        dom, uuid, dom_id = entry.dom, entry.uuid, entry.id
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
            LOG.warning('Domain %s (%s): %s', entry.name, uuid, problem)
        res = model.Reservation(iops=iops, bytes_per_s=bps)
        self._reservations[uuid] = (dom_id, res)
        return res

    def reserved(self, uuid):
        """The reservation last read for domain ``uuid`` (none if unread)."""
        cached = self._reservations.get(uuid)
        return cached[1] if cached else model.Reservation()

    def retain(self, uuids):
        """Forget the reservations of domains not in ``uuids``."""
        for uuid in set(self._reservations) - set(uuids):
            del self._reservations[uuid]
