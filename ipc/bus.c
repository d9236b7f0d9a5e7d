/* bus: nng links. The only file of ipc/ that uses nng. */
#include "ipc/bus.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/err.h"

struct bus {
	nng_socket sock;
	enum bus_kind kind;
	uint32_t next_seq;
	char url[BUS_URL_MAX + 1];
	void (*on_closed)(void *arg, uint32_t pipe); /* bus_on_peer_gone */
	void *on_closed_arg;
	uint8_t buf[MSG_MAX_BUF];  /* encode buffer */
};

struct bus_pending {
	nng_ctx ctx;
	nng_aio *aio;
	uint32_t seq;
	uint32_t pipe;             /* the connection the request came over */
};

static int nng_err(int rv, const char *url, const char *what)
{
	if (rv == NNG_ETIMEDOUT)
		return err_set(ERR_TIMEOUT, "bus: %s: %s: timed out", url, what);
	return err_set(ERR_IO, "bus: %s: %s: %s", url, what, nng_strerror(rv));
}

/* Refuse peers of another uid: a pipe whose uid we cannot read or that differs
 * from ours is closed before the protocol sees it. */
static void pipe_check(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)ev;
	(void)arg;
	uint64_t uid;
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) != 0 || uid != (uint64_t)geteuid())
		nng_pipe_close(p);
}

static int check_url(const char *url)
{
	if (!url || strncmp(url, "ipc://", 6))
		return err_set(ERR_INVAL, "bus: url '%s': only ipc:// URLs are allowed", url ? url : "");
	size_t n = strlen(url);
	if (n == 6 || n > BUS_URL_MAX)
		return err_set(ERR_INVAL, "bus: url '%s': path empty or longer than %d", url, BUS_URL_MAX);
	if (url[6] != '/')
		return err_set(ERR_INVAL, "bus: url '%s': path must be absolute", url);
	return 0;
}

