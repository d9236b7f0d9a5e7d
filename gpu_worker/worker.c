/* worker: the coordinator-facing message loop of both workers (see worker.h). */
#include "gpu_worker/worker.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_worker/engine.h"
#include "gpu_worker/engine_image.h"
#include "gpu_worker/worker_image.h"
#include "gpu_worker/kvbudget.h"
#include "gpu_worker/vk.h"
#include "ipc/attach.h"
#include "ipc/bus.h"
#include "ipc/ctl.h"
#include "ipc/dataplane.h"
#include "ipc/stages.h"
#include "gpu_worker/selfcheck.h"
#include "common/err.h"
#include "ipc/rundir.h"

struct wslot {
	bool bound;
	uint32_t seq_id;
	uint32_t pos_next;      /* next position this slot's KV has not seen */
};

struct worker {
	struct worker_opts o;
	struct attach *att;
	struct engine *e;
	struct worker_image *img; /* the vision projector (--mmproj), or NULL */
	struct bus *bus;
	uint32_t max_seqs, max_batch, max_ctx;
	struct kv_layout kv;    /* the paged KV cache (ipc/kvlayout.h) */
	bool kv_identity;       /* the pools hold every slot at full length */
	uint32_t tab[ATTACH_KV_TABLE]; /* scratch: a slot's table, copied out of the region */
	uint32_t n_vocab, n_vocab_text, n_layer;
	float *logits;          /* [n_vocab] head scratch */
	float *rows;            /* [MSG_MAX_SLOTS][n_embd]: a batch's hidden rows, gathered from their slots */
	uint32_t n_embd;
	struct wslot slot[MSG_MAX_SLOTS];
	char backend[MSG_MAX_BACKEND];
	char device[MSG_MAX_DEVICE];
	uint64_t weights_bytes, kv_bytes, scratch_bytes;
	uint32_t import_mode;   /* MSG_IMPORT_*: how the engine placed the weights */
	uint64_t t_start;
	uint32_t pid;           /* cached: the STATUS row is filled every heartbeat (ipc/ctl.h) */
	_Atomic uint64_t busy_ns, steps;
	struct msg in, out;     /* large: kept off the stack */
	/* the data plane (ipc/dataplane.h): mapped after each HELLO from a
	 * coordinator that made one; step messages then come through the ring */
	struct dataplane dp;
	bool dp_on;
	/* the doorbell the main loop sleeps on, for worker_wake from another
	 * thread (the ctl thread on SHUTDOWN); set and cleared under bell_mu
	 * so it is never rung after its mapping went */
	pthread_mutex_t bell_mu;
	struct ring_bell *bell_awake;
	bool stale;             /* the coordinator works on a newer loader's regions: exit, re-import */
	pid_t coord_pid;
	uint32_t spin_us;       /* common/spin.h: look at the ring this long after a step */
	bool hot;               /* the last call handled a message */
	/* UNICORN_WORKER_PROFILE=1: where a FLOW op's wall time goes, printed
	 * every 256 ops (host work, vkQueueSubmit, the fence wait, device time) */
	bool profile;
	uint32_t test_delay_ms;      /* UNICORN_TEST_STEP_DELAY_MS: a test knob (below) */
	uint64_t prof_ops, prof_wall_ns, prof_gpu_ns, prof_submit_ns, prof_wait_ns, prof_hop_ns;
	/* pipeline placement: this stage runs layers [l0, l1), embeds when l0 is
	 * 0 and runs the head when l1 is the model's last (ipc/stages.h) */
	bool pipe;
	uint32_t l0, l1;
	bool attn_only;         /* split's attention worker: its engine holds no FFN matrices */
	bool ffn_only;          /* split's FFN worker: no attention matrices, no KV pools */
	bool per_layer;         /* UNICORN_PIPE_PER_LAYER=1: a stage runs each op alone (A/B) */
	uint32_t range_n;       /* >= 1 while a pipeline FLOW's ATTN op runs that many whole layers at once */
	uint64_t t_free_ns;     /* when it finished its last step message (a FLOW's handoff counts from
	                         * then when it arrived earlier: queueing is not transport) */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool serves(const struct worker *w, uint16_t type, uint32_t stage)
{
	bool gpu = w->o.role == MSG_ROLE_GPU_WORKER;
	switch (type) {
	case MSG_EMBED: case MSG_HEAD: case MSG_RUN: case MSG_RUN_BATCH: case MSG_RUN_CHUNKS: case MSG_IMAGE: return gpu;
	case MSG_STAGE: return gpu ? stage != MSG_STAGE_ATTN : stage == MSG_STAGE_ATTN;
	case MSG_STAGE_BATCH: return gpu ? stage != MSG_OP_ATTN : stage == MSG_OP_ATTN;
	default: return true;
	}
}

static enum dp_link my_link(const struct worker *w);

/* Whether a FLOW's current op is this worker's: split by role, a pipeline
 * stage by its layer range. */
static bool flow_mine(const struct worker *w, const struct msg_flow *f)
{
	if (!w->pipe)
		return serves(w, MSG_STAGE_BATCH, f->op);
	switch (f->op) {
	case MSG_OP_EMBED: return w->l0 == 0;
	case MSG_OP_HEAD: return w->l1 == w->n_layer;
	case MSG_OP_ATTN: case MSG_OP_FFN: return f->layer >= w->l0 && f->layer < w->l1;
	default: return false;
	}
}

static void set_awake_bell(struct worker *w, struct ring_bell *b)
{
	pthread_mutex_lock(&w->bell_mu);
	w->bell_awake = b;
	pthread_mutex_unlock(&w->bell_mu);
}

/* Unmap the data plane (the coordinator is gone or said HELLO again). */
static void dp_drop(struct worker *w)
{
	set_awake_bell(w, NULL);
	dp_close(&w->dp);
	w->dp_on = false;
}

void worker_wake(struct worker *w)
{
	pthread_mutex_lock(&w->bell_mu);
	if (w->bell_awake)
		ring_bell_ring(w->bell_awake);
	pthread_mutex_unlock(&w->bell_mu);
}

void worker_destroy(struct worker *w)
{
	if (!w)
		return;
	bus_close(w->bus);
	dp_drop(w);
	pthread_mutex_destroy(&w->bell_mu);
	worker_image_destroy(w->img);
	engine_destroy(w->e);
	attach_close(w->att);
	free(w->logits);
	free(w->rows);
	free(w);
}

/* Before it listens: a few fixed tokens through the model, compared with
 * what the cluster's first start of this role computed (gpu_worker/selfcheck.h).
 * UNICORN_SELFCHECK=0 skips it (A/B of start times). */
static int worker_selfcheck(struct worker *w)
{
	const char *env = getenv("UNICORN_SELFCHECK");
	if (env && !strcmp(env, "0"))
		return 0;
	const char *role = w->o.role == MSG_ROLE_NPU_WORKER ? "npu" : "gpu";
	uint64_t d = 0;
	bool first = false;
	const struct gemma3_config *c = &w->att->model->cfg;
	int rc = w->pipe	 ? selfcheck_run_layers(w->e, ENGINE_STAGE_BOTH, w->l0, w->l1, c->n_embd, &d)
		 : w->attn_only ? selfcheck_run_layers(w->e, ENGINE_STAGE_ATTN, 0, c->n_layer, c->n_embd, &d)
		 : w->ffn_only	? selfcheck_run_layers(w->e, ENGINE_STAGE_FFN, 0, c->n_layer, c->n_embd, &d)
				 : selfcheck_run(w->e, c->n_vocab, &d);
	if (!rc)
		rc = selfcheck_verify(w->o.rundir, role, d, &first);
	if (rc)
		return rc;
	fprintf(stderr, "unicorn-%s-worker: self-check %016llx (%s)\n", role, (unsigned long long)d,
		first ? "recorded: the cluster's first start" : "matches the first start");
	return 0;
}

/* The KV pools (ipc/kvlayout.h): an explicit --kv-budget, or auto
 * (gpu_worker/kvbudget.h): the device's free memory after the weights,
 * scratch and headroom, the same bytes again after a restart under the same
 * loader (the coordinator's tables must stay valid). A budget that cannot hold
 * one sequence at the context is fatal (ERR_UNSUP: exit 2, not restarted),
 * with the bytes needed and the options that help. */
static int worker_kv_plan(struct worker *w, const struct worker_opts *o, const struct gemma3_config *c)
{
	const char *role = o->role == MSG_ROLE_NPU_WORKER ? "npu" : "gpu";
	const char *other = o->role == MSG_ROLE_NPU_WORKER ? "gpu" : "npu";
	uint64_t budget = o->kv_budget, theirs = 0;
	struct kvb_plan kp = { 0 };
	bool autob = budget == 0, fresh = false;
	int rc;
	/* what this worker places: a pipeline stage its layers' matrices (and the
	 * embedding and norms) and its layers' share of every KV block */
	uint64_t own_w = 0;
	const struct model *m = w->att->model;
	for (size_t i = 0; i < m->n_tensors; i++)
		own_w += m->tensors[i].nbytes;
	for (uint32_t l = 0; w->pipe && l < c->n_layer; l++)
		if (l < w->l0 || l >= w->l1)
			own_w -= stages_layer_bytes(m, l);
	struct kv_layout one;
	if (kv_layout_plan(c, w->max_ctx, 1, 0, o->kv_type, &one))
		return err_prefix(ERR_UNSUP, "worker");
	uint64_t one_own = w->pipe ? stages_kv_bytes(&one, c, w->l0, w->l1) : one.bytes;
	if (autob && kv_budget_file_read(o->rundir, role, w->att->ident, &budget) != 0) {
		if ((rc = kvb_auto(o->vk_device, w->att->model, MSG_MAX_ROWS, w->max_batch, &kp)))
			return rc;
		if (o->device_mem && kp.free > o->device_mem) { /* the cap is the user's headroom */
			kp.free = o->device_mem;
			kp.headroom = 0;
		}
		kp.weights = own_w;
		uint64_t need = kp.weights + kp.scratch + kp.headroom;
		kp.budget = kp.free > need ? kp.free - need : 0;
		/* a stage's bytes hold only its layers' share of each block: the
		 * cluster's budget (all layers) is that much larger */
		if (w->pipe && one_own)
			kp.budget = (uint64_t)((double)kp.budget * (double)one.bytes / (double)one_own);
		budget = kp.budget;
		fresh = true;
		/* the other worker of a split cluster chose first: the same bytes when they fit */
		if (kv_budget_file_read(o->rundir, other, w->att->ident, &theirs) == 0 && theirs <= budget)
			budget = theirs;
	}
	if (fresh && budget < one.bytes && o->device_mem)
		return err_set(ERR_UNSUP, "worker: %s%u-%u need %.1f MiB on the device with one sequence's KV cache (weights "
			       "%.1f MiB, KV %.1f MiB, scratch %.1f MiB), over --device-mem %.1f MiB: %s, or lower --ctx",
			       w->pipe ? "layers " : "the whole model, layers ",
			       w->pipe ? w->l0 : 0, w->pipe ? w->l1 - 1 : c->n_layer - 1,
			       (own_w + one_own + kp.scratch) / 1048576.0, own_w / 1048576.0, one_own / 1048576.0,
			       kp.scratch / 1048576.0, o->device_mem / 1048576.0,
			       w->pipe ? "give this stage fewer layers (--layers)"
				       : "run it across more devices (--placement pipeline --devices D,D)");
	if (fresh && budget < one.bytes)
		return err_set(ERR_UNSUP, "worker: KV cache: %s has %.1f MiB free; after the weights (%.1f MiB), "
			       "scratch (%.1f MiB) and headroom (%.1f MiB) %.1f MiB are left, and one sequence of %u "
			       "positions needs %.1f MiB of %s KV cache (%llu bytes): lower --ctx, use --kv-type q8_0 "
			       "(f32 > f16 > q8_0), or choose a device with more memory (--vk-device)",
			       kp.device, kp.free / 1048576.0, kp.weights / 1048576.0, kp.scratch / 1048576.0,
			       kp.headroom / 1048576.0, budget / 1048576.0, w->max_ctx, one.bytes / 1048576.0,
			       kv_type_name(o->kv_type), (unsigned long long)one.bytes);
	if (kv_layout_plan(c, w->max_ctx, w->max_seqs, budget, o->kv_type, &w->kv)) {
		char why[512]; /* a budget that cannot work: fatal (ERR_UNSUP), not restarted */
		snprintf(why, sizeof why, "%s", err_msg());
		return err_set(ERR_UNSUP, "worker: %s; or lower --ctx (%u positions) or use --kv-type q8_0", why,
			       w->max_ctx);
	}
	if (fresh && kvb_fit_pools(c, kp.max_pool, w->max_seqs, &budget, &w->kv))
		return err_prefix(ERR_UNSUP, "worker");
	/* auto under --device-mem: a stage's share of the planned pools follows
	 * the plan's global/local split, not the one-sequence ratio the budget
	 * was scaled by; shrink until weights + KV + scratch fit the cap */
	for (int i = 0; fresh && o->device_mem && i < 8; i++) {
		uint64_t kv = w->pipe ? stages_kv_bytes(&w->kv, c, w->l0, w->l1) : w->kv.bytes;
		uint64_t fixed = own_w + kvb_scratch(c, MSG_MAX_ROWS, w->max_batch);
		if (fixed + kv <= o->device_mem || fixed >= o->device_mem || !kv)
			break;
		uint64_t nb = (uint64_t)((double)budget * (double)(o->device_mem - fixed) / (double)kv * 0.999);
		struct kv_layout smaller;
		if (nb < one.bytes || kv_layout_plan(c, w->max_ctx, w->max_seqs, nb, o->kv_type, &smaller) ||
		    kvb_fit_pools(c, kp.max_pool, w->max_seqs, &nb, &smaller))
			break; /* the check below says what does not fit */
		w->kv = smaller;
		budget = nb;
	}
	if (o->device_mem) { /* --device-mem: refuse what does not fit, before allocating any of it */
		uint64_t kv = w->pipe ? stages_kv_bytes(&w->kv, c, w->l0, w->l1) : w->kv.bytes;
		uint64_t sc = kvb_scratch(c, MSG_MAX_ROWS, w->max_batch), need = own_w + kv + sc;
		char what[48];
		if (w->pipe)
			snprintf(what, sizeof what, "layers %u-%u", w->l0, w->l1 - 1);
		else
			snprintf(what, sizeof what, "the whole model (%u layers)", c->n_layer);
		if (need > o->device_mem)
			return err_set(ERR_UNSUP, "worker: %s need %.1f MiB on the device (weights %.1f MiB, KV cache %.1f "
				       "MiB, scratch %.1f MiB), over --device-mem %.1f MiB: %s, or lower --kv-budget / --ctx / "
				       "--max-seqs", what, need / 1048576.0, own_w / 1048576.0, kv / 1048576.0, sc / 1048576.0,
				       o->device_mem / 1048576.0,
				       w->pipe ? "give this stage fewer layers (--layers)"
					       : "run it across more devices (--placement pipeline --devices D,D)");
		fprintf(stderr, "worker: --device-mem %.1f MiB: %s take %.1f MiB (weights %.1f, KV %.1f, scratch %.1f)\n",
			o->device_mem / 1048576.0, what, need / 1048576.0, own_w / 1048576.0, kv / 1048576.0,
			sc / 1048576.0);
	}
	if (autob && kv_budget_file_write(o->rundir, role, w->att->ident, budget))
		return err_prefix(ERR_IO, "worker");
	if (fresh)
		fprintf(stderr, "worker: --kv-budget auto: %s has %.1f MiB free; weights %.1f MiB, scratch %.1f MiB, "
			"headroom %.1f MiB: %.1f MiB for the KV cache (%s, %u positions per sequence)\n", kp.device,
			kp.free / 1048576.0, kp.weights / 1048576.0, kp.scratch / 1048576.0, kp.headroom / 1048576.0,
			budget / 1048576.0, kv_type_name(o->kv_type), w->max_ctx);
	return 0;
}

int worker_create(const struct worker_opts *o, struct worker **out)
{
	*out = NULL;
	struct worker *w = calloc(1, sizeof *w);
	if (!w)
		return err_set(ERR_NOMEM, "worker: out of memory");
	w->o = *o;
	pthread_mutex_init(&w->bell_mu, NULL);
	w->t_start = mono_ns();
	w->pid = (uint32_t)getpid();
	w->max_seqs = o->max_seqs ? o->max_seqs : 1;
	int rc = 0;
	if (w->max_seqs > MSG_MAX_SLOTS) {
		rc = err_set(ERR_INVAL, "worker: --max-seqs %u exceeds %d slots", w->max_seqs, MSG_MAX_SLOTS);
		goto fail;
	}
	rc = attach_open(o->rundir, o->attach_timeout_ms ? o->attach_timeout_ms : WORKER_ATTACH_TIMEOUT_MS, &w->att);
	if (rc)
		goto fail;
	const struct model *m = w->att->model;
	const struct gemma3_config *c = &m->cfg;
	w->n_vocab = c->n_vocab;
	w->n_vocab_text = c->n_vocab_text && c->n_vocab_text <= c->n_vocab ? c->n_vocab_text : c->n_vocab;
	w->n_layer = c->n_layer;
	w->max_ctx = kv_context(c, o->ctx);
	if (o->n_stages) {
		struct stages st;
		rc = o->layers ? stages_parse(o->layers, c->n_layer, &st) : stages_balance(m, o->n_stages, &st);
		if (!rc && (st.n != o->n_stages || o->stage >= st.n))
			rc = err_set(ERR_INVAL, "--layers names %u stages; this is stage %u of %u", st.n, o->stage,
				     o->n_stages);
		if (rc) {
			rc = err_prefix(ERR_UNSUP, "worker"); /* fatal: a restart would not change it */
			goto fail;
		}
		w->pipe = true;
		w->per_layer = getenv("UNICORN_PIPE_PER_LAYER") && !strcmp(getenv("UNICORN_PIPE_PER_LAYER"), "1");
		w->l0 = st.first[o->stage];
		w->l1 = st.first[o->stage + 1];
	}
	/* one decode step can batch a token of every sequence (RUN_BATCH): the
	 * engine's batch must hold max_seqs tokens */
	w->max_batch = kv_worker_batch(o->max_batch, w->max_seqs);
	rc = worker_kv_plan(w, o, c);
	if (rc)
		goto fail;
	/* UNICORN_TEST_START_DELAY_MS: a start that takes this much longer (tests
	 * of the watchdog), reporting progress every 100 ms unless
	 * UNICORN_TEST_START_SILENT=1 */
	const char *dly = getenv("UNICORN_TEST_START_DELAY_MS");
	if (dly && atoi(dly) > 0) {
		bool silent = getenv("UNICORN_TEST_START_SILENT") && !strcmp(getenv("UNICORN_TEST_START_SILENT"), "1");
		for (int ms = 0; ms < atoi(dly); ms += 100) {
			nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
			if (!silent && o->progress)
				o->progress(o->progress_arg);
		}
	}
	/* the attention worker (split placement; never a pipeline stage) runs
	 * attention stages only: the FFN matrices stay out of its device */
	w->attn_only = o->role == MSG_ROLE_NPU_WORKER && !w->pipe;
	/* and the FFN worker (--ffn-only, which unicorn-up gives split's gpu
	 * worker) the rest: no Q/K/V/O, no KV pools */
	w->ffn_only = o->ffn_only && o->role == MSG_ROLE_GPU_WORKER && !w->pipe;
	w->kv_identity = w->kv.n_gblocks >= w->max_seqs * w->kv.max_blocks && w->kv.n_lblocks >= w->max_seqs * w->kv.ring;
	/* the engine may use the read-only weight mappings in place: they stay
	 * mapped until attach_close, which worker_destroy runs after
	 * engine_destroy */
	struct engine_span spans[MANIFEST_MAX_REGIONS];
	uint32_t n_spans = 0;
	for (uint32_t i = 0; i < w->att->n_weights && n_spans < MANIFEST_MAX_REGIONS; i++)
		if (w->att->weights[i].addr && w->att->weights[i].size)
			spans[n_spans++] = (struct engine_span){ w->att->weights[i].addr, w->att->weights[i].size };
	struct engine_opts eo = { .device = o->vk_device, .max_ctx = w->max_ctx, .max_batch = w->max_batch,
				  .max_seqs = w->max_seqs, .max_rows = MSG_MAX_ROWS, .weights_import = o->weights_import,
				  .spans = spans, .n_spans = n_spans, .kv = &w->kv, .progress = o->progress,
				  .progress_arg = o->progress_arg, .layer_first = w->pipe ? w->l0 : 0,
				  .layer_end = w->pipe ? w->l1 : 0, .attn_only = w->attn_only, .ffn_only = w->ffn_only };
	/* images: the fused placement's gpu worker (the one that embeds and
	 * runs whole prompts) holds the tower and an image area */
	if (o->mmproj && o->role == MSG_ROLE_GPU_WORKER && !w->pipe && !w->ffn_only &&
	    (rc = worker_image_open(o->mmproj, c, &w->img, &eo.image_rows, &eo.image_slots)))
		goto fail;
	rc = engine_create(m, &eo, &w->e);
	if (!rc && w->img)
		rc = worker_image_attach(w->img, w->e);
	if (rc)
		goto fail;
	if ((rc = worker_selfcheck(w)))
		goto fail;
	/* zero-copy when most (at least half) of the weight-matrix bytes are used
	 * in place; norms are always small converted copies */
	uint64_t imp = 0, tot = 0;
	engine_weights_import(w->e, &imp, &tot);
	w->import_mode = tot && imp >= tot - tot / 2 ? MSG_IMPORT_ZERO_COPY : MSG_IMPORT_UPLOAD;
	fprintf(stderr, "%s: weights: %llu of %llu matrix bytes used in place (%s)\n",
		o->role == MSG_ROLE_NPU_WORKER ? "unicorn-npu-worker" : "unicorn-gpu-worker", (unsigned long long)imp,
		(unsigned long long)tot, w->import_mode == MSG_IMPORT_ZERO_COPY ? "zero-copy" : "upload");
	w->spin_us = engine_vk(w->e)->spin_us; /* the device's bound (vk_create) */
	w->profile = getenv("UNICORN_WORKER_PROFILE") && !strcmp(getenv("UNICORN_WORKER_PROFILE"), "1");
	/* Test knob, not a setting: UNICORN_TEST_STEP_DELAY_MS=N (0..10000) makes
	 * every step take N ms longer (a deliberately slow worker, so tests can
	 * load the coordinator and the API like a big model does). */
	const char *tdl = getenv("UNICORN_TEST_STEP_DELAY_MS");
	if (tdl && *tdl) {
		char *end;
		unsigned long v = strtoul(tdl, &end, 10);
		w->test_delay_ms = !*end && v <= 10000 ? (uint32_t)v : 0;
		if (w->test_delay_ms)
			fprintf(stderr, "worker: test knob UNICORN_TEST_STEP_DELAY_MS: every step +%u ms\n",
				w->test_delay_ms);
	}
	w->n_embd = w->att->model->cfg.n_embd;
	w->logits = malloc((size_t)w->n_vocab * sizeof *w->logits);
	w->rows = malloc((size_t)MSG_MAX_SLOTS * w->n_embd * sizeof *w->rows);
	if (!w->logits || !w->rows) {
		rc = err_set(ERR_NOMEM, "worker: out of memory");
		goto fail;
	}
	msg_set_str(w->backend, sizeof w->backend, o->backend ? o->backend : "vulkan");
	if (w->pipe) /* unicorn status shows each stage's range beside its device */
		snprintf(w->device, sizeof w->device, "layers %u-%u on %.96s", w->l0, w->l1 - 1, engine_vk(w->e)->info.name);
	else
		msg_set_str(w->device, sizeof w->device, engine_vk(w->e)->info.name);
	for (size_t i = 0; i < m->n_tensors; i++)
		w->weights_bytes += m->tensors[i].nbytes;
	w->kv_bytes = w->kv.bytes;
	if (w->pipe) { /* a stage holds its layers' matrices and KV (and the embedding, norms) */
		for (uint32_t l = 0; l < w->n_layer; l++)
			if (l < w->l0 || l >= w->l1)
				w->weights_bytes -= stages_layer_bytes(m, l);
		w->kv_bytes = stages_kv_bytes(&w->kv, c, w->l0, w->l1);
	}
	for (uint32_t l = 0; w->attn_only && l < w->n_layer; l++) {
		const struct model_layer *ml = &m->layers[l];
		w->weights_bytes -= ml->ffn_gate->nbytes + ml->ffn_up->nbytes + ml->ffn_down->nbytes;
	}
	if (w->attn_only)
		w->weights_bytes -= m->tok_embd->nbytes;
	for (uint32_t l = 0; w->ffn_only && l < w->n_layer; l++) {
		const struct model_layer *ml = &m->layers[l];
		w->weights_bytes -= ml->wq->nbytes + ml->wk->nbytes + ml->wv->nbytes + ml->wo->nbytes;
	}
	if (w->ffn_only)
		w->kv_bytes = 0;
	uint64_t dl = 0, hv = 0;
	engine_placement(w->e, &dl, &hv);
	dl += imp; /* weights used in place still count as placed */
	w->scratch_bytes = dl + hv > w->weights_bytes + w->kv_bytes ? dl + hv - w->weights_bytes - w->kv_bytes : 0;
	char url[BUS_URL_MAX];
	rc = rundir_url(o->rundir, o->role == MSG_ROLE_NPU_WORKER ? RUNDIR_NPU : RUNDIR_GPU, url, sizeof url);
	if (!rc)
		rc = bus_listen(url, BUS_PAIR, &w->bus);
	if (rc)
		goto fail;
	*out = w;
	return 0;
fail:
	worker_destroy(w);
	return rc;
}

void worker_status(struct worker *w, struct msg_status *st)
{
	st->role = w->o.role;
	st->pid = w->pid;
	memcpy(st->backend, w->backend, sizeof st->backend);
	memcpy(st->device, w->device, sizeof st->device);
	st->weights_bytes = w->weights_bytes;
	st->kv_bytes = w->kv_bytes;
	st->scratch_bytes = w->scratch_bytes;
	st->share_path = w->att->share_path == SHM_PATH_UDMABUF ? MSG_SHARE_UDMABUF : MSG_SHARE_MEMFD;
	st->import_mode = w->import_mode;
	st->uptime_ns = mono_ns() - w->t_start;
	st->busy_ns = atomic_load(&w->busy_ns);
	st->steps = atomic_load(&w->steps);
}

/* ---- validation ---- */

static int check_slot(const struct worker *w, uint32_t slot)
{
	if (slot >= w->max_seqs)
		return err_set(ERR_RANGE, "worker: slot %u out of range (this worker serves %u slot%s)", slot,
			       w->max_seqs, w->max_seqs == 1 ? "" : "s");
	return 0;
}

static int check_rows(const struct worker *w, uint32_t slot, uint32_t n)
{
	int rc = check_slot(w, slot);
	if (rc)
		return rc;
	if (n == 0 || n > MSG_MAX_TOKENS)
		return err_set(ERR_RANGE, "worker: n %u outside [1, %d]", n, MSG_MAX_TOKENS);
	return 0;
}

/* A KV-touching step of seq_id at [pos0, pos0+n) in slot: pos0 0 (re)binds
 * the slot; later chunks must continue the bound sequence without a gap. */
static int check_seq(const struct worker *w, uint32_t seq_id, uint32_t slot, uint32_t pos0, uint32_t n, bool table)
{
	int rc = check_rows(w, slot, n);
	if (rc)
		return rc;
	if (pos0 > w->max_ctx || n > w->max_ctx - pos0)
		return err_set(ERR_RANGE, "worker: positions [%u, %u) exceed the context of %u", pos0, pos0 + n,
			       w->max_ctx);
	const struct wslot *s = &w->slot[slot];
	/* pos0 0 binds the slot; so may a later position when the coordinator
	 * gave a block table: its earlier positions are blocks it shares from
	 * another sequence's prompt (a reused prefix) */
	if (pos0 == 0 || (table && (!s->bound || s->seq_id != seq_id)))
		return 0;
	if (!s->bound || s->seq_id != seq_id)
		return err_set(ERR_NOTFOUND, "worker: unknown seq %u in slot %u at pos0 %u (start it at pos0 0)",
			       seq_id, slot, pos0);
	if (pos0 > s->pos_next)
		return err_set(ERR_RANGE, "worker: seq %u: pos0 %u skips positions (slot has %u)", seq_id, pos0,
			       s->pos_next);
	return 0;
}

/* A KV step of slot: check it as check_seq does, then hand the engine the
 * slot's block table from the activation region (copied out first: the
 * coordinator may write the region at any time). No table (count 0) means
 * the slot's own blocks in order, which only exist when the pools hold
 * every slot at full length. */
static int check_kv(struct worker *w, uint32_t seq_id, uint32_t slot, uint32_t pos0, uint32_t n)
{
	uint32_t *src;
	int rc = check_rows(w, slot, n);
	if (!rc)
		rc = attach_kv_table(w->att, slot, &src);
	uint32_t len = kv_table_len(&w->kv), cnt = rc ? 0 : src[0];
	if (!rc)
		rc = check_seq(w, seq_id, slot, pos0, n, cnt != 0);
	if (rc)
		return rc;
	if (cnt == 0) {
		if (!w->kv_identity)
			return err_set(ERR_STATE, "worker: slot %u has no KV block table (the pools of %u+%u blocks are "
				       "smaller than %u slots at full length, so the coordinator must give one)",
				       slot, w->kv.n_gblocks, w->kv.n_lblocks, w->max_seqs);
		for (uint32_t b = 0; b < w->kv.max_blocks; b++)
			w->tab[b] = slot * w->kv.max_blocks + b;
		for (uint32_t j = 0; j < w->kv.ring; j++)
			w->tab[w->kv.max_blocks + j] = slot * w->kv.ring + j;
	} else if (cnt != len) {
		return err_set(ERR_INVAL, "worker: slot %u: KV block table of %u entries (this layout has %u)", slot, cnt,
			       len);
	} else {
		memcpy(w->tab, src + 1, (size_t)len * 4);
	}
	return engine_seq_blocks(w->e, slot, w->tab, len);
}

static void seq_advance(struct worker *w, uint32_t seq_id, uint32_t slot, uint32_t pos0, uint32_t n)
{
	struct wslot *s = &w->slot[slot];
	if (pos0 == 0 || !s->bound || s->seq_id != seq_id) {
		s->bound = true;
		s->seq_id = seq_id;
		s->pos_next = 0;
	}
	if (pos0 + n > s->pos_next)
		s->pos_next = pos0 + n;
}

static int select_slot(struct worker *w, uint32_t slot)
{
	return engine_seq_select(w->e, slot);
}

static int check_tokens(const struct worker *w, const uint32_t *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (t[i] >= w->n_vocab && !(w->img && engine_image_token(t[i]))) /* the engine checks image rows */
			return err_set(ERR_RANGE, "worker: token %u at index %u out of range (n_vocab %u)", t[i], i,
				       w->n_vocab);
	return 0;
}

/* ---- steps ---- */

static int do_embed(struct worker *w, const struct msg_embed *m)
{
	int rc = check_rows(w, m->slot, m->n);
	if (!rc)
		rc = check_tokens(w, m->tokens, m->n);
	for (uint32_t done = 0; !rc && done < m->n;) {
		uint32_t c = m->n - done < w->max_batch ? m->n - done : w->max_batch;
		float *h;
		rc = attach_hidden(w->att, m->slot, done, c, &h);
		if (!rc)
			rc = engine_embed(w->e, m->tokens + done, c);
		if (!rc)
			rc = engine_hidden_get(w->e, h, c);
		done += c;
	}
	return rc;
}

static int do_stage(struct worker *w, const struct msg_stage *m)
{
	if (m->layer >= w->n_layer || m->n_layers > w->n_layer - m->layer)
		return err_set(ERR_RANGE, "worker: layers [%u, %u) outside the model's %u layers", m->layer,
			       m->layer + m->n_layers, w->n_layer);
	bool kv = m->stage != MSG_STAGE_FFN;
	int rc = kv ? check_kv(w, m->seq_id, m->slot, m->pos0, m->n) : check_rows(w, m->slot, m->n);
	if (!rc && kv)
		rc = select_slot(w, m->slot);
	if (rc)
		return rc;
	for (uint32_t done = 0; !rc && done < m->n;) {
		uint32_t c = m->n - done < w->max_batch ? m->n - done : w->max_batch;
		float *h;
		enum engine_stage st = m->stage == MSG_STAGE_ATTN ? ENGINE_STAGE_ATTN :
				       m->stage == MSG_STAGE_FFN ? ENGINE_STAGE_FFN : ENGINE_STAGE_BOTH;
		rc = attach_hidden(w->att, m->slot, done, c, &h);
		if (!rc)
			rc = engine_stage_io(w->e, m->layer, m->n_layers, st, c, m->pos0 + done, h, h);
		done += c;
	}
	if (!rc && kv)
		seq_advance(w, m->seq_id, m->slot, m->pos0, m->n);
	return rc;
}

/* Top-k of logits[0..n) (descending, first index on ties; -inf/NaN skipped). */
static uint32_t topk(const float *x, uint32_t n, uint32_t k, uint32_t *ids, float *vals)
{
	uint32_t have = 0;
	for (uint32_t i = 0; i < n; i++) {
		float v = x[i];
		if (!(v > -INFINITY))
			continue;
		if (have == k && !(v > vals[k - 1]))
			continue;
		uint32_t j = have < k ? have++ : k - 1;
		while (j > 0 && v > vals[j - 1]) {
			vals[j] = vals[j - 1];
			ids[j] = ids[j - 1];
			j--;
		}
		vals[j] = v;
		ids[j] = i;
	}
	return have;
}

/* A CPU head of one logit row into slot's head area: its top-k and the
 * row's log-sum-exp for logprobs, as the GPU top-k kernel gives them (over
 * the text ids, the others -inf; in double, max-shifted); MSG_HEAD_FULL
 * also copies the row into the slot's logits area (the non-text ids -inf)
 * for the coordinator's constrained decoding. *got: candidates found. */
static int row_head(struct worker *w, uint32_t slot, const float *row, uint32_t k, bool full, uint32_t *got)
{
	float *vals, *lse;
	uint32_t *ids;
	int rc = attach_head(w->att, slot, &ids, &vals);
	if (!rc)
		rc = attach_head_lse(w->att, slot, &lse);
	if (!rc && full) {
		float *dst;
		if ((rc = attach_logits(w->att, slot, &dst)))
			return rc;
		memcpy(dst, row, (size_t)w->n_vocab_text * sizeof *dst);
		for (uint32_t i = w->n_vocab_text; i < w->n_vocab; i++)
			dst[i] = -INFINITY;
	}
	if (rc)
		return rc;
	*got = topk(row, w->n_vocab_text, k, ids, vals);
	if (*got == 0)
		return err_set(ERR_RANGE, "worker: head: no finite logit");
	for (uint32_t i = *got; i < k; i++)
		ids[i] = ids[0], vals[i] = -INFINITY;
	double mx = vals[0], sum = 0;
	for (uint32_t i = 0; i < w->n_vocab_text; i++)
		if (row[i] > -INFINITY)
			sum += exp((double)row[i] - mx);
	*lse = (float)(mx + log(sum));
	return 0;
}

/* One batch row's head result into its slot's head area: k ids, and for a
 * top-k head their logits and the row's log-sum-exp (an argmax head gives
 * only the id, as HEAD and RUN do). */
static void head_store(uint32_t *ids, float *vals, float *lse, const uint32_t *row_ids, const float *row_vals,
		       float row_lse, uint32_t k, bool topk)
{
	memcpy(ids, row_ids, k * sizeof *row_ids);
	if (topk) {
		memcpy(vals, row_vals, k * sizeof *row_vals);
		*lse = row_lse;
	} else {
		vals[0] = NAN;
		*lse = NAN;
	}
}

static int do_head(struct worker *w, const struct msg_head *m, uint32_t *token, uint32_t *k_out)
{
	int rc = check_rows(w, m->slot, m->n);
	if (rc)
		return rc;
	uint32_t k = m->mode == MSG_HEAD_ARGMAX ? 1 : m->k;
	if (k < 1 || k > MSG_MAX_TOPK)
		return err_set(ERR_RANGE, "worker: head k %u outside [1, %d]", k, MSG_MAX_TOPK);
	float *h;
	rc = attach_hidden(w->att, m->slot, m->n - 1, 1, &h);
	if (!rc && m->mode != MSG_HEAD_FULL) {
		/* argmax / top-k (and its log-sum-exp) on the GPU, as a batched
		 * head's rows: the logit row never leaves it (row_head's CPU pass
		 * over 262,144 logits took ~5 ms of every split or pipeline token) */
		static uint32_t out_ids[MSG_MAX_TOPK];
		static float out_vals[MSG_MAX_TOPK];
		float out_lse = NAN, *vals, *lse;
		uint32_t *ids;
		bool tk = m->mode == MSG_HEAD_TOPK;
		rc = engine_head_batch(w->e, 1, h, false, tk ? ENGINE_BATCH_TOPK : ENGINE_BATCH_ARGMAX, k, out_ids,
				       tk ? out_vals : NULL);
		if (!rc && tk)
			rc = engine_topk_lse(w->e, 1, &out_lse);
		if (!rc)
			rc = attach_head(w->att, m->slot, &ids, &vals);
		if (!rc)
			rc = attach_head_lse(w->att, m->slot, &lse);
		if (rc)
			return rc;
		head_store(ids, vals, lse, out_ids, out_vals, out_lse, k, tk);
		*token = ids[0];
		*k_out = k;
		return 0;
	}
	/* MSG_HEAD_FULL: the whole row into the slot's logits area. Only the
	 * last row feeds the logits: upload just that one */
	if (!rc)
		rc = engine_hidden_set(w->e, h, 1);
	if (!rc)
		rc = engine_head(w->e, 1, w->logits);
	uint32_t got = 0;
	if (!rc)
		rc = row_head(w, m->slot, w->logits, k, m->mode == MSG_HEAD_FULL, &got);
	if (rc)
		return rc;
	uint32_t *ids;
	float *vals;
	if ((rc = attach_head(w->att, m->slot, &ids, &vals)))
		return rc;
	*token = ids[0];
	*k_out = m->mode == MSG_HEAD_FULL ? k : got;
	return 0;
}

static int do_run(struct worker *w, const struct msg_run *m, uint32_t *token, uint32_t *k_out)
{
	int rc = check_kv(w, m->seq_id, m->slot, m->pos0, m->n);
	if (!rc)
		rc = check_tokens(w, m->tokens, m->n);
	uint32_t k = m->mode == MSG_HEAD_TOPK ? m->k : 1;
	if (!rc && (k < 1 || k > MSG_MAX_TOPK))
		rc = err_set(ERR_RANGE, "worker: run k %u outside [1, %d]", k, MSG_MAX_TOPK);
	float *vals;
	uint32_t *ids;
	if (!rc)
		rc = attach_head(w->att, m->slot, &ids, &vals);
	if (!rc)
		rc = select_slot(w, m->slot);
	if (rc)
		return rc;
	float *lse;
	rc = attach_head_lse(w->att, m->slot, &lse);
	if (rc)
		return rc;
	if (m->mode == MSG_HEAD_TOPK) {
		rc = engine_topk(w->e, m->tokens, m->n, m->pos0, k, ids, vals);
		if (!rc)
			rc = engine_topk_lse(w->e, 1, lse);
	} else {
		rc = engine_argmax(w->e, m->tokens, m->n, m->pos0, &ids[0]);
		vals[0] = NAN; /* the argmax kernel returns only the id */
		*lse = NAN;
	}
	if (rc)
		return rc;
	seq_advance(w, m->seq_id, m->slot, m->pos0, m->n);
	*token = ids[0];
	*k_out = k;
	return 0;
}

/* Continuous batching: one token of each entry's sequence in one engine
 * submission; each entry's head result goes to its own slot's head area. */
static int do_run_batch(struct worker *w, const struct msg_run_batch *m, uint32_t *token, uint32_t *k_out)
{
	if (m->n == 0 || m->n > MSG_MAX_SLOTS || m->n > engine_batch_max(w->e))
		return err_set(ERR_RANGE, "worker: run_batch of %u entries (this worker batches up to %u)", m->n,
			       engine_batch_max(w->e));
	uint32_t k = m->mode == MSG_HEAD_TOPK ? m->k : 1;
	if (k < 1 || k > MSG_MAX_TOPK)
		return err_set(ERR_RANGE, "worker: run_batch k %u outside [1, %d]", k, MSG_MAX_TOPK);
	uint32_t tok[MSG_MAX_SLOTS], seq[MSG_MAX_SLOTS], pos[MSG_MAX_SLOTS];
	uint32_t *ids[MSG_MAX_SLOTS];
	float *vals[MSG_MAX_SLOTS], *lse[MSG_MAX_SLOTS];
	uint64_t used = 0;
	for (uint32_t i = 0; i < m->n; i++) {
		const struct msg_run_batch_entry *e = &m->e[i];
		int rc = check_kv(w, e->seq_id, e->slot, e->pos, 1);
		if (!rc)
			rc = check_tokens(w, &e->token, 1);
		if (!rc && (used >> e->slot & 1)) /* check_seq bounds slot < max_seqs <= MSG_MAX_SLOTS */
			rc = err_set(ERR_INVAL, "worker: run_batch: slot %u appears twice", e->slot);
		if (!rc)
			rc = attach_head(w->att, e->slot, &ids[i], &vals[i]);
		if (!rc)
			rc = attach_head_lse(w->att, e->slot, &lse[i]);
		if (rc)
			return err_prefix(rc, "run_batch entry %u", i);
		used |= (uint64_t)1 << e->slot;
		tok[i] = e->token;
		seq[i] = e->slot; /* the slot is the KV slot */
		pos[i] = e->pos;
	}
	static uint32_t out_ids[MSG_MAX_SLOTS * MSG_MAX_TOPK];
	static float out_vals[MSG_MAX_SLOTS * MSG_MAX_TOPK], out_lse[MSG_MAX_SLOTS];
	int rc = engine_forward_batch(w->e, m->n, tok, seq, pos,
				      m->mode == MSG_HEAD_TOPK ? ENGINE_BATCH_TOPK : ENGINE_BATCH_ARGMAX, k, out_ids,
				      m->mode == MSG_HEAD_TOPK ? out_vals : NULL);
	if (!rc && m->mode == MSG_HEAD_TOPK)
		rc = engine_topk_lse(w->e, m->n, out_lse);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < m->n; i++) {
		head_store(ids[i], vals[i], lse[i], out_ids + (size_t)i * k, out_vals + (size_t)i * k, out_lse[i], k,
			   m->mode == MSG_HEAD_TOPK);
		seq_advance(w, m->e[i].seq_id, m->e[i].slot, m->e[i].pos, 1);
	}
	*token = ids[0][0];
	*k_out = k;
	return 0;
}

