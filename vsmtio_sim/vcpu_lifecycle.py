"""A vCPU on a hyperthread: switched in, idle by the kernel model, out.

Models a vCPU thread as the host kernel sees it. Switched in
(:meth:`VcpuLifecycle._run`) it computes if it has work, and otherwise
idles by the kernel model's rule (:meth:`VcpuLifecycle._go_idle`,
:mod:`~vsmtio_sim.kernels`): HLT and block; spin inside the guest
(``idle=poll``); poll in the host for KVM's halt-polling window; or retain
its context in MWAIT for the agent's timeout (§3), unless the agent
switched retention off or, with ``retention_yields``, an I/O-class vCPU is
waiting for the thread. It leaves the thread by halting
(:meth:`VcpuLifecycle._block`, a voluntary switch) or by losing it
(:meth:`VcpuLifecycle._preempt`, involuntary; RASS sends a preempted
borrower back to its CPU sibling, §5). An idle hyperthread takes the next
vCPU its queue offers (:meth:`VcpuLifecycle._dispatch_idle`).

The costs it charges are composed in ``Simulation.__init__`` from
``data/costs.yaml``, where each has its source:

* a halt that switches to another vCPU: VM exit + host context switch +
  L1D flush on the next VM entry (the L1TF mitigation, paper §2.2); a halt
  that leaves the thread idle: VM exit + context switch;
* a preemption: rescheduling IPI + VM exit + context switch + L1D flush;
  an idle thread woken to run a vCPU: the exit latency of the C-state the
  host's idle governor chose for it (:mod:`~vsmtio_sim.cpuidle`,
  ``host_idle``), then IPI + context switch + L1D flush; a polling or
  retaining thread was never idle and has no C-state to leave;
* after every switch the vCPU switched in refills what the previous
  occupant evicted (``cpi.warmup_ns``: an L3-to-L2 refill at
  ``cache_refill_gbps`` of at most ``cache_share_kib``); one resumed from
  retention or halt polling was never switched out and refills nothing.

Its own module because this is where the kernel models differ (what a
halt costs and what the sibling sees meanwhile), apart from the core's
physics (:mod:`~vsmtio_sim.hyperthreads`), the scheduler's choices
(:mod:`~vsmtio_sim.cfs`) and the guest's I/O path that gives an idle
vCPU work again (:mod:`~vsmtio_sim.guest_io`). A mixin of
:class:`~vsmtio_sim.engine.Simulation`: no indirection per event.
"""

from vsmtio_sim import cpuidle
from vsmtio_sim import entities
from vsmtio_sim import kernels

# the inner loop reads these as globals
IDLE = entities.IDLE
COMPUTE = entities.COMPUTE
POLL = entities.POLL
RETAIN = entities.RETAIN
WAKING = entities.WAKING
V_SLEEP = entities.V_SLEEP
V_READY = entities.V_READY
V_RUN = entities.V_RUN
ROLE_IO = entities.ROLE_IO
ROLE_CPU = entities.ROLE_CPU


