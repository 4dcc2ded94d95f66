"""Full-size byte-level BPE tokenizers of the shape families, built once and cached.

`build_tokenizer(family)` gives a transformers tokenizer as `AutoTokenizer` loads it from
a real folder; `write_tokenizer_files(family, folder)` puts `tokenizer.json` and
`tokenizer_config.json` into a model folder. Building takes about two seconds; the files
are cached in a folder keyed by a fingerprint of the code that builds them (a change to
the corpus, the families or the templates makes new files, never stale ones).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rl.core.models import bpe, bpe_corpus, chat_templates, tokenizer_families
from rl.core.models.tokenizer_families import TokenizerFamily, tokenizer_config, tokenizer_family

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
CACHE_ENV = "RL_MODEL_SHAPES_CACHE"


def default_cache_dir() -> Path:
    """`$RL_MODEL_SHAPES_CACHE`, else `rl-model-shapes` under the system's temp folder."""
    return Path(os.environ.get(CACHE_ENV) or Path(tempfile.gettempdir()) / "rl-model-shapes")


def _fingerprint() -> str:
    """Hash of the modules that decide the files' content, and of the tokenizers version."""
    import tokenizers

    digest = hashlib.sha256(tokenizers.__version__.encode())
    for module in (bpe, bpe_corpus, chat_templates, tokenizer_families):
        digest.update(Path(str(module.__file__)).read_bytes())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()[:16]


def _post_processor(family: TokenizerFamily) -> Any:
    from tokenizers import processors

    byte_level = processors.ByteLevel(trim_offsets=False)
    if not family.prepends_bos:
        return byte_level
    bos = family.bos_token
    assert bos is not None
    bos_id = family.token_id(bos)
    prepend = processors.TemplateProcessing(
        single=f"{bos}:0 $A:0",
        pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
        special_tokens=[(bos, bos_id)],
    )
    return processors.Sequence([byte_level, prepend])


def backend_tokenizer(family: TokenizerFamily) -> Any:
    """The `tokenizers.Tokenizer` of `family`: BPE of the real size, its pre-tokenizer,
    ByteLevel decoding, the added tokens at their real ids."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

    vocab, merges = bpe.byte_level_vocab(
        family.split_regex, family.regular_tokens, digit_run=family.digit_run
    )
    tokenizer = Tokenizer(
        models.BPE(vocab=vocab, merges=merges, ignore_merges=family.ignore_merges)
    )
    if family.nfc:
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = bpe.split_pre_tokenizer(family.split_regex)
    tokenizer.post_processor = _post_processor(family)
    tokenizer.decoder = decoders.ByteLevel()
    added = [
        AddedToken(content, special=special, normalized=False)
        for content, special in family.added_tokens
    ]
    tokenizer.add_tokens(added)
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if size != family.size:
        raise RuntimeError(f"{family.name}: built {size} tokens, not {family.size}")
    return tokenizer


def tokenizer_folder(family: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cached folder holding `family`'s tokenizer files, built when missing."""
    spec = tokenizer_family(family)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = root / f"{spec.name}-{_fingerprint()}"
    if all((folder / name).is_file() for name in TOKENIZER_FILES):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=root))
    try:
        backend_tokenizer(spec).save(str(staging / "tokenizer.json"))
        config = json.dumps(tokenizer_config(spec), indent=2, ensure_ascii=False)
        (staging / "tokenizer_config.json").write_text(config + "\n", encoding="utf-8")
        staging.chmod(0o755)
        try:
            staging.rename(folder)  # atomic; another process may have won the race
        except OSError:
            if not all((folder / name).is_file() for name in TOKENIZER_FILES):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def write_tokenizer_files(
    family: str, folder: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None
) -> None:
    """Copy `family`'s tokenizer.json and tokenizer_config.json into `folder`."""
    source = tokenizer_folder(family, cache_dir)
    for name in TOKENIZER_FILES:
        shutil.copyfile(source / name, Path(folder) / name)


def build_tokenizer(family: str, cache_dir: str | os.PathLike[str] | None = None) -> Any:
    """`family`'s tokenizer ("qwen2.5", "qwen3", "llama-3.2") as `AutoTokenizer` loads it."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_folder(family, cache_dir)))
