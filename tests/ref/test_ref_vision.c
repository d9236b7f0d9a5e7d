/* ref_vision and image_prep: PIL's bilinear resize on hand-computed values;
 * the tower is permutation-equivariant over patches once positions are
 * equal (the convolution reads each patch's own pixels and attention is
 * bidirectional: a causal mask or a mis-strided patch breaks it); the
 * projector pools in row-major patch order, RMS-normalizes and projects. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "formats/image_prep.h"
#include "formats/quant.h"
#include "ref/ref_vision.h"
#include "tools/mkmodel.h"

Test(image_prep, bilinear_as_pil)
{
	struct vision_config c = { .image_size = 4, .image_mean = { 0, 0, 0 }, .image_std = { 1, 1, 1 } };
	/* one row [black, white] widened to 4 and repeated down 4 rows */
	uint8_t rgb[6] = { 0, 0, 0, 255, 255, 255 };
	float out[3 * 16];
	cr_assert_eq(image_prep(rgb, 2, 1, &c, out), 0);
	const float want[4] = { 0, 64, 191, 255 };
	for (int ch = 0; ch < 3; ch++)
		for (int y = 0; y < 4; y++)
			for (int x = 0; x < 4; x++)
				cr_expect_float_eq(out[(ch * 4 + y) * 4 + x], want[x] / 255.0f, 1e-6, "ch %d (%d,%d)", ch, x, y);
	/* shrinking 8 -> 2 averages (a triangle over 4 pixels each side), a
	 * constant image stays constant and normalizes as (v/255 - 0.5)/0.5 */
	struct vision_config c2 = { .image_size = 2, .image_mean = { 0.5f, 0.5f, 0.5f }, .image_std = { 0.5f, 0.5f, 0.5f } };
	uint8_t big[8 * 8 * 3];
	memset(big, 51, sizeof big);
	float o2[12];
	cr_assert_eq(image_prep(big, 8, 8, &c2, o2), 0);
	for (int i = 0; i < 12; i++)
		cr_expect_float_eq(o2[i], (51 / 255.0f - 0.5f) / 0.5f, 1e-6);
	/* a 1-pixel stripe in an 8-wide image is blurred, not skipped or kept whole */
	memset(big, 0, sizeof big);
	for (int y = 0; y < 8; y++)
		big[(y * 8 + 1) * 3] = 255;
	struct vision_config c3 = { .image_size = 2, .image_mean = { 0, 0, 0 }, .image_std = { 1, 1, 1 } };
	cr_assert_eq(image_prep(big, 8, 8, &c3, o2), 0);
	/* left output: center 2, weights (2.5, 3.5, 3.5, 2.5, 1.5, 0.5)/4 over
	 * pixels 0..5, so pixel 1 counts 3.5/14 = 1/4 of 255 */
	cr_expect_float_eq(o2[0], 64 / 255.0f, 1e-6, "left %g", o2[0]);
	cr_expect_float_eq(o2[1], 0.0f, 1e-6, "right %g", o2[1]);
	cr_expect_eq(image_prep(big, 0, 8, &c, o2), ERR_INVAL);
}

