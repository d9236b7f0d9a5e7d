/* ref: the CPU reference Gemma 3 forward pass (see ref.h).
 *
 * The math follows ../shared/spec/reference.md §1: sandwich RMSNorms, per-head
 * q/k RMSNorm, NEOX RoPE with per-layer-type bases, GQA, sliding window on
 * local layers, gelu_tanh gated FFN, tied output embedding. */
#include "ref/ref.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/quant.h"
#include "ipc/kvlayout.h"

/* ---------------------------------------------------------------- loading */

/* malloc for n floats with an overflow check. */
static float *alloc_floats(uint64_t n)
{
	if (n == 0 || n > SIZE_MAX / sizeof(float))
		return NULL;
	return malloc((size_t)n * sizeof(float));
}

/* Dequantize tensor t, which must have ne[0] == cols and `rows` rows in all. */
static int load_matrix(const struct model_tensor *t, const char *what, uint32_t layer,
		       uint64_t cols, uint64_t rows, float **dst)
{
	if (!t)
		return err_set(ERR_NOTFOUND, "ref: layer %u: tensor %s missing", layer, what);
	uint64_t n = model_tensor_nelems(t);
	if (t->ne[0] != cols || cols == 0 || rows == 0 || n / cols != rows || n % cols != 0)
		return err_set(ERR_INVAL, "ref: %s: shape [%llu, %llu] but config implies [%llu, %llu]",
			       t->name, (unsigned long long)t->ne[0],
			       (unsigned long long)(t->ne[0] ? n / t->ne[0] : 0),
			       (unsigned long long)cols, (unsigned long long)rows);
	if (cols > UINT64_MAX / rows)
		return err_set(ERR_RANGE, "ref: %s: size overflows", t->name);
	float *buf = alloc_floats(cols * rows);
	if (!buf)
		return err_set(ERR_NOMEM, "ref: %s: cannot allocate %llu floats", t->name,
			       (unsigned long long)(cols * rows));
	int rc = model_tensor_rows_f32(t, 0, rows, buf);
	if (rc < 0) {
		free(buf);
		return err_prefix(rc, "ref: %s", t->name);
	}
	*dst = buf;
	return 0;
}

static int check_config(const struct gemma3_config *c)
{
	if (c->n_embd == 0 || c->n_ff == 0 || c->n_layer == 0 || c->n_head == 0 ||
	    c->n_head_kv == 0 || c->head_dim == 0 || c->n_vocab == 0)
		return err_set(ERR_INVAL, "ref: config: a dimension is zero");
	if (c->n_layer > MODEL_MAX_LAYERS)
		return err_set(ERR_RANGE, "ref: config: n_layer %u > %u", c->n_layer, MODEL_MAX_LAYERS);
	if (c->n_head % c->n_head_kv != 0)
		return err_set(ERR_INVAL, "ref: config: n_head %u not a multiple of n_head_kv %u",
			       c->n_head, c->n_head_kv);
	if (c->head_dim % 2 != 0)
		return err_set(ERR_INVAL, "ref: config: head_dim %u is odd (RoPE needs pairs)", c->head_dim);
	if (c->n_vocab_text == 0 || c->n_vocab_text > c->n_vocab)
		return err_set(ERR_INVAL, "ref: config: n_vocab_text %u not in [1, n_vocab %u]",
			       c->n_vocab_text, c->n_vocab);
	if (!(c->query_pre_attn_scalar > 0) || !isfinite(c->query_pre_attn_scalar))
		return err_set(ERR_INVAL, "ref: config: query_pre_attn_scalar %g", (double)c->query_pre_attn_scalar);
	if (!(c->rope_base_global > 0) || !(c->rope_base_local > 0) || !(c->rope_scale_global > 0) ||
	    !isfinite(c->rope_base_global) || !isfinite(c->rope_base_local) ||
	    !isfinite(c->rope_scale_global))
		return err_set(ERR_INVAL, "ref: config: rope base/scale not positive and finite");
	if (!(c->eps >= 0) || !isfinite(c->eps) || !isfinite(c->final_softcap) || c->final_softcap < 0)
		return err_set(ERR_INVAL, "ref: config: eps or final_softcap invalid");
	/* q_dim, kv_dim and the largest matrices must fit comfortably in 64 bits. */
	if ((uint64_t)c->n_head * c->head_dim > UINT32_MAX)
		return err_set(ERR_RANGE, "ref: config: n_head * head_dim overflows");
	return 0;
}

