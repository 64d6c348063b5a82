/* Description: the grammar engine (engined/grammar/) on a synthetic vocabulary: each
 * source kind accepts what it should and refuses the rest byte by byte, every
 * mask equals a brute-force check of each token, and bad grammars get one error
 * naming the place. */
#include "grammar.h"

#include "test-check.h"

#define T(c) CHECK(c, "%s", "")

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ids 0..255: the single bytes; then multi-byte tokens; then an "EOS" without
 * bytes. */
static const char *const multi[] = {
	"{\"", "\":", "\",", "\"}", "true", "false", "null", "  ", "\n", "ab", "abc", "name", "\"name\"",
	"\xc3\xa9", "\xe4\xb8", "\xad\xe6\x96\x87", "\xe4\xb8\xad", "12", "-1", "0.", "1e", "}", "]}", "[\"",
	"\"]", ", ", ": ", "\\\"", "\\u00", "e9", "x\"", "\"x", "Nf3", "O-O", "1. ", "-O",
};
#define N_MULTI (sizeof(multi) / sizeof(multi[0]))
#define EOS_ID (256 + (int32_t)N_MULTI)
#define VOCAB (EOS_ID + 1)

static struct allm_grammar_vocab *vocab;

static int32_t tok_len(int32_t id, const uint8_t **b)
{
	static uint8_t one[256];
	if (id < 256) {
		one[id] = (uint8_t)id;
		*b = &one[id];
		return 1;
	}
	if (id == EOS_ID)
		return 0;
	*b = (const uint8_t *)multi[id - 256];
	return (int32_t)strlen(multi[id - 256]);
}

static struct allm_grammar *compile(int kind, const char *text)
{
	struct allm_grammar *g = NULL;
	struct allm_err err = { { 0 } };
	int rc = allm_grammar_compile(kind, text, strlen(text), vocab, &g, &err);
	if (rc) {
		fprintf(stderr, "compile failed: %s\n  for: %s\n", err.msg, text);
		return NULL;
	}
	return g;
}

/* Feeds s byte by byte; whether each byte was taken and the end reached. */
static bool matches(struct allm_grammar *g, const char *s, size_t n)
{
	int32_t eos = EOS_ID;
	struct allm_grammar_matcher *m;
	T(allm_grammar_matcher_create(g, &eos, 1, &m) == 0);
	bool ok = true;
	for (size_t i = 0; i < n && ok; i++)
		ok = allm_grammar_matcher_accept(m, (uint8_t)s[i]);
	ok = ok && allm_grammar_matcher_accept(m, EOS_ID);
	allm_grammar_matcher_free(m);
	return ok;
}

/* After the prefix, the mask equals "accept() takes the token" for every token. */
static void check_mask(struct allm_grammar *g, const char *prefix)
{
	int32_t eos = EOS_ID;
	struct allm_grammar_matcher *m;
	T(allm_grammar_matcher_create(g, &eos, 1, &m) == 0);
	for (size_t i = 0; prefix[i]; i++)
		T(allm_grammar_matcher_accept(m, (uint8_t)prefix[i]));
	uint64_t bits[(VOCAB + 63) / 64];
	memcpy(bits, allm_grammar_matcher_mask(m), sizeof(bits));
	for (int32_t t = 0; t < VOCAB; t++) {
		struct allm_grammar_matcher *b;
		T(allm_grammar_matcher_create(g, &eos, 1, &b) == 0);
		for (size_t i = 0; prefix[i]; i++)
			allm_grammar_matcher_accept(b, (uint8_t)prefix[i]);
		bool want = allm_grammar_matcher_accept(b, t), got = (bits[t >> 6] >> (t & 63)) & 1;
		if (want != got)
			fprintf(stderr, "mask after '%s': token %d: mask %d, accept %d\n", prefix, t, got, want);
		T(want == got);
		allm_grammar_matcher_free(b);
	}
	/* apply(): the same set as logits */
	float logits[VOCAB];
	for (int32_t t = 0; t < VOCAB; t++)
		logits[t] = 1.0f;
	int32_t n = allm_grammar_matcher_apply(m, logits, VOCAB), k = 0;
	for (int32_t t = 0; t < VOCAB; t++) {
		T(isfinite(logits[t]) == (int)((bits[t >> 6] >> (t & 63)) & 1));
		k += isfinite(logits[t]);
	}
	T(n == k && n > 0);
	allm_grammar_matcher_free(m);
}

