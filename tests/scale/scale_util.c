/* scale_util: see scale_util.h. */
#include "tests/scale/scale_util.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "ipc/rundir.h"
#include "tests/golden.h"
#include "tests/proc.h"

void su_start(struct su_cluster *c, const char *tmp, const char *name, int port, const char *const *extra)
{
	const char *bin = proc_bin_dir_or_skip();
	static int n_started;
	snprintf(c->name, sizeof c->name, "%s", name);
	snprintf(c->dir, sizeof c->dir, "%s/unicorn/%s", tmp, name);
	snprintf(c->log, sizeof c->log, "%s/%s-%d.log", tmp, name, ++n_started);
	c->port = port;
	char up[512], model[512], ports[16];
	snprintf(up, sizeof up, "%s/unicorn-up", bin);
	snprintf(model, sizeof model, "%s/golden/gemma3-tiny-q4_0.gguf", golden_shared_dir());
	snprintf(ports, sizeof ports, "%d", port);
	char *argv[16] = { up, "--model", model, "--name", c->name, "--port", ports };
	int k = 7;
	for (int i = 0; extra && extra[i]; i++) {
		cr_assert_lt(i, 6, "at most 6 extra unicorn-up arguments");
		argv[k++] = (char *)extra[i];
	}
	argv[k] = NULL;
	c->sup = proc_spawn(argv, c->log);
	cr_assert_gt(c->sup, 0);
}

bool su_ready(struct su_cluster *c)
{
	int st;
	if (waitpid(c->sup, &st, WNOHANG) == c->sup) {
		proc_tail(c->log, 40);
		cr_assert_fail("cluster %s: unicorn-up exited (status %d) before ready", c->name, st);
	}
	char ready[300], api[300];
	snprintf(ready, sizeof ready, "%s/ready", c->dir);
	snprintf(api, sizeof api, "%s/" RUNDIR_API_READY, c->dir);
	return !access(ready, F_OK) && !access(api, F_OK);
}

void su_start_wait(struct su_cluster *c, const char *tmp, const char *name, int port, const char *const *extra)
{
	su_start(c, tmp, name, port, extra);
	double end = proc_now_s() + 90;
	while (!su_ready(c)) {
		if (proc_now_s() > end) {
			proc_tail(c->log, 40);
			cr_assert_fail("cluster %s not ready within 90 s", name);
		}
		usleep(50 * 1000);
	}
}

int su_get(int port, const char *path, char *body, size_t cap)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { 2, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
		close(fd);
		return -1;
	}
	char req[512];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		close(fd);
		return -1;
	}
	static __thread char buf[65536];
	size_t len = 0;
	ssize_t r;
	while (len < sizeof buf - 1 && (r = recv(fd, buf + len, sizeof buf - 1 - len, 0)) > 0)
		len += (size_t)r;
	close(fd);
	buf[len] = 0;
	int status = -1;
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		return -1;
	if (body && cap) {
		const char *b = strstr(buf, "\r\n\r\n");
		snprintf(body, cap, "%s", b ? b + 4 : "");
	}
	return status;
}

void su_req_start(struct su_req *r, const char *tmp, int slot, int port, const char *prompt, int max_tokens,
		  const char *conv, int max_time_s)
{
	snprintf(r->out, sizeof r->out, "%s/r%d.out", tmp, slot);
	snprintf(r->hdr, sizeof r->hdr, "%s/r%d.hdr", tmp, slot);
	unlink(r->out);
	unlink(r->hdr);
	char cmd[2048], hconv[128] = "";
	if (conv)
		snprintf(hconv, sizeof hconv, "-H 'X-Conversation-Id: %s'", conv);
	snprintf(cmd, sizeof cmd,
		 "exec curl -sS -N --max-time %d -D %s -o %s %s -H 'Content-Type: application/json' "
		 "http://127.0.0.1:%d/v1/completions "
		 "-d '{\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0,\"stream\":true}'",
		 max_time_s, r->hdr, r->out, hconv, port, prompt, max_tokens);
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	char err[300];
	snprintf(err, sizeof err, "%s/r%d.err", tmp, slot);
	r->pid = proc_spawn(argv, err);
	r->t0 = proc_now_s();
	r->t1 = 0;
}

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		*n = 0;
		return calloc(1, 1);
	}
	size_t cap = 1 << 16;
	char *b = malloc(cap);
	*n = 0;
	size_t r;
	while (b && (r = fread(b + *n, 1, cap - 1 - *n, f)) > 0) {
		*n += r;
		if (*n + 1 == cap) {
			char *nb = realloc(b, cap *= 2);
			if (!nb)
				break;
			b = nb;
		}
	}
	fclose(f);
	if (b)
		b[*n] = 0;
	return b;
}

void su_req_read(const struct su_req *r, struct su_answer *a)
{
	memset(a, 0, sizeof *a);
	size_t n;
	char *h = slurp(r->hdr, &n);
	/* the last status line (HAProxy answers once; curl -D writes what came) */
	for (char *l = h; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		int st;
		if (sscanf(l, "HTTP/%*s %d", &st) == 1)
			a->status = st;
		if (!strncasecmp(l, "X-Unicorn-Replica:", 18)) {
			const char *v = l + 18;
			while (*v == ' ')
				v++;
			size_t k = strcspn(v, "\r\n");
			snprintf(a->replica, sizeof a->replica, "%.*s", (int)k, v);
		}
	}
	free(h);
	char *b = slurp(r->out, &n);
	size_t tl = 0;
	bool finished = false;
	for (char *l = b; l && *l;) {
		char *e = strchr(l, '\n');
		if (e)
			*e = 0;
		if (!strncmp(l, "data: ", 6)) {
			const char *d = l + 6;
			if (!strcmp(d, "[DONE]")) {
				a->done = finished;
			} else {
				json_t *j = json_loads(d, 0, NULL);
				json_t *err = json_object_get(j, "error");
				if (err) {
					const char *m = json_string_value(json_object_get(err, "message"));
					snprintf(a->error, sizeof a->error, "%s", m ? m : "?");
				} else {
					json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
					const char *t = json_string_value(json_object_get(ch, "text"));
					if (t) {
						size_t k = strlen(t);
						if (tl + k < sizeof a->text) {
							memcpy(a->text + tl, t, k);
							tl += k;
						}
					}
					if (json_string_value(json_object_get(ch, "finish_reason")))
						finished = true;
				}
				json_decref(j);
			}
		} else if (a->status && a->status != 200 && !a->error[0] && *l) {
			snprintf(a->error, sizeof a->error, "%s", l);
		}
		l = e ? e + 1 : NULL;
	}
	a->text[tl] = 0;
	free(b);
}
