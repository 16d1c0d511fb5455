"""The TRL recipes of docs/training.md, run as written in the `trl` consumer venv (torch on the CPU).

`recipes()` reads the recipe code blocks (each after a `<!-- recipe: NAME -->` marker) and swaps the run path
and the model name for a real run and a tiny model; `TRAIN` (a script for `run_consumer("trl", TRAIN, args)`)
builds that model, runs each recipe with its `SFTTrainer` and reports, per recipe, the logged losses and, per
row, the rendered text and the trained text (the tokens `assistant_masks` marks, as contiguous segments);
then it renders the chat export and the mapped run files through Hermes 3's `tool_use` template.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.run import ROOT

TRAINING_DOC = ROOT / "docs" / "training.md"
HERMES3_TEMPLATE = Path(__file__).parent / "templates" / "hermes3_tool_use.jinja"
DOC_RUN, DOC_MODEL = "outputs/my_run", "Qwen/Qwen2.5-0.5B-Instruct"


def recipes(run_dir: Path, model_dir: Path) -> dict[str, str]:
    """NAME -> the recipe's Python code, with the doc's run path and model name replaced."""
    out = {}
    for part in TRAINING_DOC.read_text().split("<!-- recipe: ")[1:]:
        name, rest = part.split(" -->", 1)
        code = rest.split("```python\n", 1)[1].split("```", 1)[0]
        assert DOC_RUN in code and DOC_MODEL in code, name
        out[name] = code.replace(DOC_RUN, str(run_dir)).replace(DOC_MODEL, str(model_dir))
    return out


TRAIN = r"""
import json, math, os, sys, tempfile
os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
os.environ["HF_HOME"] = tempfile.mkdtemp()
from pathlib import Path
import torch, trl
torch.set_num_threads(1)  # (a tiny model: threads would only contend for the cores)
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

args = json.loads(sys.argv[1])
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
STEPS = 3

def tokenizer(texts):
    # A byte-level BPE trained on the run's own files: every text encodes, rows stay short.
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=6000, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")

# 1. A tiny Qwen2 model with random weights, saved as a model dir with Qwen2.5's chat template (TRL's copy).
model_dir = Path(args["model_dir"])
tok = tokenizer(Path(p).read_text() for p in args["texts"])
tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
tok.save_pretrained(model_dir)
torch.manual_seed(0)
config = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16384,
                     tie_word_embeddings=True, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
Qwen2ForCausalLM(config).save_pretrained(model_dir)

# 2. Test settings, not the recipe's: a few steps, every loss logged, CPU in float32 (bf16 is slow there), nothing
# saved, no truncation (so that every assistant token can be checked).
class SFTConfig(trl.SFTConfig):
    def __init__(self, *a, **kw):
        kw.update(max_steps=STEPS, logging_steps=1, learning_rate=3e-3, lr_scheduler_type="constant", warmup_steps=0,
                  per_device_train_batch_size=4, report_to="none", save_strategy="no", use_cpu=True, seed=0,
                  max_length=None, dataloader_num_workers=0, disable_tqdm=True, gradient_checkpointing=False,
                  bf16=False)
        super().__init__(*a, **kw)
trl.SFTConfig = SFTConfig

def segments(ids, mask):
    out, cur = [], []
    for i, m in zip(ids, mask):
        if m:
            cur.append(i)
        elif cur:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])

out = {}
os.chdir(tempfile.mkdtemp())
for name, code in args["recipes"].items():
    scope = {"__name__": "__recipe__"}
    exec(compile(code, name, "exec"), scope)
    trainer = scope["trainer"]
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    rows = []
    for ex in trainer.train_dataset:
        # the tokens with a loss: TRL keeps them as `labels` (-100 elsewhere) or as `assistant_masks`
        mask = ex["assistant_masks"] if "assistant_masks" in ex else [label != -100 for label in ex["labels"]]
        trained = [tok.decode(s) for s in segments(ex["input_ids"], mask)]
        rows.append({"text": tok.decode(ex["input_ids"]), "trained": trained})
    out[name] = {"losses": losses, "rows": rows, "steps": trainer.state.global_step}

# 3. Hermes 3's tool_use template over the chat export (loaded with its features) and the mapped run files.
import datasets
hermes3 = PreTrainedTokenizerFast(tokenizer_object=tok.backend_tokenizer, eos_token="<|im_end|>")
hermes3.chat_template = Path(args["hermes3"]).read_text()
features = datasets.Features.from_dict(json.load(open(args["chat_features"])))
ds = datasets.load_dataset("json", data_files=args["chat"], features=features, split="train",
                           cache_dir=tempfile.mkdtemp())
out["hermes3_chat"] = [{"id": r["id"], "text": hermes3.apply_chat_template(
    r["messages"], tools=json.loads(r["tools"]), tokenize=False)} for r in ds]
ROLES = {"system": "system", "human": "user", "gpt": "assistant", "tool": "user"}
out["hermes3_hermes"] = []
for line in open(args["trajectories"]):
    row = json.loads(line)
    messages = [{"role": ROLES[t["from"]], "content": t["value"]} for t in row["conversations"]]
    out["hermes3_hermes"].append({"id": row["metadata"]["prompt_key"],
                                  "text": hermes3.apply_chat_template(messages, tools=[], tokenize=False)})
print(json.dumps(out))
"""
