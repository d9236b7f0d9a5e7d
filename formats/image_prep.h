/* image_prep: an RGB image to the vision tower's input, as Gemma 3's
 * reference preprocessor (Hugging Face's Gemma3ImageProcessor, PIL) does it:
 * resize to image_size x image_size without keeping the aspect ratio, with
 * PIL's bilinear filter (a triangle kernel widened by the scale when
 * shrinking, so a large photo is averaged rather than sampled), rescale by
 * 1/255, normalize (x - mean) / std per channel. */
#ifndef UNICORN_IMAGE_PREP_H
#define UNICORN_IMAGE_PREP_H

#include <stdint.h>

#include "formats/mmproj.h"

/* rgb: h rows of w pixels, 3 bytes each (row-major, no padding).
 * out: [3][image_size][image_size] planar floats. Errors: ERR_INVAL for an
 * empty image, ERR_NOMEM. */
int image_prep(const uint8_t *rgb, uint32_t w, uint32_t h, const struct vision_config *c, float *out);

#endif
