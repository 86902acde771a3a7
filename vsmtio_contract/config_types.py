"""oslo.config types both sides' options need: a float that is a number.

oslo.config checks a number against its bounds with ``<`` and ``>``, and
every comparison with nan is false: ``Float(min, max)`` accepts ``nan``,
and ``inf`` where a bound is missing. On the agent a nan ``period`` would
make a root daemon loop as fast as it can log; in nova.conf a nan I/O
fraction would make ``WorkloadMixFilter`` refuse nothing and an infinite
``weight_multiplier`` the weigher's weights nan. Both sides' float options
are :class:`FiniteFloat`, so such a value is refused, naming the option,
when it is read.
"""

import math

from oslo_config import types


class FiniteFloat(types.Float):
    """oslo.config's Float, which also refuses nan and the infinities."""

    def __call__(self, value):
        number = super().__call__(value)
        if number is not None and not math.isfinite(number):
            raise ValueError('Should be a finite number, not %s' % number)
        return number


def finite(opts):
    """Give each float option of ``opts`` a :class:`FiniteFloat` type.

    In place, keeping its bounds, and returns ``opts``: the options are
    declared as oslo.config's own ``FloatOpt`` and each module's list of
    them passes through here once, where it is built.
    """
    for opt in opts:
        if (isinstance(opt.type, types.Float)
                and not isinstance(opt.type, FiniteFloat)):
            opt.type = FiniteFloat(min=opt.type.min, max=opt.type.max)
    return opts
