"""The operator docs' commands, run as written against this cloud.

Each command the cloud runs from the docs goes through :func:`doc_command`,
which records it, so the cloud can say which of ``doc_commands.RUN`` it
never ran (:func:`docs_not_run`). Apart from the resources it creates
(:mod:`resources`), so that every module bringing the cloud up can run a
doc's command without importing the others.
"""

import json
import os
import subprocess

import doc_commands
import layout
import procs

#: What :func:`doc_command` ran: one JSON line per command.
RAN = layout.path('run', 'doc-commands')
#: The cloud's name in ``clouds.yaml``, its commands' ``OS_CLOUD``.
CLOUD = 'vsmtio-cloud'


def doc_command(doc, *leading, answers=(), cwd=None, refused=False,
                variant=False, **names):
    """Run the docs' own command, as an admin of this cloud; its output.

    The one command of ``doc`` starting with ``leading``
    (:mod:`doc_commands`; it must be in ``doc_commands.RUN``), with each of
    the docs' placeholders in ``names`` (``NODE='...'``, ``{'m1.retaining':
    ...}``) put in, run by bash in ``cwd`` (the source tree by default),
    with this cloud's credentials (``clouds.yaml``) and tools first on the
    path; ``answers`` are typed at its prompts, on a terminal. A command
    ``refused`` must fail, and its output is returned. A ``variant``
    (another value put in where the docs have theirs) is not the docs'
    command, and is not recorded as run.
    """
    key = (doc,) + leading
    if key not in doc_commands.RUN:
        raise procs.CloudError('%s is not in doc_commands.RUN' % (key,))
    line = doc_commands.one(doc, *leading)
    for placeholder, value in names.items():
        if placeholder not in line:
            raise procs.CloudError('%s: no %r in %r' % (doc, placeholder,
                                                        line))
        line = line.replace(placeholder, value)
    env = {'PATH': layout.BIN + os.pathsep + os.environ.get('PATH', ''),
           'OS_CLOUD': CLOUD,
           'OS_CLIENT_CONFIG_FILE': layout.path('etc', 'clouds.yaml')}
    cwd = cwd or layout.REPO
    print('[cloud] %s%s: %s' % (doc, ' (refused)' if refused else '',
                                line), flush=True)
    if answers:
        out = procs.run_tty(['bash', '-c', line], answers, env=env, cwd=cwd)
    elif refused:
        proc = subprocess.run(['bash', '-c', line], capture_output=True,
                              text=True, env=dict(os.environ, **env),
                              cwd=cwd, timeout=600)
        if not proc.returncode:
            raise procs.CloudError('%s: %r exited 0, not refused: %s'
                                   % (doc, line, proc.stdout[-1000:]))
        return proc.stdout + proc.stderr
    else:
        out = procs.run('bash', '-c', line, env=env, cwd=cwd, quiet=True)
    if not variant:
        with open(RAN, 'a') as f:
            f.write(json.dumps(list(key)) + '\n')
    return out


def docs_not_run():
    """The entries of ``doc_commands.RUN`` this cloud has not run."""
    try:
        with open(RAN) as f:
            ran = {tuple(json.loads(line)) for line in f if line.strip()}
    except OSError:
        ran = set()
    return [key for key in doc_commands.RUN if key not in ran]
