#include "common.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

size_t allm_dtype_size(enum allm_dtype dt)
{
	return dt == ALLM_DTYPE_F32 ? 4 : allm_dtype_is_qblock(dt) ? 1 : 2;
}

const char *allm_dtype_name(enum allm_dtype dt)
{
	switch (dt) {
	case ALLM_DTYPE_F32: return "f32";
	case ALLM_DTYPE_F16: return "f16";
	case ALLM_DTYPE_BF16: return "bf16";
	case ALLM_DTYPE_Q8_0: return "q8_0";
	case ALLM_DTYPE_Q4_0: return "q4_0";
	case ALLM_DTYPE_Q4_1: return "q4_1";
	case ALLM_DTYPE_Q5_0: return "q5_0";
	case ALLM_DTYPE_Q5_1: return "q5_1";
	case ALLM_DTYPE_Q4_K: return "q4_k";
	case ALLM_DTYPE_Q5_K: return "q5_k";
	case ALLM_DTYPE_Q6_K: return "q6_k";
	default: return "?";
	}
}

int allm_dtype_parse(const char *s, enum allm_dtype *ret)
{
	if (!strcasecmp(s, "f32") || !strcasecmp(s, "float32") || !strcasecmp(s, "float"))
		*ret = ALLM_DTYPE_F32;
	else if (!strcasecmp(s, "f16") || !strcasecmp(s, "float16") || !strcasecmp(s, "half"))
		*ret = ALLM_DTYPE_F16;
	else if (!strcasecmp(s, "bf16") || !strcasecmp(s, "bfloat16"))
		*ret = ALLM_DTYPE_BF16;
	else
		return -EINVAL;
	return 0;
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

float allm_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;

	if (exp == 0x1f) /* inf / nan */
		return bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) {
		if (man == 0)
			return bits_f32(sign);
		/* subnormal: value = man * 2^-24 */
		float v = (float)man * 0x1p-24f;
		return sign ? -v : v;
	}
	return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t allm_f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint32_t sign = (x >> 16) & 0x8000;
	uint32_t absx = x & 0x7fffffffu;

	if (absx >= 0x7f800000u) /* inf or nan */
		return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
	if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
		return (uint16_t)(sign | 0x7c00);
	if (absx < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
		float a = bits_f32(absx);
		/* a * 2^24 rounded to nearest even gives the subnormal mantissa */
		float m = a * 0x1p24f;
		uint32_t r = (uint32_t)m;
		float frac = m - (float)r;
		if (frac > 0.5f || (frac == 0.5f && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	uint32_t exp = ((absx >> 23) - 112) << 10;
	uint32_t man = (absx >> 13) & 0x3ff;
	uint32_t rest = absx & 0x1fff;
	uint32_t h = exp | man;
	if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
		h++; /* may carry into the exponent, which is the right result */
	return (uint16_t)(sign | h);
}

float allm_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

uint16_t allm_f32_to_bf16(float f)
{
	uint32_t x = f32_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40); /* keep nan a nan */
	uint32_t lsb = (x >> 16) & 1;
	x += 0x7fff + lsb;
	return (uint16_t)(x >> 16);
}

void allm_to_f32(float *dst, const void *src, enum allm_dtype dt, size_t n)
{
	const uint16_t *h = src;
	switch (dt) {
	case ALLM_DTYPE_F32:
		memmove(dst, src, n * 4);
		break;
	case ALLM_DTYPE_F16:
		for (size_t i = 0; i < n; i++)
			dst[i] = allm_f16_to_f32(h[i]);
		break;
	case ALLM_DTYPE_BF16:
		for (size_t i = 0; i < n; i++)
			dst[i] = allm_bf16_to_f32(h[i]);
		break;
	default:
		ALLM_ASSERT(!"bad dtype");
	}
}

void allm_from_f32(void *dst, const float *src, enum allm_dtype dt, size_t n)
{
	uint16_t *h = dst;
	switch (dt) {
	case ALLM_DTYPE_F32:
		memmove(dst, src, n * 4);
		break;
	case ALLM_DTYPE_F16:
		for (size_t i = 0; i < n; i++)
			h[i] = allm_f32_to_f16(src[i]);
		break;
	case ALLM_DTYPE_BF16:
		for (size_t i = 0; i < n; i++)
			h[i] = allm_f32_to_bf16(src[i]);
		break;
	default:
		ALLM_ASSERT(!"bad dtype");
	}
}

uint64_t allm_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void allm_rng_seed(struct allm_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = allm_splitmix64(&seed);
}

static inline uint64_t rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t allm_rng_next(struct allm_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl64(s[3], 45);
	return out;
}

double allm_rng_unit(struct allm_rng *r)
{
	return (double)(allm_rng_next(r) >> 11) * 0x1p-53;
}

static const char *const log_names[] = {"error", "warn", "info", "debug"};

const char *allm_log_level_name(enum allm_log_level l)
{
	return (unsigned)l < ALLM_ARRAY_SIZE(log_names) ? log_names[l] : "?";
}

int allm_log_level_parse(const char *s, enum allm_log_level *ret)
{
	for (size_t l = 0; l < ALLM_ARRAY_SIZE(log_names); l++)
		if (!strcmp(s, log_names[l])) {
			*ret = (enum allm_log_level)l;
			return 0;
		}
	return -EINVAL;
}

int allm_err_set(struct allm_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

double allm_median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double allm_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A 16-byte header in front of each block remembers its size for the counter and
 * keeps the payload 16-byte aligned. */
#define ALLM_HDR 16
static _Atomic size_t allm_mem_bytes;

void *allm_malloc(size_t n)
{
	if (n > SIZE_MAX - ALLM_HDR)
		return NULL;
	unsigned char *p = malloc(n + ALLM_HDR);
	if (!p)
		return NULL;
	memcpy(p, &n, sizeof(n));
	atomic_fetch_add_explicit(&allm_mem_bytes, n, memory_order_relaxed);
	return p + ALLM_HDR;
}

void *allm_calloc(size_t count, size_t size)
{
	size_t n;
	if (!allm_mul_size(count, size, &n))
		return NULL;
	void *p = allm_malloc(n);
	if (p)
		memset(p, 0, n);
	return p;
}

void *allm_realloc(void *p, size_t n)
{
	if (!p)
		return allm_malloc(n);
	if (n > SIZE_MAX - ALLM_HDR)
		return NULL;
	unsigned char *base = (unsigned char *)p - ALLM_HDR;
	size_t old;
	memcpy(&old, base, sizeof(old));
	unsigned char *nb = realloc(base, n + ALLM_HDR);
	if (!nb)
		return NULL;
	memcpy(nb, &n, sizeof(n));
	atomic_fetch_add_explicit(&allm_mem_bytes, n, memory_order_relaxed);
	atomic_fetch_sub_explicit(&allm_mem_bytes, old, memory_order_relaxed);
	return nb + ALLM_HDR;
}

void allm_free(void *p)
{
	if (!p)
		return;
	unsigned char *base = (unsigned char *)p - ALLM_HDR;
	size_t n;
	memcpy(&n, base, sizeof(n));
	atomic_fetch_sub_explicit(&allm_mem_bytes, n, memory_order_relaxed);
	free(base);
}

size_t allm_mem_in_use(void)
{
	return atomic_load_explicit(&allm_mem_bytes, memory_order_relaxed);
}

void allm_assert_fail(const char *expr, const char *file, int line)
{
	fprintf(stderr, "allm: assertion failed: %s (%s:%d)\n", expr, file, line);
	abort();
}
