"""GSM8K items: the questions to ask and the few-shot examples, from `datasets` or from JSONL files.

Why two sources: on a machine with network (or a warm Hugging Face cache) `openai/gsm8k` is the canonical
data; GPU clusters are often offline, so `--data-file` takes the `{"question", "answer"}` JSONL that
openai/grade-school-math publishes (and that `../shared/data/gsm8k/` holds). `datasets` is imported lazily,
only here, and never allowed to hang on the network: when huggingface.co is unreachable we switch it to
offline mode before importing it, so a cached copy still works and a missing one fails at once.

Few-shot examples (`--num-shots K`), in order of precedence:
1. `--shots-file FILE`: its first K lines.
2. Without `--data-file`: the first K items of the `train` split (as lm-eval's fewshot_split is train).
3. With `--data-file X`: the first K lines of a train file next to X if one exists (`train.jsonl`, or X's name
   with "test" replaced by "train", or `<part before "test">train*.jsonl`); otherwise the first K items of X
   itself, which are then not asked (no question is its own example; SGLang's run_eval does the same).
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

from pdctl.errors import UserError
from pdctl.evals.base import EvalData, Item
from pdctl.evals.gsm8k.scoring import INVALID, label_value
from pdctl.extras import missing_module_error
from pdctl.jsonfiles import iter_jsonl

DATASET = "openai/gsm8k"
CONFIG = "main"
HUB_HOST = "huggingface.co"
NETWORK_PROBE_TIMEOUT_S = 3.0


def read_jsonl(path: str | Path) -> list[Item]:
    """Items of a `{"question", "answer"}` JSONL file; a clear UserError naming the line when malformed."""
    path = Path(path)
    items: list[Item] = []
    for lineno, doc in iter_jsonl(path, "GSM8K data file"):
        if not isinstance(doc, dict) or not isinstance(doc.get("question"), str) or not isinstance(
            doc.get("answer"), str
        ):
            raise UserError(f'{path}:{lineno}: expected an object with string "question" and "answer"')
        items.append(Item(index=len(items), question=doc["question"], answer=doc["answer"]))
    if not items:
        raise UserError(f"{path}: no GSM8K items in the file")
    return items


def _hub_reachable(host: str = HUB_HOST, timeout: float = NETWORK_PROBE_TIMEOUT_S) -> bool:
    """Whether HOST:443 accepts a TCP connection within TIMEOUT (DNS included: it runs in a thread)."""
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, 443), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return bool(result and result[0])


def _prepare_hf_env() -> bool:
    """Set Hugging Face env so `datasets` never blocks: offline when the hub is unreachable. True = offline."""
    offline_flags = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    if any(os.environ.get(flag, "").lower() in ("1", "true", "yes", "on") for flag in offline_flags):
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
        return True
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "5")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
    if not _hub_reachable():
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
        return True
    return False


def load_hf_split(split: str) -> list[Item]:
    """The SPLIT ("test" or "train") of openai/gsm8k (config main) via `datasets`, cache first.

    Raises UserError suggesting --data-file when it is neither cached nor downloadable.
    """
    offline = _prepare_hf_env()
    try:
        import datasets  # heavy: imported only when the user did not give --data-file
    except ModuleNotFoundError as exc:
        error = missing_module_error(exc, f"loading {DATASET} from the Hub")
        if error is None:
            raise
        raise UserError(f"{error.message}; or pass --data-file JSONL with {{\"question\", \"answer\"}} lines",
                        detail=error.detail) from exc
    try:
        datasets.logging.set_verbosity_error()
        rows = datasets.load_dataset(DATASET, CONFIG, split=split)
    except Exception as exc:  # datasets raises many types (ConnectionError, FileNotFoundError, ValueError...)
        where = "huggingface.co is unreachable and it is not in the local datasets cache" if offline else str(exc)
        raise UserError(
            f"cannot load {DATASET} ({CONFIG}, {split}): {where}. Pass --data-file JSONL with "
            '{"question", "answer"} lines (e.g. the test.jsonl of openai/grade-school-math).',
            detail=f"{type(exc).__name__}: {exc}" if offline else None,
        ) from exc
    return [Item(index=i, question=str(r["question"]), answer=str(r["answer"])) for i, r in enumerate(rows)]


def sibling_train_file(data_file: str | Path) -> Path | None:
    """A train file next to DATA_FILE to take few-shot examples from (see the module docstring), or None."""
    data_file = Path(data_file)
    folder, name = data_file.parent, data_file.name
    candidates: list[Path] = []
    if "test" in name:
        candidates.append(folder / name.replace("test", "train"))
        head = name.split("test", 1)[0]
        candidates.extend(sorted(folder.glob(f"{head}train*{data_file.suffix}")))
    candidates.append(folder / "train.jsonl")
    for candidate in candidates:
        if candidate.is_file() and candidate.resolve() != data_file.resolve():
            return candidate
    return None


def load_eval_data(
    *,
    data_file: str | Path | None,
    shots_file: str | Path | None,
    num_questions: int | None,
    num_shots: int,
) -> EvalData:
    """Questions (the first NUM_QUESTIONS, all when None) and NUM_SHOTS examples, per the module's rules."""
    if num_shots < 0:
        raise UserError(f"--num-shots must be >= 0, got {num_shots}")
    if num_questions is not None and num_questions < 1:
        raise UserError(f"--num-questions must be >= 1, got {num_questions}")
    shots_pool: list[Item] | None = None
    shots_source = ""
    if shots_file is not None:
        shots_pool, shots_source = read_jsonl(shots_file), str(shots_file)
    if data_file is not None:
        pool, source = read_jsonl(data_file), str(data_file)
        if shots_pool is None and num_shots > 0:
            sibling = sibling_train_file(data_file)
            if sibling is not None:
                shots_pool, shots_source = read_jsonl(sibling), str(sibling)
            else:
                # The examples come from the data file itself, and are not asked.
                shots_pool, shots_source = pool[:num_shots], f"{data_file} (first {num_shots}, not asked)"
                pool = pool[num_shots:]
    else:
        pool, source = load_hf_split("test"), f"{DATASET} {CONFIG} test"
        if shots_pool is None and num_shots > 0:
            shots_pool, shots_source = load_hf_split("train"), f"{DATASET} {CONFIG} train"
    shots = (shots_pool or [])[:num_shots]
    if len(shots) < num_shots:
        raise UserError(f"--num-shots {num_shots}: only {len(shots)} examples in {shots_source}")
    questions = pool if num_questions is None else pool[:num_questions]
    if not questions:
        raise UserError(f"no questions left in {source} after taking {num_shots} few-shot examples from it")
    for item in questions:
        if label_value(item.answer) == INVALID:
            raise UserError(f"{source}: item {item.index} has no numeric answer (expected '#### N' at its end)")
    return EvalData(questions=questions, shots=shots, source=source, shots_source=shots_source or "none")
