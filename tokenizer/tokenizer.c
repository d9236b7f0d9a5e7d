/* tokenizer: vocab tables, loading dispatch, decoding and accessors.
 * Encoding lives in tokenizer_encode.c, the loaders in tokenizer_gguf.c / tokenizer_json.c. */
#include "tokenizer/tokenizer_int.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

uint64_t tok_hash_bytes(const char *s, size_t len)
{
	/* FNV-1a with a final avalanche: pieces are short, so byte-at-a-time is fine, and
	 * the mix keeps the low bits (the table index) well spread. */
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (uint8_t)s[i];
		h *= 1099511628211ull;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t c = 16;
	while (c < n)
		c <<= 1;
	return c;
}

/* Piece hash tables hold {id, tag} pairs: the tag (high hash bits) rejects almost every
 * non-matching slot without touching the piece text, which is a cache miss away. */
static void hash_put(const struct tok *t, uint32_t *tab, uint32_t mask, uint32_t id)
{
	const char *p = t->arena + t->off[id];
	size_t len = tok_piece_len(t, id);
	uint64_t h = tok_hash_bytes(p, len);
	uint32_t tag = (uint32_t)(h >> 32);
	for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
		uint32_t e = tab[2 * i];
		if (e == TOK_EMPTY || (tab[2 * i + 1] == tag && tok_piece_len(t, e) == len &&
				       memcmp(t->arena + t->off[e], p, len) == 0)) {
			tab[2 * i] = id; /* an equal piece: the last one wins, as in llama.cpp */
			tab[2 * i + 1] = tag;
			return;
		}
	}
}

static int32_t hash_get(const struct tok *t, const uint32_t *tab, uint32_t mask, const char *p,
			size_t len)
{
	uint64_t h = tok_hash_bytes(p, len);
	uint32_t tag = (uint32_t)(h >> 32);
	for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
		uint32_t e = tab[2 * i];
		if (e == TOK_EMPTY)
			return -1;
		if (tab[2 * i + 1] == tag && tok_piece_len(t, e) == len &&
		    memcmp(t->arena + t->off[e], p, len) == 0)
			return (int32_t)e;
	}
}

int32_t tok_find(const struct tok *t, const char *piece, size_t len)
{
	if (!t || !piece)
		return -1;
	return hash_get(t, t->hash, t->hmask, piece, len);
}

/* Special-token lookup for the encoder. */
int32_t tok_find_special(const struct tok *t, const char *p, size_t len);
int32_t tok_find_special(const struct tok *t, const char *p, size_t len)
{
	if (!t->sp_hash)
		return -1;
	return hash_get(t, t->sp_hash, t->sp_mask, p, len);
}

int tok_build(const char *path, uint32_t n, const char *const *ptrs, const uint32_t *lens,
	      struct tok **out)
{
	*out = NULL;
	if (n == 0 || n > TOK_MAX_VOCAB)
		return err_set(ERR_RANGE, "%s: vocab size %u out of range (1..%u)", path, n,
			       TOK_MAX_VOCAB);
	uint64_t total = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (ptrs[i] && lens[i] > TOK_MAX_PIECE)
			return err_set(ERR_RANGE, "%s: token %u: piece of %u bytes exceeds %u",
				       path, i, lens[i], TOK_MAX_PIECE);
		total += (ptrs[i] ? lens[i] : 0) + 1;
	}
	if (total >= UINT32_MAX)
		return err_set(ERR_RANGE, "%s: vocab text too large", path);
	struct tok *t = calloc(1, sizeof *t);
	if (!t)
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	t->path = strdup(path);
	t->n = n;
	t->arena = malloc(total);
	t->off = malloc(((size_t)n + 1) * sizeof *t->off);
	t->score = calloc(n, sizeof *t->score);
	t->type = malloc(n);
	t->hmask = pow2_at_least((uint64_t)n * 2) - 1;
	t->hash = malloc(((size_t)t->hmask + 1) * 2 * sizeof *t->hash);
	if (!t->path || !t->arena || !t->off || !t->score || !t->type || !t->hash) {
		tok_free(t);
		return err_set(ERR_NOMEM, "%s: out of memory for %u tokens", path, n);
	}
	memset(t->hash, 0xff, ((size_t)t->hmask + 1) * 2 * sizeof *t->hash);
	uint32_t o = 0;
	for (uint32_t i = 0; i < n; i++) {
		t->off[i] = o;
		t->type[i] = ptrs[i] ? TOK_NORMAL : TOK_UNUSED;
		if (ptrs[i]) {
			memcpy(t->arena + o, ptrs[i], lens[i]);
			o += lens[i];
		}
		t->arena[o++] = 0;
	}
	t->off[n] = o;
	for (uint32_t i = 0; i < n; i++)
		if (ptrs[i])
			hash_put(t, t->hash, t->hmask, i);
	t->bos = t->eos = t->eot = t->unk = t->pad = -1;
	t->replace_space = true;
	*out = t;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* "<0xAB>" -> 0xAB, else -1. */
