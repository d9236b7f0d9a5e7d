/* engine: the Gemma 3 forward pass on Vulkan. All model math runs in compute
 * shaders; the CPU only writes a small step buffer (position, token ids) and
 * replays command buffers recorded once per shape. See docs/vulkan.md. */
#ifndef UNICORN_ENGINE_H
#define UNICORN_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "ipc/kvlayout.h"
#include "formats/model.h"

struct engine;
struct vk_ctx;

/* Weight placement (docs/vulkan.md "Weights in place"):
 * AUTO: use the weights in place (VK_EXT_external_memory_host) on devices
 *   whose memory is host memory anyway (CPU implementations, integrated GPUs),
 *   copy them into device memory on discrete GPUs (VRAM bandwidth wins);
 * UPLOAD: always copy; ZERO_COPY: import wherever the device can.
 * Any tensor whose range cannot be imported (no extension, misaligned,
 * driver refusal) is uploaded instead: import never fails the engine. */
enum engine_import { ENGINE_IMPORT_AUTO = 0, ENGINE_IMPORT_UPLOAD = 1, ENGINE_IMPORT_ZERO_COPY = 2 };

/* Host memory the weights live in (e.g. the loader's read-only region
 * mappings): imports cover whole aligned spans of these, one per span. */
struct engine_span { const void *addr; uint64_t size; };

struct engine_opts {
	const char *device;   /* NULL = first discrete GPU else first device; index or name substring */
	uint32_t max_ctx;     /* positions per sequence; 0 = min(cfg.n_ctx, 4096) (a cluster passes its --ctx) */
	uint32_t max_batch;   /* tokens per submission (prefill chunk); 0 = 32 */
	uint32_t max_seqs;    /* sequences with their own KV cache (engine_seq_select); 0 = 1 */
	uint32_t max_rows;    /* rows of one engine_forward_chunks submission; 0 = max_batch (at least it) */
	uint32_t n_split;     /* attention splits over the KV length; 0 = 16 */
	enum engine_import weights_import;
	/* where tensor data live; NULL: each tensor's own page-aligned range is
	 * imported (page-sized alignments only). Must stay mapped until
	 * engine_destroy. */
	const struct engine_span *spans;
	uint32_t n_spans;
	/* the paged KV cache's pools (ipc/kvlayout.h), for a worker whose block
	 * tables come from the coordinator; its max_ctx replaces max_ctx above and
	 * max_batch must be <= KV_RING_SLACK. NULL: room for max_seqs full
	 * sequences, each table set to its own blocks in order (a lone engine). */
	const struct kv_layout *kv;
	/* the KV cache's element type without kv (enum kv_type; 0 = f16) */
	uint32_t kv_type;
	/* called between pieces of engine_create's long work (uploads, buffers,
	 * pipelines): a worker's heartbeat while it starts; NULL = none */
	void (*progress)(void *arg);
	void *progress_arg;
	/* a pipeline stage's engine: only layers [layer_first, layer_end) get
	 * their matrices and KV pools (the others only their attention norm);
	 * whole-model calls (forward, batch, chunks, profile) then fail with
	 * ERR_STATE and stage calls accept only these layers. 0, 0: every layer */
	uint32_t layer_first, layer_end;
	/* split placement's attention worker: no FFN matrices (only attention
	 * stage calls then; the rest fail with ERR_STATE) */
	bool attn_only;
	/* the image area (gpu_worker/engine_image.h): image_slots images of
	 * image_rows rows (n_embd floats each); 0: none */
	uint32_t image_rows, image_slots;
	/* split placement's FFN worker: no attention matrices (Q/K/V/O) and no
	 * KV pools; embed, FFN stages and head only (the rest: ERR_STATE) */
	bool ffn_only;
};

/* The prefill kernel on matrix cores (shaders/mul_mm_cm.glsl): a workgroup of
 * ENGINE_CM_NSG subgroups computes ENGINE_CM_BM rows x ENGINE_CM_BN tokens
 * (mul_mm_cm_TYPE), or the small tile ENGINE_CMS_* (mul_mm_cms_TYPE); the large
 * one needs ENGINE_CM_SHARED bytes of shared memory. */
#define ENGINE_CM_BM 128u
#define ENGINE_CM_BN 128u
#define ENGINE_CM_NSG 8u
#define ENGINE_CMS_BM 64u
#define ENGINE_CMS_BN 64u
#define ENGINE_CMS_NSG 4u
#define ENGINE_CM_SHARED 45056u
/* The decode tile (mul_mm_cm_TYPE_d, _dk): 128 rows x 64 tokens with eight
 * subgroups, for products of at most 64 tokens (a decode batch). */
