/* stages: see stages.h. */
#include "coordinator/stages.h"

#include <time.h>

#include "common/err.h"
#include "coordinator/trace.h"
#include "ipc/msg.h"

int coord_stages_plan(const struct model *m, const char *layers, uint32_t n, struct stages *out)
{
	int rc = layers ? stages_parse(layers, m->cfg.n_layer, out) : stages_balance(m, n, out);
	if (!rc && out->n != n)
		rc = err_set(ERR_INVAL, "--layers names %u stages, the cluster runs %u", out->n, n);
	return rc ? err_prefix(rc, "pipeline") : 0;
}

void coord_stages_trace(struct trace *tr, const struct stages *s, const struct msg_flow *f)
{
	/* walk the ops in the order the stages ran them: EMBED, then per layer
	 * ATTN (covering the rest of its stage's range when merged) and FFN */
	bool per_layer = f->n_ops > 2 + s->n + 1;
	uint32_t layer = 0, i = 0;
	bool embed = true;
	for (; tr && i < f->n_ops; i++) {
		uint32_t stage = 0, lo = 0, nl = 0;
		uint16_t type = MSG_EMBED;
		uint8_t kind = 0;
		if (embed) {
			embed = false;
		} else if (layer < f->n_layer) {
			while (stage + 1 < s->n && layer >= s->first[stage + 1])
				stage++;
			lo = layer;
			type = MSG_STAGE;
			kind = MSG_STAGE_LAYERS;
			if (per_layer) { /* ATTN l, FFN l: two ops per layer */
				kind = i % 2 ? MSG_STAGE_ATTN : MSG_STAGE_FFN;
				nl = kind == MSG_STAGE_FFN;
			} else {
				nl = s->first[stage + 1] - layer;
			}
			layer += nl;
		} else {
			stage = s->n - 1;
			type = MSG_HEAD;
		}
		struct trace_span sp = {
			.t_start_ns = (int64_t)f->t_origin_ns + (int64_t)f->op_us[2 * i] * 1000,
			.msg_type = type,
			.worker = (uint8_t)stage,
			.stage = kind,
			.layer = (uint16_t)lo,
			.slot = (uint16_t)f->e[0].slot,
			.n = f->flags & MSG_FLOW_CHUNK ? f->n_tok : f->n,
			.pos0 = f->e[0].pos,
		};
		sp.t_end_ns = sp.t_start_ns + (int64_t)f->op_us[2 * i + 1] * 1000;
		sp.work_ns = sp.t_end_ns - sp.t_start_ns;
		trace_record(tr, &sp);
	}
}

void coord_stages_ops(const struct stages *s, uint32_t n_layer, bool head, uint32_t ops[2])
{
	ops[0] = ops[1] = 0;
	for (uint32_t k = 0; k < s->n && k < 2; k++)
		ops[k] = 2 * (s->first[k + 1] - s->first[k]);
	ops[0] += 1;
	ops[s->n > 1 ? 1 : 0] += head ? 1 : 0;
	(void)n_layer;
}

#define CHAIN_MAX_MBS 16

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int coord_stages_chain(const struct stages_chain_ops *ops, void *ctx, uint32_t n_mb, const bool *active,
		       uint32_t max_steps, int64_t budget_ns)
{
	if (n_mb > CHAIN_MAX_MBS)
		return err_set(ERR_INVAL, "pipeline: %u micro-batches (at most %d)", n_mb, CHAIN_MAX_MBS);
	uint32_t seq[CHAIN_MAX_MBS] = { 0 }, steps[CHAIN_MAX_MBS] = { 0 }, left = 0;
	int64_t t_end = now_ns() + budget_ns;
	int rc = 0;
	for (uint32_t w = 0; w < n_mb && !rc; w++)
		if (active[w] && !(rc = ops->post(ctx, w, &seq[w])))
			left++;
	while (left && !rc) {
		uint32_t w = 0;
		if ((rc = ops->wait_one(ctx, seq, n_mb, &w)))
			break;
		left--;
		bool more = false;
		if ((rc = ops->finish(ctx, w, &more)))
			break;
		if (!more || ++steps[w] >= max_steps || now_ns() > t_end)
			continue;
		ops->between(ctx);
		if ((rc = ops->post(ctx, w, &seq[w])))
			break;
		left++;
	}
	return rc;
}
