/* tokenizer_gguf: load the tokenizer.ggml.* metadata of a GGUF (model "llama" =
 * SentencePiece). Every array is checked (type, length equal to the token count) and every
 * special id against the vocab size; errors name the file and the key. */
#include "tokenizer/tokenizer_int.h"
#include "common/err.h"
#include "formats/gguf.h"

#include <stdlib.h>
#include <string.h>

/* Optional u32 id key: -1 when absent, error when present but bad or out of range. */
static int get_id(const struct gguf *g, const char *key, uint32_t n, int32_t *out)
{
	uint64_t v;
	int rc = gguf_get_u64(g, key, &v);
	if (rc == ERR_NOTFOUND) {
		*out = -1;
		return 0;
	}
	if (rc)
		return err_set(ERR_INVAL, "%s: %s: not an unsigned integer", g->path, key);
	if (v >= n)
		return err_set(ERR_RANGE, "%s: %s: id %llu out of range (%u tokens)", g->path, key,
			       (unsigned long long)v, n);
	*out = (int32_t)v;
	return 0;
}

static int get_flag(const struct gguf *g, const char *key, bool dflt, bool *out)
{
	int rc = gguf_get_bool(g, key, out);
	if (rc == ERR_NOTFOUND) {
		*out = dflt;
		return 0;
	}
	return rc ? err_set(ERR_INVAL, "%s: %s: not a bool", g->path, key) : 0;
}

static int num_array(const struct gguf *g, const char *key, uint64_t n, bool want_int,
		     const struct gguf_array **out)
{
	*out = NULL;
	int rc = gguf_get_arr(g, key, out);
	if (rc == ERR_NOTFOUND)
		return 0; /* optional: defaults apply */
	if (rc)
		return err_set(ERR_INVAL, "%s: %s: not an array", g->path, key);
	const struct gguf_array *a = *out;
	bool ok = want_int ? (a->type == GGUF_I32 || a->type == GGUF_U32 || a->type == GGUF_I8 ||
			      a->type == GGUF_U8 || a->type == GGUF_I16 || a->type == GGUF_U16 ||
			      a->type == GGUF_I64 || a->type == GGUF_U64)
			   : (a->type == GGUF_F32 || a->type == GGUF_F64);
	if (!ok)
		return err_set(ERR_INVAL, "%s: %s: element type %s, expected %s", g->path, key,
			       gguf_vtype_name(a->type), want_int ? "an integer" : "f32");
	if (a->n != n)
		return err_set(ERR_INVAL, "%s: %s: %llu elements but tokenizer.ggml.tokens has %llu",
			       g->path, key, (unsigned long long)a->n, (unsigned long long)n);
	return 0;
}

