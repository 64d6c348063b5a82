// Description: test client for gateway-openai.sh (not a test by itself): the openai npm SDK and parse-prometheus-text-format against a running allm-gateway.
// env: GW_NPM (node_modules here), GW_URL, GW_MODEL (the model id), GW_REF (JSON file:
// {"completion": text of allm-run for PROMPT, 40 tokens; "penalized": the same with penalties;
// "logprobs": allm-run --logprobs 3's per token}), GW_CHAT (JSON: [{url, name}]
// of gateways with chat templates), GW_OUT (a file this writes the chat answers to).
import { createRequire } from 'module';
import { readFileSync, writeFileSync } from 'fs';

const require = createRequire(process.env.GW_NPM + '/');
const { OpenAI } = require('openai');
const parsePrometheusTextFormat = require('parse-prometheus-text-format');

let fails = 0;
const ok = (m) => console.log('ok: ' + m);
const fail = (m) => { console.log('FAIL: ' + m); fails++; };
const check = (c, m) => (c ? ok(m) : fail(m));

const url = process.env.GW_URL;
const model = process.env.GW_MODEL;
const ref = JSON.parse(readFileSync(process.env.GW_REF, 'utf8'));
const PROMPT = 'Once upon a time';
const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'unused', maxRetries: 0 });

// --- models ---
const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === model,
  `GET /v1/models lists the engine's model (${models.data.map((m) => m.id)})`);

// --- a completion: the text allm-run makes in-process, token for token ---
const c = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0 });
check(c.choices[0].text === ref.completion,
  `completion equals allm-run's text (${JSON.stringify(c.choices[0].text.slice(0, 40))}...)`);
check(c.choices[0].finish_reason === 'length' && c.usage.prompt_tokens === 5 &&
  c.usage.completion_tokens === 40 && c.usage.total_tokens === 45,
  `finish_reason length, usage 5 + 40 (${JSON.stringify(c.usage)})`);
check(c.object === 'text_completion' && c.id.startsWith('cmpl-'), 'completion object and id');

// penalties: the text allm-run makes with the same ones, and not the plain text
const pen = await client.completions.create({
  model, prompt: PROMPT, max_tokens: 40, temperature: 0,
  frequency_penalty: 0.5, presence_penalty: 0.2, repetition_penalty: 1.3,
});
check(pen.choices[0].text === ref.penalized && ref.penalized !== ref.completion,
  `repetition / frequency / presence penalties: allm-run's text with the same (${JSON.stringify(pen.choices[0].text.slice(0, 60))})`);
const zero = await client.completions.create({
  model, prompt: PROMPT, max_tokens: 40, temperature: 0, frequency_penalty: 0, presence_penalty: 0,
});
check(zero.choices[0].text === ref.completion, 'penalties of 0 (what SDKs send by default) change nothing');

// logprobs: allm-run's values, token for token, whole and streamed
const near = (a, b) => Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));
const lw = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0, logprobs: 3 });
const L = lw.choices[0].logprobs;
check(L && L.tokens.length === 40 && L.tokens.join('') === ref.completion &&
  L.token_logprobs.every((v, i) => near(v, ref.logprobs[i].logprob)) &&
  L.top_logprobs.every((t, i) => Object.values(t).length === 3 && near(t[L.tokens[i]], ref.logprobs[i].logprob) &&
    Object.values(t).every((v, k) => near(v, ref.logprobs[i].top[k][1]))) &&
  L.text_offset.every((o, i) => o === L.tokens.slice(0, i).join('').length),
  `logprobs 3: allm-run's log-probabilities, tokens joining to the text, offsets (${JSON.stringify(L && L.tokens.slice(0, 3))})`);
const hot = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 2, seed: 3, logprobs: 1 });
const H = hot.choices[0].logprobs;
check(H.tokens.every((tok, i) => tok in H.top_logprobs[i] && Object.keys(H.top_logprobs[i]).length <= 2) &&
  H.tokens.some((tok, i) => Object.keys(H.top_logprobs[i]).length === 2),
  'top_logprobs always holds the sampled token (k + 1 entries when it is not among the k best)');
