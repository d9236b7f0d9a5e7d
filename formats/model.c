/* model: open a GGUF file or a Hugging Face checkpoint as one Gemma 3 view.
 *
 * Both formats end up as the same thing: a gemma3_config and a list of tensors
 * under GGUF names and GGUF dimension order, pointing at mapped file bytes.
 * Validation (every required tensor, exact shapes, supported types) is shared,
 * so a model that opens is one the engine can run. */
#include "formats/model.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/quant.h"
#include "formats/safetensors.h"

/* Same caps as hf_config: far above real models, low enough that products of
 * two of them cannot overflow. */
#define CAP_EMBD 65536u
#define CAP_FF (1u << 20)
#define CAP_HEADS 1024u
#define CAP_HEAD_DIM 1024u
#define CAP_VOCAB (1u << 24)
#define CAP_CTX (1u << 24)
#define CAP_WINDOW (1u << 24)

/* Gemma 3's text tokenizer has 262144 entries; 4B+ embeddings carry 64 more
 * rows (image soft token and padding) that text generation must never pick. */
#define GEMMA3_PADDED_VOCAB 262208u
#define GEMMA3_TEXT_VOCAB 262144u

struct model_priv {
	struct gguf *gguf;
	struct safetensors_set *st;
	char *weights_path; /* file named in tensor errors */
};

/* HF layer sub-names -> GGUF layer sub-names (reference §2.3). */
static const struct {
	const char *hf, *gguf;
} layer_names[] = {
	{ "input_layernorm.weight", "attn_norm.weight" },
	{ "self_attn.q_proj.weight", "attn_q.weight" },
	{ "self_attn.k_proj.weight", "attn_k.weight" },
	{ "self_attn.v_proj.weight", "attn_v.weight" },
	{ "self_attn.o_proj.weight", "attn_output.weight" },
	{ "self_attn.q_norm.weight", "attn_q_norm.weight" },
	{ "self_attn.k_norm.weight", "attn_k_norm.weight" },
	{ "post_attention_layernorm.weight", "post_attention_norm.weight" },
	{ "pre_feedforward_layernorm.weight", "ffn_norm.weight" },
	{ "post_feedforward_layernorm.weight", "post_ffw_norm.weight" },
	{ "mlp.gate_proj.weight", "ffn_gate.weight" },
	{ "mlp.up_proj.weight", "ffn_up.weight" },
	{ "mlp.down_proj.weight", "ffn_down.weight" },
};
#define N_LAYER_NAMES (sizeof layer_names / sizeof layer_names[0])

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

static int starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

uint64_t model_tensor_nelems(const struct model_tensor *t)
{
	uint64_t n = 1;
	for (int i = 0; i < 4; i++)
		n *= t->ne[i];
	return n;
}

const struct model_tensor *model_find(const struct model *m, const char *name)
{
	for (size_t i = 0; i < m->n_tensors; i++)
		if (!strcmp(m->tensors[i].name, name))
			return &m->tensors[i];
	return NULL;
}

void model_close(struct model *m)
{
	if (!m)
		return;
	struct model_priv *p = m->priv;
	if (p) {
		gguf_close(p->gguf);
		safetensors_set_close(p->st);
		free(p->weights_path);
		free(p);
	}
	free(m->layers);
	free(m->tensors);
	free(m->path);
	free(m);
}

int model_tensor_rows_f32(const struct model_tensor *t, uint64_t row0, uint64_t nrows, float *dst)
{
	uint64_t ne0 = t->ne[0];
	if (ne0 == 0)
		return err_set(ERR_INVAL, "%s: empty rows", t->name);
	uint64_t rows = model_tensor_nelems(t) / ne0, row_bytes;
	if (row0 > rows || nrows > rows - row0)
		return err_set(ERR_RANGE, "%s: rows [%" PRIu64 ", +%" PRIu64 ") outside %" PRIu64 " rows",
			       t->name, row0, nrows, rows);
	int rc = quant_row_bytes(t->type, ne0, &row_bytes);
	if (rc)
		return err_prefix(rc, "%s", t->name);
	uint64_t need;
	if (__builtin_mul_overflow(row_bytes, rows, &need) || need > t->nbytes)
		return err_set(ERR_RANGE, "%s: %" PRIu64 " bytes is short of %" PRIu64 " rows", t->name,
			       t->nbytes, rows);
	const uint8_t *src = (const uint8_t *)t->data + row0 * row_bytes;
	uint64_t n = nrows * ne0;
	if ((rc = quant_dequantize(t->type, src, dst, n)))
		return err_prefix(rc, "%s", t->name);
	if (t->norm_offset != 0.0f)
		for (uint64_t i = 0; i < n; i++)
			dst[i] += t->norm_offset;
	return 0;
}