int tok_load_from_gguf(const struct gguf *g, struct tok **out)
{
	*out = NULL;
	const char *path = g->path ? g->path : "gguf";
	struct gguf_str model;
	int rc = gguf_get_str(g, "tokenizer.ggml.model", &model);
	if (rc == ERR_NOTFOUND)
		return err_set(ERR_NOTFOUND, "%s: tokenizer.ggml.model: missing (no tokenizer in this file)",
			       path);
	if (rc)
		return err_set(ERR_INVAL, "%s: tokenizer.ggml.model: not a string", path);
	if (model.len != 5 || memcmp(model.ptr, "llama", 5) != 0)
		return err_set(ERR_UNSUP, "%s: tokenizer.ggml.model: '%.*s' unsupported (only \"llama\")",
			       path, (int)(model.len > 64 ? 64 : model.len), model.ptr);
	const struct gguf_array *toks, *scores, *types;
	rc = gguf_get_arr(g, "tokenizer.ggml.tokens", &toks);
	if (rc)
		return err_set(rc == ERR_NOTFOUND ? ERR_NOTFOUND : ERR_INVAL,
			       "%s: tokenizer.ggml.tokens: missing or not an array", path);
	if (toks->type != GGUF_STRING)
		return err_set(ERR_INVAL, "%s: tokenizer.ggml.tokens: element type %s, expected string",
			       path, gguf_vtype_name(toks->type));
	if (toks->n == 0 || toks->n > TOK_MAX_VOCAB)
		return err_set(ERR_RANGE, "%s: tokenizer.ggml.tokens: %llu tokens out of range (1..%u)",
			       path, (unsigned long long)toks->n, TOK_MAX_VOCAB);
	uint32_t n = (uint32_t)toks->n;
	if ((rc = num_array(g, "tokenizer.ggml.scores", n, false, &scores)) ||
	    (rc = num_array(g, "tokenizer.ggml.token_type", n, true, &types)))
		return rc;

	const char **ptrs = malloc(n * sizeof *ptrs);
	uint32_t *lens = malloc(n * sizeof *lens);
	if (!ptrs || !lens) {
		free(ptrs);
		free(lens);
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	}
	for (uint32_t i = 0; i < n && !rc; i++) {
		struct gguf_str s = {0, NULL};
		if (gguf_arr_str(toks, i, &s))
			rc = err_set(ERR_INVAL, "%s: tokenizer.ggml.tokens[%u]: bad string", path, i);
		else if (s.len > TOK_MAX_PIECE)
			rc = err_set(ERR_RANGE, "%s: tokenizer.ggml.tokens[%u]: %llu bytes exceeds %u",
				     path, i, (unsigned long long)s.len, TOK_MAX_PIECE);
		ptrs[i] = s.ptr;
		lens[i] = (uint32_t)s.len;
	}
	struct tok *t = NULL;
	if (!rc)
		rc = tok_build(path, n, ptrs, lens, &t);
	free(ptrs);
	free(lens);
	if (rc)
		return rc;
	t->mode = TOK_MODE_SPM;
	for (uint32_t i = 0; i < n && !rc; i++) {
		if (scores) {
			double v = 0;
			if (gguf_arr_f64(scores, i, &v))
				rc = err_set(ERR_INVAL, "%s: tokenizer.ggml.scores[%u]: bad value", path, i);
			t->score[i] = (float)v;
		}
		if (types && !rc) {
			int64_t v = 0;
			if (gguf_arr_i64(types, i, &v))
				rc = err_set(ERR_INVAL, "%s: tokenizer.ggml.token_type[%u]: bad value", path, i);
			else if (v < TOK_NORMAL || v > TOK_BYTE)
				rc = err_set(ERR_RANGE, "%s: tokenizer.ggml.token_type[%u]: type %lld not in 1..6",
					     path, i, (long long)v);
			else
				t->type[i] = (uint8_t)v;
		}
	}
	bool add_prefix = true;
	if (!rc && !((rc = get_id(g, "tokenizer.ggml.bos_token_id", n, &t->bos)) ||
		     (rc = get_id(g, "tokenizer.ggml.eos_token_id", n, &t->eos)) ||
		     (rc = get_id(g, "tokenizer.ggml.unknown_token_id", n, &t->unk)) ||
		     (rc = get_id(g, "tokenizer.ggml.padding_token_id", n, &t->pad)) ||
		     (rc = get_flag(g, "tokenizer.ggml.add_bos_token", true, &t->add_bos)) ||
		     (rc = get_flag(g, "tokenizer.ggml.add_space_prefix", true, &add_prefix)))) {
		/* llama.cpp's SPM: ' ' -> "▁", byte fallback, and with add_space_prefix a "▁" before
		 * the text and after every special token; decode drops that space again. */
		t->replace_space = true;
		t->byte_fallback = true;
		t->prefix = add_prefix ? TOK_PREFIX_SEGMENT : TOK_PREFIX_NONE;
		t->strip_space = add_prefix;
		if (t->unk < 0) {
			int32_t u = tok_find(t, "<unk>", 5);
			t->unk = u;
		}
		int32_t eot;
		if (!(rc = get_id(g, "tokenizer.ggml.eot_token_id", n, &eot)) && eot >= 0)
			t->eot = eot;
	}
	if (!rc) {
		int32_t eot = t->eot;
		rc = tok_finish(t);
		if (eot >= 0)
			t->eot = eot; /* an explicit eot key beats the <end_of_turn> lookup */
	}
	if (rc) {
		tok_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int tok_load_gguf(const char *path, struct tok **out)
{
	*out = NULL;
	struct gguf *g;
	int rc = gguf_open(path, &g);
	if (rc)
		return rc;
	rc = tok_load_from_gguf(g, out);
	gguf_close(g);
	return rc;
}
