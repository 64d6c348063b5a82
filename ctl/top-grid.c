/* The in-memory grid allmctl top draws into (see top.h): the drawing code stays
 * pure and testable, and top.c copies the grid to ncurses in one pass. */
#include "top.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int top_grid_init(struct top_grid *g, int rows, int cols)
{
	size_t n;

	if (rows < 1)
		rows = 1;
	if (cols < 1)
		cols = 1;
	n = (size_t)rows * (size_t)cols;
	g->ch = malloc(n * sizeof(*g->ch));
	g->attr = malloc(n);
	if (!g->ch || !g->attr) {
		free(g->ch);
		free(g->attr);
		g->ch = NULL;
		g->attr = NULL;
		g->rows = g->cols = 0;
		return -ENOMEM;
	}
	g->rows = rows;
	g->cols = cols;
	top_grid_clear(g);
	return 0;
}

void top_grid_free(struct top_grid *g)
{
	if (!g)
		return;
	free(g->ch);
	free(g->attr);
	g->ch = NULL;
	g->attr = NULL;
	g->rows = g->cols = 0;
}

void top_grid_clear(struct top_grid *g)
{
	size_t i, n = (size_t)g->rows * (size_t)g->cols;

	for (i = 0; i < n; i++)
		g->ch[i] = ' ';
	memset(g->attr, TOP_A_NORMAL, n);
}

/* Appends code point c as UTF-8 if it fits (with the terminator). */
static size_t top_utf8_put(char *buf, size_t size, size_t at, uint32_t c)
{
	char tmp[4];
	size_t n;

	if (c < 0x80) {
		tmp[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		tmp[0] = (char)(0xc0 | (c >> 6));
		tmp[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		tmp[0] = (char)(0xe0 | (c >> 12));
		tmp[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		tmp[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		tmp[0] = (char)(0xf0 | (c >> 18));
		tmp[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		tmp[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		tmp[3] = (char)(0x80 | (c & 0x3f));
		n = 4;
	}
	if (at + n >= size)
		return at;
	memcpy(buf + at, tmp, n);
	return at + n;
}

void top_grid_row_utf8(const struct top_grid *g, int y, char *buf, size_t size)
{
	size_t at = 0;
	int x, last = -1;

	if (size == 0)
		return;
	buf[0] = '\0';
	if (y < 0 || y >= g->rows)
		return;
	for (x = 0; x < g->cols; x++)
		if (g->ch[(size_t)y * g->cols + x] != ' ')
			last = x;
	for (x = 0; x <= last; x++)
		at = top_utf8_put(buf, size, at, g->ch[(size_t)y * g->cols + x]);
	buf[at] = '\0';
}

void top_grid_putc(struct top_grid *g, int y, int x, int attr, uint32_t c)
{
	size_t i;

	if (y < 0 || y >= g->rows || x < 0 || x >= g->cols)
		return;
	i = (size_t)y * g->cols + x;
	g->ch[i] = c;
	g->attr[i] = (uint8_t)attr;
}

void top_grid_fill(struct top_grid *g, int y, int x, int xend, int attr, uint32_t c)
{
	for (; x < xend; x++)
		top_grid_putc(g, y, x, attr, c);
}

/* Decodes one UTF-8 sequence at *p; malformed bytes decode as U+FFFD, one byte each,
 * so that hostile strings from the engine cannot desynchronise the rest. */
static uint32_t top_utf8_next(const unsigned char **p)
{
	const unsigned char *s = *p;
	uint32_t c;
	int n, i;

	if (s[0] < 0x80) {
		*p = s + 1;
		return s[0];
	}
	if ((s[0] & 0xe0) == 0xc0) {
		c = s[0] & 0x1f;
		n = 1;
	} else if ((s[0] & 0xf0) == 0xe0) {
		c = s[0] & 0x0f;
		n = 2;
	} else if ((s[0] & 0xf8) == 0xf0) {
		c = s[0] & 0x07;
		n = 3;
	} else {
		*p = s + 1;
		return 0xfffd;
	}
	for (i = 1; i <= n; i++) {
		if ((s[i] & 0xc0) != 0x80) {
			*p = s + 1;
			return 0xfffd;
		}
		c = (c << 6) | (s[i] & 0x3f);
	}
	*p = s + n + 1;
	return c;
}

int top_grid_put(struct top_grid *g, int y, int x, int xend, int attr, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (xend > g->cols)
		xend = g->cols;
	while (*p && x < xend) {
		uint32_t c = top_utf8_next(&p);
		/* Only code points known to take one column keep the layout aligned:
		 * controls would move the cursor, and wide or combining characters
		 * (from U+0300 on, roughly) take two or zero columns. */
		if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c >= 0x300 ||
		    (g->ascii_only && c >= 0x80))
			c = '?';
		top_grid_putc(g, y, x, attr, c);
		x++;
	}
	return x;
}

int top_grid_putf(struct top_grid *g, int y, int x, int xend, int attr, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return top_grid_put(g, y, x, xend, attr, buf);
}
