/* Tests for ipc/ring and ipc/dataplane: SPSC rings in shared memory between
 * real processes, hostile indices, a dead peer, and a round-trip benchmark. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "ipc/dataplane.h"
#include "ipc/ring.h"

struct shared_pair {
	struct ring_bell bell_a, bell_b;
	_Alignas(64) unsigned char ring_ab[8192];
	_Alignas(64) unsigned char ring_ba[8192];
};

static struct shared_pair *map_pair(uint32_t es, uint32_t cap)
{
	struct shared_pair *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(s != MAP_FAILED);
	ring_bell_init(&s->bell_a);
	ring_bell_init(&s->bell_b);
	cr_assert_eq(ring_format(s->ring_ab, sizeof s->ring_ab, es, cap), 0, "%s", err_msg());
	cr_assert_eq(ring_format(s->ring_ba, sizeof s->ring_ba, es, cap), 0, "%s", err_msg());
	return s;
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

Test(ring, wraps_around_and_reports_full_and_empty)
{
	struct shared_pair *s = map_pair(64, 4);
	struct ring r;
	cr_assert_eq(ring_attach(&r, s->ring_ab, sizeof s->ring_ab, &s->bell_b), 0);
	uint32_t v, len;
	cr_assert_eq(ring_pop(&r, &v, sizeof v, &len), ERR_AGAIN);
	uint32_t next_in = 0, next_out = 0;
	for (int round = 0; round < 50; round++) { /* many times around 4 places */
		int n = 1 + round % 4;
		for (int i = 0; i < n; i++, next_in++)
			cr_assert_eq(ring_push(&r, &next_in, sizeof next_in), 0);
		if (n == 4)
			cr_assert_eq(ring_push(&r, &next_in, sizeof next_in), ERR_AGAIN, "full at 4");
		cr_assert_eq(ring_count(&r), (uint32_t)n);
		for (int i = 0; i < n; i++, next_out++) {
			cr_assert_eq(ring_pop(&r, &v, sizeof v, &len), 0);
			cr_assert_eq(len, 4u);
			cr_assert_eq(v, next_out);
		}
		cr_assert_eq(ring_pop(&r, &v, sizeof v, &len), ERR_AGAIN);
	}
	/* the u32 counters wrap too */
	atomic_store(&r.sh->head, UINT32_MAX - 1);
	atomic_store(&r.sh->tail, UINT32_MAX - 1);
	for (uint32_t i = 0; i < 4; i++)
		cr_assert_eq(ring_push(&r, &i, sizeof i), 0);
	for (uint32_t i = 0; i < 4; i++) {
		cr_assert_eq(ring_pop(&r, &v, sizeof v, &len), 0);
		cr_assert_eq(v, i);
	}
	/* an entry larger than a place is refused */
	unsigned char big[64] = { 0 };
	cr_assert_eq(ring_push(&r, big, sizeof big), ERR_RANGE);
}

Test(ring, corrupt_indices_and_lengths_are_rejected)
{
	struct shared_pair *s = map_pair(64, 4);
	struct ring r;
	cr_assert_eq(ring_attach(&r, s->ring_ab, sizeof s->ring_ab, &s->bell_b), 0);
	uint32_t v = 7, len;
	atomic_store(&r.sh->head, 1000); /* head - tail > capacity */
	cr_assert_eq(ring_pop(&r, &v, sizeof v, &len), ERR_INVAL);
	cr_assert(strstr(err_msg(), "corrupt indices"));
	cr_assert_eq(ring_push(&r, &v, sizeof v), ERR_INVAL);
	cr_assert_eq(ring_count(&r), 0u);
	ring_reset(&r);
	cr_assert_eq(ring_push(&r, &v, sizeof v), 0);
	uint32_t evil = 100000; /* a length past the entry */
	memcpy(r.data, &evil, 4);
	cr_assert_eq(ring_pop(&r, &v, sizeof v, &len), ERR_INVAL);
	cr_assert_eq(ring_count(&r), 0u, "the corrupt entry is dropped, the ring goes on");
	cr_assert_eq(ring_push(&r, &v, sizeof v), 0);
	cr_assert_eq(ring_pop(&r, &v, sizeof v, &len), 0);
	/* a header that lies about its shape is refused at attach */
	s->ring_ba[0] ^= 1;
	struct ring bad;
	cr_assert_eq(ring_attach(&bad, s->ring_ba, sizeof s->ring_ba, &s->bell_a), ERR_INVAL);
	cr_assert_eq(ring_format(s->ring_ba, sizeof s->ring_ba, 64, 4), 0);
	((struct ring_shared *)s->ring_ba)->capacity = 1000; /* 1000 x 64 > 8192 */
	cr_assert_eq(ring_attach(&bad, s->ring_ba, sizeof s->ring_ba, &s->bell_a), ERR_RANGE);
}

