/* A directory of files that loaders read: one on disk, or one compiled into the
 * program (the embedded default model). Loaders of configs, tokenizers and
 * safetensors go through it, so an embedded model takes the same code paths as
 * any Hugging Face directory; only where the bytes come from differs. */
#ifndef ALLM_VDIR_H
#define ALLM_VDIR_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One file of an embedded directory. */
struct allm_vfile {
	const char *name; /* file name, no '/' */
	const void *data;
	size_t size;
};

struct allm_vdir {
	/* on disk: the directory ("" = names are paths); embedded: a display name
	 * for messages, e.g. "<embedded>/stories260K" */
	const char *path;
	const struct allm_vfile *files; /* NULL: on disk */
	size_t n_files;
};

/* The directory at path on disk (path is not copied). */
static inline struct allm_vdir allm_vdir_disk(const char *path)
{
	struct allm_vdir d = {path, NULL, 0};
	return d;
}

static inline bool allm_vdir_embedded(const struct allm_vdir *d)
{
	return d->files != NULL;
}

/* "PATH/NAME" (or NAME when path is "") into buf, for messages and for open(2)
 * on disk. Returns buf; -ENAMETOOLONG is reported by the functions below. */
const char *allm_vdir_join(const struct allm_vdir *d, const char *name, char *buf, size_t len);
/* 0 when NAME exists, -ENOENT when not, else -errno. */
int allm_vdir_access(const struct allm_vdir *d, const char *name);
/* Opens NAME read-only and returns its fd (close-on-exec), or -errno. For an
 * embedded file the fd is a sealed memfd holding its bytes, so readers that
 * fstat, pread or io_uring an fd work unchanged. */
int allm_vdir_open(const struct allm_vdir *d, const char *name);
/* Reads NAME whole into a new NUL-terminated buffer (the caller frees it with
 * allm_free); *ret_len excludes the NUL. -EFBIG above max bytes, -ENOENT when
 * absent, else -errno. */
int allm_vdir_read(const struct allm_vdir *d, const char *name, size_t max, char **ret,
		   size_t *ret_len);

#ifdef __cplusplus
}
#endif

#endif
