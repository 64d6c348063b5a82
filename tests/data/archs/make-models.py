#!/usr/bin/env python3
"""Writes the tiny random-weight models of tests/test-archs.c, one folder per
architecture (qwen2, qwen3, gemma3, phi3): model.gguf, written with the `gguf`
package's writer, and hf/, the same weights as a Hugging Face directory (config.json
and model.safetensors in each family's own names and conventions), then
reference.json: the logits and greedy ids of llama.cpp (llama-cpp-python) on the GGUF
file -- an implementation nobody here wrote.

Run once, by hand, in a venv that has llama-cpp-python 0.3.36, numpy and gguf 0.19.0
(tools/venv-pins.txt); the output is committed (the files are small):

    /work/ref/venv/bin/python tests/data/archs/make-models.py tests/data/archs

The weights come from numpy's PCG64 seeded per architecture, so a rerun writes the
same files. llama.cpp runs with its K/V cache in f32 (type_k/type_v), so what differs
from the engine is arithmetic order and ggml's GELU table (f16 lookups), not storage.
"""
import hashlib
import json
import os
import struct
import sys

import gguf
import llama_cpp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import llama_cpp_ref  # noqa: E402  (tests/data/llama_cpp_ref.py)

llama_cpp_ref.plain_cpu_path()

D, H, KVH, HD, F, V, CTX = 32, 2, 1, 16, 48, 64, 128
N_PROMPT, N_GEN = 20, 12

ARCHS = {
    # name: layers, extra
    "qwen2": dict(layers=2, seed=21),
    "qwen3": dict(layers=2, seed=22),
    "gemma3": dict(layers=6, seed=23, window=5),  # layers 0-4 local, 5 global
    "phi3": dict(layers=2, seed=24),
    # the same Phi-3 with its matrices in Q8_0 blocks: the fused tensors' rows split
    # at load as blocks (GGUF only)
    "phi3-q8_0": dict(layers=2, seed=24, arch="phi3", quant=gguf.GGMLQuantizationType.Q8_0),
}


def vocab():
    """<unk> <s> </s>, a newline byte, the end-of-turn tokens llama.cpp looks up for
    some families (Phi-3's <|end|>), then plain pieces."""
    extra = ["<0x0A>", "<|end|>", "<|endoftext|>"]
    toks = ["<unk>", "<s>", "</s>"] + extra + [f"t{i}" for i in range(V - 3 - len(extra))]
    T = gguf.TokenType
    types = [T.UNKNOWN, T.CONTROL, T.CONTROL, T.BYTE, T.CONTROL, T.CONTROL] + \
        [T.NORMAL] * (V - 3 - len(extra))
    return toks, [0.0] * V, types


def weights(arch, spec):
    """Every tensor in the engine's roles: name -> array (rows, cols), f32."""
    rng = np.random.default_rng(spec["seed"])
    L = spec["layers"]

    def mat(rows, cols, scale=1.0):
        return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    def norm(n):  # weights around 1 (Gemma's GGUF holds 1 + w: the same here)
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    w = {"emb": (rng.standard_normal((V, D)) * (0.25 if arch == "gemma3" else 0.7)).astype(np.float32)}
    for i in range(L):
        p = f"{i}."
        w[p + "attn_norm"] = norm(D)
        w[p + "q"] = mat(H * HD, D, 1.5)
        w[p + "k"] = mat(KVH * HD, D, 1.5)
        w[p + "v"] = mat(KVH * HD, D)
        w[p + "o"] = mat(D, H * HD)
        if arch == "qwen2":
            w[p + "bq"] = (0.3 * rng.standard_normal(H * HD)).astype(np.float32)
            w[p + "bk"] = (0.3 * rng.standard_normal(KVH * HD)).astype(np.float32)
            w[p + "bv"] = (0.3 * rng.standard_normal(KVH * HD)).astype(np.float32)
        if arch in ("qwen3", "gemma3"):
            w[p + "q_norm"] = norm(HD)
            w[p + "k_norm"] = norm(HD)
        if arch == "gemma3":
            w[p + "post_attn_norm"] = norm(D)
            w[p + "post_mlp_norm"] = norm(D)
        w[p + "mlp_norm"] = norm(D)
        w[p + "gate"] = mat(F, D, 1.5)
        w[p + "up"] = mat(F, D)
        w[p + "down"] = mat(D, F)
    w["final_norm"] = norm(D)
    if arch != "gemma3":  # Gemma ties its head to the embeddings
        w["head"] = mat(V, D, 4.0)
    return w


