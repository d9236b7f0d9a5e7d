/* The Vulkan runtime on lavapipe: device listing, selection, buffers, transfers. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu_worker/vk.h"
#include "gpu_worker/vk_bw.h"
#include "common/err.h"

Test(vk, list_and_select, .timeout = 30)
{
	struct vk_device_info d[8];
	uint32_t n = 0;
	cr_assert_eq(vk_list_devices(d, 8, &n), 0, "%s", err_msg());
	cr_assert(n >= 1);
	cr_assert(d[0].name[0] && d[0].subgroup_size >= 1 && d[0].n_heaps >= 1);
	struct vk_ctx *vk;
	/* by index and by a case-changed name substring */
	cr_assert_eq(vk_create("0", &vk), 0, "%s", err_msg());
	cr_assert_str_eq(vk->info.name, d[0].name);
	vk_destroy(vk);
	char sub[8] = { 0 };
	for (int i = 0; i < 4 && d[0].name[i]; i++)
		sub[i] = (char)(d[0].name[i] ^ 0x20); /* flip letter case */
	cr_assert_eq(vk_create(sub, &vk), 0, "%s: %s", sub, err_msg());
	vk_destroy(vk);
	cr_assert_eq(vk_create("no-such-device-xyz", &vk), ERR_DEVICE);
	cr_assert(strstr(err_msg(), "no-such-device-xyz"), "%s", err_msg());
	cr_assert_eq(vk_create("99", &vk), ERR_DEVICE);
}

Test(vk, buffers_round_trip, .timeout = 60)
{
	struct vk_ctx *vk;
	cr_assert_eq(vk_create(NULL, &vk), 0, "%s", err_msg());
	/* larger than the 64 MiB staging buffer: exercises chunked copies */
	size_t n = (size_t)70 << 20;
	uint8_t *a = malloc(n), *b = malloc(n);
	for (size_t i = 0; i < n; i++)
		a[i] = (uint8_t)(i * 2654435761u >> 13);
	struct vk_buf *buf;
	cr_assert_eq(vk_buf_create(vk, VK_BUF_DEVICE, n, &buf), 0, "%s", err_msg());
	cr_assert_eq(vk_upload(vk, buf, 0, a, n), 0, "%s", err_msg());
	memset(b, 0, n);
	cr_assert_eq(vk_download(vk, buf, 0, b, n), 0, "%s", err_msg());
	cr_assert(memcmp(a, b, n) == 0);
	cr_assert_eq(vk_upload(vk, buf, n - 4, a, 8), ERR_RANGE);
	cr_assert_eq(vk_fill_zero(vk, buf), 0);
	cr_assert_eq(vk_download(vk, buf, 1000, b, 16), 0);
	for (int i = 0; i < 16; i++)
		cr_assert_eq(b[i], 0);
	vk_buf_destroy(vk, buf);
	struct vk_buf *big;
	cr_assert_eq(vk_buf_create(vk, VK_BUF_DEVICE, ((VkDeviceSize)3) << 30, &big), ERR_UNSUP);
	cr_assert(vk->bytes_device_local + vk->bytes_host_visible > 0);
	free(a);
	free(b);
	vk_destroy(vk);
}

/* A read-only memfd mapping (how workers see the loader's weight regions) used
 * in place through VK_EXT_external_memory_host, read back by the device. */
Test(vk, import_host_memory, .timeout = 60)
{
	struct vk_ctx *vk;
	cr_assert_eq(vk_create(NULL, &vk), 0, "%s", err_msg());
	if (!vk->host_import) {
		/* lavapipe has the extension: only another driver may lack it */
		cr_assert(strcmp(vk->info.type, "cpu") != 0, "lavapipe without VK_EXT_external_memory_host");
		vk_destroy(vk);
		cr_skip_test("%s: no VK_EXT_external_memory_host", vk->info.name);
	}
	cr_assert(vk->host_import_align >= 1 && (vk->host_import_align & (vk->host_import_align - 1)) == 0);
	size_t n = (size_t)1 << 20;
	if (n % vk->host_import_align)
		n = (n / vk->host_import_align + 1) * vk->host_import_align;
	int fd = memfd_create("unicorn-test-import", MFD_CLOEXEC);
	cr_assert(fd >= 0);
	cr_assert_eq(ftruncate(fd, (off_t)n), 0);
	uint8_t *w = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert(w != MAP_FAILED);
	for (size_t i = 0; i < n; i++)
		w[i] = (uint8_t)(i * 2654435761u >> 11);
	const uint8_t *ro = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert(ro != MAP_FAILED);
	if ((uintptr_t)ro % vk->host_import_align) {
		/* alignments above the page size: nothing to test with a bare mapping */
		munmap((void *)ro, n);
		munmap(w, n);
		close(fd);
		vk_destroy(vk);
		cr_skip_test("mapping not aligned to %llu", (unsigned long long)vk->host_import_align);
	}
	struct vk_buf *b;
	cr_assert_eq(vk_buf_import_host(vk, ro, n, &b), 0, "%s", err_msg());
	cr_assert(b->imported && b->size == n);
	cr_assert_eq(vk->bytes_imported, n);
	/* the device copies out of the imported memory: the same bytes */
	uint8_t *got = malloc(n);
	memset(got, 0, n);
	cr_assert_eq(vk_download(vk, b, 0, got, n), 0, "%s", err_msg());
	cr_assert(memcmp(got, w, n) == 0);
	/* in place, not a snapshot: a later write by the owner is seen */
	w[12345] ^= 0xff;
	cr_assert_eq(vk_download(vk, b, 12344, got, 4), 0, "%s", err_msg());
	cr_assert_eq(got[1], w[12345]);
	/* nothing writes imported memory (it may be mapped read-only) */
	cr_assert_eq(vk_upload(vk, b, 0, got, 16), ERR_INVAL);
	cr_assert_eq(vk_fill_zero(vk, b), ERR_INVAL);
	cr_assert_eq(ro[0], w[0]);
	vk_buf_destroy(vk, b);
	/* misaligned pointer or size: refused with the alignment named */
	cr_assert_eq(vk_buf_import_host(vk, ro + 16, vk->host_import_align, &b), ERR_INVAL);
	cr_assert(b == NULL);
	cr_assert(strstr(err_msg(), "minImportedHostPointerAlignment"), "%s", err_msg());
	if (vk->host_import_align > 1)
		cr_assert_eq(vk_buf_import_host(vk, ro, vk->host_import_align + 1, &b), ERR_INVAL);
	free(got);
	munmap((void *)ro, n);
	munmap(w, n);
	close(fd);
	vk_destroy(vk);
}

