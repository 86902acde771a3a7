"""The originals that travel with a domain, in its live metadata.

A live migration sends the domain's live definition, with the vCPU pins,
cpu shares and block I/O weight the agent set live, and nova makes it the
destination's definition, live and persistent (rewriting pins only for
instances with guest NUMA cells): what nova had set is then nowhere on
the destination. So before the agent first changes one of those knobs it
also writes the originals it recorded of them into the domain's live
metadata (namespace ``NS``, one element), and they travel with the
changes. An agent that finds the element on a domain incarnation its
checkpoint has nothing of (it arrived by migration, or this host's
checkpoint was lost) takes what it carries as the domain's originals and
writes them back before planning anything
(:meth:`~vsmtio_agent.drivers.libvirt.reconcile.Reconciler.adopt`): the
domain starts from what nova gave it, as a domain booted there does.

Pins carried by an instance with guest NUMA cells are not taken: nova
pinned it anew for the destination. The element is the host's data (a
tenant cannot write a domain's XML); it is still checked against the
checkpoint's schema, and one that does not fit is ignored, with a warning.
"""

import collections
import json
import socket
from xml.sax import saxutils

import jsonschema
import libvirt
from oslo_log import log as logging

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import checkpoint
from vsmtio_agent.actuators import libvirt_errors

LOG = logging.getLogger(__name__)

NS = 'http://openstack.org/xmlns/vsmtio/originals/1.0'
PREFIX = 'vsmtio'
TAG = 'originals'
# The kinds a domain's live definition takes with it (RASS classes are
# the kernel's, per vCPU thread: they stay behind with the threads).
TRAVELLING = (checkpoint.PINS, checkpoint.CPU_SHARES,
              checkpoint.BLKIO_WEIGHT)
_VALIDATOR = jsonschema.Draft202012Validator({
    'type': 'object',
    'additionalProperties': False,
    'properties': {kind: checkpoint.DOMAIN_KINDS[kind]
                   for kind in TRAVELLING}})
_NO_METADATA = (libvirt.VIR_ERR_NO_DOMAIN_METADATA,)
_unsupported = set()    # domain uuids whose driver keeps no metadata (said)


# The originals a domain arrived with, ``[(kind, key, value)]``, and the
# host whose agent recorded them.
Carried = collections.namedtuple('Carried', 'host originals')


def read(xml, label):
    """The :class:`Carried` of a domain's parsed live XML, or None."""
    metadata = xml.find('metadata')
    element = (None if metadata is None
               else metadata.find('{%s}%s' % (NS, TAG)))
    if element is None:
        return None
    try:
        data = json.loads(element.text or '')
        error = jsonschema.exceptions.best_match(
            _VALIDATOR.iter_errors(data))
        if error is not None:
            raise ValueError('%s at %s' % (error.message, error.json_path))
    except ValueError as exc:
        LOG.warning('Domain %s carries originals that do not fit (%s); '
                    'ignoring them', label, exc)
        return None
    if xml.find('cpu/numa') is not None:
        data.pop(checkpoint.PINS, None)     # nova pinned it for this host
    originals = []
    for kind in TRAVELLING:
        section = data.get(kind)
        if kind == checkpoint.CPU_SHARES:
            section = {} if section is None else {kind: section}
        for key, value in sorted((section or {}).items()):
            originals.append((kind, key, value))
    return Carried(element.get('host'), originals) if originals else None


def _document(record):
    """The travelling originals of ``record`` as the element's JSON."""
    data = {}
    for kind in TRAVELLING:
        keys = record.keys(kind)
        if kind == checkpoint.CPU_SHARES:
            if keys:
                data[kind] = record.original(kind, keys[0])
        elif keys:
            data[kind] = {key: record.original(kind, key) for key in keys}
    return data


class Record(base.Record):
    """A domain incarnation's record, its travelling kinds also carried.

    Wraps the checkpoint's
    :class:`~vsmtio_agent.actuators.checkpoint.DomainRecord`: an original
    of a travelling kind is in the domain's metadata before the actuator
    changes the knob (a metadata write that fails fails the record, and
    the change is not made), and the element goes once the last of them
    is forgotten (restored).
    """

    def __init__(self, record, dom):
        self.inner = record
        self.dom = dom

    def record(self, kind, key, original):
        added = self.inner.record(kind, key, original)
        if added and kind in TRAVELLING:
            try:
                self._carry()
            except libvirt.libvirtError as exc:
                self.inner.forget(kind, key)
                if exc.get_error_code() in (libvirt_errors.GONE
                                            + libvirt_errors.DENIED):
                    raise libvirt_errors.translate(exc) from exc
                raise OSError('cannot carry it in the domain\'s metadata: '
                              '%s' % exc.get_error_message())
        return added

    def original(self, kind, key):
        return self.inner.original(kind, key)

    def forget(self, kind, key):
        self.inner.forget(kind, key)
        if kind in TRAVELLING and not any(self.inner.keys(k)
                                          for k in TRAVELLING):
            self._drop()

    def keys(self, kind):
        return self.inner.keys(kind)

    @property
    def empty(self):
        return self.inner.empty

    def _carry(self):
        text = saxutils.escape(json.dumps(_document(self.inner),
                                          sort_keys=True))
        element = '<%s host=%s>%s</%s>' % (
            TAG, saxutils.quoteattr(socket.gethostname()), text, TAG)
        try:
            self.dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                                 element, PREFIX, NS,
                                 libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() not in libvirt_errors.UNSUPPORTED:
                raise
            if self.inner.uuid not in _unsupported:
                _unsupported.add(self.inner.uuid)
                LOG.warning('Domain %s keeps no metadata (%s): a live '
                            'migration would take the agent\'s changes '
                            'as its originals', self.inner.name,
                            exc.get_error_message())

    def _drop(self):
        try:
            self.dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, None,
                                 None, NS, libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as exc:
            code = exc.get_error_code()
            if code not in (_NO_METADATA + libvirt_errors.GONE
                            + libvirt_errors.UNSUPPORTED):
                # what it carries is what the domain has again: harmless
                LOG.warning('Cannot drop the originals domain %s carries: '
                            '%s', self.inner.name, exc.get_error_message())
