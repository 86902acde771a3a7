"""The simulated host's entities: hyperthreads, vCPUs and their states.

Plain slotted objects the event loop (:mod:`~vsmtio_sim.engine`)
and the parts of the host it is made of (hyperthreads, vCPU life cycle,
guest I/O, CFS, the simulated vSMT-IO kernel, the counters) read and write
in the inner loop.
"""

import heapq

from vsmtio_agent import model
from vsmtio_sim import workloads

# WAKING: leaving an idle C-state (its exit latency) before the switch
IDLE, COMPUTE, POLL, RETAIN, SWITCH, WAKING = range(6)
STATES = ('idle', 'computing', 'polling', 'retaining', 'switching',
          'waking')
V_SLEEP, V_READY, V_RUN = range(3)
EV_IO, EV_ACT, EV_SLICE, EV_TICK = range(4)
ROLE_IO, ROLE_CPU = model.Role.IO, model.Role.CPU
_push = heapq.heappush


class Vcpu(object):
    """One vCPU: its workload, scheduling state and cumulative counters."""

    __slots__ = (
        'ref', 'vm', 'wl', 'wl_idx', 'solo_rate', 'vr_scale', 'weight',
        'vruntime', 'home', 'th', 'role', 'allowed', 'borrowed', 'sstate',
        'since', 'acc', 'mark', 'work', 'burst', 'idle_start',
        'halt_poll_ns', 'draw_burst', 'draw_device',
        'run_ns', 'retention_ns', 'poll_ns', 'retentions',
        'retention_timeouts', 'instructions', 'cycles', 'base_cycles',
        'miss_cycles', 'vol', 'invol', 'requests', 'req_acc',
        'peers', 'draw_irq', 'draw_handler', 'irq_to', 'irqs', 'saved',
        'in_handler', 'handled', 'rate_by', 'corun_rate', 'load',
        'busy_mark', 'cold', 'origin', 'halts', 'deadline', 'vlag',
        'vprot', 'delayed', 'grp')

    def __init__(self, ref, vm, wl, wl_idx, ghz, stream):
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
        # EEVDF (sim.eevdf): virtual deadline, lag kept while asleep, and
        # the vruntime its slice is protected up to (RUN_TO_PARITY); asleep
        # but still queued on its thread until its lag is spent
        # (DELAY_DEQUEUE)
        self.deadline = self.vlag = self.vprot = 0.0
        self.delayed = False
        # the group entity of its VM it is queued in (or last slept in);
        # None where it stands for its VM's group itself
        self.grp = None
        if wl.does_io:
            self.draw_burst = workloads.sampler(wl.burst, stream('burst'))
            self.draw_device = workloads.sampler(wl.device,
                                                 stream('device'))
            self.burst = self.draw_burst() * self.solo_rate
        else:
            self.draw_burst = self.draw_device = None


class Thread(object):
    """One hyperthread: its state, occupant and CFS run queue."""

    __slots__ = ('cpu', 'core_id', 'sib', 'is_io', 'state', 'curr', 'next',
                 'rq', 'last', 'rate', 'aver', 'sver', 'state_ns', 'min_vr',
                 'slice_at', 'slice_ev', 'wake_pending', 'resuming',
                 'picked_at', 'cached', 'socket', 'idle_at', 'cstate',
                 'idle_hist', 'delayed', 'acct_v', 'acct_vr', 'groups',
                 'buddy', 'rcurr')

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
        self.socket = 0             # its core's socket (sim.phases)
        self.idle_at = 0.0          # when it last went idle
        self.cstate = 0             # the C-state it entered (cpuidle)
        self.idle_hist = []         # its last idle periods (ns), newest last
        self.delayed = []           # EEVDF: sleepers still queued on it
        # EEVDF: the running vCPU and its vruntime as the scheduler last
        # accounted them (update_curr)
        self.acct_v = None
        self.acct_vr = 0.0
        # {vm: Group} where several vCPUs of a VM met on it; EEVDF: the
        # group its queue's pick prefers (cfs_rq->next); the entity last
        # set running on it (set_next_entity)
        self.groups = {}
        self.buddy = self.rcurr = None


class Group(object):
    """A VM's group entity on one hyperthread's run queue.

    Both an entity of the hyperthread's queue (the VM's cgroup there:
    its vruntime, weight and, under EEVDF, deadline and lag) and the
    queue of the VM's vCPUs on that hyperthread (its own minimum or
    reference vruntime; under EEVDF its delayed sleepers and its running
    vCPU as last accounted). Made where a second vCPU of the VM joins the
    hyperthread's queue, and kept, as the kernel keeps a cgroup's entity
    on each CPU (:mod:`~vsmtio_sim.cfs`, :mod:`~vsmtio_sim.eevdf`).
    """

    __slots__ = ('vm', 'th', 'grp', 'vruntime', 'deadline', 'vlag', 'vprot',
                 'vr_scale', 'delayed', 'min_vr', 'sleepers', 'acct_v',
                 'acct_vr')

    def __init__(self, vm, th):
        self.vm = vm
        self.th = th
        self.grp = None             # an entity of the hyperthread's queue
        self.vruntime = self.deadline = self.vlag = self.vprot = 0.0
        self.vr_scale = 1.0
        self.delayed = False
        self.min_vr = 0.0
        self.sleepers = []          # its vCPUs asleep, still queued in it
        self.acct_v = None
        self.acct_vr = 0.0