/* A MSG_CHUNK_HEAD_BIAS entry's logit_bias list and token mask, as the
 * coordinator wrote them to the slot's logits area (msg.h): checked (count,
 * ids ascending and distinct text ids, biases finite within [-100, 100])
 * into ids/vals; *mask points at the slot's mask words, or NULL. */
static int slot_bias(struct worker *w, uint32_t slot, uint32_t *ids, float *vals, uint32_t *n, const uint32_t **mask)
{
	float *row;
	int rc = attach_logits(w->att, slot, &row);
	if (rc)
		return rc;
	uint32_t cnt;
	memcpy(&cnt, row, 4);
	if (cnt > MSG_MAX_BIAS || cnt > ENGINE_BIAS_MAX || 1 + 2 * (uint64_t)cnt > w->n_vocab)
		return err_set(ERR_RANGE, "worker: run_chunks: slot %u: %u logit biases (at most %d)", slot, cnt, MSG_MAX_BIAS);
	for (uint32_t j = 0; j < cnt; j++) {
		memcpy(&ids[j], &row[1 + 2 * j], 4);
		vals[j] = row[2 + 2 * j];
		if (ids[j] >= w->n_vocab_text || (j && ids[j] <= ids[j - 1]) || !(vals[j] >= -100.0f && vals[j] <= 100.0f))
			return err_set(ERR_INVAL, "worker: run_chunks: slot %u: logit bias %u (token %u, %g) bad or out of order",
				       slot, j, ids[j], (double)vals[j]);
	}
	*n = cnt;
	uint32_t flag;
	memcpy(&flag, &row[MSG_SLOT_MASK_FLAG], 4);
	if (flag > 1 || (flag && MSG_SLOT_MASK + ((uint64_t)w->n_vocab + 31) / 32 > w->n_vocab))
		return err_set(ERR_INVAL, "worker: run_chunks: slot %u: mask flag %u (a vocabulary of %u)", slot, flag,
			       w->n_vocab);
	*mask = flag ? (const uint32_t *)&row[MSG_SLOT_MASK] : NULL;
	return 0;
}

