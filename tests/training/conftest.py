from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

WORDS = {
    "en": "the a cat dog house tree river city walks sees eats big small red old new".split(),
    "de": "der die katze hund haus baum fluss stadt geht sieht isst groß klein rot alt neu".split(),
    "uz": "bu bir mushuk it uy daraxt daryo shahar yuradi koʻradi yeydi katta kichik qizil eski yangi".split(
        " "
    ),
}


def free_port() -> int:
    """A loopback port nobody listens on, for a process group's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_tiny_parallel(path: Path, rows: int = 96, seed: int = 0) -> Path:
    """A made-up word-for-word 'parallel' table: enough structure for MEXMA to learn something."""
    rng = random.Random(seed)
    lines = ["en\tde\tuz"]
    for _ in range(rows):
        idx = [rng.randrange(len(WORDS["en"])) for _ in range(rng.randint(2, 12))]
        lines.append("\t".join(" ".join(WORDS[lang][i] for i in idx) for lang in ("en", "de", "uz")))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def tiny_recipe(data: Path, **training) -> dict:
    recipe = {
        "seed": 3,
        "model": {
            "init": "scratch",
            "name_or_path": None,
            "attention": "sdpa",
            "max_length": 32,
            "config": {
                "model_type": "xlm-roberta",
                "hidden_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "intermediate_size": 64,
                "max_position_embeddings": 40,
                "hidden_dropout_prob": 0.1,
                "attention_probs_dropout_prob": 0.1,
            },
        },
        "tokenizer": {"train": True, "vocab_size": 120},
        "data": {"parallel": [str(data)], "pivot": "en", "languages": None},
        "objective": {"name": "mexma", "head_layers": 1, "head_heads": 2},
        "training": {
            "batch_size": 8,
            "grad_accum": 1,
            "max_steps": 6,
            "lr": 1e-3,
            "weight_decay": 0.01,
            "scheduler": "linear",
            "warmup_steps": 2,
            "max_grad_norm": 1.0,
            "log_every": 1,
            "checkpoint_every": 2,
            "keep_checkpoints": 5,
            "device": "cpu",
            "num_threads": 1,
        },
    }
    recipe["training"].update(training)
    return recipe


# The objective section of tiny_recipe for each objective: MEXMA's flat keys stay (the other
# objectives leave them alone); EMMA-X reaches phase 2 at the third batch and alternates.
OBJECTIVES = {
    "mexma": {},
    # MEXMA for a pretrained start: both anchors' targets are computed in prepare() from run/init,
    # so a resumed run and every torchrun process must compute the same ones.
    "mexma-anchored": {"anchor_weight": 10.0, "anchor_translation_weight": 1.0},
    "ems": {"name": "ems"},
    "contrastive": {"name": "contrastive"},
    "emmax": {"name": "emmax", "emmax": {"phase1_steps": 2, "phase2_every": 2, "queue_size": 16}},
}


def recipe_for(objective: str, data: Path, **training) -> dict:
    """tiny_recipe training ``objective``; EMMA-X's non-parallel text is the data's uz column."""
    recipe = tiny_recipe(data, **training)
    recipe["objective"].update(OBJECTIVES[objective])
    if objective == "emmax":
        recipe["data"]["monolingual"] = [{"path": str(data), "column": "uz"}]
    return recipe


@pytest.fixture()
def tiny_data(tmp_path: Path) -> Path:
    return write_tiny_parallel(tmp_path / "tiny.tsv")
