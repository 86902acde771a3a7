"""The arithmetic of a host's I/O : CPU mix. Pure: no nova, no I/O.

A host's *mix* counts the vCPUs of its instances whose flavor declares
``vsmtio:workload`` ``io`` or ``cpu``. vCPUs, not instances, because vSMT-IO
pairs hyperthreads: one 8-vCPU I/O guest balances eight 1-vCPU CPU guests.
``auto`` (or unset) flavors count with the class the agent measured when a
trusted measurement exists (:func:`counted_class`), else not.

nova-compute counts its mix with it, the scheduler's filter and weigher
judge hosts with it, the Watcher strategy plans repairs with it and the
Horizon panel explains the filter's verdicts with it: one arithmetic, one
band (:func:`band`) and one rule for measured classes
(:func:`counted_class`), so they never disagree on what a host's mix is.
"""

import typing

from oslo_log import log as logging

from vsmtio_contract import specs
from vsmtio_contract import workload

LOG = logging.getLogger(__name__)


#: Classified vCPUs a host's squared imbalance is spread over beyond its
#: own (see :func:`weigh`): the weigher's view of an empty or small host.
PRIOR_VCPUS = 16.0


class Mix(typing.NamedTuple):
    """Classified vCPUs of one host: I/O-bound and CPU-bound."""

    io: int = 0
    cpu: int = 0

    @property
    def classified(self):
        return self.io + self.cpu

    def share(self):
        """The I/O share of classified vCPUs; None for no classified vCPU."""
        if not self.classified:
            return None
        return self.io / self.classified

    def plus(self, cls, vcpus):
        """This mix after adding ``vcpus`` vCPUs of class ``cls``."""
        if cls is workload.WorkloadClass.IO:
            return Mix(self.io + vcpus, self.cpu)
        if cls is workload.WorkloadClass.CPU:
            return Mix(self.io, self.cpu + vcpus)
        return self


#: Exact extra-spec values: a dict lookup, not a parse, per instance.
_BY_VALUE = {c.value: c for c in workload.WorkloadClass}
_BY_VALUE[None] = workload.WorkloadClass.AUTO


def _name(flavor):
    try:
        return flavor.name
    except Exception:  # a nova object without its name loaded
        return '(unnamed)'


def classify_flavor(flavor):
    """``(WorkloadClass, vcpus)`` of a flavor; AUTO for an invalid class.

    Flavors created below microversion 2.86 (the openstack client's
    default is lower) or through the database may hold any value. One
    that nova-api would refuse (``IO`` too) is read as nothing, with one
    warning per flavor and value (:func:`vsmtio_contract.specs.read`):
    the scheduler and nova-compute then know nothing rather than guess.
    """
    specs_ = flavor.extra_specs or {}
    cls = _BY_VALUE.get(specs_.get(workload.EXTRA_SPEC_WORKLOAD))
    if cls is None:
        cls = specs.read(specs_, workload.EXTRA_SPEC_WORKLOAD,
                         'flavor %s' % _name(flavor), LOG,
                         default=workload.WorkloadClass.AUTO)
    return cls, int(flavor.vcpus or 0)


#: :attr:`Counted.source` values.
DECLARED = 'declared'        # the flavor's class (auto: not counted)
MEASURED = 'measured'        # the signed class on the instance now
REMEMBERED = 'remembered'    # the last verified class, not yet expired
UNMEASURED = 'unmeasured'    # auto, a class is expected, none is verified


class Counted(typing.NamedTuple):
    """How an instance counts, and from what.

    ``why`` says, where the instance's current value was not used, what is
    wrong with it. ``settled`` is False for an ``auto`` instance whose
    measured class is expected (keys are configured) but none is known:
    its host's mix is incomplete, and the Watcher strategy moves nothing
    from or to such a host.
    """

    cls: workload.WorkloadClass
    vcpus: int
    source: str = DECLARED
    why: typing.Optional[str] = None

    @property
    def settled(self):
        return self.source != UNMEASURED