/* run_chunks with a MSG_CHUNK_HEAD_FULL entry: the engine gives every head
 * row's whole logit row; the rows of the full entries go to their logits
 * areas (their head areas get no candidates: the coordinator reads the row),
 * the others' top-k (or argmax) and log-sum-exp the worker takes itself, as
 * HEAD does. Only submissions with such an entry take this path:
 * the others keep the GPU's own top-k. */
static int run_chunks_full(struct worker *w, const struct msg_run_chunks *m, const struct engine_chunk *ch,
			   uint32_t n_head, uint32_t k, uint32_t **ids, float **vals, float **lse, float **full,
			   const uint32_t *nb, uint32_t (*b_ids)[MSG_MAX_BIAS], float (*b_vals)[MSG_MAX_BIAS],
			   const uint32_t *const *bm, uint32_t *token, uint32_t *k_out)
{
	static float *rows;
	static size_t cap;
	size_t need = (size_t)n_head * w->n_vocab;
	if (need > cap) {
		float *r = realloc(rows, need * sizeof *r);
		if (!r)
			return err_set(ERR_NOMEM, "worker: run_chunks: %zu logits: out of memory", need);
		rows = r;
		cap = need;
	}
	static uint32_t dummy_ids[MSG_MAX_SLOTS];
	uint32_t hc[MSG_MAX_SLOTS]; /* the head chunks' entries, in order */
	for (uint32_t i = 0, j = 0; i < m->n; i++)
		if (ch[i].head)
			hc[j++] = i;
	int rc = engine_forward_chunks(w->e, m->n, ch, m->flags & MSG_CHUNKS_WIDE, ENGINE_BATCH_LOGITS, 1, dummy_ids,
				       rows);
	if (rc)
		return rc;
	for (uint32_t j = 0; j < n_head; j++) {
		float *row = rows + (size_t)j * w->n_vocab;
		for (uint32_t i = w->n_vocab_text; i < w->n_vocab; i++)
			row[i] = -INFINITY; /* not text: never sampled (the GPU head skips them too) */
		if (full[j]) {
			/* the coordinator picks from the row (and takes the top-k and
			 * log-sum-exp from it when it needs them for logprobs) */
			memcpy(full[j], row, (size_t)w->n_vocab * sizeof *row);
			for (uint32_t i = 0; i < k; i++)
				ids[j][i] = 0, vals[j][i] = -INFINITY;
			*lse[j] = NAN;
			continue;
		}
		/* a MSG_CHUNK_HEAD_BIAS row beside full ones: its biases and mask here */
		for (uint32_t b = 0; b < nb[hc[j]]; b++)
			row[b_ids[hc[j]][b]] += b_vals[hc[j]][b];
		for (uint32_t t = 0; bm[hc[j]] && t < w->n_vocab_text; t++)
			if (!(bm[hc[j]][t / 32] >> (t % 32) & 1))
				row[t] = -INFINITY;
		uint32_t got = topk(row, w->n_vocab_text, k, ids[j], vals[j]);
		if (got == 0)
			return err_set(ERR_RANGE, "worker: run_chunks: head row %u has no finite logit", j);
		for (uint32_t i = got; i < k; i++)
			ids[j][i] = ids[j][0], vals[j][i] = -INFINITY;
		double mx = vals[j][0], sum = 0;
		for (uint32_t i = 0; i < w->n_vocab_text; i++)
			if (row[i] > -INFINITY)
				sum += exp((double)row[i] - mx);
		*lse[j] = (float)(mx + log(sum));
	}
	for (uint32_t i = 0; i < m->n; i++)
		seq_advance(w, m->e[i].seq_id, m->e[i].slot, m->e[i].pos0, m->e[i].n);
	*token = n_head ? ids[0][0] : 0;
	*k_out = n_head ? k : 0;
	return 0;
}

