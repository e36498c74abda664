#!/usr/bin/env node
// A turn-manager agent written with discord.js.
//
// When the manager mentions it, it shows typing, runs the command given on its command line with the conversation
// so far on standard input, posts what the command printed, and ends its turn with TURN_COMPLETE. A call overtaken
// by a newer message of its caller that mentions anyone (the floor moved on, or the agent was called again) is not
// answered: that answer would come after its turn (shown as a late reply that moves nothing at best, removed as out
// of turn if the agent spoke since), or answer an old call. Any model CLI plugs in:
//
//     DISCORD_TOKEN=... node agent.js -- my-model-cli --system "You are the developer"
//
// Environment:
//     DISCORD_TOKEN      the agent's bot token (required; never logged, not passed to the command)
//     DISCORD_API_BASE   a Discord-compatible server, e.g. http://127.0.0.1:3710 (the sandbox); unset: Discord
//     AGENT_MANAGER_ID   answer only mentions by this user id (the manager's); unset: any mention
//     AGENT_HISTORY      how many recent messages the command reads (default 50, at most 100)
//     AGENT_TIMEOUT      seconds the command may take (default 300); past it, nothing is posted
//     AGENT_SIGNAL       what ends the last message (default TURN_COMPLETE); empty: the command writes its own
//                        signal (the chorus, xml-signals and review-workflow presets), and its output is posted as is
//     AGENT_PASS         an answer that is only this word is posted as is, without AGENT_SIGNAL (the round-robin
//                        preset's PASS); unset: none
'use strict';

const { spawn } = require('node:child_process');
const { Client, Events, GatewayIntentBits } = require('discord.js');

const MESSAGE_LIMIT = 2000; // Discord's longest message, in characters (code points)
const IDS_KEPT = 1000; // message ids remembered, so that a message delivered twice (around a reconnect) is answered once
const TYPING_REFRESH_MS = 8000; // a typing indicator lasts about 10 s

/**
 * The messages that carry `reply`, each within Discord's limit, the last one ending with `signalWord` (when set;
 * nothing for an empty reply without it). A part ends at a line break (else a space) in the second half of the limit
 * where it can, so that no line, a signal written in the text among them, is cut in two, and no part is short or
 * blank. No part but the last ends with the word: a cut that would leave the word (in the reply's text) at a part's
 * end is made before the word. Cut by code points, so that no emoji is split. An answer that is only `passWord` (when
 * set: the round-robin preset's PASS) is posted as it is: with the word after it, it would not pass.
 */
function withSignal(reply, signalWord, passWord = '') {
  if (passWord && reply.trim() === passWord) return [passWord];
  let body = Array.from(reply.trim());
  const word = Array.from(signalWord);
  const endsWithWord = (chars) => word.length > 0 && chars.length >= word.length && chars.slice(-word.length).join('') === signalWord;
  if (endsWithWord(body)) body = Array.from(body.slice(0, -word.length).join('').trimEnd());
  const suffix = signalWord ? Array.from(body.length ? `\n\n${signalWord}` : signalWord) : [];
  const parts = [];
  while (body.length && body.length + suffix.length > MESSAGE_LIMIT) {
    const window = body.slice(0, MESSAGE_LIMIT);
    const half = MESSAGE_LIMIT / 2;
    const at = [window.lastIndexOf('\n'), window.lastIndexOf(' ')].find((i) => i >= half);
    let cut = at === undefined ? window.length : at + 1;
    const head = Array.from(body.slice(0, cut).join('').trimEnd());
    if (endsWithWord(head) && head.length > word.length) cut = head.length - word.length;
    parts.push(body.slice(0, cut).join(''));
    body = body.slice(cut);
  }
  const last = body.length ? body.concat(suffix).join('') : signalWord;
  if (last) parts.push(last);
  return parts;
}

/**
 * Which calls to answer. A call is a message that mentions this agent; a caller's newest message that mentions
 * anyone is its current one, and only a current call is answered (checked before the command runs and before the
 * answer is posted). Each message id counts once.
 */
class Calls {
  constructor() {
    this.newest = new Map(); // `${channel}/${caller}` -> newest message id mentioning anyone
    this.seen = new Set();
  }

  /** Notes a message; whether it is a new call to answer. */
  heard(channel, caller, messageId, mentionsAnyone, callsMe) {
    if (this.seen.has(messageId)) return false;
    this.seen.add(messageId);
    if (this.seen.size > IDS_KEPT) this.seen.delete(this.seen.values().next().value);
    if (mentionsAnyone) {
      const key = `${channel}/${caller}`;
      const id = BigInt(messageId);
      if (!this.newest.has(key) || this.newest.get(key) < id) this.newest.set(key, id);
    }
    return callsMe;
  }

