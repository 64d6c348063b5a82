/* Description: paged attention (K/V written and read through shuffled block tables) equals dense causal attention for block sizes 1, 16, 32 and a batch of mixed lengths, on the reference and fast CPU paths; with a sliding window it sees exactly the window and never reads the blocks before it. */
#include "backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

static uint64_t rng = 0x1234567;

static float frand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) * 0x1p-24) * 2.0f - 1.0f;
}

static uint32_t urand(uint32_t n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33) % n;
}

/* Dense causal attention of one query against keys/values [p0, ctx). */
static void dense_attn(float *out, const float *q, const float *K, const float *V, int p0, int ctx,
		       int hd, int kv_stride, float scale)
{
	double s[4096], mx = -1e30, sum = 0;
	for (int p = 0; p < p0; p++)
		s[p] = 0; /* outside the window: no weight */
	for (int p = p0; p < ctx; p++) {
		double d = 0;
		for (int i = 0; i < hd; i++)
			d += (double)q[i] * K[(size_t)p * kv_stride + i];
		s[p] = d * scale;
		mx = s[p] > mx ? s[p] : mx;
	}
	for (int p = p0; p < ctx; p++)
		sum += (s[p] = exp(s[p] - mx));
	for (int i = 0; i < hd; i++) {
		double acc = 0;
		for (int p = 0; p < ctx; p++)
			acc += s[p] / sum * V[(size_t)p * kv_stride + i];
		out[i] = (float)acc;
	}
}

/* One case: n_seqs sequences with total lengths len[] of which the last n_new[] are
 * queries in this step (prefill: all; decode: 1); window > 0: a sliding window of
 * that many positions, the blocks wholly before every query's window pointed at a
 * block of NaNs (attention must never read them: the KV cache may reuse them). */
