/* A simulated device's profile (DESIGN §4 "sim"): the numbers the cost model
 * (sim-cost.h) turns into seconds, read from a JSON file that names a source for
 * every number. Profiles ship in data/sim-profiles/ and are compiled into the
 * programs; `--device sim:FILE.json` reads one from disk instead.
 *
 * The JSON shape (format "allm-sim-profile/1"): every number is an object
 * {"value": X, "source": "where X comes from"}; see data/sim-profiles/README.md. */
#ifndef ALLM_SIM_PROFILE_H
#define ALLM_SIM_PROFILE_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ALLM_SIM_PROFILE_FORMAT "allm-sim-profile/1"
/* Measured GEMM shapes a profile may carry (fitted profiles), and points per shape. */
#define ALLM_SIM_MAX_GEMM_SHAPES 64
#define ALLM_SIM_MAX_GEMM_POINTS 24

/* Cost parameters of one op (indexed by enum allm_backend_op). */
struct allm_sim_op_params {
	double launch; /* seconds per call: launch gap, thread wake-up, loop set-up */
	double compute; /* fraction of peak FLOP/s reached at large row counts (gemm, attention) */
	double half_rows; /* rows at which half of `compute` is reached (saturation curve) */
	double bandwidth; /* fraction of peak memory bandwidth the op reaches */
	/* attention: FLOP-equivalents of the softmax per score (one exp, max, sum per
	 * query x context position x head), on top of 4 * head_dim for QK and PV */
	double score_flops;
	/* attention: 1 when the device runs a batch's sequences one after another (a
	 * CPU thread), so a mixed step's decodes and prefills cost apart; 0 (default)
	 * when they run at once (a GPU kernel) */
	double serial;
	/* attention on a device with caches (a CPU): a call's distinct K/V bytes past
	 * cache_bytes stream at far_bandwidth (a fraction of peak too), every other
	 * byte at `bandwidth`. The CPU backend's attention reads each sequence's K/V
	 * once per layer, so a few sequences' K/V stays in L2 and many sequences'
	 * does not (allm-sim-fit finds 0.7-2.5 MB on a 1 MiB-L2 AMD EPYC). 0
	 * (default): no cache, one bandwidth. */
	double cache_bytes;
	double far_bandwidth;
};

/* A measured GEMM shape (k, m) of one weight dtype: seconds at several row counts. */
struct allm_sim_gemm_shape {
	enum allm_dtype dtype;
	int64_t k, m;
	int32_t n_points;
	double rows[ALLM_SIM_MAX_GEMM_POINTS]; /* increasing */
	double seconds[ALLM_SIM_MAX_GEMM_POINTS];
};

struct allm_sim_profile {
	char name[64]; /* "a800-pcie" */
	char device[160]; /* what it stands for, e.g. "NVIDIA A800 80GB PCIe" */
	char hash[17]; /* FNV-1a of the JSON text: keys predictor caches by content */
	enum allm_dtype dtype; /* storage dtype --dtype auto picks on this device */
	double memory_bytes; /* device memory */
	double reserved_bytes; /* taken by the runtime before the engine allocates */
	double flops[ALLM_DTYPE_COUNT]; /* peak dense FLOP/s by weight dtype */
	double mem_bw; /* peak device memory bandwidth, bytes/s */
	/* copies by enum allm_copy_dir: effective bytes/s and per-copy latency (s) */
	double link_bw[4];
	double link_latency[4];
	double host_step; /* host seconds per scheduler step the device waits for */
	bool has_disk; /* a disk model for the disk KV tier: */
	double disk_bw[2], disk_latency[2]; /* [0] write, [1] read: bytes/s and s per transfer */
	struct allm_sim_op_params op[ALLM_OP_COUNT];
	/* ops.attention_decode (optional): attention's parameters for the decodes of
	 * a batch (sequences with one new token), which a CPU thread runs as many
	 * small calls that one roofline shared with long prefills prices badly */
	bool has_attn_decode;
	struct allm_sim_op_params attn_decode;
	struct allm_sim_gemm_shape *gemm_shapes; /* measured shapes (may be NULL) */
	int32_t n_gemm_shapes;
};

/* Parses and validates a profile from JSON text (len bytes). `origin` names it in
 * errors ("sim:cpu-local", a path). Every number must be finite, in range and carry
 * a non-empty source; dtypes must be known; -EINVAL with err otherwise. The caller
 * frees *ret with allm_sim_profile_free(). */
int allm_sim_profile_parse(const char *text, size_t len, const char *origin,
			   struct allm_sim_profile **ret, struct allm_err *err);
/* Loads `spec`: the name of a profile compiled into the program ("a800-pcie"), or a
 * path to a JSON file (anything containing '/' or ending in ".json"). -ENOENT with
 * the list of shipped names when the name is unknown. */
int allm_sim_profile_load(const char *spec, struct allm_sim_profile **ret, struct allm_err *err);
void allm_sim_profile_free(struct allm_sim_profile *p);

/* The shipped profile names, comma-separated, into buf. */
const char *allm_sim_profile_names(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
