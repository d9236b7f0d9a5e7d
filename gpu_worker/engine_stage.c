/* engine_stage: the engine's single stages (see engine.h): split placement's
 * embed, attention or FFN stage and head, one at a time or for a batch of
 * sequences, and a pipeline stage's whole layer range, each recorded once
 * and replayed, its rows in and out through the host-visible stage rows. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_worker/engine_priv.h"
#include "common/err.h"

static int once_begin(struct engine *e)
{
	vkResetCommandBuffer(e->once, 0);
	return vk_cmd_begin(e->once, true);
}

static int once_submit(struct engine *e)
{
	VkResult r = vkEndCommandBuffer(e->once);
	if (r != VK_SUCCESS)
		return err_set(ERR_DEVICE, "engine: vkEndCommandBuffer failed (%d)", (int)r);
	e->timed = false;
	return eng_submit(e, e->once);
}

int engine_embed(struct engine *e, const uint32_t *tokens, uint32_t n)
{
	if (e->attn_only)
		return err_set(ERR_STATE, "engine: embed: this engine holds only the attention's weights");
	int rc = eng_step_write(e, tokens, n, 0, 0);
	if (!rc)
		rc = once_begin(e);
	if (rc)
		return rc;
	eng_rec_embed(e, e->once, n);
	return once_submit(e);
}

int engine_hidden_set(struct engine *e, const float *h, uint32_t n)
{
	if (n == 0 || n > e->max_batch)
		return err_set(ERR_INVAL, "engine: hidden_set: %u rows (max_batch %u)", n, e->max_batch);
	return vk_upload(e->vk, e->h, 0, h, (size_t)n * e->cfg.n_embd * 4);
}

int engine_hidden_get(struct engine *e, float *h, uint32_t n)
{
	if (n == 0 || n > e->max_batch)
		return err_set(ERR_INVAL, "engine: hidden_get: %u rows (max_batch %u)", n, e->max_batch);
	return vk_download(e->vk, e->h, 0, h, (size_t)n * e->cfg.n_embd * 4);
}

static int stage_check(const struct engine *e, uint32_t layer, enum engine_stage stage, const char *fn);

int engine_stage(struct engine *e, uint32_t layer, enum engine_stage stage, uint32_t n, uint32_t pos0)
{
	if (layer >= e->cfg.n_layer || (stage != ENGINE_STAGE_ATTN && stage != ENGINE_STAGE_FFN))
		return err_set(ERR_INVAL, "engine: stage: layer %u / stage %d out of range", layer, (int)stage);
	int rc = stage_check(e, layer, stage, "stage");
	if (!rc)
		rc = eng_step_write(e, NULL, n, pos0, 0);
	if (!rc)
		rc = once_begin(e);
	if (rc)
		return rc;
	e->rec_short = e->step_short;
	if (stage == ENGINE_STAGE_ATTN)
		eng_rec_attn(e, e->once, layer, n, true, false);
	else
		eng_rec_ffn(e, e->once, layer, n, true, false);
	e->rec_short = false;
	return once_submit(e);
}

/* Run a stage command buffer recorded by rec_stage_io over n hidden rows:
 * in -> hio, eng_submit (its GPU time from the last two queries), hio -> out. */
static int hio_run(struct engine *e, VkCommandBuffer cb, uint32_t n, const float *in, float *out)
{
	size_t bytes = (size_t)n * e->cfg.n_embd * 4;
	if (in)
		memcpy(e->hio->map, in, bytes);
	e->timed = false;
	int rc = eng_submit(e, cb);
	if (!rc && e->vk->timestamps)
		eng_gpu_ns_add(e, e->vk->n_queries - 2, e->vk->n_queries - 1);
	if (!rc && out)
		memcpy(out, e->hio->map, bytes);
	return rc;
}

