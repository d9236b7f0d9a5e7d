/* live: the liveness page (see ipc/live.h). */
#include "ipc/live.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "ipc/rundir.h"

/* The page lives in a file: its fields are plain integers, accessed through
 * these casts as atomics (lock-free for 32 and 64 bits on every target). */
#define A32(x) ((_Atomic uint32_t *)&(x))
#define A64(x) ((_Atomic uint64_t *)&(x))

_Static_assert(sizeof(struct live_page) <= 4096, "the liveness page fits one page");

const char *live_file(enum msg_role role)
{
	switch (role) {
	case MSG_ROLE_LOADER: return "ctl-loader.live";
	case MSG_ROLE_NPU_WORKER: return "ctl-npu.live";
	case MSG_ROLE_GPU_WORKER: return "ctl-gpu.live";
	case MSG_ROLE_COORDINATOR: return "ctl-coordinator.live";
	case MSG_ROLE_API: return "ctl-api.live";
	default: return NULL;
	}
}

static int page_path(const char *rundir, enum msg_role role, char *out, size_t cap)
{
	const char *f = live_file(role);
	if (!f)
		return err_set(ERR_INVAL, "live: role %d has no liveness page", (int)role);
	if (!rundir)
		return err_set(ERR_INVAL, "live: rundir: missing");
	return rundir_path(rundir, f, out, cap);
}

int live_create(const char *rundir, enum msg_role role, uint32_t stall_ms, struct live_page **out)
{
	*out = NULL;
	char path[RUNDIR_PATH_MAX], tmp[RUNDIR_PATH_MAX + 16];
	int rc = page_path(rundir, role, path, sizeof path);
	if (rc)
		return rc;
	snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
	int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_set(ERR_IO, "live: %s: %s", tmp, strerror(errno));
	struct live_page *p = MAP_FAILED;
	if (ftruncate(fd, 4096) == 0)
		p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int e = errno;
	close(fd);
	if (p == MAP_FAILED) {
		unlink(tmp);
		return err_set(ERR_IO, "live: %s: %s", tmp, strerror(e));
	}
	p->version = LIVE_VERSION;
	p->pid = (uint32_t)getpid();
	p->stall_ms = stall_ms;
	p->status.role = (uint32_t)role;
	p->status.pid = (uint32_t)getpid();
	atomic_store(A32(p->magic), LIVE_MAGIC); /* complete before it is found */
	if (rename(tmp, path)) {
		e = errno;
		munmap(p, 4096);
		unlink(tmp);
		return err_set(ERR_IO, "live: %s: %s", path, strerror(e));
	}
	*out = p;
	return 0;
}

void live_beat(struct live_page *p, uint64_t now_ns)
{
	if (p)
		atomic_store_explicit(A64(p->beat_ns), now_ns, memory_order_release);
}

void live_publish(struct live_page *p, const struct msg_status *st)
{
	if (!p)
		return;
	uint32_t s = atomic_load_explicit(A32(p->seq), memory_order_relaxed);
	atomic_store_explicit(A32(p->seq), s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy(&p->status, st, sizeof *st);
	atomic_store_explicit(A32(p->seq), s + 2, memory_order_release);
}

bool live_row_differs(const struct msg_status *a, const struct msg_status *b)
{
	struct msg_status x, y;
	memcpy(&x, a, sizeof x);
	memcpy(&y, b, sizeof y);
	x.uptime_ns = y.uptime_ns = 0;
	return memcmp(&x, &y, sizeof x) != 0;
}

void live_close(struct live_page *p, const char *rundir, enum msg_role role, bool unlink_path)
{
	if (!p)
		return;
	char path[RUNDIR_PATH_MAX];
	/* one process per role: no successor exists before this one is gone */
	if (unlink_path && page_path(rundir, role, path, sizeof path) == 0)
		unlink(path);
	munmap(p, 4096);
}

void live_set_load(struct live_page *p, uint32_t running, uint32_t queued, uint32_t slots)
{
	if (!p)
		return;
	atomic_store_explicit(A32(p->load.running), running, memory_order_relaxed);
	atomic_store_explicit(A32(p->load.queued), queued, memory_order_relaxed);
	atomic_store_explicit(A32(p->load.slots), slots, memory_order_relaxed);
	atomic_store_explicit(A32(p->load.set), 1, memory_order_release);
}

bool live_read_load(const struct live_page *p, struct live_load *out)
{
	struct live_page *q = (struct live_page *)p; /* atomics take non-const pointers */
	memset(out, 0, sizeof *out);
	if (!q || !atomic_load_explicit(A32(q->load.set), memory_order_acquire))
		return false;
	out->running = atomic_load_explicit(A32(q->load.running), memory_order_relaxed);
	out->queued = atomic_load_explicit(A32(q->load.queued), memory_order_relaxed);
	out->slots = atomic_load_explicit(A32(q->load.slots), memory_order_relaxed);
	out->set = 1;
	return true;
}

int live_open(const char *rundir, enum msg_role role, pid_t pid, const struct live_page **out)
{
	*out = NULL;
	char path[RUNDIR_PATH_MAX];
	int rc = page_path(rundir, role, path, sizeof path);
	if (rc)
		return rc;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ERR_AGAIN;
	struct stat st;
	const struct live_page *p = MAP_FAILED;
	/* a short file would fault on access: check the size first */
	if (fstat(fd, &st) == 0 && st.st_size >= 4096)
		p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return ERR_AGAIN;
	if (atomic_load(A32(((struct live_page *)p)->magic)) != LIVE_MAGIC || p->version != LIVE_VERSION ||
	    p->pid != (uint32_t)pid) {
		munmap((void *)p, 4096);
		return ERR_AGAIN;
	}
	*out = p;
	return 0;
}

bool live_read(const struct live_page *p, uint64_t *beat_ns, uint32_t *stall_ms, struct msg_status *st)
{
	struct live_page *q = (struct live_page *)p; /* atomics take non-const pointers */
	*beat_ns = atomic_load_explicit(A64(q->beat_ns), memory_order_acquire);
	*stall_ms = q->stall_ms;
	for (int tries = 0; tries < 100; tries++) {
		uint32_t s0 = atomic_load_explicit(A32(q->seq), memory_order_acquire);
		if (s0 & 1)
			continue;
		memcpy(st, &q->status, sizeof *st);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(A32(q->seq), memory_order_relaxed) == s0) {
			/* the row's strings are the writer's: keep them terminated */
			st->backend[sizeof st->backend - 1] = 0;
			st->device[sizeof st->device - 1] = 0;
			return true;
		}
	}
	return false;
}

void live_unmap(const struct live_page *p)
{
	if (p)
		munmap((void *)p, 4096);
}
