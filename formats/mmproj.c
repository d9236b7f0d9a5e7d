/* mmproj: read and validate a Gemma 3 vision projector GGUF (see mmproj.h). */
#include "formats/mmproj.h"

#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>
#include <unistd.h>

#include "common/err.h"
#include "common/readfile.h"
#include "formats/gguf.h"
#include "formats/quant.h"
#include "formats/safetensors.h"

static int key_u32(const struct gguf *g, const char *key, int required, uint32_t def, uint32_t min,
		   uint32_t max, uint32_t *out)
{
	uint64_t v;
	int rc = gguf_get_u64(g, key, &v);
	if (rc == ERR_NOTFOUND && !required) {
		err_clear();
		*out = def;
		return 0;
	}
	if (rc)
		return err_prefix(rc, "%s", g->path);
	if (v < min || v > max)
		return err_set(ERR_RANGE, "%s: key '%s': %" PRIu64 " out of range [%u, %u]", g->path, key, v,
			       min, max);
	*out = (uint32_t)v;
	return 0;
}

static int key_str_is(const struct gguf *g, const char *key, const char *want, int *found)
{
	struct gguf_str s;
	int rc = gguf_get_str(g, key, &s);
	if (rc == ERR_NOTFOUND) {
		err_clear();
		*found = 0;
		return 0;
	}
	if (rc)
		return err_prefix(rc, "%s", g->path);
	*found = 1;
	if (s.len != strlen(want) || memcmp(s.ptr, want, s.len))
		return err_set(ERR_UNSUP, "%s: %s: '%.*s' is not supported (%s)", g->path, key,
			       (int)(s.len > 32 ? 32 : s.len), s.ptr, want);
	return 0;
}

/* Three finite floats (image_mean / image_std). */
static int key_rgb(const struct gguf *g, const char *key, float def, float out[3])
{
	const struct gguf_array *a;
	int rc = gguf_get_arr(g, key, &a);
	if (rc == ERR_NOTFOUND) {
		err_clear();
		out[0] = out[1] = out[2] = def;
		return 0;
	}
	if (rc)
		return err_prefix(rc, "%s", g->path);
	if (a->n != 3)
		return err_set(ERR_INVAL, "%s: key '%s': %" PRIu64 " values, expected 3", g->path, key, a->n);
	for (uint64_t i = 0; i < 3; i++) {
		double v;
		if ((rc = gguf_arr_f64(a, i, &v)))
			return err_prefix(rc, "%s: key '%s'", g->path, key);
		if (!isfinite(v) || fabs(v) > 1e6)
			return err_set(ERR_RANGE, "%s: key '%s'[%" PRIu64 "]: %g out of range", g->path, key, i, v);
		out[i] = (float)v;
	}
	return 0;
}

int mmproj_check_config(const char *label, const struct vision_config *c)
{
	if (!c->image_size || c->image_size > MMPROJ_MAX_IMAGE)
		return err_set(ERR_RANGE, "%s: image_size %u out of range [1, %u]", label, c->image_size,
			       MMPROJ_MAX_IMAGE);
	if (!c->patch_size || c->patch_size > c->image_size || c->image_size % c->patch_size)
		return err_set(ERR_INVAL, "%s: patch_size %u does not divide image_size %u", label, c->patch_size,
			       c->image_size);
	uint32_t pps = c->image_size / c->patch_size;
	if ((uint64_t)pps * pps > MMPROJ_MAX_PATCHES)
		return err_set(ERR_RANGE, "%s: %u x %u patches: more than %u", label, pps, pps, MMPROJ_MAX_PATCHES);
	if (!c->merge || pps % c->merge)
		return err_set(ERR_INVAL, "%s: pooling kernel %u does not divide %u patches per side", label, c->merge,
			       pps);
	if (!c->n_embd || c->n_embd > MMPROJ_MAX_EMBD || !c->n_ff || c->n_ff > MMPROJ_MAX_FF)
		return err_set(ERR_RANGE, "%s: width %u / feed-forward %u out of range", label, c->n_embd, c->n_ff);
	if (!c->n_layer || c->n_layer > MMPROJ_MAX_LAYERS)
		return err_set(ERR_RANGE, "%s: block_count %u out of range [1, %u]", label, c->n_layer,
			       MMPROJ_MAX_LAYERS);
	if (!c->n_head || c->n_embd % c->n_head)
		return err_set(ERR_INVAL, "%s: head_count %u does not divide width %u", label, c->n_head, c->n_embd);
	if (!c->proj_dim || c->proj_dim > 65536)
		return err_set(ERR_RANGE, "%s: projection width %u out of range", label, c->proj_dim);
	if (!(c->eps > 0.0f) || !(c->eps < 1.0f))
		return err_set(ERR_RANGE, "%s: layer_norm_epsilon %g out of range (0, 1)", label, (double)c->eps);
	for (int i = 0; i < 3; i++)
		if (!(c->image_std[i] > 1e-6f) || !isfinite(c->image_mean[i]))
			return err_set(ERR_RANGE, "%s: image_std[%d] %g / image_mean %g out of range", label, i,
				       (double)c->image_std[i], (double)c->image_mean[i]);
	if (c->patches_per_side != pps || c->n_patches != pps * pps || c->tokens_per_side != pps / c->merge ||
	    c->n_tokens != c->tokens_per_side * c->tokens_per_side || c->head_dim != c->n_embd / c->n_head)
		return err_set(ERR_INVAL, "%s: derived sizes inconsistent", label);
	return 0;
}

