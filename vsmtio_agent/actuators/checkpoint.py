"""The agent's record of every original value it changed, kept on disk.

This module alone knows the file's format; everything else goes through
the :class:`~vsmtio_agent.actuators.base.Record` API (``record``,
``original``, ``forget``, ``keys``). Before an actuator first changes a
knob it records the original here, and the file is replaced atomically
(write a temporary file, fsync, rename, fsync the directory), so a crash at
any instant leaves either the old or the new record. The next start
restores what a crashed agent left changed.

The record is tied to one boot (``/proc/sys/kernel/random/boot_id``): after
a reboot knobs are back at their defaults and domains restarted from their
persistent config, so an old record is dropped rather than replayed.
Originals of a domain's knobs (pins, shares, RASS classes) are tied to the
domain's libvirt id, which changes when the domain restarts: a restarted
domain's originals are not its current values, and are dropped.
"""

import contextlib
import json
import os

import jsonschema
from oslo_log import log as logging

from vsmtio_agent.actuators import base

LOG = logging.getLogger(__name__)


def write_json_atomic(path, data, dir_mode=0o755, durable=True):
    """Replace ``path`` with ``data`` as JSON, never leaving half a file.

    Write a temporary file beside it and rename it over the old one. With
    ``durable`` the file and its directory are fsynced too, so the new
    content survives a crash right after; a file rewritten every period
    (the status document) can skip that cost.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=dir_mode, exist_ok=True)
    tmp = '%s.tmp.%d' % (path, os.getpid())
    with open(tmp, 'w') as f:
        json.dump(data, f, indent=1, sort_keys=True)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def read_boot_json(path, boot, validate, what, by_hand):
    """The data of a JSON record this boot wrote, or None.

    The checkpoint and the actuator record share these rules: no file is
    None; a file from an earlier boot is removed and None (after a reboot
    every knob is back at its default, nothing is to restore); a file that
    does not parse or that ``validate`` (``data -> None``) refuses with a
    ``ValueError`` is moved aside (``<path>.corrupt``), never overwritten,
    with an error naming what to check ``by_hand``, and the ``ValueError``
    is raised for the caller to decide what that means.
    """
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
        validate(data)
    except ValueError as exc:
        aside = path + '.corrupt'
        os.replace(path, aside)
        LOG.error('%s %s is corrupt (%s); moved to %s. Values it recorded '
                  'cannot be restored automatically: check %s by hand.',
                  what, path, exc, aside, by_hand)
        raise
    if boot and data.get('boot_id') not in (None, boot):
        LOG.info('%s %s is from an earlier boot; nothing of it is live any '
                 'more, dropping it.', what, path)
        remove(path)
        return None
    return data


def remove(path):
    """Remove ``path`` if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# Version 2 adds sections for kinds of knob beyond the first four (each a
# ``{key: original}`` object, in a domain record or under ``host``); a
# version-1 file is a version-2 file without them and is read as it is. An
# older agent refuses a version-2 file (moved aside, with an error) rather
# than silently dropping originals of kinds it does not know.
VERSION = 2
READABLE_VERSIONS = (1, 2)

# The kinds with a place of their own in the format (version 1).
PINS = 'pins'              # domain: vCPU index -> [host CPUs]
CPU_SHARES = 'cpu_shares'  # domain: one value, under the key CPU_SHARES
RASS = 'rass'              # domain: vCPU index -> the thread's RASS class
KNOBS = 'knobs'            # host: sysfs path (relative) -> int or text

