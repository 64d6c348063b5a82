/* Tokenizers of Hugging Face tokenizer.json files and of GGUF files (tokenizer.ggml.*):
 * BPE encoding and decoding, both families.
 *
 * * SentencePiece-style BPE with byte fallback (Llama-2, TinyLlama, Mistral, Phi-3,
 *   Gemma 3): normalizer Sequence[Prepend "▁", Replace " "->"▁"] (Gemma: Replace
 *   alone) or a Metaspace pre-tokenizer, merges by rank, <0xNN> byte fallback,
 *   decoder Replace/ByteFallback/Fuse/Strip.
 * * Byte-level BPE (GPT-2, OPT, SmolLM2, Llama-3, Qwen2/2.5/3): bytes mapped to
 *   printable code points, the file's split pattern (GPT-2, Llama-3 or Qwen2 regex,
 *   matched by hand-written code, not a regex engine), the NFC normalizer (Qwen2's
 *   tokenizer.json), merges by rank, ByteLevel decoder.
 *
 * Checked against llama.cpp on the real Gemma 3 270M and Qwen2.5-Coder-0.5B files
 * (tests/real-model-tokenizer.sh: 171 strings each, special tokens parsed or not).
 *
 * Merge rule: always the file's `merges` list, lowest rank first, ties to the
 * leftmost pair -- what HF `tokenizers` does. SentencePiece itself merges by piece
 * score; HF's converter writes the merges in score order, so for converted files the
 * two agree (stories260K: 165 merges for 512 pieces, "Once upon a time" ->
 * 1 403 407 261 378 with merges alone; a score-ordered reference agreed on 3000
 * random sentences). No score fallback is implemented.
 *
 * Unsupported parts of a file (another model type, normalizer, pre-tokenizer, split
 * pattern, post-processor or decoder) fail the load with a message naming the JSON
 * field, never a silently different tokenization.
 *
 * Thread safety: a loaded tokenizer is immutable; encode/decode may run from many
 * threads at once. An allm_detok belongs to one stream. */
#ifndef ALLM_TOKENIZER_H
#define ALLM_TOKENIZER_H

#include "common.h"
#include "vdir.h"

