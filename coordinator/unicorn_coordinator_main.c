/* unicorn-coordinator: tokenizer, chat template, scheduler, sampling and
 * recompute for a cluster (docs/cluster.md, docs/coordinator.md).
 *
 * Single-threaded loop: serve coordinator.ipc (long-polls), admit queued
 * requests into free slots, run one step for every live sequence (fused: RUN;
 * split: EMBED / STAGE attn (npu) / STAGE ffn (gpu) / HEAD, two sequences
 * pipelined), sample, detokenize, and on a worker failure re-handshake and
 * replay every live sequence with its recorded chunks. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat/template.h"
#include "coordinator/constrained.h"
#include "coordinator/images.h"
#include "ipc/imagefile.h"
#include "coordinator/intake.h"
#include "coordinator/metrics.h"
#include "coordinator/obs_server.h"
#include "coordinator/sampler.h"
#include "coordinator/kvcache.h"
#include "coordinator/sched.h"
#include "coordinator/stages.h"
#include "tokenizer/tokenizer.h"
#include "coordinator/trace.h"
#include "ipc/attach.h"
#include "ipc/bus.h"
#include "ipc/ctl.h"
#include "ipc/dataplane.h"
#include "common/err.h"
#include "common/le.h"
#include "common/spin.h"
#include "ipc/rundir.h"

#include <jansson.h>

#define STEP_TIMEOUT_MS_DEFAULT 10000  /* one message without DONE = worker dead */
#define STEP_TIMEOUT_MS_MAX 160000     /* ... each timeout doubles it, up to this (a slow device) */
#define REQUEST_TIMEOUT_S_DEFAULT 600  /* --request-timeout: longest a request may run */
#define REQUEST_TIMEOUT_S_MAX 10000000 /* = OAI_MAX_TIMEOUT_S; its ns fit an int64 */
#define RECOVER_MS 30000               /* give up on a dead worker after this */
#define MAX_FAILS 3                    /* step failures before a request errors */
#define QUEUE_CAP 16
/* decode rows from which a fused round's decode runs mat-mat: 8 (H100, `bench
 * --parallel`, ms per step narrow / wide: 1B 3.17 / 3.29 at 8 rows, 4.19 /
 * 3.36 at 12; 27B 28.5 / 40.2 at 4, 51.3 / 41.5 at 8, 102.1 / 43.9 at 16;
 * at 16 a round that lost one finished stream fell to the narrow kernels:
 * json_object's early ends made its 16-stream ITL 1.46x plain's, 1.11x at
 * 8; BENCHMARKS.md) */
#define BATCH_MM_MIN_DEFAULT 8
/* the same per micro-batch of split and pipeline FLOWs: 8 (27B Q4_0,
 * pipeline on two H100s, 16 streams: 237 tok/s at 16, 300 at 8; 64 streams
 * 788 -> 816; BENCHMARKS.md) */
#define SPLIT_MM_MIN_DEFAULT 8

struct wlink {
	const char *name;
	enum msg_role role;
	struct bus *b;
	uint32_t pid;
	bool up;
	uint32_t wait_seq;     /* seq of the message whose DONE we wait for */
	bool refused;          /* the last wl_wait ended with the worker's ERROR answer: the
	                        * worker is alive and refused that message */
	int64_t t_sent;
	int64_t busy_ns;       /* wall time with a message outstanding */
	int64_t work_ns;       /* the worker's own time in those steps (DONE.gpu_ns) */
	int64_t wall_ns;       /* the worker's wall time on those messages (DONE.wall_us) */
	uint64_t steps;
	uint32_t restarts;
	uint8_t idx;           /* trace tid - 1 */
	enum dp_link dl;       /* its rings in the data plane */
	struct trace_span span; /* the outstanding step message (msg_type 0: not a step) */
};

struct coord {
	const char *rundir;
	struct images_area img;    /* the gpu worker's image slots (coordinator/images.h) */
	bool split;
	/* --placement pipeline: split's FLOW machinery with two stage workers of
	 * whole layers on the two links (coordinator/stages.h) */
	bool pipeline;
	struct stages stages;
	uint32_t max_seqs;
	int step_timeout_ms;
	int64_t request_timeout_ns; /* --request-timeout: longest a request may run; 0 = none */
	bool no_batch;         /* UNICORN_NO_BATCH=1: one submission per sequence (A/B of continuous batching) */
	uint32_t batch_tokens; /* --batch-tokens: rows of one fused round (sched_plan_round's budget) */
	uint32_t batch_mm_min; /* UNICORN_BATCH_MM_MIN: decode rows from which decode runs mat-mat (0 never) */
	uint32_t split_mm_min; /* the same per split/pipeline micro-batch (UNICORN_BATCH_MM_MIN sets both) */
	struct tok *tok;
	struct cs_vocab *csv;  /* the vocabulary trie, built at the first structured-output request */
	struct attach *att;
	uint32_t n_layer, n_ctx;
	uint64_t kv_budget;    /* --kv-budget (0: every slot at full length) */
	uint32_t ctx_cap;      /* --ctx (0: the model's context) */
	uint32_t kv_type;      /* --kv-type (enum kv_type) */
	uint64_t kv_bytes;     /* the pools' bytes (kv_layout) */
	struct kvc kv;         /* paged KV bookkeeping (coordinator/kvcache.h) */
	uint64_t n_admitted;
	struct sched sched;
	struct intake *in;
	struct wlink gpu, npu;
	/* the data plane (ipc/dataplane.h): step messages and their DONEs go
	 * through shared-memory rings; nng carries only HELLO/WELCOME */
	struct dataplane dp;
	bool dp_on;
	uint32_t dp_seq;
	struct ctl *ctl;
	struct msg m, d;       /* scratch messages (large) */
	/* stats for busy ratios: wall time spent in steps, per placement */
	int64_t step_wall_ns;
	uint64_t n_steps, n_decode_steps;
	int64_t decode_wall_ns;
	uint64_t n_pipelined;
	uint64_t n_chained;    /* pipeline: decode steps posted while another micro-batch was on a stage */
	uint64_t n_wide_mb;    /* split micro-batches run wide (mat-mat kernels) */
	uint64_t n_chunk_flows, n_chunk_seqs; /* split prompt-chunk FLOWs, and the chunks they carried */
	/* split dataflow: the ops' latency (post to DONE, EMA) and the spin
	 * bound: while ops come back faster than the bound, the coordinator looks
	 * at its bell instead of sleeping (common/spin.h) */
	int64_t op_ema_ns;
	uint32_t spin_us;
	uint32_t split_mbs;    /* micro-batches of the dataflow (UNICORN_SPLIT_MBS) */
	bool split_via_coord;  /* UNICORN_SPLIT_VIA_COORD=1: every stage through the coordinator (A/B) */
	bool full_row;         /* UNICORN_FULL_ROW=1: schemas and logit_bias from the full row, never the GPU top-k (A/B) */
	bool no_chain;         /* UNICORN_PIPE_CHAIN=0: pipeline decode steps in lockstep rounds (A/B) */
	/* observability (docs/observability.md) */
	struct metrics *met;
	struct metrics_cluster mid;
	struct trace *tr;
	int64_t t_tok[MSG_MAX_SLOTS]; /* time of each slot's last generated token */
	int64_t t_boot;
	char status_json[RUNDIR_PATH_MAX];
	struct timespec status_mtime;  /* of the status.json last folded into the metrics */
	ino_t status_ino;
	struct obs_server *obs; /* metrics and traces for the API process */
	/* idle sleep: the intake socket's descriptor (-1: none) */
	int intake_fd;
};

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

#define IDLE_TICK_MS 250 /* a loop with requests sleeps at most this: held polls, timeouts */
#define SETTLE_TICK_MS 1000 /* just after work: the metrics' once-a-second rates fall to 0 */
#define EMPTY_TICK_MS 10000 /* nothing for SETTLE_MS: only the heartbeat (ipc/ctl.h stall limit) */
#define SETTLE_MS 3000

/* Sleep until a request (CLI or API process) arrives, at most ms: an idle
 * coordinator makes no other wakeups. */
static void idle_wait(struct coord *c, int ms)
{
	struct pollfd p[2] = { { .fd = c->intake_fd, .events = POLLIN },
			       { .fd = ctl_wake_fd(c->ctl), .events = POLLIN } }; /* SHUTDOWN */
	if (c->intake_fd < 0) {
		struct timespec ts = { 0, 20000000 }; /* no descriptor: look every 20 ms */
		nanosleep(&ts, NULL);
		return;
	}
	poll(p, 2, ms);
}

static void heartbeat(struct coord *c)
{
	if (!c->ctl)
		return;
	ctl_heartbeat(c->ctl);
	/* the load on the liveness page: /health and a drain read it (docs/scale.md) */
	if (c->sched.max_seqs)
		ctl_set_load(c->ctl, sched_live(&c->sched), c->sched.q_len, c->sched.max_seqs);
}

static bool stopping(struct coord *c)
{
	return g_stop || (c->ctl && ctl_shutdown_requested(c->ctl));
}

static void fill_status(void *arg, struct msg_status *st)
{
	struct coord *c = arg;
	msg_set_str(st->backend, sizeof st->backend, c->pipeline ? "pipeline" : c->split ? "split" : "fused");
	bool up = __atomic_load_n(&c->gpu.up, __ATOMIC_RELAXED) &&
		  (!c->split || __atomic_load_n(&c->npu.up, __ATOMIC_RELAXED));
	msg_set_str(st->device, sizeof st->device, up ? "coordinator" : COORD_DEGRADED);
	st->busy_ns = (uint64_t)c->step_wall_ns;
	st->steps = c->n_steps;
}

/* --- worker links ----------------------------------------------------- */

/* Put m in w's request ring with the next data-plane seq (never 0). The
 * coordinator keeps at most one message per micro-batch in a link's ring
 * (16 places), so a full ring means the worker stopped reading: it is
 * treated as gone (replaced, then the ring drains). */
static uint32_t dp_next_seq(struct coord *c)
{
	if (++c->dp_seq == 0)
		c->dp_seq = 1;
	return c->dp_seq;
}

static int dp_post(struct coord *c, struct wlink *w, struct msg *m)
{
	m->seq = dp_next_seq(c);
	int rc = dp_send(&c->dp.link[w->dl].req, m);
	return rc == ERR_AGAIN ? err_set(ERR_IO, "request ring full") : rc;
}

static int wl_send(struct coord *c, struct wlink *w, struct msg *m)
{
	int rc;
	if (c->dp_on) {
		rc = dp_post(c, w, m);
	} else {
		m->seq = 0;
		rc = bus_send(w->b, m);
	}
	if (rc)
		return err_prefix(rc, "%s worker", w->name);
	w->wait_seq = m->seq;
	w->t_sent = intake_now_ns();
	/* remember what a step message was for its trace span */
	struct trace_span *sp = &w->span;
	memset(sp, 0, sizeof *sp);
	sp->worker = w->idx;
	sp->t_start_ns = w->t_sent;
	if (m->type == MSG_EMBED) {
		sp->slot = (uint16_t)m->u.embed.slot;
		sp->n = m->u.embed.n;
	} else if (m->type == MSG_STAGE) {
		sp->slot = (uint16_t)m->u.stage.slot;
		sp->n = m->u.stage.n;
		sp->pos0 = m->u.stage.pos0;
		sp->layer = (uint16_t)m->u.stage.layer;
		sp->stage = (uint8_t)m->u.stage.stage;
	} else if (m->type == MSG_HEAD) {
		sp->slot = (uint16_t)m->u.head.slot;
		sp->n = m->u.head.n;
	} else if (m->type == MSG_RUN) {
		sp->slot = (uint16_t)m->u.run.slot;
		sp->n = m->u.run.n;
		sp->pos0 = m->u.run.pos0;
	} else if (m->type == MSG_RUN_CHUNKS) {
		sp->slot = (uint16_t)m->u.run_chunks.e[0].slot;
		sp->n = m->u.run_chunks.n_tok;
		sp->pos0 = m->u.run_chunks.e[0].pos0;
	} else {
		return 0;
	}
	sp->msg_type = m->type;
	return 0;
}

/* A step's accounting: the link was busy from t_start (sent, or the end of
 * the message queued before it) to now; the handoff cost is that round trip
 * minus the worker's wall time on the message (the transport and wake-ups). */
static void obs_step(struct coord *c, struct wlink *w, int64_t t_start, uint64_t gpu_ns, uint32_t wall_us)
{
	int64_t now = intake_now_ns();
	w->busy_ns += now - t_start;
	w->work_ns += (int64_t)gpu_ns;
	w->wall_ns += (int64_t)wall_us * 1000;
	w->steps++;
	if (!c->met)
		return;
	double rt = (double)(now - t_start) / 1e9, work = (double)gpu_ns / 1e9, wall = wall_us / 1e6;
	metrics_add(c->met, c->mid.worker_steps, w->name, 1);
	metrics_add(c->met, c->mid.worker_busy, w->name, work);
	metrics_add(c->met, c->mid.link_busy, w->name, rt);
	metrics_observe(c->met, c->mid.handoff, w->name, rt > wall ? rt - wall : 0);
}

/* A step message's DONE: its trace span, then the accounting. */
static void obs_done(struct coord *c, struct wlink *w, uint64_t gpu_ns, uint32_t wall_us)
{
	if (w->span.msg_type && c->tr) {
		w->span.t_end_ns = intake_now_ns();
		w->span.work_ns = (int64_t)gpu_ns;
		trace_record(c->tr, &w->span);
	}
	w->span.msg_type = 0;
	obs_step(c, w, w->t_sent, gpu_ns, wall_us);
}

/* Gauges every loop iteration; status.json and the rates once a second. */
static void obs_tick(struct coord *c);

/* The next answer from w: from its done ring (sleeping on the coordinator's
 * doorbell; a worker process that is gone is noticed within 50 ms), or
 * from its link. ERR_TIMEOUT when nothing came within wait_ms. */
static int wl_recv(struct coord *c, struct wlink *w, int wait_ms)
{
	if (!c->dp_on)
		return bus_recv(w->b, wait_ms, &c->d);
	uint32_t seen = ring_bell_seq(c->dp.coord_bell);
	int rc = dp_recv(&c->dp.link[w->dl].done, &c->d);
	if (rc != ERR_AGAIN)
		return rc;
	rc = ring_bell_wait(c->dp.coord_bell, seen, wait_ms, (pid_t)w->pid);
	if (rc == ERR_IO)
		return err_set(ERR_IO, "process %u is gone", w->pid);
	return rc ? rc : ERR_AGAIN;
}

/* Wait for the DONE answering w->wait_seq; stale answers are dropped. */
static int wl_wait(struct coord *c, struct wlink *w, int timeout_ms, struct msg_done *done)
{
	int64_t deadline = intake_now_ns() + (int64_t)timeout_ms * 1000000;
	w->refused = false;
	for (;;) {
		int64_t left = (deadline - intake_now_ns()) / 1000000;
		if (left <= 0)
			return err_set(ERR_TIMEOUT, "%s worker: no DONE within %d ms", w->name,
				       timeout_ms);
		int rc = wl_recv(c, w, left > 500 ? 500 : (int)left);
		heartbeat(c);
		if (rc == ERR_TIMEOUT || rc == ERR_AGAIN)
			continue;
		if (rc)
			return err_prefix(rc, "%s worker", w->name);
		if (c->d.type == MSG_DONE && c->d.u.done.ref_seq == w->wait_seq) {
			obs_done(c, w, c->d.u.done.gpu_ns, c->d.u.done.wall_us);
			*done = c->d.u.done;
			if (done->status < 0)
				return err_set(done->status, "%s worker: step failed (%s)", w->name,
					       err_name(done->status));
			return 0;
		}
		if (c->d.type == MSG_ERROR && c->d.u.error.ref_seq == w->wait_seq) {
			w->busy_ns += intake_now_ns() - w->t_sent;
			w->refused = true;
			return err_set(c->d.u.error.code < 0 ? c->d.u.error.code : ERR_INVAL,
				       "%s worker: %s", w->name, c->d.u.error.text);
		}
		/* anything else is an answer to a message we gave up on */
	}
}

