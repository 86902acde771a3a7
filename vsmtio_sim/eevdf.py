"""The host scheduler under EEVDF (Linux 6.6 and later), per hyperthread.

The same run queues as :mod:`~vsmtio_sim.cfs` (whose core it reuses:
the queues, the tick's load update, the cgroup weights, RASS's filters),
ordered the way ``kernel/sched/fair.c`` has done since 6.6, each step
named by the kernel function it models:

* ``avg_vruntime``: each queue's V, the weighted average vruntime of the
  entities queued on it (vCPUs, or a VM's group entity, below), the
  running one included; an entity's lag is ``V - vruntime`` and the
  weighted lags of a queue sum to zero;
* ``entity_eligible``: a vCPU may be picked only with a lag >= 0;
* ``update_deadline``: its virtual deadline is its vruntime plus its
  request, ``base_slice`` over its weight (``calc_delta_fair``); once its
  vruntime passes it, it gets the next one and the CPU is rescheduled.
  That is noticed where the kernel runs ``update_curr``: at the tick
  (``HRTICK`` is off by default) and at a wake-up on the same queue;
* ``pick_eevdf``: the eligible vCPU with the earliest deadline; with
  ``RUN_TO_PARITY`` the running vCPU keeps the CPU while it is eligible
  and its slice lasts (``set_protect_slice``: every slice here is the
  base slice, so the protection ends at the deadline it was picked with);
* ``check_preempt_wakeup_fair``: a woken vCPU preempts when that pick
  returns it;
* ``update_entity_lag`` and ``place_entity`` (``PLACE_LAG``): a vCPU that
  sleeps eligible keeps its lag, clamped to ``max(2 x slice, tick)`` over
  its weight, and is placed at ``V - lag`` on waking, inflated so that the
  lag survives its own weight joining the average; no sleeper credit, and
  on an empty queue it starts at V with no lag; its new deadline is one
  request ahead;
* ``dequeue_entity`` with ``DELAY_DEQUEUE``: a vCPU that goes to sleep
  while not eligible stays queued, asleep (``th.delayed``): it counts in
  V, so what the others run spends its debt. A pick that chooses it
  (``pick_next_entity``) takes it off instead, and the pick starts over;
  its lag, positive by then, is dropped (``DELAY_ZERO``), and a queue left
  with no runnable vCPU is emptied of them. Woken while still queued
  (``requeue_delayed_entity``), it is judged without ``update_curr``:
  against V as the running vCPU was last accounted (its switch-in, the
  tick, a wake-up), so what that vCPU has run since is not yet counted. It
  stays where it is while that lag is negative, and the wake-up's own
  accounting then usually makes it eligible; once positive it is placed
  afresh there with no lag;
* ``reweight_entity``: a new weight (the tick's group shares, an agent's
  ``cpu.weight``) keeps each vCPU's lag in service, ``w x (V - vruntime)``,
  and its deadline's distance likewise;
* migration keeps the lag and, with ``PLACE_REL_DEADLINE``, the distance
  to the deadline; a delayed sleeper leaves its queue first.

Weights enter as the cgroups of libvirt give them: each VM is a cgroup,
so a VM is one group entity in each hyperthread's queue, weighted by the
cgroup's shares split by load (``calc_group_shares``). Where one vCPU of
the VM is on a hyperthread, that vCPU stands for its group entity there,
as the two go on and off the queue together. Where several meet (their
homes, a borrow, a move), the group entity is modelled as the kernel
has it (:class:`~vsmtio_sim.entities.Group`), and kept there after, as
the kernel keeps a cgroup's entity on each CPU: libvirt puts each vCPU
thread in a cgroup of its own under the domain's, so the vCPUs are equal
entities of the group's own queue, and the two levels are picked as
``pick_task_fair`` walks them:

* the group entity is one entity of the hyperthread's queue, with one
  lag and one deadline, and runs whenever any vCPU inside it does
  (``update_curr`` charges it the time at its own weight);
* its weight is the VM's shares times its vCPUs' load on that
  hyperthread over the VM's load on every CPU, the load there being at
  least the number queued in it (``calc_group_shares``): all of the
  VM's shares where all of its load is on that hyperthread; renewed at
  the tick as a lone vCPU's is, and kept while the group is empty
  (``update_cfs_group``);
* the pick chooses among the hyperthread's entities, then, in a group,
  among its vCPUs by their own lags and deadlines (``pick_task_fair``);
  a wake-up preempts when the woken vCPU wins where its entity and the
  running one's meet (``find_matching_se``): inside their group if they
  share one, else between their entities;
* the group leaves the hyperthread's queue when its last vCPU does, with
  the delay and the lag a vCPU would have (``dequeue_entities``,
  ``dequeue_entity``), and comes back at its kept lag, or, still queued,
  as a delayed sleeper is requeued (``enqueue_task_fair``,
  ``requeue_delayed_entity``);
* a vCPU that goes to sleep while others stay queued in its group makes
  the group the queue's preferred pick while it is eligible
  (``set_next_buddy`` in ``dequeue_entities``, ``pick_next_entity``'s
  ``PICK_BUDDY``), until it is set running anew, leaves, or its request
  is used (``clear_buddies``);
* a group that goes on running across its vCPUs keeps the slice it was
  set running with (``pick_next_task_fair`` sets only the levels that
  change).

A vCPU that moves between a group and standing alone starts with no lag
at the level it joins (alone in its group its lag is none), where the
kernel would place the group entity of the CPU it reaches at that
entity's own last lag. Not modelled: ``PREEMPT_SHORT`` and custom slices
(no vCPU sets ``sched_attr``'s runtime, so every request is the base
slice); ``NEXT_BUDDY`` (off by default) and yields;
``PLACE_DEADLINE_INITIAL`` (no vCPU is new after the start); a delayed
sleeper's weight in the queue's load (``single_task_running``, the group
shares); load balancing (as under CFS).

A mixin of :class:`~vsmtio_sim.engine.Simulation`, chosen per scenario
(``scheduler.policy``): :class:`~vsmtio_sim.engine.EevdfSimulation`
puts it ahead of CFS.
"""

