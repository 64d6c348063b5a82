/* Private state of the tokenizer, shared by its files. Arrows go one way:
 *
 *   tokenizer.c           the thin loader: a GGUF file or a Hugging Face directory
 *     tokenizer-hf.c        tokenizer.json: model, added tokens, normalizer,
 *     tokenizer-hf-config.c   pre-tokenizer, decoder; post-processor, companion
 *                             config files (both share tokenizer-hf.h)
 *     tokenizer-gguf.c      a GGUF file's tokenizer.ggml.*, built directly
 *     tokenizer-spm.c       SentencePiece merges rebuilt from the pieces' scores
 *   both loaders then build with
 *     tokenizer-vocab.c     the struct below: id tables, string map, merges,
 *                           normalizer steps, end ids; the accessors
 *     detokenizer.c         per-id decoded bytes; whole-sequence and streaming decode
 *   and encoding runs
 *     tokenizer-encode.c    added-token split, normalizer, pre-tokenizer, encode driver
 *     tokenizer-bpe.c       hash tables and the BPE merge loop
 *     tokenizer-unicode.c   \p{L} / \p{N} / \s classes, UTF-8, the byte-level map */
#ifndef ALLM_TOKENIZER_INTERNAL_H
#define ALLM_TOKENIZER_INTERNAL_H

#include "tokenizer.h"

/* The longest token string either loader takes, in bytes. The longest in the
 * vocabularies we run is 256 (Qwen2's run of 128 spaces, two bytes a character in
 * byte-level form; Gemma 3's 262k SentencePiece pieces stop at 48, SmolLM2's at 162):
 * four times that leaves room for any real vocabulary, and bounds what one hostile
 * token costs the loaders and the SentencePiece merge pass (tokenizer-spm.c). */
#define ALLM_TOK_MAX_TOKEN_BYTES 1024

#define ALLM_TOKF_SPECIAL 0x1 /* added token with "special": true */
#define ALLM_TOKF_ADDED 0x2   /* listed in added_tokens */

/* Unicode classes the split patterns distinguish. */
enum { ALLM_UCLS_OTHER = 0, ALLM_UCLS_L = 1, ALLM_UCLS_N = 2, ALLM_UCLS_S = 3 };
int allm_tok_uclass(uint32_t c);

/* Decodes one code point of valid UTF-8 at s[0..n); returns its byte length (1 for a
 * stray byte, so callers always advance). */
size_t allm_tok_utf8_next(const uint8_t *s, size_t n, uint32_t *ret_cp);

/* String -> id, open addressing; keys are the tokenizer's own token strings. */
struct allm_tok_strmap {
	int32_t *slots; /* id, or -1 when empty */
	size_t mask;    /* capacity - 1, capacity a power of two */
};

/* (left id, right id) -> (rank, merged id), open addressing. */
struct allm_tok_pairmap {
	uint64_t *keys; /* left << 32 | right, UINT64_MAX when empty */
	uint32_t *ranks;
	int32_t *merged;
	size_t mask;
};

enum allm_tok_norm_kind { ALLM_TOK_NORM_PREPEND, ALLM_TOK_NORM_REPLACE, ALLM_TOK_NORM_NFC };

struct allm_tok_norm {
	enum allm_tok_norm_kind kind;
	char *a; /* PREPEND: text; REPLACE: pattern */
	char *b; /* REPLACE: content */
};

/* Split patterns we match by hand (see tokenizer-encode.c). */
enum allm_tok_split {
	ALLM_TOK_SPLIT_NONE,
	ALLM_TOK_SPLIT_GPT2,   /* GPT-2 / OPT / ByteLevel use_regex */
	ALLM_TOK_SPLIT_LLAMA3, /* Llama-3: \p{N}{1,3} */
	ALLM_TOK_SPLIT_QWEN2,  /* Llama-3 pattern with single digits */
	ALLM_TOK_SPLIT_METASPACE, /* Metaspace split=true: pieces start at the replacement */
};

/* End of the piece the regex split (GPT2, LLAMA3 or QWEN2) matches at s[i] (i < n),
 * as the regex would; exposed so a test can hold it against a regex engine. */
size_t allm_tok_regex_piece_end(enum allm_tok_split split, const uint8_t *s, size_t n, size_t i);

/* The Digits pre-tokenizer: digit runs (or each digit) become pieces of their own
 * before the split pattern runs on the rest. */
enum allm_tok_digits { ALLM_TOK_DIGITS_NONE, ALLM_TOK_DIGITS_GROUPED, ALLM_TOK_DIGITS_INDIVIDUAL };

enum allm_tok_prepend { ALLM_TOK_PREPEND_NEVER, ALLM_TOK_PREPEND_FIRST, ALLM_TOK_PREPEND_ALWAYS };

struct allm_tok_added {
	const char *content; /* in the arena; usually == tokens[id] */
	uint32_t len;
	int32_t id;
	bool special, lstrip, rstrip, single_word;
};

