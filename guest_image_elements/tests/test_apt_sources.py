"""tools/apt_sources.py: the archive build-image and fresh-debian-ci use.

They take it from this machine's apt sources (the project names no
archive), so the reader must see what apt sees: deb822 and one-line
files, in apt's order, skipping disabled and source-only entries.
"""

import importlib.util
import os
import subprocess
import sys
import tempfile

import testtools

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, 'tools', 'apt_sources.py')
_spec = importlib.util.spec_from_file_location('apt_sources', SCRIPT)
apt_sources = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(apt_sources)

DEB822 = """\
Types: deb-src
URIs: http://source.example/debian
Suites: bookworm

Types: deb
# a comment inside a stanza
URIs: http://archive.example/debian/
Suites: bookworm
 bookworm-updates
Components: main

Types: deb
URIs: http://disabled.example/debian
Suites: bookworm-security
Enabled: no

Types: deb deb-src
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main
"""


class TestAptSources(testtools.TestCase):

    def root(self, files):
        root = self.tmpdir()
        for name, text in files.items():
            path = os.path.join(root, 'etc', 'apt', name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write(text)
        return root

    def tmpdir(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        return tmp.name

    def test_deb822(self):
        root = self.root({'sources.list.d/debian.sources': DEB822})
        self.assertEqual('http://archive.example/debian',
                         apt_sources.uri_for('bookworm', root))
        self.assertEqual('http://archive.example/debian',
                         apt_sources.uri_for('bookworm-updates', root))
        self.assertEqual('http://security.example/debian-security',
                         apt_sources.uri_for('bookworm-security', root))
        self.assertIsNone(apt_sources.uri_for('trixie', root))

    def test_one_line_first_as_apt_reads(self):
        root = self.root({
            'sources.list': '# deb http://commented.example/d bookworm main\n'
                            'deb-src http://src.example/d bookworm main\n'
                            'deb [arch=amd64 signed-by=/k.gpg] '
                            'http://one.example/d bookworm main\n',
            'sources.list.d/debian.sources': DEB822})
        self.assertEqual('http://one.example/d',
                         apt_sources.uri_for('bookworm', root))

    def test_other_files_ignored(self):
        root = self.root({
            'sources.list.d/old.list.save': 'deb http://x.example/d trixie\n',
            'sources.list.d/a.list': 'deb http://a.example/d trixie main\n'})
        self.assertEqual('http://a.example/d',
                         apt_sources.uri_for('trixie', root))

    def test_missing_suite_one_line_error(self):
        root = self.root({'sources.list.d/debian.sources': DEB822})
        proc = subprocess.run(
            [sys.executable, SCRIPT, '--root', root, 'sid'],
            capture_output=True, text=True)
        self.assertEqual(2, proc.returncode)
        self.assertEqual('', proc.stdout)
        self.assertEqual(1, len(proc.stderr.splitlines()))
        self.assertIn('no enabled deb source for suite sid', proc.stderr)
