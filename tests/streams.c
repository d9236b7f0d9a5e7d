/* streams: see streams.h. */
#include "tests/streams.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
	return fd;
}

pid_t streams_child_of(const struct proc_cluster *c, const void *exe)
{
	return proc_child_of(c->sup, exe);
}

void streams_run(const struct proc_cluster *c, struct stream *s, streams_victim_fn pick, const void *arg,
		 bool streamed, int max_tokens, double *t_kill)
{
	for (int i = 0; i < STREAMS_N; i++) {
		memset(&s[i], 0, sizeof s[i]);
		s[i].fd = dial(c->port);
		char body[256], req[512];
		snprintf(body, sizeof body,
			 "{\"messages\":[{\"role\":\"user\",\"content\":\"Stream %d: tell me a story\"}],"
			 "\"max_tokens\":%d,\"temperature\":0,\"stream\":%s}", i, max_tokens,
			 streamed ? "true" : "false");
		int k = snprintf(req, sizeof req,
				 "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
				 "Connection: close\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
		cr_assert_eq(send(s[i].fd, req, (size_t)k, MSG_NOSIGNAL), k);
		s[i].cap = 1 << 16;
		s[i].body = malloc(s[i].cap);
		s[i].t_last = 0;
	}
	double t0 = proc_now_s();
	bool killed = !pick;
	int open_n = STREAMS_N;
	while (open_n > 0) {
		if (!killed && proc_now_s() - t0 > 0.3) {
			pid_t p = pick(c, arg);
			cr_assert_gt(p, 0, "no process to kill");
			cr_assert_eq(kill(p, SIGKILL), 0);
			killed = true;
			if (t_kill)
				*t_kill = proc_now_s();
		}
		struct pollfd p[STREAMS_N];
		for (int i = 0; i < STREAMS_N; i++)
			p[i] = (struct pollfd){ .fd = s[i].done ? -1 : s[i].fd, .events = POLLIN };
		int r = poll(p, STREAMS_N, 100);
		cr_assert_geq(r, 0);
		if (proc_now_s() - t0 >= 60) {
			proc_tail(c->log, 40); /* which request never came back, and why */
			cr_assert_fail("streams did not end within 60 s");
		}
		for (int i = 0; i < STREAMS_N; i++) {
			if (!(p[i].revents & (POLLIN | POLLHUP)))
				continue;
			if (s[i].n + 4096 > s[i].cap)
				s[i].body = realloc(s[i].body, s[i].cap *= 2);
			ssize_t k = recv(s[i].fd, s[i].body + s[i].n, s[i].cap - s[i].n - 1, 0);
			double now = proc_now_s();
			if (k <= 0) {
				s[i].done = true;
				s[i].t_end = now;
				close(s[i].fd);
				open_n--;
				continue;
			}
			if (s[i].t_last > 0 && now - s[i].t_last > s[i].worst_gap)
				s[i].worst_gap = now - s[i].t_last;
			s[i].t_last = now;
			s[i].n += (size_t)k;
			s[i].body[s[i].n] = 0;
		}
	}
}

char *stream_text(const struct stream *s)
{
	char *out = calloc(1, s->n + 1);
	size_t o = 0;
	for (const char *p = s->body; (p = strstr(p, "\"content\":\"")); ) {
		p += 11;
		while (*p && *p != '"') {
			if (*p == '\\' && p[1])
				out[o++] = *p++;
			out[o++] = *p++;
		}
	}
	return out;
}

bool answer_complete(const struct stream *s, bool streamed)
{
	return strstr(s->body, streamed ? "[DONE]" : "\"finish_reason\":\"length\"") != NULL;
}

