"""The host's idle governor: which C-state an idle hyperthread enters.

A hyperthread with no vCPU to run executes MWAIT with the hint of the
C-state the idle governor picks, and whoever wakes it pays that state's
exit latency before the IPI's handler runs (the cost KVM's halt polling
and ``idle=poll`` exist to avoid). The governor is Linux's ``menu``
(drivers/cpuidle/governors/menu.c, 5.3): it predicts the idle period
from the last eight on this CPU (``get_typical_interval``: their mean
when their spread is small, else again without the largest, while at
least six remain), bounds it by the next timer, and picks the deepest
state whose target residency fits the prediction. ``shallowest`` always
picks the first state (a host booted with ``intel_idle.max_cstate=1``),
for sweeping. The states (exit latency, target residency) are inputs,
``host_idle`` in ``data/costs.yaml``, from the kernel's ``intel_idle``
table of the CPU model named there.

A hyperthread's C-state is a request: the core enters the shallowest
state its two threads ask for (Intel SDM vol. 3B, "Core C-states"), so
with its sibling busy a waking thread pays no deeper exit than the
first state's (``per_core``; false charges each thread its own state's
exit, the upper bound, for sweeping). A thread that polls (halt
polling, ``idle=poll``) or retains a context in MWAIT is not idle in this
sense: it has nothing to exit.
"""

MENU = 'menu'
SHALLOWEST = 'shallowest'
GOVERNORS = (MENU, SHALLOWEST)
INTERVALS = 8


def typical_interval(history):
    """menu's ``get_typical_interval`` over ``history`` (ns), or None."""
    thresh = float('inf')
    while True:
        kept = [x for x in history if x <= thresh]
        n = len(kept)
        if not n:
            return None
        avg = sum(kept) / n
        variance = sum((x - avg) ** 2 for x in kept) / n
        # menu works in microseconds: a spread of at most 20 us, or a
        # mean over six standard deviations, is a pattern
        if variance <= 400e6 or (avg * avg > 36.0 * variance
                                 and 4 * n >= 3 * INTERVALS):
            return avg
        if 4 * n <= 3 * INTERVALS:
            return None
        thresh = max(kept) - 1.0


class IdleGovernor(object):
    """Picks a C-state from the recent idle periods of one hyperthread."""

    def __init__(self, spec, next_timer_ns):
        states = sorted(spec['states'],
                        key=lambda s: s['target_residency_us'])
        self.names = tuple(s['name'] for s in states)
        self.exit_ns = tuple(s['exit_latency_us'] * 1e3 for s in states)
        self.residency_ns = tuple(s['target_residency_us'] * 1e3
                                  for s in states)
        self.governor = spec['governor']
        if self.governor not in GOVERNORS:
            raise ValueError('host_idle.governor: %r is not one of %s'
                             % (self.governor, ', '.join(GOVERNORS)))
        self.next_timer_ns = next_timer_ns
        self.per_core = bool(spec['per_core'])

    def select(self, history):
        """Index of the state to enter, given recent idle periods (ns)."""
        if self.governor == SHALLOWEST or not self.exit_ns:
            return 0
        predicted = self.next_timer_ns
        if len(history) == INTERVALS:
            typical = typical_interval(history)
            if typical is not None and typical < predicted:
                predicted = typical
        pick = 0
        for i, residency in enumerate(self.residency_ns):
            if residency <= predicted:
                pick = i
        return pick

    def exit_latency(self, state, sibling_idle):
        """What leaving ``state`` costs; shallow if the core stayed up."""
        if not self.exit_ns:
            return 0.0
        if self.per_core and not sibling_idle:
            state = 0
        return self.exit_ns[state]
