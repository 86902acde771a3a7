"""The vsmtio filter and weigher for nova's scheduler.

Both keep every host's mix of I/O-bound and CPU-bound vCPUs heterogeneous,
because vSMT-IO gains most on a mixed host and nothing on a homogeneous one.
Load them by class path (``vsmtio_nova.scheduler.filters.WorkloadMixFilter``,
``vsmtio_nova.scheduler.weights.WorkloadMixWeigher``).
"""
