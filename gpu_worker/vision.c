/* vision: the Gemma 3 vision tower on Vulkan (see vision.h). */
#include "gpu_worker/vision.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/quant.h"
#include "gpu_worker/engine.h"

#define VIS_MM_BM 64u /* mul_mm's tile: 64 weight rows x BN tokens */
#define VIS_MM_BN 64u
#define VIS_CM_MIN_WG 64u /* large matrix-core tiles from this many workgroups (as engine.c) */
#define VIS_MAX_HD 128u /* registers: shaders/vis_attn.comp keeps q and the output sum of a head per thread */

struct vis_ln_push { uint32_t n, x_stride, y_stride; float eps; };
struct vis_bias_push { uint32_t n, x_stride, y_stride, mode; };
struct vis_attn_push { uint32_t n, hd, n_embd, qkv_stride; float scale; };
struct vis_pool_push { uint32_t n, pps, tps, merge; float eps; };

struct vis_layer {
	struct vk_buf *ln1_w, *ln1_b, *ln2_w, *ln2_b, *qkv_w, *qkv_b, *o_w, *o_b, *up_w, *up_b, *down_w, *down_b;
};

struct vision_gpu {
	struct vk_ctx *vk;
	struct vision_config cfg;
	uint32_t mat_type;       /* TENSOR_F32 or TENSOR_F16 */
	uint32_t kp;             /* 3*patch*patch rounded up to 32 */
	uint32_t ffp;            /* n_ff rounded up to 32 */
	VkDescriptorPool pool;   /* this tower's sets (freed with it) */
	struct vk_pipe mm, ln, bias, attn, pool_p;
	struct vk_pipe cm, cms;  /* mul_mm_cm(s) on matrix cores, when the device has them */
	bool use_cm;
	struct vk_buf *patch_w, *patch_b, *pos, *post_w, *post_b, *soft, *proj;
	struct vis_layer *layers;
	/* activations */
	struct vk_buf *cols, *h, *xn, *qkv, *att, *tmp, *ff, *pooled, *out, *dummy;
	VkCommandBuffer cb;
	uint64_t last_ns;
};

/* Padded widths are multiples of 64: mul_mm needs 32, the matrix-core
 * kernel's K step is 64. */
static uint32_t round64(uint32_t n)
{
	return (n + 63u) & ~63u;
}

static int buf_new(struct vision_gpu *v, enum vk_buf_kind kind, size_t bytes, struct vk_buf **out)
{
	int rc = vk_buf_create(v->vk, kind, bytes ? bytes : 4, out);
	if (!rc && kind == VK_BUF_DEVICE)
		rc = vk_fill_zero(v->vk, *out);
	return rc;
}

static int upload_floats(struct vision_gpu *v, const float *f, size_t n, struct vk_buf **out)
{
	int rc = buf_new(v, VK_BUF_DEVICE, n * sizeof(float), out);
	return rc ? rc : vk_upload(v->vk, *out, 0, f, n * sizeof(float));
}

/* A vector tensor as f32. */
static int upload_vec(struct vision_gpu *v, const struct model_tensor *t, uint32_t n, struct vk_buf **out)
{
	float *f = malloc((size_t)n * sizeof(float));
	if (!f)
		return err_set(ERR_NOMEM, "vision: out of memory");
	int rc = model_tensor_rows_f32(t, 0, model_tensor_nelems(t) / t->ne[0], f);
	if (!rc)
		rc = upload_floats(v, f, n, out);
	free(f);
	return rc;
}

/* rows x cols f32 (row-major, cols a multiple of 32) in the tower's matrix
 * type. */
static int upload_mat(struct vision_gpu *v, const float *f, uint32_t rows, uint32_t cols, struct vk_buf **out)
{
	size_t n = (size_t)rows * cols;
	if (v->mat_type == TENSOR_F32)
		return upload_floats(v, f, n, out);
	uint16_t *h = malloc(n * sizeof(uint16_t));
	if (!h)
		return err_set(ERR_NOMEM, "vision: out of memory");
	int rc = quant_quantize(TENSOR_F16, f, h, n);
	if (!rc)
		rc = buf_new(v, VK_BUF_DEVICE, n * sizeof(uint16_t), out);
	if (!rc)
		rc = vk_upload(v->vk, *out, 0, h, n * sizeof(uint16_t));
	free(h);
	return rc;
}