static int open_sock(const char *url, enum bus_kind kind, struct bus **out)
{
	*out = NULL;
	int rc = check_url(url);
	if (rc)
		return rc;
	struct bus *b = calloc(1, sizeof *b);
	if (!b)
		return err_set(ERR_NOMEM, "bus: out of memory");
	b->kind = kind;
	b->next_seq = 1;
	snprintf(b->url, sizeof b->url, "%s", url);
	int rv;
	switch (kind) {
	case BUS_PAIR: rv = nng_pair1_open(&b->sock); break;
	case BUS_REQ: rv = nng_req0_open(&b->sock); break;
	case BUS_REP: rv = nng_rep0_open(&b->sock); break;
	default:
		free(b);
		return err_set(ERR_INVAL, "bus: %s: unknown link kind %d", url, (int)kind);
	}
	if (rv) {
		free(b);
		return nng_err(rv, url, "open socket");
	}
	if ((rv = nng_socket_set_ms(b->sock, NNG_OPT_SENDTIMEO, BUS_SEND_TIMEOUT_MS)) ||
	    (rv = nng_socket_set_ms(b->sock, NNG_OPT_RECVTIMEO, 1000)) ||
	    (rv = nng_socket_set_size(b->sock, NNG_OPT_RECVMAXSZ, MSG_MAX_BUF)) ||
	    (rv = nng_socket_set_ms(b->sock, NNG_OPT_RECONNMINT, 100)) ||
	    (rv = nng_socket_set_ms(b->sock, NNG_OPT_RECONNMAXT, 250)) ||
	    (rv = nng_pipe_notify(b->sock, NNG_PIPE_EV_ADD_PRE, pipe_check, NULL)) ||
	    (kind == BUS_REQ &&
	     (rv = nng_socket_set_ms(b->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)))) {
		rc = nng_err(rv, url, "set options");
		nng_close(b->sock);
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

int bus_listen(const char *url, enum bus_kind kind, struct bus **out)
{
	if (kind != BUS_PAIR && kind != BUS_REP)
		return err_set(ERR_INVAL, "bus: %s: only pair and rep links listen", url ? url : "");
	int rc = open_sock(url, kind, out);
	if (rc)
		return rc;
	int rv = nng_listen((*out)->sock, url, NULL, 0);
	if (rv) {
		rc = nng_err(rv, url, "listen");
		bus_close(*out);
		*out = NULL;
	}
	return rc;
}

int bus_dial(const char *url, enum bus_kind kind, struct bus **out)
{
	if (kind != BUS_PAIR && kind != BUS_REQ)
		return err_set(ERR_INVAL, "bus: %s: only pair and req links dial", url ? url : "");
	int rc = open_sock(url, kind, out);
	if (rc)
		return rc;
	/* Non-blocking: the peer may not exist yet; nng keeps retrying. */
	int rv = nng_dial((*out)->sock, url, NULL, NNG_FLAG_NONBLOCK);
	if (rv) {
		rc = nng_err(rv, url, "dial");
		bus_close(*out);
		*out = NULL;
	}
	return rc;
}

int bus_recv_fd(struct bus *b, int *fd)
{
	int rv = nng_socket_get_int(b->sock, NNG_OPT_RECVFD, fd);
	return rv ? nng_err(rv, b->url, "receive descriptor") : 0;
}

void bus_interrupt(struct bus *b)
{
	if (b)
		nng_close(b->sock); /* a blocked bus_recv returns at once; bus_close still frees */
}

void bus_close(struct bus *b)
{
	if (!b)
		return;
	nng_close(b->sock);
	free(b);
}

int bus_set_send_timeout(struct bus *b, int ms)
{
	if (ms <= 0)
		return err_set(ERR_INVAL, "bus: %s: send timeout %d ms must be positive", b->url, ms);
	int rv = nng_socket_set_ms(b->sock, NNG_OPT_SENDTIMEO, ms);
	return rv ? nng_err(rv, b->url, "set send timeout") : 0;
}

static void take_seq(struct bus *b, struct msg *m)
{
	if (!m->seq) {
		m->seq = b->next_seq++;
		if (!b->next_seq)
			b->next_seq = 1;
	}
}

int bus_send(struct bus *b, struct msg *m)
{
	if (b->kind == BUS_REP)
		return err_set(ERR_STATE, "bus: %s: a rep link answers with bus_reply", b->url);
	take_seq(b, m);
	size_t len;
	int rc = msg_encode(m, b->buf, sizeof b->buf, &len);
	if (rc)
		return err_prefix(rc, "bus: %s: send", b->url);
	int rv = nng_send(b->sock, b->buf, len, 0);
	return rv ? nng_err(rv, b->url, msg_type_name(m->type)) : 0;
}

int bus_recv(struct bus *b, int timeout_ms, struct msg *out)
{
	if (b->kind == BUS_REP)
		return err_set(ERR_STATE, "bus: %s: a rep link receives with bus_serve", b->url);
	if (timeout_ms < 0 && timeout_ms != BUS_FOREVER)
		return err_set(ERR_INVAL, "bus: %s: timeout %d ms negative", b->url, timeout_ms);
	int rv = nng_socket_set_ms(b->sock, NNG_OPT_RECVTIMEO,
				   timeout_ms == BUS_FOREVER ? NNG_DURATION_INFINITE : timeout_ms);
	if (rv)
		return nng_err(rv, b->url, "set receive timeout");
	void *data = NULL;
	size_t len = 0;
	rv = nng_recv(b->sock, &data, &len, NNG_FLAG_ALLOC);
	if (rv)
		return nng_err(rv, b->url, "receive");
	int rc = msg_decode(data, len, out);
	nng_free(data, len);
	return rc ? err_prefix(rc, "bus: %s", b->url) : 0;
}

int bus_set_recv_max(struct bus *b, size_t bytes)
{
	int rv = nng_socket_set_size(b->sock, NNG_OPT_RECVMAXSZ, bytes);
	return rv ? nng_err(rv, b->url, "set receive limit") : 0;
}

int bus_call_bytes(struct bus *b, const void *req, size_t len, int timeout_ms, void **rep,
		   size_t *rep_len)
{
	*rep = NULL;
	*rep_len = 0;
	if (b->kind != BUS_REQ)
		return err_set(ERR_STATE, "bus: %s: a call needs a req link", b->url);
	if (timeout_ms < 0)
		return err_set(ERR_INVAL, "bus: %s: timeout %d ms negative", b->url, timeout_ms);
	int rv = nng_send(b->sock, (void *)req, len, 0);
	if (rv)
		return nng_err(rv, b->url, "send");
	if ((rv = nng_socket_set_ms(b->sock, NNG_OPT_RECVTIMEO, timeout_ms)))
		return nng_err(rv, b->url, "set receive timeout");
	void *data = NULL;
	size_t n = 0;
	if ((rv = nng_recv(b->sock, &data, &n, NNG_FLAG_ALLOC)))
		return nng_err(rv, b->url, "receive");
	char *copy = malloc(n + 1);
	if (!copy) {
		nng_free(data, n);
		return err_set(ERR_NOMEM, "bus: out of memory");
	}
	memcpy(copy, data, n);
	copy[n] = 0;
	nng_free(data, n);
	*rep = copy;
	*rep_len = n;
	return 0;
}

int bus_call(struct bus *b, struct msg *req, int timeout_ms, struct msg *reply)
{
	if (b->kind != BUS_REQ)
		return err_set(ERR_STATE, "bus: %s: bus_call needs a req link", b->url);
	int rc = bus_send(b, req);
	if (rc)
		return rc;
	return bus_recv(b, timeout_ms, reply);
}

/* bus_call_patient's wait: the receive's completion (an nng thread) wakes
 * the caller, who looks at give_up between slices. */
struct call_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
};

static void call_done(void *arg)
{
	struct call_wait *w = arg;
	pthread_mutex_lock(&w->mu);
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int bus_call_patient(struct bus *b, struct msg *req, int timeout_ms, int slice_ms, bool (*give_up)(void *arg),
		     void *arg, struct msg *reply)
{
	if (b->kind != BUS_REQ)
		return err_set(ERR_STATE, "bus: %s: bus_call_patient needs a req link", b->url);
	if (timeout_ms <= 0 || slice_ms <= 0)
		return err_set(ERR_INVAL, "bus: %s: timeout %d ms / slice %d ms must be positive", b->url, timeout_ms,
			       slice_ms);
	struct call_wait w = { .done = false };
	pthread_condattr_t ca;
	if (pthread_mutex_init(&w.mu, NULL))
		return err_set(ERR_NOMEM, "bus: %s: mutex", b->url);
	if (pthread_condattr_init(&ca)) {
		pthread_mutex_destroy(&w.mu);
		return err_set(ERR_NOMEM, "bus: %s: condition variable", b->url);
	}
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	int e = pthread_cond_init(&w.cv, &ca);
	pthread_condattr_destroy(&ca);
	if (e) {
		pthread_mutex_destroy(&w.mu);
		return err_set(ERR_NOMEM, "bus: %s: condition variable", b->url);
	}
	nng_aio *aio = NULL;
	int rc = 0, rv = nng_aio_alloc(&aio, call_done, &w);
	if (rv) {
		rc = nng_err(rv, b->url, "allocate aio");
		goto out;
	}
	if ((rc = bus_send(b, req)))
		goto out;
	/* the whole wait is one receive: nng ends it at timeout_ms */
	nng_aio_set_timeout(aio, timeout_ms);
	nng_recv_aio(b->sock, aio);
	bool gave_up = false;
	pthread_mutex_lock(&w.mu);
	while (!w.done && !gave_up) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)slice_ms * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&w.cv, &w.mu, &ts);
		if (w.done || !give_up)
			continue;
		pthread_mutex_unlock(&w.mu); /* give_up takes the caller's locks */
		gave_up = give_up(arg);
		pthread_mutex_lock(&w.mu);
	}
	pthread_mutex_unlock(&w.mu);
	if (gave_up)
		nng_aio_cancel(aio); /* an answer that raced in is still taken below */
	nng_aio_wait(aio);           /* call_done has returned: w may go */
	rv = nng_aio_result(aio);
	if (!rv) {
		nng_msg *nm = nng_aio_get_msg(aio);
		rc = msg_decode(nng_msg_body(nm), nng_msg_len(nm), reply);
		nng_msg_free(nm);
		if (rc)
			rc = err_prefix(rc, "bus: %s", b->url);
	} else if (gave_up && rv == NNG_ECANCELED) {
		rc = err_set(ERR_AGAIN, "bus: %s: %s: stopped waiting for the answer", b->url, msg_type_name(req->type));
	} else {
		rc = nng_err(rv, b->url, "receive");
	}
