"""The packages' layering, read from their imports.

From the top down: the benches (``vsmtio_bench``) drive the simulated
host (``vsmtio_sim``), which runs the agent (``vsmtio_agent``) through its
host-driver interface; the agent and the nova plugin share only
``vsmtio_contract``, which imports neither (nor nova, so a host without
nova can use it). No package imports one above it. The simulated host
models hardware and kernels, never the agent's policy: only its runner,
which runs the real agent on it, reaches the agent's code above the
driver interface. Tests are left out: a test may drive one side from the
other.
"""

import ast
import os

import testtools

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _imports(package, tests=False):
    """{module path: set of imported module names} of a package's code.

    With its ``tests`` too where they are its code (the tempest plugin's).
    """
    out = {}
    for dirpath, dirnames, filenames in os.walk(os.path.join(TOP, package)):
        dirnames[:] = [d for d in dirnames if tests or d != 'tests']
        for name in filenames:
            if not name.endswith('.py'):
                continue
            path = os.path.join(dirpath, name)
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            names = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names.add(node.module)
                    names.update('%s.%s' % (node.module, a.name)
                                 for a in node.names)
            out[os.path.relpath(path, TOP)] = names
    return out


def _offenders(package, forbidden, tests=False, exempt=()):
    return sorted('%s imports %s' % (path, name)
                  for path, names in _imports(package, tests).items()
                  if path not in exempt
                  for name in names
                  if any(name == f or name.startswith(f + '.')
                         for f in forbidden))


class LayeringTest(testtools.TestCase):

    def test_agent_imports_nothing_above_it(self):
        self.assertEqual([], _offenders(
            'vsmtio_agent', ['vsmtio_nova', 'vsmtio_sim', 'vsmtio_bench']))

    def test_simulator_imports_neither_the_benches_nor_the_nova_plugin(self):
        self.assertEqual([], _offenders(
            'vsmtio_sim', ['vsmtio_bench', 'vsmtio_nova']))

    def test_nothing_imports_the_benches(self):
        for package in ('vsmtio_agent', 'vsmtio_sim', 'vsmtio_nova',
                        'vsmtio_contract', 'vsmtio_dashboard'):
            self.assertEqual([], _offenders(package, ['vsmtio_bench']))

    def test_nova_plugin_does_not_import_the_agent(self):
        self.assertEqual([], _offenders(
            'vsmtio_nova', ['vsmtio_agent', 'vsmtio_sim']))

    def test_contract_imports_neither_side_nor_nova(self):
        self.assertEqual([], _offenders(
            'vsmtio_contract', ['vsmtio_agent', 'vsmtio_nova', 'nova']))

    def test_simulator_does_not_import_the_policy(self):
        # the simulated host is hardware and kernels: RASS-in-CFS is
        # modelled as the kernel patch does it, the SMT co-run as physics
        self.assertEqual([], _offenders(
            'vsmtio_sim', ['vsmtio_agent.policy'],
            exempt=['vsmtio_sim/runner.py']))

    def test_tempest_plugin_imports_nothing_of_the_host(self):
        # tempest's environment is not the compute host's: the host's
        # libvirt is reached through the host (virsh), as whitebox does
        self.assertEqual([], _offenders(
            'vsmtio_tempest_plugin', ['libvirt', 'vsmtio_agent', 'nova'],
            tests=True))
