/* msg: every type round-trips; each validation rule rejects a crafted message. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "ipc/dataplane.h"
#include "ipc/msg.h"

static struct msg a, b;
static uint8_t buf[MSG_MAX_BUF];

static void fill(struct msg *m, uint16_t type)
{
	msg_init(m, type);
	m->seq = 77;
	switch (type) {
	case MSG_HELLO: case MSG_WELCOME:
		m->u.hello = (struct msg_hello){ MSG_ROLE_GPU_WORKER, 1234, MSG_VERSION, 0 };
		break;
	case MSG_ACK: m->u.ack = (struct msg_ack){ 5, -8, 0x1122334455667788ull }; break;
	case MSG_PING: case MSG_PONG: m->u.ping.nonce = 0xdeadbeefcafef00dull; break;
	case MSG_STATUS:
		m->u.status.role = MSG_ROLE_NPU_WORKER;
		m->u.status.pid = 42;
		msg_set_str(m->u.status.backend, MSG_MAX_BACKEND, "vulkan");
		msg_set_str(m->u.status.device, MSG_MAX_DEVICE, "llvmpipe (LLVM 15.0.6, 256 bits)");
		m->u.status.weights_bytes = 1ull << 33;
		m->u.status.kv_bytes = 3;
		m->u.status.scratch_bytes = 4;
		m->u.status.share_path = MSG_SHARE_UDMABUF;
		m->u.status.import_mode = MSG_IMPORT_UPLOAD;
		m->u.status.uptime_ns = 5, m->u.status.busy_ns = 6, m->u.status.steps = 7;
		m->u.status.restarts = 2;
		break;
	case MSG_SHUTDOWN: m->u.shutdown = (struct msg_shutdown){ 2000, 3 }; break;
	case MSG_ERROR:
		m->u.error.code = -4, m->u.error.ref_seq = 9;
		msg_set_str(m->u.error.text, MSG_MAX_TEXT, "gpu: slot 3 out of range");
		break;
	case MSG_EMBED:
		m->u.embed.seq_id = 3, m->u.embed.slot = 1, m->u.embed.n = MSG_MAX_TOKENS;
		for (int i = 0; i < MSG_MAX_TOKENS; i++)
			m->u.embed.tokens[i] = 1000u * (uint32_t)i + 7;
		break;
	case MSG_STAGE: m->u.stage = (struct msg_stage){ 4, 2, MSG_STAGE_LAYERS, 3, 5, 17, 900 }; break;
	case MSG_HEAD: m->u.head = (struct msg_head){ 4, 2, 17, MSG_HEAD_TOPK, 40 }; break;
	case MSG_RUN:
		m->u.run = (struct msg_run){ .seq_id = 8, .slot = 0, .n = 3, .pos0 = 10,
					     .mode = MSG_HEAD_ARGMAX, .k = 1, .tokens = { 2, 106, 9 } };
		break;
	case MSG_RUN_BATCH:
		m->u.run_batch = (struct msg_run_batch){ .n = 3, .mode = MSG_HEAD_TOPK, .k = 64,
							 .e = { { 8, 0, 10, 2 }, { 9, 3, 0, 106 }, { 10, 1, 4095, 9 } } };
		break;
	case MSG_STAGE_BATCH:
		m->u.stage_batch = (struct msg_stage_batch){ .op = MSG_OP_HEAD, .layer = 0, .n = 2, .mode = MSG_HEAD_TOPK,
							     .k = 64, .e = { { 8, 0, 10, 2 }, { 9, 5, 77, 106 } } };
		break;
	case MSG_RUN_CHUNKS:
		m->u.run_chunks = (struct msg_run_chunks){ .n = 3, .n_tok = 6, .mode = MSG_HEAD_TOPK, .k = 64,
							   .flags = MSG_CHUNKS_WIDE,
							   .e = { { 8, 0, 10, 1, 1 }, { 9, 3, 0, 4, 0 }, { 10, 1, 4095, 1, 1 } },
							   .tokens = { 2, 106, 9, 7, 5, 3 } };
		break;
	case MSG_FLOW:
		m->u.flow = (struct msg_flow){ .op = MSG_OP_FFN, .layer = 3, .n_layer = 26, .flags = MSG_FLOW_HEAD | MSG_FLOW_WIDE, .mode = MSG_HEAD_TOPK,
					       .k = 40, .origin_seq = 77, .epoch = 2, .t_post_ns = 123456789012ull,
					       .gpu_ns = { 1000, 2000 }, .wall_us = { 3, 4 }, .n_hops = 3,
					       .hop_us = { 11, 12, 13 }, .n = 2, .e = { { 8, 0, 10, 2 }, { 9, 5, 77, 106 } } };
		break;
	case MSG_DONE: m->u.done = (struct msg_done){ 12, 8, 0, 262143, 40, 0, 123456789 }; break;
	case MSG_RESET_SEQ: m->u.reset_seq = (struct msg_reset_seq){ 8, MSG_RESET_ALL }; break;
	case MSG_GEN_REQ: {
		struct msg_gen_req *g = &m->u.gen_req;
		g->request_id = 0x0102030405060708ull, g->seed = 99, g->max_tokens = 64, g->top_k = 40;
		g->temperature = 0.7f, g->top_p = 0.95f, g->flags = MSG_GEN_CHAT | MSG_GEN_LOGPROBS;
		g->top_logprobs = 5;
		g->min_p = 0.05f, g->repetition_penalty = 1.3f;
		g->presence_penalty = 0.5f, g->frequency_penalty = -0.25f, g->timeout_ms = 1500;
		g->n_resume = 3, g->resume[0] = 5, g->resume[1] = 6, g->resume[2] = 7;
		const char *s = "Why is the sky blue? \xc3\xa9";
		g->n_prompt = (uint32_t)strlen(s);
		memcpy(g->prompt, s, g->n_prompt);
		break;
	}
	case MSG_GEN_POLL: m->u.gen_poll = (struct msg_gen_poll){ 11, 4, 500 }; break;
	case MSG_GEN_TOKEN:
		m->u.gen_token.request_id = 11, m->u.gen_token.index = 4, m->u.gen_token.token = 1234;
		m->u.gen_token.n_piece = 6;
		memcpy(m->u.gen_token.piece, " hello", 6);
		m->u.gen_token.flags = MSG_TOK_LOGPROB, m->u.gen_token.logprob = -0.25f;
		m->u.gen_token.n_top = 2;
		m->u.gen_token.top_ids[0] = 1234, m->u.gen_token.top_lps[0] = -0.25f;
		m->u.gen_token.top_ids[1] = 99, m->u.gen_token.top_lps[1] = -INFINITY;
		break;
	case MSG_GEN_END: m->u.gen_end = (struct msg_gen_end){ 11, 64, MSG_END_LENGTH }; break;
	case MSG_GEN_CANCEL: m->u.gen_cancel.request_id = 11; break;
	case MSG_GEN_PROMPT:
		m->u.gen_prompt.request_id = 11, m->u.gen_prompt.total = 3 * MSG_MAX_PROMPT;
		m->u.gen_prompt.offset = MSG_MAX_PROMPT, m->u.gen_prompt.n = MSG_MAX_PROMPT;
		for (uint32_t i = 0; i < MSG_MAX_PROMPT; i++)
			m->u.gen_prompt.data[i] = (char)(i * 7 + 1);
		break;
	}
}

static const uint16_t all_types[] = {
	MSG_HELLO, MSG_WELCOME, MSG_ACK, MSG_PING, MSG_PONG, MSG_STATUS_REQ, MSG_STATUS, MSG_SHUTDOWN,
	MSG_ERROR, MSG_EMBED, MSG_STAGE, MSG_HEAD, MSG_RUN, MSG_RUN_BATCH, MSG_STAGE_BATCH, MSG_RUN_CHUNKS, MSG_FLOW, MSG_DONE, MSG_RESET_SEQ, MSG_GEN_REQ,
	MSG_GEN_POLL, MSG_GEN_TOKEN, MSG_GEN_END, MSG_GEN_CANCEL, MSG_GEN_PROMPT,
};

static size_t enc(const struct msg *m)
{
	size_t len = 0;
	int rc = msg_encode(m, buf, sizeof buf, &len);
	cr_assert_eq(rc, 0, "%s: %s", msg_type_name(m->type), err_msg());
	return len;
}

Test(msg, roundtrip_every_type)
{
	for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++) {
		fill(&a, all_types[i]);
		size_t len = enc(&a);
		memset(&b, 0xa5, sizeof b);
		cr_assert_eq(msg_decode(buf, len, &b), 0, "%s: %s", msg_type_name(a.type), err_msg());
		cr_assert_eq(b.type, a.type);
		cr_assert_eq(b.seq, 77);
		/* re-encode and compare bytes: an independent check of every field */
		static uint8_t buf2[MSG_MAX_BUF];
		size_t len2;
		cr_assert_eq(msg_encode(&b, buf2, sizeof buf2, &len2), 0);
		cr_assert_eq(len2, len);
		cr_assert_arr_eq(buf2, buf, len);
	}
}

