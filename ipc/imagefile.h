/* imagefile: an image's preprocessed pixels handed from the API to the gpu
 * worker through the run directory (never in messages; docs/vision.md):
 * RUNDIR/images/<sha256 of the image's bytes, hex>, f32 [3][S][S] little-
 * endian (formats/image_prep.h), mode 0600, written to a temporary name and
 * renamed, so a reader sees a whole file or none. */
#ifndef UNICORN_IPC_IMAGEFILE_H
#define UNICORN_IPC_IMAGEFILE_H

#include <stddef.h>
#include <stdint.h>

#include "ipc/msg.h"

#define IMAGEFILE_PATH_MAX 512
/* "RUNDIR/images/<hex>" into out[cap]. */
int imagefile_path(const char *rundir, const uint8_t digest[MSG_DIGEST], char *out, size_t cap);
/* Write n floats (skipped when the file is there already: same digest, same pixels). */
int imagefile_write(const char *rundir, const uint8_t digest[MSG_DIGEST], const float *px, size_t n);
/* Images kept in RUNDIR/images: imagefile_write removes the least recently
 * written beyond this many (a reader that finds its image gone fails its
 * request alone, GEN_END reason image: only one whose image 64 newer ones
 * have passed while it waited). */
#define IMAGEFILE_MAX 64
void imagefile_trim(const char *dir, uint32_t keep);
/* Read exactly n floats: ERR_NOTFOUND without the file, ERR_INVAL when its size differs. */
int imagefile_read(const char *rundir, const uint8_t digest[MSG_DIGEST], float *px, size_t n);
/* The prompt id of row j of the image with this digest: bit 31 set (outside
 * every vocabulary) and 31 bits of the digest's word j % 8 mixed with j, so
 * an image's rows carry the whole digest: the coordinator's prefix cache,
 * which compares ids, reuses the same image and never a different one. */
static inline uint32_t imagefile_row_id(const uint8_t digest[MSG_DIGEST], uint32_t j)
{
	const uint8_t *w = digest + 4 * (j % 8);
	uint32_t v = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
	return 0x80000000u | ((v ^ (j * 0x9E3779B1u)) & 0x7FFFFFFFu);
}
/* Lower-case hex of a digest into hex[2 * MSG_DIGEST + 1]. */
void imagefile_hex(const uint8_t digest[MSG_DIGEST], char *hex);

#endif
