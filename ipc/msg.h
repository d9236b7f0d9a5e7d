/* msg: the cluster's versioned binary wire format (docs/protocol.md).
 *
 * A message is a fixed 24-byte little-endian header followed by a payload whose
 * layout depends on the type:
 *
 *   off size field
 *     0    4 magic     "UNIC" (bytes 'U','N','I','C')
 *     4    2 version   MSG_VERSION; any other value is rejected
 *     6    2 type      enum msg_type; unknown types are rejected
 *     8    4 seq       sender's sequence number (answers echo it in ref_seq/ack_seq)
 *    12    4 len       payload bytes that follow the header
 *    16    4 flags     must be 0 (reserved)
 *    20    4 reserved  must be 0
 *
 * Payload fields are explicit-width little-endian integers, IEEE floats, and
 * either fixed NUL-padded char fields or length-prefixed byte strings. The
 * codec (de)serialises field by field; it never copies C structs. Messages
 * carry slot numbers and region references, never bulk data.
 *
 * Host side: struct msg is a tagged union. msg_encode validates the struct and
 * writes bytes; msg_decode validates bytes (header, length rule of the type,
 * every count against its cap, enums, strings) and fills a struct msg. Both
 * apply the same rules (msg_validate), so a message that encodes decodes.
 *
 * struct msg is large (~190 KiB, because GEN_REQ carries a prompt inline):
 * allocate it statically or on the heap in threads with small stacks.
 *
 * This module has no nng dependency (it is fuzzed); ipc/bus.h moves messages. */
#ifndef UNICORN_MSG_H
#define UNICORN_MSG_H

#include <stddef.h>
#include <stdint.h>

