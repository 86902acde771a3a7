"""Publish each instance's measured state as namespaced server metadata.

Operators see what the agent measured where they look at an instance (the
API, the CLI, Horizon's instance overview), and the scheduler counts an
``auto`` instance with the class the agent measured. Per instance the
agent writes at most :data:`KEYS`:

``vsmtio:measured_class``
    ``io`` or ``cpu`` with an HMAC signature that binds the instance, the
    class, this host and an expiry
    (:func:`vsmtio_contract.workload.sign_measured`): server metadata is
    writable by the instance's owner, so nova-compute trusts only a value
    signed with the secret it shares with the agents, for the instance's
    host, not expired. Published only when ``measured_class_secret`` is
    set; signed afresh once half its lifetime has passed.
``vsmtio:retention_rate``, ``vsmtio:i_cpu``, ``vsmtio:runqueue_delay``
    the instance's vCPUs' mean context retention rate, MIST interference
    ratio and run-queue delay share over the last period, rounded so that
    noise does not rewrite them. A rate the host cannot measure is absent.
``vsmtio:measured_at``
    when these values were measured (UTC), rewritten with them.

Once per ``interval`` seconds per instance it reads back the instance's
metadata and writes only the keys whose value differs from what it
measured, from a worker thread so that a slow API never delays the agent's
period. Reading back is what repairs a value someone else wrote: the
instance's owner can write any of these keys (server metadata is theirs),
and the agent puts its own value back, or deletes a key it does not
publish, at its next round. What it reads is never input to the agent nor
trusted by it. Other ``vsmtio:`` keys are not the agent's and are left
alone. The per-host summary (instances per measured class) is in the
agent's status document (``vsmtio-agent status``).

The hook into the agent loop is one call per finished period,
:meth:`Publisher.observe` with the period's stats and decision.
"""

import datetime
import statistics
import threading
import time

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_log import log as logging

from vsmtio_agent.conf import publish as conf_publish
from vsmtio_agent import model
from vsmtio_contract import workload

LOG = logging.getLogger(__name__)

GROUP = conf_publish.GROUP
AUTH_GROUP = conf_publish.AUTH_GROUP
CLASS_KEY = workload.MEASURED_CLASS_KEY
RATE_KEYS = {
    # key: (VcpuStats attribute, decimals)
    'vsmtio:retention_rate': ('retention_rate', 3),
    'vsmtio:i_cpu': ('i_cpu', 2),
    'vsmtio:runqueue_delay': ('runqueue_delay_ratio', 3),
}
TIME_KEY = 'vsmtio:measured_at'
#: Every key the agent may write: nothing else is ever set or deleted.
KEYS = (CLASS_KEY,) + tuple(RATE_KEYS) + (TIME_KEY,)
#: Microversion of the compute API calls (metadata is unchanged since 2.1).
COMPUTE_MICROVERSION = '2.1'


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def instance_values(stats, decision, classify=True, now=None):
    """``{uuid: {key: value}}`` of one period: pure, bounded, rounded.

    The class (unsigned: :class:`Publisher` signs it when it writes) is the
    one RASS gave most of the instance's vCPUs (``io`` on a tie: an
    instance with an I/O-bound vCPU gains from retention); absent unless
    ``classify``.
    """
    by_domain = {}
    for ref, st in stats.items():
        by_domain.setdefault(ref.domain, []).append((ref, st))
    placements = decision.placements if decision is not None else {}
    stamp = (now or datetime.datetime.now(datetime.timezone.utc)).strftime(
        '%Y-%m-%dT%H:%M:%SZ')
    out = {}
    for domain, vcpus in by_domain.items():
        values = {}
        roles = [placements[ref].role for ref, _st in vcpus
                 if ref in placements]
        if roles and classify:
            io = sum(1 for r in roles if r is model.Role.IO)
            values[CLASS_KEY] = (workload.WorkloadClass.IO.value
                                 if io * 2 >= len(roles)
                                 else workload.WorkloadClass.CPU.value)
        for key, (attr, decimals) in RATE_KEYS.items():
            mean = _mean(getattr(st, attr) for _ref, st in vcpus)
            if mean is not None:
                values[key] = '%.*f' % (decimals, mean)
        if values:
            values[TIME_KEY] = stamp
        out[domain] = values
    return out


