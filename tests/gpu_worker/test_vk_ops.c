/* Every shader against a CPU computation on fresh random inputs at odd sizes
 * (lavapipe in CI). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_worker/engine.h"
#include "gpu_worker/regroup.h"
#include "gpu_worker/vk.h"
#include "gpu_worker/x16.h"
#include "common/err.h"
#include "formats/quant.h"

static struct vk_ctx *vk;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void setup(void) { cr_assert_eq(vk_create(NULL, &vk), 0, "vk_create: %s", err_msg()); }
static void teardown(void) { vk_destroy(vk); }

static struct vk_buf *buf_from(const void *data, size_t n)
{
	struct vk_buf *b;
	cr_assert_eq(vk_buf_create(vk, VK_BUF_DEVICE, n, &b), 0, "%s", err_msg());
	if (data)
		cr_assert_eq(vk_upload(vk, b, 0, data, n), 0, "%s", err_msg());
	return b;
}

static void run1(const struct vk_pipe *p, struct vk_buf **bufs, const void *push, uint32_t gx, uint32_t gy, uint32_t gz)
{
	struct vk_bind b[VK_MAX_BINDINGS] = { 0 };
	for (uint32_t i = 0; i < p->n_bindings; i++)
		b[i].buf = bufs[i];
	VkDescriptorSet s;
	cr_assert_eq(vk_set_create(vk, p, b, &s), 0, "%s", err_msg());
	VkCommandBuffer cb;
	cr_assert_eq(vk_cmd_alloc(vk, &cb), 0);
	cr_assert_eq(vk_cmd_begin(cb, true), 0);
	vk_cmd_dispatch(cb, p, s, push, gx, gy, gz);
	vk_cmd_barrier(cb);
	vkEndCommandBuffer(cb);
	cr_assert_eq(vk_submit_wait(vk, cb), 0, "%s", err_msg());
	vk_cmd_free(vk, cb);
}

/* n rows of cols floats quantized as type (TENSOR_Q4_0G: as q4_0, then
 * regrouped as the engine uploads it), their dequantized values in wd; the
 * row length in bytes in *rb. */
static uint8_t *quantize_rows(uint32_t type, const float *wf, float *wd, uint32_t n, uint32_t cols, uint64_t *rb)
{
	uint32_t qt = type == TENSOR_Q4_0G ? TENSOR_Q4_0 : type;
	cr_assert_eq(quant_row_bytes(qt, cols, rb), 0);
	uint8_t *wq = malloc(n * *rb);
	cr_assert_eq(quant_quantize(qt, wf, wq, (uint64_t)n * cols), 0, "%s", err_msg());
	cr_assert_eq(quant_dequantize(qt, wq, wd, (uint64_t)n * cols), 0);
	if (type == TENSOR_Q4_0G) {
		/* rows ending in a half group are longer than the file's */
		*rb = regroup_q4_0_row_bytes(cols);
		uint8_t *g = malloc(n * *rb);
		cr_assert_eq(regroup_q4_0(g, wq, n, cols), 0, "%s", err_msg());
		free(wq);
		wq = g;
	}
	return wq;
}

static void check_close(const float *got, const double *want, const double *mag, size_t n, double rel, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		double tol = rel * (mag ? mag[i] : fabs(want[i])) + 1e-5;
		cr_assert(fabs(got[i] - want[i]) <= tol, "%s[%zu]: got %.7g want %.7g", what, i, got[i], want[i]);
	}
}

static void check_x16_row(const uint32_t *got, const float *row, uint32_t n, const char *what);

/* y = W x (and the GLU variant) for one type, n_tok token columns, through
 * kernel 0 mul_mv, 1 mul_mvs (subgroup, one token per workgroup row), 2 mul_mm
 * (tiled), 3 mul_mvb (mul_mvs with nt token columns per workgroup), 4 mul_mm_cm
 * or 5 mul_mm_cms (large and small tiles on matrix cores: f16 products, a
 * looser bound). mul_mvs
 * and mul_mvb run rpt rows per thread group and tpr threads per row (0: the
 * engine's choice). Returns y (n_tok columns of y_stride = nrows + 3 floats,
 * the outputs at offset 2) for the caller to free. */
static float *check_mv_run(int kernel, uint32_t type, const char *tname, uint32_t ncols, uint32_t nrows, uint32_t n_tok,
			   bool glu, uint32_t rpt, uint32_t nt, uint32_t tpr)
{
	uint32_t wrows = glu ? 2 * nrows : nrows;
	uint64_t rb;
	float *wf = malloc((size_t)wrows * ncols * 4), *wd = malloc((size_t)wrows * ncols * 4);
	for (size_t i = 0; i < (size_t)wrows * ncols; i++)
		wf[i] = frand();
	uint8_t *wq = quantize_rows(type, wf, wd, wrows, ncols, &rb);
	float *x = malloc((size_t)n_tok * ncols * 4);
	for (size_t i = 0; i < (size_t)n_tok * ncols; i++)
		x[i] = frand();
	/* the _x16 kernels (tname "q4_0g_x16") read x as x16 (gpu_worker/x16.h) at
	 * binding 8: the reference takes x's x16 values d q (exact in double) */
	bool x16 = strstr(tname, "_x16") != NULL;
	/* the GLU's _x16q kernel also writes y as x16 at binding 6 through the
	 * mailbox at 7 (shaders/mul_mvs.glsl FFN_X16): y of whole x16 groups */
	bool x16q = strstr(tname, "_x16q") != NULL;
	uint64_t x16b = x16_row_bytes(ncols), yqb = x16q ? x16_row_bytes(nrows) : 0;
	uint32_t *xq = x16 ? malloc(n_tok * x16b) : NULL;
	double *xr = malloc((size_t)n_tok * ncols * sizeof *xr);
	for (uint32_t t = 0; t < n_tok; t++) {
		if (x16)
			x16_quantize(x + (size_t)t * ncols, ncols, xq + t * x16b / 4);
		for (uint32_t c = 0; c < ncols; c++) {
			float d = 1.0f;
			int32_t q = x16 ? x16_q(xq + t * x16b / 4, c, &d) : 0;
			xr[(size_t)t * ncols + c] = x16 ? (double)d * q : x[(size_t)t * ncols + c];
		}
	}
	struct vk_pipe p;
	char name[64];
	/* 6..8: mul_mm_cm's decode tile (_d), split K (_k) and both (_dk) */
	static const char *const kname[9] = { "mul_mv", "mul_mvs", "mul_mm", "mul_mvb", "mul_mm_cm", "mul_mm_cms",
					      "mul_mm_cm", "mul_mm_cm", "mul_mm_cm" };
	static const char *const ksuf[9] = { "", "", "", "", "", "", "_d", "_k", "_dk" };
	snprintf(name, sizeof name, glu ? "%s_glu_%s%s" : "%s_%s%s", kname[kernel], tname, ksuf[kernel]);
	bool mvs = kernel == 1 || kernel == 3, cm = kernel >= 4, splitk = kernel == 7 || kernel == 8;
	bool large = kernel == 4 || kernel >= 6;
	/* mul_mm_cm(s): tile rows x tokens; the workgroup is NSG subgroups */
	uint32_t cm_bm = large ? ENGINE_CM_BM : ENGINE_CMS_BM;
	uint32_t cm_bn = kernel == 6 || kernel == 8 ? ENGINE_CMD_BN : large ? ENGINE_CM_BN : ENGINE_CMS_BN;
	uint32_t cm_wg = (large ? ENGINE_CM_NSG : ENGINE_CMS_NSG) * vk->info.subgroup_size;
	/* split K: three splits of whole 64-column K steps where K allows */
	uint32_t ksplit = (ncols / 64 + 2) / 3 * 64;
	ksplit = ksplit ? ksplit : 64;
	uint32_t nz = (ncols + ksplit - 1) / ksplit;
	uint32_t spec[3] = { mvs ? 128 : cm ? cm_wg : 64, kernel == 3 ? nt : 1, rpt };
	cr_assert_eq(vk_pipe_create(vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec,
				    kernel == 2 ? 0 : mvs ? 3 : 1, &p),
		     0, "%s", err_msg());
	uint32_t y_stride = nrows + 3, y_off = 2;
	/* the norm tail's bindings: a placeholder (tail 0) */
	struct vk_buf *d = buf_from(NULL, 16);
	struct vk_buf *b[ENGINE_MAT_BINDINGS] = { buf_from(wq, wrows * rb), buf_from(x, (size_t)n_tok * ncols * 4),
						  buf_from(NULL, (size_t)n_tok * y_stride * 4), d, d,
						  d, x16q ? buf_from(NULL, n_tok * yqb) : d,
						  x16q ? buf_from(NULL, (size_t)n_tok * nrows * 4) : d,
						  x16 ? buf_from(xq, n_tok * x16b) : d, d,
						  splitk ? buf_from(NULL, (size_t)nz * n_tok * nrows * 4) : d };
	if (x16q) /* an empty mailbox, and a copy of garbage */
		cr_assert_eq(vk_fill_zero(vk, b[7]), 0);
	if (!tpr)
		tpr = mvs ? engine_mvs_tpr_type(type, ncols, 128, 4, strstr(tname, "_gen") != NULL) : engine_mv_tpr(ncols, 64);
	if (mvs && getenv("UNICORN_TEST_TPR")) /* exercise both reduction paths */
		tpr = (uint32_t)atoi(getenv("UNICORN_TEST_TPR"));
	uint32_t valid = glu ? nrows : nrows - 2; /* the last two rows are masked */
	struct mv_push pc = { ncols, nrows, (uint32_t)rb, ncols, 0, y_stride, y_off, n_tok, valid, tpr, 0 };
	if (kernel == 0)
		run1(&p, b, &pc, (nrows + 64 / tpr - 1) / (64 / tpr), (n_tok + 7) / 8, 1);
	else if (mvs) /* x = token group */
		run1(&p, b, &pc, (n_tok + spec[1] - 1) / spec[1], (nrows + 128 / tpr * rpt - 1) / (128 / tpr * rpt), 1);
	else if (cm && splitk) { /* the engine's order: the splits, then their sum */
		struct vk_pipe rp;
		pc.tail = ksplit;
		run1(&p, b, &pc, (nrows + cm_bm - 1) / cm_bm, (n_tok + cm_bn - 1) / cm_bn, nz);
		cr_assert_eq(vk_pipe_create(vk, "mm_splitk_reduce", ENGINE_MAT_BINDINGS, sizeof(struct mv_push), NULL, 0, &rp), 0,
			     "%s", err_msg());
		run1(&rp, b, &pc, (nrows + 255) / 256, n_tok, 1);
		vk_pipe_destroy(vk, &rp);
	} else if (cm)
		run1(&p, b, &pc, (nrows + cm_bm - 1) / cm_bm, (n_tok + cm_bn - 1) / cm_bn, 1);
	else
		run1(&p, b, &pc, (nrows + 63) / 64, (n_tok + 63) / 64, 1);
	float *y = malloc((size_t)n_tok * y_stride * 4);
	cr_assert_eq(vk_download(vk, b[2], 0, y, (size_t)n_tok * y_stride * 4), 0);
	for (uint32_t t = 0; t < n_tok; t++)
		for (uint32_t r = 0; r < nrows; r++) {
			double s = 0, m = 0, s2 = 0, m2 = 0;
			for (uint32_t c = 0; c < ncols; c++) {
				s += (double)wd[(size_t)r * ncols + c] * xr[(size_t)t * ncols + c];
				m += fabs((double)wd[(size_t)r * ncols + c] * xr[(size_t)t * ncols + c]);
				if (glu) {
					s2 += (double)wd[(size_t)(r + nrows) * ncols + c] * xr[(size_t)t * ncols + c];
					m2 += fabs((double)wd[(size_t)(r + nrows) * ncols + c] * xr[(size_t)t * ncols + c]);
				}
			}
			float got = y[(size_t)t * y_stride + y_off + r];
			if (r >= valid) {
				cr_assert(isinf(got) && got < 0, "%s masked row %u: %g", name, r, got);
				continue;
			}
			/* f16 weights and activations: each product within ~2^-10 relative */
			double want = s, tol = (cm ? 1.5e-3 : 1e-5) * m + 1e-5;
			if (glu) {
				double g = 0.5 * s * (1 + tanh(0.7978845608028654 * (s + 0.044715 * s * s * s)));
				want = g * s2;
				tol = 1e-5 * (m * fabs(s2) + m2 * fabs(s) + m * m2) + 1e-5;
			}
			cr_assert(fabs(got - want) <= tol, "%s t %u row %u: got %.7g want %.7g", name, t, r, got, want);
		}
	if (x16q) {
		/* the copy is the reference's of the rows the kernel wrote, and the
		 * kernel left the mailbox empty for the next dispatch */
		uint32_t *yq = malloc(n_tok * yqb), *mb = malloc((size_t)n_tok * nrows * 4);
		cr_assert_eq(vk_download(vk, b[6], 0, yq, n_tok * yqb), 0);
		cr_assert_eq(vk_download(vk, b[7], 0, mb, (size_t)n_tok * nrows * 4), 0);
		for (uint32_t t = 0; t < n_tok; t++) {
			char what[96];
			snprintf(what, sizeof what, "%s t %u: y's x16 copy", name, t);
			check_x16_row(yq + t * yqb / 4, y + (size_t)t * y_stride + y_off, nrows, what);
		}
		for (size_t i = 0; i < (size_t)n_tok * nrows; i++)
			cr_assert_eq(mb[i], 0u, "%s: mailbox word %zu left at %#x", name, i, mb[i]);
		free(yq);
		free(mb);
		vk_buf_destroy(vk, b[6]);
		vk_buf_destroy(vk, b[7]);
	}
	for (int i = 0; i < 4; i++)
		vk_buf_destroy(vk, b[i]);
	if (x16)
		vk_buf_destroy(vk, b[8]);
	if (splitk)
		vk_buf_destroy(vk, b[10]);
	vk_pipe_destroy(vk, &p);
	free(wf);
	free(wd);
	free(wq);
	free(x);
	free(xq);
	free(xr);
	return y;
}

