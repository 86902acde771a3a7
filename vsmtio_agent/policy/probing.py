"""What a guard's probe reads and what it reports.

The ABBA order a candidate (A) and the bare host (B) alternate in, each
VM's class (:func:`vm_kinds`), a period's per-VM throughput
(:func:`measure`), the light serving VMs (:func:`light`) and the
:class:`Verdict` the engine, status, metrics and logs read. Pure:
samples in, values out.
"""

import dataclasses
import math
from typing import Optional


SERVING = 'serving'
COMPUTING = 'computing'
ABBA = (True, False, False, True)       # A = with the mechanism


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The outcome of one probe block, for logs, status and reports.

    ``domain`` is the VM a per-VM mechanism (retention) was tested for,
    None for a host-wide one; ``timeout_ns`` the retention timeout the
    block tested. ``ratios`` holds ``(vm, kind, ratio)`` for every VM
    judged; ``utility`` is the gain, the serving VMs' geometric mean.
    ``factor`` is the weight a verdict keeps. ``loses``,
    ``utility_logs`` and ``after_effect`` stay in the record that status,
    metrics and reports read; the search leaves them unset.
    """

    mechanism: str
    kept: bool
    reason: str
    domain: Optional[str] = None
    timeout_ns: Optional[int] = None
    ratios: tuple = ()
    loses: bool = False
    utility: Optional[float] = None
    utility_logs: tuple = ()
    after_effect: bool = False
    factor: Optional[float] = None

    @property
    def key(self):
        return (self.mechanism, self.domain)

    def _class_ratio(self, kind):
        logs = [math.log(r) for _vm, k, r in self.ratios
                if k == kind and r > 0]
        return math.exp(sum(logs) / len(logs)) if logs else None

    @property
    def cpu_ratio(self):
        """The computing VMs' geometric-mean ratio (None: there were none)."""
        return self._class_ratio(COMPUTING)

    @property
    def io_ratio(self):
        """The serving VMs' geometric-mean ratio (None: there were none)."""
        return self._class_ratio(SERVING)

    def worst(self):
        """``(vm, kind, ratio)`` of the VM that fared worst, or None."""
        return min(self.ratios, key=lambda r: r[2], default=None)


def vm_kinds(stats, params):
    """``((vm, kind), ...)``: whether each VM serves or computes.

    A VM serves when its vCPUs idle at least ``io_halt_rate`` times a
    second on average, counting idle exits and context retentions alike
    (a retention replaces the halt exit it saves).
    """
    idles = {}
    for ref, st in stats.items():
        rate = max(st.halt_rate or 0.0, st.retention_frequency or 0.0)
        got = idles.setdefault(ref.domain, [0.0, 0])
        got[0] += rate
        got[1] += 1
    return tuple((vm, SERVING if total / n >= params.io_halt_rate
                  else COMPUTING)
                 for vm, (total, n) in sorted(idles.items()))


def measure(stats, served, kinds):
    """One period's ``({vm: throughput}, blind, by_run_time)``.

    A computing VM's instructions per second, summed over its vCPUs; a
    serving VM's requests and packets per second (``served``, the host's
    block and interface statistics), or its vCPUs' idle entries where the
    host counts nothing it serves. Where a computing VM's vCPUs have no
    instruction counter (no PMU), the CPU time they computed stands in
    (``by_run_time``): what a VM computes is bounded by the CPU time it
    gets, which is what retention and a raised weight take from it, though
    not what a sibling's interference costs it. Without either it is
    ``blind``.
    """
    kind_of = dict(kinds)
    per_vm = {}
    for ref, st in stats.items():
        kind = kind_of.get(ref.domain)
        if kind is not None:
            per_vm.setdefault(ref.domain, []).append(st)
    totals = {}
    blind = by_run_time = False
    for vm, kind in kinds:
        found = per_vm.get(vm)
        if not found:
            continue
        if kind == SERVING:
            if served and served.get(vm) is not None:
                totals[vm] = served[vm]
            else:
                rates = [st.halt_rate for st in found]
                totals[vm] = None if None in rates else sum(rates)
            continue
        rates = [st.instruction_rate for st in found]
        if None not in rates:
            totals[vm] = sum(rates)
            continue
        shares = [st.compute_share for st in found]
        if None in shares:
            totals[vm] = None
            blind = True
        else:
            totals[vm] = sum(shares)
            by_run_time = True
    return totals, blind, by_run_time


def light(stats, params):
    """The VMs whose vCPUs run at most ``light_utilisation`` on average."""
    load = {}
    for ref, st in stats.items():
        got = load.setdefault(ref.domain, [0.0, 0])
        got[0] += st.utilisation if st.utilisation is not None else 1.0
        got[1] += 1
    return frozenset(vm for vm, (u, n) in load.items()
                     if u / n <= params.light_utilisation)
