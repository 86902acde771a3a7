"""Where the benches read and write the benchmark documents.

The benches run from a checkout (tox installs it in development mode), so
the documents are found beside the package rather than in the working
directory a caller happens to be in.
"""

import os
import shlex
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, 'doc', 'source', 'benchmarks')
ORACLE_JSON = os.path.join(BENCHMARKS, 'oracle.json')
YARDSTICK_JSON = os.path.join(BENCHMARKS, 'yardstick.json')
SENSITIVITY_JSON = os.path.join(BENCHMARKS, 'sensitivity.json')
SENSITIVITY_RST = os.path.join(BENCHMARKS, 'sensitivity.rst')


def commit():
    """The checkout's commit, which the generated pages name as theirs.

    ``unknown`` outside a git checkout (an sdist): a page says where it
    came from, never when.
    """
    try:
        out = subprocess.run(['git', '-C', ROOT, 'rev-parse', '--short',
                              'HEAD'], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return 'unknown'
    return out or 'unknown'


def command(bench, argv, local=()):
    """The command line a generated page names as its source.

    ``vsmtio-bench bench`` with ``argv`` less the options in ``local``
    (``--out`` and the like: where it wrote, how many workers it had),
    which change nothing it measured; each argument quoted as a shell
    would need it (an empty one as ``''``), so it can be run as printed.
    """
    out, skip = ['vsmtio-bench', bench], False
    for a in argv:
        if skip:
            skip = False
        elif a in local:
            skip = True
        elif a.partition('=')[0] not in local:
            out.append(shlex.quote(a))
    return ' '.join(out)