class MeasuredMemory:
    """The last verified measured class of each instance, until it expires.

    Server metadata is the instance owner's: the owner can delete the
    signed class, put back an earlier one or write a forged one. None of
    that may change how the instance counts, or a tenant could move its
    neighbours (the Watcher strategy plans migrations from host mixes).
    So whoever counts keeps here the class it last verified, with the
    expiry it was signed with, and uses it while the instance's current
    value is missing or not trusted, until that expiry. Of two verified
    values the one signed to expire later wins: the agent signs each new
    class (and re-signs an unchanged one) with a later expiry, so an
    earlier value put back is ignored. A value verified for another host
    replaces the one of the host the instance left.

    One per counting process and node: nova-compute's
    :class:`~vsmtio_nova.compute.stats.MixStats`, the scheduler's
    :mod:`~vsmtio_nova.scheduler.hostmix`, the Watcher strategy. It is
    memory only: a restarted process knows again what it reads next
    (the agent re-publishes at every ``interval``).
    """

    def __init__(self):
        self._last = {}   # uuid -> workload.Measurement

    def remember(self, uuid, measured):
        """Keep ``measured`` unless a later-expiring one is known; the kept."""
        old = self._last.get(uuid)
        if (old is None or old.host != measured.host
                or measured.expires >= old.expires):
            self._last[uuid] = measured
            return measured
        return old

    def recall(self, uuid, host, now):
        """The class verified for ``uuid`` on ``host``, if not expired."""
        old = self._last.get(uuid)
        if old is None:
            return None
        if old.expires <= now:
            self._last.pop(uuid, None)
            return None
        return old if old.host == host else None

    def forget(self, uuid):
        self._last.pop(uuid, None)

    def prune(self, now):
        """Drop every expired entry (deleted instances do not accumulate)."""
        for uuid, old in list(self._last.items()):
            if old.expires <= now:
                self._last.pop(uuid, None)

    def clear(self):
        self._last.clear()

    def __len__(self):
        return len(self._last)


def counted_class(cls, vcpus, uuid, value, host, keys, now, memory):
    """How an instance counts: a :class:`Counted`. The one rule.

    ``cls`` and ``vcpus`` are the flavor's (:func:`classify_flavor`). A
    declared ``io`` or ``cpu`` counts as declared, whatever the metadata
    says; so does ``auto`` where no ``keys`` are configured (measured
    classes are not used). Otherwise ``value`` (the instance's
    :data:`~vsmtio_contract.workload.MEASURED_CLASS_KEY`, None when
    absent) counts when it is signed with one of ``keys`` for this
    instance on ``host`` (the host it runs on) and not expired at ``now``,
    and it is remembered in ``memory``; a missing, forged, other-host,
    expired or superseded value counts as the last class ``memory``
    verified, until that one expires; with none, the instance is
    ``auto`` (not counted) and :attr:`Counted.settled` is False.
    """
    if cls is not workload.WorkloadClass.AUTO or not keys:
        return Counted(cls, vcpus)
    why = 'it is missing'
    if value is not None:
        measured, why = workload.trusted_measurement(keys, uuid, value,
                                                     host, now)
        if measured is not None:
            kept = memory.remember(uuid, measured)
            if kept is measured:
                return Counted(measured.cls, vcpus, MEASURED)
            return Counted(kept.cls, vcpus, REMEMBERED,
                           'a value signed to expire later is known')
    kept = memory.recall(uuid, host, now)
    if kept is not None:
        return Counted(kept.cls, vcpus, REMEMBERED, why)
    return Counted(cls, vcpus, UNMEASURED, why)


def imbalance(mix, target):
    """Signed I/O vCPUs above the target share: ``io - target * classified``.

    Zero on target; a host's share is ``target + imbalance / classified``.
    """
    return mix.io - target * mix.classified


def weigh(mix, cls, vcpus, target):
    """The weigher's raw weight: what placing here does to the fleet.

    The fleet's distance from its target is the sum over hosts of
    ``imbalance**2 / (classified + PRIOR_VCPUS)``, about ``classified *
    (share - target)**2``: each host's squared share deviation weighed by
    its classified vCPUs, with :data:`PRIOR_VCPUS` keeping a small host's
    share (which says little yet) from dominating. Placing changes one
    host's term only, so the weight is that term's decrease (higher is
    better, negative harms).

    Scoring the change, not where the host ends, is what holds under
    adversarial orders: the term is convex in each class's vCPUs, so a
    burst of one class spreads over the hosts it harms least (empty hosts
    first, then the least loaded with that class) instead of stacking on a
    few, and the other class then goes first to the hosts furthest from
    the target instead of to whichever host it would leave nearest to it.
    """
    after = mix.plus(cls, vcpus)
    before_imb = imbalance(mix, target)
    after_imb = imbalance(after, target)
    return (before_imb * before_imb / (mix.classified + PRIOR_VCPUS)
            - after_imb * after_imb / (after.classified + PRIOR_VCPUS))


