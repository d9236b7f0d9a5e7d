/* engine_priv: what the engine's source files share (engine.c: setup, the
 * fused forward and its recordings; engine_stage.c: the split and pipeline
 * placements' single stages; engine_profile.c: per-dispatch profiles): the
 * tuning constants, the engine's state and the recording helpers. Not for
 * anything outside gpu_worker/engine*.c: everyone else uses engine.h. */
#ifndef UNICORN_ENGINE_PRIV_H
#define UNICORN_ENGINE_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_worker/coopmat.h"
#include "gpu_worker/engine.h"
#include "gpu_worker/engine_image.h"
#include "gpu_worker/vk.h"
#include "gpu_worker/x16.h"

#define WG 64u
#define NCOLS 8u        /* token columns per matvec workgroup (shaders/mul_mv.glsl) */
#define MAX_GROUPS 65535u
/* the norm tail's row limit with UNICORN_VK_NORM_TAIL=dispatch: its rows are
 * held in NORM_PER registers per thread of the matvec's workgroup (9 for 1B's
 * 1152), which every thread of the matvec then reserves */
#define NT_MAX_EMBD 1536u
/* and by default: off. With x16 copies to write, 1B decode ran faster with the
 * norm dispatched (rmsnorm_sg, 512 threads) than in the tail's one 128-thread
 * workgroup (H100 tg128 645.28 against 608.87, BENCHMARKS.md) */
#define NT_DEFAULT_EMBD 0u
#define WG_MVS 128u     /* mul_mvs workgroup (shaders/mul_mvs.glsl) */
#define MM_TILE 64u     /* mul_mm tile: rows, and tokens at most (shaders/mul_mm.glsl) */
#define MVS_MAX_TOK 2u  /* mul_mvs reads weights once per token: decode only */
/* mul_mvs rows per thread group, q4_0/q8_0 (UNICORN_VK_MVS_RPT overrides, 1..4). H100, 1B q4_0 tg128:
 * 1 row 480.7 t/s, 2 rows 455.8, 4 rows 411.1 (fewer workgroups on the small matrices); large shapes
 * not measured yet */
#define MVS_RPT 1u
#define MVS_MAX_RPT 4u /* rows per thread group at most (engine_mvs_rows) */
#define MVB_NT 4u       /* mul_mvb token columns per workgroup (UNICORN_VK_BATCH_T overrides, 1..8) */
/* batch rows from which mul_mvb runs on a discrete GPU (fewer: mul_mvs per
 * token column, the weights re-read through the L2; other devices take mul_mvb
 * from one token group). H100 `bench --parallel` narrow, ms per
 * step mvb / per token: 1B 2.15 / 1.84 at 4 rows, 3.03 / 2.63 at 7; 27B
 * 28.44 / 19.58 at 4, 49.47 / 35.17 at 7 (BENCHMARKS.md 2026-11-28). From 8
 * rows the coordinator runs the mat-mat kernels; the group kernel stays for
 * more rows where those are off (1B at 16 / 64 rows: 6.3 / 21.1 ms against
 * 9.1 / 32.8 per token, docs/vulkan.md) */
#define MVB_MIN_TOK 8u
/* Regrouped q4_0 (regroup.h) in mul_mvs, H100 tg64 (BENCHMARKS.md): 2 units
 * per thread (27B 82.6 tok/s; 4: 78.8, 1: 70.7); 1 for products of fewer
 * than 100k threads at 2 (1B's 1152-row wo and down: 555.5 -> 600.3 tok/s,
 * 4B's 131k-thread qkv 3% slower at 1); rows of 2048+ elements 2 rows per
 * thread group so each x load serves both (at 8192+, the FFN down matrices:
 * 27B down 3.11 -> 2.43 ms per token, 4B 0.511 -> 0.484; from 2048 qkv and
 * wo too: tg64 4B 351.1 -> 358.1, 27B 91.1 -> 92.2; not the GLU gate/up,
 * whose two rows per thread already share x: 4 rows were 3-6% slower), but
 * not on products of fewer than 2048 rows, whose workgroups the GPU would
 * then not fill (1B's 1152-row down: tg64 680.3 -> 693.9 at 1 row) */
