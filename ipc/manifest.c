/* manifest: planner, writer and validating reader of the tensor table. */
#include "ipc/manifest.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/le.h"
#include "ipc/shm.h"
#include "formats/quant.h"

/* ---- planner ---- */

void manifest_plan_free(struct manifest_plan *plan)
{
	free(plan->region);
	free(plan->offset);
	memset(plan, 0, sizeof *plan);
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

int manifest_plan(const struct model *m, uint64_t max_region_bytes, struct manifest_plan *plan)
{
	memset(plan, 0, sizeof *plan);
	if (!max_region_bytes)
		max_region_bytes = SHM_DEFAULT_REGION;
	if (max_region_bytes > SHM_MAX_REGION)
		return err_set(ERR_RANGE, "manifest: plan: region size %" PRIu64 " exceeds %llu",
			       max_region_bytes, SHM_MAX_REGION);
	if (!m->n_tensors || m->n_tensors > MANIFEST_MAX_TENSORS)
		return err_set(ERR_RANGE, "manifest: plan: %zu tensors outside [1, %d]", m->n_tensors,
			       MANIFEST_MAX_TENSORS);
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	plan->region = calloc(m->n_tensors, sizeof *plan->region);
	plan->offset = calloc(m->n_tensors, sizeof *plan->offset);
	if (!plan->region || !plan->offset) {
		manifest_plan_free(plan);
		return err_set(ERR_NOMEM, "manifest: plan: out of memory");
	}
	plan->n_tensors = m->n_tensors;
	uint32_t cur = 0;
	uint64_t used = 0; /* bytes used in region cur */
	for (size_t i = 0; i < m->n_tensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		if (t->nbytes > SHM_MAX_REGION) {
			manifest_plan_free(plan);
			return err_set(ERR_RANGE, "manifest: plan: tensor %s of %" PRIu64 " bytes exceeds "
				       "the %llu-byte region limit", t->name, t->nbytes, SHM_MAX_REGION);
		}
		uint64_t off = round_up(used, MANIFEST_ALIGN);
		/* Start a new region when this one is non-empty and would overflow. */
		if (used && off + t->nbytes > max_region_bytes) {
			plan->region_size[cur] = round_up(used, page);
			cur++;
			used = off = 0;
		}
		if (cur >= MANIFEST_MAX_REGIONS) {
			manifest_plan_free(plan);
			return err_set(ERR_RANGE, "manifest: plan: more than %d regions", MANIFEST_MAX_REGIONS);
		}
		plan->region[i] = cur;
		plan->offset[i] = off;
		used = off + (t->nbytes ? t->nbytes : 1);
	}
	plan->region_size[cur] = round_up(used, page);
	plan->n_regions = cur + 1;
	for (uint32_t r = 0; r < plan->n_regions; r++)
		if (plan->region_size[r] > SHM_MAX_REGION) {
			manifest_plan_free(plan);
			return err_set(ERR_RANGE, "manifest: plan: region %u exceeds %llu bytes", r,
				       SHM_MAX_REGION);
		}
	return 0;
}

int manifest_fill(const struct model *m, const struct manifest_plan *plan,
		  const struct manifest_region *dst, uint32_t n_dst)
{
	if (n_dst != plan->n_regions || plan->n_tensors != m->n_tensors)
		return err_set(ERR_INVAL, "manifest: fill: %u regions for a plan of %u", n_dst,
			       plan->n_regions);
	for (uint32_t r = 0; r < n_dst; r++)
		if (dst[r].size < plan->region_size[r])
			return err_set(ERR_RANGE, "manifest: fill: region %u is %" PRIu64 " bytes, plan needs %"
				       PRIu64, r, dst[r].size, plan->region_size[r]);
	for (size_t i = 0; i < m->n_tensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		const struct manifest_region *d = &dst[plan->region[i]];
		if (plan->offset[i] > d->size || t->nbytes > d->size - plan->offset[i])
			return err_set(ERR_RANGE, "manifest: fill: tensor %s outside region %u", t->name,
				       plan->region[i]);
		memcpy((uint8_t *)d->addr + plan->offset[i], t->data, t->nbytes);
	}
	return 0;
}

/* ---- writer ---- */

int manifest_size(size_t n_tensors, uint32_t n_regions, size_t *size)
{
	if (n_tensors > MANIFEST_MAX_TENSORS || n_regions > MANIFEST_MAX_REGIONS)
		return err_set(ERR_RANGE, "manifest: %zu tensors / %u regions exceed caps", n_tensors,
			       n_regions);
	*size = MANIFEST_HDR_SIZE + MANIFEST_CFG_SIZE + 8 * (size_t)n_regions +
		MANIFEST_TENSOR_SIZE * n_tensors;
	return 0;
}

static void write_config(uint8_t *p, const struct gemma3_config *c)
{
	const uint32_t u[10] = { c->n_embd, c->n_ff, c->n_layer, c->n_head, c->n_head_kv, c->head_dim,
				 c->sliding_window, c->n_vocab, c->n_vocab_text, c->n_ctx };
	const float f[6] = { c->eps, c->rope_base_global, c->rope_base_local, c->rope_scale_global,
			     c->query_pre_attn_scalar, c->final_softcap };
	for (int i = 0; i < 10; i++)
		le_put(p + 4 * i, u[i], 4);
	for (int i = 0; i < 6; i++)
		le_put_f32(p + 40 + 4 * i, f[i]);
	for (int i = 0; i < MODEL_MAX_LAYERS; i++)
		p[64 + i] = c->layer_global[i] ? 1 : 0;
}

int manifest_write(const struct model *m, const struct manifest_plan *plan, void *buf, size_t cap,
		   size_t *len)
{
	size_t need = 0;
	int rc = manifest_size(m->n_tensors, plan->n_regions, &need);
	if (rc)
		return rc;
	if (plan->n_tensors != m->n_tensors)
		return err_set(ERR_INVAL, "manifest: write: plan is for %zu tensors, model has %zu",
			       plan->n_tensors, m->n_tensors);
	if (need > cap)
		return err_set(ERR_RANGE, "manifest: write: %zu bytes do not fit %zu", need, cap);
	uint8_t *p = buf;
	memset(p, 0, need);
	le_put(p, MANIFEST_MAGIC, 4);
	le_put(p + 4, MANIFEST_VERSION, 4);
	le_put(p + 8, plan->n_regions, 4);
	le_put(p + 12, m->n_tensors, 4);
	le_put(p + 16, (uint32_t)m->format, 4);
	write_config(p + MANIFEST_HDR_SIZE, &m->cfg);
	uint8_t *q = p + MANIFEST_HDR_SIZE + MANIFEST_CFG_SIZE;
	for (uint32_t r = 0; r < plan->n_regions; r++, q += 8)
		le_put(q, plan->region_size[r], 8);
	for (size_t i = 0; i < m->n_tensors; i++, q += MANIFEST_TENSOR_SIZE) {
		const struct model_tensor *t = &m->tensors[i];
		size_t nl = strnlen(t->name, sizeof t->name - 1);
		memcpy(q, t->name, nl);
		le_put(q + 96, t->type, 4);
		le_put(q + 100, t->n_dims, 4);
		for (int d = 0; d < 4; d++)
			le_put(q + 104 + 8 * d, t->ne[d], 8);
		le_put(q + 136, plan->region[i], 4);
		le_put(q + 144, plan->offset[i], 8);
		le_put(q + 152, t->nbytes, 8);
		le_put_f32(q + 160, t->norm_offset);
	}
	*len = need;
	return 0;
}

/* ---- reader ---- */

static int read_config(const char *name, const uint8_t *p, struct gemma3_config *c)
{
	uint32_t *u[10] = { &c->n_embd, &c->n_ff, &c->n_layer, &c->n_head, &c->n_head_kv, &c->head_dim,
			    &c->sliding_window, &c->n_vocab, &c->n_vocab_text, &c->n_ctx };
	float *f[6] = { &c->eps, &c->rope_base_global, &c->rope_base_local, &c->rope_scale_global,
			&c->query_pre_attn_scalar, &c->final_softcap };
	for (int i = 0; i < 10; i++)
		*u[i] = (uint32_t)le_get(p + 4 * i, 4);
	for (int i = 0; i < 6; i++)
		*f[i] = le_get_f32(p + 40 + 4 * i);
	for (int i = 0; i < MODEL_MAX_LAYERS; i++) {
		if (p[64 + i] > 1)
			return err_set(ERR_INVAL, "%s: config: layer_global[%d] = %u (must be 0 or 1)", name, i,
				       p[64 + i]);
		c->layer_global[i] = p[64 + i];
	}
	return model_check_config(name, c);
}

static int read_tensor(const char *name, size_t idx, const uint8_t *q,
		       const struct manifest_region *regions, uint32_t n_regions, struct model_tensor *t)
{
	if (!memchr(q, 0, 96))
		return err_set(ERR_INVAL, "%s: tensor %zu: name not NUL-terminated within 96 bytes", name,
			       idx);
	memcpy(t->name, q, 96);
	if (!t->name[0])
		return err_set(ERR_INVAL, "%s: tensor %zu: empty name", name, idx);
	for (size_t i = strlen(t->name); i < 96; i++)
		if (q[i])
			return err_set(ERR_INVAL, "%s: tensor %s: bytes after the name's NUL not 0", name,
				       t->name);
	t->type = (uint32_t)le_get(q + 96, 4);
	t->n_dims = (uint32_t)le_get(q + 100, 4);
	const struct quant_type_info *qi = quant_type_info(t->type);
	if (!qi)
		return err_set(ERR_UNSUP, "%s: tensor %s: type %u not supported", name, t->name, t->type);
	if (t->n_dims < 1 || t->n_dims > 4)
		return err_set(ERR_INVAL, "%s: tensor %s: n_dims %u outside [1, 4]", name, t->name,
			       t->n_dims);
	uint64_t nel = 1;
	for (uint32_t d = 0; d < 4; d++) {
		t->ne[d] = le_get(q + 104 + 8 * d, 8);
		if (!t->ne[d] || (d >= t->n_dims && t->ne[d] != 1))
			return err_set(ERR_INVAL, "%s: tensor %s: ne[%u] = %" PRIu64 " invalid", name, t->name,
				       d, t->ne[d]);
		if (__builtin_mul_overflow(nel, t->ne[d], &nel) || nel > (1ull << 40))
			return err_set(ERR_RANGE, "%s: tensor %s: element count overflows", name, t->name);
	}
	if (t->ne[0] % qi->block_elems)
		return err_set(ERR_INVAL, "%s: tensor %s: row of %" PRIu64 " not a multiple of the %s block",
			       name, t->name, t->ne[0], qi->name);
	uint32_t region = (uint32_t)le_get(q + 136, 4);
	uint64_t off = le_get(q + 144, 8);
	t->nbytes = le_get(q + 152, 8);
	t->norm_offset = le_get_f32(q + 160);
	if (le_get(q + 140, 4) || le_get(q + 164, 4))
		return err_set(ERR_INVAL, "%s: tensor %s: reserved fields not 0", name, t->name);
	uint64_t want;
	int rc = quant_row_bytes(t->type, nel, &want);
	if (rc)
		return err_prefix(rc, "%s: tensor %s", name, t->name);
	if (t->nbytes != want)
		return err_set(ERR_INVAL, "%s: tensor %s: nbytes %" PRIu64 ", dims imply %" PRIu64, name,
			       t->name, t->nbytes, want);
	if (!isfinite(t->norm_offset))
		return err_set(ERR_INVAL, "%s: tensor %s: norm_offset not finite", name, t->name);
	if (region >= n_regions)
		return err_set(ERR_RANGE, "%s: tensor %s: region %u, only %u regions", name, t->name,
			       region, n_regions);
	if (off % MANIFEST_ALIGN)
		return err_set(ERR_INVAL, "%s: tensor %s: offset %" PRIu64 " not %d-aligned", name,
			       t->name, off, MANIFEST_ALIGN);
	const struct manifest_region *r = &regions[region];
	if (off > r->size || t->nbytes > r->size - off)
		return err_set(ERR_RANGE, "%s: tensor %s: [%" PRIu64 ", +%" PRIu64 ") outside region %u of %"
			       PRIu64 " bytes", name, t->name, off, t->nbytes, region, r->size);
	t->data = (const uint8_t *)r->addr + off;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	const struct model_tensor *const *x = a, *const *y = b;
	return strcmp((*x)->name, (*y)->name);
}

static int check_unique(const char *name, const struct model *m)
{
	const struct model_tensor **v = malloc(m->n_tensors * sizeof *v);
	if (!v)
		return err_set(ERR_NOMEM, "%s: out of memory", name);
	for (size_t i = 0; i < m->n_tensors; i++)
		v[i] = &m->tensors[i];
	qsort(v, m->n_tensors, sizeof *v, cmp_names);
	int rc = 0;
	for (size_t i = 1; i < m->n_tensors && !rc; i++)
		if (!strcmp(v[i - 1]->name, v[i]->name))
			rc = err_set(ERR_INVAL, "%s: tensor %s: listed twice", name, v[i]->name);
	free(v);
	return rc;
}

int manifest_load(const void *buf, size_t len, const struct manifest_region *regions,
		  uint32_t n_regions, const char *name, struct model **out)
{
	*out = NULL;
	if (!name)
		name = "manifest";
	const uint8_t *p = buf;
	if (len < MANIFEST_HDR_SIZE + MANIFEST_CFG_SIZE)
		return err_set(ERR_INVAL, "%s: %zu bytes is shorter than header + config", name, len);
	if (le_get(p, 4) != MANIFEST_MAGIC)
		return err_set(ERR_INVAL, "%s: bad magic (want \"UMAN\")", name);
	if (le_get(p + 4, 4) != MANIFEST_VERSION)
		return err_set(ERR_INVAL, "%s: version %u unsupported (we read %d)", name,
			       (unsigned)le_get(p + 4, 4), MANIFEST_VERSION);
	uint32_t nr = (uint32_t)le_get(p + 8, 4), nt = (uint32_t)le_get(p + 12, 4);
	uint32_t format = (uint32_t)le_get(p + 16, 4);
	if (le_get(p + 20, 4) || le_get(p + 24, 4) || le_get(p + 28, 4))
		return err_set(ERR_INVAL, "%s: header reserved fields not 0", name);
	if (!nr || nr > MANIFEST_MAX_REGIONS || nr != n_regions)
		return err_set(ERR_RANGE, "%s: n_regions %u (cap %d), %u regions given", name, nr,
			       MANIFEST_MAX_REGIONS, n_regions);
	if (!nt || nt > MANIFEST_MAX_TENSORS)
		return err_set(ERR_RANGE, "%s: n_tensors %u outside [1, %d]", name, nt,
			       MANIFEST_MAX_TENSORS);
	if (format != MODEL_GGUF && format != MODEL_HF)
		return err_set(ERR_INVAL, "%s: format %u unknown", name, format);
	size_t need = 0;
	int rc = manifest_size(nt, nr, &need);
	if (rc)
		return rc;
	if (len != need)
		return err_set(ERR_INVAL, "%s: %zu bytes, counts imply %zu", name, len, need);
	const uint8_t *q = p + MANIFEST_HDR_SIZE + MANIFEST_CFG_SIZE;
	for (uint32_t r = 0; r < nr; r++, q += 8)
		if (le_get(q, 8) != regions[r].size)
			return err_set(ERR_RANGE, "%s: region %u: manifest says %" PRIu64 " bytes, mapping has %"
				       PRIu64, name, r, le_get(q, 8), regions[r].size);

	struct model *m = calloc(1, sizeof *m);
	if (!m)
		return err_set(ERR_NOMEM, "%s: out of memory", name);
	m->format = (enum model_format)format;
	m->path = strdup(name);
	m->tensors = calloc(nt, sizeof *m->tensors);
	if (!m->path || !m->tensors) {
		rc = err_set(ERR_NOMEM, "%s: out of memory", name);
		goto out_model;
	}
	m->n_tensors = nt;
	if ((rc = read_config(name, p + MANIFEST_HDR_SIZE, &m->cfg)))
		goto out_model;
	for (uint32_t i = 0; i < nt; i++, q += MANIFEST_TENSOR_SIZE)
		if ((rc = read_tensor(name, i, q, regions, n_regions, &m->tensors[i])))
			goto out_model;
	if ((rc = check_unique(name, m)) || (rc = model_bind(m, name)))
		goto out_model;
	*out = m;
	return 0;
out_model:
	model_close(m); /* priv is NULL: frees layers, tensors, path */
	return rc;
}
