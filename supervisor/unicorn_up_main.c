/* unicorn-up: start a model as a cluster of processes and keep it running
 * (docs/cluster.md). The supervision mechanism is supervisor/supervisor.c;
 * this file is options, the runtime dir, the control socket and the main loop. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "api/http.h"
#include "api/openai.h"
#include "supervisor/supervisor.h"
#include "formats/mmproj.h"
#include "formats/model.h"
#include "ipc/bus.h"
#include "ipc/ctl.h"
#include "ipc/dataplane.h"
#include "common/exe_path.h"
#include "common/err.h"
#include "ipc/kvlayout.h"
#include "ipc/rundir.h"
#include "ipc/stages.h"
#include "supervisor/up_model.h"

#define GRACE_MS 5000
#define DRAIN_DEFAULT_S 30      /* SIGTERM's drain limit without --drain-timeout */
#define DRAIN_MAX_S 86400
#define DRAIN_TICK_MS 100       /* while draining: how often the load is looked at */
#define DRAIN_SETTLE_MS 200     /* a request that passed the API's check just before the
                                 * drain began is counted within this */
#define READY_FILE "ready"
#define LOG_FILE "unicorn.log"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: unicorn-up [--model PATH|REPO[:QUANT]] [options]\n"
		"Run a model as a cluster of processes (loader, workers, coordinator) and supervise it.\n"
		"\n"
		"  --model PATH            GGUF file or Hugging Face directory, or a Hugging Face repo\n"
		"                          ORG/NAME[:QUANT] from the model store (pulled when missing:\n"
		"                          unicorn pull --help). Default: the latest pull, else the\n"
		"                          demo model (random weights: no meaningful text)\n"
		"  --placement auto|fused|pipeline|split\n"
		"                          fused: one GPU worker runs whole layers; pipeline: one GPU\n"
		"                          worker per device of --devices (gpu0, gpu1), each running\n"
		"                          a contiguous range of whole layers (the first embeds, the\n"
		"                          last runs the head); split: attention on the NPU worker,\n"
		"                          FFN on the GPU worker (an attention accelerator); auto\n"
		"                          (default): pipeline when --devices names several, else fused\n"
		"  --devices D,D           the pipeline's devices, one stage each (Vulkan indices or\n"
		"                          names as --vk-device; at most %d); pipeline without it: two\n"
		"                          stages on --vk-device\n"
		"  --layers A-B,C-D        the stages' layer ranges, inclusive (default: balanced by\n"
		"                          weight bytes), e.g. --layers 0-30,31-61\n"
		"  --device-mem BYTES      what a worker may place on its device (weights + KV cache +\n"
		"                          scratch; e.g. 8G): a model that does not fit refuses to\n"
		"                          start with the bytes it needs (use more --devices)\n"
		"  --attn-backend vulkan|xrt  attention backend of the NPU worker (split; default vulkan)\n"
		"  --vk-device D           Vulkan device index or name substring for the workers\n"
		"  --attn-device D         the attention worker's device (split; default --vk-device)\n"
		"  --ffn-device D          the GPU worker's device (FFN, embeddings, head; default\n"
		"                          --vk-device): e.g. --attn-device 0 --ffn-device 1 on two GPUs\n"
		"  --max-seqs N            concurrent sequences (1..%d, default 4): every\n"
		"                          worker keeps a KV cache for each\n"
		"  --name N                cluster name (default \"default\"; [A-Za-z0-9_-]{1,32})\n"
		"  --host H                HTTP (OpenAI-compatible API) address (default %s)\n"
		"  --port P                HTTP port (default %d; when the default is taken the\n"
		"                          cluster runs without HTTP, an explicit port must bind)\n"
		"  --api-key KEY           require \"Authorization: Bearer KEY\" (required for a\n"
		"                          non-loopback --host; or set UNICORN_API_KEY)\n"
		"  --cors ORIGIN           send Access-Control-Allow-Origin: ORIGIN\n"
		"  --no-http               no HTTP server\n"
		"  --kv-budget BYTES       memory of the paged KV cache (e.g. 512M, 2G); requests\n"
		"                          wait (and long ones are preempted and recomputed) when\n"
		"                          it is full (default auto: every sequence at full context)\n"
		"  --ctx N                 positions per sequence (default: the model's context,\n"
		"                          e.g. 32768 for Gemma 3 1B, 131072 for 4B-27B)\n"
		"  --mmproj FILE           the vision projector (image inputs; default: an\n"
		"                          mmproj-*.gguf beside the model; fused placement only)\n"
		"  --allow-image-urls      fetch http(s) image_url parts (default: data URLs only;\n"
		"                          the API then fetches whatever URL a client names)\n"
		"  --kv-type f16|q8_0|f32  the KV cache's element type (default f16; q8_0 is\n"
		"                          llama.cpp's 8-bit blocks, about half of f16's bytes)\n"
		"  --request-timeout S     stop a request (queued or running) after S seconds\n"
		"                          (default 600, 0 = no limit); a request's own timeout\n"
		"                          (HTTP \"timeout\", unicorn run --timeout) is capped by it\n"
		"  --step-timeout-ms MS    a worker step without an answer after MS ms is a hung\n"
		"                          worker: restart and replay (default 10000; each miss\n"
		"                          doubles it up to 160000, for slow devices)\n"
		"  --drain-timeout S       SIGTERM drains: /health turns 503 (\"draining\"), new\n"
		"                          requests get 503 with Retry-After, running ones finish\n"
		"                          within S seconds (default %d; then they are cut) and\n"
		"                          the cluster stops (docs/scale.md). SIGINT stops at once\n"
		"  -d, --detach            run in the background once the cluster is ready\n"
		"                          (log: RUNDIR/" LOG_FILE ")\n"
		"  -h, --help              this text\n"
		"\n"
		"Stop it with `unicorn down --name N` (`--drain` to let requests finish); see it\n"
		"with `unicorn status --name N`.\n",
		STAGES_MAX, MSG_MAX_SLOTS, HTTP_DEFAULT_HOST, HTTP_DEFAULT_PORT, DRAIN_DEFAULT_S);
}

