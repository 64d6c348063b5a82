/* The SIGBUS guard of shm-guard.h. */
#include "shm-guard.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

static struct allm_shm_segment *_Atomic guarded;
static struct sigaction previous; /* chained to for faults that are not ours */
static bool installed;

/* Async-signal-safe: walks the list (only loads), mmap(2) (a system call), a store. */
static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	const uint8_t *a = si->si_addr;
	for (struct allm_shm_segment *s = atomic_load_explicit(&guarded, memory_order_acquire); s;
	     s = atomic_load_explicit(&s->guard_next, memory_order_acquire)) {
		if (a < s->base || a >= s->base + s->layout.total_size)
			continue;
		/* private zeros where the peer's pages were: the access that faulted
		 * re-executes and succeeds; the owner sees `faulted` and drops the peer */
		if (mmap(s->base, s->layout.total_size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
			break;
		s->faulted = 1;
		return;
	}
	/* not a guarded segment: what would have happened without us */
	if (previous.sa_flags & SA_SIGINFO && previous.sa_sigaction) {
		previous.sa_sigaction(sig, si, uctx);
		return;
	}
	if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler) {
		previous.sa_handler(sig);
		return;
	}
	signal(SIGBUS, SIG_DFL); /* the faulting access re-executes and kills us as it should */
}

int allm_shm_guard_install(void)
{
	if (installed)
		return 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &previous))
		return -errno;
	installed = true;
	return 0;
}

void allm_shm_guard_add(struct allm_shm_segment *seg)
{
	if (!seg || seg->guarded)
		return;
	atomic_store_explicit(&seg->guard_next, atomic_load_explicit(&guarded, memory_order_relaxed),
			      memory_order_relaxed);
	/* release: the handler that finds seg sees its base and layout */
	atomic_store_explicit(&guarded, seg, memory_order_release);
	seg->guarded = true;
}

void allm_shm_guard_remove(struct allm_shm_segment *seg)
{
	if (!seg || !seg->guarded)
		return;
	struct allm_shm_segment *_Atomic *p = &guarded;
	for (struct allm_shm_segment *s; (s = atomic_load_explicit(p, memory_order_relaxed));
	     p = &s->guard_next)
		if (s == seg) {
			atomic_store_explicit(p, atomic_load_explicit(&seg->guard_next, memory_order_relaxed),
					      memory_order_release);
			break;
		}
	seg->guarded = false;
}

bool allm_shm_guard_faulted(const struct allm_shm_segment *seg)
{
	return seg && seg->faulted;
}
