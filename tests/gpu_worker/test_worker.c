/* worker: unicorn-loader + unicorn-gpu-worker + unicorn-npu-worker
 * (--attn-backend vulkan) as real processes, driven from the test with bus
 * messages the way the coordinator drives them: split steps (EMBED, per layer
 * npu STAGE attn + gpu STAGE ffn, HEAD) and fused RUN over the 48 golden
 * tokens, checked against the golden greedy tokens and logits; bad messages
 * get ERROR and the workers keep serving; the xrt backend without an NPU
 * exits 2. Prints the per-layer handoff latency and the fused step time. */
#include <criterion/criterion.h>

#include "tests/proc.h"
#include <fcntl.h>
#include <math.h>
#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/golden.h"
#include "gpu_worker/vk.h"
#include "ipc/attach.h"
#include "ipc/bus.h"
#include "common/err.h"
#include "ipc/rundir.h"

#define RECV_MS 20000 /* engine start-up on lavapipe included */

static char dir[64];
static pid_t pids[3] = { -1, -1, -1 };
static struct bus *gpu, *npu;
static struct attach *att;
static struct msg m, r;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/unicorn-wrk-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	chmod(dir, 0700);
}

static void teardown(void)
{
	bus_close(gpu);
	bus_close(npu);
	gpu = npu = NULL;
	attach_close(att);
	att = NULL;
	for (int i = 0; i < 3; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGTERM);
	for (int i = 0; i < 3; i++) {
		if (pids[i] <= 0)
			continue;
		if (proc_wait_ms(pids[i], 3000) < 0) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
		pids[i] = -1;
	}
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	(void)!system(cmd);
}

/* The gpu worker's --import for the next cluster (NULL: its default, auto). */
static const char *gpu_import;

static void start(const char *exe_name, int i, char *extra)
{
	char exe[4096], err[128];
	snprintf(exe, sizeof exe, "%s/%s", proc_bin_dir(), exe_name);
	snprintf(err, sizeof err, "%s/%s.err", dir, exe_name);
	/* extra: "--attn-backend" (npu worker, vulkan) or "--max-seqs" (gpu worker, 2) */
	bool seqs = extra && strcmp(extra, "--max-seqs") == 0;
	char *argv[8] = { exe, "--rundir", dir };
	int k = 3;
	if (extra) {
		argv[k++] = extra;
		argv[k++] = seqs ? "2" : "vulkan";
	}
	if (gpu_import && strcmp(exe_name, "unicorn-gpu-worker") == 0) {
		argv[k++] = "--import";
		argv[k++] = (char *)gpu_import;
	}
	argv[k] = NULL;
	pids[i] = proc_spawn(argv, err);
}

static struct bus *link_to(const char *file, enum msg_role expect)
{
	char url[BUS_URL_MAX];
	cr_assert_eq(rundir_url(dir, file, url, sizeof url), 0);
	struct bus *b = NULL;
	cr_assert_eq(bus_dial(url, BUS_PAIR, &b), 0, "%s", err_msg());
	msg_init(&m, MSG_HELLO);
	m.u.hello = (struct msg_hello){ MSG_ROLE_COORDINATOR, (uint32_t)getpid(), MSG_VERSION, 0 };
	/* the worker may still be starting: resend HELLO until it answers */
	double t_end = now_us() + RECV_MS * 1e3;
	for (;;) {
		m.seq = 0;
		if (bus_send(b, &m) == 0 && bus_recv(b, 1000, &r) == 0)
			break;
		cr_assert(now_us() < t_end, "no WELCOME on %s: %s", file, err_msg());
	}
	cr_assert_eq(r.type, MSG_WELCOME);
	cr_assert_eq(r.u.hello.role, expect);
	cr_assert_eq(r.u.hello.version, MSG_VERSION);
	return b;
}