Test(msg, header_layout_is_little_endian)
{
	fill(&a, MSG_PING);
	size_t len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + 8);
	static const uint8_t want[] = { 'U', 'N', 'I', 'C', MSG_VERSION, 0, MSG_PING, 0, 77, 0, 0, 0, 8, 0, 0, 0,
					0, 0, 0, 0, 0, 0, 0, 0, 0x0d, 0xf0, 0xfe, 0xca, 0xef, 0xbe, 0xad, 0xde };
	cr_assert_arr_eq(buf, want, sizeof want);
}

Test(msg, fields_decode_to_values)
{
	fill(&a, MSG_GEN_REQ);
	size_t len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + MSG_SIZE_GEN_REQ_BASE + 12 + a.u.gen_req.n_prompt + 4 /* v12 n_images */);
	cr_assert_eq(msg_decode(buf, len, &b), 0);
	cr_assert_eq(b.u.gen_req.request_id, 0x0102030405060708ull);
	cr_assert_float_eq(b.u.gen_req.temperature, 0.7f, 0);
	cr_assert_float_eq(b.u.gen_req.min_p, 0.05f, 0);
	cr_assert_float_eq(b.u.gen_req.repetition_penalty, 1.3f, 0);
	cr_assert_float_eq(b.u.gen_req.presence_penalty, 0.5f, 0);
	cr_assert_float_eq(b.u.gen_req.frequency_penalty, -0.25f, 0);
	cr_assert_eq(b.u.gen_req.timeout_ms, 1500);
	/* v3 layout: the five new fields follow n_prompt (offsets 44..63) */
	uint32_t bits;
	float f = 1.3f;
	memcpy(&bits, &f, 4);
	const uint8_t *pl = buf + MSG_HDR_SIZE;
	cr_assert_eq(pl[48] | pl[49] << 8 | pl[50] << 16 | (uint32_t)pl[51] << 24, bits);
	cr_assert_eq(pl[60] | pl[61] << 8, 1500);
	cr_assert_eq(pl[64], 5, "v5: top_logprobs after timeout_ms");
	cr_assert_eq(pl[76], 5, "resume[0] right after the fixed part (v11: n_schema, n_bias before it)");
	cr_assert_eq(b.u.gen_req.resume[2], 7);
	cr_assert_str_eq(b.u.gen_req.prompt, "Why is the sky blue? \xc3\xa9");
	fill(&a, MSG_STATUS);
	len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + 232);
	cr_assert_eq(msg_decode(buf, len, &b), 0);
	cr_assert_str_eq(b.u.status.device, "llvmpipe (LLVM 15.0.6, 256 bits)");
	cr_assert_eq(b.u.status.weights_bytes, 1ull << 33);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static void expect_reject(size_t len, const char *why)
{
	err_clear();
	int rc = msg_decode(buf, len, &b);
	cr_assert_eq(rc, ERR_INVAL, "%s: accepted (rc %d)", why, rc);
	cr_assert(strlen(err_msg()) > 0, "%s: no message", why);
}

