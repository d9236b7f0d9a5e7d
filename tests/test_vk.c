/* The Vulkan runtime on lavapipe: device listing, selection, buffers, transfers. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_worker/vk.h"
#include "ipc/err.h"

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
