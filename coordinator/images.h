/* images: the coordinator's side of image prompts (docs/vision.md).
 *
 *  - a request's images: GEN_REQ names them by digest in prompt order; image
 *    k's rows are the k-th run of ids with bit 31 set, each exactly
 *    imagefile_row_id(digest k, j) (checked: a client cannot point rows at
 *    another image), all runs as long (the projector's tokens per image);
 *  - the gpu worker's image area: MSG_IMAGE_SLOTS(rows) slots, each holding
 *    one digest's rows; a submission's images get slots (least recently used
 *    first, never one the same submission uses), IMAGE messages encode the
 *    missing ones, and the submission's ids become area rows
 *    (ENGINE_IMAGE_TOKEN | slot * rows + j). A preempted or recomputed
 *    sequence finds its image still there or has it encoded again; an
 *    image the worker cannot encode (its pixels evicted from RUNDIR/images
 *    or unreadable) ends its request alone and its slot is forgotten. */
#ifndef UNICORN_COORD_IMAGES_H
#define UNICORN_COORD_IMAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "ipc/msg.h"

#define IMAGES_ROW 0x80000000u

/* Check prompt[n]'s image runs against digests[n_images]; *rows = their
 * length (0 without images). *pos = first position of each image (caller's
 * array of n_images). ERR_INVAL with the reason. */
int images_check_prompt(const uint32_t *prompt, uint32_t n, const uint8_t (*digests)[MSG_DIGEST], uint32_t n_images,
			uint32_t *rows, uint32_t *pos);

struct images_area {
	uint32_t rows, slots;           /* 0 until the first image prompt */
	bool valid[256];
	uint8_t digest[256][MSG_DIGEST];
	uint64_t used[256];             /* tick of the last submission that used it */
	uint64_t tick;
	uint64_t encodes;               /* IMAGE messages sent */
};

/* Take the rows of the first image prompt (ERR_INVAL when a later one differs). */
int images_area_rows(struct images_area *a, uint32_t rows);
/* A slot for digest in the submission of tick a->tick (busy: slots it uses
 * already, a bit each): *encode when the slot must be (re)encoded first.
 * ERR_RANGE when every slot is busy. */
int images_area_slot(struct images_area *a, const uint8_t digest[MSG_DIGEST], const bool *busy, uint32_t *slot,
		     bool *encode);
/* The slot that holds digest, or UINT32_MAX. */
uint32_t images_area_find(const struct images_area *a, const uint8_t digest[MSG_DIGEST]);
/* Forget a slot whose encode failed. */
void images_area_drop(struct images_area *a, uint32_t slot);

#endif