/* ---- shared validation ---- */

int model_check_config(const char *file, const struct gemma3_config *c)
{
	if (!c->n_embd || c->n_embd > CAP_EMBD)
		return err_set(ERR_RANGE, "%s: n_embd %u out of range", file, c->n_embd);
	if (!c->n_ff || c->n_ff > CAP_FF)
		return err_set(ERR_RANGE, "%s: n_ff %u out of range", file, c->n_ff);
	if (!c->n_layer || c->n_layer > MODEL_MAX_LAYERS)
		return err_set(ERR_RANGE, "%s: n_layer %u out of range [1, %d]", file, c->n_layer,
			       MODEL_MAX_LAYERS);
	if (!c->n_head || c->n_head > CAP_HEADS || !c->n_head_kv || c->n_head_kv > c->n_head ||
	    c->n_head % c->n_head_kv)
		return err_set(ERR_INVAL, "%s: heads %u / kv heads %u: kv heads must divide heads", file,
			       c->n_head, c->n_head_kv);
	if (c->head_dim < 2 || c->head_dim > CAP_HEAD_DIM || c->head_dim % 2)
		return err_set(ERR_RANGE, "%s: head_dim %u out of range (even, 2..%u)", file, c->head_dim,
			       CAP_HEAD_DIM);
	if (!c->sliding_window || c->sliding_window > CAP_WINDOW)
		return err_set(ERR_RANGE, "%s: sliding_window %u out of range", file, c->sliding_window);
	if (!c->n_vocab || c->n_vocab > CAP_VOCAB || !c->n_vocab_text || c->n_vocab_text > c->n_vocab)
		return err_set(ERR_RANGE, "%s: vocabulary %u (text %u) out of range", file, c->n_vocab,
			       c->n_vocab_text);
	if (!c->n_ctx || c->n_ctx > CAP_CTX)
		return err_set(ERR_RANGE, "%s: context length %u out of range", file, c->n_ctx);
	if (!(c->eps > 0 && c->eps < 1))
		return err_set(ERR_RANGE, "%s: rms eps %g out of range (0, 1)", file, c->eps);
	if (!(c->rope_base_global > 0 && isfinite(c->rope_base_global)) ||
	    !(c->rope_base_local > 0 && isfinite(c->rope_base_local)) ||
	    !(c->rope_scale_global > 0 && isfinite(c->rope_scale_global)))
		return err_set(ERR_RANGE, "%s: rope base/scale must be positive", file);
	if (!(c->query_pre_attn_scalar > 0 && isfinite(c->query_pre_attn_scalar)))
		return err_set(ERR_RANGE, "%s: query_pre_attn_scalar %g must be positive", file,
			       c->query_pre_attn_scalar);
	if (!(c->final_softcap >= 0 && isfinite(c->final_softcap)))
		return err_set(ERR_RANGE, "%s: final logit softcap %g out of range", file,
			       c->final_softcap);
	return 0;
}

/* GGUF-order name of the HF tensor, for error messages. */
static void hf_name_of(const char *gguf_name, char *out, size_t cap)
{
	unsigned il;
	int n = 0;
	if (!strcmp(gguf_name, "token_embd.weight")) {
		snprintf(out, cap, "model.embed_tokens.weight");
		return;
	}
	if (!strcmp(gguf_name, "output_norm.weight")) {
		snprintf(out, cap, "model.norm.weight");
		return;
	}
	if (sscanf(gguf_name, "blk.%u.%n", &il, &n) == 1 && n > 0)
		for (size_t i = 0; i < N_LAYER_NAMES; i++)
			if (!strcmp(gguf_name + n, layer_names[i].gguf)) {
				snprintf(out, cap, "model.layers.%u.%s", il, layer_names[i].hf);
				return;
			}
	snprintf(out, cap, "%s", gguf_name);
}