static void cluster_with(const char *model)
{
	char exe[4096], err[128];
	snprintf(exe, sizeof exe, "%s/unicorn-loader", proc_bin_dir());
	snprintf(err, sizeof err, "%s/loader.err", dir);
	char *argv[] = { exe, "--rundir", dir, "--model", (char *)model, "--quiet", NULL };
	pids[0] = proc_spawn(argv, err);
	start("unicorn-gpu-worker", 1, NULL);
	start("unicorn-npu-worker", 2, "--attn-backend");
	cr_assert_eq(attach_open(dir, 10000, &att), 0, "%s", err_msg());
	gpu = link_to(RUNDIR_GPU, MSG_ROLE_GPU_WORKER);
	npu = link_to(RUNDIR_NPU, MSG_ROLE_NPU_WORKER);
}

static void cluster(void)
{
	struct golden g;
	cr_assert_eq(golden_load("q4_0", &g), 0, "%s", err_msg());
	cluster_with(g.model_path);
	golden_free(&g);
}

/* Send m on b and return the answer (DONE expected unless want_error). */
static void call(struct bus *b, bool want_error)
{
	m.seq = 0;
	cr_assert_eq(bus_send(b, &m), 0, "%s", err_msg());
	uint32_t seq = m.seq;
	cr_assert_eq(bus_recv(b, RECV_MS, &r), 0, "%s: %s", msg_type_name(m.type), err_msg());
	if (want_error) {
		cr_assert_eq(r.type, MSG_ERROR, "%s: expected ERROR, got %s", msg_type_name(m.type), msg_type_name(r.type));
		cr_assert_eq(r.u.error.ref_seq, seq);
		cr_assert(r.u.error.code < 0);
		return;
	}
	cr_assert_eq(r.type, MSG_DONE, "%s: got %s: %s", msg_type_name(m.type), msg_type_name(r.type),
		     r.type == MSG_ERROR ? r.u.error.text : "");
	cr_assert_eq(r.u.done.ref_seq, seq);
	cr_assert_eq(r.u.done.status, 0);
}

static void stage(uint32_t kind, uint32_t seq_id, uint32_t slot, uint32_t layer, uint32_t n, uint32_t pos0)
{
	msg_init(&m, MSG_STAGE);
	m.u.stage = (struct msg_stage){ seq_id, slot, kind, layer, 1, n, pos0 };
}

static const uint32_t chunks[] = { 40, 3, 1, 1, 1, 1, 1 }; /* 48 tokens; 40 > the engine's batch of 32 */

/* Split (per-stage messages) and fused (RUN) decode of the golden prompt
 * against the golden logits; import: the gpu worker's --import (NULL: auto,
 * in place on lavapipe; "upload": regrouped, with the x16 kernels a discrete
 * GPU runs, the prompt's first token included). */
