/* Description: the check that holds status' and metrics' replies to their key tables (engined/ctlserver/ctl-enc-check.c, asserted where they are made) fails on a hand count off by one either way and on a key out of the table's order, and passes the exact reply. */
#include "ctl-enc-check.h"
#include "test-check.h"

static const char *const keys[] = {"a", "b", "c", "d"}; /* the table: the first 3 */
static const char *const names[] = {"x", "y"};

/* A map of `count` in its header and the first `written` keys of keys (ints). */
static int map_check(uint32_t count, uint32_t written, bool swap)
{
	struct allm_ctl_enc e;
	char why[128];
	allm_ctl_enc_init(&e);
	allm_ctl_enc_kint(&e, "before", 1); /* bytes before start are not looked at */
	size_t start = e.sb.size;
	allm_ctl_enc_map(&e, count);
	for (uint32_t i = 0; i < written; i++)
		allm_ctl_enc_kint(&e, keys[swap && i < 2 ? 1 - i : i], i);
	int rc = ctl_enc_check_map(&e, start, keys, 3, why, sizeof(why));
	allm_ctl_enc_free(&e);
	return rc;
}

static int named_check(uint32_t count, uint32_t written)
{
	struct allm_ctl_enc e;
	char why[128];
	allm_ctl_enc_init(&e);
	allm_ctl_enc_map(&e, 1);
	allm_ctl_enc_karray(&e, "families", count);
	for (uint32_t i = 0; i < written; i++) {
		allm_ctl_enc_map(&e, 2);
		allm_ctl_enc_kstr(&e, "name", names[i % 2]);
		allm_ctl_enc_kint(&e, "value", i);
	}
	int rc = ctl_enc_check_named(&e, 0, "families", names, 2, why, sizeof(why));
	allm_ctl_enc_free(&e);
	return rc;
}

int main(void)
{
	CHECK(map_check(3, 3, false) == 0, "the exact map refused");
	CHECK(map_check(3, 2, false) == -1, "a count one over what was written passed");
	CHECK(map_check(2, 3, false) == -1, "a count one under what was written passed");
	CHECK(map_check(4, 4, false) == -1, "a key not in the table passed");
	CHECK(map_check(3, 3, true) == -1, "keys out of the table's order passed");
	CHECK(named_check(2, 2) == 0, "the exact families refused");
	CHECK(named_check(3, 3) == -1, "a family not in the table passed");
	CHECK(named_check(2, 3) == -1, "one family more than counted passed");
	CHECK(named_check(3, 2) == -1, "one family fewer than counted passed");
	if (n_fail)
		return 1;
	printf("ctl-enc-check: miscounts and strays caught\n");
	return 0;
}
