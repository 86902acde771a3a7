"""The host scheduler under EEVDF (Linux 6.6 and later), per hyperthread.

The same run queues as :mod:`~vsmtio_sim.cfs` (whose core it reuses:
the queues, the tick's load update, the cgroup weights, RASS's filters),
ordered the way ``kernel/sched/fair.c`` has done since 6.6, each step
named by the kernel function it models:

* ``avg_vruntime``: each queue's V, the weighted average vruntime of the
  vCPUs queued on it, the running one included; a vCPU's lag is ``V -
  vruntime`` and the weighted lags of a queue sum to zero;
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

Weights enter as under CFS: each vCPU stands for its VM's group entity on
its hyperthread, weighted by the cgroup's shares split by load
(``calc_group_shares``). Not modelled: the group's own run queue where
several vCPUs of one VM share a hyperthread (the kernel queues one group
entity there, with the VM's whole share on that CPU whenever any of them
is runnable, with one lag, and picks among them inside it; the model
queues each on its own, with its split of the share and its own lag; nor
the buddy ``dequeue_entities`` sets for the group of a sleeper whose
group stays runnable); ``PREEMPT_SHORT`` and
custom slices (no vCPU sets ``sched_attr``'s runtime, so every request
is the base slice); ``NEXT_BUDDY`` and ``PICK_BUDDY`` (no yields);
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
# ns of vruntime: V is a float average, an entity at V is eligible
EPS = 1e-3


def slice_factor(cpus):
    """``get_update_sysctl_factor``: 1 + ilog2(min(cpus, 8)) (``LOG``)."""
    return min(cpus, 8).bit_length()


def _clamp(x, limit):
    return -limit if x < -limit else limit if x > limit else x


class Eevdf(cfs.Cfs):
    """EEVDF's pick, placement and preemption over CFS's run queues."""

    # -- a queue's average and a vCPU's lag ------------------------------

    def _sums(self, th, skip=None):
        """Sum of w x (vruntime - v0) and of w over ``th``'s queue.

        The queue is the waiting vCPUs, the one running (or switching
        in) and the sleepers still queued (``DELAY_DEQUEUE``), less
        ``skip``; w is the weight over NICE_0_LOAD and v0 the queue's
        reference, ``th.min_vr``.
        """
        self._settle(th)
        v0 = th.min_vr
        s = load = 0.0
        c = th.curr if th.curr is not None else th.next
        if (c is not None and c is not skip and c.sstate != V_SLEEP
                and c not in th.rq):
            w = 1.0 / c.vr_scale
            s = w * (c.vruntime - v0)
            load = w
        for x in th.rq:
            if x is not skip:
                w = 1.0 / x.vr_scale
                s += w * (x.vruntime - v0)
                load += w
        for x in th.delayed:
            if x is not skip:
                w = 1.0 / x.vr_scale
                s += w * (x.vruntime - v0)
                load += w
        return s, load

    def _avg(self, th):
        """``avg_vruntime``: V of ``th``'s queue; its reference when empty."""
        s, load = self._sums(th)
        if load:
            th.min_vr += s / load   # keeps the sums small
        return th.min_vr

    def _lag(self, th, v):
        """``update_entity_lag``: ``V - vruntime`` of ``v`` on ``th``.

        Clamped to ``max(2 x slice, tick)`` over its weight.
        """
        s, load = self._sums(th, v)
        w = 1.0 / v.vr_scale
        vr = v.vruntime
        lag = th.min_vr + (s + w * (vr - th.min_vr)) / (load + w) - vr
        return _clamp(lag, max(2.0 * self.base_slice, self.tick_ns)
                      * v.vr_scale)

    def _put(self, th, v, lag):
        """``place_entity``: ``v`` (not queued) at ``V - lag`` on ``th``."""
        s, load = self._sums(th, v)
        if load:
            # inflated so that the lag is ``lag`` once v counts in V
            v.vruntime = (th.min_vr + s / load
                          - lag * (load + 1.0 / v.vr_scale) / load)
        else:
            v.vruntime = th.min_vr      # alone: no lag to keep (PLACE_LAG)

    def _vslice(self, v):
        return self.base_slice * v.vr_scale

    def _update_deadline(self, v):
        """``update_deadline``: a new request once the last one is used."""
        if v.vruntime < v.deadline:
            return False
        v.deadline = v.vruntime + self._vslice(v)
        return True

    # -- the hooks of the CFS core ---------------------------------------

    def _stagger_vruntimes(self, rng):
        super()._stagger_vruntimes(rng)
        for v in self.vcpus:
            v.deadline = v.vruntime + self._vslice(v)

    def _first(self, th, vcpus):
        """``pick_next_entity`` among ``vcpus`` queued on ``th``.

        ``pick_eevdf``: the eligible one with the earliest deadline; if
        the running vCPU holds V down so that none is, the first to become
        eligible. A pick of the whole queue (``vcpus`` is ``th.rq``) weighs
        its delayed sleepers too: one picked ends its delay
        (:meth:`_undelay`) and the pick starts over, so the queue is left
        with none once no runnable vCPU is left to pick.
        """
        dl = th.delayed if vcpus is th.rq else ()
        while vcpus or dl:
            avg = self._avg(th) + EPS
            best = low = None
            for v in vcpus:
                if v.vruntime <= avg:
                    if best is None or v.deadline < best.deadline:
                        best = v
                elif low is None or v.vruntime < low.vruntime:
                    low = v
            for v in dl:
                if v.vruntime <= avg:
                    if best is None or v.deadline < best.deadline:
                        best = v
                elif not vcpus and (low is None
                                    or v.vruntime < low.vruntime):
                    low = v
            best = best if best is not None else low
            if not best.delayed:
                return best
            self._undelay(th, best)
        return None

    def _before(self, th_a, a, th_b, b):
        """The earlier deadline, each measured from its own queue's V."""
        if b is None or (a is not None and a.deadline - self._avg(th_a)
                         <= b.deadline - self._avg(th_b)):
            return a
        return b

    def _pick_curr(self, th, cur):
        """``pick_eevdf`` with the running ``cur`` as a candidate.

        A delayed sleeper may be the one picked.
        """
        avg = self._avg(th) + EPS
        if cur.vruntime > avg:
            cur = None                  # no longer eligible
        elif cur.vruntime < cur.vprot:
            return cur                  # RUN_TO_PARITY
        best = None
        for v in th.rq:
            if v.vruntime <= avg and (best is None
                                      or v.deadline < best.deadline):
                best = v
        for v in th.delayed:
            if v.vruntime <= avg and (best is None
                                      or v.deadline < best.deadline):
                best = v
        if best is None or (cur is not None and cur.deadline < best.deadline):
            return cur
        return best

    def _repick(self, th, cur):
        """``schedule``'s pick with ``cur`` running: delayed ones leave.

        ``pick_next_entity``: a delayed sleeper picked ends its delay and
        the pick starts over.
        """
        while True:
            best = self._pick_curr(th, cur)
            if best is None or not best.delayed:
                return best
            self._undelay(th, best)

    def _account(self, th):
        """``update_curr``: note the running vCPU's vruntime as accounted."""
        self._settle(th)
        c = th.curr
        th.acct_v = c
        if c is not None:
            th.acct_vr = c.vruntime

    def _place(self, th, v):
        """``place_entity`` of a woken ``v``; ``requeue_delayed_entity``.

        A woken vCPU is placed after ``update_curr`` (``enqueue_entity``).
        One still queued (delayed) is not: its lag is judged, and it is
        placed, against V as the running vCPU was last accounted (the last
        tick, wake-up or switch on the thread), so the CPU that vCPU has
        used since still counts as owed to the sleeper. It stays where it
        is while that lag is negative; once positive it is placed afresh
        at that V with none (``DELAY_ZERO``). Either way it gets its
        deadline back or a new one as ``place_entity`` gives it.
        """
        if v.delayed:
            th.delayed.remove(v)
            v.delayed = False
            self._settle(th)
            c = th.curr
            stale = (c is not None and c is th.acct_v
                     and c.sstate != V_SLEEP)
            if stale:
                vr, c.vruntime = c.vruntime, th.acct_vr
            if self._lag(th, v) > 0.0:
                self._put(th, v, 0.0)
                v.deadline = v.vruntime + self._vslice(v)
            if stale:
                c.vruntime = vr
            return
        self._account(th)
        self._put(th, v, v.vlag)
        v.deadline = v.vruntime + self._vslice(v)

    def _dequeued(self, th, v):
        """``dequeue_entity``: ``v`` leaves ``th``'s queue, keeping its lag.

        With ``DELAY_DEQUEUE``, the running ``v`` that goes to sleep while
        not eligible (its lag negative) stays queued instead, in
        ``th.delayed``: it counts in V and competes for the CPU, so the
        others' running spends its debt; it leaves when it is picked
        (:meth:`_first`, :meth:`_repick`) or wakes (:meth:`_place`).
        """
        lag = self._lag(th, v)
        if lag < -EPS and th.curr is v:
            v.delayed = True
            th.delayed.append(v)
            return
        v.vlag = lag

    def _undelay(self, th, v):
        """A delayed ``v`` picked or moved: its dequeue is finished.

        ``finish_delayed_dequeue_entity``: its lag, taken while it still
        counts in V, is kept if negative and dropped if positive
        (``DELAY_ZERO``).
        """
        lag = self._lag(th, v)
        th.delayed.remove(v)
        v.delayed = False
        v.vlag = lag if lag < 0.0 else 0.0

    def _carry(self, v, src, dst):
        """``v`` keeps its lag and its deadline's distance on ``dst``.

        A sleeping ``v`` keeps its lag in ``vlag`` until it wakes; one
        still queued on ``src`` (delayed) leaves it first.
        """
        if v.delayed:
            self._undelay(src, v)
        if v.sstate == V_SLEEP:
            return
        rel = v.deadline - v.vruntime
        self._put(dst, v, self._lag(src, v))
        v.deadline = v.vruntime + rel

    def _wakeup_preempt(self, th, cur, v):
        """``check_preempt_wakeup_fair``, after ``update_curr``.

        ``v`` preempts if the pick returns it; a used request reschedules
        anyway (``update_curr``), and that pick may choose another.
        """
        self._account(th)
        expired = self._update_deadline(cur)
        best = self._pick_curr(th, cur)
        if best is not v and expired:
            best = self._repick(th, cur)
        elif best is not v:
            return
        if best not in (cur, None):
            self._give_way(th, best, self.c_preempt)

    def _arm_slice(self, th):
        """``set_next_entity``: the slice is protected to its deadline."""
        v = th.curr
        v.vprot = v.deadline
        self._account(th)

    def _slice_event(self, th, at):
        """No slice timer: a used slice is noticed at the tick."""
        th.slice_at = at

    def _tick_preempt(self, now):
        """``update_curr`` at the tick: a used request reschedules."""
        for th in self.threads:
            cur = th.curr
            if cur is None or th.state == SWITCH or th.state == WAKING:
                continue
            self._account(th)
            if not self._update_deadline(cur) or not (th.rq or th.delayed):
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
        """``reweight_entity``: each vCPU keeps its lag in service.

        Its vruntime's distance to V (and its deadline's and protected
        slice's to its vruntime) scale by old weight / new weight, which
        leaves every V where it was; a sleeper's kept lag likewise (one
        still queued, delayed, is rescaled as a queued one).
        """
        avgs = [self._avg(th) for th in self.threads]
        for v, new in zip(self.vcpus, scales):
            k = new / v.vr_scale
            v.vr_scale = new
            if k == 1.0:
                continue
            if v.sstate == V_SLEEP and not v.delayed:
                v.vlag *= k
                continue
            old = v.vruntime
            v.vruntime = vr = avgs[v.th.cpu] - (avgs[v.th.cpu] - old) * k
            v.deadline = vr + (v.deadline - old) * k
            v.vprot = vr + (v.vprot - old) * k
        for th in self.threads:
            self._account(th)
