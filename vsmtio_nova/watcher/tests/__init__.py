"""Tests of the Watcher strategy on Watcher's own model.

Apart from the nova-side tests (vsmtio_nova.tests, whose package patches
and registers nova): Watcher and nova both register a
global ``host`` option, so the two cannot be imported in one process (as
they never are: the strategy runs in Watcher's decision engine).
"""
