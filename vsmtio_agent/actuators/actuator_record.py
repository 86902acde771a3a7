"""A durable :class:`~vsmtio_agent.actuators.base.Record`: one JSON file.

The actuators' originals (MIST's knobs) are kept beside the agent's
checkpoint (``<checkpoint_path>.actuators.json``), written atomically and
fsynced on every record and forget (:func:`checkpoint.write_json_atomic`),
so a crash between a record and its write leaves the original to restore.
Like the checkpoint, the file is tied to one boot: after a reboot every
knob is back at its default and an old record is dropped, not replayed.

This stands in until the checkpoint itself implements ``Record``; the
actuators take any ``Record``, so swapping it is one line where the driver
builds them.
"""

from oslo_log import log as logging

from vsmtio_agent.actuators import base
from vsmtio_agent.actuators import checkpoint

LOG = logging.getLogger(__name__)

VERSION = 1


def _validate(data):
    if (not isinstance(data, dict) or data.get('version') != VERSION
            or not isinstance(data.get('kinds'), dict)
            or not all(isinstance(v, dict) for v in data['kinds'].values())):
        raise ValueError('not a version %d record' % VERSION)


class FileRecord(base.Record):
    """Originals by kind and key, persisted on every change."""

    def __init__(self, path, boot=None):
        self.path = path
        self.boot = boot
        self.kept = {}

    def load(self):
        """Read what a previous run kept; True if anything is to restore.

        A file that cannot be parsed is moved aside (``.corrupt``) with an
        error, never overwritten: its originals must be put back by hand.
        """
        try:
            data = checkpoint.read_boot_json(
                self.path, self.boot, _validate, 'Actuator record',
                'real-time policies, block I/O weights and IRQ affinities')
        except ValueError:
            return False
        if data is None:
            return False
        self.kept = {k: v for k, v in data['kinds'].items() if v}
        return bool(self.kept)

    def _save(self):
        if not self.kept:
            checkpoint.remove(self.path)
            return
        checkpoint.write_json_atomic(
            self.path, {'version': VERSION, 'boot_id': self.boot,
                        'kinds': self.kept}, dir_mode=0o700)

    def record(self, kind, key, original):
        section = self.kept.setdefault(kind, {})
        if key in section:
            return
        section[key] = original
        try:
            self._save()
        except OSError as exc:
            del section[key]
            raise base.ActuatorError('cannot record the original of %s %s '
                                     'in %s: %s; not changing it'
                                     % (kind, key, self.path, exc))

    def original(self, kind, key):
        return self.kept[kind][key]

    def forget(self, kind, key):
        section = self.kept.get(kind)
        if section is None or key not in section:
            return
        del section[key]
        if not section:
            del self.kept[kind]
        try:
            self._save()
        except OSError as exc:
            # The value is back; the stale original is written again at
            # the next restore, which is harmless.
            LOG.error('Cannot update actuator record %s: %s', self.path,
                      exc)

    def keys(self, kind):
        return sorted(self.kept.get(kind, {}))

    @property
    def empty(self):
        return not self.kept
