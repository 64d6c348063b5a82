/* Checks a client makes before it trusts the engine's runtime directory and socket. */
#include "shm-trust.h"

#include <adaptivellm/errtext.h>

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static bool absolute(const char *p)
{
	return p && p[0] == '/';
}

int allm_shm_runtime_dir(char *ret, size_t cap)
{
	const char *env = getenv("ALLM_RUNTIME_DIR"), *xdg = getenv("XDG_RUNTIME_DIR");
	int n;
	if (env && *env)
		n = snprintf(ret, cap, "%s", env);
	else if (absolute(xdg))
		n = snprintf(ret, cap, "%s/adaptivellm", xdg);
	else
		n = snprintf(ret, cap, "/tmp/adaptivellm-%u", (unsigned)getuid());
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int allm_shm_cache_dir(char *ret, size_t cap)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;
	if (absolute(xdg))
		n = snprintf(ret, cap, "%s/adaptivellm", xdg);
	else if (absolute(home))
		n = snprintf(ret, cap, "%s/.cache/adaptivellm", home);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int allm_shm_engine_uid(uid_t *ret, char *err, size_t errlen)
{
	const char *s = getenv("ALLM_ENGINE_UID");
	if (!s || !*s) {
		*ret = getuid();
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || *s == '-' || v >= (unsigned long)(uid_t)-1)
		return allm_errtext(err, errlen, -EINVAL, "ALLM_ENGINE_UID='%s' is not a uid", s);
	*ret = (uid_t)v;
	return 0;
}

int allm_shm_check_dir(const char *dir, uid_t owner, char *err, size_t errlen)
{
	struct stat st;
	/* lstat: a symlink is refused as such, never followed to a directory that
	 * happens to pass */
	if (lstat(dir, &st))
		return errno == ENOENT ? -ENOENT
				       : allm_errtext(err, errlen, -EPERM, "cannot check %s: %s", dir, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return allm_errtext(err, errlen, -EPERM,
			    "refusing the runtime directory %s: it is a symlink (someone else may have made it)",
			    dir);
	if (!S_ISDIR(st.st_mode))
		return allm_errtext(err, errlen, -EPERM, "refusing the runtime directory %s: not a directory", dir);
	if (st.st_uid != owner)
		return allm_errtext(err, errlen, -EPERM,
			    "refusing the runtime directory %s: it belongs to uid %u, not to uid %u%s", dir,
			    (unsigned)st.st_uid, (unsigned)owner,
			    owner == getuid() ? " (you); an engine of another user runs with --allow-uid and "
						"ALLM_ENGINE_UID names it"
					      : " (ALLM_ENGINE_UID)");
	/* write access is what lets another user plant a socket; search access alone
	 * is what an --allow-uid engine grants (0711) */
	if (st.st_mode & 022)
		return allm_errtext(err, errlen, -EPERM,
			    "refusing the runtime directory %s: mode %04o lets other users create files in it",
			    dir, (unsigned)(st.st_mode & 07777));
	return 0;
}

int allm_shm_check_socket_file(const char *path, uid_t owner, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st))
		return errno == ENOENT ? -ENOENT
				       : allm_errtext(err, errlen, -EPERM, "cannot check %s: %s", path, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return allm_errtext(err, errlen, -EPERM, "refusing %s: not a socket", path);
	if (st.st_uid != owner)
		return allm_errtext(err, errlen, -EPERM, "refusing %s: it belongs to uid %u, not to uid %u", path,
			    (unsigned)st.st_uid, (unsigned)owner);
	return 0;
}

int allm_shm_peer_uid(int fd, uid_t *ret)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return -errno;
	*ret = cr.uid;
	return 0;
}
