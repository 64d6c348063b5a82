/* Converts a Hugging Face Llama directory to a GGUF file as llama.cpp's converter
 * would (tests/gguf-write.h), for the shell tests and the fuzz seeds (not a test).
 * Usage: gguf-convert DIR OUT.gguf [f32|f16|bf16|q8_0|q4_0|q4_1] [--no-permute]
 *        [--pre NAME] */
#include "gguf-write.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		uint32_t type;
	} types[] = {{"f32", ALLM_GGML_F32}, {"f16", ALLM_GGML_F16}, {"bf16", ALLM_GGML_BF16},
		     {"q8_0", ALLM_GGML_Q8_0}, {"q4_0", ALLM_GGML_Q4_0}, {"q4_1", ALLM_GGML_Q4_1}};
	struct gguf_convert_opts o = {.type = ALLM_GGML_F32};
	char err[512];
	if (argc < 3) {
		fprintf(stderr, "usage: gguf-convert DIR OUT.gguf [f32|f16|bf16|q8_0|q4_0|q4_1] [--no-permute] [--pre NAME]\n");
		return 2;
	}
	for (int i = 3; i < argc; i++) {
		bool known = false;
		for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
			if (!strcmp(argv[i], types[k].name)) {
				o.type = types[k].type;
				known = true;
			}
		if (!strcmp(argv[i], "--no-permute"))
			o.no_permute = known = true;
		else if (!strcmp(argv[i], "--pre") && i + 1 < argc)
			o.pre = argv[++i], known = true;
		if (!known) {
			fprintf(stderr, "gguf-convert: unknown argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (gguf_convert_dir(argv[1], argv[2], &o, err, sizeof(err))) {
		fprintf(stderr, "gguf-convert: %s\n", err);
		return 1;
	}
	return 0;
}
