/* vision: Gemma 3's vision tower and projector on Vulkan — an image's
 * normalized pixels to n_tokens x proj_dim embeddings for the text model.
 *
 * The matrix products run the engine's mat-mat kernels (mul_mm_cm_* on
 * matrix cores where the device has them and the width is a multiple of 64,
 * else the tiled mul_mm_*; f32 matrices when the file's are, else f16); the
 * patch convolution is one of them over patches unrolled on the host
 * (stride = kernel: no overlap); LayerNorm, bias/residual/GELU, the
 * bidirectional attention and the pool + soft-embedding norm are the vis_*
 * shaders. The whole encode is recorded once into one command buffer and
 * replayed per image. Checked against ref/ref_vision.h. */
#ifndef UNICORN_GPU_VISION_H
#define UNICORN_GPU_VISION_H

#include "formats/mmproj.h"
#include "gpu_worker/vk.h"

struct vision_gpu;

/* Upload p's weights (p may be closed afterwards). ERR_UNSUP when a width is
 * not a multiple of 32 or the head is wider than 128. */
int vision_gpu_create(struct vk_ctx *vk, const struct mmproj *p, struct vision_gpu **out);
void vision_gpu_destroy(struct vision_gpu *v);
const struct vision_config *vision_gpu_config(const struct vision_gpu *v);
/* pixels [3][image_size][image_size] (formats/image_prep.h) to
 * out [n_tokens][proj_dim]. */
int vision_gpu_encode(struct vision_gpu *v, const float *pixels, float *out);
/* The matrix kernel in use, for reports. */
const char *vision_gpu_kernels(const struct vision_gpu *v);
/* GPU time of the last encode in ns (0 without timestamps). */
uint64_t vision_gpu_last_ns(const struct vision_gpu *v);

#endif
