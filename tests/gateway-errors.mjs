// Description: test client for gateway-errors.sh (not a test by itself): error statuses as the openai npm SDK sees them, and a flood of raw requests that fills the engine's per-client queue until it answers 429.
// usage: node gateway-errors.mjs sdk    (env GW_NPM, GW_URL: a gateway with --api-key secret)
//        node gateway-errors.mjs flood  (env GW_NPM, GW_URL, GW_FLOOD: requests to send)
import { createRequire } from 'module';
import net from 'net';

const require = createRequire(process.env.GW_NPM + '/');
const OpenAI = require('openai');

let fails = 0;
const ok = (m) => console.log('ok: ' + m);
const fail = (m) => { console.log('FAIL: ' + m); fails++; };
const url = process.env.GW_URL;

// Runs f, which must throw an APIError of class cls with this status (and code).
async function expectError(what, cls, status, code, f) {
  try {
    await f();
    fail(`${what}: no error`);
  } catch (e) {
    const good = e instanceof cls && e.status === status && (!code || e.code === code) &&
      typeof e.message === 'string' && e.error && typeof e.error.type === 'string';
    (good ? ok : fail)(`${what}: ${e.constructor.name} ${e.status} ${e.code ?? ''} (${e.error?.message ?? e.message})`);
  }
}

async function sdk() {
  const good = new OpenAI({ baseURL: url + '/v1', apiKey: 'secret', maxRetries: 0 });
  const bad = new OpenAI({ baseURL: url + '/v1', apiKey: 'wrong', maxRetries: 0 });
  const model = (await good.models.list()).data[0].id;
  await expectError('401 wrong API key', OpenAI.AuthenticationError, 401, 'invalid_api_key',
    () => bad.completions.create({ model, prompt: 'hi', max_tokens: 2 }));
  const c = await good.completions.create({ model, prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });
  (c.usage.completion_tokens === 4 ? ok : fail)('the right API key is served');
  await expectError('404 unknown model', OpenAI.NotFoundError, 404, 'model_not_found',
    () => good.completions.create({ model: 'gpt-4', prompt: 'hi', max_tokens: 2 }));
  await expectError('400 bad field (temperature -1)', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', temperature: -1 }));
  await expectError('400 best_of 3 with n 2 (choices are not ranked)', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', n: 2, best_of: 3 }));
  await expectError('400 n 0', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', n: 0 }));
  await expectError('400 frequency_penalty 3 (outside [-2, 2])', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', frequency_penalty: 3 }));
  await expectError('400 repetition_penalty 0', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', repetition_penalty: 0 }));
  await expectError('400 logprobs 11 (at most 10 alternatives)', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', logprobs: 11 }));
  await expectError('400 logit_bias key not a token id', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', logit_bias: { x: 1 } }));
  await expectError('400 logit_bias 101', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', logit_bias: { 5: 101 } }));
  await expectError('400 logit_bias past the vocabulary (the engine\'s check)', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', logit_bias: { 100000: 1 } }));
  await expectError('400 min_tokens above max_tokens', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', max_tokens: 4, min_tokens: 5 }));
  await expectError('400 echo with logprobs (no prompt log-probabilities)', OpenAI.BadRequestError, 400, null,
    () => good.completions.create({ model, prompt: 'hi', echo: true, logprobs: 1 }));
  await expectError('400 messages not a list', OpenAI.BadRequestError, 400, null,
    () => good.chat.completions.create({ model, messages: 'hello' }));
  await expectError('413 prompt longer than the context', OpenAI.APIError, 413, 'context_length_exceeded',
    () => good.completions.create({ model, prompt: 'hello '.repeat(600), max_tokens: 2 }));
  await expectError('413 token-id prompt longer than the context', OpenAI.APIError, 413, 'context_length_exceeded',
    () => good.completions.create({ model, prompt: Array(600).fill(7), max_tokens: 2 }));
  // the engine's own check: prompt + max_tokens needs more KV blocks than its pool
  await expectError('413 from the engine (more KV blocks than the pool)', OpenAI.APIError, 413, null,
    () => good.completions.create({ model, prompt: 'Once upon a time', max_tokens: 400 }));
}

// Opens GW_FLOOD connections, each a POST that the engine keeps waiting (one running
// sequence, long answers): past the engine's per-client cap it answers 429.
async function flood() {
  const port = Number(new URL(url).port);
  const n = Number(process.env.GW_FLOOD);
  const body = JSON.stringify({ prompt: [1, 2, 3], max_tokens: 1000, ignore_eos: true, temperature: 0 });
  const req = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  const socks = [], statuses = {};
  let first429 = null, errors = 0, opening = 0, i = 0;
  await new Promise((done) => {
    const more = () => {
      while (opening < 256 && i < n) {
        opening++;
        i++;
        const s = net.connect(port, '127.0.0.1', () => { s.write(req); opening--; more(); if (i === n && opening === 0) done(); });
        let buf = '';
        s.on('data', (d) => {
          buf += d;
          const m = /^HTTP\/1\.1 (\d+)/.exec(buf);
          const end = buf.indexOf('\r\n\r\n');
          if (m && end > 0 && buf.length > end + 4 && !s.counted) {
            s.counted = true;
            statuses[m[1]] = (statuses[m[1]] || 0) + 1;
            if (m[1] === '429' && !first429) first429 = buf;
          }
        });
        s.on('error', () => { errors++; });
        socks.push(s);
      }
    };
    more();
  });
  for (let t = 0; t < 200 && !statuses['429']; t++) await new Promise((r) => setTimeout(r, 100));
  console.log(`flood: ${n} requests sent, answers ${JSON.stringify(statuses)}, socket errors ${errors}`);
  if (!first429) {
    fail('no 429 while the engine queue was full');
  } else {
    const body = JSON.parse(first429.slice(first429.indexOf('\r\n\r\n') + 4));
    (body.error && body.error.type === 'rate_limit_exceeded' && /in flight/.test(body.error.message) &&
      /\r\nRetry-After: 1\r\n/i.test(first429) ? ok : fail)(
      `429 with Retry-After and an OpenAI error body: ${JSON.stringify(body)}`);
    // the SDK sees the same while the queue stays full (a request that slips into a
    // slot freed meanwhile is accepted: it times out here and is tried again)
    const c = new OpenAI({ baseURL: url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 800 });
    let seen = null;
    for (let k = 0; k < 10 && !seen; k++) {
      try {
        await c.completions.create({ model: 'dummy:small', prompt: [1, 2, 3], max_tokens: 2 });
      } catch (e) {
        if (e instanceof OpenAI.RateLimitError) seen = e;
      }
    }
    (seen && seen.status === 429 && seen.error.type === 'rate_limit_exceeded' ? ok : fail)(
      `429 through the openai SDK: ${seen ? seen.constructor.name + ' ' + seen.status + ' (' + seen.error.message + ')' : 'never'}`);
  }
  // the others wait (or, the few the engine finished meanwhile, are answered 200)
  const other = Object.entries(statuses).filter(([k]) => k !== '429' && k !== '200');
  (other.length === 0 ? ok : fail)(`no other answers while the rest wait (${JSON.stringify(other)})`);
  for (const s of socks) s.destroy(); // hang up: the gateway cancels them all in the engine
}

await (process.argv[2] === 'flood' ? flood() : sdk());
if (fails) { console.log(`${fails} failures`); process.exit(1); }
