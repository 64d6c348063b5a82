/* Description: small GGUF tokenizers written in the shape of the families people run (tests/gguf-write.c), each checked on what sets it apart: Gemma 3 (SentencePiece "llama", no added prefix space, <bos> added, <start_of_turn> / <end_of_turn> as control tokens, a user-defined "\n\n" matched even when special tokens are not parsed, <end_of_turn> stopping generation although the file names <eos> as EOS); Phi-3 / Mistral (the same with the prefix space SentencePiece adds at the start and after each control token, [INST] and <|end|> as control, <|end|> stopping generation); Llama 3 (byte-level "gpt2" with pre "llama-bpe": digits in runs of up to three, <|begin_of_text|> added, <|eot_id|> stopping generation); Qwen2 (pre "qwen2": digits one by one). Each text's ids are spelled as token strings (llama.cpp gives the same tokens on these files: tests/tokenizer-families-llama-cpp.py); the ids decode back to the text. */
#include "gguf-write.h"
#include "tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int n_fail;
#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			n_fail++;                                           \
		}                                                           \
	} while (0)

static char tmp[] = "/tmp/test-tokenizer-families-XXXXXX";

enum { NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER = 4, BYTE = 6 };

struct piece {
	const char *s;
	int type;
	float score; /* SentencePiece: higher merges first */
};

/* A tokenizer-only GGUF file: the pieces, then (SentencePiece) the 256 byte tokens. */
static struct allm_tokenizer *load(const char *name, const char *model, const struct piece *p, size_t n,
				   const char *const *merges, size_t n_merges, void (*keys)(struct gguf_w *))
{
	bool spm = !strcmp(model, "llama");
	size_t total = n + (spm ? 256 : 0);
	const char **toks = calloc(total, sizeof(*toks));
	int32_t *types = calloc(total, sizeof(*types));
	float *scores = calloc(total, sizeof(*scores));
	static char bytes[256][8];
	for (size_t i = 0; i < n; i++) {
		toks[i] = p[i].s;
		types[i] = p[i].type;
		scores[i] = p[i].score;
	}
	for (size_t b = 0; spm && b < 256; b++) {
		snprintf(bytes[b], sizeof(bytes[b]), "<0x%02zX>", b);
		toks[n + b] = bytes[b];
		types[n + b] = BYTE;
	}
	struct gguf_w *w = gguf_w_new();
	gguf_w_str(w, "tokenizer.ggml.model", model);
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, total);
	gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, total);
	if (spm)
		gguf_w_arr_f32(w, "tokenizer.ggml.scores", scores, total);
	else
		gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, n_merges);
	keys(w);
	char path[600];
	snprintf(path, sizeof(path), "%s/%s.gguf", tmp, name);
	CHECK(!gguf_w_save(w, path), "save %s", path);
	gguf_w_free(w);
	free(toks);
	free(types);
	free(scores);
	struct allm_err err = {{0}};
	struct allm_tokenizer *tok = NULL;
	CHECK(!allm_tokenizer_load_gguf(path, &tok, &err), "%s: %s", name, err.msg);
	if (!getenv("KEEP_GGUF")) /* KEEP_GGUF=1: leave the files, to hold against llama.cpp */
		unlink(path);
	return tok;
}

/* text under flags gives the tokens spelled in want ("a|b|c"), and decodes to
 * decoded (NULL: back to the text) */
static void expect_dec(const char *name, struct allm_tokenizer *tok, const char *text, unsigned flags,
		       const char *want, const char *decoded)
{
	struct allm_err err = {{0}};
	int32_t *ids = NULL;
	size_t n = 0, k = 0;
	char spelled[512] = "", *back = NULL;
	if (allm_tokenizer_encode_flags(tok, text, strlen(text), flags, &ids, &n, &err)) {
		CHECK(0, "%s: encode '%s': %s", name, text, err.msg);
		return;
	}
	for (size_t i = 0; i < n; i++)
		k += (size_t)snprintf(spelled + k, sizeof(spelled) - k, "%s%s", i ? "|" : "",
				      allm_tokenizer_id_to_token(tok, ids[i]));
	CHECK(!strcmp(spelled, want), "%s: '%s' (flags %u) is %s, want %s", name, text, flags, spelled, want);
	CHECK(!allm_tokenizer_decode(tok, ids, n, flags & ALLM_TOK_ENCODE_ADD_SPECIAL, &back, &err) &&
		      !strcmp(back, decoded ? decoded : text),
	      "%s: '%s' decodes to '%s'", name, text, back ? back : err.msg);
	allm_free(back);
	allm_free(ids);
}

