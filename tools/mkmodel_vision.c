/* mkmodel_vision: a random-weight Gemma 3 mmproj GGUF in llama.cpp's layout
 * (the keys and tensor names its converter writes for projector_type gemma3),
 * for tests and for measuring the vision tower on the real shapes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/progress.h"
#include "formats/quant.h"
#include "tools/mkmodel.h"

static void vc_derive(struct vision_config *c)
{
	c->patches_per_side = c->image_size / c->patch_size;
	c->n_patches = c->patches_per_side * c->patches_per_side;
	c->tokens_per_side = c->patches_per_side / c->merge;
	c->n_tokens = c->tokens_per_side * c->tokens_per_side;
	c->head_dim = c->n_embd / c->n_head;
}

int mkmodel_vision_config(const char *shape, uint32_t text_embd, struct vision_config *c)
{
	memset(c, 0, sizeof *c);
	if (!strncasecmp(shape, "tiny", 4) || !strcasecmp(shape, "demo")) {
		/* 112 px / 14 = 8x8 patches, pooled 2x2 to 16 tokens; 4 heads of 16;
		 * MLP 240 wide, not a multiple of 32 as 4304 is not. */
		c->image_size = 112;
		c->patch_size = 14;
		c->n_embd = 64;
		c->n_ff = 240; /* not a multiple of 32, as 4304: the padded path */
		c->n_layer = 2;
		c->n_head = 4;
		c->merge = 2;
	} else if (!strcasecmp(shape, "4b") || !strcasecmp(shape, "12b") || !strcasecmp(shape, "27b")) {
		/* SigLIP-So400m as Gemma 3 ships it: 896 px, 64x64 patches -> 256 tokens. */
		c->image_size = 896;
		c->patch_size = 14;
		c->n_embd = 1152;
		c->n_ff = 4304;
		c->n_layer = 27;
		c->n_head = 16;
		c->merge = 4;
	} else {
		return err_set(ERR_INVAL, "shape '%s': no vision tower (tiny*, demo, 4b, 12b, 27b have one)", shape);
	}
	c->proj_dim = text_embd;
	c->eps = 1e-6f;
	for (int i = 0; i < 3; i++)
		c->image_mean[i] = c->image_std[i] = 0.5f;
	vc_derive(c);
	return mmproj_check_config(shape, c);
}

char *mkmodel_mmproj_path(const char *model_path)
{
	const char *slash = strrchr(model_path, '/');
	const char *base = slash ? slash + 1 : model_path;
	size_t dir_len = (size_t)(base - model_path), base_len = strlen(base);
	if (base_len > 5 && !strcmp(base + base_len - 5, ".gguf"))
		base_len -= 5;
	char *out = malloc(dir_len + base_len + 16);
	if (!out)
		return NULL;
	sprintf(out, "%.*smmproj-%.*s.gguf", (int)dir_len, model_path, (int)base_len, base);
	return out;
}

enum vk_kind { VK_MATRIX, VK_BIAS, VK_NORM_W, VK_NORM_B, VK_POS, VK_SOFT };

struct vt {
	char name[64];
	uint32_t n_dims;
	uint64_t ne[4];
	enum vk_kind kind;
	uint32_t type;
};

/* The tensor list: patch embedding, positions, per block the 16 tensors,
 * post LayerNorm, then the projector. */
static size_t vt_count(const struct vision_config *c)
{
	return 5 + 16 * (size_t)c->n_layer + 2;
}

