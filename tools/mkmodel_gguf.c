/* mkmodel_gguf: shapes, the Gemma 3 tensor list and GGUF metadata shared by
 * unicorn-mkmodel and `unicorn quantize`. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "formats/quant.h"
#include "tools/mkmodel.h"

struct mk_shape {
	const char *name;
	uint32_t embd, ff, layers, heads, kv, head_dim, window, vocab, ctx;
	float qpas, rope_scale;
};

/* spec/reference.md §1.7; tiny = ../shared/golden/gemma3-tiny.json; demo =
 * tiny with Gemma 3's real vocabulary (the model unicorn-up serves when none
 * was given or pulled: small, but it tokenizes like the real ones); tiny256 =
 * tiny with 256-wide rows (hidden 256, ffn 512) so that K-quant and IQ4_XS
 * blocks fit every matrix but attn_output (128): a small mixed-type model;
 * tinyh128 = tiny256 with two 128-wide heads (27B's head size, whole x16
 * groups: the kernels that need it run on a small model); tinyctx = tiny
 * with one query and one KV head and a 65,536-position context (long-context
 * tests on lavapipe, which pays per attention workgroup: a head per token). */
static const struct mk_shape mk_shapes[] = {
	{ "tiny", 128, 384, 6, 4, 2, 32, 8, 32000, 4096, 32, 1 },
	{ "demo", 128, 384, 6, 4, 2, 32, 8, 262144, 4096, 32, 1 },
	{ "tiny256", 256, 512, 6, 4, 2, 32, 8, 32000, 4096, 32, 1 },
	{ "tinyh128", 256, 512, 6, 2, 1, 128, 8, 32000, 4096, 128, 1 },
	{ "tinyctx", 64, 128, 6, 1, 1, 32, 8, 32000, 65536, 32, 1 },
	{ "1b", 1152, 6912, 26, 4, 1, 256, 512, 262144, 32768, 256, 1 },
	{ "4b", 2560, 10240, 34, 8, 4, 256, 1024, 262144, 131072, 256, 8 },
	{ "12b", 3840, 15360, 48, 16, 8, 256, 1024, 262144, 131072, 256, 8 },
	{ "27b", 5376, 21504, 62, 32, 16, 128, 1024, 262144, 131072, 168, 8 },
};

int mkmodel_shape_config(const char *shape, uint32_t layers, struct gemma3_config *cfg)
{
	const struct mk_shape *s = NULL;
	for (size_t i = 0; i < sizeof mk_shapes / sizeof mk_shapes[0]; i++)
		if (!strcasecmp(shape, mk_shapes[i].name))
			s = &mk_shapes[i];
	if (!s)
		return err_set(ERR_INVAL, "shape '%s': unknown (tiny, demo, tiny256, tinyh128, tinyctx, 1b, 4b, 12b, 27b)", shape);
	if (layers > MODEL_MAX_LAYERS)
		return err_set(ERR_RANGE, "layers %u: more than %d", layers, MODEL_MAX_LAYERS);
	memset(cfg, 0, sizeof *cfg);
	cfg->n_embd = s->embd;
	cfg->n_ff = s->ff;
	cfg->n_layer = layers ? layers : s->layers;
	cfg->n_head = s->heads;
	cfg->n_head_kv = s->kv;
	cfg->head_dim = s->head_dim;
	cfg->sliding_window = s->window;
	cfg->n_vocab = s->vocab;
	cfg->n_vocab_text = s->vocab;
	cfg->n_ctx = s->ctx;
	cfg->eps = 1e-6f;
	cfg->rope_base_global = 1e6f;
	cfg->rope_base_local = 1e4f;
	cfg->rope_scale_global = s->rope_scale;
	cfg->query_pre_attn_scalar = s->qpas;
	cfg->final_softcap = 0;
	/* Gemma 3: every sixth layer is global (i = 5, 11, ...). */
	for (uint32_t i = 0; i < cfg->n_layer; i++)
		cfg->layer_global[i] = (i + 1) % 6 == 0;
	return 0;
}