/* K-quant units per thread by product (mvs_bpt), H100 tg64 (BENCHMARKS.md):
 * 27B Q4_K_M gate/up 7.11 -> 6.53 ms per token at 8 (4B flat), logits 0.93 ->
 * 0.74 at 16, qkv 2.40 -> 2.18 at 2 (4B 0.60 -> 0.54); one value for all was
 * a trade (27B best at 8, 4B at 4) */
#define KQ_FEW_ROWS 16384u
#define KQ_FEW_BPT 2u
#define KQ_GLU_BPT 8u
#define KQ_MANY_ROWS 65536u
#define KQ_MANY_BPT 16u
#define Q4G_BPT 2u
#define Q4G_FEW_THREADS 100000u
/* 4 units per thread for wo and the logits (of at least KQ_MANY_ROWS rows)
 * where they have Q4G_FEW_THREADS threads at 2: their thread groups then fit
 * a subgroup on the H100 (tpr 32: a shuffle reduction, no shared memory).
 * 27B tg128 103.66 -> 104.23 (wo), 104.64 (logits), 104.75 (both; 1B +1.3%,
 * 4B +0.5%, 12B -0.2%); 27B's qkv lost at 4 (102.88), gate/up (101.90) and
 * down at 8 (100.75) (BENCHMARKS.md). UNICORN_VK_Q4G_TUNE=0 keeps 2 (A/B) */
#define Q4G_WO_LOGITS_BPT 4u
#define Q4G_WIDE 2048u
#define Q4G_WIDE_MIN_ROWS 2048u
#define Q4G_WIDE_RPT 2u
#define MM_MIN_TOK 16u  /* from here the tiled mat-mat kernel wins */
/* mul_mm_cm: large tiles from this many workgroups (H100, pp512: 1B qkv/wo/down
 * with 36-48 large tiles ran faster as 64x64, 4B's with 80-128 as 128x128) */
#define CM_LARGE_MIN_WG 64u
/* split K (split_k): workgroups to aim for; UNICORN_VK_MM_SPLIT_WG for experiments */
#define SPLIT_TARGET_WG 256u
/* wo on x16 from attention's rows (shaders/attn_x16.glsl) from this many
 * columns: the copy adds to attention's latency what wo gains in bandwidth,
 * which grows with wo. H100 tg128 (BENCHMARKS.md): 12B and 27B (4096
 * columns) +1.1% and +1.6%; forced onto 4B (2048) -0.7%, 1B (1024) -1.1% */
#define WO_X16_MIN_COLS 4096u
/* down on x16 (the GLU's _x16q kernel writes its output's copy, shaders/
 * mul_mvs.glsl FFN_X16): by default where down has DOWN_X16_MIN_COLS columns
 * (UNICORN_VK_DOWN_X16=0/1 overrides), on steps of up to FFQ_MAX_TOK tokens
 * (the copy's and the mailbox's rows) */
#define DOWN_X16_MIN_COLS 8192u
#define FFQ_MAX_TOK 8u
#define PROF_MAX 2000u  /* profiled dispatches per submission (< VK_QUERIES) */
#define N_SLOTS 16      /* weight types with kernels (type_slot, slot_name) */
/* attn_chunk in shaders/common.glsl (UNICORN_VK_ATTN_CHUNK overrides): a token
 * with at most this many visible keys is one split, written by attn itself, so
 * a decode step whose tokens are all that short needs no attn_combine
 * dispatch; a longer range is cut into n_split slices of at least
 * ATTN_MIN_CHUNK keys. 64: from 65 keys the splits' parallel workgroups and a
 * combine dispatch beat one workgroup per head (H100 tg128 against 128: 1B
 * +3.4-5.5%, 4B +1-3%, 27B flat; 32 was below 64 on all three, BENCHMARKS.md).
 * Heads of at most ATTN_NARROW_HD dims take ATTN_CHUNK_NARROW: a key is half
 * the bytes of a 256-dim one, and P.V spreads it over key slices, so one
 * workgroup covers 128 keys in about the time a 256-dim head takes for 64
 * (27B tg128 108.0 -> 108.7; 1B's 256-dim heads lose 0.8% at 128) */
