#!/usr/bin/env python3
"""Writes the fuzz seed/regression corpora, one file per hostile or edge-case input:
corpus-sqe (128-byte SQE followed by arena bytes), corpus-hello (what a peer writes on
the socket), corpus-ctl (control messages). Re-run to regenerate the seeds; inputs
tools/fuzz.sh --merge adds sit beside them."""
import os, struct
def corpus_dir(name):
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    os.makedirs(d, exist_ok=True)
    return d

def write_corpus(d, cases):
    for name, data in cases.items():
        with open(os.path.join(d, name), 'wb') as f:
            f.write(data)

out = corpus_dir('corpus-sqe')
NAN = float('nan'); INF = float('inf')

def sqe(op=1, flags=0, kind=1, ignore_eos=0, max_tokens=8, tag=7, rid=0, off=0, ln=0,
        temp=0.0, top_p=1.0, top_k=0, n_stop=0, seed=0, stops=(0, 0, 0, 0)):
    b = struct.pack('<BBBBiQQIIffiIQ4i', op, flags, kind, ignore_eos, max_tokens, tag, rid,
                    off & 0xffffffff, ln & 0xffffffff, temp, top_p, top_k, n_stop & 0xffffffff, seed, *stops)
    return b + b'\0' * (128 - len(b))

ids = lambda *v: struct.pack('<%di' % len(v), *v)
cases = {
    'ok-ids': sqe(ln=12) + ids(1, 5, 9),
    'ok-text': sqe(kind=0, ln=5) + b'Hello',
    'ok-sampled': sqe(ln=12, temp=0.8, top_p=0.9, top_k=20, seed=3) + ids(1, 5, 9),
    'ok-stop-ids': sqe(ln=12, n_stop=2, stops=(7, 8, 0, 0)) + ids(1, 5, 9),
    'off-past-arena': sqe(off=5000, ln=4) + ids(1),
    'off-len-overflow': sqe(off=0xfffffff0, ln=0x20) + ids(1),
    'len-huge': sqe(ln=0xffffffff) + ids(1),
    'len-not-multiple-of-4': sqe(ln=6) + ids(1, 2),
    'len-zero': sqe(ln=0),
    'id-out-of-vocab': sqe(ln=8) + ids(1, 99999),
    'id-negative': sqe(ln=8) + ids(1, -1),
    'text-invalid-utf8': sqe(kind=0, ln=4) + b'\xff\xfe\xc3\x28',
    'text-nul-bytes': sqe(kind=0, ln=4) + b'a\0b\0',
    'unknown-opcode': sqe(op=200),
    'nop': sqe(op=0),
    'max-tokens-zero': sqe(ln=4, max_tokens=0) + ids(1),
    'max-tokens-negative': sqe(ln=4, max_tokens=-5) + ids(1),
    'max-tokens-huge': sqe(ln=4, max_tokens=0x7fffffff) + ids(1),
    'n-stop-too-many': sqe(ln=4, n_stop=100) + ids(1),
    'temperature-nan': sqe(ln=4, temp=NAN) + ids(1),
    'temperature-negative': sqe(ln=4, temp=-1.0) + ids(1),
    'temperature-inf': sqe(ln=4, temp=INF) + ids(1),
    'top-p-zero': sqe(ln=4, top_p=0.0) + ids(1),
    'top-p-big': sqe(ln=4, top_p=5.0) + ids(1),
    'top-k-negative': sqe(ln=4, top_k=-3, temp=1.0) + ids(1),
    'flags-set': sqe(flags=0xff, ln=4) + ids(1),
    'prompt-kind-bad': sqe(kind=7, ln=4) + ids(1),
    'cancel-unknown': sqe(op=2, rid=123456),
    'cancel-huge-id': sqe(op=2, rid=0xffffffffffffffff),
    'prompt-longer-than-context': sqe(ln=4 * 600) + ids(*([5] * 600)),
    'short-input': b'\x01\x00',
    'reserved-set': sqe(ln=12)[:127] + b'\x01' + ids(1, 5, 9),
    'nop-reserved-set': sqe(op=0)[:72] + b'\xff' + sqe(op=0)[73:],
    'text-longer-than-context': sqe(kind=0, ln=4000) + b'ab ' * 1333 + b'a',
}
write_corpus(out, cases)
print('wrote', len(cases), 'inputs to', out)