static void check_mv_kernel(int kernel, uint32_t type, const char *tname, uint32_t ncols, uint32_t nrows, uint32_t n_tok,
			    bool glu)
{
	free(check_mv_run(kernel, type, tname, ncols, nrows, n_tok, glu, engine_mvs_rows(type, 2), 1, 0));
}

static void check_mv(uint32_t type, const char *tname, uint32_t ncols, uint32_t nrows, uint32_t n_tok, bool glu)
{
	check_mv_kernel(0, type, tname, ncols, nrows, n_tok, glu);
}

/* Two check_mv_run outputs of n_tok columns and nrows rows agree bit for bit
 * (what: the caller's description of the pair). */
static void assert_same_outputs(const float *a, const float *b, uint32_t n_tok, uint32_t nrows, const char *what)
{
	for (uint32_t t = 0; t < n_tok; t++)
		for (uint32_t r = 0; r < nrows; r++) {
			size_t o = (size_t)t * (nrows + 3) + 2 + r;
			cr_assert(memcmp(&a[o], &b[o], 4) == 0, "%s t %u row %u: %.9g vs %.9g", what, t, r, a[o], b[o]);
		}
}

TestSuite(vk_ops, .init = setup, .fini = teardown, .timeout = 60);

/* Every weight type through the subgroup matvec and the tiled mat-mat kernel at
 * odd sizes: rows not a multiple of the rows per workgroup / the 64-row tile,
 * tokens not a multiple of 64, K not a multiple of the 64-wide K step. */
