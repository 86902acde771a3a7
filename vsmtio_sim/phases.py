"""Time phases and sockets: what a scenario's host does beyond one steady mix.

**Phases.** A VM whose scenario gives it ``phases`` changes workload at
those simulated times (a batch job that becomes a server, a server that
starts a compaction), all its vCPUs at once or each at its own time
(``phase_sync``), once or in a repeating cycle
(:meth:`~vsmtio_sim.scenario.Scenario.phase_changes`). The change
takes effect at once and in the middle of whatever the vCPU does: a vCPU
that starts a request loop finishes a first burst and then waits; one that
becomes CPU-bound computes from its next resume on and never waits again,
so a request in flight still completes (its interrupt still lands) but
starts no new one. Each vCPU keeps one set of random streams per workload,
so a workload it returns to draws where it left off, and the same under
every kernel model.

**Sockets.** A host split over sockets gives every hyperthread its socket
(``Thread.socket``); a vCPU the host moves across sockets (an agent's swap
or placement, never CFS here: the model has no load balancing) refills its
whole working set, at most the hyperthread's cache share, from the other
socket's memory (``data/host.yaml``).

A mixin of :class:`~vsmtio_sim.engine.Simulation`. A scenario with
neither pays nothing per event: the phased variants of two guest-I/O
handlers are installed on the instance only where a VM has phases, and
the socket check runs only on a migration.
"""

from vsmtio_sim import entities
from vsmtio_sim import guest_io
from vsmtio_sim import workloads

COMPUTE = entities.COMPUTE
V_RUN = entities.V_RUN


class Phases(object):
    """Workload changes in time, and the cost of crossing sockets."""

    def _init_host_shape(self):
        """Sockets, cross-socket refills and the phase schedule."""
        sc = self.scenario
        self.wl_index = {w.name: i for i, w in enumerate(sc.workload_list)}
        for th in self.threads:
            th.socket = sc.socket_of(th.cpu)
        c = sc.costs
        ratio = sc.host.get('remote_memory_latency_ratio', 1.0)
        self.cross_socket_ns = [
            min(w.working_set_kib, sc.host['llc_share_kib']) * 1024.0
            / c['cache_refill_gbps'] * ratio for w in sc.workload_list]
        self._phase_iter = sc.phase_changes()
        self._next_phase = next(self._phase_iter, None)
        if self._next_phase is None:
            return
        self._draws = {}
        for v in self.vcpus:
            self._draws[(v, v.wl.name)] = (
                v.draw_burst, v.draw_device, v.draw_irq, v.draw_handler)
        # a peer in an I/O phase may send any vCPU of the VM its
        # interrupt: every vCPU of a phased VM can run the handler
        for vm in sc.vms:
            for name in [vm['workload']] + [
                    p['workload'] for p in vm.get('phases', ())]:
                wl = sc.workloads[name]
                if wl.irq:
                    for v in self.peers[vm['name']]:
                        if v.draw_handler is None:
                            v.draw_handler = self._phase_draws(v, wl)[3]
        # only a phased host pays for the CPU-phase checks
        self._io_done = self._phased_io_done
        self._handler_done = self._phased_handler_done

    def _cross_socket(self, v):
        """``v`` moved to another socket: it refills its working set."""
        cost = self.cross_socket_ns[v.wl_idx]
        if cost > v.cold:
            v.cold = cost

    def advance_to(self, t_end):
        """Run every event up to ``t_end`` (ns), phase changes included."""
        nxt = self._next_phase
        while nxt is not None and nxt[0] * 1e9 <= t_end:
            self._advance_events(nxt[0] * 1e9)
            t_s, vm, index, wl = nxt
            self._enter_phase(self.by_ref[self._ref(vm, index)], wl)
            nxt = self._next_phase = next(self._phase_iter, None)
        self._advance_events(t_end)

    @staticmethod
    def _ref(vm, index):
        from vsmtio_agent import model
        return model.VcpuRef(vm, index)

    def _phase_draws(self, v, wl):
        key = (v, wl.name)
        if key not in self._draws:
            name = '%s/%d' % (v.vm, v.ref.index)
            burst = device = irq = handler = None
            if wl.does_io:
                burst = workloads.sampler(
                    wl.burst, self.stream(name, 'burst/' + wl.name))
                device = workloads.sampler(
                    wl.device, self.stream(name, 'device/' + wl.name))
                if wl.irq:
                    irq = wl.irq_vcpu(v.ref.index, len(v.peers),
                                      self.stream(name, 'irq/' + wl.name))
                    handler = workloads.sampler(
                        wl.irq['handler'],
                        self.stream(name, 'handler/' + wl.name))
            self._draws[key] = (burst, device, irq, handler)
        return self._draws[key]

    def _enter_phase(self, v, wl):
        """``v`` runs ``wl`` from now on."""
        th = v.th
        running = th.curr is v
        if running:
            self._settle(th)
            self._settle(th.sib)
        was_io = v.wl.does_io
        v.wl = wl
        v.wl_idx = self.wl_index[wl.name]
        solo = v.solo_rate = self.ghz / wl.cpi
        self._set_rates(v)
        draws = self._phase_draws(v, wl)
        v.draw_burst, v.draw_device, v.draw_irq = draws[:3]
        if draws[3] is not None:        # else the VM's handler it had
            v.draw_handler = draws[3]
        if wl.does_io and not was_io:
            # its computation becomes the first request's burst
            burst = v.draw_burst() * solo
            if v.in_handler:
                v.saved = burst
            elif v.work:
                v.burst = burst
        elif was_io and not wl.does_io:
            # no request ends any more: it computes until preempted
            if v.in_handler:
                v.saved = None
            elif v.work:
                v.burst = None
        if running and th.state == COMPUTE:
            th.aver += 1            # the old burst's end is stale
            th.rate = -1.0
            self._arm(th)
        if running and th.sib.state == COMPUTE:
            self._arm(th.sib)

    def _phased_io_done(self, v):
        """A completion for ``v``; one in a CPU phase just computes on."""
        if v.wl.does_io:
            guest_io.GuestIo._io_done(self, v)
            return
        if v.in_handler:
            return                  # its own work follows the handler
        v.work = True
        v.burst = None
        self._resume(v)

    def _phased_handler_done(self, th, t):
        """A handler ends; a vCPU in a CPU phase goes back to computing.

        ``GuestIo._handler_done`` with a CPU-bound vCPU's own work, which
        never ends, in place of a burst.
        """
        if t.wl.does_io:
            guest_io.GuestIo._handler_done(self, th, t)
            return
        reqs = t.irqs
        t.irqs = []
        t.in_handler = False
        t.handled += len(reqs)
        t.burst = t.saved = None
        t.work = True
        th.aver += 1
        th.rate = -1.0
        self._arm(th)
        for r in reqs:
            self._io_done(r)