static void run_case(allm_backend_t *be, int bs, const int *len, const int *n_new, int n_seqs,
		     enum allm_dtype kvdt, float tol, int window)
{
	enum { L = 2, KVH = 2, H = 4, HD = 8 };
	const int kvd = KVH * HD, qd = H * HD;
	struct allm_kv_layout lay = {L, KVH, HD, bs, kvdt};
	int maxb = 0, total_blocks = 0, T = 0, all = 0;
	for (int s = 0; s < n_seqs; s++) {
		int nb = (len[s] + bs - 1) / bs;
		maxb = nb > maxb ? nb : maxb;
		total_blocks += nb;
		T += n_new[s];
		all += len[s];
	}
	int pool_blocks = total_blocks + 5; /* spare blocks stay unused */
	void *pool = NULL;
	if (be->iface->alloc(be, allm_kv_block_bytes(&lay) * pool_blocks, &pool)) {
		failures++;
		return;
	}
	/* a random permutation of the pool hands blocks to sequences */
	int *perm = malloc(sizeof(int) * pool_blocks);
	for (int i = 0; i < pool_blocks; i++)
		perm[i] = i;
	for (int i = pool_blocks - 1; i > 0; i--) {
		int j = (int)urand((uint32_t)i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	int32_t *bt = calloc((size_t)n_seqs * maxb, sizeof(int32_t));
	int next = 0;
	for (int s = 0; s < n_seqs; s++)
		for (int b = 0; b < (len[s] + bs - 1) / bs; b++)
			bt[s * maxb + b] = perm[next++];
	/* K, V of every position of every sequence, for every layer */
	float *K = malloc(sizeof(float) * L * all * kvd), *V = malloc(sizeof(float) * L * all * kvd);
	for (size_t i = 0; i < (size_t)L * all * kvd; i++) {
		K[i] = frand();
		V[i] = frand();
	}
	/* Round K/V through the storage dtype so the dense side sees what is stored. */
	for (size_t i = 0; i < (size_t)L * all * kvd; i++) {
		uint16_t h;
		if (kvdt == ALLM_DTYPE_F16) {
			h = allm_f32_to_f16(K[i]); K[i] = allm_f16_to_f32(h);
			h = allm_f32_to_f16(V[i]); V[i] = allm_f16_to_f32(h);
		} else if (kvdt == ALLM_DTYPE_BF16) {
			h = allm_f32_to_bf16(K[i]); K[i] = allm_bf16_to_f32(h);
			h = allm_f32_to_bf16(V[i]); V[i] = allm_bf16_to_f32(h);
		}
	}
	/* write all positions (as earlier steps would have) through kv_write */
	int32_t *seq_all = malloc(sizeof(int32_t) * all), *pos_all = malloc(sizeof(int32_t) * all),
		*slot_all = malloc(sizeof(int32_t) * all);
	int t = 0, base = 0;
	for (int s = 0; s < n_seqs; s++) {
		for (int p = 0; p < len[s]; p++, t++) {
			seq_all[t] = s;
			pos_all[t] = p;
			slot_all[t] = bt[s * maxb + p / bs] * bs + p % bs;
		}
	}
	struct allm_attn_meta wm = {all, n_seqs, maxb, 0, seq_all, pos_all, slot_all, bt, 0};
	for (int l = 0; l < L; l++)
		be->iface->kv_write(be, pool, &lay, l, K + (size_t)l * all * kvd, V + (size_t)l * all * kvd, &wm);

	/* queries: the last n_new positions of each sequence */
	if (window > 0) {
		/* the last spare block: NaN in every K and V */
		size_t ne = allm_kv_block_elems(&lay), es = allm_dtype_size(kvdt);
		unsigned char *nan_blk = malloc(ne * es);
		for (size_t i = 0; i < ne * es; i++)
			nan_blk[i] = 0xff; /* all-ones: a NaN in f32, f16 and bf16 */
		be->iface->upload(be, (char *)pool + (size_t)perm[pool_blocks - 1] * ne * es, nan_blk, ne * es);
		free(nan_blk);
		for (int s = 0; s < n_seqs; s++) {
			int first = len[s] - n_new[s] + 1 - window; /* the oldest position any query reads */
			for (int b = 0; (b + 1) * bs <= first; b++)
				bt[s * maxb + b] = perm[pool_blocks - 1];
		}
	}
	int32_t *tseq = malloc(sizeof(int32_t) * T), *tpos = malloc(sizeof(int32_t) * T);
	float *q = malloc(sizeof(float) * T * qd), *out = malloc(sizeof(float) * (T * qd + 16));
	int max_ctx = 0;
	t = 0;
	for (int s = 0; s < n_seqs; s++)
		for (int p = len[s] - n_new[s]; p < len[s]; p++, t++) {
			tseq[t] = s;
			tpos[t] = p;
			max_ctx = p + 1 > max_ctx ? p + 1 : max_ctx;
		}
	for (int i = 0; i < T * qd; i++)
		q[i] = frand();
	for (int i = 0; i < 16; i++)
		out[T * qd + i] = 12345.0f; /* guard */
	struct allm_attn_meta qm = {T, n_seqs, maxb, max_ctx, tseq, tpos, NULL, bt, window};
	float scale = 1.0f / sqrtf((float)HD), worst = 0;
	for (int l = 0; l < L; l++) {
		if (be->iface->attention(be, out, q, pool, &lay, l, H, scale, &qm)) {
			failures++;
			fprintf(stderr, "FAIL: attention returned an error\n");
			break;
		}
		t = 0;
		base = 0;
		for (int s = 0; s < n_seqs; s++) {
			for (int p = len[s] - n_new[s]; p < len[s]; p++, t++) {
				for (int h = 0; h < H; h++) {
					float ref[HD];
					int kh = h / (H / KVH);
					const float *Ks = K + ((size_t)l * all + base) * kvd + kh * HD;
					const float *Vs = V + ((size_t)l * all + base) * kvd + kh * HD;
					int p0 = window > 0 && p + 1 - window > 0 ? p + 1 - window : 0;
					dense_attn(ref, q + (size_t)t * qd + h * HD, Ks, Vs, p0, p + 1, HD, kvd, scale);
					for (int i = 0; i < HD; i++) {
						float d = fabsf(ref[i] - out[(size_t)t * qd + h * HD + i]);
						worst = d > worst || isnan(d) ? (isnan(d) ? INFINITY : d) : worst;
					}
				}
			}
			base += len[s];
		}
		for (int i = 0; i < 16; i++)
			if (out[T * qd + i] != 12345.0f) {
				failures++;
				fprintf(stderr, "FAIL: attention wrote past its output\n");
				break;
			}
	}
	if (worst > tol) {
		failures++;
		fprintf(stderr, "FAIL: %s bs=%d kv=%s seqs=%d window=%d: max |paged - dense| = %g > %g\n",
			be->iface->describe(be), bs, allm_dtype_name(kvdt), n_seqs, window, worst, tol);
	} else {
		printf("ok   %-34s bs=%-2d kv=%-4s seqs=%d tokens=%-3d window=%-2d max|d|=%.2e\n",
		       be->iface->describe(be), bs, allm_dtype_name(kvdt), n_seqs, T, window, worst);
	}
	be->iface->free(be, pool);
	free(perm); free(bt); free(K); free(V); free(seq_all); free(pos_all); free(slot_all);
	free(tseq); free(tpos); free(q); free(out);
}

int main(void)
{
	static const int bsz[] = {1, 16, 32};
	/* mixed: one-token, short, exactly a block, long; prefill (all new) and decode (1 new) */
	static const int len[] = {1, 7, 32, 70, 33};
	static const int prefill[] = {1, 7, 32, 70, 33};
	static const int decode[] = {1, 1, 1, 1, 1};
	static const int mixed[] = {1, 3, 1, 70, 5};
	for (int ref = 1; ref >= 0; ref--) {
		allm_backend_t *be = NULL;
		struct allm_err err = {{0}};
		struct allm_backend_opts o = {.reference = ref, .n_threads = 2};
		if (allm_backend_cpu_create(&o, &be, &err)) {
			fprintf(stderr, "FAIL: backend: %s\n", err.msg);
			return 1;
		}
		for (size_t b = 0; b < ALLM_ARRAY_SIZE(bsz); b++) {
			run_case(be, bsz[b], len, prefill, 5, ALLM_DTYPE_F32, 1e-5f, 0);
			run_case(be, bsz[b], len, decode, 5, ALLM_DTYPE_F32, 1e-5f, 0);
			run_case(be, bsz[b], len, mixed, 5, ALLM_DTYPE_F32, 1e-5f, 0);
			run_case(be, bsz[b], len + 3, decode, 1, ALLM_DTYPE_F32, 1e-5f, 0);
			run_case(be, bsz[b], len, mixed, 5, ALLM_DTYPE_F16, 1e-5f, 0);
			run_case(be, bsz[b], len, mixed, 5, ALLM_DTYPE_BF16, 1e-5f, 0);
			/* sliding windows: shorter than a block, a block and more */
			static const int windows[] = {1, 5, 16, 40};
			for (size_t w = 0; w < ALLM_ARRAY_SIZE(windows); w++) {
				run_case(be, bsz[b], len, prefill, 5, ALLM_DTYPE_F32, 1e-5f, windows[w]);
				run_case(be, bsz[b], len, decode, 5, ALLM_DTYPE_F32, 1e-5f, windows[w]);
				run_case(be, bsz[b], len, mixed, 5, ALLM_DTYPE_F16, 1e-5f, windows[w]);
			}
		}
		allm_backend_destroy(be);
	}
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