static const struct { uint32_t type; const char *name; uint32_t blk; } all_types[] = {
	{ TENSOR_F32, "f32", 32 }, { TENSOR_F16, "f16", 32 }, { TENSOR_BF16, "bf16", 32 },
	{ TENSOR_Q8_0, "q8_0", 32 }, { TENSOR_Q4_0, "q4_0", 32 }, { TENSOR_Q4_K, "q4_k", 256 },
	{ TENSOR_Q6_K, "q6_k", 256 }, { TENSOR_Q4_1, "q4_1", 32 }, { TENSOR_Q5_0, "q5_0", 32 },
	{ TENSOR_Q5_1, "q5_1", 32 }, { TENSOR_IQ4_NL, "iq4_nl", 32 }, { TENSOR_Q2_K, "q2_k", 256 },
	{ TENSOR_Q3_K, "q3_k", 256 }, { TENSOR_Q5_K, "q5_k", 256 }, { TENSOR_IQ4_XS, "iq4_xs", 256 },
	/* the engine's regrouped q4_0 (rows of whole 256-element groups) */
	{ TENSOR_Q4_0G, "q4_0g", 256 },
	/* and rows that end in a half group (n x 128 elements, n odd: 1B's 1152) */
	{ TENSOR_Q4_0G, "q4_0g", 128 },
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* One test per type (each its own process and timeout: on lavapipe the first
 * dispatch of a kernel compiles it, about a second per kernel and type). */
static size_t type_idx[N_TYPES];
static struct criterion_test_params every_type(void)
{
	for (size_t i = 0; i < N_TYPES; i++)
		type_idx[i] = i;
	return cr_make_param_array(size_t, type_idx, N_TYPES);
}

ParameterizedTestParameters(vk_ops, mvs_type) { return every_type(); }
ParameterizedTest(size_t *i, vk_ops, mvs_type)
{
	uint32_t type = all_types[*i].type, b = all_types[*i].blk;
	const char *name = all_types[*i].name;
	check_mv_kernel(1, type, name, b == 32 ? 32 * 37 : b * 3, 37, 1, false);
	check_mv_kernel(1, type, name, b == 32 ? 32 * 3 : b, 13, 2, true);
	check_mv_kernel(1, type, name, b == 32 ? 32 * 7 : b * 2, 5, 1, true);
	if (engine_mvs_unit(type, false) == engine_mvs_unit(type, true))
		return;
	/* the generic whole-block unit (UNICORN_VK_MVS_GENERIC=1) */
	char gen[32];
	snprintf(gen, sizeof gen, "%s_gen", name);
	check_mv_kernel(1, type, gen, b == 32 ? 32 * 37 : b * 3, 37, 1, false);
	check_mv_kernel(1, type, gen, b == 32 ? 32 * 3 : b, 13, 2, true);
}

/* The per-type fast units of mul_mvs (8-element quarter blocks of q4_1, q5_0,
 * q5_1, iq4_nl, and of iq4_xs sub-blocks; 16-element units of q3_k..q6_k;
 * one quant word of four regrouped q4_0 blocks): rows whose byte length is
 * and is not a multiple of 4 (q5_0, iq4_nl, q3_k, q6_k blocks start on either
 * half of a word), lane-shuffle and shared-memory reductions (tpr up to 128),
 * GLU, 1..3 columns; and mul_mvb with 4 columns bitwise equal to mul_mvs. */
Test(vk_ops, mvs_fast_units, .timeout = 240)
{
	static const struct { uint32_t type; const char *name; uint32_t blk; } q[] = {
		{ TENSOR_Q4_1, "q4_1", 32 }, { TENSOR_Q5_0, "q5_0", 32 }, { TENSOR_Q5_1, "q5_1", 32 },
		{ TENSOR_IQ4_NL, "iq4_nl", 32 }, { TENSOR_IQ4_XS, "iq4_xs", 256 }, { TENSOR_Q3_K, "q3_k", 256 },
		{ TENSOR_Q4_K, "q4_k", 256 },
		{ TENSOR_Q5_K, "q5_k", 256 }, { TENSOR_Q6_K, "q6_k", 256 }, { TENSOR_Q4_0G, "q4_0g", 256 },
		{ TENSOR_Q4_0G, "q4_0g_x16", 256 }, /* against x as x16 */
		/* half-group rows: the shapes' odd block counts (1B's 1152 columns in 9) */
		{ TENSOR_Q4_0G, "q4_0g", 128 }, { TENSOR_Q4_0G, "q4_0g_x16", 128 },
	};
	static const uint32_t shapes[][4] = {
		/* blocks per row, nrows, n_tok, tpr (0: the engine's) */
		{ 37, 37, 1, 0 }, { 9, 13, 3, 4 }, { 33, 9, 2, 128 }, { 5, 70, 1, 64 },
		/* Gemma 3 1B rows: 1152 (36 blocks of 32), 6912 (27 of 256) */
		{ 36, 67, 1, 0 }, { 27, 19, 2, 0 },
	};
	for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
		for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
			for (int glu = 0; glu < 2; glu++) {
				const uint32_t *sh = shapes[k];
				uint32_t ncols = sh[0] * q[i].blk;
				uint64_t seed = rng; /* both kernels get the same inputs */
				float *a = check_mv_run(1, q[i].type, q[i].name, ncols, sh[1], sh[2], glu, 1, 1, sh[3]);
				rng = seed;
				float *b = check_mv_run(3, q[i].type, q[i].name, ncols, sh[1], sh[2], glu, 1, 4, sh[3]);
				char what[64];
				snprintf(what, sizeof what, "%s glu %d: mvs vs mvb", q[i].name, glu);
				assert_same_outputs(a, b, sh[2], sh[1], what);
				free(a);
				free(b);
			}
}

/* The GLU's _x16q kernel (down on x16, shaders/mul_mvs.glsl FFN_X16): y as
 * the plain x16 GLU's, bitwise, and its x16 copy as gpu_worker/x16.c's of y
 * (check_mv_run), the mailbox empty afterwards; 1 to 64 rows per workgroup
 * (tpr 128 to 2: one quantizing workgroup per group of 128 rows, or one per
 * workgroup), one to three token columns, 1 to 3 groups per row. */
Test(vk_ops, glu_x16_copy, .timeout = 120)
{
	static const uint32_t shapes[][4] = {
		/* ncols, nrows, n_tok, tpr (0: the engine's) */
		{ 256, 128, 1, 0 }, { 768, 384, 2, 0 }, { 1152, 256, 1, 128 }, { 512, 128, 3, 2 }, { 256, 256, 1, 32 },
	};
	for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
		const uint32_t *sh = shapes[k];
		uint64_t seed = rng; /* both kernels get the same inputs */
		float *a = check_mv_run(1, TENSOR_Q4_0G, "q4_0g_x16q", sh[0], sh[1], sh[2], true, 1, 1, sh[3]);
		rng = seed;
		float *b = check_mv_run(1, TENSOR_Q4_0G, "q4_0g_x16", sh[0], sh[1], sh[2], true, 1, 1, sh[3]);
		assert_same_outputs(a, b, sh[2], sh[1], "glu x16q vs x16");
		free(a);
		free(b);
	}
}

/* mul_mvs with 1..4 rows per thread group (q4_0/q8_0/q4_0g): row counts that are and
 * are not a multiple of the rows per workgroup, rows whose byte length is and
 * is not a multiple of 4 (blocks starting on either half of a word), GLU, 1..3
 * token columns, lane-shuffle and shared-memory reductions; and mul_mvb (one
 * row per thread group, 4 or 8 token columns) bitwise equal to it. */
Test(vk_ops, mvs_rows_per_thread, .timeout = 240)
{
	/* regrouped q4_0 on 8x the columns (whole 256-element groups) and on 4x
	 * (odd counts end in a half group) */
	static const struct { uint32_t type; const char *name; uint32_t f; } q[] = {
		{ TENSOR_Q4_0, "q4_0", 1 }, { TENSOR_Q8_0, "q8_0", 1 }, { TENSOR_Q4_0G, "q4_0g", 8 },
		{ TENSOR_Q4_0G, "q4_0g_x16", 8 }, { TENSOR_Q4_0G, "q4_0g", 4 }, { TENSOR_Q4_0G, "q4_0g_x16", 4 } };
	static const uint32_t shapes[][4] = {
		/* ncols, nrows, n_tok, tpr (0: the engine's) */
		{ 32 * 40, 64, 1, 0 }, { 32 * 37, 37, 2, 0 }, { 32 * 7, 13, 3, 4 }, { 32 * 64, 70, 1, 128 }, { 32 * 33, 129, 1, 64 },
	};
	for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
		for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
			for (uint32_t rpt = 1; rpt <= 4; rpt++)
				for (int glu = 0; glu < 2; glu++) {
					const uint32_t *sh = shapes[k];
					uint32_t n_tok = sh[2] + (rpt == 4 ? 5 : 0); /* up to 8 columns */
					uint64_t seed = rng; /* both kernels get the same inputs */
					float *a = check_mv_run(1, q[i].type, q[i].name, sh[0] * q[i].f, sh[1], n_tok, glu, rpt, 1, sh[3]);
					uint32_t nt = rpt % 2 ? 4 : 8;
					rng = seed;
					float *b = check_mv_run(3, q[i].type, q[i].name, sh[0] * q[i].f, sh[1], n_tok, glu, 1, nt, sh[3]);
					char what[64];
					snprintf(what, sizeof what, "%s rpt %u glu %d: mvs vs mvb", q[i].name, rpt, glu);
					assert_same_outputs(a, b, n_tok, sh[1], what);
					free(a);
					free(b);
				}
}

/* Regrouped q4_0 (gpu_worker/regroup.h) holds the same weights: the kernels
 * that dequantize whole blocks (mul_mv, mul_mm, and mul_mm_cm/cms where the
 * device has matrix cores) give bitwise the q4_0 kernels' results on the same
 * blocks, GLU included. */
Test(vk_ops, q4_0g_equals_q4_0, .timeout = 120)
{
	static const uint32_t shapes[][4] = {
		/* kernel, ncols, nrows, n_tok */
		{ 0, 256 * 3, 37, 5 }, { 0, 256, 13, 1 }, { 2, 256 * 5, 67, 70 }, { 2, 512, 37, 17 },
		{ 4, 256 * 5, 130, 150 }, { 5, 256 * 2, 67, 70 },
		/* rows that end in a half group (1B's 1152 columns) */
		{ 0, 128 * 9, 37, 5 }, { 0, 128, 13, 1 }, { 2, 128 * 9, 67, 70 }, { 4, 128 * 9, 130, 150 },
		{ 5, 128 * 3, 67, 70 },
	};
	for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
		const uint32_t *sh = shapes[k];
		if (sh[0] >= 4 && !vk->coopmat)
			continue;
		for (int glu = 0; glu < (sh[0] == 0 ? 2 : 1); glu++) {
			uint64_t seed = rng;
			float *a = check_mv_run((int)sh[0], TENSOR_Q4_0, "q4_0", sh[1], sh[2], sh[3], glu, 1, 1, 0);
			rng = seed;
			float *b = check_mv_run((int)sh[0], TENSOR_Q4_0G, "q4_0g", sh[1], sh[2], sh[3], glu, 1, 1, 0);
			char what[64];
			snprintf(what, sizeof what, "kernel %u glu %d: q4_0 vs q4_0g", sh[0], glu);
			assert_same_outputs(a, b, sh[3], sh[2], what);
			free(a);
			free(b);
		}
	}
}

Test(vk_ops, mvs_wide_rows)
{
	/* long rows: tpr above the subgroup size (subgroupAdd + shared-memory path) */
	check_mv_kernel(1, TENSOR_Q4_0, "q4_0", 32 * 301, 9, 1, false);
	check_mv_kernel(1, TENSOR_Q8_0, "q8_0", 32 * 257, 7, 1, true);
	check_mv_kernel(1, TENSOR_Q6_K, "q6_k", 256 * 33, 3, 1, false);
	check_mv_kernel(1, TENSOR_Q4_0G, "q4_0g", 256 * 37, 5, 1, true);
}

ParameterizedTestParameters(vk_ops, mm_type) { return every_type(); }
ParameterizedTest(size_t *i, vk_ops, mm_type)
{
	uint32_t type = all_types[*i].type, b = all_types[*i].blk;
	const char *name = all_types[*i].name;
	check_mv_kernel(2, type, name, b == 32 ? 32 * 5 : b, 67, 70, false);
	check_mv_kernel(2, type, name, b == 32 ? 32 * 2 : 2 * b, 37, 17, false);
}

/* The batch kernel: token counts not a multiple of its group (the last
 * group computes on a repeated token and stores nothing past n_tok). */
