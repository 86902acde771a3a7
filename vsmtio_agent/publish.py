"""Publish each instance's signed measured class as server metadata.

The scheduler counts an ``auto`` instance with the class the agent
measured, and the one channel nova's scheduler and computes read per
instance is the instance itself: so the class, and only the class, is
server metadata. Per instance the agent writes at most :data:`KEYS`:

``vsmtio:measured_class``
    ``io`` or ``cpu`` with an HMAC signature that binds the instance, the
    class, this host and an expiry
    (:func:`vsmtio_contract.workload.sign_measured`), under this host's
    own key (``measured_class_key``, derived from the controllers' root
    secret for this host's name): server metadata is writable by the
    instance's owner, so nova trusts only a value signed with the key of
    the instance's host, not expired. Published only when a key is set;
    signed afresh once half its lifetime has passed.

Everything else the agent measures (retention rate, MIST's I_cpu,
run-queue delay, per vCPU) is in its OpenMetrics export
(:mod:`vsmtio_agent.metrics`), where operators read it: server metadata is
the tenant's (they see it, may edit or delete it, and it counts against
their quota), and a measurement there would be neither private nor
trustworthy. Earlier releases wrote those rates as metadata too
(:data:`FORMER_KEYS`): the agent deletes them where it finds them.

Once per ``interval`` seconds per instance it reads back the instance's
metadata and writes only what differs from what it measured, from a worker
thread so that a slow API never delays the agent's period. Reading back is
what repairs a value someone else wrote: the instance's owner can write
the key (server metadata is theirs), and the agent puts its own value
back at its next round. What it reads is never input to the agent nor
trusted by it. Other ``vsmtio:`` keys are not the agent's and are left
alone. The per-host summary (instances per measured class) is in the
agent's status document (``vsmtio-agent status``).

The agent's credentials are no admin's: by default
(``token_scope = instance``) it asks keystone for a token scoped to each
instance's own project (nova's owner, from the domain XML), where its user
holds only the ``vsmtio-agent`` role, which vsmtio's nova policy lets read,
set and delete server metadata and nothing else (``doc/source/install.rst``).

The hook into the agent loop is one call per finished period,
:meth:`Publisher.observe` with the period's stats, decision and tenancy.
"""

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
#: Every key the agent may write: nothing else is ever set.
KEYS = (CLASS_KEY,)
#: Keys earlier releases wrote (measurements, now metrics only): deleted
#: where found, so that an upgrade leaves no stale measurement behind.
FORMER_KEYS = ('vsmtio:retention_rate', 'vsmtio:i_cpu',
               'vsmtio:runqueue_delay', 'vsmtio:measured_at')
#: Microversion of the compute API calls (metadata is unchanged since 2.1).
COMPUTE_MICROVERSION = '2.1'


def instance_values(stats, decision, classify=True):
    """``{uuid: {key: value}}`` of one period: pure.

    The class (unsigned: :class:`Publisher` signs it when it writes) is the
    one RASS gave most of the instance's vCPUs (``io`` on a tie: an
    instance with an I/O-bound vCPU gains from retention); absent unless
    ``classify``. Every domain with a sampled vCPU has an entry, empty
    when there is nothing to publish, so that its former keys are deleted.
    """
    by_domain = {}
    for ref in stats:
        by_domain.setdefault(ref.domain, []).append(ref)
    placements = decision.placements if decision is not None else {}
    out = {}
    for domain, refs in by_domain.items():
        values = {}
        roles = [placements[ref].role for ref in refs if ref in placements]
        if roles and classify:
            io = sum(1 for r in roles if r is model.Role.IO)
            values[CLASS_KEY] = (workload.WorkloadClass.IO.value
                                 if io * 2 >= len(roles)
                                 else workload.WorkloadClass.CPU.value)
        out[domain] = values
    return out


