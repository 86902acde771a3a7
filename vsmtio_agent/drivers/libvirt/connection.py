"""The libvirt connection, reopened with exponential backoff.

While libvirt is unreachable every use raises HostDriverError at once (the
agent skips the period) instead of blocking the loop; a dead connection is
dropped and the next attempt waits ``libvirt_retry_initial`` seconds,
doubling up to ``libvirt_retry_max``.
"""

import time

import libvirt
from oslo_log import log as logging

from vsmtio_agent.drivers import base

LOG = logging.getLogger(__name__)

# libvirt's own error printer would duplicate every error on stderr.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


class Connection:

    def __init__(self, uri, retry_initial, retry_max, on_lost=None):
        self.uri = uri
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.on_lost = on_lost
        self._conn = None
        self._backoff = 0.0
        self._next_attempt = 0.0

    def get(self):
        """An open connection; HostDriverError while backing off."""
        if self._conn is not None:
            return self._conn
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
        return self._conn

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
            try:
                self._conn.close()
            except libvirt.libvirtError:
                pass
            self._conn = None
