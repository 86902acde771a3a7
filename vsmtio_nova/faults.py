"""Refusals that fit nova's fault message, their reason first.

nova stores an instance fault's message in a 255-character column and
cuts it there (``nova.compute.utils.exception_to_dict`` calls
``utils.safe_truncate(message, 255)``, which counts UTF-8 bytes). What is
cut is lost to the user and the operator alike, so a refusal puts what is
missing first and the context (a flavor's name, up to 255 characters on
its own) last, shortened to fit.
"""

#: nova's limit on ``InstanceFault.message`` (bytes of UTF-8).
FAULT_MESSAGE_LIMIT = 255


def _cut(text, room):
    """``text`` cut to at most ``room`` UTF-8 bytes, never mid-character."""
    return text.encode('utf-8')[:max(room, 0)].decode('utf-8', 'ignore')


def reason_within(exc_class, reason, context=''):
    """The ``reason=`` for ``exc_class`` whose fault keeps ``reason`` whole.

    ``reason (context)`` where it fits nova's limit together with the
    exception's own text (``No valid host was found. ``); else the context
    shortened with ``...``, else dropped; a reason that alone exceeds the
    limit is cut at its end, as nova would cut it.
    """
    overhead = len(exc_class(reason='').format_message().encode('utf-8'))
    room = FAULT_MESSAGE_LIMIT - overhead
    if context:
        full = '%s (%s)' % (reason, context)
        if len(full.encode('utf-8')) <= room:
            return full
        keep = room - len(reason.encode('utf-8')) - len(' (...)')
        if keep > 0:
            return '%s (%s...)' % (reason, _cut(context, keep))
    return _cut(reason, room)