/* Batched prefill and decode: a chunk of each entry's sequence in one engine
 * submission; an entry with a head gets its last row's result in its slot's
 * head area. */
static int do_run_chunks(struct worker *w, const struct msg_run_chunks *m, uint32_t *token, uint32_t *k_out)
{
	if (m->n == 0 || m->n > MSG_MAX_SLOTS || m->n > engine_batch_max(w->e) || m->n_tok > engine_rows_max(w->e))
		return err_set(ERR_RANGE, "worker: run_chunks of %u entries, %u rows (this worker runs up to %u, %u)", m->n,
			       m->n_tok, engine_batch_max(w->e), engine_rows_max(w->e));
	uint32_t k = m->mode == MSG_HEAD_TOPK ? m->k : 1;
	if (k < 1 || k > MSG_MAX_TOPK)
		return err_set(ERR_RANGE, "worker: run_chunks k %u outside [1, %d]", k, MSG_MAX_TOPK);
	struct engine_chunk ch[MSG_MAX_SLOTS];
	uint32_t *ids[MSG_MAX_SLOTS], n_head = 0, at = 0;
	float *vals[MSG_MAX_SLOTS], *lse[MSG_MAX_SLOTS], *full[MSG_MAX_SLOTS];
	uint64_t used = 0;
	bool any_full = false;
	static uint32_t b_ids[MSG_MAX_SLOTS][MSG_MAX_BIAS], nb[MSG_MAX_SLOTS];
	static const uint32_t *bm[MSG_MAX_SLOTS];
	static float b_vals[MSG_MAX_SLOTS][MSG_MAX_BIAS];
	for (uint32_t i = 0; i < m->n; i++) {
		const struct msg_run_chunk *e = &m->e[i];
		if (e->head == MSG_CHUNK_HEAD_FULL) {
			int rc = attach_logits(w->att, e->slot, &full[n_head]);
			if (rc)
				return err_prefix(rc, "run_chunks entry %u", i);
			any_full = true;
		} else {
			full[n_head] = NULL;
		}
		int rc = e->n > m->n_tok - at ? err_set(ERR_INVAL, "worker: run_chunks: tokens short") : 0;
		if (!rc)
			rc = check_kv(w, e->seq_id, e->slot, e->pos0, e->n);
		if (!rc)
			rc = check_tokens(w, m->tokens + at, e->n);
		if (!rc && (used >> e->slot & 1)) /* check_seq bounds slot < max_seqs <= MSG_MAX_SLOTS */
			rc = err_set(ERR_INVAL, "worker: run_chunks: slot %u appears twice", e->slot);
		if (!rc && e->head)
			rc = attach_head(w->att, e->slot, &ids[n_head], &vals[n_head]);
		if (!rc && e->head)
			rc = attach_head_lse(w->att, e->slot, &lse[n_head++]);
		if (rc)
			return err_prefix(rc, "run_chunks entry %u", i);
		used |= (uint64_t)1 << e->slot;
		ch[i] = (struct engine_chunk){ e->slot, e->pos0, e->n, m->tokens + at, e->head != 0 };
		nb[i] = 0;
		bm[i] = NULL;
		if (e->head == MSG_CHUNK_HEAD_BIAS) {
			if (m->mode != MSG_HEAD_TOPK)
				return err_set(ERR_INVAL, "worker: run_chunks entry %u: logit biases need the top-k head", i);
			if ((rc = slot_bias(w, e->slot, b_ids[i], b_vals[i], &nb[i], &bm[i])))
				return err_prefix(rc, "run_chunks entry %u", i);
		}
		at += e->n;
	}
	static uint32_t out_ids[MSG_MAX_SLOTS * MSG_MAX_TOPK];
	static float out_vals[MSG_MAX_SLOTS * MSG_MAX_TOPK], out_lse[MSG_MAX_SLOTS];
	bool tk = m->mode == MSG_HEAD_TOPK;
	/* the GPU top-k adds the biases (the full path adds them on the CPU) */
	for (uint32_t i = 0; i < m->n && !any_full; i++) {
		int rc = nb[i] || bm[i] ? engine_chunk_bias(w->e, i, b_ids[i], b_vals[i], nb[i], bm[i]) : 0;
		if (rc)
			return err_prefix(rc, "run_chunks entry %u", i);
	}
	if (any_full)
		return run_chunks_full(w, m, ch, n_head, k, ids, vals, lse, full, nb, b_ids, b_vals, bm, token, k_out);
	int rc = engine_forward_chunks(w->e, m->n, ch, m->flags & MSG_CHUNKS_WIDE,
				       tk ? ENGINE_BATCH_TOPK : ENGINE_BATCH_ARGMAX, k, out_ids, tk ? out_vals : NULL);
	if (!rc && tk && n_head)
		rc = engine_topk_lse(w->e, n_head, out_lse);
	if (rc)
		return rc;
	for (uint32_t j = 0; j < n_head; j++)
		head_store(ids[j], vals[j], lse[j], out_ids + (size_t)j * k, out_vals + (size_t)j * k, out_lse[j], k, tk);
	for (uint32_t i = 0; i < m->n; i++)
		seq_advance(w, m->e[i].seq_id, m->e[i].slot, m->e[i].pos0, m->e[i].n);
	*token = n_head ? ids[0][0] : 0;
	*k_out = n_head ? k : 0;
	return 0;
}

