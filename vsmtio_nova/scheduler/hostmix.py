"""What one scheduling request knows of each host's I/O : CPU mix.

A host running :class:`~vsmtio_nova.compute.stats.MixStats` publishes its
mix in its node's stats, which nova reads into ``HostState.stats`` at every
request: the mix costs two dict lookups per host, warm or cold, and
:func:`summary` adds what this scheduler placed there since (the
:class:`Ledger`). That is the request path.

Hosts without the summary (a compute without ``MixStats``) fall back to
counting their instances: the filter and the weigher share one
:class:`RequestMixes` per request (a ``RequestSpec`` object), so the
flavors of those hosts' instances are loaded at most once per request, in
one cell-targeted batch per cell, never one query per instance or per
host; :class:`ClassCache` keeps what was loaded for later requests.
Those hosts' ``auto`` instances count with their agents' signed classes
as their computes would count them (:func:`vsmtio_nova.mix.counted_class`,
with every host's key derived from the root secret), and :data:`MEASURED`
keeps the last class verified for each until it expires.
"""

import collections
import threading
import time
import weakref

from oslo_config import cfg
from oslo_log import log as logging

from nova import context as nova_context
from nova import exception
from nova import objects

from vsmtio_contract import workload
from vsmtio_nova.compute import stats as mix_stats
from vsmtio_nova import conf as vsmtio_conf  # noqa: F401 (registers [vsmtio])
from vsmtio_nova import mix

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: Instance uuids per database query: bounds the ``IN`` clause of a batch.
BATCH_SIZE = 1000


def host_key(host_state):
    return host_state.host, host_state.nodename


class Ledger:
    """This scheduler's placements on one host since its stats were read.

    nova refreshes a ``HostState`` from its compute node only when the node
    was saved after the last refresh, and in between counts its own
    placements by incrementing ``num_instances`` in ``consume_from_request``
    (for every instance of a multi-create too). Until the host has claimed
    an instance its stats do not count it, so a burst of requests would all
    see the same mix. The ledger, kept on the ``HostState`` itself, turns
    each growth of ``num_instances`` into vCPUs of the class of the last
    request that looked at the host: the request that chose a host looked
    at it just before nova consumed it. When the host state is refreshed
    from its node (nova then replaces ``stats`` with the node's dict, and
    ``num_instances`` with the node's count) the stats count what the host
    claimed and the ledger starts again, as nova's ``num_instances`` does.
    (``updated`` is no marker: ``consume_from_request`` moves it too.)

    Concurrent requests looking at the same host in between may have a
    placement counted with the other's class, until the next refresh; the
    same window in which nova's own filters see each other's
    ``num_instances``.
    """

    __slots__ = ('stats', 'seen', 'io', 'cpu', 'cls', 'vcpus')

    def __init__(self, stats, seen):
        self.stats, self.seen = stats, seen
        self.io = self.cpu = self.vcpus = 0
        self.cls = None


_IO = workload.WorkloadClass.IO
_CPU = workload.WorkloadClass.CPU


def summary(host_state, cls, vcpus):
    """The host's published mix plus this scheduler's placements since.

    None when the host publishes no summary. Records the request (``cls``,
    ``vcpus``) as the host's last observer (see :class:`Ledger`).
    """
    stats = getattr(host_state, 'stats', None)
    io = stats.get(mix_stats.IO_VCPUS) if stats else None
    if io is None:
        return None
    try:
        io, cpu = int(io), int(stats.get(mix_stats.CPU_VCPUS, 0))
    except (TypeError, ValueError):
        return None
    num = host_state.num_instances or 0
    led = getattr(host_state, '_vsmtio_ledger', None)
    if led is None or led.stats is not stats:
        led = host_state._vsmtio_ledger = Ledger(stats, num)
    elif num > led.seen:
        if led.cls is _IO:
            led.io += (num - led.seen) * led.vcpus
        elif led.cls is _CPU:
            led.cpu += (num - led.seen) * led.vcpus
    led.seen, led.cls, led.vcpus = num, cls, vcpus
    return mix.Mix(io + led.io, cpu + led.cpu)


