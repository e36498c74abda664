#!/usr/bin/env node
// Writes an OpenClaw configuration for agents under turn-manager, from the sandbox's sandbox.json (or any file of
// the same shape: guildId, channelId, manager.userId, agents.<persona>.token). It merges into the openclaw.json that
// `openclaw setup --baseline` wrote, keeping its `meta` block (without it OpenClaw silently restores a backup).
//
//     node configure.mjs --sandbox sandbox/sandbox.json --state /tmp/oc-state --model-url http://127.0.0.1:18900/v1
//
// Each persona becomes an OpenClaw agent with its own Discord account (bound by accountId), its own workspace with
// the persona's instructions, and, with --model-url, a stub model named after it. Tokens go into the config file
// (local fakes for the sandbox; on Discord, prefer the accounts' token env vars).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => (arg.startsWith('--') ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []),
);
if (!args.sandbox || !args.state) {
  console.error('usage: node configure.mjs --sandbox sandbox.json --state DIR [--model-url URL] [--personas DIR]');
  process.exit(2);
}
const sandbox = JSON.parse(readFileSync(args.sandbox, 'utf8'));
const state = resolve(args.state);
const configPath = join(state, 'openclaw.json');
const config = JSON.parse(readFileSync(configPath, 'utf8'));
const personas = Object.keys(sandbox.agents);

/** A persona's instructions for its agent: who it is, and the turn rules turn-manager enforces. */
function instructions(persona) {
  const file = args.personas ? join(args.personas, `${persona}.json`) : null;
  const role = file ? JSON.parse(readFileSync(file, 'utf8')).role : null;
  return [
    `# ${sandbox.agents[persona].name}`,
    '',
    role ? `You are the ${role}` : `You are the ${persona} persona.`,
    '',
    'A moderator bot (turn-manager) gives the floor to one agent at a time in the channel by mentioning it.',
    '- Answer only when the moderator mentions you; stay silent otherwise.',
    '- End the last message of your turn with TURN_COMPLETE.',
    '- Never start a line with an all-caps word and a colon (such as NOTE:): the moderator takes it for a mistyped',
    '  signal and replies; the third time in a row ends your turn.',
    '',
  ].join('\n');
}

const guild = sandbox.guildId;
const channel = sandbox.channelId;
const account = (persona) => ({
  token: sandbox.agents[persona].token,
  joinIntro: false,
  guilds: {
    [guild]: {
      requireMention: true,
      // Only the moderator's mentions count, never other agents' messages.
      users: [sandbox.manager.userId],
      channels: { [channel]: { enabled: true, requireMention: true } },
    },
  },
});

config.agents = { ...config.agents, defaults: { ...config.agents?.defaults }, entries: {} };
for (const persona of personas) {
  const workspace = join(state, `workspace-${persona}`);
  mkdirSync(workspace, { recursive: true });
  writeFileSync(join(workspace, 'AGENTS.md'), instructions(persona));
  config.agents.entries[persona] = {
    name: persona,
    workspace,
    agentDir: join(state, 'agents', persona, 'agent'),
    identity: { name: sandbox.agents[persona].name },
    ...(args['model-url'] ? { model: { primary: `stub/${persona}`, fallbacks: [] } } : {}),
  };
}
config.bindings = personas.map((persona) => ({ agentId: persona, match: { channel: 'discord', accountId: persona } }));
config.channels = {
  ...config.channels,
  discord: {
    enabled: true,
    // The moderator is a bot: accept bot messages that mention the agent, and nothing else from bots.
    allowBots: 'mentions',
    groupPolicy: 'allowlist',
    joinIntro: false,
    defaultAccount: personas[0],
    accounts: Object.fromEntries(personas.map((persona) => [persona, account(persona)])),
  },
};
config.plugins = {
  ...config.plugins,
  entries: { ...config.plugins?.entries, discord: { enabled: true } },
  ...(args['plugin-path'] ? { load: { paths: [resolve(args['plugin-path'])] } } : {}),
};
config.update = { ...config.update, checkOnStart: false };
if (args['model-url']) {
  const model = (id) => ({
    id,
    name: `${id} (stub)`,
    reasoning: false,
    input: ['text'],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: 128000,
    maxTokens: 4096,
  });
  config.models = {
    ...config.models,
    mode: 'merge',
    catalogRefresh: { enabled: false },
    providers: { stub: { baseUrl: args['model-url'], apiKey: 'stub', api: 'openai-completions', models: personas.map(model) } },
  };
}
if (!config.meta) throw new Error(`${configPath} has no meta block: run \`openclaw setup --baseline\` first`);
writeFileSync(configPath, `${JSON.stringify(config, null, 2)}\n`);
console.log(`wrote ${configPath}: agents ${personas.join(', ')} in channel ${channel}`);