/* HELLO until WELCOME (or the deadline). Notes a new pid as a restart. */
static int wl_handshake(struct coord *c, struct wlink *w, int64_t deadline)
{
	while (!stopping(c)) {
		msg_init(&c->m, MSG_HELLO);
		c->m.u.hello.role = MSG_ROLE_COORDINATOR;
		c->m.u.hello.pid = (uint32_t)getpid();
		c->m.u.hello.version = MSG_VERSION;
		c->m.seq = 0;
		int rc = bus_send(w->b, &c->m);
		if (!rc) {
			uint32_t seq = c->m.seq;
			int64_t until = intake_now_ns() + 1000000000;
			while (intake_now_ns() < until) {
				/* a worker with the data plane sleeps on its doorbell (up to
				 * WORKER_IDLE_WAIT_MS) and reads its link when woken: ring it
				 * until the HELLO is answered (the first ring may come before
				 * the message reached its socket) */
				if (c->dp_on)
					ring_bell_ring(c->dp.link[w->dl].bell);
				rc = bus_recv(w->b, 200, &c->d);
				heartbeat(c);
				if (rc)
					continue;
				if (c->d.type == MSG_WELCOME) {
					(void)seq;
					if (c->d.u.hello.version != MSG_VERSION) {
						return err_set(ERR_UNSUP, "%s worker: protocol version "
							       "%u, ours %u", w->name,
							       c->d.u.hello.version, MSG_VERSION);
					}
					if (w->pid && w->pid != c->d.u.hello.pid) {
						w->restarts++;
						/* a new gpu worker holds no images */
						memset(c->img.valid, 0, sizeof c->img.valid);
						fprintf(stderr, "coordinator: %s worker restarted "
							"(pid %u -> %u)\n", w->name, w->pid,
							c->d.u.hello.pid);
					}
					w->pid = c->d.u.hello.pid;
					w->up = true;
					return 0;
				}
			}
		} else {
			usleep(100000);
			heartbeat(c);
		}
		if (deadline && intake_now_ns() > deadline)
			return err_set(ERR_TIMEOUT, "%s worker: no WELCOME", w->name);
	}
	return err_set(ERR_STATE, "shutting down");
}

static int wl_reset(struct coord *c, struct wlink *w, uint32_t slot, bool all)
{
	msg_init(&c->m, MSG_RESET_SEQ);
	c->m.u.reset_seq.seq_id = all ? 0 : slot;
	c->m.u.reset_seq.flags = all ? MSG_RESET_ALL : 0;
	struct msg_done done;
	int64_t busy = w->busy_ns, work = w->work_ns, wall = w->wall_ns; /* resets are not step work */
	uint64_t steps = w->steps;
	int rc = wl_send(c, w, &c->m);
	if (!rc)
		rc = wl_wait(c, w, c->step_timeout_ms, &done);
	w->busy_ns = busy;
	w->work_ns = work;
	w->wall_ns = wall;
	w->steps = steps;
	return rc;
}

static struct wlink *links(struct coord *c, int i)
{
	if (i == 0)
		return &c->gpu;
	return c->split && i == 1 ? &c->npu : NULL;
}

/* --- requests ---------------------------------------------------------- */

/* When a request started at t_start with its own limit want_ns (0 = none)
 * must end: the smaller of that and the server's limit; 0 = never. */
static int64_t deadline_of(const struct coord *c, int64_t t_start, int64_t want_ns)
{
	int64_t lim = c->request_timeout_ns;
	int64_t t = want_ns > 0 && (!lim || want_ns < lim) ? want_ns : lim;
	return t ? t_start + t : 0;
}

/* A MSG_GEN_TOKENS prompt: n_prompt / 4 little-endian ids, each checked
 * against the vocabulary (with images, an image's rows are left to
 * images_check_prompt). */
static int prompt_ids(struct coord *c, const char *prompt, uint32_t n_prompt, bool images, struct tok_ids *ids)
{
	size_t n = n_prompt / 4;
	ids->ids = malloc(n * sizeof *ids->ids);
	if (!ids->ids)
		return err_set(ERR_NOMEM, "out of memory");
	ids->n = ids->cap = n;
	for (size_t i = 0; i < n; i++) {
		uint32_t id = (uint32_t)le_get((const uint8_t *)prompt + 4 * i, 4);
		if (images && (id & IMAGES_ROW)) { /* an image's row: checked by images_check_prompt */
			ids->ids[i] = (int32_t)(id & ~IMAGES_ROW);
			continue;
		}
		if (id >= tok_n_vocab(c->tok)) {
			tok_ids_free(ids);
			return err_set(ERR_INVAL, "prompt[%zu]: token %u out of the vocabulary (%u)", i, id,
				       tok_n_vocab(c->tok));
		}
		ids->ids[i] = (int32_t)id;
	}
	return 0;
}

/* A prompt's images (GEN_REQ v12): their rows back to the ids the client
 * sent (prompt_ids kept them without bit 31 in its int32 ids), checked
 * against the digests (coordinator/images.h). */
static int submit_images(struct coord *c, const struct msg_gen_req *g, const char *prompt, uint32_t n_prompt,
			 struct intake_req *r)
{
	if (c->split)
		return err_set(ERR_UNSUP, "images need --placement fused");
	if (le_get((const uint8_t *)prompt + n_prompt - 4, 4) & IMAGES_ROW)
		return err_set(ERR_INVAL, "prompt: ends with an image's row (the model answers after text)");
	for (uint32_t i = 0; i < r->n_prompt; i++) {
		uint32_t id = (uint32_t)le_get((const uint8_t *)prompt + 4 * i, 4);
		if (id & IMAGES_ROW)
			r->prompt[i] = id;
	}
	r->img_digest = malloc((size_t)g->n_images * MSG_DIGEST);
	r->img_pos = malloc(g->n_images * sizeof *r->img_pos);
	if (!r->img_digest || !r->img_pos)
		return err_set(ERR_NOMEM, "out of memory");
	memcpy(r->img_digest, g->images, (size_t)g->n_images * MSG_DIGEST);
	r->n_images = g->n_images;
	/* the pixels must be there (the sender wrote them first): a request
	 * without them fails here, alone, not in a round beside others */
	for (uint32_t k = 0; k < r->n_images; k++) {
		char path[IMAGEFILE_PATH_MAX];
		struct stat st;
		if (imagefile_path(c->rundir, r->img_digest[k], path, sizeof path) || stat(path, &st))
			return err_set(ERR_INVAL, "image %u: no pixels in the run directory (%s)", k, path);
	}
	int rc = images_check_prompt(r->prompt, r->n_prompt, (const uint8_t(*)[MSG_DIGEST])r->img_digest, r->n_images,
				     &r->img_rows, r->img_pos);
	return rc ? rc : images_area_rows(&c->img, r->img_rows);
}

static int submit(void *arg, const struct msg_gen_req *g, const char *prompt, uint32_t n_prompt,
		  struct intake_req *r)
{
	struct coord *c = arg;
	/* a resubmission after a coordinator restart starts a fresh limit */
	r->t_deadline = deadline_of(c, r->t_start, (int64_t)g->timeout_ms * 1000000);
	int rc = sampler_check(&r->sp);
	if (rc)
		return rc;
	struct tok_ids ids = { 0 };
	if ((g->flags & MSG_GEN_TOKENS) && n_prompt / 4 >= c->n_ctx)
		/* refused before a buffer of ids is made for it */
		return err_set(ERR_RANGE, "prompt: %u tokens do not fit the context of %u", n_prompt / 4,
			       c->n_ctx);
	if (g->flags & MSG_GEN_TOKENS)
		rc = prompt_ids(c, prompt, n_prompt, g->n_images > 0, &ids);
	else if (g->flags & MSG_GEN_CHAT) {
		struct chat_msg cm = { "user", prompt };
		rc = chat_encode(c->tok, &cm, 1, true, &ids);
	} else {
		rc = chat_encode_plain(c->tok, prompt, n_prompt, &ids);
	}
	if (rc)
		return rc;
	if (ids.n == 0 || ids.n + g->n_resume >= c->n_ctx) {
		size_t n = ids.n; /* tok_ids_free zeroes it */
		tok_ids_free(&ids);
		if (n == 0)
			return err_set(ERR_RANGE, "prompt: no tokens");
		return err_set(ERR_RANGE, "prompt: %zu tokens + %u resumed do not fit the context "
			       "of %u", n, g->n_resume, c->n_ctx);
	}
	r->prompt = malloc(ids.n * sizeof *r->prompt);
	r->resume = malloc((g->n_resume + 1) * sizeof *r->resume);
	if (!r->prompt || !r->resume) {
		tok_ids_free(&ids);
		return err_set(ERR_NOMEM, "out of memory");
	}
	for (size_t i = 0; i < ids.n; i++) {
		if (ids.ids[i] < 0) {
			tok_ids_free(&ids);
			return err_set(ERR_INVAL, "prompt: bad token id");
		}
		r->prompt[i] = (uint32_t)ids.ids[i];
	}
	r->n_prompt = (uint32_t)ids.n;
	tok_ids_free(&ids);
	if (g->n_images && (rc = submit_images(c, g, prompt, n_prompt, r)))
		return rc;
	for (uint32_t i = 0; i < g->n_resume; i++) {
		if (g->resume[i] >= tok_n_vocab(c->tok))
			return err_set(ERR_INVAL, "resume[%u]: token %u out of the vocabulary", i,
				       g->resume[i]);
		r->resume[i] = g->resume[i];
	}
	r->n_resume = g->n_resume;
	if ((g->flags & MSG_GEN_JSON) || g->n_bias) {
		/* structured output and logit_bias pick from every token: the
		 * fused GPU top-k of the masked, biased row (head_gpu below), or
		 * the whole logit row (the fused RUN_CHUNKS head's
		 * MSG_CHUNK_HEAD_FULL entries, the split and pipeline heads'
		 * MSG_HEAD_FULL mode: split_head_join) */
		if ((g->flags & MSG_GEN_JSON) && !c->csv) {
			int64_t t0 = intake_now_ns();
			if ((rc = constrained_vocab(c->tok, &c->csv)))
				return rc;
			fprintf(stderr, "coordinator: vocabulary trie for structured output built in %.0f ms\n",
				(double)(intake_now_ns() - t0) / 1e6);
		}
		if ((rc = constrained_setup(c->csv, tok_n_vocab(c->tok), g, r)))
			return rc;
		/* the fused GPU top-k adds the biases and masks what the schema
		 * does not allow (MSG_CHUNK_HEAD_BIAS); logprobs (of the raw row)
		 * and the other placements take the row */
		r->head_gpu = !(g->flags & MSG_GEN_LOGPROBS) && !c->split && !c->full_row &&
			      (!r->cs || MSG_SLOT_MASK + ((uint64_t)c->att->n_vocab + 31) / 32 <= c->att->n_vocab);
	}
	/* Re-run the detokenizer over the resumed tokens so the held UTF-8
	 * bytes (and the pieces of late polls) match the first run. */
	for (uint32_t i = 0; i < r->n_resume; i++) {
		int32_t prev = (int32_t)(i ? r->resume[i - 1] : r->prompt[r->n_prompt - 1]);
		char *text = NULL;
		size_t len = 0;
		if (tok_decode_next(c->tok, prev, (int32_t)r->resume[i], &text, &len))
			len = 0;
		rc = intake_add_token(r, r->resume[i], text ? text : "", len);
		free(text);
		if (rc)
			return rc;
	}
	if (r->n_resume >= r->max_tokens) {
		intake_finish(r, MSG_END_LENGTH);
		return 0;
	}
	rc = sched_queue_push(&c->sched, r->id);
	if (rc)
		return err_set(ERR_RANGE, "coordinator busy: %u requests running and %u waiting; "
			       "try again later", sched_live(&c->sched), c->sched.q_len);
	r->state = INTAKE_QUEUED;
	fprintf(stderr, "coordinator: request %016llx: %u prompt tokens%s%s, %u resumed\n",
		(unsigned long long)r->id, r->n_prompt,
		(g->flags & MSG_GEN_CHAT) ? " (chat)" : "",
		r->head_gpu && r->cs ? ", schema mask on the GPU top-k" : r->head_gpu && r->n_bias ? ", logit_bias on the GPU top-k"
		: intake_req_full_row(r) ? ", full logit row" : "", r->n_resume);
	return 0;
}

/* Request i of the request table; NULL if free. */
static struct intake_req *req_at(struct coord *c, uint32_t i)
{
	return intake_at(c->in, i);
}

/* Whether a request is queued or running: only then does the loop have
 * timers of its own (deadlines, held polls, which wait for its tokens). A
 * finished one kept for its client's last poll (INTAKE_KEEP_DONE_MS) is
 * answered when the poll comes and cleared on a later tick, however long. */
static bool any_request(struct coord *c)
{
	for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++) {
		const struct intake_req *r = req_at(c, i);
		if (r && (r->state == INTAKE_QUEUED || r->state == INTAKE_LIVE || r->has_slot))
			return true;
	}
	return false;
}

static struct intake_req *find_req(struct coord *c, uint64_t id)
{
	for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++) {
		struct intake_req *r = req_at(c, i);
		if (r && r->id == id)
			return r;
	}
	return NULL;
}

static void release(struct coord *c, struct intake_req *r)
{
	if (!r->has_slot)
		return;
	kvc_release(&c->kv, r->slot);
	r->kv_paused = false;
	sched_slot_free(&c->sched, r->slot);
	r->has_slot = false;
	double ms = (double)(intake_now_ns() - r->t_start) / 1e6;
	if (c->met)
		metrics_add(c->met, c->mid.requests, intake_reason_name(r->reason), 1);
	fprintf(stderr, "coordinator: request %016llx: %s after %u tokens, %.1f ms\n",
		(unsigned long long)r->id, intake_reason_name(r->reason), r->n_gen, ms);
}

/* The workers forget slot's old KV (a fresh or recomputed sequence). */
static void reset_slot(struct coord *c, uint32_t slot)
{
	for (int i = 0; i < 2; i++) {
		struct wlink *w = links(c, i);
		if (w && w->up && wl_reset(c, w, slot, false))
			fprintf(stderr, "coordinator: reset slot %u: %s\n", slot, err_msg());
	}
}

/* Give r's sequence its KV blocks from the prefix cache: a shared prefix is
 * not recomputed (sched_seq_skip for a fresh sequence, a replay that starts
 * after it for a recomputed one). */
static int kv_start(struct coord *c, struct intake_req *r, bool fresh)
{
	uint32_t shared = 0;
	int rc = kvc_start(&c->kv, r->slot, r->seq.tokens, r->seq.n_prompt, &shared);
	if (!rc && sched_seq_span_cut(&r->seq, shared)) {
		/* a prefix that ends inside an image: share only what comes before
		 * it (the image's rows attend among themselves: all or none) */
		kvc_release(&c->kv, r->slot);
		rc = kvc_start(&c->kv, r->slot, r->seq.tokens, sched_seq_span_start(&r->seq, shared) + 1, &shared);
	}
	if (!rc)
		rc = fresh ? sched_seq_skip(&r->seq, shared) : sched_seq_replay_from(&r->seq, shared);
	if (rc)
		kvc_release(&c->kv, r->slot);
	else if (shared && c->met)
		metrics_add(c->met, c->mid.kv_prefix_hits, NULL, shared);
	return rc;
}

/* Resume preempted sequences (oldest first) while the pools have room for
 * their whole length: they replay their recorded chunks. True when some
 * still wait. */
static bool resume_paused(struct coord *c)
{
	for (;;) {
		struct intake_req *best = NULL;
		for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++) {
			struct intake_req *r = req_at(c, i);
			if (r && r->has_slot && r->state == INTAKE_LIVE && r->kv_paused &&
			    (!best || r->admit_seq < best->admit_seq))
				best = r;
		}
		if (!best || !kvc_fits(&c->kv, best->seq.n_tok + 1))
			return best != NULL;
		sched_seq_replay(&best->seq);
		reset_slot(c, best->slot);
		if (kv_start(c, best, false)) {
			fprintf(stderr, "coordinator: request %016llx: resume: %s\n", (unsigned long long)best->id,
				err_msg());
			intake_finish(best, MSG_END_ERROR);
			continue;
		}
		best->kv_paused = false;
		fprintf(stderr, "coordinator: request %016llx: resumed (recomputing %u positions)\n",
			(unsigned long long)best->id, best->seq.n_tok - best->seq.n_fed);
	}
}

/* Admit queued requests into free slots while the KV pools have room for
 * their prompts (admission by memory; the queue waits otherwise). Preempted
 * sequences come back first. */
