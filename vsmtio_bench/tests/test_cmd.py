"""``vsmtio-bench``: one command, a bench by name, bad names refused."""

import importlib.util
import io

import fixtures
import testtools

from vsmtio_bench import cmd


class BenchCommandTest(testtools.TestCase):

    def run_cmd(self, *argv):
        out = self.useFixture(fixtures.MonkeyPatch('sys.stdout',
                                                   io.StringIO())).new_value
        err = self.useFixture(fixtures.MonkeyPatch('sys.stderr',
                                                   io.StringIO())).new_value
        self.useFixture(fixtures.MonkeyPatch('sys.argv', ['vsmtio-bench']))
        return cmd.main(list(argv)), out.getvalue(), err.getvalue()

    def test_every_bench_is_a_module_of_the_package(self):
        # found, not imported: a bench's own dependencies (nova, libvirt)
        # are needed only to run it
        for name in cmd.BENCHES:
            self.assertIsNotNone(
                importlib.util.find_spec('vsmtio_bench.' + name), name)

    def test_help_lists_every_bench(self):
        rc, out, _err = self.run_cmd('--help')
        self.assertEqual(0, rc)
        for name in cmd.BENCHES:
            self.assertIn('\n  %s ' % name, out)

    def test_no_name_is_a_usage_error(self):
        rc, out, _err = self.run_cmd()
        self.assertEqual(2, rc)
        self.assertIn('usage: vsmtio-bench NAME', out)

    def test_an_unknown_bench_is_refused_and_nothing_is_imported(self):
        # a name is never a module path: only the package's benches run
        for name in ('nosuch', 'os', '../sim', 'cmd', 'tests'):
            rc, _out, err = self.run_cmd(name)
            self.assertEqual(2, rc, name)
            self.assertIn('no bench %r' % name, err)

    def test_a_bench_gets_its_own_arguments(self):
        got = []
        fake = type('Module', (), {'main': staticmethod(
            lambda argv: got.append(argv) or 0)})
        self.useFixture(fixtures.MockPatch('importlib.import_module',
                                           return_value=fake))
        rc, _out, _err = self.run_cmd('yardstick', '--seeds', '1,2')
        self.assertEqual(0, rc)
        self.assertEqual([['--seeds', '1,2']], got)