Test(msg, header_rules)
{
	fill(&a, MSG_STAGE);
	size_t len = enc(&a);
	buf[0] = 'X';
	expect_reject(len, "bad magic");
	len = enc(&a), buf[4] = 1;
	expect_reject(len, "version 1 (before RUN_BATCH)");
	len = enc(&a), buf[4] = 2;
	expect_reject(len, "version 2 (before the GEN_REQ sampler fields)");
	len = enc(&a), buf[4] = MSG_VERSION + 1;
	expect_reject(len, "a later version");
	len = enc(&a), buf[6] = 99;
	expect_reject(len, "unknown type");
	len = enc(&a), buf[16] = 1;
	expect_reject(len, "flags");
	len = enc(&a), buf[20] = 1;
	expect_reject(len, "reserved");
	len = enc(&a);
	expect_reject(len - 1, "truncated");
	expect_reject(10, "short header");
	len = enc(&a), put32(buf + 12, 27);
	expect_reject(len, "len mismatch");
	len = enc(&a), put32(buf + 12, 29), buf[len] = 0;
	expect_reject(len + 1, "payload longer than the type's size");
	len = enc(&a), buf[6] = MSG_HEAD; /* STAGE bytes labelled HEAD: 28 != 20 */
	expect_reject(len, "size of another type");
}

/* Patch a u32 at payload offset off, decode, expect rejection. */
static void patch_reject(uint16_t type, size_t off, uint32_t v, const char *why)
{
	fill(&a, type);
	size_t len = enc(&a);
	put32(buf + MSG_HDR_SIZE + off, v);
	expect_reject(len, why);
}

Test(msg, field_rules)
{
	patch_reject(MSG_HELLO, 0, 0, "role 0");
	patch_reject(MSG_HELLO, 0, 8, "role 8");
	patch_reject(MSG_HELLO, 8, MSG_VERSION + 1, "hello version");
	patch_reject(MSG_ACK, 4, 1, "positive ack code");
	patch_reject(MSG_STATUS, 4 + 4 + 32 + 128 + 24, 3, "share path");
	patch_reject(MSG_STATUS, 4 + 4 + 32 + 128 + 28, 3, "import mode");
	patch_reject(MSG_ERROR, 0, 0, "error code 0");
	patch_reject(MSG_EMBED, 4, MSG_MAX_SLOTS, "slot cap");
	patch_reject(MSG_EMBED, 8, MSG_MAX_TOKENS + 1, "n cap");
	patch_reject(MSG_EMBED, 8, 0, "n 0 with tokens following");
	patch_reject(MSG_STAGE, 8, 4, "stage enum");
	patch_reject(MSG_STAGE, 12, 256, "layer cap");
	patch_reject(MSG_STAGE, 16, 300, "layer range");
	patch_reject(MSG_STAGE, 24, MSG_MAX_POS, "pos cap");
	patch_reject(MSG_HEAD, 12, 4, "head mode"); /* 3 is MSG_HEAD_FULL */
	patch_reject(MSG_HEAD, 16, MSG_MAX_TOPK + 1, "k cap");
	patch_reject(MSG_RUN, 16, 5, "run head mode");
}

/* RUN_BATCH payload: n, mode, k, then 16-byte entries {seq_id, slot, pos, token} from offset 12 */
Test(msg, run_batch_rules)
{
	fill(&a, MSG_RUN_BATCH);
	size_t len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + 12 + 3 * 16);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.run_batch.n, 3);
	cr_assert_eq(b.u.run_batch.e[1].slot, 3);
	cr_assert_eq(b.u.run_batch.e[2].pos, 4095);
	cr_assert_eq(b.u.run_batch.e[1].token, 106);
	patch_reject(MSG_RUN_BATCH, 0, 2, "n disagrees with the length");
	patch_reject(MSG_RUN_BATCH, 0, 0, "n 0");
	patch_reject(MSG_RUN_BATCH, 0, MSG_MAX_SLOTS + 1, "n cap");
	patch_reject(MSG_RUN_BATCH, 4, 3, "batch head mode"); /* MSG_HEAD_FULL: only HEAD, STAGE_BATCH, FLOW */
	patch_reject(MSG_RUN_BATCH, 8, MSG_MAX_TOPK + 1, "batch k");
	patch_reject(MSG_RUN_BATCH, 8, 0, "batch k 0");
	patch_reject(MSG_RUN_BATCH, 16, MSG_MAX_SLOTS, "entry slot cap");
	patch_reject(MSG_RUN_BATCH, 32, 0, "duplicate slot");
	patch_reject(MSG_RUN_BATCH, 20, MSG_MAX_POS, "entry pos cap");
	/* the encoder refuses the same */
	fill(&a, MSG_RUN_BATCH);
	a.u.run_batch.e[2].slot = 3;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0);
	fill(&a, MSG_RUN_BATCH);
	a.u.run_batch.n = MSG_MAX_SLOTS;
	for (uint32_t i = 0; i < MSG_MAX_SLOTS; i++)
		a.u.run_batch.e[i] = (struct msg_run_batch_entry){ i, i, i, i };
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), 0, "%s", err_msg());
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.run_batch.e[63].slot, 63);
}

