"""The agent's record of every original value it changed, kept on disk.

Before the agent first changes a domain (vCPU pinning, cpu shares) or a
kernel knob it records the original here, and the file is replaced
atomically (write a temporary file, fsync, rename, fsync the directory), so
a crash at any instant leaves either the old or the new record. The next
start restores what a crashed agent left changed.

The record is tied to one boot (``/proc/sys/kernel/random/boot_id``): after
a reboot knobs are back at their defaults and domains restarted from their
persistent config, so an old record is dropped rather than replayed. Each
domain is tied to its libvirt id, which changes when the domain restarts.
"""

import json
import os

import jsonschema
from oslo_log import log as logging

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


VERSION = 1

_INDEX = '^[0-9]+$'     # a vCPU index, as a JSON object key
# The file's format, checked whole on load (a hand-edited or truncated
# file is refused, never half-restored).
SCHEMA = {
    'type': 'object',
    'required': ['version'],
    'properties': {
        'version': {'const': VERSION},
        'boot_id': {'type': ['string', 'null']},
        'domains': {
            'type': 'object',
            'additionalProperties': {
                'type': 'object',
                'required': ['id'],
                'properties': {
                    'id': {'type': 'integer'},
                    'pins': {
                        'type': 'object',
                        'propertyNames': {'pattern': _INDEX},
                        'additionalProperties': {
                            'type': 'array', 'items': {'type': 'integer'}},
                    },
                    'rass': {
                        'type': 'object',
                        'propertyNames': {'pattern': _INDEX},
                        'additionalProperties': {'type': 'string'},
                    },
                    'cpu_shares': {'type': ['integer', 'null']},
                },
            },
        },
        'knobs': {
            'type': 'object',
            'additionalProperties': {'type': ['integer', 'string']},
        },
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


class CheckpointError(Exception):
    """The checkpoint file exists but cannot be used."""


def boot_id(procfs_root='/proc'):
    try:
        with open(os.path.join(procfs_root,
                               'sys/kernel/random/boot_id')) as f:
            return f.read().strip()
    except OSError:
        return None


class Checkpoint:
    """Originals of domains and knobs, persisted on every change.

    ``domains`` maps a domain UUID to ``{'id': libvirt id, 'name': ...,
    'pins': {vcpu index (str): [cpus]}, 'cpu_shares': int or None,
    'rass': {vcpu index (str): class}}``; ``knobs`` maps a sysfs path to its
    original value (an integer, or text such as a CPU list).
    """

    def __init__(self, path, boot=None):
        self.path = path
        self.boot = boot
        self.domains = {}
        self.knobs = {}

    @property
    def empty(self):
        return not self.domains and not self.knobs

    def load(self):
        """Read a previous record; return True if there was one to restore.

        A corrupt file is moved aside (``<path>.corrupt``) with an error
        log line and never silently overwritten.
        """
        try:
            with open(self.path) as f:
                text = f.read()
        except FileNotFoundError:
            return False
        try:
            data = json.loads(text)
            error = jsonschema.exceptions.best_match(
                _VALIDATOR.iter_errors(data))
            if error is not None:
                raise ValueError('%s at %s' % (
                    error.message, error.json_path))
            domains = data.get('domains', {})
            knobs = data.get('knobs', {})
        except ValueError as exc:
            aside = self.path + '.corrupt'
            os.replace(self.path, aside)
            LOG.error('Checkpoint %s is corrupt (%s); moved to %s. Values '
                      'it recorded cannot be restored automatically: check '
                      'vCPU pinning and %s by hand.', self.path, exc, aside,
                      'kvm.halt_poll_ns')
            raise CheckpointError(str(exc))
        if self.boot and data.get('boot_id') not in (None, self.boot):
            LOG.info('Checkpoint %s is from an earlier boot; nothing of it '
                     'is live any more, dropping it.', self.path)
            self.discard()
            return False
        self.domains = domains
        self.knobs = knobs
        return not self.empty

    def save(self):
        """Replace the file atomically; remove it when nothing is recorded."""
        if self.empty:
            self.discard()
            return
        write_json_atomic(
            self.path, {'version': VERSION, 'boot_id': self.boot,
                        'domains': self.domains, 'knobs': self.knobs},
            dir_mode=0o700)

    def discard(self):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    # Recording originals: each returns True if it added something.

    def record_domain(self, uuid, dom_id, name):
        rec = self.domains.get(uuid)
        if rec is None or rec['id'] != dom_id:
            rec = {'id': dom_id, 'name': name, 'pins': {},
                   'cpu_shares': None, 'rass': {}}
            self.domains[uuid] = rec
        return rec

    def record_pin(self, uuid, dom_id, name, vcpu, cpus):
        rec = self.record_domain(uuid, dom_id, name)
        if str(vcpu) in rec['pins']:
            return False
        rec['pins'][str(vcpu)] = sorted(cpus)
        return True

    def record_shares(self, uuid, dom_id, name, shares):
        rec = self.record_domain(uuid, dom_id, name)
        if rec['cpu_shares'] is not None:
            return False
        rec['cpu_shares'] = int(shares)
        return True

    def record_rass(self, uuid, dom_id, name, vcpu, klass):
        rec = self.record_domain(uuid, dom_id, name)
        rass = rec.setdefault('rass', {})
        if str(vcpu) in rass:
            return False
        rass[str(vcpu)] = klass
        return True

    def record_knob(self, path, value):
        if path in self.knobs:
            return False
        self.knobs[path] = value if isinstance(value, str) else int(value)
        return True
