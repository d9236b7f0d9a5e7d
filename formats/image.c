/* image: PNG / JPEG / WebP to RGB with caps checked before allocating (see
 * image.h). */
#include "formats/image.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>
#include <webp/decode.h>

#include "common/err.h"

enum image_format image_sniff(const void *data, size_t n)
{
	const uint8_t *b = data;
	if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8))
		return IMAGE_PNG;
	if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
		return IMAGE_JPEG;
	if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4))
		return IMAGE_WEBP;
	return 0;
}

const char *image_format_name(enum image_format f)
{
	return f == IMAGE_PNG ? "PNG" : f == IMAGE_JPEG ? "JPEG" : f == IMAGE_WEBP ? "WebP" : "unknown";
}

static int check_dims(const char *fmt, uint64_t w, uint64_t h)
{
	if (w == 0 || h == 0)
		return err_set(ERR_INVAL, "%s image: empty (%llu x %llu)", fmt, (unsigned long long)w,
			       (unsigned long long)h);
	if (w > IMAGE_MAX_SIDE || h > IMAGE_MAX_SIDE || w * h > IMAGE_MAX_PIXELS)
		return err_set(ERR_RANGE, "%s image: %llu x %llu is larger than allowed (%u pixels a side, %u in all)",
			       fmt, (unsigned long long)w, (unsigned long long)h, IMAGE_MAX_SIDE, IMAGE_MAX_PIXELS);
	return 0;
}

/* ---- PNG ---- */

struct png_src {
	const uint8_t *p;
	size_t n, off;
};

struct png_err {
	jmp_buf jb;
	char msg[160];
	int code;
};

static void png_read_mem(png_structp png, png_bytep dst, png_size_t len)
{
	struct png_src *s = png_get_io_ptr(png);
	if (len > s->n - s->off)
		png_error(png, "truncated");
	memcpy(dst, s->p + s->off, len);
	s->off += len;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
	struct png_err *e = png_get_error_ptr(png);
	snprintf(e->msg, sizeof e->msg, "%s", msg);
	longjmp(e->jb, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg; /* benign (e.g. a bad ancillary chunk): keep decoding */
}

static int decode_png(const uint8_t *data, size_t n, struct image *out)
{
	struct png_err e = { .code = ERR_INVAL };
	struct png_src src = { data, n, 0 };
	png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &e, png_on_error, png_on_warning);
	if (!png)
		return err_set(ERR_NOMEM, "PNG image: out of memory");
	png_infop info = png_create_info_struct(png);
	/* volatile: assigned after setjmp and read after a longjmp */
	uint8_t *volatile rgb = NULL;
	png_bytep *volatile rows = NULL;
	if (!info) {
		png_destroy_read_struct(&png, NULL, NULL);
		return err_set(ERR_NOMEM, "PNG image: out of memory");
	}
	if (setjmp(e.jb)) {
		png_destroy_read_struct(&png, &info, NULL);
		free(rgb);
		free(rows);
		if (e.code == ERR_INVAL)
			return err_set(ERR_INVAL, "PNG image: corrupt or truncated (%s)", e.msg);
		return e.code;
	}
	png_set_read_fn(png, &src, png_read_mem);
	/* bounded ancillary chunks (the size cap is ours, after the header) */
	png_set_chunk_cache_max(png, 128);
	png_set_chunk_malloc_max(png, 8u << 20);
	png_read_info(png, info);
	png_uint_32 w, h;
	int depth, color, interlace;
	png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
	int rc = check_dims("PNG", w, h);
	if (rc) {
		e.code = rc;
		longjmp(e.jb, 1);
	}
	if (depth == 16)
		png_set_strip_16(png);
	if (color == PNG_COLOR_TYPE_PALETTE)
		png_set_palette_to_rgb(png);
	if (color == PNG_COLOR_TYPE_GRAY && depth < 8)
		png_set_expand_gray_1_2_4_to_8(png);
	if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA)
		png_set_gray_to_rgb(png);
	png_set_strip_alpha(png);
	if (png_get_valid(png, info, PNG_INFO_tRNS))
		png_set_tRNS_to_alpha(png), png_set_strip_alpha(png);
	png_set_interlace_handling(png);
	png_read_update_info(png, info);
	if (png_get_rowbytes(png, info) != (size_t)w * 3) {
		snprintf(e.msg, sizeof e.msg, "unexpected row layout");
		longjmp(e.jb, 1);
	}
	rgb = malloc((size_t)w * h * 3);
	rows = malloc((size_t)h * sizeof(png_bytep));
	if (!rgb || !rows) {
		e.code = err_set(ERR_NOMEM, "PNG image: out of memory for %u x %u", w, h);
		longjmp(e.jb, 1);
	}
	for (png_uint_32 y = 0; y < h; y++)
		rows[y] = rgb + (size_t)y * w * 3;
	png_read_image(png, rows);
	png_read_end(png, NULL); /* a file cut anywhere, IEND included, is an error */
	png_destroy_read_struct(&png, &info, NULL);
	free(rows);
	out->w = w;
	out->h = h;
	out->rgb = rgb;
	out->format = IMAGE_PNG;
	return 0;
}