static int byte_piece_value(const char *p, size_t len)
{
	if (len != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>')
		return -1;
	int h = hexval(p[3]), l = hexval(p[4]);
	return h < 0 || l < 0 ? -1 : h * 16 + l;
}

static int cmp_u32_desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

int tok_finish(struct tok *t)
{
	for (int b = 0; b < 256; b++)
		t->byte_id[b] = -1;
	uint32_t n_sp = 0;
	for (uint32_t i = 0; i < t->n; i++) {
		const char *p = t->arena + t->off[i];
		size_t len = tok_piece_len(t, i);
		if (t->type[i] == TOK_BYTE) {
			int v = byte_piece_value(p, len);
			if (v < 0)
				return err_set(ERR_INVAL, "%s: token %u: byte token '%s' is not <0xXX>",
					       t->path, i, p);
			if (t->byte_id[v] < 0)
				t->byte_id[v] = (int32_t)i;
		}
		if (len > 0 && (t->type[i] == TOK_CONTROL || t->type[i] == TOK_USER ||
				t->type[i] == TOK_UNKNOWN))
			n_sp++;
	}
	if (n_sp) {
		t->sp_mask = pow2_at_least((uint64_t)n_sp * 2) - 1;
		t->sp_hash = malloc(((size_t)t->sp_mask + 1) * 2 * sizeof *t->sp_hash);
		t->sp_lens = malloc(n_sp * sizeof *t->sp_lens);
		if (!t->sp_hash || !t->sp_lens)
			return err_set(ERR_NOMEM, "%s: out of memory", t->path);
		memset(t->sp_hash, 0xff, ((size_t)t->sp_mask + 1) * 2 * sizeof *t->sp_hash);
		uint32_t k = 0;
		for (uint32_t i = 0; i < t->n; i++) {
			size_t len = tok_piece_len(t, i);
			if (len == 0 || !(t->type[i] == TOK_CONTROL || t->type[i] == TOK_USER ||
					  t->type[i] == TOK_UNKNOWN))
				continue;
			hash_put(t, t->sp_hash, t->sp_mask, i);
			t->sp_first[(uint8_t)t->arena[t->off[i]]] = 1;
			t->sp_lens[k++] = (uint32_t)len;
		}
		qsort(t->sp_lens, k, sizeof *t->sp_lens, cmp_u32_desc);
		uint32_t d = 0;
		for (uint32_t i = 0; i < k; i++)
			if (d == 0 || t->sp_lens[d - 1] != t->sp_lens[i])
				t->sp_lens[d++] = t->sp_lens[i];
		t->n_sp_lens = d;
	}
	int32_t eot = tok_find(t, "<end_of_turn>", 13);
	t->eot = eot >= 0 ? eot : t->eos;
	return 0;
}

static int is_gguf_file(const char *path, int *yes)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
	char m[4] = {0};
	size_t r = fread(m, 1, 4, f);
	fclose(f);
	*yes = r == 4 && memcmp(m, "GGUF", 4) == 0;
	return 0;
}