/* RUN_CHUNKS payload: n, n_tok, mode, k, flags, then 20-byte entries
 * {seq_id, slot, pos0, n, head} from offset 20, then the tokens */
Test(msg, run_chunks_rules)
{
	fill(&a, MSG_RUN_CHUNKS);
	size_t len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + 20 + 3 * 20 + 6 * 4);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.run_chunks.n_tok, 6);
	cr_assert_eq(b.u.run_chunks.e[1].n, 4);
	cr_assert_eq(b.u.run_chunks.e[2].pos0, 4095);
	cr_assert_eq(b.u.run_chunks.tokens[5], 3);
	cr_assert_eq(b.u.run_chunks.flags, MSG_CHUNKS_WIDE);
	patch_reject(MSG_RUN_CHUNKS, 0, 2, "n disagrees with the length");
	patch_reject(MSG_RUN_CHUNKS, 0, 0, "n 0");
	patch_reject(MSG_RUN_CHUNKS, 4, 5, "n_tok disagrees with the entries");
	patch_reject(MSG_RUN_CHUNKS, 8, 3, "head mode");
	patch_reject(MSG_RUN_CHUNKS, 12, 0, "k 0");
	patch_reject(MSG_RUN_CHUNKS, 16, 2, "unknown flag");
	patch_reject(MSG_RUN_CHUNKS, 20 + 4, MSG_MAX_SLOTS, "entry slot cap");
	patch_reject(MSG_RUN_CHUNKS, 20 + 20 + 4, 0, "duplicate slot");
	patch_reject(MSG_RUN_CHUNKS, 20 + 8, MSG_MAX_POS, "entry pos cap");
	patch_reject(MSG_RUN_CHUNKS, 20 + 12, 0, "entry n 0");
	patch_reject(MSG_RUN_CHUNKS, 20 + 16, 4, "entry head 4 (2 full row, 3 GPU bias and mask)");
	/* the largest one fits a data-plane ring entry */
	fill(&a, MSG_RUN_CHUNKS);
	a.u.run_chunks.n = MSG_MAX_SLOTS;
	a.u.run_chunks.n_tok = MSG_MAX_ROWS;
	for (uint32_t i = 0; i < MSG_MAX_SLOTS; i++)
		a.u.run_chunks.e[i] = (struct msg_run_chunk){ i, i, 0, MSG_MAX_ROWS / MSG_MAX_SLOTS, 1 };
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), 0, "%s", err_msg());
	cr_assert_leq(len + 4, 4096u);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	a.u.run_chunks.e[0].n++;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "more tokens than n_tok");
}

Test(msg, more_field_rules)
{
	patch_reject(MSG_RUN, 20, 2, "argmax with k 2");
	patch_reject(MSG_DONE, 8, 1, "positive status");
	patch_reject(MSG_DONE, 16, MSG_MAX_TOPK + 1, "done k");
	patch_reject(MSG_RESET_SEQ, 4, 2, "reset flags");
	patch_reject(MSG_GEN_REQ, 16, 0, "max_tokens 0");
	patch_reject(MSG_GEN_REQ, 16, MSG_MAX_GEN + 1, "max_tokens cap");
	patch_reject(MSG_GEN_REQ, 20, MSG_MAX_TOPK + 1, "top_k cap");
	patch_reject(MSG_GEN_REQ, 24, 0x7fc00000, "temperature NaN");
	patch_reject(MSG_GEN_REQ, 28, 0, "top_p 0");
	patch_reject(MSG_GEN_REQ, 32, 4, "gen flags");
	patch_reject(MSG_GEN_REQ, 64, MSG_MAX_TOP_LP + 1, "top_logprobs cap");
	patch_reject(MSG_GEN_REQ, 36, MSG_MAX_GEN + 1, "n_resume cap");
	patch_reject(MSG_GEN_REQ, 40, MSG_MAX_PROMPT + 1, "n_prompt cap");
	fill(&a, MSG_GEN_REQ);
	size_t len = enc(&a);
	put32(buf + MSG_HDR_SIZE, 0), put32(buf + MSG_HDR_SIZE + 4, 0);
	expect_reject(len, "request id 0");
}

static uint32_t fbits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

/* GEN_REQ v3 sampler fields: the ranges of the HTTP API (openai.c), every
 * bad value refused by the decoder and by the encoder; the ends of the
 * ranges accepted. Offsets: min_p 44, repetition_penalty 48, presence 52,
 * frequency 56, timeout_ms 60. */