def changes(old, new, stamp=None):
    """``(to_set, to_delete)`` turning ``old`` (what is there) into ``new``.

    Only :data:`KEYS` are considered. A new time stamp alone is no change:
    when nothing else changes, the time stamp is put back to ``stamp`` (the
    one last written) if someone changed it.
    """
    new = {k: v for k, v in new.items() if k in KEYS}
    old = {k: v for k, v in (old or {}).items() if k in KEYS}
    changed = {k: v for k, v in new.items()
               if k != TIME_KEY and old.get(k) != v}
    gone = sorted(k for k in old if k not in new)
    if not changed and not gone:
        if (TIME_KEY in new and stamp is not None
                and old.get(TIME_KEY) != stamp):
            return {TIME_KEY: stamp}, []
        return {}, []
    if TIME_KEY in new:
        changed[TIME_KEY] = new[TIME_KEY]
    return changed, gone


class ComputeClient(object):
    """The compute API calls the publisher makes, via keystoneauth1."""

    def __init__(self, conf):
        auth = ks_loading.load_auth_from_conf_options(conf, AUTH_GROUP)
        session = ks_loading.load_session_from_conf_options(
            conf, AUTH_GROUP, auth=auth)
        self.adapter = ks_loading.load_adapter_from_conf_options(
            conf, AUTH_GROUP, session=session, auth=auth,
            service_type='compute', default_microversion=COMPUTE_MICROVERSION)

    def metadata(self, server):
        """The server's metadata as it is now (every key)."""
        resp = self.adapter.get('/servers/%s/metadata' % server,
                                raise_exc=True)
        return resp.json().get('metadata', {})

    def update(self, server, items):
        """Merge ``items`` into the server's metadata (other keys kept)."""
        self.adapter.post('/servers/%s/metadata' % server,
                          json={'metadata': items}, raise_exc=True)

    def delete(self, server, key):
        self.adapter.delete('/servers/%s/metadata/%s' % (server, key),
                            raise_exc=True)