size_t mkmodel_tensor_count(const struct gemma3_config *cfg)
{
	return 2 + 13 * (size_t)cfg->n_layer;
}

static void mk_set(struct mkmodel_tensor *t, enum mkmodel_kind kind, uint64_t ne0, uint64_t ne1)
{
	t->kind = kind;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->n_dims = ne1 > 1 || kind != MKMODEL_NORM ? 2 : 1;
}

void mkmodel_tensor_at(const struct gemma3_config *cfg, size_t i, struct mkmodel_tensor *t)
{
	memset(t, 0, sizeof *t);
	uint64_t e = cfg->n_embd, q = (uint64_t)cfg->n_head * cfg->head_dim,
		 kv = (uint64_t)cfg->n_head_kv * cfg->head_dim, ff = cfg->n_ff, hd = cfg->head_dim;
	if (i == 0) {
		snprintf(t->name, sizeof t->name, "token_embd.weight");
		snprintf(t->hf_name, sizeof t->hf_name, "model.embed_tokens.weight");
		mk_set(t, MKMODEL_EMBED, e, cfg->n_vocab);
		return;
	}
	if (i == 1) {
		snprintf(t->name, sizeof t->name, "output_norm.weight");
		snprintf(t->hf_name, sizeof t->hf_name, "model.norm.weight");
		mk_set(t, MKMODEL_NORM, e, 1);
		return;
	}
	static const struct {
		const char *gguf, *hf;
		enum mkmodel_kind kind;
	} per_layer[13] = {
		{ "attn_q", "self_attn.q_proj", MKMODEL_MATRIX },
		{ "attn_k", "self_attn.k_proj", MKMODEL_MATRIX },
		{ "attn_v", "self_attn.v_proj", MKMODEL_MATRIX },
		{ "attn_output", "self_attn.o_proj", MKMODEL_MATRIX },
		{ "ffn_gate", "mlp.gate_proj", MKMODEL_MATRIX },
		{ "ffn_up", "mlp.up_proj", MKMODEL_MATRIX },
		{ "ffn_down", "mlp.down_proj", MKMODEL_MATRIX },
		{ "attn_norm", "input_layernorm", MKMODEL_NORM },
		{ "post_attention_norm", "post_attention_layernorm", MKMODEL_NORM },
		{ "ffn_norm", "pre_feedforward_layernorm", MKMODEL_NORM },
		{ "post_ffw_norm", "post_feedforward_layernorm", MKMODEL_NORM },
		{ "attn_q_norm", "self_attn.q_norm", MKMODEL_NORM },
		{ "attn_k_norm", "self_attn.k_norm", MKMODEL_NORM },
	};
	size_t l = (i - 2) / 13, k = (i - 2) % 13;
	t->layer = (uint32_t)l;
	snprintf(t->name, sizeof t->name, "blk.%zu.%s.weight", l, per_layer[k].gguf);
	snprintf(t->hf_name, sizeof t->hf_name, "model.layers.%zu.%s.weight", l, per_layer[k].hf);
	static const int ne_of[13][2] = {
		/* 0 embd, 1 q width, 2 kv width, 3 ffn, 4 head_dim */
		{ 0, 1 }, { 0, 2 }, { 0, 2 }, { 1, 0 }, { 0, 3 }, { 0, 3 }, { 3, 0 },
		{ 0, -1 }, { 0, -1 }, { 0, -1 }, { 0, -1 }, { 4, -1 }, { 4, -1 },
	};
	uint64_t dims[5] = { e, q, kv, ff, hd };
	uint64_t ne0 = dims[ne_of[k][0]];
	uint64_t ne1 = ne_of[k][1] < 0 ? 1 : dims[ne_of[k][1]];
	mk_set(t, per_layer[k].kind, ne0, ne1);
}

