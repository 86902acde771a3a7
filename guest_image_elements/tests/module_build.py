"""The build tests every guest module owes: kbuild and DKMS, both series.

Both guest modules (the retention idle driver and the CPU balloon) must
compile without a warning against the two header series Debian 12 ships
(6.1, and 6.12 from backports), carry the right vermagic, license and
parameters, and build under DKMS for every kernel at once, which is how
the image elements install them. A test case mixes :class:`BuildTests`
in and says what differs: its tools module and its parameters.
"""

import tempfile

SERIES = ('6.1', '6.12')


class BuildTests(object):
    """Mixed into a ``testtools.TestCase``; see the module docstring."""

    #: ``guest_image_elements/tools/guest_boot.py``, loaded
    guest_boot = None
    #: the module's parameters, as ``modinfo -F parm`` names them
    params = frozenset()

    def build(self, kdir, out):
        """kbuild the module against ``kdir``; ``(ko path, warnings)``."""
        raise NotImplementedError

    def dkms(self, kvers, out):
        """DKMS-build the module for ``kvers``; ``{kver: ko path}``."""
        raise NotImplementedError

    def _compile(self, series):
        gb = self.guest_boot
        kver, kdir = gb.headers_for(series)
        with tempfile.TemporaryDirectory() as tmp:
            ko, warnings = self.build(kdir, tmp)
            self.assertEqual([], warnings)
            self.assertEqual(kver, gb.modinfo(ko, 'vermagic').split()[0])
            self.assertEqual('GPL', gb.modinfo(ko, 'license'))
            params = {line.split(':')[0] for line in
                      gb.modinfo(ko, 'parm').splitlines()}
            self.assertEqual(set(self.params), params)

    def test_kbuild_6_1(self):
        self._compile('6.1')

    def test_kbuild_6_12(self):
        self._compile('6.12')

    def test_dkms_builds_for_every_kernel(self):
        gb = self.guest_boot
        kvers = [gb.headers_for(s)[0] for s in SERIES]
        with tempfile.TemporaryDirectory() as tmp:
            built = self.dkms(kvers, tmp)
            self.assertEqual(set(kvers), set(built))
            for kver, ko in built.items():
                self.assertEqual(kver,
                                 gb.modinfo(ko, 'vermagic').split()[0])
