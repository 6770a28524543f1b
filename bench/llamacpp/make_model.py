"""Writes a tiny llama-architecture GGUF model with random weights and a small vocabulary.

No weights can be downloaded where heisenbench is tested, so the real engine runs on a model
made here: 2 layers, width 64, 4 heads, context 512, F32 (under 1 MB). Its output is random
words. Control and byte tokens are pushed down: the residual stream's dimension 0 is held
at a constant positive value (every embedding has +1 there and no layer writes to it), and
the output rows of those tokens weigh it by -50, so their logits sit far below any word's.

usage: make_model.py OUT.gguf [--seed N]
"""

import argparse

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
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)

    # SentencePiece-style vocabulary: unk, bos, eos, the 256 byte tokens llama.cpp requires,
    # then words with the SentencePiece space marker.
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{i:02X}>".encode() for i in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, control, byte
    words = sorted(set(WORDS))
    tokens += [("\u2581" + w).encode() for w in words]
    types += [1] * len(words)
    scores = [0.0] * 259 + [-float(i) for i in range(len(words))]
    n_vocab = len(tokens)
    n_special = 259

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
    head[:n_special, 0] = -50.0
    w.add_tensor("output.weight", head)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: vocab {n_vocab}, {N_LAYER} layers, width {N_EMBD}")


if __name__ == "__main__":
    main()