class VcpuLifecycle(object):
    """Switching a vCPU in, idling it and switching it out."""

    def _run(self, th, v):
        """``v`` has been switched in on ``th``: run or idle it."""
        if v.home is not th and not (
                self.rass_active and th.is_io and v.role is ROLE_CPU
                and th.sib is v.home):
            # re-homed while switching in: send it to its new home
            self._requeue(v)
            self._set(th, IDLE)
            self._dispatch_idle(th)
            return
        now = self.now           # _vstate, inlined: hot
        v.acc[v.sstate] += now - v.since
        v.since = now
        v.sstate = V_RUN
        resumed = th.resuming
        th.resuming = False
        prev = th.cached
        if prev is not v:
            # switched in after another vCPU: refill what it evicted
            th.cached = v
            if prev is not None:
                w = self.warmup[v.wl_idx][prev.wl_idx]
                if w > v.cold:
                    v.cold = w
        if v.work:
            self._set(th, COMPUTE, v)
        else:
            self._go_idle(th, v)
        if th.curr is v:
            if not resumed:
                th.picked_at = now
                self._arm_slice(th)
            elif th.slice_ev is None:   # a VM re-entry keeps its slice
                self._slice_event(th, max(th.slice_at, now))
            if th.wake_pending:
                th.wake_pending = False
                self._check_wake_preempt(th)

    def _check_wake_preempt(self, th):
        """A wake-up that landed during the switch preempts now."""
        w = self._pick(th, borrow=False)
        if w is not None and w.sstate == V_READY:
            self._check_preempt(th, w)

    def _requeue(self, v):
        self._migrate(v, v.th, v.home)
        v.th = v.home
        v.borrowed = False
        if v.work or self.guest_poll:
            self._vstate(v, V_READY)
            v.home.rq.append(v)
        else:
            self._dequeued(v.home, v)
            self._vstate(v, V_SLEEP)

    def _go_idle(self, th, v):
        idle = self.idle
        now = self.now
        v.idle_start = now
        v.halts += 1
        if idle == kernels.RETAIN and not self.retain_on:
            idle = kernels.BLOCK        # the agent switched retention off
        if idle == kernels.BLOCK:
            self._block(th)
        elif idle == kernels.GUEST_POLL:
            self._set(th, POLL, v)
        elif idle == kernels.RETAIN:
            if self.ret_yields and self._io_waiting(th):
                self._block(th)         # another I/O vCPU needs the thread
                return
            timeout = (self.timeout_ns if self.vm_timeouts is None
                       else self.vm_timeouts.get(v.vm, 0.0))
            if timeout <= 0.0:
                self._block(th)         # this VM does not retain
                return
            v.retentions += 1
            self._set(th, RETAIN, v, until=now + timeout)
        else:
            window = v.halt_poll_ns
            if window > 0 and (self.poll_runnable
                               or not th.rq):
                self._set(th, POLL, v, until=now + window)
            else:
                self._block(th)

    @staticmethod
    def _io_waiting(th):
        for x in th.rq:
            if x.role is ROLE_IO:
                return True
        return False

    def _block(self, th):
        """The running vCPU halts and is descheduled (voluntary)."""
        v = th.curr
        v.vol += 1
        self._dequeued(th, v)
        now = self.now           # _vstate, inlined: hot
        v.acc[v.sstate] += now - v.since
        v.since = now
        v.sstate = V_SLEEP
        nxt = self._pick(th)
        self._switch_to(th, nxt, self.c_block_switch if nxt is not None
                        else self.c_block_idle)

    def _preempt(self, th, nxt, cost):
        """Deschedule the running vCPU in favour of ``nxt`` (involuntary)."""
        v = th.curr
        v.invol += 1
        home = v.home if v.borrowed else th
        if v.work or self.guest_poll:
            self._vstate(v, V_READY)
            th.rq.append(v)
        else:
            # a retaining / halt-polling vCPU that loses the CPU halts
            self._dequeued(th, v)
            self._vstate(v, V_SLEEP)
        self._switch_to(th, nxt, cost)
        if v.borrowed:
            # RASS sends a preempted borrower back to its CPU sibling
            if v.sstate == V_READY:
                th.rq.remove(v)
            self._migrate(v, th, home)
            if v.sstate == V_READY:
                home.rq.append(v)
            v.th = home
            v.borrowed = False
            self._dispatch_idle(home)

    def _dispatch_idle(self, th):
        """An idle ``th`` takes the next vCPU its queue offers, if any.

        Woken by an IPI, it first leaves the C-state it entered
        (:mod:`~vsmtio_sim.cpuidle`), then switches.
        """
        if th.state != IDLE:
            return
        nxt = self._pick(th)
        if nxt is None:
            return
        exit_ns = self._leave_idle(th)
        if exit_ns > 0.0:
            self._take(th, nxt)
            self._set(th, WAKING, None, nxt, until=self.now + exit_ns)
        else:
            self._switch_to(th, nxt, self.c_wake_idle)

    def _leave_idle(self, th):
        """The exit latency of ``th``'s C-state; notes the idle period."""
        idle_ns = self.now - th.idle_at
        if idle_ns <= 0.0:
            return 0.0              # never went idle: nothing to leave
        hist = th.idle_hist
        hist.append(idle_ns)
        if len(hist) > cpuidle.INTERVALS:
            del hist[0]
        return self.idle_gov.exit_latency(th.cstate,
                                          th.sib.state == IDLE)
