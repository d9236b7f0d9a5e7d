/* kvcache: block pools, per-slot tables and the prefix cache (kvcache.h). */
#include "coordinator/kvcache.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

static uint64_t chain_hash(uint64_t h, const uint32_t *t, uint32_t n)
{
	/* FNV-1a over the token bytes, seeded with the chain so far */
	h = h ? h : 1469598103934665603ull;
	for (uint32_t i = 0; i < n; i++)
		for (int b = 0; b < 4; b++) {
			h ^= (t[i] >> (8 * b)) & 0xffu;
			h *= 1099511628211ull;
		}
	return h;
}

int kvc_init(struct kvc *k, const struct kv_layout *l, uint32_t max_seqs, uint32_t unit)
{
	memset(k, 0, sizeof *k);
	if (!max_seqs || max_seqs > MSG_MAX_SLOTS)
		return err_set(ERR_RANGE, "kvcache: %u sequences outside [1, %d]", max_seqs, MSG_MAX_SLOTS);
	if (!unit || unit % KV_BLOCK || unit > MSG_MAX_TOKENS)
		return err_set(ERR_RANGE, "kvcache: unit %u: want a multiple of %d up to %d", unit, KV_BLOCK,
			       MSG_MAX_TOKENS);
	if (l->block != KV_BLOCK || kv_table_len(l) > KV_MAX_TABLE)
		return err_set(ERR_RANGE, "kvcache: layout of %u-position blocks, %u table entries", l->block,
			       kv_table_len(l));
	k->l = *l;
	k->unit = unit;
	k->ub = unit / KV_BLOCK;
	k->max_seqs = max_seqs;
	k->tab_len = kv_table_len(l);
	uint32_t ng = l->n_gblocks, nl = l->n_lblocks;
	k->cap_ent = (ng > nl ? ng : nl) / k->ub + 1;
	k->gref = calloc(ng + 1, 4);
	k->lref = calloc(nl + 1, 4);
	k->gfree = malloc((ng + 1) * 4);
	k->lfree = malloc((nl + 1) * 4);
	k->tab = malloc((size_t)max_seqs * k->tab_len * 4 + 4);
	k->ent = calloc(k->cap_ent, sizeof *k->ent);
	k->ent_tok = malloc((size_t)k->cap_ent * unit * 4);
	if (!k->gref || !k->lref || !k->gfree || !k->lfree || !k->tab || !k->ent || !k->ent_tok) {
		kvc_free(k);
		return err_set(ERR_NOMEM, "kvcache: out of memory");
	}
	/* free lists pop from the end: block 0 first */
	for (uint32_t i = 0; i < ng; i++)
		k->gfree[i] = ng - 1 - i;
	for (uint32_t i = 0; i < nl; i++)
		k->lfree[i] = nl - 1 - i;
	k->n_gfree = ng;
	k->n_lfree = nl;
	for (size_t i = 0; i < (size_t)max_seqs * k->tab_len; i++)
		k->tab[i] = KVC_NONE;
	return 0;
}

void kvc_free(struct kvc *k)
{
	free(k->gref);
	free(k->lref);
	free(k->gfree);
	free(k->lfree);
	free(k->tab);
	free(k->ent);
	free(k->ent_tok);
	memset(k, 0, sizeof *k);
}

static void unref(struct kvc *k, bool global, uint32_t b)
{
	if (b == KVC_NONE)
		return;
	uint32_t *ref = global ? k->gref : k->lref;
	if (--ref[b] == 0) {
		if (global)
			k->gfree[k->n_gfree++] = b;
		else
			k->lfree[k->n_lfree++] = b;
	}
}

static void ent_drop(struct kvc *k, uint32_t i)
{
	struct kvc_entry *e = &k->ent[i];
	for (uint32_t j = 0; j < k->ub; j++) {
		unref(k, true, e->g[j]);
		unref(k, false, e->l[j]);
	}
	e->used = false;
	k->n_ent--;
}

/* Evict the least recently used entry (deepest on ties: a chain is touched
 * whole, so its tail goes before its head). keep: entry index + 1 to spare. */
static bool evict_one(struct kvc *k, uint32_t keep)
{
	uint32_t best = KVC_NONE;
	for (uint32_t i = 0; i < k->cap_ent; i++) {
		const struct kvc_entry *e = &k->ent[i];
		if (!e->used || i + 1 == keep)
			continue;
		if (best == KVC_NONE || e->last_use < k->ent[best].last_use ||
		    (e->last_use == k->ent[best].last_use && e->depth > k->ent[best].depth))
			best = i;
	}
	if (best == KVC_NONE)
		return false;
	ent_drop(k, best);
	k->st.evictions++;
	return true;
}

static int alloc(struct kvc *k, bool global, uint32_t *out)
{
	uint32_t *n = global ? &k->n_gfree : &k->n_lfree;
	while (*n == 0)
		if (!evict_one(k, 0))
			return err_set(ERR_NOMEM, "kvcache: no free %s block (%u in the pool)", global ? "global" : "local",
				       global ? k->l.n_gblocks : k->l.n_lblocks);
	uint32_t b = global ? k->gfree[--*n] : k->lfree[--*n];
	(global ? k->gref : k->lref)[b] = 1;
	*out = b;
	return 0;
}