/* A STAGE_BATCH head of mode MSG_HEAD_FULL (a constrained request among its
 * rows): every row's whole logit row from the engine, into its slot's
 * logits area, and its top-k and log-sum-exp into the head area from the
 * row on the CPU (the split placement's counterpart of run_chunks_full). */
static int stage_batch_full(struct worker *w, const struct msg_stage_batch *m, bool wide, uint32_t k,
			    uint32_t *token, uint32_t *k_out)
{
	static float *rows;
	static size_t cap;
	size_t need = (size_t)m->n * w->n_vocab;
	if (need > cap) {
		float *r = realloc(rows, need * sizeof *r);
		if (!r)
			return err_set(ERR_NOMEM, "worker: stage_batch: %zu logits: out of memory", need);
		rows = r;
		cap = need;
	}
	int rc = engine_head_batch(w->e, m->n, w->rows, wide, ENGINE_BATCH_LOGITS, k, NULL, rows);
	for (uint32_t i = 0; !rc && i < m->n; i++) {
		uint32_t got;
		rc = row_head(w, m->e[i].slot, rows + (size_t)i * w->n_vocab, k, true, &got);
	}
	uint32_t *ids;
	float *vals;
	if (!rc)
		rc = attach_head(w->att, m->e[0].slot, &ids, &vals);
	if (rc)
		return rc;
	*token = ids[0];
	*k_out = k;
	return 0;
}

/* Split placement, several sequences: one op for every entry (row 0 of its
 * slot). Rows are gathered from their slots into one engine submission and
 * scattered back; each is computed as a lone token's stage would be. */
static int do_stage_batch(struct worker *w, const struct msg_stage_batch *m, bool wide, uint32_t *token,
			  uint32_t *k_out)
{
	if (m->n == 0 || m->n > MSG_MAX_SLOTS || m->n > engine_batch_max(w->e))
		return err_set(ERR_RANGE, "worker: stage_batch of %u entries (this worker batches up to %u)", m->n,
			       engine_batch_max(w->e));
	if ((m->op == MSG_OP_ATTN || m->op == MSG_OP_FFN) && m->layer >= w->n_layer)
		return err_set(ERR_RANGE, "worker: stage_batch: layer %u outside the model's %u", m->layer, w->n_layer);
	uint32_t k = m->op == MSG_OP_HEAD && m->mode != MSG_HEAD_ARGMAX ? m->k : 1;
	if (k < 1 || k > MSG_MAX_TOPK)
		return err_set(ERR_RANGE, "worker: stage_batch k %u outside [1, %d]", k, MSG_MAX_TOPK);
	uint32_t tok[MSG_MAX_SLOTS], seq[MSG_MAX_SLOTS], pos[MSG_MAX_SLOTS];
	float *h[MSG_MAX_SLOTS];
	uint64_t used = 0;
	size_t row = (size_t)w->n_embd;
	/* attention and FFN rows go straight into the engine's host-visible rows
	 * and come back from there (no staging copy) */
	bool staged = m->op == MSG_OP_ATTN || m->op == MSG_OP_FFN;
	float *rows = staged ? engine_stage_rows(w->e) : w->rows;
	for (uint32_t i = 0; i < m->n; i++) {
		const struct msg_run_batch_entry *e = &m->e[i];
		int rc = m->op == MSG_OP_ATTN ? check_kv(w, e->seq_id, e->slot, e->pos, 1) : check_rows(w, e->slot, 1);
		if (!rc && m->op == MSG_OP_EMBED)
			rc = check_tokens(w, &e->token, 1);
		if (!rc && (used >> e->slot & 1))
			rc = err_set(ERR_INVAL, "worker: stage_batch: slot %u appears twice", e->slot);
		if (!rc)
			rc = attach_hidden(w->att, e->slot, 0, 1, &h[i]);
		if (rc)
			return err_prefix(rc, "stage_batch entry %u", i);
		used |= (uint64_t)1 << e->slot;
		tok[i] = e->token;
		seq[i] = e->slot; /* the slot is the KV slot */
		pos[i] = e->pos;
		if (m->op != MSG_OP_EMBED)
			memcpy(rows + i * row, h[i], row * sizeof *rows);
	}
	int rc = 0;
	*token = 0;
	*k_out = 0;
	switch (m->op) {
	case MSG_OP_EMBED:
		rc = engine_embed(w->e, tok, m->n);
		if (!rc)
			rc = engine_hidden_get(w->e, w->rows, m->n);
		break;
	case MSG_OP_ATTN:
	case MSG_OP_FFN:
		rc = w->range_n && m->op == MSG_OP_ATTN
			     ? engine_stage_range(w->e, m->layer, w->range_n, m->n, seq, pos, wide, NULL, NULL)
			     : engine_stage_batch(w->e, m->layer, m->op == MSG_OP_ATTN ? ENGINE_STAGE_ATTN : ENGINE_STAGE_FFN,
						  m->n, seq, pos, wide, NULL, NULL);
		break;
	default: { /* MSG_OP_HEAD */
		if (m->mode == MSG_HEAD_FULL)
			return stage_batch_full(w, m, wide, k, token, k_out);
		static uint32_t out_ids[MSG_MAX_SLOTS * MSG_MAX_TOPK];
		static float out_vals[MSG_MAX_SLOTS * MSG_MAX_TOPK], out_lse[MSG_MAX_SLOTS];
		bool tk = m->mode == MSG_HEAD_TOPK;
		rc = engine_head_batch(w->e, m->n, w->rows, wide, tk ? ENGINE_BATCH_TOPK : ENGINE_BATCH_ARGMAX, k, out_ids,
				       tk ? out_vals : NULL);
		if (!rc && tk)
			rc = engine_topk_lse(w->e, m->n, out_lse);
		for (uint32_t i = 0; !rc && i < m->n; i++) {
			uint32_t *ids;
			float *vals, *lse;
			if ((rc = attach_head(w->att, m->e[i].slot, &ids, &vals)) ||
			    (rc = attach_head_lse(w->att, m->e[i].slot, &lse)))
				break;
			head_store(ids, vals, lse, out_ids + (size_t)i * k, out_vals + (size_t)i * k, out_lse[i], k, tk);
		}
		if (!rc) {
			*token = out_ids[0];
			*k_out = k;
		}
		return rc;
	}
	}
	if (rc)
		return rc;
	for (uint32_t i = 0; i < m->n; i++) {
		memcpy(h[i], rows + i * row, row * sizeof *rows);
		if (m->op == MSG_OP_ATTN)
			seq_advance(w, m->e[i].seq_id, m->e[i].slot, m->e[i].pos, 1);
	}
	return 0;
}

