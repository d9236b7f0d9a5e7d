/* ring: SPSC rings with futex doorbells in shared memory (see ipc/ring.h). */
#include "ipc/ring.h"

#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/spin.h"

#define RING_MAX_CAPACITY 4096u
#define RING_MAX_ENTRY (1u << 20)

size_t ring_bytes(uint32_t entry_size, uint32_t capacity)
{
	return sizeof(struct ring_shared) + (size_t)entry_size * capacity;
}

static int check_shape(uint32_t entry_size, uint32_t capacity, size_t bytes)
{
	if (entry_size < 16 || entry_size % 8 || entry_size > RING_MAX_ENTRY)
		return err_set(ERR_INVAL, "ring: entry size %u (multiple of 8, 16..%u)", entry_size,
			       RING_MAX_ENTRY);
	if (capacity < 1 || capacity > RING_MAX_CAPACITY)
		return err_set(ERR_INVAL, "ring: capacity %u (1..%u)", capacity, RING_MAX_CAPACITY);
	if (ring_bytes(entry_size, capacity) > bytes)
		return err_set(ERR_RANGE, "ring: %u entries of %u bytes need %zu bytes, the region has %zu",
			       capacity, entry_size, ring_bytes(entry_size, capacity), bytes);
	return 0;
}

int ring_format(void *mem, size_t bytes, uint32_t entry_size, uint32_t capacity)
{
	if (!mem || (uintptr_t)mem % RING_LINE)
		return err_set(ERR_INVAL, "ring: memory not %d-byte aligned", RING_LINE);
	int rc = check_shape(entry_size, capacity, bytes);
	if (rc)
		return rc;
	struct ring_shared *sh = mem;
	memset(sh, 0, sizeof *sh);
	sh->magic = RING_MAGIC;
	sh->entry_size = entry_size;
	sh->capacity = capacity;
	atomic_store_explicit(&sh->head, 0, memory_order_relaxed);
	atomic_store_explicit(&sh->tail, 0, memory_order_release);
	return 0;
}

int ring_attach(struct ring *r, void *mem, size_t bytes, struct ring_bell *bell)
{
	memset(r, 0, sizeof *r);
	if (!mem || !bell || (uintptr_t)mem % RING_LINE || bytes < sizeof(struct ring_shared))
		return err_set(ERR_INVAL, "ring: no room for a ring header");
	struct ring_shared *sh = mem;
	/* read the shape once: the peer could change it under us */
	uint32_t magic = sh->magic, es = sh->entry_size, cap = sh->capacity;
	if (magic != RING_MAGIC)
		return err_set(ERR_INVAL, "ring: bad magic 0x%08x", magic);
	int rc = check_shape(es, cap, bytes);
	if (rc)
		return rc;
	r->sh = sh;
	r->data = (unsigned char *)mem + sizeof *sh;
	r->bell = bell;
	r->entry_size = es;
	r->capacity = cap;
	return 0;
}

void ring_reset(struct ring *r)
{
	atomic_store_explicit(&r->sh->head, 0, memory_order_relaxed);
	atomic_store_explicit(&r->sh->tail, 0, memory_order_release);
}

uint32_t ring_count(const struct ring *r)
{
	uint32_t head = atomic_load_explicit(&r->sh->head, memory_order_acquire);
	uint32_t tail = atomic_load_explicit(&r->sh->tail, memory_order_acquire);
	uint32_t n = head - tail;
	return n <= r->capacity ? n : 0;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

void ring_bell_init(struct ring_bell *b)
{
	memset(b, 0, sizeof *b);
}

uint32_t ring_bell_seq(struct ring_bell *b)
{
	return atomic_load_explicit(&b->seq, memory_order_seq_cst);
}

void ring_bell_ring(struct ring_bell *b)
{
	/* seq_cst pairs with the sleeper's increment-then-recheck in
	 * ring_bell_wait: either it sees the new seq, or we see it counted. */
	atomic_fetch_add_explicit(&b->seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&b->sleepers, memory_order_seq_cst))
		futex(&b->seq, FUTEX_WAKE, INT_MAX, NULL);
}

