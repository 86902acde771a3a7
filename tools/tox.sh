#!/bin/sh
# Run tox with the given arguments, installing it for this user first if this
# machine lacks it. Works on a fresh Debian with nothing but python3: it uses
# pip when there is one, Debian's python3-pip when run as root, and otherwise
# pip's own wheel from PyPI.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PATH="$HOME/.local/bin:$PATH"

if ! "$PY" -m tox --version >/dev/null 2>&1; then
    echo "tools/tox.sh: installing tox for $(id -un)" >&2
    if ! "$PY" -m pip --version >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            apt-get -qq update && apt-get -qq install -y python3-pip >/dev/null
        fi
    fi
    # PEP 668 (Debian's externally managed python) wants this flag for --user.
    brk=
    "$PY" -m pip install --help 2>/dev/null | grep -q break-system-packages \
        && brk=--break-system-packages
    if "$PY" -m pip --version >/dev/null 2>&1; then
        "$PY" -m pip install --quiet --user $brk 'tox>=4'
    else
        tmp=$(mktemp -d)
        "$PY" - "$tmp" <<'PYEOF'
import json, sys, urllib.request
meta = json.load(urllib.request.urlopen('https://pypi.org/pypi/pip/json'))
url = next(f['url'] for f in meta['urls'] if f['filename'].endswith('.whl'))
urllib.request.urlretrieve(url, sys.argv[1] + '/pip.whl')
PYEOF
        "$PY" "$tmp/pip.whl/pip" install --quiet --user --break-system-packages 'tox>=4'
        rm -rf "$tmp"
    fi
fi
exec "$PY" -m tox "$@"