/* Tensor t ([rows][in] in the file) as rows of `cols` >= in, zero padded,
 * placed at row offset row0 of dst ([*][cols]). */
static int rows_into(const struct model_tensor *t, uint32_t in, uint32_t rows, uint32_t cols, float *dst,
		     uint32_t row0)
{
	float *tmp = malloc((size_t)in * rows * sizeof(float));
	if (!tmp)
		return err_set(ERR_NOMEM, "vision: out of memory");
	int rc = model_tensor_rows_f32(t, 0, model_tensor_nelems(t) / t->ne[0], tmp);
	for (uint32_t r = 0; r < rows && !rc; r++) {
		memcpy(dst + (size_t)(row0 + r) * cols, tmp + (size_t)r * in, in * sizeof(float));
		memset(dst + (size_t)(row0 + r) * cols + in, 0, (cols - in) * sizeof(float));
	}
	free(tmp);
	return rc;
}

static int upload_layer(struct vision_gpu *v, const struct mmproj_layer *S, struct vis_layer *L)
{
	uint32_t d = v->cfg.n_embd, f = v->cfg.n_ff;
	size_t big = (size_t)3 * d * d > (size_t)f * d ? (size_t)3 * d * d : (size_t)v->ffp * d;
	if ((size_t)d * v->ffp > big)
		big = (size_t)d * v->ffp;
	float *m = malloc(big * sizeof(float)), *b = malloc((size_t)3 * d * sizeof(float));
	int rc = m && b ? 0 : err_set(ERR_NOMEM, "vision: out of memory");
	if (!rc) rc = upload_vec(v, S->ln1_w, d, &L->ln1_w);
	if (!rc) rc = upload_vec(v, S->ln1_b, d, &L->ln1_b);
	if (!rc) rc = upload_vec(v, S->ln2_w, d, &L->ln2_w);
	if (!rc) rc = upload_vec(v, S->ln2_b, d, &L->ln2_b);
	/* q, k and v as one [3d][d] product; their biases side by side */
	if (!rc) rc = rows_into(S->q_w, d, d, d, m, 0);
	if (!rc) rc = rows_into(S->k_w, d, d, d, m, d);
	if (!rc) rc = rows_into(S->v_w, d, d, d, m, 2 * d);
	if (!rc) rc = upload_mat(v, m, 3 * d, d, &L->qkv_w);
	if (!rc) rc = model_tensor_rows_f32(S->q_b, 0, 1, b);
	if (!rc) rc = model_tensor_rows_f32(S->k_b, 0, 1, b + d);
	if (!rc) rc = model_tensor_rows_f32(S->v_b, 0, 1, b + 2 * d);
	if (!rc) rc = upload_floats(v, b, (size_t)3 * d, &L->qkv_b);
	if (!rc) rc = rows_into(S->o_w, d, d, d, m, 0);
	if (!rc) rc = upload_mat(v, m, d, d, &L->o_w);
	if (!rc) rc = upload_vec(v, S->o_b, d, &L->o_b);
	if (!rc) rc = rows_into(S->up_w, d, f, d, m, 0);
	if (!rc) rc = upload_mat(v, m, f, d, &L->up_w);
	if (!rc) rc = upload_vec(v, S->up_b, f, &L->up_b);
	/* down's rows padded to ffp columns: the padding of ff stays zero */
	if (!rc) rc = rows_into(S->down_w, f, d, v->ffp, m, 0);
	if (!rc) rc = upload_mat(v, m, d, v->ffp, &L->down_w);
	if (!rc) rc = upload_vec(v, S->down_b, d, &L->down_b);
	free(m);
	free(b);
	return rc;
}

