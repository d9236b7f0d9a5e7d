/* image: PNG (RGB, grey + alpha, palette), JPEG and WebP written by the
 * libraries' own encoders decode to the pixels written; hostile files —
 * every truncation, byte flips, headers claiming 100k x 100k or a
 * decompression bomb's 16k x 16k, an unknown format — fail with the right
 * error before any pixel buffer; data URLs and base64 are checked. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

#include "common/err.h"
#include "formats/image.h"

struct membuf {
	uint8_t *p;
	size_t n, cap;
};

static void png_write_mem(png_structp png, png_bytep data, png_size_t len)
{
	struct membuf *m = png_get_io_ptr(png);
	if (m->n + len > m->cap) {
		m->cap = (m->n + len) * 2;
		m->p = realloc(m->p, m->cap);
	}
	memcpy(m->p + m->n, data, len);
	m->n += len;
}

static void png_flush_mem(png_structp png) { (void)png; }

/* channels 3 (RGB), 2 (grey + alpha) */
static struct membuf make_png(const uint8_t *px, uint32_t w, uint32_t h, int channels)
{
	struct membuf m = { 0 };
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);
	cr_assert(png && info);
	cr_assert_eq(setjmp(png_jmpbuf(png)), 0);
	png_set_write_fn(png, &m, png_write_mem, png_flush_mem);
	png_set_IHDR(png, info, w, h, 8, channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY_ALPHA,
		     PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (uint32_t y = 0; y < h; y++)
		png_write_row(png, (png_const_bytep)(px + (size_t)y * w * channels));
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	return m;
}

static struct membuf make_jpeg(const uint8_t *rgb, uint32_t w, uint32_t h)
{
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr jerr;
	c.err = jpeg_std_error(&jerr);
	jpeg_create_compress(&c);
	unsigned char *out = NULL;
	unsigned long n = 0;
	jpeg_mem_dest(&c, &out, &n);
	c.image_width = w;
	c.image_height = h;
	c.input_components = 3;
	c.in_color_space = JCS_RGB;
	jpeg_set_defaults(&c);
	jpeg_set_quality(&c, 95, TRUE);
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < h) {
		JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
		jpeg_write_scanlines(&c, &row, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	struct membuf m = { malloc(n), n, n };
	memcpy(m.p, out, n);
	free(out);
	return m;
}

static void pattern(uint8_t *rgb, uint32_t w, uint32_t h)
{
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++) {
			uint8_t *p = rgb + ((size_t)y * w + x) * 3;
			p[0] = (uint8_t)(x * 255 / w);
			p[1] = (uint8_t)(y * 255 / h);
			p[2] = (uint8_t)(128 + (x + y) % 64);
		}
}

Test(image, roundtrip_png_jpeg_webp)
{
	uint32_t w = 37, h = 23;
	uint8_t rgb[37 * 23 * 3];
	pattern(rgb, w, h);
	struct image im;
	struct membuf png = make_png(rgb, w, h, 3);
	cr_assert_eq(image_decode(png.p, png.n, &im), 0, "%s", err_msg());
	cr_expect_eq(im.format, IMAGE_PNG);
	cr_expect(im.w == w && im.h == h);
	cr_expect_arr_eq(im.rgb, rgb, sizeof rgb);
	image_free(&im);

	/* grey + alpha: grey copied to the three channels, alpha dropped */
	uint8_t ga[37 * 23 * 2];
	for (size_t i = 0; i < (size_t)w * h; i++)
		ga[2 * i] = (uint8_t)(i * 7), ga[2 * i + 1] = (uint8_t)(i * 13);
	struct membuf pg = make_png(ga, w, h, 2);
	cr_assert_eq(image_decode(pg.p, pg.n, &im), 0, "%s", err_msg());
	for (size_t i = 0; i < (size_t)w * h; i++)
		cr_assert(im.rgb[3 * i] == ga[2 * i] && im.rgb[3 * i + 1] == ga[2 * i] && im.rgb[3 * i + 2] == ga[2 * i],
			  "pixel %zu", i);
	image_free(&im);

	struct membuf jpg = make_jpeg(rgb, w, h);
	cr_assert_eq(image_decode(jpg.p, jpg.n, &im), 0, "%s", err_msg());
	cr_expect_eq(im.format, IMAGE_JPEG);
	cr_expect(im.w == w && im.h == h);
	double err = 0;
	for (size_t i = 0; i < sizeof rgb; i++)
		err += abs((int)im.rgb[i] - rgb[i]);
	cr_expect(err / sizeof rgb < 6, "JPEG mean error %g", err / sizeof rgb);
	image_free(&im);

	uint8_t *wp = NULL;
	size_t wn = WebPEncodeLosslessRGB(rgb, (int)w, (int)h, (int)w * 3, &wp);
	cr_assert(wn > 0);
	cr_assert_eq(image_decode(wp, wn, &im), 0, "%s", err_msg());
	cr_expect_eq(im.format, IMAGE_WEBP);
	cr_expect_arr_eq(im.rgb, rgb, sizeof rgb);
	image_free(&im);

	/* every truncation of every format fails cleanly */
	struct membuf all[3] = { png, jpg, { wp, wn, wn } };
	for (int f = 0; f < 3; f++)
		for (size_t cut = 0; cut < all[f].n; cut += 1 + cut / 64) {
			int rc = image_decode(all[f].p, cut, &im);
			cr_expect_neq(rc, 0, "format %d truncated at %zu of %zu decoded", f, cut, all[f].n);
			cr_expect_null(im.rgb);
			image_free(&im);
		}
	/* byte flips: any result but a crash or a leak */
	uint64_t z = 99;
	for (int f = 0; f < 3; f++) {
		uint8_t *b = malloc(all[f].n);
		for (int i = 0; i < 400; i++) {
			memcpy(b, all[f].p, all[f].n);
			z = z * 6364136223846793005ull + 1442695040888963407ull;
			b[(z >> 33) % all[f].n] ^= (uint8_t)(1u << ((z >> 20) & 7));
			if (image_decode(b, all[f].n, &im) == 0)
				image_free(&im);
		}
		free(b);
	}
	free(png.p);
	free(pg.p);
	free(jpg.p);
	WebPFree(wp);
}

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
	}
	return ~c;
}

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* A PNG signature and IHDR claiming w x h (valid CRC), then a tiny IDAT. */
static size_t png_header(uint8_t *b, uint32_t w, uint32_t h)
{
	memcpy(b, "\x89PNG\r\n\x1a\n", 8);
	be32(b + 8, 13);
	memcpy(b + 12, "IHDR", 4);
	be32(b + 16, w);
	be32(b + 20, h);
	b[24] = 8, b[25] = 2, b[26] = 0, b[27] = 0, b[28] = 0;
	be32(b + 29, crc32_of(b + 12, 17));
	/* IDAT of a zlib stream of zeros (a bomb would carry megabytes of it) */
	static const uint8_t z[] = { 0x78, 0x9c, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01 };
	be32(b + 33, sizeof z);
	memcpy(b + 37, "IDAT", 4);
	memcpy(b + 41, z, sizeof z);
	be32(b + 41 + sizeof z, crc32_of(b + 37, 4 + sizeof z));
	return 45 + sizeof z;
}

