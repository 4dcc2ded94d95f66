"""The characters the built-in tasks are written in: the vocabulary of the built-in tiny
model's tokenizer (`rl.core.models.tiny`), besides its special tokens. Here, below the
models, so that the tasks' generators can name them."""

TINY_CHARS = "0123456789+-*=?() abcdefghijklmnopqrstuvwxyz.,:#"