static void expect(int kind, const char *text, const char *const *yes, const char *const *no)
{
	struct allm_grammar *g = compile(kind, text);
	T(g != NULL);
	for (; yes && *yes; yes++) {
		if (!matches(g, *yes, strlen(*yes)))
			fprintf(stderr, "should match: '%s'\n  grammar: %s\n", *yes, text);
		T(matches(g, *yes, strlen(*yes)));
	}
	for (; no && *no; no++) {
		if (matches(g, *no, strlen(*no)))
			fprintf(stderr, "should not match: '%s'\n  grammar: %s\n", *no, text);
		T(!matches(g, *no, strlen(*no)));
	}
	allm_grammar_unref(g);
}

static void expect_error(int kind, const char *text, const char *want)
{
	struct allm_grammar *g = NULL;
	struct allm_err err = { { 0 } };
	int rc = allm_grammar_compile(kind, text, strlen(text), vocab, &g, &err);
	if (!rc || !strstr(err.msg, want))
		fprintf(stderr, "want an error with '%s', got %d '%s'\n  for: %s\n", want, rc, err.msg, text);
	T(rc < 0 && strstr(err.msg, want) && !g);
}

#define L(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void test_gbnf(void)
{
	expect(ALLM_GRAMMAR_GBNF, "root ::= \"a\" [b-d]* \"e\"?", L("a", "abcd", "ae", "adde"), L("", "b", "aea", "ax"));
	expect(ALLM_GRAMMAR_GBNF, "root ::= x{2,3} | \"y\"{0,1}\nx ::= \"ab\"", L("abab", "ababab", "", "y"),
	       L("ab", "abababab", "yy"));
	expect(ALLM_GRAMMAR_GBNF, "root ::= [^a]+", L("b", "\xc3\xa9", "\xe4\xb8\xad\xe6\x96\x87", "bb"),
	       L("a", "", "\xc3", "\xe4\xb8", "\xff", "\xed\xa0\x80"));
	expect(ALLM_GRAMMAR_GBNF, "root ::= [\\u00e9-\\u4e2d] .", L("\xc3\xa9x", "\xe4\xb8\xad\xc3\xa9"),
	       L("ex", "\xe4\xb8\xae" "a"));
	expect(ALLM_GRAMMAR_GBNF, "# a comment\nroot ::= (\n  \"a\" |\n  \"b\" # inside\n)+ end\nend ::= \"!\"",
	       L("a!", "abba!"), L("!", "a"));
	/* nullable repetition: no infinite expansion */
	expect(ALLM_GRAMMAR_GBNF, "root ::= (x)* \"z\"\nx ::= \"a\"?", L("z", "aaz"), L("a"));
	/* right recursion nests */
	expect(ALLM_GRAMMAR_GBNF, "root ::= \"(\" root \")\" | \"x\"", L("x", "((x))"), L("(x", "()"));
	expect_error(ALLM_GRAMMAR_GBNF, "root ::= \"a\"\nroot ::= \"b\"", "line 2 col 1: rule 'root' defined twice");
	expect_error(ALLM_GRAMMAR_GBNF, "root ::= foo", "line 1 col 10: rule 'foo' is used but never defined");
	expect_error(ALLM_GRAMMAR_GBNF, "root ::= \"a", "line 1 col 10: string literal not closed");
	expect_error(ALLM_GRAMMAR_GBNF, "root ::= [a-", "line 1 col 10: character class not closed");
	expect_error(ALLM_GRAMMAR_GBNF, "root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", "'expr' is left-recursive");
	expect_error(ALLM_GRAMMAR_GBNF, "root ::= a\na ::= \"x\" a", "'a' can never end");
	expect_error(ALLM_GRAMMAR_GBNF, "foo ::= \"x\"", "no rule named 'root'");
	expect_error(ALLM_GRAMMAR_GBNF, "root ::= \"a\"{3,2}", "below the minimum");
	expect_error(ALLM_GRAMMAR_GBNF, "root ::= <[1000]>", "token references");
	expect_error(ALLM_GRAMMAR_GBNF, "root ::= \"\\q\"", "unknown escape");
	expect_error(ALLM_GRAMMAR_GBNF, "root ::= \"a\" )", "line 1 col 14: unexpected ')'");
}

