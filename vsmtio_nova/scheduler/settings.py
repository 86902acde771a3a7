"""Per-host settings: ``[vsmtio]`` options, overridden per aggregate.

Host aggregate metadata overrides an option, read with nova's own helpers
as ``ram_weight_multiplier`` is; which value wins is decided by the pure
:func:`vsmtio_nova.mix.band` and :func:`~vsmtio_nova.mix.aggregate_fraction`,
which the Horizon panel calls to explain the filter. The options are read
once per scheduling call (:func:`options`), not once per host: oslo.config
lookups cost more than the arithmetic they feed.
"""

import math
import typing

from oslo_config import cfg
from oslo_log import log as logging

from nova.scheduler.filters import utils as filters_utils
from nova.scheduler import utils

from vsmtio_nova import conf as vsmtio_conf  # noqa: F401 (registers [vsmtio])
from vsmtio_nova import mix

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

AGG_TARGET = 'vsmtio:target_io_fraction'
AGG_MIN = mix.AGG_MIN
AGG_MAX = mix.AGG_MAX
AGG_MULTIPLIER = 'vsmtio:weight_multiplier'

#: Aggregate key -> ``[vsmtio]`` option it overrides.
AGGREGATE_KEYS = {
    AGG_TARGET: 'target_io_fraction',
    AGG_MIN: 'min_io_fraction',
    AGG_MAX: 'max_io_fraction',
    AGG_MULTIPLIER: 'weight_multiplier',
}


class Options(typing.NamedTuple):
    """The ``[vsmtio]`` options as read at one scheduling call.

    The configured values (the defaults of every host), which aggregate
    metadata may then override per host.
    """

    target: float
    low: float
    high: float
    min_classified: int


def options():
    """Read the configured ``[vsmtio]`` options once."""
    opts = CONF.vsmtio
    return Options(opts.target_io_fraction, opts.min_io_fraction,
                   opts.max_io_fraction, opts.filter_min_classified_vcpus)


def _ignored(host_state, key, values, default):
    LOG.warning('Aggregate metadata %s=%s of host %s is not a fraction '
                'in [0, 1]; using [vsmtio] %s=%s', key, sorted(values),
                host_state.host, AGGREGATE_KEYS[key], default)


def target(host_state, opts):
    """The host's target I/O share (the smallest if aggregates differ)."""
    if not host_state.aggregates:
        return opts.target
    values = filters_utils.aggregate_values_from_key(host_state, AGG_TARGET)
    value, ok = mix.aggregate_fraction(values, opts.target, min)
    if not ok:
        _ignored(host_state, AGG_TARGET, values, opts.target)
    return value


def bounds(host_state, opts):
    """``(low, high)`` I/O share bounds of the host (:func:`mix.band`).

    Conflicting aggregates give the strictest band; a band with low > high
    falls back to the options.
    """
    if not host_state.aggregates:
        return opts.low, opts.high
    values = {key: filters_utils.aggregate_values_from_key(host_state, key)
              for key in (AGG_MIN, AGG_MAX)}
    found = mix.band(values[AGG_MIN], values[AGG_MAX], opts.low, opts.high)
    for key in found.ignored:
        _ignored(host_state, key, values[key],
                 opts.low if key == AGG_MIN else opts.high)
    if found.crossed:
        LOG.warning('Host %s has vsmtio I/O share bounds [%s, %s] with min '
                    'above max; using [vsmtio] [%s, %s]', host_state.host,
                    found.crossed[0], found.crossed[1], opts.low, opts.high)
    return found.low, found.high


def multiplier(host_state):
    """The weigher's multiplier for the host; aggregates may override it.

    An aggregate's value that is not a finite number within the option's
    bounds (``nan`` weighs every host nan) gives way to the option, with
    a warning.
    """
    default = CONF.vsmtio.weight_multiplier
    if not host_state.aggregates:
        return default
    value = utils.get_weight_multiplier(host_state, AGG_MULTIPLIER, default)
    if not (math.isfinite(value)
            and 0.0 <= value <= vsmtio_conf.MAX_WEIGHT_MULTIPLIER):
        LOG.warning('Aggregate metadata %s=%s of host %s is not a number '
                    'in [0, %s]; using [vsmtio] weight_multiplier=%s',
                    AGG_MULTIPLIER, value, host_state.host,
                    vsmtio_conf.MAX_WEIGHT_MULTIPLIER, default)
        return default
    return value
