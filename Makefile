# transformer: Transformer models inside PostgreSQL (PGXS build)

EXTENSION = transformer
MODULE_big = transformer
OBJS = \
	src/pg/sql/transformer.o \
	src/core/tensor_ops.o \
	src/core/blas.o \
	src/core/dtypes.o src/core/gemm.o \
	src/core/gemm_int8.o src/core/gemm_bf16.o \
	src/core/product_parts.o \
	src/core/threads.o \
	src/core/attention.o \
	src/core/online_softmax.o \
	src/pg/base/pg_arrays.o \
	src/pg/sql/sql_attention.o \
	src/pg/sql/sql_aggregates.o \
	src/core/protobuf.o \
	src/core/spm_model.o \
	src/core/spm_normalize.o \
	src/core/spm_encode.o \
	src/core/spm_decode.o \
	src/pg/base/server_files.o \
	src/pg/base/ext_tables.o \
	src/pg/store/load/backend_cache.o \
	src/pg/store/load/tokenizer.o \
	src/pg/store/load/tokenizer_cache.o \
	src/pg/store/load/tokenizer_share.o \
	src/pg/store/load/tokenizer_text.o \
	src/pg/store/import/tokenizer_store.o \
	src/pg/sql/sql_tokenizer.o \
	src/core/model.o \
	src/core/search.o \
	src/core/greedy_screen.o \
	src/core/logits.o \
	src/core/train_layers.o \
	src/core/train_model.o \
	src/pg/pipeline/train_weights.o \
	src/pg/sql/sql_fine_tune.o \
	src/pg/store/load/model_store.o \
	src/pg/store/load/model_config.o \
	src/pg/store/load/model_pack.o \
	src/pg/pipeline/translate.o \
	src/pg/pipeline/document_plan.o \
	src/pg/pipeline/translate_document.o \
	src/core/placement.o \
	src/core/rich_text.o \
	src/core/spans.o \
	src/core/spans_web.o \
	src/core/spans_prose.o \
	src/core/special_tokens.o \
	src/core/casing.o \
	src/core/markup_parse.o \
	src/core/markup_tree.o \
	src/core/markup_blocks.o \
	src/core/markup_render.o \
	src/pg/pipeline/decode_workspace.o \
	src/core/safetensors.o \
	src/core/torch_zip.o \
	src/core/torch_pickle_objects.o \
	src/core/torch_pickle_globals.o \
	src/core/torch_pickle_tensors.o \
	src/core/torch_pickle_machine.o \
	src/core/torch_checkpoint.o \
	src/pg/store/import/model_dir.o \
	src/pg/store/import/language_tokens.o \
	src/pg/store/import/encoder_files.o \
	src/pg/store/import/model_rows.o \
	src/pg/store/import/model_import.o \
	src/pg/store/import/checkpoint_files.o \
	src/pg/store/load/model_languages.o \
	src/pg/sql/model_export.o \
	src/pg/sql/sql_model.o \
	src/pg/sql/sql_embed.o \
	src/core/wordpiece.o \
	src/pg/sql/sql_quantize.o \
	src/core/segment.o \
	src/pg/sql/sql_document.o \
	src/core/metrics.o \
	src/core/tokenize_13a.o \
	src/pg/sql/sql_metrics.o \
	src/pg/sql/sql_pictures.o \
	src/core/xml_text.o \
	src/core/weight_file.o \
	src/pg/store/load/shared_files.o \
	src/pg/store/load/weight_cache.o \
	src/pg/store/load/weight_files.o \
	src/pg/base/input_limit.o \
	src/pg/jobs/job_store.o \
	src/pg/jobs/job_launch.o \
	src/pg/sql/sql_jobs.o \
	src/pg/sql/sql_job_control.o \
	src/pg/jobs/job_sync.o \
	src/pg/sql/sql_version.o \
	src/pg/store/load/model_stats.o \
	src/worker/job_batch.o \
	src/worker/job_worker.o \
	src/worker/job_train.o \
	src/worker/job_supervisor.o

# One SQL source (as pgvector does): sql/transformer.sql is copied to the
# install script of the default version.  Older versions keep only what the
# upgrade chain from 0.1.0 needs: 0.1.0's install script and the updates.
EXTVERSION = $(shell grep default_version $(EXTENSION).control | sed -e "s/default_version[[:space:]]*=[[:space:]]*'\([^']*\)'/\1/")
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA = sql/transformer--0.1.0.sql \
	sql/transformer--0.1.0--0.2.0.sql sql/transformer--0.2.0--0.3.0.sql \
	sql/transformer--0.3.0--0.4.0.sql sql/transformer--0.4.0--0.5.0.sql \
	sql/transformer--0.5.0--0.6.0.sql sql/transformer--0.6.0--0.7.0.sql \
	sql/transformer--0.7.0--0.8.0.sql sql/transformer--0.8.0--0.9.0.sql \
	sql/transformer--0.9.0--0.10.0.sql sql/transformer--0.10.0--0.11.0.sql