static void admit(struct coord *c)
{
	if (resume_paused(c))
		return; /* preempted sequences first */
	while (sched_live(&c->sched) < c->sched.max_seqs) {
		uint64_t id;
		if (sched_queue_peek(&c->sched, &id))
			return;
		struct intake_req *r = find_req(c, id);
		if (!r || r->state != INTAKE_QUEUED) {
			sched_queue_pop(&c->sched, &id); /* cancelled while waiting */
			continue;
		}
		if (!kvc_fits(&c->kv, r->n_prompt + r->n_resume + 1))
			return;
		uint32_t slot;
		if (sched_slot_alloc(&c->sched, &slot))
			return;
		sched_queue_pop(&c->sched, &id);
		int rc = sched_seq_init(&r->seq, r->prompt, r->n_prompt, r->resume, r->n_resume, c->kv.unit);
		/* prompt chunks up to a whole step of one sequence (split: every
		 * chunk costs one handoff, on one GPU one context switch, per op) */
		if (!rc)
			rc = sched_seq_set_chunk_max(&r->seq, MSG_MAX_TOKENS / c->kv.unit * c->kv.unit);
		if (rc) {
			fprintf(stderr, "coordinator: %s\n", err_msg());
			sched_slot_free(&c->sched, slot);
			intake_finish(r, MSG_END_ERROR);
			continue;
		}
		r->slot = slot;
		r->has_slot = true;
		r->state = INTAKE_LIVE;
		r->kv_paused = false;
		r->admit_seq = ++c->n_admitted;
		c->t_tok[slot] = 0;
		if (c->met)
			metrics_add(c->met, c->mid.prompt_tokens, NULL, r->n_prompt);
		reset_slot(c, slot);
		if ((rc = kv_start(c, r, true))) {
			fprintf(stderr, "coordinator: request %016llx: %s\n", (unsigned long long)r->id, err_msg());
			intake_finish(r, MSG_END_ERROR);
		}
	}
}

/* Preempt r: drop its KV blocks; it keeps its slot and recorded chunks and
 * is recomputed when memory allows (resume_paused). */
static void preempt(struct coord *c, struct intake_req *r)
{
	kvc_release(&c->kv, r->slot);
	r->kv_paused = true;
	c->kv.st.preemptions++;
	if (c->met)
		metrics_add(c->met, c->mid.kv_preemptions, NULL, 1);
	fprintf(stderr, "coordinator: request %016llx: preempted at %u positions (KV pools full); "
		"it will be recomputed\n", (unsigned long long)r->id, r->seq.n_tok);
}

/* Blocks for r's positions up to end (0: its next chunk's end), preempting
 * the most recently admitted other sequences while the pools are short (r
 * itself when it is the latest). Then the slot's table goes to the
 * activation region if it changed. Returns false when r was preempted. */
static bool kv_ready(struct coord *c, struct intake_req *r, uint32_t end, struct intake_req **live, uint32_t n)
{
	struct sched_chunk ch;
	if (!end && !sched_seq_next(&r->seq, &ch))
		return true;
	if (!end)
		end = ch.pos0 + ch.n;
	int rc;
	while ((rc = kvc_reserve(&c->kv, r->slot, end))) {
		if (rc != ERR_NOMEM) { /* not a shortage: only this request fails */
			fprintf(stderr, "coordinator: request %016llx: %s\n", (unsigned long long)r->id, err_msg());
			intake_finish(r, MSG_END_ERROR);
			r->kv_paused = true; /* out of this round */
			return false;
		}
		struct intake_req *v = r;
		for (uint32_t i = 0; i < n; i++)
			if (!live[i]->kv_paused && live[i]->admit_seq > v->admit_seq)
				v = live[i];
		preempt(c, v);
		if (v == r)
			return false;
	}
	if (c->kv.slot[r->slot].dirty) {
		uint32_t *tab;
		if (attach_kv_table(c->att, r->slot, &tab) ||
		    kvc_table(&c->kv, r->slot, tab, ATTACH_KV_TABLE))
			fprintf(stderr, "coordinator: KV table of slot %u: %s\n", r->slot, err_msg());
	}
	return true;
}

/* logprobs (r->want_lp): record the chosen token's logprob and the lp_n most
 * likely tokens from the head's top-k (descending) and the row's log-sum-exp.
 * They are of the raw model distribution (temperature 1, before penalties,
 * top_k/top_p/min_p): what the model gives, whatever the sampler then did.
 * Rounding can put the top logprob a hair above 0: clamped to 0. */
static int lp_record(struct coord *c, struct intake_req *r, uint32_t token, const uint32_t *ids,
		     const float *logits, uint32_t k, const float *row)
{
	float *lsep;
	int rc = attach_head_lse(c->att, r->slot, &lsep);
	if (rc)
		return rc;
	float lse = *lsep;
	if (!isfinite(lse))
		return err_set(ERR_RANGE, "head: logprobs: log-sum-exp %g is not finite", (double)lse);
	uint32_t at = 0;
	while (at < k && ids[at] != token)
		at++;
	if (at == k && !row)
		return err_set(ERR_RANGE, "head: logprobs: token %u is not among the %u candidates", token, k);
	uint32_t n = r->lp_n > INTAKE_MAX_TOP_LP ? INTAKE_MAX_TOP_LP : r->lp_n;
	if (r->n_lp == r->cap_lp) {
		uint32_t cap = r->cap_lp ? r->cap_lp * 2 : 64;
		float *lp = realloc(r->lp, cap * sizeof *lp);
		if (lp)
			r->lp = lp;
		uint32_t *li = realloc(r->lp_ids, (size_t)cap * (n ? n : 1) * sizeof *li);
		if (li)
			r->lp_ids = li;
		float *lv = realloc(r->lp_vals, (size_t)cap * (n ? n : 1) * sizeof *lv);
		if (lv)
			r->lp_vals = lv;
		if (!lp || !li || !lv)
			return err_set(ERR_NOMEM, "logprobs: out of memory");
		r->cap_lp = cap;
	}
	/* a full-row request may pick a token outside the raw top-k */
	r->lp[r->n_lp] = fminf((at < k ? logits[at] : row[token]) - lse, 0.0f);
	for (uint32_t j = 0; j < n; j++) {
		/* fewer candidates than asked (a head with few finite logits): UINT32_MAX */
		r->lp_ids[(size_t)r->n_lp * n + j] = j < k ? ids[j] : UINT32_MAX;
		r->lp_vals[(size_t)r->n_lp * n + j] = j < k ? fminf(logits[j] - lse, 0.0f) : -INFINITY;
	}
	r->n_lp++;
	return 0;
}

/* The tokens a schema may still use after the one being chosen: within
 * max_tokens and the context (the budget of constrained_mask/_candidates). */
static uint32_t schema_budget(const struct coord *c, const struct intake_req *r)
{
	uint32_t left = r->max_tokens - r->n_gen; /* this token included */
	uint32_t ctx_left = c->n_ctx > r->seq.n_tok ? c->n_ctx - r->seq.n_tok : 1;
	left = left < ctx_left ? left : ctx_left;
	return left ? left - 1 : 0;
}

/* Handle the head output of a chunk that ended at the last token. */
static int take_token(struct coord *c, struct intake_req *r, const struct msg_done *done)
{
	uint32_t token = done->token;
	uint32_t *ids = NULL, k = 0;
	float *logits = NULL;
	if (r->head_gpu && r->mask_none) {
		/* the GPU's mask allowed nothing (its top-k is all -inf) */
		fprintf(stderr, "coordinator: request %016llx: no token fits its schema; ended\n", (unsigned long long)r->id);
		intake_finish(r, MSG_END_LENGTH);
		return 0;
	}
	if (sampler_wants_topk(&r->sp) || r->want_lp) {
		int rc = attach_head(c->att, r->slot, &ids, &logits);
		if (rc)
			return rc;
		k = done->k ? done->k : 1;
		if (k > MSG_MAX_TOPK)
			return err_set(ERR_RANGE, "DONE: k %u", k);
	}
	const float *row = NULL;
	if (intake_req_full_row(r)) {
		/* structured output / logit_bias: candidates from the whole row */
		float *rw;
		int rc = attach_logits(c->att, r->slot, &rw);
		if (rc)
			return rc;
		row = rw;
		uint32_t n_text = tok_n_vocab(c->tok) < c->att->n_vocab ? tok_n_vocab(c->tok) : c->att->n_vocab;
		if (r->want_lp) {
			/* the worker left the head area empty: the raw top-k and
			 * log-sum-exp for logprobs come from the row */
			float *lsep;
			if ((rc = attach_head_lse(c->att, r->slot, &lsep)))
				return rc;
			constrained_raw_head(rw, n_text, k < MSG_MAX_TOPK ? MSG_MAX_TOPK : k, ids, logits, lsep);
			k = MSG_MAX_TOPK;
		}
		uint32_t cid[MSG_MAX_TOPK], kc = 0;
		float cval[MSG_MAX_TOPK];
		if ((rc = constrained_candidates(c->csv, r, rw, n_text, schema_budget(c, r), tok_eot(c->tok), cid,
						 cval, &kc)))
			return rc;
		if (kc == 0) {
			fprintf(stderr, "coordinator: request %016llx: no token fits its schema; ended\n",
				(unsigned long long)r->id);
			intake_finish(r, MSG_END_LENGTH);
			return 0;
		}
		struct sampler_hist hist = { r->seq.tokens, r->seq.n_tok, r->gen, r->n_gen };
		if ((rc = sampler_pick_hist(&r->sp, cid, cval, kc, r->n_gen, &hist, &token)))
			return rc;
	} else if (sampler_wants_topk(&r->sp)) {
		int rc;
		uint32_t id_copy[MSG_MAX_TOPK];
		float lg_copy[MSG_MAX_TOPK];
		/* a masked row's top-k may end in -inf ranks past what the mask allows */
		while (r->head_gpu && k > 1 && !(logits[k - 1] > -INFINITY))
			k--;
		memcpy(id_copy, ids, k * sizeof *ids);
		memcpy(lg_copy, logits, k * sizeof *logits);
		/* penalties look at the whole sequence and the generated tokens */
		struct sampler_hist hist = { r->seq.tokens, r->seq.n_tok, r->gen, r->n_gen };
		if ((rc = sampler_pick_hist(&r->sp, id_copy, lg_copy, k, r->n_gen, &hist, &token)))
			return rc;
	}
	if (token >= tok_n_vocab(c->tok))
		return err_set(ERR_RANGE, "head: token %u out of the vocabulary", token);
	int64_t now = intake_now_ns();
	if (c->met && r->slot < MSG_MAX_SLOTS) {
		/* TTFT from the request's arrival; ITL between tokens of this run
		 * (a resumed request's first token here counts as its first) */
		if (!c->t_tok[r->slot])
			metrics_observe(c->met, c->mid.ttft, NULL, (double)(now - r->t_start) / 1e9);
		else
			metrics_observe(c->met, c->mid.itl, NULL,
					(double)(now - c->t_tok[r->slot]) / 1e9);
		c->t_tok[r->slot] = now;
		metrics_add(c->met, c->mid.tokens, NULL, 1);
	}
	if (!r->t_first)
		r->t_first = now;
	if (chat_is_stop(c->tok, (int32_t)token)) {
		intake_finish(r, MSG_END_STOP);
		return 0;
	}
	char *text = NULL;
	size_t len = 0;
	if (tok_decode_next(c->tok, (int32_t)r->seq.tokens[r->seq.n_tok - 1], (int32_t)token, &text, &len))
		len = 0;
	int rc = intake_add_token(r, token, text ? text : "", len);
	free(text);
	if (!rc && r->want_lp)
		rc = lp_record(c, r, token, ids, logits, k, row);
	if (!rc)
		rc = sched_seq_push(&r->seq, token);
	bool whole = false;
	if (!rc && r->cs)
		rc = constrained_feed(c->csv, r, token, &whole);
	if (rc)
		return rc;
	if (whole) /* the JSON value is complete: nothing may follow it */
		intake_finish(r, MSG_END_STOP);
	else if (r->n_gen >= r->max_tokens)
		intake_finish(r, MSG_END_LENGTH);
	else if (r->seq.n_tok >= c->n_ctx)
		intake_finish(r, MSG_END_CONTEXT);
	return 0;
}

/* A MSG_CHUNK_HEAD_BIAS request's biases and mask into its slot's logits
 * area, as the worker reads them (ipc/msg.h): the count, then (id, bias)
 * pairs, ids ascending and distinct (equal ids summed); with a schema, the
 * tokens it allows next (as take_token's full-row path would: within the
 * tokens left, eos where the value may end). */
static int head_inputs_to_slot(struct coord *c, struct intake_req *r, const struct mask_job *mj)
{
	float *row;
	int rc = attach_logits(c->att, r->slot, &row);
	if (rc)
		return rc;
	uint32_t flag = 0;
	if (r->cs) {
		/* the walk's words (u64, the trie's vocabulary) into the slot's
		 * (u32, the model's; the rest none) */
		if (!mj)
			return err_set(ERR_STATE, "coordinator: request %016llx: no mask for its head row",
				       (unsigned long long)r->id);
		if (mj->got < 0)
			return (int)mj->got;
		r->mask_none = mj->got == 0;
		size_t vw = ((size_t)cs_vocab_size(c->csv) + 63) / 64, sw = ((size_t)c->att->n_vocab + 31) / 32;
		memset(row + MSG_SLOT_MASK, 0, sw * 4);
		memcpy(row + MSG_SLOT_MASK, mj->allowed, vw * 8 < sw * 4 ? vw * 8 : sw * 4);
		flag = 1;
	}
	memcpy(&row[MSG_SLOT_MASK_FLAG], &flag, 4);
	uint32_t n = 0, *w = (uint32_t *)row;
	for (uint32_t i = 0; i < r->n_bias; i++) {
		if (n && w[1 + 2 * (n - 1)] == r->bias_ids[i]) {
			row[2 + 2 * (n - 1)] += r->bias[i];
			continue;
		}
		w[1 + 2 * n] = r->bias_ids[i];
		row[2 + 2 * n] = r->bias[i];
		n++;
	}
	w[0] = n;
	return 0;
}

static uint32_t head_mode(const struct intake_req *r, uint32_t *k)
{
	/* logprobs need the top-k and the log-sum-exp even for greedy; a
	 * full-row request's head area carries the raw top-k for them */
	if (sampler_wants_topk(&r->sp) || r->want_lp || intake_req_full_row(r)) {
		*k = MSG_MAX_TOPK;
		return MSG_HEAD_TOPK;
	}
	/* a greedy request with biases or a mask on the GPU: the top-k kernel
	 * (only it applies them) for its top-1: k 1 ranks no list of 64 */
	if (r->head_gpu) {
		*k = 1;
		return MSG_HEAD_TOPK;
	}
	*k = 1;
	return MSG_HEAD_ARGMAX;
}

/* Split and pipeline heads: one mode for all the rows of a head op. A
 * full-row request (structured output, logit_bias) makes it MSG_HEAD_FULL
 * (every row's logit row into its logits area, the top-k into the head
 * areas: the others sample from those as usual), else top-k when a row
 * samples with it, else argmax (the modes' values rise in that order). */
static void split_head_join(const struct intake_req *r, uint32_t *mode, uint32_t *k)
{
	uint32_t kk = 1, m = head_mode(r, &kk);
	if (intake_req_full_row(r))
		m = MSG_HEAD_FULL;
	if (m > *mode)
		*mode = m;
	if (m != MSG_HEAD_ARGMAX && kk > *k)
		*k = kk;
}

/* True when r's next chunk is one token: it can join a split batch. */
static bool single_token_next(const struct intake_req *r)
{
	struct sched_chunk ch;
	return sched_seq_next(&r->seq, &ch) && ch.n == 1;
}

/* Sample r's token from its slot's head area (a batched step's DONE names
 * only its first head): done with this slot's top-1 and k. */
static int take_from_head(struct coord *c, struct intake_req *r, const struct msg_done *done, uint32_t k)
{
	uint32_t *ids;
	float *logits;
	int rc = attach_head(c->att, r->slot, &ids, &logits);
	if (rc)
		return rc;
	struct msg_done d = *done;
	d.seq_id = r->slot;
	d.token = ids[0];
	d.k = k;
	return take_token(c, r, &d);
}

