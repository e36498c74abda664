// Unit tests of the discord.js agent's choices (run by tests/real_agents.rs): how a reply is split and signed, and
// which calls are answered. `node --test` in this folder, after `npm ci`.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test } = require('node:test');
const { withSignal, Calls, runCommand, serverBase, MESSAGE_LIMIT } = require('./agent.js');

const SIGNAL = 'TURN_COMPLETE';
const CHANNEL = '10';
const MANAGER = '20';
const length = (text) => Array.from(text).length;

test('the server is given as its address or its API URL', () => {
  for (const given of ['http://127.0.0.1:3710', 'http://127.0.0.1:3710/', 'http://127.0.0.1:3710/api/v10',
    'http://127.0.0.1:3710/api/v10/', 'http://127.0.0.1:3710/api']) {
    assert.equal(serverBase(given), 'http://127.0.0.1:3710', given);
  }
});

test('a short reply ends with the signal once', () => {
  assert.deepEqual(withSignal('Done.\n', SIGNAL), ['Done.\n\nTURN_COMPLETE']);
  assert.deepEqual(withSignal('Done. TURN_COMPLETE', SIGNAL), ['Done.\n\nTURN_COMPLETE']);
  assert.deepEqual(withSignal('  ', SIGNAL), ['TURN_COMPLETE']);
});

test('a long reply is split within the limit, in code points, and only the last part ends with the signal', () => {
  const text = '🙂'.repeat(4500); // two UTF-16 units each: a cut by units would split them
  const parts = withSignal(text, SIGNAL);
  assert.ok(parts.every((p) => length(p) <= MESSAGE_LIMIT), parts.map(length));
  assert.equal(parts.join('').replace(/\n\nTURN_COMPLETE$/, ''), text);
  assert.ok(!parts.join('').includes('\uFFFD'));
  assert.ok(parts.at(-1).endsWith(SIGNAL));
});

test('the signal word in the text never ends a part before the last', () => {
  const text = 'y'.repeat(MESSAGE_LIMIT - SIGNAL.length) + SIGNAL + ' and more words after it';
  const parts = withSignal(text, SIGNAL);
  assert.ok(parts.slice(0, -1).every((p) => !p.trimEnd().endsWith(SIGNAL)), JSON.stringify(parts));
  assert.equal(parts.join('').replace(/\n\nTURN_COMPLETE$/, ''), text);
});

test('a reply that fits only without the signal is followed by the signal alone', () => {
  assert.deepEqual(withSignal('z'.repeat(MESSAGE_LIMIT), SIGNAL), ['z'.repeat(MESSAGE_LIMIT), SIGNAL]);
});

test('a long reply is cut at a line break, so that no signal line is cut in two', () => {
  // Found by a review: cut at 2,000 characters, a signal in the text (a preset's, the word left empty) was split in
  // two, and neither part carried it.
  const text = 'y'.repeat(1990) + '\n<signal type="context_sufficient">ok</signal>';
  assert.deepEqual(withSignal(text, ''), ['y'.repeat(1990) + '\n', '<signal type="context_sufficient">ok</signal>']);
  const words = 'words '.repeat(500).trim(); // 2,000 is no multiple of 6: a cut at the limit falls inside a word
  const parts = withSignal(words, SIGNAL);
  assert.ok(parts.slice(0, -1).every((p) => p.endsWith(' ')), JSON.stringify(parts.map((p) => p.slice(-5))));
  assert.equal(parts.join('').replace(/\n\nTURN_COMPLETE$/, ''), words);
  // A break early in the window is not taken: no short part, no blank one (Discord refuses those).
  const early = ['x'.repeat(1999) + ' \n\n' + 'y'.repeat(2500), 'PASS\n' + 'z'.repeat(2500), 'Sure!\n' + 'w'.repeat(2500)];
  for (const text of early) {
    const cut = withSignal(text, SIGNAL, 'PASS');
    assert.ok(cut.slice(0, -1).every((p) => p.trim().length >= MESSAGE_LIMIT / 2), JSON.stringify(cut.map(length)));
    assert.equal(cut.join('').replace(/\n\nTURN_COMPLETE$/, ''), text);
  }
});

test('an answer that only passes is posted as it is when a pass word is set', () => {
  // Found by a review: "PASS" went out as "PASS\n\nTURN_COMPLETE", which completes the turn instead.
  assert.deepEqual(withSignal(' PASS\n', SIGNAL, 'PASS'), ['PASS']);
  assert.deepEqual(withSignal('PASS on this one', SIGNAL, 'PASS'), ['PASS on this one\n\nTURN_COMPLETE']);
  assert.deepEqual(withSignal('PASS', SIGNAL), ['PASS\n\nTURN_COMPLETE'], 'without it, the turn completes');
});

test('without a signal word the output is posted as written', () => {
  const chorus = 'Here is my part.\n<chorus>COMPLETE</chorus>';
  assert.deepEqual(withSignal(chorus, ''), [chorus]);
  assert.deepEqual(withSignal('', ''), [], 'nothing to post');
});

test('a call is answered while it is its caller\'s newest; a message without a mention moves nothing', () => {
  const calls = new Calls();
  assert.equal(calls.heard(CHANNEL, MANAGER, '100', true, true), true);
  assert.equal(calls.heard(CHANNEL, MANAGER, '101', false, false), false);
  assert.equal(calls.current(CHANNEL, MANAGER, '100'), true);
});

test('the floor given to another makes a pending answer stale; other channels do not interfere', () => {
  const calls = new Calls();
  calls.heard(CHANNEL, MANAGER, '100', true, true);
  calls.heard('11', MANAGER, '103', true, false);
  assert.equal(calls.current(CHANNEL, MANAGER, '100'), true, "another channel's turn start");
  assert.equal(calls.heard(CHANNEL, MANAGER, '105', true, false), false, "another persona's call");
  assert.equal(calls.current(CHANNEL, MANAGER, '100'), false);
});

test('of two calls only the newer is answered, compared as snowflakes, not strings', () => {
  const calls = new Calls();
  calls.heard(CHANNEL, MANAGER, '999', true, true);
  calls.heard(CHANNEL, MANAGER, '1000', true, true);
  assert.equal(calls.current(CHANNEL, MANAGER, '999'), false);
  assert.equal(calls.current(CHANNEL, MANAGER, '1000'), true);
});

test('a message delivered twice is one call', () => {
  const calls = new Calls();
  assert.equal(calls.heard(CHANNEL, MANAGER, '100', true, true), true);
  assert.equal(calls.heard(CHANNEL, MANAGER, '100', true, true), false, 'delivered again after a reconnect');
});

/** Whether the process runs (a zombie waiting to be reaped does not). */
function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 1).trim().split(' ')[0] !== 'Z';
  } catch {
    return false;
  }
}

test('a command past its time returns nothing, and what it started is killed with it', async () => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-test-'));
  const pidFile = path.join(folder, 'child');
  // A background child holding standard output open: waiting for the pipe's end would wait for ever.
  const out = await runCommand(['sh', '-c', `sleep 30 & echo $! > ${pidFile}; wait`], '', 0.5);
  assert.equal(out, null);
  const child = Number(fs.readFileSync(pidFile, 'utf8'));
  for (let i = 0; i < 200 && alive(child); i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(alive(child), false, "the command's own child was killed too");
  fs.rmSync(folder, { recursive: true });
});

test('the output of a command that succeeds is returned', async () => {
  assert.equal((await runCommand(['sh', '-c', 'wc -l'], 'a\nb\n', 10)).trim(), '2');
});
