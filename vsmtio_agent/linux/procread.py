"""The parsers of a vCPU thread's procfs files, and one thread's reading.

:mod:`vsmtio_agent.linux.procfs` holds the files open. The parsers
raise :class:`ValueError` on malformed text; the reader turns that into
missing counters (``None``) and a bit in its last field, never into
zeros.
"""

import os


def parse_schedstat(text):
    """``run_ns wait_ns timeslices`` -> (run_ns, wait_ns)."""
    fields = text.split()
    if len(fields) < 2 or not all(f.isdigit() for f in fields[:2]):
        raise ValueError('malformed schedstat %r' % text[:60])
    return int(fields[0]), int(fields[1])


def parse_schedstat_runs(text):
    """``run_ns wait_ns timeslices`` -> (run_ns, wait_ns, timeslices).

    ``timeslices`` (how many times the thread was switched in) is None
    where the file has no third field.
    """
    run_ns, wait_ns = parse_schedstat(text)
    third = text.split()[2:3]
    return run_ns, wait_ns, (int(third[0]) if third and third[0].isdigit()
                             else None)


def _switch_count(text, key):
    """The value of line ``key`` (``...ctxt_switches:``) as an int.

    Searched from the end: the kernel prints these lines last or nearly.
    """
    at = text.rfind('\n' + key)
    if at < 0:
        if not text.startswith(key):
            return None
        at = -1
    start = at + 1 + len(key)
    end = text.find('\n', start)
    value = text[start:end if end >= 0 else len(text)].strip(' \t')
    if not value.isdigit():
        raise ValueError('malformed %s %r' % (key[:-1], value[:30]))
    return int(value)


def parse_status_switches(text):
    """(voluntary, involuntary) context switches from a ``status`` file.

    Two ``str.find`` calls rather than a regular expression over the whole
    file: this runs for every vCPU every period, and a multi-line regex
    scan of the ~1.4 KiB file was a fifth of the agent's sampling time.
    """
    voluntary = _switch_count(text, 'voluntary_ctxt_switches:')
    involuntary = _switch_count(text, 'nonvoluntary_ctxt_switches:')
    if voluntary is None or involuntary is None:
        raise ValueError('status has no context switch counts')
    return voluntary, involuntary


def parse_stat_cpu(text):
    """The ``processor`` field (39th) of a ``stat`` file.

    The command name (field 2) may hold spaces and parentheses (``CPU
    0/KVM``), so fields are counted after its last ``)``.
    """
    _, paren, rest = text.rpartition(')')
    fields = rest.split()
    if not paren or len(fields) < 37 or not fields[36].lstrip('-').isdigit():
        raise ValueError('malformed stat %r' % text[:60])
    return int(fields[36])


# Bits of the last field of a reading:
# which file was malformed, or could not be read for want of permission;
# STALE: status and stat were not due, their values are an older reading's.
BAD_SCHEDSTAT, BAD_STATUS, BAD_STAT = 1, 2, 4
DENIED_SCHEDSTAT, DENIED_STATUS, DENIED_STAT = 8, 16, 32
STALE = 64
FILES = ('schedstat', 'status', 'stat')


def _pread(fd):
    """The text of a held file; None if permission is denied."""
    try:
        return os.pread(fd, 4096, 0).decode('ascii', 'replace')
    except PermissionError:
        return None


def _read_thread(fds, last, bad, due=True):
    """One thread's counters from its held files.

    ``fds`` are the thread's ``schedstat``, ``status`` and ``stat``
    descriptors (-1 where the caller could not open one), ``last`` what
    this returned for the same thread the period before (or None), and
    ``bad`` the :data:`DENIED_SCHEDSTAT`... bits the caller found opening
    them. Returns ``(run_ns, delay_ns, timeslices, voluntary, involuntary,
    cpu, bad)``, None for each counter that cannot be had, with the bits
    of the files that were malformed or denied. An exited thread raises
    :class:`ProcessLookupError`.

    ``schedstat`` is read first, and gates the other two: a thread whose
    run time and timeslice count have not moved since ``last`` was neither
    switched in nor out since then (a switch-out adds the time run to the
    first, a switch-in counts in the second), so its context switch counts
    in ``status`` and the CPU it last ran on in ``stat`` are still those
    of ``last``, which is then reused (returned itself if nothing moved).
    ``stat``'s field is where the thread is queued, which for a woken
    thread not yet run may already be another CPU: the reuse reports the
    CPU it last ran on, which is what :class:`ThreadCounters` promises.
    ``schedstat`` must be read before the other two for this to hold: a
    switch after that read changes what the next period's read sees.

    ``due`` False (the slow cadence of
    :class:`~vsmtio_agent.linux.procfs.ThreadReader`) reads neither
    ``status`` nor ``stat``: a thread switched since ``last`` carries
    ``last``'s values with the :data:`STALE` bit, and a ``STALE`` ``last``
    does not gate a due reading (its values are older than its
    ``schedstat``), so a due reading is always exact.
    """
    run = delay = runs = None
    if fds[0] >= 0:
        text = _pread(fds[0])
        if text is None:
            bad |= DENIED_SCHEDSTAT
        else:
            try:
                run, delay, runs = parse_schedstat_runs(text)
            except ValueError:
                bad |= BAD_SCHEDSTAT
    if last is not None:
        carried = last[6] & ~(BAD_SCHEDSTAT | DENIED_SCHEDSTAT)
        if (runs is not None and last[0] == run and last[2] == runs
                and not (due and last[6] & STALE)):
            if last[1] == delay:
                return last
            return (run, delay, runs, last[3], last[4], last[5],
                    bad | carried)
        if not due:
            return (run, delay, runs, last[3], last[4], last[5],
                    bad | carried | STALE)
    voluntary = involuntary = cpu = None
    text = _pread(fds[1]) if fds[1] >= 0 else ''
    if text is None:
        bad |= DENIED_STATUS
    elif fds[1] >= 0:
        try:
            voluntary, involuntary = parse_status_switches(text)
        except ValueError:
            bad |= BAD_STATUS
    text = _pread(fds[2]) if fds[2] >= 0 else ''
    if text is None:
        bad |= DENIED_STAT
    elif fds[2] >= 0:
        try:
            cpu = parse_stat_cpu(text)
        except ValueError:
            bad |= BAD_STAT
    return run, delay, runs, voluntary, involuntary, cpu, bad
