/* trace: per-layer spans of the coordinator's step messages, for a
 * Chrome/Perfetto trace (docs/observability.md).
 *
 * The coordinator records one span per EMBED/STAGE/HEAD/RUN message: from
 * its send to its DONE, with the worker, layer, stage, slot and the worker's
 * own time. Spans go into a fixed ring buffer (the oldest are overwritten),
 * so recording never allocates and a trace of the last seconds is always
 * available. HTTP threads export while the loop records: a mutex guards it.
 *
 * Export: the Trace Event Format's JSON object form
 *   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}
 * with one complete ("ph":"X") event per span (ts/dur in microseconds), one
 * pid for the cluster and one tid per worker, named by "M" metadata events. */
#ifndef UNICORN_TRACE_H
#define UNICORN_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_DEFAULT_CAP (1u << 17)  /* spans kept (~5 MiB) */
#define TRACE_MAX_WORKERS 4

struct trace_span {
	int64_t t_start_ns, t_end_ns;  /* CLOCK_MONOTONIC, coordinator side */
	int64_t work_ns;               /* the worker's own time (DONE.gpu_ns) */
	uint16_t msg_type;             /* MSG_EMBED / MSG_STAGE / MSG_HEAD / MSG_RUN */
	uint8_t worker;                /* index into the worker names */
	uint8_t stage;                 /* enum msg_stage_kind for STAGE, else 0 */
	uint16_t layer;                /* STAGE: its layer */
	uint16_t slot;
	uint32_t n;                    /* tokens in the chunk */
	uint32_t pos0;
};

struct trace;

/* cap spans (0 = TRACE_DEFAULT_CAP). workers: names for tids 1.. (e.g.
 * {"gpu", "npu"}), n_workers <= TRACE_MAX_WORKERS. */
int trace_create(size_t cap, const char *const *workers, size_t n_workers, struct trace **out);
void trace_destroy(struct trace *t);

void trace_record(struct trace *t, const struct trace_span *s);

/* Spans recorded so far (including overwritten ones). */
uint64_t trace_total(struct trace *t);

/* JSON of the spans that started at or after since_ns (monotonic); *out is
 * malloc'ed. *n_events = X events written. */
int trace_export_json(struct trace *t, int64_t since_ns, char **out, size_t *len,
		      size_t *n_events);

/* Event name of a span: "attn L3", "ffn L3", "layers L0-25", "embed", "head",
 * "run". */
void trace_span_name(const struct trace_span *s, char *out, size_t cap);

#endif