#define ATTN_CHUNK 64u
#define ATTN_CHUNK_NARROW 128u
#define ATTN_NARROW_HD 128u
#define ATTN_MIN_CHUNK 32u
#define ATTN_GLOBAL_WG 256u /* decode attention workgroups per token a global layer's splits aim for */

/* MODE_B_*: engine_forward_batch (one token per sequence, a head per row);
 * MODE_W_*: the same rows with every product on the mat-mat kernel (wide
 * engine_forward_chunks) */
enum { MODE_LAST = 0, MODE_ALL = 1, MODE_ARGMAX = 2, MODE_TOPK = 3, MODE_B_ALL = 4, MODE_B_ARGMAX = 5, MODE_B_TOPK = 6,
       MODE_W_ALL = 7, MODE_W_ARGMAX = 8, MODE_W_TOPK = 9, N_MODES = 10 };
#define RES_ROW 128u    /* uints per row of the argmax/top-k results (shaders/argmax.comp) */
/* workgroups per argmax row: slices of 8192 of a 262144-token vocabulary,
 * two vec4 loads per thread (H100: 22 us as one workgroup, BENCHMARKS.md) */
#define AM_GROUPS 32u
#define AM_GROUPS_MAX 64u /* UNICORN_VK_ARGMAX_GROUPS's limit (<= the 128-thread workgroup) */
/* the top-k kernel's per-row log-sum-exps follow the batch_max result rows */
#define LSE_OFF(e) ((e)->batch_max * RES_ROW)
/* chunks_write writes a bias descriptor for every head row (<= batch_max <= max_seqs <= 256) */
_Static_assert(ENGINE_BIAS_HDR >= 256, "a bias descriptor for every head row");

/* A weight matrix on the device: rows of ncols elements of one type, at
 * [off, off + bytes) of buf. Uploaded matrices own their buffer (off 0);
 * imported ones are a range of a shared import (struct eimp). */
struct ew {
	struct vk_buf *buf;
	VkDeviceSize off, bytes;
	bool imported;
	uint32_t type, ncols, nrows, row_bytes;
};

/* One host-memory import: an aligned piece of a span, imported on first use. */
struct eimp {
	const char *base;
	uint64_t size;
	struct vk_buf *buf;
	bool tried;          /* import attempted (buf NULL: refused, upload instead) */
};

struct elayer {
	struct ew qkv[3];
	uint32_t n_qkv;          /* 1 when wq/wk/wv share a type and were concatenated */
	struct ew wo, gu[2], down;
	uint32_t n_gu;           /* 1 when gate/up share a type (fused GLU matvec) */
	struct vk_buf *attn_norm, *q_norm, *k_norm, *post_attn, *ffn_norm, *post_ffn;
	struct vk_buf *kc, *vc;
	VkDescriptorSet s_attn_norm, s_qkv[3], s_rope, s_attn, s_combine, s_wo, s_post_attn,
		s_ffn_norm, s_gu[2], s_gelu, s_down, s_post_ffn, s_gu_mm;
};

