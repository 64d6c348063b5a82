/* The compute backend interface: one vtable that the CPU reference backend and the
 * CUDA backend implement, so the executor is written once.
 *
 * Conventions
 *  - Activations are f32, row-major, in backend memory ("device" memory: host RAM on
 *    the CPU backend). Weights are (pointer, dtype) in backend memory.
 *  - Linear layers use the Hugging Face layout: W is [out, in], y = x · Wᵀ + b.
 *  - The paged KV cache is one pool of blocks (see struct allm_kv_layout); attention
 *    reads K and V only through block tables.
 *  - Every call returns 0 or a negative errno; on failure nothing is printed, the
 *    reason goes into the backend's last error (allm_backend_last_error()).
 *  - Members marked "optional" may be NULL; callers check allm_backend_supports().
 */
#ifndef ALLM_BACKEND_H
#define ALLM_BACKEND_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct allm_backend allm_backend_t;

/* Where K and V of token `o` of block `b` live in the pool, for layer `l`, head `h`:
 *   elem = ((((b * n_layers + l) * 2 + kind) * block_size + o) * n_kv_heads + h) * head_dim
 * kind 0 = K, 1 = V. So a whole block (all layers, K and V) is one contiguous run of
 * block_bytes and a swap of a block is one copy (DESIGN §5). */
struct allm_kv_layout {
	int32_t n_layers;
	int32_t n_kv_heads;
	int32_t head_dim;
	int32_t block_size; /* tokens per block */
	enum allm_dtype dtype; /* storage dtype of K and V */
};

static inline size_t allm_kv_block_elems(const struct allm_kv_layout *l)
{
	return (size_t)l->n_layers * 2 * (size_t)l->block_size * (size_t)l->n_kv_heads *
	       (size_t)l->head_dim;
}

static inline size_t allm_kv_block_bytes(const struct allm_kv_layout *l)
{
	return allm_kv_block_elems(l) * allm_dtype_size(l->dtype);
}

/* One forward step's token/sequence metadata, arrays in backend memory.
 * Tokens of a batch are flattened; token t belongs to sequence tok_seq[t], sits at
 * absolute position tok_pos[t] and attends (causally) to positions 0..tok_pos[t] of
 * its sequence, read through that sequence's block table. This one shape serves a
 * prefill of many prompts, a batch of decodes, and a mix. */
struct allm_attn_meta {
	int32_t n_tokens;
	int32_t n_seqs;
	int32_t max_blocks_per_seq; /* row stride of block_tables */
	int32_t max_ctx; /* largest tok_pos + 1 in the batch (scratch sizing hint) */
	const int32_t *tok_seq; /* [n_tokens] */
	const int32_t *tok_pos; /* [n_tokens] */
	const int32_t *slot; /* [n_tokens] block * block_size + offset to write K/V into */
	const int32_t *block_tables; /* [n_seqs][max_blocks_per_seq] physical block ids */
	/* Sliding window (backends that support ALLM_OP_SLIDING_WINDOW): 0, every
	 * position 0..tok_pos[t]; W > 0, only the last W of them, tok_pos[t] - W <
	 * p <= tok_pos[t]. Block-table entries of blocks wholly before that are never
	 * read (the KV cache may have given them back). */
	int32_t window;
};

enum allm_backend_op {
	ALLM_OP_EMBEDDING,
	ALLM_OP_RMSNORM,
	ALLM_OP_LAYERNORM,
	ALLM_OP_GEMM,
	ALLM_OP_ROPE,
	ALLM_OP_SILU_MUL,
	ALLM_OP_RELU,
	ALLM_OP_ADD,
	ALLM_OP_GATHER_ROWS,
	ALLM_OP_KV_WRITE,
	ALLM_OP_ATTENTION,
	ALLM_OP_ARGMAX,
	ALLM_OP_TOPK,
	ALLM_OP_GELU_MUL, /* version 4 */
	ALLM_OP_SCALE, /* version 4 */
	ALLM_OP_SLIDING_WINDOW, /* attention honours allm_attn_meta.window */
	ALLM_OP_COUNT
};

