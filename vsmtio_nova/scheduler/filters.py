"""``WorkloadMixFilter``: keep each host's I/O share within bounds.

Enable it in nova.conf::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = vsmtio_nova.scheduler.filters.WorkloadMixFilter
    enabled_filters = ...,WorkloadMixFilter
"""

from oslo_config import cfg
from oslo_log import log as logging

from nova.scheduler import filters
from nova.scheduler import utils

from vsmtio_nova import conf as vsmtio_conf
from vsmtio_nova import mix
from vsmtio_nova.scheduler import hostmix
from vsmtio_nova.scheduler import settings

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


def free_vcpus(host_state, vcpus):
    """vCPUs the host still has room for after placing ``vcpus``."""
    return mix.free_vcpus(host_state.vcpus_total,
                          host_state.cpu_allocation_ratio,
                          host_state.vcpus_used, vcpus)


class WorkloadMixFilter(filters.BaseHostFilter):
    """Keep every host able to end within its I/O share bounds.

    A host fails when this instance would push its share outside
    ``[min_io_fraction, max_io_fraction]`` so far that even filling the
    host's remaining vCPUs with the other class could not bring it back
    (:func:`~vsmtio_nova.mix.violates`): a full host is held to
    the band itself, a host with room may pass through it while a burst of
    one class arrives, and the weigher sends the other class there first.

    Only a host already holding ``filter_min_classified_vcpus`` classified
    vCPUs is judged. A request of class ``auto`` passes everywhere, and so
    does a host whose instances cannot be known (fail open: an unknown mix
    is no reason to refuse capacity). Instances of this request already
    placed on a host during a multi-create count (see
    :class:`~vsmtio_nova.scheduler.hostmix.RequestMixes`).
    """

    # A rebuild keeps the instance's flavor on its host: the mix is unchanged.
    RUN_ON_REBUILD = False

    def __init__(self):
        vsmtio_conf.check(CONF)

    def filter_all(self, filter_obj_list, spec_obj):
        # Judge the whole list at once: the request's flavors load in one
        # batch and the options are read once. The state stays local: one
        # filter object serves concurrent requests.
        hosts = list(filter_obj_list)
        if not hosts or (not self.RUN_ON_REBUILD and
                         utils.request_is_rebuild(spec_obj)):
            return hosts
        state = hostmix.TRACKER.request(spec_obj, hosts)
        opts = settings.options()
        passing, refused = [], []
        for host_state in hosts:
            refusal = self._judge(state, opts, host_state)
            if refusal is None:
                passing.append(host_state)
            else:
                refused.append(refusal)
        _log_refusals(spec_obj, state, refused, len(hosts))
        return passing

    def host_passes(self, host_state, spec_obj):
        state = hostmix.TRACKER.request(spec_obj, [host_state])
        refusal = self._judge(state, settings.options(), host_state)
        if refusal is not None:
            _log_refusals(spec_obj, state, [refusal], 1)
        return refusal is None

    @staticmethod
    def _judge(state, opts, host_state):
        """None where the host passes, else its refusal's numbers.

        Logs each refusal at debug with its reasoning; the caller logs the
        request's refusals together at info (``_log_refusals``).
        """
        if not state.classified:
            # Never refused, but the host is marked as seen by this
            # request (hostmix.Ledger): nova does not call the weighers
            # when a single host is left.
            state.mix(host_state)
            return None
        current, why = state.mix(host_state)
        if current is None:
            LOG.debug('%(host)s passes WorkloadMixFilter unjudged (fail '
                      'open): its mix is unknown: %(why)s',
                      {'host': host_state, 'why': why})
            return None
        low, high = settings.bounds(host_state, opts)
        broken = mix.violates(current, state.cls, state.vcpus, low, high,
                              opts.min_classified,
                              free_vcpus(host_state, state.vcpus))
        if broken is None:
            return None
        after, bound = broken
        refusal = {'host': host_state.host, 'vcpus': state.vcpus,
                   'cls': state.cls.value, 'before': current.share(),
                   'io': current.io, 'cpu': current.cpu, 'after': after,
                   'bound': bound, 'low': low, 'high': high,
                   'free': free_vcpus(host_state, state.vcpus)}
        LOG.debug('%(state)s fails WorkloadMixFilter: %(vcpus)d %(cls)s '
                  'vCPUs would move its I/O share from %(before).3f '
                  '(io=%(io)d cpu=%(cpu)d vCPUs) to %(after).3f, beyond '
                  '%(bound).3f of [%(low).3f, %(high).3f], with too few '
                  'free vCPUs to come back',
                  dict(refusal, state=host_state))
        return refusal


def _log_refusals(spec_obj, state, refused, judged):
    """One info line per request naming each refused host and its numbers.

    nova itself logs only that the filter returned fewer hosts; an operator
    reading the scheduler's log at its default level needs to see which
    hosts vsmtio turned away and why, without one line per host.
    """
    if not refused:
        return
    hosts = '; '.join(
        '%(host)s io:cpu %(io)d:%(cpu)d vCPUs, I/O share %(before).3f -> '
        '%(after).3f outside [%(low).3f, %(high).3f], %(free)g vCPUs free'
        % r for r in refused)
    LOG.info('WorkloadMixFilter refused %(n)d of %(judged)d hosts for '
             'instance %(uuid)s (%(vcpus)d %(cls)s vCPUs), each unable to '
             'come back within its band: %(hosts)s',
             {'n': len(refused), 'judged': judged,
              'uuid': getattr(spec_obj, 'instance_uuid', None),
              'vcpus': state.vcpus, 'cls': state.cls.value,
              'hosts': hosts})
