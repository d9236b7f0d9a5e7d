/* mmproj: a random-weight Gemma 3 vision projector written by mkmodel opens
 * with the config it was written with; one hostile change at a time (keys out
 * of range, sizes that do not divide, a missing tensor, a wrong shape, every
 * truncation, random byte flips) fails with an error and never crashes;
 * the projector is found beside a model. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/readfile.h"
#include "formats/mmproj.h"
#include "formats/quant.h"
#include "tools/mkmodel.h"

static char dir[64];
static char path[128];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/unicorn-test-mmproj-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/mmproj-m.gguf", dir);
	struct vision_config vc;
	cr_assert_eq(mkmodel_vision_config("tiny", 128, &vc), 0, "%s", err_msg());
	cr_assert_eq(mkmodel_write_mmproj(path, &vc, TENSOR_F32, 7, 1, true), 0, "%s", err_msg());
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

static uint8_t *slurp(size_t *n)
{
	FILE *f = fopen(path, "rb");
	cr_assert(f);
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(*n);
	cr_assert(b && fread(b, 1, *n, f) == *n);
	fclose(f);
	return b;
}

Test(mmproj, tiny_roundtrip, .init = setup, .fini = teardown)
{
	struct mmproj *p;
	cr_assert_eq(mmproj_open(path, &p), 0, "%s", err_msg());
	const struct vision_config *c = &p->cfg;
	cr_expect_eq(c->image_size, 112);
	cr_expect_eq(c->patch_size, 14);
	cr_expect_eq(c->n_embd, 64);
	cr_expect_eq(c->n_ff, 240);
	cr_expect_eq(c->n_layer, 2);
	cr_expect_eq(c->n_head, 4);
	cr_expect_eq(c->head_dim, 16);
	cr_expect_eq(c->merge, 2);
	cr_expect_eq(c->n_patches, 64);
	cr_expect_eq(c->n_tokens, 16);
	cr_expect_eq(c->proj_dim, 128);
	cr_expect_float_eq(c->image_std[2], 0.5f, 1e-9);
	cr_expect_eq(p->proj->ne[0], 128);
	cr_expect_eq(p->proj->ne[1], 64);
	cr_expect_eq(p->patch_w->ne[2], 3);
	struct gemma3_config text = { .n_embd = 128 };
	cr_expect_eq(mmproj_check_text(p, &text), 0);
	text.n_embd = 256;
	cr_expect_eq(mmproj_check_text(p, &text), ERR_INVAL);
	cr_expect(strstr(err_msg(), "128-wide"), "%s", err_msg());
	mmproj_close(p);
}

Test(mmproj, real_shapes)
{
	struct vision_config c;
	cr_assert_eq(mkmodel_vision_config("27b", 5376, &c), 0, "%s", err_msg());
	cr_expect_eq(c.n_patches, 4096);
	cr_expect_eq(c.n_tokens, 256);
	cr_expect_eq(c.head_dim, 72);
	cr_expect_eq(mkmodel_vision_config("1b", 1152, &c), ERR_INVAL);
}

Test(mmproj, found_beside_model, .init = setup, .fini = teardown)
{
	char model[160];
	snprintf(model, sizeof model, "%s/m.gguf", dir);
	char *f = mmproj_find_beside(model);
	cr_assert_not_null(f);
	cr_expect_str_eq(f, path);
	free(f);
	cr_expect(mmproj_is_clip(path));
	char *mp = mkmodel_mmproj_path("/a/b/model-q4.gguf");
	cr_expect_str_eq(mp, "/a/b/mmproj-model-q4.gguf");
	free(mp);
	cr_expect_null(mmproj_find_beside("/nonexistent-dir/x.gguf"));
}

/* Overwrite the u32 value of metadata key `key` (GGUF: u64 length, bytes,
 * u32 type, value). */
static void set_key_u32(uint8_t *b, size_t n, const char *key, uint32_t v)
{
	size_t kl = strlen(key);
	for (size_t i = 8; i + kl + 8 < n; i++)
		if (!memcmp(b + i, key, kl) && b[i - 8] == kl) {
			uint32_t type;
			memcpy(&type, b + i + kl, 4);
			cr_assert_eq(type, 4, "%s: not a u32", key);
			memcpy(b + i + kl + 4, &v, 4);
			return;
		}
	cr_assert_fail("key %s not found", key);
}

static int parse_copy(const uint8_t *b, size_t n)
{
	struct mmproj *p = NULL;
	int rc = mmproj_parse(b, n, "hostile", &p);
	mmproj_close(p);
	return rc;
}

