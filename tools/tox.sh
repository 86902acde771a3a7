#!/bin/sh
# Run tox with the given arguments. When this machine has no tox, install it
# into a private directory first (no root, no --user, untouched by Debian's
# externally managed python) with pip, which reads this machine's own index
# configuration (pip.conf, PIP_INDEX_URL): the project names no registry.
# When python3 has no pip, root installs Debian's (apt-get, from this
# machine's apt sources); anyone else is told what to install.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! "$PY" -m tox --version >/dev/null 2>&1; then
    dir=${VSMTIO_TOX_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vsmtio/tox}
    if ! PYTHONPATH=$dir "$PY" -m tox --version >/dev/null 2>&1; then
        if ! "$PY" -m pip --version >/dev/null 2>&1; then
            if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
                echo "tools/tox.sh: installing python3-pip with apt-get" >&2
                apt-get -q update >/dev/null
                DEBIAN_FRONTEND=noninteractive apt-get -q -y install \
                    --no-install-recommends python3-pip python3-venv >/dev/null
            fi
            "$PY" -m pip --version >/dev/null 2>&1 || {
                echo "tools/tox.sh: $PY has no pip and no tox: install" \
                     "python3-pip (Debian) or tox, then run this again" >&2
                exit 2
            }
        fi
        echo "tools/tox.sh: installing tox into $dir" >&2
        mkdir -p "$dir"
        "$PY" -m pip install --quiet --disable-pip-version-check --upgrade \
            --target "$dir" 'tox>=4'
    fi
    export PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}"
fi
exec "$PY" -m tox "$@"
