/* metrics: registry, Prometheus text rendering, JSON snapshot (see metrics.h). */
#include "coordinator/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"

struct series {
	char label[METRICS_LABEL_MAX];
	double value;                          /* counter/gauge; histogram: sum */
	double prev, rate;                     /* counters: value at the last tick, rate since */
	uint64_t count;                        /* histogram observations */
	uint64_t buckets[METRICS_MAX_BUCKETS]; /* per bucket (not cumulative) */
};

struct metric {
	char name[METRICS_NAME_MAX];
	char label[METRICS_NAME_MAX];          /* "" = unlabelled */
	char *help;
	enum metrics_kind kind;
	double bounds[METRICS_MAX_BUCKETS];
	size_t n_bounds;
	struct series s[METRICS_MAX_SERIES];
	size_t n_series;
};

struct metrics {
	pthread_mutex_t mu;
	struct metric m[METRICS_MAX];
	size_t n;
	double t_tick;                         /* monotonic s of the last tick; 0 = never */
};

int metrics_create(struct metrics **out)
{
	struct metrics *m = calloc(1, sizeof *m);
	if (!m)
		return err_set(ERR_NOMEM, "metrics: out of memory");
	pthread_mutex_init(&m->mu, NULL);
	*out = m;
	return 0;
}

void metrics_destroy(struct metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->m[i].help);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static int name_ok(const char *s, int colon)
{
	if (!s || !*s || strlen(s) >= METRICS_NAME_MAX)
		return 0;
	for (size_t i = 0; s[i]; i++) {
		char c = s[i];
		int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
			    (colon && c == ':');
		if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
			return 0;
	}
	return 1;
}

int metrics_define(struct metrics *m, const char *name, enum metrics_kind kind, const char *help,
		   const char *label, const double *buckets, size_t n_buckets)
{
	if (!name_ok(name, 1))
		return err_set(ERR_INVAL, "metrics: name '%s' is not a Prometheus metric name",
			       name ? name : "(null)");
	if (label && (!name_ok(label, 0) || !strcmp(label, "le") || !strncmp(label, "__", 2)))
		return err_set(ERR_INVAL, "metrics: %s: label name '%s' not allowed", name, label);
	if (kind != METRICS_COUNTER && kind != METRICS_GAUGE && kind != METRICS_HISTOGRAM)
		return err_set(ERR_INVAL, "metrics: %s: kind %d", name, (int)kind);
	if (kind == METRICS_HISTOGRAM) {
		if (!buckets || n_buckets == 0 || n_buckets > METRICS_MAX_BUCKETS)
			return err_set(ERR_INVAL, "metrics: %s: %zu buckets (1..%d)", name, n_buckets,
				       METRICS_MAX_BUCKETS);
		for (size_t i = 0; i < n_buckets; i++)
			if (!isfinite(buckets[i]) || (i && buckets[i] <= buckets[i - 1]))
				return err_set(ERR_INVAL, "metrics: %s: buckets must increase", name);
	} else if (n_buckets) {
		return err_set(ERR_INVAL, "metrics: %s: buckets on a non-histogram", name);
	}
	pthread_mutex_lock(&m->mu);
	int id = -1;
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->m[i].name, name))
			id = ERR_STATE;
	if (id == -1 && m->n >= METRICS_MAX)
		id = ERR_RANGE;
	if (id == -1) {
		struct metric *x = &m->m[m->n];
		memset(x, 0, sizeof *x);
		snprintf(x->name, sizeof x->name, "%s", name);
		snprintf(x->label, sizeof x->label, "%s", label ? label : "");
		x->help = strdup(help ? help : "");
		x->kind = kind;
		x->n_bounds = n_buckets;
		if (n_buckets)
			memcpy(x->bounds, buckets, n_buckets * sizeof *buckets);
		if (!x->help)
			id = ERR_NOMEM;
		else
			id = (int)m->n++;
	}
	pthread_mutex_unlock(&m->mu);
	if (id == ERR_STATE)
		return err_set(ERR_STATE, "metrics: %s defined twice", name);
	if (id == ERR_RANGE)
		return err_set(ERR_RANGE, "metrics: more than %d metrics", METRICS_MAX);
	if (id == ERR_NOMEM)
		return err_set(ERR_NOMEM, "metrics: out of memory");
	return id;
}

