/* dataplane: the step rings' shared file (see ipc/dataplane.h). */
#include "ipc/dataplane.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "ipc/rundir.h"

struct dp_header {
	uint32_t magic, version, n_links, entry_size, capacity, coord_pid, epoch;
	/* region identities (ipc/attach.h), each a lo/hi pair of u32: [0] the
	 * coordinator's, [1 + link] the worker's on that link */
	uint32_t ident[1 + DP_LINKS][2];
	uint32_t retired;          /* set by the next coordinator (dp_retired) */
	uint32_t pad[RING_LINE / 4 - 8 - 2 * (1 + DP_LINKS)];
};
_Static_assert(sizeof(struct dp_header) == RING_LINE, "header is one line");

static size_t ring_span(void)
{
	return ring_bytes(DP_ENTRY_SIZE, DP_CAPACITY);
}

static size_t link_span(void)
{
	return sizeof(struct ring_bell) + 3 * ring_span();
}

static size_t dp_size(void)
{
	return sizeof(struct dp_header) + sizeof(struct ring_bell) + DP_LINKS * link_span();
}

/* Point dp's views into the mapping (format: lay the rings out first). */
static int carve(struct dataplane *dp, bool format)
{
	unsigned char *p = (unsigned char *)dp->base + sizeof(struct dp_header);
	dp->epoch = &((struct dp_header *)dp->base)->epoch;
	dp->coord_bell = (struct ring_bell *)p;
	p += sizeof(struct ring_bell);
	if (format)
		ring_bell_init(dp->coord_bell);
	for (int i = 0; i < DP_LINKS; i++) {
		struct dp_link_view *l = &dp->link[i];
		l->bell = (struct ring_bell *)p;
		p += sizeof(struct ring_bell);
		if (format)
			ring_bell_init(l->bell);
		int rc;
		for (int r = 0; format && r < 3; r++)
			if ((rc = ring_format(p + r * ring_span(), ring_span(), DP_ENTRY_SIZE, DP_CAPACITY)))
				return rc;
		if ((rc = ring_attach(&l->req, p, ring_span(), l->bell)) ||
		    (rc = ring_attach(&l->done, p + ring_span(), ring_span(), dp->coord_bell)) ||
		    (rc = ring_attach(&l->peer, p + 2 * ring_span(), ring_span(), l->bell)))
			return rc;
		p += 3 * ring_span();
	}
	return 0;
}

/* A restarted coordinator's predecessor left its file behind, and its
 * workers asleep on its bells: mark it retired and ring every worker bell,
 * so they go to their link for the new coordinator's HELLO at once instead of
 * at their next timeout (an idle worker sleeps long). Best effort: a missing
 * or foreign file is left alone. */
static void retire_predecessor(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	struct stat st;
	size_t size = dp_size();
	void *base = MAP_FAILED;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && (size_t)st.st_size == size)
		base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED)
		return;
	struct dp_header *h = base;
	struct dataplane old = { .base = base, .size = size };
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == DP_MAGIC && h->version == DP_VERSION &&
	    h->n_links == DP_LINKS && carve(&old, false) == 0) {
		__atomic_store_n(&h->retired, 1, __ATOMIC_RELEASE);
		for (int i = 0; i < DP_LINKS; i++)
			ring_bell_ring(old.link[i].bell);
	}
	munmap(base, size);
}

bool dp_retired(const struct dataplane *dp)
{
	return dp->base && __atomic_load_n(&((const struct dp_header *)dp->base)->retired, __ATOMIC_ACQUIRE);
}

int dp_create(const char *rundir, struct dataplane *dp)
{
	memset(dp, 0, sizeof *dp);
	char path[RUNDIR_PATH_MAX], tmp[RUNDIR_PATH_MAX];
	int rc;
	if ((rc = rundir_path(rundir, DP_FILE, path, sizeof path)) ||
	    (rc = rundir_path(rundir, DP_FILE ".new", tmp, sizeof tmp)))
		return rc;
	unlink(tmp);
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_set(ERR_IO, "dataplane: %s: %s", tmp, strerror(errno));
	size_t size = dp_size();
	if (ftruncate(fd, (off_t)size) < 0) {
		rc = err_set(ERR_IO, "dataplane: %s: resize: %s", tmp, strerror(errno));
		goto out_fd;
	}
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = err_set(ERR_IO, "dataplane: %s: mmap: %s", tmp, strerror(errno));
		goto out_fd;
	}
	dp->base = base;
	dp->size = size;
	struct dp_header *h = base;
	memset(h, 0, sizeof *h);
	h->version = DP_VERSION;
	h->n_links = DP_LINKS;
	h->entry_size = DP_ENTRY_SIZE;
	h->capacity = DP_CAPACITY;
	h->coord_pid = (uint32_t)getpid();
	if ((rc = carve(dp, true)))
		goto out_map;
	__atomic_store_n(&h->magic, DP_MAGIC, __ATOMIC_RELEASE);
	retire_predecessor(path);
	/* rename: a worker never opens a half-made file */
	if (rename(tmp, path) < 0) {
		rc = err_set(ERR_IO, "dataplane: rename to %s: %s", path, strerror(errno));
		goto out_map;
	}
	close(fd);
	return 0;
