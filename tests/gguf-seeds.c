/* Writes the seeds of the GGUF fuzz target (tests/fuzz/corpus-gguf, replayed by the
 * fuzz suite; not a test): tiny Llama models in every tensor type the loader reads,
 * with a byte-level ("gpt2", SmolLM2's pre-tokenizer and chat template) or a
 * SentencePiece ("llama", scores) tokenizer, a file of every metadata type, and a
 * few broken ones. Each input is a flags byte (the storage dtype) + the file.
 * Usage: gguf-seeds DIR */
#include "gguf-write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 32, F = 32, V = 24, H = 2 };

static void tokenizer(struct gguf_w *w, bool spm)
{
	/* bytes of "Helo wrd123" plus a few merges and the ChatML tokens */
	static const char *const bl[V] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "H", "e", "l", "o",
					  "\xc4\xa0", "w", "r", "d", "1", "2", "3", "\xc4\x8a", "x", "He", "ll",
					  "Hell", "Hello", "\xc4\xa0w", "or", "\xc4\xa0wor", "ld"};
	static const char *const sp[V] = {"<unk>", "<s>", "</s>", "<0x0A>", "<0x20>", "<0xF0>", "\xe2\x96\x81", "H",
					  "e", "l", "o", "w", "r", "d", "1", "2",
					  "3", "x", "\xe2\x96\x81H", "He", "ll", "\xe2\x96\x81He", "llo", "or"};
	int32_t type[V];
	float score[V];
	for (int i = 0; i < V; i++) {
		type[i] = i < 3 ? 3 : 1;
		score[i] = -(float)i;
	}
	if (spm) {
		type[0] = 2;
		type[3] = type[4] = type[5] = 6;
		gguf_w_str(w, "tokenizer.ggml.model", "llama");
		gguf_w_arr_str(w, "tokenizer.ggml.tokens", sp, V);
		gguf_w_arr_f32(w, "tokenizer.ggml.scores", score, V);
		gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
		gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
	} else {
		static const char *const merges[] = {"H e", "l l", "He ll", "Hell o", "\xc4\xa0 w", "o r",
						     "\xc4\xa0w or", "l d"};
		gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
		gguf_w_str(w, "tokenizer.ggml.pre", "smollm");
		gguf_w_arr_str(w, "tokenizer.ggml.tokens", bl, V);
		gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 8);
		gguf_w_str(w, "tokenizer.chat_template",
			   "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
			   "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}");
	}
	gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, V);
	gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
}

static struct gguf_w *model(uint32_t type, bool spm)
{
	static float v[D * (V > F ? V : F)]; /* enough for the largest tensor */
	for (int i = 0; i < (int)(sizeof(v) / sizeof(v[0])); i++)
		v[i] = (float)((i * 29) % 13) / 13.0f - 0.5f;
	struct gguf_w *w = gguf_w_new();
	gguf_w_str(w, "general.architecture", "llama");
	gguf_w_u32(w, "llama.context_length", 32);
	gguf_w_u32(w, "llama.embedding_length", D);
	gguf_w_u32(w, "llama.feed_forward_length", F);
	gguf_w_u32(w, "llama.block_count", 1);
	gguf_w_u32(w, "llama.attention.head_count", H);
	gguf_w_u32(w, "llama.attention.head_count_kv", 1);
	gguf_w_f32(w, "llama.rope.freq_base", 10000);
	gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
	tokenizer(w, spm);
	gguf_w_tensor_f32(w, "token_embd.weight", type, 2, (int64_t[]){D, V}, v);
	gguf_w_tensor_f32(w, "output_norm.weight", ALLM_GGML_F32, 1, (int64_t[]){D}, v);
	gguf_w_tensor_f32(w, "blk.0.attn_norm.weight", ALLM_GGML_F32, 1, (int64_t[]){D}, v);
	gguf_w_tensor_f32(w, "blk.0.ffn_norm.weight", ALLM_GGML_F32, 1, (int64_t[]){D}, v);
	gguf_w_tensor_f32(w, "blk.0.attn_q.weight", type, 2, (int64_t[]){D, D}, v);
	gguf_w_tensor_f32(w, "blk.0.attn_k.weight", type, 2, (int64_t[]){D, D / H}, v);
	gguf_w_tensor_f32(w, "blk.0.attn_v.weight", type, 2, (int64_t[]){D, D / H}, v);
	gguf_w_tensor_f32(w, "blk.0.attn_output.weight", type, 2, (int64_t[]){D, D}, v);
	gguf_w_tensor_f32(w, "blk.0.ffn_gate.weight", type, 2, (int64_t[]){D, F}, v);
	gguf_w_tensor_f32(w, "blk.0.ffn_up.weight", type, 2, (int64_t[]){D, F}, v);
	gguf_w_tensor_f32(w, "blk.0.ffn_down.weight", type, 2, (int64_t[]){F, D}, v);
	return w;
}

