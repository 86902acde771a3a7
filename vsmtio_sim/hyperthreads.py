"""The simulated SMT core: each hyperthread's state and the progress in it.

At every instant a hyperthread is idle, computing, polling, retaining (MWAIT
context retention) or switching (a vCPU switch), and this module alone
turns that state into counters: time per state, and for a computing vCPU
the instructions it retires. Its speed is its solo speed times a factor
set by what its sibling does, the two siblings sharing one core's
resources (``data/costs.yaml``, from the paper's Table 2: 32% beside a
sibling switching vCPUs, 73% beside one repeating the HALT-polling loop,
100% beside an idle or retaining one, which releases the core, §3); beside
a computing sibling, the co-run factor of the two workloads' CPI stacks
(:mod:`~vsmtio_sim.cpi`, ``smt_pair_speedup``). A vCPU still
refilling the working set a switch evicted (``cold``, charged where it is
switched in, :mod:`~vsmtio_sim.vcpu_lifecycle`) spends cycles and
retires nothing. The cycle-accounting counters the simulated kernel
measures CPI stacks from for RASS count only beside a resting sibling
(§4.3.2).

Progress is integrated piecewise: every state change settles both siblings
(:meth:`Hyperthreads._settle`) and re-times the burst completions the
change affects (:meth:`Hyperthreads._arm`). Stale completion events are
dropped lazily by version (``Thread.aver``).

Its own module because it is the physics of the core: it holds no
scheduling choice (CFS, RASS, the kernel model's idle rule) and no
knowledge of what the workloads do. A mixin of
:class:`~vsmtio_sim.engine.Simulation`; its methods are the hottest
of the simulator and share the simulation's state with no indirection.
"""

from vsmtio_sim import entities

# the inner loop reads these as globals
IDLE = entities.IDLE
COMPUTE = entities.COMPUTE
POLL = entities.POLL
RETAIN = entities.RETAIN
SWITCH = entities.SWITCH
WAKING = entities.WAKING
EV_ACT = entities.EV_ACT
_push = entities._push


class Hyperthreads(object):
    """The hyperthreads' state machine and the accounting of progress."""

    def _settle(self, th):
        now = self.now
        dt = now - th.last
        if dt <= 0.0:
            return
        th.last = now
        st = th.state
        th.state_ns[st] += dt
        v = th.curr
        if v is None:
            return
        v.run_ns += dt
        v.vruntime += dt * v.vr_scale
        g = v.grp
        if g is not None:
            # its VM's group entity runs with it (update_curr)
            g.vruntime += dt * g.vr_scale
        if st == COMPUTE:
            cold = v.cold
            if cold > 0.0:
                # refilling its working set: cycles pass, nothing retires
                if cold >= dt:
                    v.cold = cold - dt
                    instr = 0.0
                else:
                    v.cold = 0.0
                    instr = th.rate * (dt - cold)
            else:
                instr = th.rate * dt
            v.instructions += instr
            v.cycles += dt * self.ghz
            sst = th.sib.state
            if sst == RETAIN or sst == IDLE:
                # cycle accounting measured beside a resting sibling (§4.3.2)
                v.base_cycles += instr * v.wl.base
                v.miss_cycles += instr * v.wl.miss
            if v.burst is not None:
                v.burst -= instr
        elif st == RETAIN:
            v.retention_ns += dt
        else:
            v.poll_ns += dt

    def _vstate(self, v, s):
        now = self.now
        v.acc[v.sstate] += now - v.since
        v.since = now
        v.sstate = s

    def _arm(self, th):
        """(Re)time the running burst of a computing hyperthread.

        The vCPU's solo rate times its sibling's effect (Table 2, co-run).
        """
        v = th.curr
        sib = th.sib
        s = sib.state
        if s == COMPUTE:
            rate = v.corun_rate[sib.curr.wl_idx]
        else:
            rate = v.rate_by[s]
        if rate != th.rate:
            th.rate = rate
            if v.burst is not None:
                th.aver += 1
                t = self.now + v.cold + max(v.burst, 0.0) / rate
                _push(self.heap, (t, self._seq(), EV_ACT, th,
                                  th.aver))

    def _set(self, th, state, curr=None, nxt=None, until=None):
        now = self.now
        sib = th.sib
        if th.last < now:
            self._settle(th)
        if sib.last < now:
            self._settle(sib)
        if state == IDLE and th.state != IDLE:
            # the idle governor picks the C-state it enters (cpuidle)
            th.idle_at = now
            th.cstate = self.idle_gov.select(th.idle_hist)
        th.state = state
        th.curr = curr
        th.next = nxt
        th.aver += 1
        if state == COMPUTE:
            # _arm, inlined: a new burst timing is always pushed
            s = sib.state
            if s == COMPUTE:
                rate = curr.corun_rate[sib.curr.wl_idx]
            else:
                rate = curr.rate_by[s]
            th.rate = rate
            if curr.burst is not None:
                th.aver += 1
                t = now + curr.cold + max(curr.burst, 0.0) / rate
                _push(self.heap, (t, self._seq(), EV_ACT, th, th.aver))
        elif until is not None:
            _push(self.heap, (until, self._seq(), EV_ACT, th,
                              th.aver))
        if sib.state == COMPUTE:
            self._arm(sib)

    def _act_end(self, th):
        """The timed end of what ``th`` was doing (the loop inlines two)."""
        st = th.state
        if st == SWITCH:
            v = th.next
            if v is None:
                self._set(th, IDLE)
                self._dispatch_idle(th)
            else:
                self._run(th, v)
        elif st == COMPUTE:
            self._burst_done(th)
        elif st == RETAIN:
            th.curr.retention_timeouts += 1
            self._block(th)
        elif st == POLL:
            self._block(th)
        elif st == WAKING:
            # out of its C-state: now the switch to the vCPU it woke for
            self._set(th, SWITCH, None, th.next,
                      until=self.now + self.c_wake_idle)