/* The copy-bandwidth yardstick of bench --profile: a timed copy of up to 256 MiB. */
Test(vk, copy_bandwidth, .timeout = 120)
{
	struct vk_ctx *vk;
	cr_assert_eq(vk_create(NULL, &vk), 0, "%s", err_msg());
	uint64_t bytes = 0;
	double gbs = 0;
	cr_assert_eq(vk_copy_bw(vk, &bytes, &gbs), 0, "%s", err_msg());
	cr_assert(bytes > 0 && bytes <= 256ull << 20 && bytes % 4096 == 0, "copied %llu bytes", (unsigned long long)bytes);
	cr_assert(gbs > 0.01 && gbs < 1e5, "copy bandwidth %g GB/s", gbs);
	vk_destroy(vk);
}

/* vk_submit_wait_expect: a submission expected to take 5 ms sleeps until one
 * poll bound before that, then polls: it returns after about 5 ms, the work
 * done; one with no expectation (or a shorter one than two bounds) returns
 * as soon as the work is done. UNICORN_SPIN_US turns the poll on, as on a
 * GPU (lavapipe's default is no poll, and no sleep). */
static double wait_ms(struct vk_ctx *vk, VkCommandBuffer cb, uint64_t expect_ns)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(vk_submit_wait_expect(vk, &cb, 1, expect_ns), 0, "%s", err_msg());
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
}

Test(vk, submit_wait_expect, .timeout = 60)
{
	setenv("UNICORN_SPIN_US", "100", 1);
	struct vk_ctx *vk;
	cr_assert_eq(vk_create(NULL, &vk), 0, "%s", err_msg());
	cr_assert_eq(vk->spin_us, 100);
	struct vk_buf *buf;
	cr_assert_eq(vk_buf_create(vk, VK_BUF_HOST, 4096, &buf), 0, "%s", err_msg());
	VkCommandBuffer cb;
	cr_assert_eq(vk_cmd_alloc(vk, &cb), 0, "%s", err_msg());
	cr_assert_eq(vk_cmd_begin(cb, false), 0);
	vkCmdFillBuffer(cb, buf->buf, 0, 4096, 0x5a5a5a5au);
	vk_cmd_barrier(cb);
	cr_assert_eq(vkEndCommandBuffer(cb), VK_SUCCESS);
	double fast = wait_ms(vk, cb, 0);
	memset(buf->map, 0, 4096);
	double slept = wait_ms(vk, cb, 5000000);
	cr_assert_geq(slept, 4.8, "returned after %.3f ms: no sleep until a bound before the expected 5 ms", slept);
	cr_assert_eq(((uint32_t *)buf->map)[1023], 0x5a5a5a5au, "the fill did not run");
	/* 150 us: less than two bounds, polled from the submission as before.
	 * The best of five: on a loaded 2-core CI machine one wait can lose the
	 * CPU for milliseconds to other tests, which says nothing about sleeping. */
	double polled = 1e9;
	for (int i = 0; i < 5; i++) {
		double ms = wait_ms(vk, cb, 150000);
		if (ms < polled)
			polled = ms;
	}
	cr_assert_lt(polled, 4.0, "no expectation %.3f ms, 150 us expected %.3f ms", fast, polled);
	vk_cmd_free(vk, cb);
	vk_buf_destroy(vk, buf);
	vk_destroy(vk);
}