static void destroy_bufs(struct vision_gpu *v)
{
	struct vk_buf **all[] = { &v->patch_w, &v->patch_b, &v->pos, &v->post_w, &v->post_b, &v->soft, &v->proj,
				  &v->cols, &v->h, &v->xn, &v->qkv, &v->att, &v->tmp, &v->ff, &v->pooled, &v->out,
				  &v->dummy };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
		vk_buf_destroy(v->vk, *all[i]);
		*all[i] = NULL;
	}
	if (v->layers) {
		for (uint32_t i = 0; i < v->cfg.n_layer; i++) {
			struct vis_layer *L = &v->layers[i];
			struct vk_buf *lb[] = { L->ln1_w, L->ln1_b, L->ln2_w, L->ln2_b, L->qkv_w, L->qkv_b, L->o_w,
						L->o_b, L->up_w, L->up_b, L->down_w, L->down_b };
			for (size_t k = 0; k < sizeof lb / sizeof lb[0]; k++)
				vk_buf_destroy(v->vk, lb[k]);
		}
		free(v->layers);
		v->layers = NULL;
	}
}

void vision_gpu_destroy(struct vision_gpu *v)
{
	if (!v)
		return;
	if (v->cb)
		vk_cmd_free(v->vk, v->cb);
	vk_pipe_destroy(v->vk, &v->mm);
	vk_pipe_destroy(v->vk, &v->cm);
	vk_pipe_destroy(v->vk, &v->cms);
	vk_pipe_destroy(v->vk, &v->ln);
	vk_pipe_destroy(v->vk, &v->bias);
	vk_pipe_destroy(v->vk, &v->attn);
	vk_pipe_destroy(v->vk, &v->pool_p);
	destroy_bufs(v);
	if (v->pool)
		vkDestroyDescriptorPool(v->vk->dev, v->pool, NULL);
	free(v);
}

/* ---- recording ---- */

/* Sets come from the tower's own pool: swap it in for vk_set_create. */
static int set_for(struct vision_gpu *v, const struct vk_pipe *p, const struct vk_bind *b, VkDescriptorSet *out)
{
	VkDescriptorPool keep = v->vk->desc_pool;
	v->vk->desc_pool = v->pool;
	int rc = vk_set_create(v->vk, p, b, out);
	v->vk->desc_pool = keep;
	return rc;
}

/* y[n_tok][y_stride] (at y_off) = W[nrows][ncols] x[n_tok][x_stride] */
static int rec_mm(struct vision_gpu *v, struct vk_buf *w, uint32_t nrows, uint32_t ncols, struct vk_buf *x,
		  uint32_t x_stride, struct vk_buf *y, uint32_t y_stride, uint32_t n_tok)
{
	struct vk_bind b[VK_MAX_BINDINGS];
	for (uint32_t i = 0; i < ENGINE_MAT_BINDINGS; i++)
		b[i] = (struct vk_bind){ v->dummy, 0, 0 };
	b[0].buf = w;
	b[1].buf = x;
	b[2].buf = y;
	VkDescriptorSet s;
	int rc = set_for(v, &v->mm, b, &s);
	if (rc)
		return rc;
	struct mv_push p = {
		.ncols = ncols, .nrows = nrows,
		.row_bytes = ncols * (v->mat_type == TENSOR_F32 ? 4u : 2u),
		.x_stride = x_stride, .x_off = 0, .y_stride = y_stride, .y_off = 0, .n_tok = n_tok,
		.nrows_valid = nrows, .tpr = 1, .tail = 0,
	};
	uint32_t gx = (nrows + ENGINE_CM_BM - 1) / ENGINE_CM_BM, gy = (n_tok + ENGINE_CM_BN - 1) / ENGINE_CM_BN;
	if (v->use_cm && ncols % 64 == 0 && gx * gy >= VIS_CM_MIN_WG)
		vk_cmd_dispatch(v->cb, &v->cm, s, &p, gx, gy, 1);
	else if (v->use_cm && ncols % 64 == 0)
		vk_cmd_dispatch(v->cb, &v->cms, s, &p, (nrows + ENGINE_CMS_BM - 1) / ENGINE_CMS_BM,
				(n_tok + ENGINE_CMS_BN - 1) / ENGINE_CMS_BN, 1);
	else
		vk_cmd_dispatch(v->cb, &v->mm, s, &p, (nrows + VIS_MM_BM - 1) / VIS_MM_BM,
				(n_tok + VIS_MM_BN - 1) / VIS_MM_BN, 1);
	vk_cmd_barrier(v->cb);
	return 0;
}

