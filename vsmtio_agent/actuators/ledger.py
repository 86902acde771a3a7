"""Who owns each knob the agent changes: one writer a knob, by rank.

Three mechanisms change the host: MIST's protection of a reserved VM,
RASS's split (pins, cpu shares, RASS classes, ``rass_io_cpus``) and LTCR's
retention timeout. Most of their knobs are disjoint; where two want the
same one (a domain's cpu shares: the split raises an I/O domain's, MIST's
fallback raises a reserved domain's) the ledger decides, and no mechanism
learns of another by a callback. The rule:

* a knob is held by at most one mechanism at a time; a mechanism *claims*
  it before it writes, and writes only if the claim is granted;
* a claim is granted when the knob is free, already the claimant's, or
  held by a mechanism of lower rank, which then loses it;
* the ranks are MIST, then RASS, then LTCR: a reservation is a promise to
  the tenant who paid for it, the split and the timeout are throughput
  optimisations that may wait;
* the value a holder writes is computed from the *original* (the
  checkpoint keeps the first original whoever recorded it), so a knob
  taken over from a lower-ranked holder never compounds their values;
* a holder that lets a knob go writes the original back first and then
  *releases* it; a mechanism that did not hold it leaves it alone, so
  withdrawing the split never undoes MIST's protection, nor the reverse.

Ownership lives in memory: after a crash everything recorded is restored,
whoever held it, and nothing is held.
"""

MIST, RASS, LTCR = 'mist', 'rass', 'ltcr'
RANK = (MIST, RASS, LTCR)       # the first outranks the rest


class Owners:
    """The holder of each knob, keyed ``(kind, scope, key)``.

    ``scope`` is the domain's UUID for a domain's knob, None for a
    host-wide one.
    """

    def __init__(self):
        self._held = {}

    def holder(self, kind, scope, key):
        """The mechanism holding the knob, or None."""
        return self._held.get((kind, scope, key))

    def may(self, mechanism, kind, scope, key):
        """Whether ``mechanism`` would be granted the knob."""
        holder = self.holder(kind, scope, key)
        return holder is None or RANK.index(holder) >= RANK.index(
            mechanism)

    def claim(self, mechanism, kind, scope, key):
        """Take the knob if the rule grants it; whether it did."""
        if not self.may(mechanism, kind, scope, key):
            return False
        self._held[(kind, scope, key)] = mechanism
        return True

    def release(self, mechanism, kind, scope, key):
        """Let the knob go, if ``mechanism`` holds it."""
        if self.holder(kind, scope, key) == mechanism:
            del self._held[(kind, scope, key)]

    def free(self, kind, scope, key):
        """Let the knob go, whoever held it (its original is back)."""
        self._held.pop((kind, scope, key), None)

    def holds(self, mechanism, kind, scope, key):
        return self.holder(kind, scope, key) == mechanism

    def release_all(self, mechanism, scope):
        """Let go of every knob ``mechanism`` holds of domain ``scope``."""
        for knob in [k for k, held in self._held.items()
                     if k[1] == scope and held == mechanism]:
            del self._held[knob]

    def drop(self, scope=None):
        """Forget every holder (of one domain's knobs, given ``scope``)."""
        if scope is None:
            self._held.clear()
            return
        for knob in [k for k in self._held if k[1] == scope]:
            del self._held[knob]
