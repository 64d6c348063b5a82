/* Writes the request parameters' table (include/adaptivellm/params.h) as JSON to
 * stdout: the build's request-params.json, for clients in other languages (a
 * Python client builds its ctypes struct and checks from it). Not installed as a
 * program; its output is. */
#include <adaptivellm/params.h>

#include <stdio.h>

/* A JSON string (the table's strings are plain ASCII without quotes or
 * backslashes: checked here rather than escaped). */
static void str(const char *s)
{
	if (!s) {
		fputs("null", stdout);
		return;
	}
	for (const char *c = s; *c; c++)
		if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) {
			fprintf(stderr, "params-json: '%s' needs escaping\n", s);
			fputs("null", stdout);
			return;
		}
	printf("\"%s\"", s);
}

static void num(double v)
{
	if (isnan(v))
		fputs("null", stdout);
	else
		printf("%.17g", v);
}

int main(void)
{
	static const char *const types[] = {"", "i32", "u64", "f32", "bool"};
	printf("{\n  \"struct\": \"allm_params\",\n  \"size\": %zu,\n", sizeof(struct allm_params));
	printf("  \"size_ver0\": %d,\n  \"size_max\": %d,\n", ALLM_PARAMS_SIZE_VER0, ALLM_PARAMS_SIZE_MAX);
	printf("  \"header\": [{\"name\": \"size\", \"type\": \"u32\", \"offset\": %zu}, "
	       "{\"name\": \"n_stop\", \"type\": \"u32\", \"offset\": %zu}, "
	       "{\"name\": \"stop_ids\", \"type\": \"i32\", \"count\": %d, \"offset\": %zu}, "
	       "{\"name\": \"cache_salt\", \"type\": \"u8\", \"count\": %d, \"offset\": %zu}],\n",
	       offsetof(struct allm_params, size), offsetof(struct allm_params, n_stop), ALLM_PARAMS_MAX_STOP,
	       offsetof(struct allm_params, stop_ids), ALLM_CACHE_SALT_BYTES, offsetof(struct allm_params, cache_salt));
	printf("  \"limits\": {\"max_stop\": %d, \"logprobs_max\": %d, \"logit_bias_max\": %d, "
	       "\"logit_bias_lo\": %g, \"logit_bias_hi\": %g},\n",
	       ALLM_PARAMS_MAX_STOP, ALLM_LOGPROBS_MAX, ALLM_LOGIT_BIAS_MAX, ALLM_LOGIT_BIAS_LO, ALLM_LOGIT_BIAS_HI);
	printf("  \"flags\": {\"lo_open\": %u, \"plus_one\": %u, \"json_neg1\": %u, \"json_custom\": %u},\n",
	       ALLM_PARAM_F_LO_OPEN, ALLM_PARAM_F_PLUS_ONE, ALLM_PARAM_F_JSON_NEG1, ALLM_PARAM_F_JSON_CUSTOM);
	printf("  \"rows\": [");
	const struct allm_param_desc *d;
	for (size_t i = 0; (d = allm_param_desc(i)); i++) {
		printf("%s\n    {\"name\": ", i ? "," : "");
		str(d->name);
		printf(", \"type\": \"%s\", \"offset\": %u, \"size\": %u, \"flags\": %u, \"lo\": ", types[d->type],
		       d->offset, d->size, d->flags);
		num(d->lo);
		fputs(", \"hi\": ", stdout);
		num(d->hi);
		fputs(", \"off\": ", stdout);
		num(d->off);
		fputs(", \"default\": ", stdout);
		num(d->dflt);
		fputs(", \"flag\": ", stdout);
		str(d->flag);
		fputs(", \"meta\": ", stdout);
		str(d->meta);
		fputs(", \"json\": ", stdout);
		str(d->json);
		fputs(", \"help\": ", stdout);
		str(d->help);
		fputs("}", stdout);
	}
	printf("\n  ]\n}\n");
	return 0;
}
