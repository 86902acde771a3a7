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

Outcomes (throughputs, switches, spinning) are never inputs: they emerge
from the costs, the workloads and the kernel model.
"""

import heapq
import itertools
import random
import typing

from vsmtio_agent import model
from vsmtio_agent.policy import rass
from vsmtio_agent.sim import cpi as cpi_model
from vsmtio_agent.sim import kernels
from vsmtio_agent.sim import workloads

IDLE, COMPUTE, POLL, RETAIN, SWITCH = range(5)
STATES = ('idle', 'computing', 'polling', 'retaining', 'switching')
V_SLEEP, V_READY, V_RUN = range(3)
EV_IO, EV_ACT, EV_SLICE, EV_TICK = range(4)
ROLE_IO, ROLE_CPU = model.Role.IO, model.Role.CPU
_push = heapq.heappush


class VcpuTotals(typing.NamedTuple):
    """One vCPU's cumulative figures at an instant (reports difference two)."""

    instructions: float
    requests: int
    switches: int
    per_request: tuple      # sleep, ready, run ns summed over requests
    retentions: int
    retention_timeouts: int


class Vcpu(object):
    """One vCPU: its workload, scheduling state and cumulative counters."""

    __slots__ = (
        'ref', 'vm', 'wl', 'wl_idx', 'solo_rate', 'vr_scale', 'weight',
        'vruntime', 'home', 'th', 'role', 'allowed', 'borrowed', 'sstate',
        'since', 'acc', 'mark', 'work', 'burst', 'idle_start',
        'halt_poll_ns', 'draw_burst', 'draw_device', 'stack', 'stack_mark',
        'run_ns', 'retention_ns', 'poll_ns', 'retentions',
        'retention_timeouts', 'instructions', 'cycles', 'base_cycles',
        'miss_cycles', 'vol', 'invol', 'requests', 'req_acc',
        'peers', 'draw_irq', 'draw_handler', 'irq_to', 'irqs', 'saved',
        'in_handler', 'handled', 'rate_by', 'corun_rate', 'load',
        'busy_mark', 'cold', 'origin', 'halts')

    def __init__(self, ref, vm, wl, wl_idx, ghz, rng):
        self.ref = ref
        self.vm = vm
        self.wl = wl
        self.wl_idx = wl_idx
        self.solo_rate = ghz / wl.cpi      # instructions per ns, alone
        self.weight = 1024
        self.vr_scale = 1.0
        self.vruntime = 0.0
        self.home = self.th = None
        self.role = None
        self.allowed = None
        self.borrowed = False
        self.sstate = V_READY
        self.since = 0.0
        self.acc = [0.0, 0.0, 0.0]         # sleep, ready, run (ns)
        self.mark = [0.0, 0.0, 0.0]
        self.req_acc = [0.0, 0.0, 0.0]     # per finished request
        self.work = True
        self.burst = None
        self.idle_start = 0.0
        self.halt_poll_ns = 0
        self.stack = None
        self.stack_mark = (0.0, 0.0, 0.0, 0.0)
        self.run_ns = self.retention_ns = self.poll_ns = 0.0
        self.retentions = self.retention_timeouts = 0
        self.instructions = self.cycles = 0.0
        self.base_cycles = self.miss_cycles = 0.0
        self.vol = self.invol = self.requests = 0
        self.peers = None
        self.draw_irq = self.draw_handler = None
        self.irq_to = None          # the vCPU the device interrupt lands on
        self.irqs = []              # requesters whose interrupt it handles
        self.saved = None           # own burst set aside for a handler
        self.in_handler = False
        self.handled = 0
        self.load = 0.0             # PELT-like runnable average, 0..1
        self.busy_mark = 0.0
        self.cold = 0.0             # ns of refill left: computes, no progress
        self.origin = None          # the thread the host placed it on
        self.halts = 0              # idle entries (HLT or MWAIT)
        if wl.does_io:
            self.draw_burst = workloads.sampler(wl.burst, rng)
            self.draw_device = workloads.sampler(wl.device, rng)
            self.burst = self.draw_burst() * self.solo_rate
        else:
            self.draw_burst = self.draw_device = None


