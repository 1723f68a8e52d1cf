/*
 * test_wordpiece.c
 *		Unit tests of src/core/wordpiece.c outside the server: the cases of
 *		transformers' tests/models/bert/test_tokenization_bert.py
 *		(BasicTokenizer and WordpieceTokenizer), special tokens, final
 *		sigma, limits, decoding, random bytes, and a 16 MB text.
 *
 * gcc -std=gnu11 -O2 -Wall -Wextra -Isrc/core -o test/unit/test_wordpiece \
 *     test/unit/test_wordpiece.c src/core/wordpiece.c src/core/spm_model.c src/core/protobuf.c -licuuc
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wordpiece.h"

static int	ntest = 0;
static int	nfailed = 0;

/* every allocation, freed at the end (LeakSanitizer runs this under make sanitize) */
static void **allocs;
static size_t nallocs,
			cap_allocs;

static void *
test_alloc(void *ctx, size_t n)
{
	void	   *p = calloc(1, n ? n : 1);

	(void) ctx;
	if (nallocs == cap_allocs)
	{
		cap_allocs = cap_allocs ? 2 * cap_allocs : 1024;
		allocs = realloc(allocs, sizeof(void *) * cap_allocs);
	}
	if (p == NULL || allocs == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	allocs[nallocs++] = p;
	return p;
}

static void
free_all(void)
{
	for (size_t i = 0; i < nallocs; i++)
		free(allocs[i]);
	free(allocs);
}

static const SpmAlloc A = {test_alloc, NULL};

static TfWordPiece *
load(const char *vocab, bool lowercase, int strip, bool chinese)
{
	TfWordPieceOptions o;
	char		err[256];
	TfWordPiece *wp;

	memset(&o, 0, sizeof(o));
	o.clean_text = true;
	o.handle_chinese_chars = chinese;
	o.lowercase = lowercase;
	o.strip_accents = strip;
	o.max_input_chars_per_word = 100;
	strcpy(o.unk_token, "[UNK]");
	strcpy(o.prefix, "##");
	wp = tf_wordpiece_load(vocab, strlen(vocab), &o, &A, err, sizeof(err));
	if (wp == NULL)
	{
		fprintf(stderr, "load: %s\n", err);
		exit(2);
	}
	return wp;
}

/* the tokens of text, space-separated, against want */
static void
expect(const TfWordPiece *wp, const char *text, const char *want, const char *what)
{
	SpmEncoding enc;
	char		got[4096];
	size_t		len = 0;

	ntest++;
	if (!tf_wordpiece_encode(wp, text, strlen(text), &A, &enc))
	{
		printf("FAIL %s: encode failed\n", what);
		nfailed++;
		return;
	}
	got[0] = '\0';
	for (int i = 0; i < enc.ntokens && len + enc.tokens[i].len + 2 < sizeof(got); i++)
	{
		if (i)
			got[len++] = ' ';
		memcpy(got + len, enc.tokens[i].str, enc.tokens[i].len);
		len += enc.tokens[i].len;
		got[len] = '\0';
	}
	if (strcmp(got, want) != 0)
	{
		printf("FAIL %s: got [%s], want [%s]\n", what, got, want);
		nfailed++;
	}
	else
		printf("ok %s\n", what);
}

/* a vocabulary of whole words for the basic tokenizer's cases */
static const char *BASIC =
"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nHeLLo\n!\nhow\nare\nyou\n?\nAre\nyoU\nhällo\nhallo\nHäLLo\nh\n##e\n##l\n##o\n"
"ah\n\u535A\n\u63A8\nzz\nοδος\nοδοσ\nΟΔΟΣ\ni\nistanbul\n.\ncafe\ncafé\n[\n]\n";

int
main(void)
{
	TfWordPiece *lower = load(BASIC, true, -1, true);
	TfWordPiece *cased = load(BASIC, false, -1, true);
	TfWordPiece *lower_keep = load(BASIC, true, 0, true);
	TfWordPiece *cased_strip = load(BASIC, false, 1, true);
	TfWordPiece *wordpiece;

	/* test_basic_tokenizer_lower */
	expect(lower, " \tHeLLo!how  \n Are yoU?  ", "hello ! how are you ?", "basic lower");
	expect(lower, "H\u00E9llo", "hello", "basic lower strips the accent");
	/* test_basic_tokenizer_lower_strip_accents_false */
	expect(lower_keep, " \tH\u00E4LLo!how  \n Are yoU?  ", "hällo ! how are you ?", "lower, strip_accents false");
	/* test_basic_tokenizer_lower_strip_accents_true/default */
	expect(lower, " \tH\u00E4LLo!how  \n Are yoU?  ", "hallo ! how are you ?", "lower, strip_accents default");
	/* test_basic_tokenizer_no_lower */
	expect(cased, " \tHeLLo!how  \n Are yoU?  ", "HeLLo ! how Are yoU ?", "no lower");
	/* test_basic_tokenizer_no_lower_strip_accents_false/true */
	expect(cased, " \tH\u00E4LLo!how  \n Are yoU?  ", "HäLLo ! how Are yoU ?", "no lower, strip_accents false");
	expect(cased_strip, " \tH\u00E4LLo!how  \n Are yoU?  ", "[UNK] ! how Are yoU ?", "no lower, strip_accents true");
	/* test_chinese */
	expect(lower, "ah\u535A\u63A8zz", "ah \u535A \u63A8 zz", "chinese characters split");
	/* bert.rs's ranges: extension B is, U+2B820..2B91F is not (0x2B920 in the Rust source) */
	expect(lower, "ah\U00020000zz", "ah [UNK] zz", "CJK extension B split");
	expect(lower, "ah\U0002B820zz", "[UNK]", "U+2B820 not split, as the Rust library");
	expect(lower, "ah\U0002B920zz", "ah [UNK] zz", "U+2B920 split");
	/* controls go, whitespace of any kind splits (clean_text) */
	expect(lower, "hello\x01\x7f you\u00A0are\u2003how\u200B", "hello you are how", "controls and spaces");
	expect(lower, "\xff hello", "hello", "an invalid byte is U+FFFD, which clean_text drops");
	/* char::to_lowercase, each character alone: no final sigma; U+0130 is I + U+0307 once accents go */
	expect(lower, "ΟΔΟΣ", "οδοσ", "no final sigma (as the Rust library, unlike JavaScript's toLowerCase)");
	expect(cased, "ΟΔΟΣ", "ΟΔΟΣ", "no lower: as is");
	expect(lower, "\u0130STANBUL", "istanbul", "dotted capital I");
	/* NFD composes nothing back: café in NFC and NFD */
	expect(lower_keep, "caf\u00E9 cafe\u0301", "café [UNK]", "lower keeps accents but not a decomposed one's form");
	/* special tokens are split off the raw text first */
	expect(lower, "hello[MASK]you", "hello [ [UNK] ] you", "no specials declared: [ and ] are punctuation, mask a word");
	{
		const char *sp[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

		ntest++;
		if (tf_wordpiece_set_specials(lower, 5, sp, &A) != NULL)
		{
			printf("FAIL set specials\n");
			nfailed++;
		}
		expect(lower, "hello[MASK]you", "hello [MASK] you", "[MASK] inside a word");
		expect(lower, "[CLS] hello [SEP]", "[CLS] hello [SEP]", "specials in the text");
		expect(lower, "[cls] [MASK][MASK]", "[ [UNK] ] [MASK] [MASK]", "specials are case-sensitive");
	}
	expect(lower, "", "", "empty");
	expect(lower, " \t\n ", "", "only spaces");

	/* test_wordpiece_tokenizer */
	wordpiece = load("[UNK]\n[CLS]\n[SEP]\nwant\n##want\n##ed\nwa\nun\nrunn\n##ing\n,\nlow\nlowest\n", true, -1, true);
	expect(wordpiece, "", "", "wordpiece empty");
	expect(wordpiece, "unwanted running", "un ##want ##ed runn ##ing", "wordpiece greedy longest match");
	expect(wordpiece, "unwantedX running", "[UNK] runn ##ing", "wordpiece unknown word");
	expect(wordpiece, "lowest, low", "lowest , low", "wordpiece whole words");
	{
		char		word[202];

		memset(word, 'a', 200);
		word[200] = '\0';
		expect(wordpiece, word, "[UNK]", "more than max_input_chars_per_word");
	}

	/* ids: a repeated line keeps its last id (load_vocab's dict) */
	{
		TfWordPiece *dup = load("[UNK]\nx\ny\nx\n", true, -1, true);

		ntest++;
		if (tf_wordpiece_id(dup, "x", 1) != 3 || tf_wordpiece_id(dup, "y", 1) != 2 || dup->ntokens != 4)
		{
			printf("FAIL repeated token: id %d\n", tf_wordpiece_id(dup, "x", 1));
			nfailed++;
		}
	}
	/* defects */
	{
		TfWordPieceOptions o;
		char		err[256];

		memset(&o, 0, sizeof(o));
		strcpy(o.unk_token, "[UNK]");
		strcpy(o.prefix, "##");
		o.max_input_chars_per_word = 100;
		ntest += 3;
		if (tf_wordpiece_load("a\nb\n", 4, &o, &A, err, sizeof(err)) != NULL)
		{
			printf("FAIL no [UNK] accepted\n");
			nfailed++;
		}
		if (tf_wordpiece_load("", 0, &o, &A, err, sizeof(err)) != NULL)
		{
			printf("FAIL empty vocabulary accepted\n");
			nfailed++;
		}
		if (tf_wordpiece_load("[UNK]\n\xc3(\n", 9, &o, &A, err, sizeof(err)) != NULL)
		{
			printf("FAIL invalid UTF-8 accepted\n");
			nfailed++;
		}
	}
	/* decoding: ## joins, clean_up_tokenization */
	{
		int32_t		ids[] = {7, 4, 5, 8, 9, 10, 11};
		size_t		len;
		char	   *s = tf_wordpiece_decode(wordpiece, 7, ids, NULL, &A, &len);

		ntest++;
		if (strcmp(s, "unwanted running, low") != 0)
		{
			printf("FAIL decode: [%s]\n", s);
			nfailed++;
		}
	}
	/* random bytes: never more tokens than input bytes + 1, no crash (ASan in make sanitize) */
	{
		unsigned	seed = 12345;

		for (int r = 0; r < 2000; r++)
		{
			char		buf[64];
			int			n = (int) (rand_r(&seed) % sizeof(buf));
			SpmEncoding enc;

			for (int i = 0; i < n; i++)
				buf[i] = (char) (rand_r(&seed) % 256);
			ntest++;
			if (!tf_wordpiece_encode(lower, buf, (size_t) n, &A, &enc) || enc.ntokens > n + 1)
			{
				printf("FAIL random bytes %d\n", r);
				nfailed++;
			}
		}
	}
	/* a 16 MB-ish text in linear time */
	{
		size_t		n = 4u * 1024 * 1024;
		char	   *big = malloc(n + 1);
		SpmEncoding enc;
		clock_t		t0 = clock();
		double		secs;

		static const char unit[] = "hello you! [MASK] \xc3\xa4 \xe5\x8d\x9a ";

		for (size_t i = 0; i < n; i++)
			big[i] = unit[i % (sizeof(unit) - 1)];
		big[n] = '\0';
		ntest++;
		if (!tf_wordpiece_encode(lower, big, n, &A, &enc) || enc.ntokens < 500000)
		{
			printf("FAIL 4 MB text\n");
			nfailed++;
		}
		secs = (double) (clock() - t0) / CLOCKS_PER_SEC;
		printf("4 MB text: %d tokens in %.2f s\n", enc.ntokens, secs);
		free(big);
	}
	free_all();
	printf("%d/%d wordpiece checks passed\n", ntest - nfailed, ntest);
	return nfailed ? 1 : 0;
}
