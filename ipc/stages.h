/* stages: the layer ranges of a pipeline placement (docs/cluster.md
 * "Placement"). Stage k of n runs layers [first[k], first[k+1]) of the model,
 * whole layers; stage 0 also embeds, the last stage runs the final norm and
 * the head. The ranges come from --layers ("0-12,13-25": inclusive, in order,
 * covering every layer) or are balanced by weight bytes over the model's
 * layer tensors, the last stage's head counted as the embedding matrix it
 * reads every step; every process computes the same split from the same
 * manifest, so nothing about it travels in messages). */
#ifndef UNICORN_STAGES_H
#define UNICORN_STAGES_H

#include <stdint.h>

#include "formats/model.h"
#include "ipc/kvlayout.h"

#define STAGES_MAX 2 /* the data plane has two worker links (ipc/dataplane.h) */

struct stages {
	uint32_t n;                      /* stages, 1..STAGES_MAX */
	uint32_t first[STAGES_MAX + 1];  /* stage k: [first[k], first[k + 1]); first[n] = n_layer */
};

/* Parse "A-B,C-D,..." (inclusive ranges, contiguous from 0) for a model of
 * n_layer layers; ERR_INVAL naming what is wrong. */
int stages_parse(const char *s, uint32_t n_layer, struct stages *out);
/* Check only the syntax and the count of "A-B,..." (no model at hand yet):
 * the number of ranges in *n. */
int stages_parse_count(const char *s, uint32_t *n);
/* n stages of about equal weight bytes read per step (the layer tensors
 * "blk.L.*", and for the last stage the embedding matrix its head reads);
 * each gets at least one layer. ERR_INVAL when n > n_layer or n > STAGES_MAX. */
int stages_balance(const struct model *m, uint32_t n, struct stages *out);
/* Weight bytes of layer l's tensors ("blk.L.*"). */
uint64_t stages_layer_bytes(const struct model *m, uint32_t l);
/* KV cache bytes of layers [l0, l1) under layout kv (the pools' blocks hold
 * every layer of their kind; a stage keeps only its layers' share). */
uint64_t stages_kv_bytes(const struct kv_layout *kv, const struct gemma3_config *c, uint32_t l0, uint32_t l1);
/* "0-12,13-25" into buf. */
void stages_format(const struct stages *s, char *buf, uint32_t cap);

#endif