_INDEX = '^[0-9]+$'     # a vCPU index, as a JSON object key
_SECTION = {'type': 'object'}   # a further kind: {key: any JSON value}
# The file's format, checked whole on load (a hand-edited or truncated
# file is refused, never half-restored).
SCHEMA = {
    'type': 'object',
    'required': ['version'],
    'properties': {
        'version': {'enum': list(READABLE_VERSIONS)},
        'boot_id': {'type': ['string', 'null']},
        'domains': {
            'type': 'object',
            'additionalProperties': {
                'type': 'object',
                'required': ['id'],
                'properties': {
                    'id': {'type': 'integer'},
                    'name': {'type': ['string', 'null']},
                    PINS: {
                        'type': 'object',
                        'propertyNames': {'pattern': _INDEX},
                        'additionalProperties': {
                            'type': 'array', 'items': {'type': 'integer'}},
                    },
                    RASS: {
                        'type': 'object',
                        'propertyNames': {'pattern': _INDEX},
                        'additionalProperties': {'type': 'string'},
                    },
                    CPU_SHARES: {'type': ['integer', 'null']},
                },
                'additionalProperties': _SECTION,
            },
        },
        KNOBS: {
            'type': 'object',
            'additionalProperties': {'type': ['integer', 'string']},
        },
        'host': {'type': 'object', 'additionalProperties': _SECTION},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _validate(data):
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if error is not None:
        raise ValueError('%s at %s' % (error.message, error.json_path))


class CheckpointError(Exception):
    """The checkpoint file exists but cannot be used."""


def boot_id(procfs_root='/proc'):
    try:
        with open(os.path.join(procfs_root,
                               'sys/kernel/random/boot_id')) as f:
            return f.read().strip()
    except OSError:
        return None


class Checkpoint(base.Record):
    """Originals of host-wide knobs, and of each domain, on disk.

    The checkpoint itself is the :class:`Record` of host-wide kinds
    (``knobs``: sysfs paths; any other kind goes under ``host``);
    :meth:`domain` gives the record of one domain incarnation.

    ``record`` saves the file before it returns (the contract: durable
    before the host is touched), except inside :meth:`deferred`, where the
    originals of a whole apply are saved once, before any of its writes.
    ``forget`` only marks the record changed; :meth:`save` (or the end of
    ``deferred``) writes it.
    """

    def __init__(self, path, boot=None):
        self.path = path
        self.boot = boot
        self._domains = {}
        self._knobs = {}
        self._host = {}
        self._defer = 0
        self._dirty = False

    @property
    def empty(self):
        return not (self._domains or self._knobs or self._host)

    # -- the file ------------------------------------------------------------

    def load(self):
        """Read a previous record; return True if there was one to restore.

        A corrupt file is moved aside (``<path>.corrupt``) with an error
        log line and never silently overwritten.
        """
        try:
            data = read_boot_json(
                self.path, self.boot, _validate, 'Checkpoint',
                'vCPU pinning and kvm.halt_poll_ns')
        except ValueError as exc:
            raise CheckpointError(str(exc))
        if data is None:
            return False
        self._domains = data.get('domains', {})
        self._knobs = data.get(KNOBS, {})
        self._host = data.get('host', {})
        self._dirty = False
        return not self.empty

    def save(self):
        """Replace the file atomically; remove it when nothing is recorded.

        ``OSError`` if it cannot be written: the caller changes nothing.
        """
        if self.empty:
            self.discard()
        else:
            data = {'version': VERSION, 'boot_id': self.boot,
                    'domains': self._domains, KNOBS: self._knobs}
            if self._host:
                data['host'] = self._host
            write_json_atomic(self.path, data, dir_mode=0o700)
        self._dirty = False

    def discard(self):
        remove(self.path)

    @contextlib.contextmanager
    def deferred(self):
        """Record many originals and save them once, at the end.

        Nothing may be written to the host inside the block: its
        originals are durable only when it ends (``OSError`` then if the
        file cannot be written).
        """
        self._defer += 1
        try:
            yield self
        finally:
            self._defer -= 1
        if not self._defer and self._dirty:
            self.save()

    def _changed(self, durable):
        self._dirty = True
        if durable and not self._defer:
            self.save()

    # -- host-wide originals (the Record API) ---------------------------------

    def _section(self, kind, create=False):
        if kind == KNOBS:
            return self._knobs
        if create:
            return self._host.setdefault(kind, {})
        return self._host.get(kind, {})

    def record(self, kind, key, original):
        """Keep ``original`` unless one is kept; True if it was added."""
        section = self._section(kind, create=True)
        if key in section:
            return False
        section[key] = original
        self._changed(durable=True)
        return True

    def original(self, kind, key):
        return self._section(kind)[key]

    def forget(self, kind, key):
        section = self._section(kind)
        section.pop(key, None)
        if kind != KNOBS and not section:
            self._host.pop(kind, None)
        self._changed(durable=False)

    def keys(self, kind):
        return sorted(self._section(kind))

    # -- domains -------------------------------------------------------------

    def domain(self, uuid, dom_id, name=None):
        """The :class:`DomainRecord` of ``uuid`` as libvirt id ``dom_id``.

        That is, of the domain's current incarnation.
        """
        return DomainRecord(self, uuid, dom_id, name)

    def domains(self):
        """``{uuid: (libvirt id, name)}`` of every domain with originals."""
        return {uuid: (rec['id'], rec.get('name'))
                for uuid, rec in self._domains.items()}

    def drop_domain(self, uuid):
        """Forget a domain's originals (it is gone or was restarted).

        Returns its recorded name, or None if nothing was recorded.
        """
        rec = self._domains.pop(uuid, None)
        if rec is None:
            return None
        self._changed(durable=False)
        return rec.get('name') or uuid


class DomainRecord(base.Record):
    """The originals of one domain incarnation (uuid and libvirt id).

    Recording for a new incarnation replaces what an earlier one left (it
    is not the current value of anything); reading finds nothing of an
    earlier incarnation. Keys of ``pins`` and ``rass`` are vCPU indexes as
    strings; ``cpu_shares`` has the one key ``cpu_shares``.
    """

    def __init__(self, checkpoint, uuid, dom_id, name):
        self.checkpoint = checkpoint
        self.uuid = uuid
        self.id = dom_id
        self.name = name

    def _rec(self, create=False):
        domains = self.checkpoint._domains
        rec = domains.get(self.uuid)
        if rec is not None and rec['id'] == self.id:
            return rec
        if not create:
            return None
        rec = {'id': self.id, 'name': self.name, PINS: {},
               CPU_SHARES: None, RASS: {}}
        domains[self.uuid] = rec
        return rec

    @staticmethod
    def _get(rec, kind):
        """The section of ``kind`` in ``rec`` as {key: original}."""
        if kind == CPU_SHARES:
            value = rec.get(CPU_SHARES)
            return {} if value is None else {CPU_SHARES: value}
        return rec.get(kind, {})

    def record(self, kind, key, original):
        rec = self._rec(create=True)
        if key in self._get(rec, kind):
            return False
        if kind == CPU_SHARES:
            rec[CPU_SHARES] = int(original)
        else:
            rec.setdefault(kind, {})[key] = original
        self.checkpoint._changed(durable=True)
        return True

    def original(self, kind, key):
        rec = self._rec()
        if rec is None:
            raise KeyError(key)
        return self._get(rec, kind)[key]

    def forget(self, kind, key):
        rec = self._rec()
        if rec is None:
            return
        if kind == CPU_SHARES:
            rec[CPU_SHARES] = None
        else:
            rec.get(kind, {}).pop(key, None)
        if not any(self._get(rec, k) for k in rec if k not in ('id', 'name')):
            del self.checkpoint._domains[self.uuid]
        self.checkpoint._changed(durable=False)

    def keys(self, kind):
        rec = self._rec()
        return sorted(self._get(rec, kind)) if rec is not None else []

    @property
    def empty(self):
        return self._rec() is None