#define ENGINE_CMD_BN 64u

/* Push-constant blocks, mirrored by the shaders (see the matching .comp). */
struct mv_push {
	uint32_t ncols, nrows, row_bytes, x_stride, x_off, y_stride, y_off, n_tok, nrows_valid;
	uint32_t tpr;        /* threads per row: a power of two <= the workgroup size */
	uint32_t tail;       /* mul_mvs: 1 runs the norm tail (shaders/mul_mvs.glsl); the split-K
	                      * mat-mat kernels: the split length (shaders/mul_mm_cm.glsl) */
};
_Static_assert(sizeof(struct mv_push) == 44, "mv_push mirrors shaders/mv_io.glsl");
/* Bindings of every matrix pipeline: W, x, y, then the norm tail's h, w, w2,
 * out2 and count (mul_mvs uses them when tail = 1; the others ignore them),
 * then x as x16 (gpu_worker/x16.h; the _x16 kernels read it instead of x),
 * then a spare, then the split-K partial sums (the _k mat-mat kernels write
 * them, mm_splitk_reduce reads them). One layout for all, so one descriptor
 * set serves every kernel of a matrix. */
#define ENGINE_MAT_BINDINGS 11u
#define ENGINE_MAT_PART 10u
struct rows_push { uint32_t ncols, nrows, row_bytes; float scale; };
_Static_assert(sizeof(struct rows_push) == 16, "rows_push mirrors shaders/get_rows.glsl");
struct norm_push { uint32_t n, mode; float eps; uint32_t x16; /* 1: also write the result as x16 (binding 5) */ };
_Static_assert(sizeof(struct norm_push) == 16, "norm_push mirrors shaders/rmsnorm.comp");
struct rope_push {
	uint32_t head_dim, n_head, n_kv, qkv_stride;
	float eps, base, freq_scale;
	uint32_t kv_cap;
	uint32_t tab_off, tab_mod;  /* block-table entries of this layer kind (KV_ROW) */
};
_Static_assert(sizeof(struct rope_push) == 40, "rope_push mirrors shaders/rope_kv.comp");
struct attn_push {
	uint32_t head_dim, n_head, n_kv, qkv_stride, window, n_split;
	float scale;
	uint32_t min_chunk;
	uint32_t cnt_off;    /* fused combine: first counter (uint index) in the partials buffer */
	uint32_t tab_off, tab_mod;
	/* rope = 1: attn normalizes and rotates q and the token's own k itself and
	 * appends k/v (no rope_kv dispatch); the rest as in struct rope_push */
	float eps, base, freq_scale;
	uint32_t kv_cap, rope;
	uint32_t one_len;    /* attn_chunk in shaders/common.glsl: ranges this short are one split */
	uint32_t x16;        /* 1: the output rows as x16 too (binding 9), for wo (shaders/attn_x16.glsl) */
};
_Static_assert(sizeof(struct attn_push) == 72, "attn_push mirrors shaders/attn.comp");
/* Prefill attention on matrix cores (shaders/flash_attn_cm.glsl): one
 * workgroup per KV head, ENGINE_FA_ROWS (token, query head) rows and key
 * split; splits enough that about ENGINE_FA_WG workgroups run per 512
 * tokens (at most the engine's n_split; the same for every step, so a row's
 * numbers never depend on its step's size). */
struct fa_push {
	uint32_t n_head, n_kv, qkv_stride, window, n_tok;
	float scale;
	uint32_t tab_off, tab_mod;
};
_Static_assert(sizeof(struct fa_push) == 32, "fa_push mirrors shaders/flash_attn_cm.glsl");
#define ENGINE_FA_ROWS 32u
#define ENGINE_FA_WG 1024u
/* window, min_chunk and one_len as attn's: tokens whose range is one split are
 * skipped; x16 as attn's (binding 3) */
struct combine_push { uint32_t head_dim, n_head, n_split, window, min_chunk, one_len, x16, all; };
_Static_assert(sizeof(struct combine_push) == 32, "combine_push mirrors shaders/attn_combine.comp");
struct gelu_push { uint32_t n_ff, n_tok; };
_Static_assert(sizeof(struct gelu_push) == 8, "gelu_push mirrors shaders/gelu_mul.comp");
/* one workgroup per row: row r at off + r * stride; topk.comp also writes the
 * row's log-sum-exp to res[lse_off + r] (argmax.comp ignores lse_off) */
