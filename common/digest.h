/* digest: a fast, non-cryptographic 64-bit digest for integrity checks of
 * shared regions (a wrong, stale or unfilled region, not an adversary).
 *
 * digest64() mixes 8-byte words (and a tail) into a seed; the same bytes and
 * seed give the same value on every build of this little-endian host.
 * digest_sampled() digests a fixed, size-derived sample of a buffer: its first
 * and last DIGEST_PAGE bytes and DIGEST_SAMPLES pages in between chosen by a
 * splitmix64 sequence from `seed` (so a cheap import check reads ~34 pages of a
 * region, whatever its size). */
#ifndef UNICORN_DIGEST_H
#define UNICORN_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define DIGEST_PAGE 4096u
#define DIGEST_SAMPLES 32u

uint64_t digest64(uint64_t seed, const void *p, size_t n);
uint64_t digest_sampled(uint64_t seed, const void *p, uint64_t size);

#endif
