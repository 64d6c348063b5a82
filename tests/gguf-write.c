/* GGUF files for the tests (see gguf-write.h). */
#include "gguf-write.h"

#include "model-config.h"
#include "safetensors.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growable byte buffer. */
struct buf {
	uint8_t *p;
	size_t n, cap;
};

static void put(struct buf *b, const void *s, size_t n)
{
	if (!n)
		return;
	if (b->n + n > b->cap) {
		size_t c = b->cap ? b->cap : 256;
		while (c < b->n + n)
			c *= 2;
		b->p = realloc(b->p, c);
		if (!b->p)
			abort(); /* a test helper: out of memory ends the test */
		b->cap = c;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void put_le(struct buf *b, uint64_t v, int n)
{
	uint8_t x[8];
	for (int i = 0; i < n; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	put(b, x, (size_t)n);
}

static void put_str(struct buf *b, const char *s, size_t n)
{
	put_le(b, n, 8);
	put(b, s, n);
}

struct wtensor {
	char *name;
	uint32_t type, n_dims;
	int64_t ne[8]; /* up to 8: the tests write bad dimension counts too */
	uint8_t *data;
	size_t nbytes;
};

struct gguf_w {
	uint32_t version, alignment;
	struct buf kv; /* the key/value section as written */
	uint64_t n_kv;
	struct wtensor *t;
	size_t n_t;
};

struct gguf_w *gguf_w_new(void)
{
	struct gguf_w *w = calloc(1, sizeof(*w));
	w->version = 3;
	w->alignment = ALLM_GGUF_DEFAULT_ALIGNMENT;
	return w;
}

void gguf_w_free(struct gguf_w *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_t; i++) {
		free(w->t[i].name);
		free(w->t[i].data);
	}
	free(w->t);
	free(w->kv.p);
	free(w);
}

void gguf_w_version(struct gguf_w *w, uint32_t version)
{
	w->version = version;
}

void gguf_w_alignment(struct gguf_w *w, uint32_t alignment)
{
	w->alignment = alignment;
	gguf_w_u32(w, "general.alignment", alignment);
}

static void key(struct gguf_w *w, const char *k, uint32_t type)
{
	put_str(&w->kv, k, strlen(k));
	put_le(&w->kv, type, 4);
	w->n_kv++;
}

void gguf_w_u32(struct gguf_w *w, const char *k, uint32_t v)
{
	key(w, k, ALLM_GGUF_U32);
	put_le(&w->kv, v, 4);
}

void gguf_w_i32(struct gguf_w *w, const char *k, int32_t v)
{
	key(w, k, ALLM_GGUF_I32);
	put_le(&w->kv, (uint32_t)v, 4);
}

void gguf_w_u64(struct gguf_w *w, const char *k, uint64_t v)
{
	key(w, k, ALLM_GGUF_U64);
	put_le(&w->kv, v, 8);
}

void gguf_w_f32(struct gguf_w *w, const char *k, float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	key(w, k, ALLM_GGUF_F32);
	put_le(&w->kv, u, 4);
}

void gguf_w_bool(struct gguf_w *w, const char *k, bool v)
{
	key(w, k, ALLM_GGUF_BOOL);
	put_le(&w->kv, v, 1);
}

void gguf_w_str(struct gguf_w *w, const char *k, const char *s)
{
	key(w, k, ALLM_GGUF_STRING);
	put_str(&w->kv, s, strlen(s));
}

void gguf_w_arr_str(struct gguf_w *w, const char *k, const char *const *s, size_t n)
{
	key(w, k, ALLM_GGUF_ARRAY);
	put_le(&w->kv, ALLM_GGUF_STRING, 4);
	put_le(&w->kv, n, 8);
	for (size_t i = 0; i < n; i++)
		put_str(&w->kv, s[i], strlen(s[i]));
}

void gguf_w_arr_i32(struct gguf_w *w, const char *k, const int32_t *v, size_t n)
{
	key(w, k, ALLM_GGUF_ARRAY);
	put_le(&w->kv, ALLM_GGUF_I32, 4);
	put_le(&w->kv, n, 8);
	for (size_t i = 0; i < n; i++)
		put_le(&w->kv, (uint32_t)v[i], 4);
}

void gguf_w_arr_f32(struct gguf_w *w, const char *k, const float *v, size_t n)
{
	key(w, k, ALLM_GGUF_ARRAY);
	put_le(&w->kv, ALLM_GGUF_F32, 4);
	put_le(&w->kv, n, 8);
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &v[i], 4);
		put_le(&w->kv, u, 4);
	}
}

