"""The host scheduler of the simulated SMT host: CFS, per hyperthread.

Per-hyperthread run queues ordered by weighted vruntime, timeslices from
``sched_latency`` and ``min_granularity``, the wake-up of a halted vCPU
with its sleeper placement, wake-up preemption gated by the wake-up
granularity (the paper's "scheduling delay", Fig. 1(b)) and, with VM
cgroups, decided between the VMs' group entities; the tick and its
deferred preemptions; RASS's picks on an I/O sibling when the simulated
vSMT-IO kernel has split the core; each VM's cgroup weight, a factor on
its shares that any host may set (``cpu.weight``).

Weights enter as the cgroups of libvirt give them: each VM is a cgroup,
one group entity in each hyperthread's queue, weighted by the cgroup's
shares split by load (``calc_group_shares``). Where one vCPU of the VM
is on a hyperthread, that vCPU stands for its group entity there, as the
two go on and off the queue together. Where several meet (their homes, a
borrow, a move), the group entity is modelled as the kernel has it
(:class:`~vsmtio_sim.entities.Group`) and kept there after, as the
kernel keeps a cgroup's entity on each CPU. Libvirt puts each vCPU
thread in a cgroup of its own under the domain's, so the vCPUs are equal
entities of the group's own queue, and every step walks both levels as
5.3's ``kernel/sched/fair.c`` does:

* ``update_curr``: the group entity runs whenever a vCPU inside it does,
  its vruntime advancing at the group's weight;
* ``pick_next_entity`` on each level: the lowest vruntime among the
  hyperthread's entities, then, in a group, among its vCPUs;
* ``enqueue_entity``: a woken vCPU is placed as a sleeper in its group's
  queue (against the group's ``min_vruntime``), and the group, if none
  of its vCPUs was queued, as a sleeper in the hyperthread's; a group
  that empties leaves the hyperthread's queue, keeping its vruntime;
* ``check_preempt_wakeup``: the woken vCPU is compared where its entity
  and the running one's meet (``find_matching_se``): inside their group
  if they share one, else their entities, with the granularity over the
  woken entity's weight;
* ``sched_slice``: the period of the running vCPU's own queue's length,
  times its weight's share at each level; ``check_preempt_tick`` compares
  at the level where the two vCPUs meet;
* migration keeps a vCPU's vruntime's distance to the minimum of the
  level it leaves, at the level it joins.

A mixin of :class:`~vsmtio_sim.engine.Simulation`: its methods share
the simulation's state.
"""

from vsmtio_sim import entities

# the inner loop reads these as globals
IDLE = entities.IDLE
COMPUTE = entities.COMPUTE
POLL = entities.POLL
RETAIN = entities.RETAIN
SWITCH = entities.SWITCH
WAKING = entities.WAKING
V_SLEEP = entities.V_SLEEP
V_READY = entities.V_READY
V_RUN = entities.V_RUN
EV_SLICE = entities.EV_SLICE
EV_TICK = entities.EV_TICK
ROLE_IO = entities.ROLE_IO
ROLE_CPU = entities.ROLE_CPU
Group = entities.Group
_push = entities._push


def _grp_on(th, v):
    """``v``'s group if queued on ``th`` (a moving vCPU may not be yet)."""
    g = v.grp
    return g if g is not None and g.th is th else None


def _match(th, cur, v):
    """``find_matching_se``: ``cur``'s and ``v``'s entities where they meet.

    ``cur`` runs on ``th``, ``v`` is queued there: inside their group if
    they share one, else the entities of ``th``'s queue.
    """
    g = _grp_on(th, cur)
    if g is not None and v.grp is g:
        return cur, v
    return (g if g is not None else cur), _root(v)


def _root(v):
    """What ``v`` is queued as on its hyperthread: itself or its group."""
    return v.grp if v.grp is not None else v


