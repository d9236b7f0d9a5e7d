// Drives a running Unicorn cluster's HTTP API with the official `openai`
// package (run by tests/test_http.c): node tests/openai_client.mjs BASEURL
// Env: API_KEY (the cluster's key), EXPECT_GREEDY (the `unicorn run --chat
// --json` text of PROMPT with N_TOKENS tokens), PROMPT, N_TOKENS.
// Exits 0 when every check passed, 1 with the failed check on stderr.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const base = process.argv[2];
const key = process.env.API_KEY || 'none';
const prompt = process.env.PROMPT || 'Once upon a time';
const nTok = Number(process.env.N_TOKENS || 12);
const expectGreedy = process.env.EXPECT_GREEDY;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });
const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
const user = [{ role: 'user', content: prompt }];

async function streamText(params) {
  const s = await client.chat.completions.create({ ...params, stream: true });
  let text = '', finish = null, n = 0, id = null;
  for await (const c of s) {
    assert.equal(c.object, 'chat.completion.chunk');
    id ??= c.id;
    assert.equal(c.id, id, 'one id per stream');
    if (!c.choices.length) continue;
    text += c.choices[0].delta?.content ?? '';
    if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
    n++;
  }
  assert.ok(id.startsWith('chatcmpl-'));
  return { text, finish, n };
}

async function completionStream(params) {
  const s = await client.completions.create({ ...params, stream: true });
  let text = '', finish = null;
  for await (const c of s) {
    assert.equal(c.object, 'text_completion');
    text += c.choices[0]?.text ?? '';
    if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
  }
  return { text, finish };
}

async function expectStatus(promise, status, what) {
  try {
    await promise;
  } catch (e) {
    assert.equal(e.status, status, `${what}: status ${e.status} (${e.message})`);
    assert.ok(e.error?.message || e.message, `${what}: error message`);
    return e;
  }
  assert.fail(`${what}: succeeded, expected ${status}`);
}

const checks = [];
const check = (name, fn) => checks.push([name, fn]);

check('health', async () => {
  const r = await fetch(`${base}/health`);
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { status: 'ok' });
});

check('models', async () => {
  const m = await client.models.list();
  assert.ok(m.data.length === 1 && m.data[0].id.length > 0, JSON.stringify(m.data));
});

let greedy;
check('chat greedy (non-streaming) equals unicorn run', async () => {
  const r = await client.chat.completions.create({ model: 'x', messages: user, temperature: 0, max_tokens: nTok });
  assert.equal(r.object, 'chat.completion');
  assert.ok(r.id.startsWith('chatcmpl-'));
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  greedy = r.choices[0].message.content;
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, nTok);
  if (expectGreedy !== undefined) assert.equal(greedy, expectGreedy, 'greedy text vs unicorn run --chat');
});

check('chat greedy streaming equals non-streaming', async () => {
  const s = await streamText({ model: 'x', messages: user, temperature: 0, max_tokens: nTok });
  assert.equal(s.text, greedy);
  assert.ok(['stop', 'length'].includes(s.finish));
});

check('seeded sampling: same seed same text, streamed too', async () => {
  const p = { model: 'x', messages: user, temperature: 0.9, top_p: 0.95, seed: 1234, max_tokens: nTok };
  const a = await client.chat.completions.create(p);
  const b = await client.chat.completions.create(p);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const s = await streamText(p);
  assert.equal(s.text, a.choices[0].message.content);
});

let plain;
check('penalties and min_p: greedy with penalties is deterministic, streamed too', async () => {
  const params = { model: 'x', messages: user, temperature: 0, max_tokens: nTok,
    repetition_penalty: 1.3, presence_penalty: 0.5, frequency_penalty: 1.0 };
  const a = await client.chat.completions.create(params);
  const b = await client.chat.completions.create(params);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const s = await streamText(params);
  assert.equal(s.text, a.choices[0].message.content);
  const m = await client.chat.completions.create({ model: 'x', messages: user, temperature: 0.8, seed: 3, min_p: 0.1, max_tokens: nTok });
  const m2 = await client.chat.completions.create({ model: 'x', messages: user, temperature: 0.8, seed: 3, min_p: 0.1, max_tokens: nTok });
  assert.equal(m.choices[0].message.content, m2.choices[0].message.content);
});