void gguf_w_raw(struct gguf_w *w, const char *k, uint32_t type, const void *bytes, size_t n)
{
	key(w, k, type);
	put(&w->kv, bytes, n);
}

void gguf_w_tensor(struct gguf_w *w, const char *name, uint32_t type, uint32_t n_dims,
		   const int64_t *ne, const void *data, size_t nbytes)
{
	w->t = realloc(w->t, (w->n_t + 1) * sizeof(*w->t));
	struct wtensor *t = &w->t[w->n_t++];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	t->type = type;
	t->n_dims = n_dims;
	for (uint32_t d = 0; d < n_dims && d < 8; d++)
		t->ne[d] = ne[d];
	t->data = malloc(nbytes ? nbytes : 1);
	memcpy(t->data, data, nbytes);
	t->nbytes = nbytes;
}

/* --- ggml's reference quantizers (ggml-quants.c quantize_row_*_ref) --------- */

static void put_f16(uint8_t *p, float f)
{
	uint16_t h = allm_f32_to_f16(f);
	p[0] = (uint8_t)h;
	p[1] = (uint8_t)(h >> 8);
}

static float get_f16(const uint8_t *p)
{
	return allm_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* Q4_K and Q6_K, 256 values a block, by a plain rule (not ggml's iterative search,
 * whose bytes nothing here compares against): a 32-value sub-block of Q4_K spans
 * [min(0, lo), hi] in 15 steps, its step and -min as 6-bit multiples of two f16
 * super-scales; a 16-value sub-block of Q6_K is its largest |x| / 31 per step, as an
 * 8-bit multiple of one f16 super-scale. Layouts as engined/model/gguf-dequant.c
 * documents them (checked against gguf-py by test-gguf-blocks). */
static int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static size_t quantize_k(uint32_t type, const float *x, int64_t n, uint8_t *o)
{
	uint8_t *start = o;
	for (int64_t b = 0; b < n / 256; b++, x += 256) {
		if (type == ALLM_GGML_Q4_K) {
			float step[8], neg[8], smax = 0, nmax = 0;
			for (int j = 0; j < 8; j++) {
				float lo = 0, hi = x[32 * j];
				for (int l = 0; l < 32; l++) {
					lo = fminf(lo, x[32 * j + l]);
					hi = fmaxf(hi, x[32 * j + l]);
				}
				step[j] = (hi - lo) / 15;
				neg[j] = -lo;
				smax = fmaxf(smax, step[j]);
				nmax = fmaxf(nmax, neg[j]);
			}
			put_f16(o, smax / 63);
			put_f16(o + 2, nmax / 63);
			float d = get_f16(o), dmin = get_f16(o + 2);
			uint8_t *sc = o + 4, *qs = o + 16;
			memset(sc, 0, 12);
			for (int j = 0; j < 8; j++) {
				int a = d ? clampi((int)lroundf(step[j] / d), 0, 63) : 0;
				int m = dmin ? clampi((int)lroundf(neg[j] / dmin), 0, 63) : 0;
				if (j < 4) {
					sc[j] |= (uint8_t)a;
					sc[j + 4] |= (uint8_t)m;
				} else {
					sc[j + 4] = (uint8_t)((a & 15) | (m & 15) << 4);
					sc[j - 4] |= (uint8_t)((a >> 4) << 6);
					sc[j] |= (uint8_t)((m >> 4) << 6);
				}
				float dj = d * (float)a, mj = dmin * (float)m;
				for (int l = 0; l < 32; l++) {
					int q = dj ? clampi((int)lroundf((x[32 * j + l] + mj) / dj), 0, 15) : 0;
					uint8_t *p = &qs[32 * (j / 2) + l];
					*p = (uint8_t)(j % 2 ? (*p & 15) | q << 4 : q);
				}
			}
			o += 144;
		} else {
			float scale[16], smax = 0;
			for (int j = 0; j < 16; j++) {
				float amax = 0;
				for (int l = 0; l < 16; l++)
					amax = fmaxf(amax, fabsf(x[16 * j + l]));
				scale[j] = amax / 31;
				smax = fmaxf(smax, scale[j]);
			}
			put_f16(o + 208, smax / 127);
			float d = get_f16(o + 208);
			uint8_t *ql = o, *qh = o + 128;
			memset(o, 0, 192);
			for (int j = 0; j < 16; j++) {
				int a = d ? clampi((int)lroundf(scale[j] / d), 0, 127) : 0;
				o[192 + j] = (uint8_t)(int8_t)a;
				for (int l = 0; l < 16; l++) {
					int i = 16 * j + l, h = i / 128, k = i % 128 / 32, c = i % 32;
					int q = a ? clampi((int)lroundf(x[i] / (d * (float)a)), -32, 31) + 32 : 32;
					ql[64 * h + c + 32 * (k % 2)] |= (uint8_t)(k < 2 ? q & 15 : (q & 15) << 4);
					qh[32 * h + c] |= (uint8_t)((q >> 4) << (2 * k));
				}
			}
			o += 210;
		}
	}
	return (size_t)(o - start);
}

size_t gguf_quantize(uint32_t type, const float *x, int64_t n, uint8_t *out)
{
	uint8_t *o = out;
	if (type == ALLM_GGML_Q4_K || type == ALLM_GGML_Q6_K)
		return quantize_k(type, x, n, out);
	for (int64_t b = 0; b < n / 32; b++, x += 32) {
		if (type == ALLM_GGML_Q8_0) {
			float amax = 0;
			for (int j = 0; j < 32; j++)
				amax = fmaxf(amax, fabsf(x[j]));
			float d = amax / 127, id = d ? 1 / d : 0;
			put_f16(o, d);
			for (int j = 0; j < 32; j++)
				o[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
			o += 34;
		} else if (type == ALLM_GGML_Q4_0) {
			float amax = 0, max = 0;
			for (int j = 0; j < 32; j++)
				if (fabsf(x[j]) > amax) {
					amax = fabsf(x[j]);
					max = x[j];
				}
			float d = max / -8, id = d ? 1 / d : 0;
			put_f16(o, d);
			for (int j = 0; j < 16; j++) {
				int x0 = (int)(int8_t)(x[j] * id + 8.5f), x1 = (int)(int8_t)(x[16 + j] * id + 8.5f);
				o[2 + j] = (uint8_t)((x0 < 15 ? x0 : 15) | (x1 < 15 ? x1 : 15) << 4);
			}
			o += 18;
		} else if (type == ALLM_GGML_Q5_0) {
			float amax = 0, max = 0;
			for (int j = 0; j < 32; j++)
				if (fabsf(x[j]) > amax) {
					amax = fabsf(x[j]);
					max = x[j];
				}
			float d = max / -16, id = d ? 1 / d : 0;
			uint32_t qh = 0;
			put_f16(o, d);
			for (int j = 0; j < 16; j++) {
				int x0 = (int)(int8_t)(x[j] * id + 16.5f), x1 = (int)(int8_t)(x[16 + j] * id + 16.5f);
				x0 = x0 < 31 ? x0 : 31;
				x1 = x1 < 31 ? x1 : 31;
				o[6 + j] = (uint8_t)((x0 & 15) | (x1 & 15) << 4);
				qh |= (uint32_t)((x0 & 16) >> 4) << j | (uint32_t)((x1 & 16) >> 4) << (j + 16);
			}
			for (int j = 0; j < 4; j++)
				o[2 + j] = (uint8_t)(qh >> (8 * j));
			o += 22;
		} else { /* Q4_1 */
			float min = x[0], max = x[0];
			for (int j = 1; j < 32; j++) {
				min = fminf(min, x[j]);
				max = fmaxf(max, x[j]);
			}
			float d = (max - min) / 15, id = d ? 1 / d : 0;
			put_f16(o, d);
			put_f16(o + 2, min);
			for (int j = 0; j < 16; j++) {
				int x0 = (int)(int8_t)((x[j] - min) * id + 0.5f);
				int x1 = (int)(int8_t)((x[16 + j] - min) * id + 0.5f);
				o[4 + j] = (uint8_t)((x0 < 15 ? x0 : 15) | (x1 < 15 ? x1 : 15) << 4);
			}
			o += 20;
		}
	}
	return (size_t)(o - out);
}

void gguf_dequantize_ref(uint32_t type, const uint8_t *b, int64_t n, float *y)
{
	for (int64_t k = 0; k < n / 32; k++, y += 32) {
		if (type == ALLM_GGML_Q8_0) {
			for (int j = 0; j < 32; j++)
				y[j] = get_f16(b) * (float)(int8_t)b[2 + j];
			b += 34;
		} else if (type == ALLM_GGML_Q4_0) {
			for (int j = 0; j < 16; j++) {
				y[j] = get_f16(b) * (float)((b[2 + j] & 15) - 8);
				y[16 + j] = get_f16(b) * (float)((b[2 + j] >> 4) - 8);
			}
			b += 18;
		} else {
			for (int j = 0; j < 16; j++) {
				y[j] = (float)(b[4 + j] & 15) * get_f16(b) + get_f16(b + 2);
				y[16 + j] = (float)(b[4 + j] >> 4) * get_f16(b) + get_f16(b + 2);
			}
			b += 20;
		}
	}
}

void gguf_w_tensor_f32(struct gguf_w *w, const char *name, uint32_t type, uint32_t n_dims,
		       const int64_t *ne, const float *v)
{
	int64_t n = 1;
	for (uint32_t d = 0; d < n_dims; d++)
		n *= ne[d];
	uint8_t *out = malloc((size_t)n * 4 + 64);
	size_t nb;
	switch (type) {
	case ALLM_GGML_F32: nb = (size_t)n * 4; memcpy(out, v, nb); break;
	case ALLM_GGML_F16: nb = (size_t)n * 2; allm_from_f32(out, v, ALLM_DTYPE_F16, (size_t)n); break;
	case ALLM_GGML_BF16: nb = (size_t)n * 2; allm_from_f32(out, v, ALLM_DTYPE_BF16, (size_t)n); break;
	default: nb = gguf_quantize(type, v, n, out); break;
	}
	gguf_w_tensor(w, name, type, n_dims, ne, out, nb);
	free(out);
}

/* --- serializing -------------------------------------------------------------- */

static size_t pad_to(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

uint8_t *gguf_w_bytes(const struct gguf_w *w, size_t *ret_size)
{
	struct buf b = {0};
	put(&b, "GGUF", 4);
	put_le(&b, w->version, 4);
	put_le(&b, w->n_t, 8);
	put_le(&b, w->n_kv, 8);
	put(&b, w->kv.p, w->kv.n);
	size_t off = 0;
	for (size_t i = 0; i < w->n_t; i++) {
		const struct wtensor *t = &w->t[i];
		put_str(&b, t->name, strlen(t->name));
		put_le(&b, t->n_dims, 4);
		for (uint32_t d = 0; d < t->n_dims; d++)
			put_le(&b, (uint64_t)t->ne[d], 8);
		put_le(&b, t->type, 4);
		put_le(&b, off, 8);
		off = pad_to(off + t->nbytes, w->alignment);
	}
	static const uint8_t zero[256];
	while (b.n % w->alignment)
		put(&b, zero, ALLM_MIN(sizeof(zero), pad_to(b.n, w->alignment) - b.n));
	for (size_t i = 0; i < w->n_t; i++) {
		put(&b, w->t[i].data, w->t[i].nbytes);
		if (i + 1 < w->n_t)
			while (b.n % w->alignment)
				put(&b, zero, ALLM_MIN(sizeof(zero), pad_to(b.n, w->alignment) - b.n));
	}
	*ret_size = b.n;
	return b.p;
}

int gguf_w_save(const struct gguf_w *w, const char *path)
{
	size_t n;
	uint8_t *p = gguf_w_bytes(w, &n);
	FILE *f = fopen(path, "wb");
	int r = f && fwrite(p, 1, n, f) == n ? 0 : -1;
	if (f && fclose(f))
		r = -1;
	free(p);
	return r;
}

/* --- converting a Hugging Face Llama directory --------------------------------- */

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* llama.cpp's tensor names for the Hugging Face ones (convert_hf_to_gguf.py). */
static const char *const name_map[][2] = {
	{"input_layernorm.weight", "attn_norm.weight"},
	{"self_attn.q_proj.weight", "attn_q.weight"},
	{"self_attn.k_proj.weight", "attn_k.weight"},
	{"self_attn.v_proj.weight", "attn_v.weight"},
	{"self_attn.o_proj.weight", "attn_output.weight"},
	{"self_attn.q_proj.bias", "attn_q.bias"},
	{"self_attn.k_proj.bias", "attn_k.bias"},
	{"self_attn.v_proj.bias", "attn_v.bias"},
	{"self_attn.o_proj.bias", "attn_output.bias"},
	{"post_attention_layernorm.weight", "ffn_norm.weight"},
	{"mlp.gate_proj.weight", "ffn_gate.weight"},
	{"mlp.up_proj.weight", "ffn_up.weight"},
	{"mlp.down_proj.weight", "ffn_down.weight"},
	{"mlp.gate_proj.bias", "ffn_gate.bias"},
	{"mlp.up_proj.bias", "ffn_up.bias"},
	{"mlp.down_proj.bias", "ffn_down.bias"},
};

/* llama.cpp's permute(): rows (n_head, 2, d/2) -> (n_head, d/2, 2). */
static void permute_rows(float *v, int64_t rows, int64_t cols, int64_t n_head)
{
	int64_t d = rows / n_head;
	float *o = malloc((size_t)(rows * cols) * sizeof(float));
	for (int64_t h = 0; h < n_head; h++)
		for (int64_t j = 0; j < 2; j++)
			for (int64_t i = 0; i < d / 2; i++)
				memcpy(o + (h * d + 2 * i + j) * cols, v + (h * d + j * (d / 2) + i) * cols,
				       (size_t)cols * sizeof(float));
	memcpy(v, o, (size_t)(rows * cols) * sizeof(float));
	free(o);
}

static int write_tensors(struct gguf_w *w, const char *dir, const struct allm_model_config *c,
			 const struct gguf_convert_opts *o, char *err, size_t errlen)
{
	struct allm_st_index *idx = NULL;
	struct allm_err e = {{0}};
	if (allm_st_open_dir(dir, &idx, &e))
		return fail(err, errlen, "%s", e.msg);
	int r = 0;
	for (int32_t i = 0; i < idx->n_tensors && !r; i++) {
		const struct allm_st_tensor *t = &idx->tensors[i];
		char name[160];
		int layer = -1, n = 0;
		const char *hf = t->name;
		if (!strcmp(hf, "model.embed_tokens.weight"))
			snprintf(name, sizeof(name), "token_embd.weight");
		else if (!strcmp(hf, "model.norm.weight"))
			snprintf(name, sizeof(name), "output_norm.weight");
		else if (!strcmp(hf, "lm_head.weight"))
			snprintf(name, sizeof(name), "output.weight");
		else if (sscanf(hf, "model.layers.%d.%n", &layer, &n) == 1 && n) {
			name[0] = 0;
			for (size_t k = 0; k < sizeof(name_map) / sizeof(name_map[0]); k++)
				if (!strcmp(hf + n, name_map[k][0]))
					snprintf(name, sizeof(name), "blk.%d.%s", layer, name_map[k][1]);
			if (!name[0]) {
				r = fail(err, errlen, "%s: no GGUF name for %s", dir, hf);
				break;
			}
		} else {
			r = fail(err, errlen, "%s: no GGUF name for %s", dir, hf);
			break;
		}
		int64_t elems = t->n_dims == 2 ? t->shape[0] * t->shape[1] : t->shape[0];
		void *raw = malloc(t->nbytes);
		float *v = malloc((size_t)elems * sizeof(float));
		struct allm_st_read rd = {t, raw};
		if (allm_st_read_tensors(idx, &rd, 1, false, NULL, NULL, &e)) {
			r = fail(err, errlen, "%s", e.msg);
		} else {
			allm_to_f32(v, raw, t->dtype, (size_t)elems);
			int64_t ne[2] = {t->n_dims == 2 ? t->shape[1] : t->shape[0], t->n_dims == 2 ? t->shape[0] : 1};
			bool q = strstr(name, "attn_q.") != NULL, k = strstr(name, "attn_k.") != NULL;
			if (!o->no_permute && (q || k))
				permute_rows(v, t->n_dims == 2 ? t->shape[0] : t->shape[0],
					     t->n_dims == 2 ? t->shape[1] : 1, q ? c->n_heads : c->n_kv_heads);
			uint32_t type = t->n_dims == 2 ? o->type : ALLM_GGML_F32;
			for (size_t oi = ALLM_ARRAY_SIZE(o->over); t->n_dims == 2 && oi-- > 0;)
				if (o->over[oi].part && strstr(name, o->over[oi].part))
					type = o->over[oi].type;
			uint32_t block = 1, bytes = 4;
			allm_gguf_ttype_info(type, &block, &bytes);
			if (ne[0] % block) /* llama.cpp falls back too */
				type = ALLM_GGML_F32;
			gguf_w_tensor_f32(w, name, type, (uint32_t)t->n_dims, ne, v);
		}
		free(raw);
		free(v);
	}
	allm_st_close(idx);
	return r;
}

/* tokenizer.json -> tokenizer.ggml.*: tokens by id, types, merges (byte-level) or
 * scores (SentencePiece-style: a piece made by merge r scores -r, others far below). */
int gguf_w_tokenizer(struct gguf_w *w, const char *tokenizer_json, const char *tokenizer_config,
		     int32_t n_vocab, int32_t bos, int32_t eos, const char *pre, char *err,
		     size_t errlen)
{
	json_t *root = json_load_file(tokenizer_json, 0, NULL);
	if (!root)
		return fail(err, errlen, "%s: cannot read", tokenizer_json);
	json_t *model = json_object_get(root, "model"), *vocab = json_object_get(model, "vocab");
	json_t *merges = json_object_get(model, "merges"), *added = json_object_get(root, "added_tokens");
	/* byte-level BPE decodes with ByteLevel; SentencePiece-style with a Sequence */
	const char *dt = json_string_value(json_object_get(json_object_get(root, "decoder"), "type"));
	bool bytelevel = dt && !strcmp(dt, "ByteLevel");
	const char *k;
	json_t *v;
	size_t i;
	int32_t n = n_vocab;
	if (n <= 0) { /* the largest id + 1 */
		json_object_foreach(vocab, k, v)
			n = (int32_t)ALLM_MAX(n, json_integer_value(v) + 1);
		json_array_foreach(added, i, v)
			n = (int32_t)ALLM_MAX(n, json_integer_value(json_object_get(v, "id")) + 1);
	}
	char **tok = calloc((size_t)n, sizeof(*tok));
	int32_t *type = calloc((size_t)n, sizeof(*type));
	float *score = calloc((size_t)n, sizeof(*score));
	json_object_foreach(vocab, k, v) {
		json_int_t id = json_integer_value(v);
		if (id >= 0 && id < n) {
			tok[id] = strdup(k);
			type[id] = !bytelevel && strlen(k) == 6 && !strncmp(k, "<0x", 3) ? 6 : 1;
			score[id] = -1e9f;
		}
	}
	json_array_foreach(added, i, v) {
		json_int_t id = json_integer_value(json_object_get(v, "id"));
		if (id >= 0 && id < n) {
			free(tok[id]);
			tok[id] = strdup(json_string_value(json_object_get(v, "content")));
			type[id] = json_is_true(json_object_get(v, "special")) ? 3 : 4;
		}
	}
	const char *unk = json_string_value(json_object_get(model, "unk_token"));
	for (int32_t id = 0; id < n; id++) {
		char pad[32];
		if (!tok[id]) { /* llama.cpp names the holes of a vocabulary */
			snprintf(pad, sizeof(pad), "[PAD%d]", id);
			tok[id] = strdup(pad);
			type[id] = 5;
		}
		if (unk && !strcmp(tok[id], unk))
			type[id] = 2;
	}
	size_t nm = json_array_size(merges);
	char **ms = calloc(nm + 1, sizeof(*ms));
	json_array_foreach(merges, i, v) {
		char *s;
		if (json_is_string(v)) {
			s = strdup(json_string_value(v));
		} else {
			const char *a = json_string_value(json_array_get(v, 0)), *b = json_string_value(json_array_get(v, 1));
			s = malloc(strlen(a) + strlen(b) + 2);
			sprintf(s, "%s %s", a, b);
		}
		ms[i] = s;
		/* the merged piece: "a b" -> "ab" */
		char *cat = malloc(strlen(s) + 1), *sp = strchr(s, ' ');
		memcpy(cat, s, (size_t)(sp - s));
		strcpy(cat + (sp - s), sp + 1);
		json_t *id = json_object_get(vocab, cat);
		if (id && json_integer_value(id) < n && score[json_integer_value(id)] < -1e8f)
			score[json_integer_value(id)] = -(float)i;
		free(cat);
	}
	gguf_w_str(w, "tokenizer.ggml.model", bytelevel ? "gpt2" : "llama");
	if (bytelevel)
		gguf_w_str(w, "tokenizer.ggml.pre", pre ? pre : "default");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, (size_t)n);
	gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, (size_t)n);
	if (bytelevel)
		gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)ms, nm);
	else
		gguf_w_arr_f32(w, "tokenizer.ggml.scores", score, (size_t)n);
	if (bos >= 0)
		gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
	if (eos >= 0)
		gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
	if (!bytelevel) {
		for (int32_t id = 0; id < n; id++)
			if (type[id] == 2)
				gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)id);
		gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", true);
	}
	json_t *tc = tokenizer_config ? json_load_file(tokenizer_config, 0, NULL) : NULL;
	json_t *ab = json_object_get(tc, "add_bos_token"), *ct = json_object_get(tc, "chat_template");
	/* no add_bos_token: a post-processor that starts with a special token adds BOS */
	json_t *pp = json_object_get(root, "post_processor"), *sub;
	json_array_foreach(json_object_get(pp, "processors"), i, sub) /* a Sequence */
		if (json_object_get(sub, "single"))
			pp = sub;
	json_t *first = json_object_get(json_array_get(json_object_get(pp, "single"), 0), "SpecialToken");
	bool add_bos = ab ? json_is_true(ab) : first != NULL;
	if (first && bos < 0) {
		const char *name = json_string_value(json_object_get(first, "id"));
		json_t *ids = json_object_get(json_object_get(json_object_get(pp, "special_tokens"), name), "ids");
		bos = (int32_t)json_integer_value(json_array_get(ids, 0));
		gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
	}
	gguf_w_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
	if (json_is_string(ct))
		gguf_w_str(w, "tokenizer.chat_template", json_string_value(ct));
	json_decref(tc);
	for (int32_t id = 0; id < n; id++)
		free(tok[id]);
	for (size_t m = 0; m < nm; m++)
		free(ms[m]);
	free(ms);
	free(tok);
	free(type);
	free(score);
	json_decref(root);
	return 0;
}