/* Fused: one planned submission (sched_plan_round) as one RUN_CHUNKS: the
 * chunks of all its sequences through one forward, so the worker reads the
 * weights once for all rows. Only chunks that end at their sequence's last
 * token get a head; one head mode for the submission: top-k if any of them
 * samples with a temperature (its top-1 is the argmax, ties to the lower
 * id). The chunks are recorded with the submission's kernel kind, so a
 * replay (alone) reproduces them exactly. */
/* The images of batch b's chunks, before its RUN_CHUNKS is built: each gets
 * a slot of the gpu worker's image area, encoded first where the slot does
 * not hold the image yet (an IMAGE message). An image the worker could not
 * encode (it answered ERROR: the pixels left RUNDIR/images, 64 newer images
 * having passed the request while it waited, or cannot be read) ends its
 * request alone (MSG_END_IMAGE) and takes its entry out of b: the others of
 * the round run on and give the tokens they would give without it. Its chunk
 * never ran, so no KV it reserved was written or reaches the prefix cache,
 * and the slot is forgotten (encoded again by the next request that names
 * the image). A link failure or a timeout is the worker's, not the image's:
 * returned for recovery. */
static int chunks_images(struct coord *c, struct intake_req **rs, struct sched_batch *b)
{
	static struct msg im;
	bool busy[256] = { false };
	uint32_t kept = 0;
	c->img.tick++;
	for (uint32_t i = 0; i < b->n; i++) {
		struct intake_req *r = rs[b->e[i].seq];
		bool ok = true;
		for (uint32_t k = 0; k < r->n_images && ok; k++) {
			uint32_t p0 = r->img_pos[k], rows = r->img_rows, lo = b->e[i].c.pos0, hi = lo + b->e[i].c.n;
			if (p0 + rows <= lo || p0 >= hi)
				continue;
			uint32_t slot;
			bool encode;
			int rc = images_area_slot(&c->img, r->img_digest[k], busy, &slot, &encode);
			if (rc)
				return rc;
			busy[slot] = true;
			if (!encode)
				continue;
			msg_init(&im, MSG_IMAGE);
			im.u.image = (struct msg_image){ slot, rows, { 0 }, 0 };
			memcpy(im.u.image.digest, r->img_digest[k], MSG_DIGEST);
			struct msg_done done;
			c->img.encodes++;
			if (c->met)
				metrics_add(c->met, c->mid.image_encodes, NULL, 1);
			c->gpu.refused = false; /* a failed send is the link's */
			rc = wl_send(c, &c->gpu, &im);
			if (!rc)
				rc = wl_wait(c, &c->gpu, c->step_timeout_ms, &done);
			if (!rc)
				continue;
			images_area_drop(&c->img, slot);
			busy[slot] = false;
			if (!c->gpu.refused)
				return err_prefix(rc, "image %u of request %016llx", k, (unsigned long long)r->id);
			fprintf(stderr, "coordinator: request %016llx: image %u could not be encoded (%s); "
				"only this request fails\n", (unsigned long long)r->id, k, err_msg());
			intake_finish(r, MSG_END_IMAGE);
			ok = false;
		}
		if (ok)
			b->e[kept++] = b->e[i];
	}
	b->n = kept;
	b->rows = 0;
	for (uint32_t i = 0; i < kept; i++)
		b->rows += b->e[i].c.n;
	return 0;
}

/* The rows of the images in c->m's chunks become area rows (ENGINE_IMAGE_TOKEN
 * | slot * rows + j) of the slots chunks_images gave them. */
static int chunks_image_rows(struct coord *c, struct intake_req **rs, const struct sched_batch *b)
{
	struct msg_run_chunks *m = &c->m.u.run_chunks;
	uint32_t at = 0;
	for (uint32_t i = 0; i < b->n; i++) {
		const struct intake_req *r = rs[b->e[i].seq];
		for (uint32_t k = 0; k < r->n_images; k++) {
			uint32_t p0 = r->img_pos[k], rows = r->img_rows, lo = b->e[i].c.pos0, hi = lo + b->e[i].c.n;
			if (p0 + rows <= lo || p0 >= hi)
				continue;
			uint32_t slot = images_area_find(&c->img, r->img_digest[k]);
			if (slot == UINT32_MAX)
				return err_set(ERR_STATE, "image %u of request %016llx has no slot", k,
					       (unsigned long long)r->id);
			for (uint32_t p = p0 > lo ? p0 : lo; p < p0 + rows && p < hi; p++)
				m->tokens[at + p - lo] = IMAGES_ROW | (slot * rows + (p - p0));
		}
		at += b->e[i].c.n;
	}
	return 0;
}

/* What a batch entry's chunk asks of the head (struct msg_run_chunk head):
 * 0 none (a prompt chunk's inner part, a replay), MSG_CHUNK_HEAD_FULL (the
 * whole logit row), MSG_CHUNK_HEAD_BIAS (biases and a schema mask on the GPU
 * top-k) or 1. */
static uint32_t chunk_head(const struct sched_entry *e, const struct intake_req *r)
{
	if (!e->samples || r->seq.replaying)
		return 0;
	if (intake_req_full_row(r))
		return MSG_CHUNK_HEAD_FULL;
	return r->head_gpu && (r->cs || r->n_bias) ? MSG_CHUNK_HEAD_BIAS : 1;
}

/* The schema masks of a step's MSG_CHUNK_HEAD_BIAS rows with a schema,
 * computed together (constrained_masks: several threads): each the tokens
 * the schema allows next, as take_token's full-row path would (within the
 * tokens left, eos where the value may end). of[i]: entry i's job, or NULL. */
static int step_masks(struct coord *c, struct intake_req **rs, const struct sched_batch *b, struct mask_job *jobs,
		      struct mask_job **of)
{
	static uint64_t *masks;
	static size_t mask_words;
	size_t vw = c->csv ? ((size_t)cs_vocab_size(c->csv) + 63) / 64 : 0;
	uint32_t n = 0;
	for (uint32_t i = 0; i < b->n && i < MSG_MAX_SLOTS; i++) {
		struct intake_req *r = rs[b->e[i].seq];
		of[i] = NULL;
		if (chunk_head(&b->e[i], r) != MSG_CHUNK_HEAD_BIAS || !r->cs)
			continue;
		if (mask_words < vw * MSG_MAX_SLOTS) {
			uint64_t *mm = realloc(masks, vw * MSG_MAX_SLOTS * sizeof *mm);
			if (!mm)
				return err_set(ERR_NOMEM, "coordinator: masks: out of memory");
			masks = mm;
			mask_words = vw * MSG_MAX_SLOTS;
		}
		jobs[n] = (struct mask_job){ r, schema_budget(c, r), tok_eot(c->tok), masks + vw * n, 0 };
		of[i] = &jobs[n++];
	}
	return constrained_masks(c->csv, jobs, n);
}

static int step_chunks(struct coord *c, struct intake_req **rs, struct sched_batch *b)
{
	/* a request an earlier submission of the round ended sits this one out */
	uint32_t kept = 0;
	for (uint32_t i = 0; i < b->n; i++)
		if (rs[b->e[i].seq]->state == INTAKE_LIVE)
			b->e[kept++] = b->e[i];
	b->n = kept;
	int rc = chunks_images(c, rs, b);
	if (rc || !b->n)
		return rc;
	msg_init(&c->m, MSG_RUN_CHUNKS);
	struct msg_run_chunks *m = &c->m.u.run_chunks;
	m->n = b->n;
	m->mode = MSG_HEAD_ARGMAX;
	m->k = 1;
	m->flags = b->wide ? MSG_CHUNKS_WIDE : 0;
	struct mask_job jobs[MSG_MAX_SLOTS], *job_of[MSG_MAX_SLOTS];
	rc = step_masks(c, rs, b, jobs, job_of);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < b->n; i++) {
		const struct sched_entry *e = &b->e[i];
		struct intake_req *r = rs[e->seq];
		uint32_t hv = chunk_head(e, r), k = 1;
		if (hv && head_mode(r, &k) == MSG_HEAD_TOPK) {
			m->mode = MSG_HEAD_TOPK;
			m->k = k > m->k ? k : m->k;
		}
		if (hv == MSG_CHUNK_HEAD_BIAS) {
			int rc = head_inputs_to_slot(c, r, job_of[i]);
			if (rc)
				return rc;
		}
		m->e[i] = (struct msg_run_chunk){ r->slot, r->slot, e->c.pos0, e->c.n, hv };
		memcpy(m->tokens + m->n_tok, r->seq.tokens + e->c.pos0, e->c.n * sizeof m->tokens[0]);
		m->n_tok += e->c.n;
	}
	rc = chunks_image_rows(c, rs, b);
	if (rc)
		return rc;
	struct msg_done done;
	rc = wl_send(c, &c->gpu, &c->m);
	if (!rc)
		rc = wl_wait(c, &c->gpu, c->step_timeout_ms, &done);
	if (rc)
		return rc;
	uint32_t k = done.k ? done.k : 1;
	for (uint32_t i = 0; i < b->n && !rc; i++) {
		struct intake_req *r = rs[b->e[i].seq];
		bool head = m->e[i].head;
		if ((rc = sched_seq_advance(&r->seq, &b->e[i].c)))
			break;
		if (head)
			rc = take_from_head(c, r, &done, k);
	}
	return rc;
}

/* Fused: this round's chunks in at most two RUN_CHUNKS (docs/coordinator.md
 * "Batched rounds"). */
static int step_round(struct coord *c, struct intake_req **rs, uint32_t n)
{
	static struct sched_batch plan[SCHED_MAX_SEQS];
	struct sched_seq *seqs[SCHED_MAX_SEQS];
	/* oldest first: the budget goes to the longest waiting */
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && rs[j - 1]->admit_seq > rs[j]->admit_seq; j--) {
			struct intake_req *t = rs[j];
			rs[j] = rs[j - 1];
			rs[j - 1] = t;
		}
	for (uint32_t i = 0; i < n; i++)
		seqs[i] = &rs[i]->seq;
	struct sched_round_opts o = { c->batch_tokens, c->batch_mm_min, !c->no_batch };
	uint32_t nb, end[SCHED_MAX_SEQS] = { 0 };
	int rc = sched_plan_round(seqs, n, &o, plan, SCHED_MAX_SEQS, &nb);
	/* KV blocks for the planned chunks only, oldest first (preempting the
	 * newest while the pools are short); the preempted leave the plan */
	for (uint32_t b = 0; b < nb; b++)
		for (uint32_t i = 0; i < plan[b].n; i++)
			end[plan[b].e[i].seq] = plan[b].e[i].c.pos0 + plan[b].e[i].c.n;
	for (uint32_t i = 0; i < n; i++)
		if (end[i] && !rs[i]->kv_paused)
			kv_ready(c, rs[i], end[i], rs, n);
	for (uint32_t b = 0; b < nb; b++) {
		uint32_t k = 0;
		for (uint32_t i = 0; i < plan[b].n; i++)
			if (!rs[plan[b].e[i].seq]->kv_paused)
				plan[b].e[k++] = plan[b].e[i];
		plan[b].n = k;
	}
	for (uint32_t i = 0; i < nb && !rc; i++) {
		if (!plan[i].n)
			continue;
		rc = step_chunks(c, rs, &plan[i]);
		heartbeat(c);
	}
	return rc;
}

static int send_op(struct coord *c, struct wlink *w, const struct sched_op *op,
		   struct intake_req *r, const struct sched_chunk *ch)
{
	switch (op->kind) {
	case SCHED_OP_EMBED:
		msg_init(&c->m, MSG_EMBED);
		c->m.u.embed.seq_id = r->slot;
		c->m.u.embed.slot = r->slot;
		c->m.u.embed.n = ch->n;
		memcpy(c->m.u.embed.tokens, r->seq.tokens + ch->pos0, ch->n * sizeof(uint32_t));
		break;
	case SCHED_OP_ATTN:
	case SCHED_OP_FFN:
		msg_init(&c->m, MSG_STAGE);
		c->m.u.stage.seq_id = r->slot;
		c->m.u.stage.slot = r->slot;
		c->m.u.stage.stage = op->kind == SCHED_OP_ATTN ? MSG_STAGE_ATTN : MSG_STAGE_FFN;
		c->m.u.stage.layer = op->layer;
		c->m.u.stage.n_layers = 1;
		c->m.u.stage.n = ch->n;
		c->m.u.stage.pos0 = ch->pos0;
		break;
	case SCHED_OP_HEAD:
		msg_init(&c->m, MSG_HEAD);
		c->m.u.head.seq_id = r->slot;
		c->m.u.head.slot = r->slot;
		c->m.u.head.n = ch->n;
		c->m.u.head.mode = MSG_HEAD_ARGMAX;
		c->m.u.head.k = 1;
		split_head_join(r, &c->m.u.head.mode, &c->m.u.head.k);
		break;
	default:
		return 0;
	}
	return wl_send(c, w, &c->m);
}

/* Split: one chunk each for one or two sequences, pipelined. */
static int step_split(struct coord *c, struct intake_req **rs, uint32_t n)
{
	struct sched_chunk ch[2];
	bool head[2] = { false, false };
	for (uint32_t i = 0; i < n; i++) {
		if (!sched_seq_next(&rs[i]->seq, &ch[i]))
			return err_set(ERR_STATE, "nothing to feed");
		head[i] = sched_seq_chunk_samples(&rs[i]->seq, &ch[i]);
	}
	static struct sched_round plan[SCHED_MAX_ROUNDS];
	uint32_t n_rounds;
	int rc = sched_split_plan(c->n_layer, n, head, plan, SCHED_MAX_ROUNDS, &n_rounds);
	if (rc)
		return rc;
	struct msg_done done[2], d;
	for (uint32_t k = 0; k < n_rounds; k++) {
		const struct sched_round *rd = &plan[k];
		bool g = rd->gpu.kind != SCHED_OP_NONE, p = rd->npu.kind != SCHED_OP_NONE;
		if (g && (rc = send_op(c, &c->gpu, &rd->gpu, rs[rd->gpu.who], &ch[rd->gpu.who])))
			return rc;
		if (p && (rc = send_op(c, &c->npu, &rd->npu, rs[rd->npu.who], &ch[rd->npu.who])))
			return rc;
		if (g && p)
			c->n_pipelined++;
		if (g) {
			if ((rc = wl_wait(c, &c->gpu, c->step_timeout_ms, &d)))
				return rc;
			if (rd->gpu.kind == SCHED_OP_HEAD)
				done[rd->gpu.who] = d;
		}
		if (p && (rc = wl_wait(c, &c->npu, c->step_timeout_ms, &d)))
			return rc;
	}
	for (uint32_t i = 0; i < n; i++) {
		if ((rc = sched_seq_advance(&rs[i]->seq, &ch[i])))
			return rc;
		if (head[i] && !rs[i]->seq.replaying && (rc = take_token(c, rs[i], &done[i])))
			return rc;
	}
	return 0;
}

/* Split continuous batching (docs/coordinator.md "Split pipelining"): the
 * next token of each of the sequences as two micro-batches. Rows are
 * computed as lone tokens, so recording chunks per sequence (and replaying
 * them alone) stays bit-identical, as for RUN_BATCH. */
struct split_mb {
	uint32_t first, count;   /* its sequences: rs[first, first + count) */
	uint32_t mode, k;        /* its head */
	bool head;               /* some entry samples: the head runs */
	bool wide;               /* its rows run on the mat-mat kernels (wide chunks) */
	uint32_t next, n_ops;    /* ops: EMBED, (ATTN l, FFN l) per layer, HEAD */
};

/* Micro-batches of the dataflow (--micro-batches, UNICORN_SPLIT_MBS,
 * 1..SPLIT_MAX_MBS; 1 only with flows). Two let one's attention run beside
 * the other's FFN on two accelerators; more hide the handoffs (a worker finds
 * its next stage queued), but each op costs ~0.2-0.4 ms whatever its size,
 * and on one H100 four micro-batches gave 0.43-0.73x the tok/s of two
 * (BENCHMARKS.md): two is the default. When both workers share one GPU its
 * two contexts take turns, so there is nothing to overlap and one
 * micro-batch (half the ops) was 9-25% faster: unicorn-up passes 1 then.
 * Rounds always use two. */
#define SPLIT_MAX_MBS 8
#define SPLIT_MBS_DEFAULT 2
/* Pipeline placement chains each micro-batch's decode steps (coordinator/
 * stages.h): at most this many, and no new chained step after this long,
 * before the main loop's next round (admissions, timeouts, prompt chunks) */
#define PIPE_CHAIN_STEPS 64
#define PIPE_CHAIN_NS 500000000ll