out:
	nng_aio_free(aio);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	return rc;
}

/* Wait for one request: *nm (the caller frees it) and its pending handle. */
static int serve_msg(struct bus *b, int timeout_ms, nng_msg **nm, struct bus_pending **pending)
{
	*pending = NULL;
	*nm = NULL;
	if (b->kind != BUS_REP)
		return err_set(ERR_STATE, "bus: %s: serving needs a rep link", b->url);
	if (timeout_ms < 0)
		return err_set(ERR_INVAL, "bus: %s: timeout %d ms negative", b->url, timeout_ms);
	struct bus_pending *p = calloc(1, sizeof *p);
	if (!p)
		return err_set(ERR_NOMEM, "bus: out of memory");
	int rc, rv;
	if ((rv = nng_ctx_open(&p->ctx, b->sock))) {
		free(p);
		return nng_err(rv, b->url, "open context");
	}
	if ((rv = nng_aio_alloc(&p->aio, NULL, NULL))) {
		rc = nng_err(rv, b->url, "allocate aio");
		nng_ctx_close(p->ctx);
		free(p);
		return rc;
	}
	nng_aio_set_timeout(p->aio, timeout_ms);
	nng_ctx_recv(p->ctx, p->aio);
	nng_aio_wait(p->aio);
	if ((rv = nng_aio_result(p->aio))) {
		rc = nng_err(rv, b->url, "receive request");
		bus_pending_drop(p);
		return rc;
	}
	*nm = nng_aio_get_msg(p->aio);
	p->pipe = nng_pipe_id(nng_msg_get_pipe(*nm));
	*pending = p;
	return 0;
}