struct allm_tokenizer {
	int32_t n_ids;       /* vocab size: largest id + 1 */
	char **tokens;       /* [n_ids] model-vocab string, else added content; NULL = gap */
	uint32_t *token_len; /* [n_ids] */
	uint8_t *flags;      /* [n_ids] ALLM_TOKF_* */
	char *arena;         /* every token string, NUL-terminated */
	struct allm_tok_strmap vocab; /* model vocab and added tokens */
	struct allm_tok_pairmap merges;
	size_t n_merges;

	/* model */
	bool byte_fallback;   /* unknown chars become <0xNN> tokens */
	bool fuse_unk;        /* consecutive unknowns become one unk */
	bool ignore_merges;   /* a piece that is a whole vocab entry is taken as is */
	int32_t unk_id;       /* -1: unknown chars are dropped (HF does the same) */
	int32_t byte_ids[256];      /* id of "<0xNN>", -1 if absent */
	int32_t bytelevel_ids[256]; /* id of the byte-level char of byte b, -1 if absent */
	int32_t ascii_ids[128];     /* id of the one-char token for ASCII c, -1 if absent */

	/* normalizer (applied to each text piece between added tokens) */
	struct allm_tok_norm *norms;
	size_t n_norms;

	/* pre-tokenizer */
	enum allm_tok_digits digits; /* applied first, then split */
	enum allm_tok_split split;
	bool byte_level;          /* map bytes to the GPT-2 printable code points */
	bool bl_add_prefix_space; /* ByteLevel add_prefix_space */
	bool metaspace;           /* Metaspace: ' ' -> replacement, maybe prepend */
	char ms_repl[8];          /* Metaspace replacement (UTF-8), usually "▁" */
	enum allm_tok_prepend ms_prepend;

	/* added tokens, bucketed by first byte, longest first within a bucket */
	struct allm_tok_added *added;
	size_t n_added;
	uint32_t added_first[257]; /* bucket of byte b: added[added_first[b]..added_first[b+1]) */

	/* post-processor */
	int32_t *prefix_ids, *suffix_ids;
	size_t n_prefix, n_suffix;

	/* decoder: each id decodes to bytes dec[dec_off[id]..dec_off[id+1]) */
	char *dec;
	uint64_t *dec_off;     /* [n_ids + 1] */
	uint32_t max_dec_len;  /* longest decoded token */
	uint32_t strip_start;  /* Strip decoder: up to this many leading strip_char
				* are removed from the start of the whole text */
	char strip_char;
	bool join_space;       /* no decoder: HF joins tokens with ' ' */

	int32_t bos_id, eos_id;
	int32_t *eos_ids; /* generation_config eos_token_id list */
	size_t n_eos;
};

/* tokenizer-bpe.c */
uint64_t allm_tok_hash(const void *s, size_t n);
int allm_tok_strmap_init(struct allm_tok_strmap *m, size_t n_keys);
void allm_tok_strmap_fini(struct allm_tok_strmap *m);
/* Inserts tokens[id]; returns the id already holding that string, or -1. */
int32_t allm_tok_strmap_put(struct allm_tok_strmap *m, const struct allm_tokenizer *tok,
			    int32_t id);
int32_t allm_tok_strmap_get(const struct allm_tok_strmap *m,
			    const struct allm_tokenizer *tok, const char *s, size_t n);
int allm_tok_pairmap_init(struct allm_tok_pairmap *m, size_t n_keys);
void allm_tok_pairmap_fini(struct allm_tok_pairmap *m);
/* Keeps the first rank when a pair repeats. */
void allm_tok_pairmap_put(struct allm_tok_pairmap *m, int32_t a, int32_t b, uint32_t rank,
			  int32_t merged);

/* Growable id vector used while encoding. */
struct allm_tok_ids {
	int32_t *v;
	size_t n, cap;
};
int allm_tok_ids_push(struct allm_tok_ids *ids, int32_t id);

/* Scratch buffers reused across the pieces of one encode call. */
struct allm_tok_bpe_scratch {
	void *syms, *heap;
	size_t cap; /* in symbols */
	char *str;  /* byte-level mapped piece, for ignore_merges */
	size_t str_cap;
};
void allm_tok_bpe_scratch_fini(struct allm_tok_bpe_scratch *s);
/* Encodes one pre-tokenized piece with the BPE model, appending ids. */
int allm_tok_bpe_piece(const struct allm_tokenizer *tok, const uint8_t *s, size_t n,
		       struct allm_tok_bpe_scratch *scr, struct allm_tok_ids *out);

/* The two loaders under tokenizer.c: a Hugging Face directory (tokenizer.json and
 * its companions; tokenizer-hf.c) and a GGUF file (tokenizer-gguf.c:
 * allm_tokenizer_load_gguf() in tokenizer.h). Same errors as allm_tokenizer_load(). */
int allm_tok_load_hf(const struct allm_vdir *dir, struct allm_tokenizer **ret, struct allm_err *err);