# pg_regress inputs in sql/, expected outputs in expected/, by name
REGRESS = attention aggregates errors parity tokenizer model hostile document pictures
REGRESS_OPTS = --inputdir=. --outputdir=. --encoding=UTF8

PG_CPPFLAGS = -Isrc/core -Isrc/pg $(shell xml2-config --cflags) -DTRANSFORMER_EXTVERSION='"$(EXTVERSION)"'
PG_CFLAGS = -O3
# OpenBLAS is opened when a product first needs it (src/core/blas.h), not linked
SHLIB_LINK = -licuuc -lxml2 -lm

# make clean's extra files: PGXS reads EXTRA_CLEAN when it is included (the list is below)
EXTRA_CLEAN = $(CLEAN_FILES)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# Header dependencies, which PGXS makes only for a server configured with
# --enable-depend: each object's list in .deps/ (a changed struct in a
# header otherwise leaves stale objects that disagree on its layout)
DEPDIR := .deps
%.o : %.c
	@mkdir -p $(DEPDIR)/$(dir $<)
	$(COMPILE.c) -o $@ $< -MMD -MP -MF $(DEPDIR)/$<.d
-include $(patsubst %,$(DEPDIR)/%.d,$(OBJS:.o=.c))

# the install script of the default version, from the one SQL source (after
# PGXS's include: the first rule is make's default goal, and that is "all")
# the library's version string is the control file's
src/pg/sql/sql_version.o src/pg/sql/sql_version.bc: $(EXTENSION).control

sql/$(EXTENSION)--$(EXTVERSION).sql: sql/$(EXTENSION).sql
	cp $< $@

# Bundled models, installed for import_model(name): every file of the
# directory but the training log and notes
BUNDLED_MODELS = multi30k_de_en multi30k_de_en_v2 multi30k_sentence_de_en
install: install-models
install-models:
	for m in $(BUNDLED_MODELS); do \
	  for f in $$(cd models/$$m && find . -type f ! -name train_log.tsv ! -name README.md | sort); do \
	    $(MKDIR_P) "$(DESTDIR)$(datadir)/extension/transformer_models/$$m/$$(dirname $$f)" && \
	    $(INSTALL_DATA) "models/$$m/$$f" "$(DESTDIR)$(datadir)/extension/transformer_models/$$m/$$f" || exit 1; \
	  done; \
	done
.PHONY: install-models

PYTHON ?= /usr/bin/python3
CC_UNIT ?= gcc
CORE_SRC = src/core/tensor_ops.c src/core/blas.c src/core/dtypes.c src/core/gemm.c src/core/gemm_int8.c src/core/gemm_bf16.c src/core/product_parts.c src/core/threads.c src/core/attention.c src/core/online_softmax.c \
	src/core/weight_file.c src/core/model.c src/core/search.c src/core/greedy_screen.c src/core/logits.c src/core/metrics.c src/core/tokenize_13a.c \
	src/core/spm_model.c src/core/protobuf.c src/core/train_layers.c src/core/train_model.c
# the PyTorch checkpoint reader (torch_pickle.h), in the order its pieces call each other
TORCH_PICKLE_SRC = src/core/torch_pickle_objects.c src/core/torch_pickle_globals.c src/core/torch_pickle_tensors.c \
	src/core/torch_pickle_machine.c src/core/torch_checkpoint.c
CORE_SRC += src/core/torch_zip.c $(TORCH_PICKLE_SRC) src/core/safetensors.c
# the flags that matter of the server build (-fwrapv changes vectorization)
UNIT_CFLAGS = -std=gnu11 -O3 -g -Wall -Wextra -fwrapv -fno-strict-aliasing -Isrc/core