/* What the pages op (version 5) does to a range of an allocation: elastic
 * memory (DESIGN §5c) moves physical memory between the KV pool and the step
 * scratch without freeing either allocation. */
enum allm_pages_verb {
	ALLM_PAGES_SIZE = 0, /* *ret_bytes = the allocation's page size; -ENOTSUP where its
			      * pages cannot move (a CUDA device without VMM) */
	ALLM_PAGES_RETURN = 1, /* give back every page wholly inside the range: its
				* contents are lost, the memory is the system's again */
	ALLM_PAGES_MAP = 2, /* back every page the range overlaps before the next op
			     * touches it; a page backed anew reads zero */
	ALLM_PAGES_RESIDENT = 3, /* *ret_bytes = bytes of the pages overlapping the range
				  * that are backed now */
};

/* The chunks (of C bytes) of an allocation of `total` bytes that the range
 * [off, off + bytes) holds wholly, [*in0, *in1) — what RETURN gives back; the
 * last chunk's bytes past the allocation belong to nobody, so a range reaching
 * its end holds that chunk — and those it overlaps, [*ov0, *ov1) — what MAP
 * backs and RESIDENT counts. One rule for every backend that pages in chunks. */
static inline void allm_pages_span(size_t off, size_t bytes, size_t total, size_t C, size_t *in0, size_t *in1,
				   size_t *ov0, size_t *ov1)
{
	size_t end = off + bytes, n = total / C + (total % C != 0);
	*in0 = off / C + (off % C != 0);
	*in1 = end == total ? n : end / C;
	*ov0 = off / C;
	*ov1 = bytes ? end / C + (end % C != 0) : *ov0;
}

enum allm_copy_dir {
	ALLM_COPY_D2H = 0, /* device pool -> host pool (swap out) */
	ALLM_COPY_H2D = 1, /* host pool -> device pool (swap in) */
	ALLM_COPY_D2D = 2, /* within device memory (growing a pool) */
	ALLM_COPY_H2H = 3, /* within host memory (growing the host pool) */
};

struct allm_backend_i {
	/* Grows at the end only; a backend sets the version it implements. */
	uint32_t version;

	const char *(*name)(allm_backend_t *be);
	/* Human description of the device ("cpu: 2 threads, openblas", "NVIDIA H100 ..."). */
	const char *(*describe)(allm_backend_t *be);
	void (*destroy)(allm_backend_t *be);
	bool (*supports)(allm_backend_t *be, enum allm_backend_op op, enum allm_dtype dt);

	/* --- memory -------------------------------------------------------------- */
	/* Device memory, zeroed. */
	int (*alloc)(allm_backend_t *be, size_t bytes, void **ret_ptr);
	void (*free)(allm_backend_t *be, void *ptr);
	/* Host memory the device can copy from asynchronously (pinned on CUDA). */
	int (*host_alloc)(allm_backend_t *be, size_t bytes, void **ret_ptr);
	void (*host_free)(allm_backend_t *be, void *ptr);
	/* Synchronous copies, ordered after all queued compute. */
	int (*upload)(allm_backend_t *be, void *dst_dev, const void *src_host, size_t bytes);
	int (*download)(allm_backend_t *be, void *dst_host, const void *src_dev, size_t bytes);
	/* Copy on the copy stream (swaps); completes by copy_wait(). */
	int (*copy_async)(allm_backend_t *be, void *dst, const void *src, size_t bytes,
			  enum allm_copy_dir dir);
	/* Waits for all async copies; *ret_seconds = their measured duration (device
	 * events on CUDA, wall time on the CPU). */
	int (*copy_wait)(allm_backend_t *be, double *ret_seconds);
	/* Waits for all queued compute. */
	int (*synchronize)(allm_backend_t *be);
	/* Bytes of device memory: free and total (the CPU backend reports RAM). */
	int (*mem_info)(allm_backend_t *be, size_t *ret_free, size_t *ret_total);

