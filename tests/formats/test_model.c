/* model_open: the golden model in both formats against its JSON config and
 * against each other; config.json variants; synthetic HF checkpoints (BF16,
 * 262208 rows, prefixes, shards, vision tensors) and GGUF files with one thing
 * wrong at a time, each failing with a message naming the file and field. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "formats/gguf_write.h"
#include "formats/hf_config.h"
#include "formats/model.h"
#include "formats/quant.h"
#include "tests/golden.h"

static char golden_dir[4200];

static const char *golden(const char *name)
{
	snprintf(golden_dir, sizeof golden_dir, "%s/golden/%s", golden_shared_dir(), name);
	return golden_dir;
}

static struct model *open_ok(const char *path)
{
	struct model *m;
	int rc = model_open(path, &m);
	cr_assert_eq(rc, 0, "model_open(%s): %s", path, err_msg());
	return m;
}

/* ---- golden model ---- */

static void expect_golden_config(const struct gemma3_config *c, const char *what)
{
	char path[4300];
	snprintf(path, sizeof path, "%s/golden/gemma3-tiny.json", golden_shared_dir());
	json_error_t e;
	json_t *root = json_load_file(path, 0, &e);
	cr_assert(root, "%s: %s", path, e.text);
	json_t *j = json_object_get(root, "config");
	cr_assert(j);
#define GI(k) ((uint32_t)json_integer_value(json_object_get(j, k)))
#define GF(k) ((float)json_number_value(json_object_get(j, k)))
	cr_expect_eq(c->n_embd, GI("hidden"), "%s n_embd", what);
	cr_expect_eq(c->n_ff, GI("ffn"), "%s n_ff", what);
	cr_expect_eq(c->n_layer, GI("layers"), "%s n_layer", what);
	cr_expect_eq(c->n_head, GI("heads"), "%s n_head", what);
	cr_expect_eq(c->n_head_kv, GI("kv_heads"), "%s n_head_kv", what);
	cr_expect_eq(c->head_dim, GI("head_dim"), "%s head_dim", what);
	cr_expect_eq(c->sliding_window, GI("window"), "%s window", what);
	cr_expect_eq(c->n_vocab, GI("vocab"), "%s n_vocab", what);
	cr_expect_eq(c->n_vocab_text, GI("vocab"), "%s n_vocab_text", what);
	cr_expect_eq(c->n_ctx, GI("ctx"), "%s n_ctx", what);
	cr_expect_float_eq(c->eps, GF("eps"), 1e-12, "%s eps", what);
	cr_expect_float_eq(c->rope_base_global, GF("rope_global"), 1e-3, "%s rope global", what);
	cr_expect_float_eq(c->rope_base_local, GF("rope_local"), 1e-3, "%s rope local", what);
	cr_expect_eq(c->rope_scale_global, 1.0f, "%s rope scale", what);
	cr_expect_float_eq(c->query_pre_attn_scalar, GF("qscalar"), 1e-6, "%s qscalar", what);
	cr_expect_eq(c->final_softcap, 0.0f, "%s softcap", what);
	uint32_t pattern = GI("pattern");
	for (uint32_t i = 0; i < c->n_layer; i++)
		cr_expect_eq(c->layer_global[i], (i + 1) % pattern == 0, "%s layer %u", what, i);
	cr_expect(c->layer_global[5] && !c->layer_global[0] && !c->layer_global[4]);
#undef GI
#undef GF
	json_decref(root);
}

static void expect_layers_filled(const struct model *m)
{
	cr_assert(m->tok_embd && m->output_norm && m->layers);
	cr_expect_eq(m->tok_embd, model_find(m, "token_embd.weight"));
	for (uint32_t il = 0; il < m->cfg.n_layer; il++) {
		char name[64];
		const struct model_layer *L = &m->layers[il];
		snprintf(name, sizeof name, "blk.%u.attn_q.weight", il);
		cr_expect_eq(L->wq, model_find(m, name));
		snprintf(name, sizeof name, "blk.%u.ffn_down.weight", il);
		cr_expect_eq(L->ffn_down, model_find(m, name));
		snprintf(name, sizeof name, "blk.%u.post_ffw_norm.weight", il);
		cr_expect_eq(L->post_ffn_norm, model_find(m, name));
		cr_expect(L->attn_norm && L->wk && L->wv && L->wo && L->q_norm && L->k_norm &&
			  L->post_attn_norm && L->ffn_norm && L->ffn_gate && L->ffn_up);
	}
}

Test(model, golden_gguf_config)
{
	struct model *m = open_ok(golden("gemma3-tiny-f32.gguf"));
	cr_expect_eq(m->format, MODEL_GGUF);
	expect_golden_config(&m->cfg, "gguf");
	expect_layers_filled(m);
	cr_expect_eq(m->n_tensors, 2 + 6 * 13);
	cr_expect_eq(m->layers[0].attn_norm->norm_offset, 0.0f);
	model_close(m);
}

