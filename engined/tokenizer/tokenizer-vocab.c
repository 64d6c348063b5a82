/* The tokenizer both loaders build (tokenizer-hf.c from tokenizer.json,
 * tokenizer-gguf.c from a GGUF file's tokenizer.ggml.*): the vocabulary and added
 * tokens as id tables and a string map, merges, normalizer steps, the ids that end a
 * text or a turn, and the read-only accessors of tokenizer.h. Neither loader calls
 * the other; both call only what is here and below (tokenizer-bpe.c's tables,
 * tokenizer-unicode.c). */
#include "tokenizer-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int allm_tok_new(struct allm_tokenizer **ret, struct allm_err *err)
{
	struct allm_tokenizer *tok = allm_calloc(1, sizeof(*tok));
	if (!tok)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	tok->bos_id = tok->eos_id = tok->unk_id = -1;
	tok->strip_char = ' ';
	*ret = tok;
	return 0;
}

void allm_tokenizer_free(struct allm_tokenizer *tok)
{
	if (!tok)
		return;
	allm_tok_strmap_fini(&tok->vocab);
	allm_tok_pairmap_fini(&tok->merges);
	for (size_t i = 0; i < tok->n_norms; i++) {
		allm_free(tok->norms[i].a);
		allm_free(tok->norms[i].b);
	}
	allm_free(tok->norms);
	allm_free(tok->tokens);
	allm_free(tok->token_len);
	allm_free(tok->flags);
	allm_free(tok->arena);
	allm_free(tok->added);
	allm_free(tok->prefix_ids);
	allm_free(tok->suffix_ids);
	allm_free(tok->dec);
	allm_free(tok->dec_off);
	allm_free(tok->eos_ids);
	allm_free(tok);
}

static char *arena_put(char **arena, const char *s, size_t n)
{
	char *p = *arena;
	memcpy(p, s, n);
	p[n] = 0;
	*arena += n + 1;
	return p;
}

static int cmp_added(const void *pa, const void *pb)
{
	const struct allm_tok_added *a = pa, *b = pb;
	uint8_t fa = (uint8_t)a->content[0], fb = (uint8_t)b->content[0];
	if (fa != fb)
		return fa < fb ? -1 : 1;
	return a->len > b->len ? -1 : a->len < b->len; /* longest first */
}

int allm_tok_set_vocab(struct allm_tokenizer *tok, int32_t n_ids, const struct allm_tok_def *defs,
		       size_t n, bool unique, const char *where_vocab, const char *where_added,
		       struct allm_err *err)
{
	size_t bytes = 0, n_added = 0;
	for (size_t i = 0; i < n; i++) {
		/* an added token has text (it is matched by its first byte); tokenizer.json
		 * may hold an empty vocab key, which only never matches */
		ALLM_ASSERT(defs[i].id >= 0 && defs[i].id < n_ids && (defs[i].len > 0 || !defs[i].added));
		bytes += defs[i].len + 1;
		n_added += defs[i].added;
	}
	tok->n_ids = n_ids;
	tok->tokens = allm_calloc((size_t)n_ids, sizeof(*tok->tokens));
	tok->token_len = allm_calloc((size_t)n_ids, sizeof(*tok->token_len));
	tok->flags = allm_calloc((size_t)n_ids, 1);
	tok->arena = allm_malloc(bytes ? bytes : 1);
	tok->added = allm_calloc(n_added ? n_added : 1, sizeof(*tok->added));
	if (!tok->tokens || !tok->token_len || !tok->flags || !tok->arena || !tok->added ||
	    allm_tok_strmap_init(&tok->vocab, (size_t)n_ids + n_added) < 0)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	char *arena = tok->arena;
	/* model entries claim their ids first */
	for (size_t i = 0; i < n; i++) {
		const struct allm_tok_def *d = &defs[i];
		if (d->added)
			continue;
		if (tok->tokens[d->id])
			return allm_err_set(err, -EINVAL, "%s: id %d used by both '%s' and '%.*s'", where_vocab, d->id,
					    tok->tokens[d->id], (int)ALLM_MIN(d->len, 64), d->s);
		tok->token_len[d->id] = d->len;
		tok->tokens[d->id] = arena_put(&arena, d->s, d->len);
	}
	for (size_t i = 0; i < n; i++) {
		const struct allm_tok_def *d = &defs[i];
		if (!d->added)
			continue;
		struct allm_tok_added *a = &tok->added[tok->n_added++];
		*a = (struct allm_tok_added){.content = arena_put(&arena, d->s, d->len), .len = d->len, .id = d->id,
					     .special = d->special, .lstrip = d->lstrip, .rstrip = d->rstrip,
					     .single_word = d->single_word};
		tok->flags[a->id] |= ALLM_TOKF_ADDED | (a->special ? ALLM_TOKF_SPECIAL : 0);
		if (!tok->tokens[a->id]) {
			tok->tokens[a->id] = (char *)a->content;
			tok->token_len[a->id] = a->len;
		}
	}
	qsort(tok->added, tok->n_added, sizeof(*tok->added), cmp_added);
	for (int b = 0, k = 0; b <= 256; b++) {
		while (k < (int)tok->n_added && (uint8_t)tok->added[k].content[0] < b)
			k++;
		tok->added_first[b] = (uint32_t)k;
	}
	for (int32_t id = 0; id < n_ids; id++) {
		if (!tok->tokens[id])
			continue;
		int32_t other = allm_tok_strmap_put(&tok->vocab, tok, id);
		if (other >= 0 && unique)
			return allm_err_set(err, -EINVAL, "%s[%d] '%.*s' appears twice (also [%d])", where_vocab, id,
					    (int)ALLM_MIN(tok->token_len[id], 64), tok->tokens[id], other);
	}
	/* Added tokens whose id holds another vocab string are still found by text. */
	for (size_t i = 0; i < tok->n_added; i++)
		if (tok->tokens[tok->added[i].id] != tok->added[i].content &&
		    allm_tok_strmap_get(&tok->vocab, tok, tok->added[i].content, tok->added[i].len) < 0)
			return allm_err_set(err, -EINVAL, "%s: '%s' reuses id %d of vocab entry '%s'", where_added,
					    tok->added[i].content, tok->added[i].id, tok->tokens[tok->added[i].id]);
	return 0;
}