Test(msg, gen_req_sampler_rules)
{
#define F(name) offsetof(struct msg_gen_req, name)
	static const struct {
		size_t off, field; /* wire offset, struct offset */
		float v;
		const char *why;
	} bad[] = {
		{ 44, F(min_p), -0.01f, "min_p < 0" }, { 44, F(min_p), 1.01f, "min_p > 1" },
		{ 48, F(repetition_penalty), 0.0f, "repetition_penalty 0" },
		{ 48, F(repetition_penalty), -1.0f, "repetition_penalty < 0" },
		{ 48, F(repetition_penalty), 100.5f, "repetition_penalty > 100" },
		{ 52, F(presence_penalty), -2.01f, "presence < -2" },
		{ 52, F(presence_penalty), 2.01f, "presence > 2" },
		{ 56, F(frequency_penalty), -2.01f, "frequency < -2" },
		{ 56, F(frequency_penalty), 2.01f, "frequency > 2" },
	};
#undef F
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		patch_reject(MSG_GEN_REQ, bad[i].off, fbits(bad[i].v), bad[i].why);
		/* the encoder refuses the same value */
		fill(&a, MSG_GEN_REQ);
		memcpy((char *)&a.u.gen_req + bad[i].field, &bad[i].v, 4);
		size_t len;
		cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL, "encoder: %s", bad[i].why);
	}
	/* NaN and infinities in each float field */
	static const uint32_t odd[] = { 0x7fc00000u, 0x7f800000u, 0xff800000u };
	for (size_t off = 44; off <= 56; off += 4)
		for (size_t k = 0; k < 3; k++)
			patch_reject(MSG_GEN_REQ, off, odd[k], "NaN/inf sampler field");
	/* the ends of the ranges; timeout_ms takes any value (0 = server limit) */
	fill(&a, MSG_GEN_REQ);
	a.u.gen_req.min_p = 1.0f, a.u.gen_req.repetition_penalty = 100.0f;
	a.u.gen_req.presence_penalty = -2.0f, a.u.gen_req.frequency_penalty = 2.0f;
	a.u.gen_req.timeout_ms = UINT32_MAX;
	size_t len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.gen_req.timeout_ms, UINT32_MAX);
	cr_assert_eq(b.u.gen_req.repetition_penalty, 100.0f);
	fill(&a, MSG_GEN_REQ);
	a.u.gen_req.min_p = 0.0f, a.u.gen_req.repetition_penalty = 1.0f;
	a.u.gen_req.presence_penalty = 2.0f, a.u.gen_req.frequency_penalty = -2.0f;
	a.u.gen_req.timeout_ms = 0;
	len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.gen_req.min_p, 0.0f);
	/* a v2-sized GEN_REQ (no new fields) does not parse as v3 */
	fill(&a, MSG_GEN_REQ);
	a.u.gen_req.n_resume = 0;
	len = enc(&a);
	memmove(buf + MSG_HDR_SIZE + 44, buf + MSG_HDR_SIZE + 68, len - MSG_HDR_SIZE - 68);
	put32(buf + 12, (uint32_t)(len - MSG_HDR_SIZE - 24));
	expect_reject(len - 24, "GEN_REQ without the v3 and v5 fields");
}

/* v5 logprobs: GEN_REQ top_logprobs needs MSG_GEN_LOGPROBS; GEN_TOKEN
 * carries the token's logprob and n_top (id, logprob) pairs before its
 * piece, all <= 0 (-inf allowed, NaN not), only with MSG_TOK_LOGPROB. */
Test(msg, gen_logprobs_rules)
{
	fill(&a, MSG_GEN_TOKEN);
	size_t len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + MSG_SIZE_GEN_TOKEN_BASE + 2 * 8 + 6);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.gen_token.n_top, 2);
	cr_assert_eq(b.u.gen_token.top_ids[1], 99);
	cr_assert(isinf(b.u.gen_token.top_lps[1]) && b.u.gen_token.top_lps[1] < 0);
	cr_assert_float_eq(b.u.gen_token.logprob, -0.25f, 0);
	cr_assert_str_eq(b.u.gen_token.piece, " hello");
	const uint8_t *pl = buf + MSG_HDR_SIZE;
	cr_assert_eq(pl[24] | pl[25] << 8, 2, "n_top at offset 24");
	cr_assert_eq(pl[28] | pl[29] << 8, 1234, "top_ids[0] at offset 28");
	cr_assert_eq(pl[44], 6, "n_piece after the pairs");
	patch_reject(MSG_GEN_TOKEN, 16, 2, "token flags");
	patch_reject(MSG_GEN_TOKEN, 20, fbits(0.5f), "logprob > 0");
	patch_reject(MSG_GEN_TOKEN, 20, 0x7fc00000u, "logprob NaN");
	patch_reject(MSG_GEN_TOKEN, 32, fbits(0.1f), "top logprob > 0");
	patch_reject(MSG_GEN_TOKEN, 24, MSG_MAX_TOP_LP + 1, "n_top cap");
	/* logprobs without the flag, or top_logprobs without MSG_GEN_LOGPROBS */
	fill(&a, MSG_GEN_TOKEN);
	a.u.gen_token.flags = 0;
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL);
	fill(&a, MSG_GEN_REQ);
	a.u.gen_req.flags = MSG_GEN_CHAT;
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL);
	/* a plain token: 32 + piece bytes */
	fill(&a, MSG_GEN_TOKEN);
	a.u.gen_token.flags = 0, a.u.gen_token.logprob = 0, a.u.gen_token.n_top = 0;
	len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + 32 + 6);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.gen_token.flags, 0);
}

/* GEN_END carries the newer end reasons; one past the last is refused. */
Test(msg, gen_end_timeout_reason)
{
	cr_assert_eq(MSG_END_MAX, MSG_END_IMAGE);
	fill(&a, MSG_GEN_END);
	a.u.gen_end.reason = MSG_END_TIMEOUT;
	size_t len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.gen_end.reason, MSG_END_TIMEOUT);
	cr_assert_eq(buf[MSG_HDR_SIZE + 12], 6, "TIMEOUT is 6 on the wire");
	a.u.gen_end.reason = MSG_END_IMAGE;
	len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.gen_end.reason, MSG_END_IMAGE);
	cr_assert_eq(buf[MSG_HDR_SIZE + 12], 7, "IMAGE is 7 on the wire");
	patch_reject(MSG_GEN_END, 12, MSG_END_IMAGE + 1, "end reason past IMAGE");
	patch_reject(MSG_GEN_END, 12, 0, "end reason 0");
	fill(&a, MSG_GEN_END);
	a.u.gen_end.reason = MSG_END_IMAGE + 1;
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL);
}

