/* In-flight requests by tag: the pump finds the request a completion event belongs
 * to in O(1) (tag = generation << 32 | slot, so a stale event of a finished request
 * never reaches the next one in the same slot), and requests are freed when their
 * last reference goes. All under gw->lock. */
#include "gw-pump.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int gw_lps_push(struct gw_lps *l, const struct allm_logprobs *lp)
{
	uint32_t k = l->stride ? l->stride - 1 : 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct allm_logprob *v = realloc(l->v, cap * (k + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		uint8_t *t = realloc(l->n_top, cap);
		if (!t)
			return -ENOMEM;
		l->n_top = t;
		l->cap = cap;
	}
	if (!l->stride)
		l->stride = 1;
	struct allm_logprob *e = l->v + l->n * l->stride;
	uint32_t n_top = lp->n_top < k ? lp->n_top : k;
	e[0] = lp->sampled;
	memcpy(e + 1, lp->top, n_top * sizeof(*e));
	l->n_top[l->n++] = (uint8_t)n_top;
	return 0;
}

int gw_lps_copy(struct gw_lps *dst, const struct gw_lps *src, size_t from, size_t n)
{
	*dst = (struct gw_lps){.stride = src->stride};
	if (n == 0)
		return 0;
	dst->v = malloc(n * src->stride * sizeof(*dst->v));
	dst->n_top = malloc(n);
	if (!dst->v || !dst->n_top) {
		gw_lps_free(dst);
		return -ENOMEM;
	}
	memcpy(dst->v, gw_lps_at(src, from), n * src->stride * sizeof(*dst->v));
	memcpy(dst->n_top, src->n_top + from, n);
	dst->n = dst->cap = n;
	return 0;
}

void gw_lps_free(struct gw_lps *l)
{
	free(l->v);
	free(l->n_top);
	l->v = NULL;
	l->n_top = NULL;
	l->n = l->cap = 0;
}

static void req_free(struct gw *gw, struct gw_req *r)
{
	struct gw_req *lead = r->lead, *owner = r->owner;
	free(r->choices);
	if (!owner) {
		free(r->ids);
		free(r->logit_bias);
		free(r->grammar);
		free(r->echo);
		free(r->text);
	}
	gw_lps_free(&r->lps);
	gw_stops_free(&r->stops);
	gw_text_free(&r->out);
	gw_model_unref(r->model);
	free(r);
	gw->live--;
	if (owner) /* the reference a choice holds to its prompt's buffers */
		gw_req_unref_locked(gw, owner);
	if (lead != r) /* the reference each other choice holds */
		gw_req_unref_locked(gw, lead);
}

void gw_req_enqueue_locked(struct gw *gw, struct gw_req *lead, int sock)
{
	for (uint32_t i = 0; i < lead->n_choices; i++) {
		struct gw_req *q = gw_choice(lead, i);
		q->sock = sock;
		q->refs = 2; /* the HTTP side (gw_engine_release) and the pump (at the end) */
		gw->live++;
	}
	lead->refs += (int)lead->n_choices - 1; /* one held by each other choice */
	for (uint32_t i = 0; i < lead->n_choices; i++)
		if (gw_choice(lead, i)->owner)
			gw_choice(lead, i)->owner->refs++; /* its prompt's buffers */
}

void gw_req_hold_choices_locked(struct gw_req *lead)
{
	for (uint32_t i = 0; i < lead->n_choices; i++)
		gw_choice(lead, i)->refs++;
}

void gw_req_drop_choices_locked(struct gw *gw, struct gw_req *lead)
{
	for (uint32_t i = lead->n_choices; i-- > 0;) /* the lead last: the others hold it */
		gw_req_unref_locked(gw, gw_choice(lead, i));
}

void gw_req_unref_locked(struct gw *gw, struct gw_req *r)
{
	if (--r->refs == 0)
		req_free(gw, r);
}

/* A slot for r, and r->tag from it. 0 or -ENOMEM. */
int gw_slot_take(struct gw *gw, struct gw_req *r)
{
	if (gw->n_free == 0) {
		uint32_t cap = gw->n_slots ? gw->n_slots * 2 : 256;
		struct gw_req **s = realloc(gw->slots, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		gw->slots = s;
		uint32_t *g = realloc(gw->gens, cap * sizeof(*g));
		if (!g)
			return -ENOMEM;
		gw->gens = g;
		uint32_t *f = realloc(gw->free_slots, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		gw->free_slots = f;
		for (uint32_t i = gw->n_slots; i < cap; i++) {
			gw->slots[i] = NULL;
			gw->gens[i] = 0;
			gw->free_slots[gw->n_free++] = cap - 1 - (i - gw->n_slots);
		}
		gw->n_slots = cap;
	}
	uint32_t s = gw->free_slots[--gw->n_free];
	gw->slots[s] = r;
	r->tag = (uint64_t)++gw->gens[s] << 32 | s;
	return 0;
}

void gw_slot_put(struct gw *gw, struct gw_req *r)
{
	uint32_t s = (uint32_t)r->tag;
	if (r->tag && s < gw->n_slots && gw->slots[s] == r) {
		gw->slots[s] = NULL;
		gw->free_slots[gw->n_free++] = s;
	}
	r->tag = 0;
}

struct gw_req *gw_slot_find(struct gw *gw, uint64_t tag)
{
	uint32_t s = (uint32_t)tag;
	if (s >= gw->n_slots || !gw->slots[s] || gw->slots[s]->tag != tag)
		return NULL;
	return gw->slots[s];
}