check('completions (non-streaming and streaming)', async () => {
  const r = await client.completions.create({ model: 'x', prompt, temperature: 0, max_tokens: nTok });
  assert.equal(r.object, 'text_completion');
  assert.ok(r.id.startsWith('cmpl-'));
  plain = r.choices[0].text;
  assert.equal(typeof plain, 'string');
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  const s = await completionStream({ model: 'x', prompt, temperature: 0, max_tokens: nTok });
  assert.equal(s.text, plain);
  assert.equal(s.finish, r.choices[0].finish_reason);
});

check('stop strings (string and array, streamed)', async () => {
  assert.ok(plain.length >= 6, `greedy completion too short for a stop test: ${JSON.stringify(plain)}`);
  const k = Math.floor(plain.length / 2);
  const stop = plain.slice(k, k + 3);
  const want = plain.slice(0, plain.indexOf(stop));
  const r = await client.completions.create({ model: 'x', prompt, temperature: 0, max_tokens: nTok, stop });
  assert.equal(r.choices[0].text, want);
  assert.equal(r.choices[0].finish_reason, 'stop');
  const s = await completionStream({ model: 'x', prompt, temperature: 0, max_tokens: nTok, stop: ['zzzqqq', stop] });
  assert.equal(s.text, want);
  assert.equal(s.finish, 'stop');
});

check('tokenize / detokenize', async () => {
  let r = await fetch(`${base}/tokenize`, { method: 'POST', headers: auth, body: JSON.stringify({ text: prompt }) });
  assert.equal(r.status, 200);
  const { tokens } = await r.json();
  assert.ok(tokens.length > 1);
  r = await fetch(`${base}/detokenize`, { method: 'POST', headers: auth, body: JSON.stringify({ tokens: tokens.slice(1) }) });
  assert.equal(r.status, 200);
  assert.equal((await r.json()).text, prompt);
});

check('errors: bad JSON, n, unsupported, too long prompt, 404, 405', async () => {
  let r = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: auth, body: '{"messages": [' });
  assert.equal(r.status, 400);
  let e = (await r.json()).error;
  assert.equal(e.type, 'invalid_request_error');
  assert.ok(e.message.length > 0 && 'param' in e && 'code' in e);
  await expectStatus(client.chat.completions.create({ model: 'x', messages: user, n: 2 }), 400, 'n=2');
  await expectStatus(client.chat.completions.create({ model: 'x', messages: user, logprobs: true }), 400, 'logprobs');
  await expectStatus(client.chat.completions.create({ model: 'x', messages: user, presence_penalty: 3 }), 400, 'presence_penalty 3');
  await expectStatus(client.chat.completions.create({ model: 'x', messages: user, min_p: 2 }), 400, 'min_p 2');
  const long = 'hello '.repeat(6000);
  const le = await expectStatus(client.completions.create({ model: 'x', prompt: long, max_tokens: 1 }), 400, 'long prompt');
  assert.equal(le.code, 'context_length_exceeded');
  r = await fetch(`${base}/v1/nothing`, { headers: auth });
  assert.equal(r.status, 404);
  assert.ok((await r.json()).error);
  r = await fetch(`${base}/v1/chat/completions`, { headers: auth });
  assert.equal(r.status, 405);
  assert.ok((await r.json()).error);
});

check('a wrong API key is 401', async () => {
  if (!process.env.API_KEY) return;
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await expectStatus(bad.chat.completions.create({ model: 'x', messages: user, max_tokens: 1 }), 401, 'bad key');
  const r = await fetch(`${base}/v1/models`);
  assert.equal(r.status, 401);
  assert.equal((await r.json()).error.code, 'invalid_api_key');
});

let failed = 0;
for (const [name, fn] of checks) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.error(`FAIL ${name}: ${e.stack || e}`);
  }
}
console.log(`greedy chat text: ${JSON.stringify(greedy)}`);
process.exit(failed ? 1 : 0);
