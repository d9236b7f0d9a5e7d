/* engine: Gemma 3 on Vulkan (see engine.h and docs/vulkan.md).
 *
 * Per token (decode, fused placement) the recorded command buffer runs:
 *   embed, attn_norm(layer 0),
 *   per layer: qkv matvec, [rope_kv], attn, [attn_combine], wo matvec,
 *              post_attn_norm+residual+ffn_norm, gate/up GLU matvec, down matvec,
 *              post_ffn_norm+residual+next attn_norm (or the final norm),
 *   logits matvec, [argmax | topk]
 * i.e. 7 to 9 dispatches per layer, one queue submission per step. rope_kv
 * runs inside attn when the step's rows are distinct sequences (a decode
 * step), attn_combine is left out when every token's keys fit one split
 * (short context; command buffers are recorded per short/long); see
 * rec_attn. UNICORN_NO_FUSE=1 records both always (A/B, same numbers). */
#include "gpu_worker/engine.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_worker/coopmat.h"
#include "gpu_worker/engine_image.h"
#include "gpu_worker/regroup.h"
#include "gpu_worker/shaders.h"
#include "gpu_worker/vk.h"
#include "gpu_worker/x16.h"
#include "common/err.h"
#include "formats/quant.h"
#include "gpu_worker/engine_priv.h"

static int type_slot(uint32_t type)
{
	switch (type) {
	case TENSOR_F32: return 0;
	case TENSOR_F16: return 1;
	case TENSOR_BF16: return 2;
	case TENSOR_Q8_0: return 3;
	case TENSOR_Q4_0: return 4;
	case TENSOR_Q4_K: return 5;
	case TENSOR_Q6_K: return 6;
	case TENSOR_Q4_1: return 7;
	case TENSOR_Q5_0: return 8;
	case TENSOR_Q5_1: return 9;
	case TENSOR_IQ4_NL: return 10;
	case TENSOR_Q2_K: return 11;
	case TENSOR_Q3_K: return 12;
	case TENSOR_Q5_K: return 13;
	case TENSOR_IQ4_XS: return 14;
	case TENSOR_Q4_0G: return 15;
	default: return -1;
	}
}
static const char *slot_name[N_SLOTS] = { "f32",  "f16",    "bf16", "q8_0", "q4_0", "q4_k", "q6_k",  "q4_1",
					  "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k", "q5_k", "iq4_xs", "q4_0g" };

/* Rows per thread group of the single-token mul_mvs (shaders/mul_mvs.glsl):
 * quarter-block types (q4_0, q8_0) apply each x unit to several rows; the
 * whole-block types hold 32 weights per row and unit in registers, so 1. */
uint32_t engine_mvs_rows(uint32_t type, uint32_t want)
{
	bool quarter = type == TENSOR_Q4_0 || type == TENSOR_Q8_0;
	return quarter && want >= 1 && want <= MVS_MAX_RPT ? want : 1;
}

struct vk_ctx *engine_vk(struct engine *e) { return e->vk; }

void engine_placement(const struct engine *e, uint64_t *dl, uint64_t *hv)
{
	*dl = e->vk->bytes_device_local;
	*hv = e->vk->bytes_host_visible;
}

uint64_t engine_weights_regrouped(const struct engine *e) { return e->bytes_regrouped; }

void engine_weights_import(const struct engine *e, uint64_t *imported, uint64_t *total)
{
	*imported = e->bytes_imported;
	*total = e->bytes_matrix;
}

static uint64_t align_down(uint64_t v, uint64_t a) { return v & ~(a - 1); }

/* Add an import piece [base, base + size) (not yet imported). */
static int imp_add(struct engine *e, const char *base, uint64_t size)
{
	if (e->n_imp == e->cap_imp) {
		uint32_t cap = e->cap_imp ? 2 * e->cap_imp : 16;
		struct eimp *p = realloc(e->imp, (size_t)cap * sizeof *p);
		if (!p)
			return err_set(ERR_NOMEM, "engine: import table: out of memory");
		e->imp = p;
		e->cap_imp = cap;
	}
	e->imp[e->n_imp++] = (struct eimp){ .base = base, .size = size };
	return 0;
}

/* Cut each span into aligned pieces of at most 2 GiB (one VkBuffer each):
 * from the span's first aligned address to its last aligned end, so an
 * import never reaches outside the mapping. */
static int imp_plan(struct engine *e, const struct engine_opts *o)
{
	uint64_t a = e->vk->host_import_align;
	for (uint32_t i = 0; i < o->n_spans; i++) {
		uint64_t lo = (uintptr_t)o->spans[i].addr, sz = o->spans[i].size;
		if (!lo || sz > UINTPTR_MAX - lo || lo > UINT64_MAX - a)
			continue;
		uint64_t b = align_down(lo + a - 1, a), end = align_down(lo + sz, a);
		while (b < end) {
			uint64_t n = end - b < VK_MAX_BUFFER_BYTES ? end - b : VK_MAX_BUFFER_BYTES;
			int rc = imp_add(e, (const char *)(uintptr_t)b, n);
			if (rc)
				return rc;
			b += n;
		}
	}
	return 0;
}

/* Find (importing on first use) an import holding [p, p + n) at an offset a
 * storage binding may start at. ERR_NOTFOUND: upload instead. */
static int imp_find(struct engine *e, const void *p, uint64_t n, struct vk_buf **buf, VkDeviceSize *off)
{
	const VkPhysicalDeviceLimits *lim = &e->vk->props.limits;
	uint64_t q = (uintptr_t)p;
	if (!p || n == 0 || n > lim->maxStorageBufferRange || q > UINTPTR_MAX - n - e->vk->host_import_align)
		return ERR_NOTFOUND;
	uint32_t first = 0;
	if (e->per_tensor_imp) {
		/* the pages around a tensor are mapped wherever a byte of it is */
		uint64_t a = e->vk->host_import_align, b = align_down(q, a), end = align_down(q + n + a - 1, a);
		int rc = imp_add(e, (const char *)(uintptr_t)b, end - b);
		if (rc)
			return rc;
		first = e->n_imp - 1;
	}
	for (uint32_t i = first; i < e->n_imp; i++) {
		struct eimp *m = &e->imp[i];
		uint64_t mb = (uintptr_t)m->base;
		if (q < mb || q - mb > m->size || n > m->size - (q - mb))
			continue;
		uint64_t o = q - mb;
		if (o % lim->minStorageBufferOffsetAlignment)
			return ERR_NOTFOUND;
		if (!m->tried) {
			m->tried = true;
			if (vk_buf_import_host(e->vk, m->base, m->size, &m->buf)) {
				fprintf(stderr, "engine: weights in this range are uploaded instead: %s\n", err_msg());
				/* per-tensor pages of one mapping: the driver will refuse
				 * the others alike, so stop trying (and logging) */
				if (e->per_tensor_imp)
					e->zc = false;
			}
		}
		if (!m->buf)
			return ERR_NOTFOUND;
		*buf = m->buf;
		*off = o;
		return 0;
	}
	return ERR_NOTFOUND;
}

/* Whether a matrix is uploaded regrouped (regroup.h): Q4_0 rows of whole
 * groups, unless zero-copy imports are on (imported weights keep the file's
 * layout; the few a zero-copy engine uploads stay alike) or
 * UNICORN_VK_REGROUP=0 (A/B). */
static bool regroups(const struct engine *e, const struct model_tensor *t)
{
	return e->regroup && !e->zc && t->type == TENSOR_Q4_0 && regroup_q4_0_fits(t->ne[0]);
}

/* ew_upload's copy of n Q4_0 tensors, regrouped (regroup.h) through a
 * bounded host buffer. */
static int ew_upload_regrouped(struct engine *e, const struct model_tensor *const *t, uint32_t n, uint64_t src_rb,
				struct ew *w)
{
	const uint64_t chunk_rows = (16u << 20) / w->row_bytes + 1;
	uint8_t *tmp = malloc(chunk_rows * w->row_bytes);
	if (!tmp)
		return err_set(ERR_NOMEM, "engine: %s: out of memory", t[0]->name);
	int rc = 0;
	uint64_t off = 0;
	for (uint32_t i = 0; i < n && !rc; i++) {
		uint64_t rows = t[i]->nbytes / src_rb;
		for (uint64_t r = 0; r < rows && !rc; r += chunk_rows) {
			uint64_t k = rows - r < chunk_rows ? rows - r : chunk_rows, bytes = k * w->row_bytes;
			rc = regroup_q4_0(tmp, (const uint8_t *)t[i]->data + r * src_rb, k, w->ncols);
			if (!rc)
				rc = vk_upload(e->vk, w->buf, off, tmp, bytes);
			if (rc)
				rc = err_prefix(rc, "engine: %s", t[i]->name);
			off += bytes;
		}
	}
	free(tmp);
	if (!rc) {
		w->type = TENSOR_Q4_0G;
		e->bytes_regrouped += w->bytes;
	}
	return rc;
}

/* Place n tensors with equal type and row length as one row-concatenated
 * matrix: in place when zero-copy is on and they lie back to back in an
 * importable range, else uploaded (a copy: concatenation only ever happens
 * in our own buffer, never in the read-only weights). */
static int ew_upload(struct engine *e, const struct model_tensor *const *t, uint32_t n, struct ew *w)
{
	memset(w, 0, sizeof *w);
	w->type = t[0]->type;
	if (type_slot(w->type) < 0)
		return err_set(ERR_UNSUP, "engine: tensor '%s' is %s (type %u), which Unicorn cannot run yet; it runs %s",
			       t[0]->name, quant_ggml_type_name(w->type) ? quant_ggml_type_name(w->type) : "unknown",
			       w->type, quant_supported_list());
	if (t[0]->ne[0] > UINT32_MAX)
		return err_set(ERR_RANGE, "engine: %s: ne[0] too large", t[0]->name);
	w->ncols = (uint32_t)t[0]->ne[0];
	uint64_t rb, rows = 0;
	int rc = quant_row_bytes(w->type, w->ncols, &rb);
	if (rc)
		return err_prefix(rc, "engine: %s", t[0]->name);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t r = model_tensor_nelems(t[i]) / w->ncols;
		if (t[i]->type != w->type || t[i]->ne[0] != w->ncols || t[i]->nbytes != r * rb)
			return err_set(ERR_INVAL, "engine: %s: size/type does not match its group", t[i]->name);
		rows += r;
	}
	/* regrouped rows may be longer than the file's (a trailing half group) */
	bool regroup = regroups(e, t[0]);
	uint64_t drb = regroup ? regroup_q4_0_row_bytes(w->ncols) : rb;
	if (rows > UINT32_MAX || rows * drb > VK_MAX_BUFFER_BYTES)
		return err_set(ERR_UNSUP, "engine: %s: %llu bytes exceed the 2 GiB per-buffer limit (unsupported; "
			       "use a quantized or f16 copy)", t[0]->name, (unsigned long long)(rows * drb));
	w->nrows = (uint32_t)rows;
	w->row_bytes = (uint32_t)drb;
	w->bytes = rows * drb;
	e->bytes_matrix += w->bytes;
	bool adjacent = true;
	for (uint32_t i = 1; i < n; i++)
		adjacent = adjacent && (const char *)t[i]->data == (const char *)t[i - 1]->data + t[i - 1]->nbytes;
	if (e->zc && adjacent && imp_find(e, t[0]->data, w->bytes, &w->buf, &w->off) == 0) {
		w->imported = true;
		e->bytes_imported += w->bytes;
		return 0;
	}
	rc = vk_buf_create(e->vk, VK_BUF_DEVICE, w->bytes, &w->buf);
	if (rc)
		return err_prefix(rc, "engine: %s", t[0]->name);
	if (regroup)
		return ew_upload_regrouped(e, t, n, rb, w);
	uint64_t off = 0;
	for (uint32_t i = 0; i < n; i++) {
		rc = vk_upload(e->vk, w->buf, off, t[i]->data, t[i]->nbytes);
		if (rc)
			return err_prefix(rc, "engine: %s", t[i]->name);
		off += t[i]->nbytes;
	}
	return 0;
}

/* Norm weights are uploaded as effective f32 (norm_offset applied). */
static int norm_upload(struct engine *e, const struct model_tensor *t, uint32_t n, struct vk_buf **out)
{
	if (model_tensor_nelems(t) != n)
		return err_set(ERR_INVAL, "engine: %s: expected %u elements", t->name, n);
	float *tmp = malloc((size_t)n * sizeof *tmp);
	if (!tmp)
		return err_set(ERR_NOMEM, "engine: %s: out of memory", t->name);
	int rc = model_tensor_rows_f32(t, 0, 1, tmp);
	if (!rc)
		rc = vk_buf_create(e->vk, VK_BUF_DEVICE, (VkDeviceSize)n * 4, out);
	if (!rc)
		rc = vk_upload(e->vk, *out, 0, tmp, (size_t)n * 4);
	free(tmp);
	return rc ? err_prefix(rc, "engine: %s", t->name) : 0;
}

/* A set binding whole buffers bufs[0..n) (n <= VK_MAX_BINDINGS). */
/* Entries of the stage command-buffer tables (their index formulas are in
 * engine_stage_io and engine_stage_batch): [short][layer][ATTN|FFN|BOTH],
 * and [short][layer][ATTN|FFN][narrow|wide][rows 0..batch_max]. */
static size_t stage_cbs_len(const struct engine *e)
{
	return (size_t)e->cfg.n_layer * 2 * 3;
}

size_t eng_stageb_cbs_len(const struct engine *e)
{
	return (size_t)e->cfg.n_layer * 2 * 2 * 2 * (e->batch_max + 1);
}

/* Whether layer il has its matrices and KV here (a pipeline stage's engine
 * holds only its range). */
static bool own_layer(const struct engine *e, uint32_t il)
{
	return il >= e->l_lo && il < e->l_hi;
}

/* Whole-model calls need every layer (fn: for errors). */
int eng_whole_check(const struct engine *e, const char *fn)
{
	if (e->attn_only)
		return err_set(ERR_STATE, "engine: %s: this engine holds only the attention's weights", fn);
	if (e->ffn_only)
		return err_set(ERR_STATE, "engine: %s: this engine holds no attention weights (split's FFN worker)", fn);
	if (e->l_lo == 0 && e->l_hi == e->cfg.n_layer)
		return 0;
	return err_set(ERR_STATE, "engine: %s: this engine holds only layers [%u, %u) of %u (a pipeline stage)", fn,
		       e->l_lo, e->l_hi, e->cfg.n_layer);
}

/* Stage calls on layers [layer, layer + n) need them here. */
int eng_own_check(const struct engine *e, uint32_t layer, uint32_t n, const char *fn)
{
	if (layer >= e->l_lo && layer + n <= e->l_hi)
		return 0;
	return err_set(ERR_STATE, "engine: %s: layers [%u, %u) are not this engine's [%u, %u)", fn, layer, layer + n,
		       e->l_lo, e->l_hi);
}

static int mksetv(struct engine *e, const struct vk_pipe *p, VkDescriptorSet *s, struct vk_buf *const *bufs, int n)
{
	struct vk_bind b[VK_MAX_BINDINGS];
	for (int i = 0; i < n; i++)
		b[i] = (struct vk_bind){ bufs[i], 0, 0 };
	return vk_set_create(e->vk, p, b, s);
}

static int mkset(struct engine *e, const struct vk_pipe *p, VkDescriptorSet *s, struct vk_buf *b0, struct vk_buf *b1,
		 struct vk_buf *b2, struct vk_buf *b3, struct vk_buf *b4, struct vk_buf *b5)
{
	struct vk_buf *b[6] = { b0, b1, b2, b3, b4, b5 };
	return mksetv(e, p, s, b, 6);
}

/* Same with a weight matrix at binding 0: its range of its buffer (an
 * imported matrix is a slice of a shared import), bufs[] at 1..n. */
static int mksetwv(struct engine *e, const struct vk_pipe *p, VkDescriptorSet *s, const struct ew *w,
		   struct vk_buf *const *bufs, int n)
{
	VkDeviceSize size = 0;
	if (w->imported) {
		/* keep up to 16 bytes past the last row in range, as an uploaded
		 * buffer (rounded up to 16) has, when the import holds them */
		size = w->bytes + 16 <= w->buf->size - w->off ? w->bytes + 16 : w->buf->size - w->off;
		if (size > e->vk->props.limits.maxStorageBufferRange)
			size = w->bytes;
	}
	/* bindings the caller leaves out (the norm tail's, see ENGINE_MAT_BINDINGS) get the dummy */
	struct vk_bind b[VK_MAX_BINDINGS] = { { w->buf, w->off, size } };
	for (int i = 1; i < VK_MAX_BINDINGS; i++)
		b[i] = (struct vk_bind){ i <= n ? bufs[i - 1] : e->dummy, 0, 0 };
	if (n < (int)ENGINE_MAT_PART && e->skp)
		b[ENGINE_MAT_PART].buf = e->skp;
	return vk_set_create(e->vk, p, b, s);
}