class Cfs(object):
    """CFS's part of the simulated host."""

    # {vm: factor on its cgroup's weight}; replaced, never mutated, by
    # set_vm_weights (absent: 1, libvirt's default weight)
    vm_weights = {}

    def set_vm_weights(self, factors):
        """Multiply each VM's cgroup weight by its factor; the number changed.

        A stock host's lever (``cpu.weight`` of the domain's cgroup, what
        nova's ``quota:cpu_shares`` sets), so every kernel model honours
        it. With VM cgroups the factor scales the group's shares (its
        per-CPU weight follows at the next tick's load update, set here at
        once); in one flat run queue it scales each vCPU's own weight.
        Every thread is settled first so the time already run is charged
        at the old weight.
        """
        factors = {vm: float(f) for vm, f in (factors or {}).items()
                   if vm in self.peers and float(f) != 1.0}
        changed = sum(1 for vm in set(factors) | set(self.vm_weights)
                      if factors.get(vm) != self.vm_weights.get(vm))
        if not changed:
            return 0
        for th in self.threads:
            self._settle(th)
        self.vm_weights = factors
        for v in self.vcpus:
            v.weight = int(round(1024 * factors.get(v.vm, 1.0)))
        self._rescale([1024.0 / self._group_weight(v) if self.group_shares
                       else 1.0 / factors.get(v.vm, 1.0)
                       for v in self.vcpus])
        return changed

    def _rescale(self, scales):
        """Give every vCPU its new ``vr_scale`` (``self.vcpus``' order).

        CFS keeps each vruntime as it is: the new weight applies to the
        time run from now on. A vCPU in a group keeps its own cgroup's
        weight; the group gets its shares (:meth:`_group_scale`).
        """
        for v, scale in zip(self.vcpus, scales):
            v.vr_scale = scale if v.grp is None else 1.0
        for th in self.threads:
            for g in th.groups.values() if th.groups else ():
                g.vr_scale = self._group_scale(g)

    def _min_vr(self, th):
        """``min_vruntime`` of ``th``'s queue (its entities), never back."""
        m = None
        if th.groups:
            for v in th.rq:
                e = _root(v)
                if m is None or e.vruntime < m:
                    m = e.vruntime
            c = th.curr
            if c is not None:
                e = _grp_on(th, c) or c
                if m is None or e.vruntime < m:
                    m = e.vruntime
        else:
            for v in th.rq:
                if m is None or v.vruntime < m:
                    m = v.vruntime
            c = th.curr
            if c is not None and (m is None or c.vruntime < m):
                m = c.vruntime
        if m is not None and m > th.min_vr:
            th.min_vr = m
        return th.min_vr

    def _group_min(self, g):
        """``min_vruntime`` of group ``g``'s own queue (its vCPUs there)."""
        th = g.th
        m = None
        for v in th.rq:
            if v.grp is g and (m is None or v.vruntime < m):
                m = v.vruntime
        c = th.curr
        if c is not None and c.grp is g and (m is None or c.vruntime < m):
            m = c.vruntime
        if m is not None and m > g.min_vr:
            g.min_vr = m
        return g.min_vr

    def _level_min(self, th, v):
        """The minimum of the queue ``v`` is (or joins) on ``th``."""
        g = _grp_on(th, v)
        return self._group_min(g) if g is not None else self._min_vr(th)

    def _arm_slice(self, th):
        sl = self._ideal_slice(th)
        if sl < self.min_gran:
            sl = self.min_gran
        # one pending event per hyperthread: a later deadline is picked up
        # when the event fires, an earlier one needs a new event
        at = th.slice_at = self.now + sl
        if th.slice_ev is None or at < th.slice_ev:
            self._slice_event(th, at)

    def _slice_event(self, th, at):
        """Make ``at`` the one pending slice event of ``th``."""
        th.sver += 1
        th.slice_ev = at
        _push(self.heap, (at, self._seq(), EV_SLICE, th, th.sver))

    def _pick(self, th, borrow=True):
        """The next vCPU for ``th`` (not removed from its queue)."""
        if self.rass_active and th.is_io:
            best = self._first(th, [v for v in th.rq
                                    if v.role is not ROLE_CPU])
            if best is not None or not borrow or not self.borrow_on:
                return best
            # an idle I/O hyperthread pulls a CPU-class vCPU in the
            # scheduler's own order: the patched kernel (host_kernel_patches,
            # 0001) leaves which one to it and the agent's placement, no
            # symbiosis
            return self._before(
                th.sib, self._first(th.sib, [v for v in th.sib.rq
                                             if v.role is ROLE_CPU]),
                th, self._first(th, [v for v in th.rq
                                     if v.role is ROLE_CPU]))
        return self._first(th, th.rq)

    def _first(self, th, vcpus):
        """CFS's choice among ``vcpus`` queued on ``th``: the lowest vruntime.

        The first such in queue order on ties. With groups on ``th``, the
        lowest of the entities they are queued in, then, in a group, the
        lowest of its vCPUs among ``vcpus``.
        """
        best = None
        if th.groups:
            for v in vcpus:
                e = _root(v)
                if best is None or e.vruntime < best.vruntime:
                    best = e
            if best is None or best.__class__ is not Group:
                return best
            g, best = best, None
            for v in vcpus:
                if v.grp is g and (best is None
                                   or v.vruntime < best.vruntime):
                    best = v
            return best
        for v in vcpus:
            if best is None or v.vruntime < best.vruntime:
                best = v
        return best

    @staticmethod
    def _before(th_a, a, th_b, b):
        """Which of ``a`` (queued on ``th_a``) and ``b`` runs first.

        ``a`` on ties; either may be None. Of the entities they are
        queued as on their hyperthreads.
        """
        if b is None or (a is not None
                         and _root(a).vruntime <= _root(b).vruntime):
            return a
        return b

    def _migrate(self, v, src, dst):
        """Move ``v`` from ``src``'s queue to ``dst``'s with its lag."""
        if src is not dst:
            self._carry(v, src, dst)
            if src.socket != dst.socket:
                self._cross_socket(v)

    def _carry(self, v, src, dst):
        """CFS: ``v`` keeps its vruntime's distance to the queue's minimum.

        With groups: the minimum of the level it leaves (its group on
        ``src``, or ``src``'s queue), at the level it joins. Asleep, it
        joins ``dst`` alone, and :meth:`_place` takes it on from there; a
        runnable one joins its VM's group on ``dst`` (:meth:`_group_for`),
        which enters ``dst``'s queue as a woken entity if none of its
        vCPUs was queued there.
        """
        g = self._group_for(dst, v) if v.sstate != V_SLEEP else None
        if g is None and v.grp is None:
            v.vruntime += self._min_vr(dst) - self._min_vr(src)
            return
        rel = v.vruntime - self._level_min(src, v)
        if g is None:
            if v.grp is not None:
                self._stand_alone(v)
            v.vruntime = self._min_vr(dst) + rel
            return
        self._join(dst, g, v)
        v.vruntime = self._group_min(g) + rel

    def _join(self, th, g, v):
        """``v`` enters group ``g`` on ``th``; the group with it if empty.

        ``enqueue_task_fair`` walks up: a group none of whose vCPUs was
        queued enters the hyperthread's queue with the sleeper's
        placement (``ENQUEUE_WAKEUP`` at every level above the task).
        """
        busy = self._busy(g, v)
        v.grp = g
        v.vr_scale = 1.0
        if not busy:
            self._place_entity(th, g)

    def _place_entity(self, th, e):
        """CFS's gentle sleeper placement (``place_entity``, 5.3)."""
        floor = self._min_vr(th) - self.latency / 2.0
        if e.vruntime < floor:
            e.vruntime = floor

    def _make_group(self, th, y):
        """``y``'s VM's group on ``th``, where ``y`` stood for it alone.

        The group entity is what ``y`` was in the hyperthread's queue (its
        vruntime, its weight); ``y`` is the one vCPU of the group's own
        queue, whose clock starts at its own vruntime, at the weight of
        its own cgroup (libvirt's per-vCPU cgroup, the default weight).
        """
        g = th.groups[y.vm] = Group(y.vm, th)
        g.vruntime, g.vr_scale = y.vruntime, y.vr_scale
        g.min_vr = y.vruntime
        y.grp = g
        y.vr_scale = 1.0
        return g

    def _first_groups(self):
        """The groups of the vCPUs queued together at the start."""
        for v in self.vcpus:
            if v.grp is None:
                g = self._group_for(v.th, v)
                if g is not None:
                    v.grp = g
                    v.vr_scale = 1.0

    def _stand_alone(self, v):
        """``v`` leaves its group to stand for its VM alone."""
        v.grp = None
        v.vr_scale = 1024.0 / self._group_weight(v)

    def _take(self, th, v):
        src = v.th
        src.rq.remove(v)
        if src is not th:
            self._migrate(v, src, th)
        v.th = th
        v.borrowed = th is not v.home

    def _switch_to(self, th, nxt, cost):
        if nxt is not None:
            self._take(th, nxt)
        self._set(th, SWITCH, None, nxt, until=self.now + cost)

    def _wake(self, v):
        """A halted ``v`` has work again: enqueue it on its home thread.

        Placed like CFS's sleeper (``place_entity``: at most half a latency
        behind the queue's minimum), then it runs at once on an idle
        thread (an IPI, a context switch and the L1D flush of the VM entry,
        ``data/costs.yaml``), after a switch in progress, or by wake-up
        preemption.
        """
        th = v.home
        if v.th is not th:
            self._migrate(v, v.th, th)
        v.th = th
        self._place(th, v)
        now = self.now           # _vstate, inlined: hot
        v.acc[v.sstate] += now - v.since
        v.since = now
        v.sstate = V_READY
        th.rq.append(v)
        st = th.state
        if st == IDLE:
            self._dispatch_idle(th)
            return
        if st == SWITCH or st == WAKING:
            th.wake_pending = True
            return
        self._check_preempt(th, v)

    def _place(self, th, v):
        """``enqueue_task_fair`` of a woken ``v`` on ``th``.

        CFS's gentle sleeper placement (``place_entity``, 5.3): at most
        half a latency behind the minimum of its queue, alone or in its
        VM's group on ``th`` (:meth:`_group_for`); a group none of whose
        vCPUs was queued is placed so in ``th``'s queue too.
        """
        g = self._group_for(th, v)
        if g is None:
            self._place_entity(th, v)
            return
        if v.grp is not g:
            # it stood alone on th (a sleeper moves alone, _carry)
            rel = v.vruntime - self._min_vr(th)
            self._join(th, g, v)
            v.vruntime = self._group_min(g) + rel
        elif not self._busy(g, v):
            self._place_entity(th, g)
        floor = self._group_min(g) - self.latency / 2.0
        if v.vruntime < floor:
            v.vruntime = floor

    def _dequeued(self, th, v):
        """``v`` leaves ``th``'s queue to sleep: CFS keeps nothing of it."""

    def _check_preempt(self, th, v):
        st = th.state
        cur = th.curr
        if (self.rass_active and cur.borrowed and th.is_io
                and v.role is not ROLE_CPU):
            # RASS: I/O-class vCPUs have strict priority on the I/O sibling
            self._preempt(th, v, self.c_preempt)
            return
        if (st == POLL and self.poll_stops) or (
                st == RETAIN and self.ret_yields and v.role is ROLE_IO):
            # halt polling stops when single_task_running() turns false;
            # a retention yields to a runnable I/O-class vCPU the same way
            self._block(th)
            return
        self._settle(th)
        self._wakeup_preempt(th, cur, v)

    def _wakeup_preempt(self, th, cur, v):
        """CFS's ``check_preempt_wakeup``: a lead beyond the granularity.

        Where the two meet (:func:`_match`), the granularity over the
        woken entity's weight; a group that wins gives the thread to its
        first vCPU.
        """
        c, e = _match(th, cur, v)
        gran = self.wakeup_gran * e.vr_scale
        if c.vruntime - e.vruntime <= gran:
            self.deferred.add(th)       # check_preempt_tick's turn
            return
        if e is not v:
            v = self._first(th, [x for x in th.rq if x.grp is e])
        self._give_way(th, v, self.c_preempt)

    def _give_way(self, th, nxt, cost):
        """The running vCPU of ``th`` loses the thread to ``nxt``.

        A computing (or guest-polling) vCPU is preempted; one that halted
        (retaining, halt polling) is descheduled as a halt, and CFS then
        picks the next vCPU itself.
        """
        if th.state == COMPUTE or self.guest_poll:
            self._preempt(th, nxt, cost)
        else:
            self._block(th)

    def _group_weight(self, v):
        """The weight of ``v``'s VM on ``v``'s thread, ``v`` runnable there.

        With each VM in its own cgroup, a wake-up from another VM is
        decided between the two VMs' group entities (``find_matching_se``)
        and the granularity scales with the woken entity's weight
        (``wakeup_gran``: ``gran * NICE_0_LOAD / weight``). That weight is
        the cgroup's shares split by load (``calc_group_shares``): shares x
        (one runnable vCPU here) / (the VM's load elsewhere + 1). A VM
        loaded on many CPUs weighs little on each, needs a lag beyond the
        sleeper credit to preempt, and so waits for the tick. The shares
        are the cgroup's weight times the VM's factor (set_vm_weights).
        """
        shares = self.group_shares * self.vm_weights.get(v.vm, 1.0)
        tg = self.vm_load[v.vm] - v.load + 1.0
        w = shares / tg if tg > 1.0 else shares
        return w if w > 2.0 else 2.0    # MIN_SHARES

    # -- a VM's group entity on a hyperthread ----------------------------

    def _busy(self, g, skip=None):
        """Whether a vCPU other than ``skip`` is queued in group ``g``."""
        for x in g.sleepers:
            if x is not skip:
                return True
        th = g.th
        c = th.curr if th.curr is not None else th.next
        if (c is not None and c is not skip and c.grp is g
                and c.sstate != V_SLEEP):
            return True
        for x in th.rq:
            if x.grp is g and x is not skip:
                return True
        return False

    @staticmethod
    def _roots(th, vcpus, whole, skip=None):
        """The entities of ``th``'s queue that ``vcpus`` are queued in.

        Each vCPU's group in its stead; with ``whole`` also the groups
        queued for their sleepers alone; ``skip`` aside.
        """
        out = []
        for x in vcpus:
            e = x.grp if x.grp is not None else x
            if e is not skip and e not in out:
                out.append(e)
        if whole:
            for g in th.groups.values():
                if g.sleepers and g is not skip and g not in out:
                    out.append(g)
        return out

    def _group_for(self, th, v):
        """The group ``v`` joins on ``th``, or None: it stands alone there.

        Its VM's group on ``th``, made when ``v`` meets another of the
        VM's vCPUs queued there alone (:meth:`_make_group`). Only with VM
        cgroups.
        """
        if not self.group_shares:
            return None
        g = th.groups.get(v.vm)
        if g is not None:
            return g
        vm = v.vm
        for x in th.rq:
            if x.vm == vm and x is not v:
                return self._make_group(th, x)
        for x in th.delayed:
            if x.vm == vm and x is not v and x.__class__ is not Group:
                return self._make_group(th, x)
        x = th.curr if th.curr is not None else th.next
        if (x is not None and x.vm == vm and x is not v
                and x.sstate != V_SLEEP):
            return self._make_group(th, x)
        return None

    def _group_scale(self, g):
        """``calc_group_shares``: the weight of ``g``, as ``vr_scale``.

        The VM's shares times its vCPUs' load on ``g``'s hyperthread over
        the VM's load everywhere, the load there being at least the number
        of vCPUs queued in ``g``; an empty group keeps its weight
        (``update_cfs_group``).
        """
        th = g.th
        here = n = 0.0
        for v in self.peers[g.vm]:
            if v.grp is g:
                here += v.load
                if v in g.sleepers or v in th.rq or (
                        v.sstate != V_SLEEP and v.th is th):
                    n += 1.0
        if not n:
            return g.vr_scale
        load = max(n, here)
        shares = self.group_shares * self.vm_weights.get(g.vm, 1.0)
        w = shares * load / (self.vm_load[g.vm] - here + load)
        return 1024.0 / (w if w > 2.0 else 2.0)    # MIN_SHARES

    def _tick(self):
        """The scheduler tick (all CPUs at once: ``skew_tick`` is off).

        With VM cgroups, first updates every vCPU's runnable average (PELT:
        a geometric series with ``load_half_life_ms``) and each VM's sum.
        Then does ``check_preempt_tick`` where a woken vCPU lost wake-up
        preemption: the running vCPU gives way once it has run
        ``min_granularity`` since it was switched in and leads the waiting
        one's vruntime by more than its ideal slice.
        """
        now = self.now
        self._push(now + self.tick_ns, EV_TICK, None, 0)
        if self.group_shares:
            self._update_loads(now)
        self._tick_preempt(now)

    def _update_loads(self, now):
        tick = self.tick_ns
        y = self.pelt_y
        for vm, vs in self.peers.items():
            total = 0.0
            for v in vs:
                acc = v.acc
                busy = acc[V_READY] + acc[V_RUN]
                if v.sstate != V_SLEEP:
                    busy += now - v.since
                frac = (busy - v.busy_mark) / tick
                v.busy_mark = busy
                v.load = v.load * y + (1.0 - y) * frac
                total += v.load
            self.vm_load[vm] = total
        for th in self.threads:
            self._settle(th)
        self._rescale([1024.0 / self._group_weight(v) for v in self.vcpus])

    def _tick_preempt(self, now):
        if not self.deferred:
            return
        for th in sorted(self.deferred, key=lambda t: t.cpu):
            cur = th.curr
            if th.state == SWITCH or th.state == WAKING:
                continue                # the switch's end checks again
            best = self._pick(th, borrow=False) if cur is not None else None
            if best is None or best.sstate != V_READY:
                self.deferred.discard(th)
                continue
            if now - th.picked_at < self.min_gran:
                continue
            self._settle(th)
            c, e = _match(th, cur, best)
            if c.vruntime - e.vruntime > self._ideal_slice(
                    th, c is not cur):
                self.deferred.discard(th)
                self._give_way(th, best, self.c_tick)

    def _ideal_slice(self, th, top=False):
        """CFS's ``sched_slice`` for the running vCPU of ``th``.

        In a group, the period of the group's own queue's length, times
        the vCPU's share of the group, times the group's share of the
        hyperthread; ``top``: the group's own slice in the hyperthread's
        queue.
        """
        cur = th.curr
        if not th.groups:
            w = 1.0 / cur.vr_scale
            weights = w
            for v in th.rq:
                weights += 1.0 / v.vr_scale
            return self._period(len(th.rq) + 1) * w / weights
        e = _grp_on(th, cur) or cur
        roots = self._roots(th, th.rq, False, e)
        w = 1.0 / e.vr_scale
        weights = w
        for x in roots:
            weights += 1.0 / x.vr_scale
        if e is cur or top:
            return self._period(len(roots) + 1) * w / weights
        n = 1
        for x in th.rq:
            if x.grp is e:
                n += 1
        # its vCPUs weigh the same (each its own cgroup's default)
        return self._period(n) / n * w / weights

    def _period(self, n):
        """``__sched_period`` of a queue of ``n``."""
        return self.latency if n <= self.nr_latency else n * self.min_gran

    def _slice_end(self, th):
        th.slice_ev = None
        v = th.curr
        if v is None:
            return
        if th.slice_at > self.now:
            self._slice_event(th, th.slice_at)
            return
        self._settle(th)
        if v.borrowed:
            nxt = self._pick(th)
            if nxt is not None:
                self._preempt(th, nxt, self.c_tick)
                return
        else:
            nxt = self._pick(th, borrow=False)
            if nxt is not None:
                c, e = _match(th, v, nxt)
                if e.vruntime < c.vruntime:
                    self._give_way(th, nxt, self.c_tick)
                    return
        self._arm_slice(th)
