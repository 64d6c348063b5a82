/* Description: the control plane's bounded msgpack decoder refuses hostile input (lengths and counts beyond the bytes present, nesting past 8, truncation, trailing bytes, non-map roots, non-string keys, ext, 0xc1, oversize) before msgpack-c sees it and accepts what our encoder writes; typed lookups by dotted path, JSON output (nil/NaN as null) and endpoint naming follow ctl-proto.h. */
#include "ctl-proto.h"
#include "shm-trust.h"
#include "test-check.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int check_bad(const char *what, const void *buf, size_t len, int want)
{
	char err[256] = "";
	struct allm_ctl_msg *m = NULL;
	int r = allm_ctl_decode(buf, len, ALLM_CTL_MAX_MSG, &m, err, sizeof(err));
	CHECK(r == want, "%s: decode gave %d (%s), want %d", what, r, err, want);
	CHECK(m == NULL, "%s: a message came back", what);
	CHECK(r == 0 || err[0], "%s: no reason given", what);
	allm_ctl_msg_free(m);
	return r;
}

static void test_hostile(void)
{
	/* 5-byte headers claiming 4 GiB, alone and inside a map */
	static const uint8_t str32[] = {0xdb, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t arr32[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t map32[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t bin32_in_map[] = {0x81, 0xa1, 'k', 0xc6, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t str32_in_map[] = {0x81, 0xa1, 'k', 0xdb, 0x7f, 0xff, 0xff, 0xff, 'x'};
	static const uint8_t arr32_in_map[] = {0x81, 0xa1, 'k', 0xdd, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t map32_in_map[] = {0x81, 0xa1, 'k', 0xdf, 0x00, 0x01, 0x00, 0x00, 0xc0};
	/* 16 elements declared, 3 bytes follow */
	static const uint8_t arr16_short[] = {0x81, 0xa1, 'k', 0xdc, 0x00, 0x10, 1, 2, 3};
	check_bad("str32 4 GiB", str32, sizeof(str32), -EBADMSG);
	check_bad("array32 4 Gi elements", arr32, sizeof(arr32), -EBADMSG);
	check_bad("map32 4 Gi pairs", map32, sizeof(map32), -EBADMSG);
	check_bad("bin32 4 GiB in a map", bin32_in_map, sizeof(bin32_in_map), -EBADMSG);
	check_bad("str32 2 GiB in a map", str32_in_map, sizeof(str32_in_map), -EBADMSG);
	check_bad("array32 in a map", arr32_in_map, sizeof(arr32_in_map), -EBADMSG);
	check_bad("map32 65536 pairs in a map", map32_in_map, sizeof(map32_in_map), -EBADMSG);
	check_bad("array16 longer than the bytes", arr16_short, sizeof(arr16_short), -EBADMSG);

	/* truncated length fields and payloads */
	static const uint8_t trunc_len[] = {0x81, 0xa1, 'k', 0xda, 0x00};
	static const uint8_t trunc_f64[] = {0x81, 0xa1, 'k', 0xcb, 0, 0, 0};
	static const uint8_t trunc_map[] = {0x82, 0xa1, 'k', 0x01};
	check_bad("truncated str16 length", trunc_len, sizeof(trunc_len), -EBADMSG);
	check_bad("truncated float64", trunc_f64, sizeof(trunc_f64), -EBADMSG);
	check_bad("map missing a pair", trunc_map, sizeof(trunc_map), -EBADMSG);
	check_bad("empty", "", 0, -EBADMSG);

	/* trailing bytes, non-map roots, bad keys, ext, 0xc1 */
	static const uint8_t trailing[] = {0x80, 0xc0};
	static const uint8_t arr_root[] = {0x91, 0x01};
	static const uint8_t int_root[] = {0x05};
	static const uint8_t nil_root[] = {0xc0};
	static const uint8_t str_root[] = {0xa2, 'h', 'i'};
	static const uint8_t int_key[] = {0x81, 0x01, 0x02};
	static const uint8_t nested_int_key[] = {0x81, 0xa1, 'k', 0x81, 0x01, 0x02};
	static const uint8_t ext[] = {0x81, 0xa1, 'k', 0xd4, 0x01, 0x00};
	static const uint8_t c1[] = {0x81, 0xa1, 'k', 0xc1};
	check_bad("trailing byte", trailing, sizeof(trailing), -EBADMSG);
	check_bad("array root", arr_root, sizeof(arr_root), -EBADMSG);
	check_bad("int root", int_root, sizeof(int_root), -EBADMSG);
	check_bad("nil root", nil_root, sizeof(nil_root), -EBADMSG);
	check_bad("string root", str_root, sizeof(str_root), -EBADMSG);
	check_bad("integer key", int_key, sizeof(int_key), -EBADMSG);
	check_bad("nested integer key", nested_int_key, sizeof(nested_int_key), -EBADMSG);
	check_bad("ext type", ext, sizeof(ext), -EBADMSG);
	check_bad("0xc1", c1, sizeof(c1), -EBADMSG);

	/* nesting: 1000 deep refused, exactly 8 levels accepted, 9 refused */
	uint8_t deep[1100];
	size_t n = 0;
	deep[n++] = 0x81, deep[n++] = 0xa1, deep[n++] = 'a';
	for (int i = 0; i < 1000; i++)
		deep[n++] = 0x91;
	deep[n++] = 0xc0;
	check_bad("nested 1000 deep", deep, n, -EBADMSG);
	for (int levels = 8; levels <= 9; levels++) {
		n = 0;
		deep[n++] = 0x81, deep[n++] = 0xa1, deep[n++] = 'a'; /* level 1 */
		for (int i = 2; i <= levels; i++)
			deep[n++] = 0x91;
		deep[n++] = 0x07;
		char err[128];
		int r = allm_ctl_validate(deep, n, ALLM_CTL_MAX_MSG, err, sizeof(err));
		CHECK(levels == 8 ? r == 0 : r == -EBADMSG, "%d levels: %d (%s)", levels, r, err);
	}
	/* an empty container at level 9 still opens a level */
	n = 0;
	deep[n++] = 0x81, deep[n++] = 0xa1, deep[n++] = 'a';
	for (int i = 2; i <= 8; i++)
		deep[n++] = 0x91;
	deep[n++] = 0x90;
	CHECK(allm_ctl_validate(deep, n, ALLM_CTL_MAX_MSG, NULL, 0) == -EBADMSG, "empty 9th level");

	/* oversize: refused before the walk, whatever it holds */
	size_t big = ALLM_CTL_MAX_MSG + 1;
	uint8_t *b = calloc(1, big);
	b[0] = 0x80;
	check_bad("64 KiB + 1", b, big, -EMSGSIZE);
	free(b);
}

static void test_roundtrip(void)
{
	struct allm_ctl_enc e;
	allm_ctl_enc_init(&e);
	allm_ctl_enc_map(&e, 7);
	allm_ctl_enc_kint(&e, "id", 42);
	allm_ctl_enc_kstr(&e, "cmd", "status");
	allm_ctl_enc_kmap(&e, "blocks", 1);
	allm_ctl_enc_kmap(&e, "gpu", 2);
	allm_ctl_enc_kint(&e, "total", 128);
	allm_ctl_enc_kint(&e, "used", -3);
	allm_ctl_enc_kdouble(&e, "mape", NAN);
	allm_ctl_enc_kdouble(&e, "tps", 12.5);
	allm_ctl_enc_kbool(&e, "ok", true);
	allm_ctl_enc_karray(&e, "list", 2);
	allm_ctl_enc_str(&e, "a\"b");
	allm_ctl_enc_uint(&e, UINT64_MAX);
	CHECK(e.err == 0, "encode: %d", e.err);

	struct allm_ctl_msg *m = NULL;
	char err[128] = "";
	int r = allm_ctl_decode(e.sb.data, e.sb.size, ALLM_CTL_MAX_MSG, &m, err, sizeof(err));
	CHECK(r == 0, "decode our own message: %d %s", r, err);
	if (r)
		goto out;
	/* the message owns its bytes: the encoder's buffer may go */
	memset(e.sb.data, 0xee, e.sb.size);
	int64_t v = 0;
	double d = 0;
	bool ok = false;
	char s[8];
	const char *sp;
	size_t sl;
	const msgpack_object *o;
	CHECK(allm_ctl_get_int(m->root, "id", &v) == 0 && v == 42, "id %lld", (long long)v);
	CHECK(allm_ctl_get_int(m->root, "blocks.gpu.total", &v) == 0 && v == 128, "dotted");
	CHECK(allm_ctl_get_int(m->root, "blocks.gpu.used", &v) == 0 && v == -3, "negative");
	CHECK(allm_ctl_get_int(m->root, "blocks.gpu.free", &v) == -ENOENT, "missing leaf");
	CHECK(allm_ctl_get_int(m->root, "blocks.cpu.total", &v) == -ENOENT, "missing branch");
	CHECK(allm_ctl_get_int(m->root, "cmd", &v) == -EINVAL, "string as int");
	CHECK(allm_ctl_get_int(m->root, "cmd.x", &v) == -ENOENT, "path through a string");
	CHECK(allm_ctl_get_double(m->root, "mape", &d) == 0 && isnan(d), "nil -> NAN");
	CHECK(allm_ctl_get_double(m->root, "tps", &d) == 0 && d == 12.5, "double");
	CHECK(allm_ctl_get_double(m->root, "id", &d) == 0 && d == 42, "int as double");
	CHECK(allm_ctl_get_bool(m->root, "ok", &ok) == 0 && ok, "bool");
	CHECK(allm_ctl_get_str(m->root, "cmd", &sp, &sl) == 0 && sl == 6 && !memcmp(sp, "status", 6), "str");
	CHECK(allm_ctl_get_strbuf(m->root, "cmd", s, sizeof(s)) == 0 && !strcmp(s, "status"), "strbuf");
	CHECK(allm_ctl_get_strbuf(m->root, "cmd", s, 4) == -ENOSPC && !strcmp(s, "sta"), "strbuf trunc");
	CHECK(allm_ctl_get_map(m->root, "blocks.gpu", &o) == 0 && o->via.map.size == 2, "map");
	CHECK(allm_ctl_get_array(m->root, "list", &o) == 0 && o->via.array.size == 2, "array");
	CHECK(allm_ctl_get_array(m->root, "blocks", &o) == -EINVAL, "map as array");
	CHECK(allm_ctl_str_eq(allm_ctl_get(m->root, "cmd"), "status"), "str_eq");
	CHECK(!allm_ctl_str_eq(allm_ctl_get(m->root, "cmd"), "statu"), "str_eq prefix");
	CHECK(allm_ctl_get_int(m->root, "list", &v) == -EINVAL, "array as int");

	char *j = allm_ctl_to_json(m->root, false);
	CHECK(j && strstr(j, "\"mape\":null") && strstr(j, "\"a\\\"b\"") &&
		      strstr(j, "\"blocks\":{\"gpu\":{\"total\":128,\"used\":-3}}") &&
		      strstr(j, "{\"id\":42,\"cmd\":\"status\""),
	      "json: %s", j ? j : "(null)");
	free(j);
out:
	allm_ctl_msg_free(m);

	/* a request envelope, args as raw bytes */
	struct allm_ctl_enc a;
	allm_ctl_enc_init(&a);
	allm_ctl_enc_map(&a, 1);
	allm_ctl_enc_kstr(&a, "gpu_blocks", "64");
	CHECK(allm_ctl_enc_request(&e, 7, "set", a.sb.data, a.sb.size) == 0, "request");
	m = NULL;
	CHECK(allm_ctl_decode(e.sb.data, e.sb.size, ALLM_CTL_MAX_MSG, &m, NULL, 0) == 0, "decode request");
	if (m) {
		char buf[8];
		CHECK(allm_ctl_get_strbuf(m->root, "args.gpu_blocks", buf, sizeof(buf)) == 0 &&
			      !strcmp(buf, "64"), "args");
	}
	allm_ctl_msg_free(m);
	/* the encoder's cap is sticky */
	a.max = 16;
	allm_ctl_enc_reset(&a);
	allm_ctl_enc_str(&a, "a string longer than sixteen bytes");
	allm_ctl_enc_int(&a, 1);
	CHECK(a.err == -EMSGSIZE && a.sb.size <= 16, "cap: err %d size %zu", a.err, a.sb.size);
	allm_ctl_enc_free(&a);
	allm_ctl_enc_free(&e);
}

static void test_paths(void)
{
	char p[256];
	setenv("ALLM_RUNTIME_DIR", "/run/x", 1);
	CHECK(allm_ctl_endpoint(NULL, "demo", "ctl", p, sizeof(p)) == 0 &&
		      !strcmp(p, "ipc:///run/x/demo.ctl"), "%s", p);
	CHECK(allm_ctl_path("/d", "demo", "pub", p, sizeof(p)) == 0 && !strcmp(p, "/d/demo.pub"), "%s", p);
	unsetenv("ALLM_RUNTIME_DIR");
	setenv("XDG_RUNTIME_DIR", "/run/user/5", 1);
	CHECK(allm_ctl_runtime_dir(p, sizeof(p)) == 0 && !strcmp(p, "/run/user/5/adaptivellm"), "%s", p);
	unsetenv("XDG_RUNTIME_DIR");
	char want[64];
	snprintf(want, sizeof(want), "/tmp/adaptivellm-%u", (unsigned)getuid());
	CHECK(allm_ctl_runtime_dir(p, sizeof(p)) == 0 && !strcmp(p, want), "%s", p);
	/* one rule for paths (shm-trust.h): a relative XDG variable is ignored */
	setenv("XDG_RUNTIME_DIR", "run/user/5", 1);
	CHECK(allm_ctl_runtime_dir(p, sizeof(p)) == 0 && !strcmp(p, want), "relative XDG_RUNTIME_DIR: %s", p);
	unsetenv("XDG_RUNTIME_DIR");
	char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	setenv("HOME", "/h", 1);
	setenv("XDG_CACHE_HOME", "/c", 1);
	CHECK(allm_shm_cache_dir(p, sizeof(p)) == 0 && !strcmp(p, "/c/adaptivellm"), "%s", p);
	setenv("XDG_CACHE_HOME", "c", 1);
	CHECK(allm_shm_cache_dir(p, sizeof(p)) == 0 && !strcmp(p, "/h/.cache/adaptivellm"), "relative XDG_CACHE_HOME: %s", p);
	setenv("HOME", "h", 1);
	CHECK(allm_shm_cache_dir(p, sizeof(p)) == -ENOENT, "relative HOME: %s", p);
	unsetenv("XDG_CACHE_HOME");
	if (home)
		setenv("HOME", home, 1);
	free(home);
	CHECK(allm_ctl_endpoint("/d", "a/b", "ctl", p, sizeof(p)) == -EINVAL, "slash in name");
	CHECK(allm_ctl_endpoint("/d", "", "ctl", p, sizeof(p)) == -EINVAL, "empty name");
	CHECK(allm_ctl_endpoint("/d", "demo", "ctl", p, 8) == -ENAMETOOLONG, "too long");
}

int main(void)
{
	test_hostile();
	test_roundtrip();
	test_paths();
	if (n_fail)
		fprintf(stderr, "%d checks failed\n", n_fail);
	else
		printf("test-ctl-proto: all checks passed\n");
	return n_fail ? 1 : 0;
}
