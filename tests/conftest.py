import os

# Tests never reach the hub; fail fast instead of retrying.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

# Tiny tensors: one thread avoids synchronisation overhead (and oversubscription when the
# DDP tests start extra processes).
torch.set_num_threads(1)