int tok_load(const char *path, struct tok **out)
{
	*out = NULL;
	struct stat st;
	if (stat(path, &st) != 0)
		return err_set(ERR_NOTFOUND, "%s: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		size_t n = strlen(path) + sizeof "/tokenizer.json";
		char *p = malloc(n);
		if (!p)
			return err_set(ERR_NOMEM, "%s: out of memory", path);
		snprintf(p, n, "%s/tokenizer.json", path);
		int rc;
		if (stat(p, &st) != 0)
			rc = err_set(ERR_NOTFOUND, "%s: directory has no tokenizer.json", path);
		else
			rc = tok_load_json(p, out);
		free(p);
		return rc;
	}
	int gguf = 0;
	int rc = is_gguf_file(path, &gguf);
	if (rc)
		return rc;
	return gguf ? tok_load_gguf(path, out) : tok_load_json(path, out);
}

void tok_free(struct tok *t)
{
	if (!t)
		return;
	free(t->path);
	free(t->arena);
	free(t->off);
	free(t->score);
	free(t->type);
	free(t->hash);
	free(t->merges);
	free(t->sp_hash);
	free(t->sp_lens);
	free(t);
}

int tok_merges_alloc(struct tok *t, size_t n)
{
	if (n > (1u << 26))
		return err_set(ERR_RANGE, "%s: %zu merges is too many", t->path, n);
	t->mmask = pow2_at_least((uint64_t)n + n / 2) - 1; /* load <= 2/3 */
	t->merges = malloc(((size_t)t->mmask + 1) * sizeof *t->merges);
	if (!t->merges)
		return err_set(ERR_NOMEM, "%s: out of memory for %zu merges", t->path, n);
	for (size_t i = 0; i <= t->mmask; i++)
		t->merges[i].key = UINT64_MAX;
	return 0;
}

static uint32_t merge_slot(uint64_t key, uint32_t mask)
{
	key ^= key >> 31;
	key *= 0x9e3779b97f4a7c15ull;
	key ^= key >> 29;
	return (uint32_t)key & mask;
}

void tok_merges_put(struct tok *t, uint32_t a, uint32_t b, uint32_t rank, uint32_t id)
{
	uint64_t key = (uint64_t)a << 32 | b;
	for (uint32_t i = merge_slot(key, t->mmask);; i = (i + 1) & t->mmask) {
		struct tok_merge *m = &t->merges[i];
		if (m->key == key)
			return; /* a duplicate merge keeps its first (best) rank */
		if (m->key == UINT64_MAX) {
			m->key = key;
			m->rank = rank;
			m->id = id;
			return;
		}
	}
}

const struct tok_merge *tok_merges_get(const struct tok *t, uint32_t a, uint32_t b)
{
	uint64_t key = (uint64_t)a << 32 | b;
	for (uint32_t i = merge_slot(key, t->mmask);; i = (i + 1) & t->mmask) {
		const struct tok_merge *m = &t->merges[i];
		if (m->key == key)
			return m;
		if (m->key == UINT64_MAX)
			return NULL;
	}
}

/* ---- decoding ---- */

struct sbuf {
	char *p;
	size_t n, cap;
};

static int sbuf_put(struct sbuf *b, const char *s, size_t len)
{
	if (b->n + len + 1 > b->cap) {
		size_t c = b->cap ? b->cap : 64;
		while (c < b->n + len + 1)
			c *= 2;
		char *q = realloc(b->p, c);
		if (!q)
			return ERR_NOMEM;
		b->p = q;
		b->cap = c;
	}
	memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = 0;
	return 0;
}

