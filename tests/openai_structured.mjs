// Structured output and tool calls through the official `openai` package
// (run by tests/api/test_structured.c): node tests/openai_structured.mjs BASEURL
// chat.completions.parse with a zod schema (zodResponseFormat), and a
// tool-calling loop: a call constrained to a zod function's parameters, the
// tool's result sent back, then an answer. The model has random weights: the
// checks are about shape and validity, not meaning.
// Exits 0 when every check passed, 1 with the failed check on stderr.
import OpenAI from 'openai';
import { zodResponseFormat, zodFunction } from 'openai/helpers/zod';
import { z } from 'zod';
import assert from 'node:assert/strict';

const base = process.argv[2];
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
// v4 has parse under beta; later versions under chat.completions
const parse = (p) => (client.chat.completions.parse ? client.chat.completions.parse(p)
                                                     : client.beta.chat.completions.parse(p));

const Person = z.object({
  name: z.string().max(16),
  age: z.number().int(),
  role: z.enum(['admin', 'user']),
  tags: z.array(z.string().max(6)).max(3),
  manager: z.object({ name: z.string().max(10) }).nullable(),
});

async function main() {
  for (const seed of [1, 2]) {
    const r = await parse({
      model: 'unicorn', seed, temperature: 1, max_tokens: 200,
      messages: [{ role: 'user', content: 'Make up a person.' }],
      response_format: zodResponseFormat(Person, 'person'),
    });
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'stop', `seed ${seed}: finish ${r.choices[0].finish_reason}: ${m.content}`);
    assert.ok(m.parsed, `seed ${seed}: nothing parsed from ${m.content}`);
    Person.parse(m.parsed); // throws when it does not validate
  }

  const Weather = z.object({ city: z.string().max(12), unit: z.enum(['c', 'f']) });
  const tools = [zodFunction({ name: 'get_weather', description: 'the weather in a city', parameters: Weather })];
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const r1 = await parse({ model: 'unicorn', seed: 4, max_tokens: 120, messages, tools, tool_choice: 'required' });
  const m1 = r1.choices[0].message;
  assert.equal(r1.choices[0].finish_reason, 'tool_calls');
  assert.ok(m1.tool_calls.length >= 1); // parallel calls by default
  messages.push(m1);
  for (const call of m1.tool_calls) {
    assert.equal(call.function.name, 'get_weather');
    Weather.parse(call.function.parsed_arguments);
    messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 21 }) });
  }
  const r2 = await client.chat.completions.create({ model: 'unicorn', seed: 4, max_tokens: 12, messages, tools,
                                                    tool_choice: 'none' });
  assert.equal(typeof r2.choices[0].message.content, 'string');
  assert.ok(!r2.choices[0].message.tool_calls?.length);

  // streamed: the SDK's accumulating stream helper sees one tool call
  const s = await client.chat.completions.create({ model: 'unicorn', seed: 5, max_tokens: 120, stream: true,
    messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools,
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  let args = '', name = '', finish = null;
  for await (const c of s) {
    const d = c.choices[0]?.delta;
    for (const tc of d?.tool_calls ?? []) {
      name += tc.function?.name ?? '';
      args += tc.function?.arguments ?? '';
    }
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(name, 'get_weather');
  assert.equal(finish, 'tool_calls');
  Weather.parse(JSON.parse(args));

  // the SDK's streaming helper: argument deltas as they come, then the
  // final completion with each call whole and its arguments parsed
  const stream = (p) => (client.chat.completions.stream ? client.chat.completions.stream(p)
                                                        : client.beta.chat.completions.stream(p));
  const Add = z.object({ a: z.number().int(), b: z.number().int() });
  const both = [...tools, zodFunction({ name: 'add', parameters: Add })];
  for (const [seed, choice] of [[6, { type: 'function', function: { name: 'get_weather' } }], [7, 'required']]) {
    const st = stream({ model: 'unicorn', seed, max_tokens: 160, temperature: 1, tools: both, tool_choice: choice,
                        messages: [{ role: 'user', content: 'Weather in Oslo, and 2 + 3?' }] });
    let deltas = 0;
    const done = [];
    st.on('tool_calls.function.arguments.delta', () => { deltas++; });
    st.on('tool_calls.function.arguments.done', (e) => { done.push(e.name); });
    const fin = await st.finalChatCompletion();
    const calls = fin.choices[0].message.tool_calls;
    assert.equal(fin.choices[0].finish_reason, 'tool_calls');
    assert.ok(calls.length >= 1, `seed ${seed}: no call`);
    if (typeof choice === 'object') assert.equal(calls.length, 1, 'a named function: one call');
    assert.ok(deltas > calls.length, `seed ${seed}: ${deltas} argument deltas for ${calls.length} calls`);
    assert.deepEqual(done, calls.map((c) => c.function.name));
    assert.equal(new Set(calls.map((c) => c.id)).size, calls.length, 'each call its own id');
    for (const c of calls) (c.function.name === 'add' ? Add : Weather).parse(c.function.parsed_arguments);
  }

  // n = 2 through the SDK
  const rn = await client.chat.completions.create({ model: 'unicorn', seed: 6, max_tokens: 4, n: 2,
    messages: [{ role: 'user', content: 'Hi' }] });
  assert.equal(rn.choices.length, 2);
  assert.deepEqual(rn.choices.map((c) => c.index), [0, 1]);
}

main().then(() => process.exit(0), (e) => { console.error('openai_structured:', e?.stack || e); process.exit(1); });