def changes(old, new):
    """``(to_set, to_delete)`` turning ``old`` (what is there) into ``new``.

    Only :data:`KEYS` are set; a key of :data:`KEYS` that ``new`` lacks
    and every one of :data:`FORMER_KEYS` are deleted where present.
    """
    new = {k: v for k, v in new.items() if k in KEYS}
    old = old or {}
    to_set = {k: v for k, v in new.items() if old.get(k) != v}
    to_delete = sorted(k for k in KEYS + FORMER_KEYS
                       if k in old and k not in new)
    return to_set, to_delete


#: The auth options that say a token's scope: replaced by the instance's
#: project where the token is scoped per instance.
SCOPE_OPTIONS = ('project_id', 'project_name', 'project_domain_id',
                 'project_domain_name', 'domain_id', 'domain_name',
                 'system_scope', 'trust_id')


def scope_overrides(auth_type, project):
    """keystoneauth1 options scoping ``auth_type``'s token to ``project``.

    Raises ValueError for an auth type that cannot be scoped to a project
    of the agent's choosing (an application credential is bound to one).
    """
    dests = {o.dest for o in
             ks_loading.get_plugin_loader(auth_type).get_options()}
    # an application credential is bound to the project it was made in
    if 'project_id' not in dests or 'application_credential_id' in dests:
        raise ValueError(
            '[%s] auth_type = %s cannot scope a token to an instance\'s '
            'project, which [%s] token_scope = instance needs (use '
            'password)' % (AUTH_GROUP, auth_type, GROUP))
    overrides = {d: None for d in SCOPE_OPTIONS if d in dests}
    overrides['project_id'] = project
    return overrides