int tok_decode(const struct tok *t, const int32_t *ids, size_t n, unsigned flags,
	       char **text_out, size_t *len_out)
{
	*text_out = NULL;
	struct sbuf b = {0};
	if (sbuf_put(&b, "", 0))
		return err_set(ERR_NOMEM, "tokenizer: out of memory");
	bool first = true;
	for (size_t k = 0; k < n; k++) {
		int32_t id = ids[k];
		if (id < 0 || (uint32_t)id >= t->n) {
			free(b.p);
			return err_set(ERR_RANGE, "%s: decode: token id %d at %zu out of range (n_vocab %u)",
				       t->path, id, k, t->n);
		}
		int ty = t->type[id];
		if ((flags & TOK_DECODE_SKIP_SPECIAL) && ty == TOK_CONTROL)
			continue;
		int rc = 0;
		if (ty == TOK_BYTE) {
			char c = (char)byte_piece_value(t->arena + t->off[id], tok_piece_len(t, id));
			rc = sbuf_put(&b, &c, 1);
			first = false;
		} else {
			const char *p = t->arena + t->off[id];
			size_t len = tok_piece_len(t, id);
			size_t i = 0;
			bool strip = first && t->strip_space;
			first = false;
			while (i < len && !rc) {
				if (len - i >= 3 && (uint8_t)p[i] == 0xE2 && (uint8_t)p[i + 1] == 0x96 &&
				    (uint8_t)p[i + 2] == 0x81) {
					if (!strip)
						rc = sbuf_put(&b, " ", 1);
					i += 3;
				} else if (p[i] == ' ' && strip) {
					i++;
				} else {
					size_t j = i;
					while (j < len && !((uint8_t)p[j] == 0xE2 && len - j >= 3 &&
							    (uint8_t)p[j + 1] == 0x96 &&
							    (uint8_t)p[j + 2] == 0x81))
						j++;
					rc = sbuf_put(&b, p + i, j - i);
					i = j;
				}
				strip = false;
			}
		}
		if (rc) {
			free(b.p);
			return err_set(ERR_NOMEM, "tokenizer: out of memory decoding %zu ids", n);
		}
	}
	*text_out = b.p;
	if (len_out)
		*len_out = b.n;
	return 0;
}

/* ---- accessors ---- */

const char *tok_piece(const struct tok *t, int32_t id)
{
	if (!t || id < 0 || (uint32_t)id >= t->n)
		return NULL;
	return t->arena + t->off[id];
}

int tok_type_of(const struct tok *t, int32_t id)
{
	if (!t || id < 0 || (uint32_t)id >= t->n)
		return 0;
	return t->type[id];
}

uint32_t tok_n_vocab(const struct tok *t) { return t->n; }
int32_t tok_bos(const struct tok *t) { return t->bos; }
int32_t tok_eos(const struct tok *t) { return t->eos; }
int32_t tok_eot(const struct tok *t) { return t->eot; }
int32_t tok_unk(const struct tok *t) { return t->unk; }
int32_t tok_pad(const struct tok *t) { return t->pad; }
bool tok_add_bos(const struct tok *t) { return t->add_bos; }

bool tok_is_eog(const struct tok *t, int32_t id)
{
	return id >= 0 && (id == t->eos || id == t->eot);
}

/* decode(prev, token) minus decode(prev): the tokenizer's leading-space strip
 * (it applies only to the first token of a decode) never eats the space of a
 * generated token. */
int tok_decode_next(const struct tok *t, int32_t prev, int32_t token, char **text, size_t *len)
{
	*text = NULL;
	*len = 0;
	char *a = NULL, *b = NULL;
	size_t la = 0, lb = 0;
	int32_t two[2] = { prev, token };
	if (prev >= 0 && !tok_decode(t, two, 1, TOK_DECODE_SKIP_SPECIAL, &a, &la) && la &&
	    !tok_decode(t, two, 2, TOK_DECODE_SKIP_SPECIAL, &b, &lb) && lb >= la &&
	    !memcmp(a, b, la)) {
		memmove(b, b + la, lb - la + 1);
		free(a);
		*text = b;
		*len = lb - la;
		return 0;
	}
	free(a);
	free(b);
	return tok_decode(t, &token, 1, TOK_DECODE_SKIP_SPECIAL, text, len);
}
