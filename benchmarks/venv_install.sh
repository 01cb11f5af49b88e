#!/usr/bin/env bash
# `make venv` with uv (the default) against pip (`INSTALLER=pip`) in one run: each in a fresh
# clone of HEAD with its own empty cache, as CI and a newcomer's first `make demo` start. Times
# both, checks that they installed the same packages at the same versions (requirements-lock.txt),
# and writes benchmarks/results/venv-install.md with the CPU named. About 3 minutes and 13 GB of
# disk while it runs; the clones are removed at the end.
#
#   bash benchmarks/venv_install.sh [ROUNDS]    # default 1 round: uv then pip
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
commit=$(git rev-parse --short HEAD)
rows=()
for round in $(seq "$rounds"); do
    for installer in uv pip; do
        clone="$work/$installer-$round"
        git clone -q . "$clone"
        start=$(date +%s%N)
        (cd "$clone" && env -u XDG_CACHE_HOME make -s venv INSTALLER="$installer" >/dev/null)
        seconds=$(( ($(date +%s%N) - start + 500000000) / 1000000000 ))
        # names as PEP 503 spells them: pip and uv print some (jupyter_core) differently
        "$clone/.venv/bin/pip" freeze --exclude-editable 2>/dev/null \
            | grep -v -i -E '^(pip|setuptools|uv|wheel)==' | tr 'A-Z_.' 'a-z--' | sort \
            > "$work/$installer-$round.freeze"
        # compiled bytecode: with PYTHONDONTWRITEBYTECODE set, as on CI, none is ever written later
        pyc=$(find "$clone/.venv/lib" -name '*.pyc' | wc -l)
        rows+=("| $round | $installer | $seconds | $(wc -l <"$work/$installer-$round.freeze") | $pyc |")
        [ "$installer" = pip ] && rm -rf "$work/uv-$round" "$clone"
    done
    if ! cmp -s "$work/uv-$round.freeze" "$work/pip-$round.freeze"; then
        diff "$work/uv-$round.freeze" "$work/pip-$round.freeze" >&2 || true
        echo "venv_install.sh: uv and pip installed different packages (above)" >&2
        exit 1
    fi
done
page=benchmarks/results/venv-install.md
{
    echo "# \`make venv\` on a fresh clone: uv against pip"
    echo
    echo "\`bash benchmarks/venv_install.sh $rounds\` at $commit, $(date -u +%Y-%m-%d), $cpu" \
         "($(nproc) cores). Each row is a fresh clone with an empty cache (XDG_CACHE_HOME unset:" \
         "the Makefile's .cache inside the clone), so every wheel is downloaded, as in CI."
    echo
    echo "| round | installer | seconds | packages | .pyc files |"
    echo "|---:|---|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Both installed the same packages at the same versions in every round (pip freeze," \
         "names normalised): requirements-lock.txt pins them for both."
} >"$page"
cat "$page"
