/* digest: see digest.h. */
#include "common/digest.h"

#include <string.h>

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t digest64(uint64_t seed, const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = mix(seed ^ 0x9e3779b97f4a7c15ull ^ (uint64_t)n);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	uint64_t t = 0;
	if (i < n)
		memcpy(&t, b + i, n - i);
	return mix(h ^ t);
}

uint64_t digest_sampled(uint64_t seed, const void *p, uint64_t size)
{
	const unsigned char *b = p;
	uint64_t n_pages = (size + DIGEST_PAGE - 1) / DIGEST_PAGE;
	uint64_t h = mix(seed ^ size);
	if (n_pages == 0)
		return h;
	uint64_t s = seed;
	for (uint32_t k = 0; k < DIGEST_SAMPLES + 2; k++) {
		uint64_t pg;
		if (k == 0)
			pg = 0;
		else if (k == 1)
			pg = n_pages - 1;
		else {
			s += 0x9e3779b97f4a7c15ull;
			pg = mix(s) % n_pages;
		}
		uint64_t off = pg * DIGEST_PAGE;
		uint64_t len = size - off < DIGEST_PAGE ? size - off : DIGEST_PAGE;
		h = digest64(h ^ pg, b + off, (size_t)len);
	}
	return h;
}
