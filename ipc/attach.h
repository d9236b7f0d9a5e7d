/* attach: a worker's (or the coordinator's) view of the loader's regions.
 *
 * attach_open() connects to DIR/loader.sock (retrying while the loader is not
 * up yet), asks for the regions (fdpass tag 1), receives the manifest, weight
 * and activation memfds (tag 2; tag 3 with dma-buf fds when the loader made
 * them), imports each with its size and seal checks (ipc/shm.h) and rebuilds
 * the model from the manifest (ipc/manifest.h): tensor data point into the
 * read-only weight mappings, so nothing is read from the model file.
 *
 * Tag-2 data (little-endian, packed):
 *   u32 n_regions        weight regions (1..MANIFEST_MAX_REGIONS)
 *   u64 manifest_size    bytes of the manifest (its memfd is this rounded up
 *                        to the page size)
 *   u64 size[n_regions]  memfd size of each weight region
 *   u64 act_size         memfd size of the activation region
 *   u32 flags            ATTACH_F_DMABUF: a tag-3 transfer follows
 *   u64 ident            the loader instance's region identity: its
 *                        CLOCK_MONOTONIC time (ns) when it built the regions,
 *                        never 0; a later loader has a larger one
 *   u64 manifest_sum     digest64(ident, manifest bytes)
 *   u64 sum[n_regions]   digest_sampled(ident ^ (region + 1), region bytes)
 *                        (common/digest.h), computed once by the loader after
 *                        the copy; attach_open recomputes each and refuses a
 *                        mismatch (a region not filled, not this loader's, or
 *                        a manifest that does not belong to it)
 * fds = [manifest, weights..., activation]. Tag 3 (when flagged) carries one
 * dma-buf fd per region in the same order.
 *
 * Activation region layout (read-write, shared by every worker and the
 * coordinator): MSG_MAX_SLOTS slots of attach_slot_stride bytes; slot s holds
 *   hidden  f32 [MSG_MAX_TOKENS][n_embd]   at s*stride
 *   head    u32 ids[MSG_MAX_TOPK], f32 logits[MSG_MAX_TOPK], f32 lse (the
 *           log-sum-exp of the whole logit row, for logprobs), 12 bytes pad
 *           right after it
 *   kvtab   u32 [ATTACH_KV_TABLE]: the slot's KV block table, written by the
 *           coordinator before a step and read by the worker that holds the
 *           KV cache: [0] = entries that follow (kv_table_len, or 0: none
 *           given), then the entries (ipc/kvlayout.h says what they mean)
 * and the stride is rounded up to 4096 bytes. After the slots, the logits
 * area: MSG_MAX_SLOTS rows of n_vocab f32, row s written by a RUN_CHUNKS head
 * MSG_CHUNK_HEAD_FULL of slot s (the whole logit row, for constrained
 * decoding and logit_bias; pages never touched cost no memory with memfd). */
#ifndef UNICORN_ATTACH_H
#define UNICORN_ATTACH_H

#include <stdbool.h>
#include <stdint.h>

#include "ipc/manifest.h"
#include "ipc/msg.h"
#include "ipc/shm.h"

#define ATTACH_TAG_REQ 1          /* worker -> loader: REGIONS? */
#define ATTACH_TAG_REGIONS 2      /* loader -> worker: memfds */
#define ATTACH_TAG_DMABUF 3       /* loader -> worker: dma-buf fds */
#define ATTACH_F_DMABUF 0x1u
#define ATTACH_HEAD_BYTES (MSG_MAX_TOPK * 8 + 16)
#define ATTACH_KV_TABLE (1 + 8192 + 512) /* count + block-table entries per slot (1 + KV_MAX_TABLE) */
#define ATTACH_SLOT_ALIGN 4096
#define ATTACH_RETRY_MS 100

struct attach {
	struct shm_region manifest;
	uint64_t manifest_bytes;
	uint32_t n_weights;
	struct shm_region *weights;   /* [n_weights], read-only */
	struct shm_region act;        /* read-write */
	struct model *model;          /* tensor data point into weights[] */
	uint32_t n_embd;
	uint32_t n_vocab;             /* logits area row length */
	uint64_t slot_stride;
	enum shm_path share_path;     /* memfd, or udmabuf when dma-bufs came */
	uint64_t ident;               /* the loader instance's region identity */
};

/* Bytes of one slot and of the whole activation region for n_embd (slots,
 * then the logits area of n_vocab-float rows). */
int attach_act_layout(uint32_t n_embd, uint32_t n_vocab, uint64_t *slot_stride, uint64_t *size);

/* Connect to rundir/loader.sock, retrying every ATTACH_RETRY_MS for up to
 * timeout_ms, and import everything. *out is freed with attach_close. */
int attach_open(const char *rundir, int timeout_ms, struct attach **out);
/* Same from an explicit socket path. */
int attach_open_path(const char *sock_path, int timeout_ms, struct attach **out);
void attach_close(struct attach *a);

/* Rows [row0, row0+n) of slot's hidden state (n_embd f32 each); bounds-checked
 * against the slot and the region's real size. */
int attach_hidden(const struct attach *a, uint32_t slot, uint32_t row0, uint32_t n, float **out);
/* The slot's head area: ids[MSG_MAX_TOPK], logits[MSG_MAX_TOPK]. */
int attach_head(const struct attach *a, uint32_t slot, uint32_t **ids, float **logits);
/* The slot's head log-sum-exp (one f32 after the logits). */
int attach_head_lse(const struct attach *a, uint32_t slot, float **lse);
/* The slot's row of the logits area: n_vocab f32. */
int attach_logits(const struct attach *a, uint32_t slot, float **row);
/* The slot's KV block table: ATTACH_KV_TABLE u32 entries. */
int attach_kv_table(const struct attach *a, uint32_t slot, uint32_t **tab);

/* Tag-2 data codec (the loader encodes, attach_open decodes). */
#define ATTACH_INFO_MAX (4 + 8 + 8 * MANIFEST_MAX_REGIONS + 8 + 4 + 8 + 8 + 8 * MANIFEST_MAX_REGIONS)
struct attach_info {
	uint32_t n_regions;
	uint64_t manifest_size;
	uint64_t size[MANIFEST_MAX_REGIONS];
	uint64_t act_size;
	uint32_t flags;
	uint64_t ident;
	uint64_t manifest_sum;
	uint64_t sum[MANIFEST_MAX_REGIONS];
};
/* The checksums the loader puts in attach_info (and attach_open checks). */
uint64_t attach_manifest_sum(uint64_t ident, const void *manifest, uint64_t bytes);
uint64_t attach_region_sum(uint64_t ident, uint32_t region, const void *base, uint64_t size);
int attach_info_encode(const struct attach_info *in, uint8_t *buf, size_t cap, size_t *len);
int attach_info_decode(const uint8_t *buf, size_t len, struct attach_info *out);

#endif
