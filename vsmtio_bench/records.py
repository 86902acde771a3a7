"""The bench's committed records: results that outlast a machine.

The full yardstick is more compute than one machine's session holds, and
the cache (:mod:`vsmtio_bench.cache`) lives and dies with the machine.
So what a result is read from, the oracle of a scenario or one seed's
product run judged per VM, is also kept in a JSON document in the
repository (``oracle.json``, ``yardstick.json``), and the next run on any
machine takes it instead of running it again.

A document opens with its *identity*: the versions of the code that made
its results and the procedure's settings. Results are taken only under
the identity the reader would make them under; under any other they are
another code's, and a write starts the document afresh. Several bench
processes may record into one document at once (a lane per core), so each
write reads, merges and replaces the file under an inter-process lock.
"""

import hashlib
import json
import os
import tempfile

import fasteners

RESULTS = 'results'
# what a document holds besides its identity: where it was made
_NOT_IDENTITY = ('commit', RESULTS)


def _load(path):
    if not path or not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def _same(doc, identity):
    return all(doc.get(k) == v for k, v in identity.items()
               if k not in _NOT_IDENTITY)


def read(path, identity):
    """The results ``path`` records under ``identity``, else ``{}``."""
    doc = _load(path)
    return doc.get(RESULTS, {}) if _same(doc, identity) else {}


def _lock(path):
    # beside no file of the checkout: the lock names the document
    digest = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:16]
    return fasteners.InterProcessLock(os.path.join(
        tempfile.gettempdir(), 'vsmtio-bench-%s.lock' % digest))


def put(path, identity, keys, result):
    """Record ``result`` at ``results[keys[0]][keys[1]]...`` in ``path``.

    ``identity`` holds the document's versions and settings (and its
    ``commit``, which is updated). Results recorded under another
    identity are dropped: they are not this code's.
    """
    with _lock(path):
        old = _load(path)
        doc = dict(identity)
        doc[RESULTS] = old.get(RESULTS, {}) if _same(old, identity) else {}
        node = doc[RESULTS]
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = result
        _write(path, doc)
    return doc


def _write(path, doc):
    tmp = '%s.tmp%d' % (path, os.getpid())
    with open(tmp, 'w') as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write('\n')
    os.replace(tmp, path)