from vsmtio_sim import cfs
from vsmtio_sim import entities

SWITCH = entities.SWITCH
WAKING = entities.WAKING
V_SLEEP = entities.V_SLEEP
Group = entities.Group
# ns of vruntime: V is a float average, an entity at V is eligible
EPS = 1e-3


def slice_factor(cpus):
    """``get_update_sysctl_factor``: 1 + ilog2(min(cpus, 8)) (``LOG``)."""
    return min(cpus, 8).bit_length()


def _clamp(x, limit):
    return -limit if x < -limit else limit if x > limit else x


def _held(q):
    """The sleepers still queued on ``q``, a hyperthread or a group."""
    return q.sleepers if q.__class__ is Group else q.delayed


_grp_on = cfs._grp_on


class Eevdf(cfs.Cfs):
    """EEVDF's pick, placement and preemption over CFS's run queues."""

    # -- the two levels of queues ----------------------------------------

    def _level(self, q):
        """The entities queued on ``q``: (running, waiting, delayed).

        ``q`` is a hyperthread (its entities: lone vCPUs and groups) or a
        group (its vCPUs). The running one is None unless it is queued
        there and not already back among the waiting.
        """
        if q.__class__ is Group:
            th = q.th
            c = th.curr if th.curr is not None else th.next
            if c is not None and (c.grp is not q or c.sstate == V_SLEEP
                                  or c in th.rq):
                c = None
            return c, [x for x in th.rq if x.grp is q], q.sleepers
        th = q
        c = th.curr if th.curr is not None else th.next
        if not th.groups:
            if c is not None and (c.sstate == V_SLEEP or c in th.rq):
                c = None
            return c, th.rq, th.delayed
        if c is not None:
            g = _grp_on(th, c)
            if g is not None:
                c = g if not g.delayed and self._busy(g) else None
            elif c.sstate == V_SLEEP or c in th.rq:
                c = None
        return c, self._roots(th, th.rq, True, c), th.delayed

    def _make_group(self, th, y):
        """``y``'s VM's group on ``th``, where ``y`` stood for it alone.

        The group entity is what ``y`` was in the hyperthread's queue (its
        vruntime, deadline, slice, weight, delay); ``y`` is the one vCPU
        of the group's own queue, with no lag there, at the weight of its
        own cgroup (libvirt's per-vCPU cgroup, the default weight). A
        delayed ``y`` leaves it: alone in its group it was eligible there,
        and it is the group that stays queued, delayed.
        """
        g = th.groups[y.vm] = Group(y.vm, th)
        g.vruntime, g.deadline = y.vruntime, y.deadline
        g.vprot, g.vr_scale, g.vlag = y.vprot, y.vr_scale, y.vlag
        g.min_vr = y.vruntime
        if th.acct_v is y:
            th.acct_v = g
        if th.rcurr is y:
            th.rcurr = g
        y.grp = g
        y.vr_scale = 1.0
        y.deadline = y.vprot = y.vruntime + self._vslice(y)
        if y.delayed:
            th.delayed[th.delayed.index(y)] = g
            g.delayed, y.delayed, y.vlag = True, False, 0.0
        else:
            g.acct_v, g.acct_vr = y, y.vruntime
        return g

    def _stand_alone(self, v):
        """``v`` leaves its group to stand for its VM alone: no lag kept."""
        super()._stand_alone(v)
        v.vlag = 0.0

    # -- a queue's average and an entity's lag ---------------------------

    def _sums(self, q, skip=None):
        """Sum of w x (vruntime - v0) and of w over queue ``q``.

        The queue is the waiting entities, the one running (or switching
        in) and the sleepers still queued (``DELAY_DEQUEUE``), less
        ``skip``; w is the weight over NICE_0_LOAD and v0 the queue's
        reference, ``q.min_vr``.
        """
        if q.__class__ is Group or q.groups:
            self._settle(q.th if q.__class__ is Group else q)
            c, waiting, held = self._level(q)
        else:
            # a hyperthread with no group: _level's first case, inlined
            self._settle(q)
            waiting, held = q.rq, q.delayed
            c = q.curr if q.curr is not None else q.next
            if c is not None and (c.sstate == V_SLEEP or c in waiting):
                c = None
        v0 = q.min_vr
        s = load = 0.0
        if c is not None and c is not skip:
            w = 1.0 / c.vr_scale
            s = w * (c.vruntime - v0)
            load = w
        for x in waiting:
            if x is not skip:
                w = 1.0 / x.vr_scale
                s += w * (x.vruntime - v0)
                load += w
        for x in held:
            if x is not skip:
                w = 1.0 / x.vr_scale
                s += w * (x.vruntime - v0)
                load += w
        return s, load

    def _avg(self, q):
        """``avg_vruntime``: V of queue ``q``; its reference when empty."""
        s, load = self._sums(q)
        if load:
            q.min_vr += s / load   # keeps the sums small
        return q.min_vr

    def _lag(self, q, v):
        """``update_entity_lag``: ``V - vruntime`` of ``v`` on ``q``.

        Clamped to ``max(2 x slice, tick)`` over its weight.
        """
        s, load = self._sums(q, v)
        w = 1.0 / v.vr_scale
        vr = v.vruntime
        lag = q.min_vr + (s + w * (vr - q.min_vr)) / (load + w) - vr
        return _clamp(lag, max(2.0 * self.base_slice, self.tick_ns)
                      * v.vr_scale)

    def _put(self, q, v, lag):
        """``place_entity``: ``v`` (not queued) at ``V - lag`` on ``q``."""
        s, load = self._sums(q, v)
        if load:
            # inflated so that the lag is ``lag`` once v counts in V
            v.vruntime = (q.min_vr + s / load
                          - lag * (load + 1.0 / v.vr_scale) / load)
        else:
            v.vruntime = q.min_vr       # alone: no lag to keep (PLACE_LAG)

    def _vslice(self, v):
        return self.base_slice * v.vr_scale

    def _update_deadline(self, v):
        """``update_deadline``: a new request once the last one is used.

        A group's used request also ends its being the buddy
        (``update_curr`` reschedules with ``clear_buddies``).
        """
        if v.vruntime < v.deadline:
            return False
        v.deadline = v.vruntime + self._vslice(v)
        if v.__class__ is Group and v.th.buddy is v:
            v.th.buddy = None
        return True

    # -- the hooks of the CFS core ---------------------------------------

    def _first_groups(self):
        for v in self.vcpus:
            v.deadline = v.vruntime + self._vslice(v)
        for v in self.vcpus:
            if v.grp is None:
                v.grp = self._group_for(v.th, v)

    def _choose(self, q, cands, held):
        """``pick_eevdf`` on ``q`` among ``cands`` and the sleepers ``held``.

        The eligible one with the earliest deadline; if the running entity
        holds V down so that none is, the first to become eligible.
        """
        avg = self._avg(q) + EPS
        best = low = None
        for v in cands:
            if v.vruntime <= avg:
                if best is None or v.deadline < best.deadline:
                    best = v
            elif low is None or v.vruntime < low.vruntime:
                low = v
        for v in held:
            if v.vruntime <= avg:
                if best is None or v.deadline < best.deadline:
                    best = v
            elif not cands and (low is None or v.vruntime < low.vruntime):
                low = v
        return best if best is not None else low

    def _first(self, th, vcpus):
        """``pick_next_entity`` among ``vcpus`` queued on ``th``.

        ``pick_task_fair``: the entity of ``th``'s queue (the group's
        buddy first while eligible, ``PICK_BUDDY``), then, in a group, its
        vCPU. A pick of the whole queue (``vcpus`` is ``th.rq``) weighs
        the delayed sleepers too: one picked ends its delay
        (:meth:`_undelay`) and the pick starts over, so a queue is left
        with none once no runnable entity is left to pick.
        """
        whole = vcpus is th.rq
        while True:
            cands = self._roots(th, vcpus, whole) if th.groups else vcpus
            held = th.delayed if whole else ()
            if not (cands or held):
                return None
            b = th.buddy
            if (b is not None and b in cands
                    and b.vruntime <= self._avg(th) + EPS):
                e = b
            else:
                e = self._choose(th, cands, held)
            if e.delayed:
                self._undelay(th, e)
                continue
            if e.__class__ is not Group:
                return e
            v = self._choose(e, [x for x in vcpus if x.grp is e],
                             e.sleepers if whole else ())
            if not v.delayed:
                return v
            self._undelay(e, v)

    def _before(self, th_a, a, th_b, b):
        """The earlier deadline, each measured from its own queue's V.

        Of the entities ``a`` and ``b`` stand for on their queues.
        """
        ea = a.grp if a is not None and a.grp is not None else a
        eb = b.grp if b is not None and b.grp is not None else b
        if b is None or (a is not None and ea.deadline - self._avg(th_a)
                         <= eb.deadline - self._avg(th_b)):
            return a
        return b

    def _eevdf(self, q, cur):
        """``pick_eevdf`` on ``q`` with its running entity ``cur``.

        A delayed sleeper may be the one picked.
        """
        avg = self._avg(q) + EPS
        if cur.vruntime > avg:
            cur = None                  # no longer eligible
        elif cur.vruntime < cur.vprot:
            return cur                  # RUN_TO_PARITY
        best = None
        if q.__class__ is Group or q.groups:
            _, waiting, held = self._level(q)
        else:
            waiting, held = q.rq, q.delayed
        for v in waiting:
            if v.vruntime <= avg and (best is None
                                      or v.deadline < best.deadline):
                best = v
        for v in held:
            if v.vruntime <= avg and (best is None
                                      or v.deadline < best.deadline):
                best = v
        if best is None or (cur is not None and cur.deadline < best.deadline):
            return cur
        return best

    def _pick_curr(self, th, cur):
        """``pick_task_fair`` with the running ``cur`` as a candidate.

        ``pick_next_entity`` on each level: the buddy while eligible,
        else ``pick_eevdf``. A delayed sleeper (or group) may be the one
        picked.
        """
        if not th.groups:
            return self._eevdf(th, cur)
        g = _grp_on(th, cur)
        b = th.buddy
        if b is not None and b.vruntime <= self._avg(th) + EPS:
            e = b
        else:
            e = self._eevdf(th, g if g is not None else cur)
        if e is None or e.delayed or e.__class__ is not Group:
            return e
        if e is g:
            return self._eevdf(g, cur)
        _, waiting, held = self._level(e)
        return self._choose(e, waiting, held)

    def _repick(self, th, cur):
        """``schedule``'s pick with ``cur`` running: delayed ones leave.

        ``pick_next_entity``: a delayed sleeper picked ends its delay and
        the pick starts over.
        """
        while True:
            best = self._pick_curr(th, cur)
            if best is None or not best.delayed:
                return best
            self._undelay(best.grp if best.grp is not None else th, best)

    def _account(self, th, level=None):
        """``update_curr``: note the running entities' vruntimes as accounted.

        On ``th``'s queue and, for a vCPU in a group, on the group's;
        ``level`` (``th`` or the group): on that one only.
        """
        self._settle(th)
        c = th.curr
        g = c.grp if c is not None else None
        if g is None and level is None:
            th.acct_v = c               # the common case: no group
            if c is not None:
                th.acct_vr = c.vruntime
            return
        if g is not None and g.th is not th:
            g = None
        if level is None or level is th:
            e = g if g is not None else c
            th.acct_v = e
            if e is not None:
                th.acct_vr = e.vruntime
        if g is not None and (level is None or level is g):
            g.acct_v = c
            g.acct_vr = c.vruntime

    def _place(self, th, v):
        """``enqueue_task_fair`` of a woken ``v`` on ``th``.

        A woken vCPU is placed after ``update_curr`` (``enqueue_entity``,
        ``place_entity``) at its kept lag, alone or in its VM's group on
        ``th`` (:meth:`_group_for`); a group not queued joins the
        hyperthread's queue with it, at the group's kept lag, and one
        still queued, delayed, is requeued (:meth:`_requeue_delayed`). A
        vCPU still queued itself is requeued where it is.
        """
        if v.delayed:
            self._requeue_delayed(v.grp if v.grp is not None else th, v)
            return
        g = self._group_for(th, v)
        if g is None:
            if v.grp is not None:
                self._stand_alone(v)
            self._account(th)
            self._put(th, v, v.vlag)
            v.deadline = v.vruntime + self._vslice(v)
            return
        self._join(th, g, v, v.vlag if v.grp is not None else 0.0, None)

    def _join(self, th, g, v, lag, rel):
        """``v`` enters group ``g`` on ``th`` at ``lag``; the group with it.

        ``rel``: its deadline's distance kept (``PLACE_REL_DEADLINE``),
        else a new request. ``enqueue_task_fair`` walks up: ``v`` is placed
        in the group's queue, then the group, if not queued, in the
        hyperthread's (``enqueue_entity``), or, if queued delayed, is
        requeued (``requeue_delayed_entity``, with no ``update_curr`` of
        the hyperthread's queue first).
        """
        busy = self._busy(g, v)
        v.grp = g
        v.vr_scale = 1.0
        if not g.delayed:
            self._account(th, g if busy else th)
        self._put(g, v, lag)
        v.deadline = v.vruntime + (self._vslice(v) if rel is None else rel)
        if g.delayed:
            self._requeue_delayed(th, g)
        elif not busy:
            self._put(th, g, g.vlag)
            g.deadline = g.vruntime + self._vslice(g)

    def _running(self, th, q):
        """The entity running on queue ``q`` of ``th`` (asleep or not)."""
        c = th.curr
        if c is None:
            return None
        g = _grp_on(th, c)
        if q is th:
            return g if g is not None else c
        return c if g is q else None

    def _requeue_delayed(self, q, x):
        """``requeue_delayed_entity``: ``x``, delayed on ``q``, is woken.

        Its lag is judged, and it is placed, against V as the running
        entity was last accounted (the last tick, wake-up or switch on
        the thread), so the CPU that entity has used since still counts as
        owed to the sleeper. It stays where it is while that lag is
        negative; once positive it is placed afresh at that V with none
        (``DELAY_ZERO``), with a new deadline.
        """
        th = q.th if q.__class__ is Group else q
        _held(q).remove(x)
        x.delayed = False
        self._settle(th)
        c = self._running(th, q)
        stale = (c is not None and c is q.acct_v
                 and (self._busy(c) if c.__class__ is Group
                      else c.sstate != V_SLEEP))
        if stale:
            vr, c.vruntime = c.vruntime, q.acct_vr
        if self._lag(q, x) > 0.0:
            self._put(q, x, 0.0)
            x.deadline = x.vruntime + self._vslice(x)
        if stale:
            c.vruntime = vr

    def _dequeued(self, th, v):
        """``dequeue_entity``: ``v`` leaves its queue, keeping its lag.

        With ``DELAY_DEQUEUE``, the running ``v`` that goes to sleep while
        not eligible (its lag negative) stays queued instead (``th.delayed``
        or its group's ``sleepers``): it counts in V and competes for the
        CPU, so the others' running spends its debt; it leaves when it is
        picked (:meth:`_first`, :meth:`_repick`) or wakes (:meth:`_place`).
        One that leaves its group's queue may take the group off the
        hyperthread's (:meth:`_left`).
        """
        g = v.grp
        q = g if g is not None else th
        lag = self._lag(q, v)
        if lag < -EPS and th.curr is v:
            v.delayed = True
            _held(q).append(v)
            return
        v.vlag = lag
        if g is not None:
            self._left(th, g, v, th.curr is v)

    def _left(self, th, g, v, sleep):
        """``dequeue_entities`` after ``v`` left group ``g`` on ``th``.

        A group still holding vCPUs stays queued; one that holds ``v``'s
        sleep becomes the buddy (``set_next_buddy``). An empty group
        leaves the hyperthread's queue as a vCPU does (``dequeue_entity``:
        delayed if it goes to sleep in debt, else with its lag kept), and
        is no longer the running entity there (``put_prev_entity``).
        """
        if self._busy(g, v):
            if sleep:
                th.buddy = g
            return
        if th.buddy is g:
            th.buddy = None
        if th.rcurr is g:
            th.rcurr = None
        lag = self._lag(th, g)
        if lag < -EPS and sleep:
            g.delayed = True
            th.delayed.append(g)
        else:
            g.vlag = lag

    def _undelay(self, q, v):
        """A delayed ``v`` picked or moved: its dequeue is finished.

        ``finish_delayed_dequeue_entity``: its lag, taken while it still
        counts in V, is kept if negative and dropped if positive
        (``DELAY_ZERO``). ``q`` is its queue: a hyperthread, or a group it
        may leave empty (:meth:`_left`).
        """
        lag = self._lag(q, v)
        _held(q).remove(v)
        v.delayed = False
        v.vlag = lag if lag < 0.0 else 0.0
        if q.__class__ is Group:
            self._left(q.th, q, v, True)

    def _carry(self, v, src, dst):
        """``v`` keeps its lag and its deadline's distance on ``dst``.

        A sleeping ``v`` keeps its lag in ``vlag`` until it wakes; one
        still queued on ``src`` (delayed) leaves it first. One in a group
        takes its lag in the group along, and may leave the group empty
        (:meth:`_left`, not asleep); on ``dst`` it joins its VM's group or
        stands alone (:meth:`_group_for`).
        """
        g = v.grp
        if v.delayed:
            self._undelay(g if g is not None else src, v)
        if v.sstate == V_SLEEP:
            return
        rel = v.deadline - v.vruntime
        if g is None:
            lag = self._lag(src, v)
        else:
            lag = self._lag(g, v)
            self._left(src, g, v, False)
        g2 = self._group_for(dst, v)
        if g2 is not None:
            if g is None:
                lag, rel = 0.0, None
            self._join(dst, g2, v, lag, rel)
            return
        if g is not None:
            self._stand_alone(v)
            lag, rel = 0.0, self._vslice(v)
        self._put(dst, v, lag)
        v.deadline = v.vruntime + rel

    def _wakeup_preempt(self, th, cur, v):
        """``check_preempt_wakeup_fair``, after ``update_curr``.

        ``find_matching_se``: ``v`` and ``cur`` are compared in their
        group's queue if they share one, else their entities in the
        hyperthread's. ``v`` preempts if that pick returns it, and the CPU
        is rescheduled (``schedule`` picks from the top); a used request
        reschedules anyway (``update_curr``), and that pick may choose
        another.
        """
        g = cur.grp
        if g is not None and g.th is not th:
            g = None
        if g is not None and v.grp is g:
            q, c, e = g, cur, v
        else:
            q = th
            c = g if g is not None else cur
            e = v.grp if v.grp is not None else v
        self._account(th, q)
        expired = self._update_deadline(c)
        best = self._eevdf(q, c)
        if best is not e and expired:
            best = self._repick(th, cur)
        elif best is not e:
            return
        elif th.groups:
            best = self._repick(th, cur)
        if best not in (cur, None):
            self._give_way(th, best, self.c_preempt)

    def _arm_slice(self, th):
        """``set_next_entity``: the slice is protected to its deadline.

        A group set running anew on the hyperthread gets its protection
        (and stops being the buddy); one that goes on running across its
        vCPUs keeps its own.
        """
        v = th.curr
        v.vprot = v.deadline
        g = v.grp
        if g is not None and g.th is not th:
            g = None
        if g is not None and th.rcurr is not g:
            g.vprot = g.deadline
            if th.buddy is g:
                th.buddy = None
        th.rcurr = g if g is not None else v
        self._account(th)

    def _slice_event(self, th, at):
        """No slice timer: a used slice is noticed at the tick."""
        th.slice_at = at

    def _expired(self, th, cur):
        """``entity_tick`` on each level: whether a used request reschedules.

        ``update_curr`` renews the request of the running entity of each
        queue, and a renewal where others are queued reschedules.
        """
        g = cur.grp
        if g is None or g.th is not th:
            return self._update_deadline(cur) and bool(
                th.rq or th.delayed or th.groups and any(
                    x.sleepers for x in th.groups.values()))
        inner = self._update_deadline(cur) and bool(
            g.sleepers or any(x.grp is g for x in th.rq))
        root = self._update_deadline(g) and bool(
            th.delayed or self._roots(th, th.rq, True, g))
        return inner or root

    def _tick_preempt(self, now):
        """``update_curr`` at the tick: a used request reschedules."""
        for th in self.threads:
            cur = th.curr
            if cur is None or th.state == SWITCH or th.state == WAKING:
                continue
            self._account(th)
            if not self._expired(th, cur):
                continue
            if cur.borrowed:
                # RASS: a borrower gives the I/O sibling back at its end
                nxt = self._pick(th)
                if nxt is not None:
                    self._preempt(th, nxt, self.c_tick)
                continue
            best = self._repick(th, cur)
            if best not in (cur, None):
                self._give_way(th, best, self.c_tick)

    def _rescale(self, scales):
        """``reweight_entity``: each entity keeps its lag in service.

        Its vruntime's distance to V (and its deadline's and protected
        slice's to its vruntime) scale by old weight / new weight, which
        leaves every V where it was; a sleeper's kept lag likewise (one
        still queued, delayed, is rescaled as a queued one). A vCPU in a
        group keeps its own cgroup's weight; the group gets its shares
        (:meth:`_group_scale`, ``update_cfs_group``).
        """
        avgs = [self._avg(th) for th in self.threads]
        for v, new in zip(self.vcpus, scales):
            if v.grp is None:
                self._reweight(v, new, avgs[v.th.cpu],
                               v.sstate == V_SLEEP and not v.delayed)
        for th in self.threads:
            for g in th.groups.values() if th.groups else ():
                self._reweight(g, self._group_scale(g), avgs[th.cpu],
                               not g.delayed and not self._busy(g))
        for th in self.threads:
            self._account(th)

    @staticmethod
    def _reweight(v, new, avg, asleep):
        """``reweight_eevdf`` of ``v`` queued at ``avg`` (or its lag)."""
        k = new / v.vr_scale
        v.vr_scale = new
        if k == 1.0:
            return
        if asleep:
            v.vlag *= k
            return
        old = v.vruntime
        v.vruntime = vr = avg - (avg - old) * k
        v.deadline = vr + (v.deadline - old) * k
        v.vprot = vr + (v.vprot - old) * k
