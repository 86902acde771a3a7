"""What the kernel and libvirt take, for originals read back from disk.

The checkpoint's schema checks each value's shape (an integer, a CPU
list's characters); a value of the right shape can still be one no host
takes: a pin to CPU 10**20, cpu shares of -5, a priority of 1000. Written
back, such a value fails deep in a binding (libvirt-python and
``os.sched_setscheduler`` raise ``OverflowError`` for what does not fit a C
integer) or, worse, is taken (a pin to no CPU at all). Each actuator's
``invalid`` asks these functions before it writes an original back; each
returns why a value is out of range, or None.
"""

import os

from vsmtio_agent.linux import topology

# Linux's PID_MAX_LIMIT: no pid or tid is larger.
PID_MAX = 4 * 1024 * 1024
# CONFIG_NR_CPUS is at most 8192 on Linux: no CPU id is larger.
MAX_CPU_ID = 8191
# libvirt's most vCPUs of one domain (QEMU's own limit is lower).
MAX_VCPUS = 16384
# NR_IRQS is far below this on every architecture Linux runs KVM on.
MAX_IRQ = 1 << 20
# cpu shares as libvirt takes them: cgroup v1 cpu.shares is 2..262144,
# cgroup v2 cpu.weight (which libvirt's cpu_shares sets there) 1..10000.
CPU_SHARES = (1, 262144)
# blkiotune weight: cgroup v1 blkio.weight 10..1000 (100..1000 before BFQ),
# v2 io.weight 1..10000; 0 is what libvirt reports, and takes back, for a
# domain without a weight of its own where it keeps no cgroup (its test
# driver).
BLKIO_WEIGHT = (0, 10000)
# cpu.rt_runtime_us: -1 (no limit) up to the longest RT period the kernel
# takes (sched_rt_period_us is an int of microseconds).
RT_RUNTIME_US = (-1, 2 ** 31 - 1)
# Scheduling policies and their priorities (sched(7)).
NORMAL_POLICIES = (os.SCHED_OTHER, os.SCHED_BATCH, os.SCHED_IDLE)
RT_POLICIES = (os.SCHED_FIFO, os.SCHED_RR)
RT_PRIORITY = (1, 99)
# Longest JSON key the checks parse as a number: far above any real one,
# far below what ``int`` refuses to convert.
_MAX_DIGITS = 12


def integer(value, low, high, what='value'):
    """Why ``value`` is not an integer in ``[low, high]``, or None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return '%s %s is not an integer' % (what, _short(value))
    if not low <= value <= high:
        return '%s %s is not within %d..%d' % (what, _short(value), low,
                                               high)
    return None


def number_key(key, high, what):
    """Why the key ``key`` is not a number in ``[0, high]``, or None."""
    if not (isinstance(key, str) and key.isascii() and key.isdigit()
            and len(key) <= _MAX_DIGITS):
        return '%s %s is not a number' % (what, _short(key))
    return integer(int(key), 0, high, what)


def cpus(value, host_cpus=None, empty=False):
    """Why ``value`` is not CPUs of this host, or None.

    ``value`` is a list of CPU ids or a CPU list's text; ``host_cpus`` the
    host's CPUs (any CPU id Linux can have where None). Text is parsed
    only once every number in it is a possible CPU id: a range to 10**20
    would otherwise be expanded CPU by CPU. ``empty`` allows no CPU at
    all (a knob that names none).
    """
    if isinstance(value, str):
        value, why = _cpu_list(value)
        if why:
            return why
    elif not isinstance(value, list):
        return 'CPUs %s are not a list' % _short(value)
    if not value and not empty:
        return 'names no CPU'
    for cpu in value:
        why = integer(cpu, 0, MAX_CPU_ID, 'CPU')
        if why:
            return why
        if host_cpus is not None and cpu not in host_cpus:
            return 'CPU %d is not one of this host\'s' % cpu
    return None


def _cpu_list(text):
    """(sorted CPU ids, None) of a CPU list's text, or (None, why)."""
    for number in text.replace('-', ',').replace('^', ',').split(','):
        if number and (len(number) > _MAX_DIGITS or not number.isdigit()
                       or int(number) > MAX_CPU_ID):
            return None, 'CPU list %s names no CPU Linux has' % _short(text)
    try:
        return sorted(topology.parse_cpu_list(text)), None
    except ValueError as exc:
        return None, str(exc)


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + '...'