static void check_split_and_fused(const char *import)
{
	gpu_import = import;
	struct golden g;
	cr_assert_eq(golden_load("q4_0", &g), 0, "%s", err_msg());
	cr_assert_eq(g.n_tokens, 48);
	cluster();
	uint32_t n_layer = att->model->cfg.n_layer, V = g.n_vocab;
	uint32_t split_tok[48] = { 0 }, fused_tok[48] = { 0 };
	double stage_us = 0, fused_us = 0, work_us = 0, fused_work_us = 0;
	uint32_t n_stage = 0, n_fused = 0, checked = 0;
	uint32_t pos = 0;
	for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
		uint32_t n = chunks[c];
		msg_init(&m, MSG_EMBED);
		m.u.embed.seq_id = 7, m.u.embed.slot = 0, m.u.embed.n = n;
		memcpy(m.u.embed.tokens, g.tokens + pos, n * 4);
		call(gpu, false);
		for (uint32_t l = 0; l < n_layer; l++) {
			double t0 = now_us();
			stage(MSG_STAGE_ATTN, 7, 0, l, n, pos);
			call(npu, false);
			uint64_t w_ns = r.u.done.gpu_ns;
			stage(MSG_STAGE_FFN, 7, 0, l, n, pos);
			call(gpu, false);
			w_ns += r.u.done.gpu_ns;
			if (n == 1)
				stage_us += now_us() - t0, n_stage += 2, work_us += w_ns / 1e3;
		}
		msg_init(&m, MSG_HEAD);
		m.u.head = (struct msg_head){ 7, 0, n, MSG_HEAD_TOPK, 8 };
		call(gpu, false);
		cr_assert_eq(r.u.done.k, 8);
		uint32_t last = pos + n - 1;
		split_tok[last] = r.u.done.token;
		uint32_t *ids;
		float *vals;
		cr_assert_eq(attach_head(att, 0, &ids, &vals), 0);
		cr_assert_eq(ids[0], r.u.done.token);
		/* the head's top logits match the float64 reference at those ids */
		const float *ref = g.logits + (size_t)last * V;
		float scale = 0;
		for (uint32_t i = 0; i < V; i++)
			if (isfinite(ref[i]) && fabsf(ref[i]) > scale)
				scale = fabsf(ref[i]);
		for (uint32_t i = 0; i < 8; i++) {
			cr_assert(ids[i] < V);
			cr_assert(i == 0 || vals[i] <= vals[i - 1], "top-k descending");
			cr_assert(fabsf(vals[i] - ref[ids[i]]) <= 2e-2f * scale, "pos %u id %u: %g vs ref %g", last, ids[i],
				  vals[i], ref[ids[i]]);
		}
		struct golden_row row;
		golden_check_row(&g, last, g.logits + (size_t)last * V, &row); /* ref lead at this position */
		if (row.ref_lead >= g.tie_margin) {
			cr_assert_eq(r.u.done.token, g.greedy_next[last], "split argmax at %u", last);
			checked++;
		}
		pos += n;
	}
	cr_assert(checked >= 4, "too few positions checked (%u)", checked);

	/* fused: same chunks as one RUN each after forgetting the sequence */
	msg_init(&m, MSG_RESET_SEQ);
	m.u.reset_seq = (struct msg_reset_seq){ 7, 0 };
	call(gpu, false);
	pos = 0;
	for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
		uint32_t n = chunks[c];
		msg_init(&m, MSG_RUN);
		m.u.run = (struct msg_run){ .seq_id = 9, .slot = 0, .n = n, .pos0 = pos, .mode = MSG_HEAD_ARGMAX, .k = 1 };
		memcpy(m.u.run.tokens, g.tokens + pos, n * 4);
		double t0 = now_us();
		call(gpu, false);
		if (n == 1)
			fused_us += now_us() - t0, n_fused++, fused_work_us += r.u.done.gpu_ns / 1e3;
		fused_tok[pos + n - 1] = r.u.done.token;
		struct golden_row row;
		golden_check_row(&g, pos + n - 1, g.logits + (size_t)(pos + n - 1) * V, &row);
		if (row.ref_lead >= g.tie_margin)
			cr_assert_eq(r.u.done.token, split_tok[pos + n - 1], "fused vs split at %u", pos + n - 1);
		pos += n;
	}
	for (uint32_t i = 0; i < 48; i++)
		cr_assert_eq(fused_tok[i] == 0, split_tok[i] == 0);

	/* STATUS counts the steps */
	msg_init(&m, MSG_STATUS_REQ);
	m.seq = 0;
	cr_assert_eq(bus_send(gpu, &m), 0);
	cr_assert_eq(bus_recv(gpu, RECV_MS, &r), 0);
	cr_assert_eq(r.type, MSG_STATUS);
	cr_assert_eq(r.u.status.role, MSG_ROLE_GPU_WORKER);
	cr_assert_str_eq(r.u.status.backend, "vulkan");
	cr_assert(r.u.status.steps >= 7 * (2 + n_layer) + 7, "steps %llu", (unsigned long long)r.u.status.steps);
	cr_assert(r.u.status.busy_ns > 0 && r.u.status.weights_bytes > 0 && r.u.status.kv_bytes > 0);
	cr_assert_eq(r.u.status.share_path, MSG_SHARE_MEMFD + (att->share_path == SHM_PATH_UDMABUF));
	/* --import auto: on lavapipe (no discrete GPU to prefer) the weights
	 * were used in place from the loader's regions, and the golden checks
	 * above ran on them; a discrete GPU keeps them in VRAM */
	struct vk_device_info dv[8];
	uint32_t n_dev = 0;
	bool discrete = false;
	cr_assert_eq(vk_list_devices(dv, 8, &n_dev), 0, "%s", err_msg());
	for (uint32_t i = 0; i < n_dev; i++)
		discrete = discrete || strcmp(dv[i].type, "discrete") == 0;
	if (discrete || import)
		cr_assert_eq(r.u.status.import_mode, MSG_IMPORT_UPLOAD);
	else if (strcmp(dv[0].type, "cpu") == 0)
		cr_assert_eq(r.u.status.import_mode, MSG_IMPORT_ZERO_COPY, "lavapipe should use the regions in place");

	printf("worker: split decode: %.1f us per STAGE round trip (%.1f us of it in the worker's step, %.1f us "
	       "handoff overhead), %.1f us per layer (npu attn + gpu ffn); fused decode step %.1f us per RUN round trip "
	       "(%.1f us in the worker); %u argmax positions checked\n",
	       stage_us / n_stage, work_us / n_stage, (stage_us - work_us) / n_stage, stage_us / (n_stage / 2),
	       fused_us / n_fused, fused_work_us / n_fused, checked);
	fflush(stdout);
	golden_free(&g);
}

