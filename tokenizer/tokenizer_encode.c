/* tokenizer_encode: text -> ids.
 *
 * Special tokens are cut out first (leftmost, longest match). Each plain segment is
 * normalised (' ' -> U+2581, optional "▁" prefix) and split into one symbol per UTF-8
 * character in a doubly linked list. A binary heap holds candidate merges of adjacent
 * symbols: SPM ranks a pair by the vocab score of the merged piece (highest first), BPE by
 * its merge rank (lowest first); ties go to the leftmost pair. Stale heap entries are
 * detected when popped, so each merge costs O(log n) and the whole segment O(n log n). */
#include "tokenizer/tokenizer_int.h"
#include "common/err.h"

#include <stdlib.h>
#include <string.h>

int32_t tok_find_special(const struct tok *t, const char *p, size_t len);

struct sym {
	int32_t prev, next;
	uint32_t start, len; /* bytes in the normalised segment; len 0 = merged away */
	int32_t id;          /* BPE: current id */
};

struct cand {
	uint64_t pri;        /* smaller pops first; low 32 bits are the left position */
	uint32_t pos;        /* left symbol */
	uint32_t aux;        /* SPM: merged byte length; BPE: merged id */
};

struct work {
	char *norm;
	size_t norm_cap;
	struct sym *sym;
	size_t sym_cap;
	struct cand *heap;
	size_t heap_n, heap_cap;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need) {
		if (c > SIZE_MAX / 2 / elem)
			return ERR_NOMEM;
		c *= 2;
	}
	void *q = realloc(*p, c * elem);
	if (!q)
		return ERR_NOMEM;
	*p = q;
	*cap = c;
	return 0;
}

static int ids_push(struct tok_ids *o, int32_t id)
{
	if (o->n == o->cap) {
		void *p = o->ids;
		int rc = grow(&p, &o->cap, o->n + 1, sizeof *o->ids);
		if (rc)
			return rc;
		o->ids = p;
	}
	o->ids[o->n++] = id;
	return 0;
}

static int heap_push(struct work *w, uint64_t pri, uint32_t pos, uint32_t aux)
{
	void *p = w->heap;
	if (grow(&p, &w->heap_cap, w->heap_n + 1, sizeof *w->heap))
		return ERR_NOMEM;
	w->heap = p;
	struct cand c = {pri, pos, aux};
	size_t i = w->heap_n++;
	while (i > 0) {
		size_t up = (i - 1) / 2;
		if (w->heap[up].pri <= pri)
			break;
		w->heap[i] = w->heap[up];
		i = up;
	}
	w->heap[i] = c;
	return 0;
}

static struct cand heap_pop(struct work *w)
{
	struct cand top = w->heap[0];
	struct cand last = w->heap[--w->heap_n];
	size_t n = w->heap_n, i = 0;
	for (;;) {
		size_t l = 2 * i + 1;
		if (l >= n)
			break;
		if (l + 1 < n && w->heap[l + 1].pri < w->heap[l].pri)
			l++;
		if (last.pri <= w->heap[l].pri)
			break;
		w->heap[i] = w->heap[l];
		i = l;
	}
	if (n)
		w->heap[i] = last;
	return top;
}

static uint32_t utf8_len(uint8_t c)
{
	/* llama.cpp's rule: the lead byte's high nibble; stray continuation bytes count as 1 */
	static const uint8_t lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
	return lut[c >> 4];
}

/* Order-preserving map of a float score so that a higher score gives a smaller key. */
static uint32_t score_key(float s)
{
	uint32_t u;
	memcpy(&u, &s, 4);
	u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending unsigned order */
	return ~u;
}

static int spm_try_pair(const struct tok *t, struct work *w, int32_t l, int32_t r)
{
	if (l < 0 || r < 0)
		return 0;
	const struct sym *a = &w->sym[l], *b = &w->sym[r];
	int32_t id = tok_find(t, w->norm + a->start, (size_t)a->len + b->len);
	if (id < 0)
		return 0;
	uint64_t pri = (uint64_t)score_key(t->score[id]) << 32 | (uint32_t)l;
	return heap_push(w, pri, (uint32_t)l, a->len + b->len);
}

static int emit_bytes(const struct tok *t, const char *p, size_t len, struct tok_ids *out)
{
	for (size_t i = 0; i < len; i++) {
		int32_t id = t->byte_id[(uint8_t)p[i]];
		if (id < 0)
			id = t->unk;
		if (id < 0)
			return err_set(ERR_INVAL, "%s: no byte token <0x%02X> and no <unk> token",
				       t->path, (uint8_t)p[i]);
		if (ids_push(out, id))
			return ERR_NOMEM;
	}
	return 0;
}

