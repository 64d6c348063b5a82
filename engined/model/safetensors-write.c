/* Writing safetensors files (allm-mkmodel, tests): header JSON in the given order,
 * padded so data starts 8-byte aligned, then the tensors' bytes. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *st_dtype_str(enum allm_dtype dt)
{
	switch (dt) {
	case ALLM_DTYPE_F32: return "F32";
	case ALLM_DTYPE_F16: return "F16";
	case ALLM_DTYPE_BF16: return "BF16";
	default: return NULL;
	}
}

/* write() of exactly len bytes. */
static int st_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Builds the header object, in the given order with "__metadata__" first as the
 * reference writer does, and the byte size of each tensor into nbytes. */
static int st_build_header(const char *path, const struct allm_st_out *tensors, size_t n,
			   const char *const *metadata, size_t n_meta, size_t *nbytes,
			   json_t **ret, struct allm_err *err)
{
	json_t *root = json_object(), *meta = NULL, *e = NULL;
	uint64_t off = 0;
	int r = -ENOMEM;

	if (!root)
		goto oom;
	if (metadata && n_meta > 0) {
		if (!(meta = json_object()) || json_object_set_new(root, "__metadata__", meta) < 0)
			goto oom;
		for (size_t i = 0; i < n_meta; i++) {
			if (!metadata[2 * i] || !metadata[2 * i + 1]) {
				r = allm_err_set(err, -EINVAL, "writing %s: metadata entry %zu is NULL",
						 path, i);
				goto fail;
			}
			if (json_object_set_new(meta, metadata[2 * i],
						json_string(metadata[2 * i + 1])) < 0)
				goto oom;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct allm_st_out *t = &tensors[i];
		const char *dt = st_dtype_str(t->dtype);
		size_t numel = 1;
		json_t *shape;

		if (!t->name || !dt || t->n_dims < 0 || t->n_dims > ALLM_ST_MAX_DIMS ||
		    strcmp(t->name, "__metadata__") == 0) {
			r = allm_err_set(err, -EINVAL, "writing %s: tensor %zu (%s) has a bad name, dtype or rank",
					 path, i, t->name ? t->name : "NULL");
			goto fail;
		}
		if (json_object_get(root, t->name)) {
			r = allm_err_set(err, -EINVAL, "writing %s: duplicate tensor %s", path, t->name);
			goto fail;
		}
		/* Entry keys in the reference writer's order: dtype, shape, data_offsets. */
		if (!(e = json_object()) || json_object_set_new(e, "dtype", json_string(dt)) < 0 ||
		    !(shape = json_array()) || json_object_set_new(e, "shape", shape) < 0)
			goto oom;
		for (int32_t d = 0; d < t->n_dims; d++) {
			if (t->shape[d] < 0 || !allm_mul_size(numel, (size_t)t->shape[d], &numel)) {
				r = allm_err_set(err, -EINVAL, "writing %s: tensor %s has a bad shape",
						 path, t->name);
				goto fail;
			}
			if (json_array_append_new(shape, json_integer(t->shape[d])) < 0)
				goto oom;
		}
		if (!allm_mul_size(numel, allm_dtype_size(t->dtype), &nbytes[i]) ||
		    (nbytes[i] > 0 && !t->data) || off + nbytes[i] > (uint64_t)INT64_MAX) {
			r = allm_err_set(err, -EINVAL, "writing %s: tensor %s is too large or has no data",
					 path, t->name);
			goto fail;
		}
		if (json_object_set_new(e, "data_offsets",
					json_pack("[I,I]", (json_int_t)off,
						  (json_int_t)(off + nbytes[i]))) < 0)
			goto oom;
		if (json_object_set_new(root, t->name, e) < 0) {
			e = NULL;
			goto oom;
		}
		e = NULL;
		off += nbytes[i];
	}
	*ret = root;
	return 0;
oom:
	r = allm_err_set(err, -ENOMEM, "writing %s: out of memory", path);
fail:
	json_decref(e);
	json_decref(root);
	return r;
}

int allm_st_write_file(const char *path, const struct allm_st_out *tensors, size_t n,
		       const char *const *metadata, size_t n_meta, struct allm_err *err)
{
	json_t *root = NULL;
	char *hdr = NULL;
	size_t *nbytes = NULL, hlen, padded;
	uint8_t lenbuf[8];
	int fd = -1, ret;
	static const char spaces[8] = "        ";

	nbytes = allm_calloc(n ? n : 1, sizeof(*nbytes));
	if (!nbytes)
		return allm_err_set(err, -ENOMEM, "writing %s: out of memory", path);
	ret = st_build_header(path, tensors, n, metadata, n_meta, nbytes, &root, err);
	if (ret < 0)
		goto out;
	hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!hdr) {
		ret = allm_err_set(err, -ENOMEM, "writing %s: out of memory", path);
		goto out;
	}
	/* Spaces after the JSON put the data at an 8-byte boundary (8 + padded). */
	hlen = strlen(hdr);
	padded = (hlen + 7) & ~(size_t)7;
	for (int i = 0; i < 8; i++)
		lenbuf[i] = (uint8_t)((uint64_t)padded >> (8 * i));

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = allm_err_set(err, -errno, "cannot create %s: %s", path, strerror(errno));
		goto out;
	}
	ret = st_write_all(fd, lenbuf, 8);
	if (ret == 0)
		ret = st_write_all(fd, hdr, hlen);
	if (ret == 0)
		ret = st_write_all(fd, spaces, padded - hlen);
	for (size_t i = 0; i < n && ret == 0; i++)
		ret = st_write_all(fd, tensors[i].data, nbytes[i]);
	if (ret == 0 && close(fd) < 0)
		ret = -errno;
	else if (ret < 0)
		close(fd);
	fd = -1;
	if (ret < 0) {
		allm_err_set(err, ret, "writing %s: %s", path, strerror(-ret));
		/* A half-written file would fail to open later with a less clear message. */
		unlink(path);
	}
out:
	free(hdr); /* from jansson's allocator */
	json_decref(root);
	allm_free(nbytes);
	return ret;
}
