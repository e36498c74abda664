#!/usr/bin/env python3
"""A turn-manager agent written with discord.py.

When the manager mentions it, it shows typing, runs the command given on its command line with the conversation so
far on standard input, posts what the command printed, and ends its turn with TURN_COMPLETE. Any model CLI plugs in:

    DISCORD_TOKEN=... python agent.py -- my-model-cli --system "You are the PM"

Environment:
    DISCORD_TOKEN      the agent's bot token (required; never logged, not passed to the command)
    DISCORD_API_BASE   a Discord-compatible server, e.g. http://127.0.0.1:3710 (the sandbox); unset: Discord
    AGENT_MANAGER_ID   answer only mentions by this user id (the manager's); unset: any mention
    AGENT_HISTORY      how many recent messages the command reads (default 50)
    AGENT_TIMEOUT      seconds the command may take (default 300); past it, nothing is posted
"""

import asyncio
import json
import logging
import os
import sys
import urllib.request

import discord
import yarl

SIGNAL = "TURN_COMPLETE"
MESSAGE_LIMIT = 2000  # Discord's longest message, in characters

log = logging.getLogger("agent")


def point_at(base: str) -> None:
    """Sends every REST call and the gateway connection to a Discord-compatible server instead of Discord."""
    base = base.rstrip("/")
    with urllib.request.urlopen(f"{base}/api/v10/gateway", timeout=10) as answer:
        gateway = json.load(answer)["url"]
    # The two lines that point discord.py at another server:
    discord.http.Route.BASE = f"{base}/api/v10"
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)


def with_signal(reply: str) -> list[str]:
    """The messages that carry `reply`, each within Discord's limit, the last one ending with the signal."""
    body = reply.strip()
    if body.endswith(SIGNAL):
        body = body[: -len(SIGNAL)].rstrip()
    suffix = f"\n\n{SIGNAL}" if body else SIGNAL
    room = MESSAGE_LIMIT - len(suffix)
    parts = [body[i : i + MESSAGE_LIMIT] for i in range(0, len(body), MESSAGE_LIMIT)] or [""]
    if len(parts[-1]) > room:
        parts[-1:] = [parts[-1][:room], parts[-1][room:]]
    parts[-1] += suffix
    return parts


async def run_command(command: list[str], conversation: str, timeout: float) -> str | None:
    """What `command` prints for `conversation` on its standard input; None if it fails or takes too long."""
    env = {k: v for k, v in os.environ.items() if k != "DISCORD_TOKEN"}
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(conversation.encode()), timeout)
    except asyncio.TimeoutError:
        process.kill()
        log.warning("the command took longer than %ss; nothing is posted", timeout)
        return None
    if process.returncode != 0:
        log.warning("the command failed with exit code %s; nothing is posted", process.returncode)
        return None
    return out.decode(errors="replace")


class Agent(discord.Client):
    def __init__(self, command: list[str], manager_id: int | None, history: int, timeout: float):
        intents = discord.Intents.default()
        intents.message_content = True
        super().__init__(intents=intents, allowed_mentions=discord.AllowedMentions.none())
        self.command, self.manager_id, self.history, self.timeout = command, manager_id, history, timeout
        self.turns = asyncio.Lock()  # one answer at a time, in the order the calls came

    async def on_ready(self) -> None:
        log.info("ready as %s (%s)", self.user, self.user.id)

    async def on_message(self, message: discord.Message) -> None:
        me = self.user
        if message.author.id == me.id or not any(user.id == me.id for user in message.mentions):
            return
        if self.manager_id is not None and message.author.id != self.manager_id:
            return
        async with self.turns:
            async with message.channel.typing():
                recent = [m async for m in message.channel.history(limit=self.history)]
                conversation = "".join(f"{m.author.display_name}: {m.content}\n" for m in reversed(recent))
                reply = await run_command(self.command, conversation, self.timeout)
            if reply is not None:
                for part in with_signal(reply):
                    await message.channel.send(part)


def main() -> int:
    command = sys.argv[1:]
    if command and command[0] == "--":
        command = command[1:]
    token = os.environ.get("DISCORD_TOKEN", "").strip()
    if not command or not token:
        print("usage: DISCORD_TOKEN=... [DISCORD_API_BASE=...] agent.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    base = os.environ.get("DISCORD_API_BASE")
    if base:
        point_at(base)
    manager = os.environ.get("AGENT_MANAGER_ID")
    agent = Agent(
        command,
        int(manager) if manager else None,
        int(os.environ.get("AGENT_HISTORY", "50")),
        float(os.environ.get("AGENT_TIMEOUT", "300")),
    )
    agent.run(token.removeprefix("Bot "), root_logger=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