struct mmproj_priv {
	struct gguf *g;
	struct safetensors_set *st; /* a Hugging Face checkpoint's tensors */
};

void mmproj_close(struct mmproj *p)
{
	if (!p)
		return;
	struct mmproj_priv *pr = p->priv;
	if (pr) {
		gguf_close(pr->g);
		safetensors_set_close(pr->st);
		free(pr);
	}
	free(p->layers);
	free(p->tensors);
	free(p->path);
	free(p);
}

static const struct model_tensor *find(const struct mmproj *p, const char *name)
{
	for (size_t i = 0; i < p->n_tensors; i++)
		if (!strcmp(p->tensors[i].name, name))
			return &p->tensors[i];
	return NULL;
}

/* Tensor `name` with exactly dims ne[0..n_dims), a supported type and the
 * bytes its shape needs. */
static int require(const struct mmproj *p, const char *name, uint32_t n_dims, uint64_t ne0, uint64_t ne1,
		   uint64_t ne2, uint64_t ne3, const struct model_tensor **out)
{
	const struct model_tensor *t = find(p, name);
	if (!t)
		return err_set(ERR_NOTFOUND, "%s: tensor %s: missing", p->path, name);
	uint64_t want[4] = { ne0, ne1, ne2, ne3 };
	for (int d = 0; d < 4; d++)
		if (t->ne[d] != want[d])
			return err_set(ERR_INVAL,
				       "%s: tensor %s: shape {%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
				       "}, expected {%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 "}",
				       p->path, name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], ne0, ne1, ne2, ne3);
	(void)n_dims;
	if (!quant_type_info(t->type))
		return err_set(ERR_UNSUP, "%s: tensor %s: type %u not supported", p->path, name, t->type);
	uint64_t row_bytes, need;
	int rc = quant_row_bytes(t->type, ne0, &row_bytes);
	if (rc)
		return err_prefix(rc, "%s: tensor %s", p->path, name);
	if (__builtin_mul_overflow(row_bytes, ne1 * ne2 * ne3, &need) || need > t->nbytes)
		return err_set(ERR_RANGE, "%s: tensor %s: %" PRIu64 " bytes, shape needs more", p->path, name,
			       t->nbytes);
	*out = t;
	return 0;
}