ParameterizedTestParameters(vk_ops, mvb_type) { return every_type(); }
ParameterizedTest(size_t *i, vk_ops, mvb_type)
{
	uint32_t type = all_types[*i].type, b = all_types[*i].blk;
	const char *name = all_types[*i].name;
	free(check_mv_run(3, type, name, b == 32 ? 32 * 11 : b * 2, 37, 7, false, 1, 4, 0));
	free(check_mv_run(3, type, name, b == 32 ? 32 * 3 : b, 13, 5, true, 1, 4, 0));
	if (engine_mvs_unit(type, false) == engine_mvs_unit(type, true))
		return;
	char gen[32];
	snprintf(gen, sizeof gen, "%s_gen", name);
	free(check_mv_run(3, type, gen, b == 32 ? 32 * 3 : b, 13, 5, true, 1, 4, 0));
}

/* The first-generation matvec (any token count; the fallback) for every type. */
ParameterizedTestParameters(vk_ops, mv_type) { return every_type(); }
ParameterizedTest(size_t *i, vk_ops, mv_type)
{
	uint32_t type = all_types[*i].type, b = all_types[*i].blk;
	const char *name = all_types[*i].name;
	check_mv(type, name, b == 32 ? 32 * 7 : b * 3, 37, 1, false);
	check_mv(type, name, b == 32 ? 32 * 3 : b, 19, 10, false);
	check_mv(type, name, b == 32 ? 32 * 5 : b, 11, 3, true);
}

/* The mat-mat kernel on matrix cores (VK_KHR_cooperative_matrix): the large,
 * small and decode tiles, split K on the large and decode tiles (then
 * mm_splitk_reduce), every type: rows not a multiple of the tile or of 16,
 * tokens not a multiple of 16 or of the tile, K a multiple of 32 but not of
 * the 64-wide K step (and splits whose last is short). Skipped (not passed)
 * where the device lacks the extension, e.g. lavapipe. */
Test(vk_ops, mm_coopmat_every_type)
{
	if (!vk->coopmat)
		cr_skip_test("%s has no VK_KHR_cooperative_matrix 16x16x16 f16 configuration", vk->info.name);
	for (int k = 4; k <= 8; k++) {
		for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++) {
			uint32_t b = all_types[i].blk;
			check_mv_kernel(k, all_types[i].type, all_types[i].name, b == 32 ? 32 * 5 : b, 67, 70, false);
			check_mv_kernel(k, all_types[i].type, all_types[i].name, b == 32 ? 32 * 2 : 2 * b, 37, 17, false);
			check_mv_kernel(k, all_types[i].type, all_types[i].name, b == 32 ? 32 * 37 : b * 5, 130, 150, false);
		}
		/* a model-like shape: 1152 -> 1536 rows over 200 tokens (q4_0) */
		check_mv_kernel(k, TENSOR_Q4_0, "q4_0", 1152, 1536 + 5, 200, false);
	}
}

/* The engine picks a tile by the token count, so every tile must give a
 * column the same bits (each 16x16 accumulator sums K in the same order),
 * and so must split K on either tile: a sequence's row does not depend on
 * how many others shared its step. */
Test(vk_ops, mm_coopmat_tiles_agree_bitwise, .timeout = 120)
{
	if (!vk->coopmat)
		cr_skip_test("%s has no VK_KHR_cooperative_matrix 16x16x16 f16 configuration", vk->info.name);
	static const struct { uint32_t type; const char *name; uint32_t ncols, nrows; } q[] = {
		{ TENSOR_Q4_0, "q4_0", 32 * 37, 300 }, { TENSOR_Q4_K, "q4_k", 256 * 5, 200 },
	};
	for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
		uint64_t seed = rng; /* every kernel gets the same inputs (the first tokens of 100) */
		float *large = check_mv_run(4, q[i].type, q[i].name, q[i].ncols, q[i].nrows, 100, false, 1, 1, 0);
		rng = seed;
		float *small = check_mv_run(5, q[i].type, q[i].name, q[i].ncols, q[i].nrows, 100, false, 1, 1, 0);
		assert_same_outputs(large, small, 100, q[i].nrows, "large vs small tile");
		rng = seed;
		float *dec = check_mv_run(6, q[i].type, q[i].name, q[i].ncols, q[i].nrows, 40, false, 1, 1, 0);
		assert_same_outputs(large, dec, 40, q[i].nrows, "large vs decode tile");
		rng = seed;
		float *k = check_mv_run(7, q[i].type, q[i].name, q[i].ncols, q[i].nrows, 100, false, 1, 1, 0);
		rng = seed;
		float *dk = check_mv_run(8, q[i].type, q[i].name, q[i].ncols, q[i].nrows, 40, false, 1, 1, 0);
		assert_same_outputs(k, dk, 40, q[i].nrows, "split K: large vs decode tile");
		free(large);
		free(small);
		free(dec);
		free(k);
		free(dk);
	}
}

Test(vk_ops, mv_f32) { check_mv(TENSOR_F32, "f32", 77, 37, 1, false); check_mv(TENSOR_F32, "f32", 200, 37, 11, false); }
Test(vk_ops, mv_f16) { check_mv(TENSOR_F16, "f16", 77, 37, 1, false); check_mv(TENSOR_F16, "f16", 333, 21, 9, false); }
Test(vk_ops, mv_bf16) { check_mv(TENSOR_BF16, "bf16", 77, 37, 3, false); }
Test(vk_ops, mv_q8_0) { check_mv(TENSOR_Q8_0, "q8_0", 32 * 7, 37, 1, false); check_mv(TENSOR_Q8_0, "q8_0", 32 * 45, 13, 10, false); }
Test(vk_ops, mv_q4_0) { check_mv(TENSOR_Q4_0, "q4_0", 32 * 7, 37, 1, false); check_mv(TENSOR_Q4_0, "q4_0", 32 * 3, 37, 9, false); }
Test(vk_ops, mv_glu)
{
	check_mv(TENSOR_F32, "f32", 77, 37, 2, true);
	check_mv(TENSOR_Q8_0, "q8_0", 96, 29, 9, true);
	check_mv(TENSOR_Q4_K, "q4_k", 256, 11, 1, true);
}

/* rmsnorm's x16 copy of a row (got) against gpu_worker/x16.c's of the row the
 * kernel wrote (row): the scales within the GPU's division error, each q
 * within one step of the reference's and equal but for a few rounding ties
 * the GPU's 32512 / amax moved, the hi and lo bytes a valid split of q, and
 * every correction word that of the GPU's own q. */
static void check_x16_row(const uint32_t *got, const float *row, uint32_t n, const char *what)
{
	uint32_t *want = malloc(x16_row_bytes(n));
	x16_quantize(row, n, want);
	uint32_t off = 0;
	for (uint32_t i = 0; i < n; i++) {
		float dg, dw;
		int32_t qg = x16_q(got, i, &dg), qw = x16_q(want, i, &dw);
		cr_assert(fabsf(dg - dw) <= 1e-6f * dw, "%s[%u]: d %.9g vs %.9g", what, i, dg, dw);
		cr_assert(abs(qg - qw) <= 1 && abs(qg) <= 32512, "%s[%u]: q %d vs %d", what, i, qg, qw);
		off += qg != qw;
	}
	for (uint32_t g = 0; g < n / X16_GROUP; g++)
		for (uint32_t b = 0; b < 4; b++)
			for (uint32_t k = 0; k < 4; k++) {
				int32_t sum = 0;
				for (uint32_t h = 0; h < 2; h++)
					for (uint32_t j = 0; j < 4; j++) {
						float d;
						uint32_t i = g * X16_GROUP + 32 * b + 16 * h + 4 * k + j;
						int32_t lo = (int8_t)(got[g * X16_GROUP_WORDS + 32 + 8 * k + 2 * b + h] >> (8 * j));
						cr_assert(lo >= -128 && lo <= 127, "%s[%u]: lo byte", what, i);
						sum += x16_q(got, i, &d);
					}
				cr_assert_eq(got[g * X16_GROUP_WORDS + 64 + 4 * k + b], X16_MAGIC - (uint32_t)(8 * sum),
					     "%s group %u block %u lane %u: correction", what, g, b, k);
			}
	cr_assert_leq(off, n / 256 + 1, "%s: %u of %u values off by one", what, off, n);
	free(want);
}

/* rmsnorm modes 0 (plain), 1 (residual add) and 3 (add + next norm), rows of
 * n floats held per elements per thread (engine_norm_per's, or more); with
 * rows of whole x16 groups, the x16 copy of modes 0 and 3 (mode 1 writes none). */
