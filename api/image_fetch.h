/* image_fetch: an image_url part's http(s) URL (unicorn-up
 * --allow-image-urls, docs/vision.md). Off by default: a server that fetches
 * what its clients name can be pointed at hosts only it reaches.
 *
 * GET with libcurl: http and https only (redirects too, at most
 * IMAGE_FETCH_REDIRS), status 200 only, at most IMAGE_MAX_BYTES (checked
 * against Content-Length and while the body arrives, so a larger one stops
 * there), within IMAGE_FETCH_TIMEOUT_S. The bytes then go where a data URL's
 * go (coordinator/image_input.h). */
#ifndef UNICORN_API_IMAGE_FETCH_H
#define UNICORN_API_IMAGE_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IMAGE_FETCH_TIMEOUT_S 20
#define IMAGE_FETCH_REDIRS 3

/* Whether url names a remote image (http:// or https://). */
bool image_fetch_remote(const char *url);
/* curl's global state, once, before any thread fetches: 0 or ERR_IO. */
int image_fetch_init(void);
/* The image at url in *bytes (malloc'ed) and *n: 0, or ERR_INVAL (not
 * http(s), an HTTP status other than 200, larger than IMAGE_MAX_BYTES, the
 * connection or the time limit failed: the client's URL, a 400), ERR_NOMEM;
 * with err_set naming it. */
int image_fetch(const char *url, uint8_t **bytes, size_t *n);

#endif
