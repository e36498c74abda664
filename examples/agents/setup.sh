#!/usr/bin/env bash
# Installs the reference agents' pinned dependencies: a Python virtual environment (python/.venv) with
# requirements.txt, and node/node_modules with `npm ci`. Fails, saying what is missing, without python3 or node.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v python3 >/dev/null 2>&1; then
  echo "python3 is not installed: the discord.py agent needs it (e.g. apt-get install python3 python3-venv)" >&2
  exit 1
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node and npm are not installed: the discord.js agent needs them (e.g. apt-get install nodejs npm)" >&2
  exit 1
fi

[ -x python/.venv/bin/python ] || python3 -m venv python/.venv
python/.venv/bin/pip install --quiet --disable-pip-version-check -r python/requirements.txt
(cd node && npm ci --no-audit --no-fund --loglevel=error)
echo "agents ready: python/.venv (discord.py), node/node_modules (discord.js)"