/* The producer dies between writing an entry and publishing it: the consumer
 * never sees the half-written entry, and its wait notices the death at once. */
Test(ring, a_peer_killed_mid_write_is_noticed_and_leaves_nothing_half_written)
{
	struct shared_pair *s = map_pair(64, 4);
	struct ring r;
	cr_assert_eq(ring_attach(&r, s->ring_ab, sizeof s->ring_ab, &s->bell_b), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct ring w;
		if (ring_attach(&w, s->ring_ab, sizeof s->ring_ab, &s->bell_b))
			_exit(1);
		uint32_t one = 1;
		ring_push(&w, &one, sizeof one);
		/* write the next entry's bytes but die before publishing head */
		memset(w.data + 64, 0xAB, 64);
		raise(SIGKILL);
	}
	uint32_t seen = ring_bell_seq(&s->bell_b);
	uint32_t v = 0, len;
	/* wait for the first (published) entry */
	for (int i = 0; i < 200 && ring_count(&r) == 0; i++)
		ring_bell_wait(&s->bell_b, seen, 50, 0), seen = ring_bell_seq(&s->bell_b);
	cr_assert_eq(ring_pop(&r, &v, sizeof v, &len), 0);
	cr_assert_eq(v, 1u);
	int st;
	waitpid(pid, &st, 0);
	cr_assert(WIFSIGNALED(st));
	double t0 = now_us();
	int rc = ring_bell_wait(&s->bell_b, ring_bell_seq(&s->bell_b), 5000, pid);
	double dt = now_us() - t0;
	cr_assert_eq(rc, ERR_IO, "dead peer: %s", err_msg());
	cr_assert_lt(dt, 100000.0, "noticed in %.0f us", dt);
	cr_assert_eq(ring_pop(&r, &v, sizeof v, &len), ERR_AGAIN, "the unpublished entry is invisible");
}

/* A sleeper is woken by a ring from another process, and by a ring from
 * another thread of its own (the same futex word). */
Test(ring, sleeper_wakes_on_a_ring_from_another_process)
{
	struct shared_pair *s = map_pair(64, 4);
	uint32_t seen = ring_bell_seq(&s->bell_a);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		usleep(100000);
		ring_bell_ring(&s->bell_a);
		_exit(0);
	}
	double t0 = now_us();
	cr_assert_eq(ring_bell_wait(&s->bell_a, seen, 5000, pid), 0, "%s", err_msg());
	double dt = now_us() - t0;
	cr_assert_gt(dt, 50000.0, "slept until rung (%.0f us)", dt);
	cr_assert_lt(dt, 2000000.0);
	waitpid(pid, NULL, 0);
	cr_assert_eq(ring_bell_wait(&s->bell_a, ring_bell_seq(&s->bell_a), 20, 0), ERR_TIMEOUT);
}

/* The hot path's bounded spin: it sees a ring from another process without
 * sleeping, and gives up after its bound when nothing comes. */