Test(model, golden_hf_config)
{
	struct model *m = open_ok(golden("gemma3-tiny-hf"));
	cr_expect_eq(m->format, MODEL_HF);
	expect_golden_config(&m->cfg, "hf");
	expect_layers_filled(m);
	cr_expect_eq(m->n_tensors, 2 + 6 * 13);
	cr_expect_eq(m->layers[0].attn_norm->norm_offset, 1.0f);
	cr_expect_eq(m->layers[0].wq->norm_offset, 0.0f);
	/* HF [out, in] becomes GGUF {in, out} */
	cr_expect_eq(m->layers[0].wk->ne[0], 128);
	cr_expect_eq(m->layers[0].wk->ne[1], 64);
	cr_expect_eq(m->layers[0].ffn_down->ne[0], 384);
	cr_expect_eq(m->layers[0].ffn_down->ne[1], 128);
	model_close(m);

	/* The .safetensors file inside the directory opens the same model. */
	char path[4300];
	snprintf(path, sizeof path, "%s/model.safetensors", golden("gemma3-tiny-hf"));
	m = open_ok(path);
	expect_golden_config(&m->cfg, "hf file");
	model_close(m);
}

static void expect_rows_equal(const struct model_tensor *a, const struct model_tensor *b, uint64_t row0,
			      uint64_t nrows, float tol)
{
	cr_assert_eq(a->ne[0], b->ne[0], "%s", a->name);
	uint64_t n = nrows * a->ne[0];
	float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
	cr_assert(x && y);
	cr_assert_eq(model_tensor_rows_f32(a, row0, nrows, x), 0, "%s", err_msg());
	cr_assert_eq(model_tensor_rows_f32(b, row0, nrows, y), 0, "%s", err_msg());
	for (uint64_t i = 0; i < n; i++)
		cr_assert(fabsf(x[i] - y[i]) <= tol, "%s[%llu]: %g vs %g", a->name, (unsigned long long)i,
			  x[i], y[i]);
	free(x);
	free(y);
}

Test(model, golden_hf_and_gguf_weights_agree)
{
	struct model *h = open_ok(golden("gemma3-tiny-hf"));
	struct model *g = open_ok(golden("gemma3-tiny-f32.gguf"));
	for (size_t i = 0; i < g->n_tensors; i++) {
		const struct model_tensor *gt = &g->tensors[i];
		const struct model_tensor *ht = model_find(h, gt->name);
		cr_assert(ht, "HF lacks %s", gt->name);
		cr_assert_eq(memcmp(ht->ne, gt->ne, sizeof gt->ne), 0, "%s shape", gt->name);
		cr_assert_eq(ht->type, gt->type);
		cr_assert_eq(ht->nbytes, gt->nbytes);
		if (strstr(gt->name, "norm.weight")) {
			/* HF stores w, GGUF 1 + w: stored values differ, effective ones agree. */
			const float *hw = ht->data, *gw = gt->data;
			cr_assert(fabsf(hw[0] + 1.0f - gw[0]) <= 1e-6f, "%s raw", gt->name);
			cr_assert(fabsf(hw[0] - gw[0]) > 0.5f, "%s raw values should differ by 1", gt->name);
			expect_rows_equal(ht, gt, 0, 1, 1e-6f);
		}
	}
	/* A matrix: bit-identical f32 bytes, and the same through rows_f32. */
	const struct model_tensor *hq = model_find(h, "blk.2.attn_q.weight");
	const struct model_tensor *gq = model_find(g, "blk.2.attn_q.weight");
	cr_assert_eq(memcmp(hq->data, gq->data, gq->nbytes), 0);
	expect_rows_equal(hq, gq, 0, 128, 0.0f);
	expect_rows_equal(h->tok_embd, g->tok_embd, 31000, 1000, 0.0f);
	model_close(h);
	model_close(g);
}

Test(model, quantized_gguf_opens)
{
	struct model *m = open_ok(golden("gemma3-tiny-q4_0.gguf"));
	cr_expect_eq(m->layers[0].wq->type, TENSOR_Q4_0);
	cr_expect_eq(m->layers[0].attn_norm->type, TENSOR_F32);
	float row[128];
	cr_assert_eq(model_tensor_rows_f32(m->layers[0].wq, 127, 1, row), 0, "%s", err_msg());
	cr_expect_eq(model_tensor_rows_f32(m->layers[0].wq, 127, 2, row), ERR_RANGE);
	cr_expect_eq(model_tensor_rows_f32(m->layers[0].wq, UINT64_MAX, 2, row), ERR_RANGE);
	model_close(m);
}

/* ---- config.json variants ---- */

#define CFG_BODY \
	"\"hidden_size\":128,\"intermediate_size\":384,\"num_hidden_layers\":6," \
	"\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":32,\"vocab_size\":32000," \
	"\"rms_norm_eps\":1e-06,\"sliding_window\":8,\"query_pre_attn_scalar\":32," \
	"\"max_position_embeddings\":4096"
#define LAYER_TYPES \
	"\"layer_types\":[\"sliding_attention\",\"sliding_attention\",\"sliding_attention\"," \
	"\"sliding_attention\",\"sliding_attention\",\"full_attention\"]"

static int parse(const char *s, struct gemma3_config *c)
{
	return hf_config_parse(s, strlen(s), "config.json", c);
}