static int spm_segment(const struct tok *t, struct work *w, uint32_t nsym, struct tok_ids *out)
{
	for (uint32_t i = 0; i + 1 < nsym; i++)
		if (spm_try_pair(t, w, (int32_t)i, (int32_t)i + 1))
			return ERR_NOMEM;
	while (w->heap_n) {
		struct cand c = heap_pop(w);
		struct sym *a = &w->sym[c.pos];
		if (a->len == 0 || a->next < 0)
			continue;
		struct sym *b = &w->sym[a->next];
		if (a->len + b->len != c.aux) /* stale: one side changed since it was queued */
			continue;
		a->len += b->len;
		b->len = 0;
		a->next = b->next;
		if (a->next >= 0)
			w->sym[a->next].prev = (int32_t)c.pos;
		if (spm_try_pair(t, w, a->prev, (int32_t)c.pos) ||
		    spm_try_pair(t, w, (int32_t)c.pos, a->next))
			return ERR_NOMEM;
	}
	for (int32_t i = nsym ? 0 : -1; i >= 0; i = w->sym[i].next) {
		const struct sym *s = &w->sym[i];
		int32_t id = tok_find(t, w->norm + s->start, s->len);
		if (id >= 0) {
			if (ids_push(out, id))
				return ERR_NOMEM;
		} else {
			int rc = emit_bytes(t, w->norm + s->start, s->len, out);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int bpe_try_pair(const struct tok *t, struct work *w, int32_t l, int32_t r)
{
	if (l < 0 || r < 0)
		return 0;
	const struct tok_merge *m = tok_merges_get(t, (uint32_t)w->sym[l].id, (uint32_t)w->sym[r].id);
	if (!m)
		return 0;
	return heap_push(w, (uint64_t)m->rank << 32 | (uint32_t)l, (uint32_t)l, m->id);
}

static int bpe_segment(const struct tok *t, struct work *w, size_t n, struct tok_ids *out)
{
	/* Characters become symbols with ids; characters missing from the vocab become their
	 * byte tokens (byte_fallback) or <unk> (consecutive ones fused when fuse_unk). At most
	 * one symbol per byte, so n+1 slots suffice. */
	uint32_t ns = 0;
	for (size_t i = 0; i < n;) {
		uint32_t cl = utf8_len((uint8_t)w->norm[i]);
		if (cl > n - i)
			cl = (uint32_t)(n - i);
		uint32_t st = (uint32_t)i;
		i += cl;
		int32_t id = tok_find(t, w->norm + st, cl);
		if (id >= 0) {
			w->sym[ns++] = (struct sym){0, 0, st, cl, id};
			continue;
		}
		bool bytes_ok = t->byte_fallback;
		for (uint32_t k = 0; bytes_ok && k < cl; k++)
			bytes_ok = t->byte_id[(uint8_t)w->norm[st + k]] >= 0;
		if (bytes_ok) {
			for (uint32_t k = 0; k < cl; k++)
				w->sym[ns++] = (struct sym){0, 0, st + k, 1,
							    t->byte_id[(uint8_t)w->norm[st + k]]};
			continue;
		}
		if (t->unk < 0)
			return err_set(ERR_INVAL, "%s: character not in vocab and no <unk> token",
				       t->path);
		if (t->fuse_unk && ns > 0 && w->sym[ns - 1].id == t->unk) {
			w->sym[ns - 1].len += cl;
			continue;
		}
		w->sym[ns++] = (struct sym){0, 0, st, cl, t->unk};
	}
	for (uint32_t i = 0; i < ns; i++) {
		w->sym[i].prev = (int32_t)i - 1;
		w->sym[i].next = i + 1 < ns ? (int32_t)i + 1 : -1;
	}
	if (t->merges)
		for (uint32_t i = 0; i + 1 < ns; i++)
			if (bpe_try_pair(t, w, (int32_t)i, (int32_t)i + 1))
				return ERR_NOMEM;
	while (w->heap_n) {
		struct cand c = heap_pop(w);
		struct sym *a = &w->sym[c.pos];
		if (a->len == 0 || a->next < 0)
			continue;
		struct sym *b = &w->sym[a->next];
		/* stale unless the pair still merges into the same id (tokenizers' check) */
		const struct tok_merge *m = tok_merges_get(t, (uint32_t)a->id, (uint32_t)b->id);
		if (!m || m->id != c.aux)
			continue;
		a->id = (int32_t)c.aux;
		a->len += b->len;
		b->len = 0;
		a->next = b->next;
		if (a->next >= 0)
			w->sym[a->next].prev = (int32_t)c.pos;
		if (bpe_try_pair(t, w, a->prev, (int32_t)c.pos) ||
		    bpe_try_pair(t, w, (int32_t)c.pos, a->next))
			return ERR_NOMEM;
	}
	for (int32_t i = ns ? 0 : -1; i >= 0; i = w->sym[i].next)
		if (ids_push(out, w->sym[i].id))
			return ERR_NOMEM;
	return 0;
}

static int encode_segment(const struct tok *t, struct work *w, const char *s, size_t len,
			  bool prefix, struct tok_ids *out)
{
	if (len == 0)
		return 0;
	/* normalised text is at most 3x (' ' -> 3 bytes) plus a 3-byte prefix */
	if (len > (INT32_MAX - 3) / 3) /* symbol indices are int32 */
		return err_set(ERR_RANGE, "%s: text segment of %zu bytes is too long", t->path, len);
	void *p = w->norm;
	if (grow(&p, &w->norm_cap, len * 3 + 3, 1))
		return err_set(ERR_NOMEM, "tokenizer: out of memory");
	w->norm = p;
	size_t n = 0;
	if (prefix) {
		memcpy(w->norm, "\xE2\x96\x81", 3);
		n = 3;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] == ' ' && t->replace_space) {
			memcpy(w->norm + n, "\xE2\x96\x81", 3);
			n += 3;
		} else {
			w->norm[n++] = s[i];
		}
	}
	/* at most one symbol per byte */
	p = w->sym;
	if (grow(&p, &w->sym_cap, n + 1, sizeof *w->sym))
		return err_set(ERR_NOMEM, "tokenizer: out of memory");
	w->sym = p;
	w->heap_n = 0;
	if (t->mode == TOK_MODE_BPE) {
		int rc = bpe_segment(t, w, n, out);
		return rc == ERR_NOMEM ? err_set(ERR_NOMEM, "tokenizer: out of memory") : rc;
	}
	uint32_t ns = 0;
	for (size_t i = 0; i < n;) {
		uint32_t cl = utf8_len((uint8_t)w->norm[i]);
		if (cl > n - i)
			cl = (uint32_t)(n - i);
		w->sym[ns] = (struct sym){(int32_t)ns - 1, -1, (uint32_t)i, cl, -1};
		if (ns)
			w->sym[ns - 1].next = (int32_t)ns;
		ns++;
		i += cl;
	}
	int rc = spm_segment(t, w, ns, out);
	if (rc == ERR_NOMEM)
		return err_set(ERR_NOMEM, "tokenizer: out of memory");
	return rc;
}

/* Length of the longest special token starting at p (0 if none); *id gets its id. */
static size_t match_special(const struct tok *t, const char *p, size_t rem, int32_t *id)
{
	if (!t->sp_first[(uint8_t)*p])
		return 0;
	for (uint32_t k = 0; k < t->n_sp_lens; k++) {
		size_t l = t->sp_lens[k];
		if (l > rem)
			continue;
		int32_t x = tok_find_special(t, p, l);
		if (x >= 0) {
			*id = x;
			return l;
		}
	}
	return 0;
}

int tok_encode(const struct tok *t, const char *text, size_t len, bool add_bos,
	       struct tok_ids *out)
{
	if (!t || (!text && len))
		return err_set(ERR_INVAL, "tok_encode: NULL argument");
	size_t n0 = out->n;
	struct work w = {0};
	int rc = 0;
	if (add_bos && t->bos >= 0 && ids_push(out, t->bos))
		rc = err_set(ERR_NOMEM, "tokenizer: out of memory");
	size_t seg = 0, i = 0;
	while (!rc && i < len) {
		int32_t id;
		size_t m = match_special(t, text + i, len - i, &id);
		if (!m) {
			i++;
			continue;
		}
		bool prefix = t->prefix == TOK_PREFIX_SEGMENT || (t->prefix == TOK_PREFIX_FIRST && seg == 0);
		rc = encode_segment(t, &w, text + seg, i - seg, prefix, out);
		if (!rc && ids_push(out, id))
			rc = err_set(ERR_NOMEM, "tokenizer: out of memory");
		i += m;
		seg = i;
	}
	if (!rc) {
		bool prefix = t->prefix == TOK_PREFIX_SEGMENT || (t->prefix == TOK_PREFIX_FIRST && seg == 0);
		rc = encode_segment(t, &w, text + seg, len - seg, prefix, out);
	}
	free(w.norm);
	free(w.sym);
	free(w.heap);
	if (rc)
		out->n = n0;
	return rc;
}

int tok_encode_buf(const struct tok *t, const char *text, size_t len, bool add_bos,
		   int32_t *buf, size_t cap, size_t *n_out)
{
	struct tok_ids ids = {0};
	*n_out = 0;
	int rc = tok_encode(t, text, len, add_bos, &ids);
	if (rc)
		return rc;
	*n_out = ids.n;
	if (ids.n > cap)
		rc = err_set(ERR_RANGE, "tok_encode_buf: %zu ids do not fit in %zu", ids.n, cap);
	else if (ids.n)
		memcpy(buf, ids.ids, ids.n * sizeof *buf);
	tok_ids_free(&ids);
	return rc;
}

void tok_ids_free(struct tok_ids *ids)
{
	free(ids->ids);
	ids->ids = NULL;
	ids->n = ids->cap = 0;
}
