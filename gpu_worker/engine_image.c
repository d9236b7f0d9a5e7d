/* engine_image: image rows in place of tokens, and their spans (engine_image.h). */
#include "gpu_worker/engine_image.h"

#include "common/err.h"

int engine_image_spans(const uint32_t *tokens, uint32_t n, uint32_t pos0, uint32_t rows, uint32_t slots,
		       uint32_t *span_end)
{
	for (uint32_t t = 0; t < n;) {
		if (!engine_image_token(tokens[t])) {
			span_end[t++] = 0;
			continue;
		}
		uint32_t r = tokens[t] & ~ENGINE_IMAGE_TOKEN;
		if (rows == 0 || r / rows >= slots)
			return err_set(ERR_RANGE, "engine: image row %u outside the image area (%u images of %u rows)", r,
				       slots, rows);
		/* a span starts at its image's first row and runs whole to its last */
		if (r % rows != 0 || rows > n - t)
			return err_set(ERR_INVAL,
				       "engine: image span cut at position %u (an image's %u rows go in one chunk, in order)",
				       pos0 + t, rows);
		for (uint32_t j = 0; j < rows; j++) {
			if (tokens[t + j] != (ENGINE_IMAGE_TOKEN | (r + j)))
				return err_set(ERR_INVAL, "engine: image span at position %u: row %u is not the image's row %u",
					       pos0 + t, j, r + j);
			span_end[t + j] = pos0 + t + rows - 1;
		}
		t += rows;
	}
	return 0;
}

void engine_image_copy_add(struct engine_image_copy *cp, uint32_t *n, uint32_t src, uint32_t dst)
{
	if (*n && cp[*n - 1].src + cp[*n - 1].n == src && cp[*n - 1].dst + cp[*n - 1].n == dst) {
		cp[*n - 1].n++;
		return;
	}
	cp[(*n)++] = (struct engine_image_copy){ src, dst, 1 };
}

void engine_image_rec(VkCommandBuffer cb, VkBuffer img, VkBuffer h, uint32_t row_bytes,
		      const struct engine_image_copy *cp, uint32_t n)
{
	VkMemoryBarrier before = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
				   .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
				   .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT };
	vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0,
			     NULL, 0, NULL);
	for (uint32_t i = 0; i < n; i++) {
		VkBufferCopy r = { (VkDeviceSize)cp[i].src * row_bytes, (VkDeviceSize)cp[i].dst * row_bytes,
				   (VkDeviceSize)cp[i].n * row_bytes };
		vkCmdCopyBuffer(cb, img, h, 1, &r);
	}
	VkMemoryBarrier after = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
				  .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
				  .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT };
	vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &after, 0,
			     NULL, 0, NULL);
}
