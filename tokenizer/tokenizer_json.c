/* tokenizer_json: load a Hugging Face tokenizer.json (model.type "BPE", SentencePiece-like
 * pipelines as used by Gemma and Llama: ' ' -> "▁" normaliser or Metaspace pre-tokenizer,
 * byte fallback, ByteFallback/Fuse/Replace/Strip decoders). Anything else is ERR_UNSUP
 * naming the field, rather than a silently different tokenization. */
#include "tokenizer/tokenizer_int.h"
#include "tokenizer/tokenizer_jsonscan.h"
#include "common/err.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define SPACE_MARK "\xE2\x96\x81" /* U+2581 "▁" */

struct jload {
	const char *path;
	struct tok *t;
	struct tok_jfile *f;
};

static bool str_is(const json_t *j, const char *s)
{
	return json_is_string(j) && json_string_length(j) == strlen(s) &&
	       memcmp(json_string_value(j), s, strlen(s)) == 0;
}

/* pattern {"String": s} */
static bool pattern_is(const json_t *pat, const char *s)
{
	return json_is_object(pat) && str_is(json_object_get(pat, "String"), s);
}

static int normalizer(struct jload *L, const json_t *n, const char *field)
{
	struct tok *t = L->t;
	if (!n || json_is_null(n))
		return 0;
	const json_t *ty = json_object_get(n, "type");
	if (str_is(ty, "Sequence")) {
		const json_t *list = json_object_get(n, "normalizers");
		if (!json_is_array(list))
			return err_set(ERR_INVAL, "%s: %s.normalizers: not an array", L->path, field);
		for (size_t i = 0; i < json_array_size(list); i++) {
			int rc = normalizer(L, json_array_get(list, i), field);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (str_is(ty, "Replace") && pattern_is(json_object_get(n, "pattern"), " ") &&
	    str_is(json_object_get(n, "content"), SPACE_MARK)) {
		t->replace_space = true;
		return 0;
	}
	if (str_is(ty, "Prepend") && str_is(json_object_get(n, "prepend"), SPACE_MARK)) {
		t->prefix = TOK_PREFIX_SEGMENT;
		return 0;
	}
	return err_set(ERR_UNSUP, "%s: %s: unsupported normalizer (type %s)", L->path, field,
		       json_is_string(ty) ? json_string_value(ty) : "?");
}

/* Metaspace (pre-tokenizer or decoder): returns the prefix mode. */
static int metaspace(struct jload *L, const json_t *m, const char *field, int *prefix)
{
	if (!str_is(json_object_get(m, "replacement"), SPACE_MARK))
		return err_set(ERR_UNSUP, "%s: %s.replacement: only \"\\u2581\" is supported",
			       L->path, field);
	const json_t *ps = json_object_get(m, "prepend_scheme");
	const json_t *aps = json_object_get(m, "add_prefix_space");
	if (str_is(ps, "always"))
		*prefix = TOK_PREFIX_SEGMENT;
	else if (str_is(ps, "first"))
		*prefix = TOK_PREFIX_FIRST;
	else if (str_is(ps, "never"))
		*prefix = TOK_PREFIX_NONE;
	else if (!ps && json_is_boolean(aps))
		*prefix = json_is_true(aps) ? TOK_PREFIX_SEGMENT : TOK_PREFIX_NONE;
	else
		return err_set(ERR_UNSUP, "%s: %s.prepend_scheme: unsupported", L->path, field);
	return 0;
}

static int pre_tokenizer(struct jload *L, const json_t *p)
{
	struct tok *t = L->t;
	if (!p || json_is_null(p))
		return 0;
	const json_t *ty = json_object_get(p, "type");
	if (str_is(ty, "Split") && pattern_is(json_object_get(p, "pattern"), " ") && t->replace_space)
		return 0; /* the normaliser already turned every ' ' into "▁": nothing to split */
	if (str_is(ty, "Metaspace")) {
		const json_t *split = json_object_get(p, "split");
		if (json_is_true(split))
			return err_set(ERR_UNSUP, "%s: pre_tokenizer.split: word splitting is not supported",
				       L->path);
		t->replace_space = true;
		return metaspace(L, p, "pre_tokenizer", &t->prefix);
	}
	return err_set(ERR_UNSUP, "%s: pre_tokenizer: unsupported (type %s)", L->path,
		       json_is_string(ty) ? json_string_value(ty) : "?");
}

static int decoder(struct jload *L, const json_t *d)
{
	struct tok *t = L->t;
	if (!d || json_is_null(d))
		return 0;
	const json_t *ty = json_object_get(d, "type");
	if (str_is(ty, "Sequence")) {
		const json_t *list = json_object_get(d, "decoders");
		if (!json_is_array(list))
			return err_set(ERR_INVAL, "%s: decoder.decoders: not an array", L->path);
		for (size_t i = 0; i < json_array_size(list); i++) {
			int rc = decoder(L, json_array_get(list, i));
			if (rc)
				return rc;
		}
		return 0;
	}
	if (str_is(ty, "Replace") && pattern_is(json_object_get(d, "pattern"), SPACE_MARK) &&
	    str_is(json_object_get(d, "content"), " "))
		return 0; /* tok_decode always maps "▁" to ' ' */
	if (str_is(ty, "ByteFallback") || str_is(ty, "Fuse"))
		return 0;
	if (str_is(ty, "Strip")) {
		const json_t *st = json_object_get(d, "start");
		if (!str_is(json_object_get(d, "content"), " ") || !json_is_integer(st) ||
		    json_integer_value(st) > 1 || !json_is_integer(json_object_get(d, "stop")) ||
		    json_integer_value(json_object_get(d, "stop")) != 0)
			return err_set(ERR_UNSUP, "%s: decoder: only Strip(' ', start<=1, stop 0) is supported",
				       L->path);
		t->strip_space = json_integer_value(st) == 1;
		return 0;
	}
	if (str_is(ty, "Metaspace")) {
		int prefix;
		int rc = metaspace(L, d, "decoder", &prefix);
		t->strip_space = prefix != TOK_PREFIX_NONE;
		return rc;
	}
	return err_set(ERR_UNSUP, "%s: decoder: unsupported (type %s)", L->path,
		       json_is_string(ty) ? json_string_value(ty) : "?");
}

/* BOS from a TemplateProcessing post-processor whose single template starts with a special
 * token (Gemma: "<bos>" $A). */
static int post_processor(struct jload *L, const json_t *p)
{
	struct tok *t = L->t;
	if (!p || json_is_null(p) || !str_is(json_object_get(p, "type"), "TemplateProcessing"))
		return 0;
	const json_t *first = json_array_get(json_object_get(p, "single"), 0);
	const json_t *st = json_object_get(first, "SpecialToken");
	if (!st)
		return 0;
	const json_t *name = json_object_get(st, "id");
	const json_t *spec = json_object_get(json_object_get(p, "special_tokens"),
					     json_is_string(name) ? json_string_value(name) : "");
	const json_t *id = json_array_get(json_object_get(spec, "ids"), 0);
	if (!json_is_integer(id) || json_integer_value(id) < 0 ||
	    json_integer_value(id) >= (json_int_t)t->n)
		return err_set(ERR_INVAL, "%s: post_processor.special_tokens: bad id for the leading token",
			       L->path);
	t->bos = (int32_t)json_integer_value(id);
	t->add_bos = true;
	return 0;
}

static int merges(struct jload *L, const json_t *model)
{
	struct tok *t = L->t;
	const struct tok_jfile *f = L->f;
	if (!f->has_merges) {
		const json_t *arr = json_object_get(model, "merges");
		if (!arr || json_is_null(arr))
			return 0;
		return err_set(ERR_INVAL, "%s: model.merges: not an array", L->path);
	}
	int rc = tok_merges_alloc(t, f->n_merges);
	if (rc)
		return rc;
	char buf[2 * TOK_MAX_PIECE];
	for (size_t i = 0; i < f->n_merges; i++) {
		const struct tok_jstr *a = &f->merges[i][0], *b = &f->merges[i][1];
		if (a->len > TOK_MAX_PIECE || b->len > TOK_MAX_PIECE)
			return err_set(ERR_RANGE, "%s: model.merges[%zu]: piece too long", L->path, i);
		int32_t ia = tok_find(t, a->p, a->len), ib = tok_find(t, b->p, b->len);
		memcpy(buf, a->p, a->len);
		memcpy(buf + a->len, b->p, b->len);
		int32_t ic = tok_find(t, buf, (size_t)a->len + b->len);
		if (ia < 0 || ib < 0 || ic < 0)
			return err_set(ERR_INVAL, "%s: model.merges[%zu]: '%.*s' + '%.*s' not in the vocab",
				       L->path, i, (int)a->len, a->p, (int)b->len, b->p);
		tok_merges_put(t, (uint32_t)ia, (uint32_t)ib, (uint32_t)i, (uint32_t)ic);
	}
	return 0;
}

static bool null_or_empty(const json_t *j)
{
	return !j || json_is_null(j) || (json_is_string(j) && json_string_length(j) == 0);
}

static int load(struct jload *L, const json_t *root)
{
	const char *path = L->path;
	const json_t *model = json_object_get(root, "model");
	if (!json_is_object(model))
		return err_set(ERR_INVAL, "%s: model: missing or not an object", path);
	const json_t *mtype = json_object_get(model, "type");
	if (mtype ? !str_is(mtype, "BPE") : !json_object_get(model, "merges"))
		return err_set(ERR_UNSUP, "%s: model.type: only BPE is supported (got %s)", path,
			       json_is_string(mtype) ? json_string_value(mtype) : "?");
	if (!null_or_empty(json_object_get(model, "continuing_subword_prefix")) ||
	    !null_or_empty(json_object_get(model, "end_of_word_suffix")))
		return err_set(ERR_UNSUP, "%s: model: continuing_subword_prefix/end_of_word_suffix unsupported",
			       path);
	const json_t *dropout = json_object_get(model, "dropout");
	if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0)
		return err_set(ERR_UNSUP, "%s: model.dropout: BPE dropout unsupported", path);
	const struct tok_jfile *f = L->f;
	if (!f->has_vocab)
		return err_set(ERR_INVAL, "%s: model.vocab: missing or not an object", path);
	const json_t *added = json_object_get(root, "added_tokens");
	if (added && !json_is_array(added))
		return err_set(ERR_INVAL, "%s: added_tokens: not an array", path);

	/* size = largest id + 1 over vocab and added tokens */
	int64_t max_id = -1;
	for (size_t i = 0; i < f->n_vocab; i++) /* ids already checked < TOK_MAX_VOCAB */
		if (f->vocab_id[i] > max_id)
			max_id = f->vocab_id[i];
	for (size_t i = 0; i < json_array_size(added); i++) {
		const json_t *a = json_array_get(added, i), *id = json_object_get(a, "id");
		if (!json_is_integer(id) || json_integer_value(id) < 0 ||
		    json_integer_value(id) >= (json_int_t)TOK_MAX_VOCAB ||
		    !json_is_string(json_object_get(a, "content")))
			return err_set(ERR_INVAL, "%s: added_tokens[%zu]: bad id or content", path, i);
		if (json_integer_value(id) > max_id)
			max_id = json_integer_value(id);
	}
	if (max_id < 0)
		return err_set(ERR_INVAL, "%s: model.vocab: empty", path);
	uint32_t n = (uint32_t)max_id + 1;
	const char **ptrs = calloc(n, sizeof *ptrs);
	uint32_t *lens = calloc(n, sizeof *lens);
	int rc = 0;
	if (!ptrs || !lens)
		rc = err_set(ERR_NOMEM, "%s: out of memory", path);
	for (size_t i = 0; !rc && i < f->n_vocab; i++) {
		uint32_t id = f->vocab_id[i];
		if (ptrs[id])
			rc = err_set(ERR_INVAL, "%s: model.vocab: id %u used twice", path, id);
		else if (f->vocab_key[i].len > TOK_MAX_PIECE)
			rc = err_set(ERR_RANGE, "%s: model.vocab: id %u: piece too long", path, id);
		ptrs[id] = f->vocab_key[i].p;
		lens[id] = f->vocab_key[i].len;
	}
	for (size_t i = 0; !rc && i < json_array_size(added); i++) {
		const json_t *a = json_array_get(added, i), *c = json_object_get(a, "content");
		uint32_t id = (uint32_t)json_integer_value(json_object_get(a, "id"));
		if (json_string_length(c) > TOK_MAX_PIECE)
			rc = err_set(ERR_RANGE, "%s: added_tokens[%zu]: content too long", path, i);
		ptrs[id] = json_string_value(c); /* the added token's text wins, as in tokenizers */
		lens[id] = (uint32_t)json_string_length(c);
	}
	if (!rc)
		rc = tok_build(path, n, ptrs, lens, &L->t);
	free(ptrs);
	free(lens);
	if (rc)
		return rc;
	struct tok *t = L->t;
	t->mode = TOK_MODE_BPE;
	t->replace_space = false;
	t->byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
	t->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
	if (t->byte_fallback)
		for (uint32_t i = 0; i < n; i++) {
			const char *p = t->arena + t->off[i];
			if (tok_piece_len(t, i) == 6 && memcmp(p, "<0x", 3) == 0 && p[5] == '>' &&
			    strchr("0123456789ABCDEF", p[3]) && strchr("0123456789ABCDEF", p[4]))
				t->type[i] = TOK_BYTE;
		}
	for (size_t i = 0; i < json_array_size(added); i++) {
		const json_t *a = json_array_get(added, i);
		uint32_t id = (uint32_t)json_integer_value(json_object_get(a, "id"));
		t->type[id] = json_is_true(json_object_get(a, "special")) ? TOK_CONTROL : TOK_USER;
	}
	const json_t *unk = json_object_get(model, "unk_token");
	if (json_is_string(unk)) {
		t->unk = tok_find(t, json_string_value(unk), json_string_length(unk));
		if (t->unk < 0)
			return err_set(ERR_INVAL, "%s: model.unk_token: '%s' not in the vocab", path,
				       json_string_value(unk));
		t->type[t->unk] = TOK_UNKNOWN;
	}
	if ((rc = merges(L, model)) ||
	    (rc = normalizer(L, json_object_get(root, "normalizer"), "normalizer")) ||
	    (rc = pre_tokenizer(L, json_object_get(root, "pre_tokenizer"))) ||
	    (rc = decoder(L, json_object_get(root, "decoder"))) ||
	    (rc = post_processor(L, json_object_get(root, "post_processor"))))
		return rc;
	/* The json has no bos/eos fields of its own; take them by their conventional names. */
	if (t->bos < 0)
		t->bos = tok_find(t, "<bos>", 5) >= 0 ? tok_find(t, "<bos>", 5) : tok_find(t, "<s>", 3);
	t->eos = tok_find(t, "<eos>", 5) >= 0 ? tok_find(t, "<eos>", 5) : tok_find(t, "</s>", 4);
	t->pad = tok_find(t, "<pad>", 5);
	return tok_finish(t);
}

int tok_load_json(const char *path, struct tok **out)
{
	*out = NULL;
	struct tok_jfile f;
	int rc = tok_jfile_read(path, &f);
	if (rc)
		return rc;
	struct jload L = {path, NULL, &f};
	rc = load(&L, f.root);
	tok_jfile_free(&f);
	if (rc) {
		tok_free(L.t);
		return rc;
	}
	*out = L.t;
	return 0;
}