static void vt_at(const struct vision_config *c, uint32_t mat_type, size_t i, struct vt *t)
{
	memset(t, 0, sizeof *t);
	uint64_t d = c->n_embd, f = c->n_ff;
	t->ne[0] = t->ne[1] = t->ne[2] = t->ne[3] = 1;
	t->type = TENSOR_F32;
	if (i == 0) {
		snprintf(t->name, sizeof t->name, "v.patch_embd.weight");
		t->n_dims = 4;
		t->ne[0] = t->ne[1] = c->patch_size;
		t->ne[2] = 3;
		t->ne[3] = d;
		t->kind = VK_MATRIX;
		return; /* f32 as llama.cpp's converter forces for .embeddings. */
	}
	if (i == 1) {
		snprintf(t->name, sizeof t->name, "v.patch_embd.bias");
		t->n_dims = 1, t->ne[0] = d, t->kind = VK_BIAS;
		return;
	}
	if (i == 2) {
		snprintf(t->name, sizeof t->name, "v.position_embd.weight");
		t->n_dims = 2, t->ne[0] = d, t->ne[1] = c->n_patches, t->kind = VK_POS;
		return;
	}
	size_t nl = 16 * (size_t)c->n_layer;
	if (i >= 3 && i < 3 + nl) {
		size_t k = (i - 3) % 16;
		uint32_t il = (uint32_t)((i - 3) / 16);
		static const char *const nm[16] = {
			"ln1.weight", "ln1.bias", "attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias",
			"attn_v.weight", "attn_v.bias", "attn_out.weight", "attn_out.bias", "ln2.weight",
			"ln2.bias", "ffn_up.weight", "ffn_up.bias", "ffn_down.weight", "ffn_down.bias",
		};
		snprintf(t->name, sizeof t->name, "v.blk.%u.%s", il, nm[k]);
		t->n_dims = 1;
		t->ne[0] = d;
		if (k == 0 || k == 10) {
			t->kind = VK_NORM_W;
		} else if (k == 1 || k == 11) {
			t->kind = VK_NORM_B;
		} else if (k == 2 || k == 4 || k == 6 || k == 8) {
			t->n_dims = 2, t->ne[1] = d, t->kind = VK_MATRIX, t->type = mat_type;
		} else if (k == 12) {
			t->n_dims = 2, t->ne[1] = f, t->kind = VK_MATRIX, t->type = mat_type;
		} else if (k == 13) {
			t->ne[0] = f, t->kind = VK_BIAS;
		} else if (k == 14) {
			t->n_dims = 2, t->ne[0] = f, t->ne[1] = d, t->kind = VK_MATRIX, t->type = mat_type;
		} else {
			t->kind = VK_BIAS;
		}
		return;
	}
	size_t j = i - 3 - nl;
	if (j == 0 || j == 1) {
		snprintf(t->name, sizeof t->name, j == 0 ? "v.post_ln.weight" : "v.post_ln.bias");
		t->n_dims = 1, t->ne[0] = d, t->kind = j == 0 ? VK_NORM_W : VK_NORM_B;
	} else if (j == 2) {
		snprintf(t->name, sizeof t->name, "mm.soft_emb_norm.weight");
		t->n_dims = 1, t->ne[0] = d, t->kind = VK_SOFT;
	} else {
		/* HF's mm_input_projection_weight is [vision, text]: GGUF ne {text, vision};
		 * the converter forces f16 (f32 files keep f32). */
		snprintf(t->name, sizeof t->name, "mm.input_projection.weight");
		t->n_dims = 2, t->ne[0] = c->proj_dim, t->ne[1] = d, t->kind = VK_MATRIX;
		t->type = mat_type == TENSOR_F32 ? TENSOR_F32 : TENSOR_F16;
	}
}

static inline uint64_t vmix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct vsrc {
	uint64_t base;
	float k;
	uint64_t ne0;
};

/* Triangular noise as mkmodel_fill's: element e is a pure function of (seed,
 * tensor, e). */
static int vsrc_fill(void *arg, uint64_t row0, uint64_t nrows, float *dst)
{
	const struct vsrc *s = arg;
	uint64_t z = s->base + (row0 * s->ne0 + 1) * 0x9e3779b97f4a7c15ull;
	for (uint64_t i = 0; i < nrows * s->ne0; i++, z += 0x9e3779b97f4a7c15ull) {
		uint64_t r = vmix(z);
		int32_t a = (int32_t)(uint32_t)(r >> 32), b = (int32_t)(uint32_t)r;
		dst[i] = (float)((int64_t)a + (int64_t)b) * s->k;
	}
	return 0;
}

static int vsink(void *arg, const void *p, size_t n)
{
	return gguf_writer_write(arg, p, n);
}

