/* image_input: an image_url content part to what the gpu worker reads
 * (docs/vision.md): the data URL's bytes (formats/image.h; remote URLs are
 * not fetched), their sha256 (the image's name everywhere after), decoded
 * and preprocessed for the projector (formats/image_prep.h) into the run
 * directory (ipc/imagefile.h). Errors carry a message for a 400. */
#ifndef UNICORN_COORD_IMAGE_INPUT_H
#define UNICORN_COORD_IMAGE_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "formats/mmproj.h"
#include "ipc/msg.h"

/* The same for an image file's bytes (the CLI's --image, /image). */
int image_input_bytes(const char *rundir, const struct vision_config *vc, const uint8_t *bytes, size_t n,
		      uint8_t digest[MSG_DIGEST]);
int image_input_load(const char *rundir, const struct vision_config *vc, const char *url,
		     uint8_t digest[MSG_DIGEST]);

#endif
