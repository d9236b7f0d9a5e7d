/* cli_image: images in `unicorn run --image FILE` and `/image FILE` in
 * `unicorn chat` (docs/vision.md). The CLI then tokenizes the conversation
 * itself (the cluster's model's tokenizer, from RUNDIR/ready) with Gemma 3's
 * image sequence where each image was attached, and names the images by
 * digest in GEN_REQ; their pixels go to the run directory as the API's do. */
#ifndef UNICORN_CLI_IMAGE_H
#define UNICORN_CLI_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "chat/template.h"
#include "formats/mmproj.h"
#include "ipc/msg.h"
#include "tokenizer/tokenizer.h"

struct cli_images {
	struct tok *tok;
	struct vision_config vc;
	uint32_t n;
	uint8_t digest[MSG_MAX_IMAGES][MSG_DIGEST];
};

/* The cluster's tokenizer and projector (RUNDIR/mmproj, written by
 * unicorn-up): ERR_UNSUP "this model has no vision projector" without one. */
int cli_images_open(const char *rundir, struct cli_images *ci);
void cli_images_close(struct cli_images *ci);
/* Read, check and prepare an image file; it becomes image ci->n - 1. */
int cli_images_add(struct cli_images *ci, const char *rundir, const char *path);
/* chat_encode_images over msgs with ci's images: ids (malloc'd u32, image
 * rows included) for intake_gen_opts.prompt_ids. */
int cli_images_encode(const struct cli_images *ci, const struct chat_msg *msgs, size_t n, uint32_t **ids,
		      uint32_t *n_ids);

#endif
