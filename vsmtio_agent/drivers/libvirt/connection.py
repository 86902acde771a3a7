"""The libvirt connection, reopened with exponential backoff.

While libvirt is unreachable every use raises HostDriverError at once (the
agent skips the period) instead of blocking the loop; a dead connection is
dropped and the next attempt waits ``libvirt_retry_initial`` seconds,
doubling up to ``libvirt_retry_max``.

Domain lifecycle events (a domain started, stopped, restarted, paused...)
are counted in :attr:`Connection.changes`, as nova's libvirt driver
follows them: libvirt's default event loop runs in a daemon thread, once
per process, and the sampler lists the running domains again only when the
count moved (:meth:`~vsmtio_agent.drivers.libvirt.domains.Domains.
running`): through a real libvirtd each listing is a call that costs
libvirtd and the agent alike (``tox -e bench-libvirtd``).
"""

import threading
import time

import libvirt
from oslo_log import log as logging

from vsmtio_agent.drivers import base

LOG = logging.getLogger(__name__)

# libvirt's own error printer would duplicate every error on stderr.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


_LOOP_LOCK = threading.Lock()
_LOOP = []      # [True] once libvirt's default event loop runs, [False]


def event_loop():
    """Whether libvirt's default event loop runs (started here, once).

    It must be registered before a connection is opened for that
    connection's events to be delivered (``qemu:///embed`` needs it to
    open at all); its thread only dispatches.
    """
    with _LOOP_LOCK:
        if not _LOOP:
            try:
                libvirt.virEventRegisterDefaultImpl()
            except libvirt.libvirtError as exc:
                LOG.info('No libvirt event loop (%s): the running domains '
                         'are listed every period.', exc)
                _LOOP.append(False)
            else:
                threading.Thread(target=_run_events, name='libvirt-events',
                                 daemon=True).start()
                _LOOP.append(True)
        return _LOOP[0]


def _run_events():
    while True:
        try:
            libvirt.virEventRunDefaultImpl()
        except libvirt.libvirtError as exc:     # not seen; do not spin
            LOG.warning('libvirt event loop: %s', exc)
            time.sleep(1.0)


class Connection:

    def __init__(self, uri, retry_initial, retry_max, on_lost=None):
        self.uri = uri
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.on_lost = on_lost
        self._conn = None
        self._backoff = 0.0
        self._next_attempt = 0.0
        # Lifecycle events seen (and connections opened or closed): a
        # count the sampler compares, moved by the event loop's thread.
        self.changes = 0
        self._callback = None   # the lifecycle callback's id, if any

    @property
    def events(self):
        """Whether the open connection delivers lifecycle events."""
        return self._callback is not None

    def _changed(self, *_args):
        self.changes += 1

    def _follow(self, conn):
        """Count ``conn``'s lifecycle events, where it delivers them."""
        if not event_loop():
            return
        try:
            self._callback = conn.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._changed,
                None)
        except libvirt.libvirtError as exc:
            LOG.info('libvirt at %s sends no lifecycle events (%s): the '
                     'running domains are listed every period.', self.uri,
                     exc.get_error_message())
            return
        try:
            conn.registerCloseCallback(self._changed, None)
        except libvirt.libvirtError:
            pass    # an in-process driver: it cannot close on its own

    def _unfollow(self, conn):
        callback, self._callback = self._callback, None
        self.changes += 1
        if callback is not None:
            try:
                conn.domainEventDeregisterAny(callback)
            except libvirt.libvirtError:
                pass    # a dead connection

    def get(self):
        """An open connection; HostDriverError while backing off."""
        if self._conn is not None:
            return self._conn
        event_loop()       # before opening: its events are delivered
        now = time.monotonic()
        if now < self._next_attempt:
            raise base.HostDriverError(
                'libvirt at %s unreachable; next attempt in %.1f s'
                % (self.uri, self._next_attempt - now))
        try:
            self._conn = libvirt.open(self.uri)
        except libvirt.libvirtError as exc:
            self._backoff = min(max(self.retry_initial, self._backoff * 2),
                                self.retry_max)
            self._next_attempt = now + self._backoff
            raise base.HostDriverError(
                'cannot connect to libvirt at %s: %s (retry in %.1f s)'
                % (self.uri, exc.get_error_message(), self._backoff))
        if self._backoff:
            LOG.info('Reconnected to libvirt at %s', self.uri)
        self._backoff = 0.0
        self.changes += 1
        self._follow(self._conn)
        return self._conn

    def call(self, func, name, *args):
        """``func(*args)``, a libvirt error raised as HostDriverError.

        A dead connection is dropped on the way (:meth:`lost`).
        """
        try:
            return func(*args)
        except libvirt.libvirtError as exc:
            if self.lost(exc):
                raise base.HostDriverError('libvirt connection lost: %s'
                                           % exc.get_error_message())
            raise base.HostDriverError('%s failed: %s'
                                       % (name, exc.get_error_message()))

    def lost(self, exc):
        """Drop a dead connection; True if that is what ``exc`` meant."""
        conn, alive = self._conn, False
        if conn is not None:
            try:
                alive = bool(conn.isAlive())
            except libvirt.libvirtError:
                alive = False
        if alive:
            return False
        if conn is not None:
            self._unfollow(conn)
        self._conn = None
        if self.on_lost is not None:
            self.on_lost()
        self._backoff = self.retry_initial
        self._next_attempt = time.monotonic() + self._backoff
        LOG.warning('Lost the libvirt connection to %s (%s); nothing is '
                    'changed until it is back, retrying with backoff.',
                    self.uri, exc)
        return True

    def close(self):
        if self._conn is not None:
            self._unfollow(self._conn)
            try:
                self._conn.close()
            except libvirt.libvirtError:
                pass
            self._conn = None
