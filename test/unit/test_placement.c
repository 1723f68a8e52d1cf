/*
 * test_placement.c
 *		Word alignment from cross-attention and anchor placement
 *		(src/core/placement.c) on hand-made alignments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

static int	passed = 0;
static int	failed = 0;

static void
check(int cond, const char *what)
{
	if (cond)
		printf("ok %d - %s\n", ++passed + failed, what);
	else
	{
		failed++;
		printf("not ok %d - %s\n", passed + failed, what);
	}
}

static void
check_place(int ntw, const int *best_src, int nsw, const int *best_tgt, int n, const TfPlaceIn *in,
			const int *want, const char *what)
{
	TfPlaceOut out[16];
	int			ok = 1;

	int			scratch[64];

	tf_place_anchors(ntw, best_src, nsw, best_tgt, n, in, out, scratch);
	for (int i = 0; i < n; i++)
		if (out[i].t0 != want[2 * i] || out[i].t1 != want[2 * i + 1])
		{
			fprintf(stderr, "  %s: anchor %d at [%d,%d), want [%d,%d)\n", what, i, out[i].t0, out[i].t1,
					want[2 * i], want[2 * i + 1]);
			ok = 0;
		}
	check(ok, what);
}

int
main(void)
{
	/*
	 * "Ein Mann fährt Fahrrad ." -> "A man is riding a bicycle ." with
	 * pieces: source Ein Mann fähr|t Fahr|rad . </s>; target A man is
	 * riding a bi|cycle . </s>
	 */
	{
		int			sword[] = {0, 1, 2, 2, 3, 3, 4, -1};
		int			tword[] = {0, 1, 2, 3, 4, 5, 5, 6, -1};
		float		cross[9 * 8] = {0};
		float		scratch[7 * 5];
		int			best_src[7],
					best_tgt[5];
		/* target piece -> the source piece it looks at most */
		int			look[9] = {0, 1, 2, 3, 5, 4, 5, 6, 7};

		for (int t = 0; t < 9; t++)
			for (int s = 0; s < 8; s++)
				cross[t * 8 + s] = s == look[t] ? (t == 4 ? 0.5f : 0.7f) : (t == 4 ? 0.5f : 0.3f) / 7;
		tf_align_words(cross, 9, 8, tword, 7, sword, 5, scratch, best_src, best_tgt);
		check(best_src[0] == 0 && best_src[1] == 1 && best_src[2] == 2 && best_src[3] == 2 &&
			  best_src[4] == 3 && best_src[5] == 3 && best_src[6] == 4, "best source word of each target word");
		check(best_tgt[0] == 0 && best_tgt[1] == 1 && best_tgt[3] == 5 && best_tgt[4] == 6,
			  "best target word of each source word (the mean over pieces: bi|cycle beats a)");

		/* <b>Fahrrad</b> around source word 3 */
		{
			TfPlaceIn	in[] = {{-1, false, 3, 4}};
			int			want[] = {4, 6};

			check_place(7, best_src, 5, best_tgt, 1, in, want, "an element goes around the target words aligned to its words");
		}
		/* a point before word 3 (after "fährt"), and one at the start and at the end */
		{
			TfPlaceIn	in[] = {{-1, true, 0, 0}, {-1, true, 3, 3}, {-1, true, 5, 5}};
			int			want[] = {0, 0, 4, 4, 7, 7};

			check_place(7, best_src, 5, best_tgt, 3, in, want, "points go after the words aligned to the word before them");
		}
		/* a child stays in its parent; siblings in order */
		{
			TfPlaceIn	in[] = {{-1, false, 1, 3}, {0, false, 3, 4}, {0, true, 2, 2}, {-1, false, 0, 1}};
			int			want[] = {1, 4, 4, 4, 4, 4, 4, 4};

			check_place(7, best_src, 5, best_tgt, 4, in, want, "a child is clamped into its parent, a later sibling after the earlier");
		}
	}

	/* reordering: a source word no target word chose takes its own best target */
	{
		int			best_src[] = {0, 0, 2};
		int			best_tgt[] = {0, 2, 2};
		TfPlaceIn	in[] = {{-1, false, 1, 2}};
		int			want[] = {2, 3};

		check_place(3, best_src, 3, best_tgt, 1, in, want, "an element whose words no target word chose: their best targets");
	}
	/* nothing aligned at all: proportional */
	{
		int			best_src[] = {-1, -1, -1, -1};
		int			best_tgt[] = {-1, -1};
		TfPlaceIn	in[] = {{-1, true, 1, 1}, {-1, false, 0, 1}};
		int			want[] = {2, 2, 2, 2};

		check_place(4, best_src, 2, best_tgt, 2, in, want, "without alignment a point goes as far in as in the source");
	}
	/* out-of-range input is clamped */
	{
		int			best_src[] = {5, -3};
		int			best_tgt[] = {9};
		TfPlaceIn	in[] = {{-1, false, -4, 99}, {0, true, 7, 2}};
		TfPlaceOut	out[2];

		int			scratch[16];

		tf_place_anchors(2, best_src, 1, best_tgt, 2, in, out, scratch);
		check(out[0].t0 >= 0 && out[0].t1 <= 2 && out[0].t0 <= out[0].t1 &&
			  out[1].t0 >= out[0].t0 && out[1].t1 <= out[0].t1, "out-of-range words and alignments are clamped");
	}
	printf("1..%d\n", passed + failed);
	return failed ? 1 : 0;
}