# The numeric core, outside the server (one object per file: a change rebuilds one)
UNIT_OBJS = $(patsubst src/core/%.c,test/unit/obj/%.o,$(CORE_SRC))
test/unit/obj/%.o: src/core/%.c src/core/*.h
	@mkdir -p test/unit/obj
	$(CC_UNIT) $(UNIT_CFLAGS) -c -o $@ $<
test/unit/test_core: test/unit/test_core.c $(UNIT_OBJS) src/core/*.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ test/unit/test_core.c $(UNIT_OBJS) -lopenblas -lm
# transformer.cpu_kernels: every kernel family held to each level this CPU has
test/unit/test_cpu_kernels: test/unit/test_cpu_kernels.c $(UNIT_OBJS) src/core/*.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ test/unit/test_cpu_kernels.c $(UNIT_OBJS) -lopenblas -lm

# The PyTorch checkpoint reader on torch.save's files and on hostile ones (tools/gen_torch_fixtures.py)
TORCH_SRC = src/core/torch_zip.c $(TORCH_PICKLE_SRC) src/core/safetensors.c src/core/spm_model.c src/core/protobuf.c
TORCH_OBJS = $(patsubst src/core/%.c,test/unit/obj/%.o,$(TORCH_SRC))
test/unit/test_torch: test/unit/test_torch.c $(TORCH_OBJS) src/core/*.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ test/unit/test_torch.c $(TORCH_OBJS)

# Text as people write it: markup (libxml2), verbatim spans, casing (ICU), anchor placement
XML2_CFLAGS = $(shell xml2-config --cflags)
XML2_LIBS = $(shell xml2-config --libs)
# the markup module: markup.h, its parts sharing markup_internal.h
MARKUP_SRC = src/core/markup_parse.c src/core/markup_tree.c src/core/markup_blocks.c src/core/markup_render.c
MARKUP_H = src/core/markup.h src/core/markup_internal.h
test/unit/test_markup: test/unit/test_markup.c $(MARKUP_SRC) $(MARKUP_H) src/core/spm.h
	$(CC_UNIT) $(UNIT_CFLAGS) $(XML2_CFLAGS) -o $@ test/unit/test_markup.c $(MARKUP_SRC) $(XML2_LIBS)
# the spans module: spans.h, its parts sharing spans_internal.h
SPANS_SRC = src/core/spans.c src/core/spans_web.c src/core/spans_prose.c
SPANS_H = src/core/spans.h src/core/spans_internal.h
test/unit/test_spans: test/unit/test_spans.c $(SPANS_SRC) $(SPANS_H) src/core/spm.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ test/unit/test_spans.c $(SPANS_SRC) -licuuc
test/unit/test_casing: test/unit/test_casing.c src/core/casing.c src/core/casing.h src/core/spm.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ test/unit/test_casing.c src/core/casing.c -licuuc
test/unit/test_placement: test/unit/test_placement.c src/core/placement.c src/core/placement.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ test/unit/test_placement.c src/core/placement.c
test/unit/test_wordpiece: test/unit/test_wordpiece.c src/core/wordpiece.c src/core/wordpiece.h src/core/spm_model.c src/core/spm.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ test/unit/test_wordpiece.c src/core/wordpiece.c src/core/spm_model.c src/core/protobuf.c -licuuc
test/unit/test_special_tokens: test/unit/test_special_tokens.c src/core/special_tokens.c src/core/special_tokens.h src/core/spm_normalize.c src/core/spm.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ test/unit/test_special_tokens.c src/core/special_tokens.c src/core/spm_normalize.c src/core/spm_model.c src/core/protobuf.c
TEXT_UNITS = test/unit/test_markup test/unit/test_spans test/unit/test_casing test/unit/test_placement test/unit/test_wordpiece \
	test/unit/test_special_tokens
# one unit test alone, for make mutation: make unittest-placement (the unpickler's with its fixtures)
unittest-torch: test/unit/test_torch
	test/unit/test_torch test/fixtures/torch > test/unit/test_torch.log 2>&1 || { grep -v '^ok' test/unit/test_torch.log | tail -20; exit 1; }
.PHONY: unittest-torch
unittest-%: test/unit/test_%
	TF_PATHOLOGICAL_MB=2 test/unit/test_$* > test/unit/test_$*.log 2>&1 || { grep -v '^ok' test/unit/test_$*.log; exit 1; }

test/unit/test_train: test/unit/test_train.c test/unit/train_fixture.h $(UNIT_OBJS) src/core/*.h
	$(CC_UNIT) $(UNIT_CFLAGS) -Itest/unit -o $@ test/unit/test_train.c $(UNIT_OBJS) -lopenblas -lm

unittest: test/unit/test_core test/unit/test_cpu_kernels test/unit/test_torch test/unit/test_train $(TEXT_UNITS)
	test/unit/test_core test/fixtures/core_ops.txt test/fixtures/grad_ops.txt
	test/unit/test_train test/fixtures/train
	test/unit/test_cpu_kernels > test/unit/test_cpu_kernels.log 2>&1 || { grep -v '^ok' test/unit/test_cpu_kernels.log; exit 1; }
	@echo "test/unit/test_cpu_kernels: $$(grep -c '^ok' test/unit/test_cpu_kernels.log) passed"
	test/unit/test_torch test/fixtures/torch
	for t in $(TEXT_UNITS); do \
	  TF_PATHOLOGICAL_MB=2 $$t > $$t.log 2>&1 || { grep -v '^ok' $$t.log; exit 1; }; \
	  echo "$$t: $$(grep -c '^ok' $$t.log) passed"; \
	done

# The text passes (segmentation, 13a, SentencePiece) on pathological shapes of
# 1 to 16 MB: time per byte, growth with size, longest wait for the interrupt hook
PATHO_SRC = src/core/segment.c src/core/metrics.c src/core/tokenize_13a.c src/core/spm_model.c src/core/protobuf.c src/core/spm_normalize.c \
	src/core/spm_encode.c src/core/spm_decode.c
test/fuzz/pathological: test/fuzz/pathological.c test/fuzz/fuzz_arena.h $(PATHO_SRC) src/core/*.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ test/fuzz/pathological.c $(PATHO_SRC) -licuuc -lm

pathological: test/fuzz/pathological
	test/fuzz/pathological .

# pgTAP suite, in its own database (needs a running server: PGHOST etc.)
PROVE_DB ?= transformer_tap
prove:
	dropdb --force --if-exists $(PROVE_DB)
	createdb -E UTF8 -T template0 $(PROVE_DB)
	psql -X -q -d $(PROVE_DB) -c 'CREATE EXTENSION pgtap'
	pg_prove -d $(PROVE_DB) $(or $(PROVE_FILES),test/pgtap/*.sql)

# 20 s of the soak (bench/soak.sh runs 5 minutes by default; needs a server)
soak:
	bench/soak.sh 20
.PHONY: soak

# pg_dump and restore, custom and plain formats (needs a server)
dump:
	test/dump/run.sh
.PHONY: dump

# kill -9 of backends mid-import and mid-write; the server recovers (needs a server, root or postgres)
crash:
	test/crash/run.sh
.PHONY: crash

# Background translation jobs in a private cluster: a kill loop with writers, crash and clean restarts,
# shared_preload_libraries, no free slot (root or postgres; python3-psycopg2)
jobs:
	$(PYTHON) test/jobs/run.py
# the restarts alone, for make mutation: kill -9 of a worker; pg_ctl restart
jobs-crash:
	$(PYTHON) test/jobs/run.py --only 2
jobs-resume:
	$(PYTHON) test/jobs/run.py --only 3
jobs-preload:
	$(PYTHON) test/jobs/run.py --only 4
jobs-plural:
	$(PYTHON) test/jobs/run.py --only 6
jobs-fine-tune:
	$(PYTHON) test/jobs/run.py --only 8
.PHONY: jobs jobs-crash jobs-resume jobs-preload jobs-plural jobs-fine-tune

# An installed Citus: a coordinator and two workers (root; skipped when Citus is not installed)
citus:
	test/citus/run.sh
.PHONY: citus

# Shared weights files: builders at once, a full disk, pg_basebackup, a standby (needs a server)
weight-cache:
	test/weight_cache/run.sh
.PHONY: weight-cache

# Importers, droppers and translators at once (pgbench; needs a server)
concurrency:
	test/concurrency/run.sh 20

# Pictures in headless Chromium (needs a server and chromium)
browser:
	test/browser/run.sh

# Every text function on large and pathological inputs: 54000 above the limit, cancel, peak memory (needs a server; root or postgres)
limits:
	$(PYTHON) test/limits/run.py $(if $(LIMITS_ONLY),--only '$(LIMITS_ONLY)') $(LIMITS_ARGS)
.PHONY: limits

# LATIN1 and SQL_ASCII databases (needs a server and pgTAP)
encodings:
	test/encodings/run.sh
.PHONY: encodings

# The manual's Catalog table (docs/reference.md) against pg_proc, and the SQLSTATEs of README.md and docs/*.md against pgTAP (needs a server)
readme-check:
	$(PYTHON) test/readme/check.py
.PHONY: readme-check

# Every SQL example of README.md and docs/*.md runs, each page in a fresh database; the outputs the
# pages show are compared, and the pages' links checked (test/doctest/run.py; needs a server)
doctest:
	$(PYTHON) test/doctest/run.py
.PHONY: doctest

# src/core is pure C: no PostgreSQL header, no palloc/ereport/elog (tools/check_core.sh)
check-core:
	tools/check_core.sh src/core
.PHONY: check-core

# No circle in the include graph of src/ (tools/check_include_cycles.py)
check-cycles:
	$(PYTHON) tools/check_include_cycles.py src
.PHONY: check-cycles

# No circle between the files of src/ through their calls: each object's
# undefined symbols against the others' definitions (tools/check_call_graph.py)
check-calls: all
	$(PYTHON) tools/check_call_graph.py src
.PHONY: check-calls

# Everything the README's test command runs, in two lanes at once (test/run_all.py): the layout checks,
# the C unit tests, sanitizers and fuzzers, the tests without ../shared (lane 1); pg_regress, pgTAP, the
# manual's examples, limits, concurrency, soak, dump, crash, browser, jobs, Citus (lane 2); then the
# mutants, both lanes taking them from one queue.  Each step's log in test/logs/, a table of times at the end.
test: all
	$(PYTHON) test/run_all.py --without-shared
.PHONY: test

# The tests that read ../shared/data, on a clone with nothing beside it: ../shared hidden under an
# empty tmpfs in a mount namespace of their own, with a throwaway server inside it (root; CI runs it)
# Only what reads ../shared can change without it (test/without_shared.sh)
test-without-shared:
	@if [ ! -d ../shared ]; then \
	  env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE -u PGPASSWORD -u PGSERVICE pg_virtualenv -t test/without_shared.sh; \
	elif unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=1m none ../shared' 2>/dev/null; then \
	  unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=1m none ../shared && test -z "$$(ls -A ../shared)" && env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE -u PGPASSWORD -u PGSERVICE pg_virtualenv -t test/without_shared.sh'; \
	else \
	  echo "test-without-shared: no mount namespace here (not root, or not allowed): ../shared stays visible"; \
	  env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE -u PGPASSWORD -u PGSERVICE pg_virtualenv -t test/without_shared.sh; \
	fi
.PHONY: test-without-shared

# The regression and pgTAP suites against a server loading an ASan + UBSan build (by hand, root; 10-25 minutes)
sanitize-server:
	test/sanitize_server/run.sh
.PHONY: sanitize-server

# Mutation testing: deliberate bugs (test/mutation/mutants.txt), each caught by a test (needs root or postgres' rights to run a private server)
# two runners at once, one per core, each with its own tree and private server, taking groups of mutants from one queue
mutation:
	@rm -rf test/mutation/queue; \
	$(PYTHON) test/mutation/run.py --queue test/mutation/queue --record test/mutation/shard1.times > test/mutation/shard1.log 2>&1 & pid=$$!; \
	$(PYTHON) test/mutation/run.py --queue test/mutation/queue --record test/mutation/shard2.times > test/mutation/shard2.log 2>&1; r2=$$?; \
	wait $$pid; r1=$$?; \
	grep -h -v '^  unmutated\|^      ' test/mutation/shard1.log test/mutation/shard2.log; \
	grep -h '^NOT CAUGHT' test/mutation/shard1.log test/mutation/shard2.log; \
	test $$r1 -eq 0 && test $$r2 -eq 0
.PHONY: mutation

# After make mutation on a quiet machine: its times become the shards' weights (test/mutation/times.txt)
mutation-times:
	{ echo "# seconds per mutant and per test's unmutated run, from make mutation (make mutation-times)"; \
	  cat test/mutation/shard1.times test/mutation/shard2.times | sort; } > test/mutation/times.txt
.PHONY: mutation-times

# Regenerate the fixtures: PyTorch (python3-torch) and SentencePiece
# (python3-sentencepiece, ../shared/data)
fixtures:
	$(PYTHON) tools/gen_fixtures.py
	$(PYTHON) tools/gen_grad_fixtures.py
	$(PYTHON) tools/gen_train_fixtures.py
	$(PYTHON) tools/gen_tokenizer_fixtures.py
	$(PYTHON) tools/gen_model_fixtures.py
	$(PYTHON) tools/gen_int8_fixtures.py
	$(PYTHON) tools/gen_bundled_fixtures.py
	$(PYTHON) tools/gen_opus_fixtures.py
	$(PYTHON) tools/gen_metric_fixtures.py
	$(PYTHON) tools/gen_attention_fixtures.py
	$(PYTHON) tools/gen_torch_fixtures.py
	$(PYTHON) tools/gen_checkpoint_fixtures.py
	$(PYTHON) tools/gen_bad_checkpoints.py
	$(PYTHON) tools/gen_npm_token_ids.py

bench: bench/bench_attention bench/bench_gemm
bench/bench_gemm: bench/bench_gemm.c bench/bench_util.h $(CORE_SRC) src/core/*.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ bench/bench_gemm.c $(CORE_SRC) -lopenblas -lm
bench/bench_attention: bench/bench_attention.c bench/bench_util.h $(CORE_SRC) src/core/*.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ bench/bench_attention.c $(CORE_SRC) -lopenblas -lm
# Peak memory and time of BLEU and chrF on 1, 10, 40 MB sentence pairs (issue 23; not part of make test);
# METRICS_SRC=another revision's metrics sources (with -B) to compare (before the 13a split: its metrics.c alone)
METRICS_SRC ?= src/core/metrics.c src/core/tokenize_13a.c
BENCH_METRICS_ARGS ?= 1 10 40
bench-metrics-memory: bench/metrics_memory
	bench/metrics_memory $(BENCH_METRICS_ARGS)
bench/metrics_memory: bench/metrics_memory.c $(METRICS_SRC) src/core/spm_model.c src/core/protobuf.c src/core/metrics.h src/core/spm.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ bench/metrics_memory.c $(METRICS_SRC) src/core/spm_model.c src/core/protobuf.c -lm
# int8 study (issue 14): oneDNN against our own VNNI kernel; needs libdnnl-dev
bench-train: bench/bench_train
bench/bench_train: bench/bench_train.c bench/bench_util.h test/unit/train_fixture.h $(UNIT_OBJS) src/core/*.h
	$(CC_UNIT) $(UNIT_CFLAGS) -Itest/unit -o $@ bench/bench_train.c $(UNIT_OBJS) -lopenblas -lm
.PHONY: bench-train

bench-int8: bench/bench_int8
bench/bench_int8: bench/bench_int8.c bench/bench_util.h src/core/tensor_ops.c src/core/blas.c src/core/dtypes.c src/core/gemm.c src/core/gemm_int8.c src/core/gemm_bf16.c src/core/product_parts.c src/core/threads.c src/core/*.h
	$(CC_UNIT) $(UNIT_CFLAGS) -o $@ bench/bench_int8.c src/core/tensor_ops.c src/core/blas.c src/core/dtypes.c src/core/gemm.c src/core/gemm_int8.c src/core/gemm_bf16.c src/core/product_parts.c src/core/threads.c -ldnnl -lopenblas -lm

CLEAN_FILES = test/unit/test_core test/unit/test_train test/unit/test_cpu_kernels test/unit/test_cpu_kernels.log test/fuzz/pathological test/unit/obj test/unit/test_core_san bench/bench_attention bench/bench_gemm bench/bench_int8 bench/bench_train bench/metrics_memory
CLEAN_FILES += test/unit/test_torch test/unit/test_torch_san test/fuzz/fuzz_torch_zip test/fuzz/fuzz_torch_pickle
CLEAN_FILES += $(TEXT_UNITS) test/unit/test_text_san test/unit/test_*_san test/unit/test_*_san.log test/fuzz/fuzz_markup test/fuzz/fuzz_spans test/fuzz/fuzz_rich_text
CLEAN_FILES += $(DEPDIR)

.PHONY: unittest pathological prove concurrency browser test fixtures bench bench-int8 bench-metrics-memory

# Fuzz the SentencePiece model reader with libFuzzer (clang, libclang-rt-14-dev)
SPM_SRC = src/core/protobuf.c src/core/spm_model.c src/core/spm_normalize.c src/core/spm_encode.c src/core/spm_decode.c
FUZZ_SECONDS ?= 600
test/fuzz/fuzz_spm_model: test/fuzz/fuzz_spm_model.c test/fuzz/fuzz_arena.h $(SPM_SRC) src/core/spm.h src/core/protobuf.h
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc/core -o $@ test/fuzz/fuzz_spm_model.c $(SPM_SRC)

fuzz-spm: test/fuzz/fuzz_spm_model
	mkdir -p test/fuzz/corpus-run
	test/fuzz/fuzz_spm_model -max_total_time=$(FUZZ_SECONDS) -max_len=1048576 -rss_limit_mb=4096 \
	  -timeout=10 test/fuzz/corpus-run test/fuzz/seeds

.PHONY: fuzz-spm

# Mutation-fuzz the safetensors/config readers inside a server (PGHOST etc.)
fuzz-safetensors:
	psql -X -v seconds=$(FUZZ_SECONDS) -f test/fuzz/fuzz_safetensors.sql

.PHONY: fuzz-safetensors

# Mutation-fuzz our tables' rows inside a server (PGHOST etc.; drops and
# re-creates the extension in that database)
fuzz-tables:
	psql -X -v seconds=$(FUZZ_SECONDS) -f test/fuzz/fuzz_tables.sql

.PHONY: fuzz-tables

# Fuzz the safetensors header reader outside the server (libFuzzer, ASan, UBSan)
test/fuzz/fuzz_safetensors_header: test/fuzz/fuzz_safetensors_header.c test/fuzz/fuzz_arena.h src/core/safetensors.c src/core/spm_model.c src/core/protobuf.c src/core/safetensors.h
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc/core -o $@ \
	  test/fuzz/fuzz_safetensors_header.c src/core/safetensors.c src/core/spm_model.c src/core/protobuf.c

fuzz-safetensors-header: test/fuzz/fuzz_safetensors_header
	mkdir -p test/fuzz/corpus-safetensors
	test/fuzz/fuzz_safetensors_header -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=4096 \
	  -timeout=10 test/fuzz/corpus-safetensors test/fuzz/seeds_safetensors

.PHONY: fuzz-safetensors-header

# Fuzz the PyTorch checkpoint reader outside the server (libFuzzer, ASan, UBSan): whole files (with
# FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION: data.pkl's CRC-32 is not checked), and pickles alone
test/fuzz/fuzz_torch_zip: test/fuzz/fuzz_torch_zip.c test/fuzz/fuzz_arena.h $(TORCH_SRC) src/core/*.h
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -Isrc/core -o $@ test/fuzz/fuzz_torch_zip.c $(TORCH_SRC)

fuzz-torch-zip: test/fuzz/fuzz_torch_zip
	mkdir -p test/fuzz/corpus-torch-zip
	test/fuzz/fuzz_torch_zip -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=4096 \
	  -timeout=10 test/fuzz/corpus-torch-zip test/fuzz/seeds_torch_zip

test/fuzz/fuzz_torch_pickle: test/fuzz/fuzz_torch_pickle.c test/fuzz/fuzz_arena.h $(TORCH_SRC) src/core/*.h
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc/core -o $@ \
	  test/fuzz/fuzz_torch_pickle.c $(TORCH_SRC)

fuzz-torch-pickle: test/fuzz/fuzz_torch_pickle
	mkdir -p test/fuzz/corpus-torch-pickle
	test/fuzz/fuzz_torch_pickle -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=4096 \
	  -timeout=10 test/fuzz/corpus-torch-pickle test/fuzz/seeds_torch_pickle

.PHONY: fuzz-torch-zip fuzz-torch-pickle

# Fuzz segmentation, 13a tokenization, BLEU and chrF outside the server (libFuzzer, ASan, UBSan)
test/fuzz/fuzz_text: test/fuzz/fuzz_text.c test/fuzz/fuzz_arena.h src/core/metrics.c src/core/tokenize_13a.c src/core/segment.c src/core/spm_model.c src/core/protobuf.c src/core/metrics.h src/core/segment.h
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc/core -o $@ \
	  test/fuzz/fuzz_text.c src/core/metrics.c src/core/tokenize_13a.c src/core/segment.c src/core/spm_model.c src/core/protobuf.c -licuuc -lm

fuzz-text: test/fuzz/fuzz_text
	mkdir -p test/fuzz/corpus-text
	test/fuzz/fuzz_text -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=4096 -timeout=10 test/fuzz/corpus-text

.PHONY: fuzz-text

test/fuzz/fuzz_svg_label: test/fuzz/fuzz_svg_label.c src/core/xml_text.c src/core/xml_text.h
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc/core -o $@ \
	  test/fuzz/fuzz_svg_label.c src/core/xml_text.c

fuzz-svg-label: test/fuzz/fuzz_svg_label
	mkdir -p test/fuzz/corpus-svg-label
	test/fuzz/fuzz_svg_label -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 test/fuzz/corpus-svg-label

.PHONY: fuzz-svg-label

# The core under AddressSanitizer and UndefinedBehaviorSanitizer (clang): the
# unit tests, then every fuzzer's seeds and SANITIZE_SECONDS of each
SANITIZE_SECONDS ?= 15
SAN_FLAGS = -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
test/unit/test_core_san: test/unit/test_core.c $(CORE_SRC) src/core/*.h
	clang -std=gnu11 $(SAN_FLAGS) -fwrapv -Isrc/core -o $@ test/unit/test_core.c $(CORE_SRC) -lopenblas -lm

test/unit/test_torch_san: test/unit/test_torch.c $(TORCH_SRC) src/core/*.h
	clang -std=gnu11 $(SAN_FLAGS) -fwrapv -Isrc/core -o $@ test/unit/test_torch.c $(TORCH_SRC)

FUZZERS = test/fuzz/fuzz_spm_model test/fuzz/fuzz_safetensors_header test/fuzz/fuzz_text test/fuzz/fuzz_weight_file test/fuzz/fuzz_svg_label
FUZZERS += test/fuzz/fuzz_torch_zip test/fuzz/fuzz_torch_pickle test/fuzz/fuzz_markup test/fuzz/fuzz_spans test/fuzz/fuzz_rich_text
FUZZERS += test/fuzz/fuzz_wordpiece

test/unit/test_text_san: test/unit/test_markup.c test/unit/test_spans.c test/unit/test_casing.c test/unit/test_placement.c \
		test/unit/test_wordpiece.c test/unit/test_special_tokens.c src/core/wordpiece.c $(MARKUP_SRC) $(SPANS_SRC) \
		src/core/casing.c src/core/placement.c src/core/special_tokens.c src/core/*.h
	clang -std=gnu11 $(SAN_FLAGS) -fwrapv -Isrc/core $(XML2_CFLAGS) -o test/unit/test_markup_san test/unit/test_markup.c $(MARKUP_SRC) $(XML2_LIBS)
	clang -std=gnu11 $(SAN_FLAGS) -fwrapv -Isrc/core -o test/unit/test_spans_san test/unit/test_spans.c $(SPANS_SRC) -licuuc
	clang -std=gnu11 $(SAN_FLAGS) -fwrapv -Isrc/core -o test/unit/test_casing_san test/unit/test_casing.c src/core/casing.c -licuuc
	clang -std=gnu11 $(SAN_FLAGS) -fwrapv -Isrc/core -o test/unit/test_placement_san test/unit/test_placement.c src/core/placement.c
	clang -std=gnu11 $(SAN_FLAGS) -fwrapv -Isrc/core -o test/unit/test_wordpiece_san test/unit/test_wordpiece.c \
	  src/core/wordpiece.c src/core/spm_model.c src/core/protobuf.c -licuuc
	clang -std=gnu11 $(SAN_FLAGS) -fwrapv -Isrc/core -o test/unit/test_special_tokens_san test/unit/test_special_tokens.c \
	  src/core/special_tokens.c src/core/spm_normalize.c src/core/spm_model.c src/core/protobuf.c
	touch $@

test/fuzz/fuzz_wordpiece: test/fuzz/fuzz_wordpiece.c test/fuzz/fuzz_arena.h src/core/wordpiece.c src/core/wordpiece.h src/core/spm_model.c
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc/core \
	  -o $@ test/fuzz/fuzz_wordpiece.c src/core/wordpiece.c src/core/spm_model.c src/core/protobuf.c -licuuc

test/fuzz/fuzz_markup: test/fuzz/fuzz_markup.c test/fuzz/fuzz_arena.h test/fuzz/markup_census.h $(MARKUP_SRC) $(MARKUP_H)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc/core $(XML2_CFLAGS) \
	  -o $@ test/fuzz/fuzz_markup.c $(MARKUP_SRC) $(XML2_LIBS)

test/fuzz/fuzz_spans: test/fuzz/fuzz_spans.c test/fuzz/fuzz_arena.h $(SPANS_SRC) $(SPANS_H)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc/core \
	  -o $@ test/fuzz/fuzz_spans.c $(SPANS_SRC) -licuuc

RICH_TEXT_SRC = src/core/rich_text.c src/core/placement.c $(SPANS_SRC) $(MARKUP_SRC)
test/fuzz/fuzz_rich_text: test/fuzz/fuzz_rich_text.c test/fuzz/fuzz_arena.h test/fuzz/markup_census.h $(RICH_TEXT_SRC) src/core/*.h
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc/core $(XML2_CFLAGS) \
	  -o $@ test/fuzz/fuzz_rich_text.c $(RICH_TEXT_SRC) $(XML2_LIBS) -licuuc

fuzz-rich-text: test/fuzz/fuzz_rich_text
	mkdir -p test/fuzz/corpus-rich-text
	test/fuzz/fuzz_rich_text -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=4096 \
	  -timeout=10 test/fuzz/corpus-rich-text test/fuzz/seeds_rich_text test/fuzz/seeds_markup

fuzz-markup: test/fuzz/fuzz_markup
	mkdir -p test/fuzz/corpus-markup
	test/fuzz/fuzz_markup -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=4096 \
	  -timeout=10 test/fuzz/corpus-markup test/fuzz/seeds_markup

fuzz-spans: test/fuzz/fuzz_spans
	mkdir -p test/fuzz/corpus-spans
	test/fuzz/fuzz_spans -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=4096 \
	  -timeout=10 test/fuzz/corpus-spans

.PHONY: fuzz-markup fuzz-spans fuzz-rich-text

sanitize: test/unit/test_core_san test/unit/test_torch_san test/unit/test_text_san $(FUZZERS)
	ASAN_OPTIONS=detect_leaks=1 test/unit/test_core_san test/fixtures/core_ops.txt test/fixtures/grad_ops.txt > test/unit/test_core_san.log 2>&1 || \
	  { tail -20 test/unit/test_core_san.log; exit 1; }
	tail -1 test/unit/test_core_san.log
	ASAN_OPTIONS=detect_leaks=1 test/unit/test_torch_san test/fixtures/torch > test/unit/test_torch_san.log 2>&1 || \
	  { tail -20 test/unit/test_torch_san.log; exit 1; }
	tail -1 test/unit/test_torch_san.log
	for t in markup spans casing placement wordpiece special_tokens; do \
	  TF_PATHOLOGICAL_MB=1 ASAN_OPTIONS=detect_leaks=1 test/unit/test_$${t}_san > test/unit/test_$${t}_san.log 2>&1 || \
	    { tail -20 test/unit/test_$${t}_san.log; exit 1; }; \
	  tail -1 test/unit/test_$${t}_san.log; \
	done
	test/fuzz/sanitize.sh $(SANITIZE_SECONDS)

.PHONY: sanitize

# Fuzz the shared weights file reader, then use what it accepts (libFuzzer, ASan, UBSan)
WFILE_SRC = src/core/weight_file.c src/core/model.c src/core/search.c src/core/greedy_screen.c src/core/logits.c src/core/attention.c src/core/tensor_ops.c src/core/blas.c src/core/dtypes.c src/core/gemm.c src/core/gemm_int8.c src/core/gemm_bf16.c src/core/product_parts.c src/core/threads.c src/core/online_softmax.c
test/fuzz/fuzz_weight_file: test/fuzz/fuzz_weight_file.c test/fuzz/fuzz_arena.h $(WFILE_SRC) src/core/*.h
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc/core -o $@ \
	  test/fuzz/fuzz_weight_file.c $(WFILE_SRC) -lopenblas -lm

fuzz-weight-file: test/fuzz/fuzz_weight_file
	mkdir -p test/fuzz/corpus-weight-file
	test/fuzz/fuzz_weight_file -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=4096 \
	  -timeout=10 test/fuzz/corpus-weight-file test/fuzz/seeds_weight_file

.PHONY: fuzz-weight-file