Test(worker, split_and_fused_match_golden, .init = setup, .fini = teardown, .timeout = 60)
{
	check_split_and_fused(NULL);
}

Test(worker, split_and_fused_match_golden_uploaded, .init = setup, .fini = teardown, .timeout = 60)
{
	check_split_and_fused("upload");
}

static void expect_alive(struct bus *b, enum msg_role role)
{
	msg_init(&m, MSG_STATUS_REQ);
	m.seq = 0;
	cr_assert_eq(bus_send(b, &m), 0);
	cr_assert_eq(bus_recv(b, RECV_MS, &r), 0, "%s", err_msg());
	cr_assert_eq(r.type, MSG_STATUS);
	cr_assert_eq(r.u.status.role, role);
}

Test(worker, bad_messages_get_error, .init = setup, .fini = teardown, .timeout = 60)
{
	cluster();
	uint32_t n_layer = att->model->cfg.n_layer;
	/* slot beyond what the worker serves (max-seqs 1) */
	msg_init(&m, MSG_EMBED);
	m.u.embed = (struct msg_embed){ .seq_id = 1, .slot = MSG_MAX_SLOTS - 1, .n = 1 };
	call(gpu, true);
	cr_assert_not_null(strstr(r.u.error.text, "slot"), "%s", r.u.error.text);
	/* token id past the vocabulary */
	msg_init(&m, MSG_EMBED);
	m.u.embed = (struct msg_embed){ .seq_id = 1, .slot = 0, .n = 1 };
	m.u.embed.tokens[0] = att->model->cfg.n_vocab;
	call(gpu, true);
	/* layer past the model */
	stage(MSG_STAGE_FFN, 1, 0, n_layer, 1, 0);
	call(gpu, true);
	cr_assert_not_null(strstr(r.u.error.text, "layer"), "%s", r.u.error.text);
	/* unknown sequence continuing at pos0 > 0 */
	stage(MSG_STAGE_ATTN, 77, 0, 0, 1, 5);
	call(npu, true);
	cr_assert_not_null(strstr(r.u.error.text, "seq 77"), "%s", r.u.error.text);
	msg_init(&m, MSG_RUN);
	m.u.run = (struct msg_run){ .seq_id = 78, .slot = 0, .n = 1, .pos0 = 3, .mode = MSG_HEAD_ARGMAX, .k = 1 };
	call(gpu, true);
	/* a stage the worker does not run */
	stage(MSG_STAGE_FFN, 1, 0, 0, 1, 0);
	call(npu, true);
	stage(MSG_STAGE_ATTN, 1, 0, 0, 1, 0);
	call(gpu, true);
	/* positions past the context */
	stage(MSG_STAGE_ATTN, 1, 0, 0, 1, MSG_MAX_POS - 1);
	call(npu, true);
	/* both still serve, and a good step works */
	expect_alive(gpu, MSG_ROLE_GPU_WORKER);
	expect_alive(npu, MSG_ROLE_NPU_WORKER);
	msg_init(&m, MSG_EMBED);
	m.u.embed = (struct msg_embed){ .seq_id = 1, .slot = 0, .n = 1 };
	call(gpu, false);
	stage(MSG_STAGE_ATTN, 1, 0, 0, 1, 0);
	call(npu, false);

	/* n = 0 cannot even be encoded: send raw bytes on a fresh link */
	bus_close(npu);
	npu = NULL;
	char url[BUS_URL_MAX];
	cr_assert_eq(rundir_url(dir, RUNDIR_NPU, url, sizeof url), 0);
	nng_socket s;
	cr_assert_eq(nng_pair1_open(&s), 0);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, RECV_MS);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 2000);
	cr_assert_eq(nng_dial(s, url, NULL, NNG_FLAG_NONBLOCK), 0);
	uint8_t buf[MSG_MAX_BUF];
	size_t len;
	void *rb;
	size_t rl;
	/* The worker's pair1 listener takes the new link only once it has seen the
	 * old one close: say HELLO until WELCOME comes back (a message sent before
	 * that may be dropped, as with any restarted peer). */
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 200);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 200);
	bool linked = false;
	for (int i = 0; i < 100 && !linked; i++) {
		msg_init(&m, MSG_HELLO);
		m.seq = 100 + (uint32_t)i;
		m.u.hello = (struct msg_hello){ MSG_ROLE_COORDINATOR, (uint32_t)getpid(), MSG_VERSION, 0 };
		cr_assert_eq(msg_encode(&m, buf, sizeof buf, &len), 0);
		if (nng_send(s, buf, len, 0) != 0) /* waits up to 200 ms for the link */
			continue;
		if (nng_recv(s, &rb, &rl, NNG_FLAG_ALLOC) == 0) {
			linked = msg_decode(rb, rl, &r) == 0 && r.type == MSG_WELCOME;
			nng_free(rb, rl);
		}
	}
	cr_assert(linked, "no WELCOME on the new link");
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, RECV_MS);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 2000);
	stage(MSG_STAGE_ATTN, 1, 0, 0, 1, 0);
	m.seq = 5;
	cr_assert_eq(msg_encode(&m, buf, sizeof buf, &len), 0);
	uint32_t zero = 0;
	memcpy(buf + MSG_HDR_SIZE + 20, &zero, 4); /* STAGE.n */
	cr_assert_eq(nng_send(s, buf, len, 0), 0);
	cr_assert_eq(nng_recv(s, &rb, &rl, NNG_FLAG_ALLOC), 0);
	cr_assert_eq(msg_decode(rb, rl, &r), 0);
	nng_free(rb, rl);
	cr_assert_eq(r.type, MSG_ERROR);
	cr_assert_eq(r.u.error.code, ERR_INVAL);
	/* still serving on the same link */
	msg_init(&m, MSG_STATUS_REQ);
	m.seq = 6;
	cr_assert_eq(msg_encode(&m, buf, sizeof buf, &len), 0);
	cr_assert_eq(nng_send(s, buf, len, 0), 0);
	cr_assert_eq(nng_recv(s, &rb, &rl, NNG_FLAG_ALLOC), 0);
	cr_assert_eq(msg_decode(rb, rl, &r), 0);
	nng_free(rb, rl);
	cr_assert_eq(r.type, MSG_STATUS);
	nng_close(s);
}

