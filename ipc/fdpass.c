/* fdpass: SCM_RIGHTS over SOCK_SEQPACKET with uid checks and leak-free errors.
 *
 * Packet header (24 bytes, little-endian): magic u32, tag u32, chunk u32,
 * n_chunks u32, n_fds u32 (in this packet), data_len u32 (in this packet).
 * Chunk 0 carries all the data; every chunk carries its share of the fds. */
#include "ipc/fdpass.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/err.h"

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int make_addr(const char *path, struct sockaddr_un *a)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	if (!path || !*path || strlen(path) >= sizeof a->sun_path)
		return err_set(ERR_INVAL, "fdpass: socket path '%s' empty or longer than %zu",
			       path ? path : "", sizeof a->sun_path - 1);
	memcpy(a->sun_path, path, strlen(path));
	return 0;
}

static int check_peer(int fd, const char *what)
{
	struct ucred cr;
	socklen_t l = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0)
		return err_set(ERR_IO, "fdpass: %s: SO_PEERCRED: %s", what, strerror(errno));
	if (cr.uid != geteuid())
		return err_set(ERR_INVAL, "fdpass: %s: peer pid %d runs as uid %u, not ours (%u): refused",
			       what, (int)cr.pid, (unsigned)cr.uid, (unsigned)geteuid());
	return 0;
}

int fdpass_set_timeout(int fd, int ms)
{
	if (ms <= 0)
		return err_set(ERR_INVAL, "fdpass: timeout %d ms must be positive", ms);
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0)
		return err_set(ERR_IO, "fdpass: set timeouts: %s", strerror(errno));
	return 0;
}

int fdpass_listen(const char *path, int *lfd)
{
	*lfd = -1;
	struct sockaddr_un a;
	int rc = make_addr(path, &a);
	if (rc)
		return rc;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(ERR_IO, "fdpass: %s: socket: %s", path, strerror(errno));
	/* A socket file left by a dead loader would make bind fail; the runtime
	 * dir is ours (0700), so removing it is safe. */
	if (unlink(path) < 0 && errno != ENOENT) {
		rc = err_set(ERR_IO, "fdpass: %s: unlink stale socket: %s", path, strerror(errno));
		goto out_fd;
	}
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, 16) < 0) {
		rc = err_set(ERR_IO, "fdpass: %s: bind/listen: %s", path, strerror(errno));
		goto out_fd;
	}
	*lfd = fd;
	return 0;
out_fd:
	close(fd);
	return rc;
}

int fdpass_accept(int lfd, int timeout_ms, int *cfd)
{
	*cfd = -1;
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	int n;
	do
		n = poll(&p, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return err_set(ERR_IO, "fdpass: accept: poll: %s", strerror(errno));
	if (n == 0)
		return err_set(ERR_TIMEOUT, "fdpass: accept: no client within %d ms", timeout_ms);
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return err_set(ERR_IO, "fdpass: accept: %s", strerror(errno));
	int rc;
	if ((rc = check_peer(fd, "accept")) || (rc = fdpass_set_timeout(fd, FDPASS_TIMEOUT_MS))) {
		close(fd);
		return rc;
	}
	*cfd = fd;
	return 0;
}

int fdpass_connect(const char *path, int *out)
{
	*out = -1;
	struct sockaddr_un a;
	int rc = make_addr(path, &a);
	if (rc)
		return rc;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(ERR_IO, "fdpass: %s: socket: %s", path, strerror(errno));
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		rc = err_set(errno == ENOENT || errno == ECONNREFUSED ? ERR_NOTFOUND : ERR_IO,
			     "fdpass: %s: connect: %s", path, strerror(errno));
		goto out_fd;
	}
	if ((rc = check_peer(fd, path)) || (rc = fdpass_set_timeout(fd, FDPASS_TIMEOUT_MS)))
		goto out_fd;
	*out = fd;
	return 0;
out_fd:
	close(fd);
	return rc;
}

