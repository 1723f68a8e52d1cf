"""The PyTorch baseline for the decoding benchmarks: incremental decoding
with cached keys and values, as Hugging Face Transformers' generate() does
it for MarianMTModel, on the modules of tools/marian_torch.py.

- The encoder runs once; each decoder layer's cross-attention keys and
  values are computed once per input (HF: past_key_values[layer][2:4]).
- Each step feeds only the newest token; self-attention keys and values are
  appended to a cache with torch.cat (HF: past_key_values[layer][0:2]).
- Beam search keeps batch * K rows, starts with beams 1..K-1 at -inf as HF
  does, picks the 2K best (beam, token) of each sentence with one topk over
  K * vocab, and reorders the caches with index_select.  Finished sentences
  leave the batch (HF keeps computing them until the whole batch is done:
  this baseline is, if anything, faster than HF's).
- The decoding rules are Hugging Face's, as tools/marian_torch.py ports
  them, for what the models here use: the log-softmax in fp32 (the C code
  and the reference use double; benchmarks report how many outputs agree),
  then bad_words_ids (pad), forced EOS at max_length - 1 and
  renormalize_logits as the generation config says; finished hypotheses
  scored with the length penalty (length with EOS); early_stopping=False's
  heuristic.  max_length is the model's, capped at 3 times the source as
  translate()'s default runaway guard does, so both do the same work.

Everything runs under torch.inference_mode().
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import marian_torch as mt  # noqa: E402


def _heads(x, h):
    """(R, n, d) -> (R, h, n, d/h)"""
    r, n, d = x.shape
    return x.view(r, n, h, d // h).transpose(1, 2)


class IncrementalDecoder:
    def __init__(self, model):
        self.m = model.eval()
        self.cfg = model.cfg
        self.h = self.cfg["decoder_attention_heads"]
        self.pad = self.cfg["pad_token_id"]
        self.eos = self.cfg["eos_token_id"]
        self.start = self.cfg["decoder_start_token_id"]
        self.out_w = model.output_weight()
        self.bias = model.final_logits_bias[0]
        self.head = None        # an nn.Linear output layer (see quantized())
        self.gen = mt.generation_config(cfg=self.cfg)
        self.start = self.gen["decoder_start_token_id"]
        self.eos = self.gen["eos_token_id"]
        self.bad = [w[0] for w in self.gen["bad_words_ids"] or [] if len(w) == 1 and w != [self.eos]]

    @classmethod
    def quantized(cls, model):
        """PyTorch's own int8: torch.ao.quantization.quantize_dynamic on a copy
        of the model, every nn.Linear to qint8 (weights per tensor, inputs
        quantized per call), the output layer (tied to the embeddings) as an
        nn.Linear too, so that it is int8 as ours is; the same loop."""
        import copy
        m = copy.deepcopy(model)
        head = torch.nn.Linear(m.output_weight().shape[1], m.output_weight().shape[0])
        with torch.no_grad():
            head.weight.copy_(m.output_weight())
            head.bias.copy_(m.final_logits_bias[0])
        both = torch.ao.quantization.quantize_dynamic(torch.nn.ModuleDict({"m": m, "head": head}),
                                                       {torch.nn.Linear}, dtype=torch.qint8)
        dec = cls(both["m"])
        dec.head = both["head"]
        return dec

    # -------------------------------------------------------- model steps

    def encode(self, batch):
        """batch: list of id lists (EOS included).  Returns the state of each
        row: cross K/V per layer, the source pad mask, empty self caches."""
        n = max(len(s) for s in batch)
        src = torch.full((len(batch), n), self.pad, dtype=torch.long)
        for i, s in enumerate(batch):
            src[i, : len(s)] = torch.tensor(s)
        memory, pad = self.m.encode(src)
        cross = []
        for layer in self.m.decoder.layers:
            a = layer.encoder_attn
            cross.append((_heads(a.k_proj(memory), self.h), _heads(a.v_proj(memory), self.h)))
        return {"cross": cross, "pad": pad.unsqueeze(1), "self": [None] * len(cross)}

    @staticmethod
    def reorder(state, idx):
        state["cross"] = [(k.index_select(0, idx), v.index_select(0, idx)) for k, v in state["cross"]]
        state["pad"] = state["pad"].index_select(0, idx)
        state["self"] = [None if c is None else (c[0].index_select(0, idx), c[1].index_select(0, idx))
                         for c in state["self"]]

    def _attend(self, a, x, k, v, mask):
        q = _heads(a.q_proj(x) * a.hd ** -0.5, self.h)
        s = q @ k.transpose(-1, -2)
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(x.shape[0], 1, -1)
        return a.out_proj(o)

    def step(self, state, tokens, pos):
        """tokens (R,) at position pos -> fp32 log-probabilities (R, vocab)."""
        dec = self.m.decoder
        x = dec.embed(tokens.unsqueeze(1), pos)
        for i, layer in enumerate(dec.layers):
            def self_attn(h, i=i, layer=layer):
                a = layer.self_attn
                k, v = _heads(a.k_proj(h), self.h), _heads(a.v_proj(h), self.h)
                if state["self"][i] is not None:
                    k = torch.cat([state["self"][i][0], k], dim=2)
                    v = torch.cat([state["self"][i][1], v], dim=2)
                state["self"][i] = (k, v)
                return self._attend(a, h, k, v, None)

            def cross_attn(h, i=i, layer=layer):
                k, v = state["cross"][i]
                return self._attend(layer.encoder_attn, h, k, v, state["pad"])

            x = layer.block(x, layer.self_attn_layer_norm, self_attn)
            x = layer.block(x, layer.encoder_attn_layer_norm, cross_attn)
            x = layer.block(x, layer.final_layer_norm,
                            lambda h, layer=layer: layer.fc2(layer.act(layer.fc1(h))))
        if dec.layer_norm is not None:
            x = dec.layer_norm(x)
        if self.head is not None:
            return self.head(x[:, 0])
        return F.linear(x[:, 0], self.out_w, self.bias)

    def process(self, scores, cur_len, max_length, beam):
        """The logits processors these models use, on (R, vocab) scores of
        rows whose decoder input has cur_len tokens."""
        if beam:
            scores = torch.log_softmax(scores, dim=-1)
        if self.bad:
            scores[:, self.bad] = float("-inf")
        if self.gen["forced_eos_token_id"] is not None and max_length is not None and cur_len == max_length - 1:
            scores[:] = float("-inf")
            scores[:, self.gen["forced_eos_token_id"]] = 0
        if beam and self.gen["renormalize_logits"]:
            scores = torch.log_softmax(scores, dim=-1)
        return scores

    # ------------------------------------------------------------ search

    def max_length(self, src):
        """Hugging Face's (the start token counts), capped as translate() caps it by default."""
        n = self.gen["max_length"]
        if n == mt.GENERATION_DEFAULTS["max_length"]:
            n = min(n + 1, self.cfg["max_position_embeddings"])
        return min(n, self.cfg["max_position_embeddings"] + 1, 1 + math.ceil(3 * len(src)))

    @torch.inference_mode()
    def greedy(self, src):
        state = self.encode([src])
        tok = torch.tensor([self.start])
        out = []
        max_length = self.max_length(src)
        for t in range(max_length - 1):
            nxt = int(self.process(self.step(state, tok, t), t + 1, max_length, False)[0].argmax())
            if nxt == self.eos:
                break
            out.append(nxt)
            tok = torch.tensor([nxt])
        return out

    @torch.inference_mode()
    def beam(self, batch, K, length_penalty=1.0):
        """Beam search for a batch of sources (lists of ids); the rules of
        tools/marian_torch.beam_search per sentence.  Returns id lists."""
        B = len(batch)
        state = self.encode(batch)
        self.reorder(state, torch.arange(B).repeat_interleave(K))
        active = list(range(B))                  # sentence of each group of K rows
        toks = [[[self.start]] * K for _ in range(B)]
        scores = torch.full((B, K), float("-inf"), dtype=torch.float32)
        scores[:, 0] = 0.0
        finished = [[] for _ in range(B)]
        result = [None] * B
        maxlen = [self.max_length(s) for s in batch]
        last = torch.full((B * K,), self.start, dtype=torch.long)
        for t in range(1, max(maxlen)):
            lp = self.process(self.step(state, last, t - 1), t, None, True)  # (A*K, V)
            if self.gen["forced_eos_token_id"] is not None:
                for a, sent in enumerate(active):
                    if t == maxlen[sent] - 1:
                        lp[a * K:(a + 1) * K] = float("-inf")
                        lp[a * K:(a + 1) * K, self.gen["forced_eos_token_id"]] = 0
            V = lp.shape[1]
            A = len(active)
            cand = (lp.view(A, K, V) + scores.view(A, K, 1)).view(A, K * V)
            top_s, top_i = torch.topk(cand, 2 * K, dim=1)
            top_s, top_i = top_s.tolist(), top_i.tolist()
            keep_rows, new_last, new_scores, still = [], [], [], []
            for a, sent in enumerate(active):
                new = []
                last_step = t == maxlen[sent] - 1
                for rank in range(2 * K):
                    s, ix = top_s[a][rank], top_i[a][rank]
                    bi, tok = divmod(ix, V)
                    if s == float("-inf"):
                        continue
                    if tok == self.eos or last_step:
                        if rank < K:
                            hyp = toks[sent][bi][1:] + ([] if tok == self.eos else [tok])
                            finished[sent].append((s / t ** length_penalty, hyp))
                            finished[sent].sort(key=lambda f: -f[0])
                            del finished[sent][K:]
                        continue
                    if len(new) < K:
                        new.append((bi, tok, s))
                done = last_step or not new
                if not done and len(finished[sent]) >= K:
                    # _check_early_stop_heuristic (early_stopping=False)
                    done = min(f[0] for f in finished[sent]) >= new[0][2] / t ** length_penalty
                if done:
                    fin = finished[sent]
                    best = max(range(len(fin)), key=lambda i: (fin[i][0], -i))
                    result[sent] = fin[best][1]
                    continue
                while len(new) < K:             # fewer than K live: pad with dead beams
                    new.append((new[0][0], new[0][1], float("-inf")))
                toks[sent] = [toks[sent][bi] + [tok] for bi, tok, _ in new]
                keep_rows += [a * K + bi for bi, _, _ in new]
                new_last += [tok for _, tok, _ in new]
                new_scores += [s for _, _, s in new]
                still.append(sent)
            if not still:
                break
            active = still
            self.reorder(state, torch.tensor(keep_rows))
            last = torch.tensor(new_last)
            scores = torch.tensor(new_scores, dtype=torch.float32)
        return result