static int require(struct model *m, const char *label, const char *name, uint64_t ne0, uint64_t ne1,
		   const struct model_tensor **out)
{
	char hf[160];
	const struct model_tensor *t = model_find(m, name);
	if (!t) {
		if (m->format == MODEL_HF) {
			hf_name_of(name, hf, sizeof hf);
			return err_set(ERR_NOTFOUND, "%s: tensor %s (%s): missing", label, hf,
				       name);
		}
		return err_set(ERR_NOTFOUND, "%s: tensor %s: missing", label, name);
	}
	const struct quant_type_info *qi = quant_type_info(t->type);
	if (!qi)
		return err_set(ERR_UNSUP, "%s: tensor %s: type %u not supported", label, name,
			       t->type);
	if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
		char want[64], have[96];
		if (ne1 == 1)
			snprintf(want, sizeof want, "{%" PRIu64 "}", ne0);
		else
			snprintf(want, sizeof want, "{%" PRIu64 ", %" PRIu64 "}", ne0, ne1);
		snprintf(have, sizeof have, "{%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 "}",
			 t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
		return err_set(ERR_INVAL, "%s: tensor %s: shape (GGUF order) %s, expected %s",
			       label, name, have, want);
	}
	if (ne0 % qi->block_elems)
		return err_set(ERR_INVAL, "%s: tensor %s: row of %" PRIu64 " is not a multiple of the %s "
			       "block size", label, name, ne0, qi->name);
	*out = t;
	return 0;
}

int model_bind(struct model *m, const char *label)
{
	const struct gemma3_config *c = &m->cfg;
	uint64_t q = (uint64_t)c->n_head * c->head_dim, kv = (uint64_t)c->n_head_kv * c->head_dim;
	int rc;
	if ((rc = require(m, label, "token_embd.weight", c->n_embd, c->n_vocab, &m->tok_embd)) ||
	    (rc = require(m, label, "output_norm.weight", c->n_embd, 1, &m->output_norm)))
		return rc;
	free(m->layers);
	m->layers = calloc(c->n_layer, sizeof *m->layers);
	if (!m->layers)
		return err_set(ERR_NOMEM, "%s: out of memory", label);
	for (uint32_t il = 0; il < c->n_layer; il++) {
		struct model_layer *L = &m->layers[il];
		const struct {
			const char *name;
			uint64_t ne0, ne1;
			const struct model_tensor **slot;
		} want[] = {
			{ "attn_norm.weight", c->n_embd, 1, &L->attn_norm },
			{ "attn_q.weight", c->n_embd, q, &L->wq },
			{ "attn_k.weight", c->n_embd, kv, &L->wk },
			{ "attn_v.weight", c->n_embd, kv, &L->wv },
			{ "attn_output.weight", q, c->n_embd, &L->wo },
			{ "attn_q_norm.weight", c->head_dim, 1, &L->q_norm },
			{ "attn_k_norm.weight", c->head_dim, 1, &L->k_norm },
			{ "post_attention_norm.weight", c->n_embd, 1, &L->post_attn_norm },
			{ "ffn_norm.weight", c->n_embd, 1, &L->ffn_norm },
			{ "ffn_gate.weight", c->n_embd, c->n_ff, &L->ffn_gate },
			{ "ffn_up.weight", c->n_embd, c->n_ff, &L->ffn_up },
			{ "ffn_down.weight", c->n_ff, c->n_embd, &L->ffn_down },
			{ "post_ffw_norm.weight", c->n_embd, 1, &L->post_ffn_norm },
		};
		for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
			char name[96];
			snprintf(name, sizeof name, "blk.%u.%s", il, want[i].name);
			if ((rc = require(m, label, name, want[i].ne0, want[i].ne1, want[i].slot)))
				return rc;
		}
	}
	return 0;
}

