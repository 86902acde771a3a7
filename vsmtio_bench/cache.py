"""The bench's cache of expensive runs, keyed by the model's version.

The full yardstick takes hours (every shipped scenario, several seeds,
an oracle search under each scheduler), so every run and search is kept
and a rerun only does what changed. A result is only as good as the code
that made it: each is stored under the version of what produced it, a
hash of the sources (:func:`version`: their code and data, not their
docstrings, comments or layout), so a change to the model or the agent
makes every older result unreachable rather than quietly reused; a
document made of results (``oracle.json``) records the version too.

Results are JSON files, readable and small, under ``VSMTIO_BENCH_CACHE``
(default ``~/.cache/vsmtio-bench``).
"""

import ast
import hashlib
import json
import os
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
# What a static configuration's run reads: the simulator, its scenarios
# and data, and the agent's model and placement it applies.
MODEL = ('vsmtio_sim', 'vsmtio_agent/model.py',
         'vsmtio_agent/policy/rass.py')
# What the product's run also reads: the whole agent.
PRODUCT = MODEL + ('vsmtio_agent', 'vsmtio_contract')
# What judges a run against its floors: a result judged (``oracle.json``,
# ``yardstick.json``) is only as good as these.
JUDGE = ('vsmtio_sim/tenants.py', 'vsmtio_sim/intervals.py')
# What no run reads: the tests, and the simulator's judgement of a run
# and its command line (a change there invalidates nothing cached).
_SKIP = ('tests', '__pycache__', 'cmd.py', 'tenants.py', 'intervals.py',
         'seeds.py')


def _files(parts):
    for part in parts:
        path = ROOT / part
        if path.is_file():
            yield path
            continue
        for p in sorted(path.rglob('*')):
            rel = p.relative_to(ROOT).parts
            if p.is_file() and not set(rel) & set(_SKIP) and (
                    p.suffix in ('.py', '.yaml', '.json', '.csv')):
                yield p


def _content(path):
    """What of ``path`` a run can depend on, as bytes.

    A docstring, a comment or a YAML file's layout changes no run, so it
    must not make every cached run unreachable: Python is hashed as its
    syntax tree without docstrings, YAML as the data it loads to; any
    other file as its bytes.
    """
    if path.suffix == '.py':
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            body = getattr(node, 'body', None)
            if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                  ast.AsyncFunctionDef)) and body
                    and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
        return ast.dump(tree).encode()
    if path.suffix == '.yaml':
        with path.open() as f:
            return json.dumps(yaml.safe_load(f), sort_keys=True,
                              default=str).encode()
    return path.read_bytes()


def version(parts=MODEL):
    """A short hash of the sources ``parts`` names (files or folders)."""
    h = hashlib.sha256()
    for p in sorted(set(_files(parts))):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(b'\0')
        h.update(_content(p))
    return h.hexdigest()[:16]


def directory():
    return pathlib.Path(os.environ.get('VSMTIO_BENCH_CACHE') or
                        os.path.expanduser('~/.cache/vsmtio-bench'))


class Store(object):
    """``get``/``put`` of JSON results under one version."""

    def __init__(self, kind, parts=MODEL, root=None):
        self.version = version(parts)
        self.path = pathlib.Path(root or directory()) / kind / self.version

    def _file(self, key):
        text = json.dumps(key, sort_keys=True)
        return self.path / (hashlib.sha256(text.encode()).hexdigest()[:24]
                            + '.json')

    def get(self, key):
        """The result stored under ``key`` (any JSON value), or None."""
        f = self._file(key)
        if not f.exists():
            return None
        with f.open() as fh:
            doc = json.load(fh)
        # (a hash collision would hand back another key's result)
        return doc['result'] if doc.get('key') == key else None

    def put(self, key, result):
        self.path.mkdir(parents=True, exist_ok=True)
        f = self._file(key)
        tmp = f.with_suffix('.tmp%d' % os.getpid())
        with tmp.open('w') as fh:
            json.dump({'key': key, 'result': result}, fh, sort_keys=True)
        os.replace(tmp, f)
        return result

    def memo(self, key, compute):
        """The stored result of ``key``, computed and stored if absent."""
        got = self.get(key)
        return got if got is not None else self.put(key, compute())