static int bind_layer(struct mmproj *p, uint32_t il)
{
	const struct vision_config *c = &p->cfg;
	struct mmproj_layer *L = &p->layers[il];
	uint64_t d = c->n_embd, f = c->n_ff;
	struct {
		const char *what;
		uint64_t ne0, ne1;
		const struct model_tensor **dst;
	} want[] = {
		{ "ln1.weight", d, 1, &L->ln1_w }, { "ln1.bias", d, 1, &L->ln1_b },
		{ "attn_q.weight", d, d, &L->q_w }, { "attn_q.bias", d, 1, &L->q_b },
		{ "attn_k.weight", d, d, &L->k_w }, { "attn_k.bias", d, 1, &L->k_b },
		{ "attn_v.weight", d, d, &L->v_w }, { "attn_v.bias", d, 1, &L->v_b },
		{ "attn_out.weight", d, d, &L->o_w }, { "attn_out.bias", d, 1, &L->o_b },
		{ "ln2.weight", d, 1, &L->ln2_w }, { "ln2.bias", d, 1, &L->ln2_b },
		{ "ffn_up.weight", d, f, &L->up_w }, { "ffn_up.bias", f, 1, &L->up_b },
		{ "ffn_down.weight", f, d, &L->down_w }, { "ffn_down.bias", d, 1, &L->down_b },
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		char name[96];
		snprintf(name, sizeof name, "v.blk.%u.%s", il, want[i].what);
		int rc = require(p, name, want[i].ne1 > 1 ? 2 : 1, want[i].ne0, want[i].ne1, 1, 1, want[i].dst);
		if (rc)
			return rc;
	}
	return 0;
}

static int bind_tensors(struct mmproj *p, uint32_t key_proj);

static int bind(struct mmproj *p)
{
	const struct gguf *g = ((struct mmproj_priv *)p->priv)->g;
	struct vision_config *c = &p->cfg;
	int rc, found;

	if ((rc = key_str_is(g, "general.architecture", "clip", &found)))
		return rc;
	if (!found)
		return err_set(ERR_NOTFOUND, "%s: general.architecture: missing (an mmproj file says clip)", p->path);
	/* Newer converters name the vision projector separately from the audio one. */
	int f1, f2;
	if ((rc = key_str_is(g, "clip.vision.projector_type", "gemma3", &f1)) ||
	    (rc = key_str_is(g, "clip.projector_type", "gemma3", &f2)))
		return rc;
	if (!f1 && !f2)
		return err_set(ERR_NOTFOUND, "%s: clip.projector_type: missing", p->path);
	bool has_vision = false;
	rc = gguf_get_bool(g, "clip.has_vision_encoder", &has_vision);
	if (rc && rc != ERR_NOTFOUND)
		return err_prefix(rc, "%s", p->path);
	err_clear();
	if (rc == 0 && !has_vision)
		return err_set(ERR_UNSUP, "%s: clip.has_vision_encoder is false", p->path);

	double eps;
	if ((rc = key_u32(g, "clip.vision.image_size", 1, 0, 1, MMPROJ_MAX_IMAGE, &c->image_size)) ||
	    (rc = key_u32(g, "clip.vision.patch_size", 1, 0, 1, MMPROJ_MAX_IMAGE, &c->patch_size)) ||
	    (rc = key_u32(g, "clip.vision.embedding_length", 1, 0, 1, MMPROJ_MAX_EMBD, &c->n_embd)) ||
	    (rc = key_u32(g, "clip.vision.feed_forward_length", 1, 0, 1, MMPROJ_MAX_FF, &c->n_ff)) ||
	    (rc = key_u32(g, "clip.vision.block_count", 1, 0, 1, MMPROJ_MAX_LAYERS, &c->n_layer)) ||
	    (rc = key_u32(g, "clip.vision.attention.head_count", 1, 0, 1, MMPROJ_MAX_EMBD, &c->n_head)) ||
	    (rc = key_u32(g, "clip.vision.projector.scale_factor", 0, 4, 1, MMPROJ_MAX_IMAGE, &c->merge)) ||
	    (rc = key_rgb(g, "clip.vision.image_mean", 0.5f, c->image_mean)) ||
	    (rc = key_rgb(g, "clip.vision.image_std", 0.5f, c->image_std)))
		return rc;
	rc = gguf_get_f64(g, "clip.vision.attention.layer_norm_epsilon", &eps);
	if (rc == ERR_NOTFOUND) {
		err_clear();
		eps = 1e-6;
	} else if (rc) {
		return err_prefix(rc, "%s", p->path);
	}
	c->eps = isfinite(eps) ? (float)eps : 0.0f;
	if (c->image_size % c->patch_size)
		return err_set(ERR_INVAL, "%s: clip.vision.patch_size %u does not divide image_size %u", p->path,
			       c->patch_size, c->image_size);
	c->patches_per_side = c->image_size / c->patch_size;
	c->n_patches = c->patches_per_side * c->patches_per_side; /* <= 4096^2: fits */
	c->tokens_per_side = c->merge ? c->patches_per_side / c->merge : 0;
	c->n_tokens = c->tokens_per_side * c->tokens_per_side;
	c->head_dim = c->n_head ? c->n_embd / c->n_head : 0;
	uint32_t key_proj;
	if ((rc = key_u32(g, "clip.vision.projection_dim", 0, 0, 0, 65536, &key_proj)))
		return rc;
	return bind_tensors(p, key_proj);
}

