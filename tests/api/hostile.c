/* hostile: see hostile.h. */
#include "tests/api/hostile.h"
#include "tests/proc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int hx_dial(int port, int rcv_s)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct timeval tv = { .tv_sec = rcv_s };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
		close(fd);
		return -1;
	}
	return fd;
}

int hx_send_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	while (n) {
		ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
		if (k <= 0)
			return 0;
		s += k;
		n -= (size_t)k;
	}
	return 1;
}

char *hx_recv_all(int fd, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap);
	if (!b)
		abort();
	for (;;) {
		if (n + 4096 > cap) {
			char *nb = realloc(b, cap *= 2);
			if (!nb)
				abort();
			b = nb;
		}
		ssize_t k = recv(fd, b + n, cap - n - 1, 0);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	b[n] = 0;
	*len = n;
	return b;
}

char *hx_request(int port, const char *head, const char *body, size_t body_len, size_t *len)
{
	int fd = hx_dial(port, 30);
	if (fd < 0) {
		*len = 0;
		return calloc(1, 1);
	}
	hx_send_all(fd, head, strlen(head));
	if (body)
		hx_send_all(fd, body, body_len);
	char *r = hx_recv_all(fd, len);
	close(fd);
	return r;
}

void hx_unchunk(char *body)
{
	char *in = body, *out = body;
	for (;;) {
		char *end;
		unsigned long sz = strtoul(in, &end, 16);
		if (end == in || strncmp(end, "\r\n", 2) || strlen(end + 2) < sz)
			break;
		in = end + 2;
		if (!sz)
			break;
		memmove(out, in, sz);
		out += sz;
		in += sz + 2;
	}
	*out = 0;
}

int hx_status(const char *r)
{
	if (strncmp(r, "HTTP/1.", 7) || strlen(r) < 12)
		return 0;
	return atoi(r + 9);
}

pid_t hx_api_pid(pid_t sup)
{
	return proc_child_of(sup, "unicorn-api");
}

long hx_rss_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	long kib = 0;
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = atol(line + 6);
	if (f)
		fclose(f);
	return kib;
}