void ref_destroy(struct ref_model *r)
{
	if (!r)
		return;
	if (r->layers) {
		for (uint32_t l = 0; l < r->cfg.n_layer; l++) {
			struct ref_layer *L = &r->layers[l];
			free(L->attn_norm); free(L->wq); free(L->wk); free(L->wv); free(L->wo);
			free(L->q_norm); free(L->k_norm); free(L->post_attn_norm); free(L->ffn_norm);
			free(L->ffn_gate); free(L->ffn_up); free(L->ffn_down); free(L->post_ffn_norm);
			free(L->k_cache); free(L->v_cache);
		}
		free(r->layers);
	}
	free(r->tok_embd); free(r->output_norm);
	free(r->x); free(r->xb); free(r->xb2); free(r->q); free(r->att_out);
	free(r->hb); free(r->hb2); free(r->att);
	free(r);
}

int ref_create(const struct model *m, uint32_t max_ctx, struct ref_model **out)
{
	*out = NULL;
	if (!m || !m->layers || !m->tok_embd || !m->output_norm)
		return err_set(ERR_INVAL, "ref: model is incomplete");
	int rc = check_config(&m->cfg);
	if (rc < 0)
		return rc;
	struct ref_model *r = calloc(1, sizeof *r);
	if (!r)
		return err_set(ERR_NOMEM, "ref: out of memory");
	r->cfg = m->cfg;
	r->kv_type = KV_TYPE_F32;
	const struct gemma3_config *c = &r->cfg;
	r->max_ctx = (max_ctx == 0 || (c->n_ctx && max_ctx > c->n_ctx)) ? c->n_ctx : max_ctx;
	if (r->max_ctx == 0)
		r->max_ctx = max_ctx; /* model without a context length: trust the caller */
	if (r->max_ctx == 0) {
		ref_destroy(r);
		return err_set(ERR_INVAL, "ref: no context length (config n_ctx 0 and max_ctx 0)");
	}
	uint64_t E = c->n_embd, F = c->n_ff, HD = c->head_dim;
	uint64_t qd = (uint64_t)c->n_head * HD, kvd = (uint64_t)c->n_head_kv * HD;

	r->layers = calloc(c->n_layer, sizeof *r->layers);
	if (!r->layers) {
		rc = err_set(ERR_NOMEM, "ref: out of memory");
		goto out_free;
	}
	if ((rc = load_matrix(m->tok_embd, "token_embd", 0, E, c->n_vocab, &r->tok_embd)) < 0 ||
	    (rc = load_matrix(m->output_norm, "output_norm", 0, E, 1, &r->output_norm)) < 0)
		goto out_free;
	for (uint32_t l = 0; l < c->n_layer; l++) {
		const struct model_layer *ml = &m->layers[l];
		struct ref_layer *L = &r->layers[l];
		if ((rc = load_matrix(ml->attn_norm, "attn_norm", l, E, 1, &L->attn_norm)) < 0 ||
		    (rc = load_matrix(ml->wq, "attn_q", l, E, qd, &L->wq)) < 0 ||
		    (rc = load_matrix(ml->wk, "attn_k", l, E, kvd, &L->wk)) < 0 ||
		    (rc = load_matrix(ml->wv, "attn_v", l, E, kvd, &L->wv)) < 0 ||
		    (rc = load_matrix(ml->wo, "attn_output", l, qd, E, &L->wo)) < 0 ||
		    (rc = load_matrix(ml->q_norm, "attn_q_norm", l, HD, 1, &L->q_norm)) < 0 ||
		    (rc = load_matrix(ml->k_norm, "attn_k_norm", l, HD, 1, &L->k_norm)) < 0 ||
		    (rc = load_matrix(ml->post_attn_norm, "post_attention_norm", l, E, 1, &L->post_attn_norm)) < 0 ||
		    (rc = load_matrix(ml->ffn_norm, "ffn_norm", l, E, 1, &L->ffn_norm)) < 0 ||
		    (rc = load_matrix(ml->ffn_gate, "ffn_gate", l, E, F, &L->ffn_gate)) < 0 ||
		    (rc = load_matrix(ml->ffn_up, "ffn_up", l, E, F, &L->ffn_up)) < 0 ||
		    (rc = load_matrix(ml->ffn_down, "ffn_down", l, F, E, &L->ffn_down)) < 0 ||
		    (rc = load_matrix(ml->post_ffn_norm, "post_ffw_norm", l, E, 1, &L->post_ffn_norm)) < 0)
			goto out_free;
	}
	r->x = alloc_floats(E);
	r->xb = alloc_floats(E);
	r->xb2 = alloc_floats(E);
	r->q = alloc_floats(qd);
	r->att_out = alloc_floats(qd);
	r->hb = alloc_floats(F);
	r->hb2 = alloc_floats(F);
	if (!r->x || !r->xb || !r->xb2 || !r->q || !r->att_out || !r->hb || !r->hb2) {
		rc = err_set(ERR_NOMEM, "ref: out of memory for scratch buffers");
		goto out_free;
	}
	*out = r;
	return 0;
out_free:
	ref_destroy(r);
	return rc;
}