static void expect_same_config(const struct gemma3_config *a, const struct gemma3_config *b, const char *what)
{
	cr_expect_eq(a->n_embd, b->n_embd, "%s", what);
	cr_expect_eq(a->n_ff, b->n_ff, "%s", what);
	cr_expect_eq(a->n_layer, b->n_layer, "%s", what);
	cr_expect_eq(a->n_head, b->n_head, "%s", what);
	cr_expect_eq(a->n_head_kv, b->n_head_kv, "%s", what);
	cr_expect_eq(a->head_dim, b->head_dim, "%s", what);
	cr_expect_eq(a->sliding_window, b->sliding_window, "%s", what);
	cr_expect_eq(a->n_vocab, b->n_vocab, "%s", what);
	cr_expect_eq(a->n_vocab_text, b->n_vocab_text, "%s", what);
	cr_expect_eq(a->n_ctx, b->n_ctx, "%s", what);
	cr_expect_eq(a->eps, b->eps, "%s", what);
	cr_expect_eq(a->rope_base_global, b->rope_base_global, "%s", what);
	cr_expect_eq(a->rope_base_local, b->rope_base_local, "%s", what);
	cr_expect_eq(a->rope_scale_global, b->rope_scale_global, "%s", what);
	cr_expect_eq(a->query_pre_attn_scalar, b->query_pre_attn_scalar, "%s", what);
	cr_expect_eq(a->final_softcap, b->final_softcap, "%s", what);
	cr_expect_eq(memcmp(a->layer_global, b->layer_global, sizeof a->layer_global), 0, "%s", what);
}

Test(model, config_variants_agree)
{
	struct gemma3_config ref, c;
	char path[4300];
	snprintf(path, sizeof path, "%s/config.json", golden("gemma3-tiny-hf"));
	cr_assert_eq(hf_config_load(path, &ref), 0, "%s", err_msg());
	expect_golden_config(&ref, "config.json");

	const char *variants[] = {
		/* flat, pattern only, explicit rope keys */
		"{\"model_type\":\"gemma3_text\"," CFG_BODY ",\"rope_theta\":1000000.0,"
		"\"rope_local_base_freq\":10000.0,\"sliding_window_pattern\":6,\"rope_scaling\":null,"
		"\"final_logit_softcapping\":null}",
		/* flat with defaults for rope and pattern */
		"{\"model_type\":\"gemma3_text\"," CFG_BODY "}",
		/* newer rope_parameters + layer_types */
		"{\"model_type\":\"gemma3_text\"," CFG_BODY ",\"rope_parameters\":{"
		"\"full_attention\":{\"rope_type\":\"default\",\"rope_theta\":1000000.0},"
		"\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}}," LAYER_TYPES "}",
		/* multimodal nesting */
		"{\"model_type\":\"gemma3\",\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
		"\"text_config\":{\"model_type\":\"gemma3_text\"," CFG_BODY "},\"vision_config\":{}}",
		/* _sliding_window_pattern alias and explicit default rope_scaling */
		"{" CFG_BODY ",\"_sliding_window_pattern\":6,\"rope_scaling\":{\"rope_type\":\"default\"}}",
	};
	for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
		char what[32];
		snprintf(what, sizeof what, "variant %zu", i);
		cr_assert_eq(parse(variants[i], &c), 0, "%s: %s", what, err_msg());
		expect_same_config(&c, &ref, what);
	}
}

Test(model, config_rope_scaling_global_only)
{
	struct gemma3_config a, b, c;
	cr_assert_eq(parse("{\"model_type\":\"gemma3_text\"," CFG_BODY
			   ",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":8.0}}", &a), 0, "%s", err_msg());
	cr_assert_eq(parse("{\"model_type\":\"gemma3\",\"text_config\":{" CFG_BODY
			   ",\"rope_scaling\":{\"type\":\"linear\",\"factor\":8}}}", &b), 0, "%s", err_msg());
	cr_assert_eq(parse("{" CFG_BODY ",\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"linear\","
			   "\"factor\":8.0,\"rope_theta\":1000000.0},\"sliding_attention\":{\"rope_type\":"
			   "\"default\",\"rope_theta\":10000.0}}," LAYER_TYPES "}", &c), 0, "%s", err_msg());
	cr_expect_eq(a.rope_scale_global, 8.0f);
	cr_expect_eq(a.rope_base_local, 10000.0f);
	expect_same_config(&a, &b, "rope_scaling type alias");
	expect_same_config(&a, &c, "rope_parameters");
}

Test(model, config_defaults_follow_transformers)
{
	struct gemma3_config c;
	cr_assert_eq(parse("{\"model_type\":\"gemma3\",\"text_config\":{\"hidden_size\":2560,"
			   "\"intermediate_size\":10240,\"model_type\":\"gemma3_text\",\"num_hidden_layers\":34,"
			   "\"rope_scaling\":{\"factor\":8.0,\"rope_type\":\"linear\"},\"sliding_window\":1024}}",
			   &c), 0, "%s", err_msg());
	/* the 4B Hub config: everything else comes from Gemma3TextConfig defaults */
	cr_expect_eq(c.n_head, 8);
	cr_expect_eq(c.n_head_kv, 4);
	cr_expect_eq(c.head_dim, 256);
	cr_expect_eq(c.n_vocab, 262208);
	cr_expect_eq(c.n_ctx, 131072);
	cr_expect_eq(c.eps, 1e-6f);
	cr_expect_eq(c.rope_base_global, 1e6f);
	cr_expect_eq(c.rope_base_local, 1e4f);
	cr_expect_eq(c.rope_scale_global, 8.0f);
	cr_expect_eq(c.query_pre_attn_scalar, 256.0f);
	cr_expect_eq(c.sliding_window, 1024);
	for (uint32_t i = 0; i < 34; i++)
		cr_expect_eq(c.layer_global[i], i % 6 == 5, "layer %u", i);
	cr_expect(c.layer_global[29] && !c.layer_global[33]);
}