/* ---- GGUF ---- */

static int gguf_u32(const struct gguf *g, const char *key, int required, uint32_t def,
		    uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int rc = gguf_get_u64(g, key, &v);
	if (rc == ERR_NOTFOUND && !required) {
		err_clear();
		*out = def;
		return 0;
	}
	if (rc)
		return rc;
	if (v < min || v > max)
		return err_set(ERR_RANGE, "%s: key '%s': %" PRIu64 " out of range [%u, %u]", g->path, key,
			       v, min, max);
	*out = (uint32_t)v;
	return 0;
}

static int gguf_f32(const struct gguf *g, const char *key, int required, double def, float *out)
{
	double v;
	int rc = gguf_get_f64(g, key, &v);
	if (rc == ERR_NOTFOUND && !required) {
		err_clear();
		v = def;
	} else if (rc) {
		return rc;
	}
	if (!isfinite(v) || fabs(v) > 1e30)
		return err_set(ERR_RANGE, "%s: key '%s': %g out of range", g->path, key, v);
	*out = (float)v;
	return 0;
}

static int gguf_layer_pattern(const struct gguf *g, struct gemma3_config *c)
{
	const char *key = "gemma3.attention.sliding_window_pattern";
	const struct gguf_kv *kv = gguf_find(g, key);
	if (!kv) {
		/* llama.cpp: set_swa_pattern(6), sliding iff il % 6 < 5. */
		for (uint32_t il = 0; il < c->n_layer; il++)
			c->layer_global[il] = il % 6 == 5;
		return 0;
	}
	if (kv->val.type == GGUF_ARRAY) {
		const struct gguf_array *a = &kv->val.arr;
		if (a->n != c->n_layer)
			return err_set(ERR_INVAL, "%s: key '%s': %" PRIu64 " entries but %u layers", g->path,
				       key, a->n, c->n_layer);
		for (uint32_t il = 0; il < c->n_layer; il++) {
			int64_t v;
			int rc = gguf_arr_i64(a, il, &v);
			if (rc)
				return err_prefix(rc, "%s: key '%s'", g->path, key);
			c->layer_global[il] = v == 0; /* true = sliding */
		}
		return 0;
	}
	/* A scalar period, as llama.cpp's set_swa_pattern(n). */
	uint32_t n;
	int rc = gguf_u32(g, key, 1, 0, 1, 1u << 20, &n);
	if (rc)
		return rc;
	for (uint32_t il = 0; il < c->n_layer; il++)
		c->layer_global[il] = !(il % n < n - 1);
	return 0;
}

