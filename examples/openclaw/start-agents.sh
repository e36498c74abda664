#!/usr/bin/env bash
# Starts OpenClaw agents for the personas of a turn-manager sandbox: one OpenClaw Gateway (in the foreground)
# with one agent and one Discord account per persona, each answering only the manager's mentions in the sandbox's
# channel and ending its turns with TURN_COMPLETE.
#
#   examples/openclaw/start-agents.sh sandbox/sandbox.json [STATE_DIR] [MODEL_URL]
#
# STATE_DIR (default sandbox/openclaw) holds OpenClaw's configuration and state. MODEL_URL is an OpenAI-compatible
# /v1 base: without it, stub-model.mjs is started on 127.0.0.1:18900 (OPENCLAW_STUB_PORT) and each agent answers
# from it; to use a real model, give its URL and edit models.providers in STATE_DIR/openclaw.json. Offline: no
# update checks, no Bonjour, no model catalog refresh; the Gateway listens on 127.0.0.1 only.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
sandbox_json="${1:?usage: start-agents.sh SANDBOX_JSON [STATE_DIR] [MODEL_URL]}"
sandbox_json="$(cd "$(dirname "$sandbox_json")" && pwd)/$(basename "$sandbox_json")"
state="$(mkdir -p "${2:-$(dirname "$sandbox_json")/openclaw}" && cd "${2:-$(dirname "$sandbox_json")/openclaw}" && pwd)"
model_url="${3:-}"

node_bin="$("$here/setup.sh")"
export PATH="$node_bin:$PATH"
export OPENCLAW_STATE_DIR="$state" OPENCLAW_CONFIG_PATH="$state/openclaw.json"
export OPENCLAW_NO_AUTO_UPDATE=1 OPENCLAW_DISABLE_BONJOUR=1
openclaw=("$here/node_modules/.bin/openclaw")

if [ -z "$model_url" ]; then
  stub_port="${OPENCLAW_STUB_PORT:-18900}"
  personas="$(node -e 'console.log(Object.keys(require(process.argv[1]).agents).join(","))' "$sandbox_json")"
  node "$here/stub-model.mjs" --port "$stub_port" --models "$personas" &
  stub_pid=$!
  trap 'kill $stub_pid 2>/dev/null' EXIT
  model_url="http://127.0.0.1:$stub_port/v1"
fi

if ! [ -f "$state/openclaw.json" ]; then
  "${openclaw[@]}" setup --baseline >/dev/null
fi
if ! [ -f "$state/.discord-plugin-installed" ]; then
  echo "installing the Discord plugin (@openclaw/discord 2026.9.6) into $state" >&2
  "${openclaw[@]}" plugins install @openclaw/discord@2026.9.6 --pin --accept-capabilities --force >&2
  touch "$state/.discord-plugin-installed"
fi
node "$here/configure.mjs" --sandbox "$sandbox_json" --state "$state" --model-url "$model_url" --personas "$here/personas"

api_url="$(node -e 'console.log(require(process.argv[1]).apiUrl)' "$sandbox_json")"
echo "OpenClaw Gateway against $api_url (first replies come about a minute after start)" >&2
DISCORD_API_URL="$api_url" "${openclaw[@]}" gateway run --port "${OPENCLAW_GATEWAY_PORT:-18789}" --bind loopback
