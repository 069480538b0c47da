#!/usr/bin/env python3
"""Convert Ponder's default GGUF model into a Hugging Face directory that vLLM loads.

    python scripts/vllm_convert.py [--gguf models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf] \
        [--out target/vllm-model] [--dtype float32|bfloat16|float16]

Writes config.json, generation_config.json, model.safetensors, tokenizer.json,
tokenizer_config.json (with the GGUF's chat template) and special_tokens_map.json.

Only the llama architecture is handled (SmolLM2 is one). The tensors are read and
dequantized with the `gguf` package (pinned by scripts/setup-vllm.sh); llama.cpp's
convert script permutes the rows of attn_q / attn_k for its rotary layout, so those are
permuted back exactly as transformers' GGUF loader does
(`modeling_gguf_pytorch_utils.py`, `_reverse_permute_weights`). A GGUF without
output.weight has tied embeddings. The tokenizer (gpt2-style BPE in tokenizer.ggml.*)
is rebuilt by transformers' own GGUF tokenizer converter and saved as tokenizer.json.

Idempotent: a second run with the same input rewrites the same files (model.safetensors is
byte-identical), and `--check` only verifies that the directory exists and is complete.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_GGUF = REPO / "models" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_OUT = REPO / "target" / "vllm-model"
REQUIRED = [
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
]


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def reverse_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's `permute` of q/k rows (transformers' `_reverse_permute_weights`)."""
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


TENSOR_MAP = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
BLOCK_MAP = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


def hf_name(name: str) -> str:
    if name in TENSOR_MAP:
        return TENSOR_MAP[name]
    if name.startswith("blk."):
        _, idx, rest = name.split(".", 2)
        if rest in BLOCK_MAP:
            return f"model.layers.{int(idx)}.{BLOCK_MAP[rest]}"
    raise SystemExit(f"vllm_convert: unmapped GGUF tensor {name!r}")


def convert_tensors(reader, n_head: int, n_kv: int, dtype: str) -> tuple[dict, bool]:
    import torch
    from gguf.quants import dequantize

    tdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    out: dict[str, "torch.Tensor"] = {}
    for t in reader.tensors:
        # GGUF stores shapes innermost-first; dequantize() returns the numpy (row-major) shape.
        w = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)
        w = w.reshape([int(d) for d in reversed(t.shape.tolist())])
        if t.name.endswith("attn_q.weight"):
            w = reverse_permute(w, n_head)
        elif t.name.endswith("attn_k.weight"):
            w = reverse_permute(w, n_kv)
        out[hf_name(t.name)] = torch.from_numpy(np.ascontiguousarray(w)).to(tdtype)
    tied = "lm_head.weight" not in out
    return out, tied


def build_config(reader, tied: bool, dtype: str, vocab_size: int) -> dict:
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise SystemExit(f"vllm_convert: only llama GGUFs are supported, got {arch!r}")
    g = lambda k, d=None: field(reader, f"llama.{k}", d)  # noqa: E731
    n_embd = int(g("embedding_length"))
    n_head = int(g("attention.head_count"))
    head_dim = int(g("attention.key_length", n_embd // n_head))
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": n_embd,
        "intermediate_size": int(g("feed_forward_length")),
        "num_hidden_layers": int(g("block_count")),
        "num_attention_heads": n_head,
        "num_key_value_heads": int(g("attention.head_count_kv", n_head)),
        "head_dim": head_dim,
        "max_position_embeddings": int(g("context_length")),
        "rms_norm_eps": float(g("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(g("rope.freq_base", 10000.0)),
        "rope_scaling": None,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": tied,
        "vocab_size": vocab_size,
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "pad_token_id": field(reader, "tokenizer.ggml.padding_token_id"),
        "torch_dtype": dtype,
        "initializer_range": 0.02,
        "pretraining_tp": 1,
        "use_cache": True,
    }


def save_tokenizer(gguf_path: Path, out: Path, reader) -> None:
    from transformers import AutoTokenizer

    # transformers rebuilds the BPE tokenizer from tokenizer.ggml.* (GGUFGPTConverter).
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    template = field(reader, "tokenizer.chat_template")
    if template:
        tok.chat_template = template
    tok.save_pretrained(str(out))
    # Make sure the chat template sits in tokenizer_config.json (newer transformers may
    # write chat_template.jinja instead; vLLM reads either, the brief wants the config).
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    if template:
        cfg["chat_template"] = template
    cfg["add_bos_token"] = bool(field(reader, "tokenizer.ggml.add_bos_token", False))
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    jinja = out / "chat_template.jinja"
    if jinja.exists():
        jinja.unlink()


def complete(out: Path) -> bool:
    return all((out / f).is_file() for f in REQUIRED)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", type=Path, default=DEFAULT_GGUF)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--check", action="store_true", help="only check the output directory is complete")
    args = ap.parse_args()

    if args.check:
        ok = complete(args.out)
        print(f"vllm_convert: {args.out} {'complete' if ok else 'incomplete'}")
        return 0 if ok else 1

    from gguf import GGUFReader
    from safetensors.torch import save_file

    if not args.gguf.is_file():
        print(f"vllm_convert: {args.gguf} missing (run scripts/setup-models.sh)", file=sys.stderr)
        return 1
    reader = GGUFReader(str(args.gguf))
    n_head = int(field(reader, "llama.attention.head_count"))
    n_kv = int(field(reader, "llama.attention.head_count_kv", n_head))

    tensors, tied = convert_tensors(reader, n_head, n_kv, args.dtype)
    vocab = tensors["model.embed_tokens.weight"].shape[0]
    config = build_config(reader, tied, args.dtype, vocab)

    # Write into a temp dir next to the target and swap it in, so a half-written
    # directory never looks complete.
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".vllm-model-", dir=args.out.parent))
    try:
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        gen = {
            "bos_token_id": config["bos_token_id"],
            "eos_token_id": config["eos_token_id"],
            "pad_token_id": config["pad_token_id"],
        }
        (tmp / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
        save_tokenizer(args.gguf, tmp, reader)
        sha = hashlib.sha256(args.gguf.read_bytes()).hexdigest()
        (tmp / "SOURCE").write_text(f"{sha}  {args.gguf.name}\nconverted by scripts/vllm_convert.py dtype={args.dtype}\n")
        if args.out.exists():
            shutil.rmtree(args.out)
        os.chmod(tmp, 0o755)
        for f in tmp.iterdir():
            os.chmod(f, 0o644)
        os.replace(tmp, args.out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    n_params = sum(t.numel() for t in tensors.values())
    print(f"vllm_convert: wrote {args.out} ({len(tensors)} tensors, {n_params / 1e6:.1f}M params, tied={tied}, {args.dtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
