/* unicorn-api: the cluster's HTTP server (docs/http.md), a process of its own
 * so that HTTP clients outlive a coordinator crash (docs/cluster.md).
 *
 * libmicrohttpd's connection threads parse requests (api/http.c); this loop
 * takes their jobs: /tokenize and /detokenize are answered here (the API
 * loads the model's tokenizer), generations each get a relay thread
 * (api/relay.h) that talks to the coordinator over coordinator.ipc, the same
 * request protocol the CLI uses. /metrics, /dashboard and /trace ask the
 * coordinator over obs.ipc (api/obs_client.h). /health is 503 while any
 * process of the cluster is down (the supervisor's status.json, read once a
 * second).
 *
 * Started by unicorn-up after the coordinator, restarted like every child.
 * It writes RUNDIR/http (its URL, for unicorn top/trace and the ready line)
 * and RUNDIR/api-ready once it listens (or knows HTTP is off). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "api/dashboard.h"
#include "api/http.h"
#include "api/image_fetch.h"
#include "api/obs_client.h"
#include "api/openai.h"
#include "api/relay.h"
#include "common/err.h"
#include "common/utf8.h"
#include "chat/template.h"
#include "formats/mmproj.h"
#include "formats/model.h"
#include "coordinator/obs_server.h"
#include "ipc/ctl.h"
#include "ipc/kvlayout.h"
#include "ipc/live.h"
#include "ipc/rundir.h"
#include "tokenizer/tokenizer.h"

#define API_TICK_MS 10000      /* the idle loop's heartbeat (jobs and SHUTDOWN wake it) */
#define API_STOP_WAIT_MS 3000  /* running requests get this long to end at shutdown */

static volatile sig_atomic_t g_stop;
static int g_wake_fd = -1;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
	uint64_t one = 1;
	ssize_t n = write(g_wake_fd, &one, sizeof one);
	(void)n;
}

static void wake(void *arg)
{
	(void)arg;
	uint64_t one = 1;
	ssize_t n = write(g_wake_fd, &one, sizeof one); /* a full counter is awake anyway */
	(void)n;
}

struct api {
	const char *rundir;
	char draining_path[RUNDIR_PATH_MAX];
	bool draining;                  /* atomic: sticky once the drain file was seen */
	pthread_mutex_t page_mu;        /* below: the coordinator's liveness page, for /health */
	const struct live_page *coord_page;
	pid_t coord_pid;
	struct tok *tok;
	struct http *http;
	struct relay_ctx relay;
	struct ctl *ctl;
	uint64_t served;
	char url[320];
};

static void fill_status(void *arg, struct msg_status *st)
{
	struct api *a = arg;
	msg_set_str(st->backend, sizeof st->backend, "http");
	msg_set_str(st->device, sizeof st->device, a->url[0] ? a->url : "off");
	st->steps = __atomic_load_n(&a->served, __ATOMIC_RELAXED);
}

static void answer_json(struct api *a, struct http_job *j, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s)
		http_job_result(a->http, j, s);
	else
		http_job_refuse(a->http, j, 500, "server_error", NULL, NULL, "out of memory");
}

static void tokenize(struct api *a, struct http_job *j)
{
	struct tok_ids ids = { 0 };
	size_t len = strlen(j->text);
	int rc = j->add_special ? chat_encode_plain(a->tok, j->text, len, &ids)
				: tok_encode(a->tok, j->text, len, false, &ids);
	if (rc) {
		http_job_refuse(a->http, j, 400, "invalid_request_error", "text", NULL, err_msg());
		return;
	}
	json_t *arr = json_array();
	for (size_t i = 0; i < ids.n; i++)
		json_array_append_new(arr, json_integer(ids.ids[i]));
	tok_ids_free(&ids);
	answer_json(a, j, json_pack("{s:o}", "tokens", arr));
}

static void detokenize(struct api *a, struct http_job *j)
{
	for (size_t i = 0; i < j->n_ids; i++)
		if ((uint32_t)j->ids[i] >= tok_n_vocab(a->tok)) {
			char m[128];
			snprintf(m, sizeof m, "tokens[%zu] = %d is out of the vocabulary (0..%u)", i,
				 j->ids[i], tok_n_vocab(a->tok) - 1);
			http_job_refuse(a->http, j, 400, "invalid_request_error", "tokens", NULL, m);
			return;
		}
	char *text = NULL;
	size_t len = 0;
	if (tok_decode(a->tok, j->ids, j->n_ids, 0, &text, &len)) {
		http_job_refuse(a->http, j, 400, "invalid_request_error", "tokens", NULL, err_msg());
		return;
	}
	/* the tokens' bytes need not be UTF-8 (a byte token alone, half a
	 * character): ill-formed sequences become U+FFFD, as llama.cpp and
	 * transformers decode them */
	char *valid = NULL;
	size_t vlen = 0;
	if (utf8_sanitize(text ? text : "", text ? len : 0, &valid, &vlen)) {
		free(text);
		http_job_refuse(a->http, j, 500, "server_error", NULL, NULL, err_msg());
		return;
	}
	free(text);
	answer_json(a, j, json_pack("{s:s%}", "text", valid, vlen));
	free(valid);
}

