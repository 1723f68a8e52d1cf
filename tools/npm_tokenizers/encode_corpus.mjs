// Encodes every line of a corpus (.jsonl, one JSON string a line) with a
// local tokenizer directory two ways, for tools/gen_wordpiece_token_ids.py:
//   - @huggingface/transformers' AutoTokenizer (tokenizer_class from
//     tokenizer_config.json), encode(text, {add_special_tokens: true}), no
//     truncation;
//   - @huggingface/tokenizers' Tokenizer(tokenizer.json, tokenizer_config.json)
//     .encode(text) (its post-processor adds the special tokens);
// and, when installed, a third: npm `tokenizers`, the Node binding of Hugging
// Face's Rust tokenizers (the implementation transformers' Python fast
// tokenizers run; a prebuilt .node binary inside the npm package),
// Tokenizer.fromFile(tokenizer.json).encode(text) with its special tokens.
// The JavaScript ports differ from the Rust library on purpose or by
// approximation in places (Precompiled is NFKC plus a few replacements
// there, not the charsmap; BertNormalizer lowercases the whole string), so
// the Rust ids are kept where they differ.
// Local files only (env.allowRemoteModels = false).
//
//   node tools/npm_tokenizers/encode_corpus.mjs <model dir> <corpus.jsonl> <out.json>
//
// out.json: {"versions": {...}, "class": AutoTokenizer's class name,
//            "ids": [[...], ...] (AutoTokenizer's, one list a corpus line),
//            "disagree": [{"line": i, "tokenizers": [...]}, ...]
//              (lines where the Tokenizer's ids differ from "ids"),
//            "rust": [{"line": i, "ids": [...]}, ...] (lines where the Rust
//              library's ids differ from "ids"; null without the binding),
//            "errors": [{"line": i, "where": ..., "message": ...}, ...]}
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { env, AutoTokenizer } from '@huggingface/transformers';
import { Tokenizer } from '@huggingface/tokenizers';

const [dir, corpusPath, outPath] = process.argv.slice(2);
if (!dir || !corpusPath || !outPath) {
    console.error('usage: node encode_corpus.mjs <model dir> <corpus.jsonl> <out.json>');
    process.exit(2);
}
const modelDir = path.resolve(dir);
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.useFSCache = false;
env.localModelPath = path.dirname(modelDir) + path.sep;

const here = path.dirname(fileURLToPath(import.meta.url));
const version = (name) =>
    JSON.parse(fs.readFileSync(path.join(here, 'node_modules', name, 'package.json'), 'utf8')).version;

const tok = await AutoTokenizer.from_pretrained(path.basename(modelDir));
const tokJson = JSON.parse(fs.readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8'));
const tokConfig = JSON.parse(fs.readFileSync(path.join(modelDir, 'tokenizer_config.json'), 'utf8'));
const plain = new Tokenizer(tokJson, tokConfig);
let rust = null;
try {
    const rustMod = await import('tokenizers');
    rust = rustMod.Tokenizer.fromFile(path.join(modelDir, 'tokenizer.json'));
} catch (e) {
    console.error(`npm tokenizers (Rust binding) not available: ${e.message ?? e}`);
}

const lines = fs.readFileSync(corpusPath, 'utf8').split('\n');
if (lines.length && lines[lines.length - 1] === '') lines.pop();
const out = {
    versions: {
        '@huggingface/transformers': version('@huggingface/transformers'),
        '@huggingface/tokenizers': version('@huggingface/tokenizers'),
        node: process.version,
        ...(rust ? { tokenizers: version('tokenizers') } : {}),
    },
    class: tok.constructor.name,
    ids: [],
    disagree: [],
    errors: [],
    rust: rust ? [] : null,
};
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
for (let i = 0; i < lines.length; i++) {
    const text = JSON.parse(lines[i]);
    let a = null, b = null;
    try {
        a = Array.from(tok.encode(text, { add_special_tokens: true }), Number);
    } catch (e) {
        out.errors.push({ line: i, where: 'transformers', message: String(e) });
    }
    try {
        b = Array.from(plain.encode(text).ids, Number);
    } catch (e) {
        out.errors.push({ line: i, where: 'tokenizers', message: String(e) });
    }
    out.ids.push(a);
    if (a === null || b === null || !same(a, b)) out.disagree.push({ line: i, tokenizers: b });
    if (rust) {
        let c = null;
        try {
            c = Array.from((await rust.encode(text)).getIds(), Number);
        } catch (e) {
            out.errors.push({ line: i, where: 'rust', message: String(e) });
        }
        if (a === null || c === null || !same(a, c)) out.rust.push({ line: i, ids: c });
    }
}
fs.writeFileSync(outPath, JSON.stringify(out));
console.error(`${path.basename(modelDir)}: ${lines.length} lines, class ${out.class}, ` +
              `${out.disagree.length} transformers/tokenizers disagreements, ` +
              (rust ? `${out.rust.length} differ from the Rust library, ` : '') + `${out.errors.length} errors`);
