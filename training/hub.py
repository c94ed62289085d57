"""--push_to_hub: the hub checked before training, final/ uploaded after it."""

from __future__ import annotations

from pathlib import Path

from accelerate import PartialState
from accelerate.utils import broadcast_object_list
from huggingface_hub import HfApi

from ema_boundary.usage import first_line
from train_config import ConfigError


class PushError(Exception):
    """The push of a complete final/ to the hub failed: one line naming the repository and the reason."""


def check_hub(repo_id: str) -> str:
    """Before training: the hub accepts the token and has (or now creates) the repository; its full id.

    On the main process only; the others learn the outcome from it (a ConfigError on every process).
    """
    error, full_id = None, repo_id
    if PartialState().is_main_process:
        try:
            api = HfApi()
            api.whoami()  # the credentials, apart from the repository: the error then says which failed
            full_id = api.create_repo(repo_id, exist_ok=True).repo_id
        # Whatever huggingface_hub raises here (offline mode, network, no or bad token, a namespace the token
        # may not write) means the same to the user: no run can be pushed, so none starts.
        except Exception as e:
            error = (f"--push_to_hub: the hub refused {repo_id}: {first_line(e)} (nothing was trained; log in "
                     "with `hf auth login` or set HF_TOKEN, or train without --push_to_hub)")
    error, full_id = broadcast_object_list([error, full_id])
    if error:
        raise ConfigError(error)
    return full_id


def push_to_hub(folder: Path, repo_id: str, message: str) -> str:
    """Upload ``folder`` to the model repository ``repo_id`` (created if missing); return the repository's URL."""
    try:
        api = HfApi()
        url = api.create_repo(repo_id, exist_ok=True)  # a bare name goes to the token's namespace
        api.upload_folder(repo_id=url.repo_id, folder_path=folder, commit_message=message)
    # Whatever huggingface_hub raises here (offline mode, network, authentication, quota) means the same to the
    # user: the push did not happen, and final/ is complete on disk for a retry.
    except Exception as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise PushError(f"pushing {folder} to the hub as {repo_id} failed: {reason} "
                        f"(final/ is complete; retry with: hf upload {repo_id} {folder})") from None
    return str(url)