static void check_rmsnorm_n(const char *pipe, uint32_t wgs, uint32_t n, uint32_t per)
{
	const uint32_t T = 3;
	float x[T * n], w[n], w2[n], h[T * n];
	for (uint32_t i = 0; i < T * n; i++) {
		x[i] = frand() * 3;
		h[i] = frand() * 10;
	}
	for (uint32_t i = 0; i < n; i++) {
		w[i] = 1 + frand();
		w2[i] = 1 + frand();
	}
	struct vk_pipe p;
	uint32_t spec[3] = { wgs, per, 1 }; /* with the x16 copy's row */
	cr_assert_eq(vk_pipe_create(vk, pipe, 6, sizeof(struct norm_push), spec, 3, &p), 0, "%s", err_msg());
	for (uint32_t mode = 0; mode < 4; mode += (mode == 1 ? 2 : 1)) {
		bool x16 = n % X16_GROUP == 0;
		size_t qb = T * x16_row_bytes(n) + 16;
		uint32_t *q = malloc(qb), *q0 = malloc(qb);
		memset(q0, 0xab, qb);
		struct vk_buf *b[6] = { buf_from(x, sizeof x), buf_from(w, sizeof w), buf_from(h, sizeof h),
					buf_from(w2, sizeof w2), buf_from(NULL, sizeof x), buf_from(q0, qb) };
		struct norm_push pc = { n, mode, 1e-6f, x16 ? 1 : 0 };
		run1(&p, b, &pc, T, 1, 1);
		float gh[T * n], go[T * n];
		vk_download(vk, b[2], 0, gh, sizeof gh);
		vk_download(vk, b[4], 0, go, sizeof go);
		vk_download(vk, b[5], 0, q, qb);
		for (uint32_t t = 0; x16 && mode != 1 && t < T; t++)
			check_x16_row(q + t * x16_row_bytes(n) / 4, (mode == 0 ? gh : go) + t * n, n, "rmsnorm x16");
		if (!x16 || mode == 1)
			cr_assert(memcmp(q, q0, qb) == 0, "rmsnorm n %u mode %u: wrote an x16 copy", n, mode);
		free(q);
		free(q0);
		for (uint32_t t = 0; t < T; t++) {
			double ss = 0, ss2 = 0, wh[n], wo[n];
			for (uint32_t i = 0; i < n; i++)
				ss += (double)x[t * n + i] * x[t * n + i];
			double r = 1 / sqrt(ss / n + 1e-6);
			for (uint32_t i = 0; i < n; i++) {
				double v = x[t * n + i] * r * w[i];
				wh[i] = mode == 0 ? v : h[t * n + i] + v;
				ss2 += wh[i] * wh[i];
			}
			double r2 = 1 / sqrt(ss2 / n + 1e-6);
			for (uint32_t i = 0; i < n; i++)
				wo[i] = wh[i] * r2 * w2[i];
			check_close(gh + t * n, wh, NULL, n, 1e-5, "rmsnorm h");
			if (mode == 3)
				check_close(go + t * n, wo, NULL, n, 1e-5, "rmsnorm out2");
		}
		for (int i = 0; i < 6; i++)
			vk_buf_destroy(vk, b[i]);
	}
	vk_pipe_destroy(vk, &p);
}

static void check_rmsnorm(const char *pipe, uint32_t wgs)
{
	/* odd; whole threads' worth; one thread's element short of them; more
	 * places than elements (a pipeline made for a longer row) */
	check_rmsnorm_n(pipe, wgs, 131, engine_norm_per(131, wgs));
	check_rmsnorm_n(pipe, wgs, 16 * wgs, engine_norm_per(16 * wgs, wgs));
	check_rmsnorm_n(pipe, wgs, 16 * wgs + 37, engine_norm_per(16 * wgs + 37, wgs));
	/* whole runs of four (vec4 loads and stores), the last 32-element block partial */
	check_rmsnorm_n(pipe, wgs, 16 * wgs + 36, engine_norm_per(16 * wgs + 36, wgs));
	check_rmsnorm_n(pipe, wgs, 3 * wgs - 1, 5);
	/* Gemma 3 27B rows: 42 x16 groups */
	check_rmsnorm_n(pipe, wgs, 5376, engine_norm_per(5376, wgs));
}

Test(vk_ops, rmsnorm) { check_rmsnorm("rmsnorm", 64); }
/* The norm tail (mul_mvs with tail = 1): one dispatch gives bitwise what
 * mul_mvs with tail = 0 then rmsnorm's mode 3 give (the engine's pipelines
 * with the tail: rmsnorm_sg at the matvec's 128 threads): y, h and
 * out2, for n_tok rows of n = nrows. Two dispatches in a row: the last
 * workgroup resets the count; y starts with stale values. x16 (n a multiple
 * of X16_GROUP): both also write out2's x16 copy (tail = 3, the X16T
 * constant; rmsnorm's X16C), bitwise alike and as gpu_worker/x16.c has it. */
static void check_norm_tail(uint32_t type, const char *tname, uint32_t ncols, uint32_t n, uint32_t n_tok, uint32_t rpt,
			    bool x16)
{
	uint64_t rb;
	float *wf = malloc((size_t)n * ncols * 4), *wd = malloc((size_t)n * ncols * 4);
	float *x = malloc((size_t)n_tok * ncols * 4), *h = malloc((size_t)n_tok * n * 4), *w = malloc(n * 4),
	      *w2 = malloc(n * 4);
	for (size_t i = 0; i < (size_t)n * ncols; i++)
		wf[i] = frand();
	for (size_t i = 0; i < (size_t)n_tok * ncols; i++)
		x[i] = frand();
	for (size_t i = 0; i < (size_t)n_tok * n; i++)
		h[i] = frand() * 10;
	for (uint32_t i = 0; i < n; i++) {
		w[i] = 1 + frand();
		w2[i] = 1 + frand();
	}
	uint8_t *wq = quantize_rows(type, wf, wd, n, ncols, &rb);
	uint32_t per = engine_norm_per(n, 128);
	float eps = 1e-6f;
	uint32_t eps_bits;
	memcpy(&eps_bits, &eps, 4);
	struct vk_pipe mvs, norm;
	char name[64];
	uint32_t spec[6] = { 128, 1, rpt, per, eps_bits, x16 }, nspec[3] = { 128, per, x16 };
	snprintf(name, sizeof name, "mul_mvs_%s", tname);
	cr_assert_eq(vk_pipe_create(vk, name, ENGINE_MAT_BINDINGS, sizeof(struct mv_push), spec, 6, &mvs), 0, "%s",
		     err_msg());
	cr_assert_eq(vk_pipe_create(vk, "rmsnorm_sg", 6, sizeof(struct norm_push), nspec, 3, &norm), 0, "%s", err_msg());
	/* the engine's threads per row (4 units per thread): 8 on 384 q4_0
	 * columns, which once exposed modules that rounded apart */
	uint32_t tpr = engine_mvs_tpr_type(type, ncols, 128, 4, false);
	struct mv_push pc = { ncols, n, (uint32_t)rb, ncols, 0, n, 0, n_tok, n, tpr, 0 }, pt = pc;
	pt.tail = x16 ? 3 : 1;
	struct norm_push np = { n, 3, eps, x16 };
	uint32_t zero[4] = { 0 }, groups = (n + 128 / tpr * rpt - 1) / (128 / tpr * rpt);
	size_t rows = (size_t)n_tok * n * 4, qb = x16 ? n_tok * x16_row_bytes(n) : 4;
	uint32_t *qa = malloc(qb), *qgot = malloc(qb);
	/* a: the two dispatches; b: the tail, twice from the same h */
	struct vk_buf *wb = buf_from(wq, n * rb), *xb = buf_from(x, (size_t)n_tok * ncols * 4), *wbuf = buf_from(w, n * 4),
		      *w2buf = buf_from(w2, n * 4), *cnt = buf_from(zero, sizeof zero);
	struct vk_buf *ya = buf_from(NULL, rows), *ha = buf_from(h, rows), *oa = buf_from(NULL, rows), *xqa = buf_from(NULL, qb);
	struct vk_buf *ma[ENGINE_MAT_BINDINGS] = { wb, xb, ya, cnt, cnt, cnt, cnt, cnt, cnt, cnt, cnt }, *na[6] = { ya, wbuf, ha, w2buf, oa, xqa };
	run1(&mvs, ma, &pc, n_tok, groups, 1);
	run1(&norm, na, &np, n_tok, 1, 1);
	float *ga = malloc(3 * rows), *gb = malloc(3 * rows);
	vk_download(vk, ya, 0, ga, rows);
	vk_download(vk, ha, 0, ga + (size_t)n_tok * n, rows);
	vk_download(vk, oa, 0, ga + (size_t)2 * n_tok * n, rows);
	vk_download(vk, xqa, 0, qa, qb);
	for (uint32_t t = 0; x16 && t < n_tok; t++)
		check_x16_row(qa + t * x16_row_bytes(n) / 4, ga + (size_t)(2 * n_tok + t) * n, n, "rmsnorm x16");
	for (int rep = 0; rep < 2; rep++) {
		struct vk_buf *yb = buf_from(h, rows), *hb = buf_from(h, rows), *ob = buf_from(NULL, rows), *xqb = buf_from(NULL, qb);
		struct vk_buf *bb[ENGINE_MAT_BINDINGS] = { wb, xb, yb, hb, wbuf, w2buf, ob, cnt, xqb, cnt, cnt };
		run1(&mvs, bb, &pt, n_tok, groups, 1);
		vk_download(vk, yb, 0, gb, rows);
		vk_download(vk, hb, 0, gb + (size_t)n_tok * n, rows);
		vk_download(vk, ob, 0, gb + (size_t)2 * n_tok * n, rows);
		static const char *const what[3] = { "y", "h", "out2" };
		for (size_t i = 0; i < 3 * (size_t)n_tok * n; i++)
			cr_assert(memcmp(&ga[i], &gb[i], 4) == 0, "%s n %u n_tok %u run %d: %s[%zu] %.9g vs %.9g", tname, n, n_tok,
				  rep, what[i / ((size_t)n_tok * n)], i % ((size_t)n_tok * n), ga[i], gb[i]);
		vk_download(vk, xqb, 0, qgot, qb);
		for (size_t i = 0; x16 && i < qb / 4; i++)
			cr_assert(qgot[i] == qa[i], "%s n %u n_tok %u run %d: x16 word %zu %08x vs %08x", tname, n, n_tok, rep, i,
				  qgot[i], qa[i]);
		uint32_t c;
		vk_download(vk, cnt, 0, &c, 4);
		cr_assert_eq(c, 0, "the tail left the count at %u", c);
		vk_buf_destroy(vk, yb);
		vk_buf_destroy(vk, hb);
		vk_buf_destroy(vk, ob);
		vk_buf_destroy(vk, xqb);
	}
	struct vk_buf *all[] = { wb, xb, wbuf, w2buf, cnt, ya, ha, oa, xqa };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		vk_buf_destroy(vk, all[i]);
	vk_pipe_destroy(vk, &mvs);
	vk_pipe_destroy(vk, &norm);
	free(wf), free(wd), free(x), free(h), free(w), free(w2), free(wq), free(ga), free(gb), free(qa), free(qgot);
}