/* ---- JPEG ---- */

struct jpeg_err {
	struct jpeg_error_mgr mgr;
	jmp_buf jb;
	char msg[JMSG_LENGTH_MAX];
	int code;
	int truncated;
};

static void jpeg_on_error(j_common_ptr c)
{
	struct jpeg_err *e = (struct jpeg_err *)c->err;
	c->err->format_message(c, e->msg);
	longjmp(e->jb, 1);
}

static void jpeg_on_message(j_common_ptr c)
{
	(void)c; /* warnings are not ours to print */
}

/* libjpeg makes up the rest of a truncated file (grey) with a warning; the
 * reference preprocessor (PIL) refuses truncated files, and so do we. */
static void jpeg_on_emit(j_common_ptr c, int level)
{
	struct jpeg_err *e = (struct jpeg_err *)c->err;
	if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF)
		e->truncated = 1;
	if (level < 0)
		c->err->num_warnings++;
}

/* A progressive JPEG may carry thousands of tiny scans, each a pass over the
 * whole coefficient buffer: cap them. */
static void jpeg_on_progress(j_common_ptr c)
{
	if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > (int)IMAGE_MAX_JPEG_SCANS) {
		struct jpeg_err *e = (struct jpeg_err *)c->err;
		e->code = err_set(ERR_RANGE, "JPEG image: more than %u scans", IMAGE_MAX_JPEG_SCANS);
		longjmp(e->jb, 1);
	}
}

static int decode_jpeg(const uint8_t *data, size_t n, struct image *out)
{
	struct jpeg_decompress_struct cinfo;
	struct jpeg_err e = { .code = ERR_INVAL };
	struct jpeg_progress_mgr prog = { .progress_monitor = jpeg_on_progress };
	uint8_t *volatile rgb = NULL;
	cinfo.err = jpeg_std_error(&e.mgr);
	e.mgr.error_exit = jpeg_on_error;
	e.mgr.output_message = jpeg_on_message;
	e.mgr.emit_message = jpeg_on_emit;
	if (setjmp(e.jb)) {
		jpeg_destroy_decompress(&cinfo);
		free(rgb);
		if (e.code == ERR_INVAL)
			return err_set(ERR_INVAL, "JPEG image: corrupt or truncated (%s)", e.msg);
		return e.code;
	}
	jpeg_create_decompress(&cinfo);
	cinfo.progress = &prog;
	jpeg_mem_src(&cinfo, data, (unsigned long)n);
	jpeg_read_header(&cinfo, TRUE);
	int rc = check_dims("JPEG", cinfo.image_width, cinfo.image_height);
	if (!rc && cinfo.jpeg_color_space != JCS_GRAYSCALE && cinfo.jpeg_color_space != JCS_YCbCr &&
	    cinfo.jpeg_color_space != JCS_RGB)
		rc = err_set(ERR_UNSUP, "JPEG image: colour space %d (CMYK?) not supported", (int)cinfo.jpeg_color_space);
	if (rc) {
		e.code = rc;
		longjmp(e.jb, 1);
	}
	cinfo.out_color_space = JCS_RGB;
	jpeg_start_decompress(&cinfo);
	uint32_t w = cinfo.output_width, h = cinfo.output_height;
	if ((rc = check_dims("JPEG", w, h)) || cinfo.output_components != 3) {
		e.code = rc ? rc : err_set(ERR_UNSUP, "JPEG image: %d components", cinfo.output_components);
		longjmp(e.jb, 1);
	}
	rgb = malloc((size_t)w * h * 3);
	if (!rgb) {
		e.code = err_set(ERR_NOMEM, "JPEG image: out of memory for %u x %u", w, h);
		longjmp(e.jb, 1);
	}
	while (cinfo.output_scanline < h) {
		JSAMPROW row = rgb + (size_t)cinfo.output_scanline * w * 3;
		if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
			snprintf(e.msg, sizeof e.msg, "no scanline");
			longjmp(e.jb, 1);
		}
	}
	jpeg_finish_decompress(&cinfo);
	if (e.truncated) {
		snprintf(e.msg, sizeof e.msg, "premature end of data");
		longjmp(e.jb, 1);
	}
	jpeg_destroy_decompress(&cinfo);
	out->w = w;
	out->h = h;
	out->rgb = rgb;
	out->format = IMAGE_JPEG;
	return 0;
}