/* The tensors for p->cfg (its proj_dim from mm.input_projection.weight;
 * key_proj, when not 0, must agree). */
static int bind_tensors(struct mmproj *p, uint32_t key_proj)
{
	struct vision_config *c = &p->cfg;
	int rc;
	/* The projection's width comes from its tensor (clip.vision.projection_dim
	 * is optional in older files); checked against the key when present. */
	const struct model_tensor *proj = find(p, "mm.input_projection.weight");
	if (!proj)
		return err_set(ERR_NOTFOUND, "%s: tensor mm.input_projection.weight: missing", p->path);
	if (proj->ne[0] == 0 || proj->ne[0] > 65536)
		return err_set(ERR_RANGE, "%s: tensor mm.input_projection.weight: width %" PRIu64 " out of range",
			       p->path, proj->ne[0]);
	c->proj_dim = (uint32_t)proj->ne[0];
	if (key_proj && key_proj != c->proj_dim)
		return err_set(ERR_INVAL, "%s: clip.vision.projection_dim %u but mm.input_projection.weight is %u wide",
			       p->path, key_proj, c->proj_dim);
	if ((rc = mmproj_check_config(p->path, c)))
		return rc;

	uint64_t d = c->n_embd;
	if ((rc = require(p, "v.patch_embd.weight", 4, c->patch_size, c->patch_size, 3, d, &p->patch_w)) ||
	    (rc = require(p, "v.patch_embd.bias", 1, d, 1, 1, 1, &p->patch_b)) ||
	    (rc = require(p, "v.position_embd.weight", 2, d, c->n_patches, 1, 1, &p->pos)) ||
	    (rc = require(p, "v.post_ln.weight", 1, d, 1, 1, 1, &p->post_ln_w)) ||
	    (rc = require(p, "v.post_ln.bias", 1, d, 1, 1, 1, &p->post_ln_b)) ||
	    (rc = require(p, "mm.soft_emb_norm.weight", 1, d, 1, 1, 1, &p->soft_norm)) ||
	    (rc = require(p, "mm.input_projection.weight", 2, c->proj_dim, d, 1, 1, &p->proj)))
		return rc;
	p->layers = calloc(c->n_layer, sizeof *p->layers);
	if (!p->layers)
		return err_set(ERR_NOMEM, "%s: out of memory", p->path);
	for (uint32_t il = 0; il < c->n_layer; il++)
		if ((rc = bind_layer(p, il)))
			return rc;
	return 0;
}

static int finish_open(struct mmproj *p)
{
	const struct gguf *g = ((struct mmproj_priv *)p->priv)->g;
	p->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *p->tensors);
	if (!p->tensors)
		return err_set(ERR_NOMEM, "%s: out of memory", p->path);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *gt = &g->tensors[i];
		struct model_tensor *t = &p->tensors[p->n_tensors++];
		snprintf(t->name, sizeof t->name, "%s", gt->name);
		t->type = gt->type;
		t->n_dims = gt->n_dims;
		for (int d = 0; d < 4; d++)
			t->ne[d] = d < (int)gt->n_dims ? gt->ne[d] : 1;
		t->nbytes = gt->nbytes;
		t->data = gt->data;
		t->norm_offset = 0.0f; /* the converter stored 1+w for the soft-embedding norm */
	}
	return bind(p);
}

static int mmproj_new(const char *name, struct mmproj **out)
{
	*out = NULL;
	struct mmproj *p = calloc(1, sizeof *p);
	struct mmproj_priv *pr = calloc(1, sizeof *pr);
	char *path = strdup(name ? name : "(buffer)");
	if (!p || !pr || !path) {
		free(p);
		free(pr);
		free(path);
		return err_set(ERR_NOMEM, "out of memory");
	}
	p->priv = pr;
	p->path = path;
	*out = p;
	return 0;
}