struct argmax_push { uint32_t n, off, stride, lse_off; };
/* argmax.comp over G > 1 workgroups per row: per-row counters, then from
 * this uint on the slices' bests (2 uints each, G per row) */
#define ENGINE_AM_PART 4096u
/* topk.comp over G workgroups per row (slices of about ENGINE_TK_SLICE logits,
 * so that no invocation loops past llvmpipe's 65,535 iterations): per-row
 * counters (zero between dispatches), then from this uint on the slices'
 * records of ENGINE_TK_REC uints (k (id, value) pairs, then the slice's
 * log-sum-exp max and sum), G per row */
#define ENGINE_TK_PART 4096u
#define ENGINE_TK_REC 130u
#define ENGINE_TK_SLICE 8192u
#define ENGINE_TK_GROUPS_MAX 128u
/* workgroups per top-k row for n logits */
static inline uint32_t engine_tk_groups(uint32_t n)
{
	uint32_t g = (n + ENGINE_TK_SLICE - 1) / ENGINE_TK_SLICE;
	return g < 1 ? 1 : g > ENGINE_TK_GROUPS_MAX ? ENGINE_TK_GROUPS_MAX : g;
}
_Static_assert(sizeof(struct argmax_push) == 16, "argmax_push mirrors shaders/argmax.comp, topk.comp");

/* One token of a step: the kernels read its position and KV base from here, so
 * a step may mix sequences (engine_forward_batch). */
struct engine_step_tok {
	uint32_t token;
	uint32_t pos;       /* its position in its sequence */
	uint32_t base;      /* first block-table entry of its sequence (seq * table length) */
	uint32_t span_end;  /* an image row: its span's last position (attention sees up to it); else 0 */
};
/* The host-visible step buffer the kernels read (STEP_* in shaders/common.glsl). */
struct engine_step {
	uint32_t pos0;      /* single-sequence steps: position of tok[0] (informational) */
	uint32_t n;         /* tokens in this step */
	uint32_t k;         /* top-k size */
	uint32_t kv_base;   /* single-sequence steps: the selected sequence's base (informational) */
	struct engine_step_tok tok[];  /* max_batch entries */
};
_Static_assert(sizeof(struct engine_step_tok) == 16, "engine_step_tok mirrors STEP_TOK in shaders/common.glsl");

#define ENGINE_TOPK_MAX 64

enum engine_stage { ENGINE_STAGE_ATTN = 0, ENGINE_STAGE_FFN = 1, ENGINE_STAGE_BOTH = 2 };

/* GPU time of the last engine_forward/argmax/topk submission, in ns. */
/* Threads per matvec row for rows of ncols elements (workgroup of wg threads). */
uint32_t engine_mv_tpr(uint32_t ncols, uint32_t wg);
/* Same for the single-token kernel mul_mvs: a power of two giving about bpt
 * 32-element blocks per thread (shaders/mul_mvs.glsl). */
uint32_t engine_mvs_tpr(uint32_t ncols, uint32_t wg, uint32_t bpt);
/* rmsnorm's elements per thread (its PER specialization constant) for rows of
 * n floats and wg threads: every element in a register. */
uint32_t engine_norm_per(uint32_t n, uint32_t wg);
/* decode's wo and down run their post-norm in their last workgroup (engine.c norm_tail_pick) */
bool engine_norm_tail(const struct engine *e);
/* Elements per mul_mvs work unit of a weight type: 8 (a quarter block:
 * q4_0, q8_0, q4_1, q5_0, q5_1, iq4_nl; iq4_xs: of a sub-block), 16 (K-quants q3_k..q6_k), 32 (a
 * whole block: the other types, and in the generic _gen kernels,
 * UNICORN_VK_MVS_GENERIC=1, every type but q4_0/q8_0; a type has _gen kernels
 * where generic changes its unit). */
uint32_t engine_mvs_unit(uint32_t type, bool generic);
/* The same for a weight type: rows are split into engine_mvs_unit work units,
 * so the smaller units get more threads. */
uint32_t engine_mvs_tpr_type(uint32_t type, uint32_t ncols, uint32_t wg, uint32_t bpt, bool generic);
uint32_t engine_mvs_rows(uint32_t type, uint32_t want);

