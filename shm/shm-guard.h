/* A SIGBUS guard for segments a peer can truncate (DESIGN §8).
 *
 * A memfd segment is sealed (no shrink), but a POSIX shm object (--shm posix) cannot
 * be: a client may ftruncate() it to 0 and the engine's next access to the pages
 * beyond the new end raises SIGBUS, which kills the process. The guard is the one
 * Wayland compositors use for wl_shm pools: a SIGBUS handler that finds the guarded
 * segment holding the faulting address, maps private zero pages over the whole
 * segment (so the faulting access, re-executed, succeeds) and flags the segment.
 * The owner checks allm_shm_guard_faulted() after its accesses and drops the peer.
 *
 * Single-threaded use: the list is changed only by the thread that accesses the
 * segments (the daemon's loop), so the handler, which runs on that thread when it
 * faults, never sees a list half changed. A SIGBUS anywhere else keeps its default
 * action (or the handler installed before ours). */
#ifndef ALLM_SHM_GUARD_H
#define ALLM_SHM_GUARD_H

#include "shm-segment.h"

#include <stdbool.h>

/* Installs the process-wide SIGBUS handler (idempotent). 0 or -errno. */
int allm_shm_guard_install(void);

/* Puts seg on (takes it off) the guarded list. remove accepts NULL and unguarded
 * segments; allm_shm_segment_destroy() calls it. */
void allm_shm_guard_add(struct allm_shm_segment *seg);
void allm_shm_guard_remove(struct allm_shm_segment *seg);

/* True once an access to seg faulted because the object was truncated: the bytes
 * seen since are zeros, not the peer's. */
bool allm_shm_guard_faulted(const struct allm_shm_segment *seg);

#endif
