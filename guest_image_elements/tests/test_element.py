"""The diskimage-builder element, checked with DIB's own lint and bash.

The image build itself (``tox -e guest-image``) needs root, network and
about five minutes, so CI does not run it; its last result is recorded in
``doc/source/guest.rst``.
"""

import os
import shutil
import subprocess
import tempfile

import testtools

ELEMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(ELEMENTS)
ENV_FILE = os.path.join(ELEMENTS, 'vsmtio-retention', 'environment.d',
                        '05-vsmtio-retention-cmdline')
CMDLINE = 'intel_idle.max_cstate=0 initcall_blacklist=haltpoll_init'


class TestElement(testtools.TestCase):

    def test_dib_lint_passes(self):
        lint = shutil.which('dib-lint')
        self.assertIsNotNone(lint, 'dib-lint missing: pip install '
                                   'diskimage-builder (tox -e guest-module '
                                   'does)')
        with tempfile.TemporaryDirectory() as empty:
            env = dict(os.environ, ELEMENTS_DIR='guest_image_elements',
                       LIB_DIR=empty)
            proc = subprocess.run([lint], cwd=REPO, env=env, text=True,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        errors = [line for line in proc.stdout.splitlines()
                  if line.startswith('ERROR')]
        self.assertEqual([], errors)
        self.assertEqual(0, proc.returncode, proc.stdout[-2000:])

    def _cmdline(self, preset=None, times=1):
        script = 'set -eu\n'
        if preset is not None:
            script += 'export DIB_BOOTLOADER_DEFAULT_CMDLINE="%s"\n' % preset
        script += ('. "%s"\n' % ENV_FILE) * times
        script += 'printf %s "$DIB_BOOTLOADER_DEFAULT_CMDLINE"\n'
        env = {k: v for k, v in os.environ.items()
               if k != 'DIB_BOOTLOADER_DEFAULT_CMDLINE'}
        return subprocess.run(['bash', '-c', script], env=env, check=True,
                              text=True, stdout=subprocess.PIPE).stdout

    def test_cmdline_keeps_the_bootloader_default(self):
        self.assertEqual('nofb nomodeset gfxpayload=text ' + CMDLINE,
                         self._cmdline())

    def test_cmdline_appends_to_an_operator_value(self):
        self.assertEqual('console=ttyS0 ' + CMDLINE,
                         self._cmdline('console=ttyS0'))

    def test_cmdline_appended_once_per_build(self):
        # DIB sources environment.d again in every phase.
        self.assertEqual(self._cmdline(), self._cmdline(times=3))