/* The usual matrix set: W, its input rows x and its output y. */
static int mksetw(struct engine *e, const struct vk_pipe *p, VkDescriptorSet *s, const struct ew *w, struct vk_buf *x,
		  struct vk_buf *y)
{
	struct vk_buf *b[2] = { x, y };
	return mksetwv(e, p, s, w, b, 2);
}

/* A matrix set whose input is xb, rmsnorm's result: its x16 copy too (binding 8). */
static int mksetxb(struct engine *e, const struct vk_pipe *p, VkDescriptorSet *s, const struct ew *w, struct vk_buf *y)
{
	struct vk_buf *d = e->dummy, *b[8] = { e->xb, y, d, d, d, d, d, e->xq };
	return mksetwv(e, p, s, w, b, 8);
}

/* The mat-mat kernel on matrix cores where the device has them (vk->coopmat),
 * unless UNICORN_NO_COOPMAT=1 (A/B); per type, mul_mm stays where a shader is
 * missing or the driver refuses a pipeline. */
/* Prefill attention on the matrix cores (shaders/flash_attn_cm.glsl) in
 * place of attn_pre, where the device has them with 32-wide subgroups, the
 * head has 32, 64, 128 or 256 dims and the KV cache is f16 or q8_0 (f16
 * products: an f32 cache keeps f32 arithmetic), unless UNICORN_VK_FA=0
 * (A/B); none (attn_pre stays) where the driver refuses the pipeline. */
static void fa_pipe_create(struct engine *e, const char *kv_suffix)
{
	const char *env = getenv("UNICORN_VK_FA");
	uint32_t hd = e->cfg.head_dim;
	if ((env && strcmp(env, "0") == 0) || !e->vk->coopmat || e->vk->info.subgroup_size != 32 || !*kv_suffix ||
	    (hd != 32 && hd != 64 && hd != 128 && hd != 256) || e->cfg.n_head % e->cfg.n_head_kv != 0)
		return;
	char name[48];
	snprintf(name, sizeof name, "flash_attn_cm_h%u%s", hd, kv_suffix);
	if (!shader_find(name) || vk_pipe_create(e->vk, name, 10, sizeof(struct fa_push), NULL, 0, &e->attn_fa) != 0) {
		err_clear();
		vk_pipe_destroy(e->vk, &e->attn_fa);
	}
	/* workgroups per 512 tokens without splits: n_kv x 512 G / ENGINE_FA_ROWS */
	uint32_t wg512 = 512u / ENGINE_FA_ROWS * e->cfg.n_head;
	e->fa_nz = (ENGINE_FA_WG + wg512 - 1) / wg512;
	e->fa_nz = e->fa_nz > e->n_split ? e->n_split : e->fa_nz < 1 ? 1 : e->fa_nz;
}

static void cm_pipes_create(struct engine *e, const bool *used)
{
	const char *env = getenv("UNICORN_NO_COOPMAT");
	const VkPhysicalDeviceLimits *lim = &e->vk->props.limits;
	uint32_t sg = e->vk->info.subgroup_size;
	const uint32_t wg[2] = { ENGINE_CM_NSG * sg, ENGINE_CMS_NSG * sg };
	if (!e->vk->coopmat || (env && strcmp(env, "1") == 0) || sg == 0 || wg[0] > lim->maxComputeWorkGroupInvocations ||
	    wg[0] > lim->maxComputeWorkGroupSize[0] || lim->maxComputeSharedMemorySize < ENGINE_CM_SHARED)
		return;
	char name[64];
	for (int i = 0; i < N_SLOTS; i++) {
		if (!used[i])
			continue;
		struct vk_pipe *ps[2] = { &e->mm_cm[i], &e->mm_cms[i] };
		bool ok = true;
		for (int k = 0; k < 2 && ok; k++) {
			snprintf(name, sizeof name, k ? "mul_mm_cms_%s" : "mul_mm_cm_%s", slot_name[i]);
			ok = shader_find(name) && vk_pipe_create(e->vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), &wg[k], 1, ps[k]) == 0;
		}
		if (!ok) {
			err_clear();
			vk_pipe_destroy(e->vk, ps[0]); /* zeroes it: this type keeps mul_mm */
		}
		e->use_cm = e->use_cm || ok;
	}
	/* the decode tile and split K, for every type that runs mm_cm or none */
	const char *denv = getenv("UNICORN_VK_MM_DTILE"), *kenv = getenv("UNICORN_VK_MM_SPLIT");
	for (int v = 0; v < 2 && e->use_cm; v++) {
		bool want = !((v ? kenv : denv) && strcmp(v ? kenv : denv, "0") == 0), ok = want;
		if (ok && v)
			ok = vk_pipe_create(e->vk, "mm_splitk_reduce", ENGINE_MAT_BINDINGS, sizeof(struct mv_push), NULL, 0,
					    &e->mm_reduce) == 0;
		for (int i = 0; i < N_SLOTS && ok; i++) {
			if (!e->mm_cm[i].pipe)
				continue;
			for (int k = 0; k < (v ? 2 : 1) && ok; k++) {
				snprintf(name, sizeof name, v == 0 ? "mul_mm_cm_%s_d" : k ? "mul_mm_cm_%s_dk" : "mul_mm_cm_%s_k",
					 slot_name[i]);
				struct vk_pipe *pp = v == 0 ? &e->mm_cmd[i] : k ? &e->mm_cmdk[i] : &e->mm_cmk[i];
				ok = shader_find(name) && vk_pipe_create(e->vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push),
									 &wg[0], 1, pp) == 0;
			}
		}
		if (!ok) {
			err_clear();
			for (int i = 0; i < N_SLOTS; i++)
				vk_pipe_destroy(e->vk, v ? &e->mm_cmk[i] : &e->mm_cmd[i]);
			for (int i = 0; v && i < N_SLOTS; i++)
				vk_pipe_destroy(e->vk, &e->mm_cmdk[i]);
			if (v)
				vk_pipe_destroy(e->vk, &e->mm_reduce);
		}
		if (v) {
			const char *wenv = getenv("UNICORN_VK_MM_SPLIT_WG");
			e->use_split = ok;
			e->split_wg = wenv && atoi(wenv) >= 2 && atoi(wenv) <= 65536 ? (uint32_t)atoi(wenv) : SPLIT_TARGET_WG;
		}
		else
			e->use_dtile = ok;
	}
}

/* UNICORN_VK_NORM_TAIL: unset, rows of up to NT_DEFAULT_EMBD (none); a
 * number, that limit (0: never); "dispatch": the numbers of the tail on rows
 * of up to NT_MAX_EMBD with the norm recorded as its own dispatch (A/B of
 * the tail alone). The tail runs in mul_mvs and reduces as rmsnorm_sg does,
 * so it needs the subgroup kernels (norm_sg, which implies use_mvs). */
static void norm_tail_pick(struct engine *e, bool norm_sg)
{
	const char *env = getenv("UNICORN_VK_NORM_TAIL");
	e->nt_dispatch = env && strcmp(env, "dispatch") == 0;
	uint32_t max = e->nt_dispatch ? NT_MAX_EMBD : NT_DEFAULT_EMBD;
	if (env && *env && !e->nt_dispatch) {
		char *end;
		unsigned long v = strtoul(env, &end, 10);
		if (*end || v > UINT32_MAX)
			fprintf(stderr, "unicorn: UNICORN_VK_NORM_TAIL=%s is not a row limit or \"dispatch\": the default applies\n",
				env);
		else
			max = (uint32_t)v;
	}
	/* the tail reduces with subgroup operations, as rmsnorm_sg does: not
	 * with UNICORN_VK_NORM=tree (the tree kernels then run every norm) */
	e->norm_tail = norm_sg && e->cfg.n_embd <= max;
}

/* Whether the x16 kernels (gpu_worker/x16.h) run the regrouped q4_0 products
 * whose input is rmsnorm's result: where the device has integer dot products,
 * on rows that split into x16 groups, and where the norm that writes the copy
 * has the shared memory for it: rmsnorm (nwg threads, norm_wg's; the tree
 * variant exchanges two words per run of four elements, norm_row.glsl,
 * beside nred[]), and with the norm tail the wo/down matvec as well (as many
 * threads: nred[] beside red[]; mul_mvs.glsl X16T). UNICORN_VK_X16=0 keeps
 * the float kernels (A/B). */
static void x16_pick(struct engine *e, const bool *used, uint32_t nwg)
{
	const char *env = getenv("UNICORN_VK_X16");
	uint64_t runs = (uint64_t)nwg * ((engine_norm_per(e->cfg.n_embd, nwg) + 3) / 4);
	uint64_t keep = (2 * runs + nwg) * 4;
	if (e->norm_tail) /* the matvec's red[]: one token column, RPT rows */
		keep += (uint64_t)MVS_MAX_RPT * WG_MVS * 4;
	e->use_x16 = e->vk->idot && e->use_mvs && used[type_slot(TENSOR_Q4_0G)] && e->cfg.n_embd % X16_GROUP == 0 &&
		     keep <= e->vk->props.limits.maxComputeSharedMemorySize && !(env && strcmp(env, "0") == 0);
}

/* engine_kernels' text, once the pipelines are made */
static void kernels_describe(struct engine *e)
{
	/* the kernels that write x16 copies: rmsnorm, and attention and the GLU where on */
	const char *after = e->wo_x16 && e->ffn_x16 ? "rmsnorm, attention and the GLU"
			    : e->wo_x16		 ? "rmsnorm and attention"
			    : e->ffn_x16		 ? "rmsnorm and the GLU"
						 : "rmsnorm";
	char x16[128];
	snprintf(x16, sizeof x16, "mul_mvs (decode; x16 integer dot products on regrouped q4_0 after %s)", after);
	const char *dec = !e->use_mvs ? "mul_mv" : e->use_x16 ? x16 : "mul_mvs (decode)";
	const char *pre = e->use_cm	? " + mul_mm_cm (prefill, matrix cores: " COOPMAT_DESC ")"
			  : e->use_mm	? " + mul_mm (prefill)"
			  : e->use_mvs ? " + mul_mv"
				       : "";
	snprintf(e->kernels, sizeof e->kernels, "%s%s", dec, pre);
}

