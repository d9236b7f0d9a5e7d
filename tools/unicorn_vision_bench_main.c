/* unicorn-vision-bench: time Gemma 3's vision tower on a Vulkan device — the
 * upload of an mmproj file and the encode of a synthetic image (the figures
 * BENCHMARKS.md reports as image encode time), optionally checked against the
 * CPU reference on small shapes. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "formats/image_prep.h"
#include "formats/mmproj.h"
#include "gpu_worker/vision.h"
#include "gpu_worker/vk.h"
#include "ref/ref_vision.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: unicorn-vision-bench MMPROJ [--reps N] [--device SEL] [--check]\n"
		"\n"
		"Uploads the vision tower of an mmproj GGUF (Gemma 3, llama.cpp's layout) to\n"
		"a Vulkan device and encodes a synthetic 1024x768 image N times (default 5):\n"
		"prints the preprocessing, upload and encode times (wall and GPU) and the\n"
		"tokens per image.\n"
		"\n"
		"  --reps N      encodes to time (the first is reported apart as warm-up)\n"
		"  --device SEL  Vulkan device: index or name substring (default: first GPU)\n"
		"  --check       also run the CPU reference and print the relative L2 error;\n"
		"                exit status 1 past the golden tolerance (slow: small shapes)\n"
		"\n"
		"UNICORN_NO_COOPMAT=1 keeps the products off matrix cores (A/B).\n");
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *dev = NULL;
	int reps = 5, check = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--check")) {
			check = 1;
		} else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			reps = atoi(argv[++i]);
			if (reps < 1 || reps > 1000) {
				fprintf(stderr, "unicorn-vision-bench: --reps %s: expected 1..1000\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
			dev = argv[++i];
		} else if (argv[i][0] == '-' || path) {
			usage(stderr);
			return 2;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		usage(stderr);
		return 2;
	}
	struct mmproj *p;
	if (mmproj_open(path, &p)) {
		fprintf(stderr, "unicorn-vision-bench: %s\n", err_msg());
		return 1;
	}
	const struct vision_config *c = &p->cfg;
	struct vk_ctx *vk;
	if (vk_create(dev, &vk)) {
		fprintf(stderr, "unicorn-vision-bench: %s\n", err_msg());
		mmproj_close(p);
		return 1;
	}
	double t0 = now_ms();
	struct vision_gpu *g;
	if (vision_gpu_create(vk, p, &g)) {
		fprintf(stderr, "unicorn-vision-bench: %s\n", err_msg());
		vk_destroy(vk);
		mmproj_close(p);
		return 1;
	}
	double t_up = now_ms() - t0;
	uint32_t W = 1024, H = 768;
	uint8_t *rgb = malloc((size_t)W * H * 3);
	size_t npx = (size_t)3 * c->image_size * c->image_size, nout = (size_t)c->n_tokens * c->proj_dim;
	float *px = malloc(npx * sizeof(float)), *out = malloc(nout * sizeof(float));
	if (!rgb || !px || !out) {
		fprintf(stderr, "unicorn-vision-bench: out of memory\n");
		return 1;
	}
	for (uint32_t y = 0; y < H; y++)
		for (uint32_t x = 0; x < W; x++)
			for (uint32_t k = 0; k < 3; k++)
				rgb[((size_t)y * W + x) * 3 + k] = (uint8_t)((x * (k + 1) + y * 3 + (x ^ y)) & 255);
	t0 = now_ms();
	int rc = image_prep(rgb, W, H, c, px);
	double t_prep = now_ms() - t0;
	double first = 0, sum = 0, best = 1e30, gpu_sum = 0;
	for (int r = 0; r <= reps && !rc; r++) {
		t0 = now_ms();
		rc = vision_gpu_encode(g, px, out);
		double ms = now_ms() - t0;
		if (r == 0) {
			first = ms;
			continue;
		}
		sum += ms;
		best = ms < best ? ms : best;
		gpu_sum += vision_gpu_last_ns(g) / 1e6;
	}
	if (rc) {
		fprintf(stderr, "unicorn-vision-bench: %s\n", err_msg());
		return 1;
	}
	printf("device:        %s\n", vk->info.name);
	printf("mmproj:        %s (%u px, %u layers, %u wide, %u tokens, %s matrices)\n", path, c->image_size,
	       c->n_layer, c->n_embd, c->n_tokens, p->layers[0].q_w->type == 0 ? "f32" : "f16/other");
	printf("kernels:       %s\n", vision_gpu_kernels(g));
	printf("upload_ms:     %.1f\n", t_up);
	printf("prep_ms:       %.2f (1024x768 -> %u x %u)\n", t_prep, c->image_size, c->image_size);
	printf("encode_first:  %.2f ms\n", first);
	printf("encode_ms:     %.2f mean, %.2f best of %d (GPU %.2f ms mean)\n", sum / reps, best, reps,
	       gpu_sum / reps);
	if (check) {
		struct ref_vision *r;
		float *want = malloc(nout * sizeof(float));
		if (!want || ref_vision_create(p, &r) || ref_vision_encode(r, px, want)) {
			fprintf(stderr, "unicorn-vision-bench: reference: %s\n", err_msg());
			return 1;
		}
		double num = 0, den = 0;
		for (size_t i = 0; i < nout; i++) {
			num += ((double)out[i] - want[i]) * ((double)out[i] - want[i]);
			den += (double)want[i] * want[i];
		}
		/* golden tolerances: f32 end to end 1e-4; f16 weights or f16 products
		 * on matrix cores 5e-3 */
		double rel = sqrt(num / (den > 0 ? den : 1));
		bool f32 = p->layers[0].q_w->type == 0 && !strstr(vision_gpu_kernels(g), "matrix cores");
		double tol = f32 ? 1e-4 : 5e-3;
		printf("rel_l2:        %.3g (vs CPU reference; tolerance %g): %s\n", rel, tol, rel <= tol ? "ok" : "FAIL");
		ref_vision_destroy(r);
		free(want);
		if (rel > tol)
			return 1;
	}
	free(rgb);
	free(px);
	free(out);
	vision_gpu_destroy(g);
	vk_destroy(vk);
	mmproj_close(p);
	return 0;
}
