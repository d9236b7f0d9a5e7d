/* dataplane: the cluster's step rings in one shared file (docs/protocol.md
 * "Data plane").
 *
 * The coordinator creates `DIR/dataplane` (mode 0600 in the 0700 runtime
 * directory; a fresh file, so a restarted coordinator never shares rings with
 * its predecessor's workers) before it says HELLO to the workers; a worker
 * maps it after each HELLO (fstat: ours, regular, the size its header names).
 * Layout (64-byte lines, offsets only):
 *
 *   header            magic "UDPL", version, n_links, entry_size, capacity, coordinator pid, epoch,
 *                     region identities (coordinator's, each worker's),
 *                     retired (set by the next coordinator, which rings every worker bell)
 *   coordinator bell  the coordinator sleeps here: every worker's done ring rings it
 *   per link (gpu, npu):
 *     worker bell     the worker sleeps here: its request and peer rings ring it
 *     request ring    coordinator -> worker: step messages (RUN, RUN_BATCH, EMBED, STAGE, HEAD, RESET_SEQ, FLOW)
 *     done ring       worker -> coordinator: DONE / ERROR answers, FLOWs that ended
 *     peer ring       the other worker -> this worker: FLOWs passed on (split placement)
 *
 * The epoch counts the coordinator's recoveries: it bumps it before it resets
 * the workers, and a worker drops a FLOW posted in an older epoch, so a step
 * that was in flight when a worker died never runs beside its replay.
 *
 * An entry is one encoded message (ipc/msg.h wire format), so the receiver
 * validates it exactly as it validates a message from a socket. */
#ifndef UNICORN_DATAPLANE_H
#define UNICORN_DATAPLANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/msg.h"
#include "ipc/ring.h"

#define DP_MAGIC 0x4C504455u   /* "UDPL" */
#define DP_VERSION 4
#define DP_FILE "dataplane"
#define DP_ENTRY_SIZE 4096     /* the largest step message (RUN_CHUNKS of 64 chunks, 512 tokens) is 3372 bytes */
#define DP_CAPACITY 16

/* Tokens a chunk FLOW of MSG_FLOW_CHUNK_SEQS sequences may carry for a model of
 * n_layer layers (1..MSG_MAX_LAYERS): as many as fit a ring entry beside its
 * other parts at their largest (every handoff's time, no op times), at least
 * MSG_MAX_TOKENS, at most MSG_MAX_FLOW_TOKENS. */
static inline uint32_t dp_flow_chunk_tokens(uint32_t n_layer)
{
	size_t fixed = 4 + MSG_HDR_SIZE + MSG_SIZE_FLOW_BASE + 4 * (2 * (size_t)n_layer + 2) +
		       MSG_SIZE_RUN_BATCH_ENTRY * (size_t)MSG_FLOW_CHUNK_SEQS;
	size_t room = fixed < DP_ENTRY_SIZE ? (DP_ENTRY_SIZE - fixed) / 4 : 0;
	return room >= MSG_MAX_FLOW_TOKENS ? MSG_MAX_FLOW_TOKENS : room > MSG_MAX_TOKENS ? (uint32_t)room : MSG_MAX_TOKENS;
}
_Static_assert(MSG_HDR_SIZE + MSG_SIZE_RUN_CHUNKS_BASE + MSG_SIZE_RUN_CHUNK_ENTRY * MSG_MAX_SLOTS + 4 * MSG_MAX_ROWS + 4 <=
	       DP_ENTRY_SIZE, "a RUN_CHUNKS fits a ring entry");

enum dp_link { DP_GPU = 0, DP_NPU = 1, DP_LINKS = 2 };

struct dp_link_view {
	struct ring_bell *bell;    /* the worker's doorbell */
	struct ring req, done, peer;
};

struct dataplane {
	void *base;
	size_t size;
	uint32_t *epoch;           /* in the header; written by the coordinator only */
	struct ring_bell *coord_bell;
	struct dp_link_view link[DP_LINKS];
};

/* Coordinator: create a fresh DIR/dataplane with empty rings. */
int dp_create(const char *rundir, struct dataplane *dp);
/* Worker: map DIR/dataplane and check its header. */
int dp_open(const char *rundir, struct dataplane *dp);
void dp_close(struct dataplane *dp);

/* Whether a newer coordinator has replaced this file's (it rang every
 * worker bell when it did: a worker asleep on this file should look for its
 * HELLO). */
bool dp_retired(const struct dataplane *dp);

/* The epoch (acquire), and the coordinator's bump (release). */
uint32_t dp_epoch(const struct dataplane *dp);
void dp_epoch_bump(struct dataplane *dp);

/* Region identities (ipc/attach.h "identity"): the coordinator's (written
 * at create and after it re-attaches) and each worker's (written on its link
 * before it answers HELLO). 0: not written. A stale writer is refused by the
 * reader: docs/cluster.md "Region identity". */
uint64_t dp_coord_ident(const struct dataplane *dp);
void dp_set_coord_ident(struct dataplane *dp, uint64_t ident);
uint64_t dp_worker_ident(const struct dataplane *dp, enum dp_link l);
void dp_set_worker_ident(struct dataplane *dp, enum dp_link l, uint64_t ident);

/* Encode m into the ring (ERR_AGAIN when full). m->seq is left as the caller set it. */
int dp_send(struct ring *r, const struct msg *m);
/* Pop and decode one entry (ERR_AGAIN when empty, ERR_INVAL when malformed). */
int dp_recv(struct ring *r, struct msg *out);

#endif