static int open_gguf(struct model *m)
{
	struct model_priv *p = m->priv;
	int rc = gguf_open(m->path, &p->gguf);
	if (rc)
		return rc;
	const struct gguf *g = p->gguf;
	struct gemma3_config *c = &m->cfg;

	struct gguf_str arch;
	if ((rc = gguf_get_str(g, "general.architecture", &arch)))
		return rc;
	if (arch.len != 6 || memcmp(arch.ptr, "gemma3", 6))
		return err_set(ERR_UNSUP, "%s: general.architecture: '%.*s' is not gemma3", m->path,
			       (int)(arch.len > 32 ? 32 : arch.len), arch.ptr);

	uint32_t key_len, val_len;
	if ((rc = gguf_u32(g, "gemma3.embedding_length", 1, 0, 1, CAP_EMBD, &c->n_embd)) ||
	    (rc = gguf_u32(g, "gemma3.feed_forward_length", 1, 0, 1, CAP_FF, &c->n_ff)) ||
	    (rc = gguf_u32(g, "gemma3.block_count", 1, 0, 1, MODEL_MAX_LAYERS, &c->n_layer)) ||
	    (rc = gguf_u32(g, "gemma3.attention.head_count", 1, 0, 1, CAP_HEADS, &c->n_head)) ||
	    (rc = gguf_u32(g, "gemma3.attention.head_count_kv", 0, c->n_head, 1, CAP_HEADS,
			   &c->n_head_kv)) ||
	    (rc = gguf_u32(g, "gemma3.context_length", 1, 0, 1, CAP_CTX, &c->n_ctx)) ||
	    (rc = gguf_u32(g, "gemma3.attention.sliding_window", 1, 0, 1, CAP_WINDOW,
			   &c->sliding_window)) ||
	    (rc = gguf_u32(g, "gemma3.attention.key_length", 0, c->n_embd / c->n_head, 1,
			   CAP_HEAD_DIM, &key_len)) ||
	    (rc = gguf_u32(g, "gemma3.attention.value_length", 0, key_len, 1, CAP_HEAD_DIM, &val_len)))
		return rc;
	if (key_len != val_len)
		return err_set(ERR_UNSUP, "%s: gemma3.attention.key_length %u != value_length %u", m->path,
			       key_len, val_len);
	c->head_dim = key_len;

	float base_local_default;
	if ((rc = gguf_f32(g, "gemma3.attention.layer_norm_rms_epsilon", 1, 0, &c->eps)) ||
	    (rc = gguf_f32(g, "gemma3.rope.freq_base", 0, 10000.0, &c->rope_base_global)) ||
	    (rc = gguf_f32(g, "gemma3.rope.freq_base_swa", 0, 10000.0, &base_local_default)) ||
	    (rc = gguf_f32(g, "gemma3.rope.local.freq_base", 0, base_local_default,
			   &c->rope_base_local)) ||
	    (rc = gguf_f32(g, "gemma3.final_logit_softcapping", 0, 0.0, &c->final_softcap)))
		return rc;

	c->rope_scale_global = 1.0f;
	struct gguf_str stype;
	rc = gguf_get_str(g, "gemma3.rope.scaling.type", &stype);
	if (rc && rc != ERR_NOTFOUND)
		return rc;
	err_clear();
	int linear = !rc && stype.len == 6 && !memcmp(stype.ptr, "linear", 6);
	int none = rc == ERR_NOTFOUND || (stype.len == 4 && !memcmp(stype.ptr, "none", 4));
	if (!linear && !none)
		return err_set(ERR_UNSUP, "%s: gemma3.rope.scaling.type: '%.*s' not supported (linear)",
			       m->path, (int)(stype.len > 32 ? 32 : stype.len), stype.ptr);
	if (linear && (rc = gguf_f32(g, "gemma3.rope.scaling.factor", 0, 1.0, &c->rope_scale_global)))
		return rc;

	/* llama.cpp has no key for it: 27B (62 layers) scales by n_embd/n_head,
	 * every other size by head_dim. */
	c->query_pre_attn_scalar = c->n_layer == 62 ? (float)(c->n_embd / c->n_head)
						    : (float)c->head_dim;
	if ((rc = gguf_layer_pattern(g, c)))
		return rc;

	m->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *m->tensors);
	if (!m->tensors)
		return err_set(ERR_NOMEM, "%s: out of memory", m->path);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *gt = &g->tensors[i];
		/* Vision tower and projector of a combined file are not ours. */
		if (starts_with(gt->name, "v.") || starts_with(gt->name, "mm."))
			continue;
		struct model_tensor *t = &m->tensors[m->n_tensors++];
		snprintf(t->name, sizeof t->name, "%s", gt->name);
		t->type = gt->type;
		t->n_dims = gt->n_dims;
		for (int d = 0; d < 4; d++)
			t->ne[d] = d < (int)gt->n_dims ? gt->ne[d] : 1;
		t->nbytes = gt->nbytes;
		t->data = gt->data;
		t->norm_offset = 0.0f;
	}

	const struct model_tensor *emb = model_find(m, "token_embd.weight");
	if (!emb)
		return err_set(ERR_NOTFOUND, "%s: tensor token_embd.weight: missing", m->path);
	if (emb->ne[1] == 0 || emb->ne[1] > CAP_VOCAB)
		return err_set(ERR_RANGE, "%s: tensor token_embd.weight: %" PRIu64 " rows out of range",
			       m->path, emb->ne[1]);
	c->n_vocab = (uint32_t)emb->ne[1];
	c->n_vocab_text = c->n_vocab;
	const struct gguf_array *toks;
	rc = gguf_get_arr(g, "tokenizer.ggml.tokens", &toks);
	if (!rc && toks->n > 0 && toks->n <= c->n_vocab)
		c->n_vocab_text = (uint32_t)toks->n;
	err_clear();
	return 0;
}

