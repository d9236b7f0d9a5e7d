/* fdpass: passing file descriptors between cluster processes.
 *
 * AF_UNIX SOCK_SEQPACKET (message boundaries kept, connection-oriented) in the
 * runtime directory (loader.sock). A transfer is one or more packets, each a
 * 24-byte header + optional data, with up to FDPASS_MAX_FDS_PER_MSG fds as
 * SCM_RIGHTS; larger fd sets are split into chunks (docs/protocol.md).
 *
 * Both sides check the peer's uid (SO_PEERCRED) equals ours and refuse
 * otherwise. Sockets have send/receive timeouts. Received fds are CLOEXEC and,
 * on any error, every fd received so far is closed (no leaks). */
#ifndef UNICORN_FDPASS_H
#define UNICORN_FDPASS_H

#include <stddef.h>
#include <stdint.h>

#define FDPASS_MAGIC 0x50444655u        /* "UFDP" little-endian */
#define FDPASS_MAX_FDS_PER_MSG 253      /* SCM_MAX_FD (253 on Linux) */
#define FDPASS_MAX_FDS 1024             /* per transfer */
#define FDPASS_MAX_DATA 16384           /* data bytes per transfer (first packet) */
#define FDPASS_HDR_SIZE 24
#define FDPASS_TIMEOUT_MS 5000          /* default socket timeouts */

/* Listen on path (a stale socket file is removed; mode 0600). */
int fdpass_listen(const char *path, int *lfd);
/* Accept one client within timeout_ms (-1: wait), check its uid, set timeouts. */
int fdpass_accept(int lfd, int timeout_ms, int *cfd);
/* Connect to path, check the server's uid, set timeouts. */
int fdpass_connect(const char *path, int *fd);
/* Set SO_RCVTIMEO and SO_SNDTIMEO (ms > 0). */
int fdpass_set_timeout(int fd, int ms);

/* Send one transfer: tag (caller-defined meaning), data[len] (<= FDPASS_MAX_DATA),
 * fds[nfds] (<= FDPASS_MAX_FDS; not closed here). */
int fdpass_send(int sock, uint32_t tag, const void *data, size_t len, const int *fds, size_t nfds);

/* Receive one transfer. data[cap] receives the data (*len bytes); fds[max_fds]
 * the descriptors (*nfds). On error no fd is left open. ERR_TIMEOUT after the
 * socket timeout, ERR_IO when the peer closed. */
int fdpass_recv(int sock, uint32_t *tag, void *data, size_t cap, size_t *len, int *fds,
		size_t max_fds, size_t *nfds);

#endif
