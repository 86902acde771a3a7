"""What the guard chooses among, in the words its readers use."""

import dataclasses


RETENTION = 'retention'
# a serving VM's cgroup CPU weight raised by a factor: a stock host's lever
WEIGHT = 'weight'
PER_VM = (RETENTION, WEIGHT)
SPLIT = 'split'
BORROW = 'borrow'
# The split is graded by the share of cores it covers (SHARES): from an
# eighth (those where serving vCPUs wait longest, rass.split_order) up to
# all of them, each grade holding the ones below it.
WIDER = ('split-1/4', 'split-1/2', 'split-all')
GRADES = (SPLIT,) + WIDER
SHARES = dict(zip(GRADES, (0.125, 0.25, 0.5, 1.0)))
HOST_WIDE = (SPLIT, BORROW) + WIDER
MECHANISMS = PER_VM + HOST_WIDE
# the retention key of a host whose kernel has one timeout for all guests
ALL_VMS = '*'


def start_rung(bounds):
    """The first timeout tried: the cost of a deschedule (§4.2)."""
    return bounds.clamp(bounds.reschedule_cost_ns)


def ladder(bounds):
    """The timeouts searched: doubling steps either side of the start."""
    start = start_rung(bounds)
    return tuple(sorted({start >> k for k in range(64)
                         if start >> k >= bounds.min_ns}
                        | {start << k for k in range(1, 64)
                           if start << k <= bounds.max_ns}))


@dataclasses.dataclass(frozen=True)
class Config:
    """What is in force: sorted ``(domain, value)`` per VM, and host-wide."""
    timeouts: tuple = ()
    mechanisms: frozenset = frozenset()
    weights: tuple = ()

    def value(self, mechanism, domain):
        """A per-VM mechanism's setting for ``domain``, None if not kept."""
        return dict(getattr(self, _FIELD[mechanism])).get(domain)

    def with_value(self, mechanism, domain, value):
        field = _FIELD[mechanism]
        got = dict(getattr(self, field), **{domain: value})
        return dataclasses.replace(self, **{field: tuple(sorted(got.items()))})

    def names(self):
        """The mechanisms by name (retention if any VM retains...)."""
        return (self.mechanisms | ({RETENTION} if self.timeouts else set())
                | ({WEIGHT} if self.weights else set()))


_FIELD = {RETENTION: 'timeouts', WEIGHT: 'weights'}
BARE = Config()


def split_share(mechanisms):
    """The widest split level among ``mechanisms`` (0 without a split)."""
    return max((SHARES[m] for m in mechanisms if m in SHARES), default=0.0)


def top_split(mechanisms):
    """The widest split grade among ``mechanisms``, or None."""
    return next((m for m in reversed(GRADES) if m in mechanisms), None)
