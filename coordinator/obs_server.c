/* obs_server: observability answers over RUNDIR/obs.ipc (see obs_server.h). */
#include "coordinator/obs_server.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/err.h"
#include "coordinator/metrics.h"
#include "coordinator/trace.h"
#include "ipc/bus.h"
#include "ipc/rundir.h"

struct obs_server {
	struct bus *b;
	struct metrics *m;
	struct trace *t;
	pthread_t th;
	atomic_bool stop;
};

/* status line + body, one malloc'ed answer */
static char *answer(const char *status, const char *body, size_t n, size_t *len)
{
	size_t k = strlen(status);
	char *a = malloc(k + 1 + n);
	if (!a)
		return NULL;
	memcpy(a, status, k);
	a[k] = '\n';
	memcpy(a + k + 1, body, n);
	*len = k + 1 + n;
	return a;
}

/* status line + a sentence */
static char *answer_msg(const char *status, const char *msg, size_t *len)
{
	return answer(status, msg, strlen(msg), len);
}

static char *serve_one(struct obs_server *s, const char *req, size_t *len)
{
	char *body = NULL, *a;
	size_t n = 0;
	int64_t since;
	char tail;
	if (!strcmp(req, "metrics") || !strcmp(req, "metrics.json")) {
		if (!s->m)
			return answer_msg("503", "metrics are not available", len);
		if (req[7] == 0) {
			if (metrics_render_prom(s->m, &body, &n))
				return NULL;
		} else {
			json_t *o = metrics_snapshot(s->m);
			body = o ? json_dumps(o, JSON_COMPACT) : NULL;
			json_decref(o);
			if (!body)
				return NULL;
			n = strlen(body);
		}
	} else if (sscanf(req, "trace %" SCNd64 "%c", &since, &tail) == 1) {
		if (!s->t)
			return answer_msg("503", "tracing is not available", len);
		if (trace_export_json(s->t, since, &body, &n, NULL))
			return NULL;
	} else {
		return answer_msg("400", "ask metrics, metrics.json or trace SINCE_NS", len);
	}
	a = answer("200", body, n, len);
	free(body);
	return a;
}

static void *serve(void *arg)
{
	struct obs_server *s = arg;
	while (!atomic_load(&s->stop)) {
		void *req;
		size_t n;
		struct bus_pending *p;
		/* long waits: bus_interrupt ends this one when the server stops */
		int rc = bus_serve_bytes(s->b, 60000, &req, &n, &p);
		if (rc == ERR_TIMEOUT)
			continue;
		if (rc) {
			if (atomic_load(&s->stop))
				break;
			fprintf(stderr, "coordinator: obs: %s\n", err_msg());
			continue;
		}
		char text[64];
		size_t k = n < sizeof text - 1 ? n : sizeof text - 1;
		memcpy(text, req, k);
		text[k] = 0;
		free(req);
		size_t len = 0;
		char *a = n < sizeof text ? serve_one(s, text, &len) : NULL;
		if (!a)
			a = n < sizeof text ? answer_msg("503", "out of memory", &len)
					    : answer_msg("400", "request too long", &len);
		if (a)
			bus_reply_bytes(p, a, len);
		else
			bus_pending_drop(p);
		free(a);
	}
	return NULL;
}

int obs_server_start(const char *rundir, struct metrics *m, struct trace *t, struct obs_server **out)
{
	*out = NULL;
	char url[BUS_URL_MAX];
	int rc = rundir_url(rundir, RUNDIR_OBS, url, sizeof url);
	if (rc)
		return rc;
	struct obs_server *s = calloc(1, sizeof *s);
	if (!s)
		return err_set(ERR_NOMEM, "obs: out of memory");
	s->m = m;
	s->t = t;
	if ((rc = bus_listen(url, BUS_REP, &s->b))) {
		free(s);
		return rc;
	}
	if (pthread_create(&s->th, NULL, serve, s)) {
		bus_close(s->b);
		free(s);
		return err_set(ERR_NOMEM, "obs: cannot start its thread");
	}
	*out = s;
	return 0;
}

void obs_server_stop(struct obs_server *s)
{
	if (!s)
		return;
	atomic_store(&s->stop, true);
	bus_interrupt(s->b);
	pthread_join(s->th, NULL);
	bus_close(s->b);
	free(s);
}
