/* trace: ring buffer of step spans and Trace Event Format export (see trace.h). */
#include "coordinator/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/err.h"
#include "ipc/msg.h"

struct trace {
	pthread_mutex_t mu;
	struct trace_span *ring;
	size_t cap;
	uint64_t total;                 /* spans ever recorded; next index = total % cap */
	char names[TRACE_MAX_WORKERS][16];
	size_t n_workers;
};

int trace_create(size_t cap, const char *const *workers, size_t n_workers, struct trace **out)
{
	if (!cap)
		cap = TRACE_DEFAULT_CAP;
	if (cap > (1u << 24) || n_workers > TRACE_MAX_WORKERS)
		return err_set(ERR_RANGE, "trace: cap %zu / %zu workers too large", cap, n_workers);
	struct trace *t = calloc(1, sizeof *t);
	if (!t)
		return err_set(ERR_NOMEM, "trace: out of memory");
	t->ring = calloc(cap, sizeof *t->ring);
	if (!t->ring) {
		free(t);
		return err_set(ERR_NOMEM, "trace: out of memory (%zu spans)", cap);
	}
	t->cap = cap;
	for (size_t i = 0; i < n_workers; i++)
		snprintf(t->names[i], sizeof t->names[i], "%s", workers[i] ? workers[i] : "?");
	t->n_workers = n_workers;
	pthread_mutex_init(&t->mu, NULL);
	*out = t;
	return 0;
}

void trace_destroy(struct trace *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->mu);
	free(t->ring);
	free(t);
}

void trace_record(struct trace *t, const struct trace_span *s)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	t->ring[t->total % t->cap] = *s;
	t->total++;
	pthread_mutex_unlock(&t->mu);
}

uint64_t trace_total(struct trace *t)
{
	pthread_mutex_lock(&t->mu);
	uint64_t n = t->total;
	pthread_mutex_unlock(&t->mu);
	return n;
}

void trace_span_name(const struct trace_span *s, char *out, size_t cap)
{
	switch (s->msg_type) {
	case MSG_EMBED: snprintf(out, cap, "embed"); break;
	case MSG_HEAD: snprintf(out, cap, "head"); break;
	case MSG_RUN: snprintf(out, cap, "run"); break;
	case MSG_RUN_BATCH: snprintf(out, cap, "run batch"); break;
	case MSG_RUN_CHUNKS: snprintf(out, cap, "run chunks"); break;
	case MSG_STAGE:
		if (s->stage == MSG_STAGE_ATTN)
			snprintf(out, cap, "attn L%u", s->layer);
		else if (s->stage == MSG_STAGE_FFN)
			snprintf(out, cap, "ffn L%u", s->layer);
		else
			snprintf(out, cap, "layers L%u", s->layer);
		break;
	default: snprintf(out, cap, "msg %u", s->msg_type); break;
	}
}

static const char *category(const struct trace_span *s)
{
	switch (s->msg_type) {
	case MSG_STAGE: return "stage";
	case MSG_RUN:
	case MSG_RUN_BATCH:
	case MSG_RUN_CHUNKS: return "run";
	default: return "step";
	}
}

int trace_export_json(struct trace *t, int64_t since_ns, char **out, size_t *len,
		      size_t *n_events)
{
	json_t *root = json_object(), *ev = json_array();
	if (!root || !ev) {
		json_decref(root);
		json_decref(ev);
		return err_set(ERR_NOMEM, "trace: out of memory");
	}
	json_object_set_new(root, "traceEvents", ev);
	json_object_set_new(root, "displayTimeUnit", json_string("ms"));
	json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "process_name",
					    "ph", "M", "pid", 1, "tid", 0, "args", "name",
					    "unicorn cluster"));
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->n_workers; i++) {
		char label[48];
		snprintf(label, sizeof label, "%s worker", t->names[i]);
		json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name",
						    "thread_name", "ph", "M", "pid", 1, "tid",
						    (int)i + 1, "args", "name", label));
		json_array_append_new(ev, json_pack("{s:s, s:s, s:i, s:i, s:{s:i}}", "name",
						    "thread_sort_index", "ph", "M", "pid", 1, "tid",
						    (int)i + 1, "args", "sort_index", (int)i));
	}
	uint64_t first = t->total > t->cap ? t->total - t->cap : 0;
	size_t n = 0;
	for (uint64_t k = first; k < t->total; k++) {
		const struct trace_span *s = &t->ring[k % t->cap];
		if (s->t_start_ns < since_ns)
			continue;
		char name[48];
		trace_span_name(s, name, sizeof name);
		int64_t dur_ns = s->t_end_ns > s->t_start_ns ? s->t_end_ns - s->t_start_ns : 0;
		json_t *args = json_pack("{s:i, s:i, s:i, s:f}", "slot", (int)s->slot, "n", (int)s->n,
					 "pos0", (int)s->pos0, "worker_us", (double)s->work_ns / 1e3);
		if (args && s->msg_type == MSG_STAGE)
			json_object_set_new(args, "layer", json_integer(s->layer));
		json_t *e = json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:o}", "name", name, "cat",
				      category(s), "ph", "X", "pid", 1, "tid", (int)s->worker + 1,
				      "ts", (double)s->t_start_ns / 1e3, "dur", (double)dur_ns / 1e3,
				      "args", args ? args : json_object());
		if (e && !json_array_append_new(ev, e))
			n++;
	}
	uint64_t total = t->total;
	pthread_mutex_unlock(&t->mu);
	json_object_set_new(root, "otherData",
			    json_pack("{s:s, s:I}", "source", "unicorn-coordinator", "spans_recorded",
				      (json_int_t)total));
	char *s = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!s)
		return err_set(ERR_NOMEM, "trace: out of memory");
	*out = s;
	*len = strlen(s);
	if (n_events)
		*n_events = n;
	return 0;
}