struct split_batch {
	struct coord *c;                /* pipeline chains: the callbacks' coordinator */
	struct intake_req **rs;
	uint32_t n;
	struct sched_chunk ch[SCHED_MAX_SEQS];
	bool samples[SCHED_MAX_SEQS];
	uint8_t mb_of[SCHED_MAX_SEQS];  /* the micro-batch of each sequence */
	struct split_mb mb[SPLIT_MAX_MBS];
	uint32_t n_mb;
};

/* Whether the coordinator drives split steps as FLOWs (the default with the
 * data plane); only they run wide micro-batches. */
static bool split_flows(const struct coord *c)
{
	return c->dp_on && !c->split_via_coord;
}

/* r's next chunk is a single token recorded wide (a replay): it must run
 * on the mat-mat kernels again, so it goes through the batched path even
 * alone. */
static bool replays_wide_token(const struct intake_req *r)
{
	struct sched_chunk ch;
	return r->seq.replaying && sched_seq_next(&r->seq, &ch) && ch.n == 1 && (ch.flags & SCHED_CHUNK_WIDE);
}

/* n sequences as micro-batches. Kinds first: a replayed chunk keeps the
 * kind it was recorded with; a new one runs wide (the mat-mat kernels: the
 * weights read once per micro-batch instead of once per token column) when
 * FLOWs run and each micro-batch would hold at least split_mm_min
 * decoders (a mat-mat tile of fewer rows computes mostly padding), else as
 * a lone token would. Wide sequences go first (rs is reordered); mixed
 * kinds make two micro-batches, one per kind, else n_mb of near-equal size
 * (some may be empty when n < n_mb). */
static int split_batch_init(struct coord *c, struct split_batch *sb, struct intake_req **rs, uint32_t n,
			    uint32_t n_mb)
{
	bool new_wide = split_flows(c) && !c->no_batch && c->split_mm_min &&
			n >= (uint64_t)c->split_mm_min * (n_mb ? n_mb : 1);
	struct intake_req *narrow[SCHED_MAX_SEQS];
	struct sched_chunk nch[SCHED_MAX_SEQS];
	uint32_t nw = 0, nn = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct intake_req *r = rs[i];
		struct sched_chunk ch;
		if (!sched_seq_next(&r->seq, &ch) || ch.n != 1)
			return err_set(ERR_STATE, "request %016llx: no single-token chunk to batch",
				       (unsigned long long)r->id);
		if (!r->seq.replaying)
			ch.flags = new_wide ? SCHED_CHUNK_WIDE : 0;
		if ((ch.flags & SCHED_CHUNK_WIDE) && !split_flows(c))
			return err_set(ERR_STATE, "request %016llx: a wide chunk to replay without FLOWs",
				       (unsigned long long)r->id);
		if (ch.flags & SCHED_CHUNK_WIDE) {
			rs[nw] = r;
			sb->ch[nw++] = ch;
		} else {
			narrow[nn] = r;
			nch[nn++] = ch;
		}
	}
	for (uint32_t i = 0; i < nn; i++) {
		rs[nw + i] = narrow[i];
		sb->ch[nw + i] = nch[i];
	}
	sb->rs = rs;
	sb->n = n;
	bool mixed = nw && nn;
	sb->n_mb = mixed ? 2 : n_mb;
	for (uint32_t w = 0, first = 0; w < sb->n_mb; w++) {
		uint32_t count = mixed ? (w == 0 ? nw : nn) : n / n_mb + (w < n % n_mb ? 1 : 0);
		sb->mb[w] = (struct split_mb){ first, count, MSG_HEAD_ARGMAX, 1, false, mixed ? w == 0 : nw > 0, 0, 0 };
		for (uint32_t i = first; i < first + count; i++)
			sb->mb_of[i] = (uint8_t)w;
		first += count;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct intake_req *r = rs[i];
		sb->samples[i] = sched_seq_chunk_samples(&r->seq, &sb->ch[i]);
		struct split_mb *mb = &sb->mb[sb->mb_of[i]];
		mb->head = mb->head || sb->samples[i];
		if (sb->samples[i])
			split_head_join(r, &mb->mode, &mb->k);
	}
	for (uint32_t w = 0; w < sb->n_mb; w++)
		sb->mb[w].n_ops = 1 + 2 * c->n_layer + (sb->mb[w].head ? 1 : 0);
	return 0;
}

/* The STAGE_BATCH of micro-batch w's op (kind, layer) into c->m. */
static void split_batch_msg(struct coord *c, const struct split_batch *sb, uint32_t w, int kind, uint32_t layer)
{
	const struct split_mb *mb = &sb->mb[w];
	msg_init(&c->m, MSG_STAGE_BATCH);
	struct msg_stage_batch *b = &c->m.u.stage_batch;
	b->op = kind == SCHED_OP_EMBED ? MSG_OP_EMBED : kind == SCHED_OP_ATTN ? MSG_OP_ATTN :
		kind == SCHED_OP_FFN ? MSG_OP_FFN : MSG_OP_HEAD;
	b->layer = b->op == MSG_OP_ATTN || b->op == MSG_OP_FFN ? layer : 0;
	b->n = mb->count;
	b->mode = b->op == MSG_OP_HEAD ? mb->mode : MSG_HEAD_ARGMAX;
	b->k = b->op == MSG_OP_HEAD ? mb->k : 1;
	for (uint32_t i = 0; i < mb->count; i++) {
		struct intake_req *q = sb->rs[mb->first + i];
		uint32_t p = sb->ch[mb->first + i].pos0;
		b->e[i] = (struct msg_run_batch_entry){ q->slot, q->slot, p, q->seq.tokens[p] };
	}
}

/* Every sequence's chunk is done: advance, and sample from the head areas. */
static int split_batch_finish(struct coord *c, struct split_batch *sb, const struct msg_done *d)
{
	int rc = 0;
	for (uint32_t i = 0; i < sb->n && !rc; i++) {
		struct intake_req *r = sb->rs[i];
		if ((rc = sched_seq_advance(&r->seq, &sb->ch[i])))
			break;
		if (sb->samples[i] && !r->seq.replaying)
			rc = take_from_head(c, r, d, sb->mb[sb->mb_of[i]].k);
	}
	return rc;
}

/* Without the data plane: rounds of at most one op per worker
 * (sched_split_plan), the attention of one micro-batch beside the FFN of
 * the other, both answers awaited before the next round. */
static int step_split_rounds(struct coord *c, struct split_batch *sb)
{
	bool head[2] = { sb->mb[0].head, sb->mb[1].head };
	static struct sched_round plan[SCHED_MAX_ROUNDS];
	uint32_t n_rounds;
	int rc = sched_split_plan(c->n_layer, 2, head, plan, SCHED_MAX_ROUNDS, &n_rounds);
	if (rc)
		return rc;
	struct msg_done d = { 0 };
	for (uint32_t r = 0; r < n_rounds; r++) {
		const struct sched_op *ops[2] = { &plan[r].gpu, &plan[r].npu };
		struct wlink *lk[2] = { &c->gpu, &c->npu };
		for (int j = 0; j < 2; j++) {
			if (ops[j]->kind == SCHED_OP_NONE)
				continue;
			split_batch_msg(c, sb, ops[j]->who, ops[j]->kind, ops[j]->layer);
			if ((rc = wl_send(c, lk[j], &c->m)))
				return rc;
		}
		if (ops[0]->kind != SCHED_OP_NONE && ops[1]->kind != SCHED_OP_NONE)
			c->n_pipelined++;
		for (int j = 0; j < 2; j++)
			if (ops[j]->kind != SCHED_OP_NONE && (rc = wl_wait(c, lk[j], c->step_timeout_ms, &d)))
				return rc;
	}
	return split_batch_finish(c, sb, &d);
}

/* Op i of a micro-batch: EMBED, then ATTN/FFN of each layer, then HEAD. */
static int split_op(uint32_t i, uint32_t n_layer, uint32_t *layer)
{
	*layer = 0;
	if (i == 0)
		return SCHED_OP_EMBED;
	if (i > 2 * n_layer)
		return SCHED_OP_HEAD;
	*layer = (i - 1) / 2;
	return (i - 1) % 2 == 0 ? SCHED_OP_ATTN : SCHED_OP_FFN;
}

struct flow_link {
	/* messages in its request ring, oldest first: at most one per micro-batch */
	uint32_t mb[SPLIT_MAX_MBS], seq[SPLIT_MAX_MBS];
	int64_t sent[SPLIT_MAX_MBS];
	uint32_t head, len;
	int64_t last_done;       /* when its previous message was answered */
};

/* Post micro-batch w's next op to its worker's request ring. */
static int flow_post(struct coord *c, struct split_batch *sb, struct flow_link *fl, struct wlink **lk, uint32_t w)
{
	uint32_t layer;
	int kind = split_op(sb->mb[w].next, c->n_layer, &layer);
	int j = kind == SCHED_OP_ATTN ? 1 : 0;
	split_batch_msg(c, sb, w, kind, layer);
	int rc = dp_post(c, lk[j], &c->m);
	if (rc)
		return err_prefix(rc, "%s worker", lk[j]->name);
	struct flow_link *f = &fl[j];
	uint32_t at = (f->head + f->len++) % SPLIT_MAX_MBS;
	f->mb[at] = w;
	f->seq[at] = c->m.seq;
	f->sent[at] = intake_now_ns();
	if (fl[!j].len)
		c->n_pipelined++; /* the other worker has work too: they overlap */
	sb->mb[w].next++;
	return 0;
}

/* With the data plane: dataflow. Each micro-batch's next op is posted to
 * its worker's ring the moment its previous op is answered, whether that
 * worker is busy or not (it queues), so neither micro-batch waits for the
 * other's op: the workers run back to back, and the coordinator's part per
 * op is a ring write and a ring read (microseconds). */
static int step_split_flow(struct coord *c, struct split_batch *sb)
{
	struct wlink *lk[2] = { &c->gpu, &c->npu };
	struct flow_link fl[2];
	memset(fl, 0, sizeof fl);
	struct msg_done d = { 0 };
	int64_t now = intake_now_ns();
	fl[0].last_done = fl[1].last_done = now;
	uint32_t finished = 0;
	for (uint32_t w = 0; w < sb->n_mb; w++) {
		if (!sb->mb[w].count)
			finished++;
	}
	int rc = 0;
	for (uint32_t w = 0; w < sb->n_mb; w++)
		if (sb->mb[w].count && (rc = flow_post(c, sb, fl, lk, w)))
			return rc;
	int64_t last_progress = intake_now_ns();
	while (finished < sb->n_mb) {
		uint32_t seen = ring_bell_seq(c->dp.coord_bell);
		bool progressed = false;
		for (int j = 0; j < 2; j++) {
			struct flow_link *f = &fl[j];
			while (f->len && (rc = dp_recv(&c->dp.link[lk[j]->dl].done, &c->d)) != ERR_AGAIN) {
				if (rc)
					return err_prefix(rc, "%s worker", lk[j]->name);
				uint32_t want = f->seq[f->head];
				if (c->d.type == MSG_ERROR && c->d.u.error.ref_seq == want)
					return err_set(c->d.u.error.code < 0 ? c->d.u.error.code : ERR_INVAL,
						       "%s worker: %s", lk[j]->name, c->d.u.error.text);
				if (c->d.type != MSG_DONE || c->d.u.done.ref_seq != want)
					continue; /* an answer to a message given up on */
				if (c->d.u.done.status < 0)
					return err_set(c->d.u.done.status, "%s worker: step failed (%s)",
						       lk[j]->name, err_name(c->d.u.done.status));
				int64_t t = intake_now_ns(), sent = f->sent[f->head];
				c->op_ema_ns = c->op_ema_ns ? (7 * c->op_ema_ns + (t - sent)) / 8 : t - sent;
				obs_step(c, lk[j], sent > f->last_done ? sent : f->last_done, c->d.u.done.gpu_ns,
					 c->d.u.done.wall_us);
				f->last_done = t;
				uint32_t w = f->mb[f->head];
				f->head = (f->head + 1) % SPLIT_MAX_MBS;
				f->len--;
				d = c->d.u.done;
				progressed = true;
				if (sb->mb[w].next == sb->mb[w].n_ops)
					finished++;
				else if ((rc = flow_post(c, sb, fl, lk, w)))
					return rc;
			}
		}
		heartbeat(c);
		if (progressed) {
			last_progress = intake_now_ns();
			continue;
		}
		if (intake_now_ns() - last_progress > (int64_t)c->step_timeout_ms * 1000000)
			return err_set(ERR_TIMEOUT, "split: no DONE within %d ms", c->step_timeout_ms);
		if (c->spin_us && c->op_ema_ns < (int64_t)c->spin_us * 1000 &&
		    ring_bell_spin(c->dp.coord_bell, seen, c->spin_us))
			continue;
		rc = ring_bell_wait(c->dp.coord_bell, seen, 50, 0);
		for (int j = 0; j < 2; j++)
			if (fl[j].len && kill((pid_t)lk[j]->pid, 0) < 0 && errno == ESRCH)
				return err_set(ERR_IO, "%s worker: process %u is gone", lk[j]->name, lk[j]->pid);
	}
	return split_batch_finish(c, sb, &d);
}

/* A FLOW's per-op times as trace spans: op 0 EMBED, then ATTN l and FFN l
 * per layer, then HEAD. */
static void trace_flow(struct coord *c, const struct msg_flow *f)
{
	if (c->pipeline) {
		coord_stages_trace(c->tr, &c->stages, f);
		return;
	}
	for (uint32_t i = 0; c->tr && i < f->n_ops; i++) {
		bool head = i == 2 * f->n_layer + 1, attn = i > 0 && !head && i % 2 == 1;
		struct trace_span sp = {
			.t_start_ns = (int64_t)f->t_origin_ns + (int64_t)f->op_us[2 * i] * 1000,
			.msg_type = i == 0 ? MSG_EMBED : head ? MSG_HEAD : MSG_STAGE,
			.worker = (uint8_t)(attn ? c->npu.idx : c->gpu.idx),
			.stage = (uint8_t)(i == 0 || head ? 0 : attn ? MSG_STAGE_ATTN : MSG_STAGE_FFN),
			.layer = (uint16_t)(i == 0 || head ? 0 : (i - 1) / 2),
			.slot = (uint16_t)f->e[0].slot,
			.n = f->flags & MSG_FLOW_CHUNK ? f->n_tok : f->n,
			.pos0 = f->e[0].pos,
		};
		sp.t_end_ns = sp.t_start_ns + (int64_t)f->op_us[2 * i + 1] * 1000;
		sp.work_ns = sp.t_end_ns - sp.t_start_ns;
		trace_record(c->tr, &sp);
	}
}

/* A FLOW came back: each side's device and wall time, and every handoff
 * (hop i was taken by the gpu worker when i is even: EMBED, then FFN l;
 * by the attention worker when odd). */
static void obs_flow(struct coord *c, const struct msg_flow *f)
{
	int64_t hop_ns[2] = { 0, 0 };
	for (uint32_t i = 0; i < f->n_hops; i++) {
		struct wlink *w = i % 2 ? &c->npu : &c->gpu;
		hop_ns[i % 2] += (int64_t)f->hop_us[i] * 1000;
		if (c->met)
			metrics_observe(c->met, c->mid.handoff, w->name, f->hop_us[i] / 1e6);
	}
	uint64_t t = intake_now_ns();
	if (c->met && t > f->t_post_ns)
		metrics_observe(c->met, c->mid.handoff, c->gpu.name, (double)(t - f->t_post_ns) / 1e9);
	for (int side = 0; side < 2; side++) {
		struct wlink *w = side == MSG_FLOW_ATTN ? &c->npu : &c->gpu;
		int64_t wall = (int64_t)f->wall_us[side] * 1000;
		uint32_t ops = side == MSG_FLOW_ATTN ? f->n_layer : 1 + f->n_layer + (f->flags & MSG_FLOW_HEAD ? 1 : 0);
		if (c->pipeline) { /* stage 0 reports as the FFN side, stage 1 as the attention side */
			uint32_t so[2];
			coord_stages_ops(&c->stages, f->n_layer, f->flags & MSG_FLOW_HEAD, so);
			ops = so[side == MSG_FLOW_ATTN ? 1 : 0];
		}
		w->busy_ns += wall + hop_ns[side == MSG_FLOW_ATTN ? 1 : 0];
		w->work_ns += (int64_t)f->gpu_ns[side];
		w->wall_ns += wall;
		w->steps += ops;
		if (c->met) {
			metrics_add(c->met, c->mid.worker_steps, w->name, ops);
			metrics_add(c->met, c->mid.worker_busy, w->name, f->gpu_ns[side] / 1e9);
			metrics_add(c->met, c->mid.link_busy, w->name, wall / 1e9);
		}
	}
}

