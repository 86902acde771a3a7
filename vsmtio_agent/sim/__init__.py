"""The simulated SMT host: a discrete-event model the agent can drive.

``engine`` (hyperthreads, CFS, kernel mechanics), ``kernels`` (the kernel
model switches and KVM's halt-polling rule), ``cpi`` (SMT co-run speed),
``workloads`` (CPU-bound, I/O-bound and mixed models), ``scenario`` (the
YAML schema and loader), ``runner`` (run / compare, the real agent under
``vsmtio``) and ``report`` (the paper's metrics as JSON and tables). Costs,
kernel parameters and workload models are data in ``data/``; shipped
scenarios in ``scenarios/``.
"""
