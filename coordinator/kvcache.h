/* kvcache: the coordinator's bookkeeping of the paged KV cache (the memory is
 * in the worker that runs attention; ipc/kvlayout.h has the layout).
 *
 *  - two pools of blocks (global layers, sliding-window layers) with a
 *    reference count per block and a free list each;
 *  - per slot, a block table: global logical block b -> block, local logical
 *    block b -> ring entry b % ring. A sequence allocates blocks as its
 *    positions grow (kvc_reserve); a local block that falls out of the
 *    window is released when its ring entry is reused;
 *  - a prefix cache: each whole `unit` of a prompt's positions, once
 *    computed, is kept as an entry (the unit's tokens, the chain hash of all
 *    tokens up to it, its global and local blocks). A new sequence whose
 *    prompt starts with cached units shares their blocks (kvc_start) and
 *    computes only the rest. Entries hold references, so a finished
 *    sequence's prefix stays reusable until memory is needed: allocation
 *    evicts least recently used entries (deepest first) before it fails.
 *
 * The unit is the worker's submission size (kv_worker_batch), so a sequence
 * that reuses a prefix runs its own positions in the submissions it would
 * have run alone: results are bitwise the same as without sharing.
 * Nothing here talks to processes; the coordinator copies tables into the
 * activation region (kvc_table) before the steps that need them. */
#ifndef UNICORN_KVCACHE_H
#define UNICORN_KVCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "ipc/kvlayout.h"
#include "ipc/msg.h"

#define KVC_NONE UINT32_MAX
#define KVC_UNIT_BLOCKS_MAX (MSG_MAX_TOKENS / KV_BLOCK)

struct kvc_entry {
	bool used;
	uint32_t parent;                    /* entry index + 1 of the unit before; 0 for a first unit */
	uint64_t chain;                     /* hash of every token from position 0 through this unit */
	uint64_t last_use;
	uint32_t depth;                     /* unit index in its prompt */
	uint32_t g[KVC_UNIT_BLOCKS_MAX];    /* global blocks of the unit */
	uint32_t l[KVC_UNIT_BLOCKS_MAX];    /* local blocks (KVC_NONE without local layers) */
};

struct kvc_slot {
	bool live, dirty;                   /* dirty: table changed since kvc_table */
	uint32_t g_held;                    /* global logical blocks 0..g_held-1 have blocks */
	uint32_t l_next;                    /* local logical blocks allocated so far */
	uint32_t n_reg;                     /* prompt units this sequence has in the cache */
	uint32_t reg_parent;                /* entry index + 1 of unit n_reg - 1 */
	uint64_t reg_chain;
};

struct kvc_stats {
	uint32_t g_free, l_free;            /* blocks on the free lists */
	uint32_t g_total, l_total;
	uint32_t entries;                   /* cached prompt units */
	uint64_t hit_tokens, lookups, evictions, preemptions;
};

struct kvc {
	struct kv_layout l;
	uint32_t unit, ub;                  /* prefix unit in positions and in blocks */
	uint32_t max_seqs, tab_len;
	uint32_t *gref, *lref;              /* reference count per block */
	uint32_t *gfree, *lfree, n_gfree, n_lfree;
	uint32_t *tab;                      /* [max_seqs][tab_len], KVC_NONE: no block */
	struct kvc_slot slot[MSG_MAX_SLOTS];
	struct kvc_entry *ent;
	uint32_t *ent_tok;                  /* [cap_ent][unit] */
	uint32_t cap_ent, n_ent;
	uint64_t clock;
	struct kvc_stats st;
};

/* unit: a multiple of KV_BLOCK, at most MSG_MAX_TOKENS. */
int kvc_init(struct kvc *k, const struct kv_layout *l, uint32_t max_seqs, uint32_t unit);
void kvc_free(struct kvc *k);

/* Blocks a fresh sequence of n positions needs beyond a shared prefix, in
 * each pool, and whether they are free now (counting what evicting the
 * prefix cache would free). */
bool kvc_fits(const struct kvc *k, uint32_t n_positions);

/* Start slot's sequence: share the longest cached prefix of prompt[n_prompt]
 * (whole units, leaving at least the last prompt token to compute). *shared
 * = positions already in the cache (a multiple of unit, possibly 0). */
int kvc_start(struct kvc *k, uint32_t slot, const uint32_t *prompt, uint32_t n_prompt, uint32_t *shared);
/* Give slot blocks for every position below upto. ERR_NOMEM when the pools
 * (after evicting cache entries) cannot: the blocks it did get stay. */
int kvc_reserve(struct kvc *k, uint32_t slot, uint32_t upto);
/* After a step: cache the prompt units slot has fully computed (positions
 * below min(n_fed, n_prompt)). Never fails; a full cache just stops. */
void kvc_register(struct kvc *k, uint32_t slot, const uint32_t *tokens, uint32_t n_fed, uint32_t n_prompt);
/* Drop slot's blocks (finished or preempted). */
void kvc_release(struct kvc *k, uint32_t slot);
/* Forget every cached prefix (the workers lost their KV). Live sequences
 * keep their tables and re-register as they replay. */
void kvc_flush(struct kvc *k);
/* Slot's table as the workers read it (ipc/attach.h kvtab): out[0] =
 * entries, then the entries (KVC_NONE as 0: never read). Clears dirty.
 * cap >= 1 + tab_len. */
int kvc_table(struct kvc *k, uint32_t slot, uint32_t *out, uint32_t cap);
void kvc_stats(const struct kvc *k, struct kvc_stats *out);

#endif
