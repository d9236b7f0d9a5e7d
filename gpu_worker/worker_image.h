/* worker_image: the gpu worker's vision projector. It opens the mmproj at
 * start (unicorn-up --mmproj, or the one beside the model), sizes the
 * engine's image area and answers IMAGE: the pixels the API left in the run
 * directory (ipc/imagefile.h) through the vision tower into an image slot
 * (docs/vision.md). */
#ifndef UNICORN_WORKER_IMAGE_H
#define UNICORN_WORKER_IMAGE_H

#include <stdint.h>

#include "formats/model.h"
#include "gpu_worker/engine.h"
#include "ipc/msg.h"

struct worker_image;

/* Open and check the projector against the text model; *rows = its tokens
 * per image, *slots = the image slots the engine needs (MSG_IMAGE_SLOTS). */
int worker_image_open(const char *mmproj, const struct gemma3_config *text, struct worker_image **out,
		      uint32_t *rows, uint32_t *slots);
/* Upload the tower to the engine's device. */
int worker_image_attach(struct worker_image *wi, struct engine *e);
void worker_image_destroy(struct worker_image *wi);
/* IMAGE: encode m's image into its slot. */
int worker_image_encode(struct worker_image *wi, struct engine *e, const char *rundir, const struct msg_image *m);

#endif