static int do_reset(struct worker *w, const struct msg_reset_seq *m)
{
	int rc = 0;
	for (uint32_t s = 0; s < w->max_seqs; s++) {
		struct wslot *ws = &w->slot[s];
		if (!(m->flags & MSG_RESET_ALL) && !(ws->bound && ws->seq_id == m->seq_id))
			continue;
		ws->bound = false;
		ws->pos_next = 0;
		if (!(m->flags & MSG_RESET_ALL)) {
			int r = engine_seq_reset(w->e, s);
			rc = rc ? rc : r;
		}
	}
	if (m->flags & MSG_RESET_ALL) {
		int r = engine_reset(w->e);
		rc = rc ? rc : r;
	}
	return rc;
}

/* The device time of a step that began at t0 (engine time g0): busy = the
 * accelerator's own time (timestamp queries); steps the engine does not
 * time (embed, head) count their wall time. Counted in STATUS when step. */
static uint64_t count_busy(struct worker *w, uint64_t t0, uint64_t g0, bool step)
{
	uint64_t dt = engine_gpu_ns(w->e) - g0;
	if (!dt)
		dt = mono_ns() - t0;
	if (step) {
		atomic_fetch_add(&w->busy_ns, dt);
		atomic_fetch_add(&w->steps, 1);
	}
	return dt;
}

static uint32_t sat_u32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static void answer_error(struct msg *out, uint32_t ref_seq, int code)
{
	msg_init(out, MSG_ERROR);
	out->u.error.code = code < 0 ? code : ERR_INVAL;
	out->u.error.ref_seq = ref_seq;
	msg_set_str(out->u.error.text, sizeof out->u.error.text, err_msg());
}

bool worker_handle(struct worker *w, const struct msg *in, struct msg *out)
{
	err_clear();
	uint32_t stage = in->type == MSG_STAGE ? in->u.stage.stage :
			 in->type == MSG_STAGE_BATCH ? in->u.stage_batch.op : 0;
	if (!serves(w, in->type, stage)) {
		err_set(ERR_UNSUP, "worker: the %s worker does not run %s%s", w->o.role == MSG_ROLE_GPU_WORKER ? "gpu" : "npu",
			msg_type_name(in->type), in->type == MSG_STAGE ? (stage == MSG_STAGE_ATTN ? " attn" : " ffn/layers") : "");
		answer_error(out, in->seq, ERR_UNSUP);
		out->seq = in->seq;
		return true;
	}
	uint64_t t0 = mono_ns(), g0 = engine_gpu_ns(w->e);
	uint32_t token = 0, k = 0, seq_id = 0;
	int rc;
	switch (in->type) {
	case MSG_HELLO:
		if (in->u.hello.version != MSG_VERSION) {
			err_set(ERR_INVAL, "worker: HELLO version %u, we speak %d (stale binary?)", in->u.hello.version,
				MSG_VERSION);
			answer_error(out, in->seq, ERR_INVAL);
			break;
		}
		msg_init(out, MSG_WELCOME);
		out->u.hello = (struct msg_hello){ w->o.role, (uint32_t)getpid(), MSG_VERSION, 0 };
		break;
	case MSG_PING:
		msg_init(out, MSG_PONG);
		out->u.ping = in->u.ping;
		break;
	case MSG_STATUS_REQ:
		msg_init(out, MSG_STATUS);
		worker_status(w, &out->u.status);
		break;
	case MSG_EMBED: case MSG_STAGE: case MSG_HEAD: case MSG_RUN: case MSG_RUN_BATCH: case MSG_RESET_SEQ:
	case MSG_STAGE_BATCH: case MSG_RUN_CHUNKS:
		if (w->test_delay_ms && in->type != MSG_RESET_SEQ)
			usleep(w->test_delay_ms * 1000u);
		if (in->type == MSG_RUN_CHUNKS)
			seq_id = in->u.run_chunks.e[0].seq_id, rc = do_run_chunks(w, &in->u.run_chunks, &token, &k);
		else if (in->type == MSG_STAGE_BATCH)
			seq_id = in->u.stage_batch.e[0].seq_id, rc = do_stage_batch(w, &in->u.stage_batch, false, &token, &k);
		else if (in->type == MSG_EMBED)
			seq_id = in->u.embed.seq_id, rc = do_embed(w, &in->u.embed);
		else if (in->type == MSG_STAGE)
			seq_id = in->u.stage.seq_id, rc = do_stage(w, &in->u.stage);
		else if (in->type == MSG_HEAD)
			seq_id = in->u.head.seq_id, rc = do_head(w, &in->u.head, &token, &k);
		else if (in->type == MSG_RUN)
			seq_id = in->u.run.seq_id, rc = do_run(w, &in->u.run, &token, &k);
		else if (in->type == MSG_RUN_BATCH)
			seq_id = in->u.run_batch.e[0].seq_id, rc = do_run_batch(w, &in->u.run_batch, &token, &k);
		else
			seq_id = in->u.reset_seq.seq_id, rc = do_reset(w, &in->u.reset_seq);
		if (rc) {
			answer_error(out, in->seq, rc);
			break;
		}
		uint64_t dt = count_busy(w, t0, g0, in->type != MSG_RESET_SEQ);
		msg_init(out, MSG_DONE);
		out->u.done = (struct msg_done){ .ref_seq = in->seq, .seq_id = seq_id, .status = 0, .token = token,
						 .k = k, .wall_us = sat_u32((mono_ns() - t0) / 1000), .gpu_ns = dt };
		break;
	case MSG_IMAGE:
		rc = worker_image_encode(w->img, w->e, w->o.rundir, &in->u.image);
		if (rc) {
			answer_error(out, in->seq, rc);
			break;
		}
		msg_init(out, MSG_DONE);
		out->u.done = (struct msg_done){ .ref_seq = in->seq, .wall_us = sat_u32((mono_ns() - t0) / 1000),
						 .gpu_ns = count_busy(w, t0, g0, true) };
		break;
	default:
		err_set(ERR_UNSUP, "worker: unexpected %s", msg_type_name(in->type));
		answer_error(out, in->seq, ERR_UNSUP);
		break;
	}
	out->seq = in->seq; /* answers echo the request's seq */
	return true;
}

static void dp_attach(struct worker *w, uint32_t coord_pid);
static int check_ident(struct worker *w);

int worker_serve(struct worker *w, int timeout_ms)
{
	int rc = bus_recv(w->bus, timeout_ms, &w->in);
	if (rc == ERR_INVAL) {
		/* the decoder dropped a malformed message: say so instead of going silent */
		answer_error(&w->out, 0, ERR_INVAL);
		bus_send(w->bus, &w->out);
		return rc;
	}
	if (rc)
		return rc;
	if (!worker_handle(w, &w->in, &w->out))
		return 0;
	if (w->in.type == MSG_HELLO && w->out.type == MSG_WELCOME) {
		dp_attach(w, w->in.u.hello.pid);
		if ((rc = check_ident(w)))
			return rc; /* no WELCOME: this worker must not serve */
	}
	return bus_send(w->bus, &w->out);
}

/* A coordinator said HELLO: map the data plane it made (a fresh file per
 * coordinator). Without one (tests that drive the worker over nng alone)
 * every message keeps coming over the link. */
static void dp_attach(struct worker *w, uint32_t coord_pid)
{
	dp_drop(w);
	int rc = dp_open(w->o.rundir, &w->dp);
	if (rc) {
		if (rc != ERR_NOTFOUND)
			fprintf(stderr, "worker: %s; step messages stay on the link\n", err_msg());
		return;
	}
	w->dp_on = true;
	w->coord_pid = (pid_t)coord_pid;
	set_awake_bell(w, w->dp.link[my_link(w)].bell);
}

static enum dp_link my_link(const struct worker *w)
{
	return w->o.role == MSG_ROLE_NPU_WORKER ? DP_NPU : DP_GPU;
}

/* After a HELLO: does the coordinator use the regions this worker imported?
 * The activation region carries every hidden state, head output and KV block
 * table between the processes, so all of them must share one loader's. A
 * coordinator on a newer loader's regions (it re-attached after the loader
 * restarted) makes this worker stale: it refuses to answer and exits to
 * re-import. One on an older loader's (this worker restarted after the
 * loader did) sees our identity on the link and re-attaches itself. */
static int check_ident(struct worker *w)
{
	if (!w->dp_on)
		return 0;
	uint64_t c = dp_coord_ident(&w->dp), mine = w->att->ident;
	if (c > mine) {
		w->stale = true;
		dp_drop(w);
		return err_set(ERR_STATE, "worker: the coordinator works on regions of loader instance %016llx, this "
			       "worker imported those of %016llx (the loader restarted since): refusing to serve, "
			       "exiting to re-import", (unsigned long long)c, (unsigned long long)mine);
	}
	dp_set_worker_ident(&w->dp, my_link(w), mine);
	return 0;
}

static void profile_op(struct worker *w, uint64_t wall, uint64_t gpu, uint64_t submit, uint64_t wait, uint32_t hop_us)
{
	w->prof_ops++;
	w->prof_wall_ns += wall;
	w->prof_gpu_ns += gpu;
	w->prof_submit_ns += submit;
	w->prof_wait_ns += wait;
	w->prof_hop_ns += (uint64_t)hop_us * 1000;
	if (w->prof_ops < 256)
		return;
	double n = (double)w->prof_ops * 1000.0;
	fprintf(stderr, "worker profile: %llu flow ops: wall %.1f us/op = host %.1f (checks, row copies, "
		"recording) + vkQueueSubmit %.1f + fence wait %.1f (device time %.1f); handoff %.1f us\n",
		(unsigned long long)w->prof_ops, w->prof_wall_ns / n,
		(double)(w->prof_wall_ns - w->prof_submit_ns - w->prof_wait_ns) / n, w->prof_submit_ns / n,
		w->prof_wait_ns / n, w->prof_gpu_ns / n, w->prof_hop_ns / n);
	w->prof_ops = w->prof_wall_ns = w->prof_gpu_ns = w->prof_submit_ns = w->prof_wait_ns = w->prof_hop_ns = 0;
}

/* The op after f's op in a flow (msg.h FLOW): EMBED, (ATTN l, FFN l) per
 * layer, HEAD when the step samples, then END. */
static uint32_t flow_next(const struct msg_flow *f, uint32_t *layer)
{
	*layer = 0;
	switch (f->op) {
	case MSG_OP_EMBED: return MSG_OP_ATTN;
	case MSG_OP_ATTN: *layer = f->layer; return MSG_OP_FFN;
	case MSG_OP_FFN:
		if (f->layer + 1 < f->n_layer) {
			*layer = f->layer + 1;
			return MSG_OP_ATTN;
		}
		return f->flags & MSG_FLOW_HEAD ? MSG_OP_HEAD : MSG_OP_END;
	default: return MSG_OP_END;
	}
}

/* One chunk of a chunk FLOW's op: what the EMBED, STAGE and HEAD messages of
 * the per-sequence path run, with their checks. */
