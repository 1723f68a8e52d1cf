// The ONNX Runtime side of bench/embed.py (issue 29): npm onnxruntime-node
// runs a sentence encoder exported by torch.onnx.export, one thread, on token
// ids the Python side wrote (tokenization is not timed here).
//
//     node bench/embed_ort.mjs        (bench/embed.py starts it; it is not run alone)
//
// onnxruntime-node is taken from bench/node_modules if there is one, else
// from tools/npm_tokenizers/node_modules (where @huggingface/transformers
// brought it in), or from the directory in $ORT_NODE_MODULES.
//
// Commands on stdin, one JSON object a line; one JSON answer a line on stdout:
//   {"cmd": "open", "model": "x.onnx", "optimized": "x.opt.onnx" | null, "profile": prefix | null}
//        a session: intraOpNumThreads 1, interOpNumThreads 1, sequential,
//        graphOptimizationLevel "all" (the optimized graph saved if asked;
//        ONNX Runtime's profiler on, its JSON file named from prefix, if asked)
//   {"cmd": "load", "name": "b32", "file": "ids.bin", "shapes": [[b, s], ...]}
//        batches: per batch b*s int64 input_ids, then b*s int64 attention_mask;
//        the tensors are made here, before any timing
//   {"cmd": "run", "name": "b32", "limit": k | null, "out": "emb.f32" | null}
//        runs the batches (the first k) one after the other and answers
//        {"secs": wall time, "cpu": this process's CPU time over it}; with
//        "out", the output of every batch, float32, in batch order
//   {"cmd": "endprofile"}   writes the profile (ONNX Runtime names the file)
//   {"cmd": "quit"}
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

function loadOrt() {
  const places = [];
  if (process.env.ORT_NODE_MODULES) places.push(path.resolve(process.env.ORT_NODE_MODULES, '..'));
  places.push(here, path.join(here, '..', 'tools', 'npm_tokenizers'));
  for (const dir of places) {
    try {
      return createRequire(path.join(dir, 'package.json'))('onnxruntime-node');
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  throw new Error('onnxruntime-node not found in ' + places.join(', ') +
                  ' (npm ci in tools/npm_tokenizers brings it)');
}

const ort = loadOrt();
let session = null;
const sets = new Map();

function reply(x) {
  process.stdout.write(JSON.stringify(x) + '\n');
}

async function handle(c) {
  if (c.cmd === 'open') {
    const opts = {
      intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential',
      graphOptimizationLevel: 'all', enableCpuMemArena: true, enableMemPattern: true,
    };
    if (c.optimized) opts.optimizedModelFilePath = c.optimized;
    if (c.profile) Object.assign(opts, { enableProfiling: true, profileFilePrefix: c.profile });
    session = await ort.InferenceSession.create(c.model, opts);
    return { ok: true, versions: ort.env.versions, inputs: session.inputNames, outputs: session.outputNames,
             node: process.version, options: opts };
  }
  if (c.cmd === 'load') {
    const buf = fs.readFileSync(c.file);
    const all = new BigInt64Array(buf.buffer, buf.byteOffset, buf.byteLength / 8);
    const feeds = [];
    let at = 0;
    for (const [b, s] of c.shapes) {
      const n = b * s;
      const ids = all.slice(at, at + n);
      const mask = all.slice(at + n, at + 2 * n);
      at += 2 * n;
      feeds.push({
        input_ids: new ort.Tensor('int64', ids, [b, s]),
        attention_mask: new ort.Tensor('int64', mask, [b, s]),
      });
    }
    if (at !== all.length) throw new Error('shapes do not cover ' + c.file);
    sets.set(c.name, feeds);
    return { ok: true, batches: feeds.length };
  }
  if (c.cmd === 'run') {
    const feeds = sets.get(c.name);
    const k = c.limit ? Math.min(c.limit, feeds.length) : feeds.length;
    const out = c.out ? [] : null;
    const output = session.outputNames[0];
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < k; i++) {
      const r = await session.run(feeds[i]);
      if (out) out.push(r[output].data);
    }
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    if (out) {
      const fd = fs.openSync(c.out, 'w');
      for (const a of out) fs.writeSync(fd, new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
      fs.closeSync(fd);
    }
    return { secs, cpu: (cpu.user + cpu.system) / 1e6 };
  }
  if (c.cmd === 'endprofile') {
    session.endProfiling();
    return { ok: true };
  }
  if (c.cmd === 'quit') {
    reply({ ok: true });
    process.exit(0);
  }
  throw new Error('unknown command ' + c.cmd);
}

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  try {
    reply(await handle(JSON.parse(line)));
  } catch (e) {
    reply({ error: String(e && e.stack || e) });
  }
}