Test(vk_ops, mvs_norm_tail, .timeout = 120)
{
	/* rows that are not a multiple of the workgroup's; several workgroups */
	check_norm_tail(TENSOR_Q4_0G, "q4_0g", 256 * 3, 299, 1, 1, false);
	check_norm_tail(TENSOR_Q4_0G, "q4_0g", 256 * 2, 131, 2, 2, false);
	check_norm_tail(TENSOR_Q4_0, "q4_0", 32 * 9, 200, 1, 1, false);
	check_norm_tail(TENSOR_F16, "f16", 32 * 5, 257, 2, 1, false);
	check_norm_tail(TENSOR_Q6_K, "q6_k", 256, 64, 1, 1, false);
	check_norm_tail(TENSOR_Q4_0, "q4_0", 128, 128, 1, 2, false); /* the golden model's wo and down */
	check_norm_tail(TENSOR_Q4_0, "q4_0", 384, 128, 1, 2, false);
	/* with the x16 copy: 1B's 1152-element rows (9 per thread), the golden model's 128 */
	check_norm_tail(TENSOR_Q4_0G, "q4_0g", 128 * 7, 1152, 2, 2, true);
	check_norm_tail(TENSOR_Q4_0G, "q4_0g", 128 * 3, 128, 1, 1, true);
	check_norm_tail(TENSOR_Q6_K, "q6_k", 256, 384, 2, 1, true);
}

/* subgroup reductions; 128 threads: several subgroups on every device */
Test(vk_ops, rmsnorm_subgroup) { check_rmsnorm("rmsnorm_sg", 64); check_rmsnorm("rmsnorm_sg", 128); }

/* "" or "_sg": the tree-reduction kernels or the subgroup ones (rope_kv and
 * attn always of one kind, as the engine takes them) */
static const char *attn_sfx = "";

/* q/k norm + NEOX rope + KV append, then attention (GQA, causal, window,
 * split over the KV length) and the combine pass, against a CPU computation.
 * Run for a local layer (base 1e4, window 5) and a global one (base 1e6,
 * linear scaling 8, no window). The cache is paged: logical blocks map to
 * scattered physical blocks through a block table; a windowed layer uses a
 * two-entry ring (positions 40..52 span logical blocks 2 and 3, which reuse
 * the entries of blocks 0 and 1). one_len: a token with at most that many
 * keys is one split, which attn writes itself (attn_combine skips it).
 * rope_in: one token, whose q/k norm + rope + KV append attn does itself (no
 * rope_kv dispatch), as in the engine's decode steps. */
static void check_attention_x(float base, float fscale, uint32_t window, uint32_t n_split, uint32_t hd, bool spec_hd,
			      bool fused, uint32_t one_len, bool rope_in)
{
	const uint32_t nh = 4, nkv = 2, T = rope_in ? 1 : 13, pos0 = 40, cap = 64, pool = 6 * 16;
	/* global entries 0..3, ring entries 4..5 */
	const uint32_t tab[6] = { 3, 0, 5, 1, 4, 2 }, toff = window ? 4 : 0, tmod = window ? 2 : 4;
#define PROW(p) (tab[toff + ((p) / 16) % tmod] * 16 + (p) % 16)
	const uint32_t S = (nh + 2 * nkv) * hd;
	float *qkv = malloc(T * S * 4), qn[hd], kn[hd];
	for (uint32_t i = 0; i < T * S; i++)
		qkv[i] = frand() * 2;
	for (uint32_t i = 0; i < hd; i++) {
		qn[i] = 1 + 0.5f * frand();
		kn[i] = 1 + 0.5f * frand();
	}
	/* positions 0..pos0-1 already in the cache (random, as from earlier steps) */
	float *kc = calloc(pool * nkv * hd, 4), *vc = calloc(pool * nkv * hd, 4);
	float *K0 = malloc(pos0 * nkv * hd * 4), *V0 = malloc(pos0 * nkv * hd * 4);
	for (uint32_t i = 0; i < pos0 * nkv * hd; i++) {
		K0[i] = frand();
		V0[i] = frand();
	}
	/* a ring holds only its last blocks: logical blocks 2.. (positions 32..) */
	for (uint32_t p = window ? 32 : 0; p < pos0; p++) {
		memcpy(kc + PROW(p) * nkv * hd, K0 + p * nkv * hd, nkv * hd * 4);
		memcpy(vc + PROW(p) * nkv * hd, V0 + p * nkv * hd, nkv * hd * 4);
	}
	/* per-token records (token, pos, KV base, 0): consecutive positions of one sequence */
	uint32_t step[4 + 4 * T];
	memset(step, 0, sizeof step);
	step[0] = pos0;
	step[1] = T;
	for (uint32_t t = 0; t < T; t++)
		step[4 + 4 * t + 1] = pos0 + t;
	struct vk_pipe pr, pa, pc;
	/* spec_hd: head_dim as a specialization constant, as the engine does; fused:
	 * the last split workgroup merges (no combine dispatch) */
	uint32_t wg[3] = { 64, spec_hd ? hd : 0, fused };
	/* heads of whole x16 groups: the output rows' x16 copy too (wo's input),
	 * by the kernels that write it */
	bool x16 = hd % X16_GROUP == 0;
	char rname[32], aname[32];
	snprintf(rname, sizeof rname, "rope_kv%s", attn_sfx);
	snprintf(aname, sizeof aname, "attn%s%s", attn_sfx, x16 ? "_wox16" : "");
	cr_assert_eq(vk_pipe_create(vk, rname, 7, sizeof(struct rope_push), wg, 1, &pr), 0, "%s", err_msg());
	cr_assert_eq(vk_pipe_create(vk, aname, 10, sizeof(struct attn_push), wg, 3, &pa), 0, "%s", err_msg());
	cr_assert_eq(vk_pipe_create(vk, "attn_combine", 4, sizeof(struct combine_push), wg, 1, &pc), 0, "%s", err_msg());
	struct vk_buf *bq = buf_from(qkv, T * S * 4), *bqn = buf_from(qn, sizeof qn), *bkn = buf_from(kn, sizeof kn),
		      *bk = buf_from(kc, pool * nkv * hd * 4), *bv = buf_from(vc, pool * nkv * hd * 4),
		      *bt = buf_from(tab, sizeof tab),
		      *bs = buf_from(step, sizeof step), *bp = buf_from(NULL, T * nh * n_split * (hd + 2) * 4 + T * nh * 4),
		      *bo = buf_from(NULL, T * nh * hd * 4);
	uint64_t x16b = x16 ? x16_row_bytes(nh * hd) : 0;
	struct vk_buf *bx = buf_from(NULL, T * x16b + 16);
	struct rope_push rp = { hd, nh, nkv, S, 1e-6f, base, fscale, cap, toff, tmod };
	if (!rope_in)
		run1(&pr, (struct vk_buf *[]){ bq, bqn, bkn, bk, bv, bs, bt }, &rp, nh + nkv, T, 1);
	struct attn_push ap = { hd, nh, nkv, S, window, n_split, 0.17f, 1, T * nh * n_split * (hd + 2), toff, tmod,
				1e-6f, base, fscale, cap, rope_in, one_len, x16 };
	struct vk_buf *ab[10] = { bq, bk, bv, bp, bs, bo, bt, bqn, bkn, bx };
	if (fused) {
		uint32_t *zero = calloc(T * nh, 4);
		vk_upload(vk, bp, (size_t)ap.cnt_off * 4, zero, T * nh * 4);
		free(zero);
	}
	run1(&pa, ab, &ap, nh, T, n_split);
	if (fused) {
		/* counters must be back at zero for the next dispatch */
		uint32_t *cnt = malloc(T * nh * 4);
		vk_download(vk, bp, (size_t)ap.cnt_off * 4, cnt, T * nh * 4);
		for (uint32_t i = 0; i < T * nh; i++)
			cr_assert_eq(cnt[i], 0u, "counter %u not reset", i);
		free(cnt);
		/* a second run over the same state must give the same output */
		run1(&pa, ab, &ap, nh, T, n_split);
	} else {
		struct combine_push cp = { hd, nh, n_split, window, 1, one_len, x16, 0 };
		run1(&pc, (struct vk_buf *[]){ bp, bo, bs, bx }, &cp, nh, T, 1);
	}
	float *got = malloc(T * nh * hd * 4);
	vk_download(vk, bo, 0, got, T * nh * hd * 4);
	if (x16) { /* whoever wrote a head's row (attn, its merge, attn_combine) wrote its copy */
		uint32_t *gq = malloc(T * x16b);
		vk_download(vk, bx, 0, gq, T * x16b);
		for (uint32_t t = 0; t < T; t++)
			check_x16_row(gq + t * x16b / 4, got + t * nh * hd, nh * hd, "attention x16");
		free(gq);
	}

	/* CPU: norm + rope each head, append k/v, attend */
	double *q = malloc(sizeof(double) * T * nh * hd);
	double *K = malloc(sizeof(double) * cap * nkv * hd), *V = malloc(sizeof(double) * cap * nkv * hd);
	for (uint32_t i = 0; i < pos0 * nkv * hd; i++) {
		K[i] = K0[i];
		V[i] = V0[i];
	}
	for (uint32_t t = 0; t < T; t++) {
		uint32_t pos = pos0 + t;
		for (uint32_t hh = 0; hh < nh + nkv; hh++) {
			const float *src = qkv + t * S + hh * hd;
			const float *wn = hh < nh ? qn : kn;
			double ss = 0, v[hd], o[hd];
			for (uint32_t i = 0; i < hd; i++)
				ss += (double)src[i] * src[i];
			double r = 1 / sqrt(ss / hd + 1e-6);
			for (uint32_t i = 0; i < hd; i++)
				v[i] = src[i] * r * wn[i];
			for (uint32_t i = 0; i < hd / 2; i++) {
				double th = pos * pow(base, -2.0 * i / hd) * fscale;
				o[i] = v[i] * cos(th) - v[i + hd / 2] * sin(th);
				o[i + hd / 2] = v[i] * sin(th) + v[i + hd / 2] * cos(th);
			}
			if (hh < nh) {
				memcpy(q + (t * nh + hh) * hd, o, sizeof o);
			} else {
				uint32_t kh = hh - nh;
				memcpy(K + (pos * nkv + kh) * hd, o, sizeof o);
				for (uint32_t i = 0; i < hd; i++)
					V[(pos * nkv + kh) * hd + i] = qkv[t * S + (nh + nkv + kh) * hd + i];
			}
		}
	}
	double *want = malloc(sizeof(double) * T * nh * hd);
	for (uint32_t t = 0; t < T; t++) {
		uint32_t pos = pos0 + t;
		uint32_t lo = window && pos + 1 > window ? pos + 1 - window : 0;
		for (uint32_t h = 0; h < nh; h++) {
			uint32_t kh = h / (nh / nkv);
			double sc[64], mx = -INFINITY, sum = 0;
			for (uint32_t j = lo; j <= pos; j++) {
				double s = 0;
				for (uint32_t i = 0; i < hd; i++)
					s += q[(t * nh + h) * hd + i] * 0.17f * K[(j * nkv + kh) * hd + i];
				sc[j] = s;
				if (s > mx)
					mx = s;
			}
			for (uint32_t j = lo; j <= pos; j++)
				sum += (sc[j] = exp(sc[j] - mx));
			for (uint32_t i = 0; i < hd; i++) {
				double a = 0;
				for (uint32_t j = lo; j <= pos; j++)
					a += sc[j] / sum * V[(j * nkv + kh) * hd + i];
				want[(t * nh + h) * hd + i] = a;
			}
		}
	}
	check_close(got, want, NULL, T * nh * hd, 2e-4, "attention");
	/* the k cache holds the roped keys */
	float *gk = malloc(pool * nkv * hd * 4), *gkl = malloc(T * nkv * hd * 4);
	vk_download(vk, bk, 0, gk, pool * nkv * hd * 4);
	for (uint32_t t = 0; t < T; t++) /* back to logical order */
		memcpy(gkl + t * nkv * hd, gk + PROW(pos0 + t) * nkv * hd, nkv * hd * 4);
	/* rope rotates pairs of a row: its error scales with the row, not the
	 * element (NVIDIA's sin/cos at head_dim 128-256 moved small elements
	 * past a per-element bound) */
	double *kmag = malloc(sizeof(double) * T * nkv * hd);
	for (uint32_t r = 0; r < T * nkv; r++) {
		double mx = 0;
		for (uint32_t i = 0; i < hd; i++)
			mx = fmax(mx, fabs(K[pos0 * nkv * hd + r * hd + i]));
		for (uint32_t i = 0; i < hd; i++)
			kmag[r * hd + i] = mx;
	}
	check_close(gkl, K + pos0 * nkv * hd, kmag, T * nkv * hd, 1e-4, "k cache");
	free(kmag);
#undef PROW
	struct vk_buf *all[] = { bq, bqn, bkn, bk, bv, bs, bp, bo, bt, bx };
	for (size_t i = 0; i < 10; i++)
		vk_buf_destroy(vk, all[i]);
	vk_pipe_destroy(vk, &pr);
	vk_pipe_destroy(vk, &pa);
	vk_pipe_destroy(vk, &pc);
	free(qkv); free(kc); free(vc); free(got); free(q); free(K); free(V); free(want); free(gk); free(gkl); free(K0); free(V0);
}

