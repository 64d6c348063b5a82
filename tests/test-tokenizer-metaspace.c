/* Description: Metaspace pre-tokenizer (Llama-2 files with legacy=false): prepend_scheme "first", split on/off, unk fusing, lstrip/rstrip added tokens; ids worked out by hand. */
#include "test-tokenizer-util.h"

#include <unistd.h>

/* tests/data/tokenizer/tiny-metaspace.json, merges by rank:
 *   0 "▁ a"  1 "▁ b"  2 "a b"  3 "▁a ▁b"
 * vocab: <unk>0 <s>1 </s>2 ▁3 a4 b5 ▁a6 ▁b7 ab8 ▁a▁b9 <mask>10 (lstrip, rstrip);
 * template: <s> $A; unk_token <unk> with fuse_unk. */
static void check_split(struct allm_tokenizer *tok)
{
	/* "a b" -> "▁a▁b" (spaces replaced, "▁" prepended: first piece of the text),
	 * split before each "▁": "▁a" "▁b"; ▁ a -> rank 0 -> 6; ▁ b -> rank 1 -> 7. */
	expect_ids(tok, "a b", false, IDS(6, 7));
	expect_ids(tok, "a b", true, IDS(1, 6, 7));
	/* "ab" -> "▁ab": ▁ a b; (▁,a)=0 beats (a,b)=2 -> ▁a b; (▁a,b) none -> 6 5. */
	expect_ids(tok, "ab", false, IDS(6, 5));
	/* prepend_scheme "first": only the piece at the start of the text gets "▁";
	 * after "</s>", "b" stays "b" = 5. */
	expect_ids(tok, "a</s>b", false, IDS(6, 2, 5));
	/* lstrip/rstrip: the spaces around <mask> belong to it; "b" is not at the start. */
	expect_ids(tok, "a <mask> b", false, IDS(6, 10, 5));
	/* Unknown chars become <unk>, consecutive ones fused: "▁xyz" -> ▁ <unk> = 3 0. */
	expect_ids(tok, "xyz", false, IDS(3, 0));
	expect_ids(tok, "xay", false, IDS(3, 0, 4, 0));
	/* Decoder: ▁ -> space, fuse, strip one leading space. */
	expect_decode(tok, IDS(1, 6, 7), true, "a b");
	expect_decode(tok, IDS(1, 6, 7), false, "<s> a b");
	expect_decode(tok, IDS(6, 2, 5), false, "a</s>b");
	roundtrip(tok, "a b ab ba");
}

int main(int argc, char **argv)
{
	const char *data = argc > 1 ? argv[1] : "tests/data/tokenizer";
	char path[4096];
	struct allm_tokenizer *tok = NULL;
	struct allm_err err = { { 0 } };

	snprintf(path, sizeof(path), "%s/tiny-metaspace.json", data);
	if (allm_tokenizer_load_file(path, &tok, &err)) {
		fprintf(stderr, "FAIL load %s: %s\n", path, err.msg);
		return 1;
	}
	check_split(tok);
	allm_tokenizer_free(tok);

	/* The same file with "split": false: "▁a▁b" stays one piece, so the merge
	 * "▁a ▁b" (rank 3) applies after ranks 0 and 1 -> 9. */
	FILE *f = fopen(path, "r");
	static char text[8192];
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = 0;
	char *at = strstr(text, "\"split\": true");
	CHECK(at != NULL, "data file lacks \"split\": true");
	if (at) {
		memcpy(at, "\"split\":false", 13);
		char tmp[] = "/tmp/allm-tok-ms-XXXXXX";
		int fd = mkstemp(tmp);
		CHECK(fd >= 0 && write(fd, text, n) == (ssize_t)n, "write temp file");
		close(fd);
		CHECK(allm_tokenizer_load_file(tmp, &tok, &err) == 0, "load split=false: %s", err.msg);
		unlink(tmp);
		expect_ids(tok, "a b", false, IDS(9));
		expect_ids(tok, "a  b", false, IDS(6, 3, 7));
		allm_tokenizer_free(tok);
	}
	return finish();
}
