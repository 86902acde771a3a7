"""What the guard chooses among: mechanisms and configurations.

The engine, status, simulator and benches read the guard's decisions
(:mod:`vsmtio_agent.policy.search`) in this vocabulary: the mechanisms by
name, which need which, the split's grades and the share of cores each
covers, a configuration (:class:`Config`, the bare host :data:`BARE`)
and the ladder of retention timeouts a host offers.
"""

import dataclasses


RETENTION = 'retention'
# a serving VM's cgroup CPU weight raised by a factor: a stock host's lever
WEIGHT = 'weight'
PER_VM = (RETENTION, WEIGHT)
SPLIT = 'split'
BORROW = 'borrow'
# The split is graded by the share of cores it covers (SHARES): from an
# eighth (those where serving vCPUs wait longest, rass.split_order) up to
# all of them, each grade requiring the one below it (REQUIRES).
SPLIT_QUARTER = 'split-1/4'
SPLIT_HALF = 'split-1/2'
SPLIT_ALL = 'split-all'
WIDER = (SPLIT_QUARTER, SPLIT_HALF, SPLIT_ALL)
SHARES = {SPLIT: 0.125, SPLIT_QUARTER: 0.25, SPLIT_HALF: 0.5,
          SPLIT_ALL: 1.0}
HOST_WIDE = (SPLIT, BORROW) + WIDER
MECHANISMS = PER_VM + HOST_WIDE
REQUIRES = {BORROW: SPLIT, SPLIT_QUARTER: SPLIT, SPLIT_HALF: SPLIT_QUARTER,
            SPLIT_ALL: SPLIT_HALF}
# the retention key of a host whose kernel has one timeout for all guests
ALL_VMS = '*'


def start_rung(bounds):
    """The first timeout tried: the cost of a deschedule (§4.2)."""
    return bounds.clamp(bounds.reschedule_cost_ns)


def ladder(bounds):
    """The timeouts searched: doubling steps either side of the start."""
    start = start_rung(bounds)
    rungs = {start}
    t = start
    while t // 2 >= bounds.min_ns:
        t //= 2
        rungs.add(t)
    t = start
    while t * 2 <= bounds.max_ns:
        t *= 2
        rungs.add(t)
    return tuple(sorted(rungs))


@dataclasses.dataclass(frozen=True)
class Config:
    """What is in force: each retaining VM's timeout, host-wide mechanisms.

    ``timeouts`` is ``((domain, ns), ...)`` and ``weights`` ``((domain,
    factor), ...)``, sorted by domain.
    """

    timeouts: tuple = ()
    mechanisms: frozenset = frozenset()
    weights: tuple = ()

    @property
    def retaining(self):
        return bool(self.timeouts)

    def timeout(self, domain):
        for d, ns in self.timeouts:
            if d == domain:
                return ns
        return None

    def with_timeout(self, domain, ns):
        got = dict(self.timeouts)
        got[domain] = ns
        return dataclasses.replace(self, timeouts=tuple(sorted(got.items())))

    def without(self, domain):
        return closure(dataclasses.replace(
            self, timeouts=tuple(x for x in self.timeouts if x[0] != domain)))

    def weight(self, domain):
        return dict(self.weights).get(domain)

    def value(self, mechanism, domain):
        """A per-VM mechanism's setting for ``domain``, None if not kept."""
        if mechanism == RETENTION:
            return self.timeout(domain)
        return self.weight(domain)

    def with_value(self, mechanism, domain, value):
        if mechanism == RETENTION:
            return self.with_timeout(domain, value)
        got = dict(self.weights)
        got[domain] = value
        return dataclasses.replace(self, weights=tuple(sorted(got.items())))

    def without_value(self, mechanism, domain):
        if mechanism == RETENTION:
            return self.without(domain)
        return dataclasses.replace(self, weights=tuple(
            x for x in self.weights if x[0] != domain))

    def names(self):
        """The mechanisms by name (retention if any VM retains...)."""
        return (self.mechanisms | ({RETENTION} if self.timeouts else set())
                | ({WEIGHT} if self.weights else set()))

    def __contains__(self, mechanism):
        return mechanism in self.names()


BARE = Config()


def split_share(mechanisms):
    """The widest split level among ``mechanisms`` (0 without a split)."""
    return max((SHARES[m] for m in mechanisms if m in SHARES), default=0.0)


def closure(config):
    """``config`` less every mechanism whose requirement is not in it."""
    out = set(config.mechanisms)
    for m in HOST_WIDE:                 # requirements come first
        need = REQUIRES.get(m)
        if m in out and need is not None and need not in out:
            out.discard(m)
    return dataclasses.replace(config, mechanisms=frozenset(out))


def top_split(mechanisms):
    """The widest split level kept, the one a retest of the split tests."""
    levels = [m for m in (SPLIT,) + WIDER if m in mechanisms]
    return levels[-1] if levels else None
