#include "model-writer.h"

#include "model.h"
#include "safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int mkdir_p(const char *dir, struct allm_err *err)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", dir);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) && errno != EEXIST)
			return allm_err_set(err, -errno, "mkdir %s: %s", buf, strerror(errno));
		*p = '/';
	}
	if (mkdir(buf, 0755) && errno != EEXIST)
		return allm_err_set(err, -errno, "mkdir %s: %s", buf, strerror(errno));
	return 0;
}

/* The file tensor that starts at specs[*i] into t, as transformers saves it: the
 * slices of a fused matrix (Phi-3) concatenated (*i moves to the last of them), a
 * norm of a family that stores w - offset (Gemma) shifted; both from a copy in
 * *ret_buf, everything else straight from the weights. */
static int file_tensor(const struct allm_model *m, const struct allm_weight_spec *specs, size_t n,
		       size_t *i, struct allm_st_out *t, void **ret_buf, struct allm_err *err)
{
	const struct allm_weight_spec *s = &specs[*i];
	float off = allm_arch_describe(m->cfg.arch)->hf_norm_offset;
	size_t es = allm_dtype_size(m->wdtype);
	t->name = s->name;
	t->dtype = m->wdtype;
	t->n_dims = s->n_dims;
	t->shape[0] = s->src_rows ? s->src_rows : s->shape[0];
	t->shape[1] = s->shape[1];
	t->data = *s->slot;
	if (s->src_rows) {
		size_t row = (size_t)s->shape[1] * es, at = 0;
		char *b = allm_malloc((size_t)s->src_rows * row);
		if (!b)
			return allm_err_set(err, -ENOMEM, "out of memory");
		for (; *i < n && specs[*i].src_rows && !strcmp(specs[*i].name, s->name); (*i)++) {
			memcpy(b + at, *specs[*i].slot, (size_t)specs[*i].shape[0] * row);
			at += (size_t)specs[*i].shape[0] * row;
		}
		(*i)--;
		t->data = *ret_buf = b;
	} else if (s->kind == ALLM_WKIND_NORM && off != 0) {
		size_t ne = allm_spec_elems(s);
		float *f = allm_malloc(ne * sizeof(float));
		void *b = allm_malloc(ne * es);
		if (!f || !b) {
			allm_free(f);
			allm_free(b);
			return allm_err_set(err, -ENOMEM, "out of memory");
		}
		allm_to_f32(f, *s->slot, m->wdtype, ne);
		for (size_t e = 0; e < ne; e++)
			f[e] -= off;
		allm_from_f32(b, f, m->wdtype, ne);
		allm_free(f);
		t->data = *ret_buf = b;
	}
	return 0;
}