static int pipes_create(struct engine *e, const struct model *m)
{
	/* weight kernels only for the types the model holds: 8 pipelines per
	 * type, and drivers compile each at creation (lavapipe: up to seconds) */
	bool used[N_SLOTS] = { false };
	for (size_t i = 0; i < m->n_tensors; i++) {
		int ts = type_slot(m->tensors[i].type);
		if (ts >= 0)
			used[ts] = true;
		if (regroups(e, &m->tensors[i]))
			used[type_slot(TENSOR_Q4_0G)] = true;
	}
	/* one-workgroup reductions (argmax over the vocabulary, rmsnorm per row) are
	 * latency-bound: give them wide workgroups */
	uint32_t maxwg = e->vk->props.limits.maxComputeWorkGroupInvocations;
	if (maxwg > e->vk->props.limits.maxComputeWorkGroupSize[0])
		maxwg = e->vk->props.limits.maxComputeWorkGroupSize[0];
	const uint32_t wg[1] = { WG }, wg_am[1] = { maxwg >= 1024 ? 1024 : 128 }, wg32[1] = { 32 },
		       wg_norm[1] = { maxwg >= 512 ? 512 : 128 };
	char name[64];
	int rc = 0;
	for (int i = 0; i < N_SLOTS && !rc; i++) {
		if (!used[i])
			continue;
		snprintf(name, sizeof name, "mul_mv_%s", slot_name[i]);
		rc = vk_pipe_create(e->vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), wg, 1, &e->mv[i]);
		snprintf(name, sizeof name, "mul_mv_glu_%s", slot_name[i]);
		if (!rc)
			rc = vk_pipe_create(e->vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), wg, 1, &e->glu[i]);
		snprintf(name, sizeof name, "get_rows_%s", slot_name[i]);
		if (!rc)
			rc = vk_pipe_create(e->vk, name, 3, sizeof(struct rows_push), wg, 1, &e->rows[i]);
	}
	/* UNICORN_VK_KERNELS=old keeps the first-generation matvec everywhere (A/B runs) */
	const char *kenv = getenv("UNICORN_VK_KERNELS");
	bool old = kenv && strcmp(kenv, "old") == 0;
	const VkPhysicalDeviceLimits *lim = &e->vk->props.limits;
	uint32_t need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
	e->use_mvs = !old && (e->vk->info.subgroup_ops & need) == need && lim->maxComputeWorkGroupInvocations >= WG_MVS &&
		     lim->maxComputeWorkGroupSize[0] >= WG_MVS;
	e->use_mm = !old && lim->maxComputeWorkGroupInvocations >= 256 && lim->maxComputeWorkGroupSize[0] >= 256 &&
		    lim->maxComputeSharedMemorySize >= 2 * MM_TILE * MM_TILE * 4;
	const char *bar_env = getenv("UNICORN_VK_BARRIER");
	e->full_barriers = bar_env && strcmp(bar_env, "full") == 0;
	const char *am_env = getenv("UNICORN_VK_ARGMAX_GROUPS");
	e->am_groups = am_env && atoi(am_env) >= 1 && atoi(am_env) <= (int)AM_GROUPS_MAX ? (uint32_t)atoi(am_env) : AM_GROUPS;
	const char *wait_env = getenv("UNICORN_VK_WAIT");
	e->wait_start = wait_env && strcmp(wait_env, "start") == 0;
	const char *benv = getenv("UNICORN_VK_MVS_BPT");
	/* 4 units per thread: best of 1/2/4/8 on the H100 (1B and 4B q4_0 decode) */
	e->mvs_bpt_set = benv && atoi(benv) > 0 && atoi(benv) <= 64;
	e->mvs_bpt = e->mvs_bpt_set ? (uint32_t)atoi(benv) : 4;
	/* UNICORN_VK_MVS_GENERIC=1: every quantized type through the generic
	 * whole-block unit (the <kernel>_gen pipelines), to compare against the
	 * per-type fast units in one benchmark run */
	const char *genv = getenv("UNICORN_VK_MVS_GENERIC");
	e->mvs_generic = genv && strcmp(genv, "1") == 0;
	/* rows per thread group (UNICORN_VK_MVS_RPT, 1..4) */
	const char *renv = getenv("UNICORN_VK_MVS_RPT");
	uint32_t rpt = renv && atoi(renv) > 0 ? (uint32_t)atoi(renv) : MVS_RPT;
	static const uint32_t slot_type[N_SLOTS] = { TENSOR_F32,  TENSOR_F16,  TENSOR_BF16,   TENSOR_Q8_0, TENSOR_Q4_0,
						     TENSOR_Q4_K, TENSOR_Q6_K, TENSOR_Q4_1,   TENSOR_Q5_0, TENSOR_Q5_1,
						     TENSOR_IQ4_NL, TENSOR_Q2_K, TENSOR_Q3_K, TENSOR_Q5_K, TENSOR_IQ4_XS,
						     TENSOR_Q4_0G };
	for (int i = 0; i < N_SLOTS; i++)
		e->mvs_rpt[i] = engine_mvs_rows(slot_type[i], rpt);
	/* batch steps: mul_mvs per token column below MVB_MIN_TOK rows, the
	 * token-group kernel (bitwise mul_mvs per token, see shaders/mul_mvs.glsl)
	 * from there; UNICORN_VK_BATCH_MV=tokens never takes the group kernel,
	 * =group from one group's rows (mvb_nt) */
	const char *mvenv = getenv("UNICORN_VK_BATCH_MV"), *ntenv = getenv("UNICORN_VK_BATCH_T");
	e->use_mvb = e->use_mvs && !(mvenv && strcmp(mvenv, "tokens") == 0);
	e->mvb_nt = ntenv && atoi(ntenv) >= 1 && atoi(ntenv) <= 8 ? (uint32_t)atoi(ntenv) : MVB_NT;
	/* per token only on a discrete GPU: its large L2 serves the re-reads
	 * (measured on the H100); an integrated GPU or a CPU (lavapipe: 4 rows of
	 * the tiny model 58 -> 87 ms a step per token) reads them from memory */
	bool big_l2 = e->vk->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
	bool group = mvenv && strcmp(mvenv, "group") == 0;
	e->mvb_min = group || !big_l2 || MVB_MIN_TOK < e->mvb_nt ? e->mvb_nt : MVB_MIN_TOK;
	/* rmsnorm_sg, rope_kv_sg and attn_sg need subgroup arithmetic, which
	 * use_mvs has checked; UNICORN_VK_NORM=tree keeps the shared-memory trees
	 * of all three (A/B). rope_kv and attn always take the same kind: they
	 * share the q/k norm, which must round alike in both */
	const char *nenv = getenv("UNICORN_VK_NORM");
	bool norm_sg = e->use_mvs && !(nenv && strcmp(nenv, "tree") == 0);
	norm_tail_pick(e, norm_sg);
	/* rmsnorm's threads: the tail's where it runs (their rows agree bitwise);
	 * else wg_norm, or one per run of 4 elements (norm_row.glsl) where a row
	 * has fewer runs, in 32s (subgroup reductions only: the tree needs a power
	 * of two). H100 tg128 against 512 threads: 1B (288) 693 -> 699 (BENCHMARKS.md).
	 * UNICORN_VK_NORM_WG: a thread count, a multiple of 32 (A/B) */
	uint32_t runs32 = (e->cfg.n_embd / 4 + 31) / 32 * 32;
	uint32_t norm_wg = norm_sg && runs32 < wg_norm[0] ? (runs32 > 64 ? runs32 : 64) : wg_norm[0];
	const char *nwenv = getenv("UNICORN_VK_NORM_WG");
	uint32_t nw = nwenv ? (uint32_t)atoi(nwenv) : 0;
	if (nw >= 32 && nw % 32 == 0 && nw <= maxwg && (norm_sg || (nw & (nw - 1)) == 0))
		norm_wg = nw;
	if (e->norm_tail)
		norm_wg = WG_MVS;
	x16_pick(e, used, norm_wg);
	const char *q4genv = getenv("UNICORN_VK_Q4G_TUNE");
	e->q4g_tuned = !(q4genv && strcmp(q4genv, "0") == 0);
	/* wo on x16: heads of whole x16 groups (attn_combine's row holds 512
	 * elements at most), by default where wo has WO_X16_MIN_COLS columns;
	 * UNICORN_VK_WO_X16=0 keeps the float kernel, =1 takes x16 at any width */
	const char *woenv = getenv("UNICORN_VK_WO_X16");
	bool wo_want = woenv && *woenv ? strcmp(woenv, "0") != 0 : e->n_q >= WO_X16_MIN_COLS;
	e->wo_x16 = wo_want && e->use_x16 && !e->norm_tail && e->cfg.head_dim % X16_GROUP == 0 && e->cfg.head_dim <= 512;
	/* down on x16: rows of whole x16 groups; the quantizing workgroup's
	 * shuffles need subgroups of 8 (x16_block_amax) */
	const char *ffenv = getenv("UNICORN_VK_DOWN_X16");
	bool ff_want = ffenv && *ffenv ? strcmp(ffenv, "0") != 0 : e->cfg.n_ff >= DOWN_X16_MIN_COLS;
	e->ffn_x16 = ff_want && e->use_x16 && !e->norm_tail && e->cfg.n_ff % X16_GROUP == 0 &&
		     e->vk->info.subgroup_size >= 8;
	uint32_t nt_per = e->norm_tail ? engine_norm_per(e->cfg.n_embd, WG_MVS) : 1, eps_bits;
	/* the tail keeps its row for the x16 copy (mul_mvs.glsl X16T); the
	 * batch kernels never run a tail that writes one */
	uint32_t x16t = e->norm_tail && e->use_x16 ? 1 : 0;
	memcpy(&eps_bits, &e->cfg.eps, sizeof eps_bits);
	for (int i = 0; i < N_SLOTS && !rc; i++) {
		if (!used[i])
			continue;
		/* generic variants exist for the types whose unit they change (Makefile MVS_GEN_T) */
		bool has_gen = engine_mvs_unit(slot_type[i], false) != engine_mvs_unit(slot_type[i], true);
		const char *gen = e->mvs_generic && has_gen ? "_gen" : "";
		if (e->use_mvs) {
			/* the tail's row registers and epsilon: the same in every
			 * module of the kernel, which keeps their loops alike */
			const uint32_t spec_mvs[6] = { WG_MVS, 1, e->mvs_rpt[i], nt_per, eps_bits, x16t };
			if (slot_type[i] == TENSOR_Q4_0G) {
				/* the x16 kernels with the float ones' constants: the
				 * same rows per thread group, so both split a product alike */
				const uint32_t spec_w[6] = { WG_MVS, 1, Q4G_WIDE_RPT, nt_per, eps_bits, x16t };
				rc = vk_pipe_create(e->vk, "mul_mvs_q4_0g", ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec_w, 6, &e->mvs_q4g_wide);
				if (!rc && e->use_x16)
					rc = vk_pipe_create(e->vk, "mul_mvs_q4_0g_x16", ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec_w, 6,
							    &e->mvs_x16_wide);
				if (!rc && e->use_x16)
					rc = vk_pipe_create(e->vk, "mul_mvs_q4_0g_x16", ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec_mvs, 6,
							    &e->mvs_x16);
				if (!rc && e->use_x16)
					rc = vk_pipe_create(e->vk, "mul_mvs_glu_q4_0g_x16", ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec_mvs, 6,
							    &e->mvs_glu_x16);
				if (!rc && e->ffn_x16)
					rc = vk_pipe_create(e->vk, "mul_mvs_glu_q4_0g_x16q", ENGINE_MAT_BINDINGS, sizeof(struct mv_push),
							    spec_mvs, 6, &e->mvs_glu_x16q);
			}
			snprintf(name, sizeof name, "mul_mvs_%s%s", slot_name[i], gen);
			if (!rc)
				rc = vk_pipe_create(e->vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec_mvs, 6, &e->mvs[i]);
			snprintf(name, sizeof name, "mul_mvs_glu_%s%s", slot_name[i], gen);
			if (!rc)
				rc = vk_pipe_create(e->vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec_mvs, 6, &e->mvs_glu[i]);
		}
		if (!rc && e->use_mvb) { /* one row per thread group: the token columns hold the registers */
			const uint32_t spec_mvb[5] = { WG_MVS, e->mvb_nt, 1, nt_per, eps_bits };
			snprintf(name, sizeof name, "mul_mvb_%s%s", slot_name[i], gen);
			rc = vk_pipe_create(e->vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec_mvb, 5, &e->mvb[i]);
			snprintf(name, sizeof name, "mul_mvb_glu_%s%s", slot_name[i], gen);
			if (!rc)
				rc = vk_pipe_create(e->vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec_mvb, 5, &e->mvb_glu[i]);
			if (!rc && slot_type[i] == TENSOR_Q4_0G && e->use_x16)
				rc = vk_pipe_create(e->vk, "mul_mvb_q4_0g_x16", ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec_mvb, 5,
						    &e->mvb_x16);
			if (!rc && slot_type[i] == TENSOR_Q4_0G && e->use_x16)
				rc = vk_pipe_create(e->vk, "mul_mvb_glu_q4_0g_x16", ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec_mvb, 5,
						    &e->mvb_glu_x16);
		}
		snprintf(name, sizeof name, "mul_mm_%s", slot_name[i]);
		for (uint32_t v = 0; v < 3 && !rc && e->use_mm; v++) {
			const uint32_t bn[1] = { 16u << v };
			rc = vk_pipe_create(e->vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), bn, 1, &e->mm[v][i]);
		}
	}
	if (!rc && e->use_mm)
		cm_pipes_create(e, used);
	kernels_describe(e);
	/* rmsnorm holds a row in registers: PER elements per thread */
	const uint32_t spec_norm[3] = { norm_wg, engine_norm_per(e->cfg.n_embd, norm_wg), e->use_x16 ? 1 : 0 };
	const char *norm_name = norm_sg ? "rmsnorm_sg" : "rmsnorm";
	if (!rc) rc = vk_pipe_create(e->vk, norm_name, 6, sizeof(struct norm_push), spec_norm, 3, &e->norm);
	/* the KV cache's type picks the attention and rope_kv modules (shaders/kv.glsl) */
	const char *kvs = e->kv.type == KV_TYPE_F16 ? "_f16" : e->kv.type == KV_TYPE_Q8_0 ? "_q8" : "";
	char pname[3][40];
	snprintf(pname[0], sizeof pname[0], "%s%s", norm_sg ? "rope_kv_sg" : "rope_kv", kvs);
	if (!rc) rc = vk_pipe_create(e->vk, pname[0], 7, sizeof(struct rope_push), wg, 1, &e->rope);
	/* UNICORN_VK_ATTN_COMBINE=fused: the last split workgroup merges (no combine
	 * dispatch). Measured slower on the H100 (1B q4_0 tg128 329 vs 369 t/s: the
	 * coherent partial traffic and the serial merge cost more than a dispatch),
	 * so the separate attn_combine stays the default. */
	const char *cenv = getenv("UNICORN_VK_ATTN_COMBINE");
	e->fuse_combine = cenv && strcmp(cenv, "fused") == 0;
	const uint32_t spec_attn[3] = { WG, e->cfg.head_dim, e->fuse_combine ? 1 : 0 };
	const char *attn_name = norm_sg ? (e->wo_x16 ? "attn_sg_wox16" : "attn_sg") : e->wo_x16 ? "attn_wox16" : "attn";
	snprintf(pname[1], sizeof pname[1], "%s%s", attn_name, kvs);
	snprintf(pname[2], sizeof pname[2], "%s%s", norm_sg ? "attn_sg_pre" : "attn_pre", kvs);
	if (!rc) rc = vk_pipe_create(e->vk, pname[1], 10, sizeof(struct attn_push), spec_attn, 3, &e->attn);
	if (!rc) rc = vk_pipe_create(e->vk, pname[2], 10, sizeof(struct attn_push), spec_attn, 3, &e->attn_pre);
	if (!rc) rc = vk_pipe_create(e->vk, "attn_combine", 4, sizeof(struct combine_push), wg, 1, &e->combine);
	if (!rc)
		fa_pipe_create(e, kvs);
	/* UNICORN_NO_FUSE=1: record rope_kv and attn_combine in every step as
	 * before the fusions (A/B in one benchmark; the numbers are the same) */
	const char *fenv = getenv("UNICORN_NO_FUSE");
	e->fuse = !(fenv && *fenv && strcmp(fenv, "0") != 0);
	const char *penv = getenv("UNICORN_PIPE_UNFUSED");
	e->range_fused = e->fuse && !(penv && *penv && strcmp(penv, "0") != 0);
	const char *chenv = getenv("UNICORN_VK_ATTN_CHUNK");
	e->attn_chunk = chenv && atoi(chenv) > 0		  ? (uint32_t)atoi(chenv)
			: e->cfg.head_dim <= ATTN_NARROW_HD ? ATTN_CHUNK_NARROW
							    : ATTN_CHUNK;
	if (!rc) rc = vk_pipe_create(e->vk, "gelu_mul", 2, sizeof(struct gelu_push), wg, 1, &e->gelu);
	if (!rc) rc = vk_pipe_create(e->vk, "argmax", 3, sizeof(struct argmax_push), wg_am, 1, &e->argmax);
	if (!rc) rc = vk_pipe_create(e->vk, "topk", 6, sizeof(struct argmax_push), wg32, 1, &e->topk);
	return rc;
}

static int weights_upload(struct engine *e, const struct model *m)
{
	const struct gemma3_config *c = &e->cfg;
	const struct model_tensor *te[1] = { m->tok_embd };
	int rc = e->attn_only ? 0 : ew_upload(e, te, 1, &e->embd); /* the attention worker neither embeds nor heads */
	if (rc)
		return rc;
	if (!e->attn_only && (e->embd.ncols != c->n_embd || e->embd.nrows != c->n_vocab))
		return err_set(ERR_INVAL, "engine: token_embd.weight: shape does not match the config");
	rc = norm_upload(e, m->output_norm, c->n_embd, &e->output_norm);
	for (uint32_t il = 0; il < c->n_layer && !rc; il++) {
		const struct model_layer *ml = &m->layers[il];
		struct elayer *l = &e->L[il];
		if (!own_layer(e, il)) { /* another stage's: only its norms (small; a neighbour's set names them) */
			if (!rc) rc = norm_upload(e, ml->attn_norm, c->n_embd, &l->attn_norm);
			continue;
		}
		const struct model_tensor *qkv[3] = { ml->wq, ml->wk, ml->wv };
		if (e->ffn_only) {
			/* split placement's FFN worker: no Q/K/V/O (n_qkv 0) */
		} else {
		bool qkv_adj = (const char *)ml->wk->data == (const char *)ml->wq->data + ml->wq->nbytes &&
			       (const char *)ml->wv->data == (const char *)ml->wk->data + ml->wk->nbytes;
		/* zero-copy: q, k and v that are not back to back run as three
		 * matvecs over their own ranges (the same per-row arithmetic) */
		if (ml->wq->type == ml->wk->type && ml->wk->type == ml->wv->type && (!e->zc || qkv_adj)) {
			l->n_qkv = 1;
			rc = ew_upload(e, qkv, 3, &l->qkv[0]);
		} else {
			l->n_qkv = 3;
			for (int i = 0; i < 3 && !rc; i++)
				rc = ew_upload(e, &qkv[i], 1, &l->qkv[i]);
		}
		if (!rc) rc = ew_upload(e, &ml->wo, 1, &l->wo);
		}
		const struct model_tensor *gu[2] = { ml->ffn_gate, ml->ffn_up };
		if (e->attn_only) {
			/* split placement's attention worker: no FFN matrices */
		} else if (!rc && ml->ffn_gate->type == ml->ffn_up->type) {
			l->n_gu = 1;
			rc = ew_upload(e, gu, 2, &l->gu[0]);
		} else if (!rc) {
			l->n_gu = 2;
			for (int i = 0; i < 2 && !rc; i++)
				rc = ew_upload(e, &gu[i], 1, &l->gu[i]);
		}
		if (!rc && !e->attn_only) rc = ew_upload(e, &ml->ffn_down, 1, &l->down);
		if (!rc) rc = norm_upload(e, ml->attn_norm, c->n_embd, &l->attn_norm);
		if (!rc) rc = norm_upload(e, ml->q_norm, c->head_dim, &l->q_norm);
		if (!rc) rc = norm_upload(e, ml->k_norm, c->head_dim, &l->k_norm);
		if (!rc) rc = norm_upload(e, ml->post_attn_norm, c->n_embd, &l->post_attn);
		if (!rc) rc = norm_upload(e, ml->ffn_norm, c->n_embd, &l->ffn_norm);
		if (!rc) rc = norm_upload(e, ml->post_ffn_norm, c->n_embd, &l->post_ffn);
		if (rc)
			return rc;
		/* shapes: qkv rows, wo/down map back to n_embd */
		uint32_t qkv_rows = 0;
		for (uint32_t i = 0; i < l->n_qkv; i++)
			qkv_rows += l->qkv[i].nrows;
		uint32_t gu_rows = l->gu[0].nrows + (l->n_gu == 2 ? l->gu[1].nrows : 0);
		if ((!e->ffn_only && (qkv_rows != e->qkv_stride || l->qkv[0].ncols != c->n_embd || l->wo.ncols != e->n_q ||
				      l->wo.nrows != c->n_embd)) ||
		    (!e->attn_only && (gu_rows != 2 * c->n_ff || l->gu[0].ncols != c->n_embd ||
				       l->down.ncols != c->n_ff || l->down.nrows != c->n_embd)))
			return err_set(ERR_INVAL, "engine: layer %u: weight shapes do not match the config", il);
	}
	return rc;
}

