/* Description: libFuzzer target over allm-engined's handshake: the bytes a peer
 * sends on the Unix socket before it is a client (DESIGN §8). Input = what the
 * peer writes (a hello, then maybe its mapped ack and more), over a socketpair into
 * the daemon's real session code and event loop. Checks: a welcome comes back, with
 * status 0 exactly when the hello is well-formed (magic, ABI, zero reserved fields,
 * known flags), then with a sealed memfd whatever mode the hello asked for; the
 * client is gone once the peer hangs up, nothing left behind. */
#include "fuzz-daemon.h"
#include "raw-client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static bool hello_ok(const uint8_t *data, size_t size)
{
	struct allm_hello h;
	if (size < sizeof(h))
		return false;
	memcpy(&h, data, sizeof(h));
	return h.magic == ALLM_HELLO_MAGIC && h.abi_version == ALLM_SHM_ABI_VERSION && !h.reserved &&
	       !(h.flags & ~ALLM_HELLO_F_POSIX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct daemon *d = fuzz_daemon();
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv))
		abort();
	struct ucred cr = {.pid = getpid(), .uid = getuid(), .gid = getgid()};
	daemon_client_add(d, sv[0], &cr);
	size_t n = size < 4096 ? size : 4096;
	if (n && write(sv[1], data, n) != (ssize_t)n)
		abort();
	for (int i = 0; i < 4; i++) {
		allm_loop_run_once(d->loop, 0);
		daemon_flush(d);
	}
	struct allm_welcome w;
	int fds[8], nfd = 0;
	ssize_t got = raw_read_welcome(sv[1], &w, fds, &nfd, MSG_DONTWAIT);
	if (size >= sizeof(struct allm_hello)) {
		/* a whole hello is always answered, and as it deserves */
		if (got != (ssize_t)sizeof(w) || w.magic != ALLM_WELCOME_MAGIC ||
		    (w.status == 0) != hello_ok(data, size) || (w.status == 0) != (nfd == 3))
			abort();
		/* the engine's mode, never the peer's: a sealed memfd */
		if (w.status == 0 && (w.shm_name[0] || (fcntl(fds[0], F_GET_SEALS) &
							 (F_SEAL_SHRINK | F_SEAL_GROW)) !=
								(F_SEAL_SHRINK | F_SEAL_GROW)))
			abort();
	} else if (got > 0) {
		abort(); /* half a hello gets no answer (yet) */
	}
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
	close(sv[1]); /* the lease ends */
	for (int i = 0; i < 4 && d->n_clients; i++) {
		allm_loop_run_once(d->loop, 0);
		daemon_flush(d);
	}
	if (d->n_clients) {
		/* a peer that stopped mid-hello: the handshake timeout ends it */
		daemon_client_tick(d, allm_now() + d->handshake_timeout + 1);
		daemon_flush(d);
	}
	if (d->n_clients || d->clients)
		abort();
	return 0;
}
