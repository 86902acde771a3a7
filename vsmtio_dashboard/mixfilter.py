"""What nova's ``WorkloadMixFilter`` would refuse on each host: no I/O here.

nova gives a host filter no way to put its reason in a server's fault: a
boot the mix filter refuses ends in nova's "No valid host was found", and
the filter's reasons are in nova-scheduler's log, one INFO line per
request. The panel explains, per compute host, what the filter would do
now with one more server of each class, and why, from what nova's API
shows, with the filter's own functions (:mod:`vsmtio_nova.mix`): each
server's class as the filter reads it from the flavor nova keeps with the
server (:func:`~vsmtio_nova.mix.classify_flavor`), the band the host's
aggregates give (:func:`~vsmtio_nova.mix.band`), the room the host has
left (:func:`~vsmtio_nova.mix.free_vcpus`) and the rule itself
(:func:`~vsmtio_nova.mix.violates`). Nothing of the rule is written here.

Three things the filter reads are out of the panel's sight, and the page
says how it stands in for each:

* nova.conf's ``[vsmtio]`` options: the Horizon setting :data:`SETTING`
  mirrors the ones the filter reads (:data:`OPTION_NAMES`), by their
  names; without it, or for an option it leaves out, nova's own default
  (the option's, from :mod:`vsmtio_nova.conf`).
* measured classes: a server whose flavor is ``auto`` (or declares no
  class) counts for the filter with the class its agent signed, verified
  with nova's ``measured_class_secret``, which Horizon does not hold; the
  panel counts declared classes only and says how many vCPUs it left out.
* the compute node's CPU allocation ratio: placement's, the ``VCPU``
  inventory nova-compute reports with it.
"""

import dataclasses
import typing

from django.utils.translation import gettext_lazy as _

from vsmtio_contract import workload
from vsmtio_nova import conf as nova_conf
from vsmtio_nova import mix

#: The Horizon setting mirroring nova.conf's ``[vsmtio]`` options.
SETTING = 'VSMTIO_NOVA_OPTIONS'

#: The ``[vsmtio]`` options the filter reads, by their nova.conf names.
OPTION_NAMES = ('min_io_fraction', 'max_io_fraction',
                'filter_min_classified_vcpus')

IO = workload.WorkloadClass.IO
CPU = workload.WorkloadClass.CPU


class Options(typing.NamedTuple):
    """The filter's options as the panel judges with them.

    ``configured`` says whether Horizon has :data:`SETTING`; ``problems``
    what of it was not used, and why.
    """

    low: float
    high: float
    min_classified: int
    configured: bool = False
    problems: typing.Tuple[str, ...] = ()

    def described(self):
        """``min_io_fraction 0.1, ...``: the values, by nova's names."""
        return ', '.join('%s %s' % item for item in zip(
            OPTION_NAMES, (self.low, self.high, self.min_classified)))


def _nova_options():
    by_name = {opt.name: opt for opt in nova_conf.vsmtio_opts}
    return {name: by_name[name] for name in OPTION_NAMES}


def defaults():
    """nova's defaults of the options the filter reads: :class:`Options`."""
    opts = _nova_options()
    return Options(*(opts[name].default for name in OPTION_NAMES))


def options(configured):
    """The options of :data:`SETTING`'s value ``configured`` (None: unset).

    Each value is read by the option's own type, so a value nova would
    refuse (out of bounds, not a finite number) is refused here too and
    the option's default used, saying so; as nova-scheduler would not
    start with ``min_io_fraction`` above ``max_io_fraction``, such a pair
    gives both defaults.
    """
    if configured is None:
        return defaults()
    opts = _nova_options()
    values = {name: opt.default for name, opt in opts.items()}
    problems = []
    if not isinstance(configured, dict):
        problems.append(_('%(setting)s is not a dict of nova.conf\'s '
                          '[vsmtio] options: nova\'s defaults are used')
                        % {'setting': SETTING})
        configured = {}
    for name, value in sorted(configured.items(), key=lambda i: str(i[0])):
        if name not in opts:
            problems.append(_('%(setting)s: %(name)s is not an option the '
                              'mix filter reads (%(names)s): ignored') % {
                'setting': SETTING, 'name': name,
                'names': ', '.join(OPTION_NAMES)})
            continue
        try:
            values[name] = opts[name].type(value)
        except (TypeError, ValueError) as exc:
            problems.append(_('%(setting)s: %(name)s=%(value)r is refused '
                              '(%(why)s): nova\'s default %(default)s is '
                              'used') % {
                'setting': SETTING, 'name': name, 'value': value,
                'why': exc, 'default': opts[name].default})
    low, high = values['min_io_fraction'], values['max_io_fraction']
    if low > high:
        problems.append(_('%(setting)s: min_io_fraction %(low)s exceeds '
                          'max_io_fraction %(high)s, with which '
                          'nova-scheduler would not start: nova\'s '
                          'defaults are used') % {
            'setting': SETTING, 'low': low, 'high': high})
        low = opts['min_io_fraction'].default
        high = opts['max_io_fraction'].default
    return Options(low, high, values['filter_min_classified_vcpus'],
                   configured=True, problems=tuple(problems))