/* The series of label value lv (created if new and create); mutex held. */
static struct series *series_of(struct metrics *m, int id, const char *lv, int create)
{
	if (id < 0 || (size_t)id >= m->n)
		return NULL;
	struct metric *x = &m->m[id];
	if (!x->label[0])
		lv = "";
	else if (!lv)
		lv = "";
	for (size_t i = 0; i < x->n_series; i++)
		if (!strcmp(x->s[i].label, lv))
			return &x->s[i];
	if (!create || x->n_series >= METRICS_MAX_SERIES || strlen(lv) >= METRICS_LABEL_MAX)
		return NULL;
	struct series *s = &x->s[x->n_series++];
	memset(s, 0, sizeof *s);
	snprintf(s->label, sizeof s->label, "%s", lv);
	return s;
}

static int update(struct metrics *m, int id, const char *lv, double v, int op)
{
	if (!isfinite(v))
		return err_set(ERR_INVAL, "metrics: value not finite");
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct series *s = series_of(m, id, lv, 1);
	if (!s) {
		rc = ERR_RANGE;
		goto out;
	}
	struct metric *x = &m->m[id];
	if (op == 0) { /* add */
		if (x->kind == METRICS_HISTOGRAM || (x->kind == METRICS_COUNTER && v < 0))
			rc = ERR_INVAL;
		else
			s->value += v;
	} else if (op == 1) { /* set */
		if (x->kind == METRICS_HISTOGRAM)
			rc = ERR_INVAL;
		else
			s->value = v;
	} else { /* observe */
		if (x->kind != METRICS_HISTOGRAM) {
			rc = ERR_INVAL;
		} else {
			size_t b = 0;
			while (b < x->n_bounds && v > x->bounds[b])
				b++;
			if (b < x->n_bounds)
				s->buckets[b]++;
			s->count++;
			s->value += v;
		}
	}
out:
	pthread_mutex_unlock(&m->mu);
	if (rc == ERR_RANGE)
		return err_set(rc, "metrics: metric %d: no room for label value", id);
	if (rc)
		return err_set(rc, "metrics: metric %d: wrong operation for its kind", id);
	return 0;
}

int metrics_add(struct metrics *m, int id, const char *lv, double v)
{
	return update(m, id, lv, v, 0);
}

int metrics_set(struct metrics *m, int id, const char *lv, double v)
{
	return update(m, id, lv, v, 1);
}

int metrics_observe(struct metrics *m, int id, const char *lv, double v)
{
	return update(m, id, lv, v, 2);
}

double metrics_value(struct metrics *m, int id, const char *lv)
{
	pthread_mutex_lock(&m->mu);
	struct series *s = series_of(m, id, lv, 0);
	double v = !s ? 0 : m->m[id].kind == METRICS_HISTOGRAM ? (double)s->count : s->value;
	pthread_mutex_unlock(&m->mu);
	return v;
}

double metrics_rate(struct metrics *m, int id, const char *lv)
{
	pthread_mutex_lock(&m->mu);
	struct series *s = series_of(m, id, lv, 0);
	double v = s ? s->rate : 0;
	pthread_mutex_unlock(&m->mu);
	return v;
}

int metrics_tick(struct metrics *m, double now, double min_interval)
{
	pthread_mutex_lock(&m->mu);
	double dt = now - m->t_tick;
	int ticked = 0;
	if (m->t_tick == 0 || dt >= min_interval) {
		for (size_t i = 0; i < m->n; i++) {
			struct metric *x = &m->m[i];
			for (size_t k = 0; k < x->n_series; k++) {
				struct series *s = &x->s[k];
				double v = x->kind == METRICS_HISTOGRAM ? (double)s->count : s->value;
				/* a mirrored counter that went down (the process restarted)
				 * counts from zero, as Prometheus' rate() does */
				double d = v >= s->prev ? v - s->prev : v;
				s->rate = m->t_tick == 0 || dt <= 0 ? 0 : d / dt;
				s->prev = v;
			}
		}
		m->t_tick = now;
		ticked = 1;
	}
	pthread_mutex_unlock(&m->mu);
	return ticked;
}

/* mutex held */
static double quantile_locked(const struct metric *x, const struct series *s, double q)
{
	if (!s || !s->count)
		return NAN;
	double rank = q * (double)s->count;
	uint64_t cum = 0;
	for (size_t b = 0; b < x->n_bounds; b++) {
		uint64_t before = cum;
		cum += s->buckets[b];
		if ((double)cum >= rank && s->buckets[b]) {
			double lo = b ? x->bounds[b - 1] : 0.0;
			if (lo > x->bounds[b])
				lo = x->bounds[b];
			double frac = (rank - (double)before) / (double)s->buckets[b];
			return lo + (x->bounds[b] - lo) * frac;
		}
	}
	/* in the +Inf bucket: the highest finite bound, like histogram_quantile */
	return x->bounds[x->n_bounds - 1];
}

