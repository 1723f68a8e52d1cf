/*
 * sql_pictures.c
 *		Pictures of matrices: heatmap_svg() (a standalone SVG document of
 *		any matrix, e.g. attention weights) and positional_encoding() (the
 *		paper's sinusoids, the picture every explainer shows).
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "model.h"
#include "pg_arrays.h"
#include "xml_text.h"

/* cells of at most this many rows and columns: a picture, not a dump */
#define MAX_SIDE 1000
#define CELL 22
#define LABEL_WIDTH 140

PG_FUNCTION_INFO_V1(positional_encoding);
Datum
positional_encoding(PG_FUNCTION_ARGS)
{
	int32		positions = PG_GETARG_INT32(0);
	int32		d = PG_GETARG_INT32(1);
	ArrayType  *out;

	if (positions < 1 || positions > 65536)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("positions must be between 1 and 65536"),
				 errdetail("It is %d.", positions)));
	if (d < 2 || d > 65536 || d % 2 != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("d_model must be an even number between 2 and 65536"),
				 errdetail("It is %d.", d)));
	out = NewFloat4Array(positions, d);
	tf_sinusoidal_positions(positions, d, TF_POS_SINUSOIDAL_INTERLEAVED, 0, (float *) ARR_DATA_PTR(out));
	PG_RETURN_ARRAYTYPE_P(out);
}

/* s as XML character data (tf_xml_escape), appended to b. */
static void
append_xml(StringInfo b, const char *s)
{
	size_t		len = strlen(s);

	if (len > (MaxAllocSize - 1 - (size_t) b->len) / 6)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the picture would be too large"),
				 errdetail("Its labels and title take more than 1 GB once escaped.")));
	enlargeStringInfo(b, (int) TF_XML_ESCAPED_MAX(len));
	b->len += (int) tf_xml_escape(b->data + b->len, s, len);
}

/* Labels of a text[] argument: n strings in UTF-8, or NULL if the argument is NULL. */
static char **
Labels(FunctionCallInfo fcinfo, int arg, int n, const char *name)
{
	ArrayType  *a;
	Datum	   *d;
	bool	   *nulls;
	int			count;
	char	  **out;

	if (PG_ARGISNULL(arg))
		return NULL;
	a = PG_GETARG_ARRAYTYPE_P(arg);
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s must be a 1-D array", name)));
	deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &d, &nulls, &count);
	if (count != n)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s has %d labels for %d %s", name, count, n,
						strcmp(name, "row_labels") == 0 ? "rows" : "columns")));
	out = palloc(sizeof(char *) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		text	   *t = nulls[i] ? NULL : DatumGetTextPP(d[i]);

		out[i] = t ? pg_server_to_any(text_to_cstring(t), strlen(text_to_cstring(t)), PG_UTF8) : "";
	}
	return out;
}

/* The colour of v in [lo, hi]: white to dark blue, darker for more. */
static void
append_colour(StringInfo b, double v, double lo, double hi)
{
	double		t = hi > lo ? (v - lo) / (hi - lo) : 1.0;
	int			r = (int) lrint(255 - t * (255 - 8));
	int			g = (int) lrint(255 - t * (255 - 48));
	int			bl = (int) lrint(255 - t * (255 - 107));

	appendStringInfo(b, "rgb(%d,%d,%d)", r, g, bl);
}

/*
 * An SVG document (UTF-8) as text of the database.  In a UTF8 or SQL_ASCII
 * database, as it is; in any other, every non-ASCII character becomes an
 * XML character reference (&#x2581;), so that a picture of any text fits
 * every encoding and still shows the same characters.
 */
static text *
SvgInDatabaseEncoding(const char *svg, int len)
{
	StringInfoData out;
	int			i = 0;

	if (GetDatabaseEncoding() == PG_UTF8 || GetDatabaseEncoding() == PG_SQL_ASCII)
		return cstring_to_text_with_len(svg, len);
	initStringInfo(&out);
	while (i < len)
	{
		unsigned char c = (unsigned char) svg[i];
		int			n = pg_utf_mblen((const unsigned char *) svg + i);

		if (c < 0x80 || n > len - i || !pg_utf8_islegal((const unsigned char *) svg + i, n))
		{
			/* ASCII, or (never from tf_xml_escape) a broken sequence: as is, then the conversion objects */
			appendStringInfoChar(&out, (char) c);
			i++;
			continue;
		}
		appendStringInfo(&out, "&#x%X;", (unsigned int) utf8_to_unicode((const unsigned char *) svg + i));
		i += n;
	}
	return cstring_to_text_with_len(out.data, out.len);
}

