"""Trust domains: whose vCPUs the agent may put on one physical core.

RASS gains by pairing an I/O-bound vCPU with a CPU-bound one on sibling
hyperthreads, and the adjuster swaps vCPUs between cores to keep them
mixed. Siblings share the L1 data cache and the core's fill and store
buffers, which L1TF- and MDS-class flaws let one thread read from the
other: two vCPUs the agent pins to one core are two guests that may read
each other. This module decides which vCPUs may be siblings, as a key
per vCPU (vCPUs may share a core only when their keys are equal, an
equivalence, so a core either holds one key or is *mixed*), and checks
and repairs assignments against it. Pure: no I/O.

A key has two halves:

* the operator's rule (``[vsmtio_agent] trust_domain``): ``any``,
  ``project`` (the nova project that owns the VM; a VM whose project is
  not known trusts no other) or ``vm``;
* the host's core scheduling: a vCPU thread's cookie where the kernel
  could be asked (threads of different cookies never run on one core at
  once, so pairing them gains nothing and the agent never asks); where
  the host uses core scheduling but no cookie could be read, one cookie
  per VM (what libvirt's ``sched_core`` gives), so the agent is then at
  least as strict as ``vm``.
"""

import collections

ANY, PROJECT, VM = 'any', 'project', 'vm'
RULES = (ANY, PROJECT, VM)


def key(rule, ref, tenancy=None, core_scheduling=None):
    """The trust key of vCPU ``ref`` (a ``(str, str)`` tuple).

    ``tenancy`` is its domain's :class:`~vsmtio_agent.model.Tenancy` (or
    None: nothing known), ``core_scheduling`` the snapshot's.
    """
    if rule not in RULES:
        raise ValueError('unknown trust domain rule %r (one of %s)'
                         % (rule, ', '.join(RULES)))
    project = tenancy.project if tenancy is not None else None
    if rule == ANY:
        who = ''
    elif rule == PROJECT and project:
        who = 'project:' + project
    else:
        who = 'vm:' + ref.domain
    cookie = (tenancy.cookies.get(ref.index) if tenancy is not None
              else None)
    if cookie is not None:
        fence = 'cookie:%x' % cookie
    elif core_scheduling:
        fence = 'vm:' + ref.domain
    else:
        fence = ''
    return (who, fence)


def keys(rule, refs, tenancy, core_scheduling=None):
    """``{ref: key}`` of ``refs``, or None where every vCPU may pair.

    None (the ``any`` rule on a host without core scheduling or cookies)
    lets callers skip every check: nothing is then fenced.
    """
    if rule == ANY and not core_scheduling and not any(
            t.cookies for t in tenancy.values()):
        return None
    return {ref: key(rule, ref, tenancy.get(ref.domain), core_scheduling)
            for ref in refs}


def may_share(trust, a, b):
    """Whether vCPUs ``a`` and ``b`` may be siblings under ``trust``."""
    return trust is None or trust[a] == trust[b]


def core_keys(assignment, trust):
    """``{core: set of keys}`` of the vCPUs ``assignment`` puts there."""
    found = collections.defaultdict(set)
    for ref, core in assignment.items():
        found[core].add(trust[ref])
    return found


def mixed(assignment, trust):
    """The cores ``assignment`` gives vCPUs of two trust domains or more."""
    if trust is None:
        return frozenset()
    return frozenset(core for core, ks in core_keys(assignment,
                                                    trust).items()
                     if len(ks) > 1)


def swap_allowed(assignment, trust, swap):
    """Whether ``swap`` puts neither vCPU beside another trust domain.

    Each vCPU moves to the other's core: every vCPU left there (but the
    one leaving) must share its key.
    """
    if trust is None:
        return True
    for ref, core, leaving in ((swap.a, swap.core_b, swap.b),
                               (swap.b, swap.core_a, swap.a)):
        mine = trust[ref]
        if any(trust[other] != mine for other, c in assignment.items()
               if c == core and other != leaving and other != ref):
            return False
    return True


def swap_checker(assignment, trust):
    """:func:`swap_allowed` over ``assignment``, as a one-argument check.

    The adjuster may try many pairs in a period: each core's keys are
    counted once here, so a check costs the keys on two cores, not a
    pass over every vCPU.
    """
    if trust is None:
        return None
    counts = collections.defaultdict(collections.Counter)
    for ref, core in assignment.items():
        counts[core][trust[ref]] += 1

    def others(core, leaving, mine):
        """Whether every vCPU on ``core`` but ``leaving`` has ``mine``."""
        found = counts[core]
        gone = trust[leaving] if assignment.get(leaving) == core else None
        return all(k == mine or (k == gone and n == 1)
                   for k, n in found.items())

    def allowed(swap):
        return (others(swap.core_b, swap.b, trust[swap.a])
                and others(swap.core_a, swap.a, trust[swap.b]))
    return allowed