/* Record: hidden rows hio -> h, the stages of layers [layer, layer+n_layers), h -> hio. */
static int rec_stage_io(struct engine *e, VkCommandBuffer cb, bool one_time, uint32_t layer, uint32_t n_layers,
			enum engine_stage stage, uint32_t n)
{
	int rc = vk_cmd_begin(cb, one_time);
	if (rc)
		return rc;
	/* the last two queries of the pool time stage calls (forward and the
	 * profiler use the low ones) */
	uint32_t qs = e->vk->n_queries - 2;
	if (e->vk->timestamps) {
		vk_cmd_reset_queries(cb, e->vk, qs, 2);
		vk_cmd_timestamp(cb, e->vk, qs);
	}
	VkBufferCopy region = { 0, 0, (VkDeviceSize)n * e->cfg.n_embd * 4 };
	vkCmdCopyBuffer(cb, e->hio->buf, e->h->buf, 1, &region);
	eng_fbar(e, cb);
	e->rec_short = e->step_short; /* the caller keeps short and long recordings apart */
	if (stage == ENGINE_STAGE_BOTH && e->range_fused) {
		/* whole layers in one engine (a pipeline stage): as the fused
		 * forward records them (norms in the products' tails, x16), from
		 * the first layer's attention norm on; the last layer's tail also
		 * normalizes h for a next layer that runs elsewhere (unread) */
		eng_rec_step_copy(e, cb, n);
		eng_rec_norm(e, cb, e->L[layer].s_attn_norm, 0, n);
		for (uint32_t l = layer; l < layer + n_layers; l++) {
			eng_rec_attn(e, cb, l, n, false, true);
			eng_rec_ffn(e, cb, l, n, false, true);
		}
		eng_fbar(e, cb);
	} else {
		for (uint32_t l = layer; l < layer + n_layers; l++) {
			if (stage != ENGINE_STAGE_FFN)
				eng_rec_attn(e, cb, l, n, true, false);
			if (stage != ENGINE_STAGE_ATTN)
				eng_rec_ffn(e, cb, l, n, true, false);
		}
	}
	e->rec_short = false;
	vkCmdCopyBuffer(cb, e->h->buf, e->hio->buf, 1, &region);
	eng_fbar(e, cb);
	if (e->vk->timestamps)
		vk_cmd_timestamp(cb, e->vk, qs + 1);
	VkResult r = vkEndCommandBuffer(cb);
	return r == VK_SUCCESS ? 0 : err_set(ERR_DEVICE, "engine: vkEndCommandBuffer failed (%d)", (int)r);
}

int engine_stage_io(struct engine *e, uint32_t layer, uint32_t n_layers, enum engine_stage stage, uint32_t n,
		    uint32_t pos0, const float *in, float *out)
{
	if (stage != ENGINE_STAGE_ATTN && stage != ENGINE_STAGE_FFN && stage != ENGINE_STAGE_BOTH)
		return err_set(ERR_INVAL, "engine: stage_io: stage %d unknown", (int)stage);
	if (n_layers == 0 || layer >= e->cfg.n_layer || n_layers > e->cfg.n_layer - layer)
		return err_set(ERR_INVAL, "engine: stage_io: layers [%u, %u) outside the model's %u", layer,
			       layer + n_layers, e->cfg.n_layer);
	if (eng_own_check(e, layer, n_layers, "stage_io"))
		return ERR_STATE;
	if (e->attn_only && stage != ENGINE_STAGE_ATTN)
		return err_set(ERR_STATE, "engine: stage_io: this engine holds only the attention's weights");
	if (e->ffn_only && stage != ENGINE_STAGE_FFN)
		return err_set(ERR_STATE, "engine: stage_io: this engine holds no attention weights (split's FFN worker)");
	int rc = eng_step_write(e, NULL, n, pos0, 0);
	if (rc)
		return rc;
	VkCommandBuffer cb = e->once;
	if (n == 1 && n_layers == 1) { /* decode: replay the recorded buffer of this layer and stage */
		uint32_t sh = e->fuse && e->step_short ? 3 * e->cfg.n_layer : 0;
		VkCommandBuffer *slot = &e->stage_cbs[sh + layer * 3 + (uint32_t)stage];
		if (!*slot) {
			rc = vk_cmd_alloc(e->vk, slot);
			if (!rc)
				rc = rec_stage_io(e, *slot, false, layer, 1, stage, 1);
			if (rc) {
				vk_cmd_free(e->vk, *slot);
				*slot = VK_NULL_HANDLE;
				return rc;
			}
		}
		cb = *slot;
	} else {
		vkResetCommandBuffer(cb, 0);
		rc = rec_stage_io(e, cb, true, layer, n_layers, stage, n);
		if (rc)
			return rc;
	}
	return hio_run(e, cb, n, in, out);
}

