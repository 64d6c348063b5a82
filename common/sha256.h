/* SHA-256 (FIPS 180-4): the outputs hash (equal outputs_sha256 values mean two
 * runs produced identical outputs) and the prefix cache's block keys (kv/). Small
 * and dependency-free on purpose: a block key hashes ~100 bytes. */
#ifndef ALLM_SHA256_H
#define ALLM_SHA256_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct allm_sha256 {
	uint32_t h[8];      /* chaining state */
	uint64_t n_bytes;   /* total message length so far (bytes) */
	uint8_t buf[64];    /* pending partial block */
	size_t n_buf;       /* bytes used in buf, < 64 */
};

void allm_sha256_init(struct allm_sha256 *ctx);
/* Feeds n bytes; any split of a message into update calls gives the same digest. */
void allm_sha256_update(struct allm_sha256 *ctx, const void *data, size_t n);
/* Pads, writes the 32-byte digest to out; ctx must be re-initialised before reuse. */
void allm_sha256_final(struct allm_sha256 *ctx, uint8_t out[32]);
/* Lower-case hex of a digest, NUL-terminated (65 bytes). */
void allm_sha256_hex(const uint8_t d[32], char out[65]);

#ifdef __cplusplus
}
#endif

#endif