static void expect_cfg_fail(const char *json, int code, const char *needle)
{
	struct gemma3_config c;
	int rc = parse(json, &c);
	cr_expect_eq(rc, code, "rc %d (%s) for %s", rc, err_msg(), json);
	cr_expect(strstr(err_msg(), needle), "'%s' lacks '%s'", err_msg(), needle);
	cr_expect(strstr(err_msg(), "config.json"), "'%s' does not name the file", err_msg());
}

Test(model, config_rejects_bad_input)
{
	expect_cfg_fail("{\"intermediate_size\":384,\"num_hidden_layers\":6}", ERR_NOTFOUND, "hidden_size");
	expect_cfg_fail("{\"model_type\":\"gemma3\",\"text_config\":{\"hidden_size\":8,\"num_hidden_layers\":1}}",
			ERR_NOTFOUND, "text_config.intermediate_size");
	expect_cfg_fail("{" CFG_BODY ",\"hidden_size\":129}", ERR_INVAL, "malformed JSON"); /* duplicate */
	expect_cfg_fail("[1]", ERR_INVAL, "not a JSON object");
	expect_cfg_fail("{\"hidden_size\":", ERR_INVAL, "malformed JSON");
	expect_cfg_fail("{\"model_type\":\"llama\"," CFG_BODY "}", ERR_UNSUP, "model_type");
	expect_cfg_fail("{\"hidden_size\":\"128\",\"intermediate_size\":384,\"num_hidden_layers\":6}",
			ERR_INVAL, "hidden_size: not an integer");
	expect_cfg_fail("{\"hidden_size\":128,\"intermediate_size\":384,\"num_hidden_layers\":300}",
			ERR_RANGE, "num_hidden_layers");
	expect_cfg_fail("{\"hidden_size\":0,\"intermediate_size\":384,\"num_hidden_layers\":6}",
			ERR_RANGE, "hidden_size");
	expect_cfg_fail("{\"hidden_size\":-5,\"intermediate_size\":384,\"num_hidden_layers\":6}",
			ERR_RANGE, "hidden_size");
	expect_cfg_fail("{\"hidden_size\":128,\"intermediate_size\":384,\"num_hidden_layers\":6,"
			"\"num_attention_heads\":6,\"num_key_value_heads\":4}", ERR_INVAL, "num_key_value_heads");
	expect_cfg_fail("{\"hidden_size\":128,\"intermediate_size\":384,\"num_hidden_layers\":6,"
			"\"head_dim\":33}", ERR_INVAL, "head_dim");
	expect_cfg_fail("{" CFG_BODY ",\"layer_types\":[\"full_attention\"]}", ERR_INVAL, "layer_types");
	expect_cfg_fail("{" CFG_BODY ",\"layer_types\":[1,2,3,4,5,6]}", ERR_INVAL, "layer_types[0]");
	expect_cfg_fail("{" CFG_BODY ",\"layer_types\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"]}", ERR_UNSUP,
			"layer_types[0]");
	expect_cfg_fail("{" CFG_BODY ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":8}}", ERR_UNSUP,
			"rope_scaling.rope_type");
	expect_cfg_fail("{" CFG_BODY ",\"rope_scaling\":{\"rope_type\":\"linear\"}}", ERR_NOTFOUND,
			"rope_scaling.factor");
	expect_cfg_fail("{" CFG_BODY ",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":-1}}", ERR_RANGE,
			"factor");
	expect_cfg_fail("{" CFG_BODY ",\"rope_theta\":\"big\"}", ERR_INVAL, "rope_theta");
	expect_cfg_fail("{\"hidden_size\":128,\"intermediate_size\":384,\"num_hidden_layers\":6,"
			"\"rms_norm_eps\":0}", ERR_RANGE, "rms_norm_eps");
	/* positive as a double, zero as the float the engine keeps (found by fuzzing) */
	expect_cfg_fail("{\"hidden_size\":128,\"intermediate_size\":384,\"num_hidden_layers\":6,"
			"\"rms_norm_eps\":1e-46}", ERR_RANGE, "rms_norm_eps");
	expect_cfg_fail("{" CFG_BODY ",\"sliding_window_pattern\":0}", ERR_RANGE, "sliding_window_pattern");
	expect_cfg_fail("{" CFG_BODY ",\"attn_logit_softcapping\":50.0}", ERR_UNSUP, "attn_logit_softcapping");
	expect_cfg_fail("{" CFG_BODY ",\"rope_parameters\":{\"sliding_attention\":{\"rope_type\":\"linear\","
			"\"factor\":2}}}", ERR_UNSUP, "sliding_attention");
	expect_cfg_fail("{\"model_type\":\"gemma3\",\"text_config\":[]}", ERR_INVAL, "text_config");
}