static int sets_create(struct engine *e)
{
	const struct gemma3_config *c = &e->cfg;
	struct vk_buf *d = e->dummy;
	int rc = e->attn_only ? 0 : mksetw(e, &e->rows[type_slot(e->embd.type)], &e->s_embed, &e->embd, e->stepd, e->h);
	if (!rc) rc = mkset(e, &e->norm, &e->s_norm0, e->h, e->L[0].attn_norm, e->xb, d, d, e->xq);
	if (!rc) rc = mkset(e, &e->norm, &e->s_final, e->h, e->output_norm, e->xb, d, d, e->xq);
	if (!rc && !e->attn_only) rc = mksetxb(e, &e->mv[type_slot(e->embd.type)], &e->s_logits, &e->embd, e->logits);
	if (!rc && !e->attn_only)
		rc = mksetxb(e, &e->mv[type_slot(e->embd.type)], &e->s_logits_d, &e->embd, e->logitsd);
	if (!rc) rc = mkset(e, &e->argmax, &e->s_argmax, e->logitsd, e->res, e->amp, d, d, d);
	if (!rc) rc = mkset(e, &e->topk, &e->s_topk, e->logitsd, e->res, e->stepd, e->tkp, e->biasb, e->maskb);
	for (uint32_t il = 0; il < c->n_layer && !rc; il++) {
		struct elayer *l = &e->L[il];
		if (!own_layer(e, il))
			continue;
		struct vk_buf *next = il + 1 < c->n_layer ? e->L[il + 1].attn_norm : e->output_norm;
		rc = mkset(e, &e->norm, &l->s_attn_norm, e->h, l->attn_norm, e->xb, d, d, e->xq);
		if (e->ffn_only)
			goto ffn; /* no attention here: only the FFN's sets */
		for (uint32_t i = 0; i < l->n_qkv && !rc; i++)
			rc = mksetxb(e, &e->mv[type_slot(l->qkv[i].type)], &l->s_qkv[i], &l->qkv[i], e->qkv);
		struct vk_buf *rb[7] = { e->qkv, l->q_norm, l->k_norm, l->kc, l->vc, e->stepd, e->tabd };
		if (!rc) rc = mksetv(e, &e->rope, &l->s_rope, rb, 7);
		struct vk_buf *ab[10] = { e->qkv, l->kc, l->vc, e->part, e->stepd, e->att, e->tabd, l->q_norm, l->k_norm, e->xqa };
		if (!rc) rc = mksetv(e, &e->attn, &l->s_attn, ab, 10);
		if (!rc) rc = mkset(e, &e->combine, &l->s_combine, e->part, e->att, e->stepd, e->xqa, d, d);
		/* wo and down: the norm tail's buffers too (rmsnorm's mode 3 sets below) */
		/* binding 8: the tail's x16 output, or (wo_x16, never with the tail) x's copy */
		struct vk_buf *wo[8] = { e->att, e->o, e->h, l->post_attn, l->ffn_norm, e->xb, e->nt_cnt,
					 e->norm_tail ? e->xq : e->xqa };
		if (!rc) rc = mksetwv(e, &e->mv[type_slot(l->wo.type)], &l->s_wo, &l->wo, wo, 8);
		if (!rc) rc = mkset(e, &e->norm, &l->s_post_attn, e->o, l->post_attn, e->h, l->ffn_norm, e->xb, e->xq);
	ffn:
		if (!rc) rc = mkset(e, &e->norm, &l->s_ffn_norm, e->h, l->ffn_norm, e->xb, d, d, e->xq);
		if (e->attn_only)
			continue;
		/* the GLU: rmsnorm's x16 copy at 8, and the _x16q kernel's copy and mailbox at 6, 7 */
		struct vk_buf *gb[8] = { e->xb, e->ff, d, d, d, e->ffq, e->fmb, e->xq };
		if (!rc && l->n_gu == 1)
			rc = mksetwv(e, &e->glu[type_slot(l->gu[0].type)], &l->s_gu[0], &l->gu[0], gb, 8);
		for (uint32_t i = 0; l->n_gu == 2 && i < 2 && !rc; i++)
			rc = mksetxb(e, &e->mv[type_slot(l->gu[i].type)], &l->s_gu[i], &l->gu[i], e->gu);
		if (!rc)
			rc = mkset(e, &e->gelu, &l->s_gelu, e->gu, e->ff, d, d, d, d);
		/* the tiled kernel writes gate|up rows to gu, then gelu_mul */
		if (!rc && l->n_gu == 1)
			rc = mksetw(e, &e->mv[type_slot(l->gu[0].type)], &l->s_gu_mm, &l->gu[0], e->xb, e->gu);
		/* binding 8: the tail's x16 output, or (ffn_x16, never with the tail) x's copy */
		struct vk_buf *dn[8] = { e->ff, e->o, e->h, l->post_ffn, next, e->xb, e->nt_cnt,
					 e->norm_tail ? e->xq : e->ffq };
		if (!rc) rc = mksetwv(e, &e->mv[type_slot(l->down.type)], &l->s_down, &l->down, dn, 8);
		if (!rc) rc = mkset(e, &e->norm, &l->s_post_ffn, e->o, l->post_ffn, e->h, next, e->xb, e->xq);
	}
	return rc;
}

/* Decide whether weights are used in place (see enum engine_import). */
static int imports_setup(struct engine *e, const struct engine_opts *o)
{
	const char *t = e->vk->info.type;
	bool host_mem = strcmp(t, "cpu") == 0 || strcmp(t, "integrated") == 0;
	e->zc = e->vk->host_import && (o->weights_import == ENGINE_IMPORT_ZERO_COPY ||
				      (o->weights_import == ENGINE_IMPORT_AUTO && host_mem));
	if (!e->zc)
		return 0;
	if (o->n_spans)
		return imp_plan(e, o);
	/* no spans: a tensor's own pages are only known mapped up to the page size */
	long pg = sysconf(_SC_PAGESIZE);
	e->per_tensor_imp = pg > 0 && e->vk->host_import_align <= (uint64_t)pg;
	e->zc = e->per_tensor_imp;
	return 0;
}

/* Split K (shaders/mul_mm_cm.glsl SPLITK) for a matrix of nrows x ncols on
 * the matrix cores: the split length (a multiple of the K step), or 0 for
 * none. Products with fewer than half of SPLIT_TARGET_WG 128-row tiles split
 * until about SPLIT_TARGET_WG workgroups per token tile run, at most SPLIT_MAX ways
 * and SPLIT_MIN_K columns each. It depends on the matrix alone, never on the
 * token count: a column's sums then come out the same in every step. */
#define SPLIT_MAX 8u
#define SPLIT_MIN_K 512u
#define CM_BK 64u /* shaders/mul_mm_cm.glsl BK */
/* Decode attention's most key splits of any layer (the partials' room). */
static uint32_t split_max(const struct engine *e)
{
	return e->n_split_global > e->n_split ? e->n_split_global : e->n_split;
}

static uint32_t split_k(const struct engine *e, uint32_t nrows, uint32_t ncols)
{
	uint32_t tiles = (nrows + ENGINE_CM_BM - 1) / ENGINE_CM_BM;
	if (!e->use_split || tiles >= e->split_wg / 2)
		return 0;
	uint32_t n = (e->split_wg + tiles - 1) / tiles;
	n = n > SPLIT_MAX ? SPLIT_MAX : n;
	n = n > ncols / SPLIT_MIN_K ? ncols / SPLIT_MIN_K : n;
	if (n <= 1)
		return 0;
	uint32_t steps = (ncols + CM_BK - 1) / CM_BK;
	return (steps + n - 1) / n * CM_BK;
}

/* Bytes of split-K partial sums for R rows: the most any product of the
 * model needs (every shape a matrix of this configuration can have). */
static uint64_t split_part_bytes(const struct engine *e, uint64_t R)
{
	const struct gemma3_config *c = &e->cfg;
	uint32_t kvd = c->n_head_kv * c->head_dim;
	const uint32_t shapes[][2] = { { e->qkv_stride, c->n_embd }, { e->n_q, c->n_embd }, { kvd, c->n_embd },
				       { c->n_embd, e->n_q }, { 2 * c->n_ff, c->n_embd }, { c->n_ff, c->n_embd },
				       { c->n_embd, c->n_ff }, { c->n_vocab, c->n_embd } };
	uint64_t most = 0;
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		uint32_t tail = split_k(e, shapes[i][0], shapes[i][1]);
		uint64_t n = tail ? (shapes[i][1] + tail - 1) / tail : 0, b = n * R * shapes[i][0] * 4;
		most = b > most ? b : most;
	}
	return most;
}

int engine_create(const struct model *m, const struct engine_opts *o, struct engine **out)
{
	*out = NULL;
	const struct gemma3_config *c = &m->cfg;
	struct engine_opts def = { 0 };
	if (!o)
		o = &def;
	if (c->n_layer == 0 || c->n_layer > MODEL_MAX_LAYERS || c->head_dim == 0 || c->head_dim % 2 || c->head_dim > 512 ||
	    c->n_head_kv == 0 || c->n_head % c->n_head_kv || c->n_embd == 0 || c->n_ff == 0 || c->n_vocab == 0)
		return err_set(ERR_UNSUP, "engine: %s: config outside what the shaders support (head_dim even and <= 512, "
			       "n_head a multiple of n_head_kv)", m->path ? m->path : "model");
	struct engine *e = calloc(1, sizeof *e);
	if (!e)
		return err_set(ERR_NOMEM, "engine: out of memory");
	e->cfg = *c;
	e->max_ctx = o->max_ctx ? o->max_ctx : (c->n_ctx && c->n_ctx < 4096 ? c->n_ctx : 4096);
	e->max_batch = o->max_batch ? o->max_batch : 32;
	e->n_split = o->n_split ? o->n_split : 16;
	/* UNICORN_VK_ATTN_SPLITS=N (1..256): decode attention's key splits per
	 * head instead of 16 (A/B at long depths; the partials buffer grows with N) */
	const char *spenv = getenv("UNICORN_VK_ATTN_SPLITS");
	if (spenv && atoi(spenv) >= 1 && atoi(spenv) <= 256)
		e->n_split = (uint32_t)atoi(spenv);
	/* Global layers' splits (their keys run to the context's length, the
	 * sliding layers' to the window): by default enough for ATTN_GLOBAL_WG
	 * workgroups per token (H100 tg128 at depth 8,192: 1B's 4 heads at 64
	 * splits 600.8 tok/s against 577.2 at 16; 27B's 32 heads lose at 32-128:
	 * 94.5 / 93.7 / 91.4 against 95.3; BENCHMARKS.md); an engine given its
	 * n_split keeps it; UNICORN_VK_ATTN_SPLITS_GLOBAL=N (1..256) sets it */
	uint32_t fill = (ATTN_GLOBAL_WG + c->n_head - 1) / c->n_head;
	e->n_split_global = !o->n_split && !spenv && fill > e->n_split ? fill : e->n_split; /* fill <= 256 */
	const char *sgenv = getenv("UNICORN_VK_ATTN_SPLITS_GLOBAL");
	if (sgenv && atoi(sgenv) >= 1 && atoi(sgenv) <= 256)
		e->n_split_global = (uint32_t)atoi(sgenv);
	/* UNICORN_VK_ATTN_MIN_CHUNK=N (1..65536): the fewest keys of a split
	 * instead of ATTN_MIN_CHUNK (A/B: fewer splits on short ranges) */
	const char *mcenv = getenv("UNICORN_VK_ATTN_MIN_CHUNK");
	e->attn_min_chunk = mcenv && atoi(mcenv) >= 1 && atoi(mcenv) <= 65536 ? (uint32_t)atoi(mcenv) : ATTN_MIN_CHUNK;
	e->max_seqs = o->max_seqs ? o->max_seqs : 1;
	e->max_rows = o->max_rows > e->max_batch ? o->max_rows : e->max_batch;
	e->n_vocab_text = c->n_vocab_text && c->n_vocab_text <= c->n_vocab ? c->n_vocab_text : c->n_vocab;
	e->tk_groups = engine_tk_groups(e->n_vocab_text);
	e->n_q = c->n_head * c->head_dim;
	e->qkv_stride = (c->n_head + 2 * c->n_head_kv) * c->head_dim;
	int rc = 0;
	e->attn_only = o->attn_only;
	e->ffn_only = o->ffn_only;
	if (e->attn_only && e->ffn_only) {
		rc = err_set(ERR_INVAL, "engine: options: attn_only and ffn_only together hold nothing to run");
		goto fail;
	}
	e->l_lo = o->layer_first;
	e->l_hi = o->layer_end ? o->layer_end : c->n_layer;
	if (e->l_lo >= e->l_hi || e->l_hi > c->n_layer) {
		rc = err_set(ERR_INVAL, "engine: options: layers [%u, %u) of a model of %u", e->l_lo, e->l_hi, c->n_layer);
		goto fail;
	}
	if (e->max_batch > 4096 || e->max_rows > 4096 || e->n_split > 256 || e->max_ctx > (1u << 24) || e->max_seqs > 256 ||
	    (uint64_t)e->max_seqs * e->max_ctx > (1u << 24)) {
		rc = err_set(ERR_INVAL, "engine: options: max_batch and max_rows <= 4096, n_split <= 256, max_ctx <= 2^24, "
			     "max_seqs <= 256 and max_seqs * max_ctx <= 2^24");
		goto fail;
	}
	e->image_rows = o->image_rows;
	e->image_slots = o->image_rows ? o->image_slots : 0;
	if (e->image_rows && (e->image_rows > KV_RING_SLACK || !e->image_slots || e->image_slots > 256 ||
			      (uint64_t)e->image_slots * e->image_rows * c->n_embd * 4 > VK_MAX_BUFFER_BYTES ||
			      e->l_lo || e->l_hi != c->n_layer || e->attn_only)) {
		rc = err_set(ERR_INVAL, "engine: options: an image area of %u images of %u rows (1..%d rows, 1..256 "
			     "images, a whole-model engine)", e->image_slots, e->image_rows, KV_RING_SLACK);
		goto fail;
	}
	/* paged KV cache: one buffer per layer holds its kind's pool of blocks */
	if (o->kv) {
		e->kv = *o->kv;
		if (e->max_batch > KV_RING_SLACK || e->kv.block != KV_BLOCK || !e->kv.max_ctx || e->kv.type > KV_TYPE_Q8_0 ||
		    e->kv.row_bytes != kv_type_row_bytes(e->kv.type, (uint64_t)c->n_head_kv * c->head_dim) ||
		    e->kv.max_blocks != (e->kv.max_ctx + KV_BLOCK - 1) / KV_BLOCK || e->kv.ring > e->kv.max_blocks ||
		    (e->kv.n_local != 0) != (e->kv.ring != 0)) {
			rc = err_set(ERR_INVAL, "engine: KV layout inconsistent (block %u, %u positions, ring %u, "
				     "max_batch %u <= %d)", e->kv.block, e->kv.max_ctx, e->kv.ring, e->max_batch,
				     KV_RING_SLACK);
			goto fail;
		}
		e->max_ctx = e->kv.max_ctx;
	} else {
		if ((rc = kv_layout_plan(c, e->max_ctx, e->max_seqs, 0, o->kv_type, &e->kv)))
			goto fail;
		if (e->max_batch > KV_RING_SLACK && e->kv.n_local) {
			/* a step longer than the ring's slack: give local layers whole tables */
			e->kv.ring = e->kv.max_blocks;
			e->kv.n_lblocks = e->max_seqs * e->kv.ring;
		}
	}
	e->tab_len = kv_table_len(&e->kv);
	/* one layer's K (or V) pool; q8_0 rows may end mid-word: whole words plus
	 * one, which the shaders' unaligned reads may touch (shaders/kv.glsl) */
	uint64_t row_bytes = e->kv.row_bytes;
	uint64_t kv_g = ((uint64_t)e->kv.n_gblocks * KV_BLOCK * row_bytes + 3) / 4 * 4 + 4;
	uint64_t kv_l = ((uint64_t)e->kv.n_lblocks * KV_BLOCK * row_bytes + 3) / 4 * 4 + 4;
	if (kv_g > VK_MAX_BUFFER_BYTES || kv_l > VK_MAX_BUFFER_BYTES) {
		rc = err_set(ERR_RANGE, "engine: KV pool of %u+%u blocks needs %llu MiB per layer "
			     "(limit %llu MiB): lower the KV budget, max_seqs or max_ctx", e->kv.n_gblocks, e->kv.n_lblocks,
			     (unsigned long long)((kv_g > kv_l ? kv_g : kv_l) >> 20),
			     (unsigned long long)(VK_MAX_BUFFER_BYTES >> 20));
		goto fail;
	}
	rc = vk_create(o->device, &e->vk);
	if (rc)
		goto fail;
	e->vk->progress = o->progress;
	e->vk->progress_arg = o->progress_arg;
	e->L = calloc(c->n_layer, sizeof *e->L);
	bool cbs_ok = true;
	for (uint32_t i = 0; i < 2 * N_MODES; i++)
		cbs_ok = (e->cbs[i] = calloc(e->max_batch + 1, sizeof(VkCommandBuffer))) != NULL && cbs_ok;
	if (!e->L || !cbs_ok) {
		rc = err_set(ERR_NOMEM, "engine: out of memory");
		goto fail;
	}
	e->batch_max = e->max_batch < e->max_seqs ? e->max_batch : e->max_seqs;
	const char *regroup_env = getenv("UNICORN_VK_REGROUP");
	e->regroup = !(regroup_env && strcmp(regroup_env, "0") == 0);
	rc = imports_setup(e, o); /* before the pipelines: imports decide which layouts are used */
	if (!rc)
		rc = pipes_create(e, m);
	if (rc)
		goto fail;
	/* activations and KV first: they are touched every step, weights may spill */
	/* R: rows of one submission (activations); B: rows whose logits the host may read */
	const uint64_t R = e->max_rows, B = e->max_batch, F = 4, RB = e->batch_max, ST = sizeof(struct engine_step_tok);
	struct { struct vk_buf **b; enum vk_buf_kind k; uint64_t bytes; } bufs[] = {
		{ &e->step, VK_BUF_HOST, sizeof(struct engine_step) + R * ST },
		/* device copy of the step buffer, refreshed at the start of each submission:
		 * kernels would otherwise read host memory over PCIe (microseconds each) */
		{ &e->stepd, VK_BUF_DEVICE, sizeof(struct engine_step) + R * ST },
		{ &e->h, VK_BUF_DEVICE, R * c->n_embd * F },
		{ &e->xb, VK_BUF_DEVICE, R * c->n_embd * F },
		{ &e->xq, VK_BUF_DEVICE, R * x16_row_bytes(c->n_embd) + 16 },
		{ &e->xqa, VK_BUF_DEVICE, (e->wo_x16 ? R * x16_row_bytes(e->n_q) : 0) + 16 },
		{ &e->ffq, VK_BUF_DEVICE, (e->ffn_x16 ? FFQ_MAX_TOK * x16_row_bytes(c->n_ff) : 0) + 16 },
		{ &e->fmb, VK_BUF_DEVICE, (e->ffn_x16 ? (uint64_t)FFQ_MAX_TOK * c->n_ff * 4 : 0) + 16 },
		{ &e->o, VK_BUF_DEVICE, R * c->n_embd * F },
		{ &e->qkv, VK_BUF_DEVICE, R * e->qkv_stride * F },
		{ &e->att, VK_BUF_DEVICE, R * e->n_q * F },
		/* partials, then one counter per (token, head) for the fused combine */
		{ &e->part, VK_BUF_DEVICE, R * c->n_head * split_max(e) * (c->head_dim + 2) * F + R * c->n_head * 4 },
		{ &e->gu, VK_BUF_DEVICE, R * 2 * c->n_ff * F },
		{ &e->ff, VK_BUF_DEVICE, R * c->n_ff * F },
		{ &e->logits, VK_BUF_HOST, B * c->n_vocab * F },
		/* argmax/top-k steps keep the logits on the device (the last row, or one
		 * row per sequence of a batch): the host only reads the result, and a
		 * reduction over host memory crosses PCIe */
		{ &e->logitsd, VK_BUF_DEVICE, RB * c->n_vocab * F },
		/* RB result rows, then RB log-sum-exps (top-k steps: LSE_OFF) */
		{ &e->res, VK_BUF_HOST, RB * RES_ROW * 4 + RB * 4 },
		/* stage rows: a batch, or the chunks of engine_stage_chunks (up to R) */
		{ &e->hio, VK_BUF_HOST, R * c->n_embd * F },
		{ &e->dummy, VK_BUF_DEVICE, 16 },
		/* (id, bias bits) pairs, ENGINE_BIAS_MAX per head row (chunks_write) */
		{ &e->biasb, VK_BUF_HOST, (ENGINE_BIAS_HDR + RB * ENGINE_BIAS_MAX * 2) * 4 + 16 },
		{ &e->maskb, VK_BUF_HOST, RB * ((c->n_vocab + 31) / 32) * 4 + 16 },
		{ &e->skp, VK_BUF_DEVICE, split_part_bytes(e, R) + 16 },
		{ &e->nt_cnt, VK_BUF_DEVICE, 16 },
		/* argmax's row counters and slice bests (shaders/argmax.comp) */
		{ &e->amp, VK_BUF_DEVICE, ((uint64_t)ENGINE_AM_PART + (uint64_t)RB * AM_GROUPS_MAX * 2) * 4 },
		/* top-k's row counters and slice records (shaders/topk.comp) */
		{ &e->tkp, VK_BUF_DEVICE, ((uint64_t)ENGINE_TK_PART + (uint64_t)RB * e->tk_groups * ENGINE_TK_REC) * 4 },
		{ &e->tabh, VK_BUF_HOST, (uint64_t)e->max_seqs * e->tab_len * 4 },
		{ &e->tabd, VK_BUF_DEVICE, (uint64_t)e->max_seqs * e->tab_len * 4 },
	};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0] && !rc; i++)
		rc = vk_buf_create(e->vk, bufs[i].k, bufs[i].bytes, bufs[i].b);
	if (!rc && e->image_rows) {
		rc = vk_buf_create(e->vk, VK_BUF_DEVICE, (uint64_t)e->image_slots * e->image_rows * c->n_embd * F, &e->img);
		if (!rc && !(e->img_cp = calloc(R, sizeof *e->img_cp)))
			rc = err_set(ERR_NOMEM, "engine: out of memory");
	}
	for (uint32_t il = e->l_lo; il < e->l_hi && !rc && !e->ffn_only; il++) { /* the FFN worker keeps no KV */
		uint64_t kv_bytes = c->layer_global[il] ? kv_g : kv_l;
		rc = vk_buf_create(e->vk, VK_BUF_DEVICE, kv_bytes, &e->L[il].kc);
		if (!rc)
			rc = vk_buf_create(e->vk, VK_BUF_DEVICE, kv_bytes, &e->L[il].vc);
	}
	if (!rc)
		rc = vk_cmd_alloc(e->vk, &e->tabcb);
	/* every sequence starts on its own blocks in order (a lone engine's layout;
	 * a worker replaces them with the coordinator's tables) */
	for (uint32_t sq = 0; sq < e->max_seqs && !rc; sq++) {
		uint32_t *t = (uint32_t *)e->tabh->map + (size_t)sq * e->tab_len;
		for (uint32_t b = 0; b < e->kv.max_blocks; b++)
			t[b] = e->kv.n_gblocks ? (sq * e->kv.max_blocks + b) % e->kv.n_gblocks : 0;
		for (uint32_t j = 0; j < e->kv.ring; j++)
			t[e->kv.max_blocks + j] = e->kv.n_lblocks ? (sq * e->kv.ring + j) % e->kv.n_lblocks : 0;
		e->tab_dirty[sq] = 1;
		e->tab_any_dirty = true;
	}
	if (!rc)
		rc = vk_fill_zero(e->vk, e->part); /* the fused combine's counters start at zero */
	if (!rc)
		rc = vk_fill_zero(e->vk, e->nt_cnt); /* and the norm tail's */
	if (!rc)
		rc = vk_fill_zero(e->vk, e->amp); /* and argmax's */
	if (!rc)
		rc = vk_fill_zero(e->vk, e->tkp); /* and top-k's */
	if (!rc)
		rc = vk_fill_zero(e->vk, e->fmb); /* and the GLU's mailbox */
	if (!rc)
		rc = engine_reset(e);
	if (!rc)
		rc = weights_upload(e, m);
	if (!rc)
		rc = sets_create(e);
	if (!rc)
		rc = vk_cmd_alloc(e->vk, &e->once);
	if (!rc && !(e->stage_cbs = calloc(stage_cbs_len(e), sizeof *e->stage_cbs)))
		rc = err_set(ERR_NOMEM, "engine: out of memory");
	if (rc)
		goto fail;
	e->n_ts = 2 * c->n_layer + 3;
	*out = e;
	return 0;