/* ---- WebP ---- */

static int decode_webp(const uint8_t *data, size_t n, struct image *out)
{
	WebPBitstreamFeatures f;
	VP8StatusCode st = WebPGetFeatures(data, n, &f);
	if (st != VP8_STATUS_OK)
		return err_set(st == VP8_STATUS_NOT_ENOUGH_DATA ? ERR_INVAL : ERR_INVAL,
			       "WebP image: corrupt or truncated header (status %d)", (int)st);
	if (f.has_animation)
		return err_set(ERR_UNSUP, "WebP image: animated WebP is not supported");
	int rc = check_dims("WebP", (uint64_t)(f.width > 0 ? f.width : 0), (uint64_t)(f.height > 0 ? f.height : 0));
	if (rc)
		return rc;
	size_t sz = (size_t)f.width * f.height * 3;
	uint8_t *rgb = malloc(sz);
	if (!rgb)
		return err_set(ERR_NOMEM, "WebP image: out of memory for %d x %d", f.width, f.height);
	if (!WebPDecodeRGBInto(data, n, rgb, sz, f.width * 3)) {
		free(rgb);
		return err_set(ERR_INVAL, "WebP image: corrupt or truncated");
	}
	out->w = (uint32_t)f.width;
	out->h = (uint32_t)f.height;
	out->rgb = rgb;
	out->format = IMAGE_WEBP;
	return 0;
}

int image_decode(const void *data, size_t n, struct image *out)
{
	memset(out, 0, sizeof *out);
	if (n > IMAGE_MAX_BYTES)
		return err_set(ERR_RANGE, "image: %zu bytes, more than %u", n, IMAGE_MAX_BYTES);
	switch (image_sniff(data, n)) {
	case IMAGE_PNG: return decode_png(data, n, out);
	case IMAGE_JPEG: return decode_jpeg(data, n, out);
	case IMAGE_WEBP: return decode_webp(data, n, out);
	default: return err_set(ERR_UNSUP, "image: not a PNG, JPEG or WebP file");
	}
}

void image_free(struct image *img)
{
	if (!img)
		return;
	free(img->rgb);
	img->rgb = NULL;
	img->w = img->h = 0;
}

/* ---- data URLs ---- */

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int image_base64(const char *s, size_t len, size_t max, uint8_t **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (len / 4 * 3 > max + 3)
		return err_set(ERR_RANGE, "image: the base64 payload decodes past %zu bytes", max);
	uint8_t *b = malloc(len / 4 * 3 + 3);
	if (!b)
		return err_set(ERR_NOMEM, "image: out of memory");
	uint32_t acc = 0;
	size_t bits = 0, k = 0, pad = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		int v = b64_value(c);
		if (v < 0 || pad) {
			free(b);
			return err_set(ERR_INVAL, "image: bad base64 at byte %zu", i);
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			b[k++] = (uint8_t)(acc >> bits);
		}
	}
	/* leftover bits must be the zero padding of a final group of 2 or 3 chars */
	if (pad > 2 || bits >= 6 || (acc & ((1u << bits) - 1)) != 0) {
		free(b);
		return err_set(ERR_INVAL, "image: bad base64 (truncated or wrongly padded)");
	}
	if (k > max) {
		free(b);
		return err_set(ERR_RANGE, "image: %zu bytes, more than %zu", k, max);
	}
	if (k == 0) {
		free(b);
		return err_set(ERR_INVAL, "image: empty base64 payload");
	}
	*out = b;
	*n = k;
	return 0;
}

int image_data_url(const char *url, size_t len, uint8_t **bytes, size_t *n)
{
	*bytes = NULL;
	*n = 0;
	if (len < 5 || strncasecmp(url, "data:", 5))
		return err_set(ERR_UNSUP, "image_url: only data: URLs with base64 images are accepted here");
	const char *comma = memchr(url, ',', len);
	if (!comma)
		return err_set(ERR_INVAL, "image_url: data URL without a comma");
	size_t hl = (size_t)(comma - url);
	if (hl < 12 || strncasecmp(url + 5, "image/", 6))
		return err_set(ERR_UNSUP, "image_url: data URL of type '%.*s', not image/...", (int)(hl > 37 ? 32 : hl - 5),
			       url + 5);
	if (hl < 12 || strncasecmp(comma - 7, ";base64", 7))
		return err_set(ERR_UNSUP, "image_url: data URL not base64-encoded");
	return image_base64(comma + 1, len - hl - 1, IMAGE_MAX_BYTES, bytes, n);
}
