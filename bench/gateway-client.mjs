// Streaming load through allm-gateway for bench/gateway-vs-rings.sh: the requests of
// a JSONL workload ({"prompt_ids": [...], "max_tokens": N} per line), at most C in
// flight, each streamed (SSE, one event per token) over keep-alive HTTP/1.1 with
// node's own http module (no SDK: the client's cost stays small and fixed).
// Prints one JSON summary with allm-bench's definitions: TTFT = send -> first token
// event, TPOT = (last - first token) / (n - 1), ITL = every gap between two token
// events of a request; percentiles interpolated as numpy does.
// usage: node gateway-client.mjs URL WORKLOAD.jsonl N CONCURRENCY
import http from 'http';
import { readFileSync } from 'fs';

const [url, file, nArg, cArg] = process.argv.slice(2);
const u = new URL(url);
const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const n = Number(nArg), conc = Number(cArg);
const agent = new http.Agent({ keepAlive: true, maxSockets: conc });

function one(w) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ prompt: w.prompt_ids, max_tokens: w.max_tokens, temperature: 0,
      ignore_eos: true, stream: true });
    const t0 = performance.now();
    const times = [];
    let buf = '', done = false;
    const req = http.request({ host: u.hostname, port: u.port, path: '/v1/completions', method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      if (res.statusCode !== 200) { reject(new Error('HTTP ' + res.statusCode)); res.resume(); return; }
      res.setEncoding('utf8');
      res.on('data', (d) => {
        const now = performance.now();
        buf += d;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (ev === 'data: [DONE]') { done = true; continue; }
          const j = JSON.parse(ev.slice(6));
          if (j.choices && j.choices.length && j.choices[0].finish_reason === null) times.push(now);
        }
      });
      res.on('end', () => (done ? resolve({ t0, times }) : reject(new Error('stream without [DONE]'))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function pctl(v) {
  if (!v.length) return { p50: null, p90: null, p99: null, mean: null };
  const s = [...v].sort((a, b) => a - b);
  const q = (p) => { const x = (s.length - 1) * p, lo = Math.floor(x), hi = Math.ceil(x); return s[lo] + (s[hi] - s[lo]) * (x - lo); };
  return { p50: q(0.5), p90: q(0.9), p99: q(0.99), mean: s.reduce((a, b) => a + b, 0) / s.length };
}

const start = performance.now();
let next = 0;
const recs = [];
async function worker() {
  while (next < n) {
    const w = lines[next++ % lines.length];
    recs.push(await one(w));
  }
}
await Promise.all(Array.from({ length: conc }, worker));
const dur = (performance.now() - start) / 1000;
const tokens = recs.reduce((a, r) => a + r.times.length, 0);
const ttft = recs.map((r) => r.times[0] - r.t0);
const tpot = recs.filter((r) => r.times.length > 1).map((r) => (r.times[r.times.length - 1] - r.times[0]) / (r.times.length - 1));
const itl = recs.flatMap((r) => r.times.slice(1).map((t, i) => t - r.times[i]));
console.log(JSON.stringify({ requests: recs.length, duration_s: dur, gen_tokens: tokens,
  gen_throughput_tok_s: tokens / dur, ttft_ms: pctl(ttft), tpot_ms: pctl(tpot), itl_ms: pctl(itl) }));
agent.destroy();