static void expect(const char *name, struct allm_tokenizer *tok, const char *text, unsigned flags, const char *want)
{
	expect_dec(name, tok, text, flags, want, NULL);
}

static const unsigned P = ALLM_TOK_ENCODE_PARSE_SPECIAL, A = ALLM_TOK_ENCODE_ADD_SPECIAL;

/* SentencePiece pieces: "Hi there" merges to Hi|▁there, "user" to one piece */
#define SP "\xe2\x96\x81"
static const struct piece spm[] = {
	{"<pad>", CONTROL, 0},	    {"<eos>", CONTROL, 0},     {"<bos>", CONTROL, 0},	  {"<unk>", UNKNOWN, 0},
	{"<start_of_turn>", CONTROL, 0}, {"<end_of_turn>", CONTROL, 0}, {"\n\n", USER, 0},	  {"[INST]", CONTROL, 0},
	{"<|end|>", CONTROL, 0},    {"<s>", CONTROL, 0},       {"</s>", CONTROL, 0},	  {"<|endoftext|>", CONTROL, 0},
	{SP, NORMAL, -20},	       {"H", NORMAL, -20},	  {"i", NORMAL, -20},
	{"t", NORMAL, -20},	    {"h", NORMAL, -20},	       {"e", NORMAL, -20},	  {"r", NORMAL, -20},
	{"u", NORMAL, -20},	    {"s", NORMAL, -20},	       {"Hi", NORMAL, -1},	  {"he", NORMAL, -2},
	{SP "t", NORMAL, -3},	    {SP "the", NORMAL, -4},    {"re", NORMAL, -5},	  {SP "there", NORMAL, -6},
	{"er", NORMAL, -7},	    {"us", NORMAL, -8},	       {"user", NORMAL, -10},
};

static void gemma_keys(struct gguf_w *w)
{
	gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 2);
	gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 1);
	gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 3);
	gguf_w_u32(w, "tokenizer.ggml.padding_token_id", 0);
	gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
	gguf_w_bool(w, "tokenizer.ggml.add_eos_token", false);
	gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", false);
}

static void gemma(void)
{
	const char *g = "gemma3";
	struct allm_tokenizer *tok = load(g, "llama", spm, sizeof(spm) / sizeof(spm[0]), NULL, 0, gemma_keys);
	if (!tok)
		return;
	expect(g, tok, "Hi there", P | A, "<bos>|Hi|" SP "there");
	expect(g, tok, "Hi there", 0, "Hi|" SP "there");
	expect(g, tok, "<start_of_turn>user\nHi<end_of_turn>", P,
	       "<start_of_turn>|user|<0x0A>|Hi|<end_of_turn>");
	/* not parsed: the control tokens' characters, byte by byte where no piece has them */
	expect(g, tok, "<end_of_turn>", 0,
	       "<0x3C>|e|<0x6E>|<0x64>|<0x5F>|<0x6F>|<0x66>|<0x5F>|t|u|r|<0x6E>|<0x3E>");
	/* the user-defined "\n\n" either way */
	expect(g, tok, "Hi\n\nHi", 0, "Hi|\n\n|Hi");
	expect(g, tok, "Hi\n\nHi", P, "Hi|\n\n|Hi");
	int32_t eot = allm_tokenizer_token_to_id(tok, "<end_of_turn>");
	CHECK(allm_tokenizer_bos_id(tok) == 2 && allm_tokenizer_eos_id(tok) == 1, "gemma3: bos %d eos %d",
	      allm_tokenizer_bos_id(tok), allm_tokenizer_eos_id(tok));
	CHECK(allm_tokenizer_is_eos(tok, 1) && allm_tokenizer_is_eos(tok, eot) &&
		      !allm_tokenizer_is_eos(tok, allm_tokenizer_token_to_id(tok, "<start_of_turn>")),
	      "gemma3: <eos> and <end_of_turn> stop generation, <start_of_turn> does not");
	allm_tokenizer_free(tok);
}

/* The same vocabulary as Gemma 3's Hugging Face tokenizer.json lays it out: merges
 * instead of scores, Replace " " -> "▁", a Split on " " that has nothing left to
 * split, <bos> from the post-processor; it must tokenize as the GGUF file does. */
