"""The agent's record of every original value it changed, kept on disk.

This module alone knows the file's format; everything else goes through
the :class:`~vsmtio_agent.actuators.base.Record` API (``record``,
``original``, ``forget``, ``keys``). Before an actuator first changes a
knob it records the original here, and the file is replaced atomically
(write a temporary file, fsync, rename, fsync the directory), so a crash at
any instant leaves either the old or the new record. The next start
restores what a crashed agent left changed.

The file is data, never code: the agent acts on it as root, so it is
written and read as :mod:`~vsmtio_agent.actuators.statefile` says (a
root-only directory, no-follow exclusive creation, owner checked, nesting
bounded, refused files kept aside), and its schema names every kind and
confines every key to the knobs the agent manages.

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
from vsmtio_agent.actuators import ledger
from vsmtio_agent.actuators import statefile

LOG = logging.getLogger(__name__)

# The status document is written the same way (not private, not durable).
write_json_atomic = statefile.write_json_atomic

# Version 3 names every kind the agent restores, each with the keys it may
# hold: a knob key is a path below the sysfs roots the agent manages, a
# cgroup a relative path with no ``..``, a thread ``<pid>/<tid>``. Version 1
# and 2 files are version-3 files without the newer kinds and are read as
# they are. An older agent refuses a newer file (moved aside, with an
# error) rather than silently dropping originals of kinds it does not know.
VERSION = 3
READABLE_VERSIONS = (1, 2, 3)

# Kinds kept in a domain's record (the domain's current incarnation).
PINS = 'pins'              # vCPU index -> [host CPUs]
CPU_SHARES = 'cpu_shares'  # one value, under the key CPU_SHARES
RASS = 'rass'              # vCPU index -> the thread's RASS class
BLKIO_WEIGHT = 'blkio_weight'   # 'weight' -> the domain's blkiotune weight
# Kinds kept host-wide.
KNOBS = 'knobs'            # sysfs path (relative) -> int or text
SCHED_POLICY = 'mist_sched_policy'   # '<pid>/<tid>' -> policy, priority
RT_RUNTIME = 'mist_rt_runtime'       # cgroup path -> cpu.rt_runtime_us
IRQ_AFFINITY = 'mist_irq_affinity'   # IRQ number -> CPU list
HOST_KINDS = (SCHED_POLICY, RT_RUNTIME, IRQ_AFFINITY, KNOBS)

# The only sysfs files the agent writes: KVM's parameters (halt polling,
# the patched kernel's retention timeout) and the patched kernel's own.
# Every pattern ends at \Z, the end of the text: ``$`` also matches before
# a final newline, and ``halt_poll_ns\n`` is another file name.
KNOB_KEY = r'^(module/kvm/parameters|kernel/vsmtio)/[a-z0-9_]+\Z'
_INDEX = r'^[0-9]+\Z'     # a vCPU index, as a JSON object key
_CPU_LIST = r'^[0-9,-]*\Z'
_INT = {'type': 'integer'}
_RELATIVE = {'allOf': [
    {'pattern': '^[^/\x00]([^\x00]*[^/\x00])?\\Z'},
    {'not': {'pattern': '(^|/)[.][.]?(/|\\Z)'}}]}
# A domain's originals, kind by kind (also what travels with a migrated
# domain: :mod:`vsmtio_agent.drivers.libvirt.carried`).
DOMAIN_KINDS = {
    PINS: {
        'type': 'object',
        'propertyNames': {'pattern': _INDEX},
        'additionalProperties': {
            'type': 'array',
            'items': {'type': 'integer', 'minimum': 0}},
    },
    RASS: {
        'type': 'object',
        'propertyNames': {'pattern': _INDEX},
        'additionalProperties': {
            'enum': ['none', 'io', 'cpu']},
    },
    CPU_SHARES: {'type': ['integer', 'null']},
    BLKIO_WEIGHT: {
        'type': 'object',
        'propertyNames': {'enum': ['weight']},
        'additionalProperties': _INT,
    },
}
# The file's format, checked whole on load (a hand-edited or truncated
# file is refused, never half-restored).
SCHEMA = {
    'type': 'object',
    'required': ['version'],
    'additionalProperties': False,
    'properties': {
        'version': {'enum': list(READABLE_VERSIONS)},
        'boot_id': {'type': ['string', 'null']},
        'domains': {
            'type': 'object',
            'propertyNames': {'pattern': r'^[0-9A-Za-z-]{1,64}\Z'},
            'additionalProperties': {
                'type': 'object',
                'required': ['id'],
                'additionalProperties': False,
                'properties': dict(DOMAIN_KINDS, id=_INT, name={
                    'type': ['string', 'null']}),
            },
        },
        KNOBS: {
            'type': 'object',
            'propertyNames': {'pattern': KNOB_KEY},
            'additionalProperties': {
                'anyOf': [_INT, {'type': 'string', 'pattern': _CPU_LIST}]},
        },
        'host': {
            'type': 'object',
            'additionalProperties': False,
            'properties': {
                SCHED_POLICY: {
                    'type': 'object',
                    'propertyNames': {'pattern': r'^[0-9]+/[0-9]+\Z'},
                    'additionalProperties': {
                        'type': 'object',
                        'required': ['policy', 'priority'],
                        'additionalProperties': False,
                        'properties': {
                            'policy': _INT, 'priority': _INT,
                            'start': {'type': ['integer', 'null']}},
                    },
                },
                RT_RUNTIME: {
                    'type': 'object',
                    'propertyNames': _RELATIVE,
                    'additionalProperties': _INT,
                },
                IRQ_AFFINITY: {
                    'type': 'object',
                    'propertyNames': {'pattern': _INDEX},
                    # the CPU list and the IRQ's action names then (its
                    # identity); a bare CPU list from an earlier agent
                    'additionalProperties': {'anyOf': [
                        {'type': 'string', 'pattern': _CPU_LIST},
                        {'type': 'object',
                         'required': ['cpus', 'actions'],
                         'additionalProperties': False,
                         'properties': {
                             'cpus': {'type': 'string',
                                      'pattern': _CPU_LIST},
                             'actions': {'type': 'string'}}}]},
                },
            },
        },
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def validate(data):
    """``ValueError`` naming the first thing wrong with ``data``."""
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if error is not None:
        raise ValueError('%s at %s' % (error.message, error.json_path))


_LEGACY_DOMAIN_KINDS = {'mist_cpu_shares': (CPU_SHARES, None),
                        'mist_blkio_weight': (BLKIO_WEIGHT, 'weight')}


def json_copy(data):
    return json.loads(json.dumps(data))


def _adopt(data, kind, key, value):
    """One original of the pre-ledger MIST record, into ``data``."""
    if kind in _LEGACY_DOMAIN_KINDS:
        new_kind, new_key = _LEGACY_DOMAIN_KINDS[kind]
        rec = data['domains'].setdefault(key, {'id': value['id'],
                                               'name': None})
        if rec['id'] != value['id']:
            return      # the checkpoint knows a later incarnation
        if new_key is None:
            if rec.get(new_kind) is None:
                rec[new_kind] = int(value['value'])
        else:
            rec.setdefault(new_kind, {}).setdefault(new_key,
                                                    int(value['value']))
    else:
        data['host'].setdefault(kind, {}).setdefault(key, value)


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
        # who may write each knob (MIST, RASS, LTCR): see ledger
        self.owners = ledger.Owners()

    @property
    def empty(self):
        return not (self._domains or self._knobs or self._host)

    def count(self):
        """How many originals are recorded, over every kind."""
        domains = sum(
            (rec.get(CPU_SHARES) is not None)
            + sum(len(v) for k, v in rec.items() if isinstance(v, dict))
            for rec in self._domains.values())
        return (domains + len(self._knobs)
                + sum(len(v) for v in self._host.values()))

    # -- the file ------------------------------------------------------------

    def load(self):
        """Read a previous record; return True if there was one to restore.

        A file from an earlier boot is dropped (after a reboot every knob
        is back at its default). A file that is not the agent's own (see
        :mod:`statefile`), does not parse or breaks the schema is kept
        aside under a unique name with one error line, never acted on nor
        overwritten, and ``CheckpointError`` says why in one line.
        """
        try:
            text = statefile.read_trusted(self.path)
            if text is None:
                return False
            data = statefile.parse(text)
            validate(data)
        except ValueError as exc:
            raise CheckpointError(self._refuse(exc))
        if self.boot and data.get('boot_id') not in (None, self.boot):
            LOG.info('Checkpoint %s is from an earlier boot; nothing of it '
                     'is live any more, dropping it.', self.path)
            self.discard()
            return False
        self._domains = data.get('domains', {})
        self._knobs = data.get(KNOBS, {})
        # a kind with no key records nothing (as forget leaves it)
        self._host = {kind: section for kind, section
                      in data.get('host', {}).items() if section}
        self._dirty = False
        return not self.empty

    def _refuse(self, exc):
        """Keep a refused file aside; the one line that says so."""
        try:
            aside = 'moved to %s' % statefile.keep_aside(self.path)
        except OSError as err:
            aside = 'left in place (%s)' % err
        if isinstance(exc, statefile.Untrusted):
            why = 'not trusted: it %s' % exc
        else:
            why = 'corrupt (%s)' % exc
        line = ('checkpoint %s is %s; %s. Values it recorded are not '
                'restored: check vCPU pinning, cpu shares, kernel knobs, '
                'real-time policies and IRQ affinities by hand.'
                % (self.path, why, aside))
        LOG.error('%s', line)
        return line

    def adopt_legacy(self):
        """Take in what an agent before the one ledger kept for MIST.

        Its originals sat beside the checkpoint
        (``<path>.actuators.json``: ``{"kinds": {kind: {key: value}}}``);
        thread policies, RT runtimes and IRQ affinities keep their kinds,
        a domain's cpu shares and block I/O weight (keyed by its UUID,
        with its libvirt id) go to the domain's record. Read with the
        checkpoint's own rules (trusted, bounded, the whole result
        validated), then saved here and the old file removed. Returns
        whether anything was taken in; ``CheckpointError`` if refused.
        """
        legacy = self.path + '.actuators.json'
        mine = Checkpoint(legacy, self.boot)
        try:
            text = statefile.read_trusted(legacy)
            if text is None:
                return False
            old = statefile.parse(text)
            if not isinstance(old, dict) or not isinstance(
                    old.get('kinds'), dict):
                raise ValueError('not a record of kinds')
            if self.boot and old.get('boot_id') not in (None, self.boot):
                statefile.remove(legacy)
                return False
            data = {'version': VERSION, 'boot_id': self.boot,
                    'domains': json_copy(self._domains),
                    KNOBS: dict(self._knobs), 'host': json_copy(self._host)}
            for kind, section in old['kinds'].items():
                for key, value in dict(section).items():
                    _adopt(data, kind, key, value)
            validate(data)
        except (ValueError, TypeError, KeyError) as exc:
            raise CheckpointError(mine._refuse(ValueError(str(exc))))
        self._domains, self._host = data['domains'], data['host']
        self.save()
        statefile.remove(legacy)
        LOG.warning('Took in %s (MIST\'s originals from an earlier agent) '
                    'into %s.', legacy, self.path)
        return True

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
            statefile.write_json_atomic(self.path, data, mode=0o600,
                                        private=True)
        self._dirty = False

    def flush(self):
        """Save what ``forget`` changed, if anything (``OSError``).

        A forgotten original left on disk is written back again by the
        next restore: harmless where the write is idempotent, an error
        where the knob refuses it (an IRQ the host would not move).
        """
        if self._dirty and not self._defer:
            self.save()

    def discard(self):
        statefile.remove(self.path)

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
        try:
            self._changed(durable=True)
        except OSError:
            del section[key]
            raise
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
        try:
            self.checkpoint._changed(durable=True)
        except OSError:
            self.forget(kind, key)
            raise
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