struct engine_timing {
	uint64_t embed_ns, attn_ns, ffn_ns, head_ns, total_ns;
};

int engine_create(const struct model *m, const struct engine_opts *o, struct engine **out);
void engine_destroy(struct engine *e);
struct vk_ctx *engine_vk(struct engine *e);
/* Bytes of weights/KV/activations placed in device-local and host-visible memory. */
void engine_placement(const struct engine *e, uint64_t *device_local, uint64_t *host_visible);

/* Weight-matrix bytes used in place (imported) and in all; norms, always
 * converted copies, are not counted. */
void engine_weights_import(const struct engine *e, uint64_t *imported, uint64_t *total);
/* Bytes of matrices uploaded regrouped for the decode kernels (regroup.h). */
uint64_t engine_weights_regrouped(const struct engine *e);

/* Run tokens[0..n) at positions pos0.. (earlier positions must have been run).
 * logits: if all_rows, [n][n_vocab]; else the last row only [n_vocab]; may be NULL.
 * Logits of ids >= n_vocab_text are -INFINITY. */
int engine_forward(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, float *logits, bool all_rows);
/* Same, then the greedy next token of the last row (computed on the GPU). */
int engine_argmax(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, uint32_t *token);
/* Same, then the k (1..64) best ids/logits of the last row, descending. */
int engine_topk(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, uint32_t k,
		uint32_t *ids, float *vals);
/* The log-sum-exp of each whole logit row (ids >= n_vocab_text, -inf, add
 * nothing) of the last top-k submission, computed by the same kernel in the
 * same pass: lse[0..n) for n <= its rows (engine_topk: 1, the last token;
 * engine_forward_batch TOPK: its n rows, in order). logit - lse is the
 * token's log-probability. ERR_STATE when no top-k step ran yet or n is
 * larger. Valid until the next top-k submission (other modes leave it). */
int engine_topk_lse(const struct engine *e, uint32_t n, float *lse);
/* Continuous batching: one submission runs tokens[t] of sequence seqs[t] at
 * position pos[t] for t < n (n <= max_batch and <= max_seqs; seqs distinct and
 * < max_seqs; positions before pos[t] of seqs[t] must have been run), reading
 * the weights once for the whole batch. Every row is computed by exactly the
 * code a lone token runs (matvecs never switch to the tiled kernel here, and a
 * lone decode token uses the same single-token kernel), so each row's results
 * are bitwise those of engine_argmax/engine_topk of that token alone.
 * mode ARGMAX: ids[t] (vals[t] its logit when vals != NULL); TOPK: ids/vals
 * [n][k], k 1..64, descending; LOGITS: vals [n][n_vocab] (ids unused). The
 * selected sequence (engine_seq_select) is left unchanged. */
enum engine_batch_mode { ENGINE_BATCH_ARGMAX = 1, ENGINE_BATCH_TOPK = 2, ENGINE_BATCH_LOGITS = 3 };
int engine_forward_batch(struct engine *e, uint32_t n, const uint32_t *tokens, const uint32_t *seqs, const uint32_t *pos,
			 enum engine_batch_mode mode, uint32_t k, uint32_t *ids, float *vals);
/* Largest n engine_forward_batch accepts (min of max_batch and max_seqs). */
uint32_t engine_batch_max(const struct engine *e);
/* Batched prefill and decode: one submission runs a chunk of tokens of each
 * of n sequences (n <= engine_batch_max; sequences distinct; chunk i is
 * tokens[0..n) of sequence seq at positions pos0.., n <= KV_RING_SLACK, the
 * positions before pos0 run before), max_rows rows in all: one forward over
 * the concatenated rows, each row with its own position and sequence for
 * RoPE, the KV append and attention. Chunks with head set get the head of
 * their last row; output row j (ids/vals as engine_forward_batch: [m][k], or
 * LOGITS [m][n_vocab]) belongs to the j-th of them. No head at all: nothing
 * is written.
 * wide: every matrix product runs the tiled mat-mat kernel (mul_mm: weights
 * read once per 64 rows) where the device has it; otherwise every row is
 * computed by the code a lone decode token runs (as engine_forward_batch).
 * Within one kind a row's numbers do not depend on the other rows nor on how
 * its sequence was cut into chunks (each mat-mat column accumulates in the
 * same order), so a chunk replayed alone with the same kind reproduces its
 * rows bit for bit; the two kinds agree within rounding. */