void allm_tok_index_bytes(struct allm_tokenizer *tok)
{
	for (int b = 0; b < 256; b++) {
		char name[8];
		snprintf(name, sizeof(name), "<0x%02X>", b);
		tok->byte_ids[b] = allm_tok_strmap_get(&tok->vocab, tok, name, 6);
		/* Byte-level code points are all below U+0800: one or two UTF-8 bytes. */
		uint32_t cp = allm_tok_byte_to_cp((uint8_t)b);
		char u[2] = {(char)cp, 0};
		if (cp >= 0x80) {
			u[0] = (char)(0xC0 | (cp >> 6));
			u[1] = (char)(0x80 | (cp & 0x3F));
		}
		tok->bytelevel_ids[b] = allm_tok_strmap_get(&tok->vocab, tok, u, cp < 0x80 ? 1 : 2);
		if (b < 128)
			tok->ascii_ids[b] = allm_tok_strmap_get(&tok->vocab, tok, (char[]){(char)b}, 1);
	}
}

int allm_tok_add_merge(struct allm_tokenizer *tok, size_t rank, const char *a, size_t al, const char *b,
		       size_t bl, struct allm_tok_merge_buf *buf, const char *where, struct allm_err *err)
{
	int32_t ia = allm_tok_strmap_get(&tok->vocab, tok, a, al);
	int32_t ib = allm_tok_strmap_get(&tok->vocab, tok, b, bl);
	if (ia < 0 || ib < 0)
		return allm_err_set(err, -EINVAL, "%s[%zu]: '%.*s' is not in the vocabulary", where, rank,
				    (int)ALLM_MIN(ia < 0 ? al : bl, 64), ia < 0 ? a : b);
	if (al + bl > buf->cap) {
		size_t cap = 2 * (al + bl);
		char *p = allm_realloc(buf->p, cap);
		if (!p)
			return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
		buf->p = p;
		buf->cap = cap;
	}
	memcpy(buf->p, a, al);
	memcpy(buf->p + al, b, bl);
	int32_t im = allm_tok_strmap_get(&tok->vocab, tok, buf->p, al + bl);
	if (im < 0)
		return allm_err_set(err, -EINVAL, "%s[%zu]: merged token '%.*s' is not in the vocabulary", where, rank,
				    (int)ALLM_MIN(al + bl, 64), buf->p);
	allm_tok_pairmap_put(&tok->merges, ia, ib, (uint32_t)rank, im);
	return 0;
}