fail:
	engine_destroy(e);
	return rc;
}

static void ew_free(struct engine *e, struct ew *w)
{
	if (!w->imported)
		vk_buf_destroy(e->vk, w->buf);
}

void engine_destroy(struct engine *e)
{
	if (!e)
		return;
	if (e->vk) {
		vkDeviceWaitIdle(e->vk->dev);
		for (uint32_t m = 0; m < 2 * N_MODES; m++)
			for (uint32_t n = 0; e->cbs[m] && n <= e->max_batch; n++)
				vk_cmd_free(e->vk, e->cbs[m][n]);
		vk_cmd_free(e->vk, e->once);
		vk_cmd_free(e->vk, e->chunkcb);
		vk_cmd_free(e->vk, e->tabcb);
		for (size_t i = 0; e->stage_cbs && i < stage_cbs_len(e); i++)
			vk_cmd_free(e->vk, e->stage_cbs[i]);
		for (size_t i = 0; e->stageb_cbs && i < eng_stageb_cbs_len(e); i++)
			vk_cmd_free(e->vk, e->stageb_cbs[i]);
		for (size_t i = 0; e->stager_cbs && i < 4 * ((size_t)e->batch_max + 1); i++)
			vk_cmd_free(e->vk, e->stager_cbs[i]);
		for (uint32_t il = 0; e->L && il < e->cfg.n_layer; il++) {
			struct elayer *l = &e->L[il];
			for (int i = 0; i < 3; i++)
				ew_free(e, &l->qkv[i]);
			ew_free(e, &l->wo);
			ew_free(e, &l->gu[0]);
			ew_free(e, &l->gu[1]);
			ew_free(e, &l->down);
			struct vk_buf *bs[] = { l->attn_norm, l->q_norm, l->k_norm, l->post_attn, l->ffn_norm, l->post_ffn, l->kc, l->vc };
			for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
				vk_buf_destroy(e->vk, bs[i]);
		}
		ew_free(e, &e->embd);
		for (uint32_t i = 0; i < e->n_imp; i++)
			vk_buf_destroy(e->vk, e->imp[i].buf);
		struct vk_buf *bs[] = { e->output_norm, e->step, e->stepd, e->h, e->xb, e->xq, e->xqa, e->ffq, e->fmb, e->o, e->qkv, e->att,
					e->part, e->gu, e->ff, e->logits, e->logitsd, e->res, e->hio, e->dummy, e->nt_cnt, e->amp, e->tkp, e->tabh, e->tabd,
					e->skp, e->img, e->biasb, e->maskb };
		for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
			vk_buf_destroy(e->vk, bs[i]);
		struct vk_pipe *ps[] = { &e->norm, &e->rope, &e->attn, &e->attn_pre, &e->attn_fa, &e->combine, &e->gelu, &e->argmax,
					 &e->topk, &e->mm_reduce };
		for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
			vk_pipe_destroy(e->vk, ps[i]);
		for (int i = 0; i < N_SLOTS; i++) {
			vk_pipe_destroy(e->vk, &e->mv[i]);
			vk_pipe_destroy(e->vk, &e->glu[i]);
			vk_pipe_destroy(e->vk, &e->rows[i]);
			vk_pipe_destroy(e->vk, &e->mvs[i]);
			vk_pipe_destroy(e->vk, &e->mvs_glu[i]);
			vk_pipe_destroy(e->vk, &e->mvb[i]);
			vk_pipe_destroy(e->vk, &e->mvb_glu[i]);
			for (int v = 0; v < 3; v++)
				vk_pipe_destroy(e->vk, &e->mm[v][i]);
			vk_pipe_destroy(e->vk, &e->mm_cm[i]);
			vk_pipe_destroy(e->vk, &e->mm_cms[i]);
			vk_pipe_destroy(e->vk, &e->mm_cmd[i]);
			vk_pipe_destroy(e->vk, &e->mm_cmk[i]);
			vk_pipe_destroy(e->vk, &e->mm_cmdk[i]);
		}
		vk_pipe_destroy(e->vk, &e->mvs_q4g_wide);
		struct vk_pipe *x16p[] = { &e->mvs_x16, &e->mvs_x16_wide, &e->mvs_glu_x16, &e->mvb_x16, &e->mvb_glu_x16,
					   &e->mvs_glu_x16q };
		for (size_t i = 0; i < sizeof x16p / sizeof x16p[0]; i++)
			vk_pipe_destroy(e->vk, x16p[i]);
		vk_destroy(e->vk);
	}
	for (uint32_t m = 0; m < 2 * N_MODES; m++)
		free(e->cbs[m]);
	free(e->stage_cbs);
	free(e->stageb_cbs);
	free(e->stager_cbs);
	free(e->L);
	free(e->imp);
	free(e->img_cp);
	free(e);
}

int engine_seq_select(struct engine *e, uint32_t seq)
{
	if (seq >= e->max_seqs)
		return err_set(ERR_RANGE, "engine: sequence %u out of range (max_seqs %u)", seq, e->max_seqs);
	e->seq = seq;
	return 0;
}

const struct kv_layout *engine_kv_layout(const struct engine *e) { return &e->kv; }

int engine_seq_blocks(struct engine *e, uint32_t seq, const uint32_t *tab, uint32_t n)
{
	if (seq >= e->max_seqs)
		return err_set(ERR_RANGE, "engine: sequence %u out of range (max_seqs %u)", seq, e->max_seqs);
	if (!tab || n != e->tab_len)
		return err_set(ERR_INVAL, "engine: block table of %u entries (this layout has %u)", n, e->tab_len);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t cap = i < e->kv.max_blocks ? e->kv.n_gblocks : e->kv.n_lblocks;
		if (tab[i] >= cap && cap) /* an empty pool's entries are never read */
			return err_set(ERR_RANGE, "engine: block table entry %u: block %u outside the %s pool of %u",
				       i, tab[i], i < e->kv.max_blocks ? "global" : "local", cap);
	}
	uint32_t *t = (uint32_t *)e->tabh->map + (size_t)seq * e->tab_len;
	if (memcmp(t, tab, (size_t)n * 4)) {
		for (uint32_t i = 0; i < n; i++)
			t[i] = tab[i] < (i < e->kv.max_blocks ? e->kv.n_gblocks : e->kv.n_lblocks) ? tab[i] : 0;
		e->tab_dirty[seq] = 1;
		e->tab_any_dirty = true;
	}
	return 0;
}

/* Copy the changed block tables to the device before a submission. */
/* Record the copy of the changed block tables to the device into tabcb;
 * *recorded says whether there was one (it runs first in the step's own
 * submission: one submit and one fence wait per step, not two). */
static int tab_record(struct engine *e, bool *recorded)
{
	*recorded = false;
	if (!e->tab_any_dirty)
		return 0;
	VkBufferCopy r[256];
	uint32_t nr = 0;
	for (uint32_t sq = 0; sq < e->max_seqs; sq++) {
		if (!e->tab_dirty[sq])
			continue;
		VkDeviceSize off = (VkDeviceSize)sq * e->tab_len * 4;
		if (nr && r[nr - 1].srcOffset + r[nr - 1].size == off)
			r[nr - 1].size += (VkDeviceSize)e->tab_len * 4; /* neighbours: one region */
		else
			r[nr++] = (VkBufferCopy){ off, off, (VkDeviceSize)e->tab_len * 4 };
	}
	vkResetCommandBuffer(e->tabcb, 0);
	int rc = vk_cmd_begin(e->tabcb, true);
	if (rc)
		return rc;
	vkCmdCopyBuffer(e->tabcb, e->tabh->buf, e->tabd->buf, nr, r);
	vk_cmd_barrier(e->tabcb);
	VkResult vr = vkEndCommandBuffer(e->tabcb);
	if (vr != VK_SUCCESS)
		return err_set(ERR_DEVICE, "engine: vkEndCommandBuffer failed (%d)", (int)vr);
	*recorded = true;
	return 0;
}

/* Every submission goes through here: the tables first when they changed.
 * expect_ns: the GPU time the submission is expected to take (0: unknown;
 * vk_submit_wait_expect). */
static int submit_expect(struct engine *e, VkCommandBuffer cb, uint64_t expect_ns)
{
	bool tab;
	int rc = tab_record(e, &tab);
	if (rc)
		return rc;
	VkCommandBuffer cbs[2] = { e->tabcb, cb };
	rc = vk_submit_wait_expect(e->vk, tab ? cbs : &cb, tab ? 2 : 1, expect_ns);
	if (!rc && tab) {
		memset(e->tab_dirty, 0, sizeof e->tab_dirty);
		e->tab_any_dirty = false;
	}
	return rc;
}

int eng_submit(struct engine *e, VkCommandBuffer cb)
{
	return submit_expect(e, cb, 0);
}

int engine_seq_reset(struct engine *e, uint32_t seq)
{
	if (seq >= e->max_seqs)
		return err_set(ERR_RANGE, "engine: sequence %u out of range (max_seqs %u)", seq, e->max_seqs);
	return 0;
}

