/* Description: allm_model_load on the CPU backend: good f32/f16/bf16/sharded models load alike, and each kind of bad model directory fails with a message naming the file or field. */
#include "backend.h"
#include "model-writer.h"
#include "model.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test-check.h"

static char base[256];
static allm_backend_t *be;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void path_of(char *buf, size_t len, const char *dir, const char *name)
{
	snprintf(buf, len, "%s/%s/%s", base, dir, name);
}

static void rm_dir(const char *dir)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", base, dir);
	DIR *d = opendir(p);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char f[1400];
		snprintf(f, sizeof(f), "%s/%s", p, e->d_name);
		unlink(f);
	}
	closedir(d);
	rmdir(p);
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	ssize_t n;
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (in < 0 || out < 0)
		die(from);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			die(to);
	close(in);
	close(out);
}

/* A fresh copy of dir `from` named `to` (flat directories only). */
static void copy_dir(const char *from, const char *to)
{
	char src[1024], dst[1024];
	snprintf(src, sizeof(src), "%s/%s", base, from);
	snprintf(dst, sizeof(dst), "%s/%s", base, to);
	rm_dir(to);
	if (mkdir(dst, 0755))
		die(dst);
	DIR *d = opendir(src);
	struct dirent *e;
	if (!d)
		die(src);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char a[1400], b[1400];
		snprintf(a, sizeof(a), "%s/%s", src, e->d_name);
		snprintf(b, sizeof(b), "%s/%s", dst, e->d_name);
		copy_file(a, b);
	}
	closedir(d);
}

static int write_model(const char *name, const struct allm_model_config *c, enum allm_dtype dt,
		       int shards, uint64_t seed)
{
	char dir[1024];
	struct allm_err err = {{0}};
	struct allm_model_write_opts o = {.seed = seed, .dtype = dt, .n_shards = shards};
	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	int r = allm_model_write_dir(c, &o, dir, &err);
	CHECK(r == 0, "writing %s: %s", name, err.msg);
	return r;
}

static struct allm_model *load_ok(const char *name, const char *what)
{
	char dir[1024];
	struct allm_err err = {{0}};
	struct allm_model *m = NULL;
	struct allm_model_load_opts lo = {.wdtype = ALLM_DTYPE_F32};
	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	int r = allm_model_load(be, dir, &lo, &m, &err);
	CHECK(r == 0 && m, "%s: load failed: %d %s", what, r, err.msg);
	return r ? NULL : m;
}

/* Loads dir and expects a failure whose message holds every one of words[]
 * (NULL-terminated); also checks a failed load frees what it allocated. */
