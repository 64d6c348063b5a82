/* Safe file creation (safe-file.h). The threat: another local user who can
 * create names in a directory the engine writes to — root's engine saving its
 * profile through a predictable "profile.json.tmp.<pid>" followed a symlink
 * planted there and overwrote any file on the host. So: directories are checked
 * after they are opened, names are random and made with O_EXCL, nothing follows
 * a symlink, and every step is relative to the open directory. */
#include "safe-file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* Random names tried before giving up (each collision is someone's file). */
#define SAFE_NAME_TRIES 16

int allm_dir_check_private(const struct stat *st, char *why, size_t why_len)
{
	mode_t m = st->st_mode & 07777;
	if (st->st_uid != geteuid() && st->st_uid != 0)
		snprintf(why, why_len, "it belongs to uid %u", (unsigned)st->st_uid);
	else if (m & S_IWOTH)
		snprintf(why, why_len, "mode %04o lets other users create and replace files in it", (unsigned)m);
	else if ((m & S_IWGRP) && st->st_gid != getegid())
		snprintf(why, why_len, "mode %04o lets group %u create and replace files in it", (unsigned)m,
			 (unsigned)st->st_gid);
	else
		return 0;
	return -EPERM;
}

int allm_dir_open_private(const char *path, const char *what, int *ret_fd, struct allm_err *err)
{
	char why[160];
	struct stat st;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		/* O_NOFOLLOW on a symlink: ELOOP, or ENOTDIR with O_DIRECTORY */
		if ((e == ELOOP || e == ENOTDIR) && !lstat(path, &st) && S_ISLNK(st.st_mode))
			return allm_err_set(err, -ELOOP, "refusing %s %s: it is a symlink", what, path);
		return allm_err_set(err, -e, "%s %s: %s", what, path, strerror(e));
	}
	if (fstat(fd, &st)) {
		int e = errno;
		close(fd);
		return allm_err_set(err, -e, "%s %s: %s", what, path, strerror(e));
	}
	int r = allm_dir_check_private(&st, why, sizeof(why));
	if (r) {
		close(fd);
		return allm_err_set(err, r, "refusing %s %s: %s", what, path, why);
	}
	*ret_fd = fd;
	return 0;
}

int allm_path_split(const char *path, char *dir, size_t dir_len, const char **ret_name)
{
	size_t n = strlen(path);
	if (n == 0 || path[n - 1] == '/')
		return -EINVAL;
	const char *slash = strrchr(path, '/');
	if (!slash) {
		if (dir_len < 2)
			return -ENAMETOOLONG;
		strcpy(dir, ".");
		*ret_name = path;
		return 0;
	}
	size_t d = slash == path ? 1 : (size_t)(slash - path); /* "/name": the root */
	if (d >= dir_len)
		return -ENAMETOOLONG;
	memcpy(dir, path, d);
	dir[d] = 0;
	*ret_name = slash + 1;
	return 0;
}

/* ".NAME.<16 random hex>.tmp" in ret (a name no one can guess before it exists). */
static int random_name(const char *name, char *ret, size_t len)
{
	uint64_t r;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -EIO;
	int n = snprintf(ret, len, ".%s.%016llx.tmp", name, (unsigned long long)r);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t k = write(fd, p, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* A complete, synced file under a fresh random name in dirfd (tmp). O_TMPFILE
 * first: the file has no name at all until its bytes are in, then linkat gives
 * it one (linkat never replaces: a name someone planted meanwhile is EEXIST, and
 * another random name is tried). */
static int make_complete(int dirfd, const char *name, mode_t mode, const void *data, size_t len, char *tmp,
			 size_t tmp_len)
{
	int fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
	int r;
	if (fd >= 0) {
		char proc[64];
		if ((r = write_all(fd, data, len)) || (fsync(fd) && (r = -errno))) {
			close(fd);
			return r;
		}
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		for (int i = 0; i < SAFE_NAME_TRIES; i++) {
			if ((r = random_name(name, tmp, tmp_len)))
				break;
			if (linkat(AT_FDCWD, proc, dirfd, tmp, AT_SYMLINK_FOLLOW) == 0) {
				close(fd);
				return 0;
			}
			r = -errno;
			if (r != -EEXIST)
				break;
		}
		close(fd);
		if (r != -ENOENT) /* no /proc: a named file instead */
			return r;
	} else if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
		return -errno;
	}
	/* no O_TMPFILE here: a random name, made by us (O_EXCL) and never a link */
	for (int i = 0; i < SAFE_NAME_TRIES; i++) {
		if ((r = random_name(name, tmp, tmp_len)))
			return r;
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0)
			break;
		if (errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	if ((r = write_all(fd, data, len)) || (fsync(fd) && (r = -errno))) {
		close(fd);
		unlinkat(dirfd, tmp, 0);
		return r;
	}
	close(fd);
	return 0;
}

int allm_file_replace(int dirfd, const char *name, mode_t mode, const void *data, size_t len,
		      struct allm_err *err)
{
	char tmp[320];
	if (!*name || strchr(name, '/'))
		return allm_err_set(err, -EINVAL, "bad file name '%s'", name);
	int r = make_complete(dirfd, name, mode, data, len, tmp, sizeof(tmp));
	if (r)
		return allm_err_set(err, r, "cannot write a new %s: %s", name, strerror(-r));
	if (renameat(dirfd, tmp, dirfd, name)) {
		r = -errno;
		unlinkat(dirfd, tmp, 0);
		return allm_err_set(err, r, "cannot rename the new %s into place: %s", name, strerror(-r));
	}
	fsync(dirfd); /* the rename itself survives a crash */
	return 0;
}

int allm_file_unnamed(int dirfd, int flags, bool no_tmpfile, bool *ret_named)
{
	struct stat st;
	char tmp[64];
	int fd = no_tmpfile ? -1 : openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC | flags, 0600);
	*ret_named = false;
	if (fd >= 0)
		return fd;
	if (!no_tmpfile && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return -errno;
	if (fstat(dirfd, &st))
		return -errno;
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
		return -EPERM;
	for (int i = 0; i < SAFE_NAME_TRIES; i++) {
		int r = random_name("allm-kv", tmp, sizeof(tmp));
		if (r)
			return r;
		fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | flags, 0600);
		if (fd >= 0) {
			unlinkat(dirfd, tmp, 0);
			*ret_named = true;
			return fd;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int allm_file_open_read(int dirfd, const char *name, int *ret_fd, struct allm_err *err)
{
	struct stat st;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			return allm_err_set(err, -ELOOP, "refusing %s: it is a symlink", name);
		return allm_err_set(err, -e, "%s: %s", name, e == ENOENT ? "no such file" : strerror(e));
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return allm_err_set(err, -EINVAL, "refusing %s: not a regular file", name);
	}
	*ret_fd = fd;
	return 0;
}

int allm_mkdir_p(const char *dir, unsigned mode)
{
	char p[4096];
	if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != 0)
			continue;
		char c = *s;
		*s = 0;
		int r = mkdir(p, (mode_t)mode);
		*s = c;
		if (r < 0 && errno != EEXIST)
			return -errno;
		if (c == 0)
			return 0;
	}
}