/* Post a FLOW (c->m, its fields set but epoch, origin_seq and t_post_ns) to
 * the gpu worker's request ring; its origin seq in *seq. */
static int flow_post_gpu(struct coord *c, uint32_t *seq)
{
	struct msg_flow *f = &c->m.u.flow;
	f->epoch = dp_epoch(&c->dp);
	*seq = f->origin_seq = c->m.seq = dp_next_seq(c);
	f->t_origin_ns = f->t_post_ns = (uint64_t)intake_now_ns();
	/* the trace's per-layer spans: each op's times, when they fit a ring
	 * entry with the FLOW's other parts at their largest */
	size_t most = MSG_HDR_SIZE + MSG_SIZE_FLOW_BASE + 12 * (2 * (size_t)f->n_layer + 2) +
		      MSG_SIZE_RUN_BATCH_ENTRY * (size_t)f->n + 4 * (size_t)f->n_tok;
	if (c->tr && most <= DP_ENTRY_SIZE - 4)
		f->flags |= MSG_FLOW_TIMES;
	int rc = dp_send(&c->dp.link[c->gpu.dl].req, &c->m);
	if (rc)
		return err_prefix(rc == ERR_AGAIN ? err_set(ERR_IO, "request ring full") : rc, "gpu worker");
	return 0;
}

/* Sleep until every FLOW posted as seq[i] (0: none) came back (which !=
 * NULL: until one did, *which = its i; the others' ENDs stay in the rings);
 * its END in ends[i] (ends may be NULL). A failed op, a worker process that
 * is gone (checked every 50 ms) or no progress within the step timeout end
 * the wait with an error. */
static int flow_wait(struct coord *c, uint32_t *seq, uint32_t n, struct msg_flow *ends, uint32_t *which)
{
	struct wlink *lk[2] = { &c->gpu, &c->npu };
	uint32_t left = 0;
	for (uint32_t i = 0; i < n; i++)
		left += seq[i] != 0;
	int64_t last_progress = intake_now_ns();
	while (left) {
		uint32_t seen = ring_bell_seq(c->dp.coord_bell);
		bool progressed = false;
		for (int j = 0; j < 2; j++) {
			int rc;
			while ((rc = dp_recv(&c->dp.link[lk[j]->dl].done, &c->d)) != ERR_AGAIN) {
				if (rc)
					return err_prefix(rc, "%s worker", lk[j]->name);
				if (c->d.type != MSG_FLOW || c->d.u.flow.op != MSG_OP_END)
					continue; /* an answer to a message given up on */
				const struct msg_flow *f = &c->d.u.flow;
				uint32_t i = 0;
				while (i < n && !(seq[i] && seq[i] == f->origin_seq))
					i++;
				if (i == n)
					continue; /* a step from before a recovery */
				if (f->status < 0)
					return err_set(f->status, "%s worker: a stage of the step failed (%s)", lk[j]->name,
						       err_name(f->status));
				obs_flow(c, f);
				trace_flow(c, f);
				if (ends)
					ends[i] = *f;
				seq[i] = 0;
				left--;
				progressed = true;
				if (which) {
					*which = i;
					return 0;
				}
			}
		}
		heartbeat(c);
		if (progressed) {
			last_progress = intake_now_ns();
			continue;
		}
		if (intake_now_ns() - last_progress > (int64_t)c->step_timeout_ms * 1000000)
			return err_set(ERR_TIMEOUT, "split: no step back within %d ms", c->step_timeout_ms);
		ring_bell_wait(c->dp.coord_bell, seen, 50, 0);
		for (int j = 0; j < 2; j++)
			if (kill((pid_t)lk[j]->pid, 0) < 0 && errno == ESRCH)
				return err_set(ERR_IO, "%s worker: process %u is gone", lk[j]->name, lk[j]->pid);
	}
	return 0;
}

/* With the data plane (the default): each micro-batch's whole step is one
 * FLOW posted to the gpu worker, which embeds and hands the FLOW to the
 * attention worker, which hands it back for the FFN, and so on through the
 * layers and the head, worker to worker through their peer rings
 * (docs/protocol.md "Flows"): the coordinator is on no per-layer path; it
 * posts the micro-batches and sleeps until each comes back. */
/* Post micro-batch w's step as one FLOW to the gpu worker; its origin seq in *seq. */
static int flow_post_mb(struct coord *c, struct split_batch *sb, uint32_t w, uint32_t *seq)
{
	const struct split_mb *mb = &sb->mb[w];
	msg_init(&c->m, MSG_FLOW);
	struct msg_flow *f = &c->m.u.flow;
	f->op = MSG_OP_EMBED;
	f->n_layer = c->n_layer;
	f->flags = (mb->head ? MSG_FLOW_HEAD : 0) | (mb->wide ? MSG_FLOW_WIDE : 0);
	f->mode = mb->head ? mb->mode : MSG_HEAD_ARGMAX;
	f->k = mb->head ? mb->k : 1;
	f->n = mb->count;
	for (uint32_t i = 0; i < mb->count; i++) {
		struct intake_req *q = sb->rs[mb->first + i];
		uint32_t p = sb->ch[mb->first + i].pos0;
		f->e[i] = (struct msg_run_batch_entry){ q->slot, q->slot, p, q->seq.tokens[p] };
	}
	if (mb->wide)
	c->n_wide_mb++;
	return flow_post_gpu(c, seq);
}

/* Pipeline placement: micro-batch w's step came back. Its sequences
 * advance and sample; those that can decode on at once (live, a one-token
 * chunk of the micro-batch's kind next, its KV blocks at hand without
 * preempting anyone) stay in it, the others sit out until the next round.
 * *more: some stayed. */
static int pipe_finish(void *ctx, uint32_t w, bool *more)
{
	struct split_batch *sb = ctx;
	struct coord *c = sb->c;
	struct split_mb *mb = &sb->mb[w];
	struct msg_done d = { 0 };
	*more = false;
	int rc = 0;
	uint32_t kept = 0;
	for (uint32_t i = mb->first; i < mb->first + mb->count && !rc; i++) {
		struct intake_req *r = sb->rs[i];
		if ((rc = sched_seq_advance(&r->seq, &sb->ch[i])))
			break;
		if (sb->samples[i] && !r->seq.replaying && r->state == INTAKE_LIVE)
			rc = take_from_head(c, r, &d, mb->k);
		struct sched_chunk ch;
		if (rc || r->state != INTAKE_LIVE || !r->has_slot || r->kv_paused || r->seq.replaying ||
		    !sched_seq_next(&r->seq, &ch) || ch.n != 1 || kvc_reserve(&c->kv, r->slot, ch.pos0 + 1))
			continue;
		if (c->kv.slot[r->slot].dirty) {
			uint32_t *tab;
			if (attach_kv_table(c->att, r->slot, &tab) || kvc_table(&c->kv, r->slot, tab, ATTACH_KV_TABLE))
				continue;
		}
		ch.flags = mb->wide ? SCHED_CHUNK_WIDE : 0;
		uint32_t at = mb->first + kept++;
		sb->rs[at] = r;
		sb->ch[at] = ch;
		sb->samples[at] = sched_seq_chunk_samples(&r->seq, &ch);
	}
	if (rc)
		return rc;
	mb->count = kept;
	mb->head = false;
	mb->mode = MSG_HEAD_ARGMAX;
	mb->k = 1;
	for (uint32_t i = mb->first; i < mb->first + kept; i++) {
		mb->head = mb->head || sb->samples[i];
		if (sb->samples[i])
			split_head_join(sb->rs[i], &mb->mode, &mb->k);
	}
	*more = kept > 0 && c->sched.q_len == 0; /* a waiting request gets its slot at the next round */
	return 0;
}

static int pipe_post(void *ctx, uint32_t w, uint32_t *seq)
{
	struct split_batch *sb = ctx;
	sb->c->n_chained++;
	return flow_post_mb(sb->c, sb, w, seq);
}

static int pipe_wait(void *ctx, uint32_t *seq, uint32_t n, uint32_t *which)
{
	struct split_batch *sb = ctx;
	return flow_wait(sb->c, seq, n, NULL, which);
}

/* between two chained steps: the clients get their tokens, the watchdog a beat */
static void pipe_between(void *ctx)
{
	struct split_batch *sb = ctx;
	intake_serve(sb->c->in, 0);
	heartbeat(sb->c);
}

static int step_split_pass(struct coord *c, struct split_batch *sb)
{
	uint32_t seq[SPLIT_MAX_MBS] = { 0 };
	if (c->pipeline && !c->no_chain) {
		static const struct stages_chain_ops ops = { pipe_post, pipe_wait, pipe_finish, pipe_between };
		bool active[SPLIT_MAX_MBS];
		for (uint32_t w = 0; w < sb->n_mb; w++)
			active[w] = sb->mb[w].count > 0;
		for (uint32_t i = 0; i < sb->n; i++) /* a replayed step is never chained: it runs as recorded */
			if (sb->rs[i]->seq.replaying)
				for (uint32_t w = 0; w < sb->n_mb; w++)
					active[w] = active[w] && w != sb->mb_of[i];
		bool all = true;
		for (uint32_t w = 0; w < sb->n_mb; w++)
			all = all && (active[w] || !sb->mb[w].count);
		if (all) {
			sb->c = c;
			return coord_stages_chain(&ops, sb, sb->n_mb, active, PIPE_CHAIN_STEPS, PIPE_CHAIN_NS);
		}
	}
	for (uint32_t w = 0; w < sb->n_mb; w++) {
		if (!sb->mb[w].count)
			continue;
		int rc = flow_post_mb(c, sb, w, &seq[w]);
		if (rc)
			return rc;
		if (w > 0)
			c->n_pipelined++;
	}
	int rc = flow_wait(c, seq, sb->n_mb, NULL, NULL);
	if (rc)
		return rc;
	/* every sampled token comes from its slot's head area (take_from_head
	 * fills in token and k), so the template answer carries nothing */
	struct msg_done d = { 0 };
	return split_batch_finish(c, sb, &d);
}

/* Prompt chunks (and lone decoders) with the data plane: chunk FLOWs of up
 * to MSG_FLOW_CHUNK_SEQS sequences and dp_flow_chunk_tokens tokens each, up to
 * SPLIT_MAX_MBS of them posted at once, so one FLOW's attention runs beside
 * another's FFN with no coordinator between the layers, and each worker runs
 * a FLOW's chunks back to back: one handoff (on one GPU, one switch between
 * the workers' contexts) per op for all of them instead of one per sequence.
 * Each chunk runs as it would alone, so replays stay exact. *used: how many
 * of rs[0..n) this took (the caller posts the rest next). */
static int step_split_chunks(struct coord *c, struct intake_req **rs, uint32_t n, uint32_t *used)
{
	uint32_t seq[SPLIT_MAX_MBS] = { 0 }, n_flow = 0, i = 0;
	static struct sched_chunk ch[SPLIT_MAX_MBS * MSG_FLOW_CHUNK_SEQS];
	static bool head[SPLIT_MAX_MBS * MSG_FLOW_CHUNK_SEQS];
	static uint8_t flow_of[SPLIT_MAX_MBS * MSG_FLOW_CHUNK_SEQS];
	uint32_t k_flow[SPLIT_MAX_MBS];
	while (i < n && n_flow < SPLIT_MAX_MBS) {
		msg_init(&c->m, MSG_FLOW);
		struct msg_flow *f = &c->m.u.flow;
		f->op = MSG_OP_EMBED;
		f->n_layer = c->n_layer;
		f->flags = MSG_FLOW_CHUNK;
		f->mode = MSG_HEAD_ARGMAX;
		f->k = 1;
		f->n = 0;
		f->n_tok = 0;
		for (; i < n && f->n < MSG_FLOW_CHUNK_SEQS; i++) {
			struct intake_req *r = rs[i];
			if (!sched_seq_next(&r->seq, &ch[i]))
				return err_set(ERR_STATE, "nothing to feed");
			if (ch[i].n > dp_flow_chunk_tokens(c->n_layer) - f->n_tok)
				break; /* the next FLOW takes it */
			head[i] = sched_seq_chunk_samples(&r->seq, &ch[i]);
			flow_of[i] = (uint8_t)n_flow;
			if (head[i]) {
				f->flags |= MSG_FLOW_HEAD;
				split_head_join(r, &f->mode, &f->k);
			}
			f->e[f->n++] = (struct msg_run_batch_entry){ r->slot, r->slot, ch[i].pos0,
								     ch[i].n | (head[i] ? MSG_CHUNK_HEAD : 0) };
			memcpy(f->tokens + f->n_tok, r->seq.tokens + ch[i].pos0, ch[i].n * sizeof *f->tokens);
			f->n_tok += ch[i].n;
		}
		k_flow[n_flow] = f->k;
		c->n_chunk_flows++;
		c->n_chunk_seqs += f->n;
		int rc = flow_post_gpu(c, &seq[n_flow]);
		if (rc)
			return rc;
		if (n_flow > 0)
			c->n_pipelined++;
		n_flow++;
	}
	*used = i;
	int rc = flow_wait(c, seq, n_flow, NULL, NULL);
	/* every sampled token comes from its slot's head area (take_from_head
	 * fills in token and k), so the template answer carries nothing */
	struct msg_done d = { 0 };
	for (uint32_t j = 0; j < i && !rc; j++) {
		if ((rc = sched_seq_advance(&rs[j]->seq, &ch[j])))
			break;
		if (head[j] && !rs[j]->seq.replaying)
			rc = take_from_head(c, rs[j], &d, k_flow[flow_of[j]]);
	}
	return rc;
}

static int step_split_batch(struct coord *c, struct intake_req **rs, uint32_t n)
{
	static struct split_batch sb;
	/* flows run any number of micro-batches, one included (no overlap: an
	 * A/B for one GPU that time-slices the two workers' contexts); the
	 * coordinator-driven dataflow pairs at least two, lockstep rounds two */
	uint32_t n_mb = !c->dp_on ? 2 : c->split_mbs < n ? c->split_mbs : n;
	if (!split_flows(c) && n_mb < 2)
		n_mb = 2;
	int rc = split_batch_init(c, &sb, rs, n, n_mb);
	if (rc)
		return rc;
	if (!c->dp_on)
		return step_split_rounds(c, &sb);
	return c->split_via_coord ? step_split_flow(c, &sb) : step_split_pass(c, &sb);
}

/* Every worker and this coordinator must work on one loader instance's
 * regions: the activation region carries the hidden states, head outputs and
 * KV block tables between them, and a restarted loader makes new regions (the
 * old ones live on in the mappings of whoever imported them). Each worker
 * writes its region identity on its link before it answers HELLO
 * (ipc/dataplane.h). A worker on a newer loader's regions (it restarted after
 * the loader did): re-attach to the loader, publish the new identity and say
 * HELLO again to every worker; one still on older regions refuses that HELLO
 * and exits to re-import (gpu_worker/worker.c check_ident). Returns 1 when
 * anything changed (the workers' state is gone: reset and replay), 0 when all
 * agreed, or an error. */