Test(worker, xrt_without_npu_exits_2, .init = setup, .fini = teardown, .timeout = 20)
{
	char exe[4096], err[128], dev[128];
	snprintf(exe, sizeof exe, "%s/unicorn-npu-worker", proc_bin_dir());
	snprintf(err, sizeof err, "%s/npu.err", dir);
	snprintf(dev, sizeof dev, "%s/no-such-accel", dir);
	setenv("UNICORN_NPU_DEVICE", dev, 1);
	char *argv[] = { exe, "--rundir", dir, "--attn-backend", "xrt", NULL };
	pids[2] = proc_spawn(argv, err);
	int st = proc_wait_ms(pids[2], 10000);
	pids[2] = -1;
	cr_assert(st >= 0 && WIFEXITED(st), "npu worker did not exit");
	cr_assert_eq(WEXITSTATUS(st), 2);
	char text[4096] = { 0 };
	FILE *fp = fopen(err, "r");
	cr_assert_not_null(fp);
	size_t n = fread(text, 1, sizeof text - 1, fp);
	text[n] = 0;
	fclose(fp);
	cr_assert_not_null(strstr(text, "no AMD XDNA NPU found"), "%s", text);
	cr_assert_not_null(strstr(text, "--attn-backend vulkan"), "%s", text);
}

