// Description: test client for gateway-load.sh (not a test by itself): 64 concurrent streams through the openai npm SDK, each compared with allm-run's text; then slowloris and idle connections that must not stop a normal client and must be closed by the gateway.
// usage: node gateway-load.mjs streams (env GW_NPM, GW_URL, GW_MODEL, GW_REF: {prompt: text})
//        node gateway-load.mjs abuse   (env GW_NPM, GW_URL, GW_MODEL, GW_TIMEOUT: seconds)
import { createRequire } from 'module';
import { readFileSync } from 'fs';
import net from 'net';

const require = createRequire(process.env.GW_NPM + '/');
const { OpenAI } = require('openai');

let fails = 0;
const ok = (m) => console.log('ok: ' + m);
const fail = (m) => { console.log('FAIL: ' + m); fails++; };
const url = process.env.GW_URL;
const model = process.env.GW_MODEL;
const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function streams() {
  const ref = JSON.parse(readFileSync(process.env.GW_REF, 'utf8'));
  const prompts = Object.keys(ref);
  const one = async (i) => {
    const prompt = prompts[i % prompts.length];
    let text = '', events = 0, finish = null, usage = null;
    const s = await client.completions.create({
      model, prompt, max_tokens: 64, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    for await (const ch of s) {
      if (ch.usage) usage = ch.usage;
      if (!ch.choices.length) continue;
      events++;
      text += ch.choices[0].text;
      finish = ch.choices[0].finish_reason ?? finish;
    }
    return { i, prompt, text, events, finish, usage };
  };
  const t0 = performance.now();
  const res = await Promise.all(Array.from({ length: 64 }, (_, i) => one(i)));
  const dt = (performance.now() - t0) / 1000;
  let good = 0, tokens = 0;
  for (const r of res) {
    tokens += r.usage ? r.usage.completion_tokens : 0;
    // complete (finish + usage) and ordered (the same text, piece after piece, as allm-run)
    if (r.text === ref[r.prompt] && r.finish && r.usage && r.events === r.usage.completion_tokens + 1) good++;
    else if (fails++ < 5) console.log(`FAIL: stream ${r.i} (${JSON.stringify(r.prompt)}): ${JSON.stringify(r.text.slice(0, 60))} ` +
      `vs ${JSON.stringify(ref[r.prompt].slice(0, 60))}, ${r.events} events, finish ${r.finish}`);
  }
  (good === 64 ? ok : fail)(`64 concurrent streams: ${good} complete and equal to allm-run's text, ` +
    `one event per token (${tokens} tokens in ${dt.toFixed(2)} s)`);
}

// A raw socket: resolves 'closed' when the gateway closes it, or 'open' after ms.
function openSocket(port, onConnect) {
  const s = net.connect(port, '127.0.0.1', () => onConnect && onConnect(s));
  s.closedBy = new Promise((r) => { s.on('close', () => r('closed')); s.on('error', () => {}); });
  return s;
}

async function abuse() {
  const port = Number(new URL(url).port);
  const timeout = Number(process.env.GW_TIMEOUT);
  // 100 slowloris peers: a request line, then one header byte every 200 ms, for ever
  const slow = [];
  for (let i = 0; i < 100; i++) {
    const s = openSocket(port, (s) => {
      s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\n');
      s.drip = setInterval(() => { if (!s.destroyed) s.write('X'); }, 200);
    });
    slow.push(s);
  }
  // 800 idle peers: connect and say nothing
  const idle = [];
  for (let i = 0; i < 800; i++) idle.push(openSocket(port));
  await sleep(300);
  // meanwhile a normal client is served, several times
  let served = 0;
  for (let k = 0; k < 5; k++) {
    const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
    if (c.usage.completion_tokens === 16) served++;
  }
  (served === 5 ? ok : fail)(`with 100 slowloris and 800 idle connections open, a client is served (${served}/5)`);
  // all of them closed by the gateway within its --timeout (plus the reaper's beat)
  const race = (s) => Promise.race([s.closedBy, sleep((timeout + 3) * 1000).then(() => 'open')]);
  const t0 = performance.now();
  const [rs, ri] = await Promise.all([Promise.all(slow.map(race)), Promise.all(idle.map(race))]);
  const sec = ((performance.now() - t0) / 1000).toFixed(1);
  const closedSlow = rs.filter((x) => x === 'closed').length, closedIdle = ri.filter((x) => x === 'closed').length;
  (closedSlow === 100 ? ok : fail)(`slowloris peers still trickling were closed: ${closedSlow}/100 (a whole request within ${timeout} s)`);
  (closedIdle === 800 ? ok : fail)(`idle peers were closed: ${closedIdle}/800 (within ${sec} s)`);
  for (const s of slow) { clearInterval(s.drip); s.destroy(); }
  for (const s of idle) s.destroy();
}

async function cap() {
  // --max-connections N: N idle peers fill it; the next is turned away at once,
  // and once the slots free up a client is served again
  const port = Number(new URL(url).port);
  const n = Number(process.env.GW_CAP);
  const held = [];
  for (let i = 0; i < n; i++) held.push(openSocket(port));
  await sleep(300);
  let refused = false;
  try {
    await client.completions.create({ model, prompt: 'Once', max_tokens: 2 }, { timeout: 3000 });
  } catch (e) {
    refused = true;
  }
  (refused ? ok : fail)(`at --max-connections (${n} held), a new connection is refused, not queued`);
  for (const s of held) s.destroy();
  await sleep(300);
  const c = await client.completions.create({ model, prompt: 'Once', max_tokens: 2, temperature: 0 });
  (c.usage.completion_tokens === 2 ? ok : fail)('once they are gone, a client is served again');
}

const mode = process.argv[2];
await (mode === 'streams' ? streams() : mode === 'abuse' ? abuse() : cap());
if (fails) { console.log(`${fails} failures`); process.exit(1); }
