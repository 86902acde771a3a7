"""Daemons the cloud starts: each in its own session, with a pid file.

``down`` stops exactly what ``up`` started, by the pids it recorded (the
whole process group, so worker processes go too), in reverse order of
start, and then checks no port of the cloud is still open.
"""

import os
import signal
import socket
import subprocess
import time

import layout

ORDER_FILE = layout.path('run', 'started')


class CloudError(Exception):
    """A step of the cloud failed; the text says which and why."""


def run(*cmd, env=None, quiet=False, timeout=600, **kw):
    """Run a command to completion; raise CloudError with its output."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run([str(c) for c in cmd], capture_output=True,
                          text=True, env=full_env, timeout=timeout, **kw)
    if proc.returncode:
        raise CloudError('%s failed (%d): %s' % (
            ' '.join(map(str, cmd[:4])), proc.returncode,
            (proc.stderr or proc.stdout)[-2500:]))
    if not quiet and proc.stdout.strip():
        print(proc.stdout.strip()[-2000:])
    return proc.stdout


def run_tty(cmd, answers, env=None, cwd=None, timeout=120):
    """Run a command on a terminal of its own, answering its prompts.

    Each line of ``answers`` is typed once the command has printed a new
    prompt (``...Password:``) since the last: what ``--password-prompt``
    reads, which only a terminal can give. Its output, or CloudError.
    """
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:    # the child: its terminal is the pty
        try:
            if cwd:
                os.chdir(cwd)
            os.execvpe(cmd[0], [str(c) for c in cmd],
                       dict(os.environ, **(env or {})))
        finally:
            os._exit(127)
    out, since, pending = b'', 0, list(answers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([fd], [], [], 1)[0]:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:     # EIO: the command closed its terminal
                chunk = b''
            if not chunk:
                break
            out += chunk
            if pending and out[since:].rstrip().endswith(b'Password:'):
                os.write(fd, pending.pop(0).encode() + b'\n')
                since = len(out)
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(fd)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    text = out.decode(errors='replace')
    if status or pending:
        raise CloudError('%s failed (%d, %d prompt(s) unanswered): %s' % (
            ' '.join(map(str, cmd[:4])), status, len(pending), text[-2500:]))
    return text


def start(name, cmd, env=None, cwd=None):
    """Start a daemon in a new session; its output goes to log/NAME.log."""
    os.makedirs(layout.LOG, exist_ok=True)
    os.makedirs(layout.RUN, exist_ok=True)
    log = open(os.path.join(layout.LOG, name + '.log'), 'ab')
    proc = subprocess.Popen([str(c) for c in cmd], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, **(env or {})), cwd=cwd,
                            start_new_session=True)
    log.close()
    with open(os.path.join(layout.RUN, name + '.pid'), 'w') as f:
        f.write('%d\n' % proc.pid)
    with open(ORDER_FILE, 'a') as f:
        f.write(name + '\n')
    return proc


def pid_of(name):
    try:
        with open(os.path.join(layout.RUN, name + '.pid')) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie of ours counts as gone
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().split(')')[-1].split()[0] != 'Z'
    except OSError:
        return False


def started():
    try:
        with open(ORDER_FILE) as f:
            return [line.strip() for line in f if line.strip()]
    except OSError:
        return []


def stop(name, timeout=30):
    """SIGTERM the daemon's process group, then SIGKILL what is left."""
    pid = pid_of(name)
    if pid is None:
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while alive(pid) and time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.2)
        if not alive(pid) and not _group_alive(pid):
            break
    os.unlink(os.path.join(layout.RUN, name + '.pid'))


def _group_alive(pgid):
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) == pgid and alive(int(entry)):
                return True
        except ProcessLookupError:
            continue
    return False


def port_open(port, host=layout.HOST):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def wait_for(what, check, timeout=120, proc=None, log=None):
    """Poll ``check()`` until true; fail early if ``proc`` died."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:  # not ready yet: any error means try again
            pass
        if proc is not None and proc.poll() is not None:
            raise CloudError('%s exited (%s) before it was ready; see %s'
                             % (what, proc.returncode, log or layout.LOG))
        if time.monotonic() > deadline:
            raise CloudError('%s not ready after %d s; see %s'
                             % (what, timeout, log or layout.LOG))
        time.sleep(0.5)


def wait_port(name, port, proc=None, timeout=120):
    wait_for('%s (port %d)' % (name, port), lambda: port_open(port),
             timeout, proc, os.path.join(layout.LOG, name + '.log'))


def http_answers(port, path='/'):
    """True once a WSGI application answers (any HTTP status)."""
    import urllib.error
    import urllib.request
    try:
        urllib.request.urlopen('http://%s:%d%s' % (layout.HOST, port, path),
                               timeout=10).close()
    except urllib.error.HTTPError:
        return True
    return True


def wait_http(name, port, proc=None, timeout=120):
    wait_for('%s (http://%s:%d)' % (name, layout.HOST, port),
             lambda: http_answers(port), timeout, proc,
             os.path.join(layout.LOG, name + '.log'))