out_map:
	munmap(base, size);
	memset(dp, 0, sizeof *dp);
out_fd:
	close(fd);
	unlink(tmp);
	return rc;
}

int dp_open(const char *rundir, struct dataplane *dp)
{
	memset(dp, 0, sizeof *dp);
	char path[RUNDIR_PATH_MAX];
	int rc = rundir_path(rundir, DP_FILE, path, sizeof path);
	if (rc)
		return rc;
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "dataplane: %s: %s", path,
			       strerror(errno));
	struct stat st;
	size_t size = dp_size();
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid()) {
		rc = err_set(ERR_INVAL, "dataplane: %s: not a regular file of ours", path);
		goto out_fd;
	}
	if ((uint64_t)st.st_size != size) {
		rc = err_set(ERR_INVAL, "dataplane: %s: %lld bytes, this build expects %zu", path,
			     (long long)st.st_size, size);
		goto out_fd;
	}
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = err_set(ERR_IO, "dataplane: %s: mmap: %s", path, strerror(errno));
		goto out_fd;
	}
	close(fd);
	dp->base = base;
	dp->size = size;
	const struct dp_header *h = base;
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != DP_MAGIC || h->version != DP_VERSION ||
	    h->n_links != DP_LINKS || h->entry_size != DP_ENTRY_SIZE || h->capacity != DP_CAPACITY) {
		rc = err_set(ERR_INVAL, "dataplane: %s: header (version %u, %u links, %u x %u) is not this "
			     "build's (%d, %d, %d x %d)", path, h->version, h->n_links, h->capacity,
			     h->entry_size, DP_VERSION, DP_LINKS, DP_CAPACITY, DP_ENTRY_SIZE);
		dp_close(dp);
		return rc;
	}
	if ((rc = carve(dp, false)))
		dp_close(dp);
	return rc;
out_fd:
	close(fd);
	return rc;
}

void dp_close(struct dataplane *dp)
{
	if (dp->base)
		munmap(dp->base, dp->size);
	memset(dp, 0, sizeof *dp);
}

uint32_t dp_epoch(const struct dataplane *dp)
{
	return __atomic_load_n(dp->epoch, __ATOMIC_ACQUIRE);
}

void dp_epoch_bump(struct dataplane *dp)
{
	__atomic_store_n(dp->epoch, __atomic_load_n(dp->epoch, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

static uint64_t ident_get(const struct dataplane *dp, int i)
{
	const struct dp_header *h = dp->base;
	uint32_t hi = __atomic_load_n(&h->ident[i][1], __ATOMIC_ACQUIRE);
	uint32_t lo = __atomic_load_n(&h->ident[i][0], __ATOMIC_ACQUIRE);
	return (uint64_t)hi << 32 | lo;
}

static void ident_set(struct dataplane *dp, int i, uint64_t v)
{
	struct dp_header *h = dp->base;
	__atomic_store_n(&h->ident[i][0], (uint32_t)v, __ATOMIC_RELEASE);
	__atomic_store_n(&h->ident[i][1], (uint32_t)(v >> 32), __ATOMIC_RELEASE);
}

uint64_t dp_coord_ident(const struct dataplane *dp) { return dp->base ? ident_get(dp, 0) : 0; }
void dp_set_coord_ident(struct dataplane *dp, uint64_t ident) { if (dp->base) ident_set(dp, 0, ident); }

uint64_t dp_worker_ident(const struct dataplane *dp, enum dp_link l)
{
	return dp->base && (unsigned)l < DP_LINKS ? ident_get(dp, 1 + (int)l) : 0;
}

void dp_set_worker_ident(struct dataplane *dp, enum dp_link l, uint64_t ident)
{
	if (dp->base && (unsigned)l < DP_LINKS)
		ident_set(dp, 1 + (int)l, ident);
}

int dp_send(struct ring *r, const struct msg *m)
{
	unsigned char buf[DP_ENTRY_SIZE - 4];
	size_t len;
	int rc = msg_encode(m, buf, sizeof buf, &len);
	if (rc)
		return err_prefix(rc, "dataplane: send %s", msg_type_name(m->type));
	return ring_push(r, buf, (uint32_t)len);
}

int dp_recv(struct ring *r, struct msg *out)
{
	unsigned char buf[DP_ENTRY_SIZE - 4];
	uint32_t len;
	int rc = ring_pop(r, buf, sizeof buf, &len);
	if (rc)
		return rc;
	rc = msg_decode(buf, len, out);
	return rc ? err_prefix(rc, "dataplane: receive") : 0;
}
