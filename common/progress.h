/* progress: a progress bar for long work (loading, writing, quantizing).
 *
 * Tracks bytes done of a known total and prints percent, amounts, rate and
 * ETA. On a terminal it redraws one line in place with '\r' (at most ~10 times
 * a second); otherwise (logs, pipes) it prints a plain line every few seconds,
 * so logs stay readable. The caller owns the struct; nothing is allocated. */
#ifndef UNICORN_PROGRESS_H
#define UNICORN_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct progress {
	FILE *out;
	char label[48];
	uint64_t total, done;
	double t_start, t_last;   /* monotonic seconds */
	bool tty;
	bool quiet;               /* print nothing (tests, --quiet) */
	bool finished;
	int last_len;             /* length of the last in-place line, to blank it */
	double interval;          /* seconds between plain (non-tty) lines */
};

/* out NULL = stderr. total 0 is allowed (no percent/ETA shown). */
void progress_init(struct progress *p, FILE *out, const char *label, uint64_t total);
void progress_set_quiet(struct progress *p, bool quiet);
/* Set the absolute amount done / add to it; prints when due. */
void progress_update(struct progress *p, uint64_t done);
void progress_add(struct progress *p, uint64_t delta);
/* Print the final line (100%, total time, average rate) once. */
void progress_finish(struct progress *p);

/* Format helpers (also used by other tools): "1.23 GiB", "0:42" / "1:02:03". */
void progress_fmt_bytes(char *buf, size_t n, double bytes);
void progress_fmt_time(char *buf, size_t n, double seconds);
/* Render the status line without printing (tests). */
void progress_render(const struct progress *p, double now, char *buf, size_t n);
double progress_now(void);

#endif
