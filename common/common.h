/* Small helpers shared by every component of the engine: dtypes and their
 * conversions, an error buffer that library code fills instead of printing,
 * monotonic time and counted allocations (the dashboard shows the counters). */
#ifndef ALLM_COMMON_H
#define ALLM_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

enum allm_dtype {
	ALLM_DTYPE_F32 = 0,
	ALLM_DTYPE_F16 = 1,
	ALLM_DTYPE_BF16 = 2,
	ALLM_DTYPE_COUNT, /* the element dtypes end here */
	/* (16 was int8 rows with bf16 scales, retired for Q8_0: not reused.) */
	/* GGUF's block formats, used as the file lays them out (kernels/qblock.h): 32
	 * weights a block, an f16 scale (and an f16 min for Q4_1). Block formats, not
	 * element dtypes: only GEMM weights and embedding tables take them (a file's
	 * Q-tensors, or --quant q8_0|q4_0|q4_1); allm_to_f32()/allm_from_f32() do not. */
	ALLM_DTYPE_Q8_0 = 17,
	ALLM_DTYPE_Q4_0 = 18,
	ALLM_DTYPE_Q4_1 = 19,
	/* More of GGUF's block formats, computed in their own layouts (a file's
	 * tensors only: --quant does not write them): Q5_0 and Q5_1 (32 weights a
	 * block), the K formats Q4_K, Q5_K and Q6_K (256 a super-block). */
	ALLM_DTYPE_Q5_0 = 20,
	ALLM_DTYPE_Q5_1 = 21,
	ALLM_DTYPE_Q4_K = 22,
	ALLM_DTYPE_Q5_K = 23,
	ALLM_DTYPE_Q6_K = 24,
};

/* Whether dt is one of GGUF's block formats (Q8_0 .. Q6_K above). */
static inline bool allm_dtype_is_qblock(enum allm_dtype dt)
{
	return dt >= ALLM_DTYPE_Q8_0 && dt <= ALLM_DTYPE_Q6_K;
}

/* Bytes per element of a dtype (the GGUF block formats: 1, rounded up and the
 * scales not counted; see allm_qb_bytes). */
size_t allm_dtype_size(enum allm_dtype dt);
/* "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k". */
const char *allm_dtype_name(enum allm_dtype dt);
/* Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16"; -EINVAL otherwise. */
int allm_dtype_parse(const char *s, enum allm_dtype *ret);

float allm_f16_to_f32(uint16_t h);
uint16_t allm_f32_to_f16(float f);
float allm_bf16_to_f32(uint16_t h);
uint16_t allm_f32_to_bf16(float f); /* round to nearest even */

/* Converts n elements of src (dtype dt) to f32. */
void allm_to_f32(float *dst, const void *src, enum allm_dtype dt, size_t n);
/* Converts n f32 elements to dtype dt. */
void allm_from_f32(void *dst, const float *src, enum allm_dtype dt, size_t n);

/* Seeded pseudo-random numbers: xoshiro256** (Blackman & Vigna) with its state
 * expanded from a 64-bit seed by splitmix64, as its authors advise. Used wherever
 * a result must be reproducible from a seed (sampling, workloads, dummy weights). */
struct allm_rng {
	uint64_t s[4];
};

/* Next value of a splitmix64 stream whose state is *state. */
uint64_t allm_splitmix64(uint64_t *state);
void allm_rng_seed(struct allm_rng *r, uint64_t seed);
uint64_t allm_rng_next(struct allm_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double allm_rng_unit(struct allm_rng *r);

/* Median of v[0..n) (n > 0), which it sorts in place (insertion sort: the repeat
 * counts of calibrations are small). */
double allm_median(double *v, int n);

/* Error text for the caller to print; library code never prints. */
struct allm_err {
	char msg[512];
};

/* Formats msg into err (NULL allowed) and returns code, so that a failing path is
 * `return allm_err_set(err, -EINVAL, "bad %s", x);`. */
/* A log line's severity: a program writes the lines up to its --log-level. */
enum allm_log_level {
	ALLM_LOG_OFF = -1, /* as a program's level: nothing written */
	ALLM_LOG_ERROR = 0,
	ALLM_LOG_WARN = 1,
	ALLM_LOG_INFO = 2,
	ALLM_LOG_DEBUG = 3,
};
/* "error", "warn", "info", "debug" ("?" for no level). */
const char *allm_log_level_name(enum allm_log_level l);
/* The level named s (allm_log_level_name's): 0 with *ret, or -EINVAL. */
int allm_log_level_parse(const char *s, enum allm_log_level *ret);

int allm_err_set(struct allm_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Monotonic clock, seconds. */
double allm_now(void);

/* Counted allocations. allm_free accepts NULL. */
void *allm_malloc(size_t n);
void *allm_calloc(size_t count, size_t size);
void *allm_realloc(void *p, size_t n);
void allm_free(void *p);
/* Bytes currently allocated through allm_malloc and friends. */
size_t allm_mem_in_use(void);

/* Checked size arithmetic: returns false on overflow. */
static inline bool allm_mul_size(size_t a, size_t b, size_t *ret)
{
	return !__builtin_mul_overflow(a, b, ret);
}

#define ALLM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ALLM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ALLM_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Programming errors only: never for bad input. */
void allm_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define ALLM_ASSERT(e) ((e) ? (void)0 : allm_assert_fail(#e, __FILE__, __LINE__))

#ifdef __cplusplus
}
#endif

#endif