	/* --- ops (all on the compute stream) ------------------------------------- */
	/* y[n, dim] = table[ids[i], :] */
	int (*embedding)(allm_backend_t *be, float *y, const void *table, enum allm_dtype dt,
			 const int32_t *ids, int64_t n, int64_t dim);
	/* y = x / rms(x) * w, per row */
	int (*rmsnorm)(allm_backend_t *be, float *y, const float *x, const void *w,
		       enum allm_dtype dt, int64_t n, int64_t dim, float eps);
	/* y = (x - mean) / sqrt(var + eps) * w + b, per row; w, b may be NULL (no affine) */
	int (*layernorm)(allm_backend_t *be, float *y, const float *x, const void *w,
			 const void *b, enum allm_dtype dt, int64_t n, int64_t dim, float eps);
	/* y[n, m] = x[n, k] · W[m, k]ᵀ (+ bias[m]); bias may be NULL. */
	int (*gemm)(allm_backend_t *be, float *y, const float *x, const void *w,
		    const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m);
	/* Rotary embedding, rotate-half (GPT-NeoX / HF Llama) layout, in place on
	 * q[n, n_heads*head_dim] and k[n, n_kv_heads*head_dim]; inv_freq[head_dim/2]. */
	int (*rope)(allm_backend_t *be, float *q, float *k, const int32_t *pos,
		    const float *inv_freq, int64_t n, int32_t n_heads, int32_t n_kv_heads,
		    int32_t head_dim);
	/* y = silu(gate) * up, n elements */
	int (*silu_mul)(allm_backend_t *be, float *y, const float *gate, const float *up,
			int64_t n);
	/* y = max(x, 0) */
	int (*relu)(allm_backend_t *be, float *y, const float *x, int64_t n);
	/* y = a + b */
	int (*add)(allm_backend_t *be, float *y, const float *a, const float *b, int64_t n);
	/* y[i, :] = x[rows[i], :] */
	int (*gather_rows)(allm_backend_t *be, float *y, const float *x, const int32_t *rows,
			   int64_t n, int64_t dim);
	/* Writes k[n, kv_heads*head_dim], v[...] of each token into its slot for layer. */
	int (*kv_write)(allm_backend_t *be, void *kv_pool, const struct allm_kv_layout *lay,
			int32_t layer, const float *k, const float *v,
			const struct allm_attn_meta *meta);
	/* Paged causal attention: out[n, n_heads*head_dim] from q[n, n_heads*head_dim],
	 * K/V of `layer` read through block tables; GQA by n_heads / n_kv_heads. */
	int (*attention)(allm_backend_t *be, float *out, const float *q, const void *kv_pool,
			 const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads,
			 float scale, const struct allm_attn_meta *meta);
	/* Optional: ret_ids[i] = argmax of logits row i (lowest id wins a tie), ids in
	 * device memory. NULL: the engine downloads logits and samples on the host. */
	int (*argmax)(allm_backend_t *be, int32_t *ret_ids, const float *logits, int64_t n,
		      int64_t vocab);
	/* Timers on the compute stream for the recompute predictor: start, then stop
	 * returns seconds of device time in between. */
	int (*timer_start)(allm_backend_t *be);
	int (*timer_stop)(allm_backend_t *be, double *ret_seconds);

	/* --- version 2 ------------------------------------------------------------ */
	/* Optional: for each row i of logits[n, vocab], its k largest values sorted
	 * descending, equal values in ascending id order (the order allm_topk_host()
	 * defines), into ret_vals[i * k + j] and ret_ids[i * k + j], device memory.
	 * 1 <= k <= min(vocab, ALLM_TOPK_MAX). -0.0 and +0.0 are equal. NULL (or a
	 * version below 2): the engine downloads rows and selects on the host. */
	int (*topk)(allm_backend_t *be, float *ret_vals, int32_t *ret_ids, const float *logits,
		    int64_t n, int64_t vocab, int32_t k);

	/* --- version 3 ------------------------------------------------------------ */
	/* Optional (NULL, or a version below 3: one gemm per matrix): n_mats <= 4
	 * GEMMs of the same x, ys[i][n, ms[i]] = x · ws[i]ᵀ (+ biases[i]), each with
	 * gemm's bits; a backend may prepare x once for all of them (q, k and v; gate
	 * and up). */
	int (*gemm_multi)(allm_backend_t *be, int n_mats, float *const *ys, const float *x,
			  const void *const *ws, const void *const *biases, enum allm_dtype dt,
			  int64_t n, int64_t k, const int64_t *ms);