uint32_t mkmodel_tensor_type(const struct gemma3_config *cfg, const struct mkmodel_tensor *t, uint32_t type,
			     enum quant_preset preset)
{
	uint32_t gqa = cfg->n_head_kv ? cfg->n_head / cfg->n_head_kv : 1;
	return quant_preset_tensor_type(type, preset, t->name, t->n_dims, t->ne[0], t->layer, cfg->n_layer, gqa);
}

int mkmodel_gguf_config(struct gguf_writer *w, const struct gemma3_config *cfg, const char *name,
			uint32_t file_type)
{
	int rc = 0;
	/* Same keys and value types as convert_hf_to_gguf.py (spec §2.1-2.2). */
	if (!rc) rc = gguf_writer_add_str(w, "general.architecture", "gemma3");
	if (!rc) rc = gguf_writer_add_str(w, "general.name", name);
	if (!rc) rc = gguf_writer_add_u32(w, "general.alignment", GGUF_WRITE_ALIGNMENT);
	if (!rc) rc = gguf_writer_add_u32(w, "general.file_type", file_type);
	if (!rc) rc = gguf_writer_add_u32(w, "general.quantization_version", 2);
	if (!rc) rc = gguf_writer_add_u32(w, "gemma3.context_length", cfg->n_ctx);
	if (!rc) rc = gguf_writer_add_u32(w, "gemma3.embedding_length", cfg->n_embd);
	if (!rc) rc = gguf_writer_add_u32(w, "gemma3.block_count", cfg->n_layer);
	if (!rc) rc = gguf_writer_add_u32(w, "gemma3.feed_forward_length", cfg->n_ff);
	if (!rc) rc = gguf_writer_add_u32(w, "gemma3.attention.head_count", cfg->n_head);
	if (!rc) rc = gguf_writer_add_u32(w, "gemma3.attention.head_count_kv", cfg->n_head_kv);
	if (!rc) rc = gguf_writer_add_u32(w, "gemma3.attention.key_length", cfg->head_dim);
	if (!rc) rc = gguf_writer_add_u32(w, "gemma3.attention.value_length", cfg->head_dim);
	if (!rc) rc = gguf_writer_add_f32(w, "gemma3.attention.layer_norm_rms_epsilon", cfg->eps);
	if (!rc) rc = gguf_writer_add_u32(w, "gemma3.attention.sliding_window", cfg->sliding_window);
	if (!rc) rc = gguf_writer_add_f32(w, "gemma3.rope.freq_base", cfg->rope_base_global);
	/* llama.cpp hard-codes 1e4 for local layers; newer versions read this key. */
	if (!rc) rc = gguf_writer_add_f32(w, "gemma3.rope.freq_base_swa", cfg->rope_base_local);
	if (!rc && cfg->rope_scale_global != 1.0f && cfg->rope_scale_global > 0) {
		rc = gguf_writer_add_str(w, "gemma3.rope.scaling.type", "linear");
		if (!rc)
			rc = gguf_writer_add_f32(w, "gemma3.rope.scaling.factor", cfg->rope_scale_global);
	}
	/* llama.cpp assumes every sixth layer is global; say so explicitly only
	 * for a model that differs (per-layer bools, true = sliding). */
	bool standard = true;
	for (uint32_t i = 0; i < cfg->n_layer && i < MODEL_MAX_LAYERS; i++)
		standard &= cfg->layer_global[i] == ((i + 1) % 6 == 0);
	if (!rc && !standard) {
		uint8_t swa[MODEL_MAX_LAYERS];
		for (uint32_t i = 0; i < cfg->n_layer && i < MODEL_MAX_LAYERS; i++)
			swa[i] = !cfg->layer_global[i];
		rc = gguf_writer_add_arr(w, "gemma3.attention.sliding_window_pattern", GGUF_BOOL, swa,
					 cfg->n_layer);
	}
	if (!rc && cfg->final_softcap > 0)
		rc = gguf_writer_add_f32(w, "gemma3.final_logit_softcapping", cfg->final_softcap);
	return rc;
}