static void gemma_hf(void)
{
	static const char *const merges[] = {"H i", "h e", SP " t", SP "t he", "r e", SP "the re", "e r", "u s", "us er"};
	json_t *root = json_object(), *model = json_object(), *vocab = json_object(), *added = json_array();
	size_t n = sizeof(spm) / sizeof(spm[0]);
	for (size_t i = 0; i < n + 256; i++) {
		char b[8];
		snprintf(b, sizeof(b), "<0x%02zX>", i - n);
		json_object_set_new(vocab, i < n ? spm[i].s : b, json_integer((json_int_t)i));
		if (i < n && spm[i].type != NORMAL)
			json_array_append_new(added, json_pack("{s:i, s:s, s:b}", "id", (int)i, "content", spm[i].s, "special",
							       spm[i].type != USER));
	}
	json_t *ms = json_array();
	for (size_t i = 0; i < sizeof(merges) / sizeof(merges[0]); i++)
		json_array_append_new(ms, json_string(merges[i]));
	json_object_set_new(model, "type", json_string("BPE"));
	json_object_set_new(model, "vocab", vocab);
	json_object_set_new(model, "merges", ms);
	json_object_set_new(model, "byte_fallback", json_true());
	json_object_set_new(model, "unk_token", json_string("<unk>"));
	json_object_set_new(root, "model", model);
	json_object_set_new(root, "added_tokens", added);
	json_object_set_new(root, "normalizer", json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", " ",
							  "content", SP));
	json_object_set_new(root, "pre_tokenizer", json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "String",
							     " ", "behavior", "MergedWithPrevious", "invert", 0));
	json_object_set_new(root, "post_processor",
			    json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:{s:{s:s, s:[i], s:[s]}}}", "type",
				      "TemplateProcessing", "single", "SpecialToken", "id", "<bos>", "type_id", 0, "Sequence",
				      "id", "A", "type_id", 0, "special_tokens", "<bos>", "id", "<bos>", "ids", 2, "tokens",
				      "<bos>"));
	json_object_set_new(root, "decoder",
			    json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}]}", "type", "Sequence", "decoders", "type",
				      "Replace", "pattern", "String", SP, "content", " ", "type", "ByteFallback", "type", "Fuse"));
	char path[600];
	snprintf(path, sizeof(path), "%s/gemma-tokenizer.json", tmp);
	CHECK(!json_dump_file(root, path, 0), "write %s", path);
	json_decref(root);
	struct allm_err err = {{0}};
	struct allm_tokenizer *tok = NULL;
	CHECK(!allm_tokenizer_load_file(path, &tok, &err), "gemma3 tokenizer.json: %s", err.msg);
	unlink(path);
	if (!tok)
		return;
	const char *g = "gemma3 (tokenizer.json)";
	expect(g, tok, "Hi there", P | A, "<bos>|Hi|" SP "there");
	expect(g, tok, "<start_of_turn>user\nHi<end_of_turn>", P, "<start_of_turn>|user|<0x0A>|Hi|<end_of_turn>");
	expect(g, tok, "Hi\n\nHi", 0, "Hi|\n\n|Hi");
	CHECK(allm_tokenizer_is_eos(tok, allm_tokenizer_token_to_id(tok, "<end_of_turn>")),
	      "gemma3 (tokenizer.json): <end_of_turn> stops generation");
	allm_tokenizer_free(tok);
}

static void mistral_keys(struct gguf_w *w) /* no add_space_prefix: llama.cpp's default, true */
{
	gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 2);
	gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 1);
	gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 3);
}

static void phi3_keys(struct gguf_w *w) /* named so: llama.cpp's rstrip rule */
{
	mistral_keys(w);
	gguf_w_str(w, "general.name", "Phi 3 Mini 4k Instruct (phi3)");
}

