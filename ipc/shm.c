/* shm: sealed memfd regions, optionally wrapped as udmabuf dma-bufs. */
#include "ipc/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/udmabuf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

#define UDMABUF_DEV "/dev/udmabuf"
#define UDMABUF_LIMIT "/sys/module/udmabuf/parameters/size_limit_mb"

void shm_init(struct shm_region *r)
{
	memset(r, 0, sizeof *r);
	r->fd = -1;
	r->dmabuf_fd = -1;
}

const char *shm_path_name(enum shm_path p)
{
	return p == SHM_PATH_UDMABUF ? "udmabuf" : p == SHM_PATH_MEMFD ? "memfd" : "?";
}

/* The module's per-buffer limit in bytes (its default is 64 MiB). */
static uint64_t udmabuf_limit(void)
{
	FILE *f = fopen(UDMABUF_LIMIT, "re");
	unsigned long long mb = 64;
	if (f) {
		if (fscanf(f, "%llu", &mb) != 1)
			mb = 64;
		fclose(f);
	}
	return (uint64_t)mb << 20;
}

/* Wrap r->fd as a dma-buf if possible; records the outcome in r->why. */
static void try_udmabuf(struct shm_region *r)
{
	int dev = open(UDMABUF_DEV, O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		snprintf(r->why, sizeof r->why, "%s: %s", UDMABUF_DEV, strerror(errno));
		return;
	}
	uint64_t limit = udmabuf_limit();
	if (r->size > limit) {
		snprintf(r->why, sizeof r->why, "%s: region of %" PRIu64 " bytes exceeds size_limit_mb %" PRIu64,
			 UDMABUF_DEV, r->size, limit >> 20);
		close(dev);
		return;
	}
	struct udmabuf_create c = {
		.memfd = (uint32_t)r->fd, .flags = UDMABUF_FLAGS_CLOEXEC, .offset = 0, .size = r->size
	};
	int fd = ioctl(dev, UDMABUF_CREATE, &c);
	if (fd < 0)
		snprintf(r->why, sizeof r->why, "%s: UDMABUF_CREATE: %s", UDMABUF_DEV, strerror(errno));
	else {
		r->dmabuf_fd = fd;
		r->path = SHM_PATH_UDMABUF;
		snprintf(r->why, sizeof r->why, "%s: dma-buf created", UDMABUF_DEV);
	}
	close(dev);
}

int shm_create(const char *name, uint64_t size, struct shm_region *r)
{
	shm_init(r);
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	if (!size || size > SHM_MAX_REGION)
		return err_set(ERR_RANGE, "shm: %s: size %" PRIu64 " outside [1, %llu]", name, size,
			       SHM_MAX_REGION);
	size = (size + page - 1) / page * page;
	char label[80];
	snprintf(label, sizeof label, "unicorn:%s", name);
	int rc;
	r->fd = memfd_create(label, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (r->fd < 0)
		return err_set(ERR_IO, "shm: %s: memfd_create: %s", name, strerror(errno));
	if (ftruncate(r->fd, (off_t)size) < 0) {
		rc = err_set(errno == ENOMEM || errno == ENOSPC ? ERR_NOMEM : ERR_IO,
			     "shm: %s: ftruncate %" PRIu64 ": %s", name, size, strerror(errno));
		goto out_fd;
	}
	if (fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = err_set(ERR_IO, "shm: %s: seal: %s", name, strerror(errno));
		goto out_fd;
	}
	r->size = size;
	r->addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->addr == MAP_FAILED) {
		r->addr = NULL;
		rc = err_set(ERR_NOMEM, "shm: %s: mmap %" PRIu64 " bytes: %s", name, size, strerror(errno));
		goto out_fd;
	}
	r->writable = true;
	r->path = SHM_PATH_MEMFD;
	try_udmabuf(r);
	return 0;
out_fd:
	close(r->fd);
	shm_init(r);
	return rc;
}

int shm_import(int fd, uint64_t expected_size, bool writable, struct shm_region *r)
{
	shm_init(r);
	struct stat st;
	int rc;
	if (fd < 0)
		return err_set(ERR_INVAL, "shm: import: fd %d invalid", fd);
	if (fstat(fd, &st) < 0) {
		rc = err_set(ERR_IO, "shm: import fd %d: fstat: %s", fd, strerror(errno));
		goto out_fd;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t)st.st_size != expected_size) {
		rc = err_set(ERR_RANGE, "shm: import fd %d: size %lld, expected %" PRIu64, fd,
			     (long long)st.st_size, expected_size);
		goto out_fd;
	}
	if (!expected_size || expected_size > SHM_MAX_REGION) {
		rc = err_set(ERR_RANGE, "shm: import fd %d: size %" PRIu64 " outside [1, %llu]", fd,
			     expected_size, SHM_MAX_REGION);
		goto out_fd;
	}
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		rc = err_set(ERR_INVAL, "shm: import fd %d: not a memfd sealed against shrinking", fd);
		goto out_fd;
	}
	int prot = PROT_READ | (writable ? PROT_WRITE : 0);
	void *a = mmap(NULL, expected_size, prot, MAP_SHARED, fd, 0);
	if (a == MAP_FAILED) {
		rc = err_set(ERR_IO, "shm: import fd %d: mmap %" PRIu64 " bytes: %s", fd, expected_size,
			     strerror(errno));
		goto out_fd;
	}
	r->fd = fd;
	r->addr = a;
	r->size = expected_size;
	r->writable = writable;
	r->path = SHM_PATH_MEMFD;
	snprintf(r->why, sizeof r->why, "imported memfd");
	return 0;
out_fd:
	close(fd);
	return rc;
}

int shm_check_range(const struct shm_region *r, uint64_t off, uint64_t len)
{
	if (!r->addr || off > r->size || len > r->size - off)
		return err_set(ERR_RANGE, "shm: range [%" PRIu64 ", +%" PRIu64 ") outside region of %" PRIu64
			       " bytes", off, len, r->size);
	return 0;
}

void *shm_ptr(const struct shm_region *r, uint64_t off, uint64_t len)
{
	if (shm_check_range(r, off, len))
		return NULL;
	return (uint8_t *)r->addr + off;
}

void shm_destroy(struct shm_region *r)
{
	if (r->addr)
		munmap(r->addr, r->size);
	if (r->dmabuf_fd >= 0)
		close(r->dmabuf_fd);
	if (r->fd >= 0)
		close(r->fd);
	shm_init(r);
}