static void load_bad(const char *name, const char *what, const char *const *words)
{
	char dir[1024];
	struct allm_err err = {{0}};
	struct allm_model *m = (struct allm_model *)0x1;
	struct allm_model_load_opts lo = {.wdtype = ALLM_DTYPE_F32};
	size_t mem0 = allm_mem_in_use();
	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	int r = allm_model_load(be, dir, &lo, &m, &err);
	CHECK(r < 0, "%s: load returned %d, want a negative errno", what, r);
	CHECK(m == (struct allm_model *)0x1, "%s: a failed load wrote *ret", what);
	CHECK(err.msg[0], "%s: no error message", what);
	for (int i = 0; words[i]; i++)
		CHECK(strstr(err.msg, words[i]), "%s: message does not name '%s': %s", what, words[i],
		      err.msg);
	CHECK(allm_mem_in_use() == mem0, "%s: a failed load leaked %zd bytes", what,
	      (ssize_t)(allm_mem_in_use() - mem0));
	if (r == 0 && m != (struct allm_model *)0x1)
		allm_model_free(m);
	else
		printf("  %-28s -> %s\n", what, err.msg);
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* config.json of dir, edited by fn. */
static void edit_config(const char *dir, void (*fn)(json_t *))
{
	char p[1024];
	json_error_t je;
	path_of(p, sizeof(p), dir, "config.json");
	json_t *o = json_load_file(p, 0, &je);
	if (!o)
		die(p);
	fn(o);
	if (json_dump_file(o, p, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
		die(p);
	json_decref(o);
}

static void inter_plus_one(json_t *o)
{
	json_object_set_new(o, "intermediate_size",
			    json_integer(json_integer_value(json_object_get(o, "intermediate_size")) + 1));
}

static void gpt2(json_t *o)
{
	json_object_set_new(o, "model_type", json_string("gpt2"));
}

static void tie(json_t *o)
{
	json_object_set_new(o, "tie_word_embeddings", json_true());
}

static void with_bias(json_t *o)
{
	json_object_set_new(o, "attention_bias", json_true());
}

/* The JSON header of a safetensors file: parsed, its length and the file size. */
static json_t *read_header(const char *path, uint64_t *ret_len, uint64_t *ret_size)
{
	int fd = open(path, O_RDONLY);
	uint64_t len = 0;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || pread(fd, &len, 8, 0) != 8)
		die(path);
	char *buf = malloc(len + 1);
	if (pread(fd, buf, len, 8) != (ssize_t)len)
		die(path);
	buf[len] = 0;
	close(fd);
	json_error_t je;
	json_t *h = json_loads(buf, 0, &je);
	free(buf);
	if (!h)
		die("header json");
	*ret_len = len;
	*ret_size = (uint64_t)st.st_size;
	return h;
}

/* Writes h back over the header, compact and padded with spaces to the old
 * length, so every data offset stays where it was. */
static bool write_header(const char *path, json_t *h, uint64_t len)
{
	char *s = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	size_t n = strlen(s);
	bool ok = n <= len;
	if (ok) {
		char *buf = malloc(len);
		memset(buf, ' ', len);
		memcpy(buf, s, n);
		int fd = open(path, O_WRONLY);
		if (fd < 0 || pwrite(fd, buf, len, 8) != (ssize_t)len)
			die(path);
		close(fd);
		free(buf);
	}
	free(s);
	return ok;
}

static void check_same_config(const struct allm_model_config *a, const struct allm_model_config *b,
			      const char *what)
{
	CHECK(a->arch == b->arch && a->vocab_size == b->vocab_size && a->hidden == b->hidden &&
	      a->intermediate == b->intermediate && a->n_layers == b->n_layers &&
	      a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads &&
	      a->head_dim == b->head_dim && a->max_pos == b->max_pos && a->norm_eps == b->norm_eps &&
	      a->tie_embeddings == b->tie_embeddings && a->rope_theta == b->rope_theta &&
	      a->n_eos == b->n_eos && a->eos_ids[0] == b->eos_ids[0] && a->bos_id == b->bos_id,
	      "%s: config differs from the f32 model's", what);
}

/* Every weight of m equals f32 model ref's rounded to dt (the writer's promise). */
static void check_weights(struct allm_model *ref, struct allm_model *m, enum allm_dtype dt,
			  const char *what)
{
	struct allm_weight_spec *sa = NULL, *sb = NULL;
	size_t na = 0, nb = 0, bad = 0, total = 0;
	allm_model_weight_specs(ref, &sa, &na);
	allm_model_weight_specs(m, &sb, &nb);
	CHECK(na == nb && na > 0, "%s: %zu vs %zu tensors", what, na, nb);
	for (size_t i = 0; i < na && i < nb; i++) {
		size_t ne = (size_t)sa[i].shape[0] * (size_t)(sa[i].n_dims == 2 ? sa[i].shape[1] : 1);
		const float *x = *sa[i].slot, *y = *sb[i].slot;
		for (size_t j = 0; j < ne; j++) {
			float want = x[j];
			if (dt == ALLM_DTYPE_F16)
				want = allm_f16_to_f32(allm_f32_to_f16(x[j]));
			else if (dt == ALLM_DTYPE_BF16)
				want = allm_bf16_to_f32(allm_f32_to_bf16(x[j]));
			if (memcmp(&want, &y[j], sizeof(float)) && bad++ < 3)
				fprintf(stderr, "  %s: %s[%zu] = %g, want %g\n", what, sa[i].name, j, y[j], want);
			total++;
		}
	}
	CHECK(bad == 0, "%s: %zu of %zu weights differ", what, bad, total);
	allm_free(sa);
	allm_free(sb);
}

static void test_good(void)
{
	struct allm_model_config c;
	struct allm_err err;
	allm_model_config_preset("tiny", &c, &err);
	c.tie_embeddings = false; /* lm_head.weight exists, so untying/tying is testable */
	c.n_layers = 2;
	if (write_model("good", &c, ALLM_DTYPE_F32, 1, 7) ||
	    write_model("f16", &c, ALLM_DTYPE_F16, 1, 7) ||
	    write_model("bf16", &c, ALLM_DTYPE_BF16, 1, 7) ||
	    write_model("shard3", &c, ALLM_DTYPE_F32, 3, 7) ||
	    write_model("shard2", &c, ALLM_DTYPE_F32, 2, 7))
		return;

	struct allm_model *ref = load_ok("good", "f32 model");
	if (!ref)
		return;
	CHECK(ref->cfg.arch == ALLM_ARCH_LLAMA && ref->cfg.hidden == 64 && ref->cfg.n_layers == 2 &&
	      ref->cfg.n_kv_heads == 4 && !ref->cfg.tie_embeddings && ref->lm_head != ref->tok_emb &&
	      ref->wdtype == ALLM_DTYPE_F32, "f32 model config/layout");
	const char *names[] = {"f16", "bf16", "shard3", "shard2"};
	const enum allm_dtype dts[] = {ALLM_DTYPE_F16, ALLM_DTYPE_BF16, ALLM_DTYPE_F32, ALLM_DTYPE_F32};
	for (int i = 0; i < 4; i++) {
		struct allm_model *m = load_ok(names[i], names[i]);
		if (!m)
			continue;
		check_same_config(&ref->cfg, &m->cfg, names[i]);
		CHECK(m->cfg.file_dtype == dts[i], "%s: file_dtype %d", names[i], m->cfg.file_dtype);
		check_weights(ref, m, dts[i], names[i]);
		allm_model_free(m);
	}
	/* a different seed gives different weights (so check_weights can fail) */
	if (!write_model("seed8", &c, ALLM_DTYPE_F32, 1, 8)) {
		struct allm_model *m = load_ok("seed8", "seed 8");
		if (m) {
			CHECK(memcmp(m->tok_emb, ref->tok_emb, 64 * sizeof(float)),
			      "seeds 7 and 8 wrote the same embeddings");
			allm_model_free(m);
		}
		rm_dir("seed8");
	}
	allm_model_free(ref);
}

static void test_bad(void)
{
	char p[1024];
	uint64_t len, size;

	copy_dir("good", "v");
	path_of(p, sizeof(p), "v", "model.safetensors");
	unlink(p);
	load_bad("v", "missing model.safetensors", WORDS("model.safetensors"));

	copy_dir("good", "v");
	path_of(p, sizeof(p), "v", "model.safetensors");
	struct stat st;
	stat(p, &st);
	if (truncate(p, st.st_size / 2))
		die(p);
	load_bad("v", "truncated safetensors", WORDS("model.safetensors"));
	if (truncate(p, 5))
		die(p);
	load_bad("v", "5-byte safetensors", WORDS("model.safetensors"));

	/* data_offsets of the last tensor moved 8 bytes past the end, span unchanged */
	copy_dir("good", "v");
	path_of(p, sizeof(p), "v", "model.safetensors");
	json_t *h = read_header(p, &len, &size);
	const char *key, *last = NULL;
	json_t *v;
	json_int_t max_end = -1;
	json_object_foreach(h, key, v) {
		json_t *o = json_object_get(v, "data_offsets");
		if (o && json_integer_value(json_array_get(o, 1)) > max_end) {
			max_end = json_integer_value(json_array_get(o, 1));
			last = key;
		}
	}
	CHECK(last && (uint64_t)max_end + 8 + len == size, "last tensor does not end the file");
	if (last) {
		char name[128];
		snprintf(name, sizeof(name), "%s", last);
		json_t *o = json_object_get(json_object_get(h, name), "data_offsets");
		json_int_t b = json_integer_value(json_array_get(o, 0));
		json_array_set_new(o, 0, json_integer(b + 8));
		json_array_set_new(o, 1, json_integer(max_end + 8));
		CHECK(write_header(p, h, len), "patched header is longer than the original");
		load_bad("v", "data_offsets past the end", WORDS("model.safetensors", name));
	}
	json_decref(h);

	/* one tensor's dtype F32 -> I32 (same size, unsupported) */
	copy_dir("good", "v");
	path_of(p, sizeof(p), "v", "model.safetensors");
	h = read_header(p, &len, &size);
	json_t *t = json_object_get(h, "model.layers.1.mlp.up_proj.weight");
	CHECK(t != NULL, "no up_proj tensor in the header");
	if (t) {
		json_object_set_new(t, "dtype", json_string("I32"));
		CHECK(write_header(p, h, len), "patched header is longer than the original");
		load_bad("v", "unsupported dtype I32",
			 WORDS("I32", "model.layers.1.mlp.up_proj.weight", "model.safetensors"));
	}
	json_decref(h);

	/* shapes that disagree with config.json */
	copy_dir("good", "v");
	edit_config("v", inter_plus_one);
	load_bad("v", "intermediate_size + 1", WORDS("model.layers.0.mlp.gate_proj.weight", "shape"));

	copy_dir("good", "v");
	edit_config("v", gpt2);
	load_bad("v", "model_type gpt2", WORDS("model_type", "gpt2", "config.json"));

	/* config implies tensors the file lacks */
	copy_dir("good", "v");
	edit_config("v", with_bias);
	load_bad("v", "attention_bias, no biases", WORDS("model.layers.0.self_attn.q_proj.bias", "missing"));

	/* a sharded model missing a shard */
	copy_dir("shard2", "v");
	path_of(p, sizeof(p), "v", "model-00002-of-00002.safetensors");
	unlink(p);
	load_bad("v", "missing shard", WORDS("model-00002-of-00002.safetensors"));

	/* an index that maps a tensor to a shard which does not hold it (a shard's
	 * tensors missing from the map are fine: HF loads whole shards) */
	copy_dir("shard2", "v");
	path_of(p, sizeof(p), "v", "model.safetensors.index.json");
	json_error_t je;
	json_t *idx = json_load_file(p, 0, &je);
	CHECK(idx && json_object_set_new(json_object_get(idx, "weight_map"), "model.extra.weight",
					 json_string("model-00001-of-00002.safetensors")) == 0,
	      "cannot edit the index");
	json_dump_file(idx, p, JSON_INDENT(2));
	json_decref(idx);
	load_bad("v", "index entry not in its shard",
		 WORDS("model.extra.weight", "model-00001-of-00002.safetensors"));

	copy_dir("good", "v");
	path_of(p, sizeof(p), "v", "config.json");
	FILE *f = fopen(p, "w");
	fputs("{\"model_type\": \"llama\", \"hidden_size\": 64,\n  \"vocab_size\": }\n", f);
	fclose(f);
	load_bad("v", "bad JSON in config.json", WORDS("config.json", "JSON"));

	copy_dir("good", "v");
	unlink(p);
	load_bad("v", "no config.json", WORDS("config.json"));

	load_bad("does-not-exist", "missing directory", WORDS("does-not-exist"));
	rm_dir("v");

	/* tying the embeddings of an untied model leaves lm_head.weight unused: fine */
	copy_dir("good", "tied");
	edit_config("tied", tie);
	struct allm_model *m = load_ok("tied", "untied files, tied config");
	CHECK(!m || m->lm_head == m->tok_emb, "tied config: lm_head is not embed_tokens");
	allm_model_free(m);
	rm_dir("tied");
}

int main(void)
{
	struct allm_err err = {{0}};
	struct allm_backend_opts bo = {.n_threads = 2};
	snprintf(base, sizeof(base), "%s/allm-test-loader-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(base))
		die("mkdtemp");
	if (allm_backend_cpu_create(&bo, &be, &err)) {
		fprintf(stderr, "cpu backend: %s\n", err.msg);
		rmdir(base);
		return 1;
	}
	test_good();
	test_bad();
	allm_backend_destroy(be);
	const char *dirs[] = {"good", "f16", "bf16", "shard3", "shard2", "v"};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(dirs); i++)
		rm_dir(dirs[i]);
	if (rmdir(base))
		fprintf(stderr, "warning: could not remove %s\n", base);
	if (n_fail) {
		fprintf(stderr, "test-model-loader-errors: %d failure(s)\n", n_fail);
		return 1;
	}
	printf("test-model-loader-errors: ok\n");
	return 0;
}