Test(image, huge_headers_refused_before_allocating)
{
	uint8_t b[128];
	struct image im;
	size_t n = png_header(b, 100000, 100000);
	cr_expect_eq(image_decode(b, n, &im), ERR_RANGE, "%s", err_msg());
	cr_expect(strstr(err_msg(), "100000 x 100000"), "%s", err_msg());
	n = png_header(b, 16384, 16384); /* within a side, 268M pixels in all */
	cr_expect_eq(image_decode(b, n, &im), ERR_RANGE, "%s", err_msg());
	n = png_header(b, 0, 5);
	cr_expect_neq(image_decode(b, n, &im), 0);
	n = png_header(b, 1, 1); /* fine header, IDAT too short for the row */
	cr_expect_neq(image_decode(b, n, &im), 0);
	image_free(&im);

	/* JPEG: patch a real file's SOF0 to 65000 x 65000 */
	uint8_t rgb[16 * 16 * 3];
	pattern(rgb, 16, 16);
	struct membuf j = make_jpeg(rgb, 16, 16);
	uint8_t *sof = NULL;
	for (size_t i = 0; i + 9 < j.n; i++)
		if (j.p[i] == 0xff && j.p[i + 1] == 0xc0) {
			sof = j.p + i;
			break;
		}
	cr_assert(sof);
	sof[5] = 0xfd, sof[6] = 0xe8, sof[7] = 0xfd, sof[8] = 0xe8;
	cr_expect_eq(image_decode(j.p, j.n, &im), ERR_RANGE, "%s", err_msg());
	free(j.p);

	/* WebP: an extended header (VP8X) with a 16384 x 16384 canvas */
	uint8_t wb[30] = { 'R', 'I', 'F', 'F', 22, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 10, 0, 0, 0,
			   0, 0, 0, 0, 0xff, 0x3f, 0, 0xff, 0x3f, 0 };
	int rc = image_decode(wb, sizeof wb, &im);
	cr_expect(rc == ERR_RANGE || rc == ERR_INVAL, "rc %d: %s", rc, err_msg());
	cr_expect_null(im.rgb);

	cr_expect_eq(image_decode("GIF89a......", 12, &im), ERR_UNSUP);
	cr_expect_eq(image_decode("", 0, &im), ERR_UNSUP);
}

Test(image, data_urls_and_base64)
{
	uint8_t *b;
	size_t n;
	const char *ok = "data:image/png;base64,aGVsbG8gd29ybGQ=";
	cr_assert_eq(image_data_url(ok, strlen(ok), &b, &n), 0, "%s", err_msg());
	cr_expect_eq(n, 11);
	cr_expect_arr_eq(b, "hello world", 11);
	free(b);
	const char *nopad = "data:image/jpeg;base64,aGVsbG8\n gd29ybGQ";
	cr_assert_eq(image_data_url(nopad, strlen(nopad), &b, &n), 0, "%s", err_msg());
	cr_expect_eq(n, 11);
	free(b);
	struct {
		const char *url;
		int rc;
	} bad[] = {
		{ "https://example.com/cat.png", ERR_UNSUP },
		{ "file:///etc/passwd", ERR_UNSUP },
		{ "data:text/plain;base64,aGVsbG8=", ERR_UNSUP },
		{ "data:image/png,rawbytes", ERR_UNSUP },
		{ "data:image/png;base64", ERR_INVAL },
		{ "data:image/png;base64,aGVs!G8=", ERR_INVAL },
		{ "data:image/png;base64,aGVsbG8=x", ERR_INVAL },
		{ "data:image/png;base64,a", ERR_INVAL },
		{ "data:image/png;base64,aGVsbG9=", ERR_INVAL }, /* non-zero padding bits */
		{ "data:image/png;base64,", ERR_INVAL },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = image_data_url(bad[i].url, strlen(bad[i].url), &b, &n);
		cr_expect_eq(rc, bad[i].rc, "%s: %d (%s)", bad[i].url, rc, err_msg());
		cr_expect_null(b);
	}
	cr_expect_eq(image_base64("QUJD", 4, 2, &b, &n), ERR_RANGE);
}
