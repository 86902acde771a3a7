"""The simulated vSMT-IO kernel's knobs: what an agent decision changes.

The retention timeout (host-wide, or each VM's own), whether retention
and borrowing are allowed, each VM's CPU weight (cfs), and
RASS's placement (each vCPU's class and hyperthreads on the split cores,
the Workload Adjuster's swaps); every vCPU off the split goes back where
the host placed it. Switching a mechanism off ends what it started: the
retentions in progress end (the vCPU halts, as at its timeout), borrowers
go home, the split is undone. A mixin of
:class:`~vsmtio_sim.engine.Simulation`.
"""

from vsmtio_sim import entities

# the inner loop reads these as globals
IDLE = entities.IDLE
RETAIN = entities.RETAIN
V_SLEEP = entities.V_SLEEP
V_READY = entities.V_READY
ROLE_CPU = entities.ROLE_CPU


class VsmtioKernel(object):
    """The agent-facing half of the simulated vSMT-IO kernel."""

    def apply(self, decision):
        """Apply an agent Decision: timeout, RASS placement, swaps.

        Returns (changed, unchanged, messages). The VMs' CPU weights
        (``decision.weights``) are a stock host's lever, applied whatever
        the kernel model.
        """
        messages = []
        self.decisions += 1
        changed, unchanged = self._apply_switches(decision)
        changed += self.set_vm_weights(decision.weights)
        if not decision.split:
            if self.rass_active:
                changed += self._unsplit()
            self._settle_borrowers()
            return changed, unchanged, tuple(messages)
        homes = self._planned_homes(decision, messages)
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
            elif self._rehome(v, self.threads[home], role, threads):
                changed += 1
            else:
                unchanged += 1
        self._settle_borrowers()
        return changed, unchanged, tuple(messages)

    def _apply_switches(self, decision):
        """The timeout and the on/off switches; (changed, unchanged)."""
        changed = unchanged = 0
        t = float(decision.timeout_ns)
        if t != self.timeout_ns:
            self.timeout_ns = t
            changed += 1
        else:
            unchanged += 1
        per_vm = decision.timeouts
        if per_vm is not None:
            per_vm = {vm: float(ns) for vm, ns in per_vm.items() if ns > 0}
        if per_vm != self.vm_timeouts:
            self.vm_timeouts = per_vm
            changed += 1
            if per_vm is not None:
                self._end_retentions(per_vm)
        if self.retain_on != decision.retention:
            self.retain_on = decision.retention
            changed += 1
            if not self.retain_on:
                self._end_retentions()
        if self.borrow_on != decision.borrow:
            self.borrow_on = decision.borrow
            changed += 1
        return changed, unchanged

    def _end_retentions(self, allowed=None):
        """Retention switched off: every retention in progress ends now.

        The vCPU falls back to HLT and is descheduled, as at its timeout
        (paper §4.2); left to run on, a retention started under the old
        setting would hold its hyperthread for a timeout the agent no
        longer wants. With ``allowed`` (``{vm: ns}``) only the retentions
        of VMs no longer allowed to retain end.
        """
        for th in self.threads:
            if th.state == RETAIN and (allowed is None
                                       or th.curr.vm not in allowed):
                self._block(th)

    def _planned_homes(self, decision, messages):
        """``{vcpu: (home cpu, role, threads)}`` the decision asks for."""
        placed = decision.placements or {}
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
            elif decision.applies(p):
                homes[v] = (p.home, p.role, tuple(p.threads))
        return homes

    def _settle_borrowers(self):
        """Borrowers yield to waiting I/O vCPUs, or leave if not allowed."""
        for th in self.threads:
            if th.is_io and th.curr is not None and th.curr.borrowed:
                nxt = self._pick(th, borrow=False)
                if nxt is not None:
                    self._preempt(th, nxt, self.c_preempt)
                elif not self.borrow_on:
                    self._evict(th)
            if th.state == IDLE:
                self._dispatch_idle(th)

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
