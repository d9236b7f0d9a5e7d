/* image_input: data URL -> digest + pixels in the run directory (image_input.h). */
#include "coordinator/image_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/image.h"
#include "formats/image_prep.h"
#include "hub/sha256.h"
#include "ipc/imagefile.h"

static int digest_of(const uint8_t *p, size_t n, uint8_t digest[MSG_DIGEST])
{
	struct hub_sha256 *h = hub_sha256_new();
	char hex[65];
	int bad = !h || hub_sha256_update(h, p, n) || hub_sha256_final(h, hex);
	hub_sha256_free(h);
	if (bad)
		return err_set(ERR_NOMEM, "image: sha256 failed");
	for (int i = 0; i < MSG_DIGEST; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return err_set(ERR_INVAL, "image: sha256 gave no hex");
		digest[i] = (uint8_t)v;
	}
	return 0;
}

int image_input_load(const char *rundir, const struct vision_config *vc, const char *url,
		     uint8_t digest[MSG_DIGEST])
{
	uint8_t *bytes = NULL;
	size_t n = 0;
	int rc = image_data_url(url, strlen(url), &bytes, &n);
	if (rc == ERR_UNSUP)
		return err_set(ERR_UNSUP, "image_url: only inline data URLs (data:image/png;base64,...) are read; "
			       "remote (http, https) ones only with unicorn-up --allow-image-urls");
	if (rc)
		return rc;
	rc = image_input_bytes(rundir, vc, bytes, n, digest);
	free(bytes);
	return rc;
}

int image_input_bytes(const char *rundir, const struct vision_config *vc, const uint8_t *bytes, size_t n,
		      uint8_t digest[MSG_DIGEST])
{
	if (n > IMAGE_MAX_BYTES)
		return err_set(ERR_RANGE, "image: %zu bytes (at most %u)", n, IMAGE_MAX_BYTES);
	int rc = digest_of(bytes, n, digest);
	struct image img = { 0 };
	if (!rc)
		rc = image_decode(bytes, n, &img);
	if (rc)
		return rc;
	size_t s = vc->image_size;
	float *px = malloc(3 * s * s * sizeof *px);
	rc = px ? image_prep(img.rgb, img.w, img.h, vc, px) : err_set(ERR_NOMEM, "image: out of memory");
	image_free(&img);
	if (!rc)
		rc = imagefile_write(rundir, digest, px, 3 * s * s);
	free(px);
	return rc;
}
