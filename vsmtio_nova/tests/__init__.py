"""Tests of the nova plugin, on real nova.

nova's own test packages start the same way: eventlet patching must come
before anything imports nova's services, and nova's objects must be
registered before the fakes and the harness build them.
"""

from nova import monkey_patch

monkey_patch.patch()

from nova import objects  # noqa: E402

objects.register_all()
