/* stages: the coordinator's view of a pipeline placement (--placement
 * pipeline, ipc/stages.h). The stage workers route each FLOW between them by
 * their layer ranges; the coordinator only needs the ranges to attribute a
 * FLOW's ops (trace spans, op counts) to the stage that ran them. Stage 0
 * holds the data plane's gpu link, stage 1 its npu link. */
#ifndef UNICORN_COORD_STAGES_H
#define UNICORN_COORD_STAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/model.h"
#include "ipc/stages.h"

/* The ranges the workers use: --layers when given, else balanced by weight
 * bytes (the same function over the same manifest). */
int coord_stages_plan(const struct model *m, const char *layers, uint32_t n, struct stages *out);
/* The stage (0 or 1) that runs op i of a FLOW (0 EMBED, 1 + 2l ATTN l,
 * 2 + 2l FFN l, 1 + 2 n_layer HEAD). */
uint32_t coord_stages_op_stage(const struct stages *s, uint32_t n_layer, uint32_t i);
/* Ops each stage ran in one FLOW of n_layer layers (head: it sampled). */
void coord_stages_ops(const struct stages *s, uint32_t n_layer, bool head, uint32_t ops[2]);

#endif