def separate(assignment, trust, cores, weights, incumbents=None):
    """``assignment`` with as few mixed cores as moves can make.

    First each mixed core (in ``cores``' order) gets an owner: of the
    trust domains on it, the one with the most weight on the host per
    core it would then own (ties: the smallest key), so that cores are
    shared out in proportion to weight, as seats by the D'Hondt rule, and
    no tenant is crowded onto fewer cores than its weight. Then each
    vCPU not of its core's owner (by ref) moves to the least loaded core
    its domain owns (a core's load counting only what stays on it), else
    to the least loaded empty core: its own domain's cores first, so an
    empty core is kept for a domain that has none. One that finds
    neither stays, and its core stays mixed: :func:`mixed` names it, and
    the engine leaves such a core out of the split, so the host's
    scheduler, not the agent, decides where those vCPUs run. ``weights``
    maps a vCPU to its CFS weight. ``incumbents`` (a callable, asked
    only when some core is mixed) gives ``{core: key}`` of the domains
    that held cores before: such a core stays its incumbent's while the
    incumbent is on it, so a newcomer (a new VM, a floating vCPU the host
    moved there) is the one that moves, and pins already made stay.
    Returns ``assignment`` itself when no core is mixed.
    """
    if trust is None:
        return assignment
    members = collections.defaultdict(list)
    for ref, core in assignment.items():
        members[core].append(ref)
    if all(len({trust[r] for r in refs}) < 2 for refs in members.values()):
        return assignment
    order = {core: n for n, core in enumerate(cores)}
    load, owner, mixed_cores = _survey(members, trust, weights)
    mixed_cores.sort(key=lambda c: order.get(c, len(order)))
    total = _domain_weights(assignment, trust, weights)
    _share_out(mixed_cores, members, trust, owner, total, incumbents)
    movers = _movers(mixed_cores, members, trust, owner)
    for core, refs in movers.items():
        # a core's load is what stays on it
        load[core] -= sum(weights[r] for r in refs)
    place = _placer(owner, load, members, cores, order)
    result = dict(assignment)
    for core in mixed_cores:
        for ref in movers[core]:
            result[ref] = place(trust[ref], weights[ref], core)
    return result


def _survey(members, trust, weights):
    """Each core's load, its owner, and the mixed cores.

    ``members`` maps a core to its vCPUs. A core of one trust domain is
    that domain's; a mixed core (listed in ``members``' order) is yet to
    be shared out (:func:`_share_out`). The load (CFS weight) lets
    :func:`_placer` send a moving vCPU where it weighs least.
    """
    load = collections.Counter()
    owner = {}
    mixed_cores = []
    for core, refs in members.items():
        load[core] = sum(weights[r] for r in refs)
        ks = {trust[r] for r in refs}
        if len(ks) == 1:
            owner[core] = ks.pop()
        else:
            mixed_cores.append(core)
    return load, owner, mixed_cores


def _domain_weights(assignment, trust, weights):
    """Each trust domain's CFS weight over the vCPUs in ``assignment``.

    What the host owes a domain: :func:`_share_out` gives out the mixed
    cores in proportion to it.
    """
    total = collections.Counter()
    for ref, k in trust.items():
        if ref in assignment:
            total[k] += weights[ref]
    return total


def _share_out(mixed_cores, members, trust, owner, total, incumbents):
    """Give each of ``mixed_cores`` (in order) an owner, in ``owner``.

    A core that ``incumbents`` (see :func:`separate`) says a domain held
    stays that domain's while the domain is on it, so the pins already
    made stay and a newcomer moves. Any other goes to the domain on it
    with the most weight (``total``) per core it would then own, ties to
    the smallest key: the D'Hondt rule, which shares cores out in
    proportion to weight.
    """
    held = incumbents() if incumbents is not None else {}
    owned = collections.Counter(owner.values())
    for core in mixed_cores:
        ks = sorted({trust[r] for r in members[core]})
        if held.get(core) in ks:
            owner[core] = held[core]
            owned[held[core]] += 1
            continue
        best = max(ks, key=lambda k: (total[k] / (owned[k] + 1),
                                      -ks.index(k)))
        owner[core] = best
        owned[best] += 1


def _movers(mixed_cores, members, trust, owner):
    """``{core: [refs]}`` of the vCPUs that must leave each mixed core.

    Those not of the core's owner, by ref, so the moves are the same
    whatever order the host listed its vCPUs in.
    """
    return {core: sorted(r for r in members[core]
                         if trust[r] != owner[core])
            for core in mixed_cores}


def _placer(owner, load, members, cores, order):
    """Where a vCPU that leaves a mixed core goes, as a function.

    ``place(key, weight, core)`` moves a vCPU of trust domain ``key`` and
    CFS ``weight`` off ``core``: to the least loaded core its domain owns
    (ties: in ``cores``' order), else to the first empty core, which its
    domain then owns, else nowhere (``core`` again), for no other
    domain's core may take it. A domain that owns a core fills it rather
    than take an empty one, which is kept for a domain that owns none.
    ``load`` starts as what stays on each core and grows by each vCPU
    placed. Each domain's cores and the empty ones (of ``cores``, those
    with no vCPU in ``members``: all of load 0, so the first is the least
    loaded) are listed once here, not searched for at each vCPU that
    moves. Every owned core keeps a vCPU, its owner's.
    """
    owned_cores = collections.defaultdict(set)
    for c, k in owner.items():
        owned_cores[k].add(c)
    empty = collections.deque(c for c in cores if c not in members)
    rank = len(order)

    def place(key, weight, core):
        own = owned_cores.get(key)
        if own:
            target = min(own, key=lambda c: (load[c], order.get(c, rank)))
        elif empty:
            target = empty.popleft()
            owned_cores[key].add(target)
        else:
            target = core
        load[target] += weight
        return target
    return place
