"""``ContextRetentionFilter``: no retention request that cannot be given.

Placement is what sends a context-retention flavor to hosts that can give
it: the flavor carries ``trait:CUSTOM_VSMTIO_CONTEXT_RETENTION=required``
and only hosts advertising the trait are candidates
(:mod:`vsmtio_nova.capability`). A retaining guest holds its CPUs while it
idles, so it must also own them: the flavor carries
``hw:cpu_policy=dedicated``. A flavor that asks for retention without
either would be offered hosts where it cannot be honoured; this filter
refuses every host to such a request, so it fails with NoValidHost at once
(never boots without what it asked for, never holds shared CPUs), and the
scheduler log says which extra spec is missing.

Why a filter and not nova-api's extra spec validator: nova validates each
extra spec on its own (``validators.validate(name, value)``), so a
validator cannot see a second key, and extra specs may be set one at a time
in any order. The filter sees the whole flavor. (A guest that asks through
its image is not given retention at all: only the flavor enables it.)
"""

from oslo_log import log as logging

from nova.scheduler import filters

from vsmtio_nova import capability

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
        LOG.warning('Flavor %(flavor)s asks for context retention but it '
                    'cannot be honoured: %(why)s. Refusing %(host)s.',
                    {'flavor': flavor.name, 'why': why, 'host': host_state})
        return False
