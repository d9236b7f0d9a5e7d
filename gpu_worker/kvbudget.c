/* kvbudget: the KV cache's size from the device (see kvbudget.h). */
#include "gpu_worker/kvbudget.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu_worker/vk.h"

uint64_t kvb_scratch(const struct gemma3_config *c, uint32_t rows, uint32_t batch)
{
	/* the engine's per-row activations (engine_create's buffer list, rounded
	 * up): residual, norms, qkv, attention output and partials (16 splits),
	 * gate/up and the GLU, plus the logits rows on the device and the host */
	uint64_t qkv = (uint64_t)(c->n_head + 2 * c->n_head_kv) * c->head_dim, nq = (uint64_t)c->n_head * c->head_dim;
	uint64_t per_row = 4 * (6ull * c->n_embd + qkv + nq + 16ull * c->n_head * (c->head_dim + 2) + 3ull * c->n_ff);
	return (uint64_t)rows * per_row + 3ull * batch * c->n_vocab * 4 + (64ull << 20);
}

int kvb_auto(const char *device, const struct model *m, uint32_t rows, uint32_t batch, struct kvb_plan *out)
{
	memset(out, 0, sizeof *out);
	const struct gemma3_config *c = &m->cfg;
	struct vk_ctx *vk = NULL;
	int rc = vk_create(device, &vk);
	if (rc)
		return rc;
	out->free = vk_device_local_free(vk);
	snprintf(out->device, sizeof out->device, "%s", vk->info.name);
	out->max_pool = VK_MAX_BUFFER_BYTES;
	if (vk->props.limits.maxStorageBufferRange < out->max_pool)
		out->max_pool = vk->props.limits.maxStorageBufferRange;
	vk_destroy(vk);
	const char *env = getenv("UNICORN_KV_DEVICE_FREE");
	if (env && *env) {
		char *end;
		unsigned long long v = strtoull(env, &end, 10);
		if (!*end)
			out->free = v;
	}
	for (size_t i = 0; i < m->n_tensors; i++)
		out->weights += m->tensors[i].nbytes;
	out->scratch = kvb_scratch(c, rows, batch);
	out->headroom = out->free / 20 > (256ull << 20) ? out->free / 20 : 256ull << 20;
	uint64_t need = out->weights + out->scratch + out->headroom;
	out->budget = out->free > need ? out->free - need : 0;
	return 0;
}

int kvb_fit_pools(const struct gemma3_config *c, uint64_t max_pool, uint32_t max_seqs, uint64_t *budget_io,
		  struct kv_layout *l)
{
	uint64_t unit = (uint64_t)KV_BLOCK * l->row_bytes; /* one block of one layer, K or V */
	uint64_t maxb = unit ? (max_pool - 8) / unit : 0;   /* the engine pads a pool by a word or two */
	if (l->n_gblocks <= maxb && l->n_lblocks <= maxb)
		return 0;
	if (maxb < l->max_blocks || maxb < l->ring)
		return err_set(ERR_RANGE, "kv: one sequence of %u positions needs %llu MiB per layer, more than a "
			       "buffer of this device holds (%llu MiB): lower --ctx or use --kv-type q8_0", l->max_ctx,
			       (unsigned long long)((uint64_t)l->max_blocks * unit >> 20),
			       (unsigned long long)(max_pool >> 20));
	/* the plan shares a budget between the pools in its own proportion: cap,
	 * replan, and shave while either pool is still too large */
	for (int i = 0; i < 32 && (l->n_gblocks > maxb || l->n_lblocks > maxb); i++) {
		uint64_t ng = l->n_gblocks < maxb ? l->n_gblocks : maxb, nl = l->n_lblocks < maxb ? l->n_lblocks : maxb;
		uint64_t budget = ng * l->gblock_bytes + nl * l->lblock_bytes;
		budget -= i ? budget / 16 : 0;
		int rc = kv_layout_plan(c, l->max_ctx, max_seqs, budget, l->type, l);
		if (rc)
			return rc;
		*budget_io = budget;
	}
	if (l->n_gblocks > maxb || l->n_lblocks > maxb)
		return err_set(ERR_RANGE, "kv: no plan keeps a layer's pool within %llu MiB",
			       (unsigned long long)(max_pool >> 20));
	return 0;
}