/* ---- synthetic checkpoints in a temporary directory ---- */

static char tmpdir[64];

static void mk_tmpdir(void)
{
	strcpy(tmpdir, "/tmp/unicorn-model-XXXXXX");
	cr_assert(mkdtemp(tmpdir));
}

static void rm_tmpdir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	cr_expect_eq(system(cmd), 0);
}

static const char *tmp(const char *name)
{
	static char path[256];
	snprintf(path, sizeof path, "%s/%s", tmpdir, name);
	return path;
}

static void write_text(const char *name, const char *text)
{
	FILE *f = fopen(tmp(name), "w");
	cr_assert(f);
	cr_assert_eq(fputs(text, f) >= 0, 1);
	cr_assert_eq(fclose(f), 0);
}

/* Tiny shape: 8 wide, 16 ffn, 2 layers, 2 heads of 4, 1 kv head. */
#define SE 8
#define SF 16
#define SL 2
#define SH 2
#define SKV 1
#define SD 4

struct synth {
	uint32_t vocab;
	const char *prefix;     /* before embed_tokens / layers / norm */
	const char *skip;       /* HF name to leave out */
	const char *swap_shape; /* HF name whose 2-D shape is written transposed */
	int vision;             /* add vision tower / projector / lm_head tensors */
	int shards;             /* 2: write two shards and an index */
};

struct stensor {
	char name[128];
	uint64_t shape[2];
	int n_dims;
};

static size_t synth_tensors(const struct synth *s, struct stensor *t)
{
	size_t n = 0;
#define ADD(nm, d0, d1, nd)                                           \
	do {                                                            \
		snprintf(t[n].name, sizeof t[n].name, "%s", nm);        \
		t[n].shape[0] = d0;                                     \
		t[n].shape[1] = d1;                                     \
		t[n].n_dims = nd;                                       \
		n++;                                                    \
	} while (0)
	char nm[128];
	snprintf(nm, sizeof nm, "%sembed_tokens.weight", s->prefix);
	ADD(nm, s->vocab, SE, 2);
	snprintf(nm, sizeof nm, "%snorm.weight", s->prefix);
	ADD(nm, SE, 1, 1);
	if (s->vision) {
		ADD("vision_tower.vision_model.post_layernorm.weight", 4, 1, 1);
		ADD("multi_modal_projector.mm_input_projection_weight", 4, 4, 2);
		ADD("lm_head.weight", s->vocab, SE, 2);
	}
	static const struct {
		const char *sub;
		uint64_t d0, d1;
		int nd;
	} L[] = {
		{ "input_layernorm.weight", SE, 1, 1 },
		{ "self_attn.q_proj.weight", SH * SD, SE, 2 },
		{ "self_attn.k_proj.weight", SKV * SD, SE, 2 },
		{ "self_attn.v_proj.weight", SKV * SD, SE, 2 },
		{ "self_attn.o_proj.weight", SE, SH * SD, 2 },
		{ "self_attn.q_norm.weight", SD, 1, 1 },
		{ "self_attn.k_norm.weight", SD, 1, 1 },
		{ "post_attention_layernorm.weight", SE, 1, 1 },
		{ "pre_feedforward_layernorm.weight", SE, 1, 1 },
		{ "post_feedforward_layernorm.weight", SE, 1, 1 },
		{ "mlp.gate_proj.weight", SF, SE, 2 },
		{ "mlp.up_proj.weight", SF, SE, 2 },
		{ "mlp.down_proj.weight", SE, SF, 2 },
	};
	for (int il = 0; il < SL; il++)
		for (size_t i = 0; i < sizeof L / sizeof L[0]; i++) {
			snprintf(nm, sizeof nm, "%slayers.%d.%s", s->prefix, il, L[i].sub);
			ADD(nm, L[i].d0, L[i].d1, L[i].nd);
		}
#undef ADD
	/* apply skip / swap */
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (s->skip && !strcmp(t[i].name, s->skip))
			continue;
		if (s->swap_shape && !strcmp(t[i].name, s->swap_shape)) {
			uint64_t x = t[i].shape[0];
			t[i].shape[0] = t[i].shape[1];
			t[i].shape[1] = x;
		}
		t[m++] = t[i];
	}
	return m;
}

/* Element value of every synthetic tensor: exact in bf16. Norms are 0.25. */
static float synth_value(const char *name, uint64_t i)
{
	if (strstr(name, "norm"))
		return 0.25f;
	return (float)((int)(i % 7) - 3) * 0.5f;
}