static void phi3_mistral(void)
{
	const char *m = "phi3/mistral";
	struct allm_tokenizer *tok = load("mistral", "llama", spm, sizeof(spm) / sizeof(spm[0]), NULL, 0, mistral_keys);
	if (!tok)
		return;
	expect(m, tok, "Hi there", P | A, "<bos>|" SP "|Hi|" SP "there");
	/* the prefix space again after a control token, as llama.cpp and HF's Prepend do;
	 * only the text's first one is stripped when decoding (both do the same) */
	expect_dec(m, tok, "[INST]Hi there", P, "[INST]|" SP "|Hi|" SP "there", "[INST] Hi there");
	CHECK(allm_tokenizer_is_eos(tok, allm_tokenizer_token_to_id(tok, "<|end|>")), "phi3: <|end|> stops generation");
	/* not named Phi-3: the newline after a control token stays */
	expect_dec(m, tok, "[INST]\nHi", P, "[INST]|" SP "|<0x0A>|Hi", "[INST] \nHi");
	allm_tokenizer_free(tok);
	/* named Phi-3: every special token but <unk>, <s>, <|endoftext|> eats the
	 * whitespace after it, as Phi-3's tokenizer.json says and llama.cpp restores */
	tok = load("phi3", "llama", spm, sizeof(spm) / sizeof(spm[0]), NULL, 0, phi3_keys);
	if (!tok)
		return;
	expect_dec("phi3", tok, "[INST]\nHi there<|end|>\n<|end|>", P, "[INST]|" SP "|Hi|" SP "there|<|end|>|<|end|>",
		   "[INST] Hi there<|end|><|end|>");
	allm_tokenizer_free(tok);
}

/* byte-level pieces ("Ġ" is the space) and merges for "Hi there 12345" */
#define G "\xc4\xa0"
static const struct piece bl[] = {
	{"<|begin_of_text|>", CONTROL, 0}, {"<|end_of_text|>", CONTROL, 0}, {"<|eot_id|>", CONTROL, 0},
	{"<|im_end|>", CONTROL, 0},	   {"1", NORMAL, 0},		    {"2", NORMAL, 0},
	{"3", NORMAL, 0},		   {"4", NORMAL, 0},		    {"5", NORMAL, 0},
	{"12", NORMAL, 0},		   {"123", NORMAL, 0},		    {"45", NORMAL, 0},
	{"H", NORMAL, 0},		   {"i", NORMAL, 0},		    {"Hi", NORMAL, 0},
	{G, NORMAL, 0},			   {"t", NORMAL, 0},		    {"h", NORMAL, 0},
	{"e", NORMAL, 0},		   {"r", NORMAL, 0},		    {G "t", NORMAL, 0},
	{"he", NORMAL, 0},		   {G "the", NORMAL, 0},	    {"re", NORMAL, 0},
	{G "there", NORMAL, 0},
};
static const char *const bl_merges[] = {"1 2", "12 3", "4 5", "H i", "h e", G " t", G "t he", "r e", G "the re"};

static void llama3_keys(struct gguf_w *w)
{
	gguf_w_str(w, "tokenizer.ggml.pre", "llama-bpe");
	gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 0);
	gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 1);
	gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
}

static void qwen2_keys(struct gguf_w *w)
{
	gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
	gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 3);
	gguf_w_bool(w, "tokenizer.ggml.add_bos_token", false);
}

static void byte_level(void)
{
	size_t n = sizeof(bl) / sizeof(bl[0]), nm = sizeof(bl_merges) / sizeof(bl_merges[0]);
	struct allm_tokenizer *tok = load("llama3", "gpt2", bl, n, bl_merges, nm, llama3_keys);
	if (tok) {
		expect("llama3", tok, "Hi there 12345", P | A, "<|begin_of_text|>|Hi|" G "there|" G "|123|45");
		expect("llama3", tok, "<|eot_id|>", P, "<|eot_id|>");
		CHECK(allm_tokenizer_is_eos(tok, 1) && allm_tokenizer_is_eos(tok, 2),
		      "llama3: <|end_of_text|> and <|eot_id|> stop generation");
		allm_tokenizer_free(tok);
	}
	tok = load("qwen2", "gpt2", bl, n, bl_merges, nm, qwen2_keys);
	if (tok) {
		expect("qwen2", tok, "Hi there 12345", P | A, "Hi|" G "there|" G "|1|2|3|4|5");
		CHECK(allm_tokenizer_eos_id(tok) == 3 && allm_tokenizer_is_eos(tok, 3) && allm_tokenizer_bos_id(tok) < 0,
		      "qwen2: <|im_end|> is EOS, no BOS");
		allm_tokenizer_free(tok);
	}
}

int main(void)
{
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	gemma();
	gemma_hf();
	phi3_mistral();
	byte_level();
	if (!getenv("KEEP_GGUF"))
		rmdir(tmp);
	else
		printf("files kept in %s\n", tmp);
	if (n_fail)
		return 1;
	printf("test-tokenizer-families: all checks passed\n");
	return 0;
}
