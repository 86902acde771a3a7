#!/bin/sh
# Run tox with the given arguments. When this machine has no tox, install it
# into a private directory first (no root, no --user, untouched by Debian's
# externally managed python): with pip when python3 has it, else with pip's
# own wheel fetched from PyPI. Works on a fresh Debian with nothing but python3.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! "$PY" -m tox --version >/dev/null 2>&1; then
    dir=${VSMTIO_TOX_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vsmtio/tox}
    if ! PYTHONPATH=$dir "$PY" -m tox --version >/dev/null 2>&1; then
        echo "tools/tox.sh: installing tox into $dir" >&2
        mkdir -p "$dir"
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        if "$PY" -m pip --version >/dev/null 2>&1; then
            pip="$PY -m pip"
        else
            "$PY" - "$tmp" <<'PYEOF'
import json, sys, urllib.parse, urllib.request
index = 'https://pypi.org/pypi/pip/json'
meta = json.load(urllib.request.urlopen(index))
url = next(f['url'] for f in meta['urls'] if f['filename'].endswith('.whl'))
# Registry mirrors may answer with URLs relative to the JSON document.
urllib.request.urlretrieve(urllib.parse.urljoin(index, url),
                           sys.argv[1] + '/pip.whl')
PYEOF
            pip="$PY $tmp/pip.whl/pip"
        fi
        $pip install --quiet --disable-pip-version-check --upgrade \
            --target "$dir" 'tox>=4'
    fi
    export PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}"
fi
exec "$PY" -m tox "$@"