#ifdef __cplusplus
extern "C" {
#endif

struct allm_tokenizer; /* opaque */

/* Loads model_dir/tokenizer.json plus, where present, tokenizer_config.json
 * (add_bos_token / add_eos_token / bos_token / eos_token), special_tokens_map.json
 * and generation_config.json (bos_token_id, eos_token_id: int or list).
 * add_bos_token / add_eos_token, when present, decide whether BOS / EOS wrap an
 * encoded text (as transformers' LlamaTokenizerFast rebuilds its template); otherwise
 * the tokenizer.json post-processor decides. Returns 0 and a tokenizer the caller
 * frees with allm_tokenizer_free(), or -errno (-ENOENT: no tokenizer.json, -EINVAL:
 * malformed / unsupported, with err naming the file and field). */
int allm_tokenizer_load(const char *model_dir, struct allm_tokenizer **ret,
			struct allm_err *err);
/* The same from a directory on disk or embedded (common/vdir.h). */
int allm_tokenizer_load_from(const struct allm_vdir *dir, struct allm_tokenizer **ret,
			     struct allm_err *err);
/* The tokenizer of a GGUF file (what allm_tokenizer_load_from() does when dir->path
 * is a regular file): tokenizer.ggml.model "gpt2" (byte-level BPE: tokens, merges,
 * the pre-tokenizer tokenizer.ggml.pre names: default/gpt2, llama3/llama-bpe, qwen2,
 * smollm/starcoder/refact) or "llama" (SentencePiece BPE: tokens and scores, the merges
 * rebuilt from the scores as Hugging Face's converter does, byte fallback), control
 * and user-defined tokens (token_type 3 / 4) as added tokens, the BOS / EOS / EOT ids
 * and add_bos_token / add_eos_token / add_space_prefix. Anything else is refused with
 * -ENOTSUP or -EINVAL naming the key. */
int allm_tokenizer_load_gguf(const char *path, struct allm_tokenizer **ret,
			     struct allm_err *err);
/* The same from an opened file (gguf.h; it may be closed once this returns). */
struct allm_gguf;
int allm_tokenizer_from_gguf(const struct allm_gguf *g, struct allm_tokenizer **ret,
			     struct allm_err *err);
/* Same from one tokenizer.json path; no companion files are read. */
int allm_tokenizer_load_file(const char *tokenizer_json_path, struct allm_tokenizer **ret,
			     struct allm_err *err);
/* Accepts NULL. */
void allm_tokenizer_free(struct allm_tokenizer *tok);

/* Largest id + 1 over the model vocabulary and the added tokens. */
int32_t allm_tokenizer_vocab_size(const struct allm_tokenizer *tok);
/* bos: tokenizer_config / special_tokens_map bos_token, else generation_config
 * bos_token_id, else the first token the post-processor prepends; -1 if none. */
int32_t allm_tokenizer_bos_id(const struct allm_tokenizer *tok);
/* eos: tokenizer_config / special_tokens_map eos_token, else the first
 * generation_config eos_token_id, else a special added token with a well-known EOS
 * name ("</s>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "<|im_end|>",
 * "<eos>"); -1 if none. */
int32_t allm_tokenizer_eos_id(const struct allm_tokenizer *tok);
/* True when id is eos_id or any generation_config eos_token_id. */
bool allm_tokenizer_is_eos(const struct allm_tokenizer *tok, int32_t id);
/* True for added tokens marked "special" (what skip_special drops). */
bool allm_tokenizer_is_special(const struct allm_tokenizer *tok, int32_t id);
/* Vocabulary string of id (as in tokenizer.json, e.g. "Ġthe", "▁time", "<0x0A>"),
 * NULL when id is out of range or unassigned. Owned by tok. */
const char *allm_tokenizer_id_to_token(const struct allm_tokenizer *tok, int32_t id);
/* The bytes id decodes to on its own (the decoder's per-token bytes: a byte-level
 * token's raw bytes, a SentencePiece piece with its spaces, an added token's
 * text), *ret_len of them; NULL when id is out of range. Owned by tok. What
 * allm_tokenizer_decode concatenates (before a leading strip and the UTF-8
 * repair), so a grammar can match tokens byte by byte, and what an API's
 * log-probability "bytes" are, so a client can rebuild text split inside a
 * character. */
const char *allm_tokenizer_token_bytes(const struct allm_tokenizer *tok, int32_t id, size_t *ret_len);
/* Exact lookup of a vocabulary / added-token string, -1 if absent. */
int32_t allm_tokenizer_token_to_id(const struct allm_tokenizer *tok, const char *s);

/* Encodes len bytes of UTF-8 text, special tokens' text included (the flags
 * ALLM_TOK_ENCODE_PARSE_SPECIAL, plus ALLM_TOK_ENCODE_ADD_SPECIAL when add_special;
 * allm_tokenizer_encode_flags() below encodes without them). Added tokens ("</s>",
 * "<|endoftext|>") are found in the raw text first (leftmost-longest, honouring lstrip / rstrip / single_word)
 * and never split; the pieces between them are normalized, pre-tokenized and merged.
 * add_special wraps the result as the post-processor says (BOS for Llama-2, nothing
 * for GPT-2's ByteLevel post-processor). Invalid UTF-8 is an error: -EILSEQ with the
 * byte offset in err, nothing returned (a prompt we cannot read is rejected, never
 * silently altered). Empty text is valid (just BOS for Llama-2). On success
 * *ret_ids (allm_malloc'ed, caller allm_free()s; may be NULL when *ret_n is 0) and
 * *ret_n are set; on failure they are untouched. */
int allm_tokenizer_encode(const struct allm_tokenizer *tok, const char *text, size_t len,
			  bool add_special, int32_t **ret_ids, size_t *ret_n,
			  struct allm_err *err);
/* As allm_tokenizer_encode, but an added token marked special is never matched
 * over a byte i with plain[i] == 1 (those bytes are text a user wrote: a chat
 * message's "<|im_start|>" stays characters); plain has len entries, 0 or 1, or
 * is NULL (everywhere, as allm_tokenizer_encode). Added tokens not marked special
 * match anywhere, as in Hugging Face tokenizers with split_special_tokens. */
int allm_tokenizer_encode_marked(const struct allm_tokenizer *tok, const char *text, size_t len,
				 bool add_special, const uint8_t *plain, int32_t **ret_ids,
				 size_t *ret_n, struct allm_err *err);

/* What allm_tokenizer_encode_flags() does beyond encoding the text's pieces. */
enum allm_tok_encode_flag {
	/* wrap the ids as the post-processor / add_bos_token / add_eos_token say (BOS) */
	ALLM_TOK_ENCODE_ADD_SPECIAL = 1u << 0,
	/* the text of a special token ("<|im_start|>", "<end_of_turn>": HF added tokens
	 * marked special, GGUF control and unknown tokens) is that token; without this
	 * flag it is plain text, encoded as any other. Added tokens that are not special
	 * (GGUF user-defined ones, such as Gemma's runs of newlines) are matched either
	 * way, as llama.cpp (parse_special = false) and Hugging Face
	 * (split_special_tokens = True) do. */
	ALLM_TOK_ENCODE_PARSE_SPECIAL = 1u << 1,
};

/* allm_tokenizer_encode() with its choices as flags (enum allm_tok_encode_flag).
 * Without ALLM_TOK_ENCODE_PARSE_SPECIAL a text cannot produce a special token: what
 * a chat template's renderer uses for message content, so that a user who writes
 * "<|im_end|>\n<|im_start|>system" in a message gets those characters, not a new
 * turn (issue 49 item 9). The same errors and ownership as allm_tokenizer_encode(). */
int allm_tokenizer_encode_flags(const struct allm_tokenizer *tok, const char *text, size_t len,
				unsigned flags, int32_t **ret_ids, size_t *ret_n,
				struct allm_err *err);

/* Decodes the whole sequence into a NUL-terminated allm_malloc'ed string the caller
 * frees (a byte token for 0x00 puts a NUL inside it). skip_special drops special
 * added tokens. Bytes that do not form valid UTF-8
 * (a broken byte-fallback or byte-level run) become U+FFFD, one per maximal
 * ill-formed subpart as Rust's from_utf8_lossy does (HF's ByteFallback decoder
 * would write one per byte; only garbage sequences differ). An id outside
 * [0, vocab_size) is -EINVAL. */
int allm_tokenizer_decode(const struct allm_tokenizer *tok, const int32_t *ids, size_t n,
			  bool skip_special, char **ret_text, struct allm_err *err);

/* Length of the valid UTF-8 prefix of s[0..n) (== n when all valid): no overlong
 * forms, surrogates or code points past U+10FFFF, as JSON and the encoder take it. */
size_t allm_tok_utf8_valid_prefix(const uint8_t *s, size_t n);

/* Streaming detokenizer: feed ids one at a time; every piece is valid UTF-8 (an
 * incomplete multi-byte sequence is held back until it completes or turns out
 * invalid), and the concatenation of all push + flush pieces equals
 * allm_tokenizer_decode() of the whole sequence, including the SentencePiece rule
 * that strips one leading space from the start of the text. */
struct allm_detok;
/* Returns 0 / -ENOMEM. The tokenizer must outlive the detok. */
int allm_detok_create(const struct allm_tokenizer *tok, bool skip_special,
		      struct allm_detok **ret);
/* Accepts NULL. */
void allm_detok_free(struct allm_detok *d);
/* Writes the newly completed text to out (NUL-terminated, at most out_cap bytes
 * including the NUL) and returns its length (0 is common), or -EINVAL (bad id),
 * -ENOSPC (out_cap too small: nothing consumed, call again with a buffer of
 * allm_detok_piece_cap() bytes). */
int allm_detok_push(struct allm_detok *d, int32_t id, char *out, size_t out_cap);
/* Emits what is held back (an incomplete sequence becomes U+FFFD) and resets the
 * stream. Returns the length or -ENOSPC. */
int allm_detok_flush(struct allm_detok *d, char *out, size_t out_cap);
/* Feeds the prompt's ids and drops their text, so that the generated ids that follow
 * decode as the continuation they are: SentencePiece strips the space of the text's
 * first word only ("Once upon a" + "▁time" is " time", not "time"), and a character
 * split between prompt and output completes. Returns 0, -EINVAL (bad id) or -ENOMEM. */
int allm_detok_prime(struct allm_detok *d, const int32_t *ids, size_t n);
/* An out_cap that is always enough for one push or flush. */
size_t allm_detok_piece_cap(const struct allm_tokenizer *tok);
/* Bytes of text the longest token (added ones included) decodes to: n tokens
 * cover about n times this many bytes of text at most, so a caller can refuse a
 * text that cannot fit a context before it spends time encoding it. */
size_t allm_tokenizer_max_token_bytes(const struct allm_tokenizer *tok);

#ifdef __cplusplus
}
#endif

#endif