/* ---- a Hugging Face checkpoint (Gemma3ForConditionalGeneration) ---- */

#define HF_VISION_CONFIG_MAX (4u << 20)

static int json_u32(const char *file, json_t *o, const char *key, uint32_t def, uint32_t max, uint32_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!v) {
		if (!def)
			return err_set(ERR_NOTFOUND, "%s: vision_config.%s: missing", file, key);
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (json_int_t)max)
		return err_set(ERR_RANGE, "%s: vision_config.%s: not an integer in [1, %u]", file, key, max);
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

/* vision_config of config.json (SiglipVisionConfig) and mm_tokens_per_image. */
static int hf_vision_config(const char *cfg_path, struct vision_config *c)
{
	char *text;
	size_t len;
	int rc = readfile(cfg_path, HF_VISION_CONFIG_MAX, &text, &len);
	if (rc)
		return rc;
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!root)
		return err_set(ERR_INVAL, "%s: line %d: %s", cfg_path, jerr.line, jerr.text);
	json_t *v = json_object_get(root, "vision_config");
	uint32_t tokens = 0;
	if (!json_is_object(v)) {
		rc = err_set(ERR_NOTFOUND, "%s: no vision_config (not a Gemma 3 vision checkpoint)", cfg_path);
	} else if (!(rc = json_u32(cfg_path, v, "hidden_size", 0, MMPROJ_MAX_EMBD, &c->n_embd)) &&
		   !(rc = json_u32(cfg_path, v, "intermediate_size", 0, MMPROJ_MAX_FF, &c->n_ff)) &&
		   !(rc = json_u32(cfg_path, v, "num_hidden_layers", 0, MMPROJ_MAX_LAYERS, &c->n_layer)) &&
		   !(rc = json_u32(cfg_path, v, "num_attention_heads", 0, MMPROJ_MAX_EMBD, &c->n_head)) &&
		   !(rc = json_u32(cfg_path, v, "image_size", 0, MMPROJ_MAX_IMAGE, &c->image_size)) &&
		   !(rc = json_u32(cfg_path, v, "patch_size", 0, MMPROJ_MAX_IMAGE, &c->patch_size)) &&
		   !(rc = json_u32(cfg_path, root, "mm_tokens_per_image", 256, MMPROJ_MAX_PATCHES, &tokens))) {
		json_t *e = json_object_get(v, "layer_norm_eps");
		c->eps = json_is_number(e) ? (float)json_number_value(e) : 1e-6f;
		/* SigLIP normalizes with 0.5 / 0.5 (preprocessor_config.json) */
		for (int i = 0; i < 3; i++)
			c->image_mean[i] = c->image_std[i] = 0.5f;
		c->patches_per_side = c->image_size / c->patch_size;
		c->n_patches = c->patches_per_side * c->patches_per_side;
		uint32_t tps = 1;
		while ((uint64_t)(tps + 1) * (tps + 1) <= tokens)
			tps++;
		if (tps * tps != tokens || c->patches_per_side % tps)
			rc = err_set(ERR_INVAL, "%s: mm_tokens_per_image %u is not a square dividing %u patches per side",
				     cfg_path, tokens, c->patches_per_side);
		c->merge = tps ? c->patches_per_side / tps : 0;
		c->tokens_per_side = tps;
		c->n_tokens = tokens;
		c->head_dim = c->n_head ? c->n_embd / c->n_head : 0;
	}
	json_decref(root);
	return rc;
}