def write_gguf(path, arch, spec, w):
    L = spec["layers"]
    g = gguf.GGUFWriter(path, arch)
    add_tensor = g.add_tensor
    if "quant" in spec:  # matrices of whole blocks (not the embedding, not ffn_down: 48 wide)
        def add_tensor(name, a):
            if a.ndim == 2 and name != "token_embd.weight" and a.shape[1] % 32 == 0:
                q = gguf.quants.quantize(a, spec["quant"])
                g.add_tensor(name, q, raw_dtype=spec["quant"])
            else:
                g.add_tensor(name, a)
    g.add_name(f"tiny random {arch}")
    g.add_context_length(CTX)
    g.add_embedding_length(D)
    g.add_block_count(L)
    g.add_feed_forward_length(F)
    g.add_head_count(H)
    g.add_head_count_kv(KVH)
    g.add_key_length(HD)
    g.add_value_length(HD)
    g.add_rope_dimension_count(HD)
    g.add_rope_freq_base(1000000.0 if arch == "gemma3" else 10000.0)
    g.add_layer_norm_rms_eps(1e-6)
    if "window" in spec:
        g.add_sliding_window(spec["window"])
    toks, scores, types = vocab()
    g.add_tokenizer_model("llama")
    g.add_token_list(toks)
    g.add_token_scores(scores)
    g.add_token_types(types)
    g.add_unk_token_id(0)
    g.add_bos_token_id(1)
    g.add_eos_token_id(2)
    add_tensor("token_embd.weight", w["emb"])
    for i in range(L):
        p, b = f"{i}.", f"blk.{i}."
        add_tensor(b + "attn_norm.weight", w[p + "attn_norm"])
        if arch == "phi3":
            add_tensor(b + "attn_qkv.weight", np.concatenate([w[p + "q"], w[p + "k"], w[p + "v"]]))
        else:
            add_tensor(b + "attn_q.weight", w[p + "q"])
            add_tensor(b + "attn_k.weight", w[p + "k"])
            add_tensor(b + "attn_v.weight", w[p + "v"])
        add_tensor(b + "attn_output.weight", w[p + "o"])
        for k, n in (("bq", "attn_q.bias"), ("bk", "attn_k.bias"), ("bv", "attn_v.bias"),
                     ("q_norm", "attn_q_norm.weight"), ("k_norm", "attn_k_norm.weight"),
                     ("post_attn_norm", "post_attention_norm.weight"),
                     ("post_mlp_norm", "post_ffw_norm.weight")):
            if p + k in w:
                add_tensor(b + n, w[p + k])
        add_tensor(b + "ffn_norm.weight", w[p + "mlp_norm"])
        if arch == "phi3":
            add_tensor(b + "ffn_up.weight", np.concatenate([w[p + "gate"], w[p + "up"]]))
        else:
            add_tensor(b + "ffn_gate.weight", w[p + "gate"])
            add_tensor(b + "ffn_up.weight", w[p + "up"])
        add_tensor(b + "ffn_down.weight", w[p + "down"])
    add_tensor("output_norm.weight", w["final_norm"])
    if "head" in w:
        add_tensor("output.weight", w["head"])
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


