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
/* A pipeline FLOW's trace spans: each stage records EMBED (stage 0), its
 * whole layers as one op, HEAD (the last); with UNICORN_PIPE_PER_LAYER=1
 * every attention and FFN op alone. */
struct trace;
struct msg_flow;
void coord_stages_trace(struct trace *tr, const struct stages *s, const struct msg_flow *f);
/* Ops each stage ran in one FLOW of n_layer layers (head: it sampled). */
void coord_stages_ops(const struct stages *s, uint32_t n_layer, bool head, uint32_t ops[2]);

#endif
