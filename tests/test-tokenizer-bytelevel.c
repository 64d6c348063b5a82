/* Description: byte-level BPE on small hand-written tokenizer.json files (GPT-2 and Llama-3 split patterns), ids worked out by hand from the merges. */
#include "test-tokenizer-util.h"

/* tests/data/tokenizer/tiny-bytelevel.json, merges by rank:
 *   0 "h e"  1 "l l"  2 "he ll"  3 "hell o"  4 "Ġ w"  5 "o r"  6 "Ġw or"  7 "Ġwor l"
 *   8 "Ġworl d"  9 "Ġ h"  10 "l o"
 * vocab: h0 e1 l2 o3 Ġ4 w5 r6 d7 !8 he9 ll10 hell11 hello12 Ġw13 or14 Ġwor15 Ġworl16
 *        Ġworld17 Ġh18 lo19 <|end|>20 (special). */
static void check_tiny_gpt2(struct allm_tokenizer *tok)
{
	/* "hello world!" splits (GPT-2 pattern) into "hello" " world" "!".
	 * hello: h e l l o; candidates (h,e)=0 (l,l)=1 (l,o)=10 -> merge 0: he l l o;
	 *   (l,l)=1 (l,o)=10 -> merge 1: he ll o; (he,ll)=2 -> hell o; (hell,o)=3 -> hello=12.
	 *   ("l o" = 10 loses to "l l" = 1, so "lo" never forms.)
	 * " world": Ġ w o r l d; (Ġ,w)=4 (o,r)=5 -> Ġw o r l d; (o,r)=5 -> Ġw or l d;
	 *   (Ġw,or)=6 -> Ġwor l d; 7 -> Ġworl d; 8 -> Ġworld=17.   "!" = 8. */
	expect_ids(tok, "hello world!", false, IDS(12, 17, 8));
	/* "hell lo" -> "hell" " lo". hell: he l l -> he ll -> hell=11.
	 * " lo": Ġ l o; (Ġ,l) no merge, (l,o)=10 -> Ġ lo = 4 19. */
	expect_ids(tok, "hell lo", false, IDS(11, 4, 19));
	/* Equal ranks go leftmost first: l l l -> (ll) l = 10 2. */
	expect_ids(tok, "lll", false, IDS(10, 2));
	/* " hh": Ġ h h; (Ġ,h)=9, (h,h) none -> Ġh h = 18 0. */
	expect_ids(tok, " hh", false, IDS(18, 0));
	/* The added token is cut out before BPE: "hello" <|end|> "he" = 12 20 9. */
	expect_ids(tok, "hello<|end|>he", true, IDS(12, 20, 9));
	/* "  world": \s+(?!\S) leaves the last space to the word: " " " world" = 4 17. */
	expect_ids(tok, "  world", false, IDS(4, 17));
	expect_decode(tok, IDS(12, 20, 9), false, "hello<|end|>he");
	expect_decode(tok, IDS(12, 20, 9), true, "hellohe");
	expect_decode(tok, IDS(12, 17, 8), true, "hello world!");
}

/* tests/data/tokenizer/tiny-llama3.json: Llama-3 split pattern, ignore_merges, merges
 * as ["a", "b"] pairs: 0 ("3","4")  1 ("Ġ","a")  2 ("'","S")  3 (".","a").
 * vocab: 1:0 2:1 3:2 4:3 5:4 6:5 34:6 Ġ:7 a:8 Ġa:9 ':10 S:11 'S:12 .:13 .a:14 aaa:15
 *        <|begin|>:16 (template: <|begin|> $A). */
static void check_tiny_llama3(struct allm_tokenizer *tok)
{
	/* \p{N}{1,3}: "123456" -> "123" "456", so the (3,4) merge cannot apply. */
	expect_ids(tok, "123456", false, IDS(0, 1, 2, 3, 4, 5));
	expect_ids(tok, "34", false, IDS(6));
	/* [^\r\n\p{L}\p{N}]?\p{L}+: " a" and ".a" are pieces: Ġa=9, .a=14. */
	expect_ids(tok, " a.a", false, IDS(9, 14));
	/* (?i:'s...) matches "'S" as one piece: ' S -> 'S = 12 (GPT-2 would split). */
	expect_ids(tok, "'S", false, IDS(12));
	/* ignore_merges: "aaa" is a vocab entry, taken whole although no merge builds it. */
	expect_ids(tok, "aaa", false, IDS(15));
	/* TemplateProcessing inside a Sequence post-processor. */
	expect_ids(tok, "34", true, IDS(16, 6));
	CHECK(allm_tokenizer_bos_id(tok) == 16, "bos from template: %d", allm_tokenizer_bos_id(tok));
	expect_decode(tok, IDS(16, 9, 14, 6), true, " a.a34");
}

int main(int argc, char **argv)
{
	const char *data = argc > 1 ? argv[1] : "tests/data/tokenizer";
	static const char *const files[] = { "tiny-bytelevel.json", "tiny-llama3.json" };
	for (size_t i = 0; i < 2; i++) {
		char path[4096];
		struct allm_tokenizer *tok = NULL;
		struct allm_err err = { { 0 } };
		snprintf(path, sizeof(path), "%s/%s", data, files[i]);
		if (allm_tokenizer_load_file(path, &tok, &err)) {
			fprintf(stderr, "FAIL load %s: %s\n", path, err.msg);
			return 1;
		}
		if (i == 0)
			check_tiny_gpt2(tok);
		else
			check_tiny_llama3(tok);
		allm_tokenizer_free(tok);
	}
	return finish();
}
