/* supervisor: child processes of unicorn-up (see supervisor/supervisor.h). */
#include "supervisor/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc/bus.h"
#include "ipc/ctl.h"
#include "ipc/live.h"
#include "common/err.h"
#include "ipc/rundir.h"

#define SUP_LINE_MAX 4096
#define SUP_POLL_SLICE_MS 50   /* while children start: how often ready files are looked for */
#define SUP_POLL_MAX_MS 1000   /* otherwise sleep until the next timer, at most this */
#define SUP_CTL_SEND_MS 10     /* a message to an absent peer must not stall the loop */
#define SUP_SHUTDOWN_SEND_MS 300 /* but a SHUTDOWN is worth the reconnect's wait */

struct child {
	struct sup_child_spec spec;
	char *argv[SUP_MAX_ARGS];     /* owned copies */
	char *ready_file;
	pid_t pid;
	int out_fd;                   /* read end of the child's stdout+stderr pipe */
	char line[SUP_LINE_MAX];
	size_t line_len;
	char last_line[MSG_MAX_TEXT];
	uint64_t started_ns;
	uint64_t restart_at_ns;       /* 0 = no restart pending */
	uint32_t backoff_ms;
	uint32_t restarts, watchdog_kills;
	int last_exit;
	bool spawned_once;
	/* watchdog */
	struct bus *ctl;              /* SHUTDOWN goes here */
	const struct live_page *live; /* this incarnation's liveness page, once found */
	bool armed;                   /* its page was found: it is watched */
	uint64_t stopped_since_ns;    /* first tick that saw it stopped (0: not stopped) */
	uint64_t next_tick_ns;
	bool have_status;
	struct msg_status status;
};