struct engine {
	struct vk_ctx *vk;
	struct gemma3_config cfg;
	uint32_t max_ctx, max_batch, n_split, n_vocab_text;
	uint32_t max_seqs, seq;     /* KV-cache slots and the selected one */
	uint32_t max_rows;          /* engine_forward_chunks rows (activations are sized for it) */
	uint32_t batch_max;         /* engine_forward_batch rows: min(max_batch, max_seqs) */
	uint32_t lse_rows;          /* rows of the last top-k submission (engine_topk_lse) */
	bool rec_batch;             /* recording a batch: per-token kernels only (mv_kind) */
	bool rec_wide;              /* ... or, with rec_batch, the mat-mat kernel for every product */
	VkCommandBuffer chunkcb;    /* engine_forward_chunks with prefill rows: recorded per call */
	/* the image area (engine_image.h) and the copies of the step being written */
	struct vk_buf *img;
	uint32_t image_rows, image_slots, n_img_cp;
	struct engine_image_copy *img_cp;   /* max_rows entries */
	uint32_t qkv_stride, n_q;   /* floats per token in the qkv buffer; n_head*head_dim */
	struct ew embd;
	struct vk_buf *output_norm;
	/* zero-copy weights (engine_opts.weights_import) */
	bool zc;                    /* try imports */
	bool regroup;               /* upload q4_0 matrices regrouped (regroups()) */
	bool per_tensor_imp;        /* no spans given: import each tensor's aligned pages */
	struct eimp *imp;
	uint32_t n_imp, cap_imp;
	uint64_t bytes_imported, bytes_matrix, bytes_regrouped;
	struct elayer *L;
	/* activations [max_batch][...] */
	struct vk_buf *step, *stepd, *h, *xb, *o, *qkv, *att, *part, *gu, *ff, *logits, *logitsd, *res, *dummy;
	struct vk_buf *biasb; /* logit_bias lists of a chunks step's head rows (shaders/topk.comp) */
	struct vk_buf *maskb; /* their token masks, one row of (n_vocab + 31) / 32 words per head */
	struct { const uint32_t *ids; const float *v; const uint32_t *mask; uint32_t n; } cbias[256]; /* engine_chunk_bias */
	uint32_t n_cbias;     /* chunks with biases set */
	/* pipelines, by type slot */
	struct vk_pipe mv[N_SLOTS], glu[N_SLOTS], rows[N_SLOTS], norm, rope, attn, combine, gelu, argmax, topk;
	struct vk_pipe attn_pre; /* attn without the rope code, where rope_kv ran before (rec_attn) */
	struct vk_pipe attn_fa;  /* instead of attn_pre on matrix cores (fa_pipe_create); pipe NULL: none */
	uint32_t fa_nz;          /* its key splits (engine.h ENGINE_FA_WG) */
	struct vk_pipe mvs[N_SLOTS], mvs_glu[N_SLOTS], mm[3][N_SLOTS]; /* mm[v]: tiles of 16 << v tokens (mm_variant) */
	bool use_mvs, use_mm;
	/* mul_mm on matrix cores (shaders/mul_mm_cm.glsl), large and small tiles;
	 * a type whose pipelines are missing (pipe 0) keeps mm[] */
	struct vk_pipe mm_cm[N_SLOTS], mm_cms[N_SLOTS];
	bool use_cm;
	/* the decode tile (128 x 64) and split K (shaders/mul_mm_cm.glsl SPLITK;
	 * split_k) where the device runs mm_cm; UNICORN_VK_MM_DTILE=0 and
	 * UNICORN_VK_MM_SPLIT=0 turn each off (A/B) */
	struct vk_pipe mm_cmd[N_SLOTS], mm_cmk[N_SLOTS], mm_cmdk[N_SLOTS], mm_reduce;
	bool use_dtile, use_split;
	uint32_t split_wg;
	struct vk_buf *skp;	    /* split-K partial sums (ENGINE_MAT_PART) */
	struct vk_pipe mvb[N_SLOTS], mvb_glu[N_SLOTS]; /* batch steps: mul_mvs per token, weights read once per mvb_nt tokens */
	bool use_mvb;                      /* UNICORN_VK_BATCH_MV=tokens: mul_mvs per token column instead (A/B) */
	uint32_t mvb_min;                  /* batch rows from which mul_mvb runs (MVB_MIN_TOK; =group: mvb_nt) */
	uint32_t mvb_nt;
	bool fuse_combine;              /* attn merges its splits (no attn_combine dispatch) */
	bool fuse;                      /* !UNICORN_NO_FUSE: rope_kv in attn, combine skipped when short */
	uint32_t attn_chunk;            /* ATTN_CHUNK, ATTN_CHUNK_NARROW */
	uint32_t attn_min_chunk;        /* ATTN_MIN_CHUNK (UNICORN_VK_ATTN_MIN_CHUNK) */
	uint32_t n_split_global;        /* global layers' attention splits (UNICORN_VK_ATTN_SPLITS_GLOBAL) */
	bool step_short;                /* the step written last: every token's range is one attention split */
	bool rec_short, rec_distinct;   /* recording: short variant; rows are distinct sequences */
	uint32_t rec_disp, rec_bars;    /* dispatches and barriers recorded (engine_profile) */
	bool full_barriers;             /* UNICORN_VK_BARRIER=full: every barrier also covers transfer/host */
	/* run_forward: the command buffer replayed last and its last two GPU
	 * times (est_n of them so far), the lesser of which is the next replay's
	 * expected time (vk_submit_wait_expect); UNICORN_VK_WAIT=start keeps the
	 * poll right after the submission (A/B) */
	VkCommandBuffer est_cb;
	uint64_t est_ns[2];
	uint32_t est_n;
	bool wait_start;
	uint32_t mvs_bpt;              /* mul_mvs: target work units (engine_mvs_unit elements each) per thread */
	bool mvs_bpt_set;              /* UNICORN_VK_MVS_BPT given: every type but regrouped q4_0 takes it */
	bool mvs_generic;              /* UNICORN_VK_MVS_GENERIC=1: the whole-block dequant32 mul_mvs/mul_mvb (A/B) */
	uint32_t mvs_rpt[N_SLOTS];           /* mul_mvs: rows per thread group, by type slot (mvs_rows) */
	struct vk_pipe mvs_q4g_wide;         /* mul_mvs_q4_0g, Q4G_WIDE_RPT rows per thread group */
	/* decode's wo and down run the post-norm that follows them in their last
	 * workgroup (mul_mvs's tail, norm_tail_pick); the rmsnorm pipeline then
	 * has the tail's thread count and subgroup reductions, so rows agree bitwise */
	bool norm_tail;
	bool nt_dispatch;                    /* UNICORN_VK_NORM_TAIL=dispatch: the same numbers, rmsnorm dispatched (A/B) */
	struct vk_buf *nt_cnt;               /* the tail's workgroup count (zero between dispatches) */
	struct vk_buf *amp;                  /* argmax's row counters (zero between dispatches) and slice bests */
	struct vk_buf *tkp;                  /* top-k's row counters (zero between dispatches) and slice records */
	uint32_t tk_groups;                  /* workgroups per top-k row: engine_tk_groups(n_vocab_text) */
	uint32_t am_groups;                  /* workgroups per argmax row: AM_GROUPS, UNICORN_VK_ARGMAX_GROUPS (A/B) */
	/* x16 (gpu_worker/x16.h): rmsnorm also writes its result as 16-bit integers
	 * to xq, and the regrouped q4_0 products that read it (qkv, gate/up,
	 * logits) run the integer dot-product kernels on it (x16_pick) */
	bool use_x16;
	char kernels[200];                   /* engine_kernels */
	struct vk_buf *xq;
	struct vk_pipe mvs_x16, mvs_x16_wide, mvs_glu_x16, mvb_x16, mvb_glu_x16;
	/* wo_x16: attention (attn, attn_combine) also writes its output rows as
	 * x16 to xqa, and wo runs the x16 kernels on them (rec_attn) */
	bool wo_x16;
	bool q4g_tuned;                      /* mvs_bpt: Q4G_WO_LOGITS_BPT (UNICORN_VK_Q4G_TUNE=0: off, A/B) */
	struct vk_buf *xqa;
	/* ffn_x16: the GLU (mvs_glu_x16q) also writes its output rows as x16 to
	 * ffq, through the mailbox fmb (zero between dispatches), and down runs
	 * the x16 kernels on them (rec_ffn) */
	bool ffn_x16;
	struct vk_pipe mvs_glu_x16q;
	struct vk_buf *ffq, *fmb;
	/* profiling (engine_profile): a timestamp after every dispatch */
	bool prof;
	uint32_t prof_n;
	const char *prof_name[PROF_MAX];
	uint64_t prof_bytes[PROF_MAX];
	VkDescriptorSet s_embed, s_norm0, s_final, s_logits, s_logits_d, s_argmax, s_topk;
	VkCommandBuffer *cbs[2 * N_MODES]; /* [short * N_MODES + mode][n], recorded on first use */
	VkCommandBuffer once;          /* re-recorded for stage calls */
	/* paged KV cache: block tables [max_seqs][tab_len], written by the host
	 * into tabh and copied to tabd before the next submission that follows a
	 * change (kernels read device memory, not host memory over PCIe) */
	struct kv_layout kv;
	uint32_t tab_len;
	struct vk_buf *tabh, *tabd;
	uint8_t tab_dirty[256];        /* per sequence (max_seqs <= 256) */
	bool tab_any_dirty;
	VkCommandBuffer tabcb;
	VkCommandBuffer *stage_cbs;    /* [short][layer][ATTN|FFN|BOTH]: single-token engine_stage_io, recorded once */
	VkCommandBuffer *stageb_cbs;   /* [short][layer][ATTN|FFN][narrow|wide][n 0..batch_max]: engine_stage_batch (lazily) */
	bool range_fused;              /* engine_stage_range records the fused forward's layers (UNICORN_PIPE_UNFUSED=1: split's stages) */
	VkCommandBuffer *stager_cbs;   /* [short][narrow|wide][n 0..batch_max]: engine_stage_range over stager_l0 + stager_n */
	uint32_t stager_l0, stager_n;
	uint32_t l_lo, l_hi;           /* layers with matrices and KV (engine_opts.layer_first/end) */
	bool attn_only;                /* engine_opts.attn_only: no FFN matrices */
	bool ffn_only;                 /* engine_opts.ffn_only: no attention matrices, no KV pools */
	struct vk_buf *hio;            /* host-visible hidden rows for engine_stage_io */
	uint64_t gpu_ns;               /* GPU time of all timed submissions (engine_gpu_ns) */
	bool timed;                    /* last submission wrote timestamps */
	uint32_t n_ts;
};