class Publisher(object):
    """Consumes (stats, decision) per period; writes from its own thread."""

    def __init__(self, conf, client=None, clock=time.monotonic,
                 wallclock=time.time):
        self.opts = conf[GROUP]
        self.wallclock = wallclock
        self.dry_run = conf.vsmtio_agent.dry_run
        self.client = client
        self._conf = conf
        self.clock = clock
        self.published = {}    # uuid -> what the agent last wrote
        self.last_write = {}   # uuid -> clock() of that write
        self.skip_until = {}   # uuid -> clock(): not a server (404)
        self._pending = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = None
        self.writes = 0
        self.failures = 0
        if not self.opts.measured_class_secret:
            LOG.warning('[%s] measured_class_secret is unset: the measured '
                        'class is not published, only the rates', GROUP)
        elif self.opts.interval * 2 > self.opts.measured_class_lifetime:
            LOG.warning('[%s] interval (%s s) is more than half of '
                        'measured_class_lifetime (%s s): a measured class '
                        'may expire before the agent signs it again',
                        GROUP, self.opts.interval,
                        self.opts.measured_class_lifetime)

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='vsmtio-publish')
        self._thread.start()

    def stop(self, timeout=10.0):
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def observe(self, stats, decision):
        """The loop's hook: hand over one finished period (never blocks)."""
        values = instance_values(stats, decision,
                                 bool(self.opts.measured_class_secret))
        with self._lock:
            self._pending = values
        self._wake.set()

    def summary(self):
        """Per-host summary: instances per published class, writes."""
        classes = {}
        for values in self.published.values():
            cls = values.get(CLASS_KEY, 'unpublished').partition(':')[0]
            classes[cls] = classes.get(cls, 0) + 1
        return {'instances': len(self.published), 'classes': classes,
                'writes': self.writes, 'failures': self.failures}

    def _run(self):
        while not self._stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            with self._lock:
                values, self._pending = self._pending, None
            if values is not None:
                try:
                    self.publish(values)
                except Exception:  # the agent must go on whatever happens
                    LOG.exception('publishing measured state failed')

    def publish(self, values):
        """Repair and update instances whose interval has passed."""
        now = self.clock()
        for uuid in set(self.published) - set(values):
            # the instance left the host: forget it, write nothing
            self.published.pop(uuid, None)
            self.last_write.pop(uuid, None)
        order = sorted(values, key=lambda u: self.last_write.get(u, -1e18))
        for uuid in order[:self.opts.max_instances]:
            if now < self.skip_until.get(uuid, -1e18):
                continue
            if now - self.last_write.get(uuid, -1e18) < self.opts.interval:
                continue
            self._round(uuid, self._signed(uuid, values[uuid]), now)

    def _signed(self, uuid, values):
        """``values`` with its class signed for this host.

        The last signature is kept while the class is the same and over
        half its lifetime is left, so an unchanged class is not rewritten
        at every round.
        """
        cls = values.get(CLASS_KEY)
        if cls is None:
            return values
        values = dict(values)
        wall = int(self.wallclock())
        lifetime = self.opts.measured_class_lifetime
        last = (self.published.get(uuid) or {}).get(CLASS_KEY)
        parsed = workload.parse_measured(last)
        if (parsed is not None and parsed[0].value == cls
                and parsed[2] == self.opts.host
                and parsed[1] - wall > lifetime / 2):
            values[CLASS_KEY] = last
        else:
            values[CLASS_KEY] = workload.sign_measured(
                self.opts.measured_class_secret, uuid, cls, self.opts.host,
                wall + lifetime)
        return values

    def _round(self, uuid, values, now):
        """Read back what the server holds; write what differs."""
        if self.dry_run:
            to_set, to_delete = changes(self.published.get(uuid), values)
            if to_set or to_delete:
                LOG.info('dry run: would set %s and delete %s on server %s',
                         to_set, to_delete, uuid)
            self.published[uuid] = dict(values)
            self.last_write[uuid] = now
            return
        try:
            if self.client is None:
                self.client = ComputeClient(self._conf)
            there = self.client.metadata(uuid)
            ours = self.published.get(uuid) or {}
            to_set, to_delete = changes(there, values, ours.get(TIME_KEY))
            if to_set:
                self.client.update(uuid, to_set)
            for key in to_delete:
                try:
                    self.client.delete(uuid, key)
                except ks_exc.NotFound:
                    pass   # already gone: the same end state
        except ks_exc.NotFound:
            # a domain nova does not know (or an instance being deleted)
            LOG.debug('no server %s: not publishing for an interval', uuid)
            self.skip_until[uuid] = now + self.opts.interval
            return
        except ks_exc.ClientException as exc:
            self.failures += 1
            LOG.warning('cannot publish measured state of server %s: %s',
                        uuid, exc)
            self.last_write[uuid] = now   # retry after an interval
            return
        published = dict(values)
        if TIME_KEY in values and TIME_KEY in to_set:
            published[TIME_KEY] = to_set[TIME_KEY]
        elif TIME_KEY in there:
            published[TIME_KEY] = there[TIME_KEY]
        self.published[uuid] = published
        self.last_write[uuid] = now
        if to_set or to_delete:
            self.writes += 1
            repaired = sorted(k for k in list(to_set) + to_delete
                              if k in ours and there.get(k) != ours.get(k))
            if repaired:
                LOG.info('server %s: repaired %s, which someone else wrote',
                         uuid, repaired)
            LOG.debug('published %s on server %s', sorted(to_set), uuid)


def from_conf(conf):
    """A started :class:`Publisher`, or None when publishing is off.

    Off too where the options are not registered (a program that embeds
    the agent with its own ConfigOpts).
    """
    if GROUP not in conf or not conf[GROUP].enabled:
        return None
    publisher = Publisher(conf)
    publisher.start()
    return publisher
