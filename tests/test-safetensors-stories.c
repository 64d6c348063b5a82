/* Description: the real stories260K checkpoint under DATA_DIR opens (47 F32 tensors, known shapes) and reads with progress, from disk and from the copy embedded in the program, byte for byte the same. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "safetensors.h"

static int failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                         \
			fprintf(stderr, "\n");                                \
			failures++;                                           \
		}                                                             \
	} while (0)

static void progress_cb(void *user, uint64_t done, uint64_t total)
{
	uint64_t *last = user;

	if (done < last[0] || done > total)
		last[1] = 1; /* went backwards or past the end */
	last[0] = done;
	last[2] = total;
}

static int test_stories(void)
{
	const char *data = getenv("DATA_DIR");
	char dir[4096];
	struct allm_st_index *idx = NULL;
	struct allm_err err = { 0 };
	struct allm_st_read *reqs;
	uint64_t prog[3] = { 0 }, total = 0;

	snprintf(dir, sizeof(dir), "%s/models/stories260K", data ? data : "data");
	CHECK(allm_st_open_dir(dir, &idx, &err) == 0, "open stories260K: %s", err.msg);
	if (!idx)
		return 1;
	CHECK(idx->n_tensors == 47, "n_tensors %d", idx->n_tensors);
	const struct allm_st_tensor *t = allm_st_find(idx, "model.embed_tokens.weight");
	CHECK(t && t->dtype == ALLM_DTYPE_F32 && t->n_dims == 2 && t->shape[0] == 512 &&
		      t->shape[1] == 64, "embed_tokens");
	t = allm_st_find(idx, "model.layers.0.self_attn.k_proj.weight");
	CHECK(t && t->n_dims == 2 && t->shape[0] == 32 && t->shape[1] == 64, "k_proj");
	t = allm_st_find(idx, "model.norm.weight");
	CHECK(t && t->n_dims == 1 && t->shape[0] == 64, "norm");

	reqs = calloc((size_t)idx->n_tensors, sizeof(*reqs));
	for (int32_t i = 0; i < idx->n_tensors; i++) {
		reqs[i].t = &idx->tensors[i];
		reqs[i].dst = malloc(idx->tensors[i].nbytes);
		total += idx->tensors[i].nbytes;
	}
	CHECK(allm_st_read_tensors(idx, reqs, (size_t)idx->n_tensors, false, progress_cb, prog, &err) == 0,
	      "read stories: %s", err.msg);
	CHECK(prog[0] == total && prog[2] == total && !prog[1], "progress %llu of %llu",
	      (unsigned long long)prog[0], (unsigned long long)total);
	/* Every value finite and a norm weight near 1: the bytes are real floats. */
	for (int32_t i = 0; i < idx->n_tensors; i++) {
		const float *v = reqs[i].dst;
		size_t n = idx->tensors[i].nbytes / 4, bad = 0;

		for (size_t j = 0; j < n; j++)
			bad += !(v[j] > -1e4f && v[j] < 1e4f);
		CHECK(bad == 0, "%s has %zu non-finite values", idx->tensors[i].name, bad);
	}
	/* First and last values, read independently with Python's struct module. */
	static const struct { const char *name; float first, last; } known[] = {
		{ "model.norm.weight", 2.4583089351654053f, 1.7077769041061401f },
		{ "model.embed_tokens.weight", -0.29474878311157227f, -0.424032598733902f },
		{ "model.layers.4.mlp.down_proj.weight", -0.04791264981031418f,
		  -0.0035068716388195753f },
	};
	for (size_t k = 0; k < ALLM_ARRAY_SIZE(known); k++) {
		t = allm_st_find(idx, known[k].name);
		CHECK(t, "%s missing", known[k].name);
		if (!t)
			continue;
		const float *v = reqs[t - idx->tensors].dst;
		size_t n = t->nbytes / 4;

		CHECK(v[0] == known[k].first && v[n - 1] == known[k].last, "%s: %g .. %g",
		      known[k].name, v[0], v[n - 1]);
	}

	/* The pread fallback gives the same bytes. */
	for (int32_t i = 0; i < idx->n_tensors; i++) {
		struct allm_st_read rq = { &idx->tensors[i], malloc(idx->tensors[i].nbytes) };

		CHECK(allm_st_read_tensors(idx, &rq, 1, true, NULL, NULL, &err) == 0, "pread: %s", err.msg);
		CHECK(memcmp(rq.dst, reqs[i].dst, rq.t->nbytes) == 0, "%s differs via pread",
		      rq.t->name);
		free(rq.dst);
	}

	/* The copy compiled into the program (the default model) is the same
	 * checkpoint: same tensors, same bytes, read through the same code. */
	struct allm_st_index *emb = NULL;
	CHECK(allm_st_open_from(allm_default_model(), &emb, &err) == 0, "open embedded: %s", err.msg);
	CHECK(emb && emb->n_tensors == idx->n_tensors, "embedded has %d tensors",
	      emb ? emb->n_tensors : -1);
	for (int32_t i = 0; emb && i < emb->n_tensors && i < idx->n_tensors; i++) {
		struct allm_st_read rq = { &emb->tensors[i], malloc(emb->tensors[i].nbytes) };
		CHECK(!strcmp(emb->tensors[i].name, idx->tensors[i].name) &&
			      emb->tensors[i].nbytes == idx->tensors[i].nbytes,
		      "embedded tensor %d is %s", i, emb->tensors[i].name);
		CHECK(allm_st_read_tensors(emb, &rq, 1, false, NULL, NULL, &err) == 0, "embedded: %s", err.msg);
		CHECK(memcmp(rq.dst, reqs[i].dst, rq.t->nbytes) == 0, "%s differs embedded",
		      rq.t->name);
		free(rq.dst);
	}
	allm_st_close(emb);
	for (int32_t i = 0; i < idx->n_tensors; i++)
		free(reqs[i].dst);
	free(reqs);
	allm_st_close(idx);
	return 0;
}


int main(void)
{
	size_t mem0 = allm_mem_in_use();
	int r = test_stories();

	CHECK(allm_mem_in_use() == mem0, "leaked %zu bytes", allm_mem_in_use() - mem0);
	if (r || failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