static int write_shards(struct allm_model *m, const struct allm_weight_spec *specs, size_t n,
			const struct allm_model_write_opts *o, const char *dir,
			struct allm_err *err)
{
	static const char *const meta[] = {"format", "pt", "generator", "allm-mkmodel"};
	int32_t shards = o->n_shards > 1 ? o->n_shards : 1;
	struct allm_st_out *outs = allm_calloc(n, sizeof(*outs));
	void **bufs = allm_calloc(n, sizeof(*bufs)); /* the tensors written from copies */
	json_t *wm = json_object();
	char path[4096], fname[128];
	int r = 0;
	if (!outs || !bufs) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	size_t n_out = 0;
	for (size_t i = 0; i < n; i++) {
		struct allm_st_out *t = &outs[n_out];
		if ((r = file_tensor(m, specs, n, &i, t, &bufs[n_out], err)))
			goto out;
		n_out++;
	}
	n = n_out;
	for (int32_t s = 0; s < shards; s++) {
		size_t b = n * s / shards, e = n * (s + 1) / shards;
		if (shards == 1)
			snprintf(fname, sizeof(fname), "model.safetensors");
		else
			snprintf(fname, sizeof(fname), "model-%05d-of-%05d.safetensors", s + 1, shards);
		snprintf(path, sizeof(path), "%s/%s", dir, fname);
		if ((r = allm_st_write_file(path, outs + b, e - b, meta, 2, err)))
			goto out;
		for (size_t i = b; i < e; i++)
			json_object_set_new(wm, outs[i].name, json_string(fname));
	}
	if (shards > 1) {
		json_t *idx = json_pack("{s:{s:I}, s:O}", "metadata", "total_size",
					(json_int_t)m->arena_bytes, "weight_map", wm);
		snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
		if (json_dump_file(idx, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
			r = allm_err_set(err, -EIO, "cannot write %s", path);
		json_decref(idx);
	}
out:
	json_decref(wm);
	for (size_t i = 0; bufs && i < n; i++)
		allm_free(bufs[i]);
	allm_free(bufs);
	allm_free(outs);
	return r;
}

int allm_model_write_dir(const struct allm_model_config *cfg,
			 const struct allm_model_write_opts *o, const char *dir,
			 struct allm_err *err)
{
	struct allm_backend_opts bo = {.reference = true};
	allm_backend_t *be = NULL;
	struct allm_model *m = NULL;
	struct allm_weight_spec *specs = NULL;
	struct allm_model_config c = *cfg;
	size_t n = 0;
	int r;

	c.file_dtype = o->dtype;
	if ((r = mkdir_p(dir, err)) || (r = allm_backend_cpu_create(&bo, &be, err)))
		goto out;
	struct allm_model_load_opts lo = {.wdtype = o->dtype};
	if ((r = allm_model_dummy(be, &c, o->seed, &lo, &m, err)))
		goto out;
	if ((r = allm_model_weight_specs(m, &specs, &n))) {
		allm_err_set(err, r, "out of memory");
		goto out;
	}
	if ((r = write_shards(m, specs, n, o, dir, err)) ||
	    (r = allm_model_config_save(&c, dir, err)) ||
	    (r = allm_tokenizer_write_dir(c.vocab_size, dir, err)))
		goto out;
out:
	allm_free(specs);
	allm_model_free(m);
	allm_backend_destroy(be);
	return r;
}

/* Pieces the generated tokenizer learns, most useful first. Each is built from
 * left to right by merges, so every merge's parts exist before it. */
static const char *const common_words[] = {
	"the", "and", "was", "to", "a", "he", "she", "it", "of", "in", "that", "is", "for",
	"on", "with", "they", "his", "her", "said", "you", "at", "but", "day", "one", "big",
	"little", "time", "once", "upon", "there", "were", "had", "very", "happy", "play",
	"friend", "saw", "went", "mom", "dog", "cat", "tree", "sun", "ball", "girl", "boy",
	"named", "loved", "wanted", "could", "not", "be", "so", "what", "all", "we", "are",
	"this", "have", "from", "by", "an", "or", "as", "up", "out", "do", "can", "like",
	"go", "see", "get", "make", "know", "will", "how", "about", "if", "my", "your", "into",
	"then", "them", "some", "when", "would", "which", "their", "time", "people", "new",
	"engine", "serving", "model", "token", "memory", "cache", "swap", "block", "fair",
};

struct vocab_b {
	json_t *vocab; /* piece -> id */
	json_t *merges; /* ["a b", ...] */
	int32_t next, cap;
};

static bool vb_has(struct vocab_b *v, const char *piece)
{
	return json_object_get(v->vocab, piece) != NULL;
}

static bool vb_add(struct vocab_b *v, const char *piece)
{
	if (vb_has(v, piece))
		return true;
	if (v->next >= v->cap)
		return false;
	json_object_set_new(v->vocab, piece, json_integer(v->next++));
	return true;
}

/* Builds "▁word" left to right: (▁,w) (▁w,o) ... adding pieces and merges. */
static void vb_word(struct vocab_b *v, const char *word)
{
	char cur[128] = "\xe2\x96\x81", next[128], m[256];
	for (const char *p = word; *p && v->next < v->cap; p++) {
		char ch[2] = {*p, 0};
		snprintf(next, sizeof(next), "%s%s", cur, ch);
		if (!vb_has(v, next)) {
			if (!vb_add(v, next))
				return;
			snprintf(m, sizeof(m), "%s %s", cur, ch);
			json_array_append_new(v->merges, json_string(m));
		}
		snprintf(cur, sizeof(cur), "%s", next);
	}
}

static int dump(json_t *o, const char *dir, const char *name, struct allm_err *err)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int r = json_dump_file(o, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return r ? allm_err_set(err, -EIO, "cannot write %s", path) : 0;
}

int allm_tokenizer_write_dir(int32_t vocab_size, const char *dir, struct allm_err *err)
{
	struct vocab_b v = {json_object(), json_array(), 0, vocab_size};
	char piece[16];
	int r;
	if (vocab_size < 300) {
		json_decref(v.vocab);
		json_decref(v.merges);
		return allm_err_set(err, -EINVAL, "a generated tokenizer needs vocab_size >= 300 (got %d)",
				    vocab_size);
	}
	vb_add(&v, "<unk>");
	vb_add(&v, "<s>");
	vb_add(&v, "</s>");
	for (int b = 0; b < 256; b++) {
		snprintf(piece, sizeof(piece), "<0x%02X>", b);
		vb_add(&v, piece);
	}
	vb_add(&v, "\xe2\x96\x81");
	for (const char *c = "etaoinshrdlucmfwypvbgkqjxzETAOINSHRDLUCMFWYPVBGKQJXZ.,!?'\"0123456789-:;()";
	     *c; c++) {
		char ch[2] = {*c, 0};
		vb_add(&v, ch);
	}
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(common_words) && v.next < v.cap; i++)
		vb_word(&v, common_words[i]);

	json_t *added = json_array();
	const char *specials[] = {"<unk>", "<s>", "</s>"};
	for (int i = 0; i < 3; i++)
		json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", i,
						       "content", specials[i], "single_word", 0,
						       "lstrip", 0, "rstrip", 0, "normalized", 0,
						       "special", 1));
	json_t *tok = json_pack(
		"{s:s, s:n, s:n, s:o,"
		" s:{s:s, s:[{s:s, s:s}, {s:s, s:{s:s}, s:s}]},"
		" s:n,"
		" s:{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:[], s:{s:{s:s, s:[i], s:[s]}}},"
		" s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]},"
		" s:{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}}",
		"version", "1.0", "truncation", "padding", "added_tokens", added,
		"normalizer", "type", "Sequence", "normalizers", "type", "Prepend", "prepend",
		"\xe2\x96\x81", "type", "Replace", "pattern", "String", " ", "content", "\xe2\x96\x81",
		"pre_tokenizer",
		"post_processor", "type", "TemplateProcessing", "single", "SpecialToken", "id", "<s>",
		"type_id", 0, "Sequence", "id", "A", "type_id", 0, "pair", "special_tokens", "<s>",
		"id", "<s>", "ids", 1, "tokens", "<s>",
		"decoder", "type", "Sequence", "decoders", "type", "Replace", "pattern", "String",
		"\xe2\x96\x81", "content", " ", "type", "ByteFallback", "type", "Fuse", "type", "Strip",
		"content", " ", "start", 1, "stop", 0,
		"model", "type", "BPE", "dropout", "unk_token", "continuing_subword_prefix",
		"end_of_word_suffix", "fuse_unk", 1, "byte_fallback", 1, "ignore_merges", 0, "vocab",
		v.vocab, "merges", v.merges);
	if (!tok)
		return allm_err_set(err, -ENOMEM, "cannot build tokenizer.json");
	json_object_set_new(json_object_get(tok, "model"), "unk_token", json_string("<unk>"));
	if ((r = dump(tok, dir, "tokenizer.json", err)))
		return r;
	json_t *tc = json_pack("{s:s, s:b, s:b, s:s, s:s, s:s, s:n, s:b, s:b}", "tokenizer_class",
			       "LlamaTokenizer", "add_bos_token", 1, "add_eos_token", 0, "bos_token",
			       "<s>", "eos_token", "</s>", "unk_token", "<unk>", "pad_token",
			       "clean_up_tokenization_spaces", 0, "legacy", 1);
	if ((r = dump(tc, dir, "tokenizer_config.json", err)))
		return r;
	return dump(json_pack("{s:s, s:s, s:s}", "bos_token", "<s>", "eos_token", "</s>",
			      "unk_token", "<unk>"),
		    dir, "special_tokens_map.json", err);
}