static int flow_chunk_one(struct worker *w, const struct msg_flow *f, const struct msg_run_batch_entry *e,
			  const uint32_t *tokens, uint32_t n, uint32_t *token, uint32_t *k)
{
	switch (f->op) {
	case MSG_OP_EMBED: {
		static struct msg_embed m;
		m.seq_id = e->seq_id;
		m.slot = e->slot;
		m.n = n;
		memcpy(m.tokens, tokens, (size_t)n * sizeof *m.tokens);
		return do_embed(w, &m);
	}
	case MSG_OP_ATTN:
	case MSG_OP_FFN: {
		struct msg_stage m = { e->seq_id, e->slot, f->op == MSG_OP_ATTN ? MSG_STAGE_ATTN : MSG_STAGE_FFN, f->layer, 1,
				       n, e->pos };
		if (w->range_n && f->op == MSG_OP_ATTN) { /* a pipeline stage: its whole layers */
			m.stage = MSG_STAGE_LAYERS;
			m.n_layers = w->range_n;
		}
		return do_stage(w, &m);
	}
	default: {
		struct msg_head m = { e->seq_id, e->slot, n, f->mode, f->k };
		return do_head(w, &m, token, k);
	}
	}
}

/* Run the pieces gathered in the engine's rows (flow_chunk_stage) and put
 * each piece's rows back into its slot. */
static int chunk_stage_run(struct worker *w, const struct msg_flow *f, const struct engine_chunk *ch,
			   const uint32_t *slot_row0, uint32_t n)
{
	enum engine_stage st = f->op == MSG_OP_ATTN ? ENGINE_STAGE_ATTN : ENGINE_STAGE_FFN;
	int rc = w->range_n && f->op == MSG_OP_ATTN ? engine_stage_chunks_range(w->e, f->layer, w->range_n, n, ch, NULL, NULL)
							: engine_stage_chunks(w->e, f->layer, st, n, ch, NULL, NULL);
	const float *rows = engine_stage_rows(w->e);
	size_t row = (size_t)w->n_embd;
	for (uint32_t i = 0, r = 0; !rc && i < n; r += ch[i].n, i++) {
		float *h;
		rc = attach_hidden(w->att, ch[i].seq, slot_row0[i], ch[i].n, &h);
		if (!rc)
			memcpy(h, rows + (size_t)r * row, (size_t)ch[i].n * row * sizeof *h);
	}
	return rc;
}

static int flow_chunk_one(struct worker *w, const struct msg_flow *f, const struct msg_run_batch_entry *e,
			  const uint32_t *tokens, uint32_t n, uint32_t *token, uint32_t *k);

/* A chunk FLOW's ATTN or FFN op. Chunks of several tokens (prompts) run
 * together in as few engine submissions as the engine's rows allow
 * (engine_stage_chunks; a chunk may be cut between two of them), all on the
 * mat-mat kernel, so a chunk's rows are the same whatever runs beside it or
 * where it was cut, and a replay rebuilds them exactly. A one-token chunk (a
 * lone decoder) runs alone with the lone token's kernels, as the decode
 * micro-batches compute it (its replay may go either way). */
static int flow_chunk_stage(struct worker *w, const struct msg_flow *f)
{
	struct engine_chunk ch[MSG_MAX_SLOTS];
	uint32_t slot_row0[MSG_MAX_SLOTS], nb = 0, rows = 0, at = 0, cap = engine_rows_max(w->e);
	float *dst = engine_stage_rows(w->e);
	size_t row = (size_t)w->n_embd;
	/* the one-token chunks first: their calls use the engine's rows too */
	for (uint32_t i = 0; i < f->n; at += f->e[i].token & MSG_CHUNK_COUNT, i++) {
		uint32_t n = f->e[i].token & MSG_CHUNK_COUNT, tk, kk;
		if (n > f->n_tok - at) /* msg_validate sums them; checked again where they are used */
			return err_set(ERR_INVAL, "worker: chunk FLOW: entry %u's %u tokens past n_tok %u", i, n, f->n_tok);
		int rc = n == 1 ? flow_chunk_one(w, f, &f->e[i], f->tokens + at, n, &tk, &kk) : 0;
		if (rc)
			return err_prefix(rc, "chunk %u of the FLOW", i);
	}
	at = 0;
	for (uint32_t i = 0; i < f->n; at += f->e[i].token & MSG_CHUNK_COUNT, i++) {
		const struct msg_run_batch_entry *e = &f->e[i];
		uint32_t n = e->token & MSG_CHUNK_COUNT;
		if (n == 1)
			continue;
		int rc = f->op == MSG_OP_ATTN ? check_kv(w, e->seq_id, e->slot, e->pos, n) : check_rows(w, e->slot, n);
		if (rc)
			return err_prefix(rc, "chunk %u of the FLOW", i);
		for (uint32_t done = 0; done < n;) {
			if (rows == cap || nb == MSG_MAX_SLOTS) {
				if ((rc = chunk_stage_run(w, f, ch, slot_row0, nb)))
					return err_prefix(rc, "chunks of the FLOW");
				nb = rows = 0;
			}
			uint32_t c = n - done < cap - rows ? n - done : cap - rows;
			float *h;
			if ((rc = attach_hidden(w->att, e->slot, done, c, &h)))
				return err_prefix(rc, "chunk %u of the FLOW", i);
			memcpy(dst + (size_t)rows * row, h, (size_t)c * row * sizeof *h);
			ch[nb] = (struct engine_chunk){ e->slot, e->pos + done, c, f->tokens + at + done, false };
			slot_row0[nb++] = done;
			rows += c;
			done += c;
		}
	}
	int rc = nb ? chunk_stage_run(w, f, ch, slot_row0, nb) : 0;
	if (rc)
		return err_prefix(rc, "chunks of the FLOW");
	for (uint32_t i = 0; f->op == MSG_OP_ATTN && i < f->n; i++) {
		uint32_t n = f->e[i].token & MSG_CHUNK_COUNT;
		if (n > 1) /* flow_chunk_one advanced the others */
			seq_advance(w, f->e[i].seq_id, f->e[i].slot, f->e[i].pos, n);
	}
	return 0;
}

/* A chunk FLOW's op: ATTN and FFN as flow_chunk_stage; EMBED and HEAD each
 * sequence's prompt chunk in entry order, one after the other in this worker
 * (one handoff for all of them), each exactly as it would run alone; HEAD
 * only for the chunks that sample (their slots' head areas hold the results;
 * *token is the first one's). */
static int flow_chunk_op(struct worker *w, const struct msg_flow *f, uint32_t *token, uint32_t *k)
{
	if (f->op == MSG_OP_ATTN || f->op == MSG_OP_FFN)
		return flow_chunk_stage(w, f);
	uint32_t at = 0;
	bool told = false;
	for (uint32_t i = 0; i < f->n; i++) {
		const struct msg_run_batch_entry *e = &f->e[i];
		uint32_t n = e->token & MSG_CHUNK_COUNT, tk = 0, kk = 0;
		if (n > f->n_tok - at) /* msg_validate sums them; checked again where they are used */
			return err_set(ERR_INVAL, "worker: chunk FLOW: entry %u's %u tokens past n_tok %u", i, n, f->n_tok);
		int rc = f->op == MSG_OP_HEAD && !(e->token & MSG_CHUNK_HEAD)
				 ? 0
				 : flow_chunk_one(w, f, e, f->tokens + at, n, &tk, &kk);
		if (rc)
			return err_prefix(rc, "chunk %u of the FLOW", i);
		if (f->op == MSG_OP_HEAD && (e->token & MSG_CHUNK_HEAD) && !told) {
			*token = tk;
			*k = kk;
			told = true;
		}
		at += n;
	}
	return 0;
}

static int flow_op_one(struct worker *w, const struct msg_flow *f, uint32_t *token, uint32_t *k);

/* A FLOW's current op: a chunk's, or the micro-batch's as its STAGE_BATCH.
 * A pipeline stage runs its layers from the op's on as one op (the ATTN op
 * of the first: attention and FFN of each, one submission, a one-layer
 * stage's too; *layers: how many; 0 for any other op). */
static int flow_op(struct worker *w, const struct msg_flow *f, uint32_t *token, uint32_t *k, uint32_t *layers)
{
	*layers = 0;
	if (w->pipe && f->op == MSG_OP_ATTN && !w->per_layer)
		*layers = w->l1 - f->layer;
	w->range_n = *layers;
	int rc = flow_op_one(w, f, token, k);
	w->range_n = 0;
	return rc;
}

static int flow_op_one(struct worker *w, const struct msg_flow *f, uint32_t *token, uint32_t *k)
{
	if (f->flags & MSG_FLOW_CHUNK)
		return flow_chunk_op(w, f, token, k);
	static struct msg_stage_batch sb;
	sb.op = f->op;
	sb.layer = f->layer;
	sb.n = f->n;
	sb.mode = f->op == MSG_OP_HEAD ? f->mode : MSG_HEAD_ARGMAX;
	sb.k = f->op == MSG_OP_HEAD ? f->k : 1;
	memcpy(sb.e, f->e, (size_t)f->n * sizeof *f->e);
	return do_stage_batch(w, &sb, f->flags & MSG_FLOW_WIDE, token, k);
}

/* Run a FLOW's ops for as long as they are this worker's, then pass it on:
 * to the other worker's peer ring, or, once it ended (or an op failed), to
 * the coordinator through this worker's done ring. A FLOW from an older
 * epoch (a step the coordinator gave up on in a recovery) is dropped. */
static int worker_flow(struct worker *w, struct msg *m)
{
	struct msg_flow *f = &m->u.flow;
	if (f->epoch != dp_epoch(&w->dp))
		return 0;
	uint64_t t_in = mono_ns();
	uint64_t from = f->t_post_ns > w->t_free_ns ? f->t_post_ns : w->t_free_ns;
	if (f->n_hops < MSG_MAX_HOPS)
		f->hop_us[f->n_hops++] = sat_u32(t_in > from ? (t_in - from) / 1000 : 0);
	if (f->n_layer != w->n_layer) {
		err_set(ERR_INVAL, "worker: FLOW for a model of %u layers (this one has %u)", f->n_layer, w->n_layer);
		f->op = MSG_OP_END;
		f->status = ERR_INVAL;
	}
	if (w->test_delay_ms)
		usleep(w->test_delay_ms * 1000u);
	while (f->op != MSG_OP_END && flow_mine(w, f)) {
		uint64_t t0 = mono_ns(), g0 = engine_gpu_ns(w->e);
		struct vk_ctx *vk = engine_vk(w->e);
		uint64_t s0 = vk->submit_ns, q0 = vk->wait_ns;
		uint32_t token = 0, k = 0, layers = 0;
		err_clear();
		int rc = flow_op(w, f, &token, &k, &layers);
		/* a pipeline's stage 0 reports as the FFN side, stage 1 as the other */
		int side = w->pipe ? (my_link(w) == DP_GPU ? MSG_FLOW_FFN : MSG_FLOW_ATTN)
				   : f->op == MSG_OP_ATTN ? MSG_FLOW_ATTN : MSG_FLOW_FFN;
		uint64_t dt = count_busy(w, t0, g0, true), t1 = mono_ns();
		f->gpu_ns[side] += dt;
		f->wall_us[side] = sat_u32(f->wall_us[side] + (t1 - t0) / 1000);
		if ((f->flags & MSG_FLOW_TIMES) && f->n_ops < MSG_MAX_HOPS) {
			f->op_us[2 * f->n_ops] = sat_u32(t0 > f->t_origin_ns ? (t0 - f->t_origin_ns) / 1000 : 0);
			f->op_us[2 * f->n_ops + 1] = sat_u32((t1 - t0) / 1000);
			f->n_ops++;
		}
		if (w->profile)
			profile_op(w, t1 - t0, dt, vk->submit_ns - s0, vk->wait_ns - q0,
				   f->n_hops ? f->hop_us[f->n_hops - 1] : 0);
		if (rc) {
			fprintf(stderr, "worker: flow op %u layer %u: %s\n", f->op, f->layer, err_msg());
			f->op = MSG_OP_END;
			f->status = rc < 0 && rc >= -64 ? rc : ERR_INVAL;
			break;
		}
		if (f->op == MSG_OP_HEAD)
			f->token = token;
		if (layers) { /* the FFN of the range's last layer ran too */
			f->op = MSG_OP_FFN;
			f->layer += layers - 1;
		}
		uint32_t layer;
		f->op = flow_next(f, &layer);
		f->layer = layer;
	}
	m->type = MSG_FLOW;
	m->seq = f->origin_seq;
	f->t_post_ns = mono_ns();
	struct ring *to = f->op == MSG_OP_END ? &w->dp.link[my_link(w)].done
					    : &w->dp.link[my_link(w) == DP_GPU ? DP_NPU : DP_GPU].peer;
	int rc = dp_send(to, m);
	if (rc && f->op != MSG_OP_END) {
		/* at most one FLOW per micro-batch is ever in flight: a full peer
		 * ring means the other side stopped taking them; tell the coordinator */
		f->op = MSG_OP_END;
		f->status = ERR_IO;
		rc = dp_send(&w->dp.link[my_link(w)].done, m);
	}
	w->t_free_ns = mono_ns();
	return rc;
}