/* The stage and layer of one attention or FFN stage call (fn: for errors). */
static int stage_check(const struct engine *e, uint32_t layer, enum engine_stage stage, const char *fn)
{
	if (stage != ENGINE_STAGE_ATTN && stage != ENGINE_STAGE_FFN)
		return err_set(ERR_INVAL, "engine: %s: stage %d (attention or FFN)", fn, (int)stage);
	if (layer >= e->cfg.n_layer)
		return err_set(ERR_INVAL, "engine: %s: layer %u outside the model's %u", fn, layer, e->cfg.n_layer);
	if (e->attn_only && stage != ENGINE_STAGE_ATTN)
		return err_set(ERR_STATE, "engine: %s: this engine holds only the attention's weights", fn);
	if (e->ffn_only && stage != ENGINE_STAGE_FFN)
		return err_set(ERR_STATE, "engine: %s: this engine holds no attention weights (split's FFN worker)", fn);
	return eng_own_check(e, layer, 1, fn);
}

int engine_stage_batch(struct engine *e, uint32_t layer, enum engine_stage stage, uint32_t n, const uint32_t *seqs,
		       const uint32_t *pos, bool wide, const float *in, float *out)
{
	int rc = stage_check(e, layer, stage, "stage_batch");
	if (rc)
		return rc;
	if (!seqs || !pos)
		return err_set(ERR_INVAL, "engine: stage_batch: seqs and pos are required");
	if (n == 0 || n > e->batch_max)
		return err_set(ERR_INVAL, "engine: stage_batch: %u rows (1..%u)", n, e->batch_max);
	rc = eng_batch_write(e, n, NULL, seqs, pos, 0);
	if (rc)
		return rc;
	if (!e->stageb_cbs &&
	    !(e->stageb_cbs = calloc(eng_stageb_cbs_len(e), sizeof *e->stageb_cbs)))
		return err_set(ERR_NOMEM, "engine: out of memory");
	/* recorded once per (short steps, layer, stage, kind, rows) with the
	 * batch kernels: every row computed as a lone token would be (mul_mvs
	 * columns), so a batched stage equals the rows' lone stages bit for bit;
	 * or wide, every row as a row of a wide step (the tiled kernel
	 * accumulates each column alike whatever the other columns) */
	size_t sh = e->fuse && e->step_short ? 1 : 0;
	size_t at = (((sh * e->cfg.n_layer + layer) * 2 + (uint32_t)stage) * 2 + (wide ? 1 : 0)) * (e->batch_max + 1) + n;
	VkCommandBuffer *slot = &e->stageb_cbs[at];
	if (!*slot) {
		rc = vk_cmd_alloc(e->vk, slot);
		if (!rc) {
			e->rec_batch = e->rec_distinct = true; /* batch_write: distinct sequences */
			e->rec_wide = wide;
			rc = rec_stage_io(e, *slot, false, layer, 1, stage, n);
			e->rec_batch = e->rec_distinct = e->rec_wide = false;
		}
		if (rc) {
			vk_cmd_free(e->vk, *slot);
			*slot = VK_NULL_HANDLE;
			return rc;
		}
	}
	return hio_run(e, *slot, n, in, out);
}

/* The range calls' layers [layer, layer + n_layers) (fn: for errors). */
static int range_check(const struct engine *e, uint32_t layer, uint32_t n_layers, const char *fn)
{
	if (n_layers == 0 || layer >= e->cfg.n_layer || n_layers > e->cfg.n_layer - layer)
		return err_set(ERR_INVAL, "engine: %s: layers [%u, %u) outside the model's %u", fn, layer, layer + n_layers,
			       e->cfg.n_layer);
	if (e->attn_only || e->ffn_only)
		return err_set(ERR_STATE, "engine: %s: this engine holds only the %s's weights", fn,
			       e->attn_only ? "attention" : "FFN");
	return eng_own_check(e, layer, n_layers, fn);
}

