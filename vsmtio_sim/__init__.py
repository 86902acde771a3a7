"""The simulated SMT host: a discrete-event model the agent can drive.

The model: ``engine`` (the host's construction and event loop, made of
the mixins ``hyperthreads``, ``vcpu_lifecycle``, ``guest_io``, ``cfs``,
``vsmtio_kernel`` and ``counters`` over the objects of ``entities``),
``kernels`` (the kernel model switches and KVM's halt-polling rule),
``cpi`` (SMT co-run speed), ``cpuidle`` (the host's idle governor and
the C-states a woken hyperthread leaves), ``workloads`` (CPU-bound,
I/O-bound and mixed models), ``calibration`` (workload parameters derived
from the paper's figures), ``scenario`` (the YAML schema and loader),
``report`` (the paper's metrics as JSON and tables) and ``tenants``
(each VM judged against its own floors). Costs, kernel parameters and
workload models are data in ``data/``; shipped scenarios in
``scenarios/``.

The agent reaches it only through its host-driver interface: ``driver``
is the ``simulated`` host driver (``[vsmtio_sim]`` options in ``conf``),
``runner`` runs the real agent on it (run / compare), and ``cmd`` is the
``vsmtio-sim`` command.
"""