double metrics_quantile(struct metrics *m, int id, const char *lv, double q)
{
	pthread_mutex_lock(&m->mu);
	struct series *s = series_of(m, id, lv, 0);
	double v = s && m->m[id].kind == METRICS_HISTOGRAM ? quantile_locked(&m->m[id], s, q) : NAN;
	pthread_mutex_unlock(&m->mu);
	return v;
}

size_t metrics_escape_label(const char *v, char *out, size_t cap)
{
	size_t n = 0;
	if (!cap)
		return 0;
	for (; *v; v++) {
		const char *rep = NULL;
		char one[2] = { *v, 0 };
		if (*v == '\\')
			rep = "\\\\";
		else if (*v == '"')
			rep = "\\\"";
		else if (*v == '\n')
			rep = "\\n";
		else
			rep = one;
		size_t k = strlen(rep);
		if (n + k + 1 > cap)
			break;
		memcpy(out + n, rep, k);
		n += k;
	}
	out[n] = 0;
	return n;
}

/* --- text rendering ---------------------------------------------------------- */

struct buf {
	char *p;
	size_t n, cap;
	int fail;
};

static void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...)
{
	if (b->fail)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if (k < 0) {
			b->fail = 1;
			return;
		}
		if ((size_t)k < b->cap - b->n) {
			b->n += (size_t)k;
			return;
		}
		size_t cap = (b->cap + (size_t)k + 1) * 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->fail = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

/* Prometheus float: Go's strconv forms for the specials. */
static void fmt_num(char *out, size_t cap, double v)
{
	if (isnan(v))
		snprintf(out, cap, "NaN");
	else if (isinf(v))
		snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 1e15)
		snprintf(out, cap, "%.0f", v);
	else
		snprintf(out, cap, "%.15g", v);
}

static void help_escaped(struct buf *b, const char *h)
{
	for (; *h; h++) {
		if (*h == '\\')
			bprintf(b, "\\\\");
		else if (*h == '\n')
			bprintf(b, "\\n");
		else
			bprintf(b, "%c", *h);
	}
}

/* "{label=\"v\"" (no closing brace: histograms append le) or "" */
static void labels_open(struct buf *b, const struct metric *x, const struct series *s)
{
	if (!x->label[0])
		return;
	char esc[METRICS_LABEL_MAX * 2 + 1];
	metrics_escape_label(s->label, esc, sizeof esc);
	bprintf(b, "{%s=\"%s\"", x->label, esc);
}

int metrics_render_prom(struct metrics *m, char **out, size_t *len)
{
	struct buf b = { 0 };
	b.cap = 4096;
	b.p = malloc(b.cap);
	if (!b.p)
		return err_set(ERR_NOMEM, "metrics: out of memory");
	b.p[0] = 0;
	char num[64];
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n; i++) {
		const struct metric *x = &m->m[i];
		bprintf(&b, "# HELP %s ", x->name);
		help_escaped(&b, x->help);
		bprintf(&b, "\n# TYPE %s %s\n", x->name,
			x->kind == METRICS_COUNTER ? "counter" :
			x->kind == METRICS_GAUGE ? "gauge" : "histogram");
		struct series zero = { 0 };
		size_t n_series = x->n_series;
		/* an unlabelled metric always has its one series (0 until set) */
		const struct series *list = x->s;
		if (!x->label[0] && !n_series) {
			list = &zero;
			n_series = 1;
		}
		for (size_t k = 0; k < n_series; k++) {
			const struct series *s = &list[k];
			if (x->kind != METRICS_HISTOGRAM) {
				bprintf(&b, "%s", x->name);
				labels_open(&b, x, s);
				fmt_num(num, sizeof num, s->value);
				bprintf(&b, "%s %s\n", x->label[0] ? "}" : "", num);
				continue;
			}
			uint64_t cum = 0;
			for (size_t q = 0; q <= x->n_bounds; q++) {
				cum += q < x->n_bounds ? s->buckets[q] : 0;
				char le[64];
				fmt_num(le, sizeof le, q < x->n_bounds ? x->bounds[q] : INFINITY);
				bprintf(&b, "%s_bucket", x->name);
				if (x->label[0]) {
					labels_open(&b, x, s);
					bprintf(&b, ",le=\"%s\"}", le);
				} else {
					bprintf(&b, "{le=\"%s\"}", le);
				}
				bprintf(&b, " %llu\n",
					(unsigned long long)(q < x->n_bounds ? cum : s->count));
			}
			fmt_num(num, sizeof num, s->value);
			bprintf(&b, "%s_sum", x->name);
			labels_open(&b, x, s);
			bprintf(&b, "%s %s\n", x->label[0] ? "}" : "", num);
			bprintf(&b, "%s_count", x->name);
			labels_open(&b, x, s);
			bprintf(&b, "%s %llu\n", x->label[0] ? "}" : "", (unsigned long long)s->count);
		}
	}
	pthread_mutex_unlock(&m->mu);
	if (b.fail) {
		free(b.p);
		return err_set(ERR_NOMEM, "metrics: out of memory");
	}
	*out = b.p;
	*len = b.n;
	return 0;
}

