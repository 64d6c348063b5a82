/* A deadline per connection for what the client sends: from connect, and from the
 * end of each answer, it has --header-timeout seconds (10) to deliver a request's
 * line and headers, and --timeout seconds (60) for the whole request, body
 * included. libmicrohttpd's own timeout only counts silence, so a slowloris peer
 * trickling a byte a second would hold its slot for ever; this one cannot, and
 * before authentication (the key is a header) it holds it for seconds, not a
 * minute (issue 49 item 4; libmicrohttpd's per-address cap does the rest). While
 * the gateway works on a request (generating, streaming) there is no deadline.
 *
 * A reaper thread shuts down the socket of a connection past its deadline;
 * libmicrohttpd then sees the close and cleans up as for any hang-up. The socket
 * is shut down only while the connection is on our list, and libmicrohttpd tells
 * us it closes (MHD_CONNECTION_NOTIFY_CLOSED, under our lock) before it closes the
 * descriptor, so a reused descriptor is never touched. */
#include "gw-http.h"

#include "common.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

/* How often the reaper looks. */
#define GW_REAP_INTERVAL_MS 250

struct gw_conn {
	struct gw_conn *prev, *next;
	int fd;
	double head;     /* allm_now() by which the request's headers must be in; 0: none */
	double deadline; /* allm_now() by which a whole request must be in; 0: none */
};

/* Both deadlines from now (under conns_lock). */
static void arm(const struct gw *gw, struct gw_conn *c)
{
	double now = allm_now();
	c->head = now + gw->o.header_timeout_s;
	c->deadline = now + gw->o.timeout_s;
}

static struct gw_conn *of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

static void conns_insert(struct gw *gw, struct gw_conn *c)
{
	c->prev = NULL;
	c->next = gw->conns;
	if (gw->conns)
		gw->conns->prev = c;
	gw->conns = c;
}

static void conns_remove(struct gw *gw, struct gw_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		gw->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

void gw_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		     enum MHD_ConnectionNotificationCode code)
{
	struct gw *gw = cls;
	struct gw_conn *c = *socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci || !(c = calloc(1, sizeof(*c))))
			return; /* untracked: libmicrohttpd's idle timeout still applies */
		c->fd = ci->connect_fd;
		pthread_mutex_lock(&gw->conns_lock);
		arm(gw, c);
		conns_insert(gw, c);
		pthread_mutex_unlock(&gw->conns_lock);
		*socket_context = c;
	} else if (c) {
		pthread_mutex_lock(&gw->conns_lock);
		conns_remove(gw, c);
		pthread_mutex_unlock(&gw->conns_lock);
		free(c);
		*socket_context = NULL;
	}
}

void gw_conns_working(struct gw *gw, struct MHD_Connection *conn, bool working)
{
	struct gw_conn *c = of(conn);
	if (!c)
		return;
	pthread_mutex_lock(&gw->conns_lock);
	if (working)
		c->head = c->deadline = 0;
	else
		arm(gw, c);
	pthread_mutex_unlock(&gw->conns_lock);
}

void gw_conns_head_in(struct gw *gw, struct MHD_Connection *conn)
{
	struct gw_conn *c = of(conn);
	if (!c)
		return;
	pthread_mutex_lock(&gw->conns_lock);
	c->head = 0;
	pthread_mutex_unlock(&gw->conns_lock);
}

static void *reaper_main(void *arg)
{
	struct gw *gw = arg;
	struct timespec ts = {0, GW_REAP_INTERVAL_MS * 1000 * 1000};
	while (!atomic_load(&gw->reaper_stop)) {
		nanosleep(&ts, NULL);
		double now = allm_now();
		int n = 0;
		pthread_mutex_lock(&gw->conns_lock);
		for (struct gw_conn *c = gw->conns; c; c = c->next)
			if ((c->deadline > 0 && now > c->deadline) || (c->head > 0 && now > c->head)) {
				shutdown(c->fd, SHUT_RDWR);
				c->head = c->deadline = 0;
				n++;
			}
		pthread_mutex_unlock(&gw->conns_lock);
		if (n)
			gw_log(gw, ALLM_LOG_DEBUG,
			       "closed %d connection%s that sent no headers within %d s or no whole request within %d s",
			       n, n == 1 ? "" : "s", gw->o.header_timeout_s, gw->o.timeout_s);
	}
	return NULL;
}

int gw_conns_start(struct gw *gw)
{
	atomic_init(&gw->reaper_stop, false);
	int e = pthread_create(&gw->reaper, NULL, reaper_main, gw);
	return -e;
}

void gw_conns_stop(struct gw *gw)
{
	atomic_store(&gw->reaper_stop, true);
	pthread_join(gw->reaper, NULL);
}
