"""``ContextRetentionFilter``: no retention request that cannot be given.

Placement is what sends a context-retention flavor to hosts that can give
it: the flavor carries ``trait:CUSTOM_VSMTIO_CONTEXT_RETENTION=required``
and only hosts advertising the trait are candidates
(:mod:`vsmtio_nova.capability`). A retaining guest holds its CPUs while it
idles, so it must also own them: the flavor carries
``hw:cpu_policy=dedicated``. A flavor that asks for retention without
either would be offered hosts where it cannot be honoured; this filter
refuses such a request at once (never boots without what it asked for,
never holds shared CPUs), and says which extra spec is missing where the
user and the operator look: the server's fault and its ``create`` action.

nova lets a filter only pass or fail a host, and a request every host
fails ends with ``No valid host was found.`` and no reason. Since the
answer depends on the flavor alone, the filter raises nova's
``NoValidHost`` with the reason instead of failing the first host: the
scheduler passes that exception to the conductor, which writes its message
as the instance's fault and as the details of its failed
``conductor_schedule_and_build_instances`` event (doc/source/nova_seams.rst,
checked by ``tests/unit/test_nova_seams.py``).

Why a filter and not nova-api's extra spec validator: nova validates each
extra spec on its own (``validators.validate(name, value)``), so a
validator cannot see a second key, and extra specs may be set one at a time
in any order. The filter sees the whole flavor. (A guest that asks through
its image is not given retention at all: only the flavor enables it.)
"""

from oslo_log import log as logging

from nova import exception
from nova.scheduler import filters

from vsmtio_nova import capability
from vsmtio_nova import faults

LOG = logging.getLogger(__name__)


class ContextRetentionFilter(filters.BaseHostFilter):
    """Refuse a flavor asking for retention it cannot be given."""

    # The answer depends on the flavor only.
    run_filter_once_per_request = True
    # A rebuild keeps its host and its flavor.
    RUN_ON_REBUILD = False

    def host_passes(self, host_state, spec_obj):
        flavor = spec_obj.flavor
        specs = flavor.extra_specs
        if not capability.flavor_asks(specs, 'flavor %s' % flavor.name):
            return True
        why = capability.why_not_honoured(specs)
        if why is None:
            return True
        reason = 'vsmtio: context retention refused: %s' % why
        context = 'flavor %s' % flavor.name
        LOG.warning('%s (%s). Refusing every host.', reason, context)
        # The fault keeps what is missing whatever the flavor's name.
        raise exception.NoValidHost(reason=faults.reason_within(
            exception.NoValidHost, reason, context))