static int rec4(struct vision_gpu *v, const struct vk_pipe *p, struct vk_buf *b0, struct vk_buf *b1,
		struct vk_buf *b2, struct vk_buf *b3, const void *push, uint32_t gx, uint32_t gy)
{
	struct vk_bind b[4] = { { b0, 0, 0 }, { b1, 0, 0 }, { b2, 0, 0 }, { b3, 0, 0 } };
	VkDescriptorSet s;
	int rc = set_for(v, p, b, &s);
	if (rc)
		return rc;
	vk_cmd_dispatch(v->cb, p, s, push, gx, gy, 1);
	vk_cmd_barrier(v->cb);
	return 0;
}

static int rec_ln(struct vision_gpu *v, struct vk_buf *x, struct vk_buf *w, struct vk_buf *b, struct vk_buf *y)
{
	struct vis_ln_push p = { v->cfg.n_embd, v->cfg.n_embd, v->cfg.n_embd, v->cfg.eps };
	return rec4(v, &v->ln, x, w, b, y, &p, v->cfg.n_patches, 1);
}

static int rec_bias(struct vision_gpu *v, uint32_t mode, struct vk_buf *x, uint32_t n, uint32_t x_stride,
		    struct vk_buf *b, struct vk_buf *extra, struct vk_buf *y, uint32_t y_stride)
{
	struct vis_bias_push p = { n, x_stride, y_stride, mode };
	return rec4(v, &v->bias, x, b, extra ? extra : v->dummy, y, &p, (n + 255) / 256, v->cfg.n_patches);
}

static int record(struct vision_gpu *v)
{
	const struct vision_config *c = &v->cfg;
	uint32_t d = c->n_embd, np = c->n_patches;
	int rc = vk_cmd_alloc(v->vk, &v->cb);
	if (!rc)
		rc = vk_cmd_begin(v->cb, false);
	if (rc)
		return rc;
	bool ts = v->vk->timestamps && v->vk->n_queries >= 2;
	if (ts) {
		vk_cmd_reset_queries(v->cb, v->vk, 0, 2);
		vk_cmd_timestamp(v->cb, v->vk, 0);
	}
	/* patch embedding: conv as a product over unrolled patches, + bias + position */
	if (!rc) rc = rec_mm(v, v->patch_w, d, v->kp, v->cols, v->kp, v->tmp, d, np);
	if (!rc) rc = rec_bias(v, 0, v->tmp, d, d, v->patch_b, v->pos, v->h, d);
	struct vis_attn_push ap = { np, c->head_dim, d, 3 * d, 1.0f / sqrtf((float)c->head_dim) };
	for (uint32_t il = 0; il < c->n_layer && !rc; il++) {
		struct vis_layer *L = &v->layers[il];
		if (!rc) rc = rec_ln(v, v->h, L->ln1_w, L->ln1_b, v->xn);
		if (!rc) rc = rec_mm(v, L->qkv_w, 3 * d, d, v->xn, d, v->qkv, 3 * d, np);
		if (!rc) rc = rec_bias(v, 3, v->qkv, 3 * d, 3 * d, L->qkv_b, NULL, v->qkv, 3 * d);
		if (!rc) rc = rec4(v, &v->attn, v->qkv, v->att, v->dummy, v->dummy, &ap, (np + 63) / 64, c->n_head);
		if (!rc) rc = rec_mm(v, L->o_w, d, d, v->att, d, v->tmp, d, np);
		if (!rc) rc = rec_bias(v, 1, v->tmp, d, d, L->o_b, NULL, v->h, d);
		if (!rc) rc = rec_ln(v, v->h, L->ln2_w, L->ln2_b, v->xn);
		if (!rc) rc = rec_mm(v, L->up_w, c->n_ff, d, v->xn, d, v->ff, v->ffp, np);
		if (!rc) rc = rec_bias(v, 2, v->ff, c->n_ff, v->ffp, L->up_b, NULL, v->ff, v->ffp);
		if (!rc) rc = rec_mm(v, L->down_w, d, v->ffp, v->ff, v->ffp, v->tmp, d, np);
		if (!rc) rc = rec_bias(v, 1, v->tmp, d, d, L->down_b, NULL, v->h, d);
	}
	if (!rc) rc = rec_ln(v, v->h, v->post_w, v->post_b, v->xn);
	struct vis_pool_push pp = { d, c->patches_per_side, c->tokens_per_side, c->merge, c->eps };
	if (!rc) rc = rec4(v, &v->pool_p, v->xn, v->soft, v->pooled, v->dummy, &pp, c->n_tokens, 1);
	if (!rc) rc = rec_mm(v, v->proj, c->proj_dim, d, v->pooled, d, v->out, c->proj_dim, c->n_tokens);
	if (ts)
		vk_cmd_timestamp(v->cb, v->vk, 1);
	if (vkEndCommandBuffer(v->cb) != VK_SUCCESS && !rc)
		rc = err_set(ERR_DEVICE, "vision: vkEndCommandBuffer failed");
	return rc;
}