Test(msg, string_rules)
{
	fill(&a, MSG_GEN_REQ);
	size_t len = enc(&a);
	buf[len - 7] = 0; /* before v12's n_images */
	expect_reject(len, "NUL in prompt");
	fill(&a, MSG_GEN_TOKEN);
	len = enc(&a);
	buf[len - 1] = 0;
	expect_reject(len, "NUL in piece");
	fill(&a, MSG_ERROR);
	len = enc(&a);
	memset(buf + MSG_HDR_SIZE + 8, 'x', MSG_MAX_TEXT);
	expect_reject(len, "error text without NUL");
	fill(&a, MSG_STATUS);
	len = enc(&a);
	memset(buf + MSG_HDR_SIZE + 8, 'x', MSG_MAX_BACKEND);
	expect_reject(len, "backend without NUL");
	fill(&a, MSG_GEN_END);
	len = enc(&a);
	put32(buf + MSG_HDR_SIZE + 12, 9);
	expect_reject(len, "end reason");
}

Test(msg, encoder_validates)
{
	size_t len;
	fill(&a, MSG_EMBED);
	a.u.embed.n = MSG_MAX_TOKENS + 1;
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL);
	fill(&a, MSG_PING);
	cr_assert_eq(msg_encode(&a, buf, 20, &len), ERR_RANGE);
	msg_init(&a, 200);
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL);
}

Test(msg, random_bytes_never_crash)
{
	srand(1);
	for (int it = 0; it < 20000; it++) {
		fill(&a, all_types[it % (sizeof all_types / sizeof all_types[0])]);
		size_t len = enc(&a);
		int flips = 1 + rand() % 4;
		for (int f = 0; f < flips; f++)
			buf[(size_t)rand() % len] ^= (uint8_t)(1u << (rand() % 8));
		if (msg_decode(buf, len, &b) == 0) {
			size_t len2;
			static uint8_t buf2[MSG_MAX_BUF];
			cr_assert_eq(msg_encode(&b, buf2, sizeof buf2, &len2), 0, "accepted but not re-encodable");
		}
	}
}

/* STAGE_BATCH payload: op, layer, n, mode, k, then 16-byte entries from offset 20 */
Test(msg, stage_batch_rules)
{
	fill(&a, MSG_STAGE_BATCH);
	size_t len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + 20 + 2 * 16);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.stage_batch.op, MSG_OP_HEAD);
	cr_assert_eq(b.u.stage_batch.e[1].slot, 5);
	cr_assert_eq(b.u.stage_batch.e[1].pos, 77);
	patch_reject(MSG_STAGE_BATCH, 0, 0, "op 0");
	patch_reject(MSG_STAGE_BATCH, 0, 5, "op 5");
	patch_reject(MSG_STAGE_BATCH, 4, 3, "layer on a head op");
	patch_reject(MSG_STAGE_BATCH, 8, 3, "n disagrees with the length");
	patch_reject(MSG_STAGE_BATCH, 12, 4, "head mode"); /* 3 is MSG_HEAD_FULL */
	patch_reject(MSG_STAGE_BATCH, 16, MSG_MAX_TOPK + 1, "k cap");
	patch_reject(MSG_STAGE_BATCH, 20 + 16 + 4, 0, "duplicate slot");
	patch_reject(MSG_STAGE_BATCH, 20 + 4, MSG_MAX_SLOTS, "slot cap");
	patch_reject(MSG_STAGE_BATCH, 20 + 8, MSG_MAX_POS, "pos cap");
	/* an attention op carries a layer below the cap and no top-k */
	fill(&a, MSG_STAGE_BATCH);
	a.u.stage_batch.op = MSG_OP_ATTN;
	a.u.stage_batch.layer = 25;
	a.u.stage_batch.mode = MSG_HEAD_ARGMAX;
	a.u.stage_batch.k = 1;
	len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.stage_batch.layer, 25);
	put32(buf + MSG_HDR_SIZE + 4, MSG_MAX_LAYERS);
	expect_reject(len, "layer cap");
	a.u.stage_batch.mode = MSG_HEAD_TOPK;
	a.u.stage_batch.k = 64;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "top-k on an attention op");
}

/* FLOW: every field checked against the flow's own layer count; only END
 * carries a status; hops and entries bounded like any count. */