int worker_serve_any(struct worker *w, int timeout_ms)
{
	/* waiting for a coordinator's HELLO on the link: nng's wait cannot be
	 * cut short by worker_wake, so it stays short */
	if (!w->dp_on)
		return worker_serve(w, timeout_ms < WORKER_LINK_WAIT_MS ? timeout_ms : WORKER_LINK_WAIT_MS);
	struct dp_link_view *l = &w->dp.link[my_link(w)];
	uint32_t seen = ring_bell_seq(l->bell);
	int rc = dp_recv(&l->req, &w->in);
	if (rc == ERR_AGAIN)
		rc = dp_recv(&l->peer, &w->in);
	/* right after a step the next one is usually microseconds away: look
	 * for it before the nng check and the futex sleep */
	if (rc == ERR_AGAIN && w->hot && ring_bell_spin(l->bell, seen, w->spin_us)) {
		seen = ring_bell_seq(l->bell);
		rc = dp_recv(&l->req, &w->in);
		if (rc == ERR_AGAIN)
			rc = dp_recv(&l->peer, &w->in);
	}
	w->hot = rc == 0;
	if (rc == 0) {
		if (w->in.type == MSG_FLOW)
			return worker_flow(w, &w->in);
		if (!worker_handle(w, &w->in, &w->out))
			return 0;
		w->t_free_ns = mono_ns();
		/* the coordinator keeps one message outstanding per link, so the
		 * done ring (16 places) has room; full means it stopped reading */
		return dp_send(&l->done, &w->out);
	}
	if (rc == ERR_INVAL) {
		answer_error(&w->out, 0, ERR_INVAL);
		dp_send(&l->done, &w->out);
		return rc;
	}
	/* nothing on the rings: a new HELLO (a restarted coordinator) comes over the link */
	rc = worker_serve(w, 0);
	if (rc != ERR_TIMEOUT)
		return rc;
	/* no peer check while sleeping: an idle worker wakes only on its bell
	 * (a step, SHUTDOWN through worker_wake, or the next coordinator, which
	 * retires this data plane and rings) or the timeout, then looks whether
	 * its coordinator still exists */
	rc = ring_bell_wait(l->bell, seen, timeout_ms, 0);
	if (dp_retired(&w->dp) || (rc == ERR_TIMEOUT && kill(w->coord_pid, 0) < 0 && errno == ESRCH))
		rc = ERR_IO;
	if (rc == ERR_IO) {
		/* the coordinator is gone: wait for the next one's HELLO on the link */
		dp_drop(w);
		return ERR_TIMEOUT;
	}
	return rc;
}


/* ---- process ---- */

static volatile sig_atomic_t worker_stop;
static void worker_on_term(int sig) { (void)sig; worker_stop = 1; }

/* engine_create's progress: the liveness page's heartbeat (ipc/ctl.h) */
static void worker_beat(void *ctl) { ctl_heartbeat(ctl); }
static struct worker *_Atomic worker_live;
static uint64_t worker_t0;

static void wake_on_shutdown(void *arg)
{
	worker_wake(arg);
}

static void worker_ctl_status(void *arg, struct msg_status *st)
{
	(void)arg;
	struct worker *w = atomic_load(&worker_live);
	if (w) {
		worker_status(w, st);
		return;
	}
	/* still attaching / creating the engine */
	msg_set_str(st->backend, sizeof st->backend, "vulkan");
	msg_set_str(st->device, sizeof st->device, "(starting)");
	st->uptime_ns = mono_ns() - worker_t0;
}

static int parse_u32(const char *s, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int worker_main(int argc, char **argv, enum msg_role role)
{
	worker_t0 = mono_ns();
	const char *prog = role == MSG_ROLE_NPU_WORKER ? "unicorn-npu-worker" : "unicorn-gpu-worker";
	struct worker_opts o = { .role = role };
	uint32_t n_ranges = 0;
	static const struct option lopts[] = {
		{ "rundir", required_argument, 0, 'r' },
		{ "vk-device", required_argument, 0, 'd' },
		{ "max-seqs", required_argument, 0, 's' },
		{ "max-batch", required_argument, 0, 'b' },
		{ "attn-backend", required_argument, 0, 'a' },
		{ "import", required_argument, 0, 'i' },
		{ "kv-budget", required_argument, 0, 'k' },
		{ "ctx", required_argument, 0, 'c' },
		{ "kv-type", required_argument, 0, 't' },
		{ "stage", required_argument, 0, 'S' },
		{ "layers", required_argument, 0, 'L' },
		{ "device-mem", required_argument, 0, 'D' },
		{ "mmproj", required_argument, 0, 'M' },
		{ "ffn-only", no_argument, 0, 'F' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (c) {
		case 'r': o.rundir = optarg; break;
		case 'M': o.mmproj = optarg; break;
		case 'd': o.vk_device = optarg; break;
		case 's':
			if (parse_u32(optarg, MSG_MAX_SLOTS, &o.max_seqs) || !o.max_seqs) {
				fprintf(stderr, "%s: --max-seqs: want 1..%d\n", prog, MSG_MAX_SLOTS);
				return 2;
			}
			break;
		case 'b':
			if (parse_u32(optarg, 4096, &o.max_batch) || !o.max_batch) {
				fprintf(stderr, "%s: --max-batch: want 1..4096\n", prog);
				return 2;
			}
			break;
		case 'i':
			if (strcmp(optarg, "auto") == 0)
				o.weights_import = ENGINE_IMPORT_AUTO;
			else if (strcmp(optarg, "upload") == 0)
				o.weights_import = ENGINE_IMPORT_UPLOAD;
			else if (strcmp(optarg, "zero-copy") == 0)
				o.weights_import = ENGINE_IMPORT_ZERO_COPY;
			else {
				fprintf(stderr, "%s: --import: want auto, upload or zero-copy\n", prog);
				return 2;
			}
			break;
		case 'k':
			if (kv_parse_bytes(optarg, &o.kv_budget)) {
				fprintf(stderr, "%s: --kv-budget: %s\n", prog, err_msg());
				return 2;
			}
			break;
		case 'c':
			if (parse_u32(optarg, KV_MAX_CTX, &o.ctx) || !o.ctx) {
				fprintf(stderr, "%s: --ctx: want 1..%d\n", prog, KV_MAX_CTX);
				return 2;
			}
			break;
		case 't':
			if (kv_type_parse(optarg, &o.kv_type)) {
				fprintf(stderr, "%s: --kv-type: %s\n", prog, err_msg());
				return 2;
			}
			break;
		case 'S': {
			char *end;
			unsigned long k = strtoul(optarg, &end, 10), n = *end == '/' ? strtoul(end + 1, &end, 10) : 0;
			if (role != MSG_ROLE_GPU_WORKER || *end || n < 1 || n > STAGES_MAX || k >= n) {
				fprintf(stderr, "%s: --stage K/N: want 0 <= K < N <= %d (gpu worker only)\n", prog, STAGES_MAX);
				return 2;
			}
			o.stage = (uint32_t)k;
			o.n_stages = (uint32_t)n;
			break;
		}
		case 'L':
			if (stages_parse_count(optarg, &n_ranges)) {
				fprintf(stderr, "%s: %s\n", prog, err_msg());
				return 2;
			}
			o.layers = optarg;
			break;
		case 'D':
			if (kv_parse_bytes(optarg, &o.device_mem) || !o.device_mem) {
				fprintf(stderr, "%s: --device-mem: want a byte count (K, M, G suffixes)\n", prog);
				return 2;
			}
			break;
		case 'F':
			if (role != MSG_ROLE_GPU_WORKER) {
				fprintf(stderr, "%s: --ffn-only: split placement's FFN worker (gpu worker only)\n", prog);
				return 2;
			}
			o.ffn_only = true;
			break;
		case 'a':
			if (role != MSG_ROLE_NPU_WORKER || strcmp(optarg, "vulkan")) {
				fprintf(stderr, "%s: --attn-backend %s not served here\n", prog, optarg);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: %s --rundir DIR [--vk-device D] [--max-seqs N] [--max-batch N] "
				"[--import auto|upload|zero-copy] [--kv-budget BYTES|auto] [--ctx N] "
				"[--kv-type f16|q8_0|f32] [--stage K/N [--layers A-B,...]] [--device-mem BYTES] "
				"[--mmproj FILE]%s\n", prog,
				role == MSG_ROLE_NPU_WORKER ? " --attn-backend vulkan|xrt" : " [--ffn-only]");
			return 2;
		}
	}
	if (!o.rundir || optind != argc) {
		fprintf(stderr, "%s: --rundir DIR is required\n", prog);
		return 2;
	}
	if (o.layers && (!o.n_stages || n_ranges != o.n_stages)) {
		fprintf(stderr, "%s: --layers names %u range(s): it needs --stage K/%u\n", prog, n_ranges, n_ranges);
		return 2;
	}
	/* a pipeline's stage 1 takes the data plane's second link (the split
	 * placement's attention worker's): npu.ipc, ctl-npu.ipc, selfcheck-npu */
	if (o.n_stages && o.stage == 1)
		role = o.role = MSG_ROLE_NPU_WORKER;
	struct sigaction sa = { .sa_handler = worker_on_term };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (rundir_check(o.rundir)) {
		fprintf(stderr, "%s: %s\n", prog, err_msg());
		return 2;
	}
	struct ctl *ctl = NULL;
	if (ctl_start(o.rundir, role, worker_ctl_status, NULL, 0, &ctl)) {
		fprintf(stderr, "%s: control link: %s\n", prog, err_msg());
		return 1;
	}
	struct worker *w = NULL;
	o.progress = worker_beat;
	o.progress_arg = ctl;
	int rc = worker_create(&o, &w);
	if (rc) {
		if (rc == ERR_DEVICE)
			fprintf(stderr, "%s: no usable Vulkan device (looked for %s; choose one with --vk-device, "
				"see `unicorn devices`): %s\n", prog, o.vk_device ? o.vk_device : "the first discrete GPU, else any",
				err_msg());
		else
			fprintf(stderr, "%s: %s\n", prog, err_msg());
		ctl_stop(ctl);
		return rc == ERR_DEVICE || rc == ERR_UNSUP ? 2 : 1;
	}
	atomic_store(&worker_live, w);
	ctl_set_waker(ctl, wake_on_shutdown, w);
	fprintf(stderr, "%s: %s on %s, %u slot(s), model of %u layers; KV cache %.1f MiB in %u global + %u local "
		"blocks of %u positions; serving %s\n", prog, w->backend, w->device, w->max_seqs, w->n_layer,
		(double)w->kv.bytes / (1 << 20), w->kv.n_gblocks, w->kv.n_lblocks, w->kv.block,
		role == MSG_ROLE_NPU_WORKER ? RUNDIR_NPU : RUNDIR_GPU);
	while (!worker_stop && !ctl_shutdown_requested(ctl)) {
		ctl_heartbeat(ctl);
		rc = worker_serve_any(w, WORKER_IDLE_WAIT_MS);
		if (rc && rc != ERR_TIMEOUT)
			fprintf(stderr, "%s: %s\n", prog, err_msg());
		if (w->stale)
			break;
	}
	int code = w->stale ? 1 : 0; /* restarted by unicorn-up: a fresh import */
	atomic_store(&worker_live, NULL);
	ctl_stop(ctl); /* the ctl thread is gone before w goes */
	worker_destroy(w);
	return code;
}
