/* ref_vision: the CPU reference for Gemma 3's vision tower and projector.
 *
 * For tests only (the Vulkan tower is checked against it); never a runtime
 * fallback. Every weight is dequantized to f32 once; dot products, norms and
 * softmax accumulate in double. The math, after llama.cpp's clip graph for
 * projector gemma3 and Hugging Face's SiglipVisionModel + Gemma3MultiModal-
 * Projector:
 *   x[p] = conv(pixels, patch_w, stride patch) [p] + patch_b + pos[p]
 *   per layer: x += attn_out(MHA(LN1(x)));  x += down(gelu_tanh(up(LN2(x))))
 *   x = post_LN(x)          (bidirectional attention over all patches)
 *   t = avgpool(x, merge x merge) in row-major patch order
 *   out = (rmsnorm(t) * soft_norm) @ proj     (soft_norm stored as 1+w)
 */
#ifndef UNICORN_REF_VISION_H
#define UNICORN_REF_VISION_H

#include "formats/mmproj.h"

struct ref_vision_layer {
	float *ln1_w, *ln1_b, *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b;
	float *ln2_w, *ln2_b, *up_w, *up_b, *down_w, *down_b;
};

struct ref_vision {
	struct vision_config cfg;
	float *patch_w;   /* [n_embd][3][patch][patch] */
	float *patch_b;   /* [n_embd] */
	float *pos;       /* [n_patches][n_embd] */
	float *post_w, *post_b;
	float *soft_norm; /* [n_embd] effective */
	float *proj;      /* [n_embd][proj_dim] */
	struct ref_vision_layer *layers;
};

int ref_vision_create(const struct mmproj *p, struct ref_vision **out);
void ref_vision_destroy(struct ref_vision *r);

/* The tower: pixels [3][image_size][image_size] (normalized, planar) to
 * hidden [n_patches][n_embd] after the post LayerNorm. */
int ref_vision_tower(const struct ref_vision *r, const float *pixels, float *hidden);
/* The projector: hidden [n_patches][n_embd] to out [n_tokens][proj_dim]. */
int ref_vision_project(const struct ref_vision *r, const float *hidden, float *out);
/* Both. */
int ref_vision_encode(const struct ref_vision *r, const float *pixels, float *out);

#endif
