"""One owner's edits and agent's writes, and how each must count. Pure.

Run step by step through nova-compute's ``MixStats``
(``vsmtio_nova/tests/unit/test_compute_stats.py``) and through the Watcher
strategy (``test_strategy.py``): the two cannot share a process (see this
package's docstring), so each checks that it counts every step as written
here, which makes them count the same. An ``auto`` instance of
:data:`VCPUS` vCPUs on host :data:`HOST`, its agent signing with the key
derived from :data:`ROOT` for that host.
"""

from vsmtio_contract import workload

ROOT = 'the-controllers-root-secret'
HOST = 'a'
VCPUS = 4
NOW = 1800000000
KEY = workload.derive_host_key(ROOT, HOST)


def _signed(uuid, cls, expires, key=KEY, host=HOST):
    return {workload.MEASURED_CLASS_KEY: workload.sign_measured(
        key, uuid, cls, host, expires)}


def steps(uuid):
    """``(what, metadata, seconds since the step before, (io, cpu))``."""
    io = _signed(uuid, 'io', NOW + 600)
    cpu = _signed(uuid, 'cpu', NOW + 660)
    other = workload.derive_host_key(ROOT, 'b')
    return (
        ('the agent measures io', io, 0, (VCPUS, 0)),
        ('the owner deletes it', {}, 60, (VCPUS, 0)),
        ('the owner makes one up', {workload.MEASURED_CLASS_KEY: 'cpu'}, 0,
         (VCPUS, 0)),
        ('host b signs one for it', _signed(uuid, 'cpu', NOW + 600, other),
         0, (VCPUS, 0)),
        ('the agent measures cpu', cpu, 60, (0, VCPUS)),
        ('the owner puts io back', io, 0, (0, VCPUS)),
        ('the owner deletes it again', {}, 60, (0, VCPUS)),
        ('cpu expires', {}, 600, (0, 0)),
    )
