/* The daemon the fuzz targets drive (fuzz-sqe.c, fuzz-hello.c): allm-engined's
 * sessions and request traffic (liballm-serve) over a real engine on a generated
 * "tiny" model, without its main, its sockets or the control plane. Not a test. */
#ifndef ALLM_TESTS_FUZZ_DAEMON_H
#define ALLM_TESTS_FUZZ_DAEMON_H

#include "daemon.h"

#include <stdbool.h>

/* Set by fuzz-replay.c's main: corpus replays run every input fully. */
extern bool replaying;

/* The daemon, set up on first use (aborts if it cannot be). */
struct daemon *fuzz_daemon(void);

#endif
