/*
 * model_import.h
 *		What the files of the import (src/pg/store/import: a model directory
 *		-> rows) share among themselves; not for use outside that folder.
 *		What others call is in model_store.h (StoreModel, CheckModelName,
 *		MarianLanguages) and tokenizer.h (ReadTokenizerDirectory).
 *
 * The files, each calling only those listed before it:
 *
 *	model_dir.c			a directory's files and the JSON in them
 *	language_tokens.c	language tokens; NLLB's and M2M100's tokenizers
 *	encoder_files.c		BERT's and XLM-R's tokenizers, embedding settings
 *	model_rows.c		StoreModel(): an import's checks and rows;
 *						load_model(), drop_model()
 *	model_import.c		import_model(): a directory by its family
 */
#ifndef MODEL_IMPORT_H
#define MODEL_IMPORT_H

#include "postgres.h"

#include "utils/jsonb.h"

#include "model_store.h"

/* model_dir.c */

/* A JSON file's text as jsonb; ERROR naming what unless it is UTF-8 JSON. */
extern Jsonb *ParseJsonText(const char *what, const char *s, Size len);

/* A string value of a JSON object, if it is one of at most 32 bytes; else NULL. */
extern char *JsonStringKey(Jsonb *j, const char *key);

/* Whether dir has file (ERROR if it cannot tell). */
extern bool HasFile(const char *dir, const char *file);

/* A file the layout needs; ERROR naming it and what it is for if it is missing. */
extern char *NeededFile(const char *dir, const char *file, const char *what, Size *len);

/* A file the directory may have, or NULL (and *len 0). */
extern char *OptionalFile(const char *dir, const char *file, Size *len);

/* A key of a JSON object, or NULL. */
extern JsonbValue *JsonKey(Jsonb *j, const char *key);

/* Whether key is true in the JSON object j (which may be NULL). */
extern bool JsonTrue(Jsonb *j, const char *key);

/* A token's text: a string, or an AddedToken's "content"; else NULL. */
extern char *JsonTokenContent(JsonbValue *v);

/* An integer JSON value, or dflt if v is NULL or no number. */
extern int	JsonInt(JsonbValue *v, int dflt);

/* language_tokens.c */

/*
 * NllbTokenizer's ids of the SentencePiece pieces, as vocab.json text
 * (fairseq's); *npieces is the SentencePiece model's count.
 */
extern char *NllbVocab(const char *spm, Size spm_len, int *npieces, Size *len);

/* An NLLB-200 or M2M100 directory's tokenizer and language tokens, into mi. */
extern void ReadM2M100Tokenizer(const char *dir, Jsonb *tc, ModelImport *mi);

/* encoder_files.c */

/* An encoder-only directory's tokenizer and sentence-transformers settings. */
extern void ReadEncoderFiles(const char *dir, ModelFamily family, Jsonb *config, Jsonb *tc,
							 ModelImport *mi);

#endif							/* MODEL_IMPORT_H */