/* A checkpoint tensor's GGUF name (0: not the vision tower's). */
static int hf_vision_name(const char *hf, char *out, size_t cap)
{
	static const char *const towers[] = { "vision_tower.vision_model.", "model.vision_tower.vision_model." };
	static const char *const projs[] = { "multi_modal_projector.", "model.multi_modal_projector." };
	for (size_t i = 0; i < 2; i++) {
		size_t n = strlen(projs[i]);
		if (strncmp(hf, projs[i], n))
			continue;
		if (!strcmp(hf + n, "mm_input_projection_weight"))
			return snprintf(out, cap, "mm.input_projection.weight"), 1;
		if (!strcmp(hf + n, "mm_soft_emb_norm.weight"))
			return snprintf(out, cap, "mm.soft_emb_norm.weight"), 1;
		return 0;
	}
	const char *r = NULL;
	for (size_t i = 0; i < 2 && !r; i++)
		if (!strncmp(hf, towers[i], strlen(towers[i])))
			r = hf + strlen(towers[i]);
	if (!r)
		return 0;
	static const struct { const char *hf, *gguf; } top[] = {
		{ "embeddings.patch_embedding.weight", "v.patch_embd.weight" },
		{ "embeddings.patch_embedding.bias", "v.patch_embd.bias" },
		{ "embeddings.position_embedding.weight", "v.position_embd.weight" },
		{ "post_layernorm.weight", "v.post_ln.weight" },
		{ "post_layernorm.bias", "v.post_ln.bias" },
	};
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
		if (!strcmp(r, top[i].hf))
			return snprintf(out, cap, "%s", top[i].gguf), 1;
	if (strncmp(r, "encoder.layers.", 15))
		return 0;
	r += 15;
	unsigned il = 0;
	size_t nd = 0;
	while (r[nd] >= '0' && r[nd] <= '9' && nd < 4)
		il = il * 10 + (unsigned)(r[nd++] - '0');
	if (!nd || r[nd] != '.')
		return 0;
	static const struct { const char *hf, *gguf; } blk[] = {
		{ "self_attn.q_proj.", "attn_q." }, { "self_attn.k_proj.", "attn_k." }, { "self_attn.v_proj.", "attn_v." },
		{ "self_attn.out_proj.", "attn_out." }, { "layer_norm1.", "ln1." }, { "layer_norm2.", "ln2." },
		{ "mlp.fc1.", "ffn_up." }, { "mlp.fc2.", "ffn_down." },
	};
	const char *sub = r + nd + 1;
	for (size_t i = 0; i < sizeof blk / sizeof blk[0]; i++) {
		size_t n = strlen(blk[i].hf);
		if (!strncmp(sub, blk[i].hf, n) && (!strcmp(sub + n, "weight") || !strcmp(sub + n, "bias")))
			return snprintf(out, cap, "v.blk.%u.%s%s", il, blk[i].gguf, sub + n), 1;
	}
	return 0;
}

static int open_hf_vision(struct mmproj *p, const char *dir)
{
	struct mmproj_priv *pr = p->priv;
	size_t dl = strlen(dir);
	char *path = malloc(dl + 40);
	if (!path)
		return err_set(ERR_NOMEM, "out of memory");
	sprintf(path, "%s/config.json", dir);
	int rc = hf_vision_config(path, &p->cfg);
	if (!rc) {
		sprintf(path, "%s/model.safetensors.index.json", dir);
		if (access(path, F_OK))
			sprintf(path, "%s/model.safetensors", dir);
		rc = safetensors_set_open(path, &pr->st);
	}
	free(path);
	if (rc)
		return rc;
	const struct safetensors_set *s = pr->st;
	p->tensors = calloc(s->n_tensors ? s->n_tensors : 1, sizeof *p->tensors);
	if (!p->tensors)
		return err_set(ERR_NOMEM, "%s: out of memory", p->path);
	for (size_t i = 0; i < s->n_tensors; i++) {
		const struct safetensors_tensor *st = s->tensors[i];
		char name[96];
		if (!hf_vision_name(st->name, name, sizeof name))
			continue;
		if (find(p, name))
			return err_set(ERR_INVAL, "%s: tensor %s: a second tensor maps to %s", p->path, st->name, name);
		struct model_tensor *t = &p->tensors[p->n_tensors];
		if (safetensors_dtype_to_tensor_type(st->dtype, &t->type))
			return err_set(ERR_UNSUP, "%s: tensor %s: dtype %s not supported (F32, F16, BF16)", p->path,
				       st->name, safetensors_dtype_str(st->dtype));
		if (st->n_dims > 4)
			return err_set(ERR_UNSUP, "%s: tensor %s: %u dimensions", p->path, st->name, st->n_dims);
		snprintf(t->name, sizeof t->name, "%s", name);
		t->n_dims = st->n_dims;
		for (int d = 0; d < 4; d++)
			t->ne[d] = d < (int)st->n_dims ? st->shape[st->n_dims - 1 - d] : 1;
		t->nbytes = st->end - st->begin;
		t->data = st->data;
		/* Gemma's RMSNorm stores w for an effective 1+w (llama.cpp's
		 * converter adds the one; here it is added on reading) */
		t->norm_offset = !strcmp(name, "mm.soft_emb_norm.weight") ? 1.0f : 0.0f;
		p->n_tensors++;
	}
	return bind_tensors(p, 0);
}