def free_vcpus(vcpus_total, allocation_ratio, vcpus_used, vcpus):
    """vCPUs a host still has room for after placing ``vcpus``.

    ``vcpus_total``, ``allocation_ratio`` (``None``: 1.0) and
    ``vcpus_used`` are its compute node's: the room :func:`violates` is
    given, so the filter and whoever explains it count the same room.
    """
    return ((vcpus_total or 0) * (allocation_ratio or 1.0)
            - (vcpus_used or 0) - vcpus)


#: Host aggregate metadata keys that override the band's options.
AGG_MIN = 'vsmtio:min_io_fraction'
AGG_MAX = 'vsmtio:max_io_fraction'


def aggregate_fraction(values, default, based_on):
    """``(fraction, ok)``: what a host's aggregates set for one key.

    ``values`` are the key's values in the metadata of the host's
    aggregates (strings; none: ``default``); of several, ``based_on``
    (``min`` or ``max``) of them. A value that is not a number in [0, 1]
    gives ``(default, False)``.
    """
    if not values:
        return default, True
    try:
        value = based_on(float(v) for v in values)
    except (TypeError, ValueError):
        return default, False
    if not 0.0 <= value <= 1.0:   # also refuses nan
        return default, False
    return value, True


class Band(typing.NamedTuple):
    """A host's I/O share band, and what of its aggregates' was not used.

    ``ignored`` names each aggregate key whose values are not a fraction
    in [0, 1] (its option is used); ``crossed`` is the aggregates' band
    ``(low, high)`` where low exceeds high (then both options are used).
    """

    low: float
    high: float
    ignored: typing.Tuple[str, ...] = ()
    crossed: typing.Optional[typing.Tuple[float, float]] = None


def band(low_values, high_values, low, high):
    """The band a host is held to: a :class:`Band`.

    ``low_values`` and ``high_values`` are the values its aggregates'
    metadata give :data:`AGG_MIN` and :data:`AGG_MAX` (empty where none
    does); ``low`` and ``high`` the options. Conflicting aggregates give
    the strictest band (the largest minimum, the smallest maximum); a
    band with low above high falls back to the options.
    """
    new_low, low_ok = aggregate_fraction(low_values, low, max)
    new_high, high_ok = aggregate_fraction(high_values, high, min)
    ignored = tuple(key for key, ok in ((AGG_MIN, low_ok),
                                        (AGG_MAX, high_ok)) if not ok)
    if new_low > new_high:
        return Band(low, high, ignored, (new_low, new_high))
    return Band(new_low, new_high, ignored)


def violates(mix, cls, vcpus, low, high, min_classified, free=0):
    """Whether placing leaves the host unable to get within ``[low, high]``.

    Returns ``(share_after, bound)`` for a violation, else None. A host is
    judged only once it holds ``min_classified`` classified vCPUs.

    ``free`` is the vCPUs the host still has room for after this
    placement. A placement beyond a bound is refused only when even
    filling that room with the other class could not bring the host back
    within it: refusing more would turn an order of arrivals (forty I/O
    servers, then forty CPU servers) into "No valid host" while the fleet
    has room for both, and the weigher brings such a host back first. A
    full host (``free`` 0) is held to the band itself. An I/O instance can
    only raise the share and a CPU instance only lower it, so a host
    already outside the band still takes what brings it back.
    """
    if mix.classified < min_classified or not vcpus:
        return None
    after = mix.plus(cls, vcpus)
    share = after.share()
    free = max(free, 0)
    if cls is workload.WorkloadClass.IO and share > high:
        if after.io / (after.classified + free) > high:
            return share, high
    elif cls is workload.WorkloadClass.CPU and share < low:
        if (after.io + free) / (after.classified + free) < low:
            return share, low
    return None
