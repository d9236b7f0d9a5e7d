/* Raw-socket helpers of the API's load and hostile-client tests
 * (tests/api/test_http_hostile.c, tests/api/test_load.c). */
#ifndef UNICORN_TESTS_HOSTILE_H
#define UNICORN_TESTS_HOSTILE_H

#include <stddef.h>
#include <sys/types.h>

/* A TCP connection to 127.0.0.1:port with a receive timeout of rcv_s
 * seconds; -1 when connect fails. */
int hx_dial(int port, int rcv_s);
/* Everything; false when the server closed first. */
int hx_send_all(int fd, const void *s, size_t n);
/* Everything until the server closes or the receive timeout (NUL-terminated). */
char *hx_recv_all(int fd, size_t *len);
/* One request on a fresh connection (Connection: close expected): the answer. */
char *hx_request(int port, const char *head, const char *body, size_t body_len, size_t *len);
/* Decode an HTTP/1.1 chunked body in place (stops at a malformed size line). */
void hx_unchunk(char *body);
/* The HTTP status of an answer ("HTTP/1.1 200 ..."), 0 when there is none. */
int hx_status(const char *r);
/* The pid of unicorn-up's child running unicorn-api, 0 if none. */
pid_t hx_api_pid(pid_t sup);
/* VmRSS of pid in KiB (0 when unknown). */
long hx_rss_kib(pid_t pid);

#endif