static uint32_t run_prompt(const struct golden *g, uint32_t n)
{
	msg_init(&m, MSG_RUN);
	m.u.run = (struct msg_run){ .seq_id = 3, .slot = 0, .n = n, .pos0 = 0, .mode = MSG_HEAD_ARGMAX, .k = 1 };
	memcpy(m.u.run.tokens, g->tokens, n * 4);
	call(gpu, false);
	return r.u.done.token;
}

/* A killed worker comes back from the loader's regions alone: the model file
 * is gone, yet the restarted worker computes the same token. */
Test(worker, restart_without_model_file, .init = setup, .fini = teardown, .timeout = 60)
{
	struct golden g;
	cr_assert_eq(golden_load("q4_0", &g), 0, "%s", err_msg());
	char copy[128], cmd[4400];
	snprintf(copy, sizeof copy, "%s/model.gguf", dir);
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", g.model_path, copy);
	cr_assert_eq(system(cmd), 0);
	cluster_with(copy);
	uint32_t before = run_prompt(&g, 20);
	kill(pids[1], SIGKILL);
	waitpid(pids[1], NULL, 0);
	pids[1] = -1;
	cr_assert_eq(unlink(copy), 0);
	bus_close(gpu);
	start("unicorn-gpu-worker", 1, NULL);
	gpu = link_to(RUNDIR_GPU, MSG_ROLE_GPU_WORKER);
	cr_assert_eq(run_prompt(&g, 20), before);
	golden_free(&g);
}

static void run_at(uint32_t seq_id, uint32_t slot, const uint32_t *tokens, uint32_t n, uint32_t pos0, uint32_t mode,
		   uint32_t k)
{
	msg_init(&m, MSG_RUN);
	m.u.run = (struct msg_run){ .seq_id = seq_id, .slot = slot, .n = n, .pos0 = pos0, .mode = mode, .k = k };
	memcpy(m.u.run.tokens, tokens, n * 4);
	call(gpu, false);
}

/* The golden q4_0 cluster with a gpu worker of two slots in place of the
 * default one. */
static void two_slot_cluster(struct golden *g)
{
	cr_assert_eq(golden_load("q4_0", g), 0, "%s", err_msg());
	cluster_with(g->model_path);
	kill(pids[1], SIGKILL);
	waitpid(pids[1], NULL, 0);
	bus_close(gpu);
	start("unicorn-gpu-worker", 1, "--max-seqs");
	gpu = link_to(RUNDIR_GPU, MSG_ROLE_GPU_WORKER);
}

/* RUN_BATCH steps two sequences at different positions in one message; each
 * slot's head area then holds bitwise what a RUN of that token alone writes. */