	/* --- version 4 ------------------------------------------------------------ */
	/* Optional (NULL, or a version below 4: models that need them are refused at
	 * load): y = gelu_tanh(gate) * up, n elements, GELU's tanh approximation
	 * 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) (Gemma's MLP). */
	int (*gelu_mul)(allm_backend_t *be, float *y, const float *gate, const float *up, int64_t n);
	/* y = x * s, n elements (Gemma's embeddings times sqrt(hidden)). */
	int (*scale)(allm_backend_t *be, float *y, const float *x, float s, int64_t n);

	/* --- version 5 ------------------------------------------------------------ */
	/* Optional (NULL, or a version below 5: an allocation stays as alloc() made
	 * it, all of it backed): elastic memory's pages of [ptr, ptr + bytes), a
	 * range inside one alloc()ation, by `verb` (enum allm_pages_verb; ret_bytes
	 * may be NULL for RETURN and MAP). A page is what the backend maps at once:
	 * the host's page on the CPU (MADV_DONTNEED gives it back, the first write
	 * maps it again, so MAP has nothing to do), a chunk of the VMM granularity
	 * on CUDA (cuMemUnmap + cuMemRelease / cuMemCreate + cuMemMap; MAP must come
	 * before any op writes there), a modelled chunk on the simulated device.
	 * RETURN and MAP wait for the queued compute and copies first. */
	int (*pages)(allm_backend_t *be, void *ptr, size_t bytes, enum allm_pages_verb verb,
		     size_t *ret_bytes);
};

/* Version 6: the vtable is version 5's; struct allm_backend_opts gained env (a
 * module built before reads past the struct it knows, so it is refused as stale). */
#define ALLM_BACKEND_VERSION 6

/* Largest k a backend's topk must accept (the engine's cap for device top-k). */
#define ALLM_TOPK_MAX 256

struct allm_backend {
	const struct allm_backend_i *iface;
	void *ctx; /* the implementation's state */
	bool device_is_host; /* device pointers are plain host memory (cpu): loaders may
			      * read files straight into them */
	struct allm_err last_err; /* why the last failing call failed */
	/* A simulated device (kernels/sim, `--device sim:PROFILE`): memory is
	 * bookkeeping (loaders skip producing weights, pools skip touching blocks),
	 * ops compute nothing, and time is its virtual clock (allm_backend_clock). */
	bool simulated;
	enum allm_dtype sim_dtype; /* simulated: the storage dtype --dtype auto picks */
};

/* SIMD levels of the CPU fast path, lowest first. The level is chosen once, when
 * the backend is created (the best this CPU and OS support, or the cap asked for),
 * and every GEMM of that backend uses it: each level has one fixed reduction order
 * per output element, so rows stay batch-invariant within a run (DESIGN §6).
 * Levels may differ from each other in the last bits (and more where they round
 * activations: bf16 and VNNI levels, see kernels/cpu/cpu-gemm.h). */
enum allm_cpu_isa {
	ALLM_CPU_ISA_AUTO = 0, /* the best level this machine supports */
	ALLM_CPU_ISA_PORTABLE, /* plain C, the reference's arithmetic */
	ALLM_CPU_ISA_AVX2, /* AVX2 + FMA + F16C */
	ALLM_CPU_ISA_AVX2_VNNI, /* + AVX-VNNI (today the same kernels as avx2) */
	ALLM_CPU_ISA_AVX512, /* AVX-512 F/BW/VL (and the OS saves ZMM state) */
	ALLM_CPU_ISA_AVX512_VNNI, /* + AVX512_VNNI: block weights x int8 activations */
	ALLM_CPU_ISA_AVX512_BF16, /* + AVX512_BF16: bf16 weights x bf16 activations */
	ALLM_CPU_ISA_AMX_BF16, /* + AMX-BF16 (and the OS lets us use tiles): bf16 on tiles */
	ALLM_CPU_ISA_AMX_INT8, /* + AMX-INT8: block weights x int8 activations on tiles too */
	ALLM_CPU_ISA_COUNT
};