int bus_serve_bytes(struct bus *b, int timeout_ms, void **req, size_t *len, struct bus_pending **pending)
{
	*req = NULL;
	*len = 0;
	nng_msg *nm;
	int rc = serve_msg(b, timeout_ms, &nm, pending);
	if (rc)
		return rc;
	size_t n = nng_msg_len(nm);
	void *copy = malloc(n ? n : 1);
	if (!copy) {
		nng_msg_free(nm);
		bus_pending_drop(*pending);
		*pending = NULL;
		return err_set(ERR_NOMEM, "bus: out of memory");
	}
	memcpy(copy, nng_msg_body(nm), n);
	nng_msg_free(nm);
	*req = copy;
	*len = n;
	return 0;
}

int bus_serve(struct bus *b, int timeout_ms, struct msg *req, struct bus_pending **pending)
{
	nng_msg *nm;
	int rc = serve_msg(b, timeout_ms, &nm, pending);
	if (rc)
		return rc;
	/* decoded in place: the intake's polls take this path once per token */
	rc = msg_decode(nng_msg_body(nm), nng_msg_len(nm), req);
	nng_msg_free(nm);
	if (rc) {
		/* The requester gets no answer and times out; we log via err_msg. */
		bus_pending_drop(*pending);
		*pending = NULL;
		return err_prefix(rc, "bus: %s", b->url);
	}
	(*pending)->seq = req->seq;
	return 0;
}

int bus_reply_bytes(struct bus_pending *p, const void *data, size_t len)
{
	nng_msg *nm;
	int rc = 0, rv = nng_msg_alloc(&nm, len);
	if (rv) {
		rc = err_set(ERR_NOMEM, "bus: reply: %s", nng_strerror(rv));
		goto out;
	}
	memcpy(nng_msg_body(nm), data, len);
	nng_aio_set_msg(p->aio, nm);
	nng_aio_set_timeout(p->aio, BUS_SEND_TIMEOUT_MS);
	nng_ctx_send(p->ctx, p->aio);
	nng_aio_wait(p->aio);
	if ((rv = nng_aio_result(p->aio))) {
		nng_msg_free(nm); /* on failure the message stays ours */
		rc = err_set(rv == NNG_ETIMEDOUT ? ERR_TIMEOUT : ERR_IO, "bus: reply: %s",
			     nng_strerror(rv));
	}
out:
	bus_pending_drop(p);
	return rc;
}

int bus_reply(struct bus_pending *p, struct msg *reply)
{
	if (!reply->seq)
		reply->seq = p->seq;
	uint8_t *buf = malloc(MSG_MAX_BUF);
	size_t len;
	int rc;
	if (!buf)
		rc = err_set(ERR_NOMEM, "bus: out of memory");
	else if (!(rc = msg_encode(reply, buf, MSG_MAX_BUF, &len))) {
		rc = bus_reply_bytes(p, buf, len);
		free(buf);
		return rc;
	}
	free(buf);
	bus_pending_drop(p);
	return rc;
}

void bus_pending_drop(struct bus_pending *p)
{
	if (!p)
		return;
	nng_aio_free(p->aio);
	nng_ctx_close(p->ctx);
	free(p);
}

uint32_t bus_pending_seq(const struct bus_pending *p)
{
	return p->seq;
}

uint32_t bus_pending_peer(const struct bus_pending *p)
{
	return p->pipe;
}

static void pipe_removed(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)ev;
	struct bus *b = arg;
	b->on_closed(b->on_closed_arg, nng_pipe_id(p));
}

int bus_on_peer_gone(struct bus *b, void (*fn)(void *arg, uint32_t peer), void *arg)
{
	b->on_closed = fn;
	b->on_closed_arg = arg;
	int rv = nng_pipe_notify(b->sock, NNG_PIPE_EV_REM_POST, pipe_removed, b);
	return rv ? nng_err(rv, b->url, "watch connections") : 0;
}
