/* quant: tensor element types (ggml ids), block sizes, half-float conversion,
 * dequantization to f32 and quantization from f32.
 *
 * Layouts follow ggml-common.h exactly (see ../shared/spec/reference.md §3),
 * so files we write load in llama.cpp and files it writes load here. */
#ifndef UNICORN_QUANT_H
#define UNICORN_QUANT_H

#include <stddef.h>
#include <stdint.h>

enum tensor_type {
	TENSOR_F32 = 0,
	TENSOR_F16 = 1,
	TENSOR_Q4_0 = 2,
	TENSOR_Q4_1 = 3,
	TENSOR_Q5_0 = 6,
	TENSOR_Q5_1 = 7,
	TENSOR_Q8_0 = 8,
	TENSOR_Q2_K = 10,
	TENSOR_Q3_K = 11,
	TENSOR_Q4_K = 12,
	TENSOR_Q5_K = 13,
	TENSOR_Q6_K = 14,
	TENSOR_IQ4_NL = 20,
	TENSOR_IQ4_XS = 23,
	TENSOR_BF16 = 30,
};

#define QK8_0 32
#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK4_NL 32
#define QK_K 256

struct block_q8_0 { uint16_t d; int8_t qs[QK8_0]; };
struct block_q4_0 { uint16_t d; uint8_t qs[QK4_0 / 2]; };
struct block_q4_1 { uint16_t d, m; uint8_t qs[QK4_1 / 2]; };
struct block_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };
struct block_q5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };
struct block_iq4_nl { uint16_t d; uint8_t qs[QK4_NL / 2]; };
struct block_q2_k { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d, dmin; };
struct block_q3_k { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; };
struct block_q5_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
struct block_iq4_xs { uint16_t d, scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };
struct block_q4_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[QK_K / 2]; };
struct block_q6_k { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; };
_Static_assert(sizeof(struct block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(struct block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(struct block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(struct block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(struct block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(struct block_iq4_nl) == 18, "iq4_nl block");
_Static_assert(sizeof(struct block_q2_k) == 84, "q2_K block");
_Static_assert(sizeof(struct block_q3_k) == 110, "q3_K block");
_Static_assert(sizeof(struct block_q5_k) == 176, "q5_K block");
_Static_assert(sizeof(struct block_iq4_xs) == 136, "iq4_xs block");
_Static_assert(sizeof(struct block_q4_k) == 144, "q4_K block");
_Static_assert(sizeof(struct block_q6_k) == 210, "q6_K block");

struct quant_type_info {
	const char *name;      /* "f32", "q8_0", ... (lower case, as llama.cpp prints) */
	uint32_t block_elems;  /* elements per block (1 for plain floats) */
	uint32_t block_bytes;  /* bytes per block */
};

/* NULL for a type id this engine does not support. */
const struct quant_type_info *quant_type_info(uint32_t type);
/* Parse "f32", "F16", "q8_0", "Q4_K"... into a type id; ERR_UNSUP if unknown. */
int quant_type_parse(const char *name, uint32_t *type);

/* ggml's upper-case name of any ggml type id ("IQ2_XXS" for 16), including
 * the types Unicorn cannot run, so errors never show a bare number; NULL for
 * ids ggml never assigned (or has since removed). */
const char *quant_ggml_type_name(uint32_t type);

/* The types Unicorn runs, as one list for error messages: "F32, F16, ...". */
const char *quant_supported_list(void);
/* Bytes of n elements of type; ERR_INVAL when n is not a multiple of the block
 * size, ERR_RANGE on overflow, ERR_UNSUP for an unknown type. */
int quant_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes);

float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);     /* round to nearest even */
float quant_bf16_to_f32(uint16_t h);
uint16_t quant_f32_to_bf16(float f);    /* round to nearest even, NaN kept NaN */

/* Dequantize n elements (a multiple of the block size) starting at src. */
int quant_dequantize(uint32_t type, const void *src, float *dst, uint64_t n);
/* Quantize n elements into dst (quant_row_bytes(type, n) bytes). Every
 * supported type: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 round as llama.cpp's
 * reference quantizers do; the K types use a plain min/max (or absmax) fit
 * per sub-block, IQ4_NL and IQ4_XS a small scale search (not llama.cpp's
 * importance-weighted searches: good for tests and synthetic models). */
int quant_quantize(uint32_t type, const float *src, void *dst, uint64_t n);

/* The index of the IQ4_NL/IQ4_XS level (ggml's kvalues_iq4nl) nearest v:
 * quant_iq4_nearest by binary search over the level midpoints (what the
 * quantizers use), quant_iq4_nearest_exhaustive by trying all 16 (ties to the
 * lower level in both). */
uint8_t quant_iq4_nearest(float v);
uint8_t quant_iq4_nearest_exhaustive(float v);

#endif
