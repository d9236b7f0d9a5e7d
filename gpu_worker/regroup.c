/* regroup.c: see regroup.h. */
#include "gpu_worker/regroup.h"

#include <string.h>

#include "common/err.h"
#include "formats/quant.h"

bool regroup_q4_0_fits(uint64_t ncols) { return ncols > 0 && ncols % REGROUP_Q4_0_ELEMS == 0; }

int regroup_q4_0(void *dst, const void *src, uint64_t nrows, uint64_t ncols)
{
	if (!regroup_q4_0_fits(ncols))
		return err_set(ERR_INVAL, "regroup: q4_0 rows of %llu elements (not a multiple of %u)",
			       (unsigned long long)ncols, REGROUP_Q4_0_ELEMS);
	/* rows are whole groups, so the matrix is a run of groups */
	uint64_t groups = ncols / REGROUP_Q4_0_ELEMS * nrows;
	const struct block_q4_0 *b = src;
	uint8_t *o = dst;
	for (uint64_t g = 0; g < groups; g++, b += 8, o += 8 * sizeof *b) {
		for (int i = 0; i < 8; i++)
			memcpy(o + 2 * i, &b[i].d, 2);
		for (int i = 0; i < 8; i++)
			for (int q = 0; q < 4; q++)
				memcpy(o + 16 + 64 * (i / 4) + 16 * q + 4 * (i % 4), b[i].qs + 4 * q, 4);
	}
	return 0;
}