/* --- JSON --------------------------------------------------------------------- */

static json_t *num_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

json_t *metrics_snapshot(struct metrics *m)
{
	json_t *root = json_object(), *all = json_object();
	if (!root || !all) {
		json_decref(root);
		json_decref(all);
		return NULL;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	json_object_set_new(root, "time", json_real((double)ts.tv_sec + ts.tv_nsec * 1e-9));
	json_object_set_new(root, "metrics", all);
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n; i++) {
		const struct metric *x = &m->m[i];
		json_t *o = json_object(), *ser = json_object();
		if (!o || !ser) {
			json_decref(o);
			json_decref(ser);
			continue;
		}
		json_object_set_new(o, "type", json_string(x->kind == METRICS_COUNTER ? "counter" :
							   x->kind == METRICS_GAUGE ? "gauge" :
										      "histogram"));
		json_object_set_new(o, "label", x->label[0] ? json_string(x->label) : json_null());
		for (size_t k = 0; k < x->n_series; k++) {
			const struct series *s = &x->s[k];
			json_t *v;
			if (x->kind != METRICS_HISTOGRAM) {
				v = json_pack("{s:f, s:f}", "value", s->value, "rate", s->rate);
			} else {
				json_t *bk = json_array();
				uint64_t cum = 0;
				for (size_t q = 0; bk && q < x->n_bounds; q++) {
					cum += s->buckets[q];
					json_array_append_new(bk, json_pack("[f, I]", x->bounds[q],
									    (json_int_t)cum));
				}
				v = json_pack("{s:I, s:f, s:o, s:o, s:o, s:o, s:f}", "count",
					      (json_int_t)s->count, "sum", s->value, "p50",
					      num_or_null(quantile_locked(x, s, 0.5)), "p90",
					      num_or_null(quantile_locked(x, s, 0.9)), "p99",
					      num_or_null(quantile_locked(x, s, 0.99)), "buckets",
					      bk ? bk : json_array(), "rate", s->rate);
			}
			if (v)
				json_object_set_new(ser, s->label, v);
		}
		json_object_set_new(o, "series", ser);
		json_object_set_new(all, x->name, o);
	}
	pthread_mutex_unlock(&m->mu);
	return root;
}

/* --- the coordinator's set ------------------------------------------------------ */

