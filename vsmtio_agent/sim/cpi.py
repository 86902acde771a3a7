"""How fast a vCPU computes next to its sibling: the SMT co-run model.

Two computing siblings share a core's issue slots; the cycles a thread
spends waiting on misses leave slots free for the other (the cycle
accounting view of paper §4.3.2). So a thread's base component is inflated
by contention in proportion to how issue-bound its sibling is, and its miss
component is not::

    cpi_corun(a | b) = B_a * (1 + k * u_b) + M_a,   u_b = B_b / (B_b + M_b)

``k`` is not free: it is solved from one input, the combined speed-up of
two busy siblings running the reference CPI stack (``smt_corun_speedup``
in ``data/costs.yaml``). Everything else follows from the two CPI stacks.
"""


def issue_share(base, miss):
    """Fraction of a thread's solo cycles spent issuing instructions."""
    return base / (base + miss)


def contention(speedup, ref_base, ref_miss):
    """Solve ``k`` so the reference pair's combined speed is ``speedup``."""
    if not 1.0 <= speedup <= 2.0:
        raise ValueError('smt_corun_speedup must be within [1, 2], got %r'
                         % (speedup,))
    solo = ref_base + ref_miss
    u = issue_share(ref_base, ref_miss)
    # 2 * solo / (B (1 + k u) + M) = speedup
    corun_cpi = 2.0 * solo / speedup
    return (corun_cpi - ref_miss - ref_base) / (ref_base * u)


def corun_factor(a, b, k):
    """Speed of stack ``a`` next to computing stack ``b``, solo = 1.

    ``a`` and ``b`` are ``(base, miss)`` pairs.
    """
    base_a, miss_a = a
    u_b = issue_share(*b)
    return (base_a + miss_a) / (base_a * (1.0 + k * u_b) + miss_a)