static void save(const char *dir, const char *name, uint8_t flags, const uint8_t *p, size_t n)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fputc(flags, f) == EOF || fwrite(p, 1, n, f) != n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static void save_w(const char *dir, const char *name, uint8_t flags, struct gguf_w *w)
{
	size_t n;
	uint8_t *p = gguf_w_bytes(w, &n);
	save(dir, name, flags, p, n);
	free(p);
	gguf_w_free(w);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gguf-seeds DIR\n");
		return 2;
	}
	const char *dir = argv[1];
	static const struct {
		const char *name;
		uint32_t type;
		uint8_t flags;
		bool spm;
	} models[] = {
		{"model-f32-gpt2", ALLM_GGML_F32, 0, false}, {"model-f16-as-f16", ALLM_GGML_F16, 1, false},
		{"model-bf16-as-bf16", ALLM_GGML_BF16, 2, true}, {"model-q8_0-as-q8_0", ALLM_GGML_Q8_0, 3, false},
		{"model-q4_0-llama", ALLM_GGML_Q4_0, 0, true}, {"model-q4_1", ALLM_GGML_Q4_1, 0, false},
	};
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		save_w(dir, models[i].name, models[i].flags, model(models[i].type, models[i].spm));

	/* one of every metadata type, custom alignment */
	struct gguf_w *w = gguf_w_new();
	gguf_w_alignment(w, 64);
	gguf_w_raw(w, "t.u8", ALLM_GGUF_U8, "\xc8", 1);
	gguf_w_raw(w, "t.i16", ALLM_GGUF_I16, "\x18\xfc", 2);
	gguf_w_raw(w, "t.f64", ALLM_GGUF_F64, "\0\0\0\0\0\0\x04\x40", 8);
	gguf_w_raw(w, "t.i64", ALLM_GGUF_I64, "\xfe\xff\xff\xff\xff\xff\xff\xff", 8);
	gguf_w_bool(w, "t.bool", true);
	gguf_w_raw(w, "t.abool", ALLM_GGUF_ARRAY, "\x07\0\0\0\x02\0\0\0\0\0\0\0\x01\x00", 14);
	gguf_w_str(w, "general.architecture", "llama");
	gguf_w_tensor_f32(w, "x", ALLM_GGML_Q8_0, 2, (int64_t[]){32, 1}, (float[32]){1, 2, 3});
	save_w(dir, "metadata-every-type", 0, w);

	/* SentencePiece pieces as long as a token may be (1024 bytes: every split of each
	 * is looked up when the merges are rebuilt from the scores), and one past it
	 * that fills the fuzzer's 64 KiB: a quadratic merge pass spent seconds on it
	 * (issue 49 item 5); it must be refused at once */
	for (int past = 0; past < 2; past++) {
		enum { NR = 12 };
		static char run[NR][60001];
		const char *toks[NR];
		int32_t type[NR];
		float score[NR];
		for (int k = 0; k < NR; k++) {
			size_t len = k < 11 ? (size_t)1 << k : past ? sizeof(run[k]) - 1 : 1023;
			memset(run[k], k < 11 ? 'a' : 'b', len);
			run[k][len] = 0;
			toks[k] = run[k];
			type[k] = 1;
			score[k] = (float)k;
		}
		w = gguf_w_new();
		gguf_w_str(w, "tokenizer.ggml.model", "llama");
		gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NR);
		gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, NR);
		gguf_w_arr_f32(w, "tokenizer.ggml.scores", score, NR);
		gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", false);
		save_w(dir, past ? "tokenizer-token-60k" : "tokenizer-token-1k", 0, w);
	}

	/* broken: an unknown architecture, a K-quant tensor, a truncated model */
	w = gguf_w_new();
	gguf_w_str(w, "general.architecture", "mamba");
	save_w(dir, "arch-unknown", 0, w);
	w = gguf_w_new();
	uint8_t zero[144] = {0};
	gguf_w_tensor(w, "token_embd.weight", ALLM_GGML_Q4_K, 2, (int64_t[]){256, 1}, zero, sizeof(zero));
	save_w(dir, "tensor-q4_k", 0, w);
	w = model(ALLM_GGML_Q4_1, false);
	size_t n;
	uint8_t *p = gguf_w_bytes(w, &n);
	save(dir, "model-truncated", 0, p, n * 2 / 3);
	free(p);
	gguf_w_free(w);
	return 0;
}
