"""A JSON file the root agent keeps between runs, treated as data.

The agent runs as root and writes back whatever its checkpoint says, so
the file is written as nobody else can shape it and read only when nobody
else could have:

* written to a temporary file of a unique, unpredictable name created
  with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (:func:`tempfile.mkstemp`: a
  symlink or file planted beside the checkpoint is never followed nor
  reused), fsynced, then renamed over the old one, so a crash leaves the
  old or the new content, never half of either;
* in a directory only its owner can write (created ``0700``; one another
  user can write is refused), with the file's own mode ``0600``;
* on load, refused unless its directory is the agent's user's and
  writable by nobody else, and every directory above it can be changed
  only by root or that user (one another user could rename or replace
  would let them swap the file); then opened with ``O_NOFOLLOW`` and
  refused unless it is a regular file owned by the agent's user and
  writable by nobody else;
* parsed only after its nesting is found shallow: a deeply nested file is
  refused with a line, not a ``RecursionError`` past every handler;
* a file that is refused is kept aside under a name no later refusal
  reuses (``<path>.corrupt-<UTC time>[-n]``), so the evidence of a first
  corruption survives a second.
"""

import errno
import json
import os
import re
import stat
import tempfile
import time

# A checkpoint nests five deep (the file, domains, a domain, a kind, a
# value's list); the status document a little more. Far below where
# Python's parser recurses out of its stack.
MAX_DEPTH = 16
# Far above any real checkpoint: a few kB per domain.
MAX_BYTES = 64 * 1024 * 1024

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


class Untrusted(ValueError):
    """The file is not one this agent wrote: not owned, or open to others."""


def write_json_atomic(path, data, mode=0o644, durable=True, private=False):
    """Replace ``path`` with ``data`` as JSON, never leaving half a file.

    With ``durable`` the file and its directory are fsynced, so the new
    content survives a crash right after; a file rewritten every period
    (the status document) can skip that cost. ``private`` makes the
    directory root-only (``0700`` when created, refused if another user
    can write it) for a file whose content the agent will act on.
    ``OSError`` when it cannot be written: the caller changes nothing.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o700 if private else 0o755, exist_ok=True)
    if private:
        check_private_dir(directory)
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path),
                               suffix='.tmp', dir=directory)
    try:
        with os.fdopen(fd, 'w') as f:
            os.fchmod(f.fileno(), mode)
            json.dump(data, f, indent=1, sort_keys=True)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        remove(tmp)
        raise
    if durable:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def check_private_dir(directory):
    """``OSError`` unless ``directory`` is ours and writable only by us."""
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(errno.ENOTDIR, 'not a directory', directory)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise OSError(errno.EPERM, 'directory is owned by uid %d with mode '
                      '%04o; the agent keeps state only in a directory of '
                      'its own that no one else can write'
                      % (st.st_uid, stat.S_IMODE(st.st_mode)), directory)


def untrusted_dir(directory):
    """Why another user could change what ``directory`` holds, or None.

    The directory must be this user's and writable by nobody else; each
    one above it root's or this user's, and writable by others only with
    the sticky bit (``/tmp``: there no one renames what is not theirs).
    A directory that does not exist is nothing to distrust.
    """
    uid = os.geteuid()
    path = os.path.abspath(directory)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return '%s is not a directory' % path
    if st.st_uid != uid or st.st_mode & 0o022:
        return ('is in %s, owned by uid %d with mode %04o: the agent keeps '
                'state only in a directory of its own that no one else can '
                'write' % (path, st.st_uid, stat.S_IMODE(st.st_mode)))
    while path != os.path.dirname(path):
        path = os.path.dirname(path)
        st = os.stat(path)
        if (st.st_uid not in (0, uid)
                or (st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX)):
            return ('is below %s, owned by uid %d with mode %04o: another '
                    'user could replace what it holds'
                    % (path, st.st_uid, stat.S_IMODE(st.st_mode)))
    return None


def read_trusted(path):
    """The text of ``path``; None if absent.

    ``Untrusted`` if its directory is not trusted (:func:`untrusted_dir`)
    or it is a link, not a regular file, not owned by this user or
    writable by group or others; ``ValueError`` if too large.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Untrusted('is a symbolic link')
        raise
    with os.fdopen(fd, 'rb') as f:
        why = untrusted_dir(os.path.dirname(os.path.abspath(path)))
        if why is not None:
            raise Untrusted(why)
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted('is not a regular file')
        if st.st_uid != os.geteuid():
            raise Untrusted('is owned by uid %d, not %d (this agent)'
                            % (st.st_uid, os.geteuid()))
        if st.st_mode & 0o022:
            raise Untrusted('is writable by group or others (mode %04o)'
                            % stat.S_IMODE(st.st_mode))
        if st.st_size > MAX_BYTES:
            raise ValueError('is %d bytes, more than %d'
                             % (st.st_size, MAX_BYTES))
        raw = f.read(MAX_BYTES + 1)
    try:
        return raw.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise ValueError('is not UTF-8: %s' % exc)


def check_depth(text, limit=MAX_DEPTH):
    """``ValueError`` if JSON ``text`` nests deeper than ``limit``."""
    depth = 0
    for ch in _STRING.sub('', text):
        if ch in '[{':
            depth += 1
            if depth > limit:
                raise ValueError('nested deeper than %d levels' % limit)
        elif ch in ']}':
            depth -= 1


def parse(text):
    """JSON ``text`` parsed, refusing deep nesting first (``ValueError``)."""
    check_depth(text)
    try:
        return json.loads(text)
    except RecursionError:      # a belt to check_depth's braces
        raise ValueError('nested too deeply to parse')


def keep_aside(path):
    """Move ``path`` to a name of its own; return that name.

    ``link`` never replaces an existing name, so a second corruption
    cannot overwrite the first one's evidence.
    """
    stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
    base = '%s.corrupt-%s' % (path, stamp)
    for n in range(1000):
        aside = base if n == 0 else '%s-%d' % (base, n)
        try:
            os.link(path, aside, follow_symlinks=False)
        except FileExistsError:
            continue
        os.unlink(path)
        return aside
    raise OSError(errno.EEXIST, 'no free name to keep it aside', path)


def remove(path):
    """Remove ``path`` if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
