"""The host scheduler of the simulated SMT host: CFS, per hyperthread.

Per-hyperthread run queues ordered by weighted vruntime, timeslices from
``sched_latency`` and ``min_granularity``, the wake-up of a halted vCPU
with its sleeper placement, wake-up preemption gated by the wake-up
granularity (the paper's "scheduling delay", Fig. 1(b)) and, with VM
cgroups, decided between the VMs' group entities; the tick and its
deferred preemptions; RASS's picks on an I/O sibling when the simulated
vSMT-IO kernel has split the core; each VM's cgroup weight, a factor on
its shares that any host may set (``cpu.weight``). A mixin of
:class:`~vsmtio_sim.engine.Simulation`: its methods share the
simulation's state.
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
_push = entities._push


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
        time run from now on.
        """
        for v, scale in zip(self.vcpus, scales):
            v.vr_scale = scale

    def _min_vr(self, th):
        m = None
        for v in th.rq:
            if m is None or v.vruntime < m:
                m = v.vruntime
        c = th.curr
        if c is not None and (m is None or c.vruntime < m):
            m = c.vruntime
        if m is not None and m > th.min_vr:
            th.min_vr = m
        return th.min_vr

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

        The first such in queue order on ties.
        """
        best = None
        for v in vcpus:
            if best is None or v.vruntime < best.vruntime:
                best = v
        return best

    @staticmethod
    def _before(th_a, a, th_b, b):
        """Which of ``a`` (queued on ``th_a``) and ``b`` runs first.

        ``a`` on ties; either may be None.
        """
        if b is None or (a is not None and a.vruntime <= b.vruntime):
            return a
        return b

    def _migrate(self, v, src, dst):
        """Move ``v`` from ``src``'s queue to ``dst``'s with its lag."""
        if src is not dst:
            self._carry(v, src, dst)
            if src.socket != dst.socket:
                self._cross_socket(v)

    def _carry(self, v, src, dst):
        """CFS: ``v`` keeps its vruntime's distance to the queue's minimum."""
        v.vruntime += self._min_vr(dst) - self._min_vr(src)

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
        """CFS's gentle sleeper placement (``place_entity``, 5.3)."""
        floor = self._min_vr(th) - self.latency / 2.0
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
        """CFS's ``check_preempt_wakeup``: a lead beyond the granularity."""
        gran = self.wakeup_gran * v.vr_scale
        if cur.vruntime - v.vruntime <= gran:
            self.deferred.add(th)       # check_preempt_tick's turn
            return
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
            if cur.vruntime - best.vruntime > self._ideal_slice(th):
                self.deferred.discard(th)
                self._give_way(th, best, self.c_tick)

    def _ideal_slice(self, th):
        """CFS's ``sched_slice`` for the running vCPU of ``th``."""
        w = 1.0 / th.curr.vr_scale
        weights = w
        for v in th.rq:
            weights += 1.0 / v.vr_scale
        n = len(th.rq) + 1
        period = self.latency if n <= self.nr_latency else n * self.min_gran
        return period * w / weights

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
            if nxt is not None and nxt.vruntime < v.vruntime:
                self._give_way(th, nxt, self.c_tick)
                return
        self._arm_slice(th)