int mkmodel_write_mmproj(const char *path, const struct vision_config *c, uint32_t mat_type, uint64_t seed,
			 int threads, bool quiet)
{
	int rc = mmproj_check_config(path, c);
	if (rc)
		return rc;
	/* Rows of 1152 / 4304 fit no 32-block type: matrices are f32 or f16,
	 * as llama.cpp's published mmproj files are. */
	uint32_t mt = mat_type == TENSOR_F32 ? TENSOR_F32 : TENSOR_F16;
	struct gguf_writer *w;
	if ((rc = gguf_writer_create(path, &w)))
		return rc;
	float mean[3], std[3];
	memcpy(mean, c->image_mean, sizeof mean);
	memcpy(std, c->image_std, sizeof std);
	if ((rc = gguf_writer_add_str(w, "general.architecture", "clip")) ||
	    (rc = gguf_writer_add_str(w, "general.name", "synthetic-gemma3-mmproj")) ||
	    (rc = gguf_writer_add_u32(w, "general.file_type", mt == TENSOR_F32 ? 0 : 1)) ||
	    (rc = gguf_writer_add_str(w, "clip.projector_type", "gemma3")) ||
	    (rc = gguf_writer_add_bool(w, "clip.has_vision_encoder", true)) ||
	    (rc = gguf_writer_add_bool(w, "clip.use_gelu", true)) ||
	    (rc = gguf_writer_add_u32(w, "clip.vision.projection_dim", c->proj_dim)) ||
	    (rc = gguf_writer_add_u32(w, "clip.vision.image_size", c->image_size)) ||
	    (rc = gguf_writer_add_u32(w, "clip.vision.patch_size", c->patch_size)) ||
	    (rc = gguf_writer_add_u32(w, "clip.vision.embedding_length", c->n_embd)) ||
	    (rc = gguf_writer_add_u32(w, "clip.vision.feed_forward_length", c->n_ff)) ||
	    (rc = gguf_writer_add_u32(w, "clip.vision.block_count", c->n_layer)) ||
	    (rc = gguf_writer_add_u32(w, "clip.vision.attention.head_count", c->n_head)) ||
	    (rc = gguf_writer_add_f32(w, "clip.vision.attention.layer_norm_epsilon", c->eps)) ||
	    (rc = gguf_writer_add_arr(w, "clip.vision.image_mean", GGUF_F32, mean, 3)) ||
	    (rc = gguf_writer_add_arr(w, "clip.vision.image_std", GGUF_F32, std, 3)))
		goto out;
	/* llama.cpp writes the pooling factor only when it is not Gemma 3's 4. */
	if (c->merge != 4 && (rc = gguf_writer_add_u32(w, "clip.vision.projector.scale_factor", c->merge)))
		goto out;
	size_t nt = vt_count(c);
	for (size_t i = 0; i < nt && !rc; i++) {
		struct vt t;
		vt_at(c, mt, i, &t);
		rc = gguf_writer_add_tensor(w, t.name, t.type, t.n_dims, t.ne);
	}
	if (!rc)
		rc = gguf_writer_begin_data(w);
	struct progress prog;
	progress_init(&prog, stderr, "mmproj", rc ? 0 : gguf_writer_file_size(w));
	progress_set_quiet(&prog, quiet);
	for (size_t i = 0; i < nt && !rc; i++) {
		struct vt t;
		vt_at(c, mt, i, &t);
		float sd, add = 0;
		switch (t.kind) {
		case VK_MATRIX: {
			/* fan-in: a row, the conv's patch x 3, the projection's column */
			uint64_t fan = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3] / t.ne[t.n_dims - 1];
			if (!strcmp(t.name, "mm.input_projection.weight"))
				fan = t.ne[1];
			sd = 1.0f / sqrtf((float)fan);
			break;
		}
		case VK_NORM_W: sd = 0.05f, add = 1.0f; break;
		case VK_SOFT: sd = 0.05f, add = 1.0f; break; /* stored 1+w, as the converter does */
		case VK_POS: sd = 0.3f; break;
		default: sd = 0.02f; break;
		}
		struct vsrc src = { .base = vmix(seed ^ vmix(0x715100ull + i)),
				    .k = sd / sqrtf(2.0f / 3.0f) * (1.0f / 2147483648.0f), .ne0 = t.ne[0] };
		struct mkmodel_stream s = {
			.ne0 = t.ne[0], .nrows = t.ne[1] * t.ne[2] * t.ne[3], .type = t.type, .add = add,
			.src = vsrc_fill, .src_arg = &src, .sink = vsink, .sink_arg = w, .prog = &prog,
			.threads = threads, .what = t.name,
		};
		rc = mkmodel_stream_tensor(&s);
	}
	if (!rc)
		rc = gguf_writer_finish(w);
	if (!rc)
		progress_finish(&prog);
out:
	gguf_writer_destroy(w);
	return rc;
}
