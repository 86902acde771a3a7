"""Option types that refuse at start what would fail, or spin, later.

oslo.config checks a number against its bounds with ``<`` and ``>``, and
every comparison with nan is false: ``Float(min, max)`` accepts ``nan``,
and ``inf`` where a bound is missing. The agent waits ``period`` seconds
with ``Event.wait``, which returns at once for nan, so ``period = nan``
made a root daemon loop as fast as it could log. Regular expressions and
CPU lists are plain strings to oslo.config and were parsed only when first
used, deep inside a period. These types parse them when the option is read,
which ``vsmtio-agent`` does for every option before it starts; the values
stay what oslo.config's own types give (a float, the string as written), so
the code that uses them is unchanged.
"""

import re
import warnings

from oslo_config import types

from vsmtio_agent.linux import topology
from vsmtio_contract import config_types

# CONFIG_NR_CPUS is at most 8192 on Linux (x86_64 with MAXSMP, powerpc):
# a higher CPU id is a typo, and a range up to it would be expanded CPU by
# CPU.
MAX_CPU_ID = 8191


#: A float option that refuses nan and the infinities (shared with nova's
#: options: :mod:`vsmtio_contract.config_types`).
FiniteFloat = config_types.FiniteFloat
finite = config_types.finite


class Pattern(types.String):
    """A regular expression, compiled to check it; the value is the text.

    One whose meaning Python warns will change (``[[``: a possible nested
    set) is refused with that warning, rather than printed as a second
    line beside whatever else the start says.
    """

    def __init__(self):
        super().__init__(type_name='regular expression')

    def __call__(self, value):
        value = super().__call__(value)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter('error')
                re.compile(value)
        except (re.error, Warning, OverflowError, RecursionError) as exc:
            raise ValueError('not a regular expression: %s' % exc)
        return value


class CpuList(types.String):
    """A CPU list as nova and the kernel write them (``0-3,8,^2``).

    The value is the text; empty means unset. A list that names no CPU at
    all (``^1``) is refused: it can only be a mistake.
    """

    def __init__(self):
        super().__init__(type_name='CPU list')

    def __call__(self, value):
        value = super().__call__(value)
        if not value.strip():
            return value
        for number in re.findall(r'\d+', value):
            if len(number) > len(str(MAX_CPU_ID)) or int(number) > MAX_CPU_ID:
                raise ValueError('CPU %s in %r is above %d, the highest '
                                 'Linux numbers' % (number, value, MAX_CPU_ID))
        if not topology.parse_cpu_list(value):
            raise ValueError('%r names no CPU' % value)
        return value