static void write_shard(const char *file, struct stensor *t, size_t n)
{
	/* header */
	size_t cap = 256 * (n + 1), len = 0;
	char *h = malloc(cap);
	cr_assert(h);
	uint64_t off = 0;
	len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (size_t i = 0; i < n; i++) {
		uint64_t elems = t[i].shape[0] * (t[i].n_dims == 2 ? t[i].shape[1] : 1);
		if (t[i].n_dims == 2)
			len += (size_t)snprintf(h + len, cap - len,
						",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%llu,%llu],\"data_offsets\":[%llu,%llu]}",
						t[i].name, (unsigned long long)t[i].shape[0],
						(unsigned long long)t[i].shape[1], (unsigned long long)off,
						(unsigned long long)(off + 2 * elems));
		else
			len += (size_t)snprintf(h + len, cap - len,
						",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}",
						t[i].name, (unsigned long long)t[i].shape[0],
						(unsigned long long)off, (unsigned long long)(off + 2 * elems));
		off += 2 * elems;
	}
	len += (size_t)snprintf(h + len, cap - len, "}");
	while (len % 8)
		h[len++] = ' ';
	FILE *f = fopen(tmp(file), "wb");
	cr_assert(f);
	uint64_t hl = len;
	cr_assert_eq(fwrite(&hl, 8, 1, f), 1);
	cr_assert_eq(fwrite(h, 1, len, f), len);
	for (size_t i = 0; i < n; i++) {
		uint64_t elems = t[i].shape[0] * (t[i].n_dims == 2 ? t[i].shape[1] : 1);
		uint16_t *d = malloc(elems * 2);
		cr_assert(d);
		for (uint64_t j = 0; j < elems; j++)
			d[j] = quant_f32_to_bf16(synth_value(t[i].name, j));
		cr_assert_eq(fwrite(d, 2, elems, f), elems);
		free(d);
	}
	cr_assert_eq(fclose(f), 0);
	free(h);
}

static void write_synth(const struct synth *s, const char *config_json)
{
	struct stensor t[64];
	size_t n = synth_tensors(s, t);
	if (config_json) {
		write_text("config.json", config_json);
	} else {
		char cfg[1024];
		snprintf(cfg, sizeof cfg,
			 "{\"model_type\":\"gemma3_text\",\"hidden_size\":%d,\"intermediate_size\":%d,"
			 "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
			 "\"head_dim\":%d,\"vocab_size\":%u,\"sliding_window\":4,\"max_position_embeddings\":64,"
			 "\"query_pre_attn_scalar\":4,\"sliding_window_pattern\":2}",
			 SE, SF, SL, SH, SKV, SD, s->vocab);
		write_text("config.json", cfg);
	}
	if (s->shards != 2) {
		write_shard("model.safetensors", t, n);
		return;
	}
	/* shard 1: first 3 tensors; shard 2: the rest; index names both */
	size_t k = 3;
	write_shard("model-00001-of-00002.safetensors", t, k);
	write_shard("model-00002-of-00002.safetensors", t + k, n - k);
	size_t cap = 256 * (n + 2), len = 0;
	char *idx = malloc(cap);
	cr_assert(idx);
	len += (size_t)snprintf(idx + len, cap - len, "{\"metadata\":{},\"weight_map\":{");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(idx + len, cap - len, "%s\"%s\":\"model-0000%d-of-00002.safetensors\"",
					i ? "," : "", t[i].name, i < k ? 1 : 2);
	snprintf(idx + len, cap - len, "}}");
	write_text("model.safetensors.index.json", idx);
	free(idx);
}

static void expect_open_fail(const char *path, int code, const char *n1, const char *n2)
{
	struct model *m = (void *)1;
	int rc = model_open(path, &m);
	cr_expect_eq(rc, code, "rc %d (%s)", rc, err_msg());
	cr_expect_null(m);
	cr_expect(strstr(err_msg(), n1), "'%s' lacks '%s'", err_msg(), n1);
	if (n2)
		cr_expect(strstr(err_msg(), n2), "'%s' lacks '%s'", err_msg(), n2);
}

Test(model, synthetic_bf16_rows_and_norm_offset, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	struct synth s = { .vocab = 100, .prefix = "model." };
	write_synth(&s, NULL);
	struct model *m = open_ok(tmpdir);
	cr_expect_eq(m->cfg.n_vocab, 100);
	cr_expect_eq(m->cfg.n_vocab_text, 100);
	cr_expect(!m->cfg.layer_global[0] && m->cfg.layer_global[1]);
	cr_expect_eq(m->tok_embd->type, TENSOR_BF16);
	float row[2 * SE];
	cr_assert_eq(model_tensor_rows_f32(m->tok_embd, 10, 2, row), 0, "%s", err_msg());
	for (int i = 0; i < 2 * SE; i++)
		cr_expect_eq(row[i], synth_value("embed", 10 * SE + (uint64_t)i), "elem %d", i);
	cr_assert_eq(model_tensor_rows_f32(m->layers[1].q_norm, 0, 1, row), 0, "%s", err_msg());
	for (int i = 0; i < SD; i++)
		cr_expect_eq(row[i], 1.25f, "q_norm effective weight = 1 + 0.25");
	cr_expect_eq(model_tensor_rows_f32(m->tok_embd, 99, 2, row), ERR_RANGE);
	model_close(m);
}