struct engine_chunk {
	uint32_t seq, pos0, n;
	const uint32_t *tokens;
	bool head;
};
/* Logit biases and a token mask for head chunk i of the next
 * engine_forward_chunks (which uses and forgets them; the arrays are
 * borrowed until then): ids ascending < n_vocab, at most ENGINE_BIAS_MAX;
 * mask NULL or (n_vocab + 31) / 32 words, bit t of word t / 32 set where
 * token t may be chosen; top-k mode only. The top-k kernel adds the biases
 * and drops the masked tokens before it ranks (and before the log-sum-exp),
 * so the top-k is what the coordinator's full-row path ranks. */
#define ENGINE_BIAS_MAX 512
/* The bias buffer (shaders/topk.comp BIAS_HDR): one descriptor word per head
 * row first (mask << 31 | count << 20 | first pair), then the (id, bias)
 * pairs; at most this many head rows (batch_max) */
#define ENGINE_BIAS_HDR 256
int engine_chunk_bias(struct engine *e, uint32_t i, const uint32_t *ids, const float *bias, uint32_t n,
		      const uint32_t *mask);
int engine_forward_chunks(struct engine *e, uint32_t n, const struct engine_chunk *ch, bool wide,
			  enum engine_batch_mode mode, uint32_t k, uint32_t *ids, float *vals);
/* Image rows in the sequence (gpu_worker/engine_image.h): a chunk's token
 * ENGINE_IMAGE_TOKEN | r takes row r of the image area in place of an
 * embedded token, and an image's rows attend among themselves in both
 * directions. engine_image_set writes image slot's rows (image_rows x n_embd
 * f32, the vision tower's output); ERR_RANGE for a slot outside the area. */
int engine_image_set(struct engine *e, uint32_t slot, const float *rows);
/* Rows of one engine_forward_chunks submission (max_rows). */
uint32_t engine_rows_max(const struct engine *e);
/* Whether wide submissions run the mat-mat kernel on this device. */
bool engine_has_mm(const struct engine *e);
/* Whether prefill attention runs on the matrix cores (shaders/flash_attn_cm.glsl). */
bool engine_has_fa(const struct engine *e);
/* Forget every sequence (zeroes the KV cache). */
int engine_reset(struct engine *e);
/* Make seq (< max_seqs) the sequence whose KV cache later forward/argmax/topk/
 * stage calls read and extend. Sequences are independent: each has its own
 * positions 0..max_ctx-1. */
int engine_seq_select(struct engine *e, uint32_t seq);
/* Paged KV cache: give sequence seq its block table, tab[n] with n =
 * kv_table_len(engine_kv_layout(e)) (layout in ipc/kvlayout.h). Every entry
 * must name a block of its pool (ERR_RANGE otherwise; nothing changes). It
 * takes effect from the next submission; sequences may share blocks (a
 * shared prefix), but a step must not write a block another sequence of the
 * same step reads. */
int engine_seq_blocks(struct engine *e, uint32_t seq, const uint32_t *tab, uint32_t n);
/* The KV layout in use. */
const struct kv_layout *engine_kv_layout(const struct engine *e);
/* Forget sequence seq. Its KV rows need no clearing: attention only reads
 * positions a step has written before, so the next sequence in the slot
 * overwrites them in order. */
int engine_seq_reset(struct engine *e, uint32_t seq);
int engine_timing(struct engine *e, struct engine_timing *t);
/* GPU time (timestamp queries) of every forward, batch and stage submission so
 * far, in ns: what the workers report as their accelerator's busy time. 0 when
 * the queue has no timestamps. */
uint64_t engine_gpu_ns(const struct engine *e);

/* Profiling: one forward of n tokens at pos0 (argmax mode) recorded with a
 * timestamp after every dispatch; GPU time aggregated per dispatch kind. */
struct engine_prof_kind {
	const char *name;     /* static string */
	uint32_t count;       /* dispatches of this kind */
	uint64_t ns;          /* GPU time, summed */
	uint64_t bytes;       /* weight bytes read (matrix kinds; 0 otherwise) */
};
#define ENGINE_PROF_KINDS 32
struct engine_prof {
	struct engine_prof_kind kind[ENGINE_PROF_KINDS];
	uint32_t n_kind, n_dispatch;
	uint32_t n_barrier;   /* pipeline barriers the step records (compute and full) */
	uint64_t total_ns;
};
int engine_profile(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, struct engine_prof *out);
/* The same for one step of engine_forward_batch (wide false) or of
 * engine_forward_chunks with n single-token chunks, each a head (wide true):
 * row t is tokens[t] of sequence seqs[t] at pos[t], argmax heads. */