# --- hellos: what a peer sends on the socket before it is a client (fuzz-hello.c)
out = corpus_dir('corpus-hello')
MAGIC = 0x4F4C45484D4C4C41

def hello(magic=MAGIC, abi=1, sq=0, cq=0, arena=0, flags=0, reserved=0):
    return struct.pack('<QIIIIII', magic, abi, sq, cq, arena, flags, reserved)

cases = {
    'ok-default': hello(),
    'ok-then-ack': hello() + b'M',
    'ok-then-ack-and-more': hello() + b'Mxyz',
    'ok-then-junk': hello() + b'x',
    'ok-sizes': hello(sq=64, cq=256, arena=65536),
    'ok-sizes-absurd': hello(sq=0xffffffff, cq=0xffffffff, arena=0xffffffff),
    'ok-sizes-tiny': hello(sq=1, cq=1, arena=1),
    'posix-flag': hello(flags=1) + b'M',
    'flag-unknown': hello(flags=0x80000000),
    'reserved-set': hello(reserved=1),
    'bad-magic': hello(magic=0x1122334455667788),
    'bad-abi': hello(abi=99),
    'half': hello()[:10],
    'one-byte': b'A',
}
write_corpus(out, cases)

# --- control messages: msgpack as a peer sends the control socket (fuzz-ctl.c)
out = corpus_dir('corpus-ctl')

def mp(v):
    """A small msgpack encoder (no dependency on the msgpack module)."""
    if v is None: return b'\xc0'
    if v is True: return b'\xc3'
    if v is False: return b'\xc2'
    if isinstance(v, int):
        if 0 <= v < 128: return bytes([v])
        if -32 <= v < 0: return struct.pack('b', v)
        return b'\xd3' + struct.pack('>q', v) if v < 0 else b'\xcf' + struct.pack('>Q', v)
    if isinstance(v, float): return b'\xcb' + struct.pack('>d', v)
    if isinstance(v, str):
        b = v.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else b'\xd9' + bytes([len(b)])) + b
    if isinstance(v, bytes): return b'\xc4' + bytes([len(v)]) + v
    if isinstance(v, list): return bytes([0x90 | len(v)]) + b''.join(mp(x) for x in v)
    if isinstance(v, dict):
        return bytes([0x80 | len(v)]) + b''.join(mp(k) + mp(x) for k, x in v.items())
    raise TypeError(v)

deep = {'x': 1}
for _ in range(9):
    deep = {'x': deep}
cases = {
    'status': mp({'id': 1, 'cmd': 'status'}),
    'requests-limit': mp({'id': 2, 'cmd': 'requests', 'args': {'limit': 10}}),
    'set': mp({'id': 3, 'cmd': 'set', 'args': {'gpu_blocks': 64, 'preempt': 'swap'}}),
    'cancel': mp({'id': 4, 'cmd': 'cancel', 'args': {'id': -5}}),
    'reply': mp({'id': 1, 'ok': True, 'result': {'requests': [{'id': 1, 'client': 2, 'age_s': 0.5}],
                                                  'truncated': False}}),
    'reply-error': mp({'id': 1, 'ok': False, 'error': 'no such command'}),
    'telemetry': mp({'blocks': {'gpu': {'used': 3, 'total': 64}}, 'ttft_ms': {'p50': float('nan')}}),
    'odd-values': mp({'id': 18446744073709551615, 'cmd': None, 'args': [1, -1, 1.5, b'\x00\xff', 'a\x00b']}),
    'too-deep': mp(deep),
    'root-array': mp([1, 2, 3]),
    'non-string-key': b'\x81\x01\x02',
    'ext-type': b'\x81\xa1x\xd4\x01\x02',
    'map32-huge-count': b'\xdf\xff\xff\xff\xff',
    'str32-huge-len': b'\x81\xa1x\xdb\xff\xff\xff\xff',
    'trailing-bytes': mp({'id': 1}) + b'\x00',
    'truncated': mp({'id': 1, 'cmd': 'status'})[:-3],
    'byte-c1': b'\x81\xa1x\xc1',
    'empty': b'',
    # found by tools/fuzz.sh ctl: an empty key ("" may unpack with a NULL pointer)
    'empty-key': b'\x81\xa0\xff',
    'empty-key-str32': b'\x81\xa0\xdb\x00\x00\x00\x00',
}
write_corpus(out, cases)