int engine_stage_range(struct engine *e, uint32_t layer, uint32_t n_layers, uint32_t n, const uint32_t *seqs,
		       const uint32_t *pos, bool wide, const float *in, float *out)
{
	int rc = range_check(e, layer, n_layers, "stage_range");
	if (rc)
		return rc;
	if (!seqs || !pos)
		return err_set(ERR_INVAL, "engine: stage_range: seqs and pos are required");
	if (n == 0 || n > e->batch_max)
		return err_set(ERR_INVAL, "engine: stage_range: %u rows (1..%u)", n, e->batch_max);
	rc = eng_batch_write(e, n, NULL, seqs, pos, 0);
	if (rc)
		return rc;
	size_t len = 4 * ((size_t)e->batch_max + 1);
	if (!e->stager_cbs && !(e->stager_cbs = calloc(len, sizeof *e->stager_cbs)))
		return err_set(ERR_NOMEM, "engine: out of memory");
	if (e->stager_l0 != layer || e->stager_n != n_layers) { /* a pipeline stage keeps one range */
		for (size_t i = 0; i < len; i++) {
			vk_cmd_free(e->vk, e->stager_cbs[i]);
			e->stager_cbs[i] = VK_NULL_HANDLE;
		}
		e->stager_l0 = layer;
		e->stager_n = n_layers;
	}
	/* recorded once per (short steps, kind, rows): the layers as the fused
	 * forward records them (rec_stage_io), or with UNICORN_PIPE_UNFUSED=1
	 * each layer's attention and FFN exactly as engine_stage_batch records
	 * them one at a time */
	size_t sh = e->fuse && e->step_short ? 1 : 0;
	VkCommandBuffer *slot = &e->stager_cbs[(sh * 2 + (wide ? 1 : 0)) * (e->batch_max + 1) + n];
	if (!*slot) {
		rc = vk_cmd_alloc(e->vk, slot);
		if (!rc) {
			e->rec_batch = e->rec_distinct = true;
			e->rec_wide = wide;
			rc = rec_stage_io(e, *slot, false, layer, n_layers, ENGINE_STAGE_BOTH, n);
			e->rec_batch = e->rec_distinct = e->rec_wide = false;
		}
		if (rc) {
			vk_cmd_free(e->vk, *slot);
			*slot = VK_NULL_HANDLE;
			return rc;
		}
	}
	return hio_run(e, *slot, n, in, out);
}

static int stage_chunks_layers(struct engine *e, uint32_t layer, uint32_t n_layers, enum engine_stage stage, uint32_t n,
			       const struct engine_chunk *ch, const float *in, float *out);

int engine_stage_chunks_range(struct engine *e, uint32_t layer, uint32_t n_layers, uint32_t n,
			      const struct engine_chunk *ch, const float *in, float *out)
{
	int rc = range_check(e, layer, n_layers, "stage_chunks_range");
	return rc ? rc : stage_chunks_layers(e, layer, n_layers, ENGINE_STAGE_BOTH, n, ch, in, out);
}

int engine_stage_chunks(struct engine *e, uint32_t layer, enum engine_stage stage, uint32_t n,
			const struct engine_chunk *ch, const float *in, float *out)
{
	int rc = stage_check(e, layer, stage, "stage_chunks");
	return rc ? rc : stage_chunks_layers(e, layer, 1, stage, n, ch, in, out);
}

static int stage_chunks_layers(struct engine *e, uint32_t layer, uint32_t n_layers, enum engine_stage stage, uint32_t n,
			       const struct engine_chunk *ch, const float *in, float *out)
{
	int rc;
	for (uint32_t i = 0; ch && i < n; i++)
		if (ch[i].head)
			return err_set(ERR_INVAL, "engine: stage_chunks: chunk %u asks for a head (stages have none)", i);
	uint32_t rows, m;
	rc = eng_chunks_write(e, n, ch, 0, &rows, &m, false);
	if (rc)
		return rc;
	VkCommandBuffer cb = e->once;
	vkResetCommandBuffer(cb, 0);
	/* engine_forward_chunks' wide kind: rows of several sequences, each row
	 * alike whatever the others */
	e->rec_batch = e->rec_wide = true;
	rc = rec_stage_io(e, cb, true, layer, n_layers, stage, rows);
	e->rec_batch = e->rec_wide = false;
	return rc ? rc : hio_run(e, cb, rows, in, out);
}

