/* An independent, naive dense reference forward pass for tests.
 *
 * Written from the Hugging Face transformers model definitions (Llama/Mistral,
 * OPT), sharing no code with the engine except the f16/bf16 conversions in
 * common/common.h. All weights are held as f32; every forward recomputes the
 * whole sequence from scratch (no KV cache), so it is slow but simple. Tests
 * compare the engine's logits and greedy tokens against it. */
#ifndef ALLM_TESTS_DENSE_REF_H
#define ALLM_TESTS_DENSE_REF_H

#include <stddef.h>
#include <stdint.h>

struct dense_ref; /* a loaded model, all weights as f32 */

/* Loads a Hugging Face model directory: config.json + model.safetensors, or
 * model.safetensors.index.json with its shards. Returns 0, or -1 with a
 * message in errbuf. */
int dense_ref_load(const char *dir, struct dense_ref **ret, char *errbuf, size_t errlen);
void dense_ref_free(struct dense_ref *m);
int dense_ref_vocab(const struct dense_ref *m);

/* Full causal forward over ids[0..n) from scratch (no cache): logits[n * vocab]
 * for every position. Returns 0, or -1 on bad input (n <= 0, id out of range,
 * n beyond the learned positions of OPT) or allocation failure. */
int dense_ref_forward(const struct dense_ref *m, const int32_t *ids, int n, float *logits);

/* Greedy: appends n_new tokens to prompt by repeatedly running the full forward
 * (argmax, lowest id wins ties). out[n_new]. Returns 0 or -1. */
int dense_ref_greedy(const struct dense_ref *m, const int32_t *prompt, int n_prompt, int n_new,
		     int32_t *out);

#endif