int mmproj_open(const char *path, struct mmproj **out)
{
	struct mmproj *p;
	int rc = mmproj_new(path, &p);
	if (rc)
		return rc;
	struct stat sb;
	if (!stat(path, &sb) && S_ISDIR(sb.st_mode))
		rc = open_hf_vision(p, path);
	else if (!(rc = gguf_open(path, &((struct mmproj_priv *)p->priv)->g)))
		rc = finish_open(p);
	if (rc) {
		mmproj_close(p);
		return rc;
	}
	*out = p;
	return 0;
}

int mmproj_parse(const void *data, size_t size, const char *name, struct mmproj **out)
{
	struct mmproj *p;
	int rc = mmproj_new(name, &p);
	if (rc)
		return rc;
	rc = gguf_parse(data, size, p->path, &((struct mmproj_priv *)p->priv)->g);
	if (!rc)
		rc = finish_open(p);
	if (rc) {
		mmproj_close(p);
		return rc;
	}
	*out = p;
	return 0;
}

int mmproj_check_text(const struct mmproj *p, const struct gemma3_config *text)
{
	if (p->cfg.proj_dim != text->n_embd)
		return err_set(ERR_INVAL, "%s: the projector writes %u-wide embeddings but the text model is %u wide",
			       p->path, p->cfg.proj_dim, text->n_embd);
	return 0;
}

char *mmproj_find_beside(const char *model_path)
{
	struct stat st;
	char *dir;
	const char *base = "";
	size_t base_len = 0;
	if (!stat(model_path, &st) && S_ISDIR(st.st_mode)) {
		/* a Hugging Face checkpoint with a vision tower carries it itself */
		struct vision_config vc;
		char cfg[PATH_MAX];
		if (snprintf(cfg, sizeof cfg, "%s/config.json", model_path) < (int)sizeof cfg &&
		    hf_vision_config(cfg, &vc) == 0)
			return strdup(model_path);
		err_clear();
		dir = strdup(model_path);
	} else {
		const char *slash = strrchr(model_path, '/');
		base = slash ? slash + 1 : model_path;
		dir = slash ? strndup(model_path, (size_t)(slash - model_path)) : strdup(".");
		base_len = strlen(base);
		if (base_len > 5 && !strcmp(base + base_len - 5, ".gguf"))
			base_len -= 5;
	}
	if (!dir)
		return NULL;
	size_t dl = strlen(dir);
	char *pattern = malloc(dl + 32);
	if (!pattern) {
		free(dir);
		return NULL;
	}
	sprintf(pattern, "%s/mmproj-*.gguf", dl ? dir : ".");
	glob_t gl;
	char *found = NULL;
	if (glob(pattern, 0, NULL, &gl) == 0) {
		for (size_t i = 0; i < gl.gl_pathc && !found; i++) {
			const char *b = strrchr(gl.gl_pathv[i], '/');
			b = b ? b + 1 : gl.gl_pathv[i];
			if (base_len && strlen(b) == base_len + 12 && !strncmp(b + 7, base, base_len))
				found = strdup(gl.gl_pathv[i]);
		}
		if (!found && gl.gl_pathc)
			found = strdup(gl.gl_pathv[0]); /* glob sorts: the choice is stable */
		globfree(&gl);
	}
	free(pattern);
	free(dir);
	return found;
}

bool mmproj_is_clip(const char *path)
{
	struct gguf *g;
	if (gguf_open(path, &g)) {
		err_clear();
		return false;
	}
	struct gguf_str s;
	bool clip = !gguf_get_str(g, "general.architecture", &s) && s.len == 4 && !memcmp(s.ptr, "clip", 4);
	err_clear();
	gguf_close(g);
	return clip;
}
