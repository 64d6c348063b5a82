#include "vdir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct allm_vfile *find(const struct allm_vdir *d, const char *name)
{
	for (size_t i = 0; i < d->n_files; i++)
		if (!strcmp(d->files[i].name, name))
			return &d->files[i];
	return NULL;
}

const char *allm_vdir_join(const struct allm_vdir *d, const char *name, char *buf, size_t len)
{
	if (!d->path || !d->path[0])
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "%s/%s", d->path, name);
	return buf;
}

static int disk_path(const struct allm_vdir *d, const char *name, char *buf, size_t len)
{
	int n = d->path && d->path[0] ? snprintf(buf, len, "%s/%s", d->path, name)
				      : snprintf(buf, len, "%s", name);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int allm_vdir_access(const struct allm_vdir *d, const char *name)
{
	char path[4096];
	int r;
	if (allm_vdir_embedded(d))
		return find(d, name) ? 0 : -ENOENT;
	if ((r = disk_path(d, name, path, sizeof(path))))
		return r;
	return access(path, F_OK) ? -errno : 0;
}

/* The bytes of f in a memfd sealed against writes and resizes: an fd that
 * behaves like a read-only regular file of exactly f->size bytes. */
static int open_embedded(const struct allm_vfile *f)
{
	int fd = memfd_create(f->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	const char *p = f->data;
	size_t left = f->size;
	while (left > 0) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;
			close(fd);
			return -e;
		}
		p += w;
		left -= (size_t)w;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

int allm_vdir_open(const struct allm_vdir *d, const char *name)
{
	char path[4096];
	int r;
	if (allm_vdir_embedded(d)) {
		const struct allm_vfile *f = find(d, name);
		return f ? open_embedded(f) : -ENOENT;
	}
	if ((r = disk_path(d, name, path, sizeof(path))))
		return r;
	r = open(path, O_RDONLY | O_CLOEXEC);
	return r < 0 ? -errno : r;
}

int allm_vdir_read(const struct allm_vdir *d, const char *name, size_t max, char **ret,
		   size_t *ret_len)
{
	char *buf = NULL;
	size_t n = 0;
	int r = 0;
	if (allm_vdir_embedded(d)) {
		const struct allm_vfile *f = find(d, name);
		if (!f)
			return -ENOENT;
		if (f->size > max)
			return -EFBIG;
		if (!(buf = allm_malloc(f->size + 1)))
			return -ENOMEM;
		memcpy(buf, f->data, f->size);
		n = f->size;
	} else {
		struct stat st;
		int fd = allm_vdir_open(d, name);
		if (fd < 0)
			return fd;
		if (fstat(fd, &st)) {
			r = -errno;
		} else if (!S_ISREG(st.st_mode)) {
			r = -EINVAL;
		} else if ((uint64_t)st.st_size > max) {
			r = -EFBIG;
		} else if (!(buf = allm_malloc((size_t)st.st_size + 1))) {
			r = -ENOMEM;
		} else {
			for (n = 0; n < (size_t)st.st_size;) {
				ssize_t got = pread(fd, buf + n, (size_t)st.st_size - n, (off_t)n);
				if (got < 0 && errno == EINTR)
					continue;
				if (got <= 0) {
					r = got < 0 ? -errno : -EIO; /* shrank under us */
					break;
				}
				n += (size_t)got;
			}
		}
		close(fd);
		if (r) {
			allm_free(buf);
			return r;
		}
	}
	buf[n] = 0;
	*ret = buf;
	*ret_len = n;
	return 0;
}