  /** Whether this call is still its caller's newest. */
  current(channel, caller, messageId) {
    return this.newest.get(`${channel}/${caller}`) === BigInt(messageId);
  }
}

/**
 * What `command` prints for `conversation` on its standard input; null if it fails or takes too long (then its
 * whole process group is killed, so that nothing it started keeps running).
 */
function runCommand(command, conversation, timeoutSeconds) {
  return new Promise((resolve) => {
    const env = { ...process.env };
    delete env.DISCORD_TOKEN;
    // Its own process group, so that a time-out kills what it started too; the answer does not wait for the pipe's
    // end, which a background child holding it would put off for ever.
    const child = spawn(command[0], command.slice(1), { stdio: ['pipe', 'pipe', 'inherit'], env, detached: true });
    const out = [];
    let done = false;
    const finish = (value) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(value);
    };
    const timer = setTimeout(() => {
      console.warn(`the command took longer than ${timeoutSeconds}s; nothing is posted`);
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      finish(null);
    }, timeoutSeconds * 1000);
    child.stdout.on('data', (chunk) => out.push(chunk));
    child.on('error', (error) => {
      console.warn(`the command could not start: ${error.message}`);
      finish(null);
    });
    child.on('close', (code) => {
      if (code !== 0) console.warn(`the command failed with exit code ${code}; nothing is posted`);
      finish(code === 0 ? Buffer.concat(out).toString('utf8') : null);
    });
    child.stdin.on('error', () => {}); // a command that does not read its input is fine
    child.stdin.end(conversation);
  });
}

/** The server's address, given as it or as its API URL (`sandbox.json`'s `apiUrl`, ending in `/api/v10`), as the
 * manager's `--api-base` takes it. */
function serverBase(base) {
  return base.trim().replace(/\/+$/, '').replace(/\/api(\/v10)?$/, '');
}

function main() {
  let command = process.argv.slice(2);
  if (command[0] === '--') command = command.slice(1);
  const token = (process.env.DISCORD_TOKEN || '').trim().replace(/^Bot /, '');
  if (command.length === 0 || !token) {
    console.error('usage: DISCORD_TOKEN=... [DISCORD_API_BASE=...] node agent.js -- COMMAND [ARGS...]');
    return 2;
  }
  const base = serverBase(process.env.DISCORD_API_BASE || '');
  const managerId = process.env.AGENT_MANAGER_ID || null;
  const history = Math.min(Number(process.env.AGENT_HISTORY || 50), 100);
  const timeout = Number(process.env.AGENT_TIMEOUT || 300);
  const signalWord = (process.env.AGENT_SIGNAL ?? 'TURN_COMPLETE').trim();
  const passWord = (process.env.AGENT_PASS || '').trim();
  const calls = new Calls();

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
    if (message.author.id === me) return;
    if (managerId && message.author.id !== managerId) return;
    const key = [message.channelId, message.author.id, message.id];
    if (!calls.heard(...key, message.mentions.users.size > 0, message.mentions.users.has(me))) return;
    turns = turns.then(() => answer(message, key)).catch((error) => console.warn(`could not answer: ${error.message}`));
  });

  async function answer(message, key) {
    if (!calls.current(...key)) {
      console.log(`call ${message.id} overtaken by a newer one of its caller; not answered`);
      return;
    }
    const channel = message.channel;
    await channel.sendTyping();
    const typing = setInterval(() => channel.sendTyping().catch(() => {}), TYPING_REFRESH_MS);
    let reply;
    try {
      const recent = await channel.messages.fetch({ limit: history });
      const conversation = [...recent.values()]
        .reverse()
        .map((m) => `${m.member?.displayName ?? m.author.username}: ${m.cleanContent}\n`)
        .join('');
      reply = await runCommand(command, conversation, timeout);
    } finally {
      clearInterval(typing);
    }
    if (reply === null) return;
    if (!calls.current(...key)) {
      console.log(`the floor moved on while call ${message.id} was answered; nothing is posted`);
      return;
    }
    for (const part of withSignal(reply, signalWord, passWord)) await channel.send(part);
  }

  client.login(token);
  return 0;
}

if (require.main === module) {
  const code = main();
  if (code !== 0) process.exit(code);
}

module.exports = { withSignal, Calls, runCommand, serverBase, MESSAGE_LIMIT };
