/* Description: peers that push at allm-engined's limits (issue 13), run by the daemon-*.sh tests against a real engine: a client that truncates its segment, a flood of silent connections, prompts far longer than the context, and a client that counts how many of its requests the caps accept. Prints one result line per check for the script to assert on; exits 1 on a broken expectation it can judge itself.
 *
 *   daemon-peer --socket PATH MODE [ARGS]
 *     truncate          hello asking for POSIX mode, ack; then ftruncate(segment, 0):
 *                       prints "mode memfd|posix", then "sealed" (memfd: EPERM, and a
 *                       request is still served) or "truncated" then "disconnected"
 *                       (posix: the engine dropped this client) or "not disconnected"
 *     flood N SECONDS   N connections that never send a hello (a full backlog retried
 *                       for 2 s), held SECONDS; prints "connected C", then "closed K
 *                       of C" (by the engine)
 *     bigprompt [R]     a 64 MiB arena, then R (default 1) rounds of a 64 MiB and a
 *                       32 MiB text prompt and a 16 Mi-token prompt; prints "filled",
 *                       then "final STATUS MESSAGE" for each of the first round
 *     caps N [M]        (libadaptivellm) client X submits N long requests of 5 prompt
 *                       ids, then client Y M more while X's run; for each client one
 *                       line "accepted A refused R status S: MESSAGE" (the first
 *                       refusal's), once each request has its ACCEPTED or FINAL
 */
#include <adaptivellm/client.h>

#include "raw-client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const int32_t g_prompt[] = {1, 403, 407, 261, 378};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* --- truncate ------------------------------------------------------------------ */

static int do_truncate(void)
{
	struct raw *r = raw_connect_f(ALLM_HELLO_F_POSIX, true);
	bool posix = r->shm_name[0] != '\0';
	say("mode %s", posix ? "posix" : "memfd");
	memcpy(allm_shm_segment_arena(r->seg), g_prompt, sizeof(g_prompt));
	struct allm_sqe q = raw_submit_sqe(r, 0, 0, sizeof(g_prompt), ALLM_PROMPT_TOKENS);
	raw_params(r, &q)->max_tokens = 200;
	raw_params(r, &q)->ignore_eos = 1;
	if (!posix) {
		int t = ftruncate(r->seg->fd, 0);
		say("%s", t < 0 && errno == EPERM ? "sealed" : "NOT sealed");
		raw_push(r, &q);
		bool done = raw_wait_finals(r, 0, 1);
		say("%s", done && r->last_final[0].finish_reason == ALLM_FINISH_LENGTH ? "served"
											: "NOT served");
		raw_close(r);
		return 0;
	}
	raw_push(r, &q); /* a request runs: the engine writes its tokens into the segment */
	raw_sleep_ms(20);
	if (ftruncate(r->seg->fd, 0)) {
		say("ftruncate failed: %s", strerror(errno));
		return 1;
	}
	say("truncated");
	/* never touch the mapping again: it would SIGBUS us too */
	allm_doorbell_ring(&r->sq_db);
	say("%s", raw_hung_up(r->sock, 10000) ? "disconnected" : "not disconnected");
	raw_close(r); /* munmap and close only: no access to the truncated pages */
	return 0;
}

/* --- flood ---------------------------------------------------------------------- */

static int do_flood(int n, double seconds)
{
	struct pollfd *p = calloc((size_t)n, sizeof(*p));
	if (!p)
		return 2;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path, raw_path, strlen(raw_path) + 1); /* checked in main */
	int c = 0;
	double give_up = raw_now() + 2; /* a full backlog (EAGAIN) is retried this long */
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			break; /* our own fd limit */
		int r;
		while ((r = connect(fd, (struct sockaddr *)&a, sizeof(a))) && errno == EAGAIN &&
		       raw_now() < give_up)
			raw_sleep_ms(1);
		if (r) {
			close(fd);
			continue;
		}
		p[c].fd = fd;
		p[c++].events = POLLIN;
	}
	say("connected %d", c);
	int closed = 0;
	double end = raw_now() + seconds;
	while (raw_now() < end) {
		int left = (int)((end - raw_now()) * 1000) + 1;
		if (poll(p, (nfds_t)c, left) <= 0)
			continue;
		for (int i = 0; i < c; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			char b[256];
			ssize_t k = recv(p[i].fd, b, sizeof(b), MSG_DONTWAIT);
			if (k == 0 || (k < 0 && errno != EAGAIN)) {
				close(p[i].fd);
				p[i].fd = -1; /* poll skips negative fds */
				closed++;
			}
		}
	}
	say("closed %d of %d", closed, c);
	for (int i = 0; i < c; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	free(p);
	return 0;
}

/* --- bigprompt ------------------------------------------------------------------ */