/* ---- shared by engine.c, engine_stage.c and engine_profile.c ---- */

void eng_batch_results(struct engine *e, uint32_t n, uint32_t k, bool topk, uint32_t *ids, float *vals);
int eng_batch_write(struct engine *e, uint32_t n, const uint32_t *tokens, const uint32_t *seqs, const uint32_t *pos,
		       uint32_t k);
int eng_chunks_write(struct engine *e, uint32_t n, const struct engine_chunk *ch, uint32_t k, uint32_t *rows,
			uint32_t *m, bool images);
void eng_disp(struct engine *e, VkCommandBuffer cb, const char *name, uint64_t bytes, const struct vk_pipe *p,
		 VkDescriptorSet s, const void *push, uint32_t gx, uint32_t gy, uint32_t gz);
void eng_fbar(struct engine *e, VkCommandBuffer cb);
uint64_t eng_gpu_ns_add(struct engine *e, uint32_t q0, uint32_t q1);
int eng_own_check(const struct engine *e, uint32_t layer, uint32_t n, const char *fn);
void eng_rec_attn(struct engine *e, VkCommandBuffer cb, uint32_t il, uint32_t n, bool pre_norm, bool fuse);
void eng_rec_embed(struct engine *e, VkCommandBuffer cb, uint32_t n);
void eng_rec_ffn(struct engine *e, VkCommandBuffer cb, uint32_t il, uint32_t n, bool pre_norm, bool fuse);
void eng_rec_logits(struct engine *e, VkCommandBuffer cb, uint32_t n, uint32_t n_out);
void eng_rec_logits_to(struct engine *e, VkCommandBuffer cb, uint32_t n, uint32_t n_out, VkDescriptorSet s);
void eng_rec_norm(struct engine *e, VkCommandBuffer cb, VkDescriptorSet s, uint32_t mode, uint32_t n);
void eng_rec_step_copy(struct engine *e, VkCommandBuffer cb, uint32_t n);
int eng_record_mode(struct engine *e, VkCommandBuffer cb, uint32_t n, uint32_t n_out, int mode);
size_t eng_stageb_cbs_len(const struct engine *e);
int eng_step_write(struct engine *e, const uint32_t *tokens, uint32_t n, uint32_t pos0, uint32_t k);
int eng_submit(struct engine *e, VkCommandBuffer cb);
int eng_whole_check(const struct engine *e, const char *fn);

#endif