int vision_gpu_create(struct vk_ctx *vk, const struct mmproj *p, struct vision_gpu **out)
{
	*out = NULL;
	const struct vision_config *c = &p->cfg;
	int rc = mmproj_check_config(p->path, c);
	if (rc)
		return rc;
	if (c->n_embd % 32 || c->proj_dim % 4 || c->head_dim > VIS_MAX_HD)
		return err_set(ERR_UNSUP, "%s: vision width %u (a multiple of 32), projection %u (of 4) or head %u (<= %u) not supported",
			       p->path, c->n_embd, c->proj_dim, c->head_dim, VIS_MAX_HD);
	struct vision_gpu *v = calloc(1, sizeof *v);
	if (!v)
		return err_set(ERR_NOMEM, "vision: out of memory");
	v->vk = vk;
	v->cfg = *c;
	uint32_t d = c->n_embd, np = c->n_patches;
	v->kp = round64(3 * c->patch_size * c->patch_size);
	v->ffp = round64(c->n_ff);
	/* f32 files stay f32 (tests compare with the reference at f32
	 * tolerance); anything else runs as f16, as llama.cpp's mmproj files are */
	v->mat_type = TENSOR_F32;
	for (uint32_t i = 0; i < c->n_layer; i++)
		if (p->layers[i].q_w->type != TENSOR_F32 || p->layers[i].up_w->type != TENSOR_F32)
			v->mat_type = TENSOR_F16;
	v->layers = calloc(c->n_layer, sizeof *v->layers);
	if (!v->layers) {
		free(v);
		return err_set(ERR_NOMEM, "vision: out of memory");
	}
	/* sets: 11 per layer (2 norms, 4 products, 4 bias steps, attention) and
	 * 5 around them (record()), each binding at most 11 buffers */
	uint32_t n_sets = 11 * c->n_layer + 8;
	VkDescriptorPoolSize ps = { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, n_sets * ENGINE_MAT_BINDINGS };
	VkDescriptorPoolCreateInfo dpci = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
		.maxSets = n_sets, .poolSizeCount = 1, .pPoolSizes = &ps,
	};
	if (vkCreateDescriptorPool(vk->dev, &dpci, NULL, &v->pool) != VK_SUCCESS) {
		vision_gpu_destroy(v);
		return err_set(ERR_DEVICE, "vision: vkCreateDescriptorPool failed");
	}
	uint32_t bn = VIS_MM_BN;
	const char *mm = v->mat_type == TENSOR_F32 ? "mul_mm_f32" : "mul_mm_f16";
	if (!rc) rc = vk_pipe_create(vk, mm, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), &bn, 1, &v->mm);
	if (!rc) rc = vk_pipe_create(vk, "vis_ln", 4, sizeof(struct vis_ln_push), NULL, 0, &v->ln);
	if (!rc) rc = vk_pipe_create(vk, "vis_bias", 4, sizeof(struct vis_bias_push), NULL, 0, &v->bias);
	/* matrix cores as the engine uses them (UNICORN_NO_COOPMAT=1: A/B); a
	 * pipeline the driver refuses leaves the tiled kernel */
	const char *nocm = getenv("UNICORN_NO_COOPMAT");
	const VkPhysicalDeviceLimits *lim = &vk->props.limits;
	uint32_t sg = vk->info.subgroup_size, wg[2] = { ENGINE_CM_NSG * sg, ENGINE_CMS_NSG * sg };
	if (!rc && vk->coopmat && !(nocm && !strcmp(nocm, "1")) && sg && wg[0] <= lim->maxComputeWorkGroupInvocations &&
	    wg[0] <= lim->maxComputeWorkGroupSize[0] && lim->maxComputeSharedMemorySize >= ENGINE_CM_SHARED) {
		const char *cmn = v->mat_type == TENSOR_F32 ? "mul_mm_cm_f32" : "mul_mm_cm_f16";
		const char *cmsn = v->mat_type == TENSOR_F32 ? "mul_mm_cms_f32" : "mul_mm_cms_f16";
		v->use_cm = vk_pipe_create(vk, cmn, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), &wg[0], 1, &v->cm) == 0 &&
			    vk_pipe_create(vk, cmsn, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), &wg[1], 1, &v->cms) == 0;
		if (!v->use_cm) {
			err_clear();
			vk_pipe_destroy(vk, &v->cm);
			vk_pipe_destroy(vk, &v->cms);
		}
	}
	uint32_t hd = c->head_dim; /* the attention kernel's arrays are sized by it */
	if (!rc) rc = vk_pipe_create(vk, "vis_attn", 2, sizeof(struct vis_attn_push), &hd, 1, &v->attn);
	if (!rc) rc = vk_pipe_create(vk, "vis_pool", 3, sizeof(struct vis_pool_push), NULL, 0, &v->pool_p);

	/* weights */
	float *pw = NULL;
	if (!rc) {
		uint32_t k = 3 * c->patch_size * c->patch_size;
		size_t pn = (size_t)d * v->kp, qn = (size_t)d * c->proj_dim;
		pw = malloc((pn > qn ? pn : qn) * sizeof(float));
		if (!pw)
			rc = err_set(ERR_NOMEM, "vision: out of memory");
		if (!rc) rc = rows_into(p->patch_w, k, d, v->kp, pw, 0);
		if (!rc) rc = upload_mat(v, pw, d, v->kp, &v->patch_w);
		/* the projection is stored [vision][text]: transpose to rows of text */
		float *t = rc ? NULL : malloc(qn * sizeof(float));
		if (!rc && !t)
			rc = err_set(ERR_NOMEM, "vision: out of memory");
		if (!rc) rc = model_tensor_rows_f32(p->proj, 0, d, t);
		for (uint32_t i = 0; i < d && !rc; i++)
			for (uint32_t j = 0; j < c->proj_dim; j++)
				pw[(size_t)j * d + i] = t[(size_t)i * c->proj_dim + j];
		free(t);
		if (!rc) rc = upload_mat(v, pw, c->proj_dim, d, &v->proj);
	}
	free(pw);
	if (!rc) rc = upload_vec(v, p->patch_b, d, &v->patch_b);
	if (!rc) {
		float *f = malloc((size_t)np * d * sizeof(float));
		rc = f ? model_tensor_rows_f32(p->pos, 0, np, f) : err_set(ERR_NOMEM, "vision: out of memory");
		if (!rc)
			rc = upload_floats(v, f, (size_t)np * d, &v->pos);
		free(f);
	}
	if (!rc) rc = upload_vec(v, p->post_ln_w, d, &v->post_w);
	if (!rc) rc = upload_vec(v, p->post_ln_b, d, &v->post_b);
	if (!rc) rc = upload_vec(v, p->soft_norm, d, &v->soft);
	for (uint32_t i = 0; i < c->n_layer && !rc; i++) {
		rc = upload_layer(v, &p->layers[i], &v->layers[i]);
		if (vk->progress)
			vk->progress(vk->progress_arg);
	}
	/* activations */
	size_t f4 = sizeof(float);
	if (!rc) rc = buf_new(v, VK_BUF_DEVICE, (size_t)np * v->kp * f4, &v->cols);
	if (!rc) rc = buf_new(v, VK_BUF_DEVICE, (size_t)np * d * f4, &v->h);
	if (!rc) rc = buf_new(v, VK_BUF_DEVICE, (size_t)np * d * f4, &v->xn);
	if (!rc) rc = buf_new(v, VK_BUF_DEVICE, (size_t)np * 3 * d * f4, &v->qkv);
	if (!rc) rc = buf_new(v, VK_BUF_DEVICE, (size_t)np * d * f4, &v->att);
	if (!rc) rc = buf_new(v, VK_BUF_DEVICE, (size_t)np * d * f4, &v->tmp);
	if (!rc) rc = buf_new(v, VK_BUF_DEVICE, (size_t)np * v->ffp * f4, &v->ff);
	if (!rc) rc = buf_new(v, VK_BUF_DEVICE, (size_t)c->n_tokens * d * f4, &v->pooled);
	if (!rc) rc = buf_new(v, VK_BUF_DEVICE, (size_t)c->n_tokens * c->proj_dim * f4, &v->out);
	if (!rc) rc = buf_new(v, VK_BUF_DEVICE, 256, &v->dummy);
	if (!rc)
		rc = record(v);
	if (rc) {
		vision_gpu_destroy(v);
		return rc;
	}
	*out = v;
	return 0;
}

