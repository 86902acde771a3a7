"""libvirt's errors as the actuator contract's: gone, denied, or failed.

The domain actuators (pinning, cpu shares) change a domain through
libvirt; what their callers need to know of a failure is whether the
domain is gone (forget it), the change was refused (degrade the
mechanism), or it failed otherwise (count it, try again next period).
"""

import libvirt

from vsmtio_agent.actuators import base

GONE = (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_OPERATION_INVALID)
DENIED = (libvirt.VIR_ERR_ACCESS_DENIED, libvirt.VIR_ERR_OPERATION_DENIED,
          libvirt.VIR_ERR_AUTH_FAILED)
# A driver without the flags variant of a call (the test driver) says so
# with one of these: the plain call is tried next.
UNSUPPORTED = (libvirt.VIR_ERR_INVALID_ARG, libvirt.VIR_ERR_NO_SUPPORT,
               libvirt.VIR_ERR_ARGUMENT_UNSUPPORTED)


class DomainGone(base.ActuatorError):
    """The domain stopped (or was undefined) under the actuator."""


def translate(exc):
    """The ActuatorError that stands for the ``libvirtError`` ``exc``."""
    code = exc.get_error_code()
    text = exc.get_error_message() or str(exc)
    if code in GONE:
        return DomainGone(text)
    return base.ActuatorError(text, denied=code in DENIED)


def call_live(flagged, plain, *args):
    """Call ``flagged(*args, AFFECT_LIVE)``, or ``plain(*args)``.

    The plain call only where the driver has no flags variant; libvirt
    errors come out as ActuatorError.
    """
    try:
        try:
            flagged(*(args + (libvirt.VIR_DOMAIN_AFFECT_LIVE,)))
        except libvirt.libvirtError as exc:
            if exc.get_error_code() not in UNSUPPORTED:
                raise
            plain(*args)
    except libvirt.libvirtError as exc:
        raise translate(exc) from exc
