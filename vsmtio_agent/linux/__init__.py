"""The real Linux host under the libvirt driver: readers and writers.

Each module touches one kernel interface behind an injectable root, so
tests can present hosts this machine is not (an SMT host, garbage procfs):
``topology`` (sysfs CPU topology, nova's CPU sets), ``procfs`` (QEMU's vCPU
threads and their counters), ``perf`` (per-thread hardware counters) and
``kernel_knobs`` (writable sysfs and procfs files: KVM's and the patched
kernel's knobs, and its ABI version). Nothing here knows the agent's
policy, libvirt or the checkpoint.
"""