/* ---- Hugging Face ---- */

static int file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Map an HF tensor name to a GGUF name. Returns 1 mapped, 0 skip (not part of
 * the text model), negative error. */
static int hf_map_name(const char *file, const char *hf, uint32_t n_layer, char *out, size_t cap)
{
	static const char *const skip[] = {
		"vision_tower.", "model.vision_tower.", "multi_modal_projector.",
		"model.multi_modal_projector.", "lm_head.", "language_model.lm_head.",
	};
	for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
		if (starts_with(hf, skip[i]))
			return 0;
	static const char *const prefixes[] = {
		"model.language_model.", "language_model.model.", "model.",
	};
	const char *rest = NULL;
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0] && !rest; i++)
		if (starts_with(hf, prefixes[i]))
			rest = hf + strlen(prefixes[i]);
	if (!rest)
		return 0;
	if (!strcmp(rest, "embed_tokens.weight")) {
		snprintf(out, cap, "token_embd.weight");
		return 1;
	}
	if (!strcmp(rest, "norm.weight")) {
		snprintf(out, cap, "output_norm.weight");
		return 1;
	}
	if (!starts_with(rest, "layers."))
		return 0;
	const char *d = rest + 7;
	uint64_t il = 0;
	size_t nd = 0;
	while (d[nd] >= '0' && d[nd] <= '9' && nd < 10)
		il = il * 10 + (uint64_t)(d[nd++] - '0');
	if (nd == 0 || d[nd] != '.' || (nd > 1 && d[0] == '0'))
		return 0;
	const char *sub = d + nd + 1;
	for (size_t i = 0; i < N_LAYER_NAMES; i++)
		if (!strcmp(sub, layer_names[i].hf)) {
			if (il >= n_layer)
				return err_set(ERR_INVAL, "%s: tensor %s: layer %" PRIu64 " but "
					       "num_hidden_layers is %u", file, hf, il, n_layer);
			snprintf(out, cap, "blk.%u.%s", (unsigned)il, layer_names[i].gguf);
			return 1;
		}
	return 0;
}