def write_safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_hf(folder, arch, spec, w):
    """The same model as transformers saves it: Gemma's norms as w - 1 (it multiplies
    by 1 + w), Phi-3's fused qkv_proj and gate_up_proj."""
    os.makedirs(folder, exist_ok=True)
    L = spec["layers"]
    gemma = arch == "gemma3"
    nw = (lambda a: a - 1.0) if gemma else (lambda a: a)
    t = {"model.embed_tokens.weight": w["emb"], "model.norm.weight": nw(w["final_norm"])}
    for i in range(L):
        p, b = f"{i}.", f"model.layers.{i}."
        t[b + "input_layernorm.weight"] = nw(w[p + "attn_norm"])
        if arch == "phi3":
            t[b + "self_attn.qkv_proj.weight"] = np.concatenate([w[p + "q"], w[p + "k"], w[p + "v"]])
            t[b + "mlp.gate_up_proj.weight"] = np.concatenate([w[p + "gate"], w[p + "up"]])
        else:
            t[b + "self_attn.q_proj.weight"] = w[p + "q"]
            t[b + "self_attn.k_proj.weight"] = w[p + "k"]
            t[b + "self_attn.v_proj.weight"] = w[p + "v"]
            t[b + "mlp.gate_proj.weight"] = w[p + "gate"]
            t[b + "mlp.up_proj.weight"] = w[p + "up"]
        t[b + "self_attn.o_proj.weight"] = w[p + "o"]
        t[b + "mlp.down_proj.weight"] = w[p + "down"]
        for k, n in (("bq", "self_attn.q_proj.bias"), ("bk", "self_attn.k_proj.bias"),
                     ("bv", "self_attn.v_proj.bias")):
            if p + k in w:
                t[b + n] = w[p + k]
        if p + "q_norm" in w:
            t[b + "self_attn.q_norm.weight"] = nw(w[p + "q_norm"])
            t[b + "self_attn.k_norm.weight"] = nw(w[p + "k_norm"])
        if gemma:
            t[b + "post_attention_layernorm.weight"] = nw(w[p + "post_attn_norm"])
            t[b + "pre_feedforward_layernorm.weight"] = nw(w[p + "mlp_norm"])
            t[b + "post_feedforward_layernorm.weight"] = nw(w[p + "post_mlp_norm"])
        else:
            t[b + "post_attention_layernorm.weight"] = w[p + "mlp_norm"]
    if "head" in w:
        t["lm_head.weight"] = w["head"]
    write_safetensors(os.path.join(folder, "model.safetensors"), t)
    cfg = {
        "architectures": [{"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                           "gemma3": "Gemma3ForCausalLM", "phi3": "Phi3ForCausalLM"}[arch]],
        "model_type": "gemma3_text" if gemma else arch,
        "vocab_size": V, "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
        "num_attention_heads": H, "num_key_value_heads": KVH, "head_dim": HD,
        "max_position_embeddings": CTX, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0 if gemma else 10000.0, "rope_scaling": None,
        "tie_word_embeddings": "head" not in w, "bos_token_id": 1, "eos_token_id": 2,
        "torch_dtype": "float32",
    }
    if gemma:
        cfg.update(hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=HD,
                   sliding_window=spec["window"], rope_local_base_freq=10000.0,
                   layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                                for i in range(L)],
                   final_logit_softcapping=None, attn_logit_softcapping=None)
    else:
        cfg["hidden_act"] = "silu"
    if arch in ("qwen2", "qwen3"):
        cfg.update(use_sliding_window=False, sliding_window=None)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")


def reference(path, spec):
    llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_batch=64, n_threads=2, logits_all=True,
                          verbose=False, seed=0, type_k=0, type_v=0)  # GGML_TYPE_F32 K/V
    rng = np.random.default_rng(spec["seed"] + 1000)
    prompt = [int(x) for x in rng.integers(6, V, N_PROMPT)]  # plain pieces
    llm.reset()
    llm.eval(prompt)
    logits = [[round(float(x), 6) for x in llm.scores[i]] for i in range(len(prompt))]
    gen, margins, step_logits = [], [], []
    for _ in range(N_GEN):
        row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        order = np.argsort(-row)
        t = int(order[0])
        gen.append(t)
        step_logits.append([round(float(x), 6) for x in row])
        margins.append(round(float(row[order[0]] - row[order[1]]), 6))
        llm.eval([t])
    # logits: every prompt position's; step_logits: each greedy step's, one token
    # evaluated at a time (step 0 is the prompt's last row)
    return {"prompt": prompt, "logits": logits, "greedy": gen, "margins": margins,
            "step_logits": step_logits}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make-models.py OUT_DIR")
    out = sys.argv[1]
    for name, spec in ARCHS.items():
        arch = spec.get("arch", name)
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        w = weights(arch, spec)
        gpath = os.path.join(d, "model.gguf")
        write_gguf(gpath, arch, spec, w)
        if "quant" not in spec:
            write_hf(os.path.join(d, "hf"), arch, spec, w)
        ref = reference(gpath, spec)
        with open(gpath, "rb") as f:
            ref["generator"] = {"implementation": "llama.cpp via llama-cpp-python",
                                "llama_cpp_python": llama_cpp.__version__,
                                "gguf_sha256": hashlib.sha256(f.read()).hexdigest(),
                                "kv_cache": "f32"}
        with open(os.path.join(d, "reference.json"), "w") as f:
            json.dump(ref, f, indent=0)
            f.write("\n")
        print(f"{name}: {spec['layers']} layers, greedy {ref['greedy']}, "
              f"smallest margin {min(ref['margins']):.3f}")


if __name__ == "__main__":
    main()
