"""The guest's I/O path: a request's end, its device wait, the interrupt.

An I/O-bound vCPU loops over requests (``data/workloads.yaml``, Table 4 of
the paper): it computes a burst, then waits on its device and idles. When
the burst ends (:meth:`GuestIo._burst_done`) the request is counted, the
device time is drawn and the vCPU idles by the kernel model's rule. When
the device completes, its interrupt lands on the vCPU its queue's
interrupt affinity names (:func:`irq_draw`): the waiter itself or, for
network workloads whose packet arrives on another queue (paper §6.3,
under Table 7), a peer vCPU of the same VM (:meth:`GuestIo._irq`):
that vCPU runs a receive-handler burst ahead of its own work and then
sends the waiter an IPI (:meth:`GuestIo._handler_done`). The waiter gets
its next burst (:meth:`GuestIo._io_done`) and resumes
(:meth:`GuestIo._resume`):

* retaining its context in MWAIT, it computes again without a VM exit
  (``retention_resume_ns`` in ``data/costs.yaml``: the interrupt ends
  MWAIT as a posted interrupt);
* halt polling in the host, it re-enters the VM: VM exit + L1D flush (the
  L1TF mitigation, paper §2.2), and KVM adapts its polling window to the
  halt just ended (:meth:`GuestIo._halt_poll_adjust`,
  :func:`~vsmtio_sim.kernels.next_halt_poll_ns` with the module
  parameters of ``data/kernels.yaml``, virt/kvm/kvm_main.c);
* spinning in the guest (``idle=poll``), it computes at once;
* halted, it is woken through the host scheduler
  (:meth:`~vsmtio_sim.cfs.Cfs._wake`).

The woken task stays on the waiting vCPU: the guest's
``select_task_rq_fair`` returns a task's previous CPU when that CPU is
idle (``wake_affine_idle``, then ``select_idle_sibling``), and the
waiting vCPU is idle, halted on its request. A waiter busy with another's
handler finishes it first (its completion is set aside meanwhile).

Its own module because it is what the workloads ask of the host, apart
from how the host runs vCPUs (:mod:`~vsmtio_sim.vcpu_lifecycle`) and
schedules them (:mod:`~vsmtio_sim.cfs`). A mixin of
:class:`~vsmtio_sim.engine.Simulation`: no indirection per event.
"""

from vsmtio_sim import entities
from vsmtio_sim import kernels
from vsmtio_sim import workloads

# where a network completion lands (data/kernels.yaml, net_completions)
SPREAD, FLOW, SINGLE = 'spread', 'flow', 'single'
NET_COMPLETIONS = (SPREAD, FLOW, SINGLE)

# the inner loop reads these as globals
COMPUTE = entities.COMPUTE
POLL = entities.POLL
RETAIN = entities.RETAIN
SWITCH = entities.SWITCH
V_READY = entities.V_READY
V_RUN = entities.V_RUN
EV_IO = entities.EV_IO


def irq_draw(mode, wl, index, nvcpus, rng):
    """A function drawing which vCPU takes vCPU ``index``'s completions.

    Disk completions (``steering: submitter``) keep the workload's rule.
    A network completion lands on the vCPU its receive queue's interrupt
    is affine to (virtio-net gives queue ``j`` to vCPU ``j``); which queue
    the packet arrives on is ``mode``: ``spread``, a uniformly drawn queue
    (flows hashed over the queues with no memory of who sent them, the
    paper's §6.3 observation that another vCPU often receives the
    response); ``flow``, the requester's own queue (the host's tap
    returns a flow on the queue the guest last sent it from, tun's
    automatic flow steering, and the guest's XPS sends from each vCPU's
    own queue); ``single``, one queue (nova's default without
    ``hw_vif_multiqueue_enabled``), whose interrupt names vCPU 0.
    """
    if mode not in NET_COMPLETIONS:
        raise ValueError('net_completions: %r is not one of %s'
                         % (mode, ', '.join(NET_COMPLETIONS)))
    irq = wl.irq
    if irq['steering'] != workloads.FLOW_HASH or mode == SPREAD:
        return wl.irq_vcpu(index, nvcpus, rng)
    queues = min(irq.get('queues') or nvcpus, nvcpus)
    target = index % queues if mode == FLOW else 0
    return lambda: target


class GuestIo(object):
    """Requests, device completions, interrupts and the resume they cause."""

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