int engine_reset(struct engine *e)
{
	for (uint32_t il = e->l_lo; il < e->l_hi && !e->ffn_only; il++) {
		int rc = vk_fill_zero(e->vk, e->L[il].kc);
		if (!rc)
			rc = vk_fill_zero(e->vk, e->L[il].vc);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- recording ---- */

uint32_t engine_norm_per(uint32_t n, uint32_t wg)
{
	return n / wg + (n % wg != 0) + (n == 0);
}

uint32_t engine_mv_tpr(uint32_t ncols, uint32_t wg)
{
	/* about two 32-element chunks per thread; short rows share a workgroup */
	uint32_t want = (ncols / 32 + 1) / 2, t = 1;
	while (t < want && t < wg)
		t *= 2;
	return t;
}

/* Every engine dispatch goes through here so that profiling can timestamp it. */
void eng_disp(struct engine *e, VkCommandBuffer cb, const char *name, uint64_t bytes, const struct vk_pipe *p,
		 VkDescriptorSet s, const void *push, uint32_t gx, uint32_t gy, uint32_t gz)
{
	vk_cmd_dispatch(cb, p, s, push, gx, gy, gz);
	e->rec_disp++;
	if (e->prof && e->prof_n + 1 < PROF_MAX && e->prof_n + 1 < e->vk->n_queries) {
		e->prof_name[e->prof_n] = name;
		e->prof_bytes[e->prof_n] = bytes;
		vk_cmd_timestamp(cb, e->vk, ++e->prof_n);
	}
}

uint32_t engine_mvs_tpr(uint32_t ncols, uint32_t wg, uint32_t bpt)
{
	/* several blocks per thread keep loads in flight and balance the lanes */
	uint32_t want = ncols / 32 / (bpt ? bpt : 1), t = 1;
	while (2 * t <= want && 2 * t <= wg)
		t *= 2;
	return t;
}

uint32_t engine_mvs_unit(uint32_t type, bool generic)
{
	switch (type) {
	case TENSOR_Q4_0: case TENSOR_Q8_0: /* their quarter blocks have no generic variant */
		return 8;
	case TENSOR_Q4_1: case TENSOR_Q5_0: case TENSOR_Q5_1: case TENSOR_IQ4_NL: case TENSOR_IQ4_XS:
		return generic ? 32 : 8;
	case TENSOR_Q4_K: case TENSOR_Q5_K: case TENSOR_Q6_K: case TENSOR_Q3_K:
		return generic ? 32 : 16;
	default:
		return 32;
	}
}

uint32_t engine_mvs_tpr_type(uint32_t type, uint32_t ncols, uint32_t wg, uint32_t bpt, bool generic)
{
	/* engine_mvs_tpr counts 32-element units: scale the row to the type's unit */
	uint32_t f = 32 / engine_mvs_unit(type, generic);
	return engine_mvs_tpr(ncols <= UINT32_MAX / f ? ncols * f : ncols, wg, bpt);
}

/* Which matvec kernel a product of n_tok columns uses: 0 mul_mv, 1 mul_mvs, 2 mul_mm,
 * 3 mul_mvb (mul_mvs's numbers per token, weights read once per token group). */
static int mv_kind(const struct engine *e, const struct ew *w, uint32_t x_stride, uint32_t x_off, uint32_t n_tok)
{
	bool al = w->ncols % 32 == 0 && x_stride % 4 == 0 && x_off % 4 == 0;
	/* a batch (one token per sequence) keeps the kernel a lone decode token
	 * uses, whose columns are independent: each row's numbers do not depend on
	 * the batch (the coordinator's per-sequence replay relies on it) */
	if (e->rec_batch && e->rec_wide && al && e->use_mm)
		return 2; /* wide: every column of the tiled kernel accumulates alike */
	if (e->rec_batch)
		/* fewer tokens than a group: mul_mvs (same numbers; the H100 runs 2
		 * tokens faster as two columns than in a half-idle group of 4) */
		return al && e->use_mvs ? (e->use_mvb && n_tok >= e->mvb_min ? 3 : 1) : 0;
	if (al && e->use_mvs && n_tok <= MVS_MAX_TOK)
		return 1;
	if (al && e->use_mm && n_tok >= MM_MIN_TOK)
		return 2;
	return 0;
}

/* Work units per thread of mul_mvs/mul_mvb for a matrix of nrows output rows
 * (the same for both: mul_mvb must split rows as mul_mvs does). Regrouped
 * q4_0 units are a word of four blocks: Q4G_BPT per thread, one where that
 * leaves the product fewer than Q4G_FEW_THREADS threads, Q4G_WO_LOGITS_BPT
 * for wo (wo: the caller's MV_WO) and the logits otherwise. The K-quant units
 * (16 weights) take 2 on products of fewer than KQ_FEW_ROWS rows (qkv, wo,
 * down), 8 on the GLU's gate/up and 16 from KQ_MANY_ROWS rows (the logits,
 * q8_0's too); other types UNICORN_VK_MVS_BPT (default 4). */
static uint32_t mvs_bpt(const struct engine *e, const struct ew *w, uint32_t nrows, bool glu, bool wo)
{
	bool kq = w->type == TENSOR_Q4_K || w->type == TENSOR_Q5_K || w->type == TENSOR_Q6_K || w->type == TENSOR_Q3_K;
	bool tuned = !e->mvs_bpt_set && !e->mvs_generic;
	/* q8_0's logits too (4B 0.356 -> 0.289 ms per token at 16; its other
	 * products are best at 4) */
	if (tuned && (kq || w->type == TENSOR_Q8_0) && !glu && nrows >= KQ_MANY_ROWS)
		return KQ_MANY_BPT;
	if (kq && tuned)
		return glu ? KQ_GLU_BPT : nrows < KQ_FEW_ROWS ? KQ_FEW_BPT : e->mvs_bpt;
	if (w->type != TENSOR_Q4_0G)
		return e->mvs_bpt;
	uint64_t threads = (uint64_t)nrows * engine_mvs_tpr_type(w->type, w->ncols, WG_MVS, Q4G_BPT, false);
	if (threads < Q4G_FEW_THREADS)
		return 1;
	return e->q4g_tuned && (wo || nrows >= KQ_MANY_ROWS) ? Q4G_WO_LOGITS_BPT : Q4G_BPT;
}

/* rec_mv's flags. MV_TAIL: mul_mvs runs the norm tail (the caller checked
 * that the product runs on mul_mvs, y's rows are nrows apart from 0, the set
 * holds the norm's buffers, and the norm is mode 3). MV_XB: x has an x16
 * copy at binding 8 that the set holds: rmsnorm's of xb (x16_rows, mksetxb)
 * or, for wo, attention's (wo_x16), for down the GLU's (ffq_here). MV_WO: the
 * product is wo (mvs_bpt). MV_FFQ: the GLU writes down's x16 copy (the
 * caller checked ffq_here). */
enum { MV_TAIL = 1u, MV_XB = 2u, MV_WO = 4u, MV_FFQ = 8u };

/* Regrouped q4_0 rows wide enough, on enough rows, for Q4G_WIDE_RPT rows per
 * thread group (nrows: the product's output rows) */
static bool q4g_wide(const struct ew *w, uint32_t nrows)
{
	return w->type == TENSOR_Q4_0G && w->ncols >= Q4G_WIDE && nrows >= Q4G_WIDE_MIN_ROWS;
}

/* mul_mvs/mul_mvb's threads per row of w (GLU: w holds gate and up; wo: the
 * caller's MV_WO), and mul_mvs's rows per thread group: what rec_mv
 * dispatches, and what ffq_here checks the GLU's workgroups against */
static uint32_t mvs_tpr(const struct engine *e, const struct ew *w, bool glu, bool wo)
{
	uint32_t nrows = glu ? w->nrows / 2 : w->nrows;
	return engine_mvs_tpr_type(w->type, w->ncols, WG_MVS, mvs_bpt(e, w, nrows, glu, wo), e->mvs_generic);
}

static uint32_t mvs_rpt_of(const struct engine *e, const struct ew *w, bool glu)
{
	/* (not the GLU's: its gate and up rows already share x) */
	return !glu && q4g_wide(w, w->nrows) ? Q4G_WIDE_RPT : e->mvs_rpt[type_slot(w->type)];
}

static void bar(struct engine *e, VkCommandBuffer cb);

static void rec_mv(struct engine *e, VkCommandBuffer cb, const char *name, const struct ew *w, VkDescriptorSet s, bool glu,
		   uint32_t x_stride, uint32_t x_off, uint32_t y_stride, uint32_t y_off, uint32_t n_tok, uint32_t nrows_valid,
		   unsigned flags)
{
	bool tail = flags & MV_TAIL;
	uint32_t nrows = glu ? w->nrows / 2 : w->nrows;
	uint64_t bytes = (uint64_t)w->nrows * w->row_bytes;
	int kind = mv_kind(e, w, x_stride, x_off, n_tok);
	bool mvs = kind == 1 || kind == 3; /* same tpr: mul_mvb must split rows exactly as mul_mvs does */
	uint32_t wg = mvs ? WG_MVS : WG;
	bool wide = q4g_wide(w, nrows);
	uint32_t tpr = mvs ? mvs_tpr(e, w, glu, flags & MV_WO) : engine_mv_tpr(w->ncols, wg);
	/* the tail also writes out2's x16 copy wherever x16 runs: its product is
	 * a decode one (kind 1), so the next products read the copy */
	struct mv_push p = { w->ncols, nrows, w->row_bytes, x_stride, x_off, y_stride, y_off, n_tok, nrows_valid, tpr,
			     tail && kind == 1 && !glu ? (e->use_x16 ? 3 : 1) : 0 };
	if (kind == 2 && !glu) {
		int ts = type_slot(w->type);
		/* matrix cores: large tiles where they give the GPU enough workgroups, else small */
		uint32_t gx = (nrows + ENGINE_CM_BM - 1) / ENGINE_CM_BM, gy = (n_tok + ENGINE_CM_BN - 1) / ENGINE_CM_BN;
		uint32_t tail = e->mm_cm[ts].pipe ? split_k(e, nrows, w->ncols) : 0;
		bool dtile = e->use_dtile && n_tok <= ENGINE_CMD_BN;
		if (tail) {
			/* split K: the splits' partial sums, then their sum in order */
			p.tail = tail;
			uint32_t nz = (w->ncols + tail - 1) / tail;
			if (n_tok <= ENGINE_CMD_BN)
				eng_disp(e, cb, name, bytes, &e->mm_cmdk[ts], s, &p, gx, 1, nz);
			else
				eng_disp(e, cb, name, bytes, &e->mm_cmk[ts], s, &p, gx, gy, nz);
			bar(e, cb);
			eng_disp(e, cb, "mm reduce", 0, &e->mm_reduce, s, &p, (nrows + 255) / 256, n_tok, 1);
		} else if (dtile && e->mm_cm[ts].pipe && gx >= CM_LARGE_MIN_WG) {
			eng_disp(e, cb, name, bytes, &e->mm_cmd[ts], s, &p, gx, 1, 1);
		} else if (e->mm_cm[ts].pipe && gx * gy >= CM_LARGE_MIN_WG) {
			eng_disp(e, cb, name, bytes, &e->mm_cm[ts], s, &p, gx, gy, 1);
		} else if (e->mm_cm[ts].pipe) {
			eng_disp(e, cb, name, bytes, &e->mm_cms[ts], s, &p, (nrows + ENGINE_CMS_BM - 1) / ENGINE_CMS_BM,
			     (n_tok + ENGINE_CMS_BN - 1) / ENGINE_CMS_BN, 1);
		} else {
			/* the narrowest token tile that holds them (16, 32, else 64 per tile) */
			uint32_t v = n_tok <= 16 ? 0 : n_tok <= 32 ? 1 : 2, bn = 16u << v;
			eng_disp(e, cb, name, bytes, &e->mm[v][ts], s, &p, (nrows + MM_TILE - 1) / MM_TILE, (n_tok + bn - 1) / bn, 1);
		}
		return;
	}
	int ts = type_slot(w->type);
	uint32_t rpt = kind == 1 ? mvs_rpt_of(e, w, glu) : 1;
	uint32_t rpw = wg / tpr * rpt; /* rows per workgroup */
	uint32_t nwg = (nrows + rpw - 1) / rpw;
	uint32_t gx = nwg < MAX_GROUPS ? nwg : MAX_GROUPS;
	uint32_t gz = (nwg + gx - 1) / gx;
	/* x16: the same rows per thread group and threads per row as the float kernel */
	bool x16 = (flags & MV_XB) && e->use_x16 && w->type == TENSOR_Q4_0G && !tail;
	if (kind == 1 && x16)
		eng_disp(e, cb, name, bytes, glu ? (flags & MV_FFQ ? &e->mvs_glu_x16q : &e->mvs_glu_x16) : wide ? &e->mvs_x16_wide : &e->mvs_x16,
		     s, &p, n_tok, gx, gz);
	else if (kind == 1) /* token column in x: a row group's tokens run next to each other (weights hit the cache) */
		eng_disp(e, cb, name, bytes, glu ? &e->mvs_glu[ts] : wide ? &e->mvs_q4g_wide : &e->mvs[ts], s, &p, n_tok, gx, gz);
	else if (kind == 3)
		eng_disp(e, cb, name, bytes, glu ? (x16 ? &e->mvb_glu_x16 : &e->mvb_glu[ts]) : x16 ? &e->mvb_x16 : &e->mvb[ts], s, &p,
		     (n_tok + e->mvb_nt - 1) / e->mvb_nt, gx, gz);
	else
		eng_disp(e, cb, name, bytes, glu ? &e->glu[ts] : &e->mv[ts], s, &p, gx, (n_tok + NCOLS - 1) / NCOLS, gz);
}

/* Compute -> compute dependency between two dispatches of one submission. The
 * full vk_cmd_barrier (transfer and host stages too) is kept where a transfer or
 * the host reads next (step copy, logits, the end of a stage). */
static void bar(struct engine *e, VkCommandBuffer cb)
{
	e->rec_bars++;
	if (e->full_barriers) {
		vk_cmd_barrier(cb);
		return;
	}
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
	};
	vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
			     NULL, 0, NULL);
}

/* The full barrier (vk_cmd_barrier), counted for engine_profile. */
void eng_fbar(struct engine *e, VkCommandBuffer cb)
{
	e->rec_bars++;
	vk_cmd_barrier(cb);
}

/* Copy the host-written step buffer into its device twin (kernels read stepd). */
void eng_rec_step_copy(struct engine *e, VkCommandBuffer cb, uint32_t n)
{
	VkBufferCopy r = { 0, 0, sizeof(struct engine_step) + (VkDeviceSize)n * sizeof(struct engine_step_tok) };
	vkCmdCopyBuffer(cb, e->step->buf, e->stepd->buf, 1, &r);
	eng_fbar(e, cb);
}

/* Whether rmsnorm's n rows get their x16 copy: where a product reading them
 * may run an x16 kernel (mul_mvs or mul_mvb: x16 needs no other kind), and for
 * the final norm always (the logits of a prompt's last rows take mul_mvs
 * whatever the prompt's length): s_final, and the last layer's post-FFN norm,
 * which the fused forward runs as the final norm too (mode 3). Elsewhere
 * (prefill) the copy is not read. */
static bool x16_rows(const struct engine *e, VkDescriptorSet s, uint32_t n)
{
	if (!e->use_x16)
		return false;
	struct ew row = { .ncols = e->cfg.n_embd };
	int kind = mv_kind(e, &row, e->cfg.n_embd, 0, n);
	return s == e->s_final || s == e->L[e->cfg.n_layer - 1].s_post_ffn || kind == 1 || kind == 3;
}

void eng_rec_norm(struct engine *e, VkCommandBuffer cb, VkDescriptorSet s, uint32_t mode, uint32_t n)
{
	struct norm_push p = { e->cfg.n_embd, mode, e->cfg.eps, x16_rows(e, s, n) ? 1 : 0 };
	eng_disp(e, cb, mode == 0 ? "rmsnorm" : mode == 1 ? "rmsnorm+res" : "rmsnorm+res+norm", 0, &e->norm, s, &p, n, 1, 1);
	/* modes 0/1 end a split-placement stage (the host may read h next) */
	if (mode == 3)
		bar(e, cb);
	else
		eng_fbar(e, cb);
}

/* Whether the product w (x rows x_stride apart, n tokens) takes the post-norm
 * that follows it in its tail: the fused layer's mode 3 norm, on mul_mvs,
 * over rows of n_embd (y's rows, which the tail reads nrows apart). */
static bool norm_tail_here(const struct engine *e, const struct ew *w, uint32_t x_stride, uint32_t n, bool fuse)
{
	return fuse && e->norm_tail && !e->nt_dispatch && w->nrows == e->cfg.n_embd && mv_kind(e, w, x_stride, 0, n) == 1;
}

