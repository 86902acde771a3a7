"""The discrete-event simulated SMT host.

N cores x 2 hyperthreads; vCPUs time-share hyperthreads under a CFS-like
scheduler (per-hyperthread run queues, weighted vruntime, timeslices from
``sched_latency``/``min_granularity``, wake-up preemption gated by the
wake-up granularity: the paper's "scheduling delay", Fig. 1(b)).

At every instant a hyperthread is in one state: idle, computing, polling,
retaining (MWAIT context retention) or switching (a vCPU switch: VM exit,
context switch, L1D flush, IPI, cache refill). A computing vCPU's speed is
its solo speed times a factor set by its sibling's state (data/costs.yaml,
paper Table 2; co-run from :mod:`vsmtio_agent.sim.cpi`). Progress is
integrated piecewise: every state change settles both siblings and re-times
the affected burst completions. Stale events are dropped lazily by version.
The parts: :mod:`~vsmtio_agent.sim.entities` (hyperthreads and vCPUs),
:mod:`~vsmtio_agent.sim.cfs` (the host scheduler),
:mod:`~vsmtio_agent.sim.vsmtio_kernel` (what an agent decision changes) and
:mod:`~vsmtio_agent.sim.counters` (what drivers and reports read).

Outcomes (throughputs, switches, spinning) are never inputs: they emerge
from the costs, the workloads and the kernel model.
"""

import heapq
import itertools
import random

from vsmtio_agent import model
from vsmtio_agent.sim import cfs
from vsmtio_agent.sim import counters
from vsmtio_agent.sim import cpi as cpi_model
from vsmtio_agent.sim import entities
from vsmtio_agent.sim import kernels
from vsmtio_agent.sim import vsmtio_kernel
from vsmtio_agent.sim import workloads

# the inner loop reads these as globals
IDLE = entities.IDLE
COMPUTE = entities.COMPUTE
POLL = entities.POLL
RETAIN = entities.RETAIN
SWITCH = entities.SWITCH
STATES = entities.STATES
V_SLEEP = entities.V_SLEEP
V_READY = entities.V_READY
V_RUN = entities.V_RUN
EV_IO = entities.EV_IO
EV_ACT = entities.EV_ACT
EV_SLICE = entities.EV_SLICE
EV_TICK = entities.EV_TICK
ROLE_IO = entities.ROLE_IO
ROLE_CPU = entities.ROLE_CPU
Thread = entities.Thread
Vcpu = entities.Vcpu
_push = entities._push
VcpuTotals = counters.VcpuTotals


