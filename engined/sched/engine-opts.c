#include "engine-opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Every OPT row's field has its TYPE's size (an enum is an int). */
#define SIZE_I32(id) sizeof(int32_t)
#define SIZE_U64(id) sizeof(uint64_t)
#define SIZE_F64(id) sizeof(double)
#define SIZE_BOOL(id) sizeof(bool)
#define SIZE_WORD(id) sizeof(int)
#define SIZE_TEXT(id) sizeof(const char *)
#define SIZE_CUSTOM(id) sizeof(((struct allm_engine_opts *)0)->id)
#define CHECK_OPT(id, type)                                                             \
	_Static_assert(sizeof(((struct allm_engine_opts *)0)->id) == SIZE_##type(id), \
		       "struct allm_engine_opts." #id ": the table's TYPE");
#define CHECK_NOOPT(id, type)
#define CHECK_(id, key, type, opt, ...) CHECK_##opt(id, type)
ALLM_SETTINGS_TABLE(CHECK_)
#undef CHECK_
_Static_assert(ALLM_LOG_ERROR == 0 && ALLM_LOG_WARN == 1 && ALLM_LOG_INFO == 2 && ALLM_LOG_DEBUG == 3,
	       "--log-level's words are the enum's order");
_Static_assert(ALLM_PREEMPT_ADAPTIVE == 0 && ALLM_PREEMPT_RECOMPUTE == 1 && ALLM_PREEMPT_SWAP == 2 &&
		       ALLM_SCHED_FAIR == 0 && ALLM_SCHED_FCFS == 1,
	       "--preempt's and --sched's words are the enums' order");

/* The CUSTOM rows: values with a check of their own. */
static int store_custom(struct allm_engine_opts *o, enum allm_setting_id id, const char *v,
			struct allm_err *err)
{
	enum allm_dtype dt;
	switch (id) {
	case ALLM_SETTING_device:
		if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda") &&
		    (strncmp(v, "sim:", 4) || !v[4]))
			return allm_err_set(err, -EINVAL, "bad value for --device: '%s' (expected auto, "
					    "cpu, cuda or sim:PROFILE)", v);
		o->device = v;
		return 0;
	case ALLM_SETTING_dtype:
		if (strcmp(v, "auto") && allm_dtype_parse(v, &dt))
			break;
		o->dtype = v;
		return 0;
	case ALLM_SETTING_kv_cache_dtype:
		if (strcmp(v, "auto") && allm_dtype_parse(v, &dt))
			return allm_err_set(err, -EINVAL, "bad value for --kv-cache-dtype: '%s' (expected "
					    "auto, f32, f16 or bf16)", v);
		o->kv_cache_dtype = v;
		return 0;
	case ALLM_SETTING_cpu_isa:
		if (allm_cpu_isa_parse(v, &o->cpu_isa))
			break;
		return 0;
	case ALLM_SETTING_quant: {
		/* int8: the name of a retired format of int8 rows with bf16 scales,
		 * kept for users' scripts; Q8_0 is the same idea and faster */
		static const struct { const char *name; enum allm_dtype dt; } q[] = {
			{"none", ALLM_DTYPE_F32}, {"int8", ALLM_DTYPE_Q8_0}, {"q8_0", ALLM_DTYPE_Q8_0},
			{"q4_0", ALLM_DTYPE_Q4_0}, {"q4_1", ALLM_DTYPE_Q4_1},
		};
		for (size_t k = 0; k < ALLM_ARRAY_SIZE(q); k++)
			if (!strcmp(v, q[k].name)) {
				o->quant = q[k].dt;
				return 0;
			}
		break;
	}
	default:
		break;
	}
	return allm_err_set(err, -EINVAL, "bad value for %s: '%s'", allm_setting_desc(id)->flag, v);
}

/* Stores text, d's value, into its field: 0 or -EINVAL with err. */
static int store(struct allm_engine_opts *o, const struct allm_setting_desc *d, const char *text,
		 struct allm_err *err)
{
	struct allm_setting_value v;
	char why[256];
	if (d->type == ALLM_SET_CUSTOM)
		return store_custom(o, d->id, text, err);
	if (allm_setting_parse(d, text, &v, why, sizeof(why)))
		return allm_err_set(err, -EINVAL, "bad value for %s: %s", d->flag, why);
#define SET_I32(fld) (fld) = (int32_t)v.i
#define SET_U64(fld) (fld) = v.u
#define SET_F64(fld) (fld) = v.f
#define SET_BOOL(fld) (fld) = v.i != 0
#define SET_WORD(fld) (fld) = (int)v.i
#define SET_TEXT(fld) (fld) = v.s
#define SET_CUSTOM(fld) (void)0
#define CASE_OPT(id, type)       \
	case ALLM_SETTING_##id:  \
		SET_##type(o->id); \
		break;
#define CASE_NOOPT(id, type)
#define CASE_(id, key, type, opt, ...) CASE_##opt(id, type)
	switch (d->id) {
		ALLM_SETTINGS_TABLE(CASE_)
	default:
		break;
	}
#undef CASE_
	return 0;
}

void allm_engine_opts_default(struct allm_engine_opts *o)
{
	memset(o, 0, sizeof(*o));
	for (int i = 0; i < ALLM_SETTING_COUNT; i++) {
		const struct allm_setting_desc *d = allm_setting_desc(i);
		if (d->opt && d->def)
			ALLM_ASSERT(store(o, d, d->def, NULL) == 0); /* the table's defaults parse */
	}
	o->cpu_blocks = -1; /* none given: derived from swap_space_gib */
}

const char *allm_engine_opts_help(void)
{
	return allm_settings_help();
}

const char *allm_preempt_name(enum allm_preempt_mode m)
{
	return m == ALLM_PREEMPT_RECOMPUTE ? "recompute" : m == ALLM_PREEMPT_SWAP ? "swap" : "adaptive";
}

const char *allm_sched_name(enum allm_sched_mode m)
{
	return m == ALLM_SCHED_FCFS ? "fcfs" : "fair";
}

int allm_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *ret)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*ret = v;
	return 0;
}

int allm_parse_f64(const char *s, double lo, double hi, double *ret)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
		return -EINVAL;
	*ret = v;
	return 0;
}

int allm_engine_opts_parse(struct allm_engine_opts *o, int argc, char **argv, int *i,
			   struct allm_err *err)
{
	const char *f = argv[*i];
	const struct allm_setting_desc *d = allm_setting_by_flag(f);
	if (!d || !d->opt)
		return 0;
	const char *v = NULL;
	if (*d->metavar) {
		if (*i + 1 >= argc)
			return allm_err_set(err, -EINVAL, "%s needs a value", f);
		v = argv[*i + 1];
	}
	*i += v ? 2 : 1;
	int r = store(o, d, v, err);
	return r ? r : 1;
}
