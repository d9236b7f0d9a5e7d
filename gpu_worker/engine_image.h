/* engine_image: image rows in place of tokens, and Gemma 3's bidirectional
 * attention among one image's rows during prefill (docs/vision.md).
 *
 * The engine holds an image area of image_slots images of image_rows rows
 * each (struct engine_opts; the vision tower's 256 x n_embd output per image,
 * engine_image_set). A token id ENGINE_IMAGE_TOKEN | r in a prefill chunk
 * (engine_forward_chunks) stands for row r of that area: its row is copied
 * over the embedded row, unscaled (Gemma 3 does not scale image embeddings by
 * sqrt(n_embd) as it does token rows). The rows of one image are its span:
 * row j of slot s is r = s * image_rows + j, and every row of a span sees
 * every key of the span, so a span must lie whole in one chunk, its rows
 * consecutive (ERR_INVAL otherwise): its keys are all written (rope_kv)
 * before any of its rows attend. */
#ifndef UNICORN_ENGINE_IMAGE_H
#define UNICORN_ENGINE_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include <vulkan/vulkan.h>

/* ids with this bit name image-area rows: outside every vocabulary (the API
 * and the tokenizer never give them) */
#define ENGINE_IMAGE_TOKEN 0x80000000u

static inline bool engine_image_token(uint32_t id) { return (id & ENGINE_IMAGE_TOKEN) != 0; }

/* A run of n image-area rows copied to consecutive step rows. */
struct engine_image_copy {
	uint32_t src, dst, n;
};

/* Check the image tokens of one chunk (tokens[0..n) at positions pos0..)
 * against an area of slots images of rows rows each (rows 0: no images, any
 * image token is refused) and give each token the last position its
 * attention sees beyond its own: span_end[t] = the position of its image's
 * last row for an image row, 0 for a text token (attn.glsl's last =
 * max(pos, span_end)). ERR_RANGE: a row outside the area; ERR_INVAL: a span
 * cut by the chunk's ends, or not its image's rows in order. */
int engine_image_spans(const uint32_t *tokens, uint32_t n, uint32_t pos0, uint32_t rows, uint32_t slots,
		       uint32_t *span_end);

/* Append "area row src to step row dst" to cp[*n] (cap entries), extending
 * the last run where it continues it. */
void engine_image_copy_add(struct engine_image_copy *cp, uint32_t *n, uint32_t src, uint32_t dst);

/* Record the copies of image rows (row_bytes each) from the area img over the
 * embedded rows h, between two full barriers' worth of dependencies: after
 * get_rows wrote h, before anything reads it. */
void engine_image_rec(VkCommandBuffer cb, VkBuffer img, VkBuffer h, uint32_t row_bytes,
		      const struct engine_image_copy *cp, uint32_t n);

#endif
