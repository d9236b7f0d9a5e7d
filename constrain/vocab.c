/* constrain/vocab.c: the vocabulary as a byte trie; the allowed tokens of a
 * state are found by one depth-first walk that feeds each trie edge once and
 * drops a subtree at its first rejected byte. Inside a string without
 * maxLength, a subtree whose tokens are all plain text (no '"', '\\',
 * control bytes; whole UTF-8) is taken at once. */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "constrain/cs_int.h"

struct tnode {
	uint32_t child, sibling;   /* 0 = none (node 0 is the root) */
	uint32_t lo, hi;           /* tokens with this prefix: sorted[lo, hi) */
	uint32_t n_end;            /* of them ending here: sorted[lo, lo + n_end) */
	uint8_t byte, plain;       /* the edge's byte; every token below is plain text */
};

struct cs_vocab {
	uint32_t n;                /* vocabulary size (ids) */
	uint32_t n_sorted;
	uint32_t *sorted;          /* ids with bytes, by bytes */
	const uint8_t **bytes;     /* [n] (copies in arena) */
	uint32_t *lens;            /* [n] */
	uint8_t *arena;
	struct tnode *nodes;
	uint32_t n_nodes, cap_nodes;
	uint32_t max_len;
	/* cs_vocab_allowed's walk scratch, kept between calls (page faults of
	 * fresh buffers cost more than the walk) */
	struct cs_scratch *ws;
	/* the plain-text tokens (plain_token) as a bitmask over ids: inside a
	 * free string all of them are allowed at once */
	uint64_t *plain_bits;
	uint32_t n_plain;
};

static const struct cs_vocab *sort_v;

static int by_bytes(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint32_t lx = sort_v->lens[x], ly = sort_v->lens[y];
	int c = memcmp(sort_v->bytes[x], sort_v->bytes[y], lx < ly ? lx : ly);
	if (c)
		return c;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* A token that is plain string text on its own. */
static bool plain_token(const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n;) {
		uint8_t c = p[i];
		if (c < 0x20 || c == '"' || c == '\\')
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		uint32_t need;
		uint8_t lo = 0x80, hi = 0xBF;
		if (c >= 0xC2 && c <= 0xDF)
			need = 1;
		else if (c >= 0xE0 && c <= 0xEF)
			need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
		else if (c >= 0xF0 && c <= 0xF4)
			need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
		else
			return false;
		if (n - i - 1 < need)
			return false;
		if (p[i + 1] < lo || p[i + 1] > hi)
			return false;
		for (uint32_t k = 2; k <= need; k++)
			if (p[i + k] < 0x80 || p[i + k] > 0xBF)
				return false;
		i += need + 1;
	}
	return true;
}

static int node_add(struct cs_vocab *v, uint32_t *out)
{
	if (v->n_nodes == v->cap_nodes) {
		uint32_t cap = v->cap_nodes ? v->cap_nodes * 2 : 1024;
		struct tnode *n = realloc(v->nodes, (size_t)cap * sizeof *n);
		if (!n)
			return err_set(ERR_NOMEM, "vocab trie: out of memory");
		v->nodes = n;
		v->cap_nodes = cap;
	}
	memset(&v->nodes[v->n_nodes], 0, sizeof v->nodes[0]);
	*out = v->n_nodes++;
	return 0;
}

/* Children of node for sorted[lo, hi), all sharing depth bytes; iterative
 * over a explicit stack (token lengths are bounded by max_len). */
struct bframe {
	uint32_t node, lo, hi, depth;
};

