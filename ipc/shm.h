/* shm: shared memory regions (weights, manifest, activations).
 *
 * A region is a memfd sealed against shrinking and growing (F_SEAL_SHRINK |
 * F_SEAL_GROW | F_SEAL_SEAL; never a write seal, which udmabuf refuses), mapped
 * MAP_SHARED. When /dev/udmabuf exists and the region fits its size limit
 * (/sys/module/udmabuf/parameters/size_limit_mb), the memfd is also wrapped as
 * a dma-buf (dmabuf_fd) so RADV/XRT can import it; otherwise only the memfd
 * path is used. Which path ran, and why, is recorded in the region.
 *
 * The caller owns struct shm_region; shm_destroy releases what it holds. */
#ifndef UNICORN_SHM_H
#define UNICORN_SHM_H

#include <stdbool.h>
#include <stdint.h>

#define SHM_MAX_REGION (2ull << 30)   /* 2 GiB: one Vulkan buffer */
#define SHM_DEFAULT_REGION (1ull << 30) /* planner's target size per region */

enum shm_path { SHM_PATH_MEMFD = 1, SHM_PATH_UDMABUF = 2 };

struct shm_region {
	int fd;                 /* memfd (mmap, fd passing); -1 when empty */
	int dmabuf_fd;          /* dma-buf wrapping fd, or -1 (memfd path / imported) */
	void *addr;             /* mapping of [0, size) */
	uint64_t size;          /* bytes (memfd size, page-rounded at create) */
	bool writable;
	enum shm_path path;
	char why[160];          /* why this path (e.g. "/dev/udmabuf: No such file or directory") */
};

/* Create a region of at least size bytes (rounded up to the page size;
 * 1..SHM_MAX_REGION), zero-filled, mapped read-write. name shows in
 * /proc/PID/fd ("unicorn:NAME"). Sets r->path / r->why. */
int shm_create(const char *name, uint64_t size, struct shm_region *r);

/* Map a region received from another process. Takes ownership of fd, also on
 * failure (it is closed then). Checks fstat size == expected_size and that the
 * memfd is sealed against shrinking (else a peer could truncate it under us
 * and turn reads into SIGBUS). writable: map read-write, else read-only. */
int shm_import(int fd, uint64_t expected_size, bool writable, struct shm_region *r);

/* 0 if [off, off+len) lies within the region (overflow-safe), else ERR_RANGE. */
int shm_check_range(const struct shm_region *r, uint64_t off, uint64_t len);

/* Pointer to off after shm_check_range(off, len); NULL if out of range. */
void *shm_ptr(const struct shm_region *r, uint64_t off, uint64_t len);

/* Unmap and close; r is left empty (fd = dmabuf_fd = -1, addr = NULL). Safe
 * on an empty or zeroed-then-initialised region. */
void shm_destroy(struct shm_region *r);

/* Mark r empty (call before shm_create/import failure paths may destroy it). */
void shm_init(struct shm_region *r);

const char *shm_path_name(enum shm_path p);

#endif
