"""The one writer behind ``make_think_gguf.py`` and ``make_embed_gguf.py``: a tiny random-weight
llama (2 layers, 64 wide, 4 heads / 2 KV heads, FFN 128) that reuses SmolLM2's GPT-2 style
tokenizer copied from the cached SmolLM2-135M-Instruct GGUF.

Deterministic: same tokenizer input, seed and options -> byte-identical file (keys are written
in a fixed order; the vocab-sized matrices are F16, the rest F32).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover
    sys.exit("the tiny GGUF scripts need the `gguf` and `numpy` packages (the project venv has them)")

N_LAYER = 2
N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 2
N_FF = 128
HEAD_DIM = N_EMBD // N_HEAD

# Arrays are re-added as plain lists; GGUFWriter infers STRING / INT32 element types.
TOKENIZER_KEYS_ARRAY = (
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
)
TOKENIZER_KEYS_SCALAR = {
    "tokenizer.ggml.model": gguf.GGUFValueType.STRING,
    "tokenizer.ggml.pre": gguf.GGUFValueType.STRING,
    "tokenizer.ggml.bos_token_id": gguf.GGUFValueType.UINT32,
    "tokenizer.ggml.eos_token_id": gguf.GGUFValueType.UINT32,
    "tokenizer.ggml.unknown_token_id": gguf.GGUFValueType.UINT32,
    "tokenizer.ggml.padding_token_id": gguf.GGUFValueType.UINT32,
    "tokenizer.ggml.add_bos_token": gguf.GGUFValueType.BOOL,
    "tokenizer.ggml.add_space_prefix": gguf.GGUFValueType.BOOL,
}


def default_cache_dir() -> Path:
    """``$PLAYGROUND_CACHE`` or ``~/.cache/playground`` (where build-llama-server.sh caches)."""
    return Path(os.environ.get("PLAYGROUND_CACHE", Path.home() / ".cache" / "playground"))


def find_tokenizer_source() -> Path | None:
    """The newest cached ``llama-server-*/smollm2.gguf``, or None before the llama build."""
    candidates = sorted(default_cache_dir().glob("llama-server-*/smollm2.gguf"))
    return candidates[-1] if candidates else None


def write_tiny_llama(tokenizer_from: Path, out: Path, *, seed: int, name: str, description: str, n_ctx: int,
                     pooling: gguf.PoolingType | None = None, chat_template: str | None = None) -> Path:
    """Write the model to ``out`` atomically (via ``out.tmp``) and return ``out``.

    ``pooling``: set for an embedding model (``llama-server --embeddings``); ``chat_template``:
    a Jinja template stored as ``tokenizer.chat_template``. Raises ``KeyError`` if the source has
    no ``tokenizer.ggml.tokens``.
    """
    reader = gguf.GGUFReader(str(tokenizer_from))
    fields = reader.fields
    n_vocab = len(fields["tokenizer.ggml.tokens"].contents())
    rng = np.random.default_rng(seed)

    def rand(*shape: int, std: float) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    tmp = out.with_name(out.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), "llama")
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name(name)
    writer.add_description(description)
    writer.add_context_length(n_ctx)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    if pooling is not None:
        writer.add_pooling_type(pooling)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    for key, vtype in TOKENIZER_KEYS_SCALAR.items():
        if key in fields:
            value = fields[key].contents()
            if vtype == gguf.GGUFValueType.STRING:
                writer.add_string(key, value)
            elif vtype == gguf.GGUFValueType.BOOL:
                writer.add_bool(key, bool(value))
            else:
                writer.add_uint32(key, int(value))
    for key in TOKENIZER_KEYS_ARRAY:
        if key in fields:
            writer.add_array(key, list(fields[key].contents()))
    if chat_template is not None:
        writer.add_chat_template(chat_template)

    # Tensors: numpy shape is (rows=out, cols=in); GGUF stores ne reversed. The two vocab-sized
    # matrices are F16 to halve the file; a separate (untied) random output projection keeps
    # greedy decoding from just echoing the last input token.
    writer.add_tensor("token_embd.weight", rand(n_vocab, N_EMBD, std=1.0).astype(np.float16))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("output.weight", rand(n_vocab, N_EMBD, std=0.5).astype(np.float16))
    n_kv = N_HEAD_KV * HEAD_DIM
    for i in range(N_LAYER):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", rand(N_EMBD, N_EMBD, std=0.25))
        writer.add_tensor(f"blk.{i}.attn_k.weight", rand(n_kv, N_EMBD, std=0.25))
        writer.add_tensor(f"blk.{i}.attn_v.weight", rand(n_kv, N_EMBD, std=0.25))
        writer.add_tensor(f"blk.{i}.attn_output.weight", rand(N_EMBD, N_EMBD, std=0.25))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", rand(N_FF, N_EMBD, std=0.25))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", rand(N_FF, N_EMBD, std=0.25))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", rand(N_EMBD, N_FF, std=0.25))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, out)
    return out
