#!/usr/bin/env node
// A stand-in model server for rehearsing OpenClaw agents offline: an OpenAI-compatible API on 127.0.0.1 with
// GET /v1/models and POST /v1/chat/completions (streamed or not). Each model id is an agent's name; its answer says
// who speaks, which call it answers (the persona's "has the floor" announcements counted in the request), and ends
// with TURN_COMPLETE, as an agent under turn-manager must.
//
//     node stub-model.mjs --port 18900 --models pm,dev
//
// Every request is logged on one line to standard output (method, path, model), never its content.
import { createServer } from 'node:http';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => (arg.startsWith('--') ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []),
);
const port = Number(args.port ?? 18900);
const models = String(args.models ?? 'pm,dev').split(',').filter(Boolean);

/** The text of every message of a chat request, joined. */
function transcript(body) {
  const text = (content) => (Array.isArray(content) ? content.map((part) => part.text ?? '').join(' ') : String(content ?? ''));
  return (body.messages ?? []).map((m) => text(m.content)).join('\n');
}

/** What the model `model` answers to a request. */
function answer(model, body) {
  const calls = transcript(body).split(`(${model}) has the floor`).length - 1;
  return `${model} speaks, answering call ${Math.max(calls, 1)}. TURN_COMPLETE`;
}

function send(res, status, value) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

const server = createServer((req, res) => {
  let raw = '';
  req.on('data', (chunk) => (raw += chunk));
  req.on('end', () => {
    const path = req.url.split('?')[0].replace(/\/+$/, '');
    let body = {};
    try {
      body = raw ? JSON.parse(raw) : {};
    } catch {
      return send(res, 400, { error: { message: 'invalid JSON' } });
    }
    console.log(`${req.method} ${path}${body.model ? ` model=${body.model}` : ''}${body.stream ? ' stream' : ''}`);
    if (req.method === 'GET' && path.endsWith('/models')) {
      return send(res, 200, { object: 'list', data: models.map((id) => ({ id, object: 'model', owned_by: 'stub' })) });
    }
    if (req.method !== 'POST' || !path.endsWith('/chat/completions')) {
      return send(res, 404, { error: { message: `no route ${req.method} ${path}` } });
    }
    const model = String(body.model ?? models[0]).split('/').pop();
    const text = answer(model, body);
    const id = `chatcmpl-${Date.now()}`;
    const created = Math.floor(Date.now() / 1000);
    const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
    if (!body.stream) {
      const message = { role: 'assistant', content: text };
      return send(res, 200, { id, object: 'chat.completion', created, model, choices: [{ index: 0, message, finish_reason: 'stop' }], usage });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const chunk = (delta, finish) => ({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, finish_reason: finish }] });
    res.write(`data: ${JSON.stringify(chunk({ role: 'assistant', content: text }, null))}\n\n`);
    res.write(`data: ${JSON.stringify({ ...chunk({}, 'stop'), usage })}\n\n`);
    res.end('data: [DONE]\n\n');
  });
});

server.listen(port, '127.0.0.1', () => console.log(`stub model server on http://127.0.0.1:${server.address().port}/v1 (${models.join(', ')})`));
