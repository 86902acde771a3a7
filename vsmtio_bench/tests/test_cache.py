"""The bench's cache of runs (bench/cache.py)."""

import fixtures
import testtools

from vsmtio_bench import cache


class TestStore(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path

    def test_a_result_is_found_by_its_key_only(self):
        store = cache.Store('runs', root=self.root)
        key = {'scenario': 'x', 'seed': 1, 'config': {'retain': {'a': 50}}}
        self.assertIsNone(store.get(key))
        store.put(key, {'io': 1.1})
        self.assertEqual({'io': 1.1}, store.get(key))
        self.assertIsNone(store.get(dict(key, seed=2)))

    def test_memo_computes_once(self):
        store = cache.Store('runs', root=self.root)
        calls = []

        def compute():
            calls.append(1)
            return [1, 2]
        self.assertEqual([1, 2], store.memo('k', compute))
        self.assertEqual([1, 2], store.memo('k', compute))
        self.assertEqual(1, len(calls))

    def test_another_version_of_the_code_never_sees_it(self):
        store = cache.Store('runs', root=self.root)
        store.put('k', 1)
        self.useFixture(fixtures.MockPatchObject(
            cache, 'version', lambda parts=cache.MODEL: 'other'))
        self.assertIsNone(cache.Store('runs', root=self.root).get('k'))

    def test_the_environment_names_the_directory(self):
        self.useFixture(fixtures.EnvironmentVariable('VSMTIO_BENCH_CACHE',
                                                     self.root))
        self.assertEqual(self.root, str(cache.directory()))


class TestVersion(testtools.TestCase):

    def test_the_model_and_the_product_have_their_own(self):
        self.assertNotEqual(cache.version(cache.MODEL),
                            cache.version(cache.PRODUCT))
        self.assertEqual(16, len(cache.version()))

    def test_what_no_run_reads_is_left_out(self):
        files = {str(p.relative_to(cache.ROOT))
                 for p in cache._files(cache.PRODUCT)}
        self.assertIn('vsmtio_sim/engine.py', files)
        self.assertIn('vsmtio_agent/policy/search.py', files)
        self.assertIn('vsmtio_sim/scenarios/fig5_hbase_pagerank.yaml', files)
        for skipped in ('vsmtio_sim/tenants.py', 'vsmtio_sim/cmd.py'):
            self.assertNotIn(skipped, files)
        self.assertFalse([f for f in files if '/tests/' in f])

    def test_a_changed_source_changes_it(self):
        root = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MockPatchObject(
            cache, 'ROOT', __import__('pathlib').Path(root)))
        with open(root + '/m.py', 'w') as f:
            f.write('A = 1\n')
        before = cache.version(('m.py',))
        with open(root + '/m.py', 'w') as f:
            f.write('A = 2\n')
        self.assertNotEqual(before, cache.version(('m.py',)))


class TestContent(testtools.TestCase):
    """What a version hashes: code and data, not words about them."""

    def _hash(self, name, text):
        path = self.useFixture(fixtures.TempDir()).path + '/' + name
        with open(path, 'w') as f:
            f.write(text)
        return cache._content(cache.pathlib.Path(path))

    def test_docstrings_and_comments_change_nothing(self):
        code = 'def f(x):\n    return x + 1\n'
        self.assertEqual(
            self._hash('a.py', code),
            self._hash('a.py', '"""Module."""\n# a comment\n'
                               'def f(x):\n    """Why."""\n'
                               '    return x + 1  # note\n'))
        self.assertNotEqual(self._hash('a.py', code),
                            self._hash('a.py', code.replace('1', '2')))

    def test_a_function_of_a_docstring_alone_still_parses(self):
        self.assertEqual(self._hash('a.py', 'def f():\n    pass\n'),
                         self._hash('a.py', 'def f():\n    """Only."""\n'))

    def test_yaml_is_its_data(self):
        self.assertEqual(self._hash('c.yaml', 'a: 1\nb: [2, 3]\n'),
                         self._hash('c.yaml', '# why\nb:\n  - 2\n  - 3\n'
                                              'a: 1   # the unit\n'))
        self.assertNotEqual(self._hash('c.yaml', 'a: 1\n'),
                            self._hash('c.yaml', 'a: 2\n'))
