/* The Vulkan vision tower (gpu_worker/vision.c) against the CPU reference
 * (ref/ref_vision.c) on mkmodel's tiny vision shape: f32 weights within the
 * golden f32 tolerance (relative L2 1e-4), f16 within the f16 one (5e-3);
 * a second image through the same recorded command buffer; a shape with
 * Gemma 3's 72-wide heads, 100 patches (partial key tiles and query
 * blocks in the attention), pooling 5 x 5 and 5 layers (descriptor sets
 * per layer: the 27-layer tower needs them all); an image whose
 * one patch changes moves every token (bidirectional attention). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "formats/image_prep.h"
#include "formats/quant.h"
#include "gpu_worker/vision.h"
#include "gpu_worker/vk.h"
#include "ref/ref_vision.h"
#include "tools/mkmodel.h"

static double rel_l2(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return sqrt(num / (den > 0 ? den : 1));
}

static void image(uint8_t *rgb, uint32_t w, uint32_t h, uint32_t seed)
{
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (uint32_t c = 0; c < 3; c++)
				rgb[(y * w + x) * 3 + c] = (uint8_t)((x * (7 + c) + y * (3 + seed) + (x * y) % 29 + seed * 40) & 255);
}

static void check_cfg(const struct vision_config *vcp, uint32_t type, double tol);

static void check_type(uint32_t type, double tol)
{
	struct vision_config vc;
	cr_assert_eq(mkmodel_vision_config("tiny", 128, &vc), 0);
	check_cfg(&vc, type, tol);
}

static void check_cfg(const struct vision_config *vcp, uint32_t type, double tol)
{
	struct vision_config vc = *vcp;
	char dir[64], path[128];
	snprintf(dir, sizeof dir, "/tmp/unicorn-test-vis-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/mmproj-m.gguf", dir);
	cr_assert_eq(mkmodel_write_mmproj(path, &vc, type, 11, 1, true), 0, "%s", err_msg());
	struct mmproj *p;
	cr_assert_eq(mmproj_open(path, &p), 0, "%s", err_msg());
	struct ref_vision *r;
	cr_assert_eq(ref_vision_create(p, &r), 0, "%s", err_msg());
	struct vk_ctx *vk;
	cr_assert_eq(vk_create(NULL, &vk), 0, "%s", err_msg());
	struct vision_gpu *g;
	cr_assert_eq(vision_gpu_create(vk, p, &g), 0, "%s", err_msg());
	mmproj_close(p);
	unlink(path);
	rmdir(dir);

	size_t npx = (size_t)3 * vc.image_size * vc.image_size, nout = (size_t)vc.n_tokens * vc.proj_dim;
	float *px = malloc(npx * sizeof(float)), *want = malloc(nout * sizeof(float)),
	      *got = malloc(nout * sizeof(float)), *got2 = malloc(nout * sizeof(float));
	uint8_t rgb[150 * 90 * 3];
	for (uint32_t img = 0; img < 2; img++) {
		image(rgb, 150, 90, img);
		cr_assert_eq(image_prep(rgb, 150, 90, &vc, px), 0);
		cr_assert_eq(ref_vision_encode(r, px, want), 0);
		cr_assert_eq(vision_gpu_encode(g, px, got), 0, "%s", err_msg());
		double e = rel_l2(got, want, nout);
		cr_expect(e <= tol, "type %u image %u: relative L2 %g > %g", type, img, e, tol);
		double norm = 0;
		for (size_t i = 0; i < nout; i++)
			norm += (double)want[i] * want[i];
		cr_expect(sqrt(norm / nout) > 0.1, "output near zero: rms %g", sqrt(norm / nout));
		if (img == 1)
			cr_expect(rel_l2(got, got2, nout) > 1e-3, "two images, one answer");
		memcpy(got2, got, nout * sizeof(float));
	}
	/* one patch (bottom right) changes: the first token, far from it, moves */
	float *px2 = malloc(npx * sizeof(float));
	memcpy(px2, px, npx * sizeof(float));
	uint32_t S = vc.image_size;
	for (uint32_t c = 0; c < 3; c++)
		for (uint32_t y = S - vc.patch_size; y < S; y++)
			for (uint32_t x = S - vc.patch_size; x < S; x++)
				px2[((size_t)c * S + y) * S + x] = -px2[((size_t)c * S + y) * S + x];
	cr_assert_eq(vision_gpu_encode(g, px2, got2), 0);
	double moved = rel_l2(got2, got, vc.proj_dim);
	cr_expect(moved > 1e-4, "token 0 did not see the last patch: %g", moved);
	cr_assert_eq(ref_vision_encode(r, px2, want), 0);
	cr_expect(rel_l2(got2, want, nout) <= tol);
	free(px);
	free(px2);
	free(want);
	free(got);
	free(got2);
	vision_gpu_destroy(g);
	vk_destroy(vk);
	ref_vision_destroy(r);
}

Test(vision_gpu, tiny_f32_matches_reference, .timeout = 120) { check_type(TENSOR_F32, 1e-4); }
Test(vision_gpu, tiny_f16_matches_reference, .timeout = 120) { check_type(TENSOR_F16, 5e-3); }

Test(vision_gpu, heads_72_wide_partial_tiles, .timeout = 120)
{
	struct vision_config vc = {
		.image_size = 140, .patch_size = 14, .n_embd = 288, .n_ff = 1076, .n_layer = 5, .n_head = 4,
		.proj_dim = 96, .merge = 5, .eps = 1e-6f, .image_mean = { 0.5f, 0.5f, 0.5f },
		.image_std = { 0.5f, 0.5f, 0.5f },
	};
	/* 100 patches: a partial key tile (32) and a partial query block (64) */
	vc.patches_per_side = 10, vc.n_patches = 100, vc.tokens_per_side = 2, vc.n_tokens = 4, vc.head_dim = 72;
	check_cfg(&vc, TENSOR_F32, 1e-4);
}
