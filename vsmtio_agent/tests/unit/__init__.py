"""Unit tests. Hypothesis runs without its per-example deadline here.

The property tests assert behaviour, not speed (speed is a benchmark's):
on a loaded CI machine one slow example was a failure that said nothing
about the code, and so would be a slow draw of examples (the too_slow
health check). A failing example is printed as a blob
(``@reproduce_failure``), so a failure CI meets once can be run again.
"""

import hypothesis

hypothesis.settings.register_profile(
    'vsmtio', deadline=None, print_blob=True,
    suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile('vsmtio')
