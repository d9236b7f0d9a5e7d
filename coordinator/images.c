/* images: image prompts and the gpu worker's image area (images.h). */
#include "coordinator/images.h"

#include <string.h>

#include "common/err.h"
#include "ipc/imagefile.h"

int images_check_prompt(const uint32_t *prompt, uint32_t n, const uint8_t (*digests)[MSG_DIGEST], uint32_t n_images,
			uint32_t *rows, uint32_t *pos)
{
	uint32_t k = 0, len = 0;
	for (uint32_t i = 0; i < n;) {
		if (!(prompt[i] & IMAGES_ROW)) {
			i++;
			continue;
		}
		uint32_t a = i;
		while (i < n && (prompt[i] & IMAGES_ROW))
			i++;
		if (k >= n_images)
			return err_set(ERR_INVAL, "prompt: image rows at %u but only %u image(s) named", a, n_images);
		if (len && i - a != len)
			return err_set(ERR_INVAL, "prompt: image %u has %u rows, image 0 %u", k, i - a, len);
		len = i - a;
		if (len > MSG_MAX_TOKENS)
			return err_set(ERR_INVAL, "prompt: image %u has %u rows (at most %d)", k, len, MSG_MAX_TOKENS);
		for (uint32_t j = 0; j < len; j++)
			if (prompt[a + j] != imagefile_row_id(digests[k], j))
				return err_set(ERR_INVAL, "prompt: image %u's row %u is not its digest's", k, j);
		pos[k++] = a;
	}
	if (k != n_images)
		return err_set(ERR_INVAL, "prompt: %u image(s) named, %u in the prompt", n_images, k);
	*rows = len;
	return 0;
}

int images_area_rows(struct images_area *a, uint32_t rows)
{
	if (!rows)
		return 0;
	if (a->rows && a->rows != rows)
		return err_set(ERR_INVAL, "prompt: images of %u rows (this server's have %u)", rows, a->rows);
	if (!a->rows) {
		a->rows = rows;
		a->slots = MSG_IMAGE_SLOTS(rows);
	}
	return 0;
}

int images_area_slot(struct images_area *a, const uint8_t digest[MSG_DIGEST], const bool *busy, uint32_t *slot,
		     bool *encode)
{
	uint32_t best = UINT32_MAX;
	for (uint32_t s = 0; s < a->slots; s++)
		if (a->valid[s] && !memcmp(a->digest[s], digest, MSG_DIGEST)) {
			a->used[s] = a->tick;
			*slot = s;
			*encode = false;
			return 0;
		}
	for (uint32_t s = 0; s < a->slots; s++) {
		if (busy[s])
			continue;
		if (!a->valid[s]) {
			best = s;
			break;
		}
		if (best == UINT32_MAX || a->used[s] < a->used[best])
			best = s;
	}
	if (best == UINT32_MAX)
		return err_set(ERR_RANGE, "images: more images in one submission than the %u slots", a->slots);
	a->valid[best] = true;
	memcpy(a->digest[best], digest, MSG_DIGEST);
	a->used[best] = a->tick;
	*slot = best;
	*encode = true;
	return 0;
}

uint32_t images_area_find(const struct images_area *a, const uint8_t digest[MSG_DIGEST])
{
	for (uint32_t s = 0; s < a->slots; s++)
		if (a->valid[s] && !memcmp(a->digest[s], digest, MSG_DIGEST))
			return s;
	return UINT32_MAX;
}

void images_area_drop(struct images_area *a, uint32_t slot)
{
	if (slot < a->slots)
		a->valid[slot] = false;
}