let lsText = '', lsVals = [];
for await (const ch of await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0, logprobs: 1, stream: true })) {
  const c0 = ch.choices[0];
  if (!c0 || !c0.logprobs) continue;
  lsText += c0.logprobs.tokens.join('');
  lsVals.push(...c0.logprobs.token_logprobs);
  if (c0.logprobs.tokens.join('') !== c0.text) fail(`a streamed chunk's logprobs tokens are not its text: ${JSON.stringify(c0)}`);
}
check(lsText === ref.completion && lsVals.length === 40 && lsVals.every((v, i) => near(v, ref.logprobs[i].logprob)),
  'streamed logprobs: one token per chunk, the same values');

// logit_bias: -100 on the greedy first token moves it; +100 on " there" makes every token that
const g0 = ref.logprobs[0].id, there = ref.logprobs[1].id;
const nb = await client.completions.create({ model, prompt: PROMPT, max_tokens: 8, temperature: 0, logit_bias: { [g0]: -100 } });
const fb = await client.completions.create({ model, prompt: PROMPT, max_tokens: 8, temperature: 0, logit_bias: { [there]: 100 } });
check(!nb.choices[0].text.startsWith(L.tokens[0]) && fb.choices[0].text === L.tokens[1].repeat(8),
  `logit_bias: -100 moves the first token (${JSON.stringify(nb.choices[0].text)}), +100 forces one (${JSON.stringify(fb.choices[0].text)})`);

// min_tokens: neither a stop token id nor a stop string ends the output before it
const third = ref.logprobs[2].id;
const sNo = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0, stop_token_ids: [third] });
const sMin = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0, stop_token_ids: [third],
  min_tokens: 12 });
const gMin = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0, stop: [' girl'], min_tokens: 12 });
check(sNo.usage.completion_tokens === 3 && sMin.usage.completion_tokens >= 12 && gMin.choices[0].text === ref.completion,
  `min_tokens 12: a stop id ends at ${sNo.usage.completion_tokens} tokens without, ${sMin.usage.completion_tokens} with; the stop string " girl" (token 6) does not cut`);

// echo: the prompt's text, then the output (text or token-id prompt; streamed, the prompt first)
const ew = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0, echo: true });
const ei = await client.completions.create({ model, prompt: [1, 403, 407, 261, 378], max_tokens: 40, temperature: 0, echo: true });
let es = '', eFirst = null;
for await (const ch of await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0, echo: true, stream: true })) {
  if (!ch.choices.length) continue;
  if (eFirst === null) eFirst = ch.choices[0].text;
  es += ch.choices[0].text;
}
check(ew.choices[0].text === PROMPT + ref.completion && ei.choices[0].text === PROMPT + ref.completion &&
  eFirst === PROMPT && es === PROMPT + ref.completion && ew.usage.completion_tokens === 40,
  'echo: the prompt (text, or token ids decoded) before the output, whole and streamed (the prompt first)');

// token ids as the prompt: the same ids allm-run encodes
const c2 = await client.completions.create({ model, prompt: [1, 403, 407, 261, 378], max_tokens: 40, temperature: 0 });
check(c2.choices[0].text === ref.completion, 'a prompt of token ids gives the same text');

// --- n > 1: n choices, choice i sampled with seed + i, usage summing their tokens ---
const ng = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0, n: 3 });
check(ng.choices.length === 3 && ng.choices.every((ch, i) => ch.index === i && ch.text === ref.completion &&
  ch.finish_reason === 'length') && ng.usage.prompt_tokens === 5 && ng.usage.completion_tokens === 120,
  `n 3, greedy: three choices of allm-run's text, usage 5 + 3 x 40 (${JSON.stringify(ng.usage)})`);
const seeded = async (seed) => (await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 1, seed })).choices[0].text;
const h7 = await seeded(7), h8 = await seeded(8);
const nh = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 1, seed: 7, n: 2 });
check(h7 !== h8 && nh.choices.length === 2 && nh.choices[0].text === h7 && nh.choices[1].text === h8,
  `n 2, sampled with seed 7: the samples of seeds 7 and 8 (${JSON.stringify(h7.slice(0, 20))}..., ${JSON.stringify(h8.slice(0, 20))}...)`);