static void test_masks(void)
{
	struct allm_grammar *g = compile(ALLM_GRAMMAR_GBNF,
					 "root ::= \"{\\\"name\\\": \" str \"}\"\nstr ::= \"\\\"\" [^\"\\\\]* \"\\\"\"");
	T(g != NULL);
	check_mask(g, "");
	check_mask(g, "{");
	check_mask(g, "{\"name\": \"");
	check_mask(g, "{\"name\": \"\xe4");      /* inside a character */
	check_mask(g, "{\"name\": \"ab");
	check_mask(g, "{\"name\": \"ab\"");
	check_mask(g, "{\"name\": \"ab\"}");     /* only EOS */
	check_mask(g, "{\"name\": \"ab");        /* again: from the cache */
	struct allm_grammar_stats st;
	allm_grammar_stats(g, &st);
	T(st.mask_hits >= 1 && st.mask_misses >= 6);
	allm_grammar_unref(g);
	/* multi-byte tokens across rule ends */
	g = compile(ALLM_GRAMMAR_GBNF, "root ::= \"1. \" m \" \" m\nm ::= \"Nf3\" | \"O-O\" \"-O\"?");
	T(g != NULL);
	check_mask(g, "");
	check_mask(g, "1. O");
	check_mask(g, "1. O-O");
	check_mask(g, "1. O-O O-O");
	allm_grammar_unref(g);
}

static void test_json_schema(void)
{
	expect(ALLM_GRAMMAR_JSON_SCHEMA,
	       "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":3},"
	       "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},\"ok\":{\"type\":\"boolean\"}},"
	       "\"required\":[\"name\"]}",
	       L("{\"name\":\"ab\"}", "{ \"name\": \"\", \"age\": 120, \"ok\": true }", "{\"name\":\"x\",\"ok\":false}",
		 "{\"name\":\"\\u00e9\"}"),
	       L("{}", "{\"age\":1}", "{\"name\":\"abcd\"}", "{\"name\":\"a\",\"age\":121}", "{\"name\":\"a\",\"x\":1}",
		 "{\"name\":\"a\",\"age\":-1}", "{\"name\":\"\\ud800\"}"));
	expect(ALLM_GRAMMAR_JSON_SCHEMA,
	       "{\"type\":\"array\",\"items\":{\"enum\":[\"a\",1,null]},\"minItems\":1,\"maxItems\":2}",
	       L("[\"a\"]", "[1, null]", "[ null ]"), L("[]", "[1,1,1]", "[\"b\"]", "[2]"));
	expect(ALLM_GRAMMAR_JSON_SCHEMA,
	       "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},"
	       "{\"type\":\"null\"}]}},\"required\":[\"next\"]}},\"$ref\":\"#/$defs/n\"}",
	       L("{\"next\":null}", "{\"next\":{\"next\":null}}"), L("{}", "{\"next\":1}"));
	expect(ALLM_GRAMMAR_JSON_SCHEMA,
	       "{\"type\":\"object\",\"properties\":{\"a\":{\"const\":1}},\"additionalProperties\":{\"type\":\"number\"}}",
	       L("{}", "{\"a\":1}", "{\"a\":1,\"b\":2.5}", "{\"b\":-1e3,\"c\":0}", "{\"ab\":1}", "{\"\":1}"),
	       L("{\"a\":2}", "{\"b\":\"x\"}", "{\"b\":1,\"a\":1}"));
	expect(ALLM_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"pattern\":\"^[a-c]+x\\\"?$\"}",
	       L("\"abx\"", "\"cx\\\"\""), L("\"x\"", "\"abx\"\"", "\"ab\""));
	expect(ALLM_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"format\":\"date-time\"}",
	       L("\"2024-02-28T12:00:00Z\"", "\"1999-12-31T23:59:59.5+01:00\""),
	       L("\"2024-02-30T12:00:00Z\"", "\"2024-01-01T24:00:00Z\"", "\"2024-01-01T12:00:00\""));
	expect(ALLM_GRAMMAR_JSON_SCHEMA, "{\"type\":[\"integer\",\"null\"]}", L("12", "-3", "null", "0"),
	       L("1.5", "01", "\"1\""));
	expect(ALLM_GRAMMAR_JSON_SCHEMA, "{\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false}",
	       L("[]", "[\"a\"]", "[\"a\",1]"), L("[1]", "[\"a\",1,2]"));
	expect(ALLM_GRAMMAR_JSON_OBJECT, "", L("{}", "{\"a\":[1,{\"b\":null}]}"), L("[]", "1", "{"));
	expect_error(ALLM_GRAMMAR_JSON_SCHEMA, "{\"type\":\"object\",\"properties\":{\"a\":{\"allOf\":[]}}}",
		     "JSON Schema at /properties/a: 'allOf' is not supported");
	expect_error(ALLM_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"format\":\"email\"}", "format 'email'");
	expect_error(ALLM_GRAMMAR_JSON_SCHEMA, "{\"type\":", "JSON Schema: line 1");
	expect_error(ALLM_GRAMMAR_JSON_SCHEMA, "{\"$ref\":\"#/$defs/x\"}", "points at nothing");
	expect_error(ALLM_GRAMMAR_JSON_SCHEMA, "{\"type\":\"array\",\"uniqueItems\":true}", "uniqueItems");
	expect_error(ALLM_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"pattern\":\"(a\"}", "/: pattern: regex at 1");
}

