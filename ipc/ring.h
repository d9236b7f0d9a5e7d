/* ring: single-producer/single-consumer rings of fixed-size entries in shared
 * memory, with futex doorbells (docs/protocol.md "Data plane").
 *
 * A ring lives in a region that both processes map MAP_SHARED. It holds only
 * offsets and counters, never pointers. The producer owns `head` (entries
 * published so far), the consumer owns `tail` (entries taken so far); both
 * count up forever (u32, wrapping) and an entry's place is count % capacity.
 *
 * Memory ordering: the producer writes the entry, then stores head with
 * release; the consumer loads head with acquire before reading the entry,
 * copies it out, then stores tail with release; the producer loads tail with
 * acquire before reusing a place. So an entry is never read half-written and
 * never overwritten while it is being read.
 *
 * Doorbells: a consumer sleeps on a `struct ring_bell` (a futex word and a
 * sleeper count, in shared memory, not FUTEX_PRIVATE). Several rings may ring
 * the same bell (one consumer waiting on several rings), and any thread of
 * any process that maps the bell may ring it (ring_bell_ring) to wake the
 * consumer for another reason. A producer issues FUTEX_WAKE only when a
 * sleeper is counted, so a busy pipeline makes no system call per entry.
 *
 * Hostile memory: head, tail and every entry's length are read from shared
 * memory and checked (head - tail <= capacity, len <= entry payload);
 * anything else is ERR_INVAL, never a crash. A dead peer is noticed by
 * ring_bell_wait's peer check (kill(pid, 0) == ESRCH), not by a timeout.
 *
 * Not thread-safe on one side: one producer thread and one consumer thread
 * per ring. */
#ifndef UNICORN_RING_H
#define UNICORN_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RING_MAGIC 0x474E4952u    /* "RING" */
#define RING_LINE 64              /* cache line: head, tail and bell never share one */

/* A doorbell: 64 bytes in shared memory. */
struct ring_bell {
	_Atomic uint32_t seq;      /* bumped by every ring; the futex word */
	_Atomic uint32_t sleepers; /* consumers inside FUTEX_WAIT (0 or 1) */
	uint32_t pad[RING_LINE / 4 - 2];
};
_Static_assert(sizeof(struct ring_bell) == RING_LINE, "bell is one line");

/* The ring's shared header; entries follow it. */
struct ring_shared {
	uint32_t magic, entry_size, capacity, pad0[RING_LINE / 4 - 3];
	_Atomic uint32_t head;     /* producer: entries published */
	uint32_t pad1[RING_LINE / 4 - 1];
	_Atomic uint32_t tail;     /* consumer: entries taken */
	uint32_t pad2[RING_LINE / 4 - 1];
};
_Static_assert(sizeof(struct ring_shared) == 3 * RING_LINE, "ring header is three lines");

/* Bytes a ring of capacity entries of entry_size bytes needs (header included). */
size_t ring_bytes(uint32_t entry_size, uint32_t capacity);

/* A process's view of one ring (on the caller's storage). */
struct ring {
	struct ring_shared *sh;
	unsigned char *data;       /* capacity * entry_size bytes */
	struct ring_bell *bell;    /* the consumer's doorbell */
	uint32_t entry_size, capacity;
};

/* Lay out an empty ring at mem (ring_bytes(...) bytes, 64-aligned). entry_size
 * is a multiple of 8 and >= 16 (4 bytes of length + payload); capacity 1..4096. */
int ring_format(void *mem, size_t bytes, uint32_t entry_size, uint32_t capacity);
/* View a ring laid out by ring_format at mem (bytes = what the caller knows
 * of the mapping: the header's sizes are checked against it). */
int ring_attach(struct ring *r, void *mem, size_t bytes, struct ring_bell *bell);
/* Empty the ring (both sides must be quiet: used when a peer restarted). */
void ring_reset(struct ring *r);

/* Producer: copy len bytes in (len <= entry_size - 4). ERR_AGAIN when full. */
int ring_push(struct ring *r, const void *p, uint32_t len);
/* Consumer: copy the oldest entry out (cap bytes at p). ERR_AGAIN when empty;
 * ERR_INVAL when head/tail or the entry's length are corrupt. */
int ring_pop(struct ring *r, void *p, uint32_t cap, uint32_t *len);
/* Entries waiting (0 when the indices are corrupt: ring_pop says why). */
uint32_t ring_count(const struct ring *r);

void ring_bell_init(struct ring_bell *b);
/* Wake the bell's consumer (any thread, any process). */
void ring_bell_ring(struct ring_bell *b);
/* The bell's current value: read it before checking the rings, then pass it
 * to ring_bell_wait, so a ring between the check and the wait is not lost. */
uint32_t ring_bell_seq(struct ring_bell *b);
/* Look at the bell for up to us microseconds without sleeping (common/spin.h:
 * only right after work, when the answer is due soon): true when it rang. */
bool ring_bell_spin(struct ring_bell *b, uint32_t seen, uint32_t us);
/* Sleep until the bell moves past seen, at most timeout_ms (0: do not sleep).
 * peer > 0: returns ERR_IO at once when that process no longer exists.
 * 0 = rung (or a signal interrupted the sleep), ERR_TIMEOUT, ERR_IO (peer gone). */
int ring_bell_wait(struct ring_bell *b, uint32_t seen, int timeout_ms, pid_t peer);

#endif