class ClassCache:
    """Instance uuid -> ``(WorkloadClass, vcpus)``, kept between requests.

    Loading instances with their flavors from a cell database costs far
    more than everything else the filter and weigher do
    (``doc/source/benchmarks/scheduler.rst`` measures it), and every
    request would reload every instance on every candidate host. An
    instance's flavor changes only on resize, so a loaded class is reused
    for ``[vsmtio] instance_class_cache_seconds``; a resized instance
    counts with its old class for at most that long. Entries are stamped
    when loaded and dropped once expired, so deleted instances do not
    accumulate. It holds the flavor's declared class: an ``auto``
    instance's measured class is kept, with its signed expiry, in
    :data:`MEASURED`, and counts from there while the entry is reused.
    """

    def __init__(self):
        self._entries = {}       # uuid -> (loaded at, (class, vcpus))
        self._pruned = float('-inf')

    def get(self, uuid, now, ttl):
        entry = self._entries.get(uuid)
        if entry is None or now - entry[0] >= ttl:
            return None
        return entry[1]

    def put(self, uuid, value, now):
        self._entries[uuid] = (now, value)

    def prune(self, now, ttl):
        """Drop expired entries, at most once per ``ttl``."""
        if now - self._pruned < ttl:
            return
        self._pruned = now
        for uuid, (stamp, _v) in list(self._entries.items()):
            if now - stamp >= ttl:
                self._entries.pop(uuid, None)

    def clear(self):
        self._entries.clear()

    def __len__(self):
        return len(self._entries)


#: The class cache of this scheduler process.
CACHE = ClassCache()

#: The last verified measured class of each instance this scheduler
#: process counted (hosts without a published mix only).
MEASURED = mix.MeasuredMemory()


def _roots():
    return (CONF.vsmtio.measured_class_secret,
            CONF.vsmtio.measured_class_previous_secret)