Test(ring, spin_sees_a_ring_and_is_bounded)
{
	struct shared_pair *s = map_pair(64, 4);
	uint32_t seen = ring_bell_seq(&s->bell_a);
	double t0 = now_us();
	cr_assert_not(ring_bell_spin(&s->bell_a, seen, 2000), "not rung");
	double dt = now_us() - t0;
	cr_assert_geq(dt, 2000.0, "spun its whole bound (%.0f us)", dt);
	cr_assert_lt(dt, 500000.0, "and no longer (%.0f us)", dt);
	cr_assert_not(ring_bell_spin(&s->bell_a, seen, 0), "a zero bound only looks");
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		usleep(20000);
		ring_bell_ring(&s->bell_a);
		_exit(0);
	}
	cr_assert(ring_bell_spin(&s->bell_a, seen, 2000000), "rung while spinning");
	waitpid(pid, NULL, 0);
	cr_assert(ring_bell_spin(&s->bell_a, seen, 0), "already rung: true at once");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Benchmark (prints, asserts only correctness): ping-pong of 64-byte entries
 * between two processes, each sleeping on its bell between messages. */
Test(ring, round_trip_between_two_processes, .timeout = 60)
{
	struct shared_pair *s = map_pair(128, 16);
	enum { N = 20000 };
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct ring in, out;
		if (ring_attach(&in, s->ring_ab, sizeof s->ring_ab, &s->bell_b) ||
		    ring_attach(&out, s->ring_ba, sizeof s->ring_ba, &s->bell_a))
			_exit(1);
		unsigned char buf[64];
		uint32_t len;
		for (int i = 0; i < N; i++) {
			for (;;) {
				uint32_t seen = ring_bell_seq(&s->bell_b);
				if (ring_pop(&in, buf, sizeof buf, &len) == 0)
					break;
				if (ring_bell_wait(&s->bell_b, seen, 1000, getppid()) == ERR_IO)
					_exit(2);
			}
			if (ring_push(&out, buf, len))
				_exit(3);
		}
		_exit(0);
	}
	struct ring out, in;
	cr_assert_eq(ring_attach(&out, s->ring_ab, sizeof s->ring_ab, &s->bell_b), 0);
	cr_assert_eq(ring_attach(&in, s->ring_ba, sizeof s->ring_ba, &s->bell_a), 0);
	static double rt[N];
	unsigned char msg[64], back[64];
	uint32_t len;
	for (int i = 0; i < N; i++) {
		memset(msg, i & 0xff, sizeof msg);
		double t0 = now_us();
		cr_assert_eq(ring_push(&out, msg, sizeof msg), 0);
		for (;;) {
			uint32_t seen = ring_bell_seq(&s->bell_a);
			if (ring_pop(&in, back, sizeof back, &len) == 0)
				break;
			cr_assert_neq(ring_bell_wait(&s->bell_a, seen, 1000, pid), ERR_IO, "echo process died");
		}
		rt[i] = now_us() - t0;
		cr_assert_eq(len, sizeof msg);
		cr_assert_eq(memcmp(msg, back, sizeof msg), 0);
	}
	int st;
	waitpid(pid, &st, 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	qsort(rt, N, sizeof rt[0], cmp_double);
	fprintf(stderr, "ring: shared-memory round trip (2 processes, futex doorbells, %d x 64 B): "
		"p50 %.1f us, p99 %.1f us\n", N, rt[N / 2], rt[N * 99 / 100]);
}

/* The data plane file: made by one side, opened by the other; a message
 * crosses and is decoded; a reset ring is empty. */
static void on_alarm(int sig)
{
	(void)sig;
}

/* A signal ends a doorbell sleep (SIGTERM must stop an idle worker that
 * sleeps for seconds): the caller looks at its flags. */
Test(ring, a_signal_ends_the_sleep)
{
	struct shared_pair *s = map_pair(64, 4);
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART */
	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	struct itimerval it = { .it_value = { 0, 100000 } };
	cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	double t0 = now_us();
	int rc = ring_bell_wait(&s->bell_a, ring_bell_seq(&s->bell_a), 5000, 0);
	double took = (now_us() - t0) / 1e6;
	cr_assert_eq(rc, 0, "an interrupted sleep reads as 'look again' (got %d)", rc);
	cr_assert_lt(took, 2.0, "the signal did not end the sleep (%.2f s)", took);
	signal(SIGALRM, SIG_DFL);
	munmap(s, sizeof *s);
}

