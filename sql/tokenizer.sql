-- tokenizers: behaviour, and bad input (one edge case per line)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
RESET client_min_messages;
\set SHOW_CONTEXT never
\set root `pwd`

-- the small models of test/fixtures/spm (trained on this repository's text)
SELECT import_tokenizer('uni', :'root' || '/test/fixtures/spm/tiny_unigram.model');
SELECT load_tokenizer('bpe', pg_read_binary_file(:'root' || '/test/fixtures/spm/tiny_bpe_bytes.model'));
SELECT name, octet_length(model) AS bytes, vocab IS NULL AS no_vocab FROM transformer_tokenizers ORDER BY name;
SELECT tokens('SELECT attention FROM memory', 'uni');
SELECT tokenize('SELECT attention FROM memory', 'uni');
SELECT detokenize(tokenize('SELECT attention FROM memory', 'uni'), 'uni');
-- byte fallback: characters outside the vocabulary become UTF-8 byte pieces
SELECT tokens('naïve 東', 'bpe');
SELECT detokenize(tokenize('naïve 東', 'bpe'), 'bpe');
-- whitespace is normalized away; empty input gives no tokens
SELECT tokens(E'  two\t\tspaces  ', 'uni');
SELECT tokenize('', 'uni'), tokens('   ', 'uni'), detokenize('{}', 'uni');
-- NULL in, NULL out
SELECT tokenize(NULL, 'uni') IS NULL AS null_input, tokenize('x', NULL) IS NULL AS null_tokenizer, detokenize(NULL, 'uni') IS NULL AS null_ids;
-- a vocabulary maps pieces to model ids; unknown pieces map to <unk>
SELECT load_tokenizer('uni_vocab', (SELECT model FROM transformer_tokenizers WHERE name = 'uni'),
                      '{"<unk>": 7, "▁SELECT": 100, "▁a": 101, "t": 102}');
SELECT tokens('SELECT at', 'uni'), tokenize('SELECT at', 'uni_vocab');
SELECT detokenize('{100,101,102,7}', 'uni_vocab');

-- bad tokenizer names and missing tokenizers
SELECT tokenize('x', 'no_such_tokenizer');
SELECT detokenize('{1}', 'no_such_tokenizer');
SELECT load_tokenizer('', (SELECT model FROM transformer_tokenizers WHERE name = 'uni'));
SELECT load_tokenizer(repeat('n', 64), (SELECT model FROM transformer_tokenizers WHERE name = 'uni'));
SELECT load_tokenizer(NULL, '\x00');
SELECT load_tokenizer('x', NULL);
SELECT drop_tokenizer('no_such_tokenizer');
-- server files
SELECT import_tokenizer('x', '/no/such/file.model');
SELECT import_tokenizer('x', '/');
SELECT import_tokenizer('x', NULL);
-- corrupt, truncated and hostile model files
SELECT load_tokenizer('x', '');
SELECT load_tokenizer('x', 'not a model');
SELECT load_tokenizer('x', '\x0affffffff0f');
SELECT load_tokenizer('x', substring((SELECT model FROM transformer_tokenizers WHERE name = 'uni') FROM 1 FOR 1000));
SELECT load_tokenizer('x', substring((SELECT model FROM transformer_tokenizers WHERE name = 'uni') FROM 1 FOR octet_length((SELECT model FROM transformer_tokenizers WHERE name = 'uni')) - 1));
SELECT load_tokenizer('x', '\x0a050a01611801');
SELECT load_tokenizer('x', '\x0a050a01611809');
SELECT load_tokenizer('x', '\x0a090a053c756e6b3e18020a090a053c756e6b3e1802');
SELECT load_tokenizer('x', '\x0a090a053c756e6b3e1802');
SELECT load_tokenizer('x', '\x0a090a053c756e6b3e18020a050a0161180112021803');
SELECT load_tokenizer('x', '\x0a090a053c756e6b3e18020a050a01611801120218031a0412020000');
SELECT load_tokenizer('x', '\x0a090a053c756e6b3e18020a050a01611801120218011a0a1208ffff000000000000');
SELECT load_tokenizer('x', '\x0a090a053c756e6b3e18020a070a0361626318060a050a01611801');
SELECT load_tokenizer('x', '\x0a090a053c756e6b3e18020a0a0a0161157f00c0ff1801');
-- a minimal valid model: <unk> and "a", no normalization rules
SELECT load_tokenizer('minimal', '\x0a090a053c756e6b3e18020a050a01611801');
SELECT tokens('aa b', 'minimal'), tokenize('aa b', 'minimal'), detokenize(tokenize('aa b', 'minimal'), 'minimal');
-- bad vocabularies
SELECT load_tokenizer('x', (SELECT model FROM transformer_tokenizers WHERE name = 'uni'), '[1, 2]');
SELECT load_tokenizer('x', (SELECT model FROM transformer_tokenizers WHERE name = 'uni'), '"string"');
SELECT load_tokenizer('x', (SELECT model FROM transformer_tokenizers WHERE name = 'uni'), '{"a": 1}');
SELECT load_tokenizer('x', (SELECT model FROM transformer_tokenizers WHERE name = 'uni'), '{"<unk>": 1.5}');
SELECT load_tokenizer('x', (SELECT model FROM transformer_tokenizers WHERE name = 'uni'), '{"<unk>": -1}');
SELECT load_tokenizer('x', (SELECT model FROM transformer_tokenizers WHERE name = 'uni'), '{"<unk>": "0"}');
SELECT load_tokenizer('x', (SELECT model FROM transformer_tokenizers WHERE name = 'uni'), '{"<unk>": 99999999999}');
SELECT load_tokenizer('x', (SELECT model FROM transformer_tokenizers WHERE name = 'uni'), '{"<unk>": 0, "a": 0}');
-- bad ids
SELECT detokenize('{-1}', 'uni');
SELECT detokenize('{300}', 'uni');
SELECT detokenize('{8}', 'uni_vocab');
SELECT detokenize('{1,NULL}', 'uni');
SELECT detokenize('{{1,2}}', 'uni');
-- too long to tokenize: transformer.max_input_bytes first (1 MB by default) ...
SELECT tokenize(repeat('a', 17000000), 'uni');
-- ... and, above it, the tokenizer's own bound on the normalized form
SET transformer.max_input_bytes = '1GB';
SELECT tokenize(repeat('a', 17000000), 'uni');
RESET transformer.max_input_bytes;
-- nothing of the failed loads was stored
SELECT name FROM transformer_tokenizers ORDER BY name;
SELECT drop_tokenizer('uni'), drop_tokenizer('bpe'), drop_tokenizer('uni_vocab'), drop_tokenizer('minimal');
