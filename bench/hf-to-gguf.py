#!/usr/bin/env python3
"""A Llama checkpoint directory (config.json + model.safetensors, as allm-mkmodel
writes --dummy's weights) to a GGUF file llama.cpp loads, every matrix in one type:
F32, F16, Q8_0, Q4_0 or Q4_1 (the embedding table too; norms stay F32), so that
llama.cpp and allm-run read the same weights (bench/llamacpp-vs.sh).

Q/K rows are permuted the way llama.cpp's convert_hf_to_gguf.py does for the llama
architecture (its RoPE pairs dims 2i, 2i+1; Hugging Face's rotate-half pairs i,
i + d/2). The vocabulary is a placeholder of the config's size (the benchmark feeds
token ids). Quantization is gguf-py's (ggml's reference quantizers).

usage: hf-to-gguf.py DIR OUT.gguf TYPE     (needs numpy and gguf, tools/venv-pins.txt)
"""
import json
import struct
import sys

import numpy as np
import gguf


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, t in header.items():
            if name == "__metadata__":
                continue
            dt = {"F32": np.float32, "F16": np.float16}[t["dtype"]]
            b, e = t["data_offsets"]
            f.seek(base + b)
            out[name] = np.frombuffer(f.read(e - b), dtype=dt).reshape(t["shape"]).astype(np.float32)
        return out


def permute(w, n_head):
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main():
    src, out, typ = sys.argv[1], sys.argv[2], sys.argv[3].upper()
    qt = getattr(gguf.GGMLQuantizationType, typ)
    cfg = json.load(open(src + "/config.json"))
    t = read_safetensors(src + "/model.safetensors")
    L, D, F, V = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, HKV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    w = gguf.GGUFWriter(out, "llama")
    w.add_name("allm-dummy")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(D)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_rope_dimension_count(cfg.get("head_dim", D // H))
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(V)
    w.add_file_type({"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7}[typ])
    w.add_tokenizer_model("llama")
    w.add_token_list([f"<t{i}>".encode() for i in range(V)])
    w.add_token_scores([0.0] * V)
    w.add_token_types([1] * V)
    w.add_bos_token_id(cfg.get("bos_token_id", 1))
    w.add_eos_token_id(cfg.get("eos_token_id", 2))

    def mat(name, a):
        if qt in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            a = a.astype(np.float32 if qt == gguf.GGMLQuantizationType.F32 else np.float16)
            w.add_tensor(name, a)
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)

    def vec(name, a):
        w.add_tensor(name, a.astype(np.float32))

    mat("token_embd.weight", t["model.embed_tokens.weight"])
    for i in range(L):
        p = f"model.layers.{i}."
        vec(f"blk.{i}.attn_norm.weight", t[p + "input_layernorm.weight"])
        mat(f"blk.{i}.attn_q.weight", permute(t[p + "self_attn.q_proj.weight"], H))
        mat(f"blk.{i}.attn_k.weight", permute(t[p + "self_attn.k_proj.weight"], HKV))
        mat(f"blk.{i}.attn_v.weight", t[p + "self_attn.v_proj.weight"])
        mat(f"blk.{i}.attn_output.weight", t[p + "self_attn.o_proj.weight"])
        vec(f"blk.{i}.ffn_norm.weight", t[p + "post_attention_layernorm.weight"])
        mat(f"blk.{i}.ffn_gate.weight", t[p + "mlp.gate_proj.weight"])
        mat(f"blk.{i}.ffn_up.weight", t[p + "mlp.up_proj.weight"])
        mat(f"blk.{i}.ffn_down.weight", t[p + "mlp.down_proj.weight"])
    vec("output_norm.weight", t["model.norm.weight"])
    if "lm_head.weight" in t:
        mat("output.weight", t["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
