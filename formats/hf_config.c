/* hf_config: config.json parsing. Defaults follow transformers'
 * Gemma3TextConfig so that the terse multimodal configs on the Hub (4B lists
 * only a handful of text keys) load with the values transformers would use. */
#include "formats/hf_config.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/readfile.h"

/* Gemma3TextConfig defaults (transformers). */
#define DEF_N_HEAD 8
#define DEF_N_HEAD_KV 4
#define DEF_HEAD_DIM 256
#define DEF_VOCAB 262208
#define DEF_CTX 131072
#define DEF_WINDOW 4096
#define DEF_EPS 1e-6
#define DEF_ROPE_GLOBAL 1000000.0
#define DEF_ROPE_LOCAL 10000.0
#define DEF_QSCALAR 256.0
#define DEF_PATTERN 6

/* Sanity caps: far above any real Gemma 3, low enough that sizes derived from
 * them cannot overflow 64-bit arithmetic downstream. */
#define CAP_EMBD 65536u
#define CAP_FF (1u << 20)
#define CAP_HEADS 1024u
#define CAP_HEAD_DIM 1024u
#define CAP_VOCAB (1u << 24)
#define CAP_CTX (1u << 24)
#define CAP_WINDOW (1u << 24)
#define CAP_PATTERN (1u << 20)
#define CAP_ROPE 1e12

struct cfgctx {
	const char *name;    /* file name for messages */
	const char *prefix;  /* "text_config." or "" */
	json_t *obj;         /* the object holding the text keys */
};

/* Unsigned integer key. Absent or null: default, or ERR_NOTFOUND if required. */
static int get_u32(const struct cfgctx *c, const char *key, int required, uint32_t def,
		   uint32_t min, uint32_t max, uint32_t *out)
{
	json_t *v = json_object_get(c->obj, key);
	if (!v || json_is_null(v)) {
		if (required)
			return err_set(ERR_NOTFOUND, "%s: %s%s: required key missing", c->name,
				       c->prefix, key);
		*out = def;
		return 0;
	}
	if (!json_is_integer(v))
		return err_set(ERR_INVAL, "%s: %s%s: not an integer", c->name, c->prefix, key);
	json_int_t x = json_integer_value(v);
	if (x < (json_int_t)min || x > (json_int_t)max)
		return err_set(ERR_RANGE, "%s: %s%s: %lld out of range [%u, %u]", c->name, c->prefix,
			       key, (long long)x, min, max);
	*out = (uint32_t)x;
	return 0;
}

/* Number key checked to lie in (lo, hi] (or [lo, hi] when lo_incl). */
static int check_num(const char *name, const char *prefix, const char *key, json_t *v,
		     double lo, int lo_incl, double hi, double *out)
{
	if (!json_is_number(v))
		return err_set(ERR_INVAL, "%s: %s%s: not a number", name, prefix, key);
	double x = json_number_value(v);
	/* The engine keeps these as float: 1e-46 is positive as a double but 0
	 * as a float, so the range check applies to the float value too. */
	float fx = (float)x;
	if (!isfinite(x) || x > hi || x < lo || (!lo_incl && x == lo) || (!lo_incl && fx <= (float)lo))
		return err_set(ERR_RANGE, "%s: %s%s: %g out of range %s%g, %g]", name, prefix, key, x,
			       lo_incl ? "[" : "(", lo, hi);
	*out = x;
	return 0;
}

static int get_num(const struct cfgctx *c, const char *key, double def, double lo, int lo_incl,
		   double hi, double *out)
{
	json_t *v = json_object_get(c->obj, key);
	if (!v || json_is_null(v)) {
		*out = def;
		return 0;
	}
	return check_num(c->name, c->prefix, key, v, lo, lo_incl, hi, out);
}

/* One RoPE parameter set: {"rope_type"|"type": "default"|"linear", "factor",
 * "rope_theta"}. theta is only read when want_theta. */