int gguf_convert_dir(const char *dir, const char *out, const struct gguf_convert_opts *o,
		     char *err, size_t errlen)
{
	struct allm_model_config c;
	struct allm_err e = {{0}};
	struct gguf_convert_opts def = {0};
	if (!o)
		o = &def;
	if (allm_model_config_load(dir, &c, &e))
		return fail(err, errlen, "%s", e.msg);
	if (c.arch != ALLM_ARCH_LLAMA)
		return fail(err, errlen, "%s: not a Llama model", dir);
	struct gguf_w *w = gguf_w_new();
	gguf_w_str(w, "general.architecture", "llama");
	gguf_w_str(w, "general.name", dir);
	gguf_w_u32(w, "llama.context_length", (uint32_t)c.max_pos);
	gguf_w_u32(w, "llama.embedding_length", (uint32_t)c.hidden);
	gguf_w_u32(w, "llama.feed_forward_length", (uint32_t)c.intermediate);
	gguf_w_u32(w, "llama.block_count", (uint32_t)c.n_layers);
	gguf_w_u32(w, "llama.attention.head_count", (uint32_t)c.n_heads);
	gguf_w_u32(w, "llama.attention.head_count_kv", (uint32_t)c.n_kv_heads);
	gguf_w_f32(w, "llama.rope.freq_base", c.rope_theta);
	gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", c.norm_eps);
	gguf_w_u32(w, "llama.rope.dimension_count", (uint32_t)c.head_dim);
	if (c.head_dim * c.n_heads != c.hidden)
		gguf_w_u32(w, "llama.attention.key_length", (uint32_t)c.head_dim);
	gguf_w_u32(w, "llama.vocab_size", (uint32_t)c.vocab_size);
	gguf_w_u32(w, "general.file_type", o->type == ALLM_GGML_F32 ? 0 : 1);
	char tj[4096], tc[4096];
	snprintf(tj, sizeof(tj), "%s/tokenizer.json", dir);
	snprintf(tc, sizeof(tc), "%s/tokenizer_config.json", dir);
	int r = gguf_w_tokenizer(w, tj, tc, c.vocab_size, c.bos_id, c.n_eos ? c.eos_ids[0] : -1, o->pre,
				 err, errlen);
	if (!r)
		r = write_tensors(w, dir, &c, o, err, errlen);
	if (!r && gguf_w_save(w, out))
		r = fail(err, errlen, "%s: cannot write", out);
	gguf_w_free(w);
	return r;
}