static int sync_regions(struct coord *c, int64_t deadline)
{
	if (!c->dp_on)
		return 0;
	int changed = 0;
	for (int round = 0; round < 4; round++) {
		uint64_t mine = c->att->ident, newest = mine;
		bool differ = false;
		for (int i = 0; i < 2; i++) {
			struct wlink *w = links(c, i);
			uint64_t id = w ? dp_worker_ident(&c->dp, w->dl) : 0;
			if (!id)
				continue; /* a worker without the data plane: nothing to compare */
			differ = differ || id != mine;
			newest = id > newest ? id : newest;
		}
		if (!differ)
			return changed;
		changed = 1;
		if (newest > mine) {
			struct attach *na = NULL;
			int rc = attach_open(c->rundir, 5000, &na);
			if (rc)
				return err_prefix(rc, "re-attach to the restarted loader");
			if (na->model->cfg.n_layer != c->att->model->cfg.n_layer || na->n_embd != c->att->n_embd ||
			    na->model->cfg.n_vocab != c->att->model->cfg.n_vocab) {
				attach_close(na);
				return err_set(ERR_STATE, "the restarted loader serves another model");
			}
			fprintf(stderr, "coordinator: a worker works on regions of loader instance %016llx, ours are "
				"%016llx's (the loader restarted): re-attached to %016llx\n", (unsigned long long)newest,
				(unsigned long long)mine, (unsigned long long)na->ident);
			attach_close(c->att);
			c->att = na;
			dp_set_coord_ident(&c->dp, na->ident);
			/* the new activation region has no block tables yet */
			for (uint32_t s = 0; s < c->kv.max_seqs && s < MSG_MAX_SLOTS; s++)
				c->kv.slot[s].dirty = true;
		}
		for (int i = 0; i < 2; i++) {
			struct wlink *w = links(c, i);
			if (!w)
				continue;
			dp_set_worker_ident(&c->dp, w->dl, 0);
			w->up = false;
			int rc = wl_handshake(c, w, deadline);
			if (rc)
				return rc;
		}
	}
	return err_set(ERR_STATE, "the workers and the coordinator did not agree on the loader's regions in 4 rounds");
}

/* A worker failed: handshake again (a new pid = restarted), agree on one
 * loader's regions (sync_regions), reset the survivors and replay every live
 * sequence from position 0. */
static int recover(struct coord *c, struct intake_req **live, uint32_t n_live)
{
	fprintf(stderr, "coordinator: %s; recovering\n", err_msg());
	/* steps still in flight between the workers are dropped from here on */
	if (c->dp_on)
		dp_epoch_bump(&c->dp);
	int64_t deadline = intake_now_ns() + (int64_t)RECOVER_MS * 1000000;
	for (int i = 0; i < 2; i++) {
		struct wlink *w = links(c, i);
		if (!w)
			continue;
		w->up = false;
		int rc = wl_handshake(c, w, deadline);
		if (rc)
			return rc;
		if ((rc = wl_reset(c, w, 0, true)))
			fprintf(stderr, "coordinator: %s worker: reset: %s\n", w->name, err_msg());
	}
	int sr = sync_regions(c, deadline);
	if (sr < 0)
		return sr;
	for (int i = 0; sr > 0 && i < 2; i++) {
		struct wlink *w = links(c, i);
		if (w && wl_reset(c, w, 0, true))
			fprintf(stderr, "coordinator: %s worker: reset: %s\n", w->name, err_msg());
	}
	/* the workers' KV is gone: cached prefixes with it; live sequences keep
	 * their blocks and rewrite them as they replay */
	kvc_flush(&c->kv);
	for (uint32_t i = 0; i < n_live; i++) {
		sched_seq_replay(&live[i]->seq);
		live[i]->fails++;
	}
	fprintf(stderr, "coordinator: workers back; replaying %u sequence%s\n", n_live,
		n_live == 1 ? "" : "s");
	return 0;
}

/* A worker refused a slot it does not serve (it keeps fewer sequences than
 * --max-seqs): use fewer slots from now on and put a request that had not
 * started back in the queue instead of failing it. */
static bool requeue_refused(struct coord *c, struct intake_req *r, int rc)
{
	if (rc != ERR_RANGE || r->slot == 0 || r->seq.n_chunks != 0 || r->seq.replaying)
		return false;
	if (c->sched.max_seqs > r->slot) {
		fprintf(stderr, "coordinator: a worker refused slot %u (%s); using %u slot%s\n",
			r->slot, err_msg(), r->slot, r->slot == 1 ? "" : "s");
		c->sched.max_seqs = r->slot;
	}
	kvc_release(&c->kv, r->slot);
	sched_slot_free(&c->sched, r->slot);
	r->has_slot = false;
	sched_seq_free(&r->seq);
	if (sched_queue_push(&c->sched, r->id))
		return false;
	r->state = INTAKE_QUEUED;
	return true;
}

static void run_live(struct coord *c)
{
	struct intake_req *live[SCHED_MAX_SEQS];
	uint32_t n = 0;
	for (uint32_t i = 0; i < INTAKE_MAX_REQS && n < SCHED_MAX_SEQS; i++) {
		struct intake_req *r = req_at(c, i);
		if (r && r->has_slot && r->state == INTAKE_LIVE && !r->kv_paused)
			live[n++] = r;
	}
	/* KV blocks for this round's chunks (preempting when the pools are
	 * short); the preempted sit the round out. Fused rounds reserve for
	 * the chunks they plan (step_round) */
	for (uint32_t i = 0; i < n && c->split; i++)
		if (!live[i]->kv_paused)
			kv_ready(c, live[i], 0, live, n);
	uint32_t m = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!live[i]->kv_paused)
			live[m++] = live[i];
	n = m;
	if (!n)
		return;
	int64_t t0 = intake_now_ns();
	int rc = 0;
	bool decode = true;
	for (uint32_t i = 0; i < n; i++)
		decode = decode && live[i]->seq.n_fed >= live[i]->seq.n_prompt &&
			 !live[i]->seq.replaying;
	if (!c->split) {
		/* every live sequence's next chunk (prompt chunks within the
		 * round's token budget) in at most two RUN_CHUNKS */
		rc = step_round(c, live, n);
	} else {
		/* one-token chunks of two or more sequences: batched micro-batches;
		 * prefill chunks (and a lone decoder) in pipelined pairs */
		struct intake_req *batch[SCHED_MAX_SEQS], *rest[SCHED_MAX_SEQS];
		uint32_t nb = 0, nr = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (single_token_next(live[i]) && !c->no_batch)
				batch[nb++] = live[i];
			else
				rest[nr++] = live[i];
		}
		if (nb == 1 && !replays_wide_token(batch[0]))
			rest[nr++] = batch[--nb];
		if (nb >= 1) {
			rc = step_split_batch(c, batch, nb);
			heartbeat(c);
		}
		if (split_flows(c)) {
			for (uint32_t i = 0, used = 0; i < nr && !rc; i += used) {
				rc = step_split_chunks(c, rest + i, nr - i, &used);
				heartbeat(c);
			}
		}
		for (uint32_t i = 0; !split_flows(c) && i < nr && !rc; i += 2) {
			rc = step_split(c, rest + i, nr - i >= 2 ? 2 : 1);
			heartbeat(c);
		}
	}
	/* prompt units the round completed go to the prefix cache */
	for (uint32_t i = 0; i < n; i++)
		if (live[i]->has_slot && live[i]->seq.n_fed <= live[i]->seq.n_prompt)
			kvc_register(&c->kv, live[i]->slot, live[i]->seq.tokens, live[i]->seq.n_fed,
				     live[i]->seq.n_prompt);
	int64_t dt = intake_now_ns() - t0;
	c->step_wall_ns += dt;
	c->n_steps++;
	if (c->met)
		metrics_add(c->met, c->mid.steps, NULL, 1);
	if (decode) {
		c->decode_wall_ns += dt;
		c->n_decode_steps++;
	}
	if (!rc)
		return;
	if (rc == ERR_RANGE || rc == ERR_INVAL) {
		/* a bad answer, not a dead worker: fail the requests, keep going */
		fprintf(stderr, "coordinator: %s\n", err_msg());
		bool requeued = false;
		for (uint32_t i = 0; i < n; i++)
			requeued |= requeue_refused(c, live[i], rc);
		/* a refused slot is retried with fewer slots; the others of the
		 * round simply rerun their chunk (same positions, same values) */
		if (!requeued)
			for (uint32_t i = 0; i < n; i++)
				intake_finish(live[i], MSG_END_ERROR);
		return;
	}
	if (rc == ERR_TIMEOUT && c->step_timeout_ms < STEP_TIMEOUT_MS_MAX) {
		/* a slow device, not only a hung worker, misses the step timeout
		 * (a long prompt's chunk on a loaded CPU device): the replay would
		 * miss it again, so each miss doubles it, up to STEP_TIMEOUT_MS_MAX */
		int was = c->step_timeout_ms;
		c->step_timeout_ms = was > STEP_TIMEOUT_MS_MAX / 2 ? STEP_TIMEOUT_MS_MAX : 2 * was;
		fprintf(stderr, "coordinator: a step ran past %d ms: the step timeout is %d ms from now on\n", was,
			c->step_timeout_ms);
	}
	if (recover(c, live, n)) {
		fprintf(stderr, "coordinator: giving up: %s\n", err_msg());
		for (uint32_t i = 0; i < n; i++)
			intake_finish(live[i], MSG_END_ERROR);
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		if (live[i]->fails > MAX_FAILS) {
			fprintf(stderr, "coordinator: request %016llx: failed %u times, giving up\n",
				(unsigned long long)live[i]->id, live[i]->fails);
			intake_finish(live[i], MSG_END_ERROR);
		}
}

/* One line per idle point: rounds, time per round, and per worker the share
 * of the wall time it spent working (its own GPU time from DONE), the
 * handoff cost per message (round trip minus the worker's wall time on it)
 * and the worker's host time per message (its wall time minus GPU time). */
static void report_busy(struct coord *c)
{
	if (!c->n_steps)
		return;
	double wall = (double)c->step_wall_ns;
	fprintf(stderr, "coordinator: %s: %llu rounds, %.3f ms/round (decode %.3f ms over %llu)",
		c->pipeline ? "pipeline" : c->split ? "split" : "fused", (unsigned long long)c->n_steps,
		wall / 1e6 / (double)c->n_steps,
		c->n_decode_steps ? (double)c->decode_wall_ns / 1e6 / (double)c->n_decode_steps : 0.0,
		(unsigned long long)c->n_decode_steps);
	for (int i = 0; i < 2; i++) {
		struct wlink *w = links(c, i);
		if (!w || !w->steps)
			continue;
		fprintf(stderr, ", %s busy %.0f%% handoff %.1f us/msg host %.1f us/msg", w->name,
			100.0 * (double)w->work_ns / wall,
			(double)(w->busy_ns - w->wall_ns) / 1e3 / (double)w->steps,
			(double)(w->wall_ns - w->work_ns) / 1e3 / (double)w->steps);
	}
	if (c->pipeline)
		fprintf(stderr, ", %llu chained decode steps", (unsigned long long)c->n_chained);
	if (c->split)
		fprintf(stderr, ", %llu overlapped pairs, %llu wide micro-batches, %llu prompt chunks in %llu chunk FLOWs",
			(unsigned long long)c->n_pipelined, (unsigned long long)c->n_wide_mb,
			(unsigned long long)c->n_chunk_seqs, (unsigned long long)c->n_chunk_flows);
	fprintf(stderr, "\n");
}

static void obs_tick(struct coord *c)
{
	if (!c->met)
		return;
	uint32_t live = sched_live(&c->sched);
	metrics_set(c->met, c->mid.active, NULL, live);
	metrics_set(c->met, c->mid.queue_depth, NULL, c->sched.q_len);
	metrics_set(c->met, c->mid.slots, NULL, c->sched.max_seqs);
	struct kvc_stats ks;
	kvc_stats(&c->kv, &ks);
	double used = (double)(ks.g_total - ks.g_free) * KV_BLOCK, cap = (double)ks.g_total * KV_BLOCK;
	metrics_set(c->met, c->mid.kv_cached, NULL, (double)ks.entries * c->kv.unit);
	metrics_set(c->met, c->mid.kv_evictions, NULL, (double)ks.evictions);
	metrics_set(c->met, c->mid.kv_used, NULL, used);
	metrics_set(c->met, c->mid.kv_capacity, NULL, cap);
	metrics_set(c->met, c->mid.kv_ratio, NULL, cap > 0 ? used / cap : 0);
	metrics_set(c->met, c->mid.kv_ctx, NULL, c->n_ctx);
	metrics_set(c->met, c->mid.kv_type, kv_type_name(c->kv_type), 1);
	metrics_set(c->met, c->mid.kv_pool_bytes, NULL, (double)c->kv_bytes);
	int64_t now = intake_now_ns();
	if (!metrics_tick(c->met, (double)now / 1e9, 1.0))
		return;
	metrics_set(c->met, c->mid.uptime, NULL, (double)(now - c->t_boot) / 1e9);
	for (int i = 0; i < 2; i++) {
		struct wlink *w = links(c, i);
		if (!w)
			continue;
		double u = metrics_rate(c->met, c->mid.worker_busy, w->name);
		metrics_set(c->met, c->mid.worker_util, w->name, u > 1 ? 1 : u);
	}
	/* the supervisor rewrites status.json (rename) only when its table
	 * changed: parse it only then */
	struct stat st;
	if (c->status_json[0] && stat(c->status_json, &st) == 0 &&
	    (st.st_ino != c->status_ino || st.st_mtim.tv_sec != c->status_mtime.tv_sec ||
	     st.st_mtim.tv_nsec != c->status_mtime.tv_nsec)) {
		c->status_ino = st.st_ino;
		c->status_mtime = st.st_mtim;
		metrics_cluster_load_status(c->met, &c->mid, c->status_json);
	}
}

/* End every request past its deadline (deadline_of), queued or running,
 * exactly as a cancellation ends it: called once per loop iteration, so a
 * running generation stops within one step; the slot is released and the
 * client told (GEN_END TIMEOUT, HTTP 408 / an SSE error event) by the usual
 * paths. */
static void expire(struct coord *c)
{
	int64_t now = intake_now_ns();
	for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++) {
		struct intake_req *r = req_at(c, i);
		if (!r || !r->t_deadline || now < r->t_deadline ||
		    (r->state != INTAKE_QUEUED && r->state != INTAKE_LIVE))
			continue;
		fprintf(stderr, "coordinator: request %016llx: timed out after %.1f s (%u tokens)\n",
			(unsigned long long)r->id, (double)(now - r->t_start) / 1e9, r->n_gen);
		if (r->state == INTAKE_QUEUED)
			sched_queue_remove(&c->sched, r->id);
		intake_finish(r, MSG_END_TIMEOUT);
	}
}

/* RUNDIR/kv.json: the KV cache's shape for `unicorn status` (written once;
 * its use is in /metrics). A failure only loses that line. */
static void kv_info_write(const struct coord *c, const struct kv_layout *l)
{
	char path[RUNDIR_PATH_MAX], tmp[RUNDIR_PATH_MAX + 8];
	if (rundir_path(c->rundir, "kv.json", path, sizeof path))
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "type", kv_type_name(l->type), "context",
			      (json_int_t)c->n_ctx, "bytes", (json_int_t)l->bytes, "global_blocks", (json_int_t)l->n_gblocks,
			      "local_blocks", (json_int_t)l->n_lblocks, "block", (json_int_t)l->block, "budget",
			      (json_int_t)c->kv_budget);
	if (o && json_dump_file(o, tmp, 0) == 0 && rename(tmp, path) != 0)
		unlink(tmp);
	json_decref(o);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn-coordinator --rundir DIR --model PATH [--placement split|fused|pipeline]\n"
		"                           [--layers A-B,C-D]\n"
		"                           [--max-seqs N] [--step-timeout-ms MS]\n"
		"                           [--request-timeout S] [--kv-budget BYTES|auto]\n"
		"                           [--batch-tokens N] [--micro-batches N]\n"
		"                           [--ctx N] [--kv-type f16|q8_0|f32]\n"
		"Requests come over RUNDIR/coordinator.ipc from the CLI and the API process\n"
		"(unicorn-api, which serves HTTP); metrics and traces go out on RUNDIR/obs.ipc.\n"
		"--request-timeout S: a request running (queued included) longer than S seconds\n"
		"is stopped (default %d; 0 = no limit); a request's own timeout is capped by it.\n"
		"--kv-budget BYTES: the paged KV cache's size (e.g. 512M, 2G; the workers must get\n"
		"the same); auto (default): every slot at full context.\n"
		"--ctx N, --kv-type T: positions per sequence (default the model's context) and the\n"
		"KV cache's element type (default f16); the workers must get the same.\n"
		"--batch-tokens N: tokens (rows) one fused round feeds, prompt chunks of all\n"
		"sequences together (default UNICORN_BATCH_TOKENS, else and at most %d;\n"
		"decode tokens always go).\n"
		"--micro-batches N: split placement's decoding sequences in N micro-batches, each\n"
		"a FLOW between the workers (1..%d, default %d; unicorn-up passes 1 when both\n"
		"workers share one GPU, whose two contexts take turns: nothing to overlap).\n"
		"UNICORN_SPLIT_MBS=N overrides it (A/B).\n"
		"--placement pipeline: two stage workers of whole layers (gpu0 on gpu.ipc, gpu1 on\n"
		"npu.ipc) pass each micro-batch's FLOW between them; --layers gives their ranges\n"
		"(default: balanced by weight bytes, as the workers compute them).\n"
		"UNICORN_BATCH_MM_MIN=N: decode tokens from which a round's decode rows run\n"
		"the mat-mat kernel (default %d, %d per split/pipeline micro-batch; 0 = never).\n",
		REQUEST_TIMEOUT_S_DEFAULT, MSG_MAX_ROWS, SPLIT_MAX_MBS, SPLIT_MBS_DEFAULT, BATCH_MM_MIN_DEFAULT,
		SPLIT_MM_MIN_DEFAULT);
}

