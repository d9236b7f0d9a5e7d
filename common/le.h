/* le: explicit little-endian byte codecs for wire and file formats (never
 * memcpy of structs: layouts must not depend on padding or host order). */
#ifndef UNICORN_LE_H
#define UNICORN_LE_H

#include <stdint.h>
#include <string.h>

static inline void le_put(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t le_get(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline void le_put_f32(uint8_t *p, float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	le_put(p, u, 4);
}

static inline float le_get_f32(const uint8_t *p)
{
	uint32_t u = (uint32_t)le_get(p, 4);
	float f;
	memcpy(&f, &u, 4);
	return f;
}

#endif