static void check_attention(float base, float fscale, uint32_t window, uint32_t n_split, uint32_t hd, bool spec_hd,
			    bool fused)
{
	check_attention_x(base, fscale, window, n_split, hd, spec_hd, fused, 0, false);
}

Test(vk_ops, attention_local_window) { check_attention(1e4f, 1.0f, 5, 3, 32, false, false); }
Test(vk_ops, attention_global_scaled) { check_attention(1e6f, 1.0f / 8, 0, 4, 32, true, false); }
Test(vk_ops, attention_one_split) { check_attention(1e4f, 1.0f, 0, 1, 32, true, false); }
/* head_dim 34: not a multiple of 4 (scalar K and V paths) */
Test(vk_ops, attention_odd_head_dim) { check_attention(1e4f, 1.0f, 0, 3, 34, false, true); }
/* head_dim 288 > 4 * 64: two vec4 output slots per thread */
Test(vk_ops, attention_wide_head) { check_attention(1e4f, 1.0f, 7, 2, 288, true, true); }
/* the merge done by the last split's workgroup instead of attn_combine */
Test(vk_ops, attention_fused_combine) { check_attention(1e6f, 1.0f / 8, 5, 5, 32, true, true); }
Test(vk_ops, attention_fused_one_split) { check_attention(1e4f, 1.0f, 0, 1, 32, false, true); }
/* one_len 48: the window-5 layer's tokens and the first 8 tokens (41..48
 * keys) are one split each, written by attn (attn_combine skips them); the
 * later ones (49..53 keys) still merge two */
Test(vk_ops, attention_short_direct) {
	check_attention_x(1e4f, 1.0f, 5, 2, 32, true, false, 48, false);
	check_attention_x(1e6f, 1.0f / 8, 0, 2, 32, true, false, 48, false);
	check_attention_x(1e6f, 1.0f / 8, 0, 2, 34, false, true, 48, false);
}
/* heads of 128 and 256 (Gemma 3's): the output rows' x16 copy (wo's input)
 * as gpu_worker/x16.c makes it, from attn (one split, and short ranges), its
 * fused merge and attn_combine, with and without rope inside attn */
Test(vk_ops, attention_x16_rows, .timeout = 120) {
	check_attention_x(1e4f, 1.0f, 5, 3, 128, true, false, 0, false);
	check_attention_x(1e6f, 1.0f / 8, 0, 4, 128, true, false, 48, false);
	check_attention_x(1e6f, 1.0f / 8, 0, 3, 256, true, true, 0, false);
	check_attention_x(1e4f, 1.0f, 0, 1, 128, true, false, 0, true);
	attn_sfx = "_sg";
	check_attention_x(1e4f, 1.0f, 5, 3, 256, true, false, 0, false);
	check_attention_x(1e6f, 1.0f / 8, 0, 4, 128, true, true, 48, true);
	attn_sfx = "";
}
/* q/k norm + rope + KV append inside attn (one token): CPU reference */
Test(vk_ops, attention_rope_in_attn) {
	check_attention_x(1e4f, 1.0f, 5, 3, 32, true, false, 0, true);
	check_attention_x(1e6f, 1.0f / 8, 0, 4, 32, true, false, 0, true);
	check_attention_x(1e4f, 1.0f, 0, 3, 34, false, false, 0, true);
	check_attention_x(1e4f, 1.0f, 7, 2, 288, true, true, 0, true);
	check_attention_x(1e6f, 1.0f, 0, 2, 32, true, false, 64, true);
}
/* rope_kv_sg and attn_sg (subgroup reductions; the engine's choice where the
 * device has subgroup arithmetic): windowed and global layers, splits and
 * their combine, the fused merge, an odd and a wide head, rope inside attn */
Test(vk_ops, attention_subgroup, .timeout = 120) {
	attn_sfx = "_sg";
	check_attention_x(1e4f, 1.0f, 5, 3, 32, false, false, 0, false);
	check_attention_x(1e6f, 1.0f / 8, 0, 4, 32, true, false, 48, false);
	check_attention_x(1e6f, 1.0f / 8, 5, 5, 32, true, true, 0, false);
	check_attention_x(1e4f, 1.0f, 0, 3, 34, false, true, 0, false);
	check_attention_x(1e4f, 1.0f, 5, 3, 32, true, false, 0, true);
	check_attention_x(1e4f, 1.0f, 7, 2, 288, true, true, 0, true);
	attn_sfx = "";
}