class Simulation(cfs.Cfs, vsmtio_kernel.VsmtioKernel, counters.Counters):
    """A simulated SMT host running one scenario under one kernel model.

    The event loop, the accounting of progress and the vCPU life cycle
    (run, idle by the kernel model's rule, block, wake, interrupts, halt
    polling) live here; the host scheduler, the vSMT-IO kernel's knobs and
    the counters are mixins of their own modules.
    """

    def __init__(self, scenario, kernel, seed=1):
        self.scenario = scenario
        self.kernel = kernels.get(kernel)
        # the inner loop reads these flags, not the kernel's fields
        idle = self.kernel.idle
        self.idle = idle
        self.guest_poll = idle == kernels.GUEST_POLL
        self.halt_poll = idle == kernels.HALT_POLL
        self.poll_runnable = self.kernel.poll_when_runnable
        self.poll_stops = self.halt_poll and not self.poll_runnable
        self.seed = seed
        self.now = 0.0
        self.events = 0
        self.heap = []
        self._seq = itertools.count().__next__   # ties: push order
        self.decisions = 0
        self.swaps = 0
        self.rass_active = False
        self.retain_on = True       # the agent's decision: retention allowed
        self.borrow_on = True       # CPU-class vCPUs may borrow I/O siblings
        c = scenario.costs
        self.ghz = c['cpu_ghz']
        self.f_switch = c['sibling_switching_speed']
        self.f_poll = c['sibling_polling_speed']
        self.f_retain = c['sibling_retaining_speed']
        exit_, ctx = c['vm_exit_ns'], c['context_switch_ns']
        flush, ipi = c['l1d_flush_ns'], c['ipi_ns']
        self.c_block_switch = exit_ + ctx + flush
        self.c_block_idle = exit_ + ctx
        self.c_wake_idle = ipi + ctx + flush
        self.c_preempt = ipi + exit_ + ctx + flush
        self.c_tick = exit_ + ctx + flush
        self.c_hp_resume = exit_ + flush
        self.c_ret_resume = c['retention_resume_ns']
        s = scenario.scheduler
        self.latency = s['latency_us'] * 1e3
        self.min_gran = s['min_granularity_us'] * 1e3
        self.wakeup_gran = s['wakeup_granularity_us'] * 1e3
        # per-VM cgroups (libvirt): cross-VM wake-ups are decided between
        # the VMs' group entities; 0 = one flat run queue per hyperthread
        self.group_shares = float(s['vm_cgroup_shares'])
        self.tick_ns = 1e9 / s['tick_hz']
        self.pelt_y = 0.5 ** (self.tick_ns / (s['load_half_life_ms'] * 1e6))
        self.deferred = set()
        self.nr_latency = max(1, int(self.latency // self.min_gran))
        hp = scenario.haltpoll
        self.hp_max = (hp['enhanced_max_ns'] if self.kernel.enhanced
                       else hp['max_ns'])
        self.hp_grow, self.hp_shrink = hp['grow'], hp['shrink']
        self.hp_grow_start = hp['grow_start_ns']
        self.timeout_ns = float(scenario.initial_timeout_ns)
        self.ret_yields = scenario.vsmtio['retention_yields']

        pair = c['smt_pair_speedup']
        wls = scenario.workload_list
        self.corun = [[cpi_model.corun_factor((a.base, a.miss),
                                              (b.base, b.miss), pair)
                       for b in wls] for a in wls]
        # the refill a vCPU of workload a needs after one of b ran (ns)
        self.warmup = [[cpi_model.warmup_ns(
            a.working_set_kib, b.working_set_kib, c['cache_share_kib'],
            c['cache_refill_gbps']) for b in wls] for a in wls]

        n = scenario.cores
        self.topology = model.Topology.uniform(n)
        self.threads = [Thread(cpu, cpu % n, cpu >= n)
                        for cpu in range(2 * n)]
        for cpu in range(n):
            a, b = self.threads[cpu], self.threads[cpu + n]
            a.sib, b.sib = b, a

        self.vcpus = []
        index = {w.name: i for i, w in enumerate(wls)}
        for vm, i, wl, cpu in scenario.placement():
            rng = random.Random('%d/%s/%d' % (seed, vm, i))
            v = Vcpu(model.VcpuRef(vm, i), vm, wl, index[wl.name],
                     self.ghz, rng)
            th = self.threads[cpu]
            v.home = v.th = v.origin = th
            th.rq.append(v)
            self.vcpus.append(v)
        self.by_ref = {v.ref: v for v in self.vcpus}
        for v in self.vcpus:
            # its speed by its sibling's state (Table 2), and beside each
            # workload computing (co-run), precomputed for _arm
            solo = v.solo_rate
            v.rate_by = (solo, None, solo * self.f_poll,
                         solo * self.f_retain, solo * self.f_switch)
            v.corun_rate = [solo * f for f in self.corun[v.wl_idx]]
        peers = {}
        for v in self.vcpus:
            peers.setdefault(v.vm, []).append(v)
        self.peers = peers
        self.vm_load = dict.fromkeys(peers, 0.0)
        for v in self.vcpus:
            v.peers = peers[v.vm]
            if v.wl.does_io and v.wl.irq:
                # its own stream: the burst/device draws stay as without
                rng = random.Random('%d/%s/%d/irq' % (seed, v.vm,
                                                      v.ref.index))
                v.draw_irq = v.wl.irq_vcpu(v.ref.index, len(v.peers), rng)
                v.draw_handler = workloads.sampler(v.wl.irq['handler'], rng)
        self._stagger_start(random.Random('%d/start' % seed))
        self._push(self.tick_ns, EV_TICK, None, 0)

    def _stagger_start(self, rng):
        """Start every hyperthread as a host whose VMs booted apart.

        Each vCPU begins with its own vruntime lag and each hyperthread's
        first slice is cut short by a random amount, so siblings' slices
        are not in phase. Started in lockstep, two siblings that each
        alternate the same two workloads would pair like with like for the
        whole run, a pairing no real host holds (measured: +4% CPU for any
        scheduler that pairs on purpose, on the 0:96 control).
        """
        for v in self.vcpus:
            v.vruntime = rng.uniform(0.0, self.latency / 2.0)
        for th in self.threads:
            if th.rq:
                v = self._pick(th)
                self._take(th, v)
                self._vstate(v, V_RUN)
                self._run(th, v)
                if th.curr is v and th.slice_ev is not None:
                    th.slice_at = rng.uniform(self.now + self.min_gran,
                                              th.slice_at)
                    self._slice_event(th, th.slice_at)

    # -- event plumbing -------------------------------------------------

    def _push(self, t, kind, obj, ver):
        _push(self.heap, (t, self._seq(), kind, obj, ver))

    def advance_to(self, t_end):
        """Run every event up to ``t_end`` (ns) and settle the counters."""
        heap = self.heap
        pop = heapq.heappop
        io_done, irq = self._io_done, self._irq
        act_end, slice_end = self._act_end, self._slice_end
        run, burst_done = self._run, self._burst_done
        n = 0
        while heap and heap[0][0] <= t_end:
            t, _, kind, obj, ver = pop(heap)
            if kind == EV_ACT:
                if obj.aver != ver:
                    continue
                self.now = t
                # the two commonest ends dispatched here (see _act_end)
                st = obj.state
                if st == SWITCH and obj.next is not None:
                    run(obj, obj.next)
                elif st == COMPUTE:
                    burst_done(obj)
                else:
                    act_end(obj)
            elif kind == EV_IO:
                self.now = t
                tgt = obj.irq_to
                if tgt is None:
                    io_done(obj)
                else:
                    obj.irq_to = None
                    irq(tgt, obj)
            elif kind == EV_SLICE:
                if obj.sver != ver:
                    continue
                self.now = t
                slice_end(obj)
            else:
                self.now = t
                self._tick()
            n += 1
        self.events += n
        self.now = max(self.now, t_end)
        for th in self.threads:
            self._settle(th)
        for v in self.vcpus:
            self._vstate(v, v.sstate)

    # -- accounting -----------------------------------------------------

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

    # -- vCPU life cycle ------------------------------------------------

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
            v.retentions += 1
            self._set(th, RETAIN, v, until=now + self.timeout_ns)
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
        if th.state == IDLE:
            nxt = self._pick(th)
            if nxt is not None:
                self._switch_to(th, nxt, self.c_wake_idle)

    def _act_end(self, th):
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

    def _burst_done(self, th):
        v = th.curr
        if v.in_handler:
            self._handler_done(th, v)
            return
        v.requests += 1
        self._vstate(v, V_RUN)
        acc, mark, req = v.acc, v.mark, v.req_acc
        a0, a1, a2 = acc
        req[0] += a0 - mark[0]
        req[1] += a1 - mark[1]
        req[2] += a2 - mark[2]
        mark[:] = acc
        v.work = False
        v.burst = None
        if v.draw_irq is not None:
            i = v.draw_irq()
            if i != v.ref.index:
                v.irq_to = v.peers[i]
        self._push(self.now + v.draw_device(), EV_IO, v, 0)
        self._go_idle(th, v)

    def _irq(self, t, r):
        """``r``'s device interrupt lands on ``t`` (paper §6.3).

        ``t`` must run a handler burst, set ahead of its own work, before
        its IPI wakes ``r``; a running ``t`` takes it at once (posted
        interrupt), a retaining or polling one without a switch, a halted
        one is woken like any vCPU, a runnable one waits in its queue.
        """
        t.irqs.append(r)
        h = t.draw_handler() * t.solo_rate
        th = t.th
        computing = (t.sstate == V_RUN and th.curr is t
                     and th.state == COMPUTE)
        if computing:
            self._settle(th)
        if t.in_handler:
            t.burst += h
        else:
            t.in_handler = True
            t.saved = t.burst if t.work else None
            t.burst = h
            if not computing:
                t.work = True
                self._resume(t)
                return
        if computing:
            th.rate = -1.0
            self._arm(th)

    def _handler_done(self, th, t):
        """``t`` ends its handler: own work resumes, the IPIs go out."""
        reqs = t.irqs
        t.irqs = []
        t.in_handler = False
        t.handled += len(reqs)
        t.burst = t.saved
        t.saved = None
        if t.burst is None:
            t.work = False
            self._go_idle(th, t)
        else:
            th.rate = -1.0
            self._arm(th)
        for r in reqs:
            self._io_done(r)

    def _io_done(self, v):
        if v.in_handler:
            # its own completion arrived while it handles another's
            v.saved = v.draw_burst() * v.solo_rate
            return
        v.work = True
        v.burst = v.draw_burst() * v.solo_rate
        self._resume(v)

    def _resume(self, v):
        """``v`` has work again: resume, or wake it."""
        th = v.th
        s = v.sstate
        if s == V_RUN:
            st = th.state
            if st == RETAIN:
                if self.c_ret_resume:
                    th.resuming = True
                    self._set(th, SWITCH, None, v,
                              until=self.now + self.c_ret_resume)
                else:
                    self._set(th, COMPUTE, v)
            elif st == POLL:
                if self.guest_poll:
                    self._set(th, COMPUTE, v)
                else:
                    self._halt_poll_adjust(v)
                    th.resuming = True
                    self._set(th, SWITCH, None, v,
                              until=self.now + self.c_hp_resume)
            return
        if s == V_READY:
            return
        if self.halt_poll:
            self._halt_poll_adjust(v)
        self._wake(v)

    def _halt_poll_adjust(self, v):
        v.halt_poll_ns = kernels.next_halt_poll_ns(
            v.halt_poll_ns, self.now - v.idle_start, self.hp_max,
            self.hp_grow, self.hp_grow_start, self.hp_shrink)

    def _wake(self, v):
        th = v.home
        if v.th is not th:
            self._migrate(v, v.th, th)
        v.th = th
        floor = self._min_vr(th) - self.latency / 2.0
        if v.vruntime < floor:
            v.vruntime = floor          # CFS's gentle sleeper placement
        now = self.now           # _vstate, inlined: hot
        v.acc[v.sstate] += now - v.since
        v.since = now
        v.sstate = V_READY
        th.rq.append(v)
        st = th.state
        if st == IDLE:
            self._switch_to(th, self._pick(th), self.c_wake_idle)
            return
        if st == SWITCH:
            th.wake_pending = True
            return
        self._check_preempt(th, v)