static void test_regex_choice(void)
{
	expect(ALLM_GRAMMAR_REGEX, "^(ab|c)+\\d{2,3}[^\\s]?$", L("ab12", "cab123", "c12\xc3\xa9"), L("12", "ab1", "ab12 "));
	expect(ALLM_GRAMMAR_REGEX, "(?:\\w+\\.){1,}[a-z]{2}", L("a.bc", "x_1.y.zz"), L(".bc", "a.b"));
	expect(ALLM_GRAMMAR_REGEX, "a\\{b.", L("a{bx", "a{b\xc3\xa9"), L("a{b\n"));
	expect(ALLM_GRAMMAR_CHOICE, "[\"yes\", \"no\", \"n\\u00e9\"]", L("yes", "no", "n\xc3\xa9"), L("y", "yesno", ""));
	expect_error(ALLM_GRAMMAR_REGEX, "a(?=b)", "regex at 2: lookaround");
	expect_error(ALLM_GRAMMAR_REGEX, "(a)\\1", "regex at 4: backreferences");
	expect_error(ALLM_GRAMMAR_REGEX, "a{2", "regex at 2");
	expect_error(ALLM_GRAMMAR_REGEX, "a^b", "regex at 2");
	expect_error(ALLM_GRAMMAR_CHOICE, "[1]", "choice: item 0");
	expect_error(ALLM_GRAMMAR_JSON_OBJECT, "x", "takes no text");
	expect_error(99, "x", "unknown grammar kind 99");
}

/* A grammar that ends: only EOS; a token past the end is refused; EOS before the
 * end is refused. */
static void test_end(void)
{
	struct allm_grammar *g = compile(ALLM_GRAMMAR_CHOICE, "[\"ab\"]");
	int32_t eos = EOS_ID;
	struct allm_grammar_matcher *m;
	T(allm_grammar_matcher_create(g, &eos, 1, &m) == 0);
	T(!allm_grammar_matcher_accept(m, EOS_ID));
	T(!allm_grammar_matcher_accept(m, 256 + 10)); /* "abc" runs past */
	T(allm_grammar_matcher_accept(m, 256 + 9));   /* "ab" */
	T(allm_grammar_matcher_can_end(m));
	T(!allm_grammar_matcher_accept(m, 'a'));
	const uint64_t *bits = allm_grammar_matcher_mask(m);
	for (int32_t t = 0; t < VOCAB; t++)
		T(((bits[t >> 6] >> (t & 63)) & 1) == (t == EOS_ID));
	T(allm_grammar_matcher_accept(m, EOS_ID));
	allm_grammar_matcher_free(m);
	allm_grammar_unref(g);
}

/* The fewest bytes to the end, and masks that keep to a budget: random walks
 * whose every step keeps only what can still end within the tokens left end
 * whole, at the shortest budget that allows it. */
