"""The host kernel models: what a hyperthread does when its vCPU idles.

Each model is a switch the simulated host reads; the mechanics live in
:mod:`vsmtio_sim.vcpu_lifecycle` (the idle rule) and
:mod:`vsmtio_sim.guest_io` (the resume, halt polling's window).
``idle`` says what an idle vCPU does:

``block``      HLT -> VM exit -> the vCPU is descheduled (vanilla KVM with
               halt polling off: the paper's "Blocking"; with two vCPUs per
               hyperthread KVM's halt polling is inactive, so this is also
               the paper's "vanilla KVM", §6.1).
``guest_poll`` the guest idles with ``idle=poll``: it spins inside the VM
               with no timeout until the host preempts it.
``halt_poll``  KVM's dynamic halt polling: after the HLT exit the host polls
               up to the vCPU's ``halt_poll_ns``, grown and shrunk by KVM's
               rules; vanilla KVM stops polling as soon as another task is
               runnable on the hyperthread (``single_task_running()``).
``retain``     vSMT-IO: the guest holds its context in MONITOR/MWAIT until
               the wake-up or the timeout the agent set; on timeout it falls
               back to HLT and is descheduled (paper §4.2). With
               ``vsmtio.retention_yields`` (data/kernels.yaml, default
               on) a retention does not start, and ends, while another
               I/O-class vCPU is runnable on the hyperthread, like vanilla
               halt polling; the paper does not spell this rule out.

``rass`` turns on retention-aware symbiotic scheduling (§4.3): I/O-class
vCPUs run on their core's I/O hyperthread with strict priority over the
CPU-class vCPUs that may borrow it while it has nothing else to do.

Two kernels run the real agent on the same simulated vSMT-IO kernel and
differ only in the agent's configuration (``agent_conf``): ``vsmtio`` is
the product's default (LTCR judged by throughput, the guard, the fairness
invariant); ``vsmtio-paper`` is the paper taken literally (Algorithm 1
with IPC and retention frequency, every mechanism always on, no fairness
check).
"""

import dataclasses

BLOCK = 'block'
GUEST_POLL = 'guest_poll'
HALT_POLL = 'halt_poll'
RETAIN = 'retain'


@dataclasses.dataclass(frozen=True)
class KernelModel:
    name: str
    idle: str
    poll_when_runnable: bool = False
    enhanced: bool = False
    rass: bool = False
    agent: bool = False
    description: str = ''
    agent_conf: tuple = ()          # ((option, value), ...) [vsmtio_agent]


KERNELS = {
    'vanilla': KernelModel(
        'vanilla', BLOCK,
        description='idle vCPUs HLT and block; woken vCPUs preempt by CFS '
                    'wake-up preemption (priority boosting)'),
    'polling': KernelModel(
        'polling', GUEST_POLL,
        description='guest idle=poll: idle vCPUs spin until preempted'),
    'haltpoll': KernelModel(
        'haltpoll', HALT_POLL,
        description='KVM dynamic halt polling; no polling while another '
                    'task is runnable'),
    'haltpoll-enhanced': KernelModel(
        'haltpoll-enhanced', HALT_POLL, poll_when_runnable=True,
        enhanced=True,
        description='the paper\'s enhanced halt polling (§2.1): polls even '
                    'when others are runnable, larger maximum'),
    'vsmtio-paper': KernelModel(
        'vsmtio-paper', RETAIN, rass=True, agent=True,
        agent_conf=(('ltcr_measure', 'paper'), ('guard', False),
                    ('fair_share', False)),
        description='vSMT-IO as the paper describes it: retention, RASS '
                    'and the adjuster always on, Algorithm 1 judged by IPC '
                    'and retention frequency'),
    'vsmtio': KernelModel(
        'vsmtio', RETAIN, rass=True, agent=True,
        description='the product: the same kernel, LTCR judged by '
                    'throughput, each mechanism kept only where the guard '
                    'measures that it helps, the fairness invariant'),
}

NAMES = tuple(KERNELS)


def get(name):
    try:
        return KERNELS[name]
    except KeyError:
        raise ValueError('unknown kernel %r (choose from %s)'
                         % (name, ', '.join(NAMES))) from None


def next_halt_poll_ns(cur, block_ns, max_ns, grow, grow_start, shrink):
    """KVM's per-vCPU halt-polling window after a halt of ``block_ns``.

    Mirrors ``kvm_vcpu_halt()``: a halt that ended within the window keeps
    it; one longer than the maximum shrinks it (``shrink`` 0 resets it);
    a shorter one that outlived the window grows it, starting at
    ``grow_start``.
    """
    if block_ns <= cur:
        return cur
    if block_ns > max_ns:
        if cur and shrink:
            return cur // shrink
        return 0
    if cur < max_ns:
        val = cur * grow
        if val < grow_start:
            val = grow_start
        return min(val, max_ns)
    return cur
