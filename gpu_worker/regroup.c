/* regroup.c: see regroup.h. */
#include "gpu_worker/regroup.h"

#include <string.h>

#include "common/err.h"
#include "formats/quant.h"

/* bytes of a whole group, and of a trailing half group (scales padded to 16) */
#define GROUP_BYTES 144u
#define HALF_GROUP_BYTES 80u

bool regroup_q4_0_fits(uint64_t ncols) { return ncols > 0 && ncols % REGROUP_Q4_0_ROW_MULTIPLE == 0; }

uint64_t regroup_q4_0_row_bytes(uint64_t ncols)
{
	return ncols / REGROUP_Q4_0_ELEMS * GROUP_BYTES + (ncols % REGROUP_Q4_0_ELEMS ? HALF_GROUP_BYTES : 0);
}

/* nb (8 or 4) blocks from b into the group at o: scales, then the halves */
static void group_put(uint8_t *o, const struct block_q4_0 *b, int nb)
{
	for (int i = 0; i < nb; i++)
		memcpy(o + 2 * i, &b[i].d, 2);
	for (int i = 0; i < nb; i++)
		for (int q = 0; q < 4; q++)
			memcpy(o + 16 + 64 * (i / 4) + 16 * q + 4 * (i % 4), b[i].qs + 4 * q, 4);
}

int regroup_q4_0(void *dst, const void *src, uint64_t nrows, uint64_t ncols)
{
	if (!regroup_q4_0_fits(ncols))
		return err_set(ERR_INVAL, "regroup: q4_0 rows of %llu elements (not a multiple of %u)",
			       (unsigned long long)ncols, REGROUP_Q4_0_ROW_MULTIPLE);
	uint64_t groups = ncols / REGROUP_Q4_0_ELEMS, row_bytes = regroup_q4_0_row_bytes(ncols);
	bool half = ncols % REGROUP_Q4_0_ELEMS != 0;
	const struct block_q4_0 *b = src;
	for (uint64_t r = 0; r < nrows; r++) {
		uint8_t *o = (uint8_t *)dst + r * row_bytes;
		for (uint64_t g = 0; g < groups; g++, b += 8, o += GROUP_BYTES)
			group_put(o, b, 8);
		if (half) {
			memset(o, 0, HALF_GROUP_BYTES);
			group_put(o, b, 4);
			b += 4;
		}
	}
	return 0;
}
