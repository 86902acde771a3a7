"""The simulated SMT host: a discrete-event model the agent can drive.

``engine`` (the host's construction and event loop, made of the mixins
``hyperthreads``, ``vcpu_lifecycle``, ``guest_io``, ``cfs``,
``vsmtio_kernel`` and ``counters`` over the objects of ``entities``),
``kernels`` (the kernel model switches and KVM's halt-polling rule),
``cpi`` (SMT co-run speed), ``cpuidle`` (the host's idle governor and
the C-states a woken hyperthread leaves), ``workloads`` (CPU-bound,
I/O-bound and mixed models), ``scenario`` (the YAML schema and loader)
and ``report`` (the paper's metrics as JSON and tables). What runs the
real agent on it (run / compare) is ``vsmtio_agent.simulate``, above
this package. Costs, kernel parameters and workload models are data in
``data/``; shipped scenarios in ``scenarios/``.
"""