# --- corpus-gateway: an HTTP body for /v1/completions or /v1/chat/completions. The
# first byte: bit 0 chat, the rest the model's chat template (0 none, 1 ChatML,
# 2 Llama 2, 3 Llama 3, 4 Mistral: tests/fuzz-gateway.c); then the body.
out = corpus_dir('corpus-gateway')
import json

def gw(body, chat=False, tmpl=0):
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return bytes([(tmpl << 1) | int(chat)]) + body

msgs = [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi there'},
        {'role': 'assistant', 'content': 'Hello!'}, {'role': 'user', 'content': 'Tell a story'}]
cases = {
    'ok-completion': gw({'model': 'default', 'prompt': 'Once upon a time', 'max_tokens': 8}),
    'ok-ids': gw({'prompt': [1, 403, 407, 261], 'max_tokens': 4, 'temperature': 0}),
    'ok-batch-text': gw({'prompt': ['Once', 'The dog', 'Lily'], 'n': 2, 'seed': 3}),
    'ok-batch-ids': gw({'prompt': [[1, 2, 3], [4, 5]], 'max_tokens': 2}),
    'ok-sampling': gw({'prompt': 'x', 'temperature': 0.7, 'top_p': 0.9, 'top_k': 20, 'seed': 1,
                       'presence_penalty': 0.5, 'frequency_penalty': -0.5, 'repetition_penalty': 1.1,
                       'min_tokens': 2, 'max_tokens': 9, 'logit_bias': {'5': -100, '7': 3},
                       'stop': ['.', 'end'], 'stop_token_ids': [2], 'ignore_eos': True}),
    'ok-stream-usage': gw({'prompt': 'a', 'stream': True, 'stream_options': {'include_usage': True}}),
    'ok-logprobs-echo': gw({'prompt': 'Once', 'logprobs': 5, 'echo': True}),
    'ok-echo': gw({'prompt': 'Once', 'echo': True, 'max_tokens': 3}),
    'ok-best-of-n': gw({'prompt': 'Once', 'best_of': 2, 'n': 2}),
    'ok-chat-chatml': gw({'messages': msgs, 'max_completion_tokens': 5}, True, 1),
    'ok-chat-llama2': gw({'messages': msgs, 'logprobs': True, 'top_logprobs': 3}, True, 2),
    'ok-chat-llama3': gw({'messages': msgs, 'stream': True, 'n': 3}, True, 3),
    'ok-chat-mistral': gw({'messages': msgs[1:], 'max_tokens': 5}, True, 4),
    'chat-no-template': gw({'messages': msgs}, True, 0),
    'chat-roles-wrong': gw({'messages': [{'role': 'assistant', 'content': 'x'}]}, True, 2),
    'chat-content-parts': gw({'messages': [{'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}]}, True, 1),
    'chat-content-null': gw({'messages': [{'role': 'user', 'content': None}]}, True, 1),
    'chat-empty': gw({'messages': []}, True, 3),
    'chat-tools': gw({'messages': msgs, 'tools': [{'type': 'function'}]}, True, 1),
    'not-json': gw(b'{"prompt": '),
    'not-object': gw(b'[1, 2, 3]'),
    'duplicate-key': gw(b'{"prompt": "a", "prompt": "b"}'),
    'nul-in-string': gw(b'{"prompt": "a\\u0000b"}'),
    'invalid-utf8': gw(b'{"prompt": "\xff\xfe"}'),
    'deep-nesting': gw(b'{"prompt": ' + b'[' * 2000 + b']' * 2000 + b'}'),
    'unknown-model': gw({'model': 'gpt-4', 'prompt': 'a'}),
    'model-not-string': gw({'model': 7, 'prompt': 'a'}),
    'prompt-empty': gw({'prompt': ''}),
    'prompt-empty-ids': gw({'prompt': []}),
    'prompt-bad-id': gw({'prompt': [1, -5, 99999999]}),
    'prompt-too-long': gw({'prompt': 'word ' * 800}),
    'n-too-many': gw({'prompt': ['a'] * 20, 'n': 10}),
    'n-zero': gw({'prompt': 'a', 'n': 0}),
    'max-tokens-negative': gw({'prompt': 'a', 'max_tokens': -1}),
    'max-tokens-huge': gw({'prompt': 'a', 'max_tokens': 2 ** 63 - 1}),
    'temperature-nan': gw(b'{"prompt": "a", "temperature": NaN}'),
    'temperature-big': gw({'prompt': 'a', 'temperature': 1e308}),
    'logit-bias-bad': gw({'prompt': 'a', 'logit_bias': {'x': 1, '-1': 2, '1': 'y'}}),
    'stop-many': gw({'prompt': 'a', 'stop': ['s%d' % i for i in range(20)]}),
    'stop-ids-many': gw({'prompt': 'a', 'stop_token_ids': list(range(40))}),
    'stop-empty': gw({'prompt': 'a', 'stop': ['']}),
    'stream-options-no-stream': gw({'prompt': 'a', 'stream_options': {'include_usage': True}}),
    'min-above-max': gw({'prompt': 'a', 'min_tokens': 9, 'max_tokens': 3}),
    'suffix': gw({'prompt': 'a', 'suffix': 'z'}),
    'priority': gw({'prompt': 'a', 'priority': 3}),
    'empty': b'\x00',
}
write_corpus(out, cases)

# --- corpus-tokenizer: a flags byte (bit 0 add_special, bit 1 skip_special), then
# tokenizer.json, tokenizer_config.json and a text, separated by "\n\0\1\n"
# (tests/fuzz-tokenizer.c). Seeds: stories260K's real files (SentencePiece-style BPE)
# and a 400-token cut of GPT-2's (byte-level BPE), then broken variants.
out = corpus_dir('corpus-tokenizer')
data_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'data', 'models')
SEP = b'\n\x00\x01\n'

def tk(tj, cfg=None, text=b'', flags=1):
    parts = [tj if isinstance(tj, bytes) else json.dumps(tj).encode()]
    if cfg is not None or text is not None:
        parts.append(b'' if cfg is None else cfg if isinstance(cfg, bytes) else json.dumps(cfg).encode())
    if text is not None:
        parts.append(text if isinstance(text, bytes) else text.encode())
    return bytes([flags]) + SEP.join(parts)

with open(os.path.join(data_dir, 'stories260K', 'tokenizer.json'), 'rb') as f:
    spm = f.read()
with open(os.path.join(data_dir, 'stories260K', 'tokenizer_config.json'), 'rb') as f:
    spm_cfg = f.read()
g = json.load(open(os.path.join(data_dir, 'gpt2-tokenizer', 'tokenizer.json')))
keep = {t: i for t, i in g['model']['vocab'].items() if i < 400}
merges = [mg for mg in g['model']['merges'] if all(p in keep for p in mg.split(' ')) and mg.replace(' ', '') in keep]
small = dict(g)
small['model'] = dict(g['model'], vocab=keep, merges=merges)
small['added_tokens'] = [dict(g['added_tokens'][0], id=400)]
bpe = json.dumps(small).encode()
spm_j = json.loads(spm)

cases = {
    'spm-story': tk(spm, spm_cfg, 'Once upon a time, there was a little girl named Lily.'),
    'spm-special-in-text': tk(spm, spm_cfg, '<s>hi</s> <unk>\n\t  x', flags=3),
    'spm-bytes': tk(spm, None, 'caf\u00e9 \u2014 \U0001f600 \u00ff'),
    'spm-invalid-utf8': tk(spm, spm_cfg, b'ab\xff\xc3('),
    'spm-ids': tk(spm, spm_cfg, bytes(range(64))),
    'spm-no-config': tk(spm, None, None),
    'spm-empty-text': tk(spm, spm_cfg, b''),
    'bpe-text': tk(bpe, None, 'Hello world! <|endoftext|> 123 \'s   tabs\t\n'),
    'bpe-unicode': tk(bpe, None, '\u00e9\u4e2d\u6587 \U0001f600', flags=2),
    'bpe-ids': tk(bpe, None, b'\x00\x00\x00\x00\x90\x01\x00\x00\xff\xff\xff\xff'),
    'truncated-json': tk(spm[:len(spm) // 2], None, 'x'),
    'not-object': tk(b'[1, 2]', None, 'x'),
    'model-wordpiece': tk(dict(spm_j, model=dict(spm_j['model'], type='WordPiece')), None, 'x'),
    'merge-unknown-token': tk(dict(spm_j, model=dict(spm_j['model'], merges=['zz qq'])), None, 'zzqq'),
    'vocab-id-negative': tk(dict(spm_j, model=dict(spm_j['model'], vocab={'a': -1, '<unk>': 0})), None, 'a'),
    'vocab-id-huge': tk(dict(spm_j, model=dict(spm_j['model'], vocab={'a': 2 ** 31 - 1, '<unk>': 0})), None, 'a'),
    'vocab-empty': tk(dict(spm_j, model=dict(spm_j['model'], vocab={}, merges=[])), None, 'a'),
    'added-token-empty': tk(dict(spm_j, added_tokens=[{'id': 3, 'content': '', 'special': True}]), None, 'a'),
    'added-token-dup-id': tk(dict(spm_j, added_tokens=[{'id': 1, 'content': 'x'}, {'id': 1, 'content': 'y'}]), None, 'xy'),
    'normalizer-unknown': tk(dict(spm_j, normalizer={'type': 'NFKC'}), None, 'a'),
    'config-bad': tk(spm, b'{"add_bos_token": "yes", "bos_token": 7}', 'a'),
    'config-not-json': tk(spm, b'\xff{', 'a'),
    'no-files': b'\x00',
    # Qwen2's NFC normalizer over decomposed, reordered and Hangul text; Gemma's
    # no-op Split on ' ' after Replace; a token past the 1024-byte bound
    'bpe-nfc': tk(dict(small, normalizer={'type': 'NFC'}), None,
                  'cafe\u0301 e\u0327\u0301 \u0301x \u1100\u1161\u11a8 \u212b Q\u0307\u0323', flags=3),
    'spm-split-space': tk(dict(spm_j, normalizer={'type': 'Replace', 'pattern': {'String': ' '}, 'content': '\u2581'},
                               pre_tokenizer={'type': 'Split', 'pattern': {'String': ' '},
                                              'behavior': 'MergedWithPrevious', 'invert': False}),
                          spm_cfg, 'Once upon  a time'),
    'added-token-too-long': tk(dict(spm_j, added_tokens=[{'id': 3, 'content': 'x' * 1025, 'special': True}]), None, 'x'),
}
# the small files of the tokenizer tests: GPT-2 and Llama-3 split patterns, Metaspace;
# Qwen2's pattern swapped into the Llama-3 one; texts that walk the split rules
tiny_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'data', 'tokenizer')
SPLIT_TEXT = "I'm 12345 o'clock,  don'T\r\n\n  x\t\u00e9t\u00e9 \u4e2d\u6587!! 3.14 ' s ...\u3000end "
for name in sorted(n for n in os.listdir(tiny_dir) if n.endswith('.json')):
    with open(os.path.join(tiny_dir, name), 'rb') as f:
        tj = f.read()
    cases[name[:-5]] = tk(tj, None, SPLIT_TEXT)
    if 'llama3' in name:
        cases['tiny-qwen2'] = tk(tj.replace(b'\\p{N}{1,3}', b'\\p{N}'), None, SPLIT_TEXT)
write_corpus(out, cases)

# --- corpus-model: a flags byte (bits 0-1: storage f32 / f16 / bf16 / q8_0), then
# config.json and model.safetensors separated by "\n\0\1\n" (tests/fuzz-model.c).
# Seeds: a 1-layer Llama of hidden 16 (12 KB), whole and broken.
out = corpus_dir('corpus-model')

H, I, V, HEADS, KV = 16, 24, 40, 2, 1
llama_cfg = {'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': H,
             'intermediate_size': I, 'num_hidden_layers': 1, 'num_attention_heads': HEADS,
             'num_key_value_heads': KV, 'rms_norm_eps': 1e-5, 'rope_theta': 10000.0,
             'hidden_act': 'silu', 'vocab_size': V, 'max_position_embeddings': 64,
             'tie_word_embeddings': True, 'bos_token_id': 1, 'eos_token_id': 2, 'torch_dtype': 'float16'}
D = H // HEADS
llama_shapes = [('model.embed_tokens.weight', [V, H]), ('model.layers.0.input_layernorm.weight', [H]),
                ('model.layers.0.self_attn.q_proj.weight', [H, H]), ('model.layers.0.self_attn.k_proj.weight', [KV * D, H]),
                ('model.layers.0.self_attn.v_proj.weight', [KV * D, H]), ('model.layers.0.self_attn.o_proj.weight', [H, H]),
                ('model.layers.0.post_attention_layernorm.weight', [H]), ('model.layers.0.mlp.gate_proj.weight', [I, H]),
                ('model.layers.0.mlp.up_proj.weight', [I, H]), ('model.layers.0.mlp.down_proj.weight', [H, I]),
                ('model.norm.weight', [H])]

def st(shapes, dtype='F16', size=2, header_extra=None, pad=8):
    hdr, off, blob = {}, 0, b''
    for i, (name, shape) in enumerate(shapes):
        n = 1
        for d in shape:
            n *= d
        hdr[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [off, off + n * size]}
        blob += bytes((i * 37 + j * 11) % 61 + 2 for j in range(n * size))  # small finite values
        off += n * size
    if header_extra:
        hdr.update(header_extra)
    h = json.dumps(hdr).encode()
    h += b' ' * (-len(h) % pad)
    return struct.pack('<Q', len(h)) + h + blob

def mdl(cfg, safet, flags=0):
    c = cfg if isinstance(cfg, bytes) else json.dumps(cfg).encode()
    return bytes([flags]) + c + SEP + safet

good = st(llama_shapes)
cases = {
    'llama-f16': mdl(llama_cfg, good, 0),
    'llama-f16-as-f16': mdl(llama_cfg, good, 1),
    'llama-f16-as-bf16': mdl(llama_cfg, good, 2),
    'llama-f16-as-q8_0': mdl(llama_cfg, good, 3),
    'llama-f32': mdl(dict(llama_cfg, torch_dtype='float32'), st(llama_shapes, 'F32', 4), 0),
    'llama-bf16': mdl(dict(llama_cfg, torch_dtype='bfloat16'), st(llama_shapes, 'BF16', 2), 3),
    'llama-untied-missing-head': mdl(dict(llama_cfg, tie_word_embeddings=False), good),
    'llama-untied': mdl(dict(llama_cfg, tie_word_embeddings=False), st(llama_shapes + [('lm_head.weight', [V, H])])),
    'missing-tensor': mdl(llama_cfg, st(llama_shapes[:-1])),
    'wrong-shape': mdl(llama_cfg, st([(n, s[::-1]) for n, s in llama_shapes])),
    'dtype-unknown': mdl(llama_cfg, st(llama_shapes, 'F8_E4M3', 1)),
    'offsets-past-end': mdl(llama_cfg, good[:len(good) - 100]),
    'offsets-overlap': mdl(llama_cfg, st(llama_shapes, header_extra={'model.norm.weight': {
        'dtype': 'F16', 'shape': [H], 'data_offsets': [0, 2 * H]}})),
    'offsets-reversed': mdl(llama_cfg, st(llama_shapes, header_extra={'model.norm.weight': {
        'dtype': 'F16', 'shape': [H], 'data_offsets': [64, 32]}})),
    'shape-overflow': mdl(llama_cfg, st(llama_shapes, header_extra={'x': {
        'dtype': 'F16', 'shape': [2 ** 40, 2 ** 40], 'data_offsets': [0, 0]}})),
    'header-len-huge': mdl(llama_cfg, struct.pack('<Q', 2 ** 63) + b'{}'),
    'header-not-json': mdl(llama_cfg, struct.pack('<Q', 4) + b'{{{{'),
    'header-short': mdl(llama_cfg, b'\x01\x00'),
    'config-huge-dims': mdl(dict(llama_cfg, hidden_size=1 << 30, intermediate_size=1 << 30,
                                 num_hidden_layers=100000, vocab_size=1 << 30), good),
    'config-heads-not-dividing': mdl(dict(llama_cfg, num_attention_heads=3), good),
    'config-kv-heads-zero': mdl(dict(llama_cfg, num_key_value_heads=0), good),
    'config-negative': mdl(dict(llama_cfg, hidden_size=-16), good),
    'config-not-json': mdl(b'{"model_type": "llama",', good),
    'config-opt': mdl({'model_type': 'opt', 'hidden_size': H, 'ffn_dim': I, 'num_hidden_layers': 1,
                       'num_attention_heads': HEADS, 'vocab_size': V, 'max_position_embeddings': 64,
                       'word_embed_proj_dim': H, 'do_layer_norm_before': True}, good),
    'config-rope-scaling': mdl(dict(llama_cfg, rope_scaling={'rope_type': 'llama3', 'factor': 8.0,
                                                             'low_freq_factor': 1.0, 'high_freq_factor': 4.0,
                                                             'original_max_position_embeddings': 8}), good),
    'no-safetensors': bytes([0]) + json.dumps(llama_cfg).encode(),
}
write_corpus(out, cases)

# --- corpus-profile: bit 0 of the first byte picks the predictor profile (1) or a
# simulated device's profile (0); the rest is the file (tests/fuzz-profile.c).
# predictor-saved is a profile as allm-engined saved it (kept as a file); the
# sim seeds are the shipped profiles; both with broken variants.
out = corpus_dir('corpus-profile')
with open(os.path.join(out, 'predictor-saved'), 'rb') as f:
    saved = json.loads(f.read()[1:])

def pp(d):
    return b'\x01' + (d if isinstance(d, bytes) else json.dumps(d).encode())

def edit(path, value):
    d = json.loads(json.dumps(saved))
    node = d
    for k in path[:-1]:
        node = node[k]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return d

rc = saved['recompute']['coef']
cases = {
    'predictor-truncated': pp(json.dumps(saved).encode()[:700]),
    'predictor-other-key': pp(edit(['key', 'hidden'], 65)),
    'predictor-version-9': pp(edit(['version'], 9)),
    'predictor-coef-null': pp(edit(['recompute', 'coef'], [None] + rc[1:])),
    'predictor-coef-negative': pp(edit(['recompute', 'coef'], [-1.0] * len(rc))),
    'predictor-coef-huge': pp(edit(['recompute', 'coef'], [1e308] * len(rc))),
    'predictor-coef-short': pp(edit(['recompute', 'coef'], rc[:2])),
    'predictor-no-swap': pp(edit(['swap'], KeyError)),
    'predictor-xtx-ragged': pp(edit(['recompute', 'xtx'], [[1.0], [2.0, 3.0]])),
    'predictor-scale-zero': pp(edit(['recompute', 'scale'], 0)),
    'predictor-types': pp(edit(['recompute'], 'fast')),
    'predictor-empty': pp(b''),
    'predictor-not-object': pp(b'[]'),
}
sim_dir = os.path.join(data_dir, '..', 'sim-profiles')
for name in sorted(os.listdir(sim_dir)):
    if name.endswith('.json'):
        with open(os.path.join(sim_dir, name), 'rb') as f:
            text = f.read()
        cases['sim-' + name[:-5]] = b'\x00' + text
        if name == 'h100-sxm.json':
            j = json.loads(text)
            cases['sim-truncated'] = b'\x00' + text[:len(text) // 3]
            cases['sim-negative-flops'] = b'\x00' + json.dumps(dict(j, flops={k: -1 for k in j['flops']})).encode()
            cases['sim-zero-bandwidth'] = b'\x00' + json.dumps(dict(j, memory_bandwidth=0)).encode()
            cases['sim-link-string'] = b'\x00' + json.dumps(dict(j, link='fast')).encode()
write_corpus(out, cases)

# --- corpus-chat: a flags byte (bit 0 add_generation_prompt, bit 1 BOS/EOS given,
# bit 2 messages as they come), then the chat template, BOS, EOS, the messages (JSON)
# and the tools (JSON) separated by "\n\0\1\n" (tests/fuzz-chat.c). Seeds: every
# template of tests/chat-templates/ (the llama.cpp folder's, the real models', the
# tokenizer_config.json fixtures') with a few conversations, and hostile templates.
out = corpus_dir('corpus-chat')
tdir = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'chat-templates')
CALL = {'id': 'c1', 'type': 'function', 'function': {'name': 'f', 'arguments': {'x': 1}}}
TOOLS = [{'type': 'function', 'function': {'name': 'f', 'description': 'F', 'parameters': {
    'type': 'object', 'properties': {'x': {'type': 'integer'}}, 'required': ['x']}}}]
convs = {
    'alternating': ([{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi'},
                     {'role': 'assistant', 'content': ' Hello! '}, {'role': 'user', 'content': 'A story?'}], None),
    'bad-order': ([{'role': 'assistant', 'content': 'x'}, {'role': 'assistant', 'content': 'y'}], None),
    'tools': ([{'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': None, 'tool_calls': [CALL]},
               {'role': 'tool', 'content': '{}', 'tool_call_id': 'c1'}], TOOLS),
    'unicode': ([{'role': 'user', 'content': 'caf\u00e9 \U0001f600 <|im_end|> [INST] {{ x }}'}], None),
}

def chat(tmpl, bos, eos, conv, tools, flags):
    parts = [tmpl.encode(), (bos or '').encode(), (eos or '').encode(), json.dumps(conv).encode()]
    if tools:
        parts.append(json.dumps(tools).encode())
    return bytes([flags]) + SEP.join(parts)

templates = {}
for name in sorted(os.listdir(tdir)):
    if name.endswith('.json'):
        j = json.load(open(os.path.join(tdir, name)))
        t = j['chat_template'] if isinstance(j['chat_template'], str) else json.dumps(j['chat_template'])
        bos, eos = j.get('bos_token'), j.get('eos_token')
        bos = bos.get('content') if isinstance(bos, dict) else bos
        eos = eos.get('content') if isinstance(eos, dict) else eos
        templates[name[:-5]] = (t, bos, eos)
for name in sorted(os.listdir(os.path.join(tdir, 'models'))):
    templates[name[:-6]] = (open(os.path.join(tdir, 'models', name)).read(), '<s>', '</s>')
cases = {}
for key, (t, bos, eos) in templates.items():
    for cname, (conv, tools) in convs.items():
        cases['%s-%s' % (key, cname)] = chat(t, bos, eos, conv, tools, 3)
    cases['%s-no-specials' % key] = chat(t, None, None, convs['alternating'][0], None, 1)
# llama.cpp's templates (the small ones; the folder is the test data) with tools
for name in sorted(os.listdir(os.path.join(tdir, 'llama.cpp'))):
    t = open(os.path.join(tdir, 'llama.cpp', name)).read()
    if name.endswith('.jinja') and len(t) < 6000:
        cases['llama.cpp-%s-tools' % name[:-6]] = chat(t, '<s>', '</s>', *convs['tools'], 3)
hostile = {
    'deep-if': '{% if 1 %}' * 300 + '{% endif %}' * 300,
    'deep-parens': '{{ ' + '(' * 300 + '1' + ')' * 300 + ' }}',
    'loop-bomb': '{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}',
    'string-bomb': "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    'macro-recursion': '{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}',
    'mutation': '{{ messages.append(1) }}{{ messages[0].update({}) }}',
    'unknown': '{{ x | from_json }}{% include "a" %}',
}
for key, t in hostile.items():
    cases['hostile-' + key] = chat(t, '<s>', '</s>', convs['alternating'][0], None, 3)
write_corpus(out, cases)
