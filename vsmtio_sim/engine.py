"""The discrete-event simulated SMT host: its construction and event loop.

N cores x 2 hyperthreads; vCPUs time-share hyperthreads under the host
scheduler the scenario names, CFS or EEVDF. :class:`Simulation` builds
the host a scenario describes (its costs composed from
``data/costs.yaml``, the scheduler's and KVM's parameters from
``data/kernels.yaml``, each vCPU's own random streams) and runs its
events in time order; stale events are dropped lazily by version.
What the events do lives in the mixins it is made of, one module for each
part of the host they model:

* :mod:`~vsmtio_sim.hyperthreads`: each hyperthread's state and the
  progress a vCPU makes in it beside its sibling (the paper's Table 2);
* :mod:`~vsmtio_sim.vcpu_lifecycle`: a vCPU switched in, idle by the
  kernel model's rule, switched out, and what each switch costs;
* :mod:`~vsmtio_sim.guest_io`: requests, device completions,
  interrupts (§6.3) and the resume they cause, halt polling's window;
* :mod:`~vsmtio_sim.cfs`: the host scheduler, CFS (Linux 5.3), and
  :mod:`~vsmtio_sim.eevdf`, EEVDF (Linux 6.6+) over the same run queues;
* :mod:`~vsmtio_sim.vsmtio_kernel`: what an agent decision changes;
* :mod:`~vsmtio_sim.counters`: what drivers and reports read;
* :mod:`~vsmtio_sim.phases`: VMs whose workload changes in time,
  and the refill a vCPU moved across sockets pays.

The hyperthreads and vCPUs themselves are the slotted objects of
:mod:`~vsmtio_sim.entities`. Mixins, not objects that call each
other, because every event crosses several of these parts: as methods of
one class they share its state and cost the inner loop nothing.

Outcomes (throughputs, switches, spinning) are never inputs: they emerge
from the costs, the workloads and the kernel model.
"""

import functools
import heapq
import itertools
import random

from vsmtio_agent import model
from vsmtio_sim import cfs
from vsmtio_sim import counters
from vsmtio_sim import cpi as cpi_model
from vsmtio_sim import cpuidle
from vsmtio_sim import eevdf
from vsmtio_sim import entities
from vsmtio_sim import guest_io
from vsmtio_sim import hyperthreads
from vsmtio_sim import kernels
from vsmtio_sim import phases
from vsmtio_sim import vcpu_lifecycle
from vsmtio_sim import vsmtio_kernel
from vsmtio_sim import workloads

# the event loop reads these as globals; the states are also read from
# here by the report and the tests
IDLE = entities.IDLE
COMPUTE = entities.COMPUTE
POLL = entities.POLL
RETAIN = entities.RETAIN
SWITCH = entities.SWITCH
WAKING = entities.WAKING
STATES = entities.STATES
V_SLEEP = entities.V_SLEEP
V_READY = entities.V_READY
V_RUN = entities.V_RUN
EV_IO = entities.EV_IO
EV_ACT = entities.EV_ACT
EV_SLICE = entities.EV_SLICE
EV_TICK = entities.EV_TICK
Thread = entities.Thread
Vcpu = entities.Vcpu
_push = entities._push
VcpuTotals = counters.VcpuTotals