Test(model, synthetic_padded_vocab_prefixes_shards_vision, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	struct synth s = { .vocab = 262208, .prefix = "language_model.model.", .vision = 1, .shards = 2 };
	write_synth(&s, NULL);
	struct model *m = open_ok(tmpdir);
	cr_expect_eq(m->cfg.n_vocab, 262208);
	cr_expect_eq(m->cfg.n_vocab_text, 262144, "image/padding rows are not text tokens");
	cr_expect_eq(m->n_tensors, 2 + SL * 13, "vision, projector and lm_head are skipped");
	cr_expect_eq(m->tok_embd->ne[1], 262208);
	model_close(m);

	/* the index file itself opens the same checkpoint */
	m = open_ok(tmp("model.safetensors.index.json"));
	cr_expect_eq(m->n_tensors, 2 + SL * 13);
	model_close(m);
}

Test(model, synthetic_newer_prefix, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	struct synth s = { .vocab = 64, .prefix = "model.language_model." };
	write_synth(&s, NULL);
	struct model *m = open_ok(tmpdir);
	cr_expect(model_find(m, "blk.1.ffn_down.weight"));
	model_close(m);
}

Test(model, missing_tensor, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	struct synth s = { .vocab = 64, .prefix = "model.", .skip = "model.layers.1.mlp.up_proj.weight" };
	write_synth(&s, NULL);
	expect_open_fail(tmpdir, ERR_NOTFOUND, "model.layers.1.mlp.up_proj.weight", "model.safetensors");
}

Test(model, wrong_shape, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	struct synth s = { .vocab = 64, .prefix = "model.", .swap_shape = "model.layers.0.self_attn.k_proj.weight" };
	write_synth(&s, NULL);
	expect_open_fail(tmpdir, ERR_INVAL, "blk.0.attn_k.weight", "expected {8, 4}");
}

Test(model, vocab_mismatch, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	struct synth s = { .vocab = 64, .prefix = "model." };
	write_synth(&s, "{\"model_type\":\"gemma3_text\",\"hidden_size\":8,\"intermediate_size\":16,"
		     "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
		     "\"head_dim\":4,\"vocab_size\":65}");
	expect_open_fail(tmpdir, ERR_INVAL, "vocab_size", "embed_tokens");
}

Test(model, layer_beyond_config, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	struct synth s = { .vocab = 64, .prefix = "model." };
	write_synth(&s, "{\"model_type\":\"gemma3_text\",\"hidden_size\":8,\"intermediate_size\":16,"
		     "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
		     "\"head_dim\":4,\"vocab_size\":64}");
	expect_open_fail(tmpdir, ERR_INVAL, "model.layers.1.", "num_hidden_layers");
}

Test(model, golden_config_missing_key, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	/* copy the golden config.json without hidden_size, next to the real weights */
	char path[4300];
	snprintf(path, sizeof path, "%s/config.json", golden("gemma3-tiny-hf"));
	json_error_t e;
	json_t *cfg = json_load_file(path, 0, &e);
	cr_assert(cfg);
	cr_assert_eq(json_object_del(cfg, "hidden_size"), 0);
	cr_assert_eq(json_dump_file(cfg, tmp("config.json"), JSON_INDENT(1)), 0);
	json_decref(cfg);
	snprintf(path, sizeof path, "%s/model.safetensors", golden("gemma3-tiny-hf"));
	cr_assert_eq(symlink(path, tmp("model.safetensors")), 0);
	expect_open_fail(tmpdir, ERR_NOTFOUND, "config.json", "hidden_size");
}

Test(model, not_a_model, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	write_text("x.bin", "hello world");
	expect_open_fail(tmp("x.bin"), ERR_INVAL, "x.bin", "not a GGUF");
	expect_open_fail(tmp("nothing"), ERR_NOTFOUND, "nothing", NULL);
	expect_open_fail(tmpdir, ERR_NOTFOUND, "config.json", NULL); /* empty directory */
}

/* ---- GGUF files with one thing wrong ---- */

struct gsynth {
	const char *arch;
	const char *omit_key;
	const char *omit_tensor;
	int pattern_array;   /* write sliding_window_pattern [true, false] */
	int n_tokens;        /* tokenizer.ggml.tokens entries (0: none) */
};

