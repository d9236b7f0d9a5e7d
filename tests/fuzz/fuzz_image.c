/* libFuzzer target for the image path an HTTP request takes: the input as a
 * data URL's base64 payload (first byte odd) or as the image bytes, then the
 * decoder (PNG, JPEG, WebP) and the preprocessing to a tiny tower's input.
 * ASan checks every pixel write; the caps keep allocations bounded (run
 * with -rss_limit_mb=2048). Seeds: any small PNG/JPEG/WebP files. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/image.h"
#include "formats/image_prep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *bytes = NULL;
	size_t n = size;
	const uint8_t *img = data;
	if (size > 0 && (data[0] & 1) && size < (1u << 20)) {
		/* "data:image/png;base64," + the rest as the payload */
		static const char head[] = "data:image/png;base64,";
		char *url = malloc(sizeof head + size);
		if (!url)
			return 0;
		memcpy(url, head, sizeof head - 1);
		memcpy(url + sizeof head - 1, data + 1, size - 1);
		int rc = image_data_url(url, sizeof head - 1 + size - 1, &bytes, &n);
		free(url);
		if (rc)
			return 0;
		img = bytes;
	}
	struct image im;
	if (image_decode(img, n, &im) == 0) {
		/* small images only: the fuzzer's time goes to the decoders */
		if ((uint64_t)im.w * im.h <= (1u << 20)) {
			struct vision_config c = { .image_size = 28, .image_mean = { 0.5f, 0.5f, 0.5f },
						   .image_std = { 0.5f, 0.5f, 0.5f } };
			float px[3 * 28 * 28];
			(void)image_prep(im.rgb, im.w, im.h, &c, px);
		}
		image_free(&im);
	}
	free(bytes);
	return 0;
}
