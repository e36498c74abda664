#!/usr/bin/env node
// A turn-manager agent written with discord.js.
//
// When the manager mentions it, it shows typing, runs the command given on its command line with the conversation
// so far on standard input, posts what the command printed, and ends its turn with TURN_COMPLETE. Any model CLI
// plugs in:
//
//     DISCORD_TOKEN=... node agent.js -- my-model-cli --system "You are the developer"
//
// Environment:
//     DISCORD_TOKEN      the agent's bot token (required; never logged, not passed to the command)
//     DISCORD_API_BASE   a Discord-compatible server, e.g. http://127.0.0.1:3710 (the sandbox); unset: Discord
//     AGENT_MANAGER_ID   answer only mentions by this user id (the manager's); unset: any mention
//     AGENT_HISTORY      how many recent messages the command reads (default 50, at most 100)
//     AGENT_TIMEOUT      seconds the command may take (default 300); past it, nothing is posted
'use strict';

const { spawn } = require('node:child_process');
const { Client, Events, GatewayIntentBits } = require('discord.js');

const SIGNAL = 'TURN_COMPLETE';
const MESSAGE_LIMIT = 2000; // Discord's longest message, in characters
const TYPING_REFRESH_MS = 8000; // a typing indicator lasts about 10 s

/** The messages that carry `reply`, each within Discord's limit, the last one ending with the signal. */
function withSignal(reply) {
  let body = reply.trim();
  if (body.endsWith(SIGNAL)) body = body.slice(0, -SIGNAL.length).trimEnd();
  const suffix = body ? `\n\n${SIGNAL}` : SIGNAL;
  const parts = [];
  for (let i = 0; i < body.length; i += MESSAGE_LIMIT) parts.push(body.slice(i, i + MESSAGE_LIMIT));
  if (parts.length === 0) parts.push('');
  const room = MESSAGE_LIMIT - suffix.length;
  const last = parts.pop();
  if (last.length > room) parts.push(last.slice(0, room), last.slice(room));
  else parts.push(last);
  parts[parts.length - 1] += suffix;
  return parts;
}

/** What `command` prints for `conversation` on its standard input; null if it fails or takes too long. */
function runCommand(command, conversation, timeoutSeconds) {
  return new Promise((resolve) => {
    const env = { ...process.env };
    delete env.DISCORD_TOKEN;
    const child = spawn(command[0], command.slice(1), { stdio: ['pipe', 'pipe', 'inherit'], env });
    const out = [];
    const timer = setTimeout(() => {
      console.warn(`the command took longer than ${timeoutSeconds}s; nothing is posted`);
      child.kill('SIGKILL');
    }, timeoutSeconds * 1000);
    child.stdout.on('data', (chunk) => out.push(chunk));
    child.on('error', (error) => console.warn(`the command could not start: ${error.message}`));
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) console.warn(`the command failed with exit code ${code}; nothing is posted`);
      resolve(code === 0 ? Buffer.concat(out).toString('utf8') : null);
    });
    child.stdin.on('error', () => {}); // a command that does not read its input is fine
    child.stdin.end(conversation);
  });
}

function main() {
  let command = process.argv.slice(2);
  if (command[0] === '--') command = command.slice(1);
  const token = (process.env.DISCORD_TOKEN || '').trim().replace(/^Bot /, '');
  if (command.length === 0 || !token) {
    console.error('usage: DISCORD_TOKEN=... [DISCORD_API_BASE=...] node agent.js -- COMMAND [ARGS...]');
    return 2;
  }
  const base = (process.env.DISCORD_API_BASE || '').replace(/\/$/, '');
  const managerId = process.env.AGENT_MANAGER_ID || null;
  const history = Math.min(Number(process.env.AGENT_HISTORY || 50), 100);
  const timeout = Number(process.env.AGENT_TIMEOUT || 300);

  const client = new Client({
    intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent],
    allowedMentions: { parse: [] },
    // The line that points discord.js at another server (the gateway address then comes from its /gateway/bot):
    ...(base ? { rest: { api: `${base}/api` } } : {}),
  });

  let turns = Promise.resolve(); // one answer at a time, in the order the calls came
  client.once(Events.ClientReady, (ready) => console.log(`ready as ${ready.user.tag} (${ready.user.id})`));
  client.on(Events.MessageCreate, (message) => {
    const me = client.user.id;
    if (message.author.id === me || !message.mentions.users.has(me)) return;
    if (managerId && message.author.id !== managerId) return;
    turns = turns.then(() => answer(message)).catch((error) => console.warn(`could not answer: ${error.message}`));
  });

  async function answer(message) {
    const channel = message.channel;
    await channel.sendTyping();
    const typing = setInterval(() => channel.sendTyping().catch(() => {}), TYPING_REFRESH_MS);
    let reply;
    try {
      const recent = await channel.messages.fetch({ limit: history });
      const conversation = [...recent.values()]
        .reverse()
        .map((m) => `${m.member?.displayName ?? m.author.username}: ${m.content}\n`)
        .join('');
      reply = await runCommand(command, conversation, timeout);
    } finally {
      clearInterval(typing);
    }
    if (reply === null) return;
    for (const part of withSignal(reply)) await channel.send(part);
  }

  client.login(token);
  return 0;
}

if (require.main === module) {
  const code = main();
  if (code !== 0) process.exit(code);
}

module.exports = { withSignal };
