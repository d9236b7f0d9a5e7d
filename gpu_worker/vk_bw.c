/* vk_copy_bw: the device's copy bandwidth, timed with timestamps around a
 * plain 16-byte-word copy kernel (shaders/copy_bw.comp). */
#include "gpu_worker/vk_bw.h"

#include "common/err.h"

#define BW_WG 256u
#define BW_MAX_BYTES (256ull << 20)
#define BW_REPS 5

int vk_copy_bw(struct vk_ctx *vk, uint64_t *bytes, double *gbs)
{
	*gbs = 0;
	if (!vk->timestamps)
		return err_set(ERR_UNSUP, "copy bandwidth: %s has no timestamps on the compute queue", vk->info.name);
	/* 256 MiB a buffer (far past any cache), less on a small device */
	uint64_t n = vk_device_local_free(vk) / 8;
	n = n < BW_MAX_BYTES ? n : BW_MAX_BYTES;
	if (n > vk->props.limits.maxStorageBufferRange)
		n = vk->props.limits.maxStorageBufferRange;
	n &= ~(uint64_t)(BW_WG * 16 - 1);
	if (n == 0)
		return err_set(ERR_NOMEM, "copy bandwidth: no device memory to copy");
	*bytes = n;
	struct vk_buf *src = NULL, *dst = NULL;
	struct vk_pipe pipe;
	const uint32_t spec[1] = { BW_WG };
	int rc = vk_pipe_create(vk, "copy_bw", 2, 4, spec, 1, &pipe);
	if (rc)
		return rc;
	rc = vk_buf_create(vk, VK_BUF_DEVICE, n, &src);
	if (!rc)
		rc = vk_buf_create(vk, VK_BUF_DEVICE, n, &dst);
	VkDescriptorSet set;
	struct vk_bind b[2] = { { src, 0, 0 }, { dst, 0, 0 } };
	if (!rc)
		rc = vk_set_create(vk, &pipe, b, &set);
	uint32_t words = (uint32_t)(n / 16), groups = words / BW_WG;
	uint32_t gx = groups < vk->props.limits.maxComputeWorkGroupCount[0] ? groups : vk->props.limits.maxComputeWorkGroupCount[0];
	uint64_t best = 0;
	for (int rep = 0; rep <= BW_REPS && !rc; rep++) { /* rep 0 warms up */
		VkCommandBuffer cb;
		if ((rc = vk_cmd_alloc(vk, &cb)))
			break;
		rc = vk_cmd_begin(cb, true);
		if (!rc) {
			vk_cmd_reset_queries(cb, vk, 0, 2);
			vk_cmd_timestamp(cb, vk, 0);
			vk_cmd_dispatch(cb, &pipe, set, &words, gx, 1, 1);
			vk_cmd_timestamp(cb, vk, 1);
			/* NVIDIA never executes a command buffer left recording (lavapipe does) */
			VkResult r = vkEndCommandBuffer(cb);
			rc = r == VK_SUCCESS ? vk_submit_wait(vk, cb) : err_set(ERR_DEVICE, "copy bandwidth: vkEndCommandBuffer (%d)", (int)r);
		}
		vk_cmd_free(vk, cb);
		uint64_t ns[2];
		if (!rc && !(rc = vk_query_ns(vk, 0, 2, ns)) && rep > 0 && ns[1] > ns[0] && (best == 0 || ns[1] - ns[0] < best))
			best = ns[1] - ns[0];
	}
	if (!rc)
		*gbs = best ? 2.0 * (double)n / (double)best : 0; /* bytes read + bytes written */
	vk_buf_destroy(vk, src);
	vk_buf_destroy(vk, dst);
	vk_pipe_destroy(vk, &pipe);
	return rc;
}