Test(ring, dataplane_file_carries_validated_messages)
{
	char dir[] = "/tmp/unicorn-dp-XXXXXX";
	cr_assert(mkdtemp(dir));
	chmod(dir, 0700);
	struct dataplane a, b;
	cr_assert_eq(dp_create(dir, &a), 0, "%s", err_msg());
	cr_assert_eq(dp_open(dir, &b), 0, "%s", err_msg());
	struct msg m, got;
	msg_init(&m, MSG_RUN);
	m.seq = 5;
	m.u.run.slot = 1;
	m.u.run.seq_id = 1;
	m.u.run.n = 2;
	m.u.run.mode = MSG_HEAD_ARGMAX;
	m.u.run.k = 1;
	m.u.run.tokens[0] = 2;
	m.u.run.tokens[1] = 3;
	cr_assert_eq(dp_send(&a.link[DP_GPU].req, &m), 0, "%s", err_msg());
	cr_assert_eq(dp_recv(&b.link[DP_GPU].req, &got), 0, "%s", err_msg());
	cr_assert_eq(got.type, MSG_RUN);
	cr_assert_eq(got.seq, 5u);
	cr_assert_eq(got.u.run.tokens[1], 3u);
	/* garbage in a ring entry is a decode error, not a crash */
	uint32_t junk[8] = { 0xdeadbeef, 1, 2, 3 };
	cr_assert_eq(ring_push(&b.link[DP_NPU].done, junk, sizeof junk), 0);
	cr_assert_eq(dp_recv(&a.link[DP_NPU].done, &got), ERR_INVAL);
	cr_assert_eq(dp_send(&a.link[DP_GPU].req, &m), 0);
	ring_reset(&a.link[DP_GPU].req);
	cr_assert_eq(dp_recv(&b.link[DP_GPU].req, &got), ERR_AGAIN);
	/* the peer rings: one worker to the other, the receiver's bell rung */
	uint32_t seen = ring_bell_seq(b.link[DP_NPU].bell);
	cr_assert_eq(dp_send(&b.link[DP_NPU].peer, &m), 0, "%s", err_msg());
	cr_assert_neq(ring_bell_seq(b.link[DP_NPU].bell), seen, "the npu worker's bell was not rung");
	cr_assert_eq(dp_recv(&a.link[DP_NPU].peer, &got), 0, "%s", err_msg());
	cr_assert_eq(got.u.run.tokens[1], 3u);
	cr_assert_eq(dp_recv(&a.link[DP_GPU].peer, &got), ERR_AGAIN);
	/* the coordinator's epoch bump is seen through the other mapping */
	cr_assert_eq(dp_epoch(&b), 0u);
	dp_epoch_bump(&a);
	cr_assert_eq(dp_epoch(&b), 1u);
	/* a second coordinator makes a new file: the old mapping is not reused;
	 * it retires the old one and rings its worker bells, so a worker asleep
	 * there looks for the new HELLO at once */
	cr_assert_not(dp_retired(&b));
	uint32_t gpu_seen = ring_bell_seq(b.link[DP_GPU].bell), npu_seen = ring_bell_seq(b.link[DP_NPU].bell);
	struct dataplane c;
	cr_assert_eq(dp_create(dir, &c), 0);
	cr_assert_neq(c.base, a.base);
	cr_assert(dp_retired(&b), "the predecessor's file is not marked retired");
	cr_assert_neq(ring_bell_seq(b.link[DP_GPU].bell), gpu_seen, "the gpu worker's old bell was not rung");
	cr_assert_neq(ring_bell_seq(b.link[DP_NPU].bell), npu_seen, "the npu worker's old bell was not rung");
	cr_assert_not(dp_retired(&c));
	dp_close(&a);
	dp_close(&b);
	dp_close(&c);
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, DP_FILE);
	unlink(path);
	rmdir(dir);
}