int engine_profile_batch(struct engine *e, uint32_t n, const uint32_t *tokens, const uint32_t *seqs, const uint32_t *pos,
			 bool wide, struct engine_prof *out);
/* Which matrix kernels are in use ("mul_mvs+mul_mm", ...), for reports. */
const char *engine_kernels(const struct engine *e);

/* Pieces for a split placement: the device hidden state h[n][n_embd] can be set
 * or read, and one stage of one layer run over it for n tokens at pos0.. */
int engine_embed(struct engine *e, const uint32_t *tokens, uint32_t n);
int engine_hidden_set(struct engine *e, const float *h, uint32_t n);
int engine_hidden_get(struct engine *e, float *h, uint32_t n);
int engine_stage(struct engine *e, uint32_t layer, enum engine_stage stage, uint32_t n, uint32_t pos0);
/* The split placement's step in one submission: copy the n hidden rows in[]
 * to the device, run the attention stage, the FFN stage or both (stage) of
 * layers [layer, layer + n_layers) at positions pos0.., and copy the rows back
 * to out[] (may equal in). Single-token, single-layer calls replay a command
 * buffer recorded once. */
int engine_stage_io(struct engine *e, uint32_t layer, uint32_t n_layers, enum engine_stage stage, uint32_t n,
		    uint32_t pos0, const float *in, float *out);
/* Final norm + logits of the last of n hidden rows. */
/* Split placement, several sequences: one attention or FFN stage of layer
 * for n rows (in -> out, n x n_embd f32), row t being one token of sequence
 * seqs[t] at pos[t] (attention reads and appends that sequence's KV through
 * its block table). Each row is computed exactly as a lone token's stage,
 * or, wide, as a row of a mat-mat step (engine_forward_chunks' wide kind).
 * in NULL: the rows are already in engine_stage_rows(); out NULL: they stay
 * there (a caller that gathers and scatters rows itself saves two copies). */
int engine_stage_batch(struct engine *e, uint32_t layer, enum engine_stage stage, uint32_t n, const uint32_t *seqs,
		       const uint32_t *pos, bool wide, const float *in, float *out);
/* Split placement, prompt chunks of several sequences: one attention or FFN
 * stage of layer for all their rows (ch[i].n rows of sequence ch[i].seq at
 * ch[i].pos0.., in chunk order, at most max_rows in all; no head) in
 * one submission. Every product runs on the mat-mat kernel (the wide kind of
 * engine_forward_chunks): a row's numbers depend neither on the other chunks
 * nor on where its prompt was cut into chunks. in/out as engine_stage_batch. */
int engine_stage_chunks(struct engine *e, uint32_t layer, enum engine_stage stage, uint32_t n,
			const struct engine_chunk *ch, const float *in, float *out);
/* Pipeline placement: the attention and FFN stages of layers [layer, layer +
 * n_layers) in one submission, for rows as engine_stage_batch's (each row
 * bit for bit what n_layers pairs of engine_stage_batch calls give: the same
 * recording, without the copies between them) or prompt chunks as
 * engine_stage_chunks'. A stage keeps one range: the decode recordings are
 * kept for it. */
int engine_stage_range(struct engine *e, uint32_t layer, uint32_t n_layers, uint32_t n, const uint32_t *seqs,
		       const uint32_t *pos, bool wide, const float *in, float *out);
int engine_stage_chunks_range(struct engine *e, uint32_t layer, uint32_t n_layers, uint32_t n,
			      const struct engine_chunk *ch, const float *in, float *out);
/* The host-visible rows engine_stage_batch and engine_stage_chunks read and write
 * (max_rows x n_embd f32). */
float *engine_stage_rows(struct engine *e);
/* Final norm, logits and argmax / top-k (k per row) of n hidden rows (wide:
 * the logits on the mat-mat kernel); ENGINE_BATCH_LOGITS: every row's whole
 * logit row into vals (n x n_vocab; ids unused), for constrained decoding. */
int engine_head_batch(struct engine *e, uint32_t n, const float *in, bool wide, enum engine_batch_mode mode, uint32_t k,
		      uint32_t *ids, float *vals);
int engine_head(struct engine *e, uint32_t n, float *logits);

#endif