class ComputeClient(object):
    """The compute API calls the publisher makes, via keystoneauth1.

    One session; one auth plugin and adapter per project the agent's
    token is scoped to (``token_scope = instance``), or one for the
    configured scope (``credentials``). keystoneauth1 keeps each token
    until it is about to expire.
    """

    def __init__(self, conf):
        self._conf = conf
        self._per_instance = conf[GROUP].token_scope == 'instance'
        self._session = None
        self._adapters = {}   # project (None: the configured scope)

    def _adapter(self, project):
        scope = project if self._per_instance else None
        if self._per_instance and not project:
            raise ValueError('its project is not known (no nova owner in '
                             'its domain XML)')
        adapter = self._adapters.get(scope)
        if adapter is not None:
            return adapter
        conf = self._conf
        group = conf[AUTH_GROUP].auth_section or AUTH_GROUP
        overrides = {}
        if scope is not None:
            overrides = scope_overrides(conf[group].auth_type, scope)
        auth = ks_loading.load_auth_from_conf_options(conf, AUTH_GROUP,
                                                      **overrides)
        if self._session is None:
            self._session = ks_loading.load_session_from_conf_options(
                conf, AUTH_GROUP)
        adapter = self._adapters[scope] = (
            ks_loading.load_adapter_from_conf_options(
                conf, AUTH_GROUP, session=self._session, auth=auth,
                service_type='compute',
                default_microversion=COMPUTE_MICROVERSION))
        return adapter

    def metadata(self, server, project=None):
        """The server's metadata as it is now (every key)."""
        resp = self._adapter(project).get('/servers/%s/metadata' % server,
                                          raise_exc=True)
        return resp.json().get('metadata', {})

    def update(self, server, items, project=None):
        """Merge ``items`` into the server's metadata (other keys kept)."""
        self._adapter(project).post('/servers/%s/metadata' % server,
                                    json={'metadata': items},
                                    raise_exc=True)

    def delete(self, server, key, project=None):
        self._adapter(project).delete(
            '/servers/%s/metadata/%s' % (server, key), raise_exc=True)


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
        self.projects = {}     # uuid -> its nova project, from the host
        self.key = self.opts.measured_class_key
        if not self.key and self.opts.measured_class_secret:
            LOG.warning('[%s] measured_class_secret (the root secret) is '
                        'set on this host and measured_class_key is not: '
                        'this host\'s key is derived from it, and anyone '
                        'who reads this file can sign classes for every '
                        'host. Set measured_class_key (vsmtio-nova-conf '
                        'host-key) and remove the root secret here.',
                        GROUP)
            self.key = workload.derive_host_key(
                self.opts.measured_class_secret, self.opts.host)
        if not self.key:
            LOG.warning('[%s] measured_class_key is unset: the measured '
                        'class is not published (the agent only deletes '
                        'the measurements earlier releases published)',
                        GROUP)
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

    def observe(self, stats, decision, tenancy=None):
        """The loop's hook: hand over one finished period (never blocks).

        ``tenancy`` is the period's ``{domain: Tenancy}``: each instance's
        project, which its token is scoped to.
        """
        values = instance_values(stats, decision, bool(self.key))
        projects = {uuid: getattr((tenancy or {}).get(uuid), 'project',
                                  None) for uuid in values}
        with self._lock:
            self._pending = (values, projects)
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
                pending, self._pending = self._pending, None
            if pending is not None:
                try:
                    self.publish(*pending)
                except Exception:  # the agent must go on whatever happens
                    LOG.exception('publishing measured state failed')

    def publish(self, values, projects=None):
        """Repair and update instances whose interval has passed.

        ``projects`` maps an instance to its nova project (None or absent:
        not known, and with ``token_scope = instance`` not published).
        """
        now = self.clock()
        self.projects = dict(projects or {})
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
            if not values[uuid] and self.published.get(uuid) == {}:
                continue   # nothing to publish, former keys deleted once
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
                self.key, uuid, cls, self.opts.host, wall + lifetime)
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
        project = self.projects.get(uuid)
        if project is None and self.opts.token_scope == 'instance':
            self.failures += 1
            LOG.warning('cannot publish measured state of server %s: its '
                        'project is not known (no nova owner in its domain '
                        'XML), and [%s] token_scope = instance scopes its '
                        'token to it', uuid, GROUP)
            self.last_write[uuid] = now   # retry after an interval
            return
        try:
            if self.client is None:
                self.client = ComputeClient(self._conf)
            there = self.client.metadata(uuid, project)
            ours = self.published.get(uuid) or {}
            to_set, to_delete = changes(there, values)
            if to_set:
                self.client.update(uuid, to_set, project)
            for key in to_delete:
                try:
                    self.client.delete(uuid, key, project)
                except ks_exc.NotFound:
                    pass   # already gone: the same end state
        except ValueError as exc:
            # no project to scope to, or an auth type that cannot scope
            self.failures += 1
            LOG.warning('cannot publish measured state of server %s: %s',
                        uuid, exc)
            self.last_write[uuid] = now   # retry after an interval
            return
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
        self.published[uuid] = dict(values)
        self.last_write[uuid] = now
        if to_set or to_delete:
            self.writes += 1
            repaired = sorted(k for k in list(to_set) + to_delete
                              if k in ours and there.get(k) != ours.get(k))
            if repaired:
                LOG.info('server %s: repaired %s, which someone else wrote',
                         uuid, repaired)
            self._log_change(uuid, ours, to_set, to_delete)

    @staticmethod
    def _log_change(uuid, ours, to_set, to_delete):
        """INFO once per change of what is published; DEBUG a re-signing."""
        cls = to_set.get(CLASS_KEY)
        before = (ours.get(CLASS_KEY) or '').partition(':')[0] or None
        if cls is not None and cls.partition(':')[0] != before:
            LOG.info('server %s: published measured class %s (was %s)',
                     uuid, cls.partition(':')[0], before or 'none')
        elif cls is not None:
            LOG.debug('server %s: signed measured class %s afresh',
                      uuid, before)
        if to_delete:
            LOG.info('server %s: deleted %s', uuid, ', '.join(to_delete))


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
