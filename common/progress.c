/* progress: terminal/log progress reporting (see progress.h). */
#include "common/progress.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

double progress_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_init(struct progress *p, FILE *out, const char *label, uint64_t total)
{
	memset(p, 0, sizeof *p);
	p->out = out ? out : stderr;
	snprintf(p->label, sizeof p->label, "%s", label ? label : "");
	p->total = total;
	p->tty = isatty(fileno(p->out)) == 1;
	p->interval = 5.0;
	p->t_start = progress_now();
	p->t_last = p->t_start;
}

void progress_set_quiet(struct progress *p, bool quiet)
{
	p->quiet = quiet;
}

void progress_fmt_bytes(char *buf, size_t n, double bytes)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;
	while (bytes >= 1024.0 && u < 4) {
		bytes /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%.0f %s", bytes, unit[u]);
	else
		snprintf(buf, n, "%.2f %s", bytes, unit[u]);
}

void progress_fmt_time(char *buf, size_t n, double s)
{
	if (!(s >= 0) || s > 1e7) {
		snprintf(buf, n, "--:--");
		return;
	}
	unsigned long t = (unsigned long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, n, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, n, "%lu:%02lu", t / 60, t % 60);
}

void progress_render(const struct progress *p, double now, char *buf, size_t n)
{
	char done[32], total[32], rate[32], eta[32];
	double el = now - p->t_start;
	double r = el > 0 ? (double)p->done / el : 0;
	progress_fmt_bytes(done, sizeof done, (double)p->done);
	progress_fmt_bytes(rate, sizeof rate, r);
	if (p->total) {
		double frac = (double)p->done / (double)p->total;
		if (frac > 1)
			frac = 1;
		progress_fmt_bytes(total, sizeof total, (double)p->total);
		if (p->finished)
			progress_fmt_time(eta, sizeof eta, el);
		else
			progress_fmt_time(eta, sizeof eta, r > 0 ? (double)(p->total - (p->done < p->total ? p->done : p->total)) / r : -1);
		if (p->tty && !p->finished) {
			char bar[26];
			int fill = (int)(frac * 24 + 0.5);
			for (int i = 0; i < 24; i++)
				bar[i] = i < fill ? '#' : '.';
			bar[24] = 0;
			snprintf(buf, n, "%s [%s] %5.1f%% %s / %s  %s/s  ETA %s", p->label, bar, frac * 100,
				 done, total, rate, eta);
		} else {
			snprintf(buf, n, "%s %5.1f%% %s / %s  %s/s  %s %s", p->label, frac * 100, done, total,
				 rate, p->finished ? "in" : "ETA", eta);
		}
	} else {
		progress_fmt_time(eta, sizeof eta, el);
		snprintf(buf, n, "%s %s  %s/s  %s", p->label, done, rate, eta);
	}
}

static void progress_print(struct progress *p, double now)
{
	char line[256];
	progress_render(p, now, line, sizeof line);
	int len = (int)strlen(line);
	if (p->tty) {
		/* Blank any tail left by a longer previous line. */
		int pad = p->last_len > len ? p->last_len - len : 0;
		fprintf(p->out, "\r%s%*s", line, pad, "");
		if (p->finished)
			fputc('\n', p->out);
		p->last_len = len;
	} else {
		fprintf(p->out, "%s\n", line);
	}
	fflush(p->out);
	p->t_last = now;
}

void progress_update(struct progress *p, uint64_t done)
{
	p->done = done;
	if (p->quiet || p->finished)
		return;
	double now = progress_now();
	if (now - p->t_last >= (p->tty ? 0.1 : p->interval))
		progress_print(p, now);
}

void progress_add(struct progress *p, uint64_t delta)
{
	progress_update(p, p->done + delta);
}

void progress_finish(struct progress *p)
{
	if (p->finished)
		return;
	p->finished = true;
	if (!p->quiet)
		progress_print(p, progress_now());
}
