// An independent tokenizer reference for the checkpoint fixtures: Hugging
// Face's JavaScript tokenizers (@huggingface/transformers' AutoTokenizer over
// @huggingface/tokenizers) on a fixture directory's tokenizer.json and
// tokenizer_config.json, local files only.
//
//   node tools/npm_tokenizers/tokenize.mjs <model dir> <input.json> <output.json>
//
// input.json: {"encode": [{"text", "src_lang", "tgt_lang"}, ...],
//              "decode": [[id, ...], ...]}
// output.json: {"versions": {...}, "class": tokenizer class,
//   "encode": [{"ids": input_ids, "forced_bos_token_id": ...,
//               "plain_ids": @huggingface/tokenizers' Tokenizer.encode(text)
//               with tokenizer.json's own post-processor}, ...],
//   "decode": [decode(ids, {skip_special_tokens: true}), ...]}
//
// Encoding goes the way transformers.js' translation pipeline goes:
// tokenizer._build_translation_inputs(text, {}, {src_lang, tgt_lang}), which
// puts src_lang into the post-processor's template and returns the target
// language's id as forced_bos_token_id.
// tools/gen_checkpoint_fixtures.py runs this and compares with its Python port.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { env, AutoTokenizer } from '@huggingface/transformers';
import { Tokenizer } from '@huggingface/tokenizers';

const [dir, inPath, outPath] = process.argv.slice(2);
if (!dir || !inPath || !outPath) {
    console.error('usage: node tokenize.mjs <model dir> <input.json> <output.json>');
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

const input = JSON.parse(fs.readFileSync(inPath, 'utf8'));
const out = {
    versions: {
        '@huggingface/transformers': version('@huggingface/transformers'),
        '@huggingface/tokenizers': version('@huggingface/tokenizers'),
        node: process.version,
    },
    class: tok.constructor.name,
    encode: [],
    decode: [],
};
for (const item of input.encode ?? []) {
    const generate_kwargs = { src_lang: item.src_lang, tgt_lang: item.tgt_lang };
    const enc = tok._build_translation_inputs(item.text, { return_tensor: false }, generate_kwargs);
    out.encode.push({
        ids: Array.from(enc.input_ids, Number),
        forced_bos_token_id: Number(generate_kwargs.forced_bos_token_id),
        plain_ids: Array.from(plain.encode(item.text).ids, Number),
    });
}
for (const ids of input.decode ?? []) {
    // Tokenizer.decode() refuses an empty list
    out.decode.push(ids.length ? tok.decode(ids, { skip_special_tokens: true }) : '');
}
fs.writeFileSync(outPath, JSON.stringify(out));