static int parse_rope_set(const struct cfgctx *c, const char *where, json_t *o, int want_theta,
			  double *theta, double *factor)
{
	char pfx[96];
	snprintf(pfx, sizeof pfx, "%s%s.", c->prefix, where);
	if (!json_is_object(o))
		return err_set(ERR_INVAL, "%s: %s%s: not an object", c->name, c->prefix, where);
	json_t *t = json_object_get(o, "rope_type");
	const char *tkey = "rope_type";
	if (!t || json_is_null(t)) {
		t = json_object_get(o, "type");
		tkey = "type";
	}
	const char *type = "default";
	if (t && !json_is_null(t)) {
		if (!json_is_string(t))
			return err_set(ERR_INVAL, "%s: %s%s: not a string", c->name, pfx, tkey);
		type = json_string_value(t);
	}
	*factor = 1.0;
	if (!strcmp(type, "linear")) {
		json_t *f = json_object_get(o, "factor");
		if (!f)
			return err_set(ERR_NOTFOUND, "%s: %sfactor: required for linear scaling",
				       c->name, pfx);
		int rc = check_num(c->name, pfx, "factor", f, 0, 0, 1e6, factor);
		if (rc)
			return rc;
	} else if (strcmp(type, "default")) {
		return err_set(ERR_UNSUP, "%s: %s%s: rope type '%.32s' not supported (default, linear)",
			       c->name, pfx, tkey, type);
	}
	if (want_theta) {
		json_t *th = json_object_get(o, "rope_theta");
		if (th && !json_is_null(th))
			return check_num(c->name, pfx, "rope_theta", th, 0, 0, CAP_ROPE, theta);
	}
	return 0;
}

static int parse_rope(const struct cfgctx *c, struct gemma3_config *cfg)
{
	double g = DEF_ROPE_GLOBAL, l = DEF_ROPE_LOCAL, fg = 1.0, fl = 1.0;
	int rc;
	json_t *rp = json_object_get(c->obj, "rope_parameters");
	if (rp && !json_is_null(rp)) {
		if (!json_is_object(rp))
			return err_set(ERR_INVAL, "%s: %srope_parameters: not an object", c->name,
				       c->prefix);
		json_t *full = json_object_get(rp, "full_attention");
		json_t *slide = json_object_get(rp, "sliding_attention");
		if (full || slide) {
			if (full && (rc = parse_rope_set(c, "rope_parameters.full_attention", full, 1,
							 &g, &fg)))
				return rc;
			if (slide && (rc = parse_rope_set(c, "rope_parameters.sliding_attention",
							  slide, 1, &l, &fl)))
				return rc;
			if (!slide &&
			    (rc = get_num(c, "rope_local_base_freq", DEF_ROPE_LOCAL, 0, 0, CAP_ROPE, &l)))
				return rc;
		} else {
			/* One set for the whole model: it is the global layers'; local
			 * layers keep their own base (transformers does the same). */
			if ((rc = parse_rope_set(c, "rope_parameters", rp, 1, &g, &fg)))
				return rc;
			if ((rc = get_num(c, "rope_local_base_freq", DEF_ROPE_LOCAL, 0, 0, CAP_ROPE, &l)))
				return rc;
		}
	} else {
		if ((rc = get_num(c, "rope_theta", DEF_ROPE_GLOBAL, 0, 0, CAP_ROPE, &g)) ||
		    (rc = get_num(c, "rope_local_base_freq", DEF_ROPE_LOCAL, 0, 0, CAP_ROPE, &l)))
			return rc;
		json_t *rs = json_object_get(c->obj, "rope_scaling");
		/* rope_scaling applies to global layers only (see reference §1.4). */
		if (rs && !json_is_null(rs) && (rc = parse_rope_set(c, "rope_scaling", rs, 0, &g, &fg)))
			return rc;
	}
	if (fl != 1.0)
		return err_set(ERR_UNSUP, "%s: %srope_parameters.sliding_attention.factor: scaling of "
			       "local layers is not supported", c->name, c->prefix);
	cfg->rope_base_global = (float)g;
	cfg->rope_base_local = (float)l;
	cfg->rope_scale_global = (float)fg;
	return 0;
}