struct supervisor {
	struct sup_opts o;
	struct child c[SUP_MAX_CHILDREN];
	int n;
	int next_start;               /* children [0,next_start) have been started */
	uint64_t start_wait_since;
	bool stopping;
	bool fatal;
	bool changed;                 /* the table changed since sup_take_changes */
	char fatal_msg[512];
	pid_t self;
	struct msg m;                 /* scratch for ctl traffic (large) */
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define MS(x) ((uint64_t)(x) * 1000000u)

/* Our own log lines, marked like the children's so one log reads in order. */
static void sup_log(struct supervisor *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sup_log(struct supervisor *s, const char *fmt, ...)
{
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "[unicorn-up] ");
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	size_t len = (size_t)n + ((size_t)k < sizeof buf - (size_t)n - 1 ? (size_t)k : sizeof buf - (size_t)n - 2);
	buf[len++] = '\n';
	ssize_t w = write(s->o.log_fd, buf, len);
	(void)w;
}

int sup_create(const struct sup_opts *o, struct supervisor **out)
{
	*out = NULL;
	if (!o || o->log_fd < 0)
		return err_set(ERR_INVAL, "supervisor: log_fd: must be an open descriptor");
	struct supervisor *s = calloc(1, sizeof *s);
	if (!s)
		return err_set(ERR_NOMEM, "supervisor: out of memory");
	s->o = *o;
	if (!s->o.backoff_min_ms) s->o.backoff_min_ms = 100;
	if (!s->o.backoff_max_ms) s->o.backoff_max_ms = 2000;
	if (!s->o.reset_ms) s->o.reset_ms = 10000;
	if (!s->o.ping_ms) s->o.ping_ms = 1000;
	if (!s->o.pong_ms) s->o.pong_ms = 1500;
	if (!s->o.start_wait_ms) s->o.start_wait_ms = 120000;
	s->self = getpid();
	*out = s;
	return 0;
}

int sup_add(struct supervisor *s, const struct sup_child_spec *spec)
{
	if (s->n >= SUP_MAX_CHILDREN)
		return err_set(ERR_RANGE, "supervisor: more than %d children", SUP_MAX_CHILDREN);
	if (!spec->argv[0] || !spec->name[0] || !memchr(spec->name, 0, sizeof spec->name))
		return err_set(ERR_INVAL, "supervisor: child spec: name and argv[0] are required");
	if (spec->role && (!s->o.rundir || !ctl_file(spec->role)))
		return err_set(ERR_INVAL, "supervisor: child %s: control link needs a rundir and a worker role",
			       spec->name);
	struct child *c = &s->c[s->n];
	memset(c, 0, sizeof *c);
	c->spec = *spec;
	c->out_fd = -1;
	c->backoff_ms = s->o.backoff_min_ms;
	int i;
	for (i = 0; i < SUP_MAX_ARGS - 1 && spec->argv[i]; i++) {
		if (!(c->argv[i] = strdup(spec->argv[i])))
			goto nomem;
	}
	if (i == SUP_MAX_ARGS - 1 && spec->argv[i])
		return err_set(ERR_RANGE, "supervisor: child %s: more than %d arguments", spec->name,
			       SUP_MAX_ARGS - 1);
	if (spec->ready_file && !(c->ready_file = strdup(spec->ready_file)))
		goto nomem;
	for (int k = 0; k < SUP_MAX_ARGS; k++)
		c->spec.argv[k] = c->argv[k];
	c->spec.ready_file = c->ready_file;
	s->n++;
	return 0;
nomem:
	for (int k = 0; k < SUP_MAX_ARGS; k++)
		free(c->argv[k]);
	memset(c, 0, sizeof *c);
	return err_set(ERR_NOMEM, "supervisor: out of memory");
}

/* The forked child: only async-signal-safe calls until exec (the parent may
 * have nng threads). */
static void child_exec(struct child *c, int wfd, pid_t parent)
{
	setpgid(0, 0); /* a terminal's Ctrl-C goes to unicorn-up only, which stops us in order */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	int null = open("/dev/null", O_RDONLY);
	if (null >= 0 && null != 0) {
		dup2(null, 0);
		close(null);
	}
	dup2(wfd, 1);
	dup2(wfd, 2);
	if (wfd > 2)
		close(wfd);
	execv(c->argv[0], c->argv);
	static const char m1[] = "cannot execute ";
	ssize_t w = write(2, m1, sizeof m1 - 1);
	w = write(2, c->argv[0], strlen(c->argv[0]));
	w = write(2, "\n", 1);
	(void)w;
	_exit(2); /* a missing binary will not appear by restarting */
}

static int spawn(struct supervisor *s, struct child *c)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC))
		return err_set(ERR_IO, "supervisor: %s: pipe: %s", c->spec.name, strerror(errno));
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return err_set(ERR_IO, "supervisor: %s: fork: %s", c->spec.name, strerror(errno));
	}
	if (pid == 0)
		child_exec(c, p[1], s->self);
	close(p[1]);
	fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
	c->pid = pid;
	c->out_fd = p[0];
	c->line_len = 0;
	c->started_ns = now_ns();
	c->restart_at_ns = 0;
	c->have_status = false;
	c->armed = false;
	live_unmap(c->live);
	c->live = NULL;
	c->stopped_since_ns = 0;
	c->next_tick_ns = c->started_ns + MS(SUP_PROBE_START_MS);
	s->changed = true;
	if (c->spec.role) {
		bus_close(c->ctl);
		c->ctl = NULL;
		char url[BUS_URL_MAX + 1];
		if (rundir_url(s->o.rundir, ctl_file(c->spec.role), url, sizeof url) == 0 &&
		    bus_dial(url, BUS_PAIR, &c->ctl) == 0)
			bus_set_send_timeout(c->ctl, SUP_CTL_SEND_MS);
		else
			sup_log(s, "%s: no control link (%s); watchdog off", c->spec.name, err_msg());
	}
	if (c->spawned_once)
		c->restarts++;
	c->spawned_once = true;
	sup_log(s, "%s: started (pid %d)%s", c->spec.name, (int)pid, c->restarts ? " (restart)" : "");
	return 0;
}

static void emit_line(struct supervisor *s, struct child *c)
{
	char buf[SUP_LINE_MAX + SUP_NAME_MAX + 8];
	int n = snprintf(buf, sizeof buf, "[%s] ", c->spec.name);
	memcpy(buf + n, c->line, c->line_len);
	buf[n + c->line_len] = '\n';
	ssize_t w = write(s->o.log_fd, buf, (size_t)n + c->line_len + 1);
	(void)w;
	if (c->line_len) {
		size_t k = c->line_len < sizeof c->last_line - 1 ? c->line_len : sizeof c->last_line - 1;
		memcpy(c->last_line, c->line, k);
		c->last_line[k] = 0;
	}
	c->line_len = 0;
}

