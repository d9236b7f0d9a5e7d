/* kvlayout: the shape of the paged KV cache, agreed by the coordinator (which
 * owns the block bookkeeping, coordinator/kvcache.h) and the worker that holds
 * the cache (which owns the memory, gpu_worker/engine.h). Both compute it from
 * the same model config, context, sequence count and budget, so nothing about
 * it travels in messages.
 *
 * A block holds KV_BLOCK consecutive positions of one sequence, K and V, for
 * every layer of one kind. Global layers and sliding-window (local) layers have
 * separate pools, because a local layer only ever reads the last
 * sliding_window positions: its blocks form a ring of `ring` entries per
 * sequence, and a block that falls out of the window is freed and reused.
 *
 * A sequence's block table (ATTACH_KV_TABLE u32 in its activation slot) is
 *   [0, max_blocks)                 global pool block of logical block b
 *   [max_blocks, max_blocks + ring) local pool block of logical block b at
 *                                   entry max_blocks + b % ring
 * where logical block b covers positions [b * KV_BLOCK, (b + 1) * KV_BLOCK).
 *
 * ring is large enough for any step of up to KV_RING_SLACK positions: the
 * blocks a step writes and every block its tokens read fit without wrapping
 * onto each other. */
#ifndef UNICORN_KVLAYOUT_H
#define UNICORN_KVLAYOUT_H

#include <stdint.h>

#include "ipc/msg.h"
#include "formats/model.h"

#define KV_BLOCK 16                 /* positions per block */
#define KV_RING_SLACK MSG_MAX_TOKENS /* most positions one step writes */
/* A budget's split between the global and the sliding layers' pools is
 * planned for sequences of this many positions (kv_layout_plan). */
#define KV_PLAN_POSITIONS 4096
#define KV_MAX_CTX 131072           /* positions per sequence the table covers (Gemma 3's longest) */
#define KV_MAX_TABLE (KV_MAX_CTX / KV_BLOCK + 512) /* entries of one table (kv_table_len) */
#define KV_MAX_SEQS 256             /* sequences (a worker serves <= MSG_MAX_SLOTS) */

/* The cache's element type (--kv-type): f16 by default; q8_0 in ggml's block
 * layout (per 32 values of a head: an f16 scale, then 32 int8; a row is whole
 * blocks, back to back); f32 as before. */
enum kv_type { KV_TYPE_F16 = 0, KV_TYPE_F32 = 1, KV_TYPE_Q8_0 = 2 };
#define KV_TYPE_NAMES "f16, q8_0 or f32"

struct kv_layout {
	uint32_t block;                 /* KV_BLOCK */
	uint32_t type;                  /* enum kv_type */
	uint32_t row_bytes;             /* K (or V) of one position of one layer */
	uint32_t max_ctx;               /* positions per sequence */
	uint32_t max_blocks;            /* global entries per table: ceil(max_ctx / block) */
	uint32_t ring;                  /* local entries per table (<= max_blocks) */
	uint32_t n_global, n_local;     /* layers of each kind */
	uint32_t n_gblocks, n_lblocks;  /* blocks in each pool */
	uint64_t gblock_bytes;          /* K+V of one global block over the global layers */
	uint64_t lblock_bytes;          /* same for a local block */
	uint64_t bytes;                 /* both pools */
};

/* Rows a worker's engine runs per submission: --max-batch (default 32), at
 * least max_seqs (a decode step batches one token of each), rounded up to a
 * whole block and capped at KV_RING_SLACK. The coordinator shares prompt
 * prefixes in units of this, so a sequence that reuses a prefix computes its
 * own positions in exactly the submissions it would have alone. */
static inline uint32_t kv_worker_batch(uint32_t max_batch, uint32_t max_seqs)
{
	uint32_t b = max_batch ? max_batch : 32;
	b = b < max_seqs ? max_seqs : b;
	b = (b + KV_BLOCK - 1) / KV_BLOCK * KV_BLOCK;
	return b > KV_RING_SLACK ? KV_RING_SLACK : b;
}

/* Positions per sequence every process of a cluster uses: the model's
 * context, capped by ctx (--ctx; 0 = no cap) and KV_MAX_CTX. */
static inline uint32_t kv_context(const struct gemma3_config *c, uint32_t ctx)
{
	uint32_t n = c->n_ctx ? c->n_ctx : 4096;
	if (ctx && ctx < n)
		n = ctx;
	return n < KV_MAX_CTX ? n : KV_MAX_CTX;
}

/* "f16", "q8_0", "f32" (also "q8"); ERR_INVAL naming the choices otherwise. */
int kv_type_parse(const char *s, uint32_t *out);
const char *kv_type_name(uint32_t type);
/* Bytes of one position's K (or V) row of n values (n_head_kv * head_dim); 0
 * when the type cannot hold such rows (q8_0: n a multiple of 32). */
uint64_t kv_type_row_bytes(uint32_t type, uint64_t n);

/* Entries one sequence's table uses. */
static inline uint32_t kv_table_len(const struct kv_layout *l) { return l->max_blocks + l->ring; }

/* Plan the pools for max_seqs sequences of up to max_ctx positions each
 * (1..KV_MAX_CTX) within budget bytes. budget 0: room for every sequence at
 * full length (what a lone engine uses). Otherwise the local pool gets the
 * share a full-length sequence would use, capped at max_seqs full rings, and
 * the global pool the rest. ERR_RANGE when the budget does not hold even one
 * full-length sequence, naming the bytes that would. type: enum kv_type
 * (q8_0 needs head_dim a multiple of 32: ERR_UNSUP otherwise). */
int kv_layout_plan(const struct gemma3_config *cfg, uint32_t max_ctx, uint32_t max_seqs, uint64_t budget,
		   uint32_t type, struct kv_layout *out);

/* --kv-budget auto (gpu_worker/kvbudget.h): the bytes a worker of role
 * ("gpu", "npu") chose, in RUNDIR/kv-<role>.budget, tagged with the loader's
 * identity (attach ident). read: ERR_NOTFOUND when absent, unreadable or of
 * another loader. */
int kv_budget_file_write(const char *rundir, const char *role, uint64_t ident, uint64_t budget);
int kv_budget_file_read(const char *rundir, const char *role, uint64_t ident, uint64_t *budget);

/* Parse a byte count: digits with an optional K, M, G or T suffix (binary
 * units, "2G" = 2^31), or "auto" (0). ERR_INVAL on anything else or overflow. */
int kv_parse_bytes(const char *s, uint64_t *out);

#endif