static int parse_layer_types(const struct cfgctx *c, struct gemma3_config *cfg)
{
	json_t *lt = json_object_get(c->obj, "layer_types");
	if (lt && !json_is_null(lt)) {
		if (!json_is_array(lt))
			return err_set(ERR_INVAL, "%s: %slayer_types: not an array", c->name, c->prefix);
		if (json_array_size(lt) != cfg->n_layer)
			return err_set(ERR_INVAL, "%s: %slayer_types: %zu entries but num_hidden_layers is %u",
				       c->name, c->prefix, json_array_size(lt), cfg->n_layer);
		for (uint32_t i = 0; i < cfg->n_layer; i++) {
			json_t *v = json_array_get(lt, i);
			const char *s = json_string_value(v);
			if (!s)
				return err_set(ERR_INVAL, "%s: %slayer_types[%u]: not a string", c->name,
					       c->prefix, i);
			if (!strcmp(s, "full_attention"))
				cfg->layer_global[i] = true;
			else if (!strcmp(s, "sliding_attention"))
				cfg->layer_global[i] = false;
			else
				return err_set(ERR_UNSUP, "%s: %slayer_types[%u]: '%.32s' not supported "
					       "(full_attention, sliding_attention)", c->name, c->prefix,
					       i, s);
		}
		return 0;
	}
	uint32_t pattern;
	const char *pkey = json_object_get(c->obj, "sliding_window_pattern") ?
		"sliding_window_pattern" : "_sliding_window_pattern";
	int rc = get_u32(c, pkey, 0, DEF_PATTERN, 1, CAP_PATTERN, &pattern);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < cfg->n_layer; i++)
		cfg->layer_global[i] = (i + 1) % pattern == 0;
	return 0;
}

static int parse_text(const struct cfgctx *c, struct gemma3_config *cfg)
{
	int rc;
	if ((rc = get_u32(c, "hidden_size", 1, 0, 1, CAP_EMBD, &cfg->n_embd)) ||
	    (rc = get_u32(c, "intermediate_size", 1, 0, 1, CAP_FF, &cfg->n_ff)) ||
	    (rc = get_u32(c, "num_hidden_layers", 1, 0, 1, MODEL_MAX_LAYERS, &cfg->n_layer)) ||
	    (rc = get_u32(c, "num_attention_heads", 0, DEF_N_HEAD, 1, CAP_HEADS, &cfg->n_head)) ||
	    (rc = get_u32(c, "num_key_value_heads", 0, DEF_N_HEAD_KV, 1, CAP_HEADS, &cfg->n_head_kv)) ||
	    (rc = get_u32(c, "head_dim", 0, DEF_HEAD_DIM, 2, CAP_HEAD_DIM, &cfg->head_dim)) ||
	    (rc = get_u32(c, "sliding_window", 0, DEF_WINDOW, 1, CAP_WINDOW, &cfg->sliding_window)) ||
	    (rc = get_u32(c, "vocab_size", 0, DEF_VOCAB, 1, CAP_VOCAB, &cfg->n_vocab)) ||
	    (rc = get_u32(c, "max_position_embeddings", 0, DEF_CTX, 1, CAP_CTX, &cfg->n_ctx)))
		return rc;
	if (cfg->n_head % cfg->n_head_kv)
		return err_set(ERR_INVAL, "%s: %snum_attention_heads: %u is not a multiple of "
			       "num_key_value_heads %u", c->name, c->prefix, cfg->n_head, cfg->n_head_kv);
	if (cfg->head_dim % 2)
		return err_set(ERR_INVAL, "%s: %shead_dim: %u is odd (RoPE rotates pairs)", c->name,
			       c->prefix, cfg->head_dim);
	cfg->n_vocab_text = cfg->n_vocab;

	double eps, qs, softcap;
	if ((rc = get_num(c, "rms_norm_eps", DEF_EPS, 0, 0, 1, &eps)) ||
	    (rc = get_num(c, "query_pre_attn_scalar", DEF_QSCALAR, 0, 0, 1e9, &qs)) ||
	    (rc = get_num(c, "final_logit_softcapping", 0, 0, 1, 1e9, &softcap)))
		return rc;
	cfg->eps = (float)eps;
	cfg->query_pre_attn_scalar = (float)qs;
	cfg->final_softcap = (float)softcap;

	/* Features the engine does not implement must not load silently. */
	json_t *asc = json_object_get(c->obj, "attn_logit_softcapping");
	if (asc && !json_is_null(asc))
		return err_set(ERR_UNSUP, "%s: %sattn_logit_softcapping: not supported (Gemma 3 has none)",
			       c->name, c->prefix);
	json_t *act = json_object_get(c->obj, "hidden_activation");
	if (act && !json_is_null(act)) {
		if (!json_is_string(act))
			return err_set(ERR_INVAL, "%s: %shidden_activation: not a string", c->name,
				       c->prefix);
		if (strcmp(json_string_value(act), "gelu_pytorch_tanh"))
			return err_set(ERR_UNSUP, "%s: %shidden_activation: '%.32s' not supported "
				       "(gelu_pytorch_tanh)", c->name, c->prefix, json_string_value(act));
	}

	if ((rc = parse_rope(c, cfg)))
		return rc;
	return parse_layer_types(c, cfg);
}

