"""``WorkloadMixWeigher``: prefer the placement that helps the fleet most.

Enable it in nova.conf: add
``vsmtio_nova.scheduler.weights.WorkloadMixWeigher`` to
``[filter_scheduler] weight_classes``, one comma-separated list that keeps
``nova.scheduler.weights.all_weighers`` (see ``doc/source/scheduler.rst``).
"""

from nova.scheduler import weights

from vsmtio_nova import conf as vsmtio_conf
from vsmtio_nova import mix
from vsmtio_nova.scheduler import hostmix
from vsmtio_nova.scheduler import settings


class WorkloadMixWeigher(weights.BaseHostWeigher):
    """Prefer the placement that brings the fleet closest to its target.

    Weight = how much placing this instance decreases the host's squared
    imbalance (its I/O vCPUs above the host's target share, ``[vsmtio]
    target_io_fraction`` or aggregate ``vsmtio:target_io_fraction``), that
    is the decrease of the fleet's total (:func:`~vsmtio_nova.scheduler.
    mix.weigh`). Scoring the change rather than where the host ends keeps
    hosts from being stranded by the order of arrivals.

    A request of class ``auto`` gets the same weight on every host
    (neutral: nova normalises equal weights to 0), but still marks the
    hosts it saw (see :class:`~vsmtio_nova.scheduler.hostmix.Ledger`). A
    host whose instances cannot be known is weighed as an empty host.
    Instances of this request already placed during a multi-create count.
    """

    def __init__(self):
        super().__init__()
        # a bad [vsmtio] value stops the scheduler's start, in one line
        vsmtio_conf.check()

    def weight_multiplier(self, host_state):
        return settings.multiplier(host_state)

    def weigh_objects(self, weighed_obj_list, weight_properties):
        hosts = [w.obj for w in weighed_obj_list]
        state = hostmix.TRACKER.request(weight_properties, hosts)
        opts = settings.options()
        return [self._weight(state, opts, host) for host in hosts]

    def _weigh_object(self, host_state, weight_properties):
        state = hostmix.TRACKER.request(weight_properties, [host_state])
        return self._weight(state, settings.options(), host_state)

    @staticmethod
    def _weight(state, opts, host_state):
        current, _why = state.mix(host_state)
        if not state.classified:
            return 0.0
        if current is None:
            current = mix.Mix()
        return mix.weigh(current, state.cls, state.vcpus,
                         settings.target(host_state, opts))