static int build(struct cs_vocab *v)
{
	uint32_t root;
	int rc = node_add(v, &root);
	if (rc)
		return rc;
	struct bframe *stk = malloc(((size_t)v->n_sorted + 1) * sizeof *stk);
	if (!stk)
		return err_set(ERR_NOMEM, "vocab trie: out of memory");
	uint32_t sp = 0;
	v->nodes[root].lo = 0;
	v->nodes[root].hi = v->n_sorted;
	stk[sp++] = (struct bframe){ root, 0, v->n_sorted, 0 };
	while (sp && !rc) {
		struct bframe f = stk[--sp];
		uint32_t i = f.lo;
		while (i < f.hi && v->lens[v->sorted[i]] == f.depth)
			i++;
		v->nodes[f.node].n_end = i - f.lo;
		uint32_t prev = 0;
		while (i < f.hi) {
			uint8_t b = v->bytes[v->sorted[i]][f.depth];
			uint32_t j = i + 1;
			while (j < f.hi && v->bytes[v->sorted[j]][f.depth] == b)
				j++;
			uint32_t c;
			if ((rc = node_add(v, &c)))
				break;
			v->nodes[c].byte = b;
			v->nodes[c].lo = i;
			v->nodes[c].hi = j;
			if (prev)
				v->nodes[prev].sibling = c;
			else
				v->nodes[f.node].child = c;
			prev = c;
			stk[sp++] = (struct bframe){ c, i, j, f.depth + 1 };
			i = j;
		}
	}
	free(stk);
	if (rc)
		return rc;
	/* plain: every token of the range */
	uint8_t *pl = malloc(v->n_sorted ? v->n_sorted : 1);
	uint32_t *pre = malloc(((size_t)v->n_sorted + 1) * sizeof *pre);
	if (!pl || !pre) {
		free(pl);
		free(pre);
		return err_set(ERR_NOMEM, "vocab trie: out of memory");
	}
	pre[0] = 0;
	v->plain_bits = calloc(((size_t)v->n + 63) / 64, sizeof *v->plain_bits);
	if (!v->plain_bits) {
		free(pl);
		free(pre);
		return err_set(ERR_NOMEM, "vocab trie: out of memory");
	}
	for (uint32_t i = 0; i < v->n_sorted; i++) {
		uint32_t id = v->sorted[i];
		pl[i] = plain_token(v->bytes[id], v->lens[id]);
		pre[i + 1] = pre[i] + !pl[i];
		if (pl[i]) {
			v->plain_bits[id / 64] |= 1ull << (id % 64);
			v->n_plain++;
		}
	}
	for (uint32_t k = 0; k < v->n_nodes; k++)
		v->nodes[k].plain = pre[v->nodes[k].hi] == pre[v->nodes[k].lo];
	free(pl);
	free(pre);
	return 0;
}

void cs_vocab_free(struct cs_vocab *v)
{
	if (!v)
		return;
	free(v->sorted);
	free(v->bytes);
	free(v->lens);
	free(v->arena);
	free(v->nodes);
	cs_scratch_free(v->ws);
	free(v->plain_bits);
	free(v);
}

uint32_t cs_vocab_size(const struct cs_vocab *v)
{
	return v->n;
}

const char *cs_vocab_token(const struct cs_vocab *v, uint32_t id, uint32_t *len)
{
	if (id >= v->n) {
		*len = 0;
		return "";
	}
	*len = v->lens[id];
	return (const char *)v->bytes[id];
}