static int send_packet(int sock, const uint8_t *hdr, const void *data, size_t len, const int *fds,
		       size_t nfds)
{
	struct iovec iov[2] = { { (void *)hdr, FDPASS_HDR_SIZE }, { (void *)data, len } };
	union {
		char buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX_FDS_PER_MSG)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	if (nfds) {
		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	ssize_t n;
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return err_set(errno == EAGAIN ? ERR_TIMEOUT : ERR_IO, "fdpass: sendmsg: %s",
			       strerror(errno));
	if ((size_t)n != FDPASS_HDR_SIZE + len)
		return err_set(ERR_IO, "fdpass: sendmsg: short write %zd", n);
	return 0;
}

int fdpass_send(int sock, uint32_t tag, const void *data, size_t len, const int *fds, size_t nfds)
{
	if (len > FDPASS_MAX_DATA || nfds > FDPASS_MAX_FDS)
		return err_set(ERR_RANGE, "fdpass: send: %zu data bytes / %zu fds exceed caps %d / %d", len,
			       nfds, FDPASS_MAX_DATA, FDPASS_MAX_FDS);
	uint32_t n_chunks = nfds ? (uint32_t)((nfds + FDPASS_MAX_FDS_PER_MSG - 1) / FDPASS_MAX_FDS_PER_MSG)
				 : 1;
	for (uint32_t i = 0; i < n_chunks; i++) {
		size_t off = (size_t)i * FDPASS_MAX_FDS_PER_MSG;
		size_t k = nfds - off < FDPASS_MAX_FDS_PER_MSG ? nfds - off : FDPASS_MAX_FDS_PER_MSG;
		if (!nfds)
			k = 0;
		size_t dl = i == 0 ? len : 0;
		uint8_t hdr[FDPASS_HDR_SIZE];
		put32(hdr, FDPASS_MAGIC);
		put32(hdr + 4, tag);
		put32(hdr + 8, i);
		put32(hdr + 12, n_chunks);
		put32(hdr + 16, (uint32_t)k);
		put32(hdr + 20, (uint32_t)dl);
		int rc = send_packet(sock, hdr, data, dl, fds ? fds + off : NULL, k);
		if (rc)
			return rc;
	}
	return 0;
}

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

int fdpass_recv(int sock, uint32_t *tag, void *data, size_t cap, size_t *len, int *fds,
		size_t max_fds, size_t *nfds)
{
	*len = 0;
	*nfds = 0;
	uint8_t *pkt = malloc(FDPASS_HDR_SIZE + FDPASS_MAX_DATA);
	if (!pkt)
		return err_set(ERR_NOMEM, "fdpass: out of memory");
	union {
		char buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX_FDS_PER_MSG)];
		struct cmsghdr align;
	} u;
	size_t got = 0;
	uint32_t n_chunks = 1, want_tag = 0;
	int rc = 0;
	for (uint32_t chunk = 0; chunk < n_chunks; chunk++) {
		struct iovec iov = { pkt, FDPASS_HDR_SIZE + FDPASS_MAX_DATA };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
				     .msg_controllen = sizeof u.buf };
		ssize_t n;
		do
			n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		while (n < 0 && errno == EINTR);
		if (n < 0) {
			rc = err_set(errno == EAGAIN ? ERR_TIMEOUT : ERR_IO, "fdpass: recvmsg: %s",
				     errno == EAGAIN ? "timed out" : strerror(errno));
			goto out_fds;
		}
		if (n == 0) {
			rc = err_set(ERR_IO, "fdpass: recvmsg: peer closed the connection");
			goto out_fds;
		}
		/* Collect this packet's fds first, so every error path below closes them. */
		size_t pkt_fds = 0;
		int overflow = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int *src = (int *)CMSG_DATA(c);
			for (size_t j = 0; j < k; j++) {
				int f;
				memcpy(&f, src + j, sizeof f);
				if (got < max_fds) {
					fds[got++] = f;
					pkt_fds++;
				} else {
					close(f);
					overflow = 1;
				}
			}
		}
		if (overflow) {
			rc = err_set(ERR_RANGE, "fdpass: peer sent more than %zu fds", max_fds);
			goto out_fds;
		}
		if (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) {
			rc = err_set(ERR_RANGE, "fdpass: packet or its fds truncated");
			goto out_fds;
		}
		if (n < FDPASS_HDR_SIZE || get32(pkt) != FDPASS_MAGIC) {
			rc = err_set(ERR_INVAL, "fdpass: packet of %zd bytes without a valid header", n);
			goto out_fds;
		}
		uint32_t h_tag = get32(pkt + 4), h_chunk = get32(pkt + 8), h_n = get32(pkt + 12),
			 h_fds = get32(pkt + 16), h_len = get32(pkt + 20);
		if (chunk == 0) {
			if (h_n < 1 || h_n > (FDPASS_MAX_FDS + FDPASS_MAX_FDS_PER_MSG - 1) / FDPASS_MAX_FDS_PER_MSG) {
				rc = err_set(ERR_INVAL, "fdpass: n_chunks %u out of range", h_n);
				goto out_fds;
			}
			n_chunks = h_n;
			want_tag = h_tag;
		}
		if (h_chunk != chunk || h_n != n_chunks || h_tag != want_tag || h_fds != pkt_fds ||
		    h_fds > FDPASS_MAX_FDS_PER_MSG || h_len != (size_t)n - FDPASS_HDR_SIZE ||
		    (chunk > 0 && h_len)) {
			rc = err_set(ERR_INVAL, "fdpass: chunk %u: header (chunk %u/%u, tag %u, %u fds, %u bytes) "
				     "does not match the packet (%zu fds, %zd bytes)", chunk, h_chunk, h_n,
				     h_tag, h_fds, h_len, pkt_fds, n - FDPASS_HDR_SIZE);
			goto out_fds;
		}
		if (chunk == 0) {
			if (h_len > cap) {
				rc = err_set(ERR_RANGE, "fdpass: %u data bytes exceed the buffer of %zu", h_len,
					     cap);
				goto out_fds;
			}
			if (h_len)
				memcpy(data, pkt + FDPASS_HDR_SIZE, h_len);
			*len = h_len;
		}
	}
	*tag = want_tag;
	*nfds = got;
	free(pkt);
	return 0;
out_fds:
	close_all(fds, got);
	*len = 0;
	free(pkt);
	return rc;
}