static uint32_t *slot_tab(struct kvc *k, uint32_t slot) { return k->tab + (size_t)slot * k->tab_len; }

/* Blocks whose only holder is the prefix cache: what evicting it frees. */
static void evictable(const struct kvc *k, uint32_t *g, uint32_t *l)
{
	*g = *l = 0;
	for (uint32_t i = 0; i < k->cap_ent; i++) {
		const struct kvc_entry *e = &k->ent[i];
		if (!e->used)
			continue;
		for (uint32_t j = 0; j < k->ub; j++) {
			*g += e->g[j] != KVC_NONE && k->gref[e->g[j]] == 1;
			*l += e->l[j] != KVC_NONE && k->lref[e->l[j]] == 1;
		}
	}
}

bool kvc_fits(const struct kvc *k, uint32_t n)
{
	uint32_t nb = (n + KV_BLOCK - 1) / KV_BLOCK;
	uint32_t need_g = k->l.n_global ? nb : 0;
	uint32_t need_l = k->l.n_local ? (nb < k->l.ring ? nb : k->l.ring) : 0;
	if (need_g <= k->n_gfree && need_l <= k->n_lfree)
		return true;
	uint32_t eg, el;
	evictable(k, &eg, &el);
	return need_g <= k->n_gfree + eg && need_l <= k->n_lfree + el;
}

/* Entry continuing parent (index + 1) with the unit tokens t, or KVC_NONE. */
static uint32_t find(const struct kvc *k, uint32_t parent, uint64_t chain, const uint32_t *t)
{
	for (uint32_t i = 0; i < k->cap_ent; i++) {
		const struct kvc_entry *e = &k->ent[i];
		if (e->used && e->parent == parent && e->chain == chain &&
		    !memcmp(k->ent_tok + (size_t)i * k->unit, t, (size_t)k->unit * 4))
			return i;
	}
	return KVC_NONE;
}

int kvc_start(struct kvc *k, uint32_t slot, const uint32_t *prompt, uint32_t n_prompt, uint32_t *shared)
{
	*shared = 0;
	if (slot >= k->max_seqs || k->slot[slot].live)
		return err_set(ERR_STATE, "kvcache: slot %u is not free", slot);
	struct kvc_slot *s = &k->slot[slot];
	memset(s, 0, sizeof *s);
	uint32_t *tab = slot_tab(k, slot);
	for (uint32_t i = 0; i < k->tab_len; i++)
		tab[i] = KVC_NONE;
	s->live = s->dirty = true;
	k->st.lookups++;
	/* whole units, and the last prompt token always computed (its logits) */
	uint32_t max_units = n_prompt ? (n_prompt - 1) / k->unit : 0;
	if ((uint64_t)max_units * k->ub > k->l.max_blocks)
		max_units = k->l.max_blocks / k->ub;
	uint32_t parent = 0, u = 0;
	uint64_t chain = 0;
	uint32_t found[KV_MAX_CTX / KV_BLOCK];
	for (; u < max_units; u++) {
		const uint32_t *t = prompt + (size_t)u * k->unit;
		uint64_t h = chain_hash(chain, t, k->unit);
		uint32_t i = find(k, parent, h, t);
		if (i == KVC_NONE)
			break;
		found[u] = i;
		parent = i + 1;
		chain = h;
	}
	uint32_t nb = u * k->ub; /* shared logical blocks */
	uint64_t now = ++k->clock; /* one value for the chain: its tail is evicted first */
	for (uint32_t v = 0; v < u; v++) {
		struct kvc_entry *e = &k->ent[found[v]];
		e->last_use = now;
		for (uint32_t j = 0; j < k->ub; j++) {
			uint32_t b = v * k->ub + j;
			if (k->l.n_global) {
				tab[b] = e->g[j];
				k->gref[e->g[j]]++;
			}
			/* the ring keeps the last `ring` blocks before the first own one */
			if (k->l.n_local && b + k->l.ring >= nb) {
				tab[k->l.max_blocks + b % k->l.ring] = e->l[j];
				k->lref[e->l[j]]++;
			}
		}
	}
	s->g_held = s->l_next = nb;
	s->n_reg = u;
	s->reg_parent = parent;
	s->reg_chain = chain;
	*shared = u * k->unit;
	k->st.hit_tokens += *shared;
	return 0;
}

