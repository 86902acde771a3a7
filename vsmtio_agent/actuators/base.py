"""The contract every knob the agent changes goes through (tuned's way).

One actuator per kind of knob (vCPU pinning, cpu shares, the retention
timeout, a thread's RASS class, block I/O weight, IRQ affinity, real-time
policy, ...). Each can *read* the host's current value, and its ``write``
first *records* the original in a ``Record`` (the checkpoint, persisted
before the host is touched) and then *writes*; ``restore`` writes the
recorded original back and forgets it. So whatever the agent changed can
be put back at stop, after a crash (the next start restores the record),
and when the policy withdraws a mechanism, by code that knows nothing
about the knob.

Keys are strings (they are JSON object keys in the checkpoint); values
are whatever JSON can hold. The first recorded original wins: writing a
knob twice never records the agent's own value as the original.
"""

import abc


class ActuatorError(Exception):
    """A knob could not be read or written; ``denied`` if by permission.

    A denied write degrades the mechanism (the agent says so and stops
    trying); any other error is counted and retried next period.
    """

    def __init__(self, message, denied=False):
        super().__init__(message)
        self.denied = denied


class Dropped(ActuatorError):
    """A recorded original no kernel or libvirt would take: forgotten.

    The checkpoint's schema checks each original's shape; its value is
    checked against what the host takes (:mod:`.bounds`) when it is to be
    written back. One out of range can never be put back: it leaves the
    record, so that the rest of the restore goes on and the next one does
    not trip over it, and the error says which and why.
    """


class Record(metaclass=abc.ABCMeta):
    """Where originals are kept: implemented by the checkpoint.

    ``record`` must make the original durable before it returns, so that
    a crash between it and the write leaves something to restore, and
    raise ``OSError`` (keeping nothing) when it cannot.
    """

    @abc.abstractmethod
    def record(self, kind, key, original):
        """Keep ``original`` for (kind, key) unless one is kept already."""

    @abc.abstractmethod
    def original(self, kind, key):
        """The kept original; ``KeyError`` if none."""

    @abc.abstractmethod
    def forget(self, kind, key):
        """Drop the kept original (it has been written back)."""

    @abc.abstractmethod
    def keys(self, kind):
        """The keys of ``kind`` with a kept original, sorted."""


class MemoryRecord(Record):
    """A record that lives only in memory: for tests and the simulator."""

    def __init__(self):
        self.kept = {}

    def record(self, kind, key, original):
        self.kept.setdefault(kind, {}).setdefault(key, original)

    def original(self, kind, key):
        return self.kept[kind][key]

    def forget(self, kind, key):
        section = self.kept.get(kind, {})
        section.pop(key, None)
        if not section:
            self.kept.pop(kind, None)

    def keys(self, kind):
        return sorted(self.kept.get(kind, {}))


class Actuator(metaclass=abc.ABCMeta):
    """One kind of knob: read, record, write, restore."""

    #: The record section this kind of knob is kept under.
    kind = None

    def __init__(self, record):
        self.record = record

    @abc.abstractmethod
    def read(self, key):
        """The host's current value; ``ActuatorError`` if unreadable."""

    @abc.abstractmethod
    def _set(self, key, value):
        """Put ``value`` on the host; ``ActuatorError`` on failure."""

    def recorded(self, key):
        """Whether an original of ``key`` is kept (it was changed).

        A knob that vanished (a removed device's IRQ, a destroyed domain's
        cgroup) is nothing to restore when it was ours, but an error when
        a caller names one that never existed.
        """
        try:
            self.record.original(self.kind, key)
        except KeyError:
            return False
        return True

    def keep(self, key):
        """Record the host's current value as the original (once).

        ``write`` does this itself; a caller that changes many knobs at
        once calls it for each first, so that all their originals are
        made durable in one step before any of them is written.
        """
        try:
            self.record.original(self.kind, key)
        except KeyError:
            original = self.read(key)
            try:
                self.record.record(self.kind, key, original)
            except OSError as exc:
                raise ActuatorError('cannot record the original of %s %s: '
                                    '%s; not changing it'
                                    % (self.kind, key, exc))

    def write(self, key, value):
        """Record the original (once), then change the host."""
        self.keep(key)
        self._set(key, value)

    def invalid(self, key, original):
        """Why ``original`` of ``key`` cannot be written back, or None.

        Asked of every original before it is restored: it was read from
        disk. Never raises. The default finds nothing wrong.
        """
        return None

    def restore(self, key):
        """Write the original back and forget it; a no-op if none kept.

        ``Dropped`` (and the record forgotten) if the original is not a
        value the host takes.
        """
        try:
            original = self.record.original(self.kind, key)
        except KeyError:
            return
        why = self.invalid(key, original)
        if why is not None:
            self.record.forget(self.kind, key)
            raise Dropped('checkpoint record %s %s is not restored and is '
                          'dropped: %s' % (self.kind, _short(key), why))
        self._set(key, original)
        self.record.forget(self.kind, key)

    def restore_all(self):
        """Restore every kept original; the (key, error) pairs that failed.

        A failed key stays recorded, to be tried again later (at the next
        stop or start), never dropped.
        """
        failed = []
        for key in self.record.keys(self.kind):
            try:
                self.restore(key)
            except ActuatorError as exc:
                failed.append((key, exc))
        return failed


def _short(key):
    """A key for a log line: printable, not too long."""
    text = key if isinstance(key, str) and key.isprintable() else repr(key)
    return text if len(text) <= 80 else text[:77] + '...'
