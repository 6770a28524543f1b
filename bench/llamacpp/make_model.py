"""Writes a tiny llama-architecture GGUF model with random weights and a small vocabulary.

No weights can be downloaded where heisenbench is tested, so the real engine runs on a model
made here: 2 layers, width 64, 4 heads, context 512, F32 (under 1 MB). Its output is random
words. Control, byte and word-piece tokens are pushed down: the residual stream's dimension
0 is held at a constant positive value (every embedding has +1 there and no layer writes to
it), and the output rows of those tokens weigh it by -500, so their logits sit far below any
whole word's.

The vocabulary is a proper SentencePiece one: single characters, every prefix of every word
(with the space marker) and the words, so llama.cpp's merges reach whole words instead of
falling back to bytes. `--tokenizer FILE` also writes the same tokenizer as a Hugging Face
`tokenizer.json` (a BPE with one merge per prefix step, byte fallback, a BOS post-processor),
which heisenbench's `run --tokenizer` reads to build prompts of an exact token count.

usage: make_model.py OUT.gguf [--seed N] [--tokenizer tokenizer.json]
"""

import argparse
import json

import numpy as np
import gguf

N_EMBD, N_FF, N_LAYER, N_HEAD, N_CTX = 64, 128, 2, 4, 512
WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when if "
    "will two more no out so up said what its about than into them can only other time new "
    "some could these may first then do any like my now over such our man me even most made "
    "after also did many before must through back years where much your way well down should "
    "because each just those people how too little state good very make world still own see "
    "men work long get here between both life being under never day same another know while "
    "last might us great old year off come since against go came right used take three"
).split()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tokenizer", help="also write the tokenizer as a Hugging Face tokenizer.json")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)

    # SentencePiece-style vocabulary: unk, bos, eos, the 256 byte tokens llama.cpp requires,
    # then single characters, then proper prefixes of the words (merge steps), then the words,
    # all with the SentencePiece space marker where they start a word.
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{i:02X}>".encode() for i in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, control, byte
    words = ["\u2581" + w for w in sorted(set(WORDS))]
    chars = sorted({c for w in words for c in w})
    prefixes = sorted({w[:n] for w in words for n in range(2, len(w))} - set(words))
    pieces = chars + sorted(prefixes, key=lambda p: (len(p), p)) + words
    tokens += [p.encode() for p in pieces]
    types += [1] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    n_vocab = len(tokens)
    n_special = 259 + len(chars) + len(prefixes)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("heisenbench-tiny")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    def rand(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # numpy shapes are ggml's reversed: (rows = output dim, columns = input dim).
    embd = rand(n_vocab, N_EMBD)
    embd[:, 0] = 1.0
    w.add_tensor("token_embd.weight", embd)
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, np.float32))
        for t in ("attn_q", "attn_k", "attn_v"):
            w.add_tensor(p + t + ".weight", rand(N_EMBD, N_EMBD))
        out = rand(N_EMBD, N_EMBD)
        out[0, :] = 0.0  # nothing writes to dimension 0
        w.add_tensor(p + "attn_output.weight", out)
        w.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, np.float32))
        w.add_tensor(p + "ffn_gate.weight", rand(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", rand(N_FF, N_EMBD))
        down = rand(N_EMBD, N_FF)
        down[0, :] = 0.0
        w.add_tensor(p + "ffn_down.weight", down)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, np.float32))
    head = rand(n_vocab, N_EMBD, scale=1.0)
    head[:, 0] = 0.0
    head[:n_special, 0] = -500.0
    w.add_tensor("output.weight", head)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: vocab {n_vocab}, {N_LAYER} layers, width {N_EMBD}")
    if a.tokenizer:
        write_tokenizer_json(a.tokenizer, [t.decode() for t in tokens], pieces)
        print(f"wrote {a.tokenizer}")


def write_tokenizer_json(path, vocab, pieces):
    """The GGUF's tokenizer in Hugging Face's format.

    llama.cpp's SentencePiece tokenizer merges adjacent symbols whose concatenation is in the
    vocabulary and falls back to bytes for what is left. Every multi-character piece here
    starts with the space marker and extends a shorter piece by one character, so inside a
    word exactly one merge is possible at each step and any merge order gives the same
    tokens: a BPE whose merges are those steps tokenizes identically.
    """
    merges = [f"{p[:-1]} {p[-1]}" for p in pieces if len(p) >= 2]
    special = [
        {"id": i, "content": vocab[i], "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i in range(3)
    ]
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": special,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        ]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": "<unk>",
            "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
            "byte_fallback": True, "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(vocab)},
            "merges": merges,
        },
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
