"""A Hugging Face transformers GPT-2 built from a config (no weights downloaded): the second worked example of
docs/your_model.md. Needs the optional extra: `pip install -e '.[hf]'`.

`python -m suites advise examples.hf_model:make_model --device cpu`. The batch is a dict (passed as keyword
arguments) with `labels`, so the model returns a ModelOutput whose `loss` field is the loss.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

BATCH = 8
SEQ = 64
VOCAB = 1024


def make_model() -> GPT2LMHeadModel:
    # dropout off: the levers are compared on the same training trajectory (compiled dropout draws other numbers)
    config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=128, n_layer=2, n_head=4,
                        bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def make_batch(device: torch.device) -> dict[str, torch.Tensor]:
    """Counting sequences from random starts: learnable in a few steps, so the loss against fp32's means
    something (on uniformly random tokens no precision makes progress to compare)."""
    start = torch.randint(VOCAB, (BATCH, 1), device=device)
    ids = (start + torch.arange(SEQ, device=device)) % VOCAB
    return {"input_ids": ids, "labels": ids}