int cs_vocab_create(uint32_t n, const char *const *bytes, const uint32_t *lens, struct cs_vocab **out)
{
	*out = NULL;
	if (n == 0 || n > (1u << 24))
		return err_set(ERR_RANGE, "vocab: %u tokens", n);
	struct cs_vocab *v = calloc(1, sizeof *v);
	if (!v)
		return err_set(ERR_NOMEM, "vocab: out of memory");
	v->n = n;
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (lens[i] > 1024)
			return cs_vocab_free(v), err_set(ERR_RANGE, "vocab: token %u has %u bytes", i, lens[i]);
		total += lens[i];
	}
	v->bytes = calloc(n, sizeof *v->bytes);
	v->lens = calloc(n, sizeof *v->lens);
	v->sorted = malloc((size_t)n * sizeof *v->sorted);
	v->arena = malloc(total ? total : 1);
	if (!v->bytes || !v->lens || !v->sorted || !v->arena) {
		cs_vocab_free(v);
		return err_set(ERR_NOMEM, "vocab: out of memory");
	}
	size_t at = 0;
	for (uint32_t i = 0; i < n; i++) {
		memcpy(v->arena + at, bytes[i], lens[i]);
		v->bytes[i] = v->arena + at;
		v->lens[i] = lens[i];
		at += lens[i];
		if (lens[i]) {
			v->sorted[v->n_sorted++] = i;
			v->max_len = lens[i] > v->max_len ? lens[i] : v->max_len;
		}
	}
	sort_v = v; /* qsort has no context argument; creation is not concurrent */
	qsort(v->sorted, v->n_sorted, sizeof *v->sorted, by_bytes);
	sort_v = NULL;
	int rc = build(v);
	if (rc) {
		cs_vocab_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

struct walk {
	const struct cs_vocab *v;
	const struct cs_schema *s;
	uint32_t budget;
	uint64_t *allowed;
	int64_t count;
	uint64_t grow, close0;     /* a byte adds at most grow to the shortest completion */
	struct cs_state *st;       /* [max_len + 1]: the state at each depth */
};

static void mark(struct walk *w, uint32_t lo, uint32_t hi)
{
	for (uint32_t i = lo; i < hi; i++) {
		uint32_t id = w->v->sorted[i];
		uint64_t bit = 1ull << (id % 64);
		if (!(w->allowed[id / 64] & bit)) {
			w->allowed[id / 64] |= bit;
			w->count++;
		}
	}
}

static bool budget_ok(struct walk *w, const struct cs_state *st)
{
	return w->budget == UINT32_MAX || cs_state_close_len(w->s, st) <= w->budget;
}

/* In a free string (no maxLength) at a character boundary, which plain text
 * keeps it at: 1, and 2 when minLength is reached too (more plain text then
 * leaves the shortest completion as it is); else 0. */
static int in_free_string(const struct cs_schema *s, const struct cs_state *st)
{
	if (st->n != 1 || !st->t[0].depth)
		return 0;
	const struct cs_frame *f = &st->t[0].f[st->t[0].depth - 1];
	if (f->kind != 4 /* F_STR in match.c */ || f->st != 0 || s->nodes[f->node].max_len != UINT32_MAX)
		return 0;
	return f->a >= s->nodes[f->node].min_len ? 2 : 1;
}

/* A walk's scratch: the state per depth, the DFS stack (pending siblings:
 * at most 256 per level of the current path). */
struct cs_scratch {
	struct cs_state *st;
	uint32_t *stk_node, *stk_depth;
};

int cs_scratch_new(const struct cs_vocab *v, struct cs_scratch **out)
{
	size_t cap = ((size_t)v->max_len + 2) * 256;
	struct cs_scratch *w = calloc(1, sizeof *w);
	if (w) {
		w->st = malloc(((size_t)v->max_len + 2) * sizeof *w->st);
		w->stk_node = malloc(cap * sizeof *w->stk_node);
		w->stk_depth = malloc(cap * sizeof *w->stk_depth);
	}
	if (!w || !w->st || !w->stk_node || !w->stk_depth) {
		cs_scratch_free(w);
		return err_set(ERR_NOMEM, "constrain: out of memory");
	}
	*out = w;
	return 0;
}

void cs_scratch_free(struct cs_scratch *w)
{
	if (!w)
		return;
	free(w->st);
	free(w->stk_node);
	free(w->stk_depth);
	free(w);
}

int64_t cs_vocab_allowed(struct cs_vocab *v, const struct cs_schema *s, const struct cs_state *st0,
			 uint32_t budget, uint64_t *allowed)
{
	int rc = v->ws ? 0 : cs_scratch_new(v, &v->ws);
	return rc ? rc : cs_vocab_allowed_in(v, v->ws, s, st0, budget, allowed);
}

int64_t cs_vocab_allowed_in(const struct cs_vocab *v, struct cs_scratch *ws, const struct cs_schema *s,
			    const struct cs_state *st0, uint32_t budget, uint64_t *allowed)
{
	memset(allowed, 0, ((size_t)v->n + 63) / 64 * sizeof *allowed);
	struct walk w = { v, s, budget, allowed, 0, cs_schema_grow(s), 0, NULL };
	if (budget != UINT32_MAX)
		w.close0 = cs_state_close_len(s, st0);
	/* explicit DFS: (node, depth) pairs; a node's state is st[depth] */
	w.st = ws->st;
	uint32_t *stk_node = ws->stk_node, *stk_depth = ws->stk_depth;
	cs_state_copy(&w.st[0], st0);
	/* inside a free string (minLength reached) whose end fits the budget:
	 * every plain-text token at once, then only the other subtrees */
	bool all_plain = in_free_string(s, st0) == 2 && (budget == UINT32_MAX || w.close0 <= budget);
	if (all_plain) {
		memcpy(allowed, v->plain_bits, ((size_t)v->n + 63) / 64 * sizeof *allowed);
		w.count = v->n_plain;
	}
	uint32_t sp = 0;
	for (uint32_t c = v->nodes[0].child; c; c = v->nodes[c].sibling)
		stk_node[sp] = c, stk_depth[sp++] = 1;
	while (sp) {
		sp--;
		uint32_t c = stk_node[sp], d = stk_depth[sp];
		const struct tnode *tn = &v->nodes[c];
		if (all_plain && tn->plain)
			continue; /* marked above */
		struct cs_state *cur = &w.st[d];
		cs_state_copy(cur, &w.st[d - 1]);
		uint8_t b = tn->byte;
		if (!cs_state_feed(s, cur, &b, 1))
			continue;
		int fs = tn->plain ? in_free_string(s, cur) : 0;
		if (fs) {
			bool ok = d * w.grow + w.close0 <= budget || budget_ok(&w, cur);
			if (ok) {
				mark(&w, tn->lo, tn->hi);
				continue;
			}
			if (fs == 2)
				continue; /* more text cannot bring the end nearer */
		}
		uint32_t first = tn->n_end ? v->sorted[tn->lo] : 0;
		bool done_already = all_plain && tn->n_end && (v->plain_bits[first / 64] >> (first % 64) & 1);
		if (tn->n_end && !done_already && (d * w.grow + w.close0 <= budget || budget_ok(&w, cur)))
			mark(&w, tn->lo, tn->lo + tn->n_end);
		if (cs_state_complete(cur))
			continue; /* nothing may follow a whole value */
		for (uint32_t k = tn->child; k; k = v->nodes[k].sibling)
			stk_node[sp] = k, stk_depth[sp++] = d + 1;
	}
	return w.count;
}