static int do_bigprompt(int rounds)
{
	struct allm_hello h = raw_hello(0);
	h.arena_size = 64u << 20;
	struct raw *r = raw_connect(&h, true);
	uint32_t A = r->arena_size, half = A / 2;
	uint8_t *arena = allm_shm_segment_arena(r->seg);
	/* "a a a ...": valid text, a token every byte or two (as token ids, the same
	 * bytes are out of the vocabulary: refused either way, the question is when) */
	for (uint32_t i = 0; i < A; i++)
		arena[i] = i % 2 ? ' ' : 'a';
	say("filled"); /* a benchmark beside us starts now: our own memset is over */
	int n = 3 * rounds;
	for (int k = 0; k < rounds; k++) {
		struct allm_sqe q = raw_submit_sqe(r, (uint64_t)3 * k, 0, A, ALLM_PROMPT_TEXT);
		raw_push(r, &q);
		q = raw_submit_sqe(r, (uint64_t)3 * k + 1, 0, half, ALLM_PROMPT_TEXT);
		raw_push(r, &q);
		q = raw_submit_sqe(r, (uint64_t)3 * k + 2, 0, A, ALLM_PROMPT_TOKENS);
		raw_push(r, &q);
	}
	/* 120 s: what the engine of issue 13 needed for a few of them */
	double end = raw_now() + 120;
	while (!raw_wait_finals(r, 0, (uint64_t)n) && raw_now() < end) {
	}
	int rc = 0;
	for (int t = 0; t < n; t++) {
		const struct allm_cqe *e = &r->last_final[t];
		if (r->finals[t] != 1)
			rc = 1;
		if (t < 3)
			say("final %d %.64s", r->finals[t] ? e->status : 0,
			    r->finals[t] ? e->u.final.error : "none");
	}
	raw_close(r);
	return rc;
}

/* --- caps ----------------------------------------------------------------------- */

/* One client submits n long requests at once and collects the answer of each:
 * printed as "accepted A refused R status S: MESSAGE" (the first refusal's). The
 * client stays connected (its requests count) until the caller disconnects it. */
static int caps_client(const struct allm_client_opts *co, int n, allm_client_t **ret)
{
	char err[256];
	allm_client_t *c;
	if (allm_client_connect(co, &c, err, sizeof(err))) {
		say("connect failed: %s", err);
		return 1;
	}
	*ret = c;
	for (int i = 0; i < n; i++) {
		struct allm_request_params p;
		allm_request_params_init(&p);
		p.prompt_ids = g_prompt;
		p.n_prompt_ids = 5;
		p.params.max_tokens = 400;
		p.params.ignore_eos = true;
		p.params.temperature = 0;
		p.user_tag = (uint64_t)i;
		int r = allm_client_submit(c, &p);
		if (r) {
			say("submit %d: %s", i, strerror(-r));
			return 1;
		}
	}
	int accepted = 0, refused = 0, status = 0;
	char msg[ALLM_CQE_ERROR_MAX + 1] = "";
	double end = raw_now() + 30;
	while (accepted + refused < n && raw_now() < end) {
		struct allm_event ev;
		if (allm_client_wait(c, &ev, 200) <= 0)
			continue;
		if (ev.kind == ALLM_EVENT_ACCEPTED) {
			accepted++;
		} else if (ev.kind == ALLM_EVENT_FINAL && ev.request_id == 0) {
			refused++;
			if (!status) {
				status = ev.status;
				snprintf(msg, sizeof(msg), "%s", ev.error ? ev.error : "");
			}
		}
	}
	say("accepted %d refused %d status %d: %s", accepted, refused, status, msg);
	return 0;
}

/* caps N [M]: client X submits N, then (while X's are in flight) client Y M. */
static int do_caps(int n, int m, const char *runtime_dir, const char *name)
{
	struct allm_client_opts co = {.name = name, .runtime_dir = runtime_dir, .timeout_ms = 10000};
	allm_client_t *x = NULL, *y = NULL;
	int rc = caps_client(&co, n, &x);
	if (!rc && m > 0)
		rc = caps_client(&co, m, &y);
	allm_client_disconnect(y);
	allm_client_disconnect(x);
	return rc;
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	int i = 1;
	if (argc > 2 && !strcmp(argv[1], "--socket"))
		sock = argv[2], i = 3;
	if (!sock || i >= argc || strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fprintf(stderr, "usage: see the comment at the top of daemon-peer.c\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(raw_path, sizeof(raw_path), "%s", sock);
	const char *mode = argv[i];
	if (!strcmp(mode, "truncate"))
		return do_truncate();
	if (!strcmp(mode, "flood") && i + 2 < argc)
		return do_flood(atoi(argv[i + 1]), atof(argv[i + 2]));
	if (!strcmp(mode, "bigprompt"))
		return do_bigprompt(i + 1 < argc ? atoi(argv[i + 1]) : 1);
	if (!strcmp(mode, "caps") && i + 1 < argc) {
		int m = i + 2 < argc ? atoi(argv[i + 2]) : 0;
		/* the client library wants a directory and a name: split the path */
		static char dir[600];
		snprintf(dir, sizeof(dir), "%s", sock);
		char *slash = strrchr(dir, '/'), *dot = strrchr(dir, '.');
		if (!slash || !dot || dot < slash)
			return 2;
		*slash = *dot = '\0';
		return do_caps(atoi(argv[i + 1]), m, dir, slash + 1);
	}
	fprintf(stderr, "daemon-peer: unknown mode or missing arguments: %s\n", mode);
	return 2;
}
