"""Each host's I/O : CPU mix, kept by nova-compute in its node's stats.

The scheduler must know every candidate host's mix at every request.
Counting it there means classifying every instance on every host, and
``HostState.instances`` holds uuids without flavors: the flavors would be
loaded from the cell databases on the request path, a cost per instance
and per request (``doc/source/benchmarks/scheduler.rst`` measures it). So the
host counts its own mix instead, where
nova counts ``num_instances``: :class:`MixStats` extends nova's
``nova.compute.stats.Stats``, the dict the resource tracker keeps per node
and saves as ``ComputeNode.stats``, which the scheduler reads into
``HostState.stats`` at every request anyway. The scheduler then reads two
numbers per host (:data:`IO_VCPUS`, :data:`CPU_VCPUS`).

Consistency: the resource tracker calls ``update_stats_for_instance`` for
every claim, every instance state change and every removal, under its
lock, and saves the node with the stats it changed; its periodic task
clears the stats and recounts every instance. The mix therefore moves in
the same save as nova's own ``num_instances`` (which ``NumInstancesFilter``
trusts), is never further behind than it, and any drift is repaired by
the next periodic task. Between a scheduling decision and the claim on the
host the scheduler counts its own placements itself (see
:mod:`vsmtio_nova.scheduler.hostmix`), as nova does for ``num_instances``.

A host that does not run :class:`MixStats` (not installed, or an older
compute) has no summary; the scheduler then falls back to loading its
instances' flavors.
"""

import types

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

from nova.compute import resource_tracker
from nova.compute import stats as compute_stats

from vsmtio_contract import specs
from vsmtio_contract import workload
from vsmtio_nova import conf as vsmtio_conf  # noqa: F401 (registers [vsmtio])
from vsmtio_nova import mix

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: ``ComputeNode.stats`` keys: vCPUs counted I/O-bound and CPU-bound.
IO_VCPUS = 'vsmtio_io_vcpus'
CPU_VCPUS = 'vsmtio_cpu_vcpus'


#: (instance uuid, value) pairs already warned about: a forged or stale
#: value is said once, not at every periodic recount.
_WARNED = specs.OnceEach()


def _host(instance):
    host = instance.host if instance.obj_attr_is_set('host') else None
    return host or CONF.host


def host_keys(host, conf=CONF):
    """The keys this nova-compute verifies ``host``'s instances with.

    ``[vsmtio] measured_class_host_keys``: this host's own keys (they
    verify nothing signed for another host). A compute configured the way
    earlier releases were, with the root secret (``measured_class_secret``)
    only, derives the key of the instance's ``host`` from it, and says
    once that it holds what lets a host sign for every host.
    """
    keys = [k for k in (conf.vsmtio.measured_class_host_keys or []) if k]
    if keys:
        return keys
    roots = (conf.vsmtio.measured_class_secret,
             conf.vsmtio.measured_class_previous_secret)
    if not any(roots):
        return []
    if _WARNED.first('root secret on a compute host'):
        LOG.warning('vsmtio: [vsmtio] measured_class_secret (the root '
                    'secret) is set on compute host %s and '
                    'measured_class_host_keys is not: this host derives its '
                    'own key from it, and anyone who reads this file can '
                    'sign classes for every host. Set measured_class_host_'
                    'keys (vsmtio-nova-conf host-key) and remove the root '
                    'secret here.', conf.host)
    return workload.host_keys(roots, host)


def classify(instance, keys, now=None, memory=None):
    """``(WorkloadClass, vcpus)`` the host counts an instance with.

    The flavor's declared class; for an ``auto`` flavor the rule of
    :func:`vsmtio_nova.mix.counted_class`: the class the agent measured
    when :data:`~vsmtio_contract.workload.MEASURED_CLASS_KEY` carries a
    value signed with one of ``keys`` (this host's) for this instance on
    its host and not expired at ``now``, else the last such class
    ``memory`` verified, until it expires (server metadata is writable by
    the instance's owner: deleting, forging or replaying the value changes
    nothing that counts); an untrusted value is logged once per instance
    and value. The metadata is read only for ``auto`` flavors and only
    with keys set, so declared instances cost no metadata load.
    """
    cls, vcpus = mix.classify_flavor(instance.flavor)
    if cls is not workload.WorkloadClass.AUTO or not keys:
        return cls, vcpus
    try:
        value = (instance.metadata or {}).get(workload.MEASURED_CLASS_KEY)
    except Exception as e:  # a failed lazy load must not break accounting
        LOG.debug('vsmtio: no metadata for instance %s: %s',
                  instance.uuid, e)
        value = None
    now = timeutils.utcnow_ts() if now is None else now
    counted = mix.counted_class(
        cls, vcpus, instance.uuid, value, _host(instance), keys, now,
        mix.MeasuredMemory() if memory is None else memory)
    if (value is not None and counted.why
            and _WARNED.first((instance.uuid, value))):
        LOG.warning('vsmtio: instance %s has %s=%r that is not trusted '
                    '(%s); counting it with %s', instance.uuid,
                    workload.MEASURED_CLASS_KEY, value, counted.why,
                    'the class last verified (%s)' % counted.cls.value
                    if counted.source == mix.REMEMBERED
                    else 'its declared class')
    return counted.cls, counted.vcpus


class MixStats(compute_stats.Stats):
    """nova's per-node stats plus the node's I/O and CPU vCPUs.

    ``measured`` keeps each instance's last verified measured class across
    the periodic recounts (which :meth:`clear` starts), so that the node's
    mix moves only with a new verified class or an expiry, never because
    the instance's owner deleted or rewrote its key.
    """

    def __init__(self):
        super().__init__()
        self.classes = {}   # uuid -> (WorkloadClass, vcpus) counted
        self.measured = mix.MeasuredMemory()
        self._reset_mix()

    def _reset_mix(self):
        self.classes.clear()
        self[IO_VCPUS] = self[CPU_VCPUS] = 0

    def clear(self):
        super().clear()
        self._reset_mix()
        self.measured.prune(timeutils.utcnow_ts())

    def update_stats_for_instance(self, instance, is_removed=False):
        super().update_stats_for_instance(instance, is_removed)
        uuid = instance['uuid']
        self._count(self.classes.pop(uuid, None), -1)
        if uuid not in self.states:  # removed (nova popped its state)
            self.measured.forget(uuid)
            return
        try:
            known = classify(instance, host_keys(_host(instance)),
                             memory=self.measured)
        except Exception as e:
            # An instance without a loadable flavor is not counted; the
            # next periodic recount tries again (and says so once).
            if _WARNED.first((uuid, str(e))):
                LOG.warning('vsmtio: cannot classify instance %s: %s',
                            uuid, e)
            return
        self.classes[uuid] = known
        self._count(known, 1)

    def _count(self, known, sign):
        if known is None:
            return
        cls, vcpus = known
        if cls is workload.WorkloadClass.IO:
            self[IO_VCPUS] += sign * vcpus
        elif cls is workload.WorkloadClass.CPU:
            self[CPU_VCPUS] += sign * vcpus


def install():
    """Make nova's resource tracker keep :class:`MixStats` per node.

    The tracker builds its per-node stats from ``compute_stats.Stats``, its
    only use of that module, when it is created; so this must run before
    nova-compute starts its manager (``vsmtio-nova-compute`` does). Only
    the tracker's reference is replaced: ``nova.compute.stats.Stats`` itself
    must stay nova's class, whose methods name it in their ``super()``
    calls.
    """
    resource_tracker.compute_stats = types.SimpleNamespace(Stats=MixStats)
