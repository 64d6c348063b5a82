/* Description: malformed or unsupported tokenizer.json / config files fail to load with an error naming the field; nothing crashes. */
#include "test-tokenizer-util.h"

#include <unistd.h>

static char dir[256];

static void write_file(const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

static void remove_file(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

/* A valid small byte-level file in which one part is swapped for `model`, `extra`
 * (more top-level fields) as given. */
static void write_tokenizer(const char *model, const char *extra)
{
	char text[4096];
	snprintf(text, sizeof(text),
		 "{\"version\": \"1.0\", %s%s\"model\": %s}", extra, *extra ? ", " : "",
		 model ? model
		       : "{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}");
	write_file("tokenizer.json", text);
}

/* Loading must fail with code `want` and a message containing `field`. */
static void expect_error(const char *what, int want, const char *field)
{
	struct allm_tokenizer *tok = (struct allm_tokenizer *)&dir; /* must stay untouched */
	struct allm_err err = { { 0 } };
	int r = allm_tokenizer_load(dir, &tok, &err);
	CHECK(r == want && strstr(err.msg, field) && tok == (struct allm_tokenizer *)&dir,
	      "%s: got %d '%s', want %d naming '%s'", what, r, err.msg, want, field);
	if (r == 0 && tok != (struct allm_tokenizer *)&dir)
		allm_tokenizer_free(tok);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/allm-tok-bad-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}

	expect_error("no tokenizer.json", -ENOENT, "tokenizer.json");
	write_file("tokenizer.json", "{\"model\": ");
	expect_error("truncated JSON", -EINVAL, "line");
	write_file("tokenizer.json", "[1, 2]");
	expect_error("top level array", -EINVAL, "top level");

	write_tokenizer("{\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}", "");
	expect_error("WordPiece", -EINVAL, "model.type");
	write_tokenizer("{\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}", "");
	expect_error("Unigram", -EINVAL, "model.type");
	write_tokenizer("{\"type\": \"BPE\", \"merges\": []}", "");
	expect_error("missing vocab", -EINVAL, "model.vocab");
	write_tokenizer("{\"vocab\": {\"a\": 0}}", "");
	expect_error("no type and no merges", -EINVAL, "model.type");
	write_tokenizer("{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": -1}, \"merges\": []}", "");
	expect_error("negative id", -EINVAL, "model.vocab['b']");
	write_tokenizer("{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}", "");
	expect_error("duplicate id", -EINVAL, "model.vocab");
	/* the id tables are sized by the largest id: one far-off id must not cost GBs */
	write_tokenizer("{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 2147483646}, \"merges\": []}", "");
	expect_error("a vocab id far past the tokens defined", -EINVAL, "far past the 2 tokens");
	write_tokenizer(NULL, "\"added_tokens\": [{\"id\": 50000000, \"content\": \"<x>\", \"special\": true}]");
	expect_error("an added token id far past the tokens defined", -EINVAL, "token id 50000000");
	{
		/* a hole of a thousand ids next to three tokens still loads */
		struct allm_tokenizer *tok = NULL;
		struct allm_err err = { { 0 } };
		write_tokenizer(NULL, "\"added_tokens\": [{\"id\": 1000, \"content\": \"<x>\", \"special\": true}]");
		CHECK(allm_tokenizer_load(dir, &tok, &err) == 0 && allm_tokenizer_vocab_size(tok) == 1001,
		      "a sparse but sane id space: %s", err.msg);
		allm_tokenizer_free(tok);
	}
	write_tokenizer("{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\", \"a c\"]}", "");
	expect_error("merge of a missing token", -EINVAL, "model.merges[1]");
	write_tokenizer("{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [[\"a\", \"b\"]]}", "");
	expect_error("merge result missing", -EINVAL, "model.merges[0]");
	write_tokenizer("{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"ab\"]}", "");
	expect_error("merge without space", -EINVAL, "model.merges[0]");
	write_tokenizer("{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [42]}", "");
	expect_error("merge not a string", -EINVAL, "model.merges[0]");
	write_tokenizer("{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": {}}", "");
	expect_error("merges not an array", -EINVAL, "model.merges");
	write_tokenizer("{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], \"unk_token\": \"<unk>\"}", "");
	expect_error("unk not in vocab", -EINVAL, "model.unk_token");
	write_tokenizer("{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], \"continuing_subword_prefix\": \"##\"}", "");
	expect_error("subword prefix", -EINVAL, "model.continuing_subword_prefix");

	write_tokenizer(NULL, "\"added_tokens\": [{\"id\": 3}]");
	expect_error("added token without content", -EINVAL, "added_tokens[0].content");
	write_tokenizer(NULL, "\"added_tokens\": [{\"id\": \"x\", \"content\": \"<s>\"}]");
	expect_error("added token with a bad id", -EINVAL, "added_tokens[0].id");
	write_tokenizer(NULL, "\"normalizer\": {\"type\": \"NFKC\"}");
	expect_error("NFKC", -EINVAL, "normalizer.type");
	write_tokenizer(NULL, "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Lowercase\"}]}");
	expect_error("Lowercase in a sequence", -EINVAL, "normalizer.normalizers[0].type");
	write_tokenizer(NULL, "\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, \"content\": \"_\"}");
	expect_error("Replace with a regex", -EINVAL, "normalizer.pattern");
	write_tokenizer(NULL, "\"pre_tokenizer\": {\"type\": \"Whitespace\"}");
	expect_error("Whitespace pre-tokenizer", -EINVAL, "pre_tokenizer.type");
	write_tokenizer(NULL, "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\w+\"}, \"behavior\": \"Isolated\", \"invert\": false}");
	expect_error("unknown split regex", -EINVAL, "pre_tokenizer.pattern.Regex");
	write_tokenizer(NULL, "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\"}, {\"type\": \"Digits\"}]}");
	expect_error("Digits in a sequence", -EINVAL, "pre_tokenizer.pretokenizers[1].type");
	write_tokenizer(NULL, "\"post_processor\": {\"type\": \"Frobnicate\"}");
	expect_error("unknown post-processor", -EINVAL, "post_processor.type");
	write_tokenizer(NULL, "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}}, {\"Sequence\": {\"id\": \"A\"}}]}");
	expect_error("template special token missing", -EINVAL, "post_processor");
	write_tokenizer(NULL, "\"decoder\": {\"type\": \"WordPiece\"}");
	expect_error("WordPiece decoder", -EINVAL, "decoder.type");
	write_tokenizer(NULL, "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]}");
	expect_error("Strip before Fuse", -EINVAL, "decoder.decoders[0]");

	/* The valid base file loads; then bad companion files name themselves. */
	write_tokenizer(NULL, "");
	struct allm_tokenizer *tok = NULL;
	struct allm_err err = { { 0 } };
	CHECK(allm_tokenizer_load(dir, &tok, &err) == 0, "base file: %s", err.msg);
	allm_tokenizer_free(tok);
	write_file("tokenizer_config.json", "{\"bos_token\": ");
	expect_error("broken tokenizer_config.json", -EINVAL, "tokenizer_config.json");
	write_file("tokenizer_config.json", "{\"bos_token\": \"<nope>\"}");
	expect_error("unknown bos_token", -EINVAL, "bos_token");
	remove_file("tokenizer_config.json");
	write_file("generation_config.json", "{\"eos_token_id\": [1, 99]}");
	expect_error("eos id out of range", -EINVAL, "eos_token_id[1]");
	remove_file("generation_config.json");

	remove_file("tokenizer.json");
	rmdir(dir);
	return finish();
}
