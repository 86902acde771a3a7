"""Unit tests. Hypothesis runs without its per-example deadline here.

The property tests assert behaviour, not speed (speed is a benchmark's):
on a loaded CI machine one slow example was a failure that said nothing
about the code.
"""

import hypothesis

hypothesis.settings.register_profile('vsmtio', deadline=None)
hypothesis.settings.load_profile('vsmtio')