class RequestMixes:
    """One request's view of host mixes.

    For each host it keeps, from the first time the request sees it:

    * the mix of the instances already there. ``HostState.instances``
      usually holds stubs without a flavor, so the flavors of every unseen
      host's instances not in :data:`CACHE` are loaded in one batch per
      cell each time the filter or the weigher is handed a host list; the
      filter and the weigher share this object, so after the first call
      nothing is left to load.
      A snapshot: instances arriving on a host during the request are the
      next request's business.
    * its ``num_instances``. For every instance of a multi-create nova calls
      ``consume_from_request`` on the chosen host, which increments
      ``num_instances`` but, without a server group, leaves ``instances``
      alone. The growth since first sight is therefore the number of this
      request's instances already placed on the host, all of the request's
      flavor. (A concurrent request consuming the same host in between is
      counted as this one's: nova's own filters share that view until the
      host state is refreshed.)

    This request's own instances are never counted as instances on a host:
    the stub nova adds for a server group, or the instance itself on its
    source host during a resize, is replaced by the request's flavor.
    """

    def __init__(self, spec_obj):
        self.cls, self.vcpus = mix.classify_flavor(spec_obj.flavor)
        self._hosts = {}         # host key -> (Mix or None, baseline, why)
        self._classes = {}       # uuid -> (WorkloadClass, vcpus) or None
        self._own = set()        # this request's instance uuids
        self._failed_cells = {}  # cell uuid -> why its flavors are unknown
        self._ttl = CONF.vsmtio.instance_class_cache_seconds
        self._roots = [r for r in _roots() if r]
        self._keys = {}          # host -> its keys, derived from the roots
        self._now = int(time.time())

    def _counted(self, uuid, declared, host, value):
        """``(class, vcpus)`` as the instance's compute counts it."""
        cls, vcpus = declared
        if cls is not workload.WorkloadClass.AUTO or not self._roots:
            return declared
        keys = self._keys.get(host)
        if keys is None:
            keys = self._keys[host] = workload.host_keys(self._roots, host)
        counted = mix.counted_class(cls, vcpus, uuid, value, host, keys,
                                    self._now, MEASURED)
        return counted.cls, counted.vcpus

    @property
    def classified(self):
        """Whether the request declares a class the scheduler can use."""
        return self.cls is not workload.WorkloadClass.AUTO and self.vcpus > 0

    def see(self, spec_obj, host_states):
        """Take in the current instance of the request and its hosts."""
        if spec_obj.obj_attr_is_set('instance_uuid') and \
                spec_obj.instance_uuid:
            self._own.add(spec_obj.instance_uuid)
        # Hosts publishing their mix need nothing loaded.
        new = [hs for hs in host_states
               if mix_stats.IO_VCPUS not in (getattr(hs, 'stats', None) or ())
               and host_key(hs) not in self._hosts]
        if not new:
            return
        now = time.monotonic()
        wanted = collections.defaultdict(set)
        for hs in new:
            for uuid, inst in hs.instances.items():
                if uuid in self._classes or uuid in self._own:
                    continue
                if inst.obj_attr_is_set('flavor'):
                    value = None
                    if inst.obj_attr_is_set('metadata'):
                        value = (inst.metadata or {}).get(
                            workload.MEASURED_CLASS_KEY)
                    self._classes[uuid] = self._counted(
                        uuid, mix.classify_flavor(inst.flavor), hs.host,
                        value)
                    continue
                cached = self._ttl and CACHE.get(uuid, now, self._ttl)
                if cached:
                    # the declared class; a measured one is remembered
                    self._classes[uuid] = self._counted(uuid, cached,
                                                        hs.host, None)
                elif hs.cell_uuid and hs.cell_uuid not in self._failed_cells:
                    wanted[hs.cell_uuid].add(uuid)
        if wanted:
            ctxt = nova_context.get_admin_context()
            for cell_uuid, uuids in wanted.items():
                self._load_cell(ctxt, cell_uuid, sorted(uuids), now)
        if self._ttl:
            CACHE.prune(now, self._ttl)
        if self._roots:
            MEASURED.prune(self._now)
        for hs in new:
            self._hosts[host_key(hs)] = self._base(hs)

    def _load_cell(self, ctxt, cell_uuid, uuids, now):
        # the metadata only where measured classes count
        attrs = ['flavor', 'metadata'] if self._roots else ['flavor']
        try:
            cell = objects.CellMapping.get_by_uuid(ctxt, cell_uuid)
            with nova_context.target_cell(ctxt, cell) as cctxt:
                for i in range(0, len(uuids), BATCH_SIZE):
                    found = objects.InstanceList.get_by_filters(
                        cctxt, {'uuid': uuids[i:i + BATCH_SIZE],
                                'deleted': False},
                        expected_attrs=attrs)
                    for inst in found:
                        known = mix.classify_flavor(inst.flavor)
                        value = None
                        if self._roots:
                            value = (inst.metadata or {}).get(
                                workload.MEASURED_CLASS_KEY)
                        self._classes[inst.uuid] = self._counted(
                            inst.uuid, known, inst.host, value)
                        if self._ttl:
                            CACHE.put(inst.uuid, known, now)
        except exception.CellMappingNotFound:
            self._failed_cells[cell_uuid] = 'cell %s is not mapped' % cell_uuid
            return
        except Exception as e:  # a database error must not fail scheduling
            LOG.warning('vsmtio: cannot load the flavors of %d instances in '
                        'cell %s, treating their hosts as unknown: %s',
                        len(uuids), cell_uuid, e)
            self._failed_cells[cell_uuid] = 'loading flavors failed: %s' % e
            return
        for uuid in uuids:
            # Deleted since the host state was built, or not yet in the cell
            # database: nothing to count in this request (and not cached:
            # a building instance appears later).
            self._classes.setdefault(uuid, None)

    def _base(self, host_state):
        """``(Mix or None, num_instances, why unknown)`` at first sight."""
        baseline = host_state.num_instances or 0
        io = cpu = 0
        for uuid in host_state.instances:
            if uuid in self._own:
                continue
            try:
                known = self._classes[uuid]
            except KeyError:
                return None, baseline, self._why_unknown(host_state)
            if known is None:
                continue
            cls, vcpus = known
            if cls is workload.WorkloadClass.IO:
                io += vcpus
            elif cls is workload.WorkloadClass.CPU:
                cpu += vcpus
        return mix.Mix(io, cpu), baseline, None

    def _why_unknown(self, host_state):
        if not host_state.cell_uuid:
            return 'the host state has no cell'
        return self._failed_cells.get(
            host_state.cell_uuid, 'its instances were never loaded')

    def mix(self, host_state):
        """The host's mix including this request's placements so far.

        Returns ``(Mix, None)``, or ``(None, reason)`` when the host's
        instances are unknown.
        """
        published = summary(host_state, self.cls, self.vcpus)
        if published is not None:
            return published, None
        try:
            base, baseline, why = self._hosts[host_key(host_state)]
        except KeyError:
            return None, 'the request never saw the host'
        if base is None:
            return None, why
        placed = (host_state.num_instances or 0) - baseline
        if placed > 0:
            base = base.plus(self.cls, placed * self.vcpus)
        return base, None


class Tracker:
    """Hands out one :class:`RequestMixes` per ``RequestSpec`` object.

    nova builds one such object per ``select_destinations`` call and passes
    it to every filter and weigher, for each instance and for the
    alternates; so the filter and the weigher share the request's state.
    The spec is held weakly: the state dies with it, and a recycled object
    id never meets a stale state.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._requests = weakref.WeakKeyDictionary()

    def request(self, spec_obj, host_states):
        with self._lock:
            state = self._requests.get(spec_obj)
            if state is None:
                state = self._requests[spec_obj] = RequestMixes(spec_obj)
        state.see(spec_obj, host_states)
        return state


#: The one tracker of this scheduler process.
TRACKER = Tracker()