class Flavor(typing.NamedTuple):
    """A server's flavor as nova keeps it with the server (2.47 and up)."""

    name: str
    vcpus: int
    extra_specs: dict


class Server(typing.NamedTuple):
    """A server where nova placed it: its host, node and flavor."""

    host: str
    node: str
    flavor: Flavor


class Node(typing.NamedTuple):
    """A compute node: nova's host, its node name and vCPU accounting.

    ``ratio`` is its VCPU allocation ratio, None where placement did not
    say; ``vcpus`` and ``vcpus_used`` are nova's (the hypervisor API's).
    """

    host: str
    node: str
    vcpus: int
    vcpus_used: int
    ratio: float = None


class Aggregate(typing.NamedTuple):
    name: str
    hosts: typing.Tuple[str, ...]
    metadata: dict


class Verdict(typing.NamedTuple):
    """The filter on one more server of one class, of each size that fits.

    ``room`` is the largest size judged (the vCPUs the host has left, at
    least one; ``full`` where it has not one whole vCPU left);
    ``refused_from`` the smallest size the filter refuses, None where it
    refuses none up to ``room``; ``after``, ``bound`` and ``free`` are the
    filter's numbers for that size (the share after, the bound it crossed,
    the vCPUs free after placing, as its log line gives them). ``judged``
    is False where the host holds fewer classified vCPUs than the filter
    judges from.
    """

    cls: workload.WorkloadClass
    judged: bool
    room: int
    refused_from: int = None
    after: float = None
    bound: float = None
    free: float = None
    full: bool = False


def verdict(current, cls, band, min_classified, node):
    """The filter's :class:`Verdict` on ``node`` for one more ``cls`` server.

    The filter refuses a size or not by :func:`vsmtio_nova.mix.violates`;
    a larger server of a class moves the share further and leaves less
    room to come back, so the sizes it refuses are all those from the
    smallest one on, found by bisection.
    """
    left = mix.free_vcpus(node.vcpus, node.ratio, node.vcpus_used, 0)
    room = max(1, int(left))

    def refused(vcpus):
        return mix.violates(current, cls, vcpus, band.low, band.high,
                            min_classified,
                            mix.free_vcpus(node.vcpus, node.ratio,
                                           node.vcpus_used, vcpus))

    judged = current.classified >= min_classified
    if refused(room) is None:
        return Verdict(cls, judged, room, full=left < 1)
    low, high = 0, room      # passes at low (0: no server), refused at high
    while high - low > 1:
        mid = (low + high) // 2
        if refused(mid) is None:
            low = mid
        else:
            high = mid
    after, bound = refused(high)
    return Verdict(cls, judged, room, high, after, bound,
                   mix.free_vcpus(node.vcpus, node.ratio, node.vcpus_used,
                                  high), left < 1)


@dataclasses.dataclass
class HostMix:
    """One compute node's mix as the filter counts it, and its verdicts.

    ``uncounted`` is the vCPUs of servers whose flavor declares no class
    (``auto``, unset, or a value nova-api would refuse), which the filter
    counts only with their agent's signed class; ``band_from`` names the
    aggregates that set the band (empty: the options).
    """

    node: Node
    mix: mix.Mix
    band: mix.Band
    min_classified: int
    uncounted: int = 0
    servers: int = 0
    band_from: typing.Tuple[str, ...] = ()
    verdicts: dict = dataclasses.field(default_factory=dict)

    @property
    def id(self):   # horizon.tables keys rows by ``id``
        return self.node.node

    @property
    def host(self):
        return self.node.host


def _band(host, aggregates, opts):
    """The host's :class:`~vsmtio_nova.mix.Band` and the aggregates setting it.

    As nova hands the filter a host's aggregates: every aggregate holding
    the host, each key's values from those that set it.
    """
    mine = [a for a in aggregates if host in a.hosts]
    values = {key: {a.metadata[key] for a in mine if key in a.metadata}
              for key in (mix.AGG_MIN, mix.AGG_MAX)}
    found = mix.band(values[mix.AGG_MIN], values[mix.AGG_MAX],
                     opts.low, opts.high)
    names = tuple(sorted(a.name for a in mine
                         if mix.AGG_MIN in a.metadata
                         or mix.AGG_MAX in a.metadata))
    return found, names


def hosts(nodes, servers, aggregates, opts):
    """The mix table's rows: one per compute node, by host and node name.

    ``servers`` count on the node nova placed them on (a server with no
    node, such as one shelved, is on none).
    """
    rows = {}
    for node in nodes:
        band, names = _band(node.host, aggregates, opts)
        rows[(node.host, node.node)] = HostMix(
            node, mix.Mix(), band, opts.min_classified, band_from=names)
    for server in servers:
        row = rows.get((server.host, server.node))
        if row is None:
            continue
        cls, vcpus = mix.classify_flavor(server.flavor)
        row.servers += 1
        if cls is workload.WorkloadClass.AUTO:
            row.uncounted += vcpus
        else:
            row.mix = row.mix.plus(cls, vcpus)
    for row in rows.values():
        row.verdicts = {cls: verdict(row.mix, cls, row.band,
                                     row.min_classified, row.node)
                        for cls in (IO, CPU)}
    return sorted(rows.values(), key=lambda r: (r.host, r.node.node))