float *engine_stage_rows(struct engine *e)
{
	return e->hio->map;
}

int engine_head_batch(struct engine *e, uint32_t n, const float *in, bool wide, enum engine_batch_mode mode, uint32_t k,
		      uint32_t *ids, float *vals)
{
	if (e->attn_only)
		return err_set(ERR_STATE, "engine: head_batch: this engine holds only the attention's weights");
	bool all = mode == ENGINE_BATCH_LOGITS; /* every row's whole logit row into vals */
	if (mode != ENGINE_BATCH_ARGMAX && mode != ENGINE_BATCH_TOPK && !all)
		return err_set(ERR_INVAL, "engine: head_batch: mode %d (argmax, top-k or logits)", (int)mode);
	if (mode != ENGINE_BATCH_TOPK)
		k = 1;
	if (k == 0 || k > ENGINE_TOPK_MAX)
		return err_set(ERR_INVAL, "engine: head_batch: k %u outside [1, %d]", k, ENGINE_TOPK_MAX);
	if (n == 0 || n > e->batch_max || !in || (!all && !ids) || (mode != ENGINE_BATCH_ARGMAX && !vals))
		return err_set(ERR_INVAL, "engine: head_batch: %u rows (1..%u) or a missing array", n, e->batch_max);
	struct engine_step *s = e->step->map;
	s->n = n;
	s->k = k;
	memcpy(e->hio->map, in, (size_t)n * e->cfg.n_embd * 4);
	int rc = once_begin(e);
	if (rc)
		return rc;
	VkCommandBuffer cb = e->once;
	uint32_t qs = e->vk->n_queries - 2;
	if (e->vk->timestamps) {
		vk_cmd_reset_queries(cb, e->vk, qs, 2);
		vk_cmd_timestamp(cb, e->vk, qs);
	}
	eng_rec_step_copy(e, cb, n);
	VkBufferCopy region = { 0, 0, (VkDeviceSize)n * e->cfg.n_embd * 4 };
	vkCmdCopyBuffer(cb, e->hio->buf, e->h->buf, 1, &region);
	eng_fbar(e, cb);
	/* the lone head's kernels per row: final norm, logits, argmax/top-k */
	e->rec_batch = true;
	e->rec_wide = wide;
	eng_rec_norm(e, cb, e->s_final, 0, n);
	eng_rec_logits_to(e, cb, n, n, all ? e->s_logits : e->s_logits_d);
	e->rec_batch = e->rec_wide = false;
	struct argmax_push ap = { e->n_vocab_text, 0, e->cfg.n_vocab, LSE_OFF(e) };
	if (mode == ENGINE_BATCH_ARGMAX)
		eng_disp(e, cb, "argmax", 0, &e->argmax, e->s_argmax, &ap, e->am_groups, n, 1);
	else if (!all)
		eng_disp(e, cb, "topk", 0, &e->topk, e->s_topk, &ap, e->tk_groups, n, 1);
	if (!all)
		eng_fbar(e, cb);
	if (e->vk->timestamps)
		vk_cmd_timestamp(cb, e->vk, qs + 1);
	rc = once_submit(e);
	if (!rc && e->vk->timestamps)
		eng_gpu_ns_add(e, qs, qs + 1);
	if (rc)
		return rc;
	if (all)
		memcpy(vals, e->logits->map, (size_t)n * e->cfg.n_vocab * 4);
	else
		eng_batch_results(e, n, k, mode == ENGINE_BATCH_TOPK, ids, vals);
	return 0;
}

int engine_head(struct engine *e, uint32_t n, float *logits)
{
	if (e->attn_only)
		return err_set(ERR_STATE, "engine: head: this engine holds only the attention's weights");
	int rc = eng_step_write(e, NULL, n, 0, 0);
	if (!rc)
		rc = once_begin(e);
	if (rc)
		return rc;
	eng_rec_norm(e, e->once, e->s_final, 0, n);
	eng_rec_logits(e, e->once, n, 1);
	rc = once_submit(e);
	if (!rc && logits)
		memcpy(logits, e->logits->map, (size_t)e->cfg.n_vocab * 4);
	return rc;
}