static void write_gguf(const char *file, const struct gsynth *s)
{
	struct gguf_writer *w;
	cr_assert_eq(gguf_writer_create(tmp(file), &w), 0, "%s", err_msg());
#define KU(k, v) if (!s->omit_key || strcmp(s->omit_key, k)) cr_assert_eq(gguf_writer_add_u32(w, k, v), 0)
#define KF(k, v) if (!s->omit_key || strcmp(s->omit_key, k)) cr_assert_eq(gguf_writer_add_f32(w, k, v), 0)
	if (!s->omit_key || strcmp(s->omit_key, "general.architecture"))
		cr_assert_eq(gguf_writer_add_str(w, "general.architecture", s->arch ? s->arch : "gemma3"), 0);
	KU("gemma3.context_length", 64);
	KU("gemma3.embedding_length", SE);
	KU("gemma3.block_count", SL);
	KU("gemma3.feed_forward_length", SF);
	KU("gemma3.attention.head_count", SH);
	KU("gemma3.attention.head_count_kv", SKV);
	KU("gemma3.attention.key_length", SD);
	KU("gemma3.attention.value_length", SD);
	KU("gemma3.attention.sliding_window", 4);
	KF("gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
	KF("gemma3.rope.freq_base", 1e6f);
	if (s->pattern_array) {
		uint8_t pat[SL] = { 1, 0 };
		cr_assert_eq(gguf_writer_add_arr(w, "gemma3.attention.sliding_window_pattern", GGUF_BOOL, pat, SL), 0);
		cr_assert_eq(gguf_writer_add_str(w, "gemma3.rope.scaling.type", "linear"), 0);
		cr_assert_eq(gguf_writer_add_f32(w, "gemma3.rope.scaling.factor", 8.0f), 0);
		cr_assert_eq(gguf_writer_add_f32(w, "gemma3.rope.local.freq_base", 20000.0f), 0);
	}
	if (s->n_tokens) {
		const char *toks[64];
		for (int i = 0; i < s->n_tokens; i++)
			toks[i] = "t";
		cr_assert_eq(gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, (uint64_t)s->n_tokens), 0);
	}
#undef KU
#undef KF
	struct synth hs = { .vocab = 48, .prefix = "" };
	struct stensor t[64];
	size_t n = synth_tensors(&hs, t);
	static const char *gnames[] = { "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
					"attn_q_norm", "attn_k_norm", "post_attention_norm", "ffn_norm",
					"post_ffw_norm", "ffn_gate", "ffn_up", "ffn_down" };
	char names[64][64];
	uint64_t ne[64][2];
	uint32_t nd[64];
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (i == 0)
			snprintf(names[k], 64, "token_embd.weight");
		else if (i == 1)
			snprintf(names[k], 64, "output_norm.weight");
		else
			snprintf(names[k], 64, "blk.%zu.%s.weight", (i - 2) / 13, gnames[(i - 2) % 13]);
		if (s->omit_tensor && !strcmp(s->omit_tensor, names[k]))
			continue;
		nd[k] = (uint32_t)t[i].n_dims;
		ne[k][0] = nd[k] == 2 ? t[i].shape[1] : t[i].shape[0];
		ne[k][1] = nd[k] == 2 ? t[i].shape[0] : 1;
		cr_assert_eq(gguf_writer_add_tensor(w, names[k], TENSOR_F32, nd[k], ne[k]), 0, "%s", err_msg());
		k++;
	}
	cr_assert_eq(gguf_writer_begin_data(w), 0, "%s", err_msg());
	for (size_t i = 0; i < k; i++) {
		uint64_t elems = ne[i][0] * ne[i][1];
		float *d = calloc(elems, sizeof *d);
		cr_assert(d);
		cr_assert_eq(gguf_writer_write(w, d, elems * sizeof *d), 0, "%s", err_msg());
		free(d);
	}
	cr_assert_eq(gguf_writer_finish(w), 0, "%s", err_msg());
	gguf_writer_destroy(w);
}

Test(model, synthetic_gguf_keys, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	struct gsynth s = { 0 };
	write_gguf("a.gguf", &s);
	struct model *m = open_ok(tmp("a.gguf"));
	cr_expect_eq(m->cfg.n_vocab, 48);
	cr_expect_eq(m->cfg.n_vocab_text, 48);
	cr_expect_eq(m->cfg.rope_base_local, 10000.0f, "llama.cpp's hard-coded local base");
	cr_expect_eq(m->cfg.rope_scale_global, 1.0f);
	cr_expect_eq(m->cfg.query_pre_attn_scalar, (float)SD);
	cr_expect(!m->cfg.layer_global[0] && !m->cfg.layer_global[1], "il %% 6 < 5: both sliding");
	model_close(m);

	struct gsynth s2 = { .pattern_array = 1, .n_tokens = 40 };
	write_gguf("b.gguf", &s2);
	m = open_ok(tmp("b.gguf"));
	cr_expect(!m->cfg.layer_global[0] && m->cfg.layer_global[1], "pattern array: true = sliding");
	cr_expect_eq(m->cfg.rope_scale_global, 8.0f);
	cr_expect_eq(m->cfg.rope_base_local, 20000.0f);
	cr_expect_eq(m->cfg.n_vocab_text, 40);
	cr_expect_eq(m->cfg.n_vocab, 48);
	model_close(m);
}

Test(model, gguf_errors, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	struct gsynth a = { .omit_key = "gemma3.embedding_length" };
	write_gguf("a.gguf", &a);
	expect_open_fail(tmp("a.gguf"), ERR_NOTFOUND, "gemma3.embedding_length", "a.gguf");

	struct gsynth b = { .arch = "llama" };
	write_gguf("b.gguf", &b);
	expect_open_fail(tmp("b.gguf"), ERR_UNSUP, "general.architecture", "b.gguf");

	struct gsynth c = { .omit_tensor = "blk.1.attn_k_norm.weight" };
	write_gguf("c.gguf", &c);
	expect_open_fail(tmp("c.gguf"), ERR_NOTFOUND, "blk.1.attn_k_norm.weight", "c.gguf");

	struct gsynth d = { .omit_key = "gemma3.attention.layer_norm_rms_epsilon" };
	write_gguf("d.gguf", &d);
	expect_open_fail(tmp("d.gguf"), ERR_NOTFOUND, "layer_norm_rms_epsilon", NULL);
}