class Simulation(hyperthreads.Hyperthreads, vcpu_lifecycle.VcpuLifecycle,
                 guest_io.GuestIo, cfs.Cfs, vsmtio_kernel.VsmtioKernel,
                 counters.Counters, phases.Phases):
    """A simulated SMT host running one scenario under one kernel model.

    Construction and the event loop live here; everything an event does is
    in the mixins (see the module's docstring). The host scheduler is the
    scenario's ``scheduler.policy``: ``cfs`` builds this class,
    ``eevdf`` an :class:`EevdfSimulation`.
    """

    def __new__(cls, scenario=None, *args, **kwargs):
        if (cls is Simulation and scenario is not None
                and scenario.scheduler['policy'] == 'eevdf'):
            cls = EevdfSimulation
        return super().__new__(cls)

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
        # every cost with its source in data/costs.yaml; each module that
        # charges one says why it is composed so
        c = scenario.costs
        self.ghz = c['cpu_ghz']
        # a sibling's effect on a computing hyperthread (hyperthreads)
        self.f_switch = c['sibling_switching_speed']
        self.f_poll = c['sibling_polling_speed']
        self.f_retain = c['sibling_retaining_speed']
        exit_, ctx = c['vm_exit_ns'], c['context_switch_ns']
        flush, ipi = c['l1d_flush_ns'], c['ipi_ns']
        # switches (vcpu_lifecycle; the tick's preemption and the wake-up
        # of an idle thread in cfs)
        self.c_block_switch = exit_ + ctx + flush
        self.c_block_idle = exit_ + ctx
        self.c_wake_idle = ipi + ctx + flush
        # the C-state an idle hyperthread enters and leaves (cpuidle);
        # the next timer bounding its prediction is the guest's tick,
        # which KVM arms as a host timer for a halted vCPU
        self.idle_gov = cpuidle.IdleGovernor(
            c['host_idle'], 1e9 / scenario.scheduler['tick_hz'])
        self.c_preempt = ipi + exit_ + ctx + flush
        self.c_tick = exit_ + ctx + flush
        # resuming a halt-polling or retaining vCPU (guest_io)
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
        # EEVDF's request, scaled by the host's CPU count as the kernel's
        # update_sysctl does (eevdf.slice_factor)
        self.base_slice = (s['base_slice_us'] * 1e3
                           * eevdf.slice_factor(2 * scenario.cores))
        hp = scenario.haltpoll
        self.hp_max = (hp['enhanced_max_ns'] if self.kernel.enhanced
                       else hp['max_ns'])
        self.hp_grow, self.hp_shrink = hp['grow'], hp['shrink']
        self.hp_grow_start = hp['grow_start_ns']
        self.timeout_ns = float(scenario.initial_timeout_ns)
        # per-VM retention ({vm: ns}, the agent's Decision.timeouts); None:
        # every VM retains at timeout_ns
        self.vm_timeouts = None
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
        self.streams = {}           # name: random.Random (see reseed)
        for vm, i, wl, cpu in scenario.placement():
            v = Vcpu(model.VcpuRef(vm, i), vm, wl, index[wl.name],
                     self.ghz, functools.partial(self.stream,
                                                 '%s/%d' % (vm, i)))
            th = self.threads[cpu]
            v.home = v.th = v.origin = th
            th.rq.append(v)
            self.vcpus.append(v)
        self.by_ref = {v.ref: v for v in self.vcpus}
        for v in self.vcpus:
            self._set_rates(v)
        peers = {}
        for v in self.vcpus:
            peers.setdefault(v.vm, []).append(v)
        self.peers = peers
        self.vm_load = dict.fromkeys(peers, 0.0)
        for v in self.vcpus:
            v.peers = peers[v.vm]
            if v.wl.does_io and v.wl.irq:
                # streams of their own: the burst/device draws stay as
                # without, and which vCPU an interrupt lands on does not
                # depend on when the handlers it runs were drawn
                name = '%s/%d' % (v.vm, v.ref.index)
                v.draw_irq = guest_io.irq_draw(
                    scenario.scheduler['net_completions'], v.wl, v.ref.index,
                    len(v.peers), self.stream(name, 'irq'))
                v.draw_handler = workloads.sampler(
                    v.wl.irq['handler'], self.stream(name, 'handler'))
        self._init_host_shape()
        self._stagger_start(random.Random('%d/start' % seed))
        self._push(self.tick_ns, EV_TICK, None, 0)

    def _set_rates(self, v):
        """``v``'s speed by its sibling's state, and beside each workload.

        Table 2's speeds (a waking sibling is idle) and the co-run speeds,
        precomputed for ``_arm``; again whenever its workload changes.
        """
        solo = v.solo_rate
        v.rate_by = (solo, None, solo * self.f_poll, solo * self.f_retain,
                     solo * self.f_switch, solo)
        v.corun_rate = [solo * f for f in self.corun[v.wl_idx]]

    def stream(self, owner, draws):
        """The random stream of one kind of ``draws`` of one ``owner``.

        One stream per vCPU and kind (burst, device, irq, handler), so the
        k-th request of a vCPU draws the same numbers whichever kernel
        schedules it and however the vCPU's other draws interleave.
        """
        name = '%s/%s' % (owner, draws)
        rng = self.streams[name] = random.Random(
            '%d/%s' % (self.seed, name))
        return rng

    def reseed(self, tag):
        """Restart every stream at a point named by ``tag``.

        Common random numbers: two runs of one scenario under different
        kernels that reseed at the start of each measurement window draw
        the same bursts, device times and interrupts from there on, so the
        ratio of their throughputs shows the kernels' difference, not the
        two runs' different luck (textbook variance reduction: Law,
        Simulation Modeling and Analysis, 5th ed., section 11.2). The
        distributions are unchanged: each window's draws are as random as
        before, just the same ones for every kernel.
        """
        for name, rng in self.streams.items():
            rng.seed('%d/%s/%s' % (self.seed, name, tag))

    def _stagger_start(self, rng):
        """Start every hyperthread as a host whose VMs booted apart.

        Each vCPU begins with its own vruntime lag and each hyperthread's
        first slice is cut short by a random amount, so siblings' slices
        are not in phase. Started in lockstep, two siblings that each
        alternate the same two workloads would pair like with like for the
        whole run, a pairing no real host holds (measured: +4% CPU for any
        scheduler that pairs on purpose, on the 0:96 control).
        """
        self._stagger_vruntimes(rng)
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

    def _stagger_vruntimes(self, rng):
        for v in self.vcpus:
            v.vruntime = rng.uniform(0.0, self.latency / 2.0)
        self._first_groups()

    # -- event plumbing -------------------------------------------------

    def _push(self, t, kind, obj, ver):
        _push(self.heap, (t, self._seq(), kind, obj, ver))

    def _advance_events(self, t_end):
        """Run every event up to ``t_end`` (ns) and settle the counters.

        ``advance_to`` (:mod:`~vsmtio_sim.phases`) calls it between
        the scenario's phase changes.
        """
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


class EevdfSimulation(eevdf.Eevdf, Simulation):
    """The same simulated host with EEVDF (Linux 6.6+) as its scheduler.

    :mod:`~vsmtio_sim.eevdf` comes first, so its pick, placement and
    preemption replace CFS's; everything else is :class:`Simulation`'s.
    """
