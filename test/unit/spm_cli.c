/*
 * spm_cli.c
 *		Encode lines from stdin with a SentencePiece model, outside the
 *		server: "ids<TAB>pieces<TAB>decoded" per line, pieces joined by a
 *		space.  For debugging and for comparing with spm_encode.
 *		usage: spm_cli MODEL < lines
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spm.h"

static void *
xalloc(void *ctx, size_t n)
{
	void	   *p = calloc(1, n ? n : 1);

	(void) ctx;
	if (!p)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

static char *
read_file(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	char	   *buf;
	long		n;

	if (!f)
	{
		perror(path);
		exit(2);
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(n > 0 ? (size_t) n : 1);
	if (!buf || fread(buf, 1, (size_t) n, f) != (size_t) n)
	{
		fprintf(stderr, "cannot read %s\n", path);
		exit(2);
	}
	fclose(f);
	*len = (size_t) n;
	return buf;
}

int
main(int argc, char **argv)
{
	SpmAlloc	a = {xalloc, NULL};
	char		err[256];
	size_t		len;
	char	   *data;
	SpmModel   *m;
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		n;

	if (argc != 2)
	{
		fprintf(stderr, "usage: %s MODEL < lines\n", argv[0]);
		return 2;
	}
	data = read_file(argv[1], &len);
	m = spm_load(data, len, &a, err, sizeof(err));
	if (!m)
	{
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	/* memory is not freed: a short-lived tool */
	while ((n = getline(&line, &cap, stdin)) >= 0)
	{
		SpmEncoding enc;
		const char **strs;
		uint32_t   *lens;
		char	   *text;
		size_t		tlen;

		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		if (!spm_encode(m, line, (size_t) n, &a, &enc))
		{
			printf("ERROR\n");
			continue;
		}
		strs = xalloc(NULL, sizeof(char *) * (size_t) (enc.ntokens + 1));
		lens = xalloc(NULL, sizeof(uint32_t) * (size_t) (enc.ntokens + 1));
		for (int i = 0; i < enc.ntokens; i++)
		{
			printf(i ? " %d" : "%d", enc.tokens[i].id);
			strs[i] = m->pieces[enc.tokens[i].id].str;
			lens[i] = m->pieces[enc.tokens[i].id].len;
		}
		printf("\t");
		for (int i = 0; i < enc.ntokens; i++)
			printf(i ? " %.*s" : "%.*s", (int) enc.tokens[i].len, enc.tokens[i].str);
		text = spm_decode_pieces(m, enc.ntokens, strs, lens, &a, &tlen);
		printf("\t%s\n", text ? text : "ERROR");
	}
	return 0;
}