class Thread(object):
    """One hyperthread: its state, occupant and CFS run queue."""

    __slots__ = ('cpu', 'core_id', 'sib', 'is_io', 'state', 'curr', 'next',
                 'rq', 'last', 'rate', 'aver', 'sver', 'state_ns', 'min_vr',
                 'slice_at', 'slice_ev', 'wake_pending', 'resuming',
                 'picked_at', 'cached')

    def __init__(self, cpu, core_id, is_io):
        self.cpu = cpu
        self.core_id = core_id
        self.is_io = is_io
        self.sib = None
        self.state = IDLE
        self.curr = self.next = None
        self.rq = []
        self.last = 0.0
        self.rate = 0.0
        self.aver = self.sver = 0
        self.state_ns = [0.0] * len(STATES)
        self.min_vr = 0.0
        self.slice_at = 0.0         # when the running vCPU's slice ends
        self.slice_ev = None        # time of the pending slice event
        self.wake_pending = False   # a wake-up landed during a switch
        self.resuming = False       # the switch is a VM re-entry, same vCPU
        self.picked_at = 0.0        # when the running vCPU was switched in
        self.cached = None          # the vCPU whose working set it holds


class Simulation(object):
    """A simulated SMT host running one scenario under one kernel model."""

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

    # -- CFS ------------------------------------------------------------

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
        best = None
        if self.rass_active and th.is_io:
            for v in th.rq:
                if v.role is not ROLE_CPU and (
                        best is None or v.vruntime < best.vruntime):
                    best = v
            if best is not None or not borrow or not self.borrow_on:
                return best
            cands = [v for v in th.sib.rq if v.role is ROLE_CPU]
            cands.extend(v for v in th.rq if v.role is ROLE_CPU)
            if len(cands) <= 1:
                return cands[0] if cands else None
            return self._symbiotic(th.sib.curr, cands)
        for v in th.rq:
            if best is None or v.vruntime < best.vruntime:
                best = v
        return best

    def _symbiotic(self, running, cands):
        # CFS's order first (§5: CFS proposes, RASS picks by symbiosis)
        cands.sort(key=lambda v: v.vruntime)
        return rass.pick_symbiotic(
            running.stack if running is not None else None,
            [(v, v.stack) for v in cands])

    def _migrate(self, v, src, dst):
        """Carry ``v``'s vruntime lag from ``src``'s queue to ``dst``'s."""
        if src is not dst:
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
        gran = self.wakeup_gran * v.vr_scale
        if self.group_shares and v.vm != cur.vm:
            gran *= 1024.0 / self._group_weight(v)
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
        sleeper credit to preempt, and so waits for the tick.
        """
        tg = self.vm_load[v.vm] - v.load + 1.0
        w = self.group_shares / tg if tg > 1.0 else self.group_shares
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
        if self.deferred:
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

    def _tick_preempt(self, now):
        for th in sorted(self.deferred, key=lambda t: t.cpu):
            cur = th.curr
            if th.state == SWITCH:
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
        w = th.curr.weight
        weights = w
        for v in th.rq:
            weights += v.weight
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

    # -- the host driver's view -----------------------------------------

    def counters(self):
        """Every vCPU's cumulative counters, as the HostDriver reports."""
        out = {}
        for v in self.vcpus:
            ready = v.acc[V_READY]
            out[v.ref] = model.VcpuCounters(
                weight=v.weight, cpu=v.th.cpu, run_ns=int(v.run_ns),
                retention_ns=int(v.retention_ns),
                retentions=v.retentions,
                retention_timeouts=v.retention_timeouts,
                instructions=int(v.instructions), cycles=int(v.cycles),
                base_cycles=int(v.base_cycles),
                miss_cycles=int(v.miss_cycles),
                voluntary_switches=v.vol, involuntary_switches=v.invol,
                runqueue_delay_ns=int(ready), halts=v.halts)
        return out

    def apply(self, decision):
        """Apply an agent Decision: timeout, RASS placement, swaps.

        Returns (changed, unchanged, messages).
        """
        changed = unchanged = 0
        messages = []
        self.decisions += 1
        t = float(decision.timeout_ns)
        if t != self.timeout_ns:
            self.timeout_ns = t
            changed += 1
        else:
            unchanged += 1
        for flag, value in (('retain_on', decision.retention),
                            ('borrow_on', decision.borrow)):
            if getattr(self, flag) != value:
                setattr(self, flag, value)
                changed += 1
        self._measure_stacks()
        placed = decision.placements or {}
        if not decision.split:
            if self.rass_active:
                changed += self._unsplit()
            return changed, unchanged, tuple(messages)
        homes = {}
        for swap in decision.swaps or ():
            self.swaps += 1
            for ref, core in ((swap.a, swap.core_b), (swap.b, swap.core_a)):
                v = self.by_ref.get(ref)
                if v is not None and ref not in placed:
                    c = self.topology.core(core)
                    homes[v] = (c.io_thread if v.home.is_io
                                else c.cpu_thread, v.role, None)
        for ref, p in placed.items():
            v = self.by_ref.get(ref)
            if v is None:
                messages.append('unknown vCPU %s' % (ref,))
                continue
            if decision.applies(p):
                homes[v] = (p.home, p.role, tuple(p.threads))
        if self.kernel.rass and homes:
            self.rass_active = True
        # a split of part of the host: a vCPU off the split cores goes
        # back to where the host placed it, with no class
        for v in self.vcpus:
            if v not in homes and (v.home is not v.origin
                                   or v.role is not None):
                homes[v] = (v.origin.cpu, None, None)
        for v, (home, role, threads) in homes.items():
            if not 0 <= home < len(self.threads):
                messages.append('vCPU %s: no hyperthread %s' % (v.ref, home))
                continue
            if self._rehome(v, self.threads[home], role, threads):
                changed += 1
            else:
                unchanged += 1
        for th in self.threads:
            if th.is_io and th.curr is not None and th.curr.borrowed:
                nxt = self._pick(th, borrow=False)
                if nxt is not None:
                    self._preempt(th, nxt, self.c_preempt)
                elif not self.borrow_on:
                    self._evict(th)
            if th.state == IDLE:
                self._dispatch_idle(th)
        return changed, unchanged, tuple(messages)

    def _unsplit(self):
        """Undo RASS: every vCPU back where the host placed it, no roles."""
        self.rass_active = False
        moved = 0
        for v in self.vcpus:
            if self._rehome(v, v.origin, None, None):
                moved += 1
        for th in self.threads:
            if th.state == IDLE:
                self._dispatch_idle(th)
        return moved

    def _measure_stacks(self):
        """The kernel's per-period CPI stacks for RASS's symbiosis choice.

        Measured from the cycle-accounting counters collected while the
        sibling rested (§4.3.2); ``None`` until enough was seen.
        """
        for v in self.vcpus:
            i0, c0, b0, m0 = v.stack_mark
            di = v.instructions - i0
            dc = v.cycles - c0
            db = v.base_cycles - b0
            dm = v.miss_cycles - m0
            v.stack_mark = (v.instructions, v.cycles, v.base_cycles,
                            v.miss_cycles)
            solo_instr = (db + dm) / v.wl.cpi if v.wl.cpi else 0.0
            if di > 1e5 and solo_instr > 1e4:
                base, miss = db / solo_instr, dm / solo_instr
                waiting = max(0.0, dc / di - base - miss)
                v.stack = model.CpiStack(base, miss, waiting)

    def _rehome(self, v, home, role, threads):
        v.role = role
        v.allowed = threads
        old = v.home
        if old is home:
            return False
        v.home = home
        s = v.sstate
        if s == V_SLEEP:
            self._migrate(v, v.th, home)
            v.th = home
        elif s == V_READY:
            th = v.th
            if v in th.rq:
                th.rq.remove(v)
                self._migrate(v, th, home)
                v.th = home
                v.borrowed = False
                home.rq.append(v)
                self._dispatch_idle(home)
        else:
            th = v.th
            legit = (th is home or (th.is_io and th.sib is home
                                    and role is ROLE_CPU))
            if legit:
                v.borrowed = th is not home
            else:
                self._evict(th)
        return True

    def _evict(self, th):
        """Move the running vCPU of ``th`` to its new home now."""
        v = th.curr
        v.invol += 1
        self._requeue(v)
        nxt = self._pick(th)
        self._switch_to(th, nxt, self.c_preempt if nxt is not None
                        else self.c_block_idle)
        self._dispatch_idle(v.home)

    # -- totals for reports ---------------------------------------------

    def totals(self):
        """A copy of every cumulative figure the report differences."""
        return {
            'time': self.now,
            'events': self.events,
            'state_ns': [sum(th.state_ns[s] for th in self.threads)
                         for s in range(len(STATES))],
            'io_state_ns': [sum(th.state_ns[s] for th in self.threads
                                if th.is_io) for s in range(len(STATES))],
            'vcpus': {v.ref: VcpuTotals(
                v.instructions, v.requests, v.vol + v.invol,
                tuple(v.req_acc), v.retentions, v.retention_timeouts)
                for v in self.vcpus},
        }