const struct vision_config *vision_gpu_config(const struct vision_gpu *v)
{
	return &v->cfg;
}

uint64_t vision_gpu_last_ns(const struct vision_gpu *v)
{
	return v->last_ns;
}

const char *vision_gpu_kernels(const struct vision_gpu *v)
{
	return v->use_cm ? (v->mat_type == TENSOR_F32 ? "mul_mm_cm_f32 (matrix cores)" : "mul_mm_cm_f16 (matrix cores)")
			 : (v->mat_type == TENSOR_F32 ? "mul_mm_f32" : "mul_mm_f16");
}

int vision_gpu_encode(struct vision_gpu *v, const float *pixels, float *out)
{
	const struct vision_config *c = &v->cfg;
	uint32_t S = c->image_size, ps = c->patch_size, pps = c->patches_per_side, k = 3 * ps * ps;
	/* unroll patches: row p holds (channel, ky, kx) as the conv weight's rows */
	float *cols = calloc((size_t)c->n_patches * v->kp, sizeof(float));
	if (!cols)
		return err_set(ERR_NOMEM, "vision: out of memory");
	for (uint32_t py = 0; py < pps; py++)
		for (uint32_t px = 0; px < pps; px++) {
			float *row = cols + ((size_t)py * pps + px) * v->kp;
			for (uint32_t ch = 0; ch < 3; ch++)
				for (uint32_t ky = 0; ky < ps; ky++)
					memcpy(row + (ch * ps + ky) * ps,
					       pixels + ((size_t)ch * S + (size_t)py * ps + ky) * S + (size_t)px * ps,
					       ps * sizeof(float));
		}
	(void)k;
	int rc = vk_upload(v->vk, v->cols, 0, cols, (size_t)c->n_patches * v->kp * sizeof(float));
	free(cols);
	if (!rc)
		rc = vk_submit_wait(v->vk, v->cb);
	if (!rc)
		rc = vk_download(v->vk, v->out, 0, out, (size_t)c->n_tokens * c->proj_dim * sizeof(float));
	uint64_t ns[2];
	v->last_ns = 0;
	if (!rc && v->vk->timestamps && v->vk->n_queries >= 2 && !vk_query_ns(v->vk, 0, 2, ns))
		v->last_ns = ns[1] - ns[0];
	return rc;
}