Test(worker, run_batch_equals_runs, .init = setup, .fini = teardown, .timeout = 60)
{
	struct golden g;
	two_slot_cluster(&g);
	uint32_t ids_alone[2][8], *ids;
	float vals_alone[2][8], *vals;
	const uint32_t plen[2] = { 20, 9 }, poff[2] = { 0, 25 };
	for (uint32_t s = 0; s < 2; s++) {
		run_at(7 + s, s, g.tokens + poff[s], plen[s], 0, MSG_HEAD_ARGMAX, 1);
		run_at(7 + s, s, g.tokens + poff[s] + plen[s], 1, plen[s], MSG_HEAD_TOPK, 8);
		cr_assert_eq(attach_head(att, s, &ids, &vals), 0, "%s", err_msg());
		memcpy(ids_alone[s], ids, sizeof ids_alone[s]);
		memcpy(vals_alone[s], vals, sizeof vals_alone[s]);
		cr_assert_eq(r.u.done.token, ids_alone[s][0]);
	}
	/* forget both; rebuild the prompts, then one RUN_BATCH for both next tokens */
	msg_init(&m, MSG_RESET_SEQ);
	m.u.reset_seq.flags = MSG_RESET_ALL;
	call(gpu, false);
	for (uint32_t s = 0; s < 2; s++)
		run_at(7 + s, s, g.tokens + poff[s], plen[s], 0, MSG_HEAD_ARGMAX, 1);
	msg_init(&m, MSG_RUN_BATCH);
	m.u.run_batch.n = 2;
	m.u.run_batch.mode = MSG_HEAD_TOPK;
	m.u.run_batch.k = 8;
	for (uint32_t s = 0; s < 2; s++)
		m.u.run_batch.e[s] = (struct msg_run_batch_entry){ 7 + s, s, plen[s], g.tokens[poff[s] + plen[s]] };
	call(gpu, false);
	cr_assert_eq(r.u.done.seq_id, 7);
	cr_assert_eq(r.u.done.k, 8);
	cr_assert_eq(r.u.done.token, ids_alone[0][0]);
	for (uint32_t s = 0; s < 2; s++) {
		cr_assert_eq(attach_head(att, s, &ids, &vals), 0, "%s", err_msg());
		cr_assert_eq(memcmp(ids, ids_alone[s], sizeof ids_alone[s]), 0, "slot %u ids differ", s);
		cr_assert_eq(memcmp(vals, vals_alone[s], sizeof vals_alone[s]), 0, "slot %u logits differ", s);
	}
	/* an entry that skips positions is refused, and the worker stays usable */
	m.u.run_batch.e[1].pos = plen[1] + 5;
	call(gpu, true);
	m.u.run_batch.n = 1;
	m.u.run_batch.e[0].pos = plen[0] + 1;
	call(gpu, false);
	golden_free(&g);
}

/* One RUN_CHUNKS: entry 0's run of chunks (a 20-token prompt, no head, then
 * its 21st token with a top-k head) beside entry 1's whole 9-token prompt
 * (head) writes in each slot's head area bitwise what the same chunks alone
 * write (wide: column-independent mat-mat; then a narrow decode step of
 * both vs alone). Only entries with a head get one. */
static void chunks_msg(uint32_t n, const uint32_t *slot, const uint32_t *pos0, const uint32_t *len,
		       const uint32_t *const *tok, const uint32_t *head, bool wide)
{
	msg_init(&m, MSG_RUN_CHUNKS);
	struct msg_run_chunks *c = &m.u.run_chunks;
	*c = (struct msg_run_chunks){ .n = n, .mode = MSG_HEAD_TOPK, .k = 8, .flags = wide ? MSG_CHUNKS_WIDE : 0 };
	for (uint32_t i = 0; i < n; i++) {
		c->e[i] = (struct msg_run_chunk){ 7 + slot[i], slot[i], pos0[i], len[i], head[i] };
		memcpy(c->tokens + c->n_tok, tok[i], len[i] * 4);
		c->n_tok += len[i];
	}
	call(gpu, false);
}