/* Read what the child wrote; returns false at EOF (pipe closed). */
static bool drain(struct supervisor *s, struct child *c)
{
	char buf[4096];
	for (;;) {
		ssize_t r = read(c->out_fd, buf, sizeof buf);
		if (r == 0)
			return false;
		if (r < 0)
			return errno == EAGAIN || errno == EINTR;
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] == '\n') {
				emit_line(s, c);
			} else if (buf[i] == '\r') {
				c->line_len = 0; /* a terminal redraw: keep only the final state */
			} else {
				c->line[c->line_len++] = buf[i];
				if (c->line_len == sizeof c->line)
					emit_line(s, c);
			}
		}
	}
}

static void close_output(struct supervisor *s, struct child *c)
{
	if (c->out_fd < 0)
		return;
	drain(s, c);
	if (c->line_len)
		emit_line(s, c);
	close(c->out_fd);
	c->out_fd = -1;
}

static void on_exit_status(struct supervisor *s, struct child *c, int st)
{
	uint64_t now = now_ns();
	uint64_t up = now - c->started_ns;
	close_output(s, c); /* its last words (a fatal reason) come first */
	c->pid = 0;
	s->changed = true;
	live_unmap(c->live);
	c->live = NULL;
	c->armed = false;
	c->have_status = false;
	char how[64];
	if (WIFEXITED(st)) {
		c->last_exit = WEXITSTATUS(st);
		snprintf(how, sizeof how, "exited with status %d", c->last_exit);
	} else {
		c->last_exit = WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
		snprintf(how, sizeof how, "killed by signal %d (%s)", -c->last_exit,
			 strsignal(-c->last_exit));
	}
	if (s->stopping) {
		sup_log(s, "%s: %s", c->spec.name, how);
		return;
	}
	/* 2: the child says so (bad model, no device); 126/127: the binary could
	 * not be executed at all (missing shared library, not executable), which a
	 * restart cannot cure either. */
	if (c->last_exit == 2 || c->last_exit == 126 || c->last_exit == 127) {
		if (!s->fatal) {
			s->fatal = true;
			snprintf(s->fatal_msg, sizeof s->fatal_msg, "%s failed fatally (exit status %d): %s",
				 c->spec.name, c->last_exit, c->last_line[0] ? c->last_line : "(no message)");
		}
		sup_log(s, "%s: %s (fatal, not restarted)", c->spec.name, how);
		return;
	}
	if (up >= MS(s->o.reset_ms))
		c->backoff_ms = s->o.backoff_min_ms;
	c->restart_at_ns = now + MS(c->backoff_ms);
	sup_log(s, "%s: %s after %.1f s; restarting in %u ms", c->spec.name, how, up / 1e9,
		c->backoff_ms);
	c->backoff_ms = c->backoff_ms * 2 > s->o.backoff_max_ms ? s->o.backoff_max_ms : c->backoff_ms * 2;
}

static void reap(struct supervisor *s)
{
	for (int i = 0; i < s->n; i++) {
		struct child *c = &s->c[i];
		if (c->pid <= 0)
			continue;
		int st;
		pid_t r = waitpid(c->pid, &st, WNOHANG);
		if (r == c->pid)
			on_exit_status(s, c, st);
		else if (r < 0 && errno == ECHILD) /* someone else reaped it: treat as crashed */
			on_exit_status(s, c, 1 << 8);
	}
}

/* The next tick of the watchdog's grid: every child that is watched is
 * looked at in the same tick, so an idle supervisor wakes once per ping_ms. */
static uint64_t next_tick(const struct supervisor *s, uint64_t now)
{
	uint64_t p = MS(s->o.ping_ms);
	return (now / p + 1) * p;
}

/* Whether pid is stopped (SIGSTOP, a tracer's stop): from /proc, without
 * waking it. */
static bool process_stopped(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	const char *rp = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
	return rp && rp[1] == ' ' && (rp[2] == 'T' || rp[2] == 't');
}