static void take_jobs(struct api *a)
{
	struct http_job *j;
	while ((j = http_take(a->http))) {
		if (j->kind == HTTP_JOB_GENERATE && !http_job_gone(a->http, j)) {
			__atomic_add_fetch(&a->served, 1, __ATOMIC_RELAXED);
			if (relay_start(&a->relay, j))
				fprintf(stderr, "api: %s\n", err_msg());
			continue; /* the relay releases j */
		}
		if (http_job_gone(a->http, j))
			;
		else if (j->kind == HTTP_JOB_TOKENIZE)
			tokenize(a, j);
		else if (j->kind == HTTP_JOB_DETOKENIZE)
			detokenize(a, j);
		http_job_release(a->http, j);
	}
}

/* Whether the cluster drains (unicorn-up wrote RUNDIR/draining: unicorn down
 * --drain, SIGTERM): asked before every POST and /health, one access(2);
 * sticky, the cluster is leaving. */
static bool draining(void *arg)
{
	struct api *a = arg;
	if (__atomic_load_n(&a->draining, __ATOMIC_RELAXED))
		return true;
	if (access(a->draining_path, F_OK))
		return false;
	__atomic_store_n(&a->draining, true, __ATOMIC_RELAXED);
	return true;
}

/* The coordinator's load from its liveness page (ipc/live.h), mapped once
 * per coordinator pid. */
static void coord_load(struct api *a, pid_t pid, struct http_load *load)
{
	pthread_mutex_lock(&a->page_mu);
	if (pid != a->coord_pid || !a->coord_page) {
		live_unmap(a->coord_page);
		a->coord_page = NULL;
		a->coord_pid = pid;
		if (pid > 0 && live_open(a->rundir, MSG_ROLE_COORDINATOR, pid, &a->coord_page))
			a->coord_page = NULL;
	}
	struct live_load l;
	if (a->coord_page && live_read_load(a->coord_page, &l)) {
		load->known = true;
		load->running = l.running;
		load->queued = l.queued;
		load->slots = l.slots;
	}
	pthread_mutex_unlock(&a->page_mu);
}

/* /health, asked per request: draining once unicorn-up began a drain; else
 * ready when the supervisor's status.json (at most a second old) says the
 * cluster is ready, every process runs, and the coordinator does not report
 * a worker down (a restarted worker loads before its link is back). The
 * load is the coordinator's, from its liveness page (current to its last
 * loop iteration). */
static int health(void *arg, struct http_load *load)
{
	struct api *a = arg;
	char path[RUNDIR_PATH_MAX];
	bool drain = draining(a);
	if (rundir_path(a->rundir, RUNDIR_STATUS, path, sizeof path))
		return drain ? HTTP_DRAINING : HTTP_DEGRADED;
	json_t *root = json_load_file(path, 0, NULL);
	bool up = root && json_is_true(json_object_get(root, "ready"));
	json_t *procs = root ? json_object_get(root, "processes") : NULL;
	size_t i;
	json_t *p;
	pid_t coord = 0;
	json_array_foreach(procs, i, p) {
		const char *dev = json_string_value(json_object_get(p, "device"));
		bool restarted = json_integer_value(json_object_get(p, "restarts")) > 0;
		json_int_t role = json_integer_value(json_object_get(p, "role"));
		json_int_t pid = json_integer_value(json_object_get(p, "pid"));
		if (role == MSG_ROLE_COORDINATOR && pid > 0)
			coord = (pid_t)pid;
		if (pid <= 0 || (dev && !strcmp(dev, COORD_DEGRADED)) ||
		    (restarted && !dev && role != MSG_ROLE_API))
			up = false; /* down, recovering, or restarted and not yet heard from */
	}
	json_decref(root);
	coord_load(a, coord, load);
	if (drain)
		return HTTP_DRAINING;
	return up ? HTTP_READY : HTTP_DEGRADED;
}