/* An option's count, 1..max: -1 (said on stderr) when it is not one. */
static int opt_count(const char *name, const char *arg, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);
	if (*end || end == arg || v < 1 || v > max) {
		fprintf(stderr, "coordinator: %s '%s': 1..%u\n", name, arg, max);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	static struct coord c;
	const char *model = NULL, *placement = "fused", *layers = NULL;
	c.max_seqs = 4;
	c.step_timeout_ms = STEP_TIMEOUT_MS_DEFAULT;
	c.request_timeout_ns = (int64_t)REQUEST_TIMEOUT_S_DEFAULT * 1000000000;
	c.split_mbs = SPLIT_MBS_DEFAULT;
	const char *nb_env = getenv("UNICORN_NO_BATCH");
	c.no_batch = nb_env && strcmp(nb_env, "1") == 0;
	const char *bt_env = getenv("UNICORN_BATCH_TOKENS"); /* --batch-tokens's default (A/B through unicorn-up) */
	c.batch_tokens = bt_env && atoi(bt_env) >= 1 && atoi(bt_env) <= MSG_MAX_ROWS ? (uint32_t)atoi(bt_env) : MSG_MAX_ROWS;
	const char *mm_env = getenv("UNICORN_BATCH_MM_MIN");
	c.batch_mm_min = mm_env ? (uint32_t)strtoul(mm_env, NULL, 10) : BATCH_MM_MIN_DEFAULT;
	c.split_mm_min = mm_env ? c.batch_mm_min : SPLIT_MM_MIN_DEFAULT;
	static const struct option opts[] = {
		{ "rundir", required_argument, 0, 'r' },
		{ "model", required_argument, 0, 'm' },
		{ "placement", required_argument, 0, 'p' },
		{ "max-seqs", required_argument, 0, 's' },
		{ "step-timeout-ms", required_argument, 0, 't' },
		{ "request-timeout", required_argument, 0, 'T' },
		{ "kv-budget", required_argument, 0, 'K' },
		{ "ctx", required_argument, 0, 'c' },
		{ "kv-type", required_argument, 0, 'k' },
		{ "batch-tokens", required_argument, 0, 'B' },
		{ "micro-batches", required_argument, 0, 'M' },
		{ "layers", required_argument, 0, 'L' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'r': c.rundir = optarg; break;
		case 'm': model = optarg; break;
		case 'p': placement = optarg; break;
		case 's': c.max_seqs = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 't': c.step_timeout_ms = atoi(optarg); break;
		case 'T': {
			char *end;
			double v = strtod(optarg, &end);
			if (*end || end == optarg || !(v >= 0 && v <= REQUEST_TIMEOUT_S_MAX)) {
				fprintf(stderr, "coordinator: --request-timeout '%s': seconds, 0..%d "
					"(0 = none)\n", optarg, REQUEST_TIMEOUT_S_MAX);
				return 2;
			}
			c.request_timeout_ns = (int64_t)(v * 1e9);
			break;
		}
		case 'K':
			if (kv_parse_bytes(optarg, &c.kv_budget)) {
				fprintf(stderr, "coordinator: --kv-budget: %s\n", err_msg());
				return 2;
			}
			break;
		case 'c':
			if (opt_count("--ctx", optarg, KV_MAX_CTX, &c.ctx_cap))
				return 2;
			break;
		case 'k':
			if (kv_type_parse(optarg, &c.kv_type)) {
				fprintf(stderr, "coordinator: --kv-type: %s\n", err_msg());
				return 2;
			}
			break;
		case 'B':
			if (opt_count("--batch-tokens", optarg, MSG_MAX_ROWS, &c.batch_tokens))
				return 2;
			break;
		case 'M':
			if (opt_count("--micro-batches", optarg, SPLIT_MAX_MBS, &c.split_mbs))
				return 2;
			break;
		case 'L': layers = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!c.rundir || !model || (strcmp(placement, "split") && strcmp(placement, "fused") && strcmp(placement, "pipeline")) ||
	    c.max_seqs < 1 || c.max_seqs > MSG_MAX_SLOTS || c.step_timeout_ms < 100) {
		usage(stderr);
		return 2;
	}
	c.pipeline = !strcmp(placement, "pipeline");
	c.split = !strcmp(placement, "split") || c.pipeline;
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	char ready[RUNDIR_PATH_MAX], url[BUS_URL_MAX];
	if (rundir_check(c.rundir) || rundir_path(c.rundir, "ready", ready, sizeof ready)) {
		fprintf(stderr, "coordinator: %s\n", err_msg());
		return 2;
	}
	unlink(ready);
	if (ctl_start(c.rundir, MSG_ROLE_COORDINATOR, fill_status, &c, 0, &c.ctl)) {
		fprintf(stderr, "coordinator: control link: %s\n", err_msg());
		return 1;
	}
	if (tok_load(model, &c.tok)) {
		fprintf(stderr, "coordinator: tokenizer: %s\n", err_msg());
		return 2;
	}
	/* The loader may still be copying a big model: wait, heartbeating. */
	while (!stopping(&c)) {
		heartbeat(&c);
		int rc = attach_open(c.rundir, 1000, &c.att);
		if (!rc)
			break;
		if (rc != ERR_TIMEOUT && rc != ERR_NOTFOUND && rc != ERR_IO) {
			fprintf(stderr, "coordinator: attach: %s\n", err_msg());
			return 1;
		}
	}
	if (stopping(&c))
		return 0;
	c.n_layer = c.att->model->cfg.n_layer;
	if (c.pipeline && coord_stages_plan(c.att->model, layers, 2, &c.stages)) {
		fprintf(stderr, "coordinator: %s\n", err_msg());
		return 2;
	}
	/* the workers' context and KV pools, from the same inputs (kvlayout.h) */
	c.n_ctx = kv_context(&c.att->model->cfg, c.ctx_cap);
	if (!c.kv_budget) {
		/* --kv-budget auto: the bytes the workers chose from their devices
		 * (gpu_worker/kvbudget.h), the least of them; none written: every
		 * slot at full length, as the workers then plan too */
		const char *roles[] = { "gpu", "npu" };
		for (int i = 0; i < 2; i++) {
			uint64_t b;
			if (kv_budget_file_read(c.rundir, roles[i], c.att->ident, &b) == 0 && (!c.kv_budget || b < c.kv_budget))
				c.kv_budget = b;
		}
	}
	{
		struct kv_layout kl;
		if (kv_layout_plan(&c.att->model->cfg, c.n_ctx, c.max_seqs, c.kv_budget, c.kv_type, &kl) ||
		    kvc_init(&c.kv, &kl, c.max_seqs, kv_worker_batch(0, c.max_seqs))) {
			fprintf(stderr, "coordinator: %s\n", err_msg());
			return 2;
		}
		c.kv_bytes = kl.bytes;
		kv_info_write(&c, &kl);
		fprintf(stderr, "coordinator: KV cache %.1f MiB (%s, %u positions per sequence): %u global + %u local blocks of %u positions, "
			"prefix unit %u\n", (double)kl.bytes / (1 << 20), kv_type_name(kl.type), c.n_ctx, kl.n_gblocks, kl.n_lblocks,
			kl.block, c.kv.unit);
	}
	c.intake_fd = -1;
	c.spin_us = spin_us(false); /* used only while ops come back within it (op_ema_ns) */
	const char *mbs = getenv("UNICORN_SPLIT_MBS");
	if (mbs && atoi(mbs) >= 1)
		c.split_mbs = (uint32_t)atoi(mbs) < SPLIT_MAX_MBS ? (uint32_t)atoi(mbs) : SPLIT_MAX_MBS;
	c.no_chain = getenv("UNICORN_PIPE_CHAIN") && !strcmp(getenv("UNICORN_PIPE_CHAIN"), "0");
	c.full_row = getenv("UNICORN_FULL_ROW") && !strcmp(getenv("UNICORN_FULL_ROW"), "1");
	c.split_via_coord = getenv("UNICORN_SPLIT_VIA_COORD") && !strcmp(getenv("UNICORN_SPLIT_VIA_COORD"), "1") &&
			    !c.pipeline; /* a stage runs whole layers: only FLOWs reach it */
	if (c.pipeline) {
		char lr[64];
		stages_format(&c.stages, lr, sizeof lr);
		fprintf(stderr, "coordinator: pipeline: stages gpu0 and gpu1 run layers %s\n", lr);
	}
	if (c.split)
		fprintf(stderr, "coordinator: split: decoding sequences in %u micro-batch%s\n", c.split_mbs,
			c.split_mbs == 1 ? "" : "es");
	if (sched_init(&c.sched, c.max_seqs, QUEUE_CAP)) {
		fprintf(stderr, "coordinator: %s\n", err_msg());
		return 2;
	}
	c.gpu.name = c.pipeline ? "gpu0" : "gpu";
	c.gpu.role = MSG_ROLE_GPU_WORKER;
	c.gpu.idx = 0;
	c.gpu.dl = DP_GPU;
	c.npu.name = c.pipeline ? "gpu1" : "npu";
	c.npu.role = MSG_ROLE_NPU_WORKER;
	c.npu.idx = 1;
	c.npu.dl = DP_NPU;
	/* Observability is best effort: without memory for it the cluster still
	 * serves (the endpoints answer 503). */
	static const char *const wnames_split[] = { "gpu", "npu" }, *const wnames_pipe[] = { "gpu0", "gpu1" };
	const char *const *wnames = c.pipeline ? wnames_pipe : wnames_split;
	c.t_boot = intake_now_ns();
	if (metrics_create(&c.met) || metrics_cluster_define(c.met, &c.mid) ||
	    trace_create(0, wnames, c.split ? 2 : 1, &c.tr)) {
		fprintf(stderr, "coordinator: metrics: %s (observability off)\n", err_msg());
		metrics_destroy(c.met);
		c.met = NULL;
		trace_destroy(c.tr);
		c.tr = NULL;
	}
	if (rundir_path(c.rundir, RUNDIR_STATUS, c.status_json, sizeof c.status_json))
		c.status_json[0] = 0;
	if (c.met)
		obs_tick(&c);
	for (uint32_t k = 0; c.met && c.pipeline && k < c.stages.n; k++) {
		metrics_set(c.met, c.mid.stage_first, wnames[k], c.stages.first[k]);
		metrics_set(c.met, c.mid.stage_last, wnames[k], c.stages.first[k + 1] - 1);
	}
	if (obs_server_start(c.rundir, c.met, c.tr, &c.obs))
		fprintf(stderr, "coordinator: %s (no metrics for the API process)\n", err_msg());
	/* the data plane exists before the first HELLO: a worker maps it when
	 * it answers. Without it everything still works over the links. */
	if (getenv("UNICORN_NO_DATAPLANE") && !strcmp(getenv("UNICORN_NO_DATAPLANE"), "1")) {
		fprintf(stderr, "coordinator: data plane off (UNICORN_NO_DATAPLANE=1): step messages over nng\n");
	} else if (dp_create(c.rundir, &c.dp)) {
		fprintf(stderr, "coordinator: %s; step messages go over nng\n", err_msg());
	} else {
		c.dp_on = true;
		dp_set_coord_ident(&c.dp, c.att->ident);
	}
	if (c.pipeline && !c.dp_on) {
		fprintf(stderr, "coordinator: --placement pipeline needs the data plane (its stages pass FLOWs "
			"through its rings); unset UNICORN_NO_DATAPLANE\n");
		return 2;
	}
	for (int i = 0; i < 2; i++) {
		struct wlink *w = links(&c, i);
		if (!w)
			continue;
		if (rundir_url(c.rundir, i == 0 ? RUNDIR_GPU : RUNDIR_NPU, url, sizeof url) ||
		    bus_dial(url, BUS_PAIR, &w->b)) {
			fprintf(stderr, "coordinator: %s\n", err_msg());
			return 1;
		}
	}
	for (int i = 0; i < 2; i++) {
		struct wlink *w = links(&c, i);
		if (w && wl_handshake(&c, w, 0)) {
			fprintf(stderr, "coordinator: %s\n", err_msg());
			return stopping(&c) ? 0 : 1;
		}
		if (w && wl_reset(&c, w, 0, true))
			fprintf(stderr, "coordinator: %s worker: reset: %s\n", w->name, err_msg());
	}
	{
		int sr = sync_regions(&c, 0);
		if (sr < 0) {
			fprintf(stderr, "coordinator: %s\n", err_msg());
			return stopping(&c) ? 0 : 1;
		}
		for (int i = 0; sr > 0 && i < 2; i++) {
			struct wlink *w = links(&c, i);
			if (w && wl_reset(&c, w, 0, true))
				fprintf(stderr, "coordinator: %s worker: reset: %s\n", w->name, err_msg());
		}
	}
	if (rundir_url(c.rundir, RUNDIR_COORDINATOR, url, sizeof url) ||
	    intake_open(url, submit, &c, &c.in)) {
		fprintf(stderr, "coordinator: intake: %s\n", err_msg());
		return 1;
	}
	if (intake_wait_fd(c.in, &c.intake_fd)) {
		fprintf(stderr, "coordinator: %s; an idle loop looks for requests every 20 ms\n", err_msg());
		c.intake_fd = -1;
	}
	/* ready holds the model path: the CLI loads the same tokenizer from it
	 * (unicorn run --json prints the prompt ids). */
	int fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		char path[4096];
		const char *abs = realpath(model, path) ? path : model;
		if (write(fd, abs, strlen(abs)) < 0 || write(fd, "\n", 1) < 0)
			fprintf(stderr, "coordinator: %s: %s\n", ready, strerror(errno));
		close(fd);
	}
	fprintf(stderr, "coordinator: ready (%s placement, %u slots, gpu pid %u%s)\n", placement,
		c.max_seqs, c.gpu.pid, c.pipeline ? ", stage gpu1 up" : c.split ? ", npu worker up" : "");

	uint64_t reported = 0, steps_before = (uint64_t)-1;
	int64_t t_active = intake_now_ns(); /* when a request was last known */
	while (!stopping(&c)) {
		heartbeat(&c);
		bool busy = sched_live(&c.sched) > 0 || c.sched.q_len > 0;
		bool pending = busy || any_request(&c);
		if (pending)
			t_active = intake_now_ns();
		if (!busy || c.n_steps == steps_before) /* busy without a step: nothing could run */
			idle_wait(&c, busy ? 5 : pending ? IDLE_TICK_MS :
				  intake_now_ns() - t_active < (int64_t)SETTLE_MS * 1000000 ? SETTLE_TICK_MS :
				  EMPTY_TICK_MS);
		steps_before = c.n_steps;
		intake_serve(c.in, 0);
		expire(&c);
		for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++) {
			struct intake_req *r = req_at(&c, i);
			if (r && r->state == INTAKE_DONE && r->has_slot)
				release(&c, r);
		}
		admit(&c);
		run_live(&c);
		obs_tick(&c);
		if (!sched_live(&c.sched) && c.n_steps != reported) {
			report_busy(&c);
			reported = c.n_steps;
		}
	}
	fprintf(stderr, "coordinator: shutting down\n");
	unlink(ready);
	obs_server_stop(c.obs);
	metrics_destroy(c.met);
	trace_destroy(c.tr);
	intake_close(c.in);
	for (int i = 0; i < 2; i++)
		if (links(&c, i))
			bus_close(links(&c, i)->b);
	attach_close(c.att);
	cs_vocab_free(c.csv);
	if (c.dp_on) {
		char dpp[RUNDIR_PATH_MAX];
		if (!rundir_path(c.rundir, DP_FILE, dpp, sizeof dpp))
			unlink(dpp);
		dp_close(&c.dp);
	}
	tok_free(c.tok);
	ctl_stop(c.ctl);
	return 0;
}