const nParts = ['', ''], nFin = [null, null];
let nUsage = null, nStray = 0;
for await (const ch of await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 1, seed: 7,
  n: 2, stream: true, stream_options: { include_usage: true } })) {
  if (ch.usage) nUsage = ch.usage;
  for (const c0 of ch.choices) {
    if (c0.index !== 0 && c0.index !== 1) { nStray++; continue; }
    nParts[c0.index] += c0.text;
    if (c0.finish_reason) nFin[c0.index] = c0.finish_reason;
  }
}
check(nStray === 0 && nParts[0] === h7 && nParts[1] === h8 && nFin[0] === 'length' && nFin[1] === 'length' &&
  nUsage && nUsage.completion_tokens === 80,
  `n 2 streamed: each choice's chunks by index, each its own finish, usage over both (${JSON.stringify(nUsage)})`);

// --- a batch of prompts: choice k * n + j is prompt k's j-th, usage counts each prompt once ---
const hello = await client.completions.create({ model, prompt: 'Hello', max_tokens: 40, temperature: 0 });
const bp = await client.completions.create({ model, prompt: [PROMPT, [1, 403, 407, 261, 378], 'Hello'], max_tokens: 40, temperature: 0 });
check(bp.choices.length === 3 && bp.choices.map((ch) => ch.index).join() === '0,1,2' &&
  bp.choices[0].text === ref.completion && bp.choices[1].text === ref.completion &&
  bp.choices[2].text === hello.choices[0].text && bp.choices[2].text !== ref.completion &&
  bp.usage.prompt_tokens === 10 + hello.usage.prompt_tokens && bp.usage.completion_tokens === 120,
  `three prompts (text, ids, text): each one's own text, usage ${JSON.stringify(bp.usage)}`);
const hs7 = (await client.completions.create({ model, prompt: 'Hello', max_tokens: 40, temperature: 1, seed: 7 })).choices[0].text;
const hs8 = (await client.completions.create({ model, prompt: 'Hello', max_tokens: 40, temperature: 1, seed: 8 })).choices[0].text;
const bn = await client.completions.create({ model, prompt: [PROMPT, 'Hello'], max_tokens: 40, temperature: 1, seed: 7, n: 2 });
check(bn.choices.length === 4 && bn.choices.map((ch) => ch.text).join('|') === [h7, h8, hs7, hs8].join('|') &&
  bn.usage.prompt_tokens === 5 + hello.usage.prompt_tokens && bn.usage.completion_tokens === 160,
  'two prompts with n 2, seed 7: each prompt\'s samples of seeds 7 and 8, in that order');
const bParts = ['', ''];
let bUsage = null;
for await (const ch of await client.completions.create({ model, prompt: [PROMPT, 'Hello'], max_tokens: 40, temperature: 0,
  stream: true, stream_options: { include_usage: true } })) {
  if (ch.usage) bUsage = ch.usage;
  for (const c0 of ch.choices) bParts[c0.index] += c0.text;
}
check(bParts[0] === ref.completion && bParts[1] === hello.choices[0].text && bUsage &&
  bUsage.prompt_tokens === 5 + hello.usage.prompt_tokens && bUsage.completion_tokens === 80,
  `a batch of two prompts, streamed: each by its index, usage over both (${JSON.stringify(bUsage)})`);

// --- the same, streamed ---
let text = '', chunks = 0, finish = null, usage = null;
const s = await client.completions.create({
  model, prompt: PROMPT, max_tokens: 40, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
for await (const ch of s) {
  if (ch.usage) usage = ch.usage;
  if (!ch.choices.length) continue;
  text += ch.choices[0].text;
  chunks++;
  if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
}
check(text === ref.completion, `streamed completion equals allm-run's text (${chunks} chunks)`);
check(chunks === 41, `one event per token, then the finish (${chunks} chunks)`);
check(finish === 'length' && usage && usage.completion_tokens === 40 && usage.prompt_tokens === 5,
  `stream ends with finish_reason length and usage (${JSON.stringify(usage)})`);

// --- stop strings, on the text: cut before the first one, finish_reason stop ---
const cut = ref.completion.indexOf(' girl');
const st = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0, stop: [' girl', 'zzz'] });
check(cut > 0 && st.choices[0].text === ref.completion.slice(0, cut) && st.choices[0].finish_reason === 'stop',
  `stop " girl" cuts the text before it (${JSON.stringify(st.choices[0].text)})`);