Test(msg, flow_rules)
{
	fill(&a, MSG_FLOW);
	size_t len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + MSG_SIZE_FLOW_BASE + 3 * 4 + 2 * 16);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.flow.layer, 3u);
	cr_assert_eq(b.u.flow.hop_us[2], 13u);
	cr_assert_eq(b.u.flow.gpu_ns[1], 2000u);
	cr_assert_eq(b.u.flow.e[1].pos, 77u);
	patch_reject(MSG_FLOW, 0, 0, "op 0");
	patch_reject(MSG_FLOW, 0, 6, "op 6");
	patch_reject(MSG_FLOW, 4, 26, "layer = n_layer");
	patch_reject(MSG_FLOW, 8, 0, "n_layer 0");
	patch_reject(MSG_FLOW, 8, MSG_MAX_LAYERS + 1, "n_layer cap");
	patch_reject(MSG_FLOW, 12, 4, "unknown flag");
	patch_reject(MSG_FLOW, 20, MSG_MAX_TOPK + 1, "k cap");
	patch_reject(MSG_FLOW, 32, (uint32_t)ERR_IO, "status on a non-END op");
	patch_reject(MSG_FLOW, 32, 1, "positive status");
	patch_reject(MSG_FLOW, 72, MSG_MAX_HOPS + 1, "hop cap");
	patch_reject(MSG_FLOW, 72, 4, "hops disagree with the length");
	patch_reject(MSG_FLOW, 76 + 12, 3, "n disagrees with the length");
	patch_reject(MSG_FLOW, 80 + 12 + 16 + 4, 0, "duplicate slot");
	patch_reject(MSG_FLOW, 80 + 12 + 32, 1, "n_tok without the chunk flag");
	patch_reject(MSG_FLOW, 80 + 12 + 32 + 4 + 8, 1, "op times without the times flag");
	/* op times travel with the flag */
	fill(&a, MSG_FLOW);
	a.u.flow.flags |= MSG_FLOW_TIMES;
	a.u.flow.n_ops = 2;
	a.u.flow.op_us[3] = 77;
	len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + MSG_SIZE_FLOW_BASE + 3 * 4 + 2 * 16 + 2 * 8);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.flow.op_us[3], 77u);
	/* END carries a status; without a head the mode is argmax, k 1 */
	fill(&a, MSG_FLOW);
	a.u.flow.op = MSG_OP_END;
	a.u.flow.layer = 0;
	a.u.flow.status = ERR_RANGE;
	len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.flow.status, ERR_RANGE);
	a.u.flow.flags = MSG_FLOW_WIDE;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "top-k without a head");
	/* a chunk: one entry, its tokens after the entries, positions in range */
	fill(&a, MSG_FLOW);
	struct msg_flow *f = &a.u.flow;
	f->flags = MSG_FLOW_CHUNK | MSG_FLOW_HEAD;
	f->n = 1;
	f->e[0].token = 3 | MSG_CHUNK_HEAD;
	f->n_tok = 3;
	f->tokens[0] = 2, f->tokens[1] = 106, f->tokens[2] = 7;
	len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + MSG_SIZE_FLOW_BASE + 3 * 4 + 16 + 3 * 4);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.flow.n_tok, 3u);
	cr_assert_eq(b.u.flow.tokens[1], 106u);
	size_t at = 80 + 12 + 16; /* n_tok */
	put32(buf + MSG_HDR_SIZE + at, 0);
	expect_reject(len, "chunk of 0 tokens");
	len = enc(&a);
	put32(buf + MSG_HDR_SIZE + 80 + 12 + 8, MSG_MAX_POS - 1); /* e[0].pos */
	expect_reject(len, "chunk past the position cap");
	f->flags |= MSG_FLOW_WIDE;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "wide chunk");
	f->flags &= ~MSG_FLOW_WIDE;
	/* chunks of several sequences: each entry's count (and head bit) in its
	 * token word, the counts summing to n_tok, the head flag iff one samples */
	f->n = 2;
	f->e[1] = (struct msg_run_batch_entry){ 9, 9, 40, 0 };
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "a chunk of 0 tokens");
	f->e[1].token = 2;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "counts summing to 5, n_tok 3");
	f->n_tok = 5;
	f->tokens[3] = 11, f->tokens[4] = 12;
	len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.flow.n, 2u);
	cr_assert_eq(b.u.flow.e[1].token, 2u);
	cr_assert_eq(b.u.flow.e[0].token, 3u | MSG_CHUNK_HEAD);
	cr_assert_eq(b.u.flow.tokens[4], 12u);
	f->e[1].token = 2 | 0x10000;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "unknown bits in a chunk's word");
	f->e[1].token = 2;
	f->e[1].pos = MSG_MAX_POS - 1;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "the second chunk past the position cap");
	f->e[1].pos = 40;
	f->e[0].token = 3;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "the head flag without a sampling chunk");
	f->flags &= ~MSG_FLOW_HEAD;
	f->mode = MSG_HEAD_ARGMAX, f->k = 1;
	len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	f->e[1].token = 2 | MSG_CHUNK_HEAD;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "a sampling chunk without the head flag");
	f->e[1].token = 2;
	f->e[1].slot = f->e[0].slot;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "one slot twice");
	f->e[1].slot = 9;
	f->n = MSG_FLOW_CHUNK_SEQS + 1;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "more chunks than a FLOW carries");
	/* up to MSG_MAX_FLOW_TOKENS tokens (two chunks of 256) and not one more */
	f->n = 2;
	f->e[0].token = MSG_MAX_TOKENS, f->e[1].token = MSG_MAX_FLOW_TOKENS - MSG_MAX_TOKENS;
	f->n_tok = MSG_MAX_FLOW_TOKENS;
	len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.flow.n_tok, (uint32_t)MSG_MAX_FLOW_TOKENS);
	put32(buf + MSG_HDR_SIZE + 80 + 12 + 32, MSG_MAX_FLOW_TOKENS + 1); /* n_tok */
	expect_reject(len, "n_tok past MSG_MAX_FLOW_TOKENS");
}

/* A chunk FLOW of dp_flow_chunk_tokens(L) tokens and the most entries, with
 * every handoff's time of an L-layer model, fits a ring entry; one more token
 * would not (or the cap is MSG_MAX_FLOW_TOKENS). */
Test(msg, chunk_flow_fits_a_ring_entry)
{
	cr_assert_eq(dp_flow_chunk_tokens(26), (uint32_t)MSG_MAX_FLOW_TOKENS);
	cr_assert_eq(dp_flow_chunk_tokens(62), (uint32_t)MSG_MAX_FLOW_TOKENS);
	cr_assert_geq(dp_flow_chunk_tokens(MSG_MAX_LAYERS), (uint32_t)MSG_MAX_TOKENS);
	static const uint32_t layers[] = { 1, 26, 62, 207, 208, 256 };
	for (size_t k = 0; k < sizeof layers / sizeof layers[0]; k++) {
		uint32_t L = layers[k], cap = dp_flow_chunk_tokens(L);
		fill(&a, MSG_FLOW);
		struct msg_flow *f = &a.u.flow;
		f->flags = MSG_FLOW_CHUNK;
		f->mode = MSG_HEAD_ARGMAX, f->k = 1;
		f->n_layer = L;
		f->layer = 0;
		f->n_hops = 2 * L + 2;
		f->n = MSG_FLOW_CHUNK_SEQS;
		for (uint32_t i = 0; i < f->n; i++)
			f->e[i] = (struct msg_run_batch_entry){ i, i, 0, cap / f->n + (i < cap % f->n) };
		f->n_tok = cap;
		for (uint32_t t = 0; t < cap; t++)
			f->tokens[t] = t;
		size_t len;
		cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), 0, "%u layers: %s", L, err_msg());
		cr_assert_leq(len, DP_ENTRY_SIZE - 4, "%u layers, %u tokens: %zu bytes", L, cap, len);
		if (cap < MSG_MAX_FLOW_TOKENS)
			cr_assert_gt(len + 4, DP_ENTRY_SIZE - 4, "%u layers: room for another token", L);
	}
}