static int open_hf(struct model *m, const char *dir, const char *weights)
{
	struct model_priv *p = m->priv;
	struct gemma3_config *c = &m->cfg;
	size_t dl = strlen(dir);
	char *cfg_path = malloc(dl + 16);
	if (!cfg_path)
		return err_set(ERR_NOMEM, "out of memory");
	sprintf(cfg_path, "%s/config.json", dir);
	int rc = hf_config_load(cfg_path, c);
	free(cfg_path);
	if (rc)
		return rc;

	if (weights) {
		p->weights_path = strdup(weights);
	} else {
		p->weights_path = malloc(dl + 40);
		if (p->weights_path) {
			sprintf(p->weights_path, "%s/model.safetensors.index.json", dir);
			if (!file_exists(p->weights_path))
				sprintf(p->weights_path, "%s/model.safetensors", dir);
		}
	}
	if (!p->weights_path)
		return err_set(ERR_NOMEM, "out of memory");
	if ((rc = safetensors_set_open(p->weights_path, &p->st)))
		return rc;

	const struct safetensors_set *s = p->st;
	m->tensors = calloc(s->n_tensors ? s->n_tensors : 1, sizeof *m->tensors);
	if (!m->tensors)
		return err_set(ERR_NOMEM, "%s: out of memory", p->weights_path);
	for (size_t i = 0; i < s->n_tensors; i++) {
		const struct safetensors_tensor *st = s->tensors[i];
		char name[96];
		rc = hf_map_name(p->weights_path, st->name, c->n_layer, name, sizeof name);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		if (model_find(m, name))
			return err_set(ERR_INVAL, "%s: tensor %s: a second tensor maps to %s",
				       p->weights_path, st->name, name);
		struct model_tensor *t = &m->tensors[m->n_tensors];
		if (safetensors_dtype_to_tensor_type(st->dtype, &t->type))
			return err_set(ERR_UNSUP, "%s: tensor %s: dtype %s not supported (F32, F16, BF16)",
				       p->weights_path, st->name, safetensors_dtype_str(st->dtype));
		if (st->n_dims > 4)
			return err_set(ERR_UNSUP, "%s: tensor %s: %u dimensions (at most 4)",
				       p->weights_path, st->name, st->n_dims);
		snprintf(t->name, sizeof t->name, "%s", name);
		/* HF shapes are outermost first; GGUF ne[0] is the fastest. */
		t->n_dims = st->n_dims;
		for (int d = 0; d < 4; d++)
			t->ne[d] = d < (int)st->n_dims ? st->shape[st->n_dims - 1 - d] : 1;
		t->nbytes = st->end - st->begin;
		t->data = st->data;
		/* HF stores raw w for Gemma RMSNorm; the effective weight is 1 + w. */
		t->norm_offset = ends_with(name, "norm.weight") ? 1.0f : 0.0f;
		m->n_tensors++;
	}

	const struct model_tensor *emb = model_find(m, "token_embd.weight");
	if (!emb) {
		return err_set(ERR_NOTFOUND, "%s: tensor model.embed_tokens.weight (token_embd.weight): "
			       "missing", p->weights_path);
	}
	if (emb->ne[1] != c->n_vocab)
		return err_set(ERR_INVAL, "%s: tensor model.embed_tokens.weight: %" PRIu64 " rows but "
			       "config vocab_size is %u", p->weights_path, emb->ne[1], c->n_vocab);
	c->n_vocab_text = c->n_vocab == GEMMA3_PADDED_VOCAB ? GEMMA3_TEXT_VOCAB : c->n_vocab;
	return 0;
}

/* Sort out what path names: GGUF file, HF directory, or a file inside one. */
static int open_any(struct model *m)
{
	const char *path = m->path;
	struct stat st;
	if (stat(path, &st) < 0)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "%s: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		m->format = MODEL_HF;
		return open_hf(m, path, NULL);
	}
	if (!S_ISREG(st.st_mode))
		return err_set(ERR_INVAL, "%s: not a file or directory", path);

	unsigned char magic[4] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(ERR_IO, "%s: open: %s", path, strerror(errno));
	ssize_t n = read(fd, magic, 4);
	close(fd);
	if (n == 4 && !memcmp(magic, "GGUF", 4)) {
		m->format = MODEL_GGUF;
		return open_gguf(m);
	}
	if (ends_with(path, ".safetensors") || ends_with(path, ".safetensors.index.json")) {
		m->format = MODEL_HF;
		char *dir = strdup(path);
		if (!dir)
			return err_set(ERR_NOMEM, "out of memory");
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = 0;
		else
			strcpy(dir, ".");
		int rc = open_hf(m, dir, path);
		free(dir);
		return rc;
	}
	return err_set(ERR_INVAL, "%s: not a GGUF file, a .safetensors file or a Hugging Face model "
		       "directory", path);
}

int model_open(const char *path, struct model **out)
{
	*out = NULL;
	struct model *m = calloc(1, sizeof *m);
	struct model_priv *p = calloc(1, sizeof *p);
	if (!m || !p) {
		free(m);
		free(p);
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	}
	m->priv = p;
	m->path = strdup(path);
	if (!m->path) {
		model_close(m);
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	}
	int rc = open_any(m);
	if (!rc && !p->weights_path && !(p->weights_path = strdup(path)))
		rc = err_set(ERR_NOMEM, "%s: out of memory", path);
	if (!rc)
		rc = model_check_config(m->format == MODEL_HF ? p->weights_path : path, &m->cfg);
	if (!rc)
		rc = model_bind(m, p->weights_path);
	if (rc) {
		model_close(m);
		return rc;
	}
	*out = m;
	return 0;
}
