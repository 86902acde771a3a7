"""``ContextRetentionFilter``: no retention request without its trait.

Placement is what sends a context-retention flavor to hosts that can give
it: the flavor carries ``trait:CUSTOM_VSMTIO_CONTEXT_RETENTION=required``
and only hosts advertising the trait are candidates
(:mod:`vsmtio_nova.capability`). A flavor that asks for retention without
that trait would be offered every host, plain ones too; this filter refuses
every host to such a request, so it fails with NoValidHost at once, and the
scheduler log says which extra spec is missing.

Why a filter and not nova-api's extra spec validator: nova validates each
extra spec on its own (``validators.validate(name, value)``), so a
validator cannot see a second key, and extra specs may be set one at a time
in any order. The filter sees the whole flavor. (A guest that asks through
its image, not its flavor, is covered by the compute driver, which refuses
to start it on a host that cannot retain, so nova reschedules it.)
"""

from oslo_log import log as logging

from nova.scheduler import filters

from vsmtio_nova import capability

LOG = logging.getLogger(__name__)


class ContextRetentionFilter(filters.BaseHostFilter):
    """Refuse a flavor asking for retention without requiring the trait."""

    # The answer depends on the flavor only.
    run_filter_once_per_request = True
    # A rebuild keeps its host and its flavor.
    RUN_ON_REBUILD = False

    def host_passes(self, host_state, spec_obj):
        specs = spec_obj.flavor.extra_specs
        if (not capability.flavor_asks(specs)
                or capability.flavor_requires_trait(specs)):
            return True
        LOG.warning('Flavor %(flavor)s asks for context retention but does '
                    'not require the trait: add the extra spec '
                    '%(spec)s=required to it. Refusing %(host)s.',
                    {'flavor': spec_obj.flavor.name,
                     'spec': capability.TRAIT_SPEC, 'host': host_state})
        return False
