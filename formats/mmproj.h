/* mmproj: Gemma 3's vision tower and projector, as llama.cpp writes them in
 * an `mmproj-*.gguf` file (general.architecture "clip", clip.projector_type
 * "gemma3", clip.vision.* keys, v.* and mm.* tensors).
 *
 * The tower is SigLIP: a stride-patch convolution, learned positions,
 * n_layer pre-norm blocks (LayerNorm with bias, multi-head attention with
 * bias, GELU(tanh) MLP with bias), a post LayerNorm; the projector average-
 * pools patches_per_side^2 patches to tokens_per_side^2 tokens, applies an
 * RMSNorm whose stored weight is already 1+w (the converter adds the one),
 * and multiplies by mm.input_projection.weight into the text model's width.
 *
 * Every count, size and shape is validated (hostile files get an error naming
 * the file and the field). Tensors are exposed as struct model_tensor so the
 * reference and the loaders dequantize them like the text model's. */
#ifndef UNICORN_MMPROJ_H
#define UNICORN_MMPROJ_H

#include <stddef.h>
#include <stdint.h>

#include "formats/model.h"

#define MMPROJ_MAX_LAYERS 128
#define MMPROJ_MAX_IMAGE 4096      /* clip.vision.image_size, pixels per side */
#define MMPROJ_MAX_PATCHES 16384   /* patches per image (896/14: 4,096) */
#define MMPROJ_MAX_EMBD 16384
#define MMPROJ_MAX_FF 65536

struct vision_config {
	uint32_t image_size;       /* square input, pixels per side */
	uint32_t patch_size;       /* conv kernel = stride */
	uint32_t n_embd;           /* tower width (1152) */
	uint32_t n_ff;             /* MLP width (4304) */
	uint32_t n_layer;          /* 27 */
	uint32_t n_head;           /* 16 */
	uint32_t head_dim;         /* n_embd / n_head */
	uint32_t proj_dim;         /* text model width the projector writes */
	uint32_t merge;            /* average-pool kernel and stride (4) */
	uint32_t patches_per_side; /* image_size / patch_size */
	uint32_t n_patches;        /* patches_per_side^2 */
	uint32_t tokens_per_side;  /* patches_per_side / merge */
	uint32_t n_tokens;         /* tokens_per_side^2: image tokens in the sequence */
	float eps;                 /* LayerNorm and soft-embedding RMSNorm epsilon */
	float image_mean[3], image_std[3];
};

struct mmproj_layer {
	const struct model_tensor *ln1_w, *ln1_b, *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b,
		*ln2_w, *ln2_b, *up_w, *up_b, *down_w, *down_b;
};

struct mmproj {
	char *path;
	struct vision_config cfg;
	size_t n_tensors;
	struct model_tensor *tensors;
	const struct model_tensor *patch_w;   /* ne {patch, patch, 3, n_embd} */
	const struct model_tensor *patch_b;   /* {n_embd} */
	const struct model_tensor *pos;       /* {n_embd, n_patches} */
	const struct model_tensor *post_ln_w, *post_ln_b;
	const struct model_tensor *soft_norm; /* {n_embd}, effective weight */
	const struct model_tensor *proj;      /* {proj_dim, n_embd}: out[j] = sum_i x[i] * proj[i][j] */
	struct mmproj_layer *layers;          /* cfg.n_layer */
	void *priv;
};

/* mmap path and validate it: an mmproj GGUF, or a Hugging Face
 * Gemma3ForConditionalGeneration checkpoint directory (config.json's
 * vision_config and mm_tokens_per_image; the vision_tower.vision_model.* and
 * multi_modal_projector.* tensors under their GGUF names, the soft-embedding
 * norm read as 1+w). */
int mmproj_open(const char *path, struct mmproj **out);
/* Validate a buffer the caller keeps alive until mmproj_close (tests, fuzzing). */
int mmproj_parse(const void *data, size_t size, const char *name, struct mmproj **out);
void mmproj_close(struct mmproj *p);
/* The projector must write the text model's width. */
int mmproj_check_text(const struct mmproj *p, const struct gemma3_config *text);
/* The vision projector that goes with a model: `mmproj-*.gguf` in the model's
 * directory (the directory itself for a Hugging Face checkpoint with a
 * vision_config: it carries its tower), preferring
 * mmproj-<model base name>.gguf when several are there. malloc'd path, or
 * NULL when there is none (or out of memory). */
char *mmproj_find_beside(const char *model_path);
/* Whether a GGUF file is a vision projector (general.architecture "clip"),
 * so tools given one by mistake can say so. */
bool mmproj_is_clip(const char *path);
/* Range-check a vision configuration (derived fields included); label names
 * its source in errors. */
int mmproj_check_config(const char *label, const struct vision_config *c);

#endif