PG_FUNCTION_INFO_V1(heatmap_svg);
Datum
heatmap_svg(PG_FUNCTION_ARGS)
{
	Matrix		m;
	char	  **rl;
	char	  **cl;
	char	   *title = NULL;
	StringInfoData b;
	double		lo = INFINITY,
				hi = -INFINITY;
	int			top = 40,
				left = 10;
	int			width,
				height;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	m = ArrayGetMatrix(PG_GETARG_ARRAYTYPE_P(0), "weights");
	if (m.rows > MAX_SIDE || m.cols > MAX_SIDE)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a heatmap may have at most %d rows and %d columns", MAX_SIDE, MAX_SIDE),
				 errdetail("The matrix is %d x %d.", m.rows, m.cols)));
	rl = Labels(fcinfo, 1, m.rows, "row_labels");
	cl = Labels(fcinfo, 2, m.cols, "col_labels");
	if (!PG_ARGISNULL(3))
	{
		char	   *t = text_to_cstring(PG_GETARG_TEXT_PP(3));

		title = pg_server_to_any(t, strlen(t), PG_UTF8);
	}
	for (int i = 0; i < m.rows * m.cols; i++)
	{
		lo = Min(lo, m.data[i]);
		hi = Max(hi, m.data[i]);
	}
	if (title)
		top += 20;
	if (cl)
		top += 100;
	if (rl)
		left += LABEL_WIDTH;
	width = left + m.cols * CELL + 100;
	height = Max(top + m.rows * CELL + 20, top + 160);

	initStringInfo(&b);
	appendStringInfo(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
					 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
					 "<style>text { font-family: sans-serif; font-size: 12px; }</style>\n"
					 "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
					 width, height, width, height);
	if (title)
	{
		appendStringInfoString(&b, "<title>");
		append_xml(&b, title);
		appendStringInfo(&b, "</title>\n<text x=\"%d\" y=\"20\" font-size=\"14\">", left);
		append_xml(&b, title);
		appendStringInfoString(&b, "</text>\n");
	}
	/* column labels, slanted, above their columns */
	for (int j = 0; cl && j < m.cols; j++)
	{
		int			x = left + j * CELL + CELL / 2;

		appendStringInfo(&b, "<text class=\"col\" x=\"%d\" y=\"%d\" transform=\"rotate(-60 %d %d)\">",
						 x, top - 6, x, top - 6);
		append_xml(&b, cl[j]);
		appendStringInfoString(&b, "</text>\n");
	}
	for (int i = 0; i < m.rows; i++)
	{
		if (rl)
		{
			appendStringInfo(&b, "<text class=\"row\" x=\"%d\" y=\"%d\" text-anchor=\"end\" direction=\"ltr\" unicode-bidi=\"embed\">",
							 left - 6, top + i * CELL + CELL / 2 + 4);
			append_xml(&b, rl[i]);
			appendStringInfoString(&b, "</text>\n");
		}
		for (int j = 0; j < m.cols; j++)
		{
			double		v = m.data[(size_t) i * m.cols + j];

			appendStringInfo(&b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"",
							 left + j * CELL, top + i * CELL, CELL, CELL);
			append_colour(&b, v, lo, hi);
			appendStringInfo(&b, "\"><title>");
			if (rl)
				append_xml(&b, rl[i]);
			else
				appendStringInfo(&b, "row %d", i + 1);
			appendStringInfoString(&b, " / ");
			if (cl)
				append_xml(&b, cl[j]);
			else
				appendStringInfo(&b, "column %d", j + 1);
			appendStringInfo(&b, ": %.6g</title></rect>\n", v);
		}
	}
	/* the legend: the scale from the smallest value to the largest */
	{
		int			x = left + m.cols * CELL + 20;

		appendStringInfoString(&b, "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">"
							   "<stop offset=\"0\" stop-color=\"rgb(255,255,255)\"/>"
							   "<stop offset=\"1\" stop-color=\"rgb(8,48,107)\"/></linearGradient></defs>\n");
		appendStringInfo(&b, "<rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"16\" height=\"120\" fill=\"url(#scale)\" stroke=\"#888\"/>\n",
						 x, top);
		appendStringInfo(&b, "<text x=\"%d\" y=\"%d\">%.3g</text>\n", x + 20, top + 10, hi);
		appendStringInfo(&b, "<text x=\"%d\" y=\"%d\">%.3g</text>\n", x + 20, top + 120, lo);
	}
	appendStringInfoString(&b, "</svg>\n");
	PG_RETURN_TEXT_P(SvgInDatabaseEncoding(b.data, b.len));
}
