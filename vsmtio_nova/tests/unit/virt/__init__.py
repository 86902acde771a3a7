# nova's unit-test packages patch first and register nova's objects; the
# virt tests build real Instances and drive nova's real LibvirtDriver.
from nova import monkey_patch; monkey_patch.patch()  # noqa

from nova import objects  # noqa: E402

objects.register_all()