static const double TTFT_BUCKETS[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
static const double ITL_BUCKETS[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
				      0.5, 1, 2.5, 5 };
static const double HANDOFF_BUCKETS[] = { 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
					  2.5e-3, 1e-2, 0.1 };
#define NB(a) (sizeof a / sizeof a[0])

int metrics_cluster_define(struct metrics *m, struct metrics_cluster *ids)
{
	struct def {
		int *id;
		const char *name;
		enum metrics_kind kind;
		const char *label, *help;
		const double *b;
		size_t nb;
	} d[] = {
		{ &ids->tokens, "unicorn_generated_tokens_total", METRICS_COUNTER, NULL,
		  "Tokens generated (sampled) for requests.", NULL, 0 },
		{ &ids->prompt_tokens, "unicorn_prompt_tokens_total", METRICS_COUNTER, NULL,
		  "Prompt tokens of requests admitted into a slot.", NULL, 0 },
		{ &ids->requests, "unicorn_requests_total", METRICS_COUNTER, "reason",
		  "Requests that ran in a slot and ended, by end reason.", NULL, 0 },
		{ &ids->steps, "unicorn_steps_total", METRICS_COUNTER, NULL,
		  "Scheduler rounds (one chunk for every live sequence).", NULL, 0 },
		{ &ids->worker_steps, "unicorn_worker_steps_total", METRICS_COUNTER, "worker",
		  "Step messages (EMBED/STAGE/HEAD/RUN) answered by each worker.", NULL, 0 },
		{ &ids->worker_busy, "unicorn_worker_busy_seconds_total", METRICS_COUNTER, "worker",
		  "The worker's accelerator time per step (DONE.gpu_ns: Vulkan timestamps).", NULL, 0 },
		{ &ids->link_busy, "unicorn_worker_link_busy_seconds_total", METRICS_COUNTER, "worker",
		  "Time with a step message outstanding on the worker's link (send to DONE).", NULL, 0 },
		{ &ids->worker_util, "unicorn_worker_utilization_ratio", METRICS_GAUGE, "worker",
		  "Share of the last second the worker spent in steps (its own time).", NULL, 0 },
		{ &ids->handoff, "unicorn_handoff_latency_seconds", METRICS_HISTOGRAM, "worker",
		  "Per step message: round trip minus the worker's own time (messaging cost).",
		  HANDOFF_BUCKETS, NB(HANDOFF_BUCKETS) },
		{ &ids->status_busy, "unicorn_worker_reported_busy_seconds_total", METRICS_COUNTER,
		  "worker", "Busy time the worker reports in its STATUS (resets when it restarts).",
		  NULL, 0 },
		{ &ids->stage_first, "unicorn_stage_first_layer", METRICS_GAUGE, "worker",
		  "Pipeline placement: the first layer a stage worker runs.", NULL, 0 },
		{ &ids->stage_last, "unicorn_stage_last_layer", METRICS_GAUGE, "worker",
		  "Pipeline placement: the last layer a stage worker runs.", NULL, 0 },
		{ &ids->ttft, "unicorn_time_to_first_token_seconds", METRICS_HISTOGRAM, NULL,
		  "From a request's arrival to its first generated token.", TTFT_BUCKETS,
		  NB(TTFT_BUCKETS) },
		{ &ids->itl, "unicorn_inter_token_latency_seconds", METRICS_HISTOGRAM, NULL,
		  "Between consecutive generated tokens of a request.", ITL_BUCKETS, NB(ITL_BUCKETS) },
		{ &ids->queue_depth, "unicorn_queue_depth", METRICS_GAUGE, NULL,
		  "Requests waiting for a slot.", NULL, 0 },
		{ &ids->active, "unicorn_active_requests", METRICS_GAUGE, NULL,
		  "Requests running in a slot.", NULL, 0 },
		{ &ids->slots, "unicorn_slots", METRICS_GAUGE, NULL,
		  "Sequence slots the scheduler uses.", NULL, 0 },
		{ &ids->kv_used, "unicorn_kv_used_tokens", METRICS_GAUGE, NULL,
		  "Positions the paged KV cache's global-layer blocks hold (live sequences and cached prefixes).",
		  NULL, 0 },
		{ &ids->kv_capacity, "unicorn_kv_capacity_tokens", METRICS_GAUGE, NULL,
		  "Positions the global-layer block pool holds (--kv-budget).", NULL, 0 },
		{ &ids->kv_prefix_hits, "unicorn_kv_prefix_hit_tokens_total", METRICS_COUNTER, NULL,
		  "Prompt positions reused from the prefix cache instead of computed.", NULL, 0 },
		{ &ids->kv_preemptions, "unicorn_kv_preemptions_total", METRICS_COUNTER, NULL,
		  "Sequences paused and later recomputed because the KV pools ran out.", NULL, 0 },
		{ &ids->kv_evictions, "unicorn_kv_prefix_evictions_total", METRICS_COUNTER, NULL,
		  "Cached prefix units dropped to free blocks.", NULL, 0 },
		{ &ids->image_encodes, "unicorn_image_encodes_total", METRICS_COUNTER, NULL,
		  "Images the gpu worker encoded (once per image while its rows stay in the image area).", NULL, 0 },
		{ &ids->kv_cached, "unicorn_kv_prefix_cached_tokens", METRICS_GAUGE, NULL,
		  "Prompt positions in the prefix cache.", NULL, 0 },
		{ &ids->kv_ratio, "unicorn_kv_usage_ratio", METRICS_GAUGE, NULL,
		  "kv_used_tokens / kv_capacity_tokens.", NULL, 0 },
		{ &ids->kv_ctx, "unicorn_kv_context_tokens", METRICS_GAUGE, NULL,
		  "Positions one sequence may hold (the model's context, capped by --ctx).", NULL, 0 },
		{ &ids->kv_type, "unicorn_kv_cache_type", METRICS_GAUGE, "type",
		  "The KV cache's element type (--kv-type): 1 for the type in use.", NULL, 0 },
		{ &ids->kv_pool_bytes, "unicorn_kv_cache_bytes", METRICS_GAUGE, NULL,
		  "Bytes of the paged KV cache's pools (--kv-budget, auto: from the device).", NULL, 0 },
		{ &ids->kv_bytes, "unicorn_worker_kv_bytes", METRICS_GAUGE, "worker",
		  "KV cache bytes the worker allocated (its STATUS).", NULL, 0 },
		{ &ids->weights_bytes, "unicorn_worker_weights_bytes", METRICS_GAUGE, "worker",
		  "Weight bytes the worker holds (its STATUS).", NULL, 0 },
		{ &ids->scratch_bytes, "unicorn_worker_scratch_bytes", METRICS_GAUGE, "worker",
		  "Scratch/activation bytes of the worker (its STATUS).", NULL, 0 },
		{ &ids->restarts, "unicorn_process_restarts_total", METRICS_COUNTER, "process",
		  "Restarts of each cluster process by the supervisor.", NULL, 0 },
		{ &ids->uptime, "unicorn_coordinator_uptime_seconds", METRICS_GAUGE, NULL,
		  "Seconds since the coordinator started.", NULL, 0 },
		{ &ids->draining, "unicorn_draining", METRICS_GAUGE, NULL,
		  "1 while the cluster drains (unicorn down --drain, SIGTERM; docs/scale.md).", NULL, 0 },
	};
	for (size_t i = 0; i < NB(d); i++) {
		int id = metrics_define(m, d[i].name, d[i].kind, d[i].help, d[i].label, d[i].b,
					d[i].nb);
		if (id < 0)
			return id;
		*d[i].id = id;
	}
	return 0;
}

/* status.json names the worker processes "gpu"/"npu", or a pipeline's "gpu0"/"gpu1" (as the coordinator's
 * worker label does); other names are the loader, coordinator, ... */
int metrics_cluster_load_status(struct metrics *m, const struct metrics_cluster *ids,
				const char *path)
{
	json_error_t e;
	json_t *root = json_load_file(path, 0, &e);
	if (!root)
		return 0;
	json_t *dr = json_is_object(root) ? json_object_get(root, "draining") : NULL;
	if (json_is_boolean(dr))
		metrics_set(m, ids->draining, NULL, json_is_true(dr) ? 1 : 0);
	json_t *procs = json_is_array(root) ? root : json_object_get(root, "processes");
	size_t i;
	json_t *p;
	json_array_foreach(procs, i, p) {
		const char *name = json_string_value(json_object_get(p, "name"));
		if (!name || !*name)
			continue;
		json_t *r = json_object_get(p, "restarts");
		if (json_is_integer(r))
			metrics_set(m, ids->restarts, name, (double)json_integer_value(r));
		int role = (int)json_integer_value(json_object_get(p, "role"));
		if (role != 3 && role != 4) /* MSG_ROLE_NPU_WORKER, MSG_ROLE_GPU_WORKER */
			continue;
		/* a pipeline's stages are gpu0, gpu1 (their names, as the coordinator labels them) */
		const char *w = !strncmp(name, "gpu", 3) && name[3] ? name : role == 4 ? "gpu" : "npu";
		json_t *v;
		if (json_is_integer(v = json_object_get(p, "kv_bytes")))
			metrics_set(m, ids->kv_bytes, w, (double)json_integer_value(v));
		if (json_is_integer(v = json_object_get(p, "weights_bytes")))
			metrics_set(m, ids->weights_bytes, w, (double)json_integer_value(v));
		if (json_is_integer(v = json_object_get(p, "scratch_bytes")))
			metrics_set(m, ids->scratch_bytes, w, (double)json_integer_value(v));
		if (json_is_number(v = json_object_get(p, "busy_s")))
			metrics_set(m, ids->status_busy, w, json_number_value(v));
	}
	json_decref(root);
	return 0;
}