/* "auto", "portable", "avx2", "avx2-vnni", "avx512", "avx512-vnni", "avx512-bf16",
 * "amx-bf16", "amx-int8". */
const char *allm_cpu_isa_name(enum allm_cpu_isa isa);
/* Parses a name above; -EINVAL otherwise. */
int allm_cpu_isa_parse(const char *s, enum allm_cpu_isa *ret);
/* Whether this CPU (cpuid) and OS (XGETBV) can run `isa`. */
bool allm_cpu_isa_supported(enum allm_cpu_isa isa);
/* The best supported level (for speed: avx512-bf16 only on AMD; the AMX levels
 * where the CPU and OS allow; see cpu-isa.c). */
enum allm_cpu_isa allm_cpu_isa_best(void);

/* The backends' switches from the environment, for tests and measurements: a
 * program reads them once (allm_backend_env_read) and passes them down in
 * allm_backend_opts.env; library code never calls getenv() for them. Each variable
 * is documented in docs/USAGE.md ("Environment variables"). Left reading their own
 * environment, on purpose: shm/shm-trust.c (ALLM_RUNTIME_DIR, XDG_*: the one
 * runtime-path rule every program shares), clientlib (a client library reads its
 * connection's environment, as libpq does) and ctl/top.c (a program). The KV
 * tier's switches are struct allm_kv_env (engined/kv/kv-disk.h). */
struct allm_backend_env {
	const char *cuda_module; /* ALLM_CUDA_MODULE: path of liballm-cuda.so; NULL: search */
	int cuda_smem_optin; /* ALLM_CUDA_SMEM_OPTIN: cap on the shared memory a block opts
			      * into (bytes; 0: the device's) */
	bool cuda_no_vmm; /* ALLM_CUDA_VMM=0: cudaMalloc, no VMM arena */
	const char *openblas; /* ALLM_OPENBLAS: the OpenBLAS --gemm openblas loads; NULL:
			       * libopenblas.so.0 */
	int qb_scales; /* ALLM_QB_SCALES=gather (1) | loads (2): the block items' scale
			* fetch forced; 0: measured */
	bool qb_r8_off; /* ALLM_QB_R8=off: the per-token block items only */
};

/* Fills *ret from the environment (strings point into it); a field is zero (the
 * default) where its variable is unset. */
void allm_backend_env_read(struct allm_backend_env *ret);

/* Options for creating a backend; zero means default. */
struct allm_backend_opts {
	int n_threads; /* cpu: worker threads (0 = online cores) */
	bool reference; /* cpu: the naive reference loops instead of the fast path */
	bool blas; /* cpu fast path: OpenBLAS GEMM (not batch-invariant) */
	int device_index; /* cuda: which GPU */
	enum allm_cpu_isa cpu_isa; /* cpu fast path: SIMD level (AUTO = the best; a level
				    * this machine lacks fails the creation) */
	const struct allm_backend_env *env; /* the program's switches; NULL: the defaults */
};

/* Creates the backend named by `device` ("cpu", "cuda", "auto", "sim:PROFILE" with
 * PROFILE a shipped profile name or a FILE.json path). For "auto" a CUDA
 * backend is tried first; when unusable, the CPU backend is created and the reason
 * is written to *ret_note (static text or err) for the program to log. The caller
 * owns *ret and destroys it with allm_backend_destroy(). */
int allm_backend_create(const char *device, const struct allm_backend_opts *opts,
			allm_backend_t **ret, char *ret_note, size_t note_len,
			struct allm_err *err);
void allm_backend_destroy(allm_backend_t *be);

/* Seconds on the device's clock: the virtual clock of a simulated device, the
 * monotonic wall clock (allm_now()) of any other. Engines and run loops read time
 * here so that a simulation reports simulated time. */
double allm_backend_clock(allm_backend_t *be);
/* The host begins a scheduler step: on a simulated device the clock advances by
 * the profile's host time per step (the device waits while the host schedules,
 * and the step's decisions see that time pass); nothing on a real device. */
void allm_backend_host_step(allm_backend_t *be);
/* A transfer of the disk KV tier (engined/kv): on a simulated device the clock
 * advances by the profile's disk model and the seconds are returned (-ENOTSUP
 * when the profile has none); 0 on a real device, whose I/O takes its own time. */