void eng_rec_attn(struct engine *e, VkCommandBuffer cb, uint32_t il, uint32_t n, bool pre_norm, bool fuse)
{
	const struct gemma3_config *c = &e->cfg;
	struct elayer *l = &e->L[il];
	if (!fuse)
		eng_rec_step_copy(e, cb, n); /* a stage submission: stepd is not fresh */
	if (pre_norm)
		eng_rec_norm(e, cb, l->s_attn_norm, 0, n);
	uint32_t off = 0;
	for (uint32_t i = 0; i < l->n_qkv; i++) {
		rec_mv(e, cb, "mv qkv", &l->qkv[i], l->s_qkv[i], false, c->n_embd, 0, e->qkv_stride, off, n, UINT32_MAX,
		       MV_XB);
		off += l->qkv[i].nrows;
	}
	bar(e, cb);
	bool global = c->layer_global[il];
	uint32_t window = global ? 0 : c->sliding_window, n_split = global ? e->n_split_global : e->n_split;
	struct rope_push rp = {
		c->head_dim, c->n_head, c->n_head_kv, e->qkv_stride, c->eps,
		global ? c->rope_base_global : c->rope_base_local,
		global && c->rope_scale_global > 0 ? 1.0f / c->rope_scale_global : 1.0f, e->max_ctx,
		global ? 0 : e->kv.max_blocks, global ? e->kv.max_blocks : e->kv.ring,
	};
	/* rope_kv inside attn when no row reads another row's fresh key: one
	 * token, or one token per sequence (attn appends k/v while it runs, so a
	 * sequence's earlier rows of the same step would not be visible) */
	bool rope_in_attn = e->fuse && (n == 1 || e->rec_distinct);
	if (!rope_in_attn) {
		eng_disp(e, cb, "rope_kv", 0, &e->rope, l->s_rope, &rp, c->n_head + c->n_head_kv, n, 1);
		bar(e, cb);
	}
	float qpas = c->query_pre_attn_scalar > 0 ? c->query_pre_attn_scalar : (float)c->head_dim;
	bool tail = norm_tail_here(e, &l->wo, e->n_q, n, fuse);
	/* wo on x16 (attn_x16.glsl): attention writes its rows' copy where wo runs
	 * an x16 kernel (regrouped q4_0 on mul_mvs or mul_mvb, no norm tail) */
	int wo_kind = mv_kind(e, &l->wo, e->n_q, 0, n);
	uint32_t wo_x16 = e->wo_x16 && !tail && l->wo.type == TENSOR_Q4_0G && (wo_kind == 1 || wo_kind == 3);
	struct attn_push ap = {
		c->head_dim, c->n_head, c->n_head_kv, e->qkv_stride, window, n_split,
		1.0f / sqrtf(qpas), e->attn_min_chunk, e->max_rows * c->n_head * split_max(e) * (c->head_dim + 2),
		rp.tab_off, rp.tab_mod, rp.eps, rp.base, rp.freq_scale, rp.kv_cap, rope_in_attn ? 1 : 0, e->attn_chunk,
		wo_x16,
	};
	/* attn writes the output of a token whose keys fit one split itself (and
	 * attn_combine skips it): every token when there is one split, on sliding
	 * layers whose window fits one, or when the step is short (every token's
	 * position below attn_chunk; recorded as its own command buffer). Then
	 * only split 0 has work: the other workgroups are not launched either. */
	bool one_split = e->fuse && (n_split == 1 || (window && window <= e->attn_chunk) || e->rec_short);
	/* rope_kv ran before (prefill chunks, unfused steps): the kernel without
	 * the rope code, unless it writes wo's x16 copy (only attn has that) */
	const struct vk_pipe *ak = rope_in_attn || wo_x16 ? &e->attn : &e->attn_pre;
	/* on the matrix cores where it can (attn_pre's place: wo_x16 is 0):
	 * every row in one pass over its keys, its key splits merged below */
	bool fa = ak == &e->attn_pre && e->attn_fa.pipe;
	/* an image span's rows see keys past their own position (the record's
	 * span_end): attn_pre reads it, flash_attn_cm (causal only) does not */
	fa = fa && !e->n_img_cp;
	if (fa) {
		struct fa_push fp = { c->n_head, c->n_head_kv, e->qkv_stride, window, n, ap.scale, rp.tab_off, rp.tab_mod };
		uint32_t rows = n * (c->n_head / c->n_head_kv);
		eng_disp(e, cb, "attn", 0, &e->attn_fa, l->s_attn, &fp, c->n_head_kv, (rows + ENGINE_FA_ROWS - 1) / ENGINE_FA_ROWS,
		     e->fa_nz);
	} else {
		eng_disp(e, cb, rope_in_attn ? "attn+rope_kv" : "attn", 0, ak, l->s_attn, &ap, c->n_head, n,
		     one_split ? 1 : n_split);
	}
	bar(e, cb);
	/* the splits' merge: flash attention's (every token has them: all = 1)
	 * or attn's (tokens whose keys took more than one split) */
	if (fa ? e->fa_nz > 1 : !e->fuse_combine && !one_split) {
		struct combine_push cp = { c->head_dim, c->n_head, fa ? e->fa_nz : n_split, window, e->attn_min_chunk,
					   e->attn_chunk, wo_x16, fa ? 1 : 0 };
		eng_disp(e, cb, "attn_combine", 0, &e->combine, l->s_combine, &cp, c->n_head, n, 1);
		bar(e, cb);
	}
	rec_mv(e, cb, tail ? "mv wo+norm" : "mv wo", &l->wo, l->s_wo, false, e->n_q, 0, c->n_embd, 0, n, UINT32_MAX,
	       MV_WO | (tail ? MV_TAIL : wo_x16 ? MV_XB : 0));
	bar(e, cb);
	if (!tail)
		eng_rec_norm(e, cb, l->s_post_attn, fuse ? 3 : 1, n);
}

/* Whether layer l's GLU writes down's x16 copy (the _x16q kernel) and down
 * reads it, for a step of n tokens: both products regrouped q4_0 on mul_mvs,
 * the GLU on x16 (rec_mv's test), down without the norm tail, and the GLU's
 * rows per workgroup dividing an x16 group (its quantizing workgroup holds a
 * group's last row). */
static bool ffq_here(const struct engine *e, const struct elayer *l, uint32_t n, bool down_tail)
{
	const struct gemma3_config *c = &e->cfg;
	if (!e->ffn_x16 || down_tail || n > FFQ_MAX_TOK || l->n_gu != 1 || l->gu[0].type != TENSOR_Q4_0G ||
	    l->down.type != TENSOR_Q4_0G || mv_kind(e, &l->gu[0], c->n_embd, 0, n) != 1 || mv_kind(e, &l->down, c->n_ff, 0, n) != 1)
		return false;
	uint32_t rpw = WG_MVS / mvs_tpr(e, &l->gu[0], true, false) * mvs_rpt_of(e, &l->gu[0], true);
	return rpw && X16_GROUP % rpw == 0;
}

void eng_rec_ffn(struct engine *e, VkCommandBuffer cb, uint32_t il, uint32_t n, bool pre_norm, bool fuse)
{
	const struct gemma3_config *c = &e->cfg;
	struct elayer *l = &e->L[il];
	if (pre_norm)
		eng_rec_norm(e, cb, l->s_ffn_norm, 0, n);
	bool tail = norm_tail_here(e, &l->down, c->n_ff, n, fuse);
	bool ffq = ffq_here(e, l, n, tail);
	if (l->n_gu == 1 && mv_kind(e, &l->gu[0], c->n_embd, 0, n) != 2) {
		rec_mv(e, cb, "mv gate_up+gelu", &l->gu[0], l->s_gu[0], true, c->n_embd, 0, c->n_ff, 0, n, UINT32_MAX,
		       MV_XB | (ffq ? MV_FFQ : 0));
	} else {
		if (l->n_gu == 1) {
			rec_mv(e, cb, "mv gate_up", &l->gu[0], l->s_gu_mm, false, c->n_embd, 0, 2 * c->n_ff, 0, n, UINT32_MAX,
			       MV_XB);
		} else {
			rec_mv(e, cb, "mv gate", &l->gu[0], l->s_gu[0], false, c->n_embd, 0, 2 * c->n_ff, 0, n, UINT32_MAX,
			       MV_XB);
			rec_mv(e, cb, "mv up", &l->gu[1], l->s_gu[1], false, c->n_embd, 0, 2 * c->n_ff, c->n_ff, n, UINT32_MAX,
			       MV_XB);
		}
		bar(e, cb);
		struct gelu_push gp = { c->n_ff, n };
		eng_disp(e, cb, "gelu_mul", 0, &e->gelu, l->s_gelu, &gp, (c->n_ff * n + WG - 1) / WG, 1, 1);
	}
	bar(e, cb);
	rec_mv(e, cb, tail ? "mv down+norm" : "mv down", &l->down, l->s_down, false, c->n_ff, 0, c->n_embd, 0, n, UINT32_MAX,
	       tail ? MV_TAIL : ffq ? MV_XB : 0);
	bar(e, cb);
	if (!tail)
		eng_rec_norm(e, cb, l->s_post_ffn, fuse ? 3 : 1, n);
}

void eng_rec_embed(struct engine *e, VkCommandBuffer cb, uint32_t n)
{
	struct rows_push p = { e->embd.ncols, e->embd.nrows, e->embd.row_bytes, sqrtf((float)e->cfg.n_embd) };
	eng_rec_step_copy(e, cb, n);
	eng_disp(e, cb, "get_rows", 0, &e->rows[type_slot(e->embd.type)], e->s_embed, &p, n, 1, 1);
	eng_fbar(e, cb); /* once per step; engine_embed's caller may read h next */
	/* image rows over their placeholders' (engine_image.h; chunk steps only) */
	if (e->n_img_cp)
		engine_image_rec(cb, e->img->buf, e->h->buf, e->cfg.n_embd * 4, e->img_cp, e->n_img_cp);
}

/* logits of rows [n - n_out, n) of xb into the buffer of set s (logits or logitsd) */
void eng_rec_logits_to(struct engine *e, VkCommandBuffer cb, uint32_t n, uint32_t n_out, VkDescriptorSet s)
{
	rec_mv(e, cb, "mv logits", &e->embd, s, false, e->cfg.n_embd, (n - n_out) * e->cfg.n_embd, e->cfg.n_vocab, 0, n_out,
	       e->n_vocab_text, MV_XB);
	eng_fbar(e, cb);
}

/* logits of rows [n - n_out, n) of xb into logits[0..n_out) (host-visible) */
void eng_rec_logits(struct engine *e, VkCommandBuffer cb, uint32_t n, uint32_t n_out)
{
	eng_rec_logits_to(e, cb, n, n_out, e->s_logits);
}

/* A forward of n rows whose last n_out rows get the head (0: none). */
static int record_forward(struct engine *e, VkCommandBuffer cb, uint32_t n, uint32_t n_out, int mode)
{
	int rc = vk_cmd_begin(cb, false);
	if (rc)
		return rc;
	bool ts = !e->prof && e->vk->timestamps && e->n_ts <= e->vk->n_queries;
	uint32_t q = 0;
	if (e->prof) {
		vk_cmd_reset_queries(cb, e->vk, 0, PROF_MAX);
		vk_cmd_timestamp(cb, e->vk, 0);
	}
	if (ts) {
		vk_cmd_reset_queries(cb, e->vk, 0, e->n_ts);
		vk_cmd_timestamp(cb, e->vk, q++);
	}
	eng_rec_embed(e, cb, n);
	eng_rec_norm(e, cb, e->s_norm0, 0, n);
	if (ts)
		vk_cmd_timestamp(cb, e->vk, q++);
	for (uint32_t il = 0; il < e->cfg.n_layer; il++) {
		eng_rec_attn(e, cb, il, n, false, true);
		if (ts)
			vk_cmd_timestamp(cb, e->vk, q++);
		eng_rec_ffn(e, cb, il, n, false, true);
		if (ts)
			vk_cmd_timestamp(cb, e->vk, q++);
	}
	bool am = mode == MODE_ARGMAX || mode == MODE_B_ARGMAX || mode == MODE_W_ARGMAX;
	bool tk = mode == MODE_TOPK || mode == MODE_B_TOPK || mode == MODE_W_TOPK;
	if (n_out)
		eng_rec_logits_to(e, cb, n, n_out, am || tk ? e->s_logits_d : e->s_logits);
	struct argmax_push ap = { e->n_vocab_text, 0, e->cfg.n_vocab, LSE_OFF(e) };
	if (am && n_out)
		eng_disp(e, cb, "argmax", 0, &e->argmax, e->s_argmax, &ap, e->am_groups, n_out, 1);
	if (tk && n_out)
		eng_disp(e, cb, "topk", 0, &e->topk, e->s_topk, &ap, e->tk_groups, n_out, 1);
	eng_fbar(e, cb);
	if (ts)
		vk_cmd_timestamp(cb, e->vk, q++);
	VkResult r = vkEndCommandBuffer(cb);
	return r == VK_SUCCESS ? 0 : err_set(ERR_DEVICE, "engine: vkEndCommandBuffer failed (%d)", (int)r);
}

int eng_step_write(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, uint32_t k)
{
	if (n == 0 || n > e->max_batch)
		return err_set(ERR_INVAL, "engine: step of %u tokens (max_batch %u)", n, e->max_batch);
	if (pos0 > e->max_ctx || n > e->max_ctx - pos0)
		return err_set(ERR_RANGE, "engine: positions %u..%u exceed max_ctx %u", pos0, pos0 + n - 1, e->max_ctx);
	struct engine_step *s = e->step->map;
	if (tokens)
		for (uint32_t i = 0; i < n; i++)
			if (tokens[i] >= e->cfg.n_vocab)
				return err_set(ERR_INVAL, "engine: token %u out of range (n_vocab %u)", tokens[i], e->cfg.n_vocab);
	s->pos0 = pos0;
	s->n = n;
	s->k = k;
	s->kv_base = e->seq * e->tab_len;
	e->step_short = pos0 + n <= e->attn_chunk;
	/* the kernels read every token's own record: one sequence, consecutive positions */
	for (uint32_t i = 0; i < n; i++) {
		if (tokens)
			s->tok[i].token = tokens[i];
		s->tok[i].pos = pos0 + i;
		s->tok[i].base = s->kv_base;
		s->tok[i].span_end = 0; /* no image span (attn.glsl reads it) */
	}
	return 0;
}

/* Replay (recording on first use) the command buffer of (mode, n) over the step buffer as written. */
/* Add the GPU time between timestamp queries q0 and q1 to e->gpu_ns. */
uint64_t eng_gpu_ns_add(struct engine *e, uint32_t q0, uint32_t q1)
{
	uint64_t a, b;
	if (vk_query_ns(e->vk, q0, 1, &a) || vk_query_ns(e->vk, q1, 1, &b) || b < a)
		return 0;
	e->gpu_ns += b - a;
	return b - a;
}

uint64_t engine_gpu_ns(const struct engine *e)
{
	return e->gpu_ns;
}

/* Record a forward of n rows (n_out heads) in the kernel kind of mode. */
int eng_record_mode(struct engine *e, VkCommandBuffer cb, uint32_t n, uint32_t n_out, int mode)
{
	e->rec_batch = mode >= MODE_B_ALL;
	e->rec_wide = mode >= MODE_W_ALL;
	e->rec_short = e->step_short;
	int rc = record_forward(e, cb, n, n_out, mode);
	e->rec_batch = e->rec_wide = e->rec_short = false;
	return rc;
}

/* Submit a recorded forward and count its GPU time. */
static int run_forward(struct engine *e, VkCommandBuffer cb)
{
	/* a replayed step is expected to take the lesser of the GPU times its
	 * last two runs took, as its own timestamps measured them (the host's
	 * wait would count a late wake-up into the next expectation; one slow
	 * run, a warm-up, does not make the next one sleep too long) */
	if (cb != e->est_cb)
		e->est_n = 0;
	uint64_t expect = 0;
	if (e->est_n >= 2 && !e->wait_start)
		expect = e->est_ns[0] < e->est_ns[1] ? e->est_ns[0] : e->est_ns[1];
	int rc = submit_expect(e, cb, expect);
	e->timed = !rc && e->vk->timestamps && e->n_ts <= e->vk->n_queries;
	e->est_cb = VK_NULL_HANDLE;
	if (e->timed && !e->prof) { /* the first and last timestamps bracket the submission */
		uint64_t ns = eng_gpu_ns_add(e, 0, e->n_ts - 1);
		if (ns) {
			e->est_ns[e->est_n++ % 2] = ns;
			e->est_cb = cb;
		}
	}
	return rc;
}

static int replay(struct engine *e, int mode, uint32_t n)
{
	int rc;
	/* short steps (no attn_combine) have their own command buffers */
	VkCommandBuffer *cb = &e->cbs[(e->fuse && e->step_short ? N_MODES : 0) + mode][n];
	if (!*cb) {
		bool heads = mode == MODE_ALL || mode >= MODE_B_ALL;
		rc = vk_cmd_alloc(e->vk, cb);
		/* the batch modes' rows are distinct sequences (batch_write, and
		 * engine_forward_chunks replays only single-token chunks) */
		e->rec_distinct = mode >= MODE_B_ALL;
		if (!rc)
			rc = eng_record_mode(e, *cb, n, heads ? n : 1, mode);
		e->rec_distinct = false;
		if (rc) {
			vk_cmd_free(e->vk, *cb);
			*cb = VK_NULL_HANDLE;
			return rc;
		}
	}
	return run_forward(e, *cb);
}

uint32_t engine_batch_max(const struct engine *e) { return e->batch_max; }

/* Check and write a batch's step records: row t is one token of sequence
 * seqs[t] (distinct) at pos[t]; tokens may be NULL (stages start from hidden
 * rows). */
