"""Where the benches read and write the benchmark documents.

The benches run from a checkout (tox installs it in development mode), so
the documents are found beside the package rather than in the working
directory a caller happens to be in.
"""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, 'doc', 'source', 'benchmarks')
ORACLE_JSON = os.path.join(BENCHMARKS, 'oracle.json')