int kvc_reserve(struct kvc *k, uint32_t slot, uint32_t upto)
{
	if (slot >= k->max_seqs || !k->slot[slot].live)
		return err_set(ERR_STATE, "kvcache: slot %u is not live", slot);
	if (upto > k->l.max_ctx)
		return err_set(ERR_RANGE, "kvcache: position %u beyond the context of %u", upto, k->l.max_ctx);
	struct kvc_slot *s = &k->slot[slot];
	uint32_t *tab = slot_tab(k, slot);
	uint32_t need = (upto + KV_BLOCK - 1) / KV_BLOCK;
	int rc = 0;
	while (k->l.n_global && s->g_held < need && !rc) {
		uint32_t b;
		if (!(rc = alloc(k, true, &b))) {
			tab[s->g_held++] = b;
			s->dirty = true;
		}
	}
	if (!k->l.n_global)
		s->g_held = need > s->g_held ? need : s->g_held;
	while (k->l.n_local && s->l_next < need && !rc) {
		/* logical block l_next replaces l_next - ring in its ring entry:
		 * that one is out of every later step's window (kvlayout.h) */
		uint32_t *ent = &tab[k->l.max_blocks + s->l_next % k->l.ring];
		unref(k, false, *ent);
		*ent = KVC_NONE;
		s->dirty = true;
		uint32_t b;
		if (!(rc = alloc(k, false, &b))) {
			*ent = b;
			s->l_next++;
		}
	}
	return rc;
}

static uint32_t free_entry(const struct kvc *k)
{
	for (uint32_t i = 0; i < k->cap_ent; i++)
		if (!k->ent[i].used)
			return i;
	return KVC_NONE;
}

void kvc_register(struct kvc *k, uint32_t slot, const uint32_t *tokens, uint32_t n_fed, uint32_t n_prompt)
{
	if (slot >= k->max_seqs || !k->slot[slot].live)
		return;
	struct kvc_slot *s = &k->slot[slot];
	const uint32_t *tab = slot_tab(k, slot);
	uint32_t lim = n_fed < n_prompt ? n_fed : n_prompt;
	for (uint32_t u = s->n_reg; (uint64_t)(u + 1) * k->unit <= lim; u++) {
		const uint32_t *t = tokens + (size_t)u * k->unit;
		uint64_t h = chain_hash(s->reg_chain, t, k->unit);
		uint32_t i = find(k, s->reg_parent, h, t);
		if (i == KVC_NONE) {
			/* its blocks must still be this sequence's: the ring may have
			 * moved past a unit computed long ago */
			uint32_t b0 = u * k->ub;
			if (b0 + k->ub > s->g_held || (k->l.n_local && b0 + k->l.ring < s->l_next))
				return;
			i = free_entry(k);
			if (i == KVC_NONE) {
				/* evict_one spares this chain's parent: its descendants
				 * must stay findable */
				if (!evict_one(k, s->reg_parent))
					return;
				i = free_entry(k);
			}
			struct kvc_entry *e = &k->ent[i];
			memset(e, 0, sizeof *e);
			e->used = true;
			e->parent = s->reg_parent;
			e->chain = h;
			e->depth = u;
			e->last_use = ++k->clock;
			memcpy(k->ent_tok + (size_t)i * k->unit, t, (size_t)k->unit * 4);
			for (uint32_t j = 0; j < k->ub; j++) {
				uint32_t b = b0 + j;
				e->g[j] = k->l.n_global ? tab[b] : KVC_NONE;
				if (e->g[j] != KVC_NONE)
					k->gref[e->g[j]]++;
				e->l[j] = k->l.n_local ? tab[k->l.max_blocks + b % k->l.ring] : KVC_NONE;
				if (e->l[j] != KVC_NONE)
					k->lref[e->l[j]]++;
			}
			k->n_ent++;
		}
		s->n_reg = u + 1;
		s->reg_parent = i + 1;
		s->reg_chain = h;
	}
}

void kvc_release(struct kvc *k, uint32_t slot)
{
	if (slot >= k->max_seqs || !k->slot[slot].live)
		return;
	uint32_t *tab = slot_tab(k, slot);
	for (uint32_t i = 0; i < k->tab_len; i++) {
		unref(k, i < k->l.max_blocks, tab[i]);
		tab[i] = KVC_NONE;
	}
	memset(&k->slot[slot], 0, sizeof k->slot[slot]);
}

void kvc_flush(struct kvc *k)
{
	for (uint32_t i = 0; i < k->cap_ent; i++)
		if (k->ent[i].used)
			ent_drop(k, i);
	for (uint32_t s = 0; s < k->max_seqs; s++) {
		k->slot[s].n_reg = 0;
		k->slot[s].reg_parent = 0;
		k->slot[s].reg_chain = 0;
	}
}

int kvc_table(struct kvc *k, uint32_t slot, uint32_t *out, uint32_t cap)
{
	if (slot >= k->max_seqs)
		return err_set(ERR_RANGE, "kvcache: slot %u", slot);
	if (cap < 1 + k->tab_len)
		return err_set(ERR_RANGE, "kvcache: table of %u entries does not fit %u", k->tab_len, cap);
	const uint32_t *tab = slot_tab(k, slot);
	for (uint32_t i = 0; i < k->tab_len; i++)
		out[1 + i] = tab[i] == KVC_NONE ? 0 : tab[i];
	out[0] = k->tab_len;
	k->slot[slot].dirty = false;
	return 0;
}

void kvc_stats(const struct kvc *k, struct kvc_stats *out)
{
	*out = k->st;
	out->g_free = k->n_gfree;
	out->l_free = k->n_lfree;
	out->g_total = k->l.n_gblocks;
	out->l_total = k->l.n_lblocks;
	out->entries = k->n_ent;
}