double allm_backend_charge_disk(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs);
/* The same transfer's time by the simulated device's disk model, the clock left
 * where it is (the disk works beside the device: a write behind, a read ahead);
 * as allm_backend_charge_disk otherwise. */
double allm_backend_disk_seconds(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs);
/* Lets the device's clock reach t: sleeps on a real device, moves the virtual
 * clock forward (the device idles) on a simulated one. */
void allm_backend_clock_wait_until(allm_backend_t *be, double t);

/* A simulated device's disk (kernels/sim): one line of transfers beside its
 * clock, in order, and the slots of the disk tier's stage of writes behind,
 * each busy until its write lands. The disk tier (engined/kv) times a
 * simulated disk through it; a real disk takes its own time. */
struct allm_sim_disk_i {
	/* queues a transfer (a write behind, a read ahead): when it starts
	 * (*ret_start, may be NULL) and ends (returned) */
	double (*queue)(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs, double *ret_start);
	/* a transfer the caller waits for, after what was queued before it: the
	 * seconds it waited in all, of them those for the queue in *ret_queued */
	double (*wait)(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs, double *ret_queued);
	/* the stage's slots (n_slots of them) whose writes have landed by now */
	int32_t (*stage_free)(allm_backend_t *be, int32_t n_slots);
	/* k free slots of it are busy until `until`; -ENOMEM */
	int (*stage_take)(allm_backend_t *be, int32_t n_slots, int32_t k, double until);
	/* when the line is next idle (its last queued transfer ends) */
	double (*idle)(allm_backend_t *be);
};
/* The simulated device's disk, NULL on a real device. */
const struct allm_sim_disk_i *allm_backend_sim_disk(allm_backend_t *be);

int allm_backend_cpu_create(const struct allm_backend_opts *opts, allm_backend_t **ret,
			    struct allm_err *err);

/* The entry point of the CUDA module (kernels/cuda), found with dlsym(): same
 * contract as allm_backend_cpu_create(). */
typedef int (*allm_backend_create_fn)(const struct allm_backend_opts *opts, allm_backend_t **ret,
				      struct allm_err *err);
#define ALLM_CUDA_ENTRY "allm_backend_cuda_create"

/* A symbol of the loaded CUDA module (tests reach its fault-injection hook this
 * way), or NULL when no module is loaded or it lacks the name. */
void *allm_backend_cuda_symbol(const char *name);

/* The top-k order on host memory, shared by the CPU backend's topk and the
 * sampler so that device and host candidates agree: the k largest of row[vocab]
 * (1 <= k <= vocab), sorted descending, equal values by ascending id, -0.0 == +0.0.
 * scratch holds k (value, id) pairs: 2 * k 32-bit words. */
void allm_topk_host(const float *row, int64_t vocab, int32_t k, float *ret_vals,
		    int32_t *ret_ids, void *scratch);

/* Whether the backend implements the version-2 topk op. */
static inline bool allm_backend_has_topk(allm_backend_t *be)
{
	return be->iface->version >= 2 && be->iface->topk != NULL;
}

/* The version-5 pages op, -ENOTSUP where the backend lacks it. */
static inline int allm_backend_pages(allm_backend_t *be, void *ptr, size_t bytes,
				     enum allm_pages_verb verb, size_t *ret_bytes)
{
	if (be->iface->version < 5 || !be->iface->pages)
		return -ENOTSUP;
	return be->iface->pages(be, ptr, bytes, verb, ret_bytes);
}

static inline bool allm_backend_supports(allm_backend_t *be, enum allm_backend_op op,
					 enum allm_dtype dt)
{
	/* the version-4 ops need their members too */
	if (op == ALLM_OP_GELU_MUL && (be->iface->version < 4 || !be->iface->gelu_mul))
		return false;
	if (op == ALLM_OP_SCALE && (be->iface->version < 4 || !be->iface->scale))
		return false;
	return be->iface->supports(be, op, dt);
}

static inline const char *allm_backend_last_error(allm_backend_t *be)
{
	return be->last_err.msg;
}

#ifdef __cplusplus
}
#endif

#endif