let stext = '';
const ss = await client.completions.create({ model, prompt: PROMPT, max_tokens: 40, temperature: 0, stop: ' girl', stream: true });
for await (const ch of ss) stext += ch.choices[0]?.text ?? '';
check(stext === ref.completion.slice(0, cut), `streamed, the stop string is never sent, even in part (${JSON.stringify(stext)})`);

// --- a cancelled stream: the client aborts after three chunks ---
const before = await scrape();
let got = 0;
const cs = await client.completions.create(
  { model, prompt: PROMPT, max_tokens: 500, temperature: 0, ignore_eos: true, stream: true });
for await (const ch of cs) {
  if (++got === 3) break; // the SDK's way to cancel: it aborts the HTTP request
}
check(got === 3 && cs.controller.signal.aborted, `the client broke off its stream after ${got} chunks`);
// polls /metrics until `want` requests since `before` ended aborted (the engine
// hears of a hang-up within a step or two); the last scrape and that count
async function awaitAborts(before, want) {
  let after = null, aborts = 0;
  for (let i = 0; i < 100; i++) {
    after = await scrape();
    aborts = value(after, 'vllm:request_success_total', { finished_reason: 'abort' }) -
      value(before, 'vllm:request_success_total', { finished_reason: 'abort' });
    if (aborts >= want) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { after, aborts };
}
const { after, aborts: abortDelta } = await awaitAborts(before, 1);
const genDelta = value(after, 'vllm:generation_tokens_total') - value(before, 'vllm:generation_tokens_total');
check(abortDelta === 1, `the engine cancelled it (request_success_total{finished_reason="abort"} +${abortDelta})`);
check(genDelta < 500, `and stopped generating: ${genDelta} of 500 tokens made`);

// n 2, streamed and broken off: the engine cancels both choices
const before2 = await scrape();
let got2 = 0;
const cs2 = await client.completions.create(
  { model, prompt: PROMPT, max_tokens: 500, temperature: 0, ignore_eos: true, stream: true, n: 2 });
for await (const ch of cs2) {
  if (++got2 === 4) break;
}
const { after: after2, aborts: abort2 } = await awaitAborts(before2, 2);
const gen2 = value(after2, 'vllm:generation_tokens_total') - value(before2, 'vllm:generation_tokens_total');
check(abort2 === 2 && gen2 < 1000, `n 2 broken off: both choices cancelled (+${abort2} aborts, ${gen2} of 1000 tokens made)`);

// --- chat, streamed, on every template ---
const chats = JSON.parse(process.env.GW_CHAT);
const answers = {};
const messages = [
  { role: 'system', content: 'You are a storyteller.' },
  { role: 'user', content: 'Tell me about a dog.' },
];
for (const g of chats) {
  const cc = new OpenAI({ baseURL: g.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  const mine = g.name.startsWith('mistral') ? messages.slice(1) : messages; // Mistral has no system role
  let out = '', role = null, fin = null;
  const cs = await cc.chat.completions.create({ model: g.model, messages: mine, max_tokens: 20, temperature: 0, stream: true });
  for await (const ch of cs) {
    const d = ch.choices[0]?.delta ?? {};
    if (d.role) role = d.role;
    out += d.content ?? '';
    fin = ch.choices[0]?.finish_reason ?? fin;
  }
  const whole = await cc.chat.completions.create({ model: g.model, messages: mine, max_tokens: 20, temperature: 0 });
  answers[g.name] = { messages: mine, streamed: out, whole: whole.choices[0].message.content };
  if (g === chats[0]) { // n 2 in chat: two messages, indexed
    const two = await cc.chat.completions.create({ model: g.model, messages: mine, max_tokens: 20, temperature: 0, n: 2 });
    check(two.choices.length === 2 && two.choices.every((ch, i) => ch.index === i &&
      ch.message.content === whole.choices[0].message.content) && two.usage.completion_tokens === 40,
      `${g.name}: chat with n 2, greedy: two indexed copies of the answer, usage 2 x 20`);
  }
  if (g === chats[0]) { // chat's logprobs shape: content[] of {token, logprob, bytes, top_logprobs}
    const lc = await cc.chat.completions.create({ model: g.model, messages: mine, max_tokens: 20, temperature: 0,
      logprobs: true, top_logprobs: 2 });
    const C = lc.choices[0].logprobs?.content ?? [];
    check(C.length === 20 && C.map((t) => t.token).join('') === lc.choices[0].message.content &&
      C.every((t) => t.logprob <= 0 && t.top_logprobs.length === 2 && near(t.top_logprobs[0].logprob, t.logprob) &&
        Buffer.from(t.bytes).toString('utf8') === t.token),
      `${g.name}: chat logprobs (greedy: the best alternative is the token; bytes are its UTF-8)`);
  }
  check(role === 'assistant' && fin === 'length' && out.length > 0 && out === whole.choices[0].message.content &&
    whole.object === 'chat.completion' && whole.usage.completion_tokens === 20,
    `${g.name}: streamed chat (role, ${JSON.stringify(out.slice(0, 30))}..., length) equals the whole answer`);
}
writeFileSync(process.env.GW_OUT, JSON.stringify(answers));

// --- /metrics through a real Prometheus text parser ---
const fams = await scrape();
const names = new Set(fams.map((f) => f.name));
for (const n of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:num_requests_swapped',
  'vllm:gpu_cache_usage_perc', 'vllm:cpu_cache_usage_perc', 'vllm:num_preemptions_total',
  'vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:time_to_first_token_seconds',
  'vllm:time_per_output_token_seconds', 'vllm:e2e_request_latency_seconds',
  'vllm:request_queue_time_seconds', 'allm_preemptions_total', 'allm_predictor_mape', 'allm_blocks',
  'allm_swap_bytes_total']) {
  if (!names.has(n)) fail(`/metrics lacks ${n}`);
}
ok(`/metrics parses: ${fams.length} families, every DESIGN §10 name present`);
const e2e = fams.find((f) => f.name === 'vllm:e2e_request_latency_seconds');
const m = e2e.metrics[0];
const finished = ['stop', 'length', 'abort'].reduce((a, r) => a + value(fams, 'vllm:request_success_total', { finished_reason: r }), 0);
// (this parser keeps a labelled histogram's buckets but not its _count/_sum)
check(Number(m.buckets['+Inf']) === finished && finished >= 10,
  `e2e histogram counts every finished request (+Inf bucket ${m.buckets['+Inf']} = ${finished})`);
const bk = Object.entries(m.buckets).map(([le, c]) => [le === '+Inf' ? Infinity : Number(le), Number(c)]).sort((a, b) => a[0] - b[0]);
check(bk.length === 22 && bk[bk.length - 1][0] === Infinity && bk.every(([, c], i) => i === 0 || c >= bk[i - 1][1]),
  `vLLM's 21 bounds + Inf, counts cumulative (${bk.map(([l, c]) => l + ':' + c).slice(0, 4).join(' ')} ...)`);
check(value(fams, 'vllm:num_requests_running') === 0 && value(fams, 'allm_blocks', { pool: 'gpu', state: 'used' }) === 0,
  'idle now: nothing running, no GPU block in use');

if (fails) { console.log(`${fails} failures`); process.exit(1); }

async function scrape() {
  const r = await fetch(url + '/metrics');
  if (r.status !== 200) throw new Error('/metrics: ' + r.status);
  return parsePrometheusTextFormat(await r.text());
}

function value(fams, name, labels = {}) {
  const f = fams.find((x) => x.name === name);
  if (!f) return NaN;
  const s = f.metrics.find((x) => Object.entries(labels).every(([k, v]) => x.labels && x.labels[k] === v));
  return s ? Number(s.value) : NaN;
}