int eng_batch_write(struct engine *e, uint32_t n, const uint32_t *tokens, const uint32_t *seqs, const uint32_t *pos,
		       uint32_t k)
{
	if (n == 0 || n > e->batch_max)
		return err_set(ERR_INVAL, "engine: batch of %u rows (1..%u: max_batch %u, max_seqs %u)", n, e->batch_max,
			       e->max_batch, e->max_seqs);
	uint8_t seen[256] = { 0 }; /* max_seqs <= 256 (engine_create) */
	for (uint32_t t = 0; t < n; t++) {
		if (seqs[t] >= e->max_seqs)
			return err_set(ERR_RANGE, "engine: batch: entry %u: sequence %u out of range (max_seqs %u)", t, seqs[t],
				       e->max_seqs);
		/* two tokens of one sequence would race on its KV rows */
		if (seen[seqs[t]]++)
			return err_set(ERR_INVAL, "engine: batch: sequence %u appears twice", seqs[t]);
		if (pos[t] >= e->max_ctx)
			return err_set(ERR_RANGE, "engine: batch: entry %u: position %u beyond max_ctx %u", t, pos[t], e->max_ctx);
		if (tokens && tokens[t] >= e->cfg.n_vocab)
			return err_set(ERR_INVAL, "engine: batch: entry %u: token %u out of range (n_vocab %u)", t, tokens[t],
				       e->cfg.n_vocab);
	}
	struct engine_step *s = e->step->map;
	s->pos0 = pos[0];
	s->n = n;
	s->k = k;
	s->kv_base = seqs[0] * e->tab_len;
	e->step_short = true;
	for (uint32_t t = 0; t < n; t++) {
		e->step_short = e->step_short && pos[t] < e->attn_chunk;
		s->tok[t].token = tokens ? tokens[t] : 0;
		s->tok[t].pos = pos[t];
		s->tok[t].base = seqs[t] * e->tab_len;
		s->tok[t].span_end = 0;
	}
	return 0;
}

/* Rows [0, n) of the argmax/top-k results: k ids (and values) per row. */
void eng_batch_results(struct engine *e, uint32_t n, uint32_t k, bool topk, uint32_t *ids, float *vals)
{
	const uint32_t *r = e->res->map;
	if (topk)
		e->lse_rows = n;
	for (uint32_t t = 0; t < n; t++)
		for (uint32_t i = 0; i < k; i++) {
			if (ids)
				ids[(size_t)t * k + i] = r[t * RES_ROW + 2 * i];
			if (vals)
				memcpy(&vals[(size_t)t * k + i], &r[t * RES_ROW + 2 * i + 1], 4);
		}
}

/* The batch mode's MODE_B_* and k (1 for argmax, 0 for logits), checked. */
static int batch_mode(enum engine_batch_mode mode, uint32_t *k, int *m, const char *what)
{
	switch (mode) {
	case ENGINE_BATCH_ARGMAX: *m = MODE_B_ARGMAX; *k = 1; return 0;
	case ENGINE_BATCH_LOGITS: *m = MODE_B_ALL; *k = 0; return 0;
	case ENGINE_BATCH_TOPK:
		*m = MODE_B_TOPK;
		if (*k == 0 || *k > ENGINE_TOPK_MAX)
			return err_set(ERR_INVAL, "engine: %s: k %u outside [1, %d]", what, *k, ENGINE_TOPK_MAX);
		return 0;
	default: return err_set(ERR_INVAL, "engine: %s: mode %d unknown", what, (int)mode);
	}
}

int engine_forward_batch(struct engine *e, uint32_t n, const uint32_t *tokens, const uint32_t *seqs, const uint32_t *pos,
			 enum engine_batch_mode mode, uint32_t k, uint32_t *ids, float *vals)
{
	if (eng_whole_check(e, "batch"))
		return ERR_STATE;
	if (!tokens || !seqs || !pos)
		return err_set(ERR_INVAL, "engine: batch: tokens, seqs and pos are required");
	int m;
	int rc = batch_mode(mode, &k, &m, "batch");
	if (rc)
		return rc;
	if ((mode != ENGINE_BATCH_LOGITS && !ids) || (mode != ENGINE_BATCH_ARGMAX && !vals))
		return err_set(ERR_INVAL, "engine: batch: missing output array");
	rc = eng_batch_write(e, n, tokens, seqs, pos, k);
	if (rc)
		return rc;
	rc = replay(e, m, n);
	if (rc)
		return rc;
	if (mode == ENGINE_BATCH_LOGITS) {
		memcpy(vals, e->logits->map, (size_t)n * e->cfg.n_vocab * 4);
		return 0;
	}
	eng_batch_results(e, n, k, mode == ENGINE_BATCH_TOPK, ids, vals);
	return 0;
}

uint32_t engine_rows_max(const struct engine *e) { return e->max_rows; }

int engine_image_set(struct engine *e, uint32_t slot, const float *rows)
{
	if (!rows || slot >= e->image_slots)
		return err_set(ERR_RANGE, "engine: image slot %u outside the image area (%u)", slot, e->image_slots);
	uint64_t bytes = (uint64_t)e->image_rows * e->cfg.n_embd * 4;
	return vk_upload(e->vk, e->img, slot * bytes, rows, bytes);
}

bool engine_has_mm(const struct engine *e) { return e->use_mm; }
bool engine_has_fa(const struct engine *e) { return e->attn_fa.pipe != VK_NULL_HANDLE; }
bool engine_norm_tail(const struct engine *e) { return e->norm_tail && !e->nt_dispatch; }

/* Check the chunks and write their step records: rows of chunks without a
 * head and all but the last row of the others first, then the head rows in
 * chunk order (the head reads the last *m rows). */
int eng_chunks_write(struct engine *e, uint32_t n, const struct engine_chunk *ch, uint32_t k, uint32_t *rows,
			uint32_t *m, bool images)
{
	e->n_img_cp = 0;
	if (!ch || n == 0 || n > e->batch_max)
		return err_set(ERR_INVAL, "engine: chunks: %u chunks (1..%u)", n, e->batch_max);
	uint8_t seen[256] = { 0 }; /* max_seqs <= 256 (engine_create) */
	uint64_t total = 0;
	*m = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct engine_chunk *c = &ch[i];
		if (c->seq >= e->max_seqs || seen[c->seq]++)
			return err_set(c->seq >= e->max_seqs ? ERR_RANGE : ERR_INVAL,
				       "engine: chunks: chunk %u: sequence %u out of range or twice (max_seqs %u)", i, c->seq,
				       e->max_seqs);
		/* a sequence's step writes at most the ring's slack (ipc/kvlayout.h) */
		if (!c->tokens || c->n == 0 || c->n > KV_RING_SLACK)
			return err_set(ERR_INVAL, "engine: chunks: chunk %u: %u tokens (1..%d)", i, c->n, KV_RING_SLACK);
		if (c->pos0 > e->max_ctx || c->n > e->max_ctx - c->pos0)
			return err_set(ERR_RANGE, "engine: chunks: chunk %u: positions %u..%u exceed max_ctx %u", i, c->pos0,
				       c->pos0 + c->n - 1, e->max_ctx);
		for (uint32_t t = 0; t < c->n; t++)
			if (c->tokens[t] >= e->cfg.n_vocab && !(images && engine_image_token(c->tokens[t])))
				return err_set(ERR_INVAL, "engine: chunks: chunk %u: token %u out of range (n_vocab %u)", i,
					       c->tokens[t], e->cfg.n_vocab);
		uint32_t span[KV_RING_SLACK];
		int rc = images ? engine_image_spans(c->tokens, c->n, c->pos0, e->image_rows, e->image_slots, span) : 0;
		if (rc)
			return err_prefix(rc, "chunk %u", i);
		total += c->n;
		*m += c->head;
	}
	if (total > e->max_rows)
		return err_set(ERR_RANGE, "engine: chunks: %llu rows (max_rows %u)", (unsigned long long)total, e->max_rows);
	struct engine_step *s = e->step->map;
	s->pos0 = ch[0].pos0;
	s->n = (uint32_t)total;
	s->k = k;
	s->kv_base = ch[0].seq * e->tab_len;
	uint32_t r = 0, h = (uint32_t)total - *m, nb = 0;
	uint32_t *bias = e->biasb->map;
	e->step_short = true;
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t t = 0; t < ch[i].n; t++) {
			e->step_short = e->step_short && ch[i].pos0 + t < e->attn_chunk;
			bool hd = ch[i].head && t + 1 == ch[i].n;
			uint32_t at = hd ? h++ : r++, id = ch[i].tokens[t];
			bool img = images && engine_image_token(id);
			uint32_t end = img ? ch[i].pos0 + t + (e->image_rows - 1 - (id & ~ENGINE_IMAGE_TOKEN) % e->image_rows) : 0;
			/* an image row embeds token 0, then takes its row (rec_embed) */
			s->tok[at] = (struct engine_step_tok){ img ? 0 : id, ch[i].pos0 + t, ch[i].seq * e->tab_len, end };
			if (img)
				engine_image_copy_add(e->img_cp, &e->n_img_cp, id & ~ENGINE_IMAGE_TOKEN, at);
			if (!hd)
				continue;
			/* a head row's logit biases and mask: the top-k kernel adds them
			 * (and masks) before it ranks (s->k bit 31; shaders/topk.comp) */
			uint32_t hr = at - ((uint32_t)total - *m), word = 0;
			if (i < e->n_cbias && (e->cbias[i].n || e->cbias[i].mask)) {
				word = (e->cbias[i].mask ? 1u << 31 : 0) | e->cbias[i].n << 20 | nb;
				if (e->cbias[i].mask) {
					size_t mw = ((size_t)e->cfg.n_vocab + 31) / 32;
					memcpy((uint32_t *)e->maskb->map + (size_t)hr * mw, e->cbias[i].mask, mw * 4);
				}
				for (uint32_t j = 0; j < e->cbias[i].n; j++, nb++) {
					bias[ENGINE_BIAS_HDR + 2 * nb] = e->cbias[i].ids[j];
					memcpy(&bias[ENGINE_BIAS_HDR + 2 * nb + 1], &e->cbias[i].v[j], 4);
				}
				s->k |= 1u << 31;
			}
			bias[hr] = word;
		}
	*rows = (uint32_t)total;
	return 0;
}

int engine_forward_chunks(struct engine *e, uint32_t n, const struct engine_chunk *ch, bool wide,
			  enum engine_batch_mode mode, uint32_t k, uint32_t *ids, float *vals)
{
	if (eng_whole_check(e, "chunks"))
		return ERR_STATE;
	int base;
	int rc = batch_mode(mode, &k, &base, "chunks");
	if (rc)
		return rc;
	uint32_t rows, m;
	rc = eng_chunks_write(e, n, ch, k, &rows, &m, true);
	e->n_cbias = 0; /* the biases were for this call */
	if (rc)
		return rc;
	if ((((struct engine_step *)e->step->map)->k >> 31) && mode == ENGINE_BATCH_ARGMAX)
		return err_set(ERR_INVAL, "engine: chunks: logit biases need the top-k head");
	if (m && ((mode != ENGINE_BATCH_LOGITS && !ids) || (mode != ENGINE_BATCH_ARGMAX && !vals)))
		return err_set(ERR_INVAL, "engine: chunks: missing output array");
	int md = wide ? base - MODE_B_ALL + MODE_W_ALL : base;
	if (rows == m && !e->n_img_cp) {
		rc = replay(e, md, rows); /* one token each, every one a head: decode, recorded once */
	} else {
		if (!e->chunkcb && (rc = vk_cmd_alloc(e->vk, &e->chunkcb)))
			return rc;
		vkResetCommandBuffer(e->chunkcb, 0);
		rc = eng_record_mode(e, e->chunkcb, rows, m, md);
		e->n_img_cp = 0; /* the image copies are this recording's only */
		if (!rc)
			rc = run_forward(e, e->chunkcb);
	}
	if (rc || !m)
		return rc;
	if (mode == ENGINE_BATCH_LOGITS)
		memcpy(vals, e->logits->map, (size_t)m * e->cfg.n_vocab * 4);
	else
		eng_batch_results(e, m, k, mode == ENGINE_BATCH_TOPK, ids, vals);
	return 0;
}

int engine_chunk_bias(struct engine *e, uint32_t i, const uint32_t *ids, const float *bias, uint32_t n,
		      const uint32_t *mask)
{
	bool ok = i < e->batch_max && n <= ENGINE_BIAS_MAX && (!n || (ids && bias));
	for (uint32_t j = 0; ok && j < n; j++)
		ok = ids[j] < e->cfg.n_vocab && (!j || ids[j] > ids[j - 1]) && isfinite(bias[j]);
	if (!ok) {
		e->n_cbias = 0; /* none of this call's biases stay */
		return err_set(ERR_INVAL, "engine: chunk_bias: chunk %u (< %u): %u biases (at most %d, ids ascending, "
			       "finite)", i, e->batch_max, n, ENGINE_BIAS_MAX);
	}
	for (; e->n_cbias <= i; e->n_cbias++)
		e->cbias[e->n_cbias].n = 0, e->cbias[e->n_cbias].mask = NULL;
	e->cbias[i].ids = ids;
	e->cbias[i].v = bias;
	e->cbias[i].n = n;
	e->cbias[i].mask = mask;
	return 0;
}

/* One step of at most max_batch tokens: replay (recording on first use). */
static int run_step(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, int mode, uint32_t k)
{
	if (eng_whole_check(e, "forward"))
		return ERR_STATE;
	int rc = eng_step_write(e, tokens, n, pos0, k);
	return rc ? rc : replay(e, mode, n);
}

int engine_forward(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, float *logits, bool all_rows)
{
	if (!tokens || n == 0)
		return err_set(ERR_INVAL, "engine: forward: no tokens");
	size_t V = e->cfg.n_vocab;
	for (uint32_t done = 0; done < n;) {
		uint32_t c = n - done < e->max_batch ? n - done : e->max_batch;
		bool last = done + c == n;
		int mode = all_rows ? MODE_ALL : MODE_LAST;
		int rc = run_step(e, tokens + done, c, pos0 + done, mode, 0);
		if (rc)
			return rc;
		if (logits && all_rows)
			memcpy(logits + (size_t)done * V, e->logits->map, (size_t)c * V * 4);
		else if (logits && last)
			memcpy(logits, e->logits->map, V * 4);
		done += c;
	}
	return 0;
}

int engine_argmax(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, uint32_t *token)
{
	if (!tokens || n == 0)
		return err_set(ERR_INVAL, "engine: argmax: no tokens");
	uint32_t head = n > e->max_batch ? n - (n - 1) % e->max_batch - 1 : 0;
	if (head) {
		int rc = engine_forward(e, tokens, head, pos0, NULL, false);
		if (rc)
			return rc;
	}
	int rc = run_step(e, tokens + head, n - head, pos0 + head, MODE_ARGMAX, 0);
	if (rc)
		return rc;
	*token = ((const uint32_t *)e->res->map)[0];
	return 0;
}

int engine_topk(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, uint32_t k, uint32_t *ids, float *vals)
{
	if (!tokens || n == 0 || k == 0 || k > ENGINE_TOPK_MAX)
		return err_set(ERR_INVAL, "engine: topk: need tokens and 1 <= k <= %d", ENGINE_TOPK_MAX);
	uint32_t head = n > e->max_batch ? n - (n - 1) % e->max_batch - 1 : 0;
	if (head) {
		int rc = engine_forward(e, tokens, head, pos0, NULL, false);
		if (rc)
			return rc;
	}
	int rc = run_step(e, tokens + head, n - head, pos0 + head, MODE_TOPK, k);
	if (rc)
		return rc;
	const uint32_t *r = e->res->map;
	for (uint32_t i = 0; i < k; i++) {
		ids[i] = r[2 * i];
		memcpy(&vals[i], &r[2 * i + 1], 4);
	}
	e->lse_rows = 1;
	return 0;
}

int engine_topk_lse(const struct engine *e, uint32_t n, float *lse)
{
	if (!lse || n == 0 || n > e->lse_rows)
		return err_set(ERR_STATE, "engine: topk_lse: %u rows asked, the last top-k step had %u", n,
			       e->lse_rows);
	/* the kernel wrote them in this same submission's result buffer */
	memcpy(lse, (const uint32_t *)e->res->map + LSE_OFF(e), (size_t)n * 4);
	return 0;
}

int engine_timing(struct engine *e, struct engine_timing *t)
{
	memset(t, 0, sizeof *t);
	if (!e->timed)
		return err_set(ERR_STATE, "engine: no timed submission yet (or timestamps unsupported)");
	uint64_t ns[256];
	int rc = vk_query_ns(e->vk, 0, e->n_ts, ns);
	if (rc)
		return rc;
	t->embed_ns = ns[1] - ns[0];
	for (uint32_t il = 0; il < e->cfg.n_layer; il++) {
		t->attn_ns += ns[2 + 2 * il] - ns[1 + 2 * il];
		t->ffn_ns += ns[3 + 2 * il] - ns[2 + 2 * il];
	}
	t->head_ns = ns[e->n_ts - 1] - ns[e->n_ts - 2];
	t->total_ns = ns[e->n_ts - 1] - ns[0];
	return 0;
}