int allm_tok_add_merge_text(struct allm_tokenizer *tok, size_t rank, const char *s, size_t n,
			    struct allm_tok_merge_buf *buf, const char *where, struct allm_err *err)
{
	const char *sp = memchr(s, ' ', n);
	if (!sp || sp == s || sp + 1 == s + n || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)))
		return allm_err_set(err, -EINVAL, "%s[%zu]: '%.*s' is not two tokens separated by one space", where,
				    rank, (int)ALLM_MIN(n, 64), s);
	return allm_tok_add_merge(tok, rank, s, (size_t)(sp - s), sp + 1, (size_t)(s + n - sp - 1), buf, where,
				  err);
}

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = allm_malloc(n);
	return p ? memcpy(p, s, n) : NULL;
}

int allm_tok_add_norm(struct allm_tokenizer *tok, enum allm_tok_norm_kind kind, const char *a, const char *b)
{
	struct allm_tok_norm *n = allm_realloc(tok->norms, (tok->n_norms + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	tok->norms = n;
	n = &n[tok->n_norms++];
	*n = (struct allm_tok_norm){.kind = kind, .a = dup_str(a), .b = b ? dup_str(b) : NULL};
	return n->a && (!b || n->b) ? 0 : -ENOMEM;
}

int allm_tok_append_ids(int32_t **v, size_t *n, const int32_t *ids, size_t k)
{
	int32_t *p = allm_realloc(*v, (*n + k) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(p + *n, ids, k * sizeof(*p));
	*v = p;
	*n += k;
	return 0;
}

/* Special tokens that end a text or a turn, by name: the first six, in this order,
 * are what a file without an EOS setting means by EOS; all of them stop generation
 * (files often name only one EOS: Gemma 3's GGUF says <eos> and its chats end with
 * <end_of_turn>, Llama 3's says <|end_of_text|> and its chats end with <|eot_id|>). */
static const char *const eos_names[] = {"</s>",	     "<|endoftext|>", "<|end_of_text|>",
					"<|eot_id|>", "<|im_end|>",    "<eos>",
					"<end_of_turn>", "<|end|>",     "<|eom_id|>"};
enum { N_GUESS_EOS = 6 };

static int32_t special_named(const struct allm_tokenizer *tok, const char *name)
{
	int32_t id = allm_tokenizer_token_to_id(tok, name);
	return id >= 0 && (tok->flags[id] & ALLM_TOKF_SPECIAL) ? id : -1;
}

int32_t allm_tok_guess_eos(const struct allm_tokenizer *tok)
{
	for (size_t k = 0; k < N_GUESS_EOS; k++)
		if (special_named(tok, eos_names[k]) >= 0)
			return special_named(tok, eos_names[k]);
	return -1;
}

int allm_tok_add_turn_ends(struct allm_tokenizer *tok)
{
	for (size_t k = 0; k < ALLM_ARRAY_SIZE(eos_names); k++) {
		int32_t id = special_named(tok, eos_names[k]);
		if (id >= 0 && !allm_tokenizer_is_eos(tok, id) && allm_tok_append_ids(&tok->eos_ids, &tok->n_eos, &id, 1) < 0)
			return -ENOMEM;
	}
	return 0;
}

int32_t allm_tokenizer_vocab_size(const struct allm_tokenizer *tok)
{
	return tok->n_ids;
}

const char *allm_tokenizer_id_to_token(const struct allm_tokenizer *tok, int32_t id)
{
	return id >= 0 && id < tok->n_ids ? tok->tokens[id] : NULL;
}

int32_t allm_tokenizer_token_to_id(const struct allm_tokenizer *tok, const char *s)
{
	return allm_tok_strmap_get(&tok->vocab, tok, s, strlen(s));
}

bool allm_tokenizer_is_special(const struct allm_tokenizer *tok, int32_t id)
{
	return id >= 0 && id < tok->n_ids && (tok->flags[id] & ALLM_TOKF_SPECIAL);
}

int32_t allm_tokenizer_bos_id(const struct allm_tokenizer *tok)
{
	return tok->bos_id;
}

int32_t allm_tokenizer_eos_id(const struct allm_tokenizer *tok)
{
	return tok->eos_id;
}

bool allm_tokenizer_is_eos(const struct allm_tokenizer *tok, int32_t id)
{
	for (size_t i = 0; i < tok->n_eos; i++)
		if (tok->eos_ids[i] == id)
			return true;
	return id >= 0 && id == tok->eos_id;
}