/* tokenizer-vocab.c: the building blocks of both loaders. */
/* A new, empty tokenizer (no ids yet; BOS / EOS / unk -1). 0 / -ENOMEM. */
int allm_tok_new(struct allm_tokenizer **ret, struct allm_err *err);

/* One token as a loader read it: a model vocabulary entry, or an added token
 * (matched in the raw text before anything else; special ones only when asked). */
struct allm_tok_def {
	const char *s; /* not NUL-terminated; copied */
	uint32_t len;  /* > 0 for an added token */
	int32_t id;
	bool added, special, lstrip, rstrip, single_word;
};
/* The id tables, the string arena and the string map of n_ids ids from defs:
 * model entries claim their ids first (two on one id: -EINVAL); an added token on an
 * id without a model entry gives that id its string, one on an id that holds another
 * string must be found by its own text elsewhere. unique: two ids with one string
 * are an error. where_vocab / where_added name the source in messages. */
int allm_tok_set_vocab(struct allm_tokenizer *tok, int32_t n_ids, const struct allm_tok_def *defs,
		       size_t n, bool unique, const char *where_vocab, const char *where_added,
		       struct allm_err *err);
/* byte_ids, bytelevel_ids and ascii_ids from the vocabulary. */
void allm_tok_index_bytes(struct allm_tokenizer *tok);
/* Scratch of allm_tok_add_merge(); the caller allm_free()s p. */
struct allm_tok_merge_buf {
	char *p;
	size_t cap;
};
/* The merge of tokens a and b at rank into tok->merges (initialized by the caller);
 * both and their concatenation must be tokens. where[rank] names it in messages. */
int allm_tok_add_merge(struct allm_tokenizer *tok, size_t rank, const char *a, size_t al, const char *b,
		       size_t bl, struct allm_tok_merge_buf *buf, const char *where, struct allm_err *err);
/* The same from "a b" (one space). */
int allm_tok_add_merge_text(struct allm_tokenizer *tok, size_t rank, const char *s, size_t n,
			    struct allm_tok_merge_buf *buf, const char *where, struct allm_err *err);
/* Appends a normalizer step (a, b copied). 0 / -ENOMEM. */
int allm_tok_add_norm(struct allm_tokenizer *tok, enum allm_tok_norm_kind kind, const char *a, const char *b);
/* Appends k ids to the growable array *v of *n. 0 / -ENOMEM. */
int allm_tok_append_ids(int32_t **v, size_t *n, const int32_t *ids, size_t k);
/* A special token with a well-known EOS name ("</s>", "<|endoftext|>", ...), -1. */
int32_t allm_tok_guess_eos(const struct allm_tokenizer *tok);
/* Adds the special tokens named as ends of a text or turn (<|im_end|>,
 * <end_of_turn>, <|eot_id|>, <|end|>, ...) to the ids that stop generation.
 * 0 / -ENOMEM. */
int allm_tok_add_turn_ends(struct allm_tokenizer *tok);

/* tokenizer-spm.c: tok->merges of a SentencePiece vocabulary from score[id]; only
 * ids with mergeable[id] are merged into. Every token is at most
 * ALLM_TOK_MAX_TOKEN_BYTES long. */
int allm_tok_spm_merges(struct allm_tokenizer *tok, const float *score, const bool *mergeable,
			struct allm_err *err);

/* detokenizer.c: what the decoder does to each id, as both loaders describe it. */
#define ALLM_TOK_MAX_REPLACES 8
struct allm_tok_dec_spec {
	bool byte_level;    /* ByteLevel: code points back to bytes */
	bool byte_fallback; /* ByteFallback: "<0xNN>" -> byte NN */
	bool fused;         /* Fuse seen (a later Strip then applies to the whole text) */
	size_t n_repl;
	const char *pat[ALLM_TOK_MAX_REPLACES], *rep[ALLM_TOK_MAX_REPLACES]; /* Replace steps */
};
/* Per-id decoded bytes (tok->dec, dec_off, max_dec_len) from spec; tok->join_space,
 * strip_start and strip_char are the loader's to set. 0 / -ENOMEM. */
int allm_tok_build_decoder(struct allm_tokenizer *tok, const struct allm_tok_dec_spec *spec,
			   struct allm_err *err);

/* tokenizer-nfc.c: the NFC form of the valid UTF-8 s[0..n) into *buf (grown with
 * allm_realloc, *cap its size; the caller frees), its length in *ret_n. 0 / -ENOMEM. */
int allm_tok_nfc(const char *s, size_t n, char **buf, size_t *cap, size_t *ret_n);

/* The byte-level maps (tokenizer-unicode.c): GPT-2's byte -> code point map. */
uint32_t allm_tok_byte_to_cp(uint8_t b);
/* Inverse map; -1 if cp is not a byte-level code point. */
int allm_tok_cp_to_byte(uint32_t cp);

#endif
