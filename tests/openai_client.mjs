// Drives a running Unicorn cluster's HTTP API with the official `openai`
// package (run by tests/api/test_http.c): node tests/openai_client.mjs BASEURL
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
  const h = await r.json();
  assert.equal(h.status, 'ok');
  // the load (docs/scale.md): the coordinator's running/queued requests and slots
  assert.deepEqual(Object.keys(h).sort(), ['queued', 'running', 'slots', 'status']);
  assert.ok(Number.isInteger(h.running) && Number.isInteger(h.queued) && h.slots >= 1);
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

// logprobs: raw model distribution (temperature 1, before penalties), so
// every value is <= 0, the top alternatives' probabilities sum to <= 1, and
// under greedy the chosen token is the top-1 alternative.
function checkChatLp(content, nTop, greedyPick) {
  assert.ok(Array.isArray(content) && content.length > 0, 'logprobs.content');
  for (const t of content) {
    assert.equal(typeof t.token, 'string');
    assert.ok(Number.isFinite(t.logprob) && t.logprob <= 0, `logprob ${t.logprob}`);
    assert.ok(Array.isArray(t.bytes) && t.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256));
    assert.equal(t.top_logprobs.length, nTop);
    let mass = 0, prev = 0;
    for (const a of t.top_logprobs) {
      assert.ok(typeof a.token === 'string' && Array.isArray(a.bytes));
      assert.ok(a.logprob <= 0 && a.logprob <= prev + 1e-6, 'alternatives descending, <= 0');
      prev = a.logprob;
      mass += Math.exp(a.logprob);
    }
    assert.ok(mass <= 1 + 1e-4, `alternatives' mass ${mass}`);
    if (greedyPick && nTop) {
      assert.ok(Math.abs(t.logprob - t.top_logprobs[0].logprob) < 1e-6, 'greedy token is the top-1');
      assert.deepEqual(t.bytes, t.top_logprobs[0].bytes);
    }
  }
}

check('logprobs: chat (non-streaming and streaming), completions', async () => {
  const p = { model: 'x', messages: user, temperature: 0, max_tokens: nTok, logprobs: true, top_logprobs: 5 };
  const r = await client.chat.completions.create(p);
  const lp = r.choices[0].logprobs;
  checkChatLp(lp.content, 5, true);
  assert.equal(r.choices[0].message.content, greedy, 'logprobs do not change the greedy text');
  if (r.choices[0].finish_reason === 'length') assert.equal(lp.content.length, r.usage.completion_tokens);
  // the tokens' bytes spell the text
  const bytes = Buffer.from(lp.content.flatMap((t) => t.bytes));
  assert.equal(bytes.toString('utf8'), r.choices[0].message.content);
  // streamed: the chunks carry the same entries
  const s = await client.chat.completions.create({ ...p, stream: true });
  const got = [];
  let text = '';
  for await (const c of s) {
    if (!c.choices.length) continue;
    text += c.choices[0].delta?.content ?? '';
    if (c.choices[0].logprobs?.content) got.push(...c.choices[0].logprobs.content);
  }
  assert.equal(text, greedy);
  assert.deepEqual(got, lp.content, 'streamed logprobs equal the non-streamed ones');
  // sampled, no alternatives: values still <= 0, top_logprobs empty
  const t = await client.chat.completions.create({ model: 'x', messages: user, temperature: 0.9, seed: 7, max_tokens: nTok, logprobs: true });
  checkChatLp(t.choices[0].logprobs.content, 0, false);
  // no logprobs asked: null
  const n = await client.chat.completions.create({ model: 'x', messages: user, temperature: 0, max_tokens: 2 });
  assert.equal(n.choices[0].logprobs, null);
  // completions: logprobs N -> tokens, token_logprobs, top_logprobs (N + the sampled), text_offset
  const c = await client.completions.create({ model: 'x', prompt, temperature: 0, max_tokens: nTok, logprobs: 3 });
  const cl = c.choices[0].logprobs;
  assert.equal(c.choices[0].text, plain);
  assert.equal(cl.tokens.length, cl.token_logprobs.length);
  assert.equal(cl.tokens.length, cl.top_logprobs.length);
  assert.equal(cl.tokens.length, cl.text_offset.length);
  assert.ok(cl.tokens.length > 0);
  for (let i = 0; i < cl.tokens.length; i++) {
    assert.ok(cl.token_logprobs[i] <= 0);
    const vals = Object.values(cl.top_logprobs[i]);
    assert.ok(vals.length >= 1 && vals.length <= 4, `top_logprobs[${i}] has ${vals.length}`);
    assert.ok(vals.every((v) => v <= 0));
    assert.ok(vals.reduce((a, v) => a + Math.exp(v), 0) <= 1 + 1e-4);
    assert.ok(Math.abs(Math.max(...vals) - cl.token_logprobs[i]) < 1e-6, 'greedy token is the top-1');
    if (i) assert.ok(cl.text_offset[i] >= cl.text_offset[i - 1]);
  }
  assert.equal(cl.text_offset[0], 0);
  const cs = await client.completions.create({ model: 'x', prompt, temperature: 0, max_tokens: nTok, logprobs: 3, stream: true });
  const toks = [];
  for await (const k of cs) if (k.choices[0]?.logprobs) toks.push(...k.choices[0].logprobs.token_logprobs);
  assert.deepEqual(toks, cl.token_logprobs, 'streamed completion logprobs');
  // a stop string: the logprobs of the tokens whose text was emitted
  if (plain.length >= 6) {
    const k = Math.floor(plain.length / 2);
    const stop = plain.slice(k, k + 3);
    const st = await client.completions.create({ model: 'x', prompt, temperature: 0, max_tokens: nTok, logprobs: 0, stop });
    const sl = st.choices[0].logprobs;
    const textLen = Buffer.byteLength(st.choices[0].text);
    assert.ok(sl.text_offset.every((o) => o < textLen || textLen === 0), 'no token entirely past the stop');
    assert.ok(sl.tokens.length <= cl.tokens.length);
    assert.deepEqual(sl.token_logprobs, cl.token_logprobs.slice(0, sl.tokens.length));
  }
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
  await expectStatus(client.chat.completions.create({ model: 'x', messages: user, n: 9 }), 400, 'n=9 (1..8)');
  await expectStatus(client.chat.completions.create({ model: 'x', messages: user, top_logprobs: 2 }), 400, 'top_logprobs without logprobs');
  await expectStatus(client.chat.completions.create({ model: 'x', messages: user, logprobs: true, top_logprobs: 21 }), 400, 'top_logprobs 21');
  await expectStatus(client.completions.create({ model: 'x', prompt, logprobs: 6 }), 400, 'completions logprobs 6');
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