#define MSG_MAGIC 0x43494E55u     /* "UNIC" read as a little-endian u32 */
#define MSG_VERSION 13 /* 11: GEN_REQ schema + logit_bias, RUN_CHUNKS full-row heads; 2: RUN_BATCH; 3: GEN_REQ sampler penalties, min_p, timeout_ms; 4: STAGE_BATCH;
                        * 5: GEN_REQ top_logprobs + MSG_GEN_LOGPROBS, GEN_TOKEN logprobs;
                        * 6: GEN_REQ MSG_GEN_TOKENS (a prompt of token ids), 128 KiB prompts;
                        * 7: RUN_CHUNKS; 8: FLOW; 9: chunk FLOWs of several sequences;
                        * 10: chunk FLOWs of up to 512 tokens;
                        * 12: GEN_REQ images, IMAGE; GEN_PROMPT parts + GEN_REQ MSG_GEN_STAGED (prompts up to 4 MiB);
                        *     head mode 3 (MSG_HEAD_FULL, RUN_CHUNKS entry head 3: biases and mask on the GPU);
                        * 13: end reason 7, MSG_END_IMAGE (a request's image could not be encoded) */
#define MSG_HDR_SIZE 24

/* Caps. Every count in a message is checked against these. */
#define MSG_MAX_PAYLOAD 196608    /* largest payload (GEN_REQ with a full prompt and schema) */
#define MSG_MAX_TOKENS 256        /* tokens per EMBED/RUN (one prefill chunk) */
#define MSG_MAX_SLOTS 64          /* activation-region micro-batch slots */
#define MSG_MAX_ROWS 512          /* tokens of one RUN_CHUNKS (all its chunks together) */
#define MSG_MAX_LAYERS 256        /* = MODEL_MAX_LAYERS */
#define MSG_MAX_POS (1u << 24)    /* positions: pos0 + n <= this */
#define MSG_MAX_TOPK 64           /* k of a top-k head */
#define MSG_MAX_TEXT 256          /* ERROR text field (NUL-terminated within it) */
#define MSG_MAX_BACKEND 32        /* STATUS backend field */
#define MSG_MAX_DEVICE 128        /* STATUS device field */
#define MSG_MAX_PROMPT 131072     /* prompt bytes in one GEN_REQ or GEN_PROMPT (MSG_GEN_TOKENS: 32768 ids) */
#define MSG_MAX_PROMPT_ALL (4u << 20) /* v12: a whole prompt, staged parts + GEN_REQ's (1,048,576 ids) */
#define MSG_MAX_GEN 4096          /* GEN_REQ max_tokens and resumed tokens */
#define MSG_MAX_PIECE 256         /* GEN_TOKEN piece bytes */
#define MSG_MAX_WAIT_MS 10000     /* GEN_POLL long-poll wait */
#define MSG_MAX_TOP_LP 20         /* GEN_REQ top_logprobs, GEN_TOKEN n_top (OpenAI's cap) */
#define MSG_MAX_SCHEMA 32768      /* GEN_REQ schema bytes (constrain/: CS_MAX_SCHEMA_BYTES) */
#define MSG_MAX_BIAS 300          /* GEN_REQ logit_bias entries (OpenAI's cap) */
#define MSG_MAX_IMAGES 16         /* GEN_REQ images (docs/vision.md) */
#define MSG_DIGEST 32             /* an image's sha256 */
#define MSG_MAX_BUF (MSG_HDR_SIZE + MSG_MAX_PAYLOAD) /* largest encoded message */

enum msg_type {
	/* control (every link) */
	MSG_HELLO = 1,      /* dialer -> listener on connect: who am I */
	MSG_WELCOME = 2,    /* listener -> dialer: answer to HELLO */
	MSG_ACK = 3,        /* generic answer: ack_seq, code, value */
	MSG_PING = 4,       /* watchdog probe */
	MSG_PONG = 5,       /* watchdog answer (same nonce) */
	MSG_STATUS_REQ = 6, /* empty payload */
	MSG_STATUS = 7,
	MSG_SHUTDOWN = 8,
	MSG_ERROR = 9,
	/* steps (coordinator -> workers, workers -> coordinator) */
	MSG_EMBED = 16,
	MSG_STAGE = 17,
	MSG_HEAD = 18,
	MSG_RUN = 19,
	MSG_DONE = 20,
	MSG_RESET_SEQ = 21,
	MSG_RUN_BATCH = 22, /* fused decode step of several sequences, one token each */
	MSG_STAGE_BATCH = 23, /* split: one stage (embed, attn, ffn, head) of several sequences */
	MSG_RUN_CHUNKS = 24, /* fused step of several sequences, a chunk of tokens each */
	MSG_FLOW = 25,      /* split: a micro-batch's whole step, passed worker to worker */
	MSG_IMAGE = 26,     /* v12: encode an image into the gpu worker's image area (DONE answers) */
	/* CLI <-> coordinator (req/rep, every request idempotent) */
	MSG_GEN_REQ = 32,
	MSG_GEN_POLL = 33,
	MSG_GEN_TOKEN = 34,
	MSG_GEN_END = 35,
	MSG_GEN_CANCEL = 36,
	MSG_GEN_PROMPT = 37, /* v12: a part of a long prompt, before its GEN_REQ */
};

enum msg_role {
	MSG_ROLE_SUPERVISOR = 1,
	MSG_ROLE_LOADER = 2,
	MSG_ROLE_NPU_WORKER = 3,
	MSG_ROLE_GPU_WORKER = 4,
	MSG_ROLE_COORDINATOR = 5,
	MSG_ROLE_CLI = 6,
	MSG_ROLE_API = 7,          /* v5: unicorn-api, the HTTP server (api/; issue 14) */
};
#define MSG_ROLE_MAX MSG_ROLE_API

enum msg_share_path { MSG_SHARE_NONE = 0, MSG_SHARE_MEMFD = 1, MSG_SHARE_UDMABUF = 2 };
enum msg_import { MSG_IMPORT_NONE = 0, MSG_IMPORT_ZERO_COPY = 1, MSG_IMPORT_UPLOAD = 2 };
enum msg_stage_kind { MSG_STAGE_ATTN = 1, MSG_STAGE_FFN = 2, MSG_STAGE_LAYERS = 3 };
/* MSG_HEAD_FULL (HEAD, STAGE_BATCH and FLOW heads of the split and pipeline
 * placements): the top-k as MSG_HEAD_TOPK, and every head row's whole
 * logit row into its slot's logits area (ipc/attach.h), for structured
 * output and logit_bias (the fused placement's RUN_CHUNKS marks such rows
 * per entry instead: MSG_CHUNK_HEAD_FULL). */
enum msg_head_mode { MSG_HEAD_ARGMAX = 1, MSG_HEAD_TOPK = 2, MSG_HEAD_FULL = 3 };
enum msg_end_reason {
	MSG_END_STOP = 1,      /* end-of-turn / EOS token */
	MSG_END_LENGTH = 2,    /* max_tokens reached */
	MSG_END_CANCELLED = 3, /* GEN_CANCEL or the client stopped polling */
	MSG_END_ERROR = 4,     /* see the ERROR the coordinator logged */
	MSG_END_CONTEXT = 5,   /* context window full */
	MSG_END_TIMEOUT = 6,   /* ran longer than its timeout (GEN_REQ timeout_ms or the server's limit) */
	MSG_END_IMAGE = 7,     /* v12: an image of the request could not be encoded when it ran (its
	                        * pixels left RUNDIR/images or could not be read); the others ran on */
};
#define MSG_END_MAX MSG_END_IMAGE

#define MSG_GEN_CHAT 0x1u       /* GEN_REQ flags: wrap the prompt in the chat template */
#define MSG_GEN_LOGPROBS 0x2u   /* GEN_REQ flags: every GEN_TOKEN carries its logprobs */
/* GEN_REQ flags: the prompt is n_prompt / 4 token ids (u32 little-endian, the
 * template already applied), not text; the API process tokenizes itself so
 * it knows the prompt's length (usage) and renders multi-message chats */
#define MSG_GEN_TOKENS 0x4u
/* GEN_REQ flags (v11): the output must be JSON valid against schema[] (empty:
 * any JSON object); the coordinator masks every step's full logit row */
#define MSG_GEN_JSON 0x8u
/* GEN_REQ flags (v12): the prompt is the GEN_PROMPT parts staged under this
 * request id, then prompt[] (a prompt longer than one message carries) */
#define MSG_GEN_STAGED 0x10u
#define MSG_GEN_FLAGS_ALL (MSG_GEN_CHAT | MSG_GEN_LOGPROBS | MSG_GEN_TOKENS | MSG_GEN_JSON | MSG_GEN_STAGED)
#define MSG_TOK_LOGPROB 0x1u    /* GEN_TOKEN flags: logprob and top[] are set */
#define MSG_TOK_FLAGS_ALL MSG_TOK_LOGPROB
#define MSG_RESET_ALL 0x1u      /* RESET_SEQ flags: drop every sequence (seq_id ignored) */

/* HELLO and WELCOME: 16 bytes. version = MSG_VERSION of the sender. */
struct msg_hello {
	uint32_t role;      /* enum msg_role */
	uint32_t pid;
	uint32_t version;
	uint32_t flags;     /* 0 */
};

/* ACK: 16 bytes. code is 0 or a negative ERR_* code; value is type-specific
 * (GEN_REQ: request id accepted; GEN_POLL: tokens produced so far). */
struct msg_ack {
	uint32_t ack_seq;
	int32_t code;
	uint64_t value;
};

/* PING / PONG: 8 bytes. */
struct msg_ping {
	uint64_t nonce;
};

/* STATUS: 232 bytes. Strings are NUL-terminated within their field. */
struct msg_status {
	uint32_t role;                  /* enum msg_role */
	uint32_t pid;
	char backend[MSG_MAX_BACKEND];  /* "vulkan", "xrt", "-" */
	char device[MSG_MAX_DEVICE];    /* e.g. "AMD Radeon 780M (RADV PHOENIX)" */
	uint64_t weights_bytes, kv_bytes, scratch_bytes;
	uint32_t share_path;            /* enum msg_share_path */
	uint32_t import_mode;           /* enum msg_import */
	uint64_t uptime_ns, busy_ns, steps;
	uint32_t restarts;
	uint32_t reserved;              /* 0 */
};

/* SHUTDOWN: 8 bytes. */
struct msg_shutdown {
	uint32_t grace_ms;  /* finish in-flight work within this, then exit 0 */
	uint32_t reason;    /* free-form code for logs; to unicorn-up's control.ipc,
	                     * MSG_SHUTDOWN_DRAIN: drain first, grace_ms = the drain's limit */
};
#define MSG_SHUTDOWN_DRAIN 1u  /* docs/scale.md: refuse new requests, let running ones end */

/* ERROR: 264 bytes. */
struct msg_error {
	int32_t code;                   /* negative ERR_* */
	uint32_t ref_seq;               /* seq of the message that failed (0: none) */
	char text[MSG_MAX_TEXT];        /* NUL-terminated within the field */
};

/* EMBED: 12 + 4n bytes. Look up n token embeddings into rows [0,n) of slot. */
struct msg_embed {
	uint32_t seq_id;
	uint32_t slot;                  /* < MSG_MAX_SLOTS */
	uint32_t n;                     /* 1..MSG_MAX_TOKENS */
	uint32_t tokens[MSG_MAX_TOKENS];
};

/* STAGE: 28 bytes. Run stage on rows [0,n) of slot, positions pos0.. of
 * sequence seq_id. ATTN/FFN: one layer (n_layers = 1); LAYERS: whole layers
 * [layer, layer + n_layers). */
struct msg_stage {
	uint32_t seq_id;
	uint32_t slot;
	uint32_t stage;                 /* enum msg_stage_kind */
	uint32_t layer;
	uint32_t n_layers;
	uint32_t n;
	uint32_t pos0;
};

/* HEAD: 20 bytes. Final norm + logits + reduction on the last of the n rows
 * of slot; the result goes to the slot's head area in the activation region. */
struct msg_head {
	uint32_t seq_id;
	uint32_t slot;
	uint32_t n;
	uint32_t mode;                  /* enum msg_head_mode */
	uint32_t k;                     /* ARGMAX: 1; TOPK: 1..MSG_MAX_TOPK */
};

/* RUN (fused placement): 24 + 4n bytes. embed -> all layers -> head. */
struct msg_run {
	uint32_t seq_id;
	uint32_t slot;
	uint32_t n;
	uint32_t pos0;
	uint32_t mode;                  /* enum msg_head_mode; only meaningful if the step ends in a head */
	uint32_t k;
	uint32_t tokens[MSG_MAX_TOKENS];
};

/* RUN_BATCH (fused placement, continuous batching): 12 + 16n bytes. One token
 * for each of n sequences, each at its own position, in one engine submission;
 * entry i's head result (argmax / top-k) goes to the head area of its slot.
 * Slots (= KV slots) are distinct. Answered by one DONE (seq_id and token of
 * entries[0]; every entry's ids/logits are in its slot's head area). */
struct msg_run_batch_entry {
	uint32_t seq_id;
	uint32_t slot;                  /* < MSG_MAX_SLOTS, distinct within the batch */
	uint32_t pos;                   /* < MSG_MAX_POS */
	uint32_t token;
};
struct msg_run_batch {
	uint32_t n;                     /* 1..MSG_MAX_SLOTS */
	uint32_t mode;                  /* enum msg_head_mode */
	uint32_t k;                     /* ARGMAX: 1; TOPK: 1..MSG_MAX_TOPK */
	struct msg_run_batch_entry e[MSG_MAX_SLOTS];
};

/* STAGE_BATCH (split placement, continuous batching): 20 + 16n bytes. One op
 * for n sequences, one token each at its own position, in one submission:
 * EMBED writes entry i's token row to row 0 of its slot's hidden state; ATTN
 * and FFN run that layer's stage on row 0 of each slot (ATTN through the
 * slot's KV block table); HEAD puts each entry's argmax / top-k in its slot's
 * head area. Slots distinct; entries as RUN_BATCH's. Answered by one DONE
 * (seq_id and, for HEAD, the token of entries[0]). */
enum msg_batch_op { MSG_OP_EMBED = 1, MSG_OP_ATTN = 2, MSG_OP_FFN = 3, MSG_OP_HEAD = 4 };
struct msg_stage_batch {
	uint32_t op;                    /* enum msg_batch_op */
	uint32_t layer;                 /* ATTN/FFN: < MSG_MAX_LAYERS; else 0 */
	uint32_t n;                     /* 1..MSG_MAX_SLOTS */
	uint32_t mode;                  /* HEAD: enum msg_head_mode; else ARGMAX */
	uint32_t k;                     /* ARGMAX: 1; TOPK: 1..MSG_MAX_TOPK */
	struct msg_run_batch_entry e[MSG_MAX_SLOTS];
};

/* FLOW (v8, split placement with the data plane): one micro-batch's whole
 * step, 96 + 4 n_hops + 16n + 4 n_tok + 8 n_ops bytes (or, MSG_FLOW_CHUNK, one
 * sequence's prompt chunk). The coordinator posts it (op EMBED) to
 * the gpu worker's request ring; each worker runs op on the entries (as
 * STAGE_BATCH would) and passes the FLOW on to the worker that runs the next
 * op (EMBED -> ATTN 0 -> FFN 0 -> ATTN 1 -> ... -> FFN n_layer-1 -> HEAD if
 * head) through that worker's peer ring, without the coordinator; after the
 * last op (or a failed one) it goes back to the coordinator's done ring as
 * op END. Along the way it gathers each side's device and wall time and
 * every handoff's latency (docs/protocol.md "Flows"). */
#define MSG_OP_END 5            /* FLOW only: the step is over (worker -> coordinator) */
#define MSG_MAX_HOPS (2 * MSG_MAX_LAYERS + 2)
enum msg_flow_side { MSG_FLOW_FFN = 0, MSG_FLOW_ATTN = 1 };
#define MSG_FLOW_HEAD 1u        /* the step samples: HEAD after the last FFN */
#define MSG_FLOW_WIDE 2u        /* every row on the mat-mat kernels (a wide chunk, as RUN_CHUNKS' flag) */
#define MSG_FLOW_TIMES 8u       /* workers record each op's start and duration in op_us (the trace) */
#define MSG_FLOW_CHUNK 4u       /* prompt chunks of 1..MSG_FLOW_CHUNK_SEQS sequences, n_tok tokens in
                                 * all: entry i's chunk is e[i].token & MSG_CHUNK_COUNT tokens at e[i].pos
                                 * (tokens[] in entry order), each run as the ops of EMBED/STAGE/HEAD run
                                 * it alone; MSG_CHUNK_HEAD: its last row samples (then, and only then,
                                 * MSG_FLOW_HEAD is set) */
#define MSG_FLOW_CHUNK_SEQS 16  /* a chunk FLOW's entries (then it fits a ring entry at 256 layers) */
/* a chunk FLOW's tokens: as many as the worker's stage rows (MSG_MAX_ROWS),
 * where a ring entry has room for them at the model's layer count
 * (dp_flow_chunk_tokens: 512 up to 207 layers, 415 at 256) */
#define MSG_MAX_FLOW_TOKENS MSG_MAX_ROWS
#define MSG_CHUNK_COUNT 0xffffu
#define MSG_CHUNK_HEAD 0x80000000u
struct msg_flow {
	uint32_t op;                    /* EMBED, ATTN, FFN, HEAD: the receiver runs it; END */
	uint32_t layer;                 /* ATTN/FFN: < n_layer; else 0 */
	uint32_t n_layer;               /* the model's layers, 1..MSG_MAX_LAYERS */
	uint32_t flags;                 /* MSG_FLOW_HEAD: HEAD after the last FFN; MSG_FLOW_WIDE: mat-mat kernels */
	uint32_t mode, k;               /* the head's (ARGMAX, 1 without MSG_FLOW_HEAD) */
	uint32_t origin_seq;            /* the coordinator's seq of the post: END answers it */
	uint32_t epoch;                 /* the data plane's epoch when posted: a worker drops older ones */
	int32_t status;                 /* END: 0, or the failed op's negative ERR_* */
	uint32_t token;                 /* END after a head: entry 0's top token */
	uint64_t t_post_ns;             /* CLOCK_MONOTONIC when its sender posted it */
	uint64_t gpu_ns[2];             /* device time so far, per enum msg_flow_side */
	uint32_t wall_us[2];            /* workers' wall time so far, per side */
	uint32_t n_hops;                /* handoffs so far, <= MSG_MAX_HOPS */
	uint32_t hop_us[MSG_MAX_HOPS];  /* handoff i: posted (or, if later, its receiver free) -> taken, us */
	uint32_t n;                     /* 1..MSG_MAX_SLOTS (..MSG_FLOW_CHUNK_SEQS with MSG_FLOW_CHUNK) */
	struct msg_run_batch_entry e[MSG_MAX_SLOTS];
	uint32_t n_tok;                 /* MSG_FLOW_CHUNK: 1..MSG_MAX_FLOW_TOKENS, the entries' counts summed; else 0 */
	uint32_t tokens[MSG_MAX_FLOW_TOKENS];
	uint64_t t_origin_ns;           /* CLOCK_MONOTONIC when the coordinator posted it */
	uint32_t n_ops;                 /* MSG_FLOW_TIMES: ops recorded, <= MSG_MAX_HOPS; else 0 */
	uint32_t op_us[2 * MSG_MAX_HOPS]; /* op i: start (us after t_origin_ns), duration (us) */
};

/* RUN_CHUNKS (fused placement, batched prefill and decode): 24 + 20n + 4t
 * bytes. A chunk of tokens for each of n sequences (entry i: e[i].n tokens at
 * positions e[i].pos0.., its tokens the next e[i].n of tokens[]), all in one
 * engine submission (one forward over the concatenated rows). An entry with
 * head 1 gets its last row's head result (mode, k) in its slot's head area.
 * flags MSG_CHUNKS_WIDE: every matrix product runs the tiled mat-mat kernel
 * (weights read once per 64 rows); without it each row is computed as a lone
 * decode token (docs/coordinator.md "Batched rounds"). Slots distinct.
 * Answered by one DONE (seq_id of e[0], token of the first entry with a head). */
#define MSG_CHUNKS_WIDE 1u
struct msg_run_chunk {
	uint32_t seq_id;
	uint32_t slot;                  /* < MSG_MAX_SLOTS, distinct within the message */
	uint32_t pos0;                  /* pos0 + n <= MSG_MAX_POS */
	uint32_t n;                     /* 1..MSG_MAX_TOKENS */
	uint32_t head;                  /* 0, 1, MSG_CHUNK_HEAD_FULL or MSG_CHUNK_HEAD_BIAS */
};
/* RUN_CHUNKS head (v11): the head result as for 1, and the whole logit row
 * (n_vocab f32) in the slot's logits area (ipc/attach.h): constrained
 * decoding and logit_bias choose from every token */
#define MSG_CHUNK_HEAD_FULL 2u
/* RUN_CHUNKS head: the head result as for 1 (top-k mode), of the logit row
 * plus the logit_bias list and with the token mask the coordinator wrote to
 * the slot's logits area: word 0 the bias count <= MSG_MAX_BIAS, then (id
 * u32, bias f32) pairs, ids ascending; word MSG_SLOT_MASK_FLAG 1 when a mask
 * follows at word MSG_SLOT_MASK, (n_vocab + 31) / 32 words, bit t set where
 * token t may be chosen (structured output). The GPU top-k adds the biases
 * and drops the masked tokens; no row comes back */
#define MSG_CHUNK_HEAD_BIAS 3u
#define MSG_SLOT_MASK_FLAG 608u
#define MSG_SLOT_MASK 610u   /* 8-byte aligned: the coordinator writes it as u64 words */
struct msg_run_chunks {
	uint32_t n;                     /* entries, 1..MSG_MAX_SLOTS */
	uint32_t n_tok;                 /* sum of the entries' n, <= MSG_MAX_ROWS */
	uint32_t mode;                  /* enum msg_head_mode of the entries with a head */
	uint32_t k;                     /* ARGMAX: 1; TOPK: 1..MSG_MAX_TOPK */
	uint32_t flags;                 /* MSG_CHUNKS_WIDE */
	struct msg_run_chunk e[MSG_MAX_SLOTS];
	uint32_t tokens[MSG_MAX_ROWS];
};

/* DONE: 32 bytes. Answer to EMBED/STAGE/HEAD/RUN/RUN_BATCH/RESET_SEQ. token is the argmax
 * (ARGMAX head) or the top-1 id; the k ids and logits of a top-k head are in
 * the slot's head area of the activation region. */
struct msg_done {
	uint32_t ref_seq;
	uint32_t seq_id;
	int32_t status;                 /* 0 or a negative ERR_* */
	uint32_t token;
	uint32_t k;                     /* 0 when no head ran */
	uint32_t wall_us;               /* (v4) the worker's wall time from receiving the
	                                 * message to answering it, us (saturating): the
	                                 * coordinator's round trip minus this is the handoff */
	uint64_t gpu_ns;                /* device time of this step */
};

/* RESET_SEQ: 8 bytes. Forget the KV cache of seq_id (or all). */
struct msg_reset_seq {
	uint32_t seq_id;
	uint32_t flags;                 /* MSG_RESET_ALL */
};

/* GEN_REQ: 80 + 4*n_resume + n_prompt + n_schema + 8*n_bias + 32*n_images bytes. request_id is chosen by the
 * client (random, non-zero) so a resend or a resubmission after a coordinator
 * restart is recognised; resume[] are the tokens already received. The
 * sampler fields have the ranges of the HTTP API (api/openai.c), so
 * both paths accept the same requests (repetition_penalty 1 = off; 0 is
 * refused there, so here too). */
struct msg_gen_req {
	uint64_t request_id;
	uint64_t seed;
	uint32_t max_tokens;            /* 1..MSG_MAX_GEN */
	uint32_t top_k;                 /* 0 (off) .. MSG_MAX_TOPK */
	float temperature;              /* 0 (greedy) .. 100, finite */
	float top_p;                    /* (0, 1]; 1 = off */
	uint32_t flags;                 /* MSG_GEN_CHAT, MSG_GEN_LOGPROBS */
	uint32_t n_resume;              /* <= max_tokens */
	uint32_t n_prompt;              /* 1..MSG_MAX_PROMPT (MSG_GEN_STAGED: the part after the staged ones) */
	float min_p;                    /* [0, 1]; 0 = off */
	float repetition_penalty;       /* (0, 100]; 1 = off */
	float presence_penalty;         /* [-2, 2]; 0 = off */
	float frequency_penalty;        /* [-2, 2]; 0 = off */
	uint32_t timeout_ms;            /* 0 = the server's limit; else min(this, the limit) */
	uint32_t top_logprobs;          /* v5: alternatives per token, 0..MSG_MAX_TOP_LP; 0 without
	                                 * MSG_GEN_LOGPROBS */
	uint32_t n_schema;              /* v11: schema bytes (MSG_GEN_JSON only), <= MSG_MAX_SCHEMA */
	uint32_t n_bias;                /* v11: logit_bias entries, <= MSG_MAX_BIAS */
	uint32_t resume[MSG_MAX_GEN];
	char prompt[MSG_MAX_PROMPT + 1]; /* n_prompt bytes, no NUL inside (text); decoder adds one */
	char schema[MSG_MAX_SCHEMA + 1]; /* v11: a JSON schema, no NUL inside; decoder adds one */
	uint32_t bias_ids[MSG_MAX_BIAS]; /* v11: token ids */
	float bias[MSG_MAX_BIAS];       /* v11: added to their logits, [-100, 100] */
	/* v12 (MSG_GEN_TOKENS only): the prompt's images in order, by digest;
	 * image k's rows are the k-th run of ids with bit 31 set (docs/vision.md) */
	uint32_t n_images;              /* <= MSG_MAX_IMAGES */
	uint8_t images[MSG_MAX_IMAGES][MSG_DIGEST];
};

/* IMAGE: 44 bytes (v12). Encode the image whose pixels the API left in
 * RUNDIR/images/<digest in hex> into slot of the gpu worker's image area
 * (rows rows: the projector's tokens per image); DONE answers (status 0 or
 * the error). */
/* image slots of a worker's area for images of rows rows: a RUN_CHUNKS'
 * images all at once, and one more (the coordinator and the worker agree) */
#define MSG_IMAGE_SLOTS(rows) (MSG_MAX_ROWS / (rows) + 1 < 256u ? MSG_MAX_ROWS / (rows) + 1 : 256u)
struct msg_image {
	uint32_t slot;
	uint32_t rows;
	uint8_t digest[MSG_DIGEST];
	uint32_t pad;
};

/* GEN_POLL: 16 bytes. "Give me token #from of request_id, waiting up to
 * wait_ms." Answered by GEN_TOKEN, GEN_END (from == tokens produced and the
 * request is finished), ACK code ERR_TIMEOUT (nothing new yet; value = tokens
 * so far) or ERROR. */
struct msg_gen_poll {
	uint64_t request_id;
	uint32_t from;
	uint32_t wait_ms;               /* <= MSG_MAX_WAIT_MS */
};

/* GEN_TOKEN: 32 + 8*n_top + n_piece bytes. With MSG_TOK_LOGPROB (the request
 * asked MSG_GEN_LOGPROBS and the token was generated in this coordinator's
 * run; a token the client resumed has none): logprob of the token in the raw
 * model distribution (temperature 1, before penalties; <= 0) and the n_top
 * most likely tokens, most likely first (docs/http.md "Logprobs"). The text
 * of each alternative is the receiver's job (it has the tokenizer). */
struct msg_gen_token {
	uint64_t request_id;
	uint32_t index;                 /* 0-based position among generated tokens */
	uint32_t token;
	uint32_t flags;                 /* v5: MSG_TOK_LOGPROB */
	float logprob;                  /* v5: <= 0 (or -inf); 0 without MSG_TOK_LOGPROB */
	uint32_t n_top;                 /* v5: <= MSG_MAX_TOP_LP; 0 without MSG_TOK_LOGPROB */
	uint32_t top_ids[MSG_MAX_TOP_LP];
	float top_lps[MSG_MAX_TOP_LP];  /* <= 0 (or -inf), descending */
	uint32_t n_piece;               /* <= MSG_MAX_PIECE */
	char piece[MSG_MAX_PIECE + 1];  /* detokenized text, no NUL inside; decoder adds one */
};

/* GEN_END: 16 bytes. */
struct msg_gen_end {
	uint64_t request_id;
	uint32_t n_tokens;              /* tokens generated in total */
	uint32_t reason;                /* enum msg_end_reason */
};

/* GEN_CANCEL: 8 bytes. Answered by ACK. */
struct msg_gen_cancel {
	uint64_t request_id;
};

/* GEN_PROMPT (v12): 20 + n bytes. Part of a prompt longer than one GEN_REQ
 * carries (MSG_MAX_PROMPT): the client sends the first `total` bytes in order
 * (offset = bytes sent before), then GEN_REQ with MSG_GEN_STAGED and the rest
 * in prompt[]. offset 0 (re)starts the request's staging. Answered by ACK
 * value = bytes staged so far (a resent part is acknowledged again: the
 * client continues from value), or
 * ERROR: ERR_NOTFOUND (nothing staged under that id: the coordinator
 * restarted or dropped it; start again at offset 0), ERR_RANGE (too many
 * prompts being staged at once). The receiver allocates `total` (checked
 * against MSG_MAX_PROMPT_ALL) at offset 0 and nothing later. */
struct msg_gen_prompt {
	uint64_t request_id;
	uint32_t total;                 /* 1..MSG_MAX_PROMPT_ALL (with GEN_REQ's part: at most that) */
	uint32_t offset;                /* offset + n <= total */
	uint32_t n;                     /* 1..MSG_MAX_PROMPT */
	char data[MSG_MAX_PROMPT];
};

struct msg {
	uint16_t type;                  /* enum msg_type */
	uint32_t seq;
	union {
		struct msg_hello hello;     /* HELLO, WELCOME */
		struct msg_ack ack;
		struct msg_ping ping;       /* PING, PONG */
		struct msg_status status;
		struct msg_shutdown shutdown;
		struct msg_error error;
		struct msg_embed embed;
		struct msg_stage stage;
		struct msg_head head;
		struct msg_run run;
		struct msg_run_batch run_batch;
		struct msg_stage_batch stage_batch;
		struct msg_run_chunks run_chunks;
		struct msg_flow flow;
		struct msg_done done;
		struct msg_reset_seq reset_seq;
		struct msg_gen_req gen_req;
		struct msg_image image;
		struct msg_gen_poll gen_poll;
		struct msg_gen_token gen_token;
		struct msg_gen_end gen_end;
		struct msg_gen_cancel gen_cancel;
		struct msg_gen_prompt gen_prompt;
	} u;                            /* STATUS_REQ has no payload */
};

/* Wire sizes of the fixed payloads (and fixed parts of variable ones). */
#define MSG_SIZE_HELLO 16
#define MSG_SIZE_ACK 16
#define MSG_SIZE_PING 8
#define MSG_SIZE_STATUS (4 + 4 + MSG_MAX_BACKEND + MSG_MAX_DEVICE + 3 * 8 + 4 + 4 + 3 * 8 + 4 + 4)
#define MSG_SIZE_SHUTDOWN 8
#define MSG_SIZE_ERROR (4 + 4 + MSG_MAX_TEXT)
#define MSG_SIZE_EMBED_BASE 12
#define MSG_SIZE_STAGE 28
#define MSG_SIZE_HEAD 20
#define MSG_SIZE_RUN_BASE 24
#define MSG_SIZE_RUN_BATCH_BASE 12
#define MSG_SIZE_RUN_BATCH_ENTRY 16
#define MSG_SIZE_STAGE_BATCH_BASE 20
#define MSG_SIZE_RUN_CHUNKS_BASE 20
#define MSG_SIZE_RUN_CHUNK_ENTRY 20
#define MSG_SIZE_DONE 32
#define MSG_SIZE_FLOW_BASE 96
#define MSG_SIZE_RESET_SEQ 8
#define MSG_SIZE_GEN_REQ_BASE 76 /* 2 u64 + 7 u32/f32 (v2) + 5 u32/f32 (v3) + top_logprobs (v5) + 2 (v11) */
#define MSG_SIZE_GEN_POLL 16
#define MSG_SIZE_GEN_TOKEN_BASE 32 /* u64 + 6 u32/f32 (index, token, flags, logprob, n_top, n_piece) */
#define MSG_SIZE_GEN_END 16
#define MSG_SIZE_GEN_CANCEL 8
#define MSG_SIZE_IMAGE 44
#define MSG_SIZE_GEN_PROMPT_BASE 20

_Static_assert(MSG_SIZE_STATUS == 232, "STATUS wire size");
_Static_assert(MSG_SIZE_ERROR == 264, "ERROR wire size");
_Static_assert(MSG_SIZE_EMBED_BASE + 4 * MSG_MAX_TOKENS <= MSG_MAX_PAYLOAD, "EMBED fits");
_Static_assert(MSG_SIZE_RUN_BASE + 4 * MSG_MAX_TOKENS <= MSG_MAX_PAYLOAD, "RUN fits");
_Static_assert(MSG_SIZE_RUN_BATCH_BASE + MSG_SIZE_RUN_BATCH_ENTRY * MSG_MAX_SLOTS <= MSG_MAX_PAYLOAD, "RUN_BATCH fits");
_Static_assert(MSG_SIZE_RUN_CHUNKS_BASE + MSG_SIZE_RUN_CHUNK_ENTRY * MSG_MAX_SLOTS + 4 * MSG_MAX_ROWS <=
	       MSG_MAX_PAYLOAD, "RUN_CHUNKS fits");
_Static_assert(MSG_SIZE_FLOW_BASE + 12 * MSG_MAX_HOPS + MSG_SIZE_RUN_BATCH_ENTRY * MSG_MAX_SLOTS + 4 * MSG_MAX_FLOW_TOKENS <=
	       MSG_MAX_PAYLOAD,
	       "FLOW fits");
_Static_assert(MSG_MAX_ROWS >= MSG_MAX_TOKENS, "a whole chunk fits a RUN_CHUNKS");
_Static_assert(MSG_SIZE_GEN_REQ_BASE == 2 * 8 + 7 * 4 + 5 * 4 + 4 + 8, "GEN_REQ fixed wire size");
_Static_assert(MSG_SIZE_GEN_REQ_BASE + 4 * MSG_MAX_GEN + MSG_MAX_PROMPT + MSG_MAX_SCHEMA + 8 * MSG_MAX_BIAS + 4 +
		       MSG_DIGEST * MSG_MAX_IMAGES <=
	       MSG_MAX_PAYLOAD,
	       "GEN_REQ fits");
_Static_assert(MSG_SIZE_GEN_PROMPT_BASE + MSG_MAX_PROMPT <= MSG_MAX_PAYLOAD, "GEN_PROMPT fits");
_Static_assert(MSG_MAX_PROMPT % 4 == 0 && MSG_MAX_PROMPT_ALL % 4 == 0, "token ids split on whole ids");
_Static_assert(MSG_SIZE_GEN_TOKEN_BASE + 8 * MSG_MAX_TOP_LP + MSG_MAX_PIECE <= MSG_MAX_PAYLOAD,
	       "GEN_TOKEN fits");

/* Name of a type ("HELLO"), "?" if unknown. */
const char *msg_type_name(uint32_t type);

/* Check every field of m against the rules of its type (ERR_INVAL with a
 * message naming the type and field). */
int msg_validate(const struct msg *m);

/* Payload bytes m would encode to (after validation), or a negative ERR_*. */
int msg_payload_size(const struct msg *m, size_t *size);

/* Validate and encode m (header + payload) into buf[cap]; *len = bytes
 * written. ERR_RANGE if cap is too small (MSG_MAX_BUF always suffices). */
int msg_encode(const struct msg *m, void *buf, size_t cap, size_t *len);

/* Decode and validate len bytes; out is fully overwritten. ERR_INVAL with a
 * message for anything malformed. The input must be exactly one message. */
int msg_decode(const void *buf, size_t len, struct msg *out);

/* Convenience for building messages: zero m and set its type. */
void msg_init(struct msg *m, uint16_t type);

/* Copy s into a fixed char field of cap bytes, truncating so a NUL fits. */
void msg_set_str(char *field, size_t cap, const char *s);

#endif