static void watchdog_kill(struct supervisor *s, struct child *c, const char *why, double secs)
{
	sup_log(s, "%s: %s for %.1f s (pid %d): killing it", c->spec.name, why, secs, (int)c->pid);
	kill(c->pid, SIGKILL);
	c->watchdog_kills++;
	c->armed = false; /* reaped (and restarted) by reap() */
}

/* Read the child's liveness page (ipc/live.h) on its tick: its STATUS row
 * for the table, its main loop's heartbeat against its stall limit, and
 * /proc for a stopped process. No message is sent: nothing is woken. */
static void watchdog(struct supervisor *s, struct child *c, uint64_t now, bool refresh)
{
	if (!s->o.rundir || !c->spec.role || c->pid <= 0 || (now < c->next_tick_ns && !refresh))
		return;
	c->next_tick_ns = c->armed ? next_tick(s, now) : now + MS(SUP_PROBE_START_MS);
	if (!c->live && live_open(s->o.rundir, c->spec.role, c->pid, &c->live) == 0) {
		c->armed = true; /* a child is watched once it is up (slow starts are not killed) */
		c->next_tick_ns = next_tick(s, now);
	}
	if (!c->live)
		return;
	uint64_t beat;
	uint32_t stall_ms;
	struct msg_status st;
	if (live_read(c->live, &beat, &stall_ms, &st) && st.pid == (uint32_t)c->pid) {
		if (!c->have_status || live_row_differs(&c->status, &st))
			s->changed = true;
		c->status = st;
		c->have_status = true;
	}
	if (s->stopping || !c->armed)
		return;
	if (process_stopped(c->pid)) {
		if (!c->stopped_since_ns)
			c->stopped_since_ns = now;
		else if (now - c->stopped_since_ns >= MS(s->o.pong_ms))
			watchdog_kill(s, c, "stopped", (now - c->stopped_since_ns) / 1e9);
		/* look again when its time is up */
		if (c->armed && c->stopped_since_ns + MS(s->o.pong_ms) < c->next_tick_ns)
			c->next_tick_ns = c->stopped_since_ns + MS(s->o.pong_ms);
		return;
	}
	c->stopped_since_ns = 0;
	uint64_t stall = MS(stall_ms ? stall_ms : CTL_STALL_MS_DEFAULT);
	if (beat && now > beat && now - beat > stall)
		watchdog_kill(s, c, "main loop stuck (no heartbeat)", (now - beat) / 1e9);
}

static bool ready(const struct child *c)
{
	return c->pid > 0 && (!c->ready_file || access(c->ready_file, F_OK) == 0);
}

static int start_next(struct supervisor *s, uint64_t now)
{
	if (s->stopping || s->fatal || s->next_start >= s->n)
		return 0;
	if (s->next_start > 0) {
		struct child *prev = &s->c[s->next_start - 1];
		if (!ready(prev)) {
			if (now - s->start_wait_since > MS(s->o.start_wait_ms) && !s->fatal) {
				s->fatal = true;
				snprintf(s->fatal_msg, sizeof s->fatal_msg,
					 "%s did not create %s within %u s", prev->spec.name,
					 prev->ready_file ? prev->ready_file : "?", s->o.start_wait_ms / 1000);
			}
			return 0;
		}
	}
	struct child *c = &s->c[s->next_start];
	int rc = spawn(s, c);
	if (rc)
		return rc;
	s->next_start++;
	s->start_wait_since = now;
	return 0;
}

int sup_start(struct supervisor *s)
{
	if (s->next_start || s->n == 0)
		return err_set(ERR_STATE, "supervisor: already started or no children");
	return start_next(s, now_ns());
}

/* Milliseconds until the next ping, status pull, restart or watchdog
 * deadline: an idle supervisor sleeps until then (signals and child output
 * wake it earlier). */