static struct ref_vision *tiny_ref(char *dir, size_t cap)
{
	snprintf(dir, cap, "/tmp/unicorn-test-refv-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof path, "%s/mmproj-m.gguf", dir);
	struct vision_config vc;
	cr_assert_eq(mkmodel_vision_config("tiny", 128, &vc), 0);
	cr_assert_eq(mkmodel_write_mmproj(path, &vc, TENSOR_F32, 3, 1, true), 0, "%s", err_msg());
	struct mmproj *p;
	cr_assert_eq(mmproj_open(path, &p), 0, "%s", err_msg());
	struct ref_vision *r;
	cr_assert_eq(ref_vision_create(p, &r), 0, "%s", err_msg());
	mmproj_close(p);
	unlink(path);
	rmdir(dir);
	return r;
}

static void fill_pixels(float *px, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		px[i] = (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
	}
}

Test(ref_vision, patch_permutation_equivariant)
{
	char dir[64];
	struct ref_vision *r = tiny_ref(dir, sizeof dir);
	const struct vision_config *c = &r->cfg;
	uint32_t S = c->image_size, ps = c->patch_size, pps = c->patches_per_side, d = c->n_embd;
	/* equal positions: only the patches' contents tell them apart */
	for (uint32_t p = 1; p < c->n_patches; p++)
		memcpy(r->pos + (size_t)p * d, r->pos, d * sizeof(float));
	size_t npx = (size_t)3 * S * S, nh = (size_t)c->n_patches * d;
	float *a = malloc(npx * sizeof(float)), *b = malloc(npx * sizeof(float));
	float *ha = malloc(nh * sizeof(float)), *hb = malloc(nh * sizeof(float));
	fill_pixels(a, npx, 42);
	memcpy(b, a, npx * sizeof(float));
	/* swap patch (0,0) with patch (5,3) in b */
	uint32_t p1x = 0, p1y = 0, p2x = 3, p2y = 5;
	for (uint32_t ch = 0; ch < 3; ch++)
		for (uint32_t y = 0; y < ps; y++)
			for (uint32_t x = 0; x < ps; x++) {
				size_t i1 = ((size_t)ch * S + p1y * ps + y) * S + p1x * ps + x;
				size_t i2 = ((size_t)ch * S + p2y * ps + y) * S + p2x * ps + x;
				float t = b[i1];
				b[i1] = b[i2];
				b[i2] = t;
			}
	cr_assert_eq(ref_vision_tower(r, a, ha), 0);
	cr_assert_eq(ref_vision_tower(r, b, hb), 0);
	uint32_t q1 = p1y * pps + p1x, q2 = p2y * pps + p2x;
	double maxdiff = 0, spread = 0;
	for (uint32_t p = 0; p < c->n_patches; p++) {
		uint32_t pb = p == q1 ? q2 : p == q2 ? q1 : p;
		for (uint32_t i = 0; i < d; i++) {
			double e = fabs((double)ha[(size_t)p * d + i] - hb[(size_t)pb * d + i]);
			maxdiff = e > maxdiff ? e : maxdiff;
			double s = fabs((double)ha[(size_t)p * d + i] - ha[(size_t)q1 * d + i]);
			spread = s > spread ? s : spread;
		}
	}
	cr_expect(maxdiff < 1e-4, "not equivariant: %g", maxdiff);
	cr_expect(spread > 0.1, "patches indistinguishable: %g", spread);
	free(a);
	free(b);
	free(ha);
	free(hb);
	ref_vision_destroy(r);
}

Test(ref_vision, projector_pools_row_major)
{
	char dir[64];
	struct ref_vision *r = tiny_ref(dir, sizeof dir);
	const struct vision_config *c = &r->cfg;
	uint32_t d = c->n_embd, pps = c->patches_per_side, tps = c->tokens_per_side, m = c->merge;
	/* hidden = one-hot per patch row band, so token (ty, tx) pools patches
	 * with rows [ty*m, ty*m+m) and columns [tx*m, tx*m+m) */
	float *h = calloc((size_t)c->n_patches * d, sizeof(float));
	for (uint32_t py = 0; py < pps; py++)
		for (uint32_t px = 0; px < pps; px++)
			h[((size_t)py * pps + px) * d + (py / m) * tps + px / m] = 1.0f;
	float *out = malloc((size_t)c->n_tokens * c->proj_dim * sizeof(float));
	cr_assert_eq(ref_vision_project(r, h, out), 0);
	for (uint32_t t = 0; t < c->n_tokens; t++) {
		/* pooled = e_t (mean of m*m ones); rmsnorm(e_t) = sqrt(d) e_t */
		double g = sqrt((double)d / (1.0 + c->eps * d)) * r->soft_norm[t];
		for (uint32_t j = 0; j < c->proj_dim; j++) {
			double want = g * r->proj[(size_t)t * c->proj_dim + j];
			cr_expect(fabs(out[(size_t)t * c->proj_dim + j] - want) < 1e-4 * (1 + fabs(want)),
				  "token %u col %u: %g want %g", t, j, out[(size_t)t * c->proj_dim + j], want);
		}
	}
	free(h);
	free(out);
	ref_vision_destroy(r);
}
