/* regroup.h: Q4_0 rows rearranged at upload so the decode kernel reads whole
 * 16-byte vectors (shaders/quant.glsl, TYPE_Q4_0G).
 *
 * A Q4_0 block is 18 bytes (an f16 scale, 16 bytes of nibbles), so its quant
 * words straddle 32-bit words in every other block and no block is 16-byte
 * aligned: the decode kernel issued three 4-byte loads per 4 bytes of weights.
 * Regrouped, every 8 blocks of a row (144 bytes, the same size) become their 8
 * scales followed by two 64-byte halves; half s holds quant word q of its
 * blocks 4s..4s+3 side by side at 16q. A row of a multiple of 256 elements
 * keeps its length. A row of an odd multiple of 128 (1B's 1152 columns) ends
 * in a half group laid out as a whole group cut after its first half: its 4
 * scales, 8 zero bytes, then the 64-byte half (80 bytes for 72), so the
 * kernels address it as any group and every row starts 16-byte aligned.
 * Imported (zero-copy) weights keep the file's layout. */
#ifndef UNICORN_GPU_WORKER_REGROUP_H
#define UNICORN_GPU_WORKER_REGROUP_H

#include <stdbool.h>
#include <stdint.h>

/* The engine's type code for regrouped Q4_0 rows: outside GGUF's type numbers
 * (formats/quant.h), equal to TYPE_Q4_0G in shaders/common.glsl. */
#define TENSOR_Q4_0G 1000u
/* elements per group, and the row lengths that regroup: multiples of half a group */
#define REGROUP_Q4_0_ELEMS 256u
#define REGROUP_Q4_0_ROW_MULTIPLE 128u

bool regroup_q4_0_fits(uint64_t ncols);
/* Bytes of one regrouped row of ncols elements (ncols fits): the file's row
 * length, plus 8 where the row ends in a half group. */
uint64_t regroup_q4_0_row_bytes(uint64_t ncols);
/* nrows rows of ncols Q4_0 elements from src (the file's layout) to dst (rows
 * of regroup_q4_0_row_bytes; dst and src must not overlap). ERR_INVAL when
 * ncols is not a multiple of REGROUP_Q4_0_ROW_MULTIPLE. */
int regroup_q4_0(void *dst, const void *src, uint64_t nrows, uint64_t ncols);

#endif