static int write_file(const char *dir, const char *name, const char *text)
{
	char path[RUNDIR_PATH_MAX], tmp[RUNDIR_PATH_MAX + 8];
	if (rundir_path(dir, name, path, sizeof path))
		return -1;
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	fputs(text, f);
	if (fclose(f) || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static void remove_file(const char *dir, const char *name)
{
	char path[RUNDIR_PATH_MAX];
	if (!rundir_path(dir, name, path, sizeof path))
		unlink(path);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: unicorn-api --rundir DIR --model PATH [--host H] [--port P]\n"
		"                   [--cors ORIGIN] [--request-timeout S] [--ctx N] [--mmproj FILE]\n"
		"                   [--allow-image-urls]\n"
		"The cluster's OpenAI-compatible HTTP server (docs/http.md), started by unicorn-up.\n"
		"Default %s:%d; the API key comes from the environment variable UNICORN_API_KEY\n"
		"(required for a non-loopback --host). --request-timeout: the coordinator's limit\n"
		"(how long a request may wait without news before it is given up). --mmproj: the\n"
		"vision projector; image_url content parts are refused without one.\n"
		"--allow-image-urls: fetch http(s) image_url parts (default: data URLs only).\n",
		HTTP_DEFAULT_HOST, HTTP_DEFAULT_PORT);
}

int main(int argc, char **argv)
{
	static struct api a;
	const char *model = NULL, *mmproj = NULL, *host = HTTP_DEFAULT_HOST, *cors = NULL, *port_arg = NULL;
	double req_timeout = 600;
	bool allow_urls = false;
	uint32_t ctx = 0; /* --ctx: the cluster's cap on positions per sequence (ipc/kvlayout.h kv_context) */
	static const struct option opts[] = {
		{ "rundir", required_argument, 0, 'r' }, { "model", required_argument, 0, 'm' },
		{ "host", required_argument, 0, 'H' },   { "port", required_argument, 0, 'P' },
		{ "cors", required_argument, 0, 'C' },   { "request-timeout", required_argument, 0, 'T' },
		{ "ctx", required_argument, 0, 'c' },    { "mmproj", required_argument, 0, 'M' },
		{ "allow-image-urls", no_argument, 0, 'U' },
		{ "help", no_argument, 0, 'h' },         { 0, 0, 0, 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'r': a.rundir = optarg; break;
		case 'm': model = optarg; break;
		case 'M': mmproj = optarg; break;
		case 'U': allow_urls = true; break;
		case 'H': host = optarg; break;
		case 'P': port_arg = optarg; break;
		case 'C': cors = optarg; break;
		case 'c': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || end == optarg || v < 1 || v > KV_MAX_CTX) {
				fprintf(stderr, "api: --ctx '%s': positions, 1..%d\n", optarg, KV_MAX_CTX);
				return 2;
			}
			ctx = (uint32_t)v;
			break;
		}
		case 'T': {
			char *end;
			req_timeout = strtod(optarg, &end);
			if (*end || end == optarg || !(req_timeout >= 0 && req_timeout <= OAI_MAX_TIMEOUT_S)) {
				fprintf(stderr, "api: --request-timeout '%s': seconds, 0 (none) .. %.0f\n",
					optarg, OAI_MAX_TIMEOUT_S);
				return 2;
			}
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!a.rundir || !model || optind < argc) {
		usage(stderr);
		return 2;
	}
	int port = HTTP_DEFAULT_PORT;
	if (port_arg) {
		char *end;
		long v = strtol(port_arg, &end, 10);
		if (*end || end == port_arg || v < 1 || v > 65535) {
			fprintf(stderr, "api: --port '%s': must be 1..65535\n", port_arg);
			return 2;
		}
		port = (int)v;
	}
	const char *api_key = getenv("UNICORN_API_KEY");
	if (!oai_host_is_loopback(host) && !(api_key && *api_key)) {
		fprintf(stderr, "api: --host %s is not a loopback address: refusing to serve HTTP on it "
			"without an API key (unicorn-up --api-key KEY)\n", host);
		return 2;
	}
	g_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (g_wake_fd < 0) {
		perror("api: eventfd");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (rundir_check(a.rundir) ||
	    rundir_path(a.rundir, RUNDIR_DRAINING, a.draining_path, sizeof a.draining_path)) {
		fprintf(stderr, "api: %s\n", err_msg());
		return 2;
	}
	pthread_mutex_init(&a.page_mu, NULL);
	remove_file(a.rundir, RUNDIR_API_READY);
	{
		char hint[RUNDIR_PATH_MAX + 128];
		rundir_log_hint(a.rundir, hint, sizeof hint);
		oai_set_log_hint(hint);
	}
	if (ctl_start(a.rundir, MSG_ROLE_API, fill_status, &a, 0, &a.ctl)) {
		fprintf(stderr, "api: control link: %s\n", err_msg());
		return 1;
	}
	struct model *m = NULL;
	if (tok_load(model, &a.tok) || model_open(model, &m)) {
		fprintf(stderr, "api: %s: %s\n", model, err_msg());
		return 2;
	}
	a.relay.n_ctx = kv_context(&m->cfg, ctx);
	/* images: the projector's input size and tokens per image (the gpu
	 * worker holds the tower itself) */
	static struct vision_config vision;
	if (mmproj) {
		struct mmproj *p = NULL;
		if (mmproj_open(mmproj, &p) || mmproj_check_text(p, &m->cfg)) {
			fprintf(stderr, "api: --mmproj %s: %s\n", mmproj, err_msg());
			mmproj_close(p);
			model_close(m);
			return 2;
		}
		vision = p->cfg;
		a.relay.vision = &vision;
		mmproj_close(p);
	}
	/* before any relay thread may fetch (curl's global start is not thread-safe) */
	if (allow_urls && a.relay.vision) {
		if (image_fetch_init()) {
			fprintf(stderr, "api: --allow-image-urls: %s\n", err_msg());
			model_close(m);
			return 2;
		}
		a.relay.allow_image_urls = true;
	}
	model_close(m);
	a.relay.tok = a.tok;
	a.relay.rundir = a.rundir;
	a.relay.request_timeout_s = (uint32_t)req_timeout;
	if (relay_init(&a.relay)) {
		fprintf(stderr, "api: %s\n", err_msg());
		return 1;
	}
	/* The model's name is its file name without the extension. */
	char name[256];
	const char *base = strrchr(model, '/');
	snprintf(name, sizeof name, "%s", base ? base + 1 : model);
	char *dot = strrchr(name, '.');
	if (dot && dot != name && (!strcmp(dot, ".gguf") || !strcmp(dot, ".json")))
		*dot = 0;
	struct http_opts ho = { .host = host, .port = port, .api_key = api_key, .cors = cors,
				.model = name, .n_ctx = a.relay.n_ctx, .on_job = wake,
				.health = health, .health_arg = &a, .draining = draining,
				.draining_arg = &a };
	if (http_start(&ho, &a.http)) {
		/* An explicit --port must work; the default port may be taken by
		 * another cluster: then this one runs without HTTP. */
		fprintf(stderr, "api: %s%s\n", err_msg(), port_arg ? "" : "; HTTP is off for this cluster");
		if (port_arg)
			return 2;
	} else {
		snprintf(a.url, sizeof a.url, "%s", http_url(a.http));
		char line[340];
		snprintf(line, sizeof line, "%s\n", a.url);
		write_file(a.rundir, RUNDIR_HTTP, line);
		dashboard_register(obs_client_fetch, (void *)a.rundir);
		a.relay.h = a.http;
		/* requests are taken from now on: a relay waits for a coordinator
		 * that is (re)starting; /health asks health() */
		http_set_health(a.http, HTTP_READY);
		fprintf(stderr, "api: HTTP on %s%s\n", a.url, api_key && *api_key ? " (API key required)" : "");
	}
	write_file(a.rundir, RUNDIR_API_READY, a.url[0] ? "http\n" : "off\n");

	while (!g_stop && !ctl_shutdown_requested(a.ctl)) {
		ctl_heartbeat(a.ctl);
		/* HTTP requests in flight, for a drain (unicorn-up waits for 0;
		 * every job's start and end wake this loop) */
		ctl_set_load(a.ctl, a.http ? http_jobs(a.http) : 0, 0, 0);
		if (a.http)
			take_jobs(&a);
		struct pollfd p[2] = { { .fd = g_wake_fd, .events = POLLIN },
				       { .fd = ctl_wake_fd(a.ctl), .events = POLLIN } };
		if (poll(p, 2, API_TICK_MS) > 0 && (p[0].revents & POLLIN)) {
			uint64_t v;
			ssize_t n = read(g_wake_fd, &v, sizeof v);
			(void)n;
		}
	}
	fprintf(stderr, "api: shutting down (%u requests running)\n", relay_running(&a.relay));
	remove_file(a.rundir, RUNDIR_API_READY);
	if (a.http) {
		remove_file(a.rundir, RUNDIR_HTTP);
		relay_stop_all(&a.relay, API_STOP_WAIT_MS);
		if (relay_running(&a.relay)) {
			/* relays still use the server and the tokenizer: the process
			 * exit ends their connections */
			ctl_stop(a.ctl);
			return 0;
		}
		dashboard_register(NULL, NULL);
		http_stop(a.http);
	}
	tok_free(a.tok);
	ctl_stop(a.ctl);
	return 0;
}