struct up_opts {
	char model[PATH_MAX];
	char mmproj[PATH_MAX];       /* the vision projector ("" = none): --mmproj, else mmproj-*.gguf beside the model */
	const char *placement, *attn_backend, *vk_device, *attn_device, *ffn_device, *name, *max_seqs;
	const char *host, *port, *api_key, *cors;
	int detach, no_http;
	bool demo;                   /* serving bin/unicorn-demo.gguf */
	const char *request_timeout; /* seconds, passed to the coordinator (NULL = its default) */
	const char *step_timeout;    /* ms, passed to the coordinator (NULL = its default) */
	int allow_image_urls;        /* passed to the API */
	const char *kv_budget;       /* bytes, passed to the workers and the coordinator alike */
	uint32_t drain_ms;           /* SIGTERM's drain limit */
	const char *ctx, *kv_type;   /* --ctx, --kv-type: to every process that plans the KV cache */
	const char *devices, *layers, *device_mem; /* pipeline placement (ipc/stages.h), the device cap */
	const char *stage_dev[STAGES_MAX];  /* each stage's device (NULL: the engine's choice) */
	char dev_buf[256];
	uint32_t n_stages;
};

static int up_stages(struct up_opts *o);

static int parse(int argc, char **argv, struct up_opts *o)
{
	static const struct option lo[] = {
		{ "model", required_argument, 0, 'm' },     { "placement", required_argument, 0, 'p' },
		{ "attn-backend", required_argument, 0, 'a' }, { "vk-device", required_argument, 0, 'v' },
		{ "max-seqs", required_argument, 0, 's' },  { "name", required_argument, 0, 'n' },
		{ "detach", no_argument, 0, 'd' },          { "help", no_argument, 0, 'h' },
		{ "host", required_argument, 0, 'H' },      { "port", required_argument, 0, 'P' },
		{ "api-key", required_argument, 0, 'K' },   { "cors", required_argument, 0, 'C' },
		{ "no-http", no_argument, 0, 'N' },
		{ "request-timeout", required_argument, 0, 'R' },
		{ "step-timeout-ms", required_argument, 0, 'S' },
		{ "allow-image-urls", no_argument, 0, 'U' },
		{ "kv-budget", required_argument, 0, 'B' },
		{ "ctx", required_argument, 0, 'c' },       { "kv-type", required_argument, 0, 'T' },
		{ "attn-device", required_argument, 0, 'A' }, { "ffn-device", required_argument, 0, 'F' },
		{ "drain-timeout", required_argument, 0, 'D' },
		{ "devices", required_argument, 0, 'V' },   { "layers", required_argument, 0, 'L' },
		{ "device-mem", required_argument, 0, 'M' },
		{ "mmproj", required_argument, 0, 'I' },
		{ 0, 0, 0, 0 },
	};
	const char *model = NULL;
	const char *drain = NULL;
	o->placement = "auto";
	o->attn_backend = "vulkan";
	o->name = RUNDIR_DEFAULT_NAME;
	int c;
	while ((c = getopt_long(argc, argv, "dh", lo, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 'p': o->placement = optarg; break;
		case 'a': o->attn_backend = optarg; break;
		case 'v': o->vk_device = optarg; break;
		case 'A': o->attn_device = optarg; break;
		case 'F': o->ffn_device = optarg; break;
		case 's': o->max_seqs = optarg; break;
		case 'n': o->name = optarg; break;
		case 'd': o->detach = 1; break;
		case 'H': o->host = optarg; break;
		case 'P': o->port = optarg; break;
		case 'K': o->api_key = optarg; break;
		case 'C': o->cors = optarg; break;
		case 'N': o->no_http = 1; break;
		case 'R': o->request_timeout = optarg; break;
		case 'S': o->step_timeout = optarg; break;
		case 'U': o->allow_image_urls = 1; break;
		case 'B': o->kv_budget = optarg; break;
		case 'D': drain = optarg; break;
		case 'c': o->ctx = optarg; break;
		case 'T': o->kv_type = optarg; break;
		case 'V': o->devices = optarg; break;
		case 'L': o->layers = optarg; break;
		case 'M': o->device_mem = optarg; break;
		case 'I':
			if (snprintf(o->mmproj, sizeof o->mmproj, "%s", optarg) >= (int)sizeof o->mmproj) {
				fprintf(stderr, "unicorn-up: --mmproj: path too long\n");
				return 2;
			}
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "unicorn-up: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	/* one device per role: each defaults to --vk-device (or the engine's choice) */
	if (!o->attn_device)
		o->attn_device = o->vk_device;
	if (!o->ffn_device)
		o->ffn_device = o->vk_device;
	if (up_model_resolve(model, o->model, sizeof o->model, &o->demo)) {
		fprintf(stderr, "unicorn-up: %s\n", err_msg());
		return 2;
	}
	/* --mmproj: an mmproj GGUF, or a Hugging Face checkpoint directory with a vision tower */
	struct stat mst;
	if (o->mmproj[0] && (stat(o->mmproj, &mst) || (!S_ISDIR(mst.st_mode) && !mmproj_is_clip(o->mmproj)))) {
		fprintf(stderr, "unicorn-up: --mmproj %s: not a vision projector (a GGUF file of architecture clip, or a "
			"checkpoint directory with a vision tower)\n", o->mmproj);
		return 2;
	}
	bool explicit_mmproj = o->mmproj[0] != 0;
	if (!o->mmproj[0]) {
		char *found = mmproj_find_beside(o->model);
		if (found && strlen(found) < sizeof o->mmproj)
			strcpy(o->mmproj, found);
		free(found);
	}
	if (o->mmproj[0]) {
		/* the projector must fit the model: refuse a named one that does
		 * not, serve without a found one that does not (the gpu worker
		 * would fail to start) */
		struct model *m = NULL;
		struct mmproj *p = NULL;
		int rc = model_open(o->model, &m);
		if (!rc)
			rc = mmproj_open(o->mmproj, &p);
		if (!rc)
			rc = mmproj_check_text(p, &m->cfg);
		mmproj_close(p);
		model_close(m);
		if (rc && explicit_mmproj) {
			fprintf(stderr, "unicorn-up: --mmproj %s: %s\n", o->mmproj, err_msg());
			return 2;
		}
		if (rc) {
			fprintf(stderr, "unicorn-up: not using the vision projector %s: %s\n", o->mmproj, err_msg());
			o->mmproj[0] = 0;
		}
	}
	if (strcmp(o->placement, "fused") && strcmp(o->placement, "split") && strcmp(o->placement, "pipeline") &&
	    strcmp(o->placement, "auto")) {
		fprintf(stderr, "unicorn-up: --placement '%s': must be auto, fused, pipeline or split\n", o->placement);
		return 2;
	}
	if (up_stages(o))
		return 2;
	if (strcmp(o->attn_backend, "vulkan") && strcmp(o->attn_backend, "xrt")) {
		fprintf(stderr, "unicorn-up: --attn-backend '%s': must be vulkan or xrt\n", o->attn_backend);
		return 2;
	}
	if (!o->max_seqs)
		o->max_seqs = "4"; /* the same count goes to every process */
	{
		char *end;
		long v = strtol(o->max_seqs, &end, 10);
		if (*end || end == o->max_seqs || v < 1 || v > MSG_MAX_SLOTS) {
			fprintf(stderr, "unicorn-up: --max-seqs '%s': must be 1..%d\n", o->max_seqs,
				MSG_MAX_SLOTS);
			return 2;
		}
	}
	if (!o->api_key)
		o->api_key = getenv("UNICORN_API_KEY");
	if (o->port) {
		char *end;
		long v = strtol(o->port, &end, 10);
		if (*end || end == o->port || v < 1 || v > 65535) {
			fprintf(stderr, "unicorn-up: --port '%s': must be 1..65535\n", o->port);
			return 2;
		}
	}
	if (!o->no_http && o->host && !oai_host_is_loopback(o->host) &&
	    !(o->api_key && *o->api_key)) {
		fprintf(stderr, "unicorn-up: --host %s is not a loopback address: refusing to serve "
			"the HTTP API there without --api-key KEY (anyone who can reach it could use "
			"the model)\n", o->host);
		return 2;
	}
	if (o->request_timeout) {
		char *end;
		double v = strtod(o->request_timeout, &end);
		if (*end || end == o->request_timeout || !(v >= 0 && v <= OAI_MAX_TIMEOUT_S)) {
			fprintf(stderr, "unicorn-up: --request-timeout '%s': seconds, 0..%.0f (0 = no "
				"limit)\n", o->request_timeout, OAI_MAX_TIMEOUT_S);
			return 2;
		}
	}
	if (o->step_timeout) {
		char *end;
		long v = strtol(o->step_timeout, &end, 10);
		if (*end || end == o->step_timeout || v < 100 || v > 3600000) {
			fprintf(stderr, "unicorn-up: --step-timeout-ms '%s': milliseconds, 100..3600000\n",
				o->step_timeout);
			return 2;
		}
	}
	o->drain_ms = DRAIN_DEFAULT_S * 1000u;
	if (drain) {
		char *end;
		double v = strtod(drain, &end);
		if (*end || end == drain || !(v >= 0 && v <= DRAIN_MAX_S)) {
			fprintf(stderr, "unicorn-up: --drain-timeout '%s': seconds, 0..%d\n", drain,
				DRAIN_MAX_S);
			return 2;
		}
		o->drain_ms = (uint32_t)(v * 1000);
	}
	uint64_t kvb;
	if (o->kv_budget && kv_parse_bytes(o->kv_budget, &kvb)) {
		fprintf(stderr, "unicorn-up: --kv-budget: %s\n", err_msg());
		return 2;
	}
	if (o->ctx) {
		char *end;
		unsigned long v = strtoul(o->ctx, &end, 10);
		if (*end || end == o->ctx || v < 1 || v > KV_MAX_CTX) {
			fprintf(stderr, "unicorn-up: --ctx '%s': positions per sequence, 1..%d (at most the "
				"model's context is used)\n", o->ctx, KV_MAX_CTX);
			return 2;
		}
	}
	uint32_t kvt;
	if (o->kv_type && kv_type_parse(o->kv_type, &kvt)) {
		fprintf(stderr, "unicorn-up: --kv-type: %s\n", err_msg());
		return 2;
	}
	if (!rundir_name_valid(o->name)) {
		fprintf(stderr, "unicorn-up: --name '%s': must be 1-%d characters of A-Z a-z 0-9 _ -\n",
			o->name, RUNDIR_NAME_MAX);
		return 2;
	}
	return 0;
}

/* --devices, --layers, --device-mem and --placement auto: how many pipeline
 * stages on which devices (said on stderr when something is wrong). */
static int up_stages(struct up_opts *o)
{
	uint32_t n_dev = 0;
	if (o->devices) {
		if (strlen(o->devices) >= sizeof o->dev_buf) {
			fprintf(stderr, "unicorn-up: --devices: too long\n");
			return 2;
		}
		strcpy(o->dev_buf, o->devices);
		for (char *save = NULL, *t = strtok_r(o->dev_buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			if (n_dev == STAGES_MAX) {
				fprintf(stderr, "unicorn-up: --devices '%s': at most %d devices (stages) in this build\n",
					o->devices, STAGES_MAX);
				return 2;
			}
			o->stage_dev[n_dev++] = t;
		}
		if (!n_dev) {
			fprintf(stderr, "unicorn-up: --devices '%s': want D,D (Vulkan indices or names)\n", o->devices);
			return 2;
		}
	}
	if (!strcmp(o->placement, "auto"))
		o->placement = n_dev >= 2 ? "pipeline" : "fused";
	if (o->device_mem) {
		uint64_t b;
		if (kv_parse_bytes(o->device_mem, &b) || !b) {
			fprintf(stderr, "unicorn-up: --device-mem '%s': want a byte count (e.g. 8G)\n", o->device_mem);
			return 2;
		}
	}
	bool pipe = !strcmp(o->placement, "pipeline");
	if (!pipe) {
		if (n_dev > 1 || o->layers) {
			fprintf(stderr, "unicorn-up: --devices with several devices and --layers are for --placement "
				"pipeline (this is %s)\n", o->placement);
			return 2;
		}
		if (n_dev == 1 && !o->vk_device)
			o->vk_device = o->ffn_device = o->attn_device = o->stage_dev[0];
		return 0;
	}
	o->n_stages = STAGES_MAX;
	for (uint32_t k = n_dev; k < o->n_stages; k++) /* pipeline without --devices: all on --vk-device */
		o->stage_dev[k] = n_dev ? o->stage_dev[n_dev - 1] : o->vk_device;
	if (o->layers) {
		uint32_t n;
		if (stages_parse_count(o->layers, &n)) {
			fprintf(stderr, "unicorn-up: %s\n", err_msg());
			return 2;
		}
		if (n != o->n_stages) {
			fprintf(stderr, "unicorn-up: --layers '%s' names %u range(s); the pipeline has %u stages\n",
				o->layers, n, o->n_stages);
			return 2;
		}
	}
	return 0;
}

/* Whether split placement's two workers run on one Vulkan device: attention on
 * Vulkan (not the NPU) with the same device spec for both roles (the default:
 * both --vk-device). Two different specs are taken as two devices. */
static bool split_shares_device(const struct up_opts *o)
{
	if (strcmp(o->attn_backend, "vulkan"))
		return false;
	if (!o->attn_device || !o->ffn_device)
		return o->attn_device == o->ffn_device;
	return strcmp(o->attn_device, o->ffn_device) == 0;
}

/* Executables live next to ours (bin/). */
static int sibling(const char *name, char *out, size_t cap)
{
	int rc = exe_sibling(name, out, cap);
	if (rc)
		return rc;
	if (access(out, X_OK))
		return err_set(ERR_NOTFOUND, "%s: %s (it is built with unicorn-up: `make`)", out,
			       strerror(errno));
	return 0;
}

/* Sockets and files a previous (crashed) cluster of this name may have left. */
static const char *const run_files[] = {
	RUNDIR_CONTROL, RUNDIR_LOADER_SOCK, RUNDIR_COORDINATOR, RUNDIR_GPU, RUNDIR_NPU,
	"ctl-loader.ipc", "ctl-npu.ipc", "ctl-gpu.ipc", "ctl-coordinator.ipc", "ctl-api.ipc",
	"ctl-loader.live", "ctl-npu.live", "ctl-gpu.live", "ctl-coordinator.live", "ctl-api.live",
	RUNDIR_OBS, READY_FILE, RUNDIR_API_READY, RUNDIR_STATUS, RUNDIR_HTTP, DP_FILE, DP_FILE ".new",
	RUNDIR_DRAINING, "mmproj",
	RUNDIR_SELFCHECK "gpu", RUNDIR_SELFCHECK "npu",
	"kv-gpu.budget", "kv-npu.budget", "kv.json", /* --kv-budget auto's bytes, the KV shape (status) */
};

static void remove_run_files(const char *dir)
{
	char p[RUNDIR_PATH_MAX];
	for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++)
		if (rundir_path(dir, run_files[i], p, sizeof p) == 0)
			unlink(p);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The API process's HTTP URL (from RUNDIR/http), "" when it serves none. */
static void http_url_read(const char *dir, char *out, size_t cap)
{
	char p[RUNDIR_PATH_MAX];
	out[0] = 0;
	if (rundir_path(dir, RUNDIR_HTTP, p, sizeof p))
		return;
	FILE *f = fopen(p, "r");
	if (!f)
		return;
	if (!fgets(out, (int)cap, f))
		out[0] = 0;
	fclose(f);
	out[strcspn(out, "\r\n")] = 0;
}

static bool g_draining; /* status.json says so */

static void write_status(const char *dir, struct supervisor *s, const struct up_opts *o,
			 uint64_t start_ns, bool is_ready)
{
	char path[RUNDIR_PATH_MAX], tmp[RUNDIR_PATH_MAX + 8], coord[RUNDIR_PATH_MAX];
	if (rundir_path(dir, RUNDIR_STATUS, path, sizeof path) ||
	    rundir_path(dir, RUNDIR_COORDINATOR, coord, sizeof coord))
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	json_t *procs = sup_status_table(s);
	json_t *root = json_pack("{s:s, s:i, s:s, s:s, s:s, s:f, s:b, s:i, s:o}", "name", o->name,
				 "supervisor_pid", (int)getpid(), "model", o->model, "placement",
				 o->placement, "endpoint", coord, "uptime_s",
				 (now_ns() - start_ns) / 1e9, "ready", is_ready, "restarts",
				 (int)sup_total_restarts(s), "processes", procs ? procs : json_array());
	if (!root)
		return;
	char url[320];
	http_url_read(dir, url, sizeof url);
	json_object_set_new(root, "url", url[0] ? json_string(url) : json_null());
	json_object_set_new(root, "api_key_required", json_boolean(o->api_key && *o->api_key));
	json_object_set_new(root, "draining", json_boolean(g_draining));
	if (json_dump_file(root, tmp, JSON_INDENT(1)) == 0)
		rename(tmp, path);
	json_decref(root);
}

#define MS(x) ((uint64_t)(x) * 1000000u)

/* A drain (docs/scale.md): RUNDIR/draining makes the API process answer
 * /health with 503 "draining" and refuse new requests (503, Retry-After);
 * the cluster stops once nothing runs (the API's HTTP requests in flight, the
 * coordinator's running and queued requests) or at the limit. Children are
 * still restarted meanwhile: a request in flight survives a crash as always. */
struct drain {
	bool on;
	uint64_t start_ns, end_ns;
};

static void drain_begin(const char *dir, struct drain *d, uint32_t limit_ms, int log_fd,
			const char *why)
{
	char p[RUNDIR_PATH_MAX];
	if (rundir_path(dir, RUNDIR_DRAINING, p, sizeof p) == 0) {
		FILE *f = fopen(p, "w");
		if (!f || fprintf(f, "%u\n", limit_ms) < 0 || fclose(f))
			dprintf(log_fd, "[unicorn-up] cannot write %s: %s (new requests are not refused)\n",
				p, strerror(errno));
	}
	d->on = true;
	d->start_ns = now_ns();
	d->end_ns = d->start_ns + MS(limit_ms);
	g_draining = true;
	dprintf(log_fd, "[unicorn-up] draining (%s): /health says draining, new requests get 503, "
		"running ones have %.1f s to finish\n", why, limit_ms / 1000.0);
}

/* Whether the drain is over (logged): nothing runs any more (looked at from
 * DRAIN_SETTLE_MS on), or the limit passed. */
static bool drain_over(struct supervisor *s, const struct drain *d, int log_fd)
{
	uint64_t now = now_ns();
	struct live_load api, co;
	uint32_t http = sup_load(s, MSG_ROLE_API, &api) ? api.running : 0;
	uint32_t n = sup_load(s, MSG_ROLE_COORDINATOR, &co) ? co.running + co.queued : 0;
	if (http == 0 && n == 0 && now - d->start_ns >= MS(DRAIN_SETTLE_MS)) {
		dprintf(log_fd, "[unicorn-up] drained in %.1f s: stopping the cluster\n",
			(now - d->start_ns) / 1e9);
		return true;
	}
	if (now >= d->end_ns) {
		dprintf(log_fd, "[unicorn-up] drain limit reached with %u HTTP request%s in flight and %u "
			"request%s running or queued: cutting them, stopping the cluster\n", http,
			http == 1 ? "" : "s", n, n == 1 ? "" : "s");
		return true;
	}
	return false;
}

/* -d's foreground side: the daemon's notify messages, each a status digit
 * ('0' ready, '1' error, '2' fatal start) and a line; several may come (an
 * error, then "stopped before it was ready"). Every line is printed without
 * its digit (ready on stdout, errors on stderr); the status is the first
 * message's. */
static int detach_report(const char *buf, size_t len)
{
	if (len < 2) {
		fprintf(stderr, "unicorn-up: the background supervisor died before the cluster was ready\n");
		return 1;
	}
	int st = buf[0] == '0' ? 0 : buf[0] == '2' ? 2 : 1;
	for (const char *l = buf; *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) + 1 : strlen(l);
		if (*l >= '0' && *l <= '9')
			fprintf(*l == '0' ? stdout : stderr, "%.*s", (int)n - 1, l + 1);
		else
			fprintf(stderr, "%.*s", (int)n, l);
		l += n;
	}
	return st;
}

int main(int argc, char **argv)
{
	struct up_opts o = { 0 };
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc;

	char dir[RUNDIR_PATH_MAX];
	if ((rc = rundir_resolve(o.name, dir, sizeof dir)) ||
	    (rc = rundir_create(dir))) {
		fprintf(stderr, "unicorn-up: %s\n", err_msg());
		return 1;
	}
	pid_t other = 0;
	rc = rundir_pid_read(dir, &other);
	if (rc == 0 && other > 0 && other != getpid()) {
		fprintf(stderr,
			"unicorn-up: a cluster named '%s' is already running (pid %d, %s);\n"
			"  stop it with `unicorn down --name %s` or pick another --name\n",
			o.name, (int)other, dir, o.name);
		return 1;
	}

	char b_loader[PATH_MAX], b_gpu[PATH_MAX], b_npu[PATH_MAX], b_coord[PATH_MAX], b_api[PATH_MAX];
	if ((rc = sibling("unicorn-loader", b_loader, sizeof b_loader)) ||
	    (rc = sibling("unicorn-gpu-worker", b_gpu, sizeof b_gpu)) ||
	    (!strcmp(o.placement, "split") && (rc = sibling("unicorn-npu-worker", b_npu, sizeof b_npu))) ||
	    (rc = sibling("unicorn-coordinator", b_coord, sizeof b_coord)) ||
	    (!o.no_http && (rc = sibling("unicorn-api", b_api, sizeof b_api)))) {
		fprintf(stderr, "unicorn-up: missing binary: %s\n", err_msg());
		return 1;
	}

	/* -d: the foreground process waits for the daemon to report ready (or its
	 * failure) over a pipe, so errors still reach the terminal. Forked before
	 * any nng use. */
	int notify = -1;
	int log_fd = STDERR_FILENO;
	if (o.detach) {
		int p[2];
		if (pipe2(p, O_CLOEXEC)) {
			perror("unicorn-up: pipe");
			return 1;
		}
		pid_t pid = fork();
		if (pid < 0) {
			perror("unicorn-up: fork");
			return 1;
		}
		if (pid > 0) {
			close(p[1]);
			char buf[1024];
			size_t len = 0;
			ssize_t r;
			while (len < sizeof buf - 1 && (r = read(p[0], buf + len, sizeof buf - 1 - len)) != 0) {
				if (r < 0 && errno == EINTR)
					continue;
				if (r < 0)
					break;
				len += (size_t)r;
			}
			buf[len] = 0;
			return detach_report(buf, len);
		}
		close(p[0]);
		notify = p[1];
		setsid();
		char lp[RUNDIR_PATH_MAX];
		if (rundir_path(dir, LOG_FILE, lp, sizeof lp) == 0)
			log_fd = open(lp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (log_fd < 0) {
			dprintf(notify, "1unicorn-up: %s: %s\n", lp, strerror(errno));
			return 1;
		}
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(log_fd, 2);
			close(null);
		}
	}

	/* Signals become readable events; nng's threads (created later) inherit
	 * the blocked mask, so only the signalfd sees them. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		perror("unicorn-up: signalfd");
		return 1;
	}

	remove_run_files(dir);
	/* the images the API left for the gpu worker (ipc/imagefile.h) belong to
	 * the last run; RUNDIR/mmproj names the projector for the CLI's images */
	{
		char cmd[RUNDIR_PATH_MAX + 32], p[RUNDIR_PATH_MAX];
		if (rundir_path(dir, "images", p, sizeof p) == 0) {
			DIR *d = opendir(p);
			struct dirent *de;
			while (d && (de = readdir(d)))
				if (de->d_name[0] != '.' && snprintf(cmd, sizeof cmd, "%s/%s", p, de->d_name) < (int)sizeof cmd)
					unlink(cmd);
			if (d)
				closedir(d);
		}
		if (o.mmproj[0] && !strcmp(o.placement, "fused") && rundir_path(dir, "mmproj", p, sizeof p) == 0) {
			FILE *f = fopen(p, "w");
			if (f) {
				fprintf(f, "%s\n", o.mmproj);
				fclose(f);
			}
		}
	}
	if ((rc = rundir_pid_write(dir))) {
		fprintf(stderr, "unicorn-up: %s\n", err_msg());
		if (notify >= 0)
			dprintf(notify, "1unicorn-up: %s\n", err_msg());
		return 1;
	}
	char url[BUS_URL_MAX + 1];
	struct bus *control = NULL;
	if ((rc = rundir_url(dir, RUNDIR_CONTROL, url, sizeof url)) ||
	    (rc = bus_listen(url, BUS_REP, &control))) {
		fprintf(stderr, "unicorn-up: %s\n", err_msg());
		if (notify >= 0)
			dprintf(notify, "1unicorn-up: %s\n", err_msg());
		rundir_pid_remove(dir);
		return 1;
	}

	struct sup_opts so = { .rundir = dir, .log_fd = log_fd, .wake_fd = sfd };
	/* control requests wake the loop: it sleeps until a timer otherwise */
	so.has_wake_fd2 = bus_recv_fd(control, &so.wake_fd2) == 0;
	struct supervisor *s;
	if ((rc = sup_create(&so, &s))) {
		fprintf(stderr, "unicorn-up: %s\n", err_msg());
		return 1;
	}
	char f_loader[RUNDIR_PATH_MAX], f_gpu[RUNDIR_PATH_MAX], f_npu[RUNDIR_PATH_MAX];
	rundir_path(dir, RUNDIR_LOADER_SOCK, f_loader, sizeof f_loader);
	rundir_path(dir, RUNDIR_GPU, f_gpu, sizeof f_gpu);
	rundir_path(dir, RUNDIR_NPU, f_npu, sizeof f_npu);
	struct sup_child_spec sp;
	int k;
#define ARG(x) (sp.argv[k++] = (x))
	memset(&sp, 0, sizeof sp);
	k = 0;
	snprintf(sp.name, sizeof sp.name, "loader");
	sp.role = MSG_ROLE_LOADER;
	ARG(b_loader); ARG("--rundir"); ARG(dir); ARG("--model"); ARG(o.model);
	sp.ready_file = f_loader;
	rc = sup_add(s, &sp);
	if (!rc && !strcmp(o.placement, "split")) {
		memset(&sp, 0, sizeof sp);
		k = 0;
		snprintf(sp.name, sizeof sp.name, "npu");
		sp.role = MSG_ROLE_NPU_WORKER;
		ARG(b_npu); ARG("--rundir"); ARG(dir); ARG("--attn-backend"); ARG(o.attn_backend);
		if (o.attn_device) { ARG("--vk-device"); ARG(o.attn_device); }
		if (o.max_seqs) { ARG("--max-seqs"); ARG(o.max_seqs); }
		if (o.kv_budget) { ARG("--kv-budget"); ARG(o.kv_budget); }
		if (o.ctx) { ARG("--ctx"); ARG(o.ctx); }
		if (o.kv_type) { ARG("--kv-type"); ARG(o.kv_type); }
		if (o.device_mem) { ARG("--device-mem"); ARG(o.device_mem); }
		sp.ready_file = f_npu;
		rc = sup_add(s, &sp);
	}
	/* pipeline: one GPU worker per stage, the last first (stage 1 takes the
	 * npu link: npu.ipc, ctl-npu.ipc, selfcheck-npu), named gpu0, gpu1 */
	char stage_arg[STAGES_MAX][16];
	bool pipe = !strcmp(o.placement, "pipeline");
	for (int st = pipe ? (int)o.n_stages - 1 : 0; st >= 0 && !rc; st--) {
		memset(&sp, 0, sizeof sp);
		k = 0;
		const char *dev = pipe ? o.stage_dev[st] : o.ffn_device;
		if (pipe)
			snprintf(sp.name, sizeof sp.name, "gpu%d", st);
		else
			snprintf(sp.name, sizeof sp.name, "gpu");
		sp.role = pipe && st == 1 ? MSG_ROLE_NPU_WORKER : MSG_ROLE_GPU_WORKER;
		ARG(b_gpu); ARG("--rundir"); ARG(dir);
		if (dev) { ARG("--vk-device"); ARG(dev); }
		if (o.max_seqs) { ARG("--max-seqs"); ARG(o.max_seqs); }
		if (o.kv_budget) { ARG("--kv-budget"); ARG(o.kv_budget); }
		if (o.ctx) { ARG("--ctx"); ARG(o.ctx); }
		if (o.kv_type) { ARG("--kv-type"); ARG(o.kv_type); }
		if (o.device_mem) { ARG("--device-mem"); ARG(o.device_mem); }
		if (o.mmproj[0] && !pipe && !strcmp(o.placement, "fused")) { ARG("--mmproj"); ARG(o.mmproj); }
		if (!strcmp(o.placement, "split"))
			ARG("--ffn-only"); /* the attention worker holds the attention's weights and KV */
		if (pipe) {
			snprintf(stage_arg[st], sizeof stage_arg[st], "%d/%u", st, o.n_stages);
			ARG("--stage"); ARG(stage_arg[st]);
			if (o.layers) { ARG("--layers"); ARG(o.layers); }
		}
		sp.ready_file = sp.role == MSG_ROLE_NPU_WORKER ? f_npu : f_gpu;
		rc = sup_add(s, &sp);
	}
	if (!rc) {
		memset(&sp, 0, sizeof sp);
		k = 0;
		snprintf(sp.name, sizeof sp.name, "coordinator");
		sp.role = MSG_ROLE_COORDINATOR;
		ARG(b_coord); ARG("--rundir"); ARG(dir); ARG("--model"); ARG(o.model);
		ARG("--placement"); ARG(o.placement);
		if (pipe && o.layers) { ARG("--layers"); ARG(o.layers); }
		if (o.max_seqs) { ARG("--max-seqs"); ARG(o.max_seqs); }
		if (o.request_timeout) { ARG("--request-timeout"); ARG(o.request_timeout); }
		if (o.step_timeout) { ARG("--step-timeout-ms"); ARG(o.step_timeout); }
		if (o.kv_budget) { ARG("--kv-budget"); ARG(o.kv_budget); }
		if (o.ctx) { ARG("--ctx"); ARG(o.ctx); }
		if (o.kv_type) { ARG("--kv-type"); ARG(o.kv_type); }
		/* split with both roles on one Vulkan device: its two contexts take
		 * turns, so a second micro-batch overlaps nothing and doubles the ops */
		if (!strcmp(o.placement, "split") && split_shares_device(&o)) {
			ARG("--micro-batches");
			ARG("1");
		}
		rc = sup_add(s, &sp);
	}
	/* The HTTP server is a process of its own: its clients outlive a
	 * coordinator crash (the API re-submits their requests). */
	if (!rc && !o.no_http) {
		memset(&sp, 0, sizeof sp);
		k = 0;
		snprintf(sp.name, sizeof sp.name, "api");
		sp.role = MSG_ROLE_API;
		ARG(b_api); ARG("--rundir"); ARG(dir); ARG("--model"); ARG(o.model);
		if (o.host) { ARG("--host"); ARG(o.host); }
		if (o.port) { ARG("--port"); ARG(o.port); }
		if (o.cors) { ARG("--cors"); ARG(o.cors); }
		if (o.mmproj[0] && !strcmp(o.placement, "fused")) { ARG("--mmproj"); ARG(o.mmproj); }
		if (o.allow_image_urls) ARG("--allow-image-urls");
		if (o.request_timeout) { ARG("--request-timeout"); ARG(o.request_timeout); }
		if (o.ctx) { ARG("--ctx"); ARG(o.ctx); }
		/* The key travels in the environment, not argv (/proc/PID/cmdline is
		 * readable by every user). */
		if (o.api_key && *o.api_key)
			setenv("UNICORN_API_KEY", o.api_key, 1);
		else
			unsetenv("UNICORN_API_KEY");
		rc = sup_add(s, &sp);
	}
#undef ARG
	if (!rc)
		rc = sup_start(s);
	int exit_code = 0;
	if (rc) {
		fprintf(stderr, "unicorn-up: %s\n", err_msg());
		if (notify >= 0)
			dprintf(notify, "1unicorn-up: %s\n", err_msg());
		exit_code = 1;
		goto stop;
	}

	char ready_path[RUNDIR_PATH_MAX], api_ready_path[RUNDIR_PATH_MAX];
	rundir_path(dir, READY_FILE, ready_path, sizeof ready_path);
	rundir_path(dir, RUNDIR_API_READY, api_ready_path, sizeof api_ready_path);
	uint64_t start_ns = now_ns();
	bool is_ready = false;
	struct drain drain = { 0 };
	static struct msg req, rep; /* large */
	for (;;) {
		/* until ready, look for the ready file every 30 ms; then sleep until a
		 * timer (while draining: look at the load every DRAIN_TICK_MS) */
		int ev = sup_step(s, drain.on ? DRAIN_TICK_MS : is_ready && so.has_wake_fd2 ? 1000 : 30);
		if (ev == SUP_FATAL) {
			dprintf(log_fd, "unicorn-up: stopping the cluster: %s\n", sup_fatal_msg(s));
			if (notify >= 0)
				dprintf(notify, "2unicorn-up: the cluster could not start: %s\n", sup_fatal_msg(s));
			exit_code = 2;
			break;
		}
		if (ev == SUP_WAKE) {
			struct signalfd_siginfo si;
			bool stop = false, term = false;
			while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				if (si.ssi_signo == SIGTERM && !drain.on && is_ready)
					term = true; /* what systemd and container runtimes send */
				else if (si.ssi_signo != SIGCHLD)
					stop = true; /* SIGINT, SIGHUP, SIGQUIT; SIGTERM while draining or starting */
			}
			if (stop) {
				dprintf(log_fd, "[unicorn-up] signal received: stopping the cluster\n");
				break;
			}
			if (term) {
				drain_begin(dir, &drain, o.drain_ms, log_fd, "SIGTERM");
				write_status(dir, s, &o, start_ns, is_ready);
			}
		}
		struct bus_pending *pend;
		/* the control socket's descriptor wakes the loop: look only then */
		if ((!so.has_wake_fd2 || ev == SUP_WAKE) && bus_serve(control, 0, &req, &pend) == 0) {
			bool stop = false;
			if (req.type == MSG_STATUS_REQ) {
				/* asked for: status.json is fresh (uptimes included) before
				 * the answer lets the asker read it */
				sup_refresh(s);
				sup_take_changes(s);
				write_status(dir, s, &o, start_ns, is_ready);
				msg_init(&rep, MSG_STATUS);
				rep.u.status.role = MSG_ROLE_SUPERVISOR;
				rep.u.status.pid = (uint32_t)getpid();
				msg_set_str(rep.u.status.backend, sizeof rep.u.status.backend, "-");
				msg_set_str(rep.u.status.device, sizeof rep.u.status.device, "-");
				rep.u.status.uptime_ns = now_ns() - start_ns;
				rep.u.status.restarts = sup_total_restarts(s);
				rep.u.status.steps = is_ready; /* supervisor STATUS: steps = 1 once ready */
			} else if (req.type == MSG_SHUTDOWN) {
				msg_init(&rep, MSG_ACK);
				rep.u.ack.ack_seq = req.seq;
				/* unicorn down --drain: drain first (a second one changes
				 * nothing); a plain SHUTDOWN stops at once, a drain too */
				if (req.u.shutdown.reason == MSG_SHUTDOWN_DRAIN && is_ready) {
					if (!drain.on) {
						drain_begin(dir, &drain, req.u.shutdown.grace_ms, log_fd,
							    "unicorn down --drain");
						write_status(dir, s, &o, start_ns, is_ready);
					}
				} else {
					stop = true;
				}
			} else if (req.type == MSG_PING) {
				msg_init(&rep, MSG_PONG);
				rep.u.ping.nonce = req.u.ping.nonce;
			} else {
				msg_init(&rep, MSG_ERROR);
				rep.u.error.code = ERR_INVAL;
				rep.u.error.ref_seq = req.seq;
				msg_set_str(rep.u.error.text, sizeof rep.u.error.text,
					    "control.ipc serves STATUS_REQ, PING and SHUTDOWN");
			}
			bus_reply(pend, &rep);
			if (stop) {
				dprintf(log_fd, "[unicorn-up] shutdown requested: stopping the cluster\n");
				break;
			}
		}
		if (!is_ready && access(ready_path, F_OK) == 0 &&
		    (o.no_http || access(api_ready_path, F_OK) == 0)) {
			is_ready = true;
			write_status(dir, s, &o, start_ns, is_ready); /* before anyone hears "ready" */
			char line[PATH_MAX + 640], hurl[320], hline[400] = "";
			http_url_read(dir, hurl, sizeof hurl);
			if (hurl[0])
				snprintf(hline, sizeof hline, "; OpenAI API at %s/v1%s", hurl,
					 o.api_key && *o.api_key ? " (API key required)" : "");
			snprintf(line, sizeof line,
				 "unicorn: ready \xe2\x80\x94 model %s%s, placement %s, try: unicorn run --name %s \"Hello\"%s\n",
				 o.model, o.demo ? " (the demo model: random weights, it produces no meaningful "
				 "text; get a real one with `unicorn pull ORG/NAME`)" : "",
				 o.placement, o.name, hline);
			dprintf(log_fd, "%s", line);
			if (notify >= 0) {
				dprintf(notify, "0%s", line);
				close(notify);
				notify = -1;
			}
		}
		/* status.json changes when the table does (a child started, exited
		 * or reported new figures), not on a timer: an idle cluster writes
		 * nothing */
		if (sup_take_changes(s))
			write_status(dir, s, &o, start_ns, is_ready);
		if (drain.on && drain_over(s, &drain, log_fd))
			break;
	}
stop:
	sup_stop(s, GRACE_MS);
	sup_destroy(s);
	bus_close(control);
	remove_run_files(dir);
	rundir_pid_remove(dir);
	rmdir(dir); /* only succeeds when nothing (a -d log) is left */
	if (notify >= 0) {
		dprintf(notify, "1unicorn-up: the cluster stopped before it was ready\n");
		close(notify);
	}
	dprintf(log_fd, "[unicorn-up] stopped\n");
	return exit_code;
}
