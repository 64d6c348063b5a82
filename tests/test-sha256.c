/* Description: SHA-256 against the FIPS 180-4 / NIST vectors, including one million 'a's, and chunked updates of random splits giving the same digest. */
#include "sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test-check.h"

static void digest_hex(const void *p, size_t n, char hex[65])
{
	struct allm_sha256 c;
	uint8_t d[32];
	allm_sha256_init(&c);
	allm_sha256_update(&c, p, n);
	allm_sha256_final(&c, d);
	allm_sha256_hex(d, hex);
}

static void test_vectors(void)
{
	static const struct {
		const char *msg;
		const char *hex;
	} v[] = {
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
		{"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
		 "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
	};
	char hex[65];
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		digest_hex(v[i].msg, strlen(v[i].msg), hex);
		CHECK(strcmp(hex, v[i].hex) == 0, "vector %zu: got %s want %s", i, hex, v[i].hex);
	}

	/* One million 'a's, fed in 1000-byte pieces so the buffered path runs too. */
	char chunk[1000];
	memset(chunk, 'a', sizeof(chunk));
	struct allm_sha256 c;
	uint8_t d[32];
	allm_sha256_init(&c);
	for (int i = 0; i < 1000; i++)
		allm_sha256_update(&c, chunk, sizeof(chunk));
	allm_sha256_final(&c, d);
	allm_sha256_hex(d, hex);
	CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0,
	      "million a: %s", hex);
}

static void test_chunked(void)
{
	static uint8_t msg[4096];
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < sizeof(msg); i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		msg[i] = (uint8_t)(s >> 56);
	}
	/* Every length up to 200 (all padding boundaries 55/56/63/64) plus some long ones. */
	for (size_t len = 0; len < sizeof(msg); len += (len < 200 ? 1 : 397)) {
		char want[65], got[65];
		digest_hex(msg, len, want);
		for (int trial = 0; trial < 5; trial++) {
			struct allm_sha256 c;
			uint8_t d[32];
			allm_sha256_init(&c);
			size_t off = 0;
			while (off < len) {
				s = s * 6364136223846793005ull + 1442695040888963407ull;
				size_t take = (size_t)(s >> 33) % 130; /* 0..129, zero-length updates included */
				if (take > len - off)
					take = len - off;
				allm_sha256_update(&c, msg + off, take);
				off += take;
			}
			allm_sha256_final(&c, d);
			allm_sha256_hex(d, got);
			CHECK(strcmp(want, got) == 0, "len %zu trial %d: %s vs %s", len, trial, got, want);
		}
	}
}

int main(void)
{
	test_vectors();
	test_chunked();
	if (n_fail) {
		fprintf(stderr, "%d failure(s)\n", n_fail);
		return 1;
	}
	printf("sha256: ok\n");
	return 0;
}