Test(worker, run_chunks_equal_runs, .init = setup, .fini = teardown, .timeout = 60)
{
	struct golden g;
	two_slot_cluster(&g);
	const uint32_t *t = g.tokens;
	uint32_t ids_alone[2][2][8], *ids;
	float vals_alone[2][2][8], *vals;
	const uint32_t sl[2] = { 0, 1 }, p0[2] = { 0, 0 }, one[2] = { 1, 1 }, no[2] = { 0, 0 };
	const uint32_t plen[2] = { 21, 9 }, dpos[2] = { 21, 9 };
	const uint32_t *ptok[2] = { t, t + 25 }, *dtok[2] = { t + 21, t + 34 };
	for (uint32_t s = 0; s < 2; s++) {
		chunks_msg(1, &sl[s], &p0[s], &plen[s], &ptok[s], &one[s], true);
		cr_assert_eq(attach_head(att, s, &ids, &vals), 0, "%s", err_msg());
		cr_assert_eq(r.u.done.token, ids[0]);
		memcpy(ids_alone[s][0], ids, sizeof ids_alone[s][0]);
		memcpy(vals_alone[s][0], vals, sizeof vals_alone[s][0]);
		chunks_msg(1, &sl[s], &dpos[s], &one[s], &dtok[s], &one[s], false);
		memcpy(ids_alone[s][1], ids, sizeof ids_alone[s][1]);
		memcpy(vals_alone[s][1], vals, sizeof vals_alone[s][1]);
	}
	msg_init(&m, MSG_RESET_SEQ);
	m.u.reset_seq.flags = MSG_RESET_ALL;
	call(gpu, false);
	/* slot 0's first 20 without a head; slot 1's whole prompt with one */
	const uint32_t first[2] = { 20, 9 };
	chunks_msg(2, sl, p0, first, ptok, (const uint32_t[]){ 0, 1 }, true);
	cr_assert_eq(r.u.done.k, 8);
	cr_assert_eq(attach_head(att, 1, &ids, &vals), 0, "%s", err_msg());
	cr_assert_eq(memcmp(ids, ids_alone[1][0], sizeof ids_alone[1][0]), 0, "slot 1: prompt head ids differ");
	cr_assert_eq(memcmp(vals, vals_alone[1][0], sizeof vals_alone[1][0]), 0, "slot 1: prompt head logits differ");
	const uint32_t p20 = 20, *t20 = t + 20;
	chunks_msg(1, sl, &p20, one, &t20, one, true);
	cr_assert_eq(attach_head(att, 0, &ids, &vals), 0, "%s", err_msg());
	cr_assert_eq(memcmp(vals, vals_alone[0][0], sizeof vals_alone[0][0]), 0, "slot 0: chunked prompt differs");
	chunks_msg(2, sl, dpos, one, dtok, one, false);
	for (uint32_t s = 0; s < 2; s++) {
		cr_assert_eq(attach_head(att, s, &ids, &vals), 0, "%s", err_msg());
		cr_assert_eq(memcmp(ids, ids_alone[s][1], sizeof ids_alone[s][1]), 0, "slot %u decode ids differ", s);
		cr_assert_eq(memcmp(vals, vals_alone[s][1], sizeof vals_alone[s][1]), 0, "slot %u decode logits differ", s);
	}
	/* no head at all: k 0; a chunk that skips positions is refused, the
	 * worker stays usable */
	const uint32_t p22[2] = { 22, 10 }, *t22[2] = { t + 22, t + 35 };
	chunks_msg(2, sl, p22, one, t22, no, false);
	cr_assert_eq(r.u.done.k, 0);
	const uint32_t p30 = 30;
	msg_init(&m, MSG_RUN_CHUNKS);
	m.u.run_chunks = (struct msg_run_chunks){ .n = 1, .n_tok = 1, .mode = MSG_HEAD_ARGMAX, .k = 1,
						  .e = { { 7, 0, p30, 1, 1 } }, .tokens = { 5 } };
	call(gpu, true);
	m.u.run_chunks.e[0].pos0 = 23;
	call(gpu, false);
	golden_free(&g);
}