/* ------------------------------------------------------------------- math */

static double dot(const float *a, const float *b, uint64_t n)
{
	double s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

/* out[i] = W[i] . x for W [rows][cols] (out must not alias x). */
static void matvec(float *out, const float *W, const float *x, uint64_t rows, uint64_t cols)
{
	for (uint64_t i = 0; i < rows; i++)
		out[i] = (float)dot(W + i * cols, x, cols);
}

/* out = x / sqrt(mean(x^2) + eps) * w (w already holds 1+w); out may alias x. */
static void rmsnorm(float *out, const float *x, const float *w, uint64_t n, float eps)
{
	double ss = dot(x, x, n) / (double)n;
	double inv = 1.0 / sqrt(ss + (double)eps);
	for (uint64_t i = 0; i < n; i++)
		out[i] = (float)((double)x[i] * inv * w[i]);
}

/* NEOX RoPE on one head: pairs (i, i + hd/2), angle p * base^(-2i/hd). */
static void rope(float *v, uint32_t hd, double p, double base)
{
	uint32_t half = hd / 2;
	for (uint32_t i = 0; i < half; i++) {
		double ang = p * pow(base, -2.0 * i / hd);
		double c = cos(ang), s = sin(ang);
		double x0 = v[i], x1 = v[i + half];
		v[i] = (float)(x0 * c - x1 * s);
		v[i + half] = (float)(x0 * s + x1 * c);
	}
}

static double gelu_tanh(double x)
{
	const double k = 0.79788456080286535588; /* sqrt(2/pi) */
	return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

/* Grow every layer's KV cache (and the score buffer) to hold pos+1 positions. */
static int kv_reserve(struct ref_model *r, uint32_t pos)
{
	if (pos < r->kv_cap)
		return 0;
	uint64_t cap = r->kv_cap ? (uint64_t)r->kv_cap * 2 : 64;
	if (cap < (uint64_t)pos + 1)
		cap = (uint64_t)pos + 1;
	if (cap > r->max_ctx)
		cap = r->max_ctx;
	uint64_t kvd = (uint64_t)r->cfg.n_head_kv * r->cfg.head_dim;
	if (kvd > SIZE_MAX / sizeof(float) / cap || cap > SIZE_MAX / sizeof(double))
		return err_set(ERR_RANGE, "ref: KV cache of %llu positions overflows", (unsigned long long)cap);
	size_t bytes = (size_t)(cap * kvd * sizeof(float));
	for (uint32_t l = 0; l < r->cfg.n_layer; l++) {
		struct ref_layer *L = &r->layers[l];
		float *k = realloc(L->k_cache, bytes);
		if (!k)
			return err_set(ERR_NOMEM, "ref: cannot grow KV cache to %llu positions", (unsigned long long)cap);
		L->k_cache = k;
		float *v = realloc(L->v_cache, bytes);
		if (!v)
			return err_set(ERR_NOMEM, "ref: cannot grow KV cache to %llu positions", (unsigned long long)cap);
		L->v_cache = v;
	}
	double *att = realloc(r->att, (size_t)cap * sizeof(double));
	if (!att)
		return err_set(ERR_NOMEM, "ref: cannot grow attention scores to %llu", (unsigned long long)cap);
	r->att = att;
	r->kv_cap = (uint32_t)cap;
	return 0;
}

/* Round n values (n a multiple of 32 for q8_0) as a KV cache of type t
 * stores them. q8_0 per 32 values: d = amax / 127, q = roundf(x / d) with
 * 1/d as ggml computes it, the value back q * f16(d). */
static void kv_round(float *x, uint64_t n, uint32_t t)
{
	if (t == KV_TYPE_F16) {
		for (uint64_t i = 0; i < n; i++)
			x[i] = quant_f16_to_f32(quant_f32_to_f16(x[i]));
	} else if (t == KV_TYPE_Q8_0) {
		for (uint64_t b = 0; b + 32 <= n; b += 32) {
			float amax = 0;
			for (int j = 0; j < 32; j++)
				amax = fabsf(x[b + j]) > amax ? fabsf(x[b + j]) : amax;
			float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
			float dd = quant_f16_to_f32(quant_f32_to_f16(d));
			for (int j = 0; j < 32; j++)
				x[b + j] = roundf(x[b + j] * id) * dd;
		}
	}
}

/* Layer l's q for the token at pos (into q) and its k/v appended to the
 * cache, from r->xb (the normed input). */
static void qkv(struct ref_model *r, uint32_t l, uint32_t pos, float *q)
{
	const struct gemma3_config *c = &r->cfg;
	struct ref_layer *L = &r->layers[l];
	uint32_t hd = c->head_dim;
	uint64_t E = c->n_embd, qd = (uint64_t)c->n_head * hd, kvd = (uint64_t)c->n_head_kv * hd;
	float *kc = L->k_cache + (uint64_t)pos * kvd;
	float *vc = L->v_cache + (uint64_t)pos * kvd;

	// q, k, v projections
	matvec(q, L->wq, r->xb, qd, E);
	matvec(kc, L->wk, r->xb, kvd, E);
	matvec(vc, L->wv, r->xb, kvd, E);

	// per-head RMSNorm over head_dim, then RoPE; local layers use their own base, no scaling
	bool global = c->layer_global[l];
	double base = global ? c->rope_base_global : c->rope_base_local;
	double p = global ? (double)pos / c->rope_scale_global : (double)pos;
	for (uint32_t h = 0; h < c->n_head; h++) {
		rmsnorm(q + (uint64_t)h * hd, q + (uint64_t)h * hd, L->q_norm, hd, c->eps);
		rope(q + (uint64_t)h * hd, hd, p, base);
	}
	for (uint32_t h = 0; h < c->n_head_kv; h++) {
		rmsnorm(kc + (uint64_t)h * hd, kc + (uint64_t)h * hd, L->k_norm, hd, c->eps);
		rope(kc + (uint64_t)h * hd, hd, p, base);
	}
	kv_round(kc, kvd, r->kv_type);
	kv_round(vc, kvd, r->kv_type);
}

/* Attention of layer l for the query q at pos over keys up to hi (pos for
 * causal attention; past pos inside a bidirectional image span): writes
 * r->att_out [n_head*head_dim]. On local layers key k < pos is visible iff
 * pos - k < sliding_window (keys after pos are always inside it). */
static void attend(struct ref_model *r, uint32_t l, uint32_t pos, uint32_t hi, const float *q)
{
	const struct gemma3_config *c = &r->cfg;
	struct ref_layer *L = &r->layers[l];
	uint32_t hd = c->head_dim;
	uint64_t kvd = (uint64_t)c->n_head_kv * hd;
	bool global = c->layer_global[l];
	uint32_t start = 0;
	if (!global && c->sliding_window > 0 && pos >= c->sliding_window)
		start = pos - c->sliding_window + 1;
	double scale = 1.0 / sqrt((double)c->query_pre_attn_scalar);
	uint32_t group = c->n_head / c->n_head_kv;
	for (uint32_t h = 0; h < c->n_head; h++) {
		const float *qh = q + (uint64_t)h * hd;
		uint64_t koff = (uint64_t)(h / group) * hd;
		double mx = -INFINITY;
		for (uint32_t t = start; t <= hi; t++) {
			double s = dot(qh, L->k_cache + (uint64_t)t * kvd + koff, hd) * scale;
			r->att[t] = s;
			if (s > mx)
				mx = s;
		}
		double sum = 0;
		for (uint32_t t = start; t <= hi; t++) {
			r->att[t] = exp(r->att[t] - mx);
			sum += r->att[t];
		}
		float *oh = r->att_out + (uint64_t)h * hd;
		for (uint32_t i = 0; i < hd; i++) {
			double acc = 0;
			for (uint32_t t = start; t <= hi; t++)
				acc += r->att[t] * L->v_cache[(uint64_t)t * kvd + koff + i];
			oh[i] = (float)(acc / sum);
		}
	}
}

/* Self-attention of layer l for the token at pos: reads r->xb (normed input),
 * appends k/v to the cache, writes r->att_out [n_head*head_dim]. */
static void attention(struct ref_model *r, uint32_t l, uint32_t pos)
{
	qkv(r, l, pos, r->q);
	attend(r, l, pos, pos, r->q);
}

/* The rest of layer l once r->att_out holds the attention: h += post_attn_norm(
 * wo(att)), then the FFN block, on r->x. */
static void after_attention(struct ref_model *r, uint32_t l)
{
	const struct gemma3_config *c = &r->cfg;
	struct ref_layer *L = &r->layers[l];
	uint64_t E = c->n_embd, F = c->n_ff, qd = (uint64_t)c->n_head * c->head_dim;
	matvec(r->xb2, L->wo, r->att_out, E, qd);
	rmsnorm(r->xb2, r->xb2, L->post_attn_norm, E, c->eps);
	for (uint64_t i = 0; i < E; i++)
		r->x[i] += r->xb2[i];

	// FFN block: h += post_ffn_norm(down(gelu_tanh(gate(f)) * up(f))), f = ffn_norm(h)
	rmsnorm(r->xb, r->x, L->ffn_norm, E, c->eps);
	matvec(r->hb, L->ffn_gate, r->xb, F, E);
	matvec(r->hb2, L->ffn_up, r->xb, F, E);
	for (uint64_t i = 0; i < F; i++)
		r->hb[i] = (float)(gelu_tanh(r->hb[i]) * r->hb2[i]);
	matvec(r->xb2, L->ffn_down, r->hb, E, F);
	rmsnorm(r->xb2, r->xb2, L->post_ffn_norm, E, c->eps);
	for (uint64_t i = 0; i < E; i++)
		r->x[i] += r->xb2[i];
}

/* final norm, tied output, optional softcap, mask ids the tokenizer cannot
 * produce; r->x is normed in place */
static void head(struct ref_model *r, float *logits)
{
	const struct gemma3_config *c = &r->cfg;
	uint64_t E = c->n_embd;
	rmsnorm(r->x, r->x, r->output_norm, E, c->eps);
	for (uint32_t v = 0; v < c->n_vocab_text; v++) {
		double z = dot(r->tok_embd + (uint64_t)v * E, r->x, E);
		if (c->final_softcap > 0)
			z = c->final_softcap * tanh(z / c->final_softcap);
		logits[v] = (float)z;
	}
	for (uint32_t v = c->n_vocab_text; v < c->n_vocab; v++)
		logits[v] = -INFINITY;
}

int ref_forward(struct ref_model *r, uint32_t token, uint32_t pos, float *logits)
{
	const struct gemma3_config *c = &r->cfg;
	if (token >= c->n_vocab)
		return err_set(ERR_INVAL, "ref: token %u >= n_vocab %u", token, c->n_vocab);
	if (pos >= r->max_ctx)
		return err_set(ERR_INVAL, "ref: position %u >= context %u", pos, r->max_ctx);
	if (pos > r->n_past)
		return err_set(ERR_STATE, "ref: position %u skips ahead of %u positions run", pos, r->n_past);
	int rc = kv_reserve(r, pos);
	if (rc < 0)
		return rc;
	uint64_t E = c->n_embd;

	// embedding, scaled by sqrt(n_embd) in f32 (llama.cpp; HF rounds it to the weight dtype)
	float escale = sqrtf((float)c->n_embd);
	const float *erow = r->tok_embd + (uint64_t)token * E;
	for (uint64_t i = 0; i < E; i++)
		r->x[i] = erow[i] * escale;

	for (uint32_t l = 0; l < c->n_layer; l++) {
		// attention block: h += post_attn_norm(wo(attn(attn_norm(h)))), then the FFN
		rmsnorm(r->xb, r->x, r->layers[l].attn_norm, E, c->eps);
		attention(r, l, pos);
		after_attention(r, l);
	}

	r->n_past = pos + 1;
	if (logits)
		head(r, logits);
	return 0;
}

int ref_forward_span(struct ref_model *r, const uint32_t *tokens, const float *embd, uint32_t n, uint32_t pos0,
		     bool bidirectional, float *logits)
{
	const struct gemma3_config *c = &r->cfg;
	uint64_t E = c->n_embd, V = c->n_vocab, qd = (uint64_t)c->n_head * c->head_dim;
	if (!n || (!tokens == !embd))
		return err_set(ERR_INVAL, "ref: a span needs n > 0 and tokens or embeddings (one of them)");
	if (pos0 > r->n_past)
		return err_set(ERR_STATE, "ref: position %u skips ahead of %u positions run", pos0, r->n_past);
	if ((uint64_t)pos0 + n > r->max_ctx)
		return err_set(ERR_INVAL, "ref: positions %u + %u past context %u", pos0, n, r->max_ctx);
	for (uint32_t t = 0; tokens && t < n; t++)
		if (tokens[t] >= c->n_vocab)
			return err_set(ERR_INVAL, "ref: token %u >= n_vocab %u", tokens[t], c->n_vocab);
	int rc = kv_reserve(r, pos0 + n - 1);
	if (rc < 0)
		return rc;
	if (E > SIZE_MAX / sizeof(float) / n || qd > SIZE_MAX / sizeof(float) / n)
		return err_set(ERR_RANGE, "ref: span of %u overflows", n);
	float *xs = malloc((size_t)n * E * sizeof(float)), *qs = malloc((size_t)n * qd * sizeof(float));
	if (!xs || !qs) {
		free(xs);
		free(qs);
		return err_set(ERR_NOMEM, "ref: out of memory for a span of %u", n);
	}
	// text rows are scaled by sqrt(n_embd); embedding rows (an image's) go in as they are
	float escale = sqrtf((float)c->n_embd);
	for (uint32_t t = 0; t < n; t++)
		for (uint64_t i = 0; i < E; i++)
			xs[t * E + i] = tokens ? r->tok_embd[(uint64_t)tokens[t] * E + i] * escale : embd[t * E + i];
	for (uint32_t l = 0; l < c->n_layer; l++) {
		// every row's k/v first, so a bidirectional row sees the rows after it
		for (uint32_t t = 0; t < n; t++) {
			rmsnorm(r->xb, xs + t * E, r->layers[l].attn_norm, E, c->eps);
			qkv(r, l, pos0 + t, qs + t * qd);
		}
		for (uint32_t t = 0; t < n; t++) {
			memcpy(r->x, xs + t * E, E * sizeof(float));
			attend(r, l, pos0 + t, bidirectional ? pos0 + n - 1 : pos0 + t, qs + t * qd);
			after_attention(r, l);
			memcpy(xs + t * E, r->x, E * sizeof(float));
		}
	}
	r->n_past = pos0 + n;
	for (uint32_t t = 0; logits && t < n; t++) {
		memcpy(r->x, xs + t * E, E * sizeof(float));
		head(r, logits + t * V);
	}
	// r->x: the last row's residual stream
	memcpy(r->x, xs + (uint64_t)(n - 1) * E, E * sizeof(float));
	free(xs);
	free(qs);
	return 0;
}

int ref_forward_tokens(struct ref_model *r, const uint32_t *tokens, size_t n, float *logits)
{
	uint64_t V = r->cfg.n_vocab;
	if (n > r->max_ctx)
		return err_set(ERR_INVAL, "ref: %zu tokens > context %u", n, r->max_ctx);
	if (n && V > SIZE_MAX / sizeof(float) / n)
		return err_set(ERR_RANGE, "ref: logits of %zu tokens overflow", n);
	for (size_t t = 0; t < n; t++) {
		int rc = ref_forward(r, tokens[t], (uint32_t)t, logits + t * V);
		if (rc < 0)
			return err_prefix(rc, "position %zu", t);
	}
	return 0;
}