static void test_budget(void)
{
	int32_t eos = EOS_ID;
	struct allm_grammar_matcher *m;
	struct allm_grammar *g = compile(ALLM_GRAMMAR_GBNF, "root ::= \"ab\" [0-9]* \"c\"");
	T(g && allm_grammar_matcher_create(g, &eos, 1, &m) == 0);
	T(allm_grammar_matcher_left(m) == 3);
	T(allm_grammar_matcher_left_after(m, 'a') == 2 && allm_grammar_matcher_left_after(m, 256 + 9) == 1);
	T(allm_grammar_matcher_left_after(m, 'x') == UINT32_MAX && allm_grammar_matcher_left_after(m, EOS_ID) == UINT32_MAX);
	T(allm_grammar_matcher_left(m) == 3); /* looking moved nothing */
	T(allm_grammar_matcher_accept(m, 256 + 9));
	T(allm_grammar_matcher_left_after(m, '7') == 1 && allm_grammar_matcher_left_after(m, 'c') == 0);
	float logits[VOCAB];
	for (int32_t i = 0; i < VOCAB; i++)
		logits[i] = 0;
	T(allm_grammar_matcher_apply_within(m, logits, VOCAB, 0) == 1 && logits['c'] == 0 && logits['7'] == -INFINITY);
	T(allm_grammar_matcher_accept(m, 'c') && allm_grammar_matcher_left(m) == 0);
	allm_grammar_matcher_free(m);
	allm_grammar_unref(g);

	static const char *const schema = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, "
					  "\"b\": {\"type\": \"string\"}}, \"required\": [\"a\", \"b\"]}";
	T((g = compile(ALLM_GRAMMAR_JSON_SCHEMA, schema)) != NULL);
	T(allm_grammar_matcher_create(g, &eos, 1, &m) == 0);
	uint32_t least = allm_grammar_matcher_left(m); /* {"a":0,"b":""} */
	T(least == 14);
	allm_grammar_matcher_free(m);
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int whole = 0;
	for (int walk = 0; walk < 200; walk++) {
		uint32_t budget = least + (uint32_t)(walk % 12);
		T(allm_grammar_matcher_create(g, &eos, 1, &m) == 0);
		for (uint32_t k = 0; k < budget; k++) {
			for (int32_t i = 0; i < VOCAB; i++)
				logits[i] = 0;
			int32_t n = allm_grammar_matcher_apply_within(m, logits, VOCAB, budget - k - 1), pick = -1;
			T(n > 0);
			/* every id kept ends in time, brute force */
			for (int32_t i = 0; i < VOCAB; i++)
				if (logits[i] == 0)
					T(allm_grammar_matcher_left_after(m, i) <= budget - k - 1);
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			for (int32_t i = 0, c = (int32_t)(rng % (uint64_t)(n > 0 ? n : 1)); i < VOCAB; i++)
				if (logits[i] == 0 && c-- == 0) {
					pick = i;
					break;
				}
			T(pick >= 0 && allm_grammar_matcher_accept(m, pick));
			if (pick == EOS_ID)
				break;
		}
		whole += allm_grammar_matcher_can_end(m);
		allm_grammar_matcher_free(m);
	}
	T(whole == 200);
	allm_grammar_unref(g);
}

static void test_cache(void)
{
	struct allm_grammar_cache *c;
	struct allm_grammar *a, *b, *d;
	struct allm_err err;
	T(allm_grammar_cache_create(vocab, 2, &c) == 0);
	T(allm_grammar_cache_get(c, ALLM_GRAMMAR_REGEX, "ab", 2, &a, &err) == 0);
	T(allm_grammar_cache_get(c, ALLM_GRAMMAR_REGEX, "ab", 2, &b, &err) == 0);
	T(a == b);
	T(allm_grammar_cache_get(c, ALLM_GRAMMAR_GBNF, "ab", 2, &d, &err) < 0); /* another kind */
	T(strstr(err.msg, "GBNF line 1 col 3"));
	allm_grammar_unref(a);
	allm_grammar_unref(b);
	allm_grammar_cache_free(c);
}

int main(void)
{
	const uint8_t *bytes[VOCAB];
	uint32_t len[VOCAB];
	for (int32_t i = 0; i < VOCAB; i++) {
		len[i] = (uint32_t)tok_len(i, &bytes[i]);
		if (!len[i])
			bytes[i] = NULL;
	}
	T(allm_grammar_vocab_create(VOCAB, bytes, len, &vocab) == 0);
	test_gbnf();
	test_masks();
	test_json_schema();
	test_regex_choice();
	test_end();
	test_budget();
	test_cache();
	allm_grammar_vocab_free(vocab);
	T(allm_mem_in_use() == 0);
	printf("grammar: %s\n", n_fail ? "FAILED" : "ok");
	return n_fail ? 1 : 0;
}
