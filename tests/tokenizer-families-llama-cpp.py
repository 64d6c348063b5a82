#!/usr/bin/env python3
"""Holds the expectations of tests/test-tokenizer-families.c against llama.cpp (not a test; run by hand in a venv with llama-cpp-python 0.3.36 and gguf 0.19.0):

    KEEP_GGUF=1 build/tests/test-tokenizer-families      # prints the folder it kept
    /tmp/ref-venv/bin/python tests/tokenizer-families-llama-cpp.py FOLDER

Each kept tokenizer gets the keys llama.cpp needs to load a vocabulary (a one-layer
"llama"), then llama.cpp tokenizes the test's texts; its tokens must read as the test's
expectations (they did on 2026-11-29: all 13)."""
import sys, glob, os
import numpy as np
from gguf import GGUFReader, GGUFWriter, GGUFValueType
import llama_cpp
d = sys.argv[1]
cases = {
 'gemma3': [("Hi there", True, True), ("Hi there", False, False), ("<start_of_turn>user\nHi<end_of_turn>", True, False), ("<end_of_turn>", False, False), ("Hi\n\nHi", False, False), ("Hi\n\nHi", True, False)],
 'mistral': [("Hi there", True, True), ("[INST]Hi there", True, False), ("[INST]\nHi", True, False)],
 'phi3': [("[INST]\nHi there<|end|>\n<|end|>", True, False)],
 'llama3': [("Hi there 12345", True, True), ("<|eot_id|>", True, False)],
 'qwen2': [("Hi there 12345", True, True)],
}
for name, cs in cases.items():
    src = os.path.join(d, name + '.gguf')
    r = GGUFReader(src)
    out = f'/tmp/fam-{name}.gguf'
    w = GGUFWriter(out, 'llama')
    if 'general.name' in r.fields:
        w.add_name(bytes(r.fields['general.name'].parts[-1]).decode())
    for k, v in {'context_length': 64, 'embedding_length': 32, 'block_count': 1, 'feed_forward_length': 32, 'attention.head_count': 1}.items():
        w.add_uint32(f'llama.{k}', v)
    w.add_float32('llama.attention.layer_norm_rms_epsilon', 1e-5)
    for k, f in r.fields.items():
        if not k.startswith('tokenizer.'): continue
        t = f.types[0]
        if t == GGUFValueType.ARRAY:
            et = f.types[1]
            if et == GGUFValueType.STRING:
                w.add_array(k, [bytes(f.parts[i]).decode() for i in f.data])
            elif et == GGUFValueType.FLOAT32:
                w.add_key_value(k, [float(f.parts[i][0]) for i in f.data], GGUFValueType.ARRAY, sub_type=GGUFValueType.FLOAT32)
            else:
                w.add_key_value(k, [int(f.parts[i][0]) for i in f.data], GGUFValueType.ARRAY, sub_type=GGUFValueType.INT32)
        elif t == GGUFValueType.STRING:
            w.add_string(k, bytes(f.parts[-1]).decode())
        elif t == GGUFValueType.BOOL:
            w.add_bool(k, bool(f.parts[-1][0]))
        else:
            w.add_uint32(k, int(f.parts[-1][0]))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    llm = llama_cpp.Llama(model_path=out, vocab_only=True, verbose=False)
    for text, special, bos in cs:
        ids = llm.tokenize(text.encode(), add_bos=bos, special=special)
        print(name, repr(text), 'special' if special else 'plain', '|'.join(llm._model.token_get_text(i) for i in ids), '->', repr(llm.detokenize(ids).decode()))
