/* image: decode an image file (PNG, JPEG or WebP, told apart by their magic
 * bytes) into 8-bit RGB, with Debian's libpng, libjpeg-turbo and libwebp,
 * and read an OpenAI image_url data URL ("data:image/png;base64,...").
 *
 * Hostile input gets an error, never a crash or an unbounded allocation: the
 * encoded bytes are capped (IMAGE_MAX_BYTES), the dimensions are read from
 * the header and checked (IMAGE_MAX_SIDE per side, IMAGE_MAX_PIXELS in all)
 * before any pixel buffer exists, so a decompression bomb or a 100k x 100k
 * header costs nothing; progressive JPEGs are capped in scans. Alpha is
 * dropped and grey or palette images are expanded, as the reference
 * preprocessor's convert("RGB") does. */
#ifndef UNICORN_IMAGE_H
#define UNICORN_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define IMAGE_MAX_BYTES (20u << 20)      /* encoded image */
#define IMAGE_MAX_SIDE 16384u
#define IMAGE_MAX_PIXELS (32u << 20)     /* 32 Mpx: 96 MiB of RGB at most */
#define IMAGE_MAX_JPEG_SCANS 256u

enum image_format { IMAGE_PNG = 1, IMAGE_JPEG = 2, IMAGE_WEBP = 3 };

struct image {
	uint32_t w, h;
	uint8_t *rgb;              /* h rows of w pixels, 3 bytes each */
	enum image_format format;
};

/* The format from the first bytes; 0 when none of ours. */
enum image_format image_sniff(const void *data, size_t n);
const char *image_format_name(enum image_format f);
/* Errors: ERR_UNSUP (not PNG/JPEG/WebP, or a kind of one we cannot turn into
 * RGB such as an animated WebP or a CMYK JPEG), ERR_RANGE (too large),
 * ERR_INVAL (corrupt or truncated), ERR_NOMEM. The message says which. */
int image_decode(const void *data, size_t n, struct image *out);
void image_free(struct image *img);

/* url[0..len) a data URL with a base64 payload: the decoded bytes (malloc'd)
 * in *bytes, *n. ERR_UNSUP for any other URL (http:, file:, a data URL not
 * base64 or not image/...), ERR_INVAL for bad base64, ERR_RANGE when the
 * payload decodes past IMAGE_MAX_BYTES. */
int image_data_url(const char *url, size_t len, uint8_t **bytes, size_t *n);
/* Decode standard base64 (padding optional, ASCII whitespace skipped) into a
 * malloc'd buffer of at most max bytes. */
int image_base64(const char *s, size_t len, size_t max, uint8_t **out, size_t *n);

#endif