int hf_config_parse(const char *text, size_t len, const char *name, struct gemma3_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	if (len > HF_CONFIG_MAX_BYTES)
		return err_set(ERR_RANGE, "%s: %zu bytes (at most %u)", name, len, HF_CONFIG_MAX_BYTES);
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(ERR_INVAL, "%s: malformed JSON at line %d column %d: %s", name,
			       jerr.line, jerr.column, jerr.text);
	int rc = 0;
	struct cfgctx c = { .name = name, .prefix = "", .obj = root };
	if (!json_is_object(root)) {
		rc = err_set(ERR_INVAL, "%s: not a JSON object", name);
		goto out;
	}
	json_t *mt = json_object_get(root, "model_type");
	const char *model_type = NULL;
	if (mt && !(model_type = json_string_value(mt))) {
		rc = err_set(ERR_INVAL, "%s: model_type: not a string", name);
		goto out;
	}
	json_t *tc = json_object_get(root, "text_config");
	if (tc && !json_is_null(tc)) {
		if (model_type && strcmp(model_type, "gemma3")) {
			rc = err_set(ERR_UNSUP, "%s: model_type: '%.32s' with text_config not supported "
				     "(gemma3)", name, model_type);
			goto out;
		}
		if (!json_is_object(tc)) {
			rc = err_set(ERR_INVAL, "%s: text_config: not an object", name);
			goto out;
		}
		json_t *tmt = json_object_get(tc, "model_type");
		if (tmt && (!json_is_string(tmt) || strcmp(json_string_value(tmt), "gemma3_text"))) {
			rc = err_set(ERR_UNSUP, "%s: text_config.model_type: not gemma3_text", name);
			goto out;
		}
		c.prefix = "text_config.";
		c.obj = tc;
	} else if (model_type && strcmp(model_type, "gemma3_text")) {
		rc = err_set(ERR_UNSUP, "%s: model_type: '%.32s' not supported (gemma3_text, or gemma3 "
			     "with text_config)", name, model_type);
		goto out;
	}
	rc = parse_text(&c, cfg);
out:
	json_decref(root);
	return rc;
}

int hf_config_load(const char *path, struct gemma3_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	char *buf;
	size_t n;
	int rc = readfile(path, HF_CONFIG_MAX_BYTES, &buf, &n);
	if (rc)
		return rc;
	rc = hf_config_parse(buf, n, path, cfg);
	free(buf);
	return rc;
}