bool ring_bell_spin(struct ring_bell *b, uint32_t seen, uint32_t us)
{
	if (!us)
		return ring_bell_seq(b) != seen;
	int64_t until = spin_now_ns() + (int64_t)us * 1000;
	for (;;) {
		for (int i = 0; i < 64; i++) {
			if (ring_bell_seq(b) != seen)
				return true;
			spin_pause();
		}
		if (spin_now_ns() >= until)
			return ring_bell_seq(b) != seen;
	}
}

int ring_bell_wait(struct ring_bell *b, uint32_t seen, int timeout_ms, pid_t peer)
{
	if (peer > 0 && kill(peer, 0) < 0 && errno == ESRCH)
		return err_set(ERR_IO, "ring: peer process %d is gone", (int)peer);
	if (ring_bell_seq(b) != seen)
		return 0;
	if (timeout_ms <= 0)
		return err_set(ERR_TIMEOUT, "ring: not rung");
	/* A peer that dies while we sleep never rings: sleep in slices short
	 * enough to notice it (kill(pid, 0) is a cheap syscall). */
	const int slice_ms = peer > 0 ? 50 : timeout_ms;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		int64_t left = (int64_t)timeout_ms -
			       ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return err_set(ERR_TIMEOUT, "ring: not rung within %d ms", timeout_ms);
		int64_t ms = left < slice_ms ? left : slice_ms;
		struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
		atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
		long fr = 0;
		if (ring_bell_seq(b) == seen)
			fr = futex(&b->seq, FUTEX_WAIT, seen, &ts); /* EAGAIN when seq moved: fine */
		bool interrupted = fr < 0 && errno == EINTR;
		atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_seq_cst);
		/* a signal (SIGTERM) ends the wait too: the caller looks at its flags */
		if (ring_bell_seq(b) != seen || interrupted)
			return 0;
		if (peer > 0 && kill(peer, 0) < 0 && errno == ESRCH)
			return err_set(ERR_IO, "ring: peer process %d is gone", (int)peer);
	}
}

int ring_push(struct ring *r, const void *p, uint32_t len)
{
	if (len > r->entry_size - 4)
		return err_set(ERR_RANGE, "ring: entry of %u bytes, at most %u", len, r->entry_size - 4);
	uint32_t head = atomic_load_explicit(&r->sh->head, memory_order_relaxed);
	uint32_t tail = atomic_load_explicit(&r->sh->tail, memory_order_acquire);
	uint32_t used = head - tail;
	if (used > r->capacity)
		return err_set(ERR_INVAL, "ring: corrupt indices (head %u, tail %u, capacity %u)", head,
			       tail, r->capacity);
	if (used == r->capacity)
		return ERR_AGAIN;
	unsigned char *e = r->data + (size_t)(head % r->capacity) * r->entry_size;
	memcpy(e, &len, 4);
	memcpy(e + 4, p, len);
	atomic_store_explicit(&r->sh->head, head + 1, memory_order_release);
	ring_bell_ring(r->bell);
	return 0;
}

int ring_pop(struct ring *r, void *p, uint32_t cap, uint32_t *len)
{
	uint32_t tail = atomic_load_explicit(&r->sh->tail, memory_order_relaxed);
	uint32_t head = atomic_load_explicit(&r->sh->head, memory_order_acquire);
	uint32_t used = head - tail;
	if (used > r->capacity)
		return err_set(ERR_INVAL, "ring: corrupt indices (head %u, tail %u, capacity %u)", head,
			       tail, r->capacity);
	if (used == 0)
		return ERR_AGAIN;
	const unsigned char *e = r->data + (size_t)(tail % r->capacity) * r->entry_size;
	uint32_t n;
	memcpy(&n, e, 4);
	if (n > r->entry_size - 4 || n > cap) {
		/* drop it: a corrupt entry must not wedge the ring */
		atomic_store_explicit(&r->sh->tail, tail + 1, memory_order_release);
		return err_set(ERR_INVAL, "ring: entry length %u (at most %u, buffer %u)", n,
			       r->entry_size - 4, cap);
	}
	memcpy(p, e + 4, n);
	*len = n;
	atomic_store_explicit(&r->sh->tail, tail + 1, memory_order_release);
	return 0;
}
