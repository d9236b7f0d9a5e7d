/* The regrouped Q4_0 layout (gpu_worker/regroup.h), byte by byte. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_worker/regroup.h"
#include "common/err.h"
#include "formats/quant.h"

/* Two rows of 512 elements (2 groups each) whose every byte is distinct
 * modulo 251: each output byte is found where the layout says. */
Test(regroup, q4_0_layout)
{
	enum { ROWS = 2, COLS = 512, NB = ROWS * COLS / 32 };
	struct block_q4_0 in[NB];
	uint8_t *raw = (uint8_t *)in, out[sizeof in];
	for (size_t i = 0; i < sizeof in; i++)
		raw[i] = (uint8_t)(i * 7 % 251);
	cr_assert_eq(regroup_q4_0(out, in, ROWS, COLS), 0, "%s", err_msg());
	for (size_t c = 0; c < NB; c++) {
		size_t g = c / 8, i = c % 8;
		const uint8_t *o = out + 144 * g;
		cr_assert_eq(memcmp(o + 2 * i, &in[c].d, 2), 0, "block %zu scale", c);
		for (size_t q = 0; q < 4; q++)
			cr_assert_eq(memcmp(o + 16 + 64 * (i / 4) + 16 * q + 4 * (i % 4), in[c].qs + 4 * q, 4), 0,
				     "block %zu quant word %zu", c, q);
	}
}

/* Rows of an odd multiple of 128 elements (1B's 1152 columns) end in a half
 * group: its 4 scales, 8 zero bytes, then quant word q of its 4 blocks at
 * 16q; every row is 8 bytes longer than the file's and starts 16-aligned. */
Test(regroup, q4_0_half_group_rows)
{
	enum { ROWS = 3, COLS = 384, NB = ROWS * COLS / 32, RB = 144 + 80 };
	struct block_q4_0 in[NB];
	uint8_t *raw = (uint8_t *)in, out[ROWS * RB];
	for (size_t i = 0; i < sizeof in; i++)
		raw[i] = (uint8_t)(i * 7 % 251 + 1); /* no zero byte: the padding is told apart */
	cr_assert_eq(regroup_q4_0_row_bytes(COLS), RB);
	cr_assert_eq(regroup_q4_0_row_bytes(256 * 4), 144 * 4);
	memset(out, 0xee, sizeof out);
	cr_assert_eq(regroup_q4_0(out, in, ROWS, COLS), 0, "%s", err_msg());
	for (size_t r = 0; r < ROWS; r++)
		for (size_t k = 0; k < COLS / 32; k++) {
			size_t c = r * (COLS / 32) + k, g = k / 8, i = k % 8;
			const uint8_t *o = out + r * RB + 144 * g;
			cr_assert_eq(memcmp(o + 2 * i, &in[c].d, 2), 0, "row %zu block %zu scale", r, k);
			for (size_t q = 0; q < 4; q++)
				cr_assert_eq(memcmp(o + 16 + 64 * (i / 4) + 16 * q + 4 * (i % 4), in[c].qs + 4 * q, 4), 0,
					     "row %zu block %zu quant word %zu", r, k, q);
			if (g == 1)
				for (size_t b = 8; b < 16; b++)
					cr_assert_eq(o[b], 0, "row %zu: pad byte %zu", r, b);
		}
}

Test(regroup, q4_0_rows_of_half_groups_only)
{
	struct block_q4_0 in[9] = { 0 }, out[9];
	cr_assert(regroup_q4_0_fits(256));
	cr_assert(regroup_q4_0_fits(128));
	cr_assert(regroup_q4_0_fits(1152));
	cr_assert(!regroup_q4_0_fits(288));
	cr_assert(!regroup_q4_0_fits(0));
	cr_assert_eq(regroup_q4_0(out, in, 1, 288), ERR_INVAL);
	cr_assert(strstr(err_msg(), "288") != NULL, "%s", err_msg());
}