/* MSG_GEN_TOKENS: the prompt is whole u32 ids (NUL bytes are fine there),
 * never combined with MSG_GEN_CHAT (the sender applied the template). */
Test(msg, gen_req_token_prompt)
{
	fill(&a, MSG_GEN_REQ);
	struct msg_gen_req *g = &a.u.gen_req;
	g->flags = MSG_GEN_TOKENS;
	g->top_logprobs = 0;
	const uint8_t ids[8] = { 2, 0, 0, 0, 0x10, 0x27, 0, 0 }; /* 2, 10000 */
	memcpy(g->prompt, ids, sizeof ids);
	g->n_prompt = sizeof ids;
	size_t len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.gen_req.n_prompt, 8);
	cr_assert_eq(memcmp(b.u.gen_req.prompt, ids, 8), 0);
	g->n_prompt = 7;
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL, "7 bytes are not whole ids");
	g->n_prompt = 8;
	g->flags = MSG_GEN_TOKENS | MSG_GEN_CHAT;
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL, "ids with the chat flag");
	g->flags = 0;
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL, "text with a NUL byte");
}

/* v12: GEN_REQ's images (digests, with a token prompt only) and IMAGE round-trip; bad counts are refused. */
Test(msg, images_round_trip)
{
	msg_init(&a, MSG_GEN_REQ);
	struct msg_gen_req *g = &a.u.gen_req;
	g->request_id = 9, g->max_tokens = 1, g->top_p = 1, g->repetition_penalty = 1;
	g->flags = MSG_GEN_TOKENS, g->n_prompt = 8, g->n_images = 2;
	memset(g->images[1], 0xab, MSG_DIGEST);
	size_t len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.gen_req.n_images, 2);
	cr_assert_eq(b.u.gen_req.images[1][31], 0xab);
	g->flags = 0;
	g->n_prompt = 1;
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL, "images without a token prompt");
	g->flags = MSG_GEN_TOKENS, g->n_prompt = 8, g->n_images = MSG_MAX_IMAGES + 1;
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL);
	msg_init(&a, MSG_IMAGE);
	a.u.image.slot = 3, a.u.image.rows = 256;
	a.u.image.digest[0] = 7;
	len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + MSG_SIZE_IMAGE);
	cr_assert_eq(msg_decode(buf, len, &b), 0);
	cr_assert_eq(b.u.image.slot, 3);
	cr_assert_eq(b.u.image.digest[0], 7);
	a.u.image.rows = 0;
	cr_assert_eq(msg_encode(&a, buf, sizeof buf, &len), ERR_INVAL);
}

/* GEN_PROMPT (v12): a part of a long prompt; payload: request_id u64, total,
 * offset, n, data[n]. Hostile totals, offsets and counts are refused. */
Test(msg, gen_prompt_rules)
{
	fill(&a, MSG_GEN_PROMPT);
	size_t len = enc(&a);
	cr_assert_eq(len, MSG_HDR_SIZE + MSG_SIZE_GEN_PROMPT_BASE + MSG_MAX_PROMPT);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert_eq(b.u.gen_prompt.total, 3 * MSG_MAX_PROMPT);
	cr_assert_arr_eq(b.u.gen_prompt.data, a.u.gen_prompt.data, MSG_MAX_PROMPT);
	patch_reject(MSG_GEN_PROMPT, 8, 0, "total 0");
	patch_reject(MSG_GEN_PROMPT, 8, MSG_MAX_PROMPT_ALL + 1, "total over MSG_MAX_PROMPT_ALL");
	patch_reject(MSG_GEN_PROMPT, 8, 0xffffffffu, "total 2^32-1");
	patch_reject(MSG_GEN_PROMPT, 8, MSG_MAX_PROMPT, "a part past the total");
	patch_reject(MSG_GEN_PROMPT, 12, 0xffffffffu - 10, "offset + n wraps");
	patch_reject(MSG_GEN_PROMPT, 16, MSG_MAX_PROMPT + 1, "n over MSG_MAX_PROMPT");
	patch_reject(MSG_GEN_PROMPT, 16, 0, "n 0 with bytes following");
	patch_reject(MSG_GEN_PROMPT, 0, 0, "request_id 0 (low half)");
	/* a GEN_REQ may say its prompt was staged; unknown flags stay refused */
	fill(&a, MSG_GEN_REQ);
	a.u.gen_req.flags |= MSG_GEN_STAGED;
	len = enc(&a);
	cr_assert_eq(msg_decode(buf, len, &b), 0, "%s", err_msg());
	cr_assert(b.u.gen_req.flags & MSG_GEN_STAGED);
	a.u.gen_req.flags = MSG_GEN_STAGED << 1;
	cr_assert_neq(msg_encode(&a, buf, sizeof buf, &len), 0, "flag 0x20 is unknown");
}
