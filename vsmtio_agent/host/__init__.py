"""Readers and writers of a real Linux/KVM host, used by the libvirt driver.

Each module touches one host interface (sysfs topology, procfs threads,
sysfs knobs, the checkpoint file) behind an injectable root, so tests can
present hosts this machine is not (an SMT host, garbage procfs).
"""