static int next_timer_ms(const struct supervisor *s)
{
	if (s->next_start < s->n)
		return SUP_POLL_SLICE_MS; /* starting: look for the next ready file */
	uint64_t now = now_ns(), next = now + MS(SUP_POLL_MAX_MS);
	for (int i = 0; i < s->n; i++) {
		const struct child *c = &s->c[i];
		if (c->pid == 0 && c->restart_at_ns && c->restart_at_ns < next)
			next = c->restart_at_ns;
		if (c->pid <= 0 || !c->spec.role || !s->o.rundir)
			continue;
		if (c->next_tick_ns < next)
			next = c->next_tick_ns;
	}
	return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

int sup_step(struct supervisor *s, int timeout_ms)
{
	struct pollfd p[SUP_MAX_CHILDREN + 1];
	int who[SUP_MAX_CHILDREN + 1];
	int np = 0;
	if (s->o.wake_fd >= 0) {
		p[np] = (struct pollfd){ .fd = s->o.wake_fd, .events = POLLIN };
		who[np++] = -1;
	}
	for (int i = 0; i < s->n; i++) {
		if (s->c[i].out_fd >= 0) {
			p[np] = (struct pollfd){ .fd = s->c[i].out_fd, .events = POLLIN };
			who[np++] = i;
		}
	}
	if (s->o.has_wake_fd2 && s->o.wake_fd2 >= 0) {
		p[np] = (struct pollfd){ .fd = s->o.wake_fd2, .events = POLLIN };
		who[np++] = -1;
	}
	int t = timeout_ms < 0 ? 0 : timeout_ms;
	int next = next_timer_ms(s);
	if (t > next)
		t = next;
	int r = poll(p, (nfds_t)np, t);
	bool woke = false;
	for (int k = 0; r > 0 && k < np; k++) {
		if (!p[k].revents)
			continue;
		if (who[k] < 0) {
			woke = true;
			continue;
		}
		struct child *c = &s->c[who[k]];
		if (!drain(s, c)) {
			/* EOF: the child closed its output (it is exiting); keep the
			 * partial line for close_output at reap time. */
			if (c->line_len)
				emit_line(s, c);
			close(c->out_fd);
			c->out_fd = -1;
		}
	}
	reap(s);
	uint64_t now = now_ns();
	for (int i = 0; i < s->n; i++) {
		struct child *c = &s->c[i];
		if (!s->stopping && !s->fatal && c->pid == 0 && c->restart_at_ns && now >= c->restart_at_ns) {
			int rc = spawn(s, c);
			if (rc) {
				sup_log(s, "%s: restart failed: %s; retrying", c->spec.name, err_msg());
				c->restart_at_ns = now + MS(s->o.backoff_max_ms);
			}
		}
		watchdog(s, c, now, false);
	}
	int rc = start_next(s, now);
	if (rc)
		return rc;
	if (s->fatal)
		return SUP_FATAL;
	return woke ? SUP_WAKE : SUP_IDLE;
}

static bool any_running(const struct supervisor *s)
{
	for (int i = 0; i < s->n; i++)
		if (s->c[i].pid > 0)
			return true;
	return false;
}

void sup_stop(struct supervisor *s, uint32_t grace_ms)
{
	s->stopping = true;
	uint64_t t0 = now_ns();
	for (int i = s->n - 1; i >= 0; i--) {
		struct child *c = &s->c[i];
		c->restart_at_ns = 0;
		if (c->pid > 0 && c->ctl) {
			/* a child up for a moment may not have the link connected yet
			 * (the dialer retries every 100-250 ms): wait for it a little */
			bus_set_send_timeout(c->ctl, SUP_SHUTDOWN_SEND_MS);
			msg_init(&s->m, MSG_SHUTDOWN);
			s->m.u.shutdown.grace_ms = grace_ms;
			bus_send(c->ctl, &s->m);
		}
	}
	bool termed = false;
	/* No control link to ask politely: SIGTERM right away. */
	uint64_t term_at = t0 + MS(grace_ms / 5);
	for (;;) {
		sup_step(s, 20);
		if (!any_running(s))
			break;
		uint64_t now = now_ns();
		if (!termed && now >= term_at) {
			for (int i = s->n - 1; i >= 0; i--)
				if (s->c[i].pid > 0)
					kill(s->c[i].pid, SIGTERM);
			termed = true;
		}
		if (now - t0 >= MS(grace_ms)) {
			for (int i = 0; i < s->n; i++) {
				if (s->c[i].pid > 0) {
					sup_log(s, "%s: did not stop within %u ms: SIGKILL", s->c[i].spec.name, grace_ms);
					kill(s->c[i].pid, SIGKILL);
					int st;
					if (waitpid(s->c[i].pid, &st, 0) == s->c[i].pid)
						on_exit_status(s, &s->c[i], st);
					else
						s->c[i].pid = 0;
				}
			}
			break;
		}
	}
	for (int i = 0; i < s->n; i++) {
		close_output(s, &s->c[i]);
		bus_close(s->c[i].ctl);
		s->c[i].ctl = NULL;
		live_unmap(s->c[i].live);
		s->c[i].live = NULL;
	}
}

void sup_destroy(struct supervisor *s)
{
	if (!s)
		return;
	if (any_running(s))
		sup_stop(s, 2000);
	for (int i = 0; i < s->n; i++) {
		struct child *c = &s->c[i];
		close_output(s, c);
		bus_close(c->ctl);
		for (int k = 0; k < SUP_MAX_ARGS; k++)
			free(c->argv[k]);
		free(c->ready_file);
	}
	free(s);
}

int sup_count(const struct supervisor *s)
{
	return s->n;
}

int sup_info(const struct supervisor *s, int i, struct sup_child_info *out)
{
	if (i < 0 || i >= s->n)
		return err_set(ERR_RANGE, "supervisor: child %d of %d", i, s->n);
	const struct child *c = &s->c[i];
	memset(out, 0, sizeof *out);
	memcpy(out->name, c->spec.name, sizeof out->name);
	out->role = c->spec.role;
	out->pid = c->pid;
	out->restarts = c->restarts;
	out->watchdog_kills = c->watchdog_kills;
	out->uptime_ns = c->pid > 0 ? now_ns() - c->started_ns : 0;
	out->have_status = c->have_status;
	out->status = c->status;
	out->last_exit = c->last_exit;
	return 0;
}

const char *sup_fatal_msg(const struct supervisor *s)
{
	return s->fatal ? s->fatal_msg : "";
}

void sup_refresh(struct supervisor *s)
{
	uint64_t now = now_ns();
	for (int i = 0; i < s->n; i++)
		watchdog(s, &s->c[i], now, true);
}

bool sup_load(const struct supervisor *s, enum msg_role role, struct live_load *out)
{
	memset(out, 0, sizeof *out);
	for (int i = 0; i < s->n; i++) {
		const struct child *c = &s->c[i];
		if (c->spec.role == role && c->pid > 0 && c->live)
			return live_read_load(c->live, out);
	}
	return false;
}

bool sup_take_changes(struct supervisor *s)
{
	bool c = s->changed;
	s->changed = false;
	return c;
}

uint32_t sup_total_restarts(const struct supervisor *s)
{
	uint32_t t = 0;
	for (int i = 0; i < s->n; i++)
		t += s->c[i].restarts;
	return t;
}

static const char *share_name(uint32_t v)
{
	return v == MSG_SHARE_MEMFD ? "memfd" : v == MSG_SHARE_UDMABUF ? "udmabuf" : "-";
}

static const char *import_name(uint32_t v)
{
	return v == MSG_IMPORT_ZERO_COPY ? "zero-copy" : v == MSG_IMPORT_UPLOAD ? "upload" : "-";
}

json_t *sup_status_table(const struct supervisor *s)
{
	json_t *arr = json_array();
	if (!arr)
		return NULL;
	for (int i = 0; i < s->n; i++) {
		struct sup_child_info ci;
		sup_info(s, i, &ci);
		const struct msg_status *st = &ci.status;
		json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:i}", "name", ci.name, "role",
				      (int)ci.role, "pid", (int)ci.pid, "restarts", (int)ci.restarts,
				      "watchdog_kills", (int)ci.watchdog_kills, "uptime_s", ci.uptime_ns / 1e9,
				      "last_exit", ci.last_exit);
		if (!o)
			continue;
		if (ci.have_status) {
			json_t *x = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:I, s:f}", "backend",
					      st->backend, "device", st->device, "weights_bytes",
					      (json_int_t)st->weights_bytes, "kv_bytes", (json_int_t)st->kv_bytes,
					      "scratch_bytes", (json_int_t)st->scratch_bytes, "share_path",
					      share_name(st->share_path), "import", import_name(st->import_mode),
					      "steps", (json_int_t)st->steps, "busy_s", st->busy_ns / 1e9);
			if (x) {
				json_object_update(o, x);
				json_decref(x);
			}
		}
		json_array_append_new(arr, o);
	}
	return arr;
}
