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

/* Chained decode steps (pipeline placement): post every active micro-batch's
 * step; whenever one comes back, finish it (its tokens) and, when it can go
 * on, post its next step at once, while the others are still on the stages.
 * So no stage waits for the slowest micro-batch of a round: with two
 * micro-batches on two stages both devices stay busy, where lockstep rounds
 * leave each idle a third of the time. A micro-batch stops after max_steps
 * steps, or when finish says it cannot go on, or once the chain has run
 * budget_ns; the call returns when none is in flight. */
struct stages_chain_ops {
	int (*post)(void *ctx, uint32_t w, uint32_t *seq);                     /* its FLOW's seq */
	int (*wait_one)(void *ctx, uint32_t *seq, uint32_t n, uint32_t *which); /* one came back */
	int (*finish)(void *ctx, uint32_t w, bool *more);
	void (*between)(void *ctx);                                            /* clients, heartbeat */
};
int coord_stages_chain(const struct stages_chain_ops *ops, void *ctx, uint32_t n_mb, const bool *active,
		       uint32_t max_steps, int64_t budget_ns);

#endif