Test(mmproj, hostile_keys, .init = setup, .fini = teardown)
{
	size_t n;
	uint8_t *orig = slurp(&n), *b = malloc(n);
	cr_assert_eq(parse_copy(orig, n), 0, "%s", err_msg());
	struct {
		const char *key;
		uint32_t v;
		const char *msg;
	} cases[] = {
		{ "clip.vision.block_count", 0, "block_count" },
		{ "clip.vision.block_count", 100000, "block_count" },
		{ "clip.vision.block_count", 3, "v.blk.2" },               /* a layer with no tensors */
		{ "clip.vision.attention.head_count", 7, "head_count" },   /* does not divide 64 */
		{ "clip.vision.patch_size", 15, "patch_size" },            /* does not divide 112 */
		{ "clip.vision.patch_size", 0, "patch_size" },
		{ "clip.vision.image_size", 0xffffffffu, "image_size" },
		{ "clip.vision.image_size", 140, "position_embd" },        /* 10x10 patches, 8x8 positions */
		{ "clip.vision.projector.scale_factor", 3, "pooling" },    /* does not divide 8 */
		{ "clip.vision.projector.scale_factor", 0, "scale_factor" },
		{ "clip.vision.embedding_length", 96, "shape" },
		{ "clip.vision.feed_forward_length", 1u << 30, "feed_forward" },
		{ "clip.vision.projection_dim", 64, "projection_dim" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memcpy(b, orig, n);
		set_key_u32(b, n, cases[i].key, cases[i].v);
		int rc = parse_copy(b, n);
		cr_expect_neq(rc, 0, "%s = %u accepted", cases[i].key, cases[i].v);
		cr_expect(strstr(err_msg(), cases[i].msg), "%s = %u: '%s' lacks '%s'", cases[i].key, cases[i].v,
			  err_msg(), cases[i].msg);
	}
	/* a missing tensor: rename one in the tensor-info table */
	memcpy(b, orig, n);
	uint8_t *hit = memmem(b, n, "v.blk.1.ffn_down.bias", 21);
	cr_assert(hit);
	hit[2] = 'X';
	cr_expect_eq(parse_copy(b, n), ERR_NOTFOUND);
	cr_expect(strstr(err_msg(), "v.blk.1.ffn_down.bias"), "%s", err_msg());
	/* the wrong projector */
	memcpy(b, orig, n);
	hit = memmem(b, n, "clip.projector_type", 19);
	cr_assert(hit);
	hit = memmem(hit, n - (size_t)(hit - b), "gemma3", 6);
	cr_assert(hit);
	hit[5] = '4';
	cr_expect_eq(parse_copy(b, n), ERR_UNSUP);
	free(b);
	free(orig);
}

Test(mmproj, hostile_truncation_and_flips, .init = setup, .fini = teardown)
{
	size_t n;
	uint8_t *orig = slurp(&n), *b = malloc(n);
	/* every prefix of the metadata, then a stride through the data */
	for (size_t cut = 0; cut < n; cut += cut < 4096 ? 1 : 4099)
		cr_expect_neq(parse_copy(orig, cut), 0, "truncated at %zu accepted", cut);
	/* flips in the header and metadata: any outcome but a crash */
	uint64_t z = 12345;
	for (int i = 0; i < 3000; i++) {
		memcpy(b, orig, n);
		z = z * 6364136223846793005ull + 1442695040888963407ull;
		size_t at = (size_t)(z >> 33) % 4096;
		b[at] ^= (uint8_t)(1u << ((z >> 20) & 7));
		(void)parse_copy(b, n);
	}
	free(b);
	free(orig);
}

/* ---- a Hugging Face checkpoint's vision tower ---- */

#include "formats/safetensors_write.h"
#include "ref/ref_vision.h"

/* GGUF name -> Gemma3ForConditionalGeneration name */
static void hf_name_of(const char *g, char *out, size_t cap)
{
	static const char *const T = "vision_tower.vision_model.";
	static const struct { const char *g, *hf; } top[] = {
		{ "v.patch_embd.weight", "embeddings.patch_embedding.weight" },
		{ "v.patch_embd.bias", "embeddings.patch_embedding.bias" },
		{ "v.position_embd.weight", "embeddings.position_embedding.weight" },
		{ "v.post_ln.weight", "post_layernorm.weight" },
		{ "v.post_ln.bias", "post_layernorm.bias" },
	};
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
		if (!strcmp(g, top[i].g)) {
			snprintf(out, cap, "%s%s", T, top[i].hf);
			return;
		}
	if (!strcmp(g, "mm.input_projection.weight")) {
		snprintf(out, cap, "multi_modal_projector.mm_input_projection_weight");
		return;
	}
	if (!strcmp(g, "mm.soft_emb_norm.weight")) {
		snprintf(out, cap, "multi_modal_projector.mm_soft_emb_norm.weight");
		return;
	}
	unsigned il;
	char what[32], wb[16];
	cr_assert_eq(sscanf(g, "v.blk.%u.%31[^.].%15s", &il, what, wb), 3, "%s", g);
	static const struct { const char *g, *hf; } blk[] = {
		{ "attn_q", "self_attn.q_proj" }, { "attn_k", "self_attn.k_proj" }, { "attn_v", "self_attn.v_proj" },
		{ "attn_out", "self_attn.out_proj" }, { "ln1", "layer_norm1" }, { "ln2", "layer_norm2" },
		{ "ffn_up", "mlp.fc1" }, { "ffn_down", "mlp.fc2" },
	};
	for (size_t i = 0; i < sizeof blk / sizeof blk[0]; i++)
		if (!strcmp(what, blk[i].g)) {
			snprintf(out, cap, "%sencoder.layers.%u.%s.%s", T, il, blk[i].hf, wb);
			return;
		}
	cr_assert_fail("no HF name for %s", g);
}

Test(mmproj, hugging_face_checkpoint_same_tower, .init = setup, .fini = teardown)
{
	struct mmproj *g;
	cr_assert_eq(mmproj_open(path, &g), 0, "%s", err_msg());
	char hf[128], st[160], cfg[160];
	snprintf(hf, sizeof hf, "%s/hf", dir);
	cr_assert_eq(mkdir(hf, 0777), 0);
	snprintf(st, sizeof st, "%s/model.safetensors", hf);
	snprintf(cfg, sizeof cfg, "%s/config.json", hf);
	FILE *f = fopen(cfg, "w");
	cr_assert(f);
	fprintf(f, "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"mm_tokens_per_image\":16,"
		   "\"vision_config\":{\"hidden_size\":64,\"intermediate_size\":240,\"num_hidden_layers\":2,"
		   "\"num_attention_heads\":4,\"image_size\":112,\"patch_size\":14,\"layer_norm_eps\":1e-06}}");
	fclose(f);
	struct safetensors_writer *w;
	cr_assert_eq(safetensors_writer_create(st, &w), 0, "%s", err_msg());
	for (size_t i = 0; i < g->n_tensors; i++) {
		const struct model_tensor *t = &g->tensors[i];
		char name[160];
		hf_name_of(t->name, name, sizeof name);
		uint64_t shape[4];
		for (uint32_t d = 0; d < t->n_dims; d++)
			shape[d] = t->ne[t->n_dims - 1 - d]; /* HF: outermost first */
		cr_assert_eq(safetensors_writer_add_tensor(w, name, TENSOR_F32, t->n_dims, shape), 0, "%s", err_msg());
	}
	cr_assert_eq(safetensors_writer_begin_data(w), 0);
	for (size_t i = 0; i < g->n_tensors; i++) {
		const struct model_tensor *t = &g->tensors[i];
		uint64_t n = model_tensor_nelems(t);
		float *b = malloc(n * sizeof(float));
		cr_assert_eq(model_tensor_rows_f32(t, 0, n / t->ne[0], b), 0);
		if (!strcmp(t->name, "mm.soft_emb_norm.weight"))
			for (uint64_t k = 0; k < n; k++)
				b[k] -= 1.0f; /* HF stores w; the GGUF holds 1+w */
		cr_assert_eq(safetensors_writer_write(w, b, n * sizeof(float)), 0);
		free(b);
	}
	cr_assert_eq(safetensors_writer_finish(w), 0, "%s", err_msg());
	safetensors_writer_destroy(w);

	char *found = mmproj_find_beside(hf);
	cr_assert_not_null(found, "an HF checkpoint with a vision_config carries its tower");
	cr_expect_str_eq(found, hf);
	free(found);
	struct mmproj *h;
	cr_assert_eq(mmproj_open(hf, &h), 0, "%s", err_msg());
	cr_expect_eq(h->cfg.n_tokens, 16);
	cr_expect_eq(h->cfg.merge, 2);
	cr_expect_eq(h->cfg.proj_dim, 128);
	struct ref_vision *rg, *rh;
	cr_assert_eq(ref_vision_create(g, &rg), 0);
	cr_assert_eq(ref_vision_create(h, &rh), 0, "%s", err_msg());
	size_t npx = 3 * 112 * 112, nout = 16 * 128;
	float *px = malloc(npx * sizeof(float)), *a = malloc(nout * sizeof(float)), *b = malloc(nout * sizeof(float));
	for (size_t i = 0; i < npx; i++)
		px[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
	cr_assert_eq(ref_vision_encode(rg, px, a), 0);
	cr_assert_eq(ref_vision_encode(rh, px, b), 0);
	double md = 0;
	for (size_t i = 0; i < nout; i++)
		md = fmax(md, fabs((double)a[i] - b[i]));
	cr_expect(md < 1e-5, "GGUF and HF towers differ by %g", md);
	free(px);
	free(a);
	free(b);
	ref_vision_destroy(rg);
	ref_vision_destroy(rh);
	mmproj_close(h);
	/* no vision_config: a text-only checkpoint has no tower */
	f = fopen(cfg, "w");
	fprintf(f, "{\"architectures\":[\"Gemma3ForCausalLM\"]}");
	fclose(f);
	cr_expect_null(mmproj_find_beside(hf));
	cr_expect_eq(mmproj_open(hf, &h), ERR_NOTFOUND);
	mmproj_close(g);
}