/* The embedding gather of rows 2 and 0 of a 3-row matrix, scaled. */
static void check_get_rows(uint32_t type, const char *tname, uint32_t cols)
{
	const uint32_t rows = 3;
	uint64_t rb;
	float *e = malloc(rows * cols * 4), *ed = malloc(rows * cols * 4), *gh = malloc(2 * cols * 4);
	double *wh = malloc(2 * cols * sizeof *wh);
	for (uint32_t i = 0; i < rows * cols; i++)
		e[i] = frand();
	uint8_t *eq = quantize_rows(type, e, ed, rows, cols, &rb);
	struct vk_pipe pe;
	char name[64];
	snprintf(name, sizeof name, "get_rows_%s", tname);
	uint32_t wg[1] = { 64 };
	cr_assert_eq(vk_pipe_create(vk, name, 3, sizeof(struct rows_push), wg, 1, &pe), 0, "%s", err_msg());
	uint32_t st[12] = { 0, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0 }; /* per-token records: ids 2, 0 */
	struct vk_buf *be = buf_from(eq, rows * rb), *bst = buf_from(st, sizeof st), *bh = buf_from(NULL, 2 * cols * 4);
	struct rows_push rp = { cols, rows, (uint32_t)rb, 2.5f };
	run1(&pe, (struct vk_buf *[]){ be, bst, bh }, &rp, 2, 1, 1);
	vk_download(vk, bh, 0, gh, 2 * cols * 4);
	for (uint32_t i = 0; i < cols; i++) {
		wh[i] = ed[2 * cols + i] * 2.5;
		wh[cols + i] = ed[i] * 2.5;
	}
	check_close(gh, wh, NULL, 2 * cols, 1e-6, name);
	vk_buf_destroy(vk, be);
	vk_buf_destroy(vk, bst);
	vk_buf_destroy(vk, bh);
	vk_pipe_destroy(vk, &pe);
	free(e);
	free(ed);
	free(gh);
	free(wh);
	free(eq);
}

/* gelu_mul, argmax and top-k. */
Test(vk_ops, gelu_argmax_topk)
{
	uint32_t wg[1] = { 64 };
	const uint32_t nff = 45, T = 2;
	float gu[T * 2 * nff];
	for (uint32_t i = 0; i < T * 2 * nff; i++)
		gu[i] = frand() * 4;
	struct vk_pipe pg;
	cr_assert_eq(vk_pipe_create(vk, "gelu_mul", 2, sizeof(struct gelu_push), wg, 1, &pg), 0, "%s", err_msg());
	struct vk_buf *bg = buf_from(gu, sizeof gu), *bo = buf_from(NULL, T * nff * 4);
	struct gelu_push gp = { nff, T };
	run1(&pg, (struct vk_buf *[]){ bg, bo }, &gp, 2, 1, 1);
	float got[T * nff];
	double want[T * nff];
	vk_download(vk, bo, 0, got, sizeof got);
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t i = 0; i < nff; i++) {
			double g = gu[t * 2 * nff + i];
			want[t * nff + i] = 0.5 * g * (1 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) *
					    gu[t * 2 * nff + nff + i];
		}
	check_close(got, want, NULL, T * nff, 1e-5, "gelu_mul");

	const uint32_t n = 5003;
	float *lg = malloc(n * 4);
	for (uint32_t i = 0; i < n; i++)
		lg[i] = frand();
	lg[4000] = lg[17] = 7.0f; /* tie: the lower index wins */
	struct vk_pipe pa, pt;
	cr_assert_eq(vk_pipe_create(vk, "argmax", 3, sizeof(struct argmax_push), wg, 1, &pa), 0, "%s", err_msg());
	uint32_t wg32[1] = { 32 };
	cr_assert_eq(vk_pipe_create(vk, "topk", 4, sizeof(struct argmax_push), wg32, 1, &pt), 0, "%s", err_msg());
	uint32_t step[4] = { 0, 1, 64, 0 };
	struct vk_buf *bl = buf_from(lg, n * 4), *br = buf_from(NULL, 128 * 4), *bs = buf_from(step, sizeof step);
	struct argmax_push ap = { n, 0, n, 0 };
	struct vk_buf *bp = buf_from(NULL, (ENGINE_AM_PART + 64) * 4);
	run1(&pa, (struct vk_buf *[]){ bl, br, bp }, &ap, 1, 1, 1);
	vk_buf_destroy(vk, bp);
	uint32_t res[128];
	vk_download(vk, br, 0, res, 8);
	cr_assert_eq(res[0], 17);
	struct vk_buf *btp = buf_from(NULL, (ENGINE_TK_PART + ENGINE_TK_REC) * 4);
	cr_assert_eq(vk_fill_zero(vk, btp), 0);
	run1(&pt, (struct vk_buf *[]){ bl, br, bs, btp }, &ap, 1, 1, 1);
	vk_buf_destroy(vk, btp);
	vk_download(vk, br, 0, res, sizeof res);
	for (uint32_t r = 0; r < 64; r++) {
		uint32_t best = 0;
		for (uint32_t i = 1; i < n; i++)
			if (lg[i] > lg[best])
				best = i;
		cr_assert_eq(res[2 * r], best, "topk rank %u: %u vs %u", r, res[2 * r], best);
		lg[best] = -INFINITY;
	}

	struct vk_buf *all[] = { bg, bo, bl, br, bs };
	for (size_t i = 0; i < 5; i++)
		vk_buf_destroy(vk, all[i]);
	vk_pipe_destroy(vk, &pg);
	vk_pipe_destroy(vk, &pa);
	vk_pipe_destroy(vk, &pt);
	free(lg);
}

/* argmax over rows of n logits at offset off, stride apart (batch rows): the
 * vec4 path (rows at a multiple of 4 floats, n with and without a tail of
 * n % 4), the scalar path (rows at an odd offset), ties (the lowest index),
 * the maximum in the tail and at index 0, NaN-free negatives; each row once
 * by one workgroup and once cut into G slices (its counters must be back at
 * zero after each dispatch, as the engine replays them). */
static void check_argmax_g(uint32_t n, uint32_t off, uint32_t stride, uint32_t rows, uint32_t wgs, uint32_t G)
{
	size_t len = off + (size_t)(rows - 1) * stride + n;
	float *lg = malloc(len * 4);
	cr_assert(lg);
	for (size_t i = 0; i < len; i++)
		lg[i] = frand() * 3 - 5;
	uint32_t want[4];
	for (uint32_t r = 0; r < rows; r++) {
		float *row = lg + off + (size_t)r * stride;
		/* row 0: a tie, the later copy first in memory order of a vec4 lane;
		 * row 1: the maximum in the tail; row 2: at index 0; row 3: random */
		uint32_t a = r == 0 ? n / 3 : r == 1 ? n - 1 : 0;
		row[a] = 9.0f;
		if (r == 0)
			row[n - 2] = 9.0f;
		want[r] = a;
		if (r == 3) {
			want[r] = 0;
			for (uint32_t i = 1; i < n; i++)
				if (row[i] > row[want[r]])
					want[r] = i;
		}
	}
	struct vk_pipe pa;
	uint32_t wg[1] = { wgs };
	cr_assert_eq(vk_pipe_create(vk, "argmax", 3, sizeof(struct argmax_push), wg, 1, &pa), 0, "%s", err_msg());
	size_t pb = (ENGINE_AM_PART + (size_t)rows * G * 2) * 4;
	uint32_t *zero = calloc(1, pb), *cnt = malloc(ENGINE_AM_PART * 4);
	cr_assert(zero && cnt);
	struct vk_buf *bl = buf_from(lg, len * 4), *br = buf_from(NULL, rows * 128 * 4), *bp = buf_from(zero, pb);
	struct argmax_push ap = { n, off, stride, 0 };
	uint32_t *res = malloc(rows * 128 * 4);
	cr_assert(res);
	for (int rep = 0; rep < 2; rep++) {
		run1(&pa, (struct vk_buf *[]){ bl, br, bp }, &ap, G, rows, 1);
		vk_download(vk, bp, 0, cnt, ENGINE_AM_PART * 4);
		for (uint32_t r = 0; r < rows; r++)
			cr_assert_eq(cnt[r], 0, "G %u row %u: counter %u left", G, r, cnt[r]);
		vk_download(vk, br, 0, res, rows * 128 * 4);
		for (uint32_t r = 0; r < rows; r++) {
			cr_assert_eq(res[128 * r], want[r], "G %u n %u off %u row %u run %d: %u, want %u", G, n, off, r, rep,
				     res[128 * r], want[r]);
			float v;
			memcpy(&v, &res[128 * r + 1], 4);
			cr_assert_eq(v, lg[off + (size_t)r * stride + want[r]], "G %u n %u off %u row %u run %d: value", G, n,
				     off, r, rep);
		}
	}
	vk_buf_destroy(vk, bl);
	vk_buf_destroy(vk, br);
	vk_buf_destroy(vk, bp);
	vk_pipe_destroy(vk, &pa);
	free(lg);
	free(res);
	free(zero);
	free(cnt);
}

static void check_argmax(uint32_t n, uint32_t off, uint32_t stride, uint32_t rows, uint32_t wgs)
{
	check_argmax_g(n, off, stride, rows, wgs, 1);
	check_argmax_g(n, off, stride, rows, wgs, 32); /* the engine's slices */
	check_argmax_g(n, off, stride, rows, wgs, 7);  /* slices that end inside a vec4 run */
}

Test(vk_ops, argmax_rows)
{
	check_argmax(262144, 0, 262144, 2, 1024); /* the vocabulary, vec4s only */
	check_argmax(5003, 0, 5004, 4, 64);       /* vec4s and a tail of 3 */
	check_argmax(5003, 4, 5008, 4, 128);
	check_argmax(4099, 1, 4099, 4, 64);       /* odd offsets: the scalar path */
	check_argmax(7, 0, 8, 4, 64);             /* fewer vec4s than threads */
}

ParameterizedTestParameters(vk_ops, get_rows_type) { return every_type(); }
ParameterizedTest(size_t *i, vk_ops, get_rows_type)
{
	uint32_t b = all_types[*i].blk;
	/* (half-group q4_0g rows: 384) */
	check_get_rows(all_types[*i].type, all_types[*i].name, b == 32 ? 32 * 3 : 2 * b + b % 256);
	if (all_types[*i].type == TENSOR_F16)
		check_get_rows(TENSOR_F16, "f16", 77); /* a row length that is no multiple of 32 */
}
